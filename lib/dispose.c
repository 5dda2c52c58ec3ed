/*
 * dispose.c - `sp dispose`: journal first, data files next, `_metadata`
 * last, then the journal and the directory.  A journal found in the
 * directory means an earlier dispose was interrupted: it is finished from
 * the journal (the metadata may already be gone).
 */
#include "sp_dispose.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sp_record.h"
#include "sp_snapshot.h"
#include "paths.h"
#include "strmap.h"

static bool inside_dir(const char *key, const char *dir)
{
    size_t dl = strlen(dir);
    return strncmp(key, dir, dl) == 0 && key[dl] == '/' && !sp_path_has_dot_segments(key);
}

typedef struct dctx {
    sp_snapshot_t *snap;
    const sp_dispose_options_t *opts;
    strmap_t seen;
    dispose_list_t del, ext, unref;
    bool nomem;
    sp_status_t status;
    sp_error_t *err;
} dctx_t;

static int plan_ref(const sp_ref_t *ref, void *user)
{
    dctx_t *c = user;
    if (ref->kind == SP_REF_INLINE || ref->kind == SP_REF_DIRECTORY)
        return 0;
    char key[PATH_MAX];
    sp_store_t *store = sp_snapshot_ref_location(c->snap, ref, key, sizeof key);
    if (!store) {
        /* another scheme: can only be external */
        char shown[PATH_MAX];
        snprintf(shown, sizeof shown, "%.*s", (int)ref->path.len, (const char *)ref->path.ptr);
        if (strmap_get(&c->seen, shown) == UINT32_MAX) {
            c->nomem |= !strmap_put(&c->seen, shown, 0, NULL) || !dispose_list_push(&c->ext, shown, ref->size);
        }
        return c->nomem;
    }
    if (strmap_get(&c->seen, key) != UINT32_MAX)
        return 0;
    c->nomem |= !strmap_put(&c->seen, key, 0, NULL);
    bool inside = ref->kind == SP_REF_RELATIVE || inside_dir(key, c->snap->dir_key);
    int64_t size = ref->kind == SP_REF_SEGMENT ? -1 : ref->size;
    c->nomem |= !dispose_list_push(inside ? &c->del : &c->ext, key, size);
    return c->nomem;
}

static int list_unreferenced(const sp_store_entry_t *e, void *user)
{
    dctx_t *c = user;
    char key[PATH_MAX];
    snprintf(key, sizeof key, "%s/%s", c->snap->dir_key, e->key);
    const char *base = strrchr(key, '/') + 1;
    if (strmap_get(&c->seen, key) != UINT32_MAX || strcmp(key, c->snap->metadata_path) == 0 ||
        strcmp(base, SP_DISPOSE_JOURNAL) == 0)
        return 0;
    /* what an sp run that was killed left (e.g. this journal half written) is sp's own: it goes too */
    c->nomem |= !dispose_list_push(sp_path_stale_temp(base) ? &c->del : &c->unref, key, e->st.size);
    return c->nomem;
}

static sp_status_t write_journal(sp_store_t *st, const char *dir, const dispose_list_t *order, const char *moved_to,
                                 sp_error_t *err)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "sp", "dispose");
    cJSON_AddNumberToObject(j, "schema_version", 1);
    cJSON_AddStringToObject(j, "state", moved_to ? "incomplete: sp relocate --move deletes this snapshot after "
                                                   "copying it; run the same command (or sp dispose) again to finish"
                                                 : "incomplete: sp dispose of this snapshot was interrupted; run it "
                                                   "again to finish");
    cJSON_AddStringToObject(j, "directory", dir);
    if (moved_to)
        cJSON_AddStringToObject(j, "moved_to", moved_to); /* lets a re-run relocate find its move */
    cJSON *a = cJSON_AddArrayToObject(j, "delete");
    for (uint32_t i = 0; i < order->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(order->v[i].key));
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!text)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    char key[PATH_MAX];
    snprintf(key, sizeof key, "%s/%s", dir, SP_DISPOSE_JOURNAL);
    sp_status_t s = sp_store_write_all(st, key, text, strlen(text), err);
    if (!s && st->ops->sync)
        s = st->ops->sync(st, key, err);
    free(text);
    return s;
}

static sp_status_t read_journal(sp_store_t *st, const char *dir, bool include_external, dispose_list_t *order, bool *found,
                                sp_error_t *err)
{
    char key[PATH_MAX + sizeof SP_DISPOSE_JOURNAL + 1];
    snprintf(key, sizeof key, "%s/%s", dir, SP_DISPOSE_JOURNAL);
    sp_store_stat_t ss;
    *found = false;
    sp_status_t s = st->ops->stat(st, key, &ss, err);
    if (s || !ss.exists)
        return s;
    uint8_t *buf;
    size_t len;
    if ((s = sp_store_read_all(st, key, 1u << 30, &buf, &len, err)))
        return s;
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "delete");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "directory");
    if (!cJSON_IsArray(a) || !cJSON_IsString(d) || strcmp(d->valuestring, dir) != 0) {
        cJSON_Delete(j);
        sp_error_set_file(err, key);
        return sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "", "not a dispose journal of this directory");
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        /* only ever paths inside the directory, whatever the journal says; outside it (an interrupted
         * --include-external) only when asked again */
        bool ok = cJSON_IsString(e) && (inside_dir(e->valuestring, dir) ||
                                        (include_external && e->valuestring[0] == '/' && !sp_path_has_dot_segments(e->valuestring)));
        if (!ok && cJSON_IsString(e) && !include_external && e->valuestring[0] == '/' &&
            !sp_path_has_dot_segments(e->valuestring)) {
            cJSON_Delete(j);
            sp_error_set_file(err, key);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "the interrupted dispose was deleting referenced files outside the snapshot too; run "
                                "it again with --include-external to finish it");
        }
        if (!ok) {
            cJSON_Delete(j);
            sp_error_set_file(err, key);
            return sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "delete", "journal names a path outside the snapshot");
        }
        if (!dispose_list_push(order, e->valuestring, -1)) {
            cJSON_Delete(j);
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        }
    }
    cJSON_Delete(j);
    *found = true;
    return SP_OK;
}

/* Remove now-empty subdirectories left by nested relative paths, deepest first. */
static void remove_subdirs(sp_store_t *st, const char *dir, const dispose_list_t *deleted)
{
    size_t dl = strlen(dir);
    for (uint32_t i = 0; i < deleted->n; i++) {
        char p[PATH_MAX];
        if (!inside_dir(deleted->v[i].key, dir))
            continue; /* never a directory outside the snapshot */
        snprintf(p, sizeof p, "%s", deleted->v[i].key);
        for (char *slash = strrchr(p, '/'); slash && (size_t)(slash - p) > dl; slash = strrchr(p, '/')) {
            *slash = '\0';
            if (st->ops->remove_dir(st, p, NULL) != SP_OK)
                break;
        }
    }
}

static sp_status_t execute(sp_store_t *st, const char *dir, const dispose_list_t *order, sp_dispose_result_t *res,
                           sp_error_t *err)
{
    /* the data files in one batch when the store deletes many at once (local: on a few threads), in any
     * order; the last one, _metadata, after all of them */
    uint32_t first = 0;
    if (st->ops->remove_many && order->n > 2) {
        const char **keys = malloc((order->n - 1) * sizeof *keys);
        if (keys) {
            for (uint32_t i = 0; i + 1 < order->n; i++)
                keys[i] = order->v[i].key;
            sp_status_t s = st->ops->remove_many(st, keys, order->n - 1, err);
            free(keys);
            if (s)
                return s;
            first = order->n - 1;
        }
    }
    for (uint32_t i = first; i < order->n; i++) {
        sp_status_t s = st->ops->remove(st, order->v[i].key, err);
        if (s)
            return s;
    }
    remove_subdirs(st, dir, order);
    char key[PATH_MAX + sizeof SP_DISPOSE_JOURNAL + 1];
    snprintf(key, sizeof key, "%s/%s", dir, SP_DISPOSE_JOURNAL);
    sp_status_t s = st->ops->remove(st, key, err);
    if (s)
        return s;
    res->directory_removed = st->ops->remove_dir(st, dir, NULL) == SP_OK;
    return SP_OK;
}

/* Every deletion goes through a parent directory that is what its name says (no symbolic link on the way,
 * as the local store's delete insists): check them all before the journal is written. */
static sp_status_t check_paths(const char *dir, const dispose_list_t *del, sp_error_t *err)
{
    char real[PATH_MAX], parent[PATH_MAX];
    for (uint32_t i = 0; i <= del->n; i++) {
        const char *key = i < del->n ? del->v[i].key : NULL;
        if (key) {
            const char *slash = strrchr(key, '/');
            if (!slash || sp_path_has_dot_segments(key)) {
                sp_error_set_file(err, key);
                return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "not a plain absolute path; not deleting it");
            }
            snprintf(parent, sizeof parent, "%.*s", slash == key ? 1 : (int)(slash - key), key);
        } else {
            snprintf(parent, sizeof parent, "%s", dir); /* the directory itself, removed last */
        }
        struct stat ks;
        if (key && lstat(key, &ks) == 0 && S_ISDIR(ks.st_mode)) {
            sp_error_set_file(err, key);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "the metadata references a file here but this is a directory; nothing was deleted");
        }
        if (i > 0 && i < del->n && strcmp(parent, dir) == 0)
            continue; /* checked once */
        if (!realpath(parent, real)) {
            if (errno == ENOENT)
                continue;
            sp_error_set_file(err, parent);
            return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot resolve: %s", strerror(errno));
        }
        if (strcmp(real, parent) != 0) {
            sp_error_set_file(err, key ? key : dir);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "a directory on the path is a symbolic link (%s leads to %s); not following it, "
                                "nothing was deleted",
                                parent, real);
        }
    }
    return SP_OK;
}

/* No journal and no metadata: the last steps of an interrupted dispose (the journal was removed, the
 * directory not yet), or an empty directory.  Finish it when nothing but sp's own leftovers is there. */
static bool finish_empty(sp_store_t *st, const char *dir, const sp_dispose_options_t *opts, sp_dispose_result_t *res)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    dispose_list_t left = {0};
    bool only = true;
    struct dirent *e;
    while (only && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char key[PATH_MAX];
        snprintf(key, sizeof key, "%s/%s", dir, e->d_name);
        only = sp_path_stale_temp(e->d_name) && dispose_list_push(&left, key, -1);
    }
    closedir(d);
    if (only && !opts->dry_run) {
        for (uint32_t i = 0; i < left.n && only; i++)
            only = st->ops->remove(st, left.v[i].key, NULL) == SP_OK;
        only = only && st->ops->remove_dir(st, dir, NULL) == SP_OK;
        res->directory_removed = only;
    }
    if (only)
        dispose_list_take(&left, &res->n_deleted, &res->deleted);
    dispose_list_free(&left);
    return only;
}



/* Once the snapshot is gone its ownership record goes too: a record left beside a
 * vanished snapshot would speak for whatever is written under that name later
 * (a new chk-17 of a re-run job would inherit a CLAIM restore it never had).
 * The record's history is in the dispose output; a failure to remove it is
 * reported in res->record_warning, not as an error (the snapshot is gone). */
static void remove_record(sp_store_t *st, const char *dir, sp_dispose_result_t *res)
{
    char *path = sp_record_path(dir);
    sp_store_stat_t rs;
    if (path && st->ops->stat(st, path, &rs, NULL) == SP_OK && rs.exists && !rs.is_dir) {
        sp_error_t e;
        if (st->ops->remove(st, path, &e) != SP_OK && !res->record_warning) {
            size_t n = strlen(path) + strlen(e.message) + 64;
            if ((res->record_warning = malloc(n)))
                snprintf(res->record_warning, n, "the ownership record %s was left: %s", path, e.message);
        }
    }
    free(path);
}

/* A resumed --include-external dispose deletes a path outside the directory only when the snapshot's
 * metadata (still there) references it: the journal lies inside the directory, and whoever can write there
 * must not be able to name /etc/passwd in it.  With _metadata gone, every outside file was deleted already
 * (they come before _metadata in the order), so none is deleted again. */
static sp_status_t keep_referenced_outside(const char *dir, dispose_list_t *order, sp_error_t *err)
{
    bool any = false;
    for (uint32_t i = 0; i < order->n && !any; i++)
        any = !inside_dir(order->v[i].key, dir);
    if (!any)
        return SP_OK;
    dctx_t c;
    memset(&c, 0, sizeof c);
    sp_snapshot_t *snap = NULL;
    if (sp_snapshot_open(dir, 0, &snap, NULL) == SP_OK) {
        c.snap = snap;
        sp_meta_visit_refs(snap->meta, plan_ref, &c);
    }
    uint32_t kept = 0;
    for (uint32_t i = 0; i < order->n; i++) {
        bool keep = inside_dir(order->v[i].key, dir);
        for (uint32_t k = 0; !keep && k < c.ext.n; k++)
            keep = strcmp(c.ext.v[k].key, order->v[i].key) == 0;
        if (keep)
            order->v[kept++] = order->v[i];
        else
            free(order->v[i].key);
    }
    order->n = kept;
    bool nomem = c.nomem;
    dispose_list_free(&c.del);
    dispose_list_free(&c.ext);
    strmap_free(&c.seen);
    sp_snapshot_close(snap);
    return nomem ? sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory") : SP_OK;
}

/* The ownership record's verdict; a refusal force overrode is kept in res->record_warning. */
static sp_status_t record_check(const char *dir, const sp_dispose_options_t *opts, sp_dispose_result_t *res,
                                sp_error_t *err)
{
    char warning[1024] = "";
    sp_record_check_options_t ro = {.force = opts->force, .query = opts->record_query,
                                    .query_user = opts->record_query_user, .warning = warning,
                                    .warning_size = sizeof warning};
    sp_status_t s = sp_record_check_delete_ex(dir, &ro, err);
    if (!s && warning[0])
        res->record_warning = strdup(warning);
    return s;
}

static sp_status_t dispose_archive(const sp_location_t *loc, const sp_dispose_options_t *opts,
                                   sp_dispose_result_t *res, sp_error_t *err)
{
    if (loc->key[0])
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location",
                            "a folder inside an archive cannot be deleted; dispose of the whole archive");
    /* it must be a snapshot archive: open it */
    sp_snapshot_t *snap;
    sp_status_t s = sp_snapshot_open(loc->store_location, 0, &snap, err);
    if (s)
        return s;
    sp_snapshot_close(snap);
    if ((s = record_check(loc->store_location, opts, res, err)))
        return s;
    res->directory = strdup(loc->store_location);
    dispose_list_t del = {0};
    sp_store_t *local;
    if ((s = sp_store_open_local(&local, err)))
        return s;
    sp_store_stat_t ss;
    local->ops->stat(local, loc->store_location, &ss, NULL);
    if (ss.is_symlink) {
        /* removing the link would leave the archive; following it would delete outside what was named */
        char real[PATH_MAX];
        sp_store_close(local);
        sp_error_set_file(err, loc->store_location);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "the archive is a symbolic link%s%s; not following it: dispose of the archive by its own "
                            "path, then remove the link",
                            realpath(loc->store_location, real) ? " to " : "",
                            realpath(loc->store_location, real) ? real : "");
    }
    dispose_list_push(&del, loc->store_location, ss.size);
    res->bytes = ss.size > 0 ? (uint64_t)ss.size : 0;
    if (!opts->dry_run) {
        s = local->ops->remove(local, loc->store_location, err);
        res->directory_removed = s == SP_OK;
        if (!s)
            remove_record(local, loc->store_location, res);
    }
    sp_store_close(local);
    dispose_list_take(&del, &res->n_deleted, &res->deleted);
    return s;
}

/* dispose_s3.c: the same for a snapshot in S3 */
sp_status_t sp_dispose_s3_(const sp_location_t *loc, const char *location, const sp_dispose_options_t *opts,
                           sp_dispose_result_t *res, sp_error_t *err);

sp_status_t sp_dispose(const char *location, const sp_dispose_options_t *opts, sp_dispose_result_t *res,
                       sp_error_t *err)
{
    memset(res, 0, sizeof *res);
    sp_dispose_options_t defaults = {0};
    if (!opts)
        opts = &defaults;
    sp_location_t loc;
    sp_status_t s = sp_location_parse(location, &loc, err);
    if (s)
        return s;
    if (loc.kind == SP_LOC_ARCHIVE) {
        s = dispose_archive(&loc, opts, res, err);
        sp_location_free(&loc);
        return s;
    }
    if (loc.kind == SP_LOC_S3) {
        s = sp_dispose_s3_(&loc, location, opts, res, err); /* dispose_s3.c */
        sp_location_free(&loc);
        return s;
    }
    sp_store_t *st;
    if ((s = sp_store_open_local(&st, err))) {
        sp_location_free(&loc);
        return s;
    }
    /* the directory: the location itself, or the parent of a metadata file */
    char dir[PATH_MAX];
    sp_store_stat_t ls;
    snprintf(dir, sizeof dir, "%s", loc.key);
    sp_location_free(&loc);
    if ((s = st->ops->stat(st, dir, &ls, err)))
        goto out;
    struct stat target;
    if (ls.exists && ls.is_symlink && stat(dir, &target) == 0 && S_ISDIR(target.st_mode)) {
        /* (lstat: a link is never is_dir, so this is checked first) */
        sp_error_set_file(err, dir);
        s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "the snapshot directory is a symbolic link; not following it");
        goto out;
    }
    if (ls.exists && !ls.is_dir) {
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir)
            *slash = '\0';
    } else if (!ls.exists) {
        sp_error_set_file(err, dir);
        s = sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no such snapshot");
        goto out;
    }
    res->directory = strdup(dir);

    dispose_list_t order = {0};
    bool found;
    if ((s = read_journal(st, dir, opts->include_external, &order, &found, err))) {
        dispose_list_free(&order);
        goto out;
    }
    if (found) {
        res->resumed = true;
        s = keep_referenced_outside(dir, &order, err);
        if (!s)
            s = check_paths(dir, &order, err);
        if (!s && !opts->dry_run)
            s = execute(st, dir, &order, res, err);
        dispose_list_take(&order, &res->n_deleted, &res->deleted);
        goto out;
    }

    if ((s = record_check(dir, opts, res, err)))
        goto out;
    sp_snapshot_t *snap;
    if ((s = sp_snapshot_open(dir, 0, &snap, err))) {
        if (s == SP_ERR_NOT_FOUND && finish_empty(st, dir, opts, res)) {
            sp_error_clear(err);
            s = SP_OK;
        }
        goto out;
    }
    dctx_t c;
    memset(&c, 0, sizeof c);
    c.snap = snap;
    c.opts = opts;
    c.err = err;
    sp_meta_visit_refs(snap->meta, plan_ref, &c);
    if (!c.nomem)
        st->ops->list(st, snap->dir_key, list_unreferenced, &c, NULL);
    if (c.nomem) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    } else {
        for (uint32_t i = 0; i < c.del.n; i++)
            res->bytes += c.del.v[i].size > 0 ? (uint64_t)c.del.v[i].size : 0;
        /* order: referenced data, then what was asked for, then _metadata */
        if (opts->include_unreferenced)
            for (uint32_t i = 0; i < c.unref.n && !c.nomem; i++)
                c.nomem |= !dispose_list_push(&c.del, c.unref.v[i].key, c.unref.v[i].size);
        if (opts->include_external)
            for (uint32_t i = 0; i < c.ext.n && !c.nomem; i++)
                if (c.ext.v[i].key[0] == '/')
                    c.nomem |= !dispose_list_push(&c.del, c.ext.v[i].key, c.ext.v[i].size);
        c.nomem |= !dispose_list_push(&c.del, snap->metadata_path, (int64_t)snap->size);
        res->bytes += snap->size;
        if (c.nomem)
            s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    if (!s)
        s = check_paths(dir, &c.del, err); /* refused before anything is deleted, not half-way */
    if (!s && !opts->dry_run) {
        s = write_journal(st, dir, &c.del, opts->moved_to, err);
        if (!s)
            s = execute(st, dir, &c.del, res, err);
    }
    dispose_list_take(&c.del, &res->n_deleted, &res->deleted);
    dispose_list_take(&c.ext, &res->n_external, &res->external);
    dispose_list_take(&c.unref, &res->n_unreferenced, &res->unreferenced);
    strmap_free(&c.seen);
    sp_snapshot_close(snap);
out:
    if (!s && !opts->dry_run && res->directory_removed)
        remove_record(st, dir, res);
    sp_store_close(st);
    return s;
}

char *sp_dispose_moved_to(const char *location)
{
    sp_location_t loc;
    sp_error_t e;
    if (sp_location_parse(location, &loc, &e) != SP_OK)
        return NULL;
    char *out = NULL;
    if (loc.kind == SP_LOC_LOCAL) {
        char key[PATH_MAX];
        snprintf(key, sizeof key, "%s/%s", loc.key, SP_DISPOSE_JOURNAL);
        struct stat js;
        FILE *f = lstat(key, &js) == 0 && S_ISREG(js.st_mode) && js.st_size < (1 << 30) ? fopen(key, "rb") : NULL;
        char *text = f ? malloc((size_t)js.st_size + 1) : NULL;
        if (text && fread(text, 1, (size_t)js.st_size, f) == (size_t)js.st_size) {
            cJSON *j = cJSON_ParseWithLength(text, (size_t)js.st_size);
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "directory");
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "moved_to");
            if (cJSON_IsString(d) && strcmp(d->valuestring, loc.key) == 0 && cJSON_IsString(m))
                out = strdup(m->valuestring);
            cJSON_Delete(j);
        }
        free(text);
        if (f)
            fclose(f);
    }
    sp_location_free(&loc);
    return out;
}

void sp_dispose_result_free(sp_dispose_result_t *r)
{
    if (!r)
        return;
    dispose_list_t l;
    l = (dispose_list_t){r->deleted, r->n_deleted, r->n_deleted};
    dispose_list_free(&l);
    l = (dispose_list_t){r->external, r->n_external, r->n_external};
    dispose_list_free(&l);
    l = (dispose_list_t){r->unreferenced, r->n_unreferenced, r->n_unreferenced};
    dispose_list_free(&l);
    free(r->directory);
    free(r->record_warning);
    memset(r, 0, sizeof *r);
}
