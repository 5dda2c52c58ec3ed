/*
 * store_archive.c - the archive backend of sp_store.h: a .tar or a zstd
 * compressed tar (.tar.zst / .tar.zstd / .tzst) as one namespace of keys.
 *
 * Reading: keys are entry names without a leading "./" or a trailing "/".
 * stat() and list() work from an index of every entry, built lazily by one
 * pass over the archive and kept in the store.  open_read() opens the
 * archive anew and skips to the entry; scan() is one pass over all regular
 * files.  Entry names that are absolute or contain ".." are refused
 * (SP_ERR_MALFORMED) wherever they are met.  When a name occurs twice the
 * later entry wins (as with tar -x); scan() reports every entry it meets.
 *
 * Writing: entries go, in the order given, to "<path>.sp-tmp-<pid>" beside
 * the archive; finish() closes it, fsyncs it and moves it to `path` (never
 * over an existing file).  zstd compression is done here with a ZSTD_CCtx
 * using worker threads, fed by libarchive's client write callback.  Objects
 * written without a size hint are buffered (in memory up to SPILL_BYTES,
 * then in an unlinked temporary file beside the archive) because a tar
 * header carries the size before the data.
 */
#include "sp_store.h"

#include <archive.h>
#include <archive_entry.h>
#include <zstd.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READ_BLOCK (64 * 1024)
#define WRITE_BLOCK (64 * 1024)
#define SPILL_BYTES ((size_t)16 * 1024 * 1024)

/* ---------------------------------------------------------------- errors */

static sp_status_t fail(sp_error_t *err, const char *file, sp_status_t code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static sp_status_t fail(sp_error_t *err, const char *file, sp_status_t code, const char *fmt, ...)
{
    if (!err)
        return code;
    char msg[sizeof err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_error_set(err, code, SP_NO_OFFSET, "", "%s", msg);
    sp_error_set_file(err, file);
    return code;
}

static sp_status_t nomem(sp_error_t *err, const char *file)
{
    return fail(err, file, SP_ERR_NOMEM, "out of memory");
}

/* The status for a libarchive failure while reading: format trouble is
 * "malformed", system errors are I/O. */
static sp_status_t read_status(struct archive *a)
{
    int e = archive_errno(a);
    if (e == ENOMEM)
        return SP_ERR_NOMEM;
    if (e == ENOENT)
        return SP_ERR_NOT_FOUND;
    if (e == 0 || e == -1 /* ARCHIVE_ERRNO_MISC */ || e == EILSEQ /* ARCHIVE_ERRNO_FILE_FORMAT */ || e == EINVAL)
        return SP_ERR_MALFORMED;
    return SP_ERR_IO;
}

static const char *arc_msg(struct archive *a)
{
    const char *m = a ? archive_error_string(a) : NULL;
    return m ? m : "unknown libarchive error";
}

/* ----------------------------------------------------------------- names */

/*
 * Normalise an entry name: drop "." and empty components and a leading "./",
 * no trailing "/".  strict (write keys): refuse a leading "/" and an empty
 * result; lenient (entry names read, lookup keys): a leading "/" is refused
 * for entry names (abs_ok false) or ignored for lookup keys (abs_ok true).
 * ".." is always refused.  Returns a malloc'd string, or NULL with *bad set
 * (or *bad clear on out of memory).
 */
static char *normalize_name(const char *raw, bool abs_ok, bool *bad)
{
    *bad = false;
    if (raw[0] == '/' && !abs_ok) {
        *bad = true;
        return NULL;
    }
    size_t n = strlen(raw);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    const char *p = raw;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *q = p;
        while (*q && *q != '/')
            q++;
        size_t len = (size_t)(q - p);
        if (len == 1 && p[0] == '.') {
            /* skip */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            free(out);
            *bad = true;
            return NULL;
        } else {
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, len);
            o += len;
        }
        p = q;
    }
    out[o] = '\0';
    return out;
}

bool sp_is_archive_name(const char *path)
{
    static const char *const suffixes[] = {".tar", ".tar.zst", ".tar.zstd", ".tzst"};
    if (!path)
        return false;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t k = strlen(suffixes[i]);
        if (n > k && strcmp(base + n - k, suffixes[i]) == 0)
            return true;
    }
    return false;
}

static bool is_zstd_name(const char *path)
{
    static const char *const suffixes[] = {".zst", ".zstd", ".tzst"};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t k = strlen(suffixes[i]);
        if (n >= k && strcmp(path + n - k, suffixes[i]) == 0)
            return true;
    }
    return false;
}

/* ----------------------------------------------------------------- index */

enum ent_type { ENT_FILE, ENT_LINK, ENT_DIR, ENT_OTHER, ENT_IMPLICIT_DIR };

typedef struct arc_ent {
    char *name;
    int64_t size;
    int64_t mtime_ms;
    uint64_t ordinal;  /* position of the header in the archive */
    size_t data_idx;   /* the entry whose data this one reads (hard links: the target) */
    enum ent_type type;
    bool shadowed;     /* a later entry has the same name */
} arc_ent_t;

typedef struct arc_index {
    arc_ent_t *ents; /* in archive order */
    size_t n, cap;
    size_t *slots;   /* hash: index into ents, SIZE_MAX empty */
    size_t nslots;   /* power of two */
} arc_index_t;

static void index_free(arc_index_t *ix)
{
    for (size_t i = 0; i < ix->n; i++)
        free(ix->ents[i].name);
    free(ix->ents);
    free(ix->slots);
    memset(ix, 0, sizeof *ix);
}

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

/* the slot holding `name`, or the empty slot where it would go */
static size_t *index_slot(const arc_index_t *ix, const char *name)
{
    size_t mask = ix->nslots - 1;
    for (size_t i = (size_t)hash_name(name) & mask;; i = (i + 1) & mask) {
        size_t *s = &ix->slots[i];
        if (*s == SIZE_MAX || strcmp(ix->ents[*s].name, name) == 0)
            return s;
    }
}

static arc_ent_t *index_find(const arc_index_t *ix, const char *name)
{
    if (!ix->nslots)
        return NULL;
    size_t *s = index_slot(ix, name);
    return *s == SIZE_MAX ? NULL : &ix->ents[*s];
}

static bool index_grow_slots(arc_index_t *ix)
{
    size_t ns = ix->nslots ? ix->nslots * 2 : 64;
    size_t *slots = malloc(ns * sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < ns; i++)
        slots[i] = SIZE_MAX;
    free(ix->slots);
    ix->slots = slots;
    ix->nslots = ns;
    for (size_t i = 0; i < ix->n; i++)
        if (!ix->ents[i].shadowed)
            *index_slot(ix, ix->ents[i].name) = i;
    return true;
}

/* Append an entry (takes `name`); a previous entry of that name is shadowed. */
static arc_ent_t *index_add(arc_index_t *ix, char *name, enum ent_type type, int64_t size, int64_t mtime_ms,
                            uint64_t ordinal)
{
    if (ix->n == ix->cap) {
        size_t nc = ix->cap ? ix->cap * 2 : 64;
        arc_ent_t *ne = realloc(ix->ents, nc * sizeof *ne);
        if (!ne)
            return NULL;
        ix->ents = ne;
        ix->cap = nc;
    }
    if ((ix->n + 1) * 2 > ix->nslots && !index_grow_slots(ix))
        return NULL;
    size_t i = ix->n++;
    arc_ent_t *e = &ix->ents[i];
    *e = (arc_ent_t){.name = name, .size = size, .mtime_ms = mtime_ms, .ordinal = ordinal, .data_idx = i,
                     .type = type};
    size_t *slot = index_slot(ix, name);
    if (*slot != SIZE_MAX)
        ix->ents[*slot].shadowed = true;
    *slot = i;
    return e;
}

/* Record the parent directories of `name` as implicit directories. */
static bool index_add_parents(arc_index_t *ix, const char *name)
{
    for (const char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
        char *dir = strndup(name, (size_t)(p - name));
        if (!dir)
            return false;
        if (index_find(ix, dir)) {
            free(dir);
            continue;
        }
        if (!index_add(ix, dir, ENT_IMPLICIT_DIR, -1, 0, UINT64_MAX)) {
            free(dir);
            return false;
        }
    }
    return true;
}

/* ----------------------------------------------------------------- store */

typedef struct arc_store {
    char *path;
    bool create;
    arc_index_t ix;
    bool indexed;

    /* writing */
    char *tmp;
    int fd;
    struct archive *aw;
    ZSTD_CCtx *zc;
    unsigned char *zout;
    size_t zout_cap;
    bool discard;  /* callbacks drop everything (the temp file is going away) */
    bool cb_failed;
    sp_error_t cb_err;
    bool failed;
    sp_error_t fail_err;
    bool finished;
    struct sp_store_writer *cur;
} arc_store_t;

struct sp_store_reader {
    arc_store_t *as;
    struct archive *a; /* NULL once invalid */
    bool owned;        /* open_read: close_read frees it; scan: the scan owns it */
    char *key;
};

struct sp_store_writer {
    arc_store_t *as;
    char *key;
    int64_t hint;
    int64_t written;
    unsigned char *buf;
    size_t len, cap;
    int spill_fd;
};

static arc_store_t *impl(sp_store_t *s)
{
    return (arc_store_t *)s->impl;
}

/* ------------------------------------------------------------ read side */

static sp_status_t arc_open_read(arc_store_t *as, struct archive **out, sp_error_t *err)
{
    *out = NULL;
    struct archive *a = archive_read_new();
    if (!a)
        return nomem(err, as->path);
    sp_status_t st = SP_OK;
    if (archive_read_support_filter_zstd(a) < ARCHIVE_WARN || archive_read_support_format_tar(a) < ARCHIVE_WARN)
        st = fail(err, as->path, SP_ERR_IO, "cannot set up libarchive: %s", arc_msg(a));
    else if (archive_read_open_filename(a, as->path, READ_BLOCK) != ARCHIVE_OK)
        st = fail(err, as->path, read_status(a), "cannot open archive %s: %s", as->path, arc_msg(a));
    if (st != SP_OK) {
        archive_read_free(a);
        return st;
    }
    *out = a;
    return SP_OK;
}

/*
 * The next header.  *e is NULL at the end.  *name receives the normalised
 * name (malloc'd; "" for the archive's root directory entry).  Refuses
 * absolute names and names with "..".
 */
static sp_status_t arc_next(arc_store_t *as, struct archive *a, uint64_t ordinal, const char *prev,
                            struct archive_entry **e, char **name, sp_error_t *err)
{
    *e = NULL;
    *name = NULL;
    struct archive_entry *ent;
    int r = archive_read_next_header(a, &ent);
    if (r == ARCHIVE_EOF)
        return SP_OK;
    if (r < ARCHIVE_WARN) {
        if (prev)
            return fail(err, as->path, read_status(a), "archive %s: cannot read past entry \"%s\": %s", as->path,
                        prev, arc_msg(a));
        return fail(err, as->path, read_status(a), "archive %s: cannot read header #%llu: %s", as->path,
                    (unsigned long long)ordinal, arc_msg(a));
    }
    const char *raw = archive_entry_pathname(ent);
    if (!raw)
        raw = archive_entry_pathname_utf8(ent);
    if (!raw)
        return fail(err, as->path, SP_ERR_MALFORMED, "entry #%llu of archive %s has no name",
                    (unsigned long long)ordinal, as->path);
    bool bad;
    char *n = normalize_name(raw, false, &bad);
    if (!n) {
        if (bad)
            return fail(err, as->path, SP_ERR_MALFORMED,
                        "archive %s: entry \"%s\" refused: absolute names and \"..\" are not allowed", as->path,
                        raw);
        return nomem(err, as->path);
    }
    *e = ent;
    *name = n;
    return SP_OK;
}

static int64_t entry_mtime_ms(struct archive_entry *e)
{
    if (!archive_entry_mtime_is_set(e))
        return 0;
    return (int64_t)archive_entry_mtime(e) * 1000 + archive_entry_mtime_nsec(e) / 1000000;
}

/* Add one header to an index (takes `name`). */
static sp_status_t index_header(arc_store_t *as, arc_index_t *ix, struct archive_entry *e, char *name,
                                uint64_t ordinal, sp_error_t *err)
{
    int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
    int64_t mtime = entry_mtime_ms(e);
    const char *hl = archive_entry_hardlink(e);
    enum ent_type type;
    size_t data_idx = SIZE_MAX;
    if (hl && size <= 0) {
        bool bad;
        char *target = normalize_name(hl, false, &bad);
        if (!target) {
            sp_status_t st = bad ? fail(err, as->path, SP_ERR_MALFORMED,
                                        "archive %s: entry \"%s\" is a hard link to \"%s\": absolute names and "
                                        "\"..\" are not allowed",
                                        as->path, name, hl)
                                 : nomem(err, as->path);
            free(name);
            return st;
        }
        arc_ent_t *t = index_find(ix, target);
        if (!t || t->type != ENT_FILE) {
            fail(err, as->path, SP_ERR_MALFORMED,
                 "archive %s: entry \"%s\" is a hard link to \"%s\", which is not a file earlier in the archive",
                 as->path, name, target);
            free(target);
            free(name);
            return SP_ERR_MALFORMED;
        }
        free(target);
        type = ENT_FILE;
        size = t->size;
        data_idx = t->data_idx;
    } else if (hl) {
        type = ENT_FILE; /* a hard link carrying its own data (pax) */
    } else {
        switch (archive_entry_filetype(e)) {
        case AE_IFREG: type = ENT_FILE; break;
        case AE_IFDIR: type = ENT_DIR; break;
        case AE_IFLNK:
            type = ENT_LINK;
            size = archive_entry_symlink(e) ? (int64_t)strlen(archive_entry_symlink(e)) : 0;
            break;
        default: type = ENT_OTHER; break;
        }
    }
    if (!name[0]) { /* "./": the root itself */
        free(name);
        return SP_OK;
    }
    arc_ent_t *ent = index_add(ix, name, type, size, mtime, ordinal);
    if (!ent) {
        free(name);
        return nomem(err, as->path);
    }
    if (data_idx != SIZE_MAX)
        ent->data_idx = data_idx;
    if (!index_add_parents(ix, ent->name))
        return nomem(err, as->path);
    return SP_OK;
}

static sp_status_t ensure_index(arc_store_t *as, sp_error_t *err)
{
    if (as->indexed || as->create)
        return SP_OK;
    struct archive *a;
    sp_status_t st = arc_open_read(as, &a, err);
    if (st != SP_OK)
        return st;
    arc_index_t ix = {0};
    const char *prev = NULL;
    for (uint64_t ord = 0;; ord++) {
        struct archive_entry *e;
        char *name;
        st = arc_next(as, a, ord, prev, &e, &name, err);
        if (st != SP_OK || !e)
            break;
        size_t before = ix.n;
        st = index_header(as, &ix, e, name, ord, err);
        if (st != SP_OK)
            break;
        if (ix.n > before)
            prev = ix.ents[before].name;
    }
    archive_read_free(a);
    if (st != SP_OK) {
        index_free(&ix);
        return st;
    }
    as->ix = ix;
    as->indexed = true;
    return SP_OK;
}

/* A lookup key: leading "/" and "." components ignored, ".." refused. */
static sp_status_t lookup_key(arc_store_t *as, const char *key, char **out, sp_error_t *err)
{
    bool bad;
    *out = normalize_name(key ? key : "", true, &bad);
    if (*out)
        return SP_OK;
    if (bad)
        return fail(err, as->path, SP_ERR_INVALID, "archive %s: key \"%s\" contains \"..\"", as->path, key);
    return nomem(err, as->path);
}

static void fill_stat(const arc_ent_t *e, sp_store_stat_t *st)
{
    memset(st, 0, sizeof *st);
    st->exists = true;
    st->is_dir = e->type == ENT_DIR || e->type == ENT_IMPLICIT_DIR;
    st->is_symlink = e->type == ENT_LINK;
    st->size = e->type == ENT_IMPLICIT_DIR ? -1 : e->size;
    st->mtime_ms = e->mtime_ms;
}

static sp_status_t arc_stat(sp_store_t *s, const char *key, sp_store_stat_t *out, sp_error_t *err)
{
    arc_store_t *as = impl(s);
    memset(out, 0, sizeof *out);
    out->size = -1;
    sp_status_t st = ensure_index(as, err);
    if (st != SP_OK)
        return st;
    char *k;
    if ((st = lookup_key(as, key, &k, err)) != SP_OK)
        return st;
    if (!k[0]) {
        out->exists = true;
        out->is_dir = true;
    } else {
        const arc_ent_t *e = index_find(&as->ix, k);
        if (e)
            fill_stat(e, out);
    }
    free(k);
    return SP_OK;
}

static sp_status_t arc_list(sp_store_t *s, const char *prefix, sp_store_list_cb cb, void *user, sp_error_t *err)
{
    arc_store_t *as = impl(s);
    sp_status_t st = ensure_index(as, err);
    if (st != SP_OK)
        return st;
    char *p;
    if ((st = lookup_key(as, prefix, &p, err)) != SP_OK)
        return st;
    size_t plen = strlen(p);
    int rc = 0;
    for (size_t i = 0; i < as->ix.n && !rc; i++) {
        const arc_ent_t *e = &as->ix.ents[i];
        if (e->shadowed || (e->type != ENT_FILE && e->type != ENT_LINK))
            continue;
        const char *rel = e->name;
        if (plen) {
            if (strncmp(e->name, p, plen) != 0 || e->name[plen] != '/')
                continue;
            rel = e->name + plen + 1;
        }
        sp_store_entry_t ent = {.key = rel};
        fill_stat(e, &ent.st);
        rc = cb(&ent, user);
    }
    free(p);
    return (sp_status_t)rc;
}

/*
 * A reader positioned at the data of the entry with header number `ordinal`
 * (whose name must be `name`); takes `key` (for messages) on success.
 */
static sp_status_t open_at(arc_store_t *as, uint64_t ordinal, const char *name, char *key, sp_store_reader_t **out,
                           sp_error_t *err)
{
    struct archive *a;
    sp_status_t st = arc_open_read(as, &a, err);
    if (st != SP_OK)
        return st;
    for (uint64_t ord = 0;; ord++) {
        struct archive_entry *ae;
        char *n;
        st = arc_next(as, a, ord, NULL, &ae, &n, err);
        if (st == SP_OK && !ae)
            st = fail(err, as->path, SP_ERR_IO, "archive %s changed while being read: entry \"%s\" is gone",
                      as->path, key);
        if (st != SP_OK)
            break;
        if (ord == ordinal) {
            if (strcmp(n, name) != 0)
                st = fail(err, as->path, SP_ERR_IO, "archive %s changed while being read: entry \"%s\" moved",
                          as->path, key);
            free(n);
            break;
        }
        free(n);
    }
    sp_store_reader_t *r = st == SP_OK ? calloc(1, sizeof *r) : NULL;
    if (st == SP_OK && !r)
        st = nomem(err, as->path);
    if (st != SP_OK) {
        archive_read_free(a);
        return st;
    }
    r->as = as;
    r->a = a;
    r->owned = true;
    r->key = key;
    *out = r;
    return SP_OK;
}

static sp_status_t arc_open_read_op(sp_store_t *s, const char *key, sp_store_reader_t **out, sp_error_t *err)
{
    arc_store_t *as = impl(s);
    *out = NULL;
    if (as->create)
        return fail(err, as->path, SP_ERR_INVALID,
                    "archive %s is being written; its entries can be read once it is finished", as->path);
    sp_status_t st = ensure_index(as, err);
    if (st != SP_OK)
        return st;
    char *k;
    if ((st = lookup_key(as, key, &k, err)) != SP_OK)
        return st;
    const arc_ent_t *e = k[0] ? index_find(&as->ix, k) : NULL;
    if (k[0] && !e)
        st = fail(err, as->path, SP_ERR_NOT_FOUND, "archive %s has no entry \"%s\"", as->path, k);
    else if (!k[0] || e->type == ENT_DIR || e->type == ENT_IMPLICIT_DIR)
        st = fail(err, as->path, SP_ERR_INVALID, "archive %s: \"%s\" is a directory", as->path, k);
    else if (e->type == ENT_LINK)
        st = fail(err, as->path, SP_ERR_UNSUPPORTED,
                  "archive %s: entry \"%s\" is a symbolic link; links inside archives are not followed",
                  as->path, k);
    else if (e->type != ENT_FILE)
        st = fail(err, as->path, SP_ERR_UNSUPPORTED, "archive %s: entry \"%s\" is not a regular file", as->path,
                  k);
    if (st != SP_OK) {
        free(k);
        return st;
    }
    st = open_at(as, as->ix.ents[e->data_idx].ordinal, as->ix.ents[e->data_idx].name, k, out, err);
    if (st != SP_OK)
        free(k);
    return st;
}

static sp_status_t arc_read(sp_store_reader_t *r, void *buf, size_t n, size_t *got, sp_error_t *err)
{
    *got = 0;
    if (!r->a)
        return fail(err, r->as->path, SP_ERR_INVALID,
                    "archive %s: entry \"%s\" can no longer be read (the scan moved past it)", r->as->path,
                    r->key);
    if (n == 0)
        return SP_OK;
    la_ssize_t k = archive_read_data(r->a, buf, n);
    if (k < 0)
        return fail(err, r->as->path, read_status(r->a), "archive %s: cannot read entry \"%s\": %s", r->as->path,
                    r->key, arc_msg(r->a));
    *got = (size_t)k;
    return SP_OK;
}

static void arc_close_read(sp_store_reader_t *r)
{
    if (!r || !r->owned)
        return; /* a scan's reader belongs to the scan */
    if (r->a)
        archive_read_free(r->a);
    free(r->key);
    free(r);
}

static sp_status_t arc_scan(sp_store_t *s, sp_store_scan_cb cb, void *user, sp_error_t *err)
{
    arc_store_t *as = impl(s);
    if (as->create)
        return fail(err, as->path, SP_ERR_INVALID,
                    "archive %s is being written; it can be scanned once it is finished", as->path);
    struct archive *a;
    sp_status_t st = arc_open_read(as, &a, err);
    if (st != SP_OK)
        return st;
    /* build the index on the way when there is none yet */
    bool build = !as->indexed;
    arc_index_t ix = {0};
    int rc = 0;
    char *prev = NULL;
    for (uint64_t ord = 0;; ord++) {
        struct archive_entry *e;
        char *name;
        st = arc_next(as, a, ord, prev, &e, &name, err);
        if (st != SP_OK || !e)
            break;
        const char *hl = archive_entry_hardlink(e);
        int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
        sp_store_entry_t ent = {.key = name};
        ent.st.exists = true;
        ent.st.size = size;
        ent.st.mtime_ms = entry_mtime_ms(e);
        if (hl && size <= 0 && name[0]) {
            /* a hard link: its data is the target's, met earlier; read it again from there */
            const arc_ent_t *t = NULL;
            bool bad;
            char *target = normalize_name(hl, false, &bad);
            bool oom = !target && !bad;
            if (target)
                t = index_find(build ? &ix : &as->ix, target);
            free(target);
            if (!t || t->type != ENT_FILE) {
                st = fail(err, as->path, oom ? SP_ERR_NOMEM : SP_ERR_MALFORMED,
                          "archive %s: entry \"%s\" is a hard link to \"%s\", which is not a file earlier in the "
                          "archive",
                          as->path, name, hl);
                free(name);
                break;
            }
            const arc_ent_t *d = build ? &ix.ents[t->data_idx] : &as->ix.ents[t->data_idx];
            char *key = strdup(name);
            sp_store_reader_t *r = NULL;
            st = key ? open_at(as, d->ordinal, d->name, key, &r, err) : nomem(err, as->path);
            if (st != SP_OK) {
                if (key && !r)
                    free(key);
                free(name);
                break;
            }
            ent.st.size = t->size;
            rc = cb(&ent, r, user);
            arc_close_read(r);
        } else if ((hl || archive_entry_filetype(e) == AE_IFREG) && name[0]) {
            sp_store_reader_t r = {.as = as, .a = a, .owned = false, .key = name};
            rc = cb(&ent, &r, user);
        }
        free(prev);
        prev = strdup(name);
        if (build) {
            st = index_header(as, &ix, e, name, ord, err); /* takes name */
            if (st != SP_OK)
                break;
        } else {
            free(name);
        }
        if (rc)
            break;
    }
    free(prev);
    archive_read_free(a);
    if (build && st == SP_OK && !rc) {
        as->ix = ix;
        as->indexed = true;
    } else {
        index_free(&ix);
    }
    return st != SP_OK ? st : (sp_status_t)rc;
}

/* ----------------------------------------------------------- write side */

static sp_status_t write_full(arc_store_t *as, int fd, const char *what, const void *buf, size_t n,
                              sp_error_t *err)
{
    const unsigned char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            return fail(err, as->path, SP_ERR_IO, "cannot write %s: %s", what, strerror(e));
        }
        p += k;
        n -= (size_t)k;
    }
    return SP_OK;
}

static la_ssize_t cb_write(struct archive *a, void *client, const void *buf, size_t len)
{
    arc_store_t *as = client;
    if (as->discard)
        return (la_ssize_t)len;
    if (!as->zc) {
        if (write_full(as, as->fd, as->tmp, buf, len, &as->cb_err) != SP_OK)
            goto failed;
        return (la_ssize_t)len;
    }
    ZSTD_inBuffer in = {buf, len, 0};
    while (in.pos < in.size) {
        ZSTD_outBuffer out = {as->zout, as->zout_cap, 0};
        size_t r = ZSTD_compressStream2(as->zc, &out, &in, ZSTD_e_continue);
        if (ZSTD_isError(r)) {
            fail(&as->cb_err, as->path, SP_ERR_IO, "zstd compression failed: %s", ZSTD_getErrorName(r));
            goto failed;
        }
        if (write_full(as, as->fd, as->tmp, as->zout, out.pos, &as->cb_err) != SP_OK)
            goto failed;
    }
    return (la_ssize_t)len;
failed:
    as->cb_failed = true;
    archive_set_error(a, EIO, "%s", as->cb_err.message);
    return -1;
}

static int cb_close(struct archive *a, void *client)
{
    arc_store_t *as = client;
    if (as->discard || !as->zc)
        return ARCHIVE_OK;
    for (;;) {
        ZSTD_inBuffer in = {NULL, 0, 0};
        ZSTD_outBuffer out = {as->zout, as->zout_cap, 0};
        size_t left = ZSTD_compressStream2(as->zc, &out, &in, ZSTD_e_end);
        if (ZSTD_isError(left)) {
            fail(&as->cb_err, as->path, SP_ERR_IO, "zstd compression failed: %s", ZSTD_getErrorName(left));
            break;
        }
        if (write_full(as, as->fd, as->tmp, as->zout, out.pos, &as->cb_err) != SP_OK)
            break;
        if (left == 0)
            return ARCHIVE_OK;
    }
    as->cb_failed = true;
    archive_set_error(a, EIO, "%s", as->cb_err.message);
    return ARCHIVE_FATAL;
}

/* Drop the output: nothing more is written, the temp file is removed. */
static void discard_output(arc_store_t *as)
{
    as->discard = true;
    if (as->aw) {
        archive_write_free(as->aw);
        as->aw = NULL;
    }
    if (as->zc) {
        ZSTD_freeCCtx(as->zc);
        as->zc = NULL;
    }
    if (as->fd >= 0) {
        close(as->fd);
        as->fd = -1;
        unlink(as->tmp);
    }
}

/* The store can no longer produce an archive: remember why, remove the temp file. */
static sp_status_t mark_failed(arc_store_t *as, sp_status_t code, sp_error_t *err)
{
    if (!as->failed) {
        as->failed = true;
        if (err)
            as->fail_err = *err;
        else
            fail(&as->fail_err, as->path, code, "an earlier write to archive %s failed", as->path);
    }
    discard_output(as);
    return code;
}

/* A libarchive write failure: the detail from our callbacks when they failed. */
static sp_status_t write_fail(arc_store_t *as, const char *key, sp_error_t *err)
{
    sp_status_t code;
    if (as->cb_failed) {
        code = as->cb_err.code;
        if (key)
            fail(err, as->path, code, "archive %s: entry \"%s\": %s", as->path, key, as->cb_err.message);
        else
            fail(err, as->path, code, "%s", as->cb_err.message);
    } else {
        code = archive_errno(as->aw) == ENOMEM ? SP_ERR_NOMEM : SP_ERR_IO;
        if (key)
            fail(err, as->path, code, "archive %s: cannot write entry \"%s\": %s", as->path, key, arc_msg(as->aw));
        else
            fail(err, as->path, code, "cannot write archive %s: %s", as->path, arc_msg(as->aw));
    }
    return mark_failed(as, code, err);
}

static sp_status_t refuse_if_failed(arc_store_t *as, sp_error_t *err)
{
    if (!as->failed)
        return SP_OK;
    if (err) {
        *err = as->fail_err;
        return err->code;
    }
    return as->fail_err.code;
}

static sp_status_t read_only(arc_store_t *as, sp_error_t *err)
{
    if (as->create)
        return fail(err, as->path, SP_ERR_INVALID,
                    "archive %s: entries of an archive being written cannot be removed, renamed or copied",
                    as->path);
    return fail(err, as->path, SP_ERR_INVALID, "archive %s: archives are read-only; write a new one", as->path);
}

static sp_status_t write_header(arc_store_t *as, const char *key, int64_t size, sp_error_t *err)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return mark_failed(as, nomem(err, as->path), err);
    archive_entry_set_pathname(e, key);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, size);
    archive_entry_set_mtime(e, time(NULL), 0);
    archive_entry_set_uid(e, 0);
    archive_entry_set_gid(e, 0);
    int r = archive_write_header(as->aw, e);
    archive_entry_free(e);
    return r < ARCHIVE_WARN || as->cb_failed ? write_fail(as, key, err) : SP_OK;
}

static sp_status_t write_data(arc_store_t *as, const char *key, const void *buf, size_t n, sp_error_t *err)
{
    const unsigned char *p = buf;
    while (n) {
        la_ssize_t k = archive_write_data(as->aw, p, n);
        if (k <= 0 || as->cb_failed)
            return write_fail(as, key, err);
        p += k;
        n -= (size_t)k;
    }
    return SP_OK;
}

static sp_status_t arc_open_write(sp_store_t *s, const char *key, int64_t size_hint, sp_store_writer_t **out,
                                  sp_error_t *err)
{
    arc_store_t *as = impl(s);
    *out = NULL;
    if (!as->create)
        return read_only(as, err);
    sp_status_t st = refuse_if_failed(as, err);
    if (st != SP_OK)
        return st;
    if (as->finished)
        return fail(err, as->path, SP_ERR_INVALID, "archive %s is already finished", as->path);
    if (as->cur)
        return fail(err, as->path, SP_ERR_INVALID,
                    "archive %s: cannot begin entry \"%s\" while entry \"%s\" is still being written", as->path,
                    key, as->cur->key);
    if (!key || key[0] == '/')
        return fail(err, as->path, SP_ERR_INVALID, "archive %s: entry name \"%s\" must be relative", as->path,
                    key ? key : "(null)");
    bool bad;
    char *k = normalize_name(key, false, &bad);
    if (!k)
        return bad ? fail(err, as->path, SP_ERR_INVALID, "archive %s: entry name \"%s\" contains \"..\"",
                          as->path, key)
                   : nomem(err, as->path);
    if (!k[0]) {
        free(k);
        return fail(err, as->path, SP_ERR_INVALID, "archive %s: empty entry name \"%s\"", as->path, key);
    }
    const arc_ent_t *dup = index_find(&as->ix, k);
    if (dup) {
        st = fail(err, as->path, SP_ERR_INVALID,
                  dup->type == ENT_IMPLICIT_DIR ? "archive %s: \"%s\" is a directory of entries already written"
                                                : "archive %s: \"%s\" was already written",
                  as->path, k);
        free(k);
        return st;
    }
    for (char *p = strchr(k, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        const arc_ent_t *e = index_find(&as->ix, k);
        *p = '/';
        if (e && e->type != ENT_IMPLICIT_DIR) {
            st = fail(err, as->path, SP_ERR_INVALID, "archive %s: cannot write \"%s\": \"%.*s\" is a file",
                      as->path, k, (int)(p - k), k);
            free(k);
            return st;
        }
    }
    sp_store_writer_t *w = calloc(1, sizeof *w);
    if (!w) {
        free(k);
        return nomem(err, as->path);
    }
    w->as = as;
    w->key = k;
    w->hint = size_hint < 0 ? -1 : size_hint;
    w->spill_fd = -1;
    if (w->hint >= 0 && (st = write_header(as, k, w->hint, err)) != SP_OK) {
        free(k);
        free(w);
        return st;
    }
    as->cur = w;
    *out = w;
    return SP_OK;
}

static void writer_free(sp_store_writer_t *w)
{
    if (w->as->cur == w)
        w->as->cur = NULL;
    if (w->spill_fd >= 0)
        close(w->spill_fd);
    free(w->buf);
    free(w->key);
    free(w);
}

/* Move the buffered bytes to an unlinked temporary file beside the archive. */
static sp_status_t spill(sp_store_writer_t *w, sp_error_t *err)
{
    arc_store_t *as = w->as;
    size_t n = strlen(as->path);
    char *name = malloc(n + 32);
    if (!name)
        return nomem(err, as->path);
    snprintf(name, n + 32, "%s.sp-spill-XXXXXX", as->path);
    int fd = mkstemp(name);
    if (fd < 0) {
        int e = errno;
        sp_status_t st = fail(err, as->path, SP_ERR_IO, "archive %s: entry \"%s\": cannot create %s: %s", as->path,
                              w->key, name, strerror(e));
        free(name);
        return st;
    }
    unlink(name);
    free(name);
    w->spill_fd = fd;
    sp_status_t st = write_full(as, fd, "the spill file", w->buf, w->len, err);
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    return st;
}

static sp_status_t arc_write(sp_store_writer_t *w, const void *buf, size_t n, sp_error_t *err)
{
    arc_store_t *as = w->as;
    sp_status_t st = refuse_if_failed(as, err);
    if (st != SP_OK || n == 0)
        return st;
    if (w->hint >= 0) {
        if ((uint64_t)w->written + n > (uint64_t)w->hint) {
            fail(err, as->path, SP_ERR_INVALID,
                 "archive %s: entry \"%s\" gets more than the %lld bytes announced in its header", as->path,
                 w->key, (long long)w->hint);
            return mark_failed(as, SP_ERR_INVALID, err);
        }
        if ((st = write_data(as, w->key, buf, n, err)) != SP_OK)
            return st;
        w->written += (int64_t)n;
        return SP_OK;
    }
    if (w->spill_fd < 0 && w->len + n > SPILL_BYTES && (st = spill(w, err)) != SP_OK)
        return st;
    if (w->spill_fd >= 0) {
        if ((st = write_full(as, w->spill_fd, "the spill file", buf, n, err)) != SP_OK)
            return st;
    } else {
        if (w->cap - w->len < n) {
            size_t nc = w->cap ? w->cap : 64 * 1024;
            while (nc - w->len < n)
                nc *= 2;
            unsigned char *nb = realloc(w->buf, nc);
            if (!nb)
                return nomem(err, as->path);
            w->buf = nb;
            w->cap = nc;
        }
        memcpy(w->buf + w->len, buf, n);
        w->len += n;
    }
    w->written += (int64_t)n;
    return SP_OK;
}

static sp_status_t commit_buffered(sp_store_writer_t *w, sp_error_t *err)
{
    arc_store_t *as = w->as;
    sp_status_t st = write_header(as, w->key, w->written, err);
    if (st != SP_OK)
        return st;
    if (w->spill_fd < 0)
        return write_data(as, w->key, w->buf, w->len, err);
    if (lseek(w->spill_fd, 0, SEEK_SET) != 0) {
        int e = errno;
        fail(err, as->path, SP_ERR_IO, "archive %s: entry \"%s\": cannot rewind the spill file: %s", as->path,
             w->key, strerror(e));
        return mark_failed(as, SP_ERR_IO, err);
    }
    unsigned char *chunk = malloc(WRITE_BLOCK);
    if (!chunk)
        return mark_failed(as, nomem(err, as->path), err);
    int64_t left = w->written;
    while (left > 0 && st == SP_OK) {
        ssize_t k = read(w->spill_fd, chunk, left < WRITE_BLOCK ? (size_t)left : WRITE_BLOCK);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            fail(err, as->path, SP_ERR_IO, "archive %s: entry \"%s\": cannot read back the spill file: %s",
                 as->path, w->key, strerror(e));
            st = mark_failed(as, SP_ERR_IO, err);
            break;
        }
        st = write_data(as, w->key, chunk, (size_t)k, err);
        left -= k;
    }
    free(chunk);
    return st;
}

static sp_status_t arc_commit(sp_store_writer_t *w, sp_error_t *err)
{
    arc_store_t *as = w->as;
    sp_status_t st = refuse_if_failed(as, err);
    if (st == SP_OK && w->hint >= 0 && w->written != w->hint) {
        fail(err, as->path, SP_ERR_INVALID, "archive %s: entry \"%s\" got %lld bytes, %lld were announced",
             as->path, w->key, (long long)w->written, (long long)w->hint);
        st = mark_failed(as, SP_ERR_INVALID, err);
    }
    if (st == SP_OK && w->hint < 0)
        st = commit_buffered(w, err);
    if (st == SP_OK && (archive_write_finish_entry(as->aw) < ARCHIVE_WARN || as->cb_failed))
        st = write_fail(as, w->key, err);
    if (st == SP_OK) {
        arc_ent_t *e = index_add(&as->ix, w->key, ENT_FILE, w->written, (int64_t)time(NULL) * 1000, as->ix.n);
        if (e) {
            w->key = NULL; /* the index owns it now */
            if (!index_add_parents(&as->ix, e->name))
                st = nomem(err, as->path); /* the entry is written; only stat/list of parents suffer */
        } else {
            st = nomem(err, as->path);
        }
    }
    writer_free(w);
    return st;
}

static void arc_abort(sp_store_writer_t *w)
{
    arc_store_t *as = w->as;
    if (w->hint >= 0 && !as->failed) {
        sp_error_t e;
        sp_error_clear(&e);
        fail(&e, as->path, SP_ERR_INVALID,
             "archive %s: entry \"%s\" was abandoned after its header was written; the archive cannot be finished",
             as->path, w->key);
        mark_failed(as, SP_ERR_INVALID, &e);
    }
    writer_free(w);
}

static sp_status_t arc_remove(sp_store_t *s, const char *key, sp_error_t *err)
{
    (void)key;
    return read_only(impl(s), err);
}

static sp_status_t arc_rename(sp_store_t *s, const char *from, const char *to, sp_error_t *err)
{
    (void)from;
    (void)to;
    return read_only(impl(s), err);
}

static void fsync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir)
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

static sp_status_t arc_finish(sp_store_t *s, sp_error_t *err)
{
    arc_store_t *as = impl(s);
    if (!as->create || as->finished)
        return SP_OK;
    if (as->cur)
        return fail(err, as->path, SP_ERR_INVALID, "archive %s: entry \"%s\" is still being written", as->path,
                    as->cur->key);
    sp_status_t st = refuse_if_failed(as, err);
    if (st != SP_OK) {
        discard_output(as);
        return st;
    }
    /* libarchive 3.6 ignores what the close callback returns: check our own flag too */
    if (archive_write_close(as->aw) < ARCHIVE_WARN || as->cb_failed)
        return write_fail(as, NULL, err);
    archive_write_free(as->aw);
    as->aw = NULL;
    if (fsync(as->fd) != 0) {
        int e = errno;
        fail(err, as->path, SP_ERR_IO, "cannot flush %s: %s", as->tmp, strerror(e));
        return mark_failed(as, SP_ERR_IO, err);
    }
    int fd = as->fd;
    as->fd = -1;
    if (close(fd) != 0) {
        int e = errno;
        unlink(as->tmp);
        fail(err, as->path, SP_ERR_IO, "cannot close %s: %s", as->tmp, strerror(e));
        return mark_failed(as, SP_ERR_IO, err);
    }
    /* link() never replaces a file that appeared meanwhile; rename() is the
     * fallback for file systems without hard links */
    struct stat sb;
    if (link(as->tmp, as->path) == 0) {
        unlink(as->tmp);
    } else if (errno == EEXIST || lstat(as->path, &sb) == 0) {
        unlink(as->tmp);
        fail(err, as->path, SP_ERR_REFUSED, "%s appeared while the archive was being written; not replacing it",
             as->path);
        return mark_failed(as, SP_ERR_REFUSED, err);
    } else if (rename(as->tmp, as->path) != 0) {
        int e = errno;
        unlink(as->tmp);
        fail(err, as->path, SP_ERR_IO, "cannot move %s to %s: %s", as->tmp, as->path, strerror(e));
        return mark_failed(as, SP_ERR_IO, err);
    }
    fsync_dir_of(as->path);
    ZSTD_freeCCtx(as->zc);
    as->zc = NULL;
    as->finished = true;
    return SP_OK;
}

static void arc_close(sp_store_t *s)
{
    if (!s)
        return;
    arc_store_t *as = impl(s);
    if (as) {
        if (as->create && !as->finished)
            discard_output(as);
        index_free(&as->ix);
        free(as->zout);
        free(as->tmp);
        free(as->path);
        free(as);
    }
    free(s->location);
    free(s);
}

static const sp_store_ops_t archive_ops = {
    .name = "archive",
    .stat = arc_stat,
    .list = arc_list,
    .open_read = arc_open_read_op,
    .read = arc_read,
    .close_read = arc_close_read,
    .open_write = arc_open_write,
    .write = arc_write,
    .commit = arc_commit,
    .abort = arc_abort,
    .remove = arc_remove,
    .remove_dir = NULL,
    .rename = arc_rename,
    .copy = arc_rename, /* same refusal for a read store; an archive being written has no copy */
    .scan = arc_scan,
    .finish = arc_finish,
    .close = arc_close,
};

/* ------------------------------------------------------------------ open */

static sp_status_t setup_writer(arc_store_t *as, int threads, sp_error_t *err)
{
    size_t n = strlen(as->path);
    as->tmp = malloc(n + 32);
    if (!as->tmp)
        return nomem(err, as->path);
    snprintf(as->tmp, n + 32, "%s.sp-tmp-%ld", as->path, (long)getpid());
    struct stat sb;
    if (lstat(as->path, &sb) == 0)
        return fail(err, as->path, SP_ERR_REFUSED, "%s already exists; not overwriting it", as->path);
    as->fd = open(as->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (as->fd < 0) {
        int e = errno;
        return fail(err, as->path, e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO, "cannot create %s: %s", as->tmp,
                    strerror(e));
    }
    if (is_zstd_name(as->path)) {
        as->zc = ZSTD_createCCtx();
        as->zout_cap = ZSTD_CStreamOutSize();
        as->zout = malloc(as->zout_cap);
        if (!as->zc || !as->zout)
            return nomem(err, as->path);
        if (threads <= 0) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            threads = cpus > 0 ? (int)(cpus > 256 ? 256 : cpus) : 1;
        }
        ZSTD_bounds b = ZSTD_cParam_getBounds(ZSTD_c_nbWorkers);
        if (!ZSTD_isError(b.error) && threads > b.upperBound)
            threads = b.upperBound;
        size_t r = ZSTD_CCtx_setParameter(as->zc, ZSTD_c_compressionLevel, 3);
        if (!ZSTD_isError(r))
            r = ZSTD_CCtx_setParameter(as->zc, ZSTD_c_checksumFlag, 1);
        if (ZSTD_isError(r))
            return fail(err, as->path, SP_ERR_IO, "cannot set up zstd: %s", ZSTD_getErrorName(r));
        /* a libzstd built without threads refuses workers: compress in this thread then */
        (void)ZSTD_CCtx_setParameter(as->zc, ZSTD_c_nbWorkers, threads);
    }
    as->aw = archive_write_new();
    if (!as->aw)
        return nomem(err, as->path);
    if (archive_write_set_format_pax_restricted(as->aw) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(as->aw, WRITE_BLOCK) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(as->aw, 1) != ARCHIVE_OK ||
        archive_write_open2(as->aw, as, NULL, cb_write, cb_close, NULL) != ARCHIVE_OK)
        return write_fail(as, NULL, err);
    return SP_OK;
}

sp_status_t sp_store_open_archive(const char *path, bool create, int threads, sp_store_t **out, sp_error_t *err)
{
    *out = NULL;
    if (!path || !path[0])
        return fail(err, "", SP_ERR_INVALID, "no archive path given");
    sp_store_t *s = calloc(1, sizeof *s);
    arc_store_t *as = calloc(1, sizeof *as);
    if (s) {
        s->ops = &archive_ops;
        s->impl = as;
        s->writable = create;
        s->location = strdup(path);
    }
    if (!s || !as || !s->location || !(as->path = strdup(path))) {
        if (s)
            free(s->location);
        free(s);
        free(as);
        return nomem(err, path);
    }
    as->create = create;
    as->fd = -1;
    sp_status_t st = SP_OK;
    if (create) {
        st = setup_writer(as, threads, err);
    } else {
        struct stat sb;
        if (stat(path, &sb) != 0) {
            int e = errno;
            st = fail(err, path, e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO, "cannot open archive %s: %s", path,
                      strerror(e));
        } else if (S_ISDIR(sb.st_mode)) {
            st = fail(err, path, SP_ERR_IO, "%s is a directory, not an archive", path);
        }
    }
    if (st != SP_OK) {
        as->failed = true; /* nothing to finish */
        arc_close(s);
        return st;
    }
    *out = s;
    return SP_OK;
}
