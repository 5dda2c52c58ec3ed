/* Ownership records beside snapshots (see sp_record.h). */
#include "sp_record.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sp_fs.h"

static char *record_path(const char *dir)
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
    struct stat st;
    if (stat(path, &st) != 0)
        return SP_OK;
    char *text;
    size_t len;
    sp_status_t s = sp_fs_read_all(path, &text, &len, err);
    if (s)
        return s;
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
    char *path = record_path(dir);
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
    sp_record_summary_t r;
    sp_status_t s = sp_record_read(dir, &r, err);
    if (s || !r.exists)
        return s;
    sp_error_set_file(err, dir);
    if (r.restores_claim)
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "a job was restored from this snapshot in CLAIM mode: Flink owns it now and deletes it "
                            "itself (its record is %s%s)", dir, SP_RECORD_SUFFIX);
    if (force)
        return SP_OK;
    if (r.pins)
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "the snapshot is pinned%s%s%s (sp unpin, or --force)",
                            r.pin_reason[0] ? " (\"" : "", r.pin_reason, r.pin_reason[0] ? "\")" : "");
    if (r.restores_no_claim)
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "a job was restored from this snapshot in NO_CLAIM mode; it may be deleted once that job "
                            "completed its first checkpoint (--force if it has)");
    if (r.restores_legacy)
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "a job was restored from this snapshot in LEGACY mode; its later checkpoints may still "
                            "reference these files (--force to delete anyway)");
    return SP_OK;
}

static sp_status_t save(const char *path, cJSON *j, sp_error_t *err)
{
    char *text = cJSON_Print(j);
    if (!text)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    size_t n = strlen(text);
    text[n] = '\n';
    sp_status_t s = sp_fs_write_atomic(path, text, n + 1, true, err);
    free(text);
    return s;
}

static sp_status_t edit(const char *dir, cJSON **j, char **path, sp_error_t *err)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        sp_error_set_file(err, dir);
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no such snapshot");
    }
    *path = record_path(dir);
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
