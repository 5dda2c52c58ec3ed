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
 * the archive; finish() closes it, fsyncs it, moves it to `path` (never
 * over an existing file) and checks it (see "checking what was written").
 * Once finished, the store reads the new archive from the writer's own
 * index (stat, list, open_read, scan), without a pass to build one.
 * Objects written without a size hint are buffered (in memory up to
 * SPILL_BYTES, then in an unlinked temporary file beside the archive)
 * because a tar header carries the size before the data.
 *
 * The write pipeline: write() copies the caller's bytes into a queue of
 * CHUNKS slots of CHUNK_BYTES and returns; one writer thread takes the
 * slots in order through libarchive (tar headers and blocks), our
 * ZSTD_CCtx (level 3 with one zstd worker per core, as `zstd -T0`) and
 * write()s of OUT_BYTES, and starts the kernel's writeback of each WRITEBACK_BYTES
 * written (sync_file_range), so the caller reads the next source file while
 * the last one is compressed and written, and the final fsync has little
 * left to wait for.  An error of the writer thread is reported by the next
 * call on the store and by finish() at the latest (never lost: finish
 * fails, and no archive appears under `path`).
 */
#define _GNU_SOURCE /* sync_file_range */
#include "sp_store.h"

#include <archive.h>
#include <archive_entry.h>
#include <zstd.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define READ_BLOCK (64 * 1024)
#define WRITE_BLOCK (64 * 1024)                  /* libarchive hands the writer this much at a time */
#define SPILL_BYTES ((size_t)16 * 1024 * 1024)
/* Buffers stay small enough for a core's cache: a 1 MiB output buffer made the copy into the page cache
 * three to four times as expensive (measured) as one of 128 KiB. */
#define CHUNK_BYTES ((size_t)256 * 1024)         /* one slot of the write queue */
#define CHUNKS 32                                /* slots: the caller reads up to 8 MiB ahead of the writer */
#define OUT_BYTES ((size_t)128 * 1024)           /* compressed output gathered for one write() */
#define WRITEBACK_BYTES ((uint64_t)16 * 1024 * 1024) /* start writeback of the archive every 16 MiB */
#define PAX_MAX ((size_t)1024 * 1024)            /* a pax extended header larger than this is not ours */

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

/* One slot of the write queue: an entry's header, data, the end of the entry, or any run of these. */
typedef struct wslot {
    char *hdr_key;       /* non-NULL: begin this entry (header) before the data */
    int64_t hdr_size;
    unsigned char *data; /* CHUNK_BYTES, allocated on first use */
    size_t len;
    bool end;            /* finish the entry after the data */
} wslot_t;

/* An entry found by the tar scanner. */
typedef struct tfound {
    char *name;
    int64_t size;
} tfound_t;

/*
 * A tar stream scanner: fed the bytes of a tar stream in pieces, it reads
 * the headers (ustar fields, pax "path" and "size" records, header
 * checksums) and steps over the data without looking at it, and records
 * the regular entries it finds.  Used on the stream libarchive produces
 * and on a finished .tar on disk (see "checking what was written").
 */
typedef struct tscan {
    enum { TS_HEADER, TS_PAX, TS_SKIP } state;
    unsigned char blk[512];
    size_t blen;
    uint64_t skip;      /* TS_SKIP: bytes to pass */
    uint64_t pad;       /* TS_PAX: padding after the pax records */
    char *pax;          /* TS_PAX: the records being gathered */
    size_t pax_len, pax_want;
    char *pax_path;     /* from the last pax header, for the next entry */
    int64_t pax_size;   /* -1: none */
    int zeros;          /* end-of-archive blocks seen (2 = ended) */
    uint64_t offset;    /* bytes of the stream consumed */
    bool bad;
    char why[200];
    tfound_t *found;
    size_t n_found, cap_found;
} tscan_t;

typedef struct arc_store {
    char *path;
    bool create;
    arc_index_t ix;
    bool indexed;

    /* writing (the fields below `cur` to `out_tail` belong to the writer thread while it runs) */
    char *tmp;
    int fd;
    struct archive *aw;
    ZSTD_CCtx *zc;
    bool zstd;     /* the archive is zstd compressed (zc is freed once finished) */
    unsigned char *zout;
    size_t zout_cap, zout_len;
    bool discard;  /* callbacks drop everything (the temp file is going away) */
    bool cb_failed;
    sp_error_t cb_err;
    bool failed;
    sp_error_t fail_err;
    bool finished;
    struct sp_store_writer *cur;
    uint64_t headers;   /* entries committed: the next entry's header number */
    char *t_key;        /* the entry the writer thread is writing, for messages */
    tscan_t ts;         /* the tar stream handed to the compressor / the file */
    uint64_t out_bytes; /* bytes written to the file */
    uint64_t wb_from;   /* writeback started up to here */
    unsigned char out_tail[64];
    size_t out_tail_len;

    /* the write queue (see the pipeline above); mu guards q_*, t_failed and t_err */
    pthread_t thread;
    bool thread_on;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_free;
    bool sync_init;
    wslot_t slots[CHUNKS];
    size_t q_head, q_len; /* published slots: slots[q_head .. q_head + q_len) (mod CHUNKS) */
    bool q_stop;          /* the thread ends once the queue is empty */
    bool q_drop;          /* ... and drops what is left */
    wslot_t *fill;        /* the slot the caller is filling (not yet published), or NULL */
    bool t_failed;
    sp_error_t t_err;
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
    if (as->create && !as->finished)
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
    if (as->create && !as->finished)
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

/* ------------------------------------------------------------ tar scanner */

static void ts_init(tscan_t *t)
{
    memset(t, 0, sizeof *t);
    t->pax_size = -1;
}

static void ts_free(tscan_t *t)
{
    for (size_t i = 0; i < t->n_found; i++)
        free(t->found[i].name);
    free(t->found);
    free(t->pax);
    free(t->pax_path);
    ts_init(t);
}

static void ts_bad(tscan_t *t, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void ts_bad(tscan_t *t, const char *fmt, ...)
{
    if (t->bad)
        return;
    t->bad = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->why, sizeof t->why, fmt, ap);
    va_end(ap);
}

/* A numeric header field: octal digits padded with spaces / NULs, or base-256 (first byte 0x80). */
static bool ts_number(const unsigned char *f, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return false;
        for (size_t i = 1; i < n; i++) {
            if (v >> 55)
                return false;
            v = v << 8 | f[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0, digits = 0;
    while (i < n && f[i] == ' ')
        i++;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (v >> 60)
            return false;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return false;
    *out = v;
    return digits > 0;
}

/* The records of a pax extended header ("LEN key=value\n"...): path and size apply to the next entry. */
static void ts_pax_done(tscan_t *t)
{
    size_t i = 0;
    while (i < t->pax_len && !t->bad) {
        size_t len = 0, j = i;
        while (j < t->pax_len && t->pax[j] >= '0' && t->pax[j] <= '9' && len <= t->pax_len)
            len = len * 10 + (size_t)(t->pax[j++] - '0');
        if (j == i || j >= t->pax_len || t->pax[j] != ' ' || len < j - i + 3 || len > t->pax_len - i ||
            t->pax[i + len - 1] != '\n') {
            ts_bad(t, "a malformed pax record at byte %llu", (unsigned long long)(t->offset - t->pax_len + i));
            return;
        }
        const char *kv = t->pax + j + 1;
        size_t kvlen = i + len - 1 - (j + 1);
        const char *eq = memchr(kv, '=', kvlen);
        if (!eq) {
            ts_bad(t, "a pax record without '=' at byte %llu", (unsigned long long)(t->offset - t->pax_len + i));
            return;
        }
        size_t klen = (size_t)(eq - kv), vlen = kvlen - klen - 1;
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            free(t->pax_path);
            if (!(t->pax_path = strndup(eq + 1, vlen)))
                ts_bad(t, "out of memory");
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            int64_t v = 0;
            size_t d = 0;
            for (; d < vlen && eq[1 + d] >= '0' && eq[1 + d] <= '9' && v < INT64_MAX / 10 - 9; d++)
                v = v * 10 + (eq[1 + d] - '0');
            if (!d || d != vlen)
                ts_bad(t, "a bad pax size record");
            t->pax_size = v;
        }
        i += len;
    }
}

static void ts_found(tscan_t *t, char *name, int64_t size)
{
    if (!name) {
        ts_bad(t, "out of memory");
        return;
    }
    if (t->n_found == t->cap_found) {
        size_t nc = t->cap_found ? t->cap_found * 2 : 64;
        tfound_t *nf = realloc(t->found, nc * sizeof *nf);
        if (!nf) {
            free(name);
            ts_bad(t, "out of memory");
            return;
        }
        t->found = nf;
        t->cap_found = nc;
    }
    t->found[t->n_found++] = (tfound_t){name, size};
}

/* One 512-byte header block (t->offset is just past it). */
static void ts_block(tscan_t *t)
{
    const unsigned char *b = t->blk;
    unsigned long long at = (unsigned long long)(t->offset - 512);
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
        zero = b[i] == 0;
    if (zero) {
        t->zeros += t->zeros < 2; /* more zero blocks after the marker: padding */
        return;
    }
    if (t->zeros == 2) {
        ts_bad(t, "data after the end-of-archive marker, at byte %llu", at);
        return;
    }
    if (t->zeros) {
        ts_bad(t, "a header after a zero block, at byte %llu", at);
        return;
    }
    uint64_t sum = 0, want, size;
    for (size_t i = 0; i < 512; i++)
        sum += i >= 148 && i < 156 ? (uint64_t)' ' : b[i];
    if (!ts_number(b + 148, 8, &want) || want != sum || memcmp(b + 257, "ustar", 5) != 0) {
        ts_bad(t, "no valid ustar header at byte %llu", at);
        return;
    }
    if (!ts_number(b + 124, 12, &size) || size > (uint64_t)INT64_MAX - 512) {
        ts_bad(t, "a bad size field in the header at byte %llu", at);
        return;
    }
    uint64_t pad = (512 - size % 512) % 512;
    switch (b[156]) {
    case 'x':
        if (size > PAX_MAX) {
            ts_bad(t, "a pax header of %llu bytes at byte %llu", (unsigned long long)size, at);
            return;
        }
        if (!t->pax || t->pax_want < size) {
            char *np = realloc(t->pax, (size_t)size + 1);
            if (!np) {
                ts_bad(t, "out of memory");
                return;
            }
            t->pax = np;
        }
        t->pax_want = (size_t)size;
        t->pax_len = 0;
        t->pad = pad;
        if (size) {
            t->state = TS_PAX;
        } else {
            t->skip = pad;
            t->state = pad ? TS_SKIP : TS_HEADER;
        }
        return;
    case 'g':
        t->skip = size + pad;
        t->state = t->skip ? TS_SKIP : TS_HEADER;
        return;
    case '0':
    case '\0': {
        char *name;
        if (t->pax_path) {
            name = t->pax_path;
            t->pax_path = NULL;
        } else {
            size_t pl = strnlen((const char *)b + 345, 155), nl = strnlen((const char *)b, 100);
            name = malloc(pl + nl + 2);
            if (name) {
                memcpy(name, b + 345, pl);
                if (pl)
                    name[pl++] = '/';
                memcpy(name + pl, b, nl);
                name[pl + nl] = '\0';
            }
        }
        if (t->pax_size >= 0) {
            size = (uint64_t)t->pax_size;
            pad = (512 - size % 512) % 512;
        }
        t->pax_size = -1;
        ts_found(t, name, (int64_t)size);
        t->skip = size + pad;
        t->state = t->skip ? TS_SKIP : TS_HEADER;
        return;
    }
    default:
        ts_bad(t, "an entry of type '%c' at byte %llu", b[156] >= 32 && b[156] < 127 ? b[156] : '?', at);
        return;
    }
}

/* More of the stream.  Data is stepped over without being read (a mapped file is touched only at headers). */
static void ts_feed(tscan_t *t, const unsigned char *p, size_t n)
{
    while (n && !t->bad) {
        size_t k;
        if (t->state == TS_SKIP) {
            k = (uint64_t)n < t->skip ? n : (size_t)t->skip;
            t->skip -= k;
            if (!t->skip)
                t->state = TS_HEADER;
            t->offset += k;
        } else if (t->state == TS_PAX) {
            k = n < t->pax_want - t->pax_len ? n : t->pax_want - t->pax_len;
            memcpy(t->pax + t->pax_len, p, k);
            t->pax_len += k;
            t->offset += k;
            if (t->pax_len == t->pax_want) {
                ts_pax_done(t);
                t->skip = t->pad;
                t->state = t->skip ? TS_SKIP : TS_HEADER;
            }
        } else {
            k = n < 512 - t->blen ? n : 512 - t->blen;
            memcpy(t->blk + t->blen, p, k);
            t->blen += k;
            t->offset += k;
            if (t->blen == 512) {
                t->blen = 0;
                ts_block(t);
            }
        }
        p += k;
        n -= k;
    }
}

/*
 * Whether the stream scanned was a whole tar archive holding exactly the
 * regular entries of the index, in order, with their sizes; *why says
 * what differs.
 */
static bool ts_matches(tscan_t *t, const arc_index_t *ix, char *why, size_t whysz)
{
    if (t->bad) {
        snprintf(why, whysz, "%s", t->why);
        return false;
    }
    if (t->zeros != 2 || t->state != TS_HEADER || t->blen) {
        snprintf(why, whysz, "it ends at byte %llu %s", (unsigned long long)t->offset,
                 t->zeros ? "inside the end-of-archive marker" : "without the end-of-archive marker");
        return false;
    }
    size_t k = 0;
    for (size_t i = 0; i < ix->n; i++) {
        const arc_ent_t *e = &ix->ents[i];
        if (e->type != ENT_FILE || e->shadowed)
            continue;
        if (k >= t->n_found) {
            snprintf(why, whysz, "entry \"%s\" is missing (%zu entries found)", e->name, t->n_found);
            return false;
        }
        const tfound_t *f = &t->found[k++];
        if (strcmp(f->name, e->name) != 0 || f->size != e->size) {
            snprintf(why, whysz, "entry #%zu is \"%.200s\" of %lld bytes, expected \"%s\" of %lld bytes", k,
                     f->name, (long long)f->size, e->name, (long long)e->size);
            return false;
        }
    }
    if (k != t->n_found) {
        snprintf(why, whysz, "%zu entries more than were written", t->n_found - k);
        return false;
    }
    return true;
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

/* Bytes of the archive file: written, counted, the last ones kept, and writeback started every
 * WRITEBACK_BYTES so that it runs while the rest is compressed (finish()'s fsync is what makes the
 * archive durable; this only moves the work earlier). */
static sp_status_t out_write(arc_store_t *as, const void *buf, size_t n, sp_error_t *err)
{
    sp_status_t st = write_full(as, as->fd, as->tmp, buf, n, err);
    if (st != SP_OK)
        return st;
    as->out_bytes += n;
    const size_t keep = sizeof as->out_tail;
    if (n >= keep) {
        memcpy(as->out_tail, (const unsigned char *)buf + n - keep, keep);
        as->out_tail_len = keep;
    } else {
        size_t old = as->out_tail_len + n > keep ? keep - n : as->out_tail_len;
        memmove(as->out_tail, as->out_tail + as->out_tail_len - old, old);
        memcpy(as->out_tail + old, buf, n);
        as->out_tail_len = old + n;
    }
#if defined(SYNC_FILE_RANGE_WRITE)
    if (as->out_bytes - as->wb_from >= WRITEBACK_BYTES) {
        /* whole MiBs only: a page still being filled is not written twice */
        uint64_t to = as->out_bytes & ~(uint64_t)(1024 * 1024 - 1);
        (void)sync_file_range(as->fd, (off_t)as->wb_from, (off_t)(to - as->wb_from), SYNC_FILE_RANGE_WRITE);
        as->wb_from = to;
    }
#endif
    return SP_OK;
}

static sp_status_t zout_flush(arc_store_t *as, sp_error_t *err)
{
    size_t n = as->zout_len;
    as->zout_len = 0;
    return n ? out_write(as, as->zout, n, err) : SP_OK;
}

/* libarchive's output: the tar stream, scanned, then compressed (or written as it is). */
static la_ssize_t cb_write(struct archive *a, void *client, const void *buf, size_t len)
{
    arc_store_t *as = client;
    if (as->discard)
        return (la_ssize_t)len;
    ts_feed(&as->ts, buf, len);
    if (!as->zc) {
        if (out_write(as, buf, len, &as->cb_err) != SP_OK)
            goto failed;
        return (la_ssize_t)len;
    }
    ZSTD_inBuffer in = {buf, len, 0};
    while (in.pos < in.size) {
        ZSTD_outBuffer out = {as->zout, as->zout_cap, as->zout_len};
        size_t r = ZSTD_compressStream2(as->zc, &out, &in, ZSTD_e_continue);
        as->zout_len = out.pos;
        if (ZSTD_isError(r)) {
            fail(&as->cb_err, as->path, SP_ERR_IO, "zstd compression failed: %s", ZSTD_getErrorName(r));
            goto failed;
        }
        /* one write() per OUT_BYTES, with room for zstd's next output always left */
        if (as->zout_cap - as->zout_len < ZSTD_CStreamOutSize() && zout_flush(as, &as->cb_err) != SP_OK)
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
        ZSTD_outBuffer out = {as->zout, as->zout_cap, as->zout_len};
        size_t left = ZSTD_compressStream2(as->zc, &out, &in, ZSTD_e_end);
        as->zout_len = out.pos;
        if (ZSTD_isError(left)) {
            fail(&as->cb_err, as->path, SP_ERR_IO, "zstd compression failed: %s", ZSTD_getErrorName(left));
            break;
        }
        if (zout_flush(as, &as->cb_err) != SP_OK)
            break;
        if (left == 0)
            return ARCHIVE_OK;
    }
    as->cb_failed = true;
    archive_set_error(a, EIO, "%s", as->cb_err.message);
    return ARCHIVE_FATAL;
}

/* ------------------------------------------------------------ the write queue */

static void slot_reset(wslot_t *sl)
{
    free(sl->hdr_key);
    sl->hdr_key = NULL;
    sl->len = 0;
    sl->end = false;
}

/* A libarchive write failure as an error (no side effects): the detail from our callbacks when they failed. */
static sp_status_t describe_write_fail(arc_store_t *as, const char *key, sp_error_t *err)
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
    return code;
}

/* One slot through libarchive (the writer thread, or the caller when there is none). */
static sp_status_t run_slot(arc_store_t *as, wslot_t *sl, sp_error_t *err)
{
    if (sl->hdr_key) {
        free(as->t_key);
        as->t_key = sl->hdr_key;
        sl->hdr_key = NULL;
        struct archive_entry *e = archive_entry_new();
        if (!e)
            return nomem(err, as->path);
        archive_entry_set_pathname(e, as->t_key);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, sl->hdr_size);
        archive_entry_set_mtime(e, time(NULL), 0);
        archive_entry_set_uid(e, 0);
        archive_entry_set_gid(e, 0);
        int r = archive_write_header(as->aw, e);
        archive_entry_free(e);
        if (r < ARCHIVE_WARN || as->cb_failed)
            return describe_write_fail(as, as->t_key, err);
    }
    const unsigned char *p = sl->data;
    size_t n = sl->len;
    while (n) {
        la_ssize_t k = archive_write_data(as->aw, p, n);
        if (k <= 0 || as->cb_failed)
            return describe_write_fail(as, as->t_key, err);
        p += k;
        n -= (size_t)k;
    }
    if (sl->end && (archive_write_finish_entry(as->aw) < ARCHIVE_WARN || as->cb_failed))
        return describe_write_fail(as, as->t_key, err);
    return SP_OK;
}

static void *writer_main(void *arg)
{
    arc_store_t *as = arg;
    pthread_mutex_lock(&as->mu);
    for (;;) {
        while (!as->q_len && !as->q_stop)
            pthread_cond_wait(&as->cv_work, &as->mu);
        if (!as->q_len)
            break;
        wslot_t *sl = &as->slots[as->q_head];
        bool skip = as->t_failed || as->q_drop; /* after a failure the queue is only drained */
        pthread_mutex_unlock(&as->mu);
        sp_error_t e;
        sp_error_clear(&e);
        sp_status_t st = skip ? SP_OK : run_slot(as, sl, &e);
        slot_reset(sl);
        pthread_mutex_lock(&as->mu);
        if (st != SP_OK && !as->t_failed) {
            as->t_failed = true;
            as->t_err = e;
        }
        as->q_head = (as->q_head + 1) % CHUNKS;
        as->q_len--;
        pthread_cond_signal(&as->cv_free);
    }
    pthread_mutex_unlock(&as->mu);
    return NULL;
}

/* End the writer thread: after it wrote what is queued, or (drop) at once. */
static void q_stop(arc_store_t *as, bool drop)
{
    if (!as->thread_on)
        return;
    pthread_mutex_lock(&as->mu);
    as->q_stop = true;
    if (drop)
        as->q_drop = true;
    pthread_cond_signal(&as->cv_work);
    pthread_mutex_unlock(&as->mu);
    pthread_join(as->thread, NULL);
    as->thread_on = false;
}

/* Drop the output: nothing more is written, the temp file is removed. */
static void discard_output(arc_store_t *as)
{
    q_stop(as, true);
    as->fill = NULL;
    for (int i = 0; i < CHUNKS; i++)
        slot_reset(&as->slots[i]);
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

/* A libarchive write failure in this thread: the store fails. */
static sp_status_t write_fail(arc_store_t *as, const char *key, sp_error_t *err)
{
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t code = describe_write_fail(as, key, &e);
    if (err)
        *err = e;
    return mark_failed(as, code, &e);
}

/* An error the writer thread met becomes the store's failure. */
static sp_status_t check_thread(arc_store_t *as, sp_error_t *err)
{
    if (!as->sync_init)
        return SP_OK;
    pthread_mutex_lock(&as->mu);
    bool failed = as->t_failed;
    sp_error_t e = as->t_err;
    pthread_mutex_unlock(&as->mu);
    if (!failed)
        return SP_OK;
    if (err)
        *err = e;
    return mark_failed(as, e.code ? e.code : SP_ERR_IO, &e);
}

static sp_status_t refuse_if_failed(arc_store_t *as, sp_error_t *err)
{
    if (!as->failed)
        return as->create && !as->finished ? check_thread(as, err) : SP_OK;
    if (err) {
        *err = as->fail_err;
        return err->code;
    }
    return as->fail_err.code;
}

/* The slot to fill next (waits while every slot is queued). */
static sp_status_t q_acquire(arc_store_t *as, sp_error_t *err)
{
    if (as->fill)
        return SP_OK;
    pthread_mutex_lock(&as->mu);
    while (as->q_len == CHUNKS && !as->t_failed)
        pthread_cond_wait(&as->cv_free, &as->mu);
    wslot_t *sl = &as->slots[(as->q_head + as->q_len) % CHUNKS];
    pthread_mutex_unlock(&as->mu);
    sp_status_t st = check_thread(as, err);
    if (st != SP_OK)
        return st;
    if (!sl->data && !(sl->data = malloc(CHUNK_BYTES)))
        return mark_failed(as, nomem(err, as->path), err);
    as->fill = sl;
    return SP_OK;
}

/* Hand the slot being filled to the writer thread (or write it here when there is no thread). */
static sp_status_t q_publish(arc_store_t *as, sp_error_t *err)
{
    wslot_t *sl = as->fill;
    if (!sl)
        return SP_OK;
    as->fill = NULL;
    if (!as->thread_on) {
        sp_error_t e;
        sp_error_clear(&e);
        sp_status_t st = run_slot(as, sl, &e);
        slot_reset(sl);
        if (st == SP_OK)
            return SP_OK;
        if (err)
            *err = e;
        return mark_failed(as, st, &e);
    }
    pthread_mutex_lock(&as->mu);
    as->q_len++;
    pthread_cond_signal(&as->cv_work);
    pthread_mutex_unlock(&as->mu);
    return check_thread(as, err);
}

static sp_status_t q_header(arc_store_t *as, const char *key, int64_t size, sp_error_t *err)
{
    sp_status_t st = q_acquire(as, err);
    if (st != SP_OK)
        return st;
    if (!(as->fill->hdr_key = strdup(key)))
        return mark_failed(as, nomem(err, as->path), err);
    as->fill->hdr_size = size;
    return SP_OK;
}

static sp_status_t q_data(arc_store_t *as, const void *buf, size_t n, sp_error_t *err)
{
    const unsigned char *p = buf;
    while (n) {
        sp_status_t st = q_acquire(as, err);
        if (st != SP_OK)
            return st;
        wslot_t *sl = as->fill;
        size_t k = n < CHUNK_BYTES - sl->len ? n : CHUNK_BYTES - sl->len;
        memcpy(sl->data + sl->len, p, k);
        sl->len += k;
        p += k;
        n -= k;
        if (sl->len == CHUNK_BYTES && (st = q_publish(as, err)) != SP_OK)
            return st;
    }
    return SP_OK;
}

static sp_status_t q_end(arc_store_t *as, sp_error_t *err)
{
    sp_status_t st = q_acquire(as, err);
    if (st != SP_OK)
        return st;
    as->fill->end = true;
    return q_publish(as, err);
}

static sp_status_t read_only(arc_store_t *as, sp_error_t *err)
{
    if (as->create)
        return fail(err, as->path, SP_ERR_INVALID,
                    "archive %s: entries of an archive being written cannot be removed, renamed or copied",
                    as->path);
    return fail(err, as->path, SP_ERR_INVALID, "archive %s: archives are read-only; write a new one", as->path);
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
    if (w->hint >= 0 && (st = q_header(as, k, w->hint, err)) != SP_OK) {
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
        if ((st = q_data(as, buf, n, err)) != SP_OK)
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
    sp_status_t st = q_header(as, w->key, w->written, err);
    if (st != SP_OK)
        return st;
    if (w->spill_fd < 0)
        return q_data(as, w->buf, w->len, err);
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
        st = q_data(as, chunk, (size_t)k, err);
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
    if (st == SP_OK)
        st = q_end(as, err); /* the writer thread finishes the entry; its errors come with a later call */
    if (st == SP_OK) {
        uint64_t ordinal = as->headers++; /* the header number, as a reader counts them */
        arc_ent_t *e = index_add(&as->ix, w->key, ENT_FILE, w->written, (int64_t)time(NULL) * 1000, ordinal);
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

/*
 * Checking what was written (finish(), before the archive gets its name).
 *
 * relocate deletes the source of a --move and reports success only once
 * the archive is known to be good.  Reading a new archive back through
 * libarchive (a reader's full decompression pass) proves less than it
 * seems: right after writing, every page of it is in the page cache, so
 * that pass reads memory, not the disk, and shows only that the bytes sp
 * handed to the kernel decode, at the cost of decompressing all of them.
 * What can go wrong is checked here instead, at a small fraction of that:
 *
 *  1. the tar layer: every byte libarchive produced went through the tar
 *     scanner (ts_feed) on its way to the compressor or the file; it must
 *     be a well-formed tar stream (ustar headers with valid checksums, pax
 *     records, the end-of-archive marker and nothing after it) holding
 *     exactly the entries of the writer's index, in order, with their
 *     names and sizes; every entry got exactly the bytes its header
 *     announced (write() and commit() refuse anything else);
 *  2. the file: write errors, and those of writeback (ENOSPC, EIO), are
 *     reported by write() and fsync(); after the fsync the file is opened
 *     again by name and must be the file written (device, inode), hold
 *     exactly the bytes written and end with exactly the bytes written last;
 *  3. the container: a .tar.zst must be one complete zstd frame spanning
 *     the whole file, its block headers walked through the last block and
 *     the content checksum (ZSTD_findFrameCompressedSize: no decompression);
 *     a .tar is scanned again on disk as in 1 (headers only, data skipped).
 *
 * Not re-checked is that the compressed blocks decode to the stream of 1:
 * that is libzstd's encoder, trusted as `tar -I zstd` trusts it, and the
 * frame's content checksum (XXH64 of the whole tar stream, computed by the
 * encoder as it went) lets every later reader (sp verify, zstd -t) detect
 * damage.  relocate --checksum still reads the whole archive back.
 */
static sp_status_t check_written(arc_store_t *as, const struct stat *wrote, sp_error_t *err)
{
    char why[400];
    if (!ts_matches(&as->ts, &as->ix, why, sizeof why))
        return fail(err, as->path, SP_ERR_IO, "archive %s: the tar stream written is not the one asked for: %s",
                    as->path, why);
    int fd = open(as->tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return fail(err, as->path, SP_ERR_IO, "cannot open %s again to check it: %s", as->tmp, strerror(e));
    }
    sp_status_t st = SP_OK;
    if (!S_ISREG(sb.st_mode) || sb.st_dev != wrote->st_dev || sb.st_ino != wrote->st_ino)
        st = fail(err, as->path, SP_ERR_IO, "%s was replaced while the archive was being written", as->tmp);
    else if ((uint64_t)sb.st_size != as->out_bytes || sb.st_size == 0 || (uint64_t)sb.st_size > SIZE_MAX)
        st = fail(err, as->path, SP_ERR_IO, "%s has %lld bytes on disk, %llu were written", as->tmp,
                  (long long)sb.st_size, (unsigned long long)as->out_bytes);
    size_t size = (size_t)sb.st_size;
    void *map = MAP_FAILED;
    if (st == SP_OK && (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        int e = errno;
        st = fail(err, as->path, SP_ERR_IO, "cannot map %s to check it: %s", as->tmp, strerror(e));
    }
    close(fd);
    if (st != SP_OK)
        return st;
    (void)madvise(map, size, MADV_RANDOM); /* only headers are looked at: no read-ahead around them */
    const unsigned char *m = map;
    if (memcmp(m + size - as->out_tail_len, as->out_tail, as->out_tail_len) != 0) {
        st = fail(err, as->path, SP_ERR_IO, "%s does not end with the bytes written last", as->tmp);
    } else if (as->zstd) {
        size_t fsz = ZSTD_findFrameCompressedSize(m, size);
        if (ZSTD_isError(fsz))
            st = fail(err, as->path, SP_ERR_IO, "%s is not one complete zstd frame: %s", as->tmp,
                      ZSTD_getErrorName(fsz));
        else if (fsz != size)
            st = fail(err, as->path, SP_ERR_IO, "%s holds %llu bytes after its zstd frame", as->tmp,
                      (unsigned long long)(size - fsz));
    } else {
        tscan_t t;
        ts_init(&t);
        ts_feed(&t, m, size);
        if (!ts_matches(&t, &as->ix, why, sizeof why))
            st = fail(err, as->path, SP_ERR_IO, "%s on disk is not the tar archive written: %s", as->tmp, why);
        ts_free(&t);
    }
    munmap(map, size);
    return st;
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
    q_stop(as, false); /* the writer thread writes what is queued, then ends */
    if ((st = check_thread(as, err)) != SP_OK)
        return st;
    /* libarchive 3.6 ignores what the close callback returns: check our own flag too */
    if (archive_write_close(as->aw) < ARCHIVE_WARN || as->cb_failed)
        return write_fail(as, NULL, err);
    archive_write_free(as->aw);
    as->aw = NULL;
    struct stat wrote;
    if (fsync(as->fd) != 0 || fstat(as->fd, &wrote) != 0) {
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
    if ((st = check_written(as, &wrote, err)) != SP_OK) {
        unlink(as->tmp);
        return mark_failed(as, st, err);
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
    ts_free(&as->ts);
    as->finished = true;
    as->indexed = true; /* the writer's index is the archive's: reading it needs no pass to build one */
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
        q_stop(as, true);
        for (int i = 0; i < CHUNKS; i++) {
            slot_reset(&as->slots[i]);
            free(as->slots[i].data);
        }
        if (as->sync_init) {
            pthread_mutex_destroy(&as->mu);
            pthread_cond_destroy(&as->cv_work);
            pthread_cond_destroy(&as->cv_free);
        }
        ts_free(&as->ts);
        free(as->t_key);
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
    ts_init(&as->ts);
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
        as->zout_cap = OUT_BYTES + ZSTD_CStreamOutSize();
        as->zout = malloc(as->zout_cap);
        if (!as->zc || !as->zout)
            return nomem(err, as->path);
        as->zstd = true;
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
    if (pthread_mutex_init(&as->mu, NULL) != 0)
        return nomem(err, as->path);
    if (pthread_cond_init(&as->cv_work, NULL) != 0) {
        pthread_mutex_destroy(&as->mu);
        return nomem(err, as->path);
    }
    if (pthread_cond_init(&as->cv_free, NULL) != 0) {
        pthread_cond_destroy(&as->cv_work);
        pthread_mutex_destroy(&as->mu);
        return nomem(err, as->path);
    }
    as->sync_init = true;
    /* without a thread, each slot is written by the caller as it is handed over */
    as->thread_on = pthread_create(&as->thread, NULL, writer_main, as) == 0;
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
