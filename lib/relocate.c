/*
 * relocate.c - plan and carry out `sp relocate`: copy (or move) every file a
 * snapshot references to a new location, rewrite the handles that must
 * change, write the new `_metadata` (last for directories, first for
 * archives, which become visible only as a whole), verify the result, and
 * only then delete the source's own files.
 */
#define _GNU_SOURCE
#include "sp_relocate.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sp_dispose.h"
#include "sp_fs.h"
#include "sp_record.h"
#include "sp_verify.h"
#include "paths.h"
#include "strmap.h"

typedef struct plan_priv {
    strmap_t by_src;         /* "L:" / "S:" + src key -> file index */
    strmap_t by_dst;         /* dst_rel -> file index */
    sp_location_t dst;       /* parsed destination */
    char *dst_dir_key;       /* destination directory as a key of the destination store */
    char *dst_loc;           /* the destination directory as a location: the local path, or s3://bucket/prefix */
    bool dst_exists;         /* something is at the destination already (resume / reuse / complete) */
    bool finish_move_only;   /* an earlier --move got as far as deleting the source: only that is left */
    bool archive_complete;   /* the destination archive already holds exactly this relocation */
} plan_priv_t;

static char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");
    return p;
}

static char *join_key(const char *dir, const char *rel)
{
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s%s%s", dir, dir[0] && rel[0] ? "/" : "", rel);
    return k;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* ------------------------------------------------------------------ */
/* planning                                                            */
/* ------------------------------------------------------------------ */

typedef struct pctx {
    sp_snapshot_t *snap;
    sp_relocate_plan_t *plan;
    plan_priv_t *pv;
    uint32_t cap;
    sp_status_t status;
    sp_error_t *err;
    const char *real_dir;    /* realpath of a local source directory */
} pctx_t;

static sp_relocate_file_t *add_file(pctx_t *c, const char *src_key, bool src_local, int64_t size, bool external,
                                    bool unreferenced, uint32_t *index_out)
{
    char tagged[PATH_MAX + 4];
    snprintf(tagged, sizeof tagged, "%c:%s", src_local ? 'L' : 'S', src_key);
    uint32_t existing;
    if (!strmap_put(&c->pv->by_src, tagged, c->plan->n_files, &existing))
        return NULL;
    if (existing != UINT32_MAX) {
        c->plan->files[existing].references++;
        *index_out = existing;
        return &c->plan->files[existing];
    }
    if (c->plan->n_files == c->cap) {
        uint32_t ncap = c->cap ? c->cap * 2 : 64;
        sp_relocate_file_t *nf = realloc(c->plan->files, ncap * sizeof *nf);
        if (!nf)
            return NULL;
        c->plan->files = nf;
        c->cap = ncap;
    }
    sp_relocate_file_t *f = &c->plan->files[c->plan->n_files];
    memset(f, 0, sizeof *f);
    f->src_key = xstrdup(src_key);
    f->src_local = src_local;
    f->size = size;
    f->external = external;
    f->unreferenced = unreferenced;
    f->references = unreferenced ? 0 : 1;
    *index_out = c->plan->n_files++;
    return f->src_key ? f : NULL;
}

/* Choose the destination name: the relative place for files inside the
 * source directory, the base name (made unique) for gathered files. */
static bool assign_dst(pctx_t *c, uint32_t idx, const char *wanted)
{
    sp_relocate_file_t *f = &c->plan->files[idx];
    if (f->dst_rel)
        return true;
    char name[PATH_MAX], base[PATH_MAX];
    snprintf(base, sizeof base, "%s", f->external ? base_name(wanted) : wanted);
    if (f->external) {
        /* "x.sp-tmp-123" would look like a temporary file of a dead sp run, which later runs delete */
        for (char *t = strstr(base, ".sp-tmp-"); t; t = strstr(t, ".sp-tmp-"))
            t[3] = '_';
    }
    snprintf(name, sizeof name, "%s", f->external ? base : wanted);
    for (unsigned n = 1;; n++) {
        /* a gathered file never takes a name of sp's own at the top of the destination */
        bool reserved = f->external && (strcmp(name, "_metadata") == 0 || strncmp(name, ".sp-", 4) == 0);
        uint32_t existing;
        if (!reserved) {
            if (!strmap_put(&c->pv->by_dst, name, idx, &existing))
                return false;
            if (existing == UINT32_MAX || existing == idx)
                break;
        }
        snprintf(name, sizeof name, "ext-%u-%.4000s", n, f->external ? base : base_name(wanted));
    }
    f->dst_rel = xstrdup(name);
    return f->dst_rel != NULL;
}

static int plan_ref(const sp_ref_t *ref, void *user)
{
    pctx_t *c = user;
    if (ref->kind == SP_REF_INLINE)
        return 0;
    if (ref->kind == SP_REF_DIRECTORY)
        return 0; /* file-merging directories: recreated by their segments' files */
    char key[PATH_MAX];
    sp_store_t *store = sp_snapshot_ref_location(c->snap, ref, key, sizeof key);
    if (!store) {
        c->status = sp_error_set(c->err, SP_ERR_INVALID, ref->handle ? ref->handle->offset : SP_NO_OFFSET, "path",
                                 "cannot read the referenced file \"%.*s\": only local paths and file: URIs are "
                                 "supported by this build",
                                 (int)ref->path.len, (const char *)ref->path.ptr);
        return 1;
    }
    /* an absolute reference from a snapshot inside an archive (or in S3) reads the local file system */
    bool src_local = store == c->snap->local && c->snap->store != c->snap->local;
    if (store != c->snap->store && store != c->snap->local) {
        c->status = sp_error_set(c->err, SP_ERR_INVALID, ref->handle ? ref->handle->offset : SP_NO_OFFSET, "path",
                                 "the referenced file \"%.*s\" is in another bucket than the snapshot; relocate copies "
                                 "from the snapshot's own bucket (and local files) only",
                                 (int)ref->path.len, (const char *)ref->path.ptr);
        return 1;
    }
    const char *dir = c->snap->dir_key;
    size_t dl = strlen(dir);
    /* (absolute references into the directory: local paths of a local snapshot, s3:// keys of an S3 one) */
    bool inside = ref->kind == SP_REF_RELATIVE || (store == c->snap->store && strncmp(key, dir, dl) == 0 &&
                                                   key[dl] == '/' && !sp_path_has_dot_segments(key));
    if (inside && c->real_dir && strchr(key + dl + 1, '/')) {
        /* nested: no directory on the way may be a link leading out of the snapshot */
        char real[PATH_MAX];
        size_t rl = strlen(c->real_dir);
        if (realpath(key, real) && (strncmp(real, c->real_dir, rl) != 0 || real[rl] != '/')) {
            sp_error_set_file(c->err, key);
            c->status = sp_error_set(c->err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                     "the path leads out of the snapshot through a symbolic link (to %s); sp does "
                                     "not follow links out of a snapshot",
                                     real);
            return 1;
        }
    }
    sp_store_stat_t st;
    sp_status_t s = store->ops->stat(store, key, &st, c->err);
    if (s) {
        c->status = s;
        return 1;
    }
    if (!st.exists || st.is_dir) {
        sp_error_set_file(c->err, key);
        c->status = sp_error_set(c->err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "",
                                 "referenced file is missing; run sp verify, nothing was copied");
        return 1;
    }
    if (st.is_symlink) {
        sp_error_set_file(c->err, key);
        c->status = sp_error_set(c->err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                 "referenced file is a symbolic link; sp does not follow links out of a snapshot");
        return 1;
    }
    if (ref->kind != SP_REF_SEGMENT && ref->size >= 0 && st.size != ref->size) {
        sp_error_set_file(c->err, key);
        c->status = sp_error_set(c->err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                 "file has %lld bytes but the metadata records %lld; run sp verify, nothing was copied",
                                 (long long)st.size, (long long)ref->size);
        return 1;
    }
    uint32_t idx;
    sp_relocate_file_t *f = add_file(c, key, src_local, st.size, !inside, false, &idx);
    if (!f) {
        c->status = sp_error_set(c->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        return 1;
    }
    /* files of the snapshot keep their place; gathered ones are named after all of those (sp_relocate_plan),
     * so that they can never take a name a file of the snapshot needs */
    if (!f->dst_rel && inside &&
        !assign_dst(c, idx, key + (ref->kind == SP_REF_RELATIVE ? (dl ? dl + 1 : 0) : dl + 1))) {
        c->status = sp_error_set(c->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        return 1;
    }
    if (ref->kind != SP_REF_RELATIVE)
        c->plan->rewrites++;
    return 0;
}

typedef struct uctx {
    pctx_t *c;
    const char *dir;
} uctx_t;

static int plan_unreferenced(const sp_store_entry_t *e, void *user)
{
    uctx_t *u = user;
    pctx_t *c = u->c;
    char *key = join_key(u->dir, e->key);
    char tagged[PATH_MAX + 4];
    if (!key)
        return 1;
    snprintf(tagged, sizeof tagged, "S:%s", key);
    const char *name = base_name(e->key);
    bool ours = strcmp(e->key, "_metadata") == 0 || strcmp(name, SP_RELOCATE_JOURNAL) == 0 ||
                strcmp(name, SP_DISPOSE_JOURNAL) == 0 || strstr(name, ".sp-tmp-") != NULL ||
                (c->snap->metadata_path && strcmp(key, c->snap->metadata_path) == 0);
    if (!ours && strmap_get(&c->pv->by_src, tagged) == UINT32_MAX) {
        char **nu = realloc(c->plan->unreferenced, (c->plan->n_unreferenced + 1) * sizeof *nu);
        if (!nu) {
            free(key);
            return 1;
        }
        c->plan->unreferenced = nu;
        nu[c->plan->n_unreferenced++] = xstrdup(key);
    }
    free(key);
    return 0;
}

static sp_status_t journal_matches(sp_store_t *dst, const char *dst_dir, const sp_snapshot_t *snap, bool *matches,
                                   sp_error_t *err)
{
    *matches = false;
    char *jkey = join_key(dst_dir, SP_RELOCATE_JOURNAL);
    uint8_t *buf;
    size_t len;
    sp_store_stat_t st;
    sp_status_t s = dst->ops->stat(dst, jkey, &st, err);
    if (!s && st.exists && sp_store_read_all(dst, jkey, 1 << 26, &buf, &len, NULL) == SP_OK) {
        cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(j, "source_metadata");
        const cJSON *cp = cJSON_GetObjectItemCaseSensitive(j, "checkpoint_id");
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(j, "source_metadata_bytes");
        *matches = cJSON_IsString(src) && strcmp(src->valuestring, snap->metadata_path) == 0 && cJSON_IsNumber(cp) &&
                   (int64_t)cp->valuedouble == snap->meta->checkpoint_id && cJSON_IsNumber(sz) &&
                   (size_t)sz->valuedouble == snap->size;
        cJSON_Delete(j);
        free(buf);
    }
    free(jkey);
    return s;
}

static sp_status_t expected_metadata(sp_snapshot_t *snap, sp_relocate_plan_t *plan, uint8_t **bytes, size_t *len,
                                     sp_error_t *err);

/* Whether a local directory holds nothing but temporary files of sp runs that died. */
static bool only_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool only = true;
    struct dirent *e;
    while (only && (e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !sp_path_stale_temp(e->d_name) &&
            strcmp(e->d_name, ".sp-relocate.lock") != 0) /* a live owner is refused by take_lock() */
            only = false;
    closedir(d);
    return only;
}

/* Open and verify a snapshot at `location`; NULL unless it opens and has no problem. */
static sp_snapshot_t *open_verified(const char *location)
{
    sp_snapshot_t *d;
    sp_error_t e;
    if (sp_snapshot_open(location, 0, &d, &e) != SP_OK)
        return NULL;
    sp_verify_result_t vr;
    bool good = sp_verify(d, &vr, &e) == SP_OK && vr.n_problems == 0;
    if (good)
        sp_verify_result_free(&vr);
    if (!good) {
        sp_snapshot_close(d);
        return NULL;
    }
    return d;
}

/* The pid of a live process that holds the relocation lock of a local directory, or 0. */
static long live_lock_owner(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.sp-relocate.lock", dir) >= (int)sizeof path)
        return 0;
    long owner = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &owner) != 1)
            owner = 0;
        fclose(f);
    }
    if (owner > 0 && owner != (long)getpid() && (kill((pid_t)owner, 0) == 0 || errno == EPERM))
        return owner;
    return 0;
}

/* Whether a directory below `dir` (symlinks not followed) is the directory `want`: a destination inside
 * the source through a second mount of one of its subdirectories. */
static bool tree_has_dir(const char *dir, const struct stat *want, int depth)
{
    DIR *d = depth < 32 ? opendir(dir) : NULL;
    if (!d)
        return false;
    bool hit = false;
    struct dirent *e;
    char sub[PATH_MAX];
    while (!hit && (e = readdir(d))) {
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
            continue;
        hit = st.st_dev == want->st_dev && st.st_ino == want->st_ino;
        if (!hit && snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name) < (int)sizeof sub)
            hit = tree_has_dir(sub, want, depth + 1);
    }
    closedir(d);
    return hit;
}

/* The nearest existing directory of `path` (itself or an ancestor), stat'ed; false when none. */
static bool nearest_existing(const char *path, struct stat *out)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return false;
    for (;;) {
        if (stat(p, out) == 0 && S_ISDIR(out->st_mode))
            return true;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            return false;
        *slash = '\0';
    }
}

/* The real path of p, or for a p that does not exist yet, its parent's real path and its name. */
static bool real_path_of(const char *p, char *out)
{
    if (realpath(p, out))
        return true;
    const char *slash = strrchr(p, '/');
    char parent[PATH_MAX], rp[PATH_MAX];
    if (!slash || strlen(p) >= PATH_MAX)
        return false;
    snprintf(parent, sizeof parent, "%.*s", slash == p ? 1 : (int)(slash - p), p);
    if (!realpath(parent, rp))
        return false;
    int n = snprintf(out, PATH_MAX, "%s%s%s", rp, strcmp(rp, "/") != 0 ? "/" : "", slash + 1);
    return n > 0 && n < PATH_MAX; /* a truncated path names another file */
}

static bool same_or_nested(const char *a, const char *b)
{
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

/* Whether `path` or one of its existing ancestors is the directory `anc` (same device and inode): names
 * cannot show a second mount of one directory (a bind mount, the same NFS share or volume at two paths). */
static bool within_by_inode(const char *path, const struct stat *anc)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p)
        return false;
    for (;;) {
        struct stat st;
        if (stat(p, &st) == 0 && st.st_dev == anc->st_dev && st.st_ino == anc->st_ino)
            return true;
        char *slash = strrchr(p, '/');
        if (!slash || slash == p)
            return false;
        *slash = '\0';
    }
}

typedef struct arcchk {
    sp_snapshot_t *snap;
    sp_error_t *err;
    sp_status_t status;
} arcchk_t;

/* A reference that only an absolute path can express in the destination's metadata: a file-merging
 * segment, or any file reference before metadata version 3 (no relative handle). */
static int archive_refusal(const sp_ref_t *ref, void *user)
{
    arcchk_t *c = user;
    bool fixed = ref->kind == SP_REF_SEGMENT || (ref->kind == SP_REF_ABSOLUTE && c->snap->meta->version < 3);
    if (!fixed)
        return 0;
    sp_error_set_file(c->err, c->snap->metadata_path);
    c->status = sp_error_set(c->err, SP_ERR_INVALID, ref->handle ? ref->handle->offset : SP_NO_OFFSET, "path",
                             "%s cannot be rewritten as a relative reference in metadata version %d; relocate to "
                             "a directory instead of an archive",
                             ref->kind == SP_REF_SEGMENT ? "a file-merging segment" : "an absolute reference",
                             c->snap->meta->version);
    return 1;
}

sp_status_t sp_relocate_plan(sp_snapshot_t *snap, const char *dst, const sp_relocate_options_t *opts,
                             sp_relocate_plan_t *plan, sp_error_t *err)
{
    memset(plan, 0, sizeof *plan);
    plan_priv_t *pv = calloc(1, sizeof *pv);
    if (!pv)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    plan->priv_ = pv;
    plan->dst_display = xstrdup(dst);
    sp_status_t s = sp_location_parse(dst, &pv->dst, err);
    if (s)
        return s;
    if (pv->dst.kind == SP_LOC_LOCAL) {
        /* a destination under a symlinked directory (/flink/archive -> /mnt/..) is
         * written at its real place, so renames and deletes never pass a link */
        char *slash = strrchr(pv->dst.key, '/');
        char real[PATH_MAX];
        if (slash && slash != pv->dst.key) {
            *slash = '\0';
            bool ok = realpath(pv->dst.key, real) != NULL;
            *slash = '/';
            if (ok && strlen(real) + strlen(slash) < sizeof real) {
                strcat(real, slash);
                char *k = strdup(real);
                if (k) {
                    free(pv->dst.key);
                    pv->dst.key = k;
                }
            }
        }
    }
    plan->archive = pv->dst.kind == SP_LOC_ARCHIVE;
    size_t dl = strlen(dst);
    if (!plan->archive && dl > 1 && (dst[dl - 1] == '/' || (dst[dl - 1] == '.' && dst[dl - 2] == '/'))) {
        char *bare = xstrdup(dst);
        for (size_t bl; bare && (bl = strlen(bare)) > 1;) {
            if (bare[bl - 1] == '/')
                bare[bl - 1] = '\0'; /* "x.tar/" */
            else if (bl > 2 && bare[bl - 1] == '.' && bare[bl - 2] == '/')
                bare[bl - 2] = '\0'; /* "x.tar/." */
            else
                break;
        }
        bool arc = bare && sp_is_archive_name(bare);
        free(bare);
        if (arc)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "destination",
                                "%s names an archive but ends in '/' or '/.': drop that to write an archive, or choose "
                                "a directory name without an archive extension", dst);
    }
    pv->dst_dir_key = xstrdup(pv->dst.key);
    bool dst_s3 = pv->dst.kind == SP_LOC_S3;
    if (dst_s3) {
        size_t n = strlen(pv->dst.store_location) + strlen(pv->dst.key) + 2;
        if ((pv->dst_loc = malloc(n)))
            snprintf(pv->dst_loc, n, "%s%s%s", pv->dst.store_location, pv->dst.key[0] ? "/" : "", pv->dst.key);
    } else {
        pv->dst_loc = xstrdup(pv->dst.key);
    }
    if (!pv->dst_loc || !pv->dst_dir_key)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    bool src_is_dir = snap->store == snap->local;
    bool src_s3 = strcmp(snap->store->ops->name, "s3") == 0; /* a prefix of a bucket: a directory too */

    /* never into (or onto, or around) the source: checked before anything that exists there is looked at */
    const char *dst_path = plan->archive ? pv->dst.store_location : pv->dst_loc;
    const char *src_path = src_s3 ? snap->dir : src_is_dir ? snap->dir_key : snap->store->location;
    src_is_dir = src_is_dir || src_s3;
    char real_src[PATH_MAX], real_dst[PATH_MAX];
    bool clash = same_or_nested(dst_path, src_path) || (src_is_dir && same_or_nested(src_path, dst_path));
    if (!clash && realpath(src_path, real_src) && real_path_of(dst_path, real_dst))
        clash = same_or_nested(real_dst, real_src) || (src_is_dir && same_or_nested(real_src, real_dst));
    struct stat src_st, dst_st;
    if (!clash && !src_s3 && !dst_s3 && stat(src_path, &src_st) == 0) {
        clash = within_by_inode(dst_path, &src_st);
        if (!clash && src_is_dir && stat(dst_path, &dst_st) == 0 && S_ISDIR(dst_st.st_mode))
            clash = within_by_inode(src_path, &dst_st);
        struct stat near;
        if (!clash && src_is_dir && S_ISDIR(src_st.st_mode) && nearest_existing(dst_path, &near))
            clash = tree_has_dir(src_path, &near, 0);
    }
    if (clash)
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "destination",
                            "the destination is the source snapshot, lies inside it or contains it");

    /* --move deletes the source: its ownership record must allow that (checked before anything is copied or
     * renamed) */
    if (opts && opts->move && snap->store != snap->local && snap->dir_key[0] &&
        strcmp(snap->store->ops->name, "archive") == 0)
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "--move of a folder inside an archive would delete the whole archive; relocate without "
                            "--move, then dispose of the archive when nothing else in it is needed");
    if (opts && opts->move) {
        char warning[1024] = "";
        sp_record_check_options_t ro = {.force = opts->force, .query = opts->record_query,
                                        .query_user = opts->record_query_user, .warning = warning,
                                        .warning_size = sizeof warning};
        if ((s = sp_record_check_delete_ex(src_path, &ro, err)))
            return s;
        if (warning[0])
            plan->record_warning = strdup(warning);
    }

    /* the destination must be new, or an unfinished run of this relocation, or already hold exactly its result */
    sp_store_t *local; /* the store the destination is in (local file system, or its bucket) */
    if ((s = dst_s3 ? sp_store_open_location(&pv->dst, false, 0, &local, err) : sp_store_open_local(&local, err)))
        return s;
    sp_store_stat_t st;
    bool check_complete = false;
    s = local->ops->stat(local, dst_s3 ? pv->dst.key : dst_path, &st, err);
    if (!s && st.exists) {
        pv->dst_exists = true;
        bool resume = false, refuse = false, usable = !st.is_symlink && st.is_dir != plan->archive;
        if (usable && !plan->archive)
            s = journal_matches(local, pv->dst.key, snap, &resume, err);
        char djournal[PATH_MAX];
        snprintf(djournal, sizeof djournal, "%s%s%s", src_is_dir ? snap->dir_key : "",
                 src_is_dir && snap->dir_key[0] ? "/" : "", SP_DISPOSE_JOURNAL);
        sp_store_stat_t js;
        sp_snapshot_t *done = NULL;
        long owner = usable && !plan->archive && !dst_s3 ? live_lock_owner(pv->dst.key) : 0;
        if (owner) {
            /* not interrupted: running (the lock is taken again, atomically, before anything is written) */
            sp_error_set_file(err, dst_path);
            sp_store_close(local);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "another sp relocate (pid %ld) is writing into this destination", owner);
        }
        if (s || resume) {
            /* an unfinished run of this relocation */
        } else if (usable && !plan->archive && !dst_s3 && only_stale_temps(pv->dst.key)) {
            /* an empty directory, or what a run killed while writing its journal left: start afresh */
        } else if (usable && opts && opts->move && src_is_dir &&
                   snap->store->ops->stat(snap->store, djournal, &js, NULL) == SP_OK && js.exists &&
                   (done = open_verified(plan->archive ? plan->dst_display : pv->dst_loc)) != NULL &&
                   done->meta->checkpoint_id == snap->meta->checkpoint_id) {
            /* a --move that was interrupted while it deleted the (verified-copied) source */
            pv->finish_move_only = true;
            resume = true;
        } else if (usable) {
            check_complete = true; /* decided once the plan is known */
        } else {
            refuse = true;
        }
        sp_snapshot_close(done);
        if (refuse) {
            sp_error_set_file(err, dst_path);
            s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                             "the destination already exists; relocate writes only to a new location");
        }
        plan->resume = resume;
    }
    sp_store_close(local);
    if (s)
        return s;
    if (pv->finish_move_only)
        return SP_OK; /* the source is partly deleted already: nothing to copy */

    char real_dir[PATH_MAX];
    pctx_t c = {snap, plan, pv, 0, SP_OK, err, src_is_dir && realpath(snap->dir, real_dir) ? real_dir : NULL};
    if (sp_meta_visit_refs(snap->meta, plan_ref, &c))
        return c.status ? c.status : SP_ERR_NOMEM;
    /* unreferenced files of the source directory */
    uctx_t u = {&c, snap->dir_key};
    if (snap->store->ops->list) {
        s = snap->store->ops->list(snap->store, snap->dir_key, plan_unreferenced, &u, err);
        if (s)
            return s;
    }
    if (opts && opts->include_unreferenced) {
        for (uint32_t i = 0; i < plan->n_unreferenced; i++) {
            sp_store_stat_t us;
            uint32_t idx;
            if (snap->store->ops->stat(snap->store, plan->unreferenced[i], &us, err))
                return err ? err->code : SP_ERR_IO;
            /* only regular files are copied: a symlink, directory or FIFO left in a
             * snapshot directory is reported as unreferenced and left alone */
            struct stat ls;
            if (us.is_symlink || us.is_dir ||
                (snap->store == snap->local && (lstat(plan->unreferenced[i], &ls) != 0 || !S_ISREG(ls.st_mode))))
                continue;
            if (!add_file(&c, plan->unreferenced[i], false, us.size, false, true, &idx) ||
                !assign_dst(&c, idx, plan->unreferenced[i] + strlen(snap->dir_key) + (snap->dir_key[0] ? 1 : 0)))
                return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        }
    }
    /* files gathered from outside: named last, by their base name, made unique */
    for (uint32_t i = 0; i < plan->n_files; i++)
        if (!plan->files[i].dst_rel && !assign_dst(&c, i, base_name(plan->files[i].src_key)))
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    for (uint32_t i = 0; i < plan->n_files; i++)
        plan->total_bytes += plan->files[i].size > 0 ? (uint64_t)plan->files[i].size : 0;
    if (plan->archive) {
        /* an archive has no absolute path to rewrite to: what cannot become relative is refused now, before
         * anything is written (the same check as the rewrite makes) */
        arcchk_t ac = {snap, err, SP_OK};
        sp_meta_visit_refs(snap->meta, archive_refusal, &ac);
        if (ac.status)
            return ac.status;
    }

    if (check_complete) {
        /* something is there already: fine only if it is exactly what this relocation writes, complete */
        sp_snapshot_t *d = open_verified(plan->archive ? plan->dst_display : pv->dst_loc);
        uint8_t *want = NULL;
        size_t want_len = 0;
        bool same = false;
        if (d && expected_metadata(snap, plan, &want, &want_len, NULL) == SP_OK)
            same = want_len == d->size && memcmp(want, d->bytes, want_len) == 0;
        free(want);
        sp_snapshot_close(d);
        if (!same) {
            sp_error_set_file(err, dst_path);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "the destination already exists; relocate writes only to a new location");
        }
        plan->resume = true;
        plan->complete = true;
        pv->archive_complete = plan->archive;
    }

    if (opts && opts->move && !plan->archive && src_is_dir && !src_s3 && !dst_s3 && !pv->dst_exists) {
        /* one rename moves everything when nothing comes from outside, nothing would be left behind, and no
         * handle needs rewriting (the rewritten _metadata could only be written after the rename: a crash in
         * between would leave a destination whose metadata points at the vanished source) */
        bool gathered = false;
        for (uint32_t i = 0; i < plan->n_files && !gathered; i++)
            gathered = plan->files[i].external;
        sp_store_stat_t ds;
        char *parent = xstrdup(pv->dst.key);
        char *slash = parent ? strrchr(parent, '/') : NULL;
        if (slash && slash != parent)
            *slash = '\0';
        bool same_dev = false;
        sp_store_stat_t ss;
        if (parent && snap->local->ops->stat(snap->local, parent, &ds, NULL) == SP_OK && ds.exists &&
            snap->local->ops->stat(snap->local, snap->dir_key, &ss, NULL) == SP_OK)
            same_dev = ds.device == ss.device && !ss.is_symlink;
        free(parent);
        plan->rename_whole = same_dev && !gathered && plan->rewrites == 0 &&
                             (plan->n_unreferenced == 0 || opts->include_unreferenced);
    }
    return SP_OK;
}

/* ------------------------------------------------------------------ */
/* rewriting the model                                                 */
/* ------------------------------------------------------------------ */

typedef struct rctx {
    sp_snapshot_t *snap;
    sp_relocate_plan_t *plan;
    const char *dst_abs;     /* absolute destination directory (for V0-V2 and segments) */
    sp_status_t status;
    sp_error_t *err;
} rctx_t;

static int rewrite_ref(const sp_ref_t *ref, void *user)
{
    rctx_t *c = user;
    if (ref->kind == SP_REF_INLINE || ref->kind == SP_REF_RELATIVE || ref->kind == SP_REF_DIRECTORY || !ref->handle)
        return 0;
    plan_priv_t *pv = c->plan->priv_;
    char key[PATH_MAX], tagged[PATH_MAX + 4];
    sp_store_t *store = sp_snapshot_ref_location(c->snap, ref, key, sizeof key);
    bool src_local = store == c->snap->local && c->snap->store != c->snap->local;
    snprintf(tagged, sizeof tagged, "%c:%s", src_local ? 'L' : 'S', key);
    uint32_t idx = strmap_get(&pv->by_src, tagged);
    if (idx == UINT32_MAX)
        return 0;
    const sp_relocate_file_t *f = &c->plan->files[idx];
    sp_metadata_t *m = c->snap->meta;
    sp_handle_t *h = ref->handle;
    if (ref->kind == SP_REF_ABSOLUTE && m->version >= 3) {
        /* FileStateHandle -> RelativeFileStateHandle, as Flink writes exclusive files */
        int64_t size = h->u.file.size >= 0 ? h->u.file.size : f->size;
        h->tag = SP_TAG_RELATIVE;
        h->u.relative.path = sp_meta_str(m, f->dst_rel, strlen(f->dst_rel));
        h->u.relative.size = size;
        return 0;
    }
    if (!c->dst_abs) {
        sp_error_set_file(c->err, c->snap->metadata_path);
        c->status = sp_error_set(c->err, SP_ERR_INVALID, h->offset, "path",
                                 "%s cannot be rewritten as a relative reference in metadata version %d; relocate to "
                                 "a directory instead of an archive",
                                 ref->kind == SP_REF_SEGMENT ? "a file-merging segment" : "an absolute reference",
                                 m->version);
        return 1;
    }
    char path[PATH_MAX * 2];
    snprintf(path, sizeof path, "%s%s/%s", strstr(c->dst_abs, "://") ? "" : "file:", c->dst_abs, f->dst_rel);
    if (ref->kind == SP_REF_SEGMENT)
        h->u.segment.path = sp_meta_str(m, path, strlen(path));
    else
        h->u.file.path = sp_meta_str(m, path, strlen(path));
    return 0;
}

/* The _metadata this plan writes, computed on a copy of the model (snap->meta is left as it is). */
static sp_status_t expected_metadata(sp_snapshot_t *snap, sp_relocate_plan_t *plan, uint8_t **bytes, size_t *len,
                                     sp_error_t *err)
{
    plan_priv_t *pv = plan->priv_;
    sp_snapshot_t copy = *snap;
    sp_status_t s = sp_meta_decode(snap->bytes, snap->size, NULL, &copy.meta, err);
    if (s)
        return s;
    rctx_t rc = {&copy, plan, plan->archive ? NULL : pv->dst_loc, SP_OK, err};
    if (sp_meta_visit_refs(copy.meta, rewrite_ref, &rc))
        s = rc.status ? rc.status : SP_ERR_NOMEM;
    if (!s)
        s = sp_meta_encode(copy.meta, bytes, len, err);
    sp_meta_free(copy.meta);
    return s;
}

/* Remove what sp processes that died left under a destination directory
 * (temporary files: a resumed run makes its own). */
static int drop_stale(const sp_store_entry_t *e, void *user)
{
    const char *dir = user;
    const char *name = base_name(e->key);
    if (sp_path_stale_temp(name)) {
        char *k = join_key(dir, e->key);
        sp_store_t *local;
        if (k && sp_store_open_local(&local, NULL) == SP_OK) {
            local->ops->remove(local, k, NULL);
            sp_store_close(local);
        }
        free(k);
    }
    return 0;
}

static void clean_stale(const plan_priv_t *pv, bool archive)
{
    if (!archive) {
        sp_store_t *local;
        if (sp_store_open_local(&local, NULL) == SP_OK) {
            local->ops->list(local, pv->dst.key, drop_stale, pv->dst.key, NULL);
            sp_store_close(local);
        }
        return;
    }
    /* "<archive>.sp-tmp-<pid>" beside the archive */
    const char *path = pv->dst.store_location;
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash && slash != path ? (int)(slash - path) : 1, path);
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, base, bl) == 0 && strncmp(e->d_name + bl, ".sp-tmp-", 8) == 0 && sp_path_stale_temp(e->d_name))
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
}

/* ------------------------------------------------------------------ */
/* copying                                                             */
/* ------------------------------------------------------------------ */

typedef struct job {
    sp_snapshot_t *snap;
    sp_relocate_plan_t *plan;
    const sp_relocate_options_t *opts;
    sp_store_t *dst;
    const char *dst_dir;
    pthread_mutex_t lock;
    uint32_t next;
    uint64_t done_bytes, copied, skipped;
    uint64_t copied_bytes;   /* done_bytes without the files an earlier run completed */
    sp_status_t status;
    sp_error_t err;
} job_t;

static sp_status_t same_content(sp_store_t *a, const char *ka, sp_store_t *b, const char *kb, sp_error_t *err)
{
    sp_store_reader_t *ra, *rb;
    sp_status_t s = a->ops->open_read(a, ka, &ra, err);
    if (s)
        return s;
    if ((s = b->ops->open_read(b, kb, &rb, err))) {
        a->ops->close_read(ra);
        return s;
    }
    enum { N = 1 << 20 };
    uint8_t *x = malloc(N), *y = malloc(N);
    size_t xl = 0, yl = 0;
    while (!s && x && y) {
        size_t gx, gy;
        if ((s = a->ops->read(ra, x + xl, N - xl, &gx, err)) || (s = b->ops->read(rb, y + yl, N - yl, &gy, err)))
            break;
        xl += gx;
        yl += gy;
        size_t n = xl < yl ? xl : yl;
        if (memcmp(x, y, n) != 0) {
            sp_error_set_file(err, kb);
            s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the copy differs from its source %s", ka);
            break;
        }
        memmove(x, x + n, xl - n);
        memmove(y, y + n, yl - n);
        xl -= n;
        yl -= n;
        if (gx == 0 && gy == 0) {
            if (xl || yl) {
                sp_error_set_file(err, kb);
                s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the copy differs in length from %s", ka);
            }
            break;
        }
    }
    if (!x || !y)
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    free(x);
    free(y);
    a->ops->close_read(ra);
    b->ops->close_read(rb);
    return s;
}

static sp_status_t copy_one(job_t *j, uint32_t i, sp_error_t *err, bool *skipped)
{
    const sp_relocate_file_t *f = &j->plan->files[i];
    sp_store_t *src = f->src_local ? j->snap->local : j->snap->store;
    char *dkey = join_key(j->dst_dir, f->dst_rel);
    if (!dkey)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    sp_store_stat_t st;
    sp_status_t s = SP_OK;
    *skipped = false;
    if (j->plan->resume && j->dst->ops->stat(j->dst, dkey, &st, NULL) == SP_OK && st.exists && st.size == f->size)
        *skipped = true; /* complete from an earlier run (it was renamed into place only when whole) */
    else
        s = sp_store_copy(src, f->src_key, j->dst, dkey, NULL, err);
    if (!s && !j->plan->archive) {
        s = j->dst->ops->stat(j->dst, dkey, &st, err);
        if (!s && (!st.exists || st.size != f->size)) {
            sp_error_set_file(err, dkey);
            s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the copy has %lld bytes, expected %lld",
                             (long long)st.size, (long long)f->size);
        }
        if (!s && j->opts->checksum) {
            s = same_content(src, f->src_key, j->dst, dkey, err);
            /* a copy that differs must not stay under its final name, or a later
             * run would take it as complete */
            if (s)
                j->dst->ops->remove(j->dst, dkey, NULL);
        }
    }
    free(dkey);
    return s;
}

static void progress(job_t *j, uint64_t bytes, bool skipped)
{
    pthread_mutex_lock(&j->lock);
    j->done_bytes += bytes;
    if (skipped) {
        j->skipped++;
    } else {
        j->copied++;
        j->copied_bytes += bytes;
    }
    if (j->opts->progress)
        j->opts->progress(j->done_bytes, j->plan->total_bytes, j->opts->progress_user);
    pthread_mutex_unlock(&j->lock);
}

static void *worker(void *arg)
{
    job_t *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        uint32_t i = j->status ? j->plan->n_files : j->next++;
        pthread_mutex_unlock(&j->lock);
        if (i >= j->plan->n_files)
            break;
        sp_error_t e;
        sp_error_clear(&e);
        bool skipped;
        sp_status_t s = copy_one(j, i, &e, &skipped);
        if (s) {
            pthread_mutex_lock(&j->lock);
            if (!j->status) {
                j->status = s;
                j->err = e;
            }
            pthread_mutex_unlock(&j->lock);
            break;
        }
        progress(j, j->plan->files[i].size > 0 ? (uint64_t)j->plan->files[i].size : 0, skipped);
    }
    return NULL;
}

static sp_status_t copy_parallel(job_t *j, sp_error_t *err)
{
    int n = j->opts->jobs > 0 ? j->opts->jobs : 8;
    if (j->plan->archive)
        n = 1; /* an archive is written one entry after another */
    if ((uint32_t)n > j->plan->n_files)
        n = j->plan->n_files ? (int)j->plan->n_files : 1;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    if (!t)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    int started = 0;
    if (n == 1) {
        worker(j);
    } else {
        for (; started < n; started++)
            if (pthread_create(&t[started], NULL, worker, j) != 0)
                break;
        if (started == 0)
            worker(j);
        for (int i = 0; i < started; i++)
            pthread_join(t[i], NULL);
    }
    free(t);
    if (j->status && err)
        *err = j->err;
    return j->status;
}

/* Archives are read in one pass: copy each planned entry as it comes by. */
typedef struct scanctx {
    job_t *j;
    strmap_t wanted; /* src key -> file index */
} scanctx_t;

static int scan_entry(const sp_store_entry_t *e, sp_store_reader_t *r, void *user)
{
    scanctx_t *sc = user;
    job_t *j = sc->j;
    uint32_t i = strmap_get(&sc->wanted, e->key);
    if (i == UINT32_MAX)
        return 0;
    const sp_relocate_file_t *f = &j->plan->files[i];
    char *dkey = join_key(j->dst_dir, f->dst_rel);
    sp_store_writer_t *w = NULL;
    sp_status_t s = dkey ? j->dst->ops->open_write(j->dst, dkey, f->size, &w, &j->err)
                         : sp_error_set(&j->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    enum { N = 1 << 20 };
    uint8_t *buf = malloc(N);
    if (!s && !buf)
        s = sp_error_set(&j->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    while (!s) {
        size_t got;
        s = j->snap->store->ops->read(r, buf, N, &got, &j->err);
        if (s || got == 0)
            break;
        s = j->dst->ops->write(w, buf, got, &j->err);
    }
    free(buf);
    if (!s)
        s = j->dst->ops->commit(w, &j->err);
    else if (w)
        j->dst->ops->abort(w);
    free(dkey);
    if (s) {
        j->status = s;
        return 1;
    }
    progress(j, f->size > 0 ? (uint64_t)f->size : 0, false);
    return 0;
}

static sp_status_t copy_from_scan(job_t *j, sp_error_t *err)
{
    scanctx_t sc = {j, {0}};
    for (uint32_t i = 0; i < j->plan->n_files; i++) {
        if (j->plan->files[i].src_local) {
            /* external local files referenced from inside an archive */
            bool skipped;
            sp_status_t s = copy_one(j, i, err, &skipped);
            if (s)
                return s;
            progress(j, (uint64_t)j->plan->files[i].size, skipped);
        } else if (!strmap_put(&sc.wanted, j->plan->files[i].src_key, i, NULL)) {
            strmap_free(&sc.wanted);
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        }
    }
    sp_status_t s = j->snap->store->ops->scan(j->snap->store, scan_entry, &sc, err);
    strmap_free(&sc.wanted);
    /* scan_entry stops the scan by returning 1, which scan() hands back as it is: the error is in j */
    if (j->status) {
        s = j->status;
        if (err)
            *err = j->err;
    }
    if (!s && j->copied + j->skipped < j->plan->n_files)
        s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "%llu referenced entries were not found in the archive",
                         (unsigned long long)(j->plan->n_files - j->copied - j->skipped));
    return s;
}

/* --checksum into an archive: every entry, read back in one pass, against its source, byte for byte. */
typedef struct cmpctx {
    sp_snapshot_t *snap;
    const sp_relocate_plan_t *plan;
    sp_store_t *arc;   /* the archive being read */
    strmap_t by_key;   /* archive entry key -> file index */
    uint32_t compared;
    sp_status_t status;
    sp_error_t *err;
} cmpctx_t;

static int compare_entry(const sp_store_entry_t *e, sp_store_reader_t *r, void *user)
{
    cmpctx_t *c = user;
    uint32_t i = strmap_get(&c->by_key, e->key);
    if (i == UINT32_MAX)
        return 0; /* _metadata, directories */
    const sp_relocate_file_t *f = &c->plan->files[i];
    sp_store_t *src = f->src_local ? c->snap->local : c->snap->store;
    sp_store_reader_t *sr = NULL;
    enum { N = 1 << 20 };
    uint8_t *x = malloc(N), *y = malloc(N);
    sp_status_t s = x && y ? src->ops->open_read(src, f->src_key, &sr, c->err)
                           : sp_error_set(c->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    bool same = true;
    while (!s && same) {
        size_t gx = 0, gy = 0, want;
        s = c->arc->ops->read(r, x, N, &gx, c->err);
        /* fill the same amount from the source (its reads may come in smaller pieces) */
        for (want = gx; !s && gy < want;) {
            size_t g = 0;
            s = src->ops->read(sr, y + gy, want - gy, &g, c->err);
            if (!g)
                break;
            gy += g;
        }
        if (s)
            break;
        same = gx == gy && memcmp(x, y, gx) == 0;
        if (gx == 0) {
            size_t extra = 0;
            if (src->ops->read(sr, y, 1, &extra, c->err) == SP_OK && extra)
                same = false; /* the source goes on */
            break;
        }
    }
    if (sr)
        src->ops->close_read(sr);
    free(x);
    free(y);
    if (!s && !same) {
        sp_error_set_file(c->err, f->src_key);
        s = sp_error_set(c->err, SP_ERR_IO, SP_NO_OFFSET, "", "the archive's copy (%s) differs from the source",
                         e->key);
    }
    c->compared += !s;
    c->status = s;
    return s ? 1 : 0;
}

static sp_status_t archive_same_content(sp_snapshot_t *snap, const sp_relocate_plan_t *plan, const char *archive,
                                        const char *dst_dir, sp_error_t *err)
{
    cmpctx_t c;
    memset(&c, 0, sizeof c);
    c.snap = snap;
    c.plan = plan;
    c.err = err;
    for (uint32_t i = 0; i < plan->n_files; i++) {
        char *k = join_key(dst_dir, plan->files[i].dst_rel);
        bool put = k && strmap_put(&c.by_key, k, i, NULL);
        free(k);
        if (!put) {
            strmap_free(&c.by_key);
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        }
    }
    sp_store_t *a;
    sp_status_t s = sp_store_open_archive(archive, false, 0, &a, err);
    if (!s) {
        c.arc = a;
        s = a->ops->scan(a, compare_entry, &c, err);
        if (!s)
            s = c.status;
        sp_store_close(a);
    }
    if (!s && c.compared != plan->n_files) {
        sp_error_set_file(err, archive);
        s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the archive holds %u of the %u files written", c.compared,
                         plan->n_files);
    }
    strmap_free(&c.by_key);
    return s;
}

/* ------------------------------------------------------------------ */
/* running                                                             */
/* ------------------------------------------------------------------ */

static sp_status_t write_journal(sp_store_t *dst, const char *dst_dir, const sp_snapshot_t *snap,
                                 const sp_relocate_plan_t *plan, sp_error_t *err)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "sp", "relocate");
    cJSON_AddNumberToObject(j, "schema_version", 1);
    cJSON_AddStringToObject(j, "state", "incomplete: a relocation into this directory has not finished; "
                                         "run the same sp relocate command again to finish it");
    cJSON_AddStringToObject(j, "source", snap->location);
    cJSON_AddStringToObject(j, "source_metadata", snap->metadata_path);
    cJSON_AddNumberToObject(j, "source_metadata_bytes", (double)snap->size);
    cJSON_AddNumberToObject(j, "checkpoint_id", (double)snap->meta->checkpoint_id);
    cJSON_AddNumberToObject(j, "files", plan->n_files);
    cJSON_AddNumberToObject(j, "bytes", (double)plan->total_bytes);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    if (!text)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    char *key = join_key(dst_dir, SP_RELOCATE_JOURNAL);
    sp_status_t s = key ? sp_store_write_all(dst, key, text, strlen(text), err)
                        : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    free(key);
    free(text);
    return s;
}

/*
 * An archive this run has just written and finished, verified without a
 * second pass over it.  finish() has already checked the file on disk
 * (store_archive.c, "checking what was written": fsynced, opened again by
 * name, every byte written present, the zstd frame or the tar complete, and
 * the tar stream holding exactly the entries of the writer's index).  What
 * is left is what sp_verify() would check: every planned file is an entry
 * of the writer's index with the size the source has (and the metadata
 * records: the plan checked that), and the _metadata read back from the
 * archive's first entry is byte for byte the one encoded and decoded
 * above, so its references are the planned files.  A full decompression
 * pass (sp_verify on the archive opened anew) would read the same bytes
 * back from the page cache; relocate --checksum still does it.
 */
static sp_status_t verify_archive_written(sp_store_t *dst, const sp_relocate_plan_t *plan, const char *dst_dir,
                                          const char *mkey, const uint8_t *bytes, size_t len, sp_error_t *err)
{
    sp_status_t s = SP_OK;
    for (uint32_t i = 0; i < plan->n_files && !s; i++) {
        const sp_relocate_file_t *f = &plan->files[i];
        char *key = join_key(dst_dir, f->dst_rel);
        sp_store_stat_t st;
        s = key ? dst->ops->stat(dst, key, &st, err) : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        if (!s && (!st.exists || st.is_dir || st.size != f->size)) {
            sp_error_set_file(err, plan->dst_display);
            s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the destination does not verify: entry %s %s", key,
                             !st.exists ? "is missing" : "does not have the size of its source");
        }
        free(key);
    }
    uint8_t *back = NULL;
    size_t blen = 0;
    if (!s)
        s = sp_store_read_all(dst, mkey, len + 1, &back, &blen, err);
    if (!s && (blen != len || memcmp(back, bytes, len) != 0)) {
        sp_error_set_file(err, plan->dst_display);
        s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the destination does not verify: %s differs from the "
                         "metadata written", mkey);
    }
    free(back);
    return s;
}

static sp_status_t verify_destination(const char *location, uint64_t *problems, sp_error_t *err)
{
    sp_snapshot_t *d;
    sp_status_t s = sp_snapshot_open(location, 0, &d, err);
    if (s)
        return s;
    sp_verify_result_t vr;
    s = sp_verify(d, &vr, err);
    if (!s) {
        *problems = vr.n_problems;
        if (vr.n_problems) {
            char key[PATH_MAX];
            sp_store_t *st = sp_snapshot_ref_location(d, &vr.problems[0].ref, key, sizeof key);
            sp_error_set_file(err, st ? key : location);
            s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the destination does not verify: %u problem%s (%s)",
                             vr.n_problems, vr.n_problems == 1 ? "" : "s", sp_problem_name(vr.problems[0].problem));
        }
        sp_verify_result_free(&vr);
    }
    sp_snapshot_close(d);
    return s;
}

/* The source's local ownership record (pins, restores, who triggered it) follows the snapshot to its new
 * place before the source goes (dispose removes the source's record): written
 * atomically beside the destination, with the "snapshot" name updated.  An
 * archive or S3 destination gets it only when it is a local archive. */
static sp_status_t move_record(const char *src_path, const char *dst_path, sp_error_t *err)
{
    char *from = sp_record_path(src_path), *to = sp_record_path(dst_path);
    if (!from || !to) {
        free(from);
        free(to);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    struct stat fs, ts, ds;
    bool stale_to = lstat(dst_path, &ds) != 0; /* a record beside nothing speaks for no snapshot */
    sp_status_t s = SP_OK;
    if (lstat(from, &fs) == 0 && S_ISREG(fs.st_mode) && (lstat(to, &ts) != 0 || stale_to)) {
        char *text = NULL;
        size_t len = 0;
        s = sp_fs_read_all(from, &text, &len, err);
        cJSON *j = s ? NULL : cJSON_ParseWithLength(text, len);
        free(text);
        if (!s && !j) {
            sp_error_set_file(err, from);
            s = sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "", "the ownership record is not JSON");
        }
        if (!s) {
            const char *slash = strrchr(dst_path, '/');
            if (cJSON_GetObjectItemCaseSensitive(j, "snapshot"))
                cJSON_ReplaceItemInObjectCaseSensitive(j, "snapshot", cJSON_CreateString(slash ? slash + 1 : dst_path));
            char *out = cJSON_Print(j);
            /* durable (written aside, fsynced, renamed, directory fsynced) before the source can go */
            s = out ? sp_fs_write_atomic(to, out, strlen(out), true, err)
                    : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
            free(out);
        }
        cJSON_Delete(j);
        if (s && err)
            snprintf(err->message + strlen(err->message), sizeof err->message - strlen(err->message),
                     " (the ownership record could not follow the snapshot: the source is kept)");
    }
    free(from);
    free(to);
    return s;
}

/* The local path (directory or archive file) of the snapshot, for its record; NULL for S3. */
static const char *source_path(const sp_snapshot_t *snap)
{
    if (snap->store == snap->local)
        return snap->dir_key;
    return strcmp(snap->store->ops->name, "archive") == 0 ? snap->store->location : NULL;
}

static sp_status_t finish_move(sp_snapshot_t *snap, const char *dst_path, const sp_relocate_options_t *opts,
                               sp_relocate_result_t *res, sp_error_t *err)
{
    /* the plan checked the record already (and printed what force overrode): the same verdict here */
    sp_dispose_options_t dopts = {.moved_to = dst_path, .force = opts->force, .record_query = opts->record_query,
                                  .record_query_user = opts->record_query_user};
    const char *src = source_path(snap);
    sp_status_t rs = src && dst_path && dst_path[0] == '/' ? move_record(src, dst_path, err) : SP_OK;
    if (rs)
        return rs;
    sp_dispose_result_t dres;
    char *loc = xstrdup(snap->dir);
    bool archive = strcmp(snap->store->ops->name, "archive") == 0;
    if (archive) {
        free(loc);
        loc = xstrdup(snap->store->location);
    }
    sp_status_t s = sp_dispose(loc, &dopts, &dres, err);
    free(loc);
    if (!s)
        res->source_deleted = true;
    sp_dispose_result_free(&dres);
    return s;
}

/* One relocation at a time into a local directory: two runs that both saw the
 * destination missing must not both write into it (the loser would mix its
 * files and _metadata with the winner's).  The lock names the owner's pid; a
 * lock whose process is gone is taken over. */
static sp_status_t take_lock(const char *dir, char **out, sp_error_t *err)
{
    *out = NULL;
    char *path = join_key(dir, ".sp-relocate.lock");
    if (path && sp_fs_mkdirs_parent(dir) != 0) {
        sp_error_set_file(err, dir);
        free(path);
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot create the destination's parent: %s",
                            strerror(errno));
    }
    if (!path || mkdir(dir, 0755) != 0) {
        if (path && errno != EEXIST) {
            sp_error_set_file(err, dir);
            free(path);
            return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot create the destination: %s", strerror(errno));
        }
    }
    for (int attempt = 0; path && attempt < 2; attempt++) {
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (write(fd, pid, (size_t)n) != n) { /* the lock still holds without its pid */ }
            close(fd);
            *out = path;
            return SP_OK;
        }
        if (errno != EEXIST)
            break;
        long owner = live_lock_owner(dir);
        if (owner) {
            sp_error_set_file(err, dir);
            free(path);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "another sp relocate (pid %ld) is writing into this destination", owner);
        }
        unlink(path); /* left by a process that is gone */
    }
    sp_error_set_file(err, path ? path : dir);
    free(path);
    return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot lock the destination: %s", strerror(errno));
}

static void release_lock(char *path)
{
    if (path) {
        unlink(path);
        free(path);
    }
}

/* Where the relocated snapshot lives: the local directory or archive file (absolute), or the S3 prefix. */
static const char *final_path(const sp_relocate_plan_t *plan)
{
    const plan_priv_t *pv = plan->priv_;
    return plan->archive ? pv->dst.store_location : pv->dst_loc;
}

sp_status_t sp_relocate_run(sp_snapshot_t *snap, sp_relocate_plan_t *plan, const sp_relocate_options_t *opts,
                            sp_relocate_result_t *res, sp_error_t *err)
{
    memset(res, 0, sizeof *res);
    plan_priv_t *pv = plan->priv_;
    sp_relocate_options_t defaults = {0};
    if (!opts)
        opts = &defaults;
    sp_status_t s;

    if (pv->finish_move_only || pv->archive_complete) {
        /* the destination is complete already: verify it again, then (--move) finish deleting the source */
        uint64_t problems = 0;
        char *where = plan->archive ? xstrdup(plan->dst_display) : xstrdup(pv->dst_loc);
        s = where ? verify_destination(where, &problems, err)
                  : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        free(where);
        if (s)
            return s;
        res->files_skipped = plan->n_files;
        res->metadata_location = plan->archive ? xstrdup(plan->dst_display) : join_key(pv->dst_loc, "_metadata");
        if (plan->archive)
            clean_stale(pv, true);
        return opts->move ? finish_move(snap, final_path(plan), opts, res, err) : SP_OK;
    }
    if ((pv->dst_exists || plan->archive) && pv->dst.kind != SP_LOC_S3)
        clean_stale(pv, plan->archive); /* temporary files of runs that were killed (S3 has none) */

    if (plan->rename_whole) {
        /* --move on one file system: the directory itself moves, in constant time.  Its ownership record is
         * written beside the destination first, so no moment leaves the moved snapshot without its pins */
        if ((s = move_record(snap->dir_key, pv->dst.key, err)))
            return s;
        if ((s = snap->local->ops->rename(snap->local, snap->dir_key, pv->dst.key, err)))
            return s;
        if (plan->rewrites) {
            /* absolute references into the old directory now point at the new one */
            char *old_dir = snap->dir_key;
            rctx_t rc = {snap, plan, pv->dst.key, SP_OK, err};
            if (sp_meta_visit_refs(snap->meta, rewrite_ref, &rc))
                return rc.status;
            uint8_t *bytes;
            size_t len;
            if ((s = sp_meta_encode(snap->meta, &bytes, &len, err)))
                return s;
            char *mkey = join_key(pv->dst.key, "_metadata");
            s = snap->local->ops->sync(snap->local, pv->dst.key, err);
            if (!s)
                s = sp_store_write_all(snap->local, mkey, bytes, len, err);
            if (!s)
                s = snap->local->ops->sync(snap->local, pv->dst.key, err);
            free(mkey);
            free(bytes);
            (void)old_dir;
            if (s)
                return s;
        }
        /* the plan checked every file before the rename, and a rename within one
         * file system moves the directory whole: checking _metadata arrived is enough */
        char *moved = join_key(pv->dst.key, "_metadata");
        sp_store_stat_t ms;
        s = moved ? snap->local->ops->stat(snap->local, moved, &ms, err) : SP_ERR_NOMEM;
        if (!s && !ms.exists) {
            sp_error_set_file(err, moved);
            s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the moved snapshot has no _metadata");
        }
        free(moved);
        if (s)
            return s;
        res->files_copied = 0;
        res->bytes_copied = 0;
        res->source_deleted = true;
        char *old_record = sp_record_path(snap->dir_key);
        if (old_record)
            unlink(old_record); /* the copy beside the destination was written before the rename */
        free(old_record);
        res->metadata_location = join_key(pv->dst.key, "_metadata");
        return SP_OK;
    }

    /* the new metadata, checked by decoding it before anything is written */
    rctx_t rc = {snap, plan, plan->archive ? NULL : pv->dst_loc, SP_OK, err};
    if (sp_meta_visit_refs(snap->meta, rewrite_ref, &rc))
        return rc.status;
    uint8_t *bytes;
    size_t len;
    if ((s = sp_meta_encode(snap->meta, &bytes, &len, err)))
        return s;
    sp_metadata_t *check;
    if ((s = sp_meta_decode(bytes, len, NULL, &check, err))) {
        free(bytes);
        return s;
    }
    sp_meta_free(check);

    sp_store_t *dst;
    if ((s = sp_store_open_location(&pv->dst, true, opts->zstd_threads, &dst, err))) {
        free(bytes);
        return s;
    }
    const char *dst_dir = plan->archive ? pv->dst.key : pv->dst.key;
    char *mkey = join_key(dst_dir, "_metadata");
    job_t j;
    memset(&j, 0, sizeof j);
    j.snap = snap;
    j.plan = plan;
    j.opts = opts;
    j.dst = dst;
    j.dst_dir = dst_dir;
    pthread_mutex_init(&j.lock, NULL);

    char *lock = NULL;
    if (plan->archive) {
        /* an archive becomes visible only when finished: metadata first, so readers find it in one pass */
        s = sp_store_write_all(dst, mkey, bytes, len, err);
    } else {
        if (pv->dst.kind == SP_LOC_LOCAL)
            s = take_lock(dst_dir, &lock, err);
        if (!s)
            s = write_journal(dst, dst_dir, snap, plan, err);
    }
    if (!s)
        s = snap->store->ops->scan && snap->store != snap->local ? copy_from_scan(&j, err) : copy_parallel(&j, err);
    if (!s && !plan->archive) {
        /* data durable first, then _metadata, then the journal goes */
        if (dst->ops->sync)
            s = dst->ops->sync(dst, dst_dir, err);
        if (!s)
            s = sp_store_write_all(dst, mkey, bytes, len, err);
        if (!s && dst->ops->sync)
            s = dst->ops->sync(dst, dst_dir, err);
    }
    if (!s && plan->archive && dst->ops->finish)
        s = dst->ops->finish(dst, err);
    pthread_mutex_destroy(&j.lock);
    res->files_copied = j.copied;
    res->files_skipped = j.skipped;
    res->bytes_copied = j.copied_bytes;
    uint64_t problems = 0;
    if (!s && plan->archive && !opts->checksum && !opts->move) {
        s = verify_archive_written(dst, plan, dst_dir, mkey, bytes, len, err);
    } else if (!s) {
        /* a copy that replaces the source (--move) or was asked to be proven (--checksum): an archive is read
         * back in full, so that zstd's own checks of every block run before the source can go */
        char *where = plan->archive ? xstrdup(plan->dst_display) : xstrdup(pv->dst_loc);
        s = verify_destination(where, &problems, err);
        if (!s && plan->archive && opts->checksum)
            s = archive_same_content(snap, plan, pv->dst.store_location, dst_dir, err);
        if (s && plan->archive && where) {
            /* a broken archive must not pass for a backup: it goes, and the source stays */
            char msg[sizeof err->message];
            snprintf(msg, sizeof msg, "%.400s", err ? err->message : "");
            unlink(pv->dst.store_location);
            sp_error_set_file(err, where);
            s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "",
                             "the archive written does not read back (%s); it was removed%s", msg,
                             opts->move ? ", the source is kept" : "");
        }
        free(where);
    }
    free(bytes);
    if (!s && !plan->archive) {
        char *jkey = join_key(dst_dir, SP_RELOCATE_JOURNAL);
        s = dst->ops->remove(dst, jkey, err);
        free(jkey);
    }
    release_lock(lock);
    sp_store_close(dst);
    if (!s)
        res->metadata_location = plan->archive ? xstrdup(plan->dst_display) : join_key(pv->dst_loc, "_metadata");
    free(mkey);
    if (!s && opts->move)
        s = finish_move(snap, final_path(plan), opts, res, err);
    return s;
}

sp_status_t sp_relocate_resume_move(const char *src, const char *dst, bool force, sp_relocate_result_t *res,
                                    sp_error_t *err)
{
    memset(res, 0, sizeof *res);
    char *moved = sp_dispose_moved_to(src);
    if (!moved) {
        /* killed after the journal went, before the directory did: nothing of the snapshot is left in it, so
         * removing it loses nothing, once the destination is a whole snapshot */
        sp_location_t sl;
        struct stat ss;
        bool empty = sp_location_parse(src, &sl, NULL) == SP_OK && sl.kind == SP_LOC_LOCAL &&
                     lstat(sl.key, &ss) == 0 && S_ISDIR(ss.st_mode) && only_stale_temps(sl.key);
        if (sl.key && empty) {
            sp_snapshot_t *d = open_verified(dst);
            if (d) {
                sp_dispose_result_t dres;
                sp_dispose_options_t dopts = {.force = force};
                sp_status_t s = move_record(sl.key, d->dir, err);
                if (!s)
                    s = sp_dispose(sl.key, &dopts, &dres, err);
                else
                    memset(&dres, 0, sizeof dres);
                sp_dispose_result_free(&dres);
                if (!s) {
                    res->source_deleted = true;
                    res->metadata_location = xstrdup(d->metadata_path);
                }
                sp_snapshot_close(d);
                sp_location_free(&sl);
                return s;
            }
            sp_snapshot_close(d);
        }
        sp_location_free(&sl);
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no interrupted sp relocate --move at %s", src);
    }
    sp_location_t loc;
    sp_status_t s = sp_location_parse(dst, &loc, err);
    if (s) {
        free(moved);
        return s;
    }
    const char *dst_path = loc.kind == SP_LOC_ARCHIVE ? loc.store_location : loc.key;
    char real_moved[PATH_MAX], real_dst[PATH_MAX];
    bool same = loc.kind != SP_LOC_S3 && real_path_of(moved, real_moved) && real_path_of(dst_path, real_dst) &&
                strcmp(real_moved, real_dst) == 0 && (loc.kind != SP_LOC_ARCHIVE || loc.key[0] == '\0');
    if (!same) {
        sp_error_set_file(err, src);
        s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                         "an interrupted sp relocate --move was moving this snapshot to %s, not to %s; run that "
                         "command again to finish it",
                         moved, dst);
    }
    uint64_t problems = 0;
    if (!s)
        s = verify_destination(moved, &problems, err); /* the copy is whole before more of the source goes */
    if (!s)
        s = move_record(src, moved, err);
    if (!s) {
        sp_dispose_options_t dopts = {.moved_to = moved};
        sp_dispose_result_t dres;
        s = sp_dispose(src, &dopts, &dres, err);
        sp_dispose_result_free(&dres);
    }
    if (!s) {
        res->source_deleted = true;
        res->metadata_location = loc.kind == SP_LOC_ARCHIVE ? xstrdup(moved) : join_key(moved, "_metadata");
    }
    sp_location_free(&loc);
    free(moved);
    return s;
}

void sp_relocate_plan_free(sp_relocate_plan_t *plan)
{
    if (!plan)
        return;
    for (uint32_t i = 0; i < plan->n_files; i++) {
        free(plan->files[i].src_key);
        free(plan->files[i].dst_rel);
    }
    free(plan->files);
    for (uint32_t i = 0; i < plan->n_unreferenced; i++)
        free(plan->unreferenced[i]);
    free(plan->unreferenced);
    free(plan->dst_display);
    free(plan->record_warning);
    plan_priv_t *pv = plan->priv_;
    if (pv) {
        strmap_free(&pv->by_src);
        strmap_free(&pv->by_dst);
        sp_location_free(&pv->dst);
        free(pv->dst_dir_key);
        free(pv->dst_loc);
        free(pv);
    }
    memset(plan, 0, sizeof *plan);
}

void sp_relocate_result_free(sp_relocate_result_t *r)
{
    if (r) {
        free(r->metadata_location);
        r->metadata_location = NULL;
    }
}
