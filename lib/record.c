/* Ownership records beside snapshots (see sp_record.h). */
#include "sp_record.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>
#include <fcntl.h>
#include <errno.h>

#include "s3_internal.h"
#include "sp_fs.h"
#include "sp_snapshot.h"

char *sp_record_path(const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    char *p = malloc(n + sizeof SP_RECORD_SUFFIX);
    if (p) {
        memcpy(p, dir, n);
        memcpy(p + n, SP_RECORD_SUFFIX, sizeof SP_RECORD_SUFFIX);
    }
    return p;
}

/* Load the record as JSON; *out NULL when there is none. */
static sp_status_t load(const char *path, cJSON **out, sp_error_t *err)
{
    *out = NULL;
    char *text;
    size_t len;
    sp_status_t s;
    if (s3_is_location(path)) {
        /* a snapshot in S3: its record is the object beside it */
        bool exists;
        if ((s = s3_read_location(path, 1u << 26, (uint8_t **)&text, &len, &exists, err)) || !exists)
            return s;
    } else {
        struct stat st;
        if (stat(path, &st) != 0)
            return SP_OK;
        s = sp_fs_read_all(path, &text, &len, err);
        if (s)
            return s;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        sp_error_set_file(err, path);
        return sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "", "not an sp ownership record (expected a JSON object)");
    }
    *out = j;
    return SP_OK;
}

sp_status_t sp_record_read(const char *dir, sp_record_summary_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    char *path = sp_record_path(dir);
    if (!path)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    cJSON *j;
    sp_status_t s = load(path, &j, err);
    free(path);
    if (s || !j)
        return s;
    out->exists = true;
    const cJSON *pins = cJSON_GetObjectItemCaseSensitive(j, "pins");
    const cJSON *e;
    cJSON_ArrayForEach(e, pins) {
        out->pins++;
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "reason");
        snprintf(out->pin_reason, sizeof out->pin_reason, "%s", cJSON_IsString(r) ? r->valuestring : "");
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "restores")) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "claim_mode");
        const char *mode = cJSON_IsString(m) ? m->valuestring : "";
        if (strcmp(mode, "CLAIM") == 0)
            out->restores_claim++;
        else if (strcmp(mode, "NO_CLAIM") == 0)
            out->restores_no_claim++;
        else
            out->restores_legacy++;
    }
    cJSON_Delete(j);
    return SP_OK;
}

sp_status_t sp_record_check_delete(const char *dir, bool force, sp_error_t *err)
{
    sp_record_check_options_t o = {.force = force};
    return sp_record_check_delete_ex(dir, &o, err);
}

static sp_status_t save(const char *path, cJSON *j, sp_error_t *err)
{
    char *text = cJSON_Print(j);
    if (!text)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    size_t n = strlen(text);
    text[n] = '\n';
    sp_status_t s = s3_is_location(path) ? s3_write_location(path, text, n + 1, err) /* one PUT: atomic */
                                         : sp_fs_write_atomic(path, text, n + 1, true, err);
    free(text);
    return s;
}

static sp_status_t edit(const char *dir, cJSON **j, char **path, sp_error_t *err)
{
    struct stat st;
    sp_store_stat_t ss;
    if (s3_is_location(dir) ? s3_stat_location(dir, &ss, NULL) != SP_OK || !ss.exists : stat(dir, &st) != 0) {
        sp_error_set_file(err, dir);
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no such snapshot");
    }
    *path = sp_record_path(dir);
    if (!*path)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    sp_status_t s = load(*path, j, err);
    if (s)
        return s;
    if (!*j) {
        *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(*j, "schema_version", 1);
        const char *slash = strrchr(dir, '/');
        cJSON_AddStringToObject(*j, "snapshot", slash ? slash + 1 : dir);
    }
    return SP_OK;
}

sp_status_t sp_record_pin(const char *dir, const char *reason, const char *by, int64_t time_ms, sp_error_t *err)
{
    cJSON *j = NULL;
    char *path = NULL;
    sp_status_t s = edit(dir, &j, &path, err);
    if (!s) {
        cJSON *pins = cJSON_GetObjectItemCaseSensitive(j, "pins");
        if (!cJSON_IsArray(pins)) {
            cJSON_DeleteItemFromObjectCaseSensitive(j, "pins");
            pins = cJSON_AddArrayToObject(j, "pins");
        }
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "reason", reason ? reason : "");
        cJSON_AddNumberToObject(p, "time_ms", (double)time_ms);
        cJSON_AddStringToObject(p, "by", by ? by : "");
        cJSON_AddItemToArray(pins, p);
        s = save(path, j, err);
    }
    cJSON_Delete(j);
    free(path);
    return s;
}

sp_status_t sp_record_unpin(const char *dir, sp_error_t *err)
{
    cJSON *j = NULL;
    char *path = NULL;
    sp_status_t s = edit(dir, &j, &path, err);
    if (!s) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "pins");
        cJSON_AddArrayToObject(j, "pins");
        s = save(path, j, err);
    }
    cJSON_Delete(j);
    free(path);
    return s;
}

/* ---- the full record ---- */

static void copy_str(char *dst, size_t n, const cJSON *j, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    snprintf(dst, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static int64_t get_i64(const cJSON *j, const char *key, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

static void restore_from_json(const cJSON *e, sp_record_restore_t *r)
{
    memset(r, 0, sizeof *r);
    copy_str(r->job_id, sizeof r->job_id, e, "job_id");
    copy_str(r->claim_mode, sizeof r->claim_mode, e, "claim_mode");
    copy_str(r->cluster, sizeof r->cluster, e, "cluster");
    copy_str(r->flink_version, sizeof r->flink_version, e, "flink_version");
    r->time_ms = get_i64(e, "time_ms", 0);
    r->snapshot_checkpoint_id = get_i64(e, "snapshot_checkpoint_id", -1);
    const cJSON *rel = cJSON_GetObjectItemCaseSensitive(e, "released");
    r->released = cJSON_IsObject(rel) || cJSON_IsTrue(rel);
    r->released_checkpoint_id = cJSON_IsObject(rel) ? get_i64(rel, "checkpoint_id", -1) : -1;
    r->released_time_ms = cJSON_IsObject(rel) ? get_i64(rel, "time_ms", 0) : 0;
}

static void origin_from_json(const cJSON *c, sp_record_origin_t *o)
{
    memset(o, 0, sizeof *o);
    copy_str(o->by, sizeof o->by, c, "by");
    copy_str(o->job_id, sizeof o->job_id, c, "job_id");
    copy_str(o->trigger_id, sizeof o->trigger_id, c, "trigger_id");
    copy_str(o->cluster, sizeof o->cluster, c, "cluster");
    copy_str(o->flink_version, sizeof o->flink_version, c, "flink_version");
    copy_str(o->format, sizeof o->format, c, "format");
    copy_str(o->location, sizeof o->location, c, "location");
    o->time_ms = get_i64(c, "time_ms", 0);
    o->drain = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "drain"));
}

sp_status_t sp_record_load(const char *dir, sp_record_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    sp_status_t s = sp_record_read(dir, &out->summary, err);
    if (s || !out->summary.exists)
        return s;
    out->exists = true;
    out->path = sp_record_path(dir);
    cJSON *j = NULL;
    if (!out->path || (s = load(out->path, &j, err)) != SP_OK || !j) {
        cJSON_Delete(j);
        sp_record_free(out);
        return s ? s : sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    out->exists = true;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "created");
    if (cJSON_IsObject(c)) {
        out->has_origin = true;
        origin_from_json(c, &out->origin);
    }
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "restores");
    int n = cJSON_IsArray(rs) ? cJSON_GetArraySize(rs) : 0;
    if (n > 0) {
        out->restores = calloc((size_t)n, sizeof *out->restores);
        if (!out->restores) {
            cJSON_Delete(j);
            sp_record_free(out);
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, rs)
            if (cJSON_IsObject(e))
                restore_from_json(e, &out->restores[out->n_restores++]);
    }
    cJSON_Delete(j);
    return SP_OK;
}

void sp_record_free(sp_record_t *r)
{
    if (!r)
        return;
    free(r->path);
    free(r->restores);
    memset(r, 0, sizeof *r);
}

/* Open the record for a change, apply fn, save atomically. */
/* Records are read, changed and written back by separate sp processes: a
 * lock file beside the record makes that one step, so two restores cannot
 * both see "not claimed yet" (local records only; a lock older than a minute
 * was left by a process that died). */
static char *lock_record(const char *dir)
{
    char *path = sp_record_path(dir);
    if (!path || s3_is_location(path)) {
        free(path);
        return NULL;
    }
    size_t n = strlen(path) + 6;
    char *lock = malloc(n);
    if (lock)
        snprintf(lock, n, "%s.lock", path);
    free(path);
    for (int i = 0; lock && i < 200; i++) {
        int fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            close(fd);
            return lock;
        }
        if (errno != EEXIST)
            break;
        struct stat st;
        if (stat(lock, &st) == 0 && time(NULL) - st.st_mtime > 60)
            unlink(lock);
        else
            usleep(25000);
    }
    free(lock);
    return NULL;
}

static void unlock_record(char *lock)
{
    if (lock) {
        unlink(lock);
        free(lock);
    }
}

static sp_status_t modify_unlocked(const char *dir, sp_status_t (*fn)(cJSON *j, const void *arg, sp_error_t *err),
                                   const void *arg, sp_error_t *err);

static sp_status_t modify(const char *dir, sp_status_t (*fn)(cJSON *j, const void *arg, sp_error_t *err),
                          const void *arg, sp_error_t *err)
{
    char *lock = lock_record(dir);
    sp_status_t s = modify_unlocked(dir, fn, arg, err);
    unlock_record(lock);
    return s;
}

static sp_status_t modify_unlocked(const char *dir, sp_status_t (*fn)(cJSON *j, const void *arg, sp_error_t *err),
                                   const void *arg, sp_error_t *err)
{
    cJSON *j = NULL;
    char *path = NULL;
    sp_status_t s = edit(dir, &j, &path, err);
    if (!s)
        s = fn(j, arg, err);
    if (!s)
        s = save(path, j, err);
    cJSON_Delete(j);
    free(path);
    return s;
}

static void add_str(cJSON *o, const char *key, const char *v)
{
    if (v && *v)
        cJSON_AddStringToObject(o, key, v);
}

static cJSON *origin_to_json(const sp_record_origin_t *o)
{
    cJSON *c = cJSON_CreateObject();
    if (!c)
        return NULL;
    add_str(c, "by", o->by);
    add_str(c, "job_id", o->job_id);
    add_str(c, "trigger_id", o->trigger_id);
    cJSON_AddNumberToObject(c, "time_ms", (double)o->time_ms);
    add_str(c, "cluster", o->cluster);
    add_str(c, "flink_version", o->flink_version);
    add_str(c, "format", o->format);
    cJSON_AddBoolToObject(c, "drain", o->drain);
    add_str(c, "location", o->location);
    return c;
}

static sp_status_t do_set_origin(cJSON *j, const void *arg, sp_error_t *err)
{
    const sp_record_origin_t *o = arg;
    cJSON *c = origin_to_json(o);
    if (!c)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "created");
    cJSON_AddItemToObject(j, "created", c);
    return SP_OK;
}

sp_status_t sp_record_set_origin(const char *dir, const sp_record_origin_t *origin, sp_error_t *err)
{
    return modify(dir, do_set_origin, origin, err);
}

static cJSON *restores_array(cJSON *j)
{
    cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "restores");
    if (!cJSON_IsArray(rs)) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "restores");
        rs = cJSON_AddArrayToObject(j, "restores");
    }
    return rs;
}

static int find_restore(cJSON *rs, const char *job_id)
{
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, rs) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "job_id");
        if (cJSON_IsString(id) && strcmp(id->valuestring, job_id) == 0)
            return i;
        i++;
    }
    return -1;
}

static sp_status_t do_add_restore(cJSON *j, const void *arg, sp_error_t *err)
{
    const sp_record_restore_t *r = arg;
    cJSON *rs = restores_array(j);
    cJSON *e = cJSON_CreateObject();
    if (!rs || !e) {
        cJSON_Delete(e);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    cJSON_AddStringToObject(e, "job_id", r->job_id);
    cJSON_AddStringToObject(e, "claim_mode", r->claim_mode);
    cJSON_AddNumberToObject(e, "time_ms", (double)r->time_ms);
    add_str(e, "cluster", r->cluster);
    add_str(e, "flink_version", r->flink_version);
    if (r->snapshot_checkpoint_id >= 0)
        cJSON_AddNumberToObject(e, "snapshot_checkpoint_id", (double)r->snapshot_checkpoint_id);
    if (r->released) {
        cJSON *rel = cJSON_AddObjectToObject(e, "released");
        cJSON_AddNumberToObject(rel, "checkpoint_id", (double)r->released_checkpoint_id);
        cJSON_AddNumberToObject(rel, "time_ms", (double)r->released_time_ms);
    }
    int i = find_restore(rs, r->job_id);
    if (i >= 0)
        cJSON_ReplaceItemInArray(rs, i, e);
    else
        cJSON_AddItemToArray(rs, e);
    return SP_OK;
}

sp_status_t sp_record_add_restore(const char *dir, const sp_record_restore_t *restore, sp_error_t *err)
{
    if (!restore->job_id[0] || !restore->claim_mode[0])
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "a restore needs a job ID and a claim mode");
    return modify(dir, do_add_restore, restore, err);
}

sp_status_t sp_record_add_restore_checked(const char *dir, const sp_record_restore_t *restore, bool force,
                                          sp_error_t *err)
{
    if (!restore->job_id[0] || !restore->claim_mode[0])
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "a restore needs a job ID and a claim mode");
    char *lock = lock_record(dir);
    sp_status_t s = sp_record_check_restore(dir, restore->claim_mode, err);
    if (s == SP_ERR_REFUSED && force)
        s = SP_OK;
    if (!s)
        s = modify_unlocked(dir, do_add_restore, restore, err);
    unlock_record(lock);
    return s;
}

static sp_status_t do_remove_restore(cJSON *j, const void *arg, sp_error_t *err)
{
    (void)err;
    cJSON *rs = restores_array(j);
    int i = rs ? find_restore(rs, arg) : -1;
    if (i >= 0)
        cJSON_DeleteItemFromArray(rs, i);
    return SP_OK;
}

sp_status_t sp_record_remove_restore(const char *dir, const char *job_id, sp_error_t *err)
{
    char *path = sp_record_path(dir);
    struct stat st;
    sp_store_stat_t ss;
    bool exists = path && (s3_is_location(path) ? s3_stat_location(path, &ss, NULL) == SP_OK && ss.exists
                                                : stat(path, &st) == 0);
    free(path);
    if (!exists)
        return SP_OK;
    return modify(dir, do_remove_restore, job_id, err);
}

typedef struct release_arg {
    const char *job_id;
    int64_t checkpoint_id, time_ms;
} release_arg_t;

static sp_status_t do_mark_released(cJSON *j, const void *arg, sp_error_t *err)
{
    const release_arg_t *a = arg;
    cJSON *rs = restores_array(j);
    int i = rs ? find_restore(rs, a->job_id) : -1;
    if (i < 0)
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "restores", "no restore of job %s in the record", a->job_id);
    cJSON *e = cJSON_GetArrayItem(rs, i);
    cJSON_DeleteItemFromObjectCaseSensitive(e, "released");
    cJSON *rel = cJSON_AddObjectToObject(e, "released");
    cJSON_AddNumberToObject(rel, "checkpoint_id", (double)a->checkpoint_id);
    cJSON_AddNumberToObject(rel, "time_ms", (double)a->time_ms);
    return SP_OK;
}

sp_status_t sp_record_mark_released(const char *dir, const char *job_id, int64_t checkpoint_id, int64_t time_ms,
                                    sp_error_t *err)
{
    release_arg_t a = {job_id, checkpoint_id, time_ms};
    return modify(dir, do_mark_released, &a, err);
}

/* ---- pending records ---- */

/* "<dir>/.sp-pending-<job>-<trigger>.json" (malloc'd), or NULL for IDs that are not 32 hex digits. */
static char *pending_path(const char *dir, const char *job_id, const char *trigger_id)
{
    for (const char *id = job_id; id; id = id == job_id ? trigger_id : NULL) {
        if (strlen(id) != 32 || strspn(id, "0123456789abcdefABCDEF") != 32)
            return NULL;
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t l = n + sizeof SP_RECORD_PENDING_PREFIX + 32 + 1 + 32 + 6;
    char *p = malloc(l);
    if (p)
        snprintf(p, l, "%.*s/" SP_RECORD_PENDING_PREFIX "%s-%s.json", (int)n, dir, job_id, trigger_id);
    return p;
}

/* Pending records older than a day speak of operations the cluster forgot long ago (Flink keeps an
 * operation's result for rest.async.store-duration, 5 minutes by default): those of triggers nobody followed
 * with sp status are removed whenever a new one is written into the same directory. */
static void drop_old_pending(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, SP_RECORD_PENDING_PREFIX, strlen(SP_RECORD_PENDING_PREFIX)) != 0 || n < 5 ||
            strcmp(e->d_name + n - 5, ".json") != 0)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            now - st.st_mtime > 24 * 3600)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

sp_status_t sp_record_pending_save(const char *dir, const sp_record_origin_t *o, sp_error_t *err)
{
    struct stat st;
    if (s3_is_location(dir) || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        sp_error_set_file(err, dir);
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no such local directory");
    }
    char *path = pending_path(dir, o->job_id, o->trigger_id);
    if (!path)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "a pending record needs a job ID and a trigger ID");
    cJSON *j = cJSON_CreateObject();
    cJSON *c = origin_to_json(o);
    sp_status_t s;
    if (!j || !c) {
        cJSON_Delete(c);
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    } else {
        cJSON_AddNumberToObject(j, "schema_version", 1);
        cJSON_AddItemToObject(j, "pending", c);
        s = save(path, j, err);
    }
    if (!s)
        drop_old_pending(dir);
    cJSON_Delete(j);
    free(path);
    return s;
}

sp_status_t sp_record_pending_load(const char *dir, const char *job_id, const char *trigger_id,
                                   sp_record_origin_t *out, bool *found, sp_error_t *err)
{
    *found = false;
    memset(out, 0, sizeof *out);
    if (s3_is_location(dir))
        return SP_OK;
    char *path = pending_path(dir, job_id, trigger_id);
    if (!path)
        return SP_OK;
    cJSON *j;
    sp_status_t s = load(path, &j, err);
    free(path);
    if (s || !j)
        return s;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "pending");
    if (cJSON_IsObject(c)) {
        origin_from_json(c, out);
        *found = strcasecmp(out->job_id, job_id) == 0 && strcasecmp(out->trigger_id, trigger_id) == 0;
    }
    cJSON_Delete(j);
    return SP_OK;
}

sp_status_t sp_record_pending_user_dir(const char *xdg_state_home, const char *home, bool create, char *out, size_t n,
                                       sp_error_t *err)
{
    int l;
    if (xdg_state_home && xdg_state_home[0] == '/')
        l = snprintf(out, n, "%s/sp/pending", xdg_state_home);
    else if (home && home[0] == '/')
        l = snprintf(out, n, "%s/.local/state/sp/pending", home);
    else
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "neither XDG_STATE_HOME nor HOME is set");
    if (l < 0 || (size_t)l >= n)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "the state directory's path is too long");
    if (!create)
        return SP_OK;
    /* mkdir -p, each level 0700 */
    char p[4096];
    snprintf(p, sizeof p, "%s", out);
    for (char *q = p + 1;; q++) {
        if (*q == '/' || *q == '\0') {
            char c = *q;
            *q = '\0';
            if (mkdir(p, 0700) != 0 && errno != EEXIST) {
                sp_error_set_file(err, p);
                return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot create the directory: %s", strerror(errno));
            }
            *q = c;
            if (!c)
                break;
        }
    }
    return SP_OK;
}

sp_status_t sp_record_pending_remove(const char *dir, const char *job_id, const char *trigger_id, sp_error_t *err)
{
    if (s3_is_location(dir))
        return SP_OK;
    char *path = pending_path(dir, job_id, trigger_id);
    if (!path)
        return SP_OK;
    sp_status_t s = SP_OK;
    if (unlink(path) != 0 && errno != ENOENT) {
        sp_error_set_file(err, path);
        s = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot delete: %s", strerror(errno));
    }
    free(path);
    return s;
}

/* ---- the delete check ---- */

typedef struct refscan {
    const sp_snapshot_t *snap;
    const char *dir;     /* resolved snapshot directory */
    size_t dl;
    char hit[4096];
} refscan_t;

static int scan_ref(const sp_ref_t *ref, void *user)
{
    refscan_t *r = user;
    if (ref->kind == SP_REF_INLINE || ref->kind == SP_REF_RELATIVE)
        return 0;
    char p[4096];
    if (!sp_snapshot_local_path(r->snap, ref, p, sizeof p))
        return 0;
    if (strncmp(p, r->dir, r->dl) == 0 && p[r->dl] == '/') {
        snprintf(r->hit, sizeof r->hit, "%s", p);
        return 1;
    }
    return 0;
}

/* Whether the snapshot at `other` references a file inside `dir` (a resolved path); *hit names it. */
static bool references_into(const char *other, const char *dir, char *hit, size_t n)
{
    sp_snapshot_t *snap;
    if (sp_snapshot_open(other, 0, &snap, NULL) != SP_OK)
        return false;
    refscan_t r = {snap, dir, strlen(dir), ""};
    sp_meta_visit_refs(snap->meta, scan_ref, &r);
    sp_snapshot_close(snap);
    if (r.hit[0])
        snprintf(hit, n, "%s", r.hit);
    return r.hit[0] != 0;
}

static bool has_metadata(const char *d)
{
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/_metadata", d);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

#define LEGACY_SCAN_LIMIT 2000

/* Look in `parent` (and one level below it for chk-* directories) for a snapshot other than `dir`
 * that references files inside `dir`; *budget bounds the snapshots opened. */
static bool scan_beside(const char *parent, const char *dir, int depth, int *budget, char *who, size_t wn, char *hit,
                        size_t hn)
{
    DIR *d = opendir(parent);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && *budget > 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        if ((size_t)snprintf(p, sizeof p, "%s/%s", parent, e->d_name) >= sizeof p)
            continue;
        struct stat st;
        if (lstat(p, &st) != 0 || !S_ISDIR(st.st_mode) || strcmp(p, dir) == 0)
            continue;
        if (has_metadata(p)) {
            (*budget)--;
            if (references_into(p, dir, hit, hn)) {
                snprintf(who, wn, "%s", p);
                found = true;
            }
        } else if (depth > 0 && strcmp(e->d_name, "shared") != 0 && strcmp(e->d_name, "taskowned") != 0) {
            found = scan_beside(p, dir, depth - 1, budget, who, wn, hit, hn);
        }
    }
    closedir(d);
    return found;
}

/* LEGACY: a newer snapshot that can be found references the snapshot's files. */
static bool legacy_referenced(const char *dir, const char *job_checkpoint, char *who, size_t wn, char *hit, size_t hn)
{
    char real[4096];
    if (!realpath(dir, real))
        return false;
    if (job_checkpoint && *job_checkpoint) {
        const char *p = job_checkpoint;
        if (strncmp(p, "file://", 7) == 0)
            p += 7;
        else if (strncmp(p, "file:", 5) == 0)
            p += 5;
        if (p[0] == '/' && references_into(p, real, hit, hn)) {
            snprintf(who, wn, "%s", p);
            return true;
        }
    }
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", real);
    char *slash = strrchr(parent, '/');
    if (!slash || slash == parent)
        return false;
    *slash = '\0';
    int budget = LEGACY_SCAN_LIMIT;
    if (scan_beside(parent, real, 1, &budget, who, wn, hit, hn))
        return true;
    /* a retained checkpoint <root>/<job>/chk-N: the other jobs' chk-* under <root> too */
    if (strncmp(slash + 1, "chk-", 4) == 0) {
        char *s2 = strrchr(parent, '/');
        if (s2 && s2 != parent) {
            *s2 = '\0';
            return scan_beside(parent, real, 1, &budget, who, wn, hit, hn);
        }
    }
    return false;
}

static void warn_add(const sp_record_check_options_t *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void warn_add(const sp_record_check_options_t *o, const char *fmt, ...)
{
    if (!o->warning || !o->warning_size)
        return;
    size_t used = strlen(o->warning);
    if (used + 3 >= (size_t)o->warning_size)
        return;
    if (used) {
        strcat(o->warning, "; ");
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->warning + used, o->warning_size - used, fmt, ap);
    va_end(ap);
}

sp_status_t sp_record_check_delete_ex(const char *dir, const sp_record_check_options_t *opts, sp_error_t *err)
{
    sp_record_check_options_t none = {0};
    if (!opts)
        opts = &none;
    if (opts->warning && opts->warning_size)
        opts->warning[0] = '\0';
    sp_record_t r;
    sp_status_t s = sp_record_load(dir, &r, err);
    if (s || !r.exists)
        return s;
    sp_error_set_file(err, dir);
    for (uint32_t i = 0; r.summary.restores_claim && i < r.n_restores; i++) {
        const sp_record_restore_t *rs = &r.restores[i];
        if (strcmp(rs->claim_mode, "CLAIM") != 0)
            continue;
        sp_record_query_t q;
        memset(&q, 0, sizeof q);
        q.restore = rs;
        q.released = SP_RELEASE_UNKNOWN;
        q.checkpoint_id = -1;
        if (opts->query)
            opts->query(opts->query_user, &q);
        if (q.released == SP_RELEASE_JOB_UNKNOWN) {
            if (opts->force) {
                warn_add(opts, "job %s (CLAIM restore) is unknown to the cluster%s%s%s; deleting (--force)", rs->job_id,
                         q.why[0] ? " (" : "", q.why, q.why[0] ? ")" : "");
                continue;
            }
            s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                             "job %s was restored from this snapshot in CLAIM mode, but the cluster it was recorded on "
                             "does not know it (%.200s): if the job never ran (its submission failed), --force is safe; "
                             "if it ran, Flink owned the snapshot and may have deleted parts of it (record %s%s)",
                             rs->job_id, q.why, dir, SP_RECORD_SUFFIX);
        } else {
            s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                             "a job was restored from this snapshot in CLAIM mode: Flink owns it now and deletes it "
                             "itself (its record is %s%s)", dir, SP_RECORD_SUFFIX);
        }
        sp_record_free(&r);
        return s;
    }
    if (r.summary.pins) {
        if (!opts->force) {
            s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "the snapshot is pinned%s%s%s (sp unpin, or --force)",
                             r.summary.pin_reason[0] ? " (\"" : "", r.summary.pin_reason,
                             r.summary.pin_reason[0] ? "\")" : "");
            sp_record_free(&r);
            return s;
        }
        warn_add(opts, "deleting although the snapshot is pinned (--force)");
    }
    for (uint32_t i = 0; i < r.n_restores && !s; i++) {
        const sp_record_restore_t *rs = &r.restores[i];
        bool legacy = strcmp(rs->claim_mode, "LEGACY") == 0;
        bool noclaim = strcmp(rs->claim_mode, "NO_CLAIM") == 0;
        if (!legacy && !noclaim)
            continue; /* unknown modes were counted as LEGACY by sp_record_read: treat them so */
        if (noclaim && rs->released)
            continue;
        sp_record_query_t q;
        memset(&q, 0, sizeof q);
        q.restore = rs;
        q.released = SP_RELEASE_UNKNOWN;
        q.checkpoint_id = -1;
        if (opts->query)
            opts->query(opts->query_user, &q);
        if (noclaim) {
            if (q.released == SP_RELEASE_RELEASED)
                continue;
            if (q.released == SP_RELEASE_JOB_OVER || q.released == SP_RELEASE_JOB_UNKNOWN) {
                warn_add(opts, "job %s (NO_CLAIM restore) %s: it no longer needs this snapshot", rs->job_id,
                         q.released == SP_RELEASE_JOB_OVER ? "is over" : "is unknown to its cluster");
                continue;
            }
            const char *why = q.released == SP_RELEASE_NOT_YET
                                  ? "it has not completed a checkpoint after the restore yet"
                                  : "whether it completed a checkpoint since cannot be checked";
            if (!opts->force) {
                s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                 "job %s was restored from this snapshot in NO_CLAIM mode and %s%s%s%s; it may be "
                                 "deleted once that job completed a checkpoint (--force to delete anyway)",
                                 rs->job_id, why, q.why[0] ? " (" : "", q.why, q.why[0] ? ")" : "");
            } else {
                warn_add(opts, "job %s (NO_CLAIM restore) may still need this snapshot: %s (--force)", rs->job_id, why);
            }
        } else {
            char who[4096] = "", hit[4096] = "";
            if (legacy_referenced(dir, q.checkpoint_path, who, sizeof who, hit, sizeof hit)) {
                if (!opts->force)
                    s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                                     "job %s was restored from this snapshot in LEGACY mode and the newer snapshot %.300s "
                                     "references its file %.300s (--force to delete anyway)",
                                     rs->job_id, who, hit);
                else
                    warn_add(opts, "the newer snapshot %.300s references this snapshot's files (LEGACY restore of job %s; --force)",
                             who, rs->job_id);
            }
        }
    }
    sp_record_free(&r);
    return s;
}

sp_status_t sp_record_check_restore(const char *dir, const char *claim_mode, sp_error_t *err)
{
    sp_record_t r;
    sp_status_t s = sp_record_load(dir, &r, err);
    if (s || !r.exists)
        return s;
    for (uint32_t i = 0; i < r.n_restores && !s; i++) {
        const sp_record_restore_t *rs = &r.restores[i];
        if (strcmp(rs->claim_mode, "CLAIM") == 0) {
            sp_error_set_file(err, dir);
            s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                             "job %s was already restored from this snapshot in CLAIM mode: Flink owns it and may "
                             "delete it at any time, so no other job may start from it", rs->job_id);
        } else if (strcmp(claim_mode, "CLAIM") == 0 && !(strcmp(rs->claim_mode, "NO_CLAIM") == 0 && rs->released)) {
            sp_error_set_file(err, dir);
            s = sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                             "job %s was restored from this snapshot in %s mode and may still need it; a CLAIM restore "
                             "would let Flink delete it", rs->job_id, rs->claim_mode);
        }
    }
    sp_record_free(&r);
    return s;
}
