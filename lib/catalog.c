/*
 * catalog.c - `sp list`: walk a local root and describe every snapshot in it
 * (see sp_catalog.h).  The walk uses lstat and readdir itself rather than
 * the store's list(), because list() recurses into everything and reports
 * files only, while the walk must stop at a snapshot directory and skip a
 * job's shared/ and taskowned/ without reading them.
 */
#include "sp_catalog.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sp_dispose.h"
#include "sp_inspect.h"
#include "sp_relocate.h"
#include "sp_snapshot.h"
#include "sp_store.h"
#include "sp_verify.h"
#include "strmap.h"

/* Deep enough for any layout Flink writes; bounds the recursion. */
#define MAX_DEPTH 64

typedef struct scan {
    sp_catalog_t *cat;
    uint32_t cap;
    size_t root_len;
    bool verify;
    bool nomem;
} scan_t;

static int64_t stat_mtime_ms(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* A directory named by a Flink JobID (32 hex digits). */
static bool is_job_dir_name(const char *name)
{
    return strlen(name) == 32 && all_hex(name, 32);
}

bool sp_catalog_job_from_path(const char *path, char job[33])
{
    job[0] = '\0';
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/')
        start--;
    const char *base = path + start;
    size_t blen = len - start;
    /* an archive of a savepoint keeps the directory's name before the suffix */
    static const char *const suffixes[] = {".tar.zstd", ".tar.zst", ".tzst", ".tar"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t sl = strlen(suffixes[i]);
        if (blen > sl && strncmp(base + blen - sl, suffixes[i], sl) == 0) {
            blen -= sl;
            break;
        }
    }
    /* savepoint-<first 6 hex of the job ID>-<12 random hex> (Flink's AbstractFsCheckpointStorageAccess) */
    if (blen == 10 + 6 + 1 + 12 && strncmp(base, "savepoint-", 10) == 0 && all_hex(base + 10, 6) &&
        base[16] == '-' && all_hex(base + 17, 12)) {
        memcpy(job, base + 10, 6);
        job[6] = '\0';
        return true;
    }
    /* <checkpoint-dir>/<job-id>/chk-<N> */
    if (blen > 4 && strncmp(base, "chk-", 4) == 0) {
        for (size_t i = 4; i < blen; i++)
            if (!isdigit((unsigned char)base[i]))
                return false;
        if (start < 2)
            return false;
        size_t pend = start - 1; /* the '/' before base */
        size_t pstart = pend;
        while (pstart > 0 && path[pstart - 1] != '/')
            pstart--;
        if (pend - pstart == 32 && all_hex(path + pstart, 32)) {
            memcpy(job, path + pstart, 32);
            job[32] = '\0';
            return true;
        }
    }
    return false;
}

static sp_catalog_entry_t *add_entry(scan_t *sc, const char *path, bool archive)
{
    sp_catalog_t *c = sc->cat;
    if (c->n == sc->cap) {
        uint32_t cap = sc->cap ? sc->cap * 2 : 32;
        sp_catalog_entry_t *v = realloc(c->entries, cap * sizeof *v);
        if (!v) {
            sc->nomem = true;
            return NULL;
        }
        c->entries = v;
        sc->cap = cap;
    }
    sp_catalog_entry_t *e = &c->entries[c->n];
    memset(e, 0, sizeof *e);
    e->location = strdup(path);
    if (!e->location) {
        sc->nomem = true;
        return NULL;
    }
    c->n++;
    e->path = strlen(path) > sc->root_len ? e->location + sc->root_len + (sc->root_len > 1 ? 1 : 0) : ".";
    e->archive = archive;
    e->metadata_version = -1;
    sp_error_clear(&e->error);
    sp_catalog_job_from_path(path, e->job);
    return e;
}

static sp_status_t verify_snap(sp_catalog_entry_t *e, const sp_snapshot_t *snap, sp_error_t *err)
{
    sp_verify_result_t vr;
    sp_status_t s = sp_verify(snap, &vr, err);
    if (!s) {
        e->problems = vr.n_problems;
        e->complete = vr.n_problems ? SP_COMPLETE_NO : SP_COMPLETE_YES;
        sp_verify_result_free(&vr);
    }
    return s;
}

/* Fill the metadata facts of an entry from its opened snapshot (closed here). */
static void describe_open(scan_t *sc, sp_catalog_entry_t *e, sp_snapshot_t *snap)
{
    sp_summary_t sum;
    if (sp_summarize(snap, &sum, NULL) == SP_OK) {
        e->kind = sum.kind;
        e->format = sum.format;
        e->total_state_bytes = sum.total_state_bytes;
        sp_summary_free(&sum);
    } else {
        sc->nomem = true;
    }
    e->has_metadata = true;
    e->checkpoint_id = snap->meta->checkpoint_id;
    e->metadata_version = snap->meta->version;
    e->metadata_bytes = snap->size;
    if (snap->mtime_ms > 0)
        e->mtime_ms = snap->mtime_ms;
    if (sc->verify && e->state == SP_CATALOG_OK)
        sc->nomem |= verify_snap(e, snap, NULL) == SP_ERR_NOMEM;
    sp_snapshot_close(snap);
}

/* A failure to open makes the entry UNREADABLE, unless a journal already says more. */
static void open_failed(scan_t *sc, sp_catalog_entry_t *e, sp_status_t s, const sp_error_t *err)
{
    if (e->state == SP_CATALOG_OK) {
        e->state = SP_CATALOG_UNREADABLE;
        e->error = *err;
    }
    sc->nomem |= s == SP_ERR_NOMEM;
}

static void describe(scan_t *sc, sp_catalog_entry_t *e)
{
    sp_snapshot_t *snap;
    sp_error_t err;
    sp_status_t s = sp_snapshot_open(e->location, 0, &snap, &err);
    if (s)
        open_failed(sc, e, s, &err);
    else
        describe_open(sc, e, snap);
}

static void read_record(sp_catalog_entry_t *e)
{
    sp_error_t err;
    if (sp_record_read(e->location, &e->record, &err) != SP_OK) {
        memset(&e->record, 0, sizeof e->record);
        e->record_unreadable = true;
    }
}

static void examine_archive(scan_t *sc, const char *path, const struct stat *st)
{
    sp_snapshot_t *snap;
    sp_error_t err;
    sp_status_t s = sp_snapshot_open(path, 0, &snap, &err);
    if (s == SP_ERR_NOT_FOUND)
        return; /* no _metadata at its root: an archive, but not of a snapshot */
    sp_catalog_entry_t *e = add_entry(sc, path, true);
    if (!e) {
        if (!s)
            sp_snapshot_close(snap);
        return;
    }
    e->mtime_ms = stat_mtime_ms(st);
    if (s)
        open_failed(sc, e, s, &err);
    else
        describe_open(sc, e, snap);
    read_record(e);
}

static bool lstat_in(const char *dir, const char *name, struct stat *st)
{
    char p[PATH_MAX];
    if ((size_t)snprintf(p, sizeof p, "%s/%s", dir, name) >= sizeof p)
        return false;
    return lstat(p, st) == 0;
}

static void examine_snapshot_dir(scan_t *sc, const char *path, const struct stat *dst, bool has_meta,
                                 const struct stat *mst)
{
    sp_catalog_entry_t *e = add_entry(sc, path, false);
    if (!e)
        return;
    e->mtime_ms = stat_mtime_ms(has_meta ? mst : dst);
    struct stat js;
    if (lstat_in(path, SP_DISPOSE_JOURNAL, &js)) {
        e->state = SP_CATALOG_DISPOSING;
        snprintf(e->error.message, sizeof e->error.message,
                 "an sp dispose of this snapshot was interrupted (%s); sp dispose finishes it", SP_DISPOSE_JOURNAL);
    } else if (lstat_in(path, SP_RELOCATE_JOURNAL, &js)) {
        e->state = SP_CATALOG_INCOMPLETE;
        snprintf(e->error.message, sizeof e->error.message,
                 "a relocation into this directory has not finished (%s); running the same sp relocate again "
                 "finishes it", SP_RELOCATE_JOURNAL);
    }
    if (has_meta && S_ISLNK(mst->st_mode)) {
        if (e->state == SP_CATALOG_OK) {
            e->state = SP_CATALOG_UNREADABLE;
            sp_error_set_file(&e->error, path);
            sp_error_set(&e->error, SP_ERR_REFUSED, SP_NO_OFFSET, "", "_metadata is a symbolic link; not following it");
        }
    } else if (has_meta) {
        describe(sc, e);
    }
    read_record(e);
}

static void walk(scan_t *sc, char *path, size_t len, int depth);

/* Look at one directory: a snapshot, or a directory to descend into. */
static void examine_dir(scan_t *sc, char *path, size_t len, const struct stat *st, int depth)
{
    struct stat ms, js;
    bool has_meta = lstat_in(path, "_metadata", &ms);
    if (has_meta || lstat_in(path, SP_RELOCATE_JOURNAL, &js) || lstat_in(path, SP_DISPOSE_JOURNAL, &js)) {
        examine_snapshot_dir(sc, path, st, has_meta, &ms);
        return;
    }
    if (depth < MAX_DEPTH)
        walk(sc, path, len, depth + 1);
}

static void walk(scan_t *sc, char *path, size_t len, int depth)
{
    DIR *d = opendir(path);
    if (!d) {
        /* shown as an unreadable entry: the user learns that part of the root was not searched */
        int e = errno;
        sp_catalog_entry_t *ent = add_entry(sc, path, false);
        if (ent) {
            ent->state = SP_CATALOG_UNREADABLE;
            sp_error_set_file(&ent->error, path);
            sp_error_set(&ent->error, SP_ERR_IO, SP_NO_OFFSET, "", "cannot list the directory: %s", strerror(e));
        }
        return;
    }
    const char *slash = strrchr(path, '/');
    bool job_dir = is_job_dir_name(slash ? slash + 1 : path);
    struct dirent *de;
    while (!sc->nomem && (de = readdir(d))) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || strstr(name, ".sp-tmp-"))
            continue;
        /* a job's shared/ and taskowned/ hold incremental checkpoint files, never snapshots */
        if (job_dir && (strcmp(name, "shared") == 0 || strcmp(name, "taskowned") == 0))
            continue;
        size_t n = strlen(name);
        if (len + 1 + n >= PATH_MAX)
            continue;
        path[len] = '/';
        memcpy(path + len + 1, name, n + 1);
        struct stat st;
        if (lstat(path, &st) == 0) { /* lstat: symbolic links are never followed */
            if (S_ISDIR(st.st_mode))
                examine_dir(sc, path, len + 1 + n, &st, depth);
            else if (S_ISREG(st.st_mode) && sp_is_archive_name(name))
                examine_archive(sc, path, &st);
        }
        path[len] = '\0';
    }
    closedir(d);
}

/* ------------------------------------------------------------------ S3 roots */

/* A prefix of an S3 root that holds `_metadata` or a journal (from one ListObjectsV2 walk of the root). */
typedef struct s3dir {
    char *dir;                 /* relative to the root, "" = the root itself */
    bool has_meta, relocating, disposing;
    int64_t meta_mtime_ms;
} s3dir_t;

typedef struct s3walk {
    s3dir_t *v;
    size_t n, cap;
    bool nomem;
} s3walk_t;

/* "<32 hex>/shared/..." or ".../taskowned/...": incremental checkpoint files, never snapshots. */
static bool in_job_shared(const char *key)
{
    const char *p = key;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 32 && all_hex(p, 32) && p[n] == '/') {
            const char *q = p + n + 1;
            size_t m = strcspn(q, "/");
            if (q[m] == '/' && ((m == 6 && strncmp(q, "shared", 6) == 0) || (m == 9 && strncmp(q, "taskowned", 9) == 0)))
                return true;
        }
        p += n + (p[n] == '/');
    }
    return false;
}

static int s3_seen(const sp_store_entry_t *e, void *user)
{
    s3walk_t *w = user;
    const char *slash = strrchr(e->key, '/');
    const char *base = slash ? slash + 1 : e->key;
    int what = strcmp(base, "_metadata") == 0 ? 1 : strcmp(base, SP_RELOCATE_JOURNAL) == 0 ? 2
               : strcmp(base, SP_DISPOSE_JOURNAL) == 0 ? 3 : 0;
    if (!what || in_job_shared(e->key))
        return 0;
    size_t dl = slash ? (size_t)(slash - e->key) : 0;
    s3dir_t *d = NULL;
    for (size_t i = w->n; i-- > 0 && !d;) /* a listing is in key order: the same prefix is near the end */
        if (strlen(w->v[i].dir) == dl && strncmp(w->v[i].dir, e->key, dl) == 0)
            d = &w->v[i];
    if (!d) {
        if (w->n == w->cap) {
            size_t cap = w->cap ? w->cap * 2 : 32;
            s3dir_t *nv = realloc(w->v, cap * sizeof *nv);
            if (!nv) {
                w->nomem = true;
                return 1;
            }
            w->v = nv;
            w->cap = cap;
        }
        d = &w->v[w->n];
        memset(d, 0, sizeof *d);
        if (!(d->dir = strndup(e->key, dl))) {
            w->nomem = true;
            return 1;
        }
        w->n++;
    }
    if (what == 1) {
        d->has_meta = true;
        d->meta_mtime_ms = e->st.mtime_ms;
    }
    d->relocating |= what == 2;
    d->disposing |= what == 3;
    return 0;
}

static int by_dir(const void *a, const void *b)
{
    return strcmp(((const s3dir_t *)a)->dir, ((const s3dir_t *)b)->dir);
}

/* An S3 root: one listing of every object under the prefix; each prefix holding `_metadata` or a journal is
 * an entry, and nothing below an entry is one (as the local walk does not descend into a snapshot). */
static sp_status_t scan_s3(scan_t *sc, const sp_location_t *loc, sp_error_t *err)
{
    sp_catalog_t *out = sc->cat;
    size_t n = strlen(loc->store_location) + strlen(loc->key) + 2;
    if (!(out->root = malloc(n)))
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    snprintf(out->root, n, "%s%s%s", loc->store_location, loc->key[0] ? "/" : "", loc->key);
    sc->root_len = strlen(out->root);
    sp_store_t *st;
    sp_status_t s = sp_store_open_location(loc, false, 0, &st, err);
    if (s)
        return s;
    sp_store_stat_t rs;
    s3walk_t w = {0};
    if (!(s = st->ops->stat(st, loc->key, &rs, err)) && !rs.exists) {
        sp_error_set_file(err, out->root);
        s = sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no object under this prefix");
    }
    if (!s)
        s = st->ops->list(st, loc->key, s3_seen, &w, err);
    sp_store_close(st);
    if (!s && w.nomem)
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    if (w.n > 1)
        qsort(w.v, w.n, sizeof *w.v, by_dir);
    strmap_t taken = {0}; /* the entries so far: a prefix below one of them is inside a snapshot */
    for (size_t i = 0; !s && i < w.n && !sc->nomem; i++) {
        s3dir_t *d = &w.v[i];
        bool inside = strmap_get(&taken, "") != UINT32_MAX;
        for (char *slash = strchr(d->dir, '/'); slash && !inside; slash = strchr(slash + 1, '/')) {
            *slash = '\0';
            inside = strmap_get(&taken, d->dir) != UINT32_MAX;
            *slash = '/';
        }
        if (inside)
            continue;
        if (!strmap_put(&taken, d->dir, 0, NULL)) {
            sc->nomem = true;
            break;
        }
        char *location = malloc(sc->root_len + strlen(d->dir) + 2);
        if (!location) {
            sc->nomem = true;
            break;
        }
        sprintf(location, "%s%s%s", out->root, d->dir[0] ? "/" : "", d->dir);
        sp_catalog_entry_t *e = add_entry(sc, location, false);
        free(location);
        if (!e)
            break;
        e->mtime_ms = d->meta_mtime_ms;
        if (d->disposing) {
            e->state = SP_CATALOG_DISPOSING;
            snprintf(e->error.message, sizeof e->error.message,
                     "an sp dispose of this snapshot was interrupted (%s); sp dispose finishes it", SP_DISPOSE_JOURNAL);
        } else if (d->relocating) {
            e->state = SP_CATALOG_INCOMPLETE;
            snprintf(e->error.message, sizeof e->error.message,
                     "a relocation into this directory has not finished (%s); running the same sp relocate again "
                     "finishes it", SP_RELOCATE_JOURNAL);
        }
        if (d->has_meta)
            describe(sc, e);
        read_record(e);
    }
    strmap_free(&taken);
    for (size_t i = 0; i < w.n; i++)
        free(w.v[i].dir);
    free(w.v);
    return s;
}

static int by_location(const void *a, const void *b)
{
    return strcmp(((const sp_catalog_entry_t *)a)->location, ((const sp_catalog_entry_t *)b)->location);
}

sp_status_t sp_catalog_scan(const char *root, const sp_catalog_options_t *opts, sp_catalog_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    sp_location_t loc;
    sp_status_t s = sp_location_parse(root, &loc, err);
    if (s)
        return s;
    if (loc.kind == SP_LOC_S3) {
        /* s3://bucket/prefix: every snapshot under the prefix, from one listing */
        scan_t sc = {out, 0, 0, opts && opts->verify, false};
        s = scan_s3(&sc, &loc, err);
        sp_location_free(&loc);
        if (!s && sc.nomem)
            s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        if (!s && out->n > 1)
            qsort(out->entries, out->n, sizeof *out->entries, by_location);
        return s;
    }
    if (loc.kind == SP_LOC_ARCHIVE && loc.key[0]) {
        sp_location_free(&loc);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location",
                            "%s: a root is a local directory, one archive file, or s3://bucket/prefix", root);
    }
    out->root = strdup(loc.kind == SP_LOC_ARCHIVE ? loc.store_location : loc.key);
    sp_location_free(&loc);
    if (!out->root)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");

    struct stat st;
    if (lstat(out->root, &st) != 0) {
        int e = errno;
        sp_error_set_file(err, out->root);
        return sp_error_set(err, e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO, SP_NO_OFFSET, "", "cannot open: %s",
                            strerror(e));
    }
    char real[PATH_MAX];
    if (S_ISLNK(st.st_mode) && realpath(out->root, real) && lstat(real, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* ROOT itself may be a link to the directory (/flink/savepoints -> /mnt/...): the snapshots are
         * listed, and pruned, at their real place (no deletion ever passes a link); links below ROOT are
         * still not followed */
        char *r = strdup(real);
        if (!r)
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        free(out->root);
        out->root = r;
    }
    scan_t sc = {out, 0, strlen(out->root), opts && opts->verify, false};
    if (S_ISREG(st.st_mode) && sp_is_archive_name(out->root)) {
        sc.root_len = strlen(out->root); /* the root itself is the one entry: path "." */
        examine_archive(&sc, out->root, &st);
    } else if (S_ISDIR(st.st_mode)) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s", out->root);
        DIR *probe = opendir(path);
        if (!probe) {
            int e = errno;
            sp_error_set_file(err, out->root);
            return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot list: %s", strerror(e));
        }
        closedir(probe);
        size_t len = strlen(path);
        examine_dir(&sc, path, len == 1 ? 0 : len, &st, 0);
    } else {
        sp_error_set_file(err, out->root);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "",
                            "not a directory or an archive (.tar, .tar.zst)%s",
                            S_ISLNK(st.st_mode) ? ": a symbolic link, not followed" : "");
    }
    if (sc.nomem)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    if (out->n > 1)
        qsort(out->entries, out->n, sizeof *out->entries, by_location);
    return SP_OK;
}

sp_status_t sp_catalog_verify_entry(sp_catalog_entry_t *e, sp_error_t *err)
{
    e->complete = SP_COMPLETE_UNCHECKED;
    e->problems = 0;
    if (e->state != SP_CATALOG_OK)
        return SP_OK;
    sp_snapshot_t *snap;
    sp_status_t s = sp_snapshot_open(e->location, 0, &snap, err);
    if (s)
        return s;
    s = verify_snap(e, snap, err);
    sp_snapshot_close(snap);
    return s;
}

void sp_catalog_free(sp_catalog_t *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < c->n; i++)
        free(c->entries[i].location);
    free(c->entries);
    free(c->root);
    memset(c, 0, sizeof *c);
}

const char *sp_catalog_state_name(sp_catalog_state_t s)
{
    switch (s) {
    case SP_CATALOG_OK: return "ok";
    case SP_CATALOG_INCOMPLETE: return "incomplete";
    case SP_CATALOG_DISPOSING: return "disposing";
    case SP_CATALOG_UNREADABLE: return "unreadable";
    }
    return "unknown";
}
