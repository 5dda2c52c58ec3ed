/* Opening a local snapshot: locate the metadata file, map it, decode it,
 * and reject relative references that would leave the directory. */
#include "sp_snapshot.h"
#include "sp_inspect.h"
#include "s3_internal.h"
#include "sp_s3.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct priv {
    void *map;      /* mmap'd region, or NULL when read into heap */
    size_t maplen;
    uint8_t *heap;
    void *s3_stores; /* stores of other buckets that absolute s3:// references name (s3_internal.h) */
} priv_t;

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static char *path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = malloc(la + lb + 2);
    if (!p)
        return NULL;
    memcpy(p, a, la);
    size_t o = la;
    if (o == 0 || p[o - 1] != '/')
        p[o++] = '/';
    memcpy(p + o, b, lb + 1);
    return p;
}

static char *parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return xstrdup(".");
    if (slash == path)
        return xstrdup("/");
    char *p = malloc((size_t)(slash - path) + 1);
    if (p) {
        memcpy(p, path, (size_t)(slash - path));
        p[slash - path] = '\0';
    }
    return p;
}

static void strip_trailing_slashes(char *p)
{
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
}

/* A Flink 1.1/1.2 savepoint is one file; accept a folder holding only it. */
static char *find_single_metadata_file(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char *found = NULL;
    int candidates = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p = path_join(dir, e->d_name);
        struct stat st;
        if (p && lstat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            /* only Flink 1.1 / 1.2 (metadata V0 / V1) wrote single-file savepoints;
             * from 1.3 on Flink needs _metadata in the directory */
            unsigned char head[8];
            FILE *f = fopen(p, "rb");
            if (f && fread(head, 1, 8, f) == 8 && memcmp(head, "\x49\x60\x67\x2d\0\0\0", 7) == 0 && head[7] <= 1) {
                candidates++;
                free(found);
                found = p;
                p = NULL;
            }
            if (f)
                fclose(f);
        }
        free(p);
    }
    closedir(d);
    if (candidates != 1) {
        free(found);
        return NULL;
    }
    return found;
}

static sp_status_t locate(const char *location, char **meta_path, char **dir, sp_error_t *err)
{
    const char *p = location;
    if (strncmp(p, "file://", 7) == 0)
        p += 7;
    else if (strncmp(p, "file:", 5) == 0)
        p += 5;
    else if (strstr(p, "://"))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location",
                            "%s: this build of sp reads local paths and file:// URIs only", location);
    char *path = xstrdup(p);
    if (!path)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    strip_trailing_slashes(path);
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        sp_error_set_file(err, path);
        free(path);
        return sp_error_set(err, e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO, SP_NO_OFFSET, "", "cannot open: %s",
                            strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        char *m = path_join(path, "_metadata");
        struct stat ms;
        if (m && stat(m, &ms) == 0) {
            *meta_path = m;
            *dir = path;
            return SP_OK;
        }
        free(m);
        m = find_single_metadata_file(path);
        if (m) {
            *meta_path = m;
            *dir = path;
            return SP_OK;
        }
        sp_error_set_file(err, path);
        m = path_join(path, ".sp-dispose.json");
        bool disposing = m && lstat(m, &ms) == 0;
        free(m);
        free(path);
        if (disposing) /* the journal of sp_dispose.h: its _metadata goes last */
            return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "",
                                "no _metadata file in this directory: an interrupted sp dispose (or relocate --move) "
                                "already deleted it; run sp dispose on this directory to finish");
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "",
                            "no _metadata file in this directory (is it a savepoint or chk-N directory?)");
    }
    *meta_path = path;
    *dir = parent_dir(path);
    return *dir ? SP_OK : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
}

static sp_status_t load(sp_snapshot_t *s, priv_t *pv, sp_error_t *err)
{
    int fd = open(s->metadata_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        sp_error_set_file(err, s->metadata_path);
        return sp_error_set(err, e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO, SP_NO_OFFSET, "", "cannot open: %s",
                            strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        sp_error_set_file(err, s->metadata_path);
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "not a regular file");
    }
    s->size = (size_t)st.st_size;
    s->mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (s->size > 0) {
        /* mmap: the model points into the file's bytes, so no copy is made */
        void *m = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            pv->map = m;
            pv->maplen = s->size;
            s->bytes = m;
        } else {
            pv->heap = malloc(s->size);
            size_t got = 0;
            while (pv->heap && got < s->size) {
                ssize_t n = read(fd, pv->heap + got, s->size - got);
                if (n <= 0)
                    break;
                got += (size_t)n;
            }
            if (!pv->heap || got != s->size) {
                close(fd);
                sp_error_set_file(err, s->metadata_path);
                return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot read the file");
            }
            s->bytes = pv->heap;
        }
    } else {
        s->bytes = (const uint8_t *)"";
    }
    close(fd);
    return SP_OK;
}

/* A snapshot inside an archive: "_metadata" at the archive root (or under
 * the folder named after "//"), read through the archive store. */
static sp_status_t open_in_archive(sp_snapshot_t *s, priv_t *pv, const sp_location_t *loc, sp_error_t *err)
{
    sp_status_t st = sp_store_open_archive(loc->store_location, false, 0, &s->store, err);
    if (st)
        return st;
    size_t n = strlen(loc->key) + 16;
    char *key = malloc(n);
    s->dir_key = xstrdup(loc->key);
    s->dir = malloc(strlen(loc->store_location) + n);
    s->metadata_path = malloc(strlen(loc->store_location) + n);
    if (!key || !s->dir_key || !s->dir || !s->metadata_path) {
        free(key);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    snprintf(key, n, "%s%s_metadata", loc->key, loc->key[0] ? "/" : "");
    if (loc->key[0])
        sprintf(s->dir, "%s//%s", loc->store_location, loc->key);
    else
        sprintf(s->dir, "%s", loc->store_location);
    sprintf(s->metadata_path, "%s//%s", loc->store_location, key);
    sp_store_stat_t ms;
    st = s->store->ops->stat(s->store, key, &ms, err);
    if (!st && !ms.exists) {
        sp_error_set_file(err, s->metadata_path);
        st = sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no _metadata in the archive%s",
                          loc->key[0] ? " folder" : " root (name a folder inside it as ARCHIVE//FOLDER)");
    }
    if (!st)
        st = sp_store_read_all(s->store, key, SIZE_MAX / 2, &pv->heap, &s->size, err);
    free(key);
    if (st)
        return st;
    s->bytes = pv->heap ? pv->heap : (const uint8_t *)"";
    s->mtime_ms = ms.mtime_ms;
    return SP_OK;
}

/* A snapshot in S3: "s3://bucket/prefix" holding prefix/_metadata, or the
 * metadata object itself ("s3://bucket/prefix/_metadata"). */
static sp_status_t open_in_s3(sp_snapshot_t *s, priv_t *pv, const sp_location_t *loc, sp_error_t *err)
{
    sp_status_t st = sp_store_open_location(loc, false, 0, &s->store, err);
    if (st)
        return st;
    const char *k = loc->key, *base = strrchr(k, '/') ? strrchr(k, '/') + 1 : k;
    size_t kl = strlen(k), bl = strlen(loc->store_location);
    char *mkey = malloc(kl + 16), *dkey = malloc(kl + 1);
    s->dir = malloc(bl + kl + 2);
    s->metadata_path = malloc(bl + kl + 18);
    if (!mkey || !dkey || !s->dir || !s->metadata_path) {
        free(mkey);
        free(dkey);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    sp_store_stat_t ms = {0};
    bool is_object = false;
    if (kl && strcmp(base, "_metadata") == 0) {
        /* named the metadata object: look at it first */
        st = s->store->ops->stat(s->store, k, &ms, err);
        is_object = !st && ms.exists && !ms.is_dir;
    }
    if (!st && !is_object) {
        snprintf(mkey, kl + 16, "%s%s_metadata", k, kl ? "/" : "");
        st = s->store->ops->stat(s->store, mkey, &ms, err);
        if (!st && !(ms.exists && !ms.is_dir) && kl) {
            /* a metadata object of another name (a Flink 1.1 / 1.2 single-file savepoint) */
            st = s->store->ops->stat(s->store, k, &ms, err);
            is_object = !st && ms.exists && !ms.is_dir;
        }
    }
    if (is_object) {
        memcpy(mkey, k, kl + 1);
        memcpy(dkey, k, (size_t)(base - k));
        dkey[base > k ? base - k - 1 : 0] = '\0';
    } else {
        memcpy(dkey, k, kl + 1);
    }
    s->dir_key = dkey;
    sprintf(s->dir, "%s%s%s", loc->store_location, dkey[0] ? "/" : "", dkey);
    sprintf(s->metadata_path, "%s/%s", loc->store_location, mkey);
    if (!st && !(ms.exists && !ms.is_dir)) {
        sp_error_set_file(err, s->metadata_path);
        st = sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "",
                          "no _metadata under this prefix (is it a savepoint or chk-N directory?)");
    }
    if (!st)
        st = sp_store_read_all(s->store, mkey, SIZE_MAX / 2, &pv->heap, &s->size, err);
    free(mkey);
    if (st)
        return st;
    s->bytes = pv->heap ? pv->heap : (const uint8_t *)"";
    s->mtime_ms = ms.mtime_ms;
    return SP_OK;
}

const char *sp_relative_path_problem(const uint8_t *path, size_t len)
{
    if (len == 0)
        return "empty relative path";
    if (memchr(path, '\0', len))
        return "relative path contains a NUL byte";
    if (path[0] == '/')
        return "relative reference holds an absolute path";
    /* a scheme ("file:/x", "hdfs://h/x", "s3://b/k") before the first '/' */
    for (size_t i = 1; i + 1 < len && path[i] != '/'; i++)
        if (path[i] == ':' && path[i + 1] == '/')
            return "relative reference holds a URI";
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || path[i] == '/') {
            size_t n = i - start;
            if ((n == 2 && path[start] == '.' && path[start + 1] == '.'))
                return "relative path has a '..' component and would leave the snapshot directory";
            if (n == 1 && path[start] == '.')
                return "relative path has a '.' component";
            start = i + 1;
        }
    }
    return NULL;
}

typedef struct check_ctx {
    sp_snapshot_t *snap;
    sp_error_t *err;
} check_ctx_t;

static int check_ref(const sp_ref_t *ref, void *user)
{
    check_ctx_t *c = user;
    if (ref->kind != SP_REF_RELATIVE)
        return 0;
    const char *problem = sp_relative_path_problem(ref->path.ptr, ref->path.len);
    if (!problem)
        return 0;
    char field[160];
    snprintf(field, sizeof field, "operators[%u].subtasks[index=%d].%s.relative_path", ref->operator_index,
             ref->subtask_index, sp_ref_slot_name(ref->slot));
    sp_error_set(c->err, SP_ERR_MALFORMED, ref->handle ? ref->handle->offset : SP_NO_OFFSET, field,
                 "%s: \"%.*s\"", problem, (int)(ref->path.len > 200 ? 200 : ref->path.len),
                 (const char *)ref->path.ptr);
    sp_error_set_file(c->err, c->snap->metadata_path);
    return 1;
}

sp_status_t sp_snapshot_open(const char *location, unsigned flags, sp_snapshot_t **out, sp_error_t *err)
{
    *out = NULL;
    sp_error_clear(err);
    sp_snapshot_t *s = calloc(1, sizeof *s);
    priv_t *pv = calloc(1, sizeof *pv);
    if (!s || !pv) {
        free(s);
        free(pv);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    s->priv_ = pv;
    s->location = xstrdup(location);
    sp_location_t loc;
    sp_status_t st = sp_location_parse(location, &loc, err);
    if (st) {
        sp_snapshot_close(s);
        return st;
    }
    st = sp_store_open_local(&s->local, err);
    if (!st && loc.kind == SP_LOC_ARCHIVE)
        st = open_in_archive(s, pv, &loc, err);
    else if (!st && loc.kind == SP_LOC_S3)
        st = open_in_s3(s, pv, &loc, err);
    else if (!st) {
        s->store = s->local;
        st = locate(loc.key, &s->metadata_path, &s->dir, err);
        if (!st)
            st = load(s, pv, err);
        if (!st) {
            /* the directory as a key of the local store: absolute, normalised */
            sp_location_t dl;
            st = sp_location_parse(s->dir, &dl, err);
            if (!st) {
                s->dir_key = dl.key;
                dl.key = NULL;
                sp_location_free(&dl);
            }
        }
    }
    sp_location_free(&loc);
    if (!st) {
        st = sp_meta_decode(s->bytes, s->size, NULL, &s->meta, err);
        if (st)
            sp_error_set_file(err, s->metadata_path);
    }
    if (!st && !(flags & SP_OPEN_NO_PATH_CHECK)) {
        check_ctx_t c = {s, err};
        if (sp_meta_visit_refs(s->meta, check_ref, &c))
            st = SP_ERR_MALFORMED;
    }
    if (!st && s->meta->has_trailer &&
        sp_properties_decode(s->meta->trailer.ptr, s->meta->trailer.len, 0, &s->properties, NULL) == SP_OK)
        s->has_properties = true;
    if (st) {
        sp_snapshot_close(s);
        return st;
    }
    *out = s;
    return SP_OK;
}

void sp_snapshot_close(sp_snapshot_t *s)
{
    if (!s)
        return;
    priv_t *pv = s->priv_;
    sp_meta_free(s->meta);
    if (pv) {
        if (pv->map)
            munmap(pv->map, pv->maplen);
        free(pv->heap);
        s3_store_cache_free(pv->s3_stores);
        free(pv);
    }
    if (s->store != s->local)
        sp_store_close(s->store);
    sp_store_close(s->local);
    free(s->location);
    free(s->dir);
    free(s->dir_key);
    free(s->metadata_path);
    free(s);
}

bool sp_snapshot_local_path(const sp_snapshot_t *snap, const sp_ref_t *ref, char *out, size_t outsz)
{
    const char *p = (const char *)ref->path.ptr;
    size_t n = ref->path.len;
    switch (ref->kind) {
    case SP_REF_RELATIVE: {
        if (snap->store != snap->local)
            return false; /* inside an archive */
        int w = snprintf(out, outsz, "%s/%.*s", snap->dir, (int)n, p);
        return w >= 0 && (size_t)w < outsz;
    }
    case SP_REF_ABSOLUTE:
    case SP_REF_SEGMENT:
    case SP_REF_DIRECTORY:
        if (n >= 7 && memcmp(p, "file://", 7) == 0) {
            p += 7;
            n -= 7;
        } else if (n >= 5 && memcmp(p, "file:", 5) == 0) {
            p += 5;
            n -= 5;
        } else if (n == 0 || p[0] != '/') {
            return false; /* another scheme (s3://, hdfs://, ...) */
        }
        if (n + 1 > outsz)
            return false;
        memcpy(out, p, n);
        out[n] = '\0';
        return true;
    default:
        return false;
    }
}

sp_store_t *sp_snapshot_ref_location(const sp_snapshot_t *snap, const sp_ref_t *ref, char *key, size_t keysz)
{
    if (ref->kind == SP_REF_RELATIVE) {
        int w = snprintf(key, keysz, "%s%s%.*s", snap->dir_key, snap->dir_key[0] ? "/" : "", (int)ref->path.len,
                         (const char *)ref->path.ptr);
        return w >= 0 && (size_t)w < keysz ? snap->store : NULL;
    }
    if (ref->kind == SP_REF_INLINE)
        return NULL;
    char bucket[256];
    if (sp_s3_split_uri((const char *)ref->path.ptr, ref->path.len, bucket, sizeof bucket, key, keysz)) {
        /* s3://, s3a://, s3p:// name the same object: the snapshot's own bucket, or another one */
        priv_t *pv = snap->priv_;
        return s3_store_for_bucket(&pv->s3_stores, snap->store, bucket);
    }
    sp_ref_t abs = *ref;
    return sp_snapshot_local_path(snap, &abs, key, keysz) ? snap->local : NULL;
}
