/*
 * dispose_s3.c - `sp dispose` of a snapshot in S3 (sp_dispose() hands
 * s3:// locations here).  The same rules as on a file system (sp_dispose.h):
 * a journal object (<prefix>/.sp-dispose.json) is written before anything is
 * deleted; referenced data objects go first (DeleteObjects, 1000 keys a
 * request), `_metadata` after them, the journal last; an interrupted run
 * is finished from the journal by running it again.  Only objects under the
 * snapshot's prefix are deleted (referenced objects elsewhere in the bucket
 * too with include_external; never another bucket's, never local files).
 * S3 has no directories: "the directory is removed" when no object is left
 * under the prefix.
 */
#define _GNU_SOURCE
#include "sp_dispose.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"
#include "sp_record.h"
#include "sp_s3.h"
#include "sp_snapshot.h"
#include "paths.h"
#include "strmap.h"

sp_status_t sp_dispose_s3_(const sp_location_t *loc, const char *location, const sp_dispose_options_t *opts,
                           sp_dispose_result_t *res, sp_error_t *err);

/* Give the list to the result with keys shown as s3://bucket/key. */
static bool take(dispose_list_t *l, const char *bucket_loc, uint32_t *n, sp_dispose_item_t **v)
{
    bool ok = true;
    for (uint32_t i = 0; i < l->n; i++) {
        if (strncmp(l->v[i].key, "s3://", 5) == 0 || l->v[i].key[0] == '/')
            continue; /* already a location (another bucket, a local file) */
        char *full = NULL;
        if (asprintf(&full, "%s/%s", bucket_loc, l->v[i].key) < 0) {
            ok = false;
            continue;
        }
        free(l->v[i].key);
        l->v[i].key = full;
    }
    dispose_list_take(l, n, v);
    return ok;
}

static bool inside(const char *key, const char *dir)
{
    size_t dl = strlen(dir);
    if (dl == 0)
        return key[0] && !sp_path_has_dot_segments(key); /* the bucket's root */
    return strncmp(key, dir, dl) == 0 && key[dl] == '/' && key[dl + 1] && !sp_path_has_dot_segments(key);
}

static char *join(const char *dir, const char *name)
{
    char *k = NULL;
    if (asprintf(&k, "%s%s%s", dir, dir[0] ? "/" : "", name) < 0)
        return NULL;
    return k;
}

typedef struct dctx {
    sp_snapshot_t *snap;
    const char *dir, *mkey;
    strmap_t seen;
    dispose_list_t del, ext, ext_same, unref;
    bool nomem;
} dctx_t;

static int plan_ref(const sp_ref_t *ref, void *user)
{
    dctx_t *c = user;
    if (ref->kind == SP_REF_INLINE || ref->kind == SP_REF_DIRECTORY)
        return 0;
    char key[PATH_MAX];
    sp_store_t *store = sp_snapshot_ref_location(c->snap, ref, key, sizeof key);
    char shown[PATH_MAX + 8];
    if (!store || store != c->snap->store) {
        /* another bucket, a local file, another scheme: reported, never deleted */
        snprintf(shown, sizeof shown, "%.*s", (int)ref->path.len, (const char *)ref->path.ptr);
        if (strmap_get(&c->seen, shown) == UINT32_MAX)
            c->nomem |= !strmap_put(&c->seen, shown, 0, NULL) || !dispose_list_push(&c->ext, shown, ref->size);
        return c->nomem;
    }
    if (strmap_get(&c->seen, key) != UINT32_MAX)
        return 0;
    c->nomem |= !strmap_put(&c->seen, key, 0, NULL);
    bool in = ref->kind == SP_REF_RELATIVE ? !sp_path_has_dot_segments(key) : inside(key, c->dir);
    int64_t size = ref->kind == SP_REF_SEGMENT ? -1 : ref->size;
    if (in)
        c->nomem |= !dispose_list_push(&c->del, key, size);
    else
        c->nomem |= !dispose_list_push(&c->ext, key, size) || !dispose_list_push(&c->ext_same, key, size);
    return c->nomem;
}

static int list_unreferenced(const sp_store_entry_t *e, void *user)
{
    dctx_t *c = user;
    char *key = join(c->dir, e->key);
    if (!key) {
        c->nomem = true;
        return 1;
    }
    const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
    if (strmap_get(&c->seen, key) == UINT32_MAX && strcmp(key, c->mkey) != 0 && strcmp(base, SP_DISPOSE_JOURNAL) != 0)
        c->nomem |= !dispose_list_push(&c->unref, key, e->st.size);
    free(key);
    return c->nomem;
}

static sp_status_t write_journal(sp_store_t *st, const char *dir, const char *dir_loc, const dispose_list_t *order,
                                 sp_error_t *err)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "sp", "dispose");
    cJSON_AddNumberToObject(j, "schema_version", 1);
    cJSON_AddStringToObject(j, "state", "incomplete: sp dispose of this snapshot was interrupted; run it again to finish");
    cJSON_AddStringToObject(j, "directory", dir_loc);
    cJSON *a = cJSON_AddArrayToObject(j, "delete");
    for (uint32_t i = 0; i < order->n; i++) {
        char *full = NULL;
        if (asprintf(&full, "%s/%s", st->location, order->v[i].key) >= 0)
            cJSON_AddItemToArray(a, cJSON_CreateString(full));
        free(full);
    }
    char *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    char *key = join(dir, SP_DISPOSE_JOURNAL);
    sp_status_t s = text && key ? sp_store_write_all(st, key, text, strlen(text), err)
                                : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    free(text);
    free(key);
    return s;
}

static sp_status_t read_journal(sp_store_t *st, const char *dir, const char *dir_loc, bool include_external,
                                dispose_list_t *order, bool *found, sp_error_t *err)
{
    *found = false;
    char *key = join(dir, SP_DISPOSE_JOURNAL);
    if (!key)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    sp_store_stat_t ss;
    uint8_t *buf = NULL;
    size_t len = 0;
    sp_status_t s = st->ops->stat(st, key, &ss, err);
    if (!s && ss.exists)
        s = sp_store_read_all(st, key, 1u << 30, &buf, &len, err);
    if (s || !ss.exists) {
        free(key);
        return s;
    }
    cJSON *j = cJSON_ParseWithLength((const char *)buf, len);
    free(buf);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "delete");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "directory");
    char where[PATH_MAX + 300];
    snprintf(where, sizeof where, "%s/%s", st->location, key);
    free(key);
    if (!cJSON_IsArray(a) || !cJSON_IsString(d) || strcmp(d->valuestring, dir_loc) != 0) {
        cJSON_Delete(j);
        sp_error_set_file(err, where);
        return sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "", "not a dispose journal of this snapshot");
    }
    size_t bl = strlen(st->location);
    const cJSON *e;
    cJSON_ArrayForEach(e, a) {
        /* only objects of this bucket, under the snapshot's prefix (elsewhere only when asked again) */
        const char *v = cJSON_IsString(e) ? e->valuestring : "";
        const char *k = strncmp(v, st->location, bl) == 0 && v[bl] == '/' ? v + bl + 1 : NULL;
        if (k && !inside(k, dir) && !sp_path_has_dot_segments(k) && !include_external) {
            cJSON_Delete(j);
            sp_error_set_file(err, where);
            return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                "the interrupted dispose was deleting referenced objects outside the snapshot too; "
                                "run it again with --include-external to finish it");
        }
        if (!k || sp_path_has_dot_segments(k)) {
            cJSON_Delete(j);
            sp_error_set_file(err, where);
            return sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "delete",
                                "journal names an object outside the snapshot's bucket");
        }
        if (!dispose_list_push(order, k, -1)) {
            cJSON_Delete(j);
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        }
    }
    cJSON_Delete(j);
    *found = true;
    return SP_OK;
}

/* Data objects (in batches), then the last one (`_metadata`), then the journal. */
static sp_status_t execute(sp_store_t *st, const char *dir, const dispose_list_t *order, sp_dispose_result_t *res,
                           sp_error_t *err)
{
    sp_status_t s = SP_OK;
    if (order->n > 1) {
        const char **keys = malloc((order->n - 1) * sizeof *keys);
        if (!keys)
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        for (uint32_t i = 0; i + 1 < order->n; i++)
            keys[i] = order->v[i].key;
        if (st->ops->remove_many)
            s = st->ops->remove_many(st, keys, order->n - 1, err);
        else
            for (uint32_t i = 0; !s && i + 1 < order->n; i++)
                s = st->ops->remove(st, keys[i], err);
        free(keys);
    }
    if (!s && order->n)
        s = st->ops->remove(st, order->v[order->n - 1].key, err);
    char *jkey = join(dir, SP_DISPOSE_JOURNAL);
    if (!s)
        s = jkey ? st->ops->remove(st, jkey, err) : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    free(jkey);
    if (!s)
        res->directory_removed = st->ops->remove_dir(st, dir, NULL) == SP_OK;
    return s;
}

sp_status_t sp_dispose_s3_(const sp_location_t *loc, const char *location, const sp_dispose_options_t *opts,
                           sp_dispose_result_t *res, sp_error_t *err)
{
    (void)location;
    sp_store_t *st;
    sp_status_t s = sp_store_open_location(loc, true, 0, &st, err);
    if (s)
        return s;
    /* the snapshot's prefix: the location itself, or the parent of a metadata object */
    char *dir = strdup(loc->key), *dir_loc = NULL;
    sp_store_stat_t ls;
    dispose_list_t order = {0};
    dctx_t c;
    memset(&c, 0, sizeof c);
    sp_snapshot_t *snap = NULL;
    if (!dir) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto out;
    }
    if ((s = st->ops->stat(st, dir, &ls, err)))
        goto out;
    if (ls.exists && !ls.is_dir) {
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            dir[0] = '\0';
    } else if (!ls.exists) {
        sp_error_set_file(err, loc->key[0] ? location : loc->store_location);
        s = sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no such snapshot (no object under this prefix)");
        goto out;
    }
    if (asprintf(&dir_loc, "%s%s%s", st->location, dir[0] ? "/" : "", dir) < 0) {
        dir_loc = NULL;
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto out;
    }
    res->directory = strdup(dir_loc);

    bool found;
    if ((s = read_journal(st, dir, dir_loc, opts->include_external, &order, &found, err)))
        goto out;
    if (found) {
        res->resumed = true;
        if (!opts->dry_run)
            s = execute(st, dir, &order, res, err);
        if (!take(&order, st->location, &res->n_deleted, &res->deleted) && !s)
            s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto out;
    }

    if ((s = sp_record_check_delete(dir_loc, opts->force, err)))
        goto out;
    if ((s = sp_snapshot_open(dir_loc, 0, &snap, err)))
        goto out;
    const char *mkey = snap->metadata_path + strlen(st->location) + 1;
    c.snap = snap;
    c.dir = dir;
    c.mkey = mkey;
    sp_meta_visit_refs(snap->meta, plan_ref, &c);
    if (!c.nomem && (s = st->ops->list(st, dir, list_unreferenced, &c, err)))
        goto out;
    if (!c.nomem) {
        for (uint32_t i = 0; i < c.del.n; i++)
            res->bytes += c.del.v[i].size > 0 ? (uint64_t)c.del.v[i].size : 0;
        /* order: referenced data, then what was asked for, then _metadata */
        if (opts->include_unreferenced)
            for (uint32_t i = 0; i < c.unref.n && !c.nomem; i++) {
                c.nomem |= !dispose_list_push(&c.del, c.unref.v[i].key, c.unref.v[i].size);
                res->bytes += c.unref.v[i].size > 0 ? (uint64_t)c.unref.v[i].size : 0;
            }
        if (opts->include_external)
            for (uint32_t i = 0; i < c.ext_same.n && !c.nomem; i++)
                c.nomem |= !dispose_list_push(&c.del, c.ext_same.v[i].key, c.ext_same.v[i].size);
        c.nomem |= !dispose_list_push(&c.del, mkey, (int64_t)snap->size);
        res->bytes += snap->size;
    }
    if (c.nomem) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto out;
    }
    if (!opts->dry_run) {
        s = write_journal(st, dir, dir_loc, &c.del, err);
        if (!s)
            s = execute(st, dir, &c.del, res, err);
    }
    if (!s && !opts->dry_run && dir[0]) {
        /* the snapshot's ownership record goes with it (lib/dispose.c remove_record: no stale record for
         * whatever is written under this prefix later) */
        char *rkey = NULL;
        if (asprintf(&rkey, "%s%s", dir, SP_RECORD_SUFFIX) >= 0) {
            st->ops->remove(st, rkey, NULL);
            free(rkey);
        }
    }
    bool ok = take(&c.del, st->location, &res->n_deleted, &res->deleted);
    ok &= take(&c.ext, st->location, &res->n_external, &res->external);
    ok &= take(&c.unref, st->location, &res->n_unreferenced, &res->unreferenced);
    if (!ok && !s)
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
out:
    dispose_list_free(&order);
    dispose_list_free(&c.del);
    dispose_list_free(&c.ext);
    dispose_list_free(&c.ext_same);
    dispose_list_free(&c.unref);
    strmap_free(&c.seen);
    sp_snapshot_close(snap);
    free(dir);
    free(dir_loc);
    sp_store_close(st);
    return s;
}
