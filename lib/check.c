/*
 * check.c - `sp check`: the new job's description (uids, operator IDs, job
 * JSON, Flink plans, another snapshot) and Flink's restore rules applied to
 * every operator of a snapshot (sp_check.h).
 */
#include "sp_check.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_inspect.h"
#include "sp_mutf8.h"
#include "sp_uid.h"

/* Flink's bounds of (max) parallelism: KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM */
#define FLINK_MAX_PARALLELISM 32768

static char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static bool valid_utf8(const char *s, size_t len)
{
    uint8_t *tmp = malloc(3 * len + 1);
    long r = tmp ? sp_utf8_to_mutf8(s, len, tmp) : -1;
    free(tmp);
    return r >= 0;
}

/* A stored modified-UTF-8 string as standard UTF-8 (non-convertible bytes as \xNN). */
static char *mutf8_dup(sp_str_t s) { return sp_mutf8_display(s.ptr, s.len); }

/* ------------------------------------------------------------------ */
/* operator references                                                 */
/* ------------------------------------------------------------------ */

sp_status_t sp_opref_parse(const char *text, sp_opref_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    if (!text)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "operator", "no operator given");
    if (strncmp(text, "uid:", 4) == 0) {
        const char *uid = text + 4;
        if (!*uid)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "operator",
                                "'%s': the uid after 'uid:' is empty (Flink rejects empty uids)", text);
        if (!valid_utf8(uid, strlen(uid)))
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "operator", "'%s': the uid is not valid UTF-8",
                                text);
        out->by_uid = true;
        out->uid = uid;
        sp_uid_to_operator_id(uid, strlen(uid), out->id);
        return SP_OK;
    }
    if (sp_id_from_hex(text, out->id))
        return SP_OK;
    return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "operator",
                        "'%s' is neither an operator ID (32 hex digits) nor uid:UID", text);
}

int32_t sp_opref_find(const sp_metadata_t *m, const sp_opref_t *ref)
{
    for (uint32_t i = 0; i < m->n_operators; i++)
        if (memcmp(m->operators[i].id, ref->id, 16) == 0)
            return (int32_t)i;
    if (!ref->by_uid || m->version < 5)
        return -1;
    size_t len = strlen(ref->uid);
    uint8_t *mu = malloc(3 * len + 1);
    long ml = mu ? sp_utf8_to_mutf8(ref->uid, len, mu) : -1;
    int32_t found = -1;
    for (uint32_t i = 0; ml >= 0 && i < m->n_operators && found < 0; i++) {
        const sp_str_t *u = &m->operators[i].uid;
        if (u->len == (uint32_t)ml && memcmp(u->ptr, mu, (size_t)ml) == 0)
            found = (int32_t)i;
    }
    free(mu);
    return found;
}

static bool handle_list_has(const sp_handle_list_t *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (l->items[i])
            return true;
    return false;
}

bool sp_operator_has_state(const sp_metadata_t *m, const sp_operator_t *op)
{
    if (op->coordinator)
        return true;
    for (uint32_t j = 0; j < op->n_subtasks; j++) {
        const sp_subtask_t *st = &op->subtasks[j];
        if (st->finished)
            continue;
        if (m->version == 0) {
            if (!st->v0_null)
                return true;
            continue;
        }
        if (handle_list_has(&st->legacy) || handle_list_has(&st->managed_operator) ||
            handle_list_has(&st->raw_operator) || st->managed_keyed || st->raw_keyed || st->n_input_channels ||
            st->n_output_channels)
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------ */
/* job description                                                     */
/* ------------------------------------------------------------------ */

void sp_job_init(sp_job_t *job) { memset(job, 0, sizeof *job); }

void sp_job_free(sp_job_t *job)
{
    if (!job)
        return;
    for (uint32_t i = 0; i < job->n_operators; i++) {
        free(job->operators[i].uid);
        free(job->operators[i].name);
        free(job->operators[i].origin);
    }
    free(job->operators);
    memset(job, 0, sizeof *job);
}

static sp_status_t check_range(const char *what, int32_t v, const char *origin, sp_error_t *err)
{
    if (v == -1 || (v >= 1 && v <= FLINK_MAX_PARALLELISM))
        return SP_OK;
    return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, what, "%s: %s %d is outside Flink's range 1..%d",
                        origin ? origin : "job", what, v, FLINK_MAX_PARALLELISM);
}

sp_status_t sp_job_add(sp_job_t *job, const char *uid, bool has_id, const uint8_t id_in[16], int32_t parallelism,
                       int32_t max_parallelism, const char *name, const char *origin, sp_error_t *err)
{
    uint8_t id[16];
    char hex[33];
    if (uid) {
        if (!*uid)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "uid",
                                "%s: a uid cannot be empty (Flink rejects empty uids)", origin ? origin : "job");
        if (!valid_utf8(uid, strlen(uid)))
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "uid", "%s: uid is not valid UTF-8",
                                origin ? origin : "job");
        sp_uid_to_operator_id(uid, strlen(uid), id);
        if (has_id && memcmp(id, id_in, 16) != 0) {
            sp_id_to_hex(id, hex);
            char given[33];
            sp_id_to_hex(id_in, given);
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "operator_id",
                                "%s: uid '%s' has operator ID %s, not %s (for an ID set with setUidHash use "
                                "\"uid_hash\")",
                                origin ? origin : "job", uid, hex, given);
        }
    } else if (has_id) {
        memcpy(id, id_in, 16);
    } else {
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "operator", "%s: an operator needs a uid or an operator ID",
                            origin ? origin : "job");
    }
    sp_status_t s;
    if ((s = check_range("parallelism", parallelism, origin, err)) ||
        (s = check_range("max_parallelism", max_parallelism, origin, err)))
        return s;
    for (uint32_t i = 0; i < job->n_operators; i++) {
        sp_job_operator_t *o = &job->operators[i];
        if (memcmp(o->id, id, 16) != 0)
            continue;
        sp_id_to_hex(id, hex);
        if (parallelism > 0 && o->parallelism > 0 && parallelism != o->parallelism)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "parallelism",
                                "operator %s is described twice with parallelism %d (%s) and %d (%s)", hex,
                                o->parallelism, o->origin, parallelism, origin ? origin : "job");
        if (max_parallelism > 0 && o->max_parallelism > 0 && max_parallelism != o->max_parallelism)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "max_parallelism",
                                "operator %s is described twice with max parallelism %d (%s) and %d (%s)", hex,
                                o->max_parallelism, o->origin, max_parallelism, origin ? origin : "job");
        if (parallelism > 0)
            o->parallelism = parallelism;
        if (max_parallelism > 0)
            o->max_parallelism = max_parallelism;
        if (!o->uid && uid && !(o->uid = xstrdup(uid)))
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        if (!o->name && name && !(o->name = xstrdup(name)))
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        return SP_OK;
    }
    if (job->n_operators == job->cap_) {
        uint32_t ncap = job->cap_ ? job->cap_ * 2 : 16;
        sp_job_operator_t *n = realloc(job->operators, ncap * sizeof *n);
        if (!n)
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        job->operators = n;
        job->cap_ = ncap;
    }
    sp_job_operator_t *o = &job->operators[job->n_operators];
    memset(o, 0, sizeof *o);
    memcpy(o->id, id, 16);
    o->parallelism = parallelism;
    o->max_parallelism = max_parallelism;
    o->uid = xstrdup(uid);
    o->name = xstrdup(name);
    o->origin = xstrdup(origin ? origin : "job");
    if ((uid && !o->uid) || (name && !o->name) || !o->origin) {
        free(o->uid);
        free(o->name);
        free(o->origin);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    job->n_operators++;
    return SP_OK;
}

void sp_job_set_defaults(sp_job_t *job, int32_t parallelism, int32_t max_parallelism)
{
    for (uint32_t i = 0; i < job->n_operators; i++) {
        if (job->operators[i].parallelism < 0 && parallelism > 0)
            job->operators[i].parallelism = parallelism;
        if (job->operators[i].max_parallelism < 0 && max_parallelism > 0)
            job->operators[i].max_parallelism = max_parallelism;
    }
}

/* Skip a leading UTF-8 byte order mark (editors on Windows write one). */
static void skip_bom(const char **text, size_t *len)
{
    if (*len >= 3 && (unsigned char)(*text)[0] == 0xEF && (unsigned char)(*text)[1] == 0xBB &&
        (unsigned char)(*text)[2] == 0xBF) {
        *text += 3;
        *len -= 3;
    }
}

/* Parse one JSON value filling the text (after a BOM); NULL with *trailing set when text follows it. */
static cJSON *parse_whole(const char *text, size_t len, bool *trailing, size_t *at)
{
    const char *end = NULL;
    *trailing = false;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
    if (!root)
        return NULL;
    size_t k = end ? (size_t)(end - text) : len;
    while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r'))
        k++;
    if (k < len && !(text[k] == '\0' && k + 1 == len)) {
        *trailing = true;
        *at = k;
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

sp_status_t sp_job_parse_uids(sp_job_t *job, const char *text, size_t len, const char *file, sp_error_t *err)
{
    skip_bom(&text, &len);
    size_t line = 0, pos = 0;
    char origin[600];
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        line++;
        size_t a = pos, b = end;
        while (a < b && (text[a] == ' ' || text[a] == '\t' || text[a] == '\r'))
            a++;
        while (b > a && (text[b - 1] == ' ' || text[b - 1] == '\t' || text[b - 1] == '\r'))
            b--;
        pos = end + 1;
        if (a == b || text[a] == '#')
            continue;
        char *uid = malloc(b - a + 1);
        if (!uid)
            return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        memcpy(uid, text + a, b - a);
        uid[b - a] = '\0';
        snprintf(origin, sizeof origin, "%s: line %zu", file ? file : "uids", line);
        sp_status_t s = SP_OK;
        if (memchr(text + a, '\0', b - a) || !valid_utf8(uid, b - a)) {
            char field[32];
            snprintf(field, sizeof field, "line %zu", line);
            s = sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, field, "not a valid UTF-8 uid");
        } else {
            s = sp_job_add(job, uid, false, NULL, -1, -1, NULL, origin, err);
        }
        free(uid);
        if (s) {
            sp_error_set_file(err, file ? file : "");
            return s;
        }
    }
    return SP_OK;
}

/* Errors about a JSON document name the file and the JSON path. */
static sp_status_t json_err(sp_error_t *err, const char *file, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static sp_status_t json_err(sp_error_t *err, const char *file, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, field, "%s", msg);
    sp_error_set_file(err, file ? file : "");
    return SP_ERR_INVALID;
}

/* An integer member in 1..32768, or absent (-1). */
static sp_status_t json_par(const cJSON *obj, const char *key, const char *path, const char *file, int32_t *out,
                            sp_error_t *err)
{
    *out = -1;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return SP_OK;
    char field[160];
    snprintf(field, sizeof field, "%s%s%s", path, path[0] ? "." : "", key);
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int64_t)v->valuedouble)
        return json_err(err, file, field, "expected an integer");
    if (v->valuedouble < 1 || v->valuedouble > FLINK_MAX_PARALLELISM)
        return json_err(err, file, field, "%.0f is outside Flink's range 1..%d", v->valuedouble,
                        FLINK_MAX_PARALLELISM);
    *out = (int32_t)v->valuedouble;
    return SP_OK;
}

static const char *json_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

sp_status_t sp_job_parse_json(sp_job_t *job, const char *text, size_t len, const char *file, sp_error_t *err)
{
    size_t bom = len;
    skip_bom(&text, &len);
    bom -= len;
    bool trailing;
    size_t at = 0;
    cJSON *root = parse_whole(text, len, &trailing, &at);
    if (!root && trailing)
        return json_err(err, file, "", "text after the JSON value (at byte %zu)", at + bom);
    if (!root)
        return json_err(err, file, "", "not valid JSON (near byte %ld)",
                        cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - text + (long)bom) : 0L);
    sp_status_t s = SP_OK;
    int32_t def_p = -1, def_mp = -1;
    const cJSON *ops = NULL;
    if (!cJSON_IsObject(root)) {
        s = json_err(err, file, "", "expected an object {\"operators\": [...]}");
        goto out;
    }
    for (const cJSON *k = root->child; k; k = k->next)
        if (strcmp(k->string, "operators") && strcmp(k->string, "parallelism") &&
            strcmp(k->string, "max_parallelism") && strcmp(k->string, "name") && strcmp(k->string, "comment")) {
            s = json_err(err, file, k->string, "unknown key (expected operators, parallelism, max_parallelism)");
            goto out;
        }
    if ((s = json_par(root, "parallelism", "", file, &def_p, err)) ||
        (s = json_par(root, "max_parallelism", "", file, &def_mp, err)))
        goto out;
    ops = cJSON_GetObjectItemCaseSensitive(root, "operators");
    if (!cJSON_IsArray(ops)) {
        s = json_err(err, file, "operators", "expected an array of operators");
        goto out;
    }
    int idx = 0;
    for (const cJSON *o = ops->child; o; o = o->next, idx++) {
        char path[64], field[400], origin[700];
        snprintf(path, sizeof path, "operators[%d]", idx);
        snprintf(origin, sizeof origin, "%s: %s", file ? file : "job", path);
        if (!cJSON_IsObject(o)) {
            s = json_err(err, file, path, "expected an object with \"uid\" or \"operator_id\"");
            goto out;
        }
        for (const cJSON *k = o->child; k; k = k->next)
            if (strcmp(k->string, "uid") && strcmp(k->string, "operator_id") && strcmp(k->string, "uid_hash") &&
                strcmp(k->string, "parallelism") && strcmp(k->string, "max_parallelism") &&
                strcmp(k->string, "name")) {
                snprintf(field, sizeof field, "%s.%s", path, k->string);
                s = json_err(err, file, field,
                             "unknown key (expected uid, operator_id, uid_hash, parallelism, max_parallelism, name)");
                goto out;
            }
        const cJSON *uidv = cJSON_GetObjectItemCaseSensitive(o, "uid");
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(o, "operator_id");
        const cJSON *hv = cJSON_GetObjectItemCaseSensitive(o, "uid_hash");
        const cJSON *nv = cJSON_GetObjectItemCaseSensitive(o, "name");
        uint8_t id[16], uh[16];
        if (uidv && !cJSON_IsString(uidv)) {
            snprintf(field, sizeof field, "%s.uid", path);
            s = json_err(err, file, field, "expected a string");
            goto out;
        }
        if (idv && (!cJSON_IsString(idv) || !sp_id_from_hex(idv->valuestring, id))) {
            snprintf(field, sizeof field, "%s.operator_id", path);
            s = json_err(err, file, field, "expected an operator ID of 32 hex digits");
            goto out;
        }
        if (hv && (!cJSON_IsString(hv) || !sp_id_from_hex(hv->valuestring, uh))) {
            snprintf(field, sizeof field, "%s.uid_hash", path);
            s = json_err(err, file, field, "expected an operator ID of 32 hex digits");
            goto out;
        }
        if (nv && !cJSON_IsString(nv)) {
            snprintf(field, sizeof field, "%s.name", path);
            s = json_err(err, file, field, "expected a string");
            goto out;
        }
        if (!uidv && !idv) {
            s = json_err(err, file, path, "an operator needs \"uid\" or \"operator_id\"");
            goto out;
        }
        int32_t p, mp;
        if ((s = json_par(o, "parallelism", path, file, &p, err)) ||
            (s = json_par(o, "max_parallelism", path, file, &mp, err)))
            goto out;
        if (p < 0)
            p = def_p;
        if (mp < 0)
            mp = def_mp;
        s = sp_job_add(job, uidv ? uidv->valuestring : NULL, idv != NULL, id, p, mp, nv ? nv->valuestring : NULL,
                       origin, err);
        if (s) {
            sp_error_set_file(err, file ? file : "");
            if (err) {
                /* the JSON path of the member the error is about */
                char sub[64];
                snprintf(sub, sizeof sub, "%.63s", err->field);
                snprintf(err->field, sizeof err->field, "%s%s%.63s", path, sub[0] ? "." : "", sub);
            }
            goto out;
        }
        if (hv) {
            /* the operator just added or merged: find it by its generated ID */
            uint8_t gid[16];
            if (uidv)
                sp_uid_to_operator_id(uidv->valuestring, strlen(uidv->valuestring), gid);
            else
                memcpy(gid, id, 16);
            for (uint32_t i = 0; i < job->n_operators; i++)
                if (memcmp(job->operators[i].id, gid, 16) == 0) {
                    job->operators[i].has_uid_hash = true;
                    memcpy(job->operators[i].uid_hash, uh, 16);
                }
        }
    }
    if (idx == 0)
        s = json_err(err, file, "operators", "the job has no operators");
out:
    cJSON_Delete(root);
    return s;
}

static sp_status_t plan_nodes(sp_job_t *job, const cJSON *nodes, const char *path, const char *file, sp_error_t *err)
{
    if (!cJSON_IsArray(nodes) || !nodes->child)
        return json_err(err, file, path, "expected a non-empty array of job vertices");
    int idx = 0;
    for (const cJSON *n = nodes->child; n; n = n->next, idx++) {
        char field[160], origin[700];
        snprintf(field, sizeof field, "%s[%d].id", path, idx);
        const char *id = json_str(n, "id");
        uint8_t bytes[16];
        if (!id || !sp_id_from_hex(id, bytes))
            return json_err(err, file, field, "expected a job vertex ID of 32 hex digits");
        int32_t p = -1;
        const cJSON *pv = cJSON_GetObjectItemCaseSensitive(n, "parallelism");
        if (cJSON_IsNumber(pv) && pv->valuedouble >= 1 && pv->valuedouble <= FLINK_MAX_PARALLELISM)
            p = (int32_t)pv->valuedouble;
        /* the plan's description is HTML-ish ("Source: x<br/>"); keep its first line */
        const char *desc = json_str(n, "description");
        if (!desc || !*desc)
            desc = json_str(n, "name");
        if (!desc || !*desc)
            desc = json_str(n, "operator");
        char name[200] = "";
        if (desc) {
            size_t k = 0;
            for (const char *c = desc; *c && k + 1 < sizeof name; c++) {
                if (*c == '<' || *c == '\n')
                    break;
                name[k++] = *c;
            }
            name[k] = '\0';
        }
        snprintf(origin, sizeof origin, "%s: %s[%d]", file ? file : "plan", path, idx);
        sp_status_t s = sp_job_add(job, NULL, true, bytes, p, -1, name[0] ? name : NULL, origin, err);
        if (s)
            return s;
    }
    job->from_plan = true;
    return SP_OK;
}

sp_status_t sp_job_parse_plan(sp_job_t *job, const char *text, size_t len, const char *file, sp_error_t *err)
{
    size_t bom = len;
    skip_bom(&text, &len);
    bom -= len;
    bool trailing;
    size_t at = 0;
    cJSON *root = parse_whole(text, len, &trailing, &at);
    if (!root && trailing)
        return json_err(err, file, "", "text after the JSON value (at byte %zu)", at + bom);
    if (!root)
        return json_err(err, file, "", "not valid JSON (near byte %ld)",
                        cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - text + (long)bom) : 0L);
    sp_status_t s;
    cJSON *inner = NULL;
    const cJSON *plan = cJSON_GetObjectItemCaseSensitive(root, "plan");
    if (cJSON_IsString(plan)) {
        /* Flink 1.15 typed the plan as a JSON string */
        inner = cJSON_Parse(plan->valuestring);
        if (!inner) {
            s = json_err(err, file, "plan", "the plan string is not valid JSON");
            goto out;
        }
        plan = inner;
    }
    if (cJSON_IsObject(plan) && cJSON_GetObjectItemCaseSensitive(plan, "nodes"))
        s = plan_nodes(job, cJSON_GetObjectItemCaseSensitive(plan, "nodes"), "plan.nodes", file, err);
    else if (cJSON_GetObjectItemCaseSensitive(root, "nodes"))
        s = plan_nodes(job, cJSON_GetObjectItemCaseSensitive(root, "nodes"), "nodes", file, err);
    else if (cJSON_GetObjectItemCaseSensitive(root, "vertices"))
        s = plan_nodes(job, cJSON_GetObjectItemCaseSensitive(root, "vertices"), "vertices", file, err);
    else
        s = json_err(err, file, "plan",
                     "not a Flink job plan: expected {\"plan\": {\"nodes\": [...]}} (GET /jobs/:jobid/plan, "
                     "POST /jars/:jarid/plan) or a job's \"vertices\"");
out:
    cJSON_Delete(inner);
    cJSON_Delete(root);
    return s;
}

sp_status_t sp_job_add_snapshot(sp_job_t *job, const sp_metadata_t *m, const char *origin, sp_error_t *err)
{
    for (uint32_t i = 0; i < m->n_operators; i++) {
        const sp_operator_t *op = &m->operators[i];
        char *uid = op->uid.len ? mutf8_dup(op->uid) : NULL;
        char *name = op->name.len ? mutf8_dup(op->name) : NULL;
        char org[600];
        snprintf(org, sizeof org, "%s: operators[%u]", origin ? origin : "snapshot", i);
        int32_t p = op->parallelism >= 1 && op->parallelism <= FLINK_MAX_PARALLELISM ? op->parallelism : -1;
        int32_t mp = op->max_parallelism >= 1 && op->max_parallelism <= FLINK_MAX_PARALLELISM ? op->max_parallelism : -1;
        /* the stored uid is shown; the ID is what the operator had (it may come from setUidHash) */
        sp_status_t s = sp_job_add(job, NULL, true, op->id, p, mp, name, org, err);
        if (!s && uid) {
            for (uint32_t j = 0; j < job->n_operators; j++)
                if (memcmp(job->operators[j].id, op->id, 16) == 0 && !job->operators[j].uid) {
                    job->operators[j].uid = uid;
                    uid = NULL;
                }
        }
        free(uid);
        free(name);
        if (s)
            return s;
    }
    return SP_OK;
}

/* ------------------------------------------------------------------ */
/* the check                                                           */
/* ------------------------------------------------------------------ */

const char *sp_check_verdict_token(sp_check_verdict_t v)
{
    switch (v) {
    case SP_VERDICT_RESTORED: return "restored";
    case SP_VERDICT_SKIPPED: return "skipped";
    case SP_VERDICT_UNMAPPED: return "unmapped";
    case SP_VERDICT_DROPPED: return "dropped";
    case SP_VERDICT_SHADOWED: return "shadowed";
    case SP_VERDICT_MAX_PARALLELISM_MISMATCH: return "max_parallelism_mismatch";
    case SP_VERDICT_PARALLELISM_ABOVE_MAX: return "parallelism_above_max_parallelism";
    case SP_VERDICT_INVALID_JOB: return "invalid_job";
    case SP_VERDICT_NEW: return "new";
    }
    return "unknown";
}

static void fmt_bytes(uint64_t b, char *buf, size_t n)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (b < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", b);
        return;
    }
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, n, "%.1f %s", v, units[u]);
}

/* Append a sentence to an item's reason. */
static void add_reason(sp_check_item_t *it, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void add_reason(sp_check_item_t *it, const char *fmt, ...)
{
    size_t used = strlen(it->reason);
    if (used && used + 2 < sizeof it->reason) {
        memcpy(it->reason + used, "; ", 3);
        used += 2;
    }
    if (used >= sizeof it->reason - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->reason + used, sizeof it->reason - used, fmt, ap);
    va_end(ap);
}

typedef struct strlist {
    uint32_t n, cap;
    char **v;
    bool nomem;
} strlist_t;

/* One shell word: as is when it holds only safe characters, else in single quotes with ' as '\''. */
static const char *shq(const char *a, const char *b, char *buf, size_t n)
{
    char w[1200];
    snprintf(w, sizeof w, "%s%s", a, b ? b : "");
    bool safe = w[0] != '\0';
    for (const char *p = w; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("_-./:=@%+,", *p)))
            safe = false;
    if (safe) {
        snprintf(buf, n, "%s", w);
        return buf;
    }
    size_t k = 0;
    if (n < 3) {
        buf[0] = '\0';
        return buf;
    }
    buf[k++] = '\'';
    for (const char *p = w; *p && k + 6 < n; p++) {
        if (*p == '\'') {
            memcpy(buf + k, "'\\''", 4);
            k += 4;
        } else {
            buf[k++] = *p;
        }
    }
    buf[k++] = '\'';
    buf[k] = '\0';
    return buf;
}

static void list_add(strlist_t *l, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void list_add(strlist_t *l, const char *fmt, ...)
{
    char buf[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (l->n == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 8;
        char **nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->nomem = true;
            return;
        }
        l->v = nv;
        l->cap = nc;
    }
    char *s = xstrdup(buf);
    if (!s) {
        l->nomem = true;
        return;
    }
    l->v[l->n++] = s;
}

/* "operator 0123... (uid u)" for messages */
static void label(const sp_check_item_t *it, char *buf, size_t n)
{
    char hex[33];
    sp_id_to_hex(it->operator_id, hex);
    if (it->uid)
        snprintf(buf, n, "operator %s (uid '%s')", hex, it->uid);
    else if (it->name)
        snprintf(buf, n, "operator %s (%s)", hex, it->name);
    else
        snprintf(buf, n, "operator %s", hex);
}

static size_t min3(size_t a, size_t b, size_t c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

/* Levenshtein distance (bounded inputs: uids are short). */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 512 || lb > 512)
        return (size_t)-1;
    size_t *row = malloc((lb + 1) * sizeof *row);
    if (!row)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            row[j] = min3(row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1]));
            diag = up;
        }
    }
    size_t d = row[lb];
    free(row);
    return d;
}

/* Two uids that look like one renamed into the other. */
static bool uids_close(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t longer = la > lb ? la : lb;
    size_t limit = longer / 4 > 2 ? longer / 4 : 2;
    if (edit_distance(a, b) <= limit)
        return true;
    return (la >= 4 && strstr(b, a)) || (lb >= 4 && strstr(a, b));
}

static int32_t find_job_op(const sp_job_t *job, const uint8_t id[16], bool alt)
{
    for (uint32_t j = 0; j < job->n_operators; j++) {
        const sp_job_operator_t *o = &job->operators[j];
        if (!alt && memcmp(o->id, id, 16) == 0)
            return (int32_t)j;
        if (alt && o->has_uid_hash && memcmp(o->uid_hash, id, 16) == 0)
            return (int32_t)j;
    }
    return -1;
}

static void judge_matched(const sp_metadata_t *m, const sp_operator_t *op, sp_check_item_t *it)
{
    int32_t p = it->new_parallelism, mp = it->new_max_parallelism, saved = it->saved_max_parallelism;
    bool fail = false;
    if (p > 0 && mp > 0 && p > mp) {
        it->verdict = SP_VERDICT_INVALID_JOB;
        add_reason(it,
                   "the new job's parallelism %d is above its max parallelism %d: Flink rejects the job before "
                   "restoring (\"parallelism (%d) is higher than the max parallelism (%d)\")",
                   p, mp, p, mp);
        fail = true;
    }
    if (m->version > 0 && mp > 0 && mp != saved) {
        if (!fail)
            it->verdict = SP_VERDICT_MAX_PARALLELISM_MISMATCH;
        add_reason(it,
                   "max parallelism %d set in the new job differs from the saved max parallelism %d: Flink fails "
                   "(\"Max parallelism mismatch between checkpoint/savepoint state and new program\"); keep %d, "
                   "or leave max parallelism unset so that Flink adopts %d",
                   mp, saved, saved, saved);
        fail = true;
    }
    if (m->version > 0 && p > 0 && saved > 0 && p > saved && op->n_subtasks > 0 && !op->fully_finished) {
        if (!fail)
            it->verdict = SP_VERDICT_PARALLELISM_ABOVE_MAX;
        add_reason(it,
                   "parallelism %d of the new job is above the saved max parallelism %d: Flink fails (\"The "
                   "maximum parallelism (%d) of the restored state is lower than the configured parallelism "
                   "(%d)\"); use a parallelism of at most %d",
                   p, saved, saved, p, saved);
        fail = true;
    }
    if (fail) {
        it->ok = false;
        return;
    }
    it->verdict = SP_VERDICT_RESTORED;
    char b[32];
    fmt_bytes(it->state_bytes, b, sizeof b);
    if (op->fully_finished)
        add_reason(it, "fully finished in the snapshot: restored as finished, its tasks do not run again");
    else if (it->has_state)
        add_reason(it, "state restored (%s)", b);
    else
        add_reason(it, "in the new job; the snapshot holds no state for it, it starts empty");
    if (it->by_uid_hash)
        add_reason(it, "matched through the new operator's setUidHash ID");
    if (m->version > 0 && mp < 0 && saved > 0)
        add_reason(it, "max parallelism %d is adopted from the snapshot (not set in the new job)", saved);
    if (p > 0 && it->saved_parallelism > 0 && p != it->saved_parallelism && it->has_state)
        add_reason(it, "rescaled from parallelism %d to %d", it->saved_parallelism, p);
}

sp_status_t sp_check(const sp_snapshot_t *snap, const sp_job_t *job, const sp_check_options_t *opts,
                     sp_check_result_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    sp_check_options_t none = {0};
    if (!opts)
        opts = &none;
    if (!job || job->n_operators == 0)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "job",
                            "the new job has no operators: describe it with uids, operator IDs, a job file, a plan "
                            "or another snapshot");
    const sp_metadata_t *m = snap->meta;
    sp_opref_t *exp = calloc(opts->n_expect_dropped + 1, sizeof *exp);
    int32_t *exp_idx = calloc(opts->n_expect_dropped + 1, sizeof *exp_idx);
    int32_t *job_match = calloc(job->n_operators, sizeof *job_match);
    uint32_t *job_count = calloc(job->n_operators, sizeof *job_count);
    sp_summary_t sum;
    memset(&sum, 0, sizeof sum);
    strlist_t fails = {0}, hints = {0};
    sp_status_t s = SP_OK;
    if (!exp || !exp_idx || !job_match || !job_count) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto done;
    }
    for (uint32_t k = 0; k < opts->n_expect_dropped; k++) {
        if ((s = sp_opref_parse(opts->expect_dropped[k], &exp[k], err))) {
            if (err)
                snprintf(err->field, sizeof err->field, "expect_dropped[%u]", k);
            goto done;
        }
        exp_idx[k] = sp_opref_find(m, &exp[k]);
    }
    if ((s = sp_summarize(snap, &sum, err)))
        goto done;
    out->items = calloc((size_t)m->n_operators + job->n_operators + 1, sizeof *out->items);
    if (!out->items) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto done;
    }
    for (uint32_t j = 0; j < job->n_operators; j++)
        job_match[j] = -1;

    /* 1. every operator of the snapshot */
    for (uint32_t i = 0; i < m->n_operators; i++) {
        const sp_operator_t *op = &m->operators[i];
        sp_check_item_t *it = &out->items[out->n_items++];
        it->ok = true;
        it->operator_index = (int32_t)i;
        memcpy(it->operator_id, op->id, 16);
        it->has_state = sp_operator_has_state(m, op);
        it->fully_finished = op->fully_finished;
        it->state_bytes = sum.operators[i].state_bytes;
        it->saved_parallelism = op->parallelism;
        it->saved_max_parallelism = m->version == 0 ? -1 : op->max_parallelism;
        it->new_parallelism = it->new_max_parallelism = -1;
        for (uint32_t k = 0; k < opts->n_expect_dropped; k++)
            if (exp_idx[k] == (int32_t)i)
                it->expected_drop = true;
        if (op->uid.len) {
            it->uid = mutf8_dup(op->uid);
            it->uid_from_snapshot = true;
        }
        if (op->name.len)
            it->name = mutf8_dup(op->name);
        int32_t j = find_job_op(job, op->id, false);
        if (j < 0 && (j = find_job_op(job, op->id, true)) >= 0)
            it->by_uid_hash = true;
        it->job_index = j;
        if (j >= 0) {
            const sp_job_operator_t *jo = &job->operators[j];
            job_count[j]++;
            if (it->by_uid_hash || job_match[j] < 0)
                job_match[j] = (int32_t)i;
            if (!it->uid && jo->uid)
                it->uid = xstrdup(jo->uid);
            if (!it->name && jo->name)
                it->name = xstrdup(jo->name);
            it->new_parallelism = jo->parallelism;
            it->new_max_parallelism = jo->max_parallelism;
            judge_matched(m, op, it);
            continue;
        }
        char b[32];
        fmt_bytes(it->state_bytes, b, sizeof b);
        if (!it->has_state) {
            it->verdict = SP_VERDICT_SKIPPED;
            add_reason(it, "not in the new job; it holds no state, so Flink skips it");
        } else if (!opts->allow_non_restored_state) {
            it->verdict = SP_VERDICT_UNMAPPED;
            it->ok = false;
            add_reason(it,
                       "not in the new job, but it holds %s of state: Flink fails (\"Cannot map "
                       "checkpoint/savepoint state for operator ... to the new program\"); give the new job this "
                       "operator's uid, move the state with 'sp metadata edit --set-uid', or drop it with "
                       "--allow-non-restored-state",
                       b);
        } else {
            it->verdict = SP_VERDICT_DROPPED;
            it->ok = it->expected_drop;
            add_reason(it, "not in the new job: --allow-non-restored-state drops its %s of state%s", b,
                       it->expected_drop ? " (expected)" : "; it is not named by --expect-dropped");
        }
    }

    /* 2. setUidHash shadowing: the state under the alternative ID wins (StateAssignmentOperation) */
    for (uint32_t i = 0; i < out->n_items; i++) {
        sp_check_item_t *it = &out->items[i];
        if (it->job_index < 0 || job_count[it->job_index] < 2 || job_match[it->job_index] == it->operator_index)
            continue;
        char b[32], other[160];
        fmt_bytes(it->state_bytes, b, sizeof b);
        label(&out->items[job_match[it->job_index]], other, sizeof other);
        it->reason[0] = '\0';
        if (it->verdict == SP_VERDICT_RESTORED) {
            it->verdict = SP_VERDICT_SHADOWED;
            it->ok = !it->has_state || it->expected_drop;
        }
        add_reason(it,
                   "the new operator also has a setUidHash ID, and the snapshot has state under it (%s): Flink "
                   "restores that one and ignores this %s of state without failing%s",
                   other, b, it->has_state && !it->expected_drop ? "; it is not named by --expect-dropped" : "");
    }

    /* 3. operators only in the new job */
    for (uint32_t j = 0; j < job->n_operators; j++) {
        if (job_count[j])
            continue;
        const sp_job_operator_t *jo = &job->operators[j];
        sp_check_item_t *it = &out->items[out->n_items++];
        it->verdict = SP_VERDICT_NEW;
        it->ok = true;
        it->operator_index = -1;
        it->job_index = (int32_t)j;
        memcpy(it->operator_id, jo->id, 16);
        it->uid = xstrdup(jo->uid);
        it->name = xstrdup(jo->name);
        it->saved_parallelism = it->saved_max_parallelism = -1;
        it->new_parallelism = jo->parallelism;
        it->new_max_parallelism = jo->max_parallelism;
        if (jo->parallelism > 0 && jo->max_parallelism > 0 && jo->parallelism > jo->max_parallelism) {
            it->verdict = SP_VERDICT_INVALID_JOB;
            it->ok = false;
            add_reason(it,
                       "the new job's parallelism %d is above its max parallelism %d: Flink rejects the job "
                       "(\"parallelism (%d) is higher than the max parallelism (%d)\")",
                       jo->parallelism, jo->max_parallelism, jo->parallelism, jo->max_parallelism);
        } else {
            add_reason(it, "not in the snapshot: starts with empty state");
        }
    }

    /* 4. totals, failures */
    out->restorable = true;
    for (uint32_t i = 0; i < out->n_items; i++) {
        sp_check_item_t *it = &out->items[i];
        char l[200];
        label(it, l, sizeof l);
        switch (it->verdict) {
        case SP_VERDICT_RESTORED: out->n_restored++; break;
        case SP_VERDICT_SKIPPED: out->n_skipped++; break;
        case SP_VERDICT_NEW: out->n_new++; break;
        case SP_VERDICT_DROPPED:
        case SP_VERDICT_SHADOWED:
            out->n_dropped++;
            out->dropped_bytes += it->state_bytes;
            break;
        default: out->restorable = false; break;
        }
        if (it->expected_drop && it->verdict == SP_VERDICT_RESTORED) {
            it->ok = false;
            add_reason(it, "named by --expect-dropped, but the new job has it: its state is restored");
        } else if (it->expected_drop && it->verdict == SP_VERDICT_SKIPPED) {
            add_reason(it, "named by --expect-dropped; it holds no state, nothing is dropped");
        }
        if (!it->ok)
            list_add(&fails, "%s: %s", l, it->reason);
    }
    for (uint32_t k = 0; k < opts->n_expect_dropped; k++)
        if (exp_idx[k] < 0)
            list_add(&fails, "--expect-dropped %s names no operator of the snapshot", opts->expect_dropped[k]);
    out->ok = out->restorable && fails.n == 0;

    /* 5. hints */
    {
        uint32_t n_unmatched = 0, n_new_uid = 0;
        int32_t last_unmatched = -1, last_new = -1;
        for (uint32_t i = 0; i < out->n_items; i++) {
            const sp_check_item_t *it = &out->items[i];
            if ((it->verdict == SP_VERDICT_UNMAPPED || it->verdict == SP_VERDICT_DROPPED) && it->has_state) {
                n_unmatched++;
                last_unmatched = (int32_t)i;
            }
            if (it->verdict == SP_VERDICT_NEW && it->uid) {
                n_new_uid++;
                last_new = (int32_t)i;
            }
        }
        for (uint32_t i = 0; i < out->n_items; i++) {
            const sp_check_item_t *nw = &out->items[i];
            if (nw->verdict != SP_VERDICT_NEW || !nw->uid)
                continue;
            for (uint32_t k = 0; k < out->n_items; k++) {
                const sp_check_item_t *old = &out->items[k];
                if ((old->verdict != SP_VERDICT_UNMAPPED && old->verdict != SP_VERDICT_DROPPED) ||
                    !old->uid_from_snapshot || !old->uid || !uids_close(nw->uid, old->uid))
                    continue;
                char b[32], q1[700], q2[1300], arg[1200];
                fmt_bytes(old->state_bytes, b, sizeof b);
                snprintf(arg, sizeof arg, "uid:%s=%s", old->uid, nw->uid);
                list_add(&hints,
                         "uid '%s' of the new job matches no operator of the snapshot, but is close to uid '%s' "
                         "(%s of state, not in the new job): if the uid was renamed, move the state first with: "
                         "sp metadata edit %s --set-uid %s --output NEW_SNAP",
                         nw->uid, old->uid, b, shq(snap->location, NULL, q1, sizeof q1), shq(arg, NULL, q2, sizeof q2));
            }
        }
        if (m->version < 5 && n_unmatched == 1 && n_new_uid == 1) {
            const sp_check_item_t *old = &out->items[last_unmatched], *nw = &out->items[last_new];
            char hex[33], b[32], q1[700], q2[1300];
            sp_id_to_hex(old->operator_id, hex);
            fmt_bytes(old->state_bytes, b, sizeof b);
            char pre[40];
            snprintf(pre, sizeof pre, "%s=", hex);
            list_add(&hints,
                     "operator %s (%s of state) matches no operator of the new job, and uid '%s' matches nothing "
                     "in the snapshot (this metadata version stores no uids): if '%s' is that operator's new uid, "
                     "move the state with: sp metadata edit %s --set-uid %s --output NEW_SNAP",
                     hex, b, nw->uid, nw->uid, shq(snap->location, NULL, q1, sizeof q1),
                     shq(pre, nw->uid, q2, sizeof q2));
        } else if (m->version < 5 && n_unmatched > 0) {
            list_add(&hints,
                     "this metadata version stores no uids: operators of the snapshot that match nothing are shown "
                     "by operator ID ('sp uid-hash UID' prints the ID of a uid)");
        }
        if (job->from_plan && n_unmatched > 0)
            list_add(&hints,
                     "the job was described by a plan, which lists only the first operator of each chain: operators "
                     "chained behind it do not appear there; add them with --uid or --operator-id");
        bool only_unmapped = !out->restorable;
        uint64_t bytes = 0;
        uint32_t n = 0;
        for (uint32_t i = 0; i < out->n_items && only_unmapped; i++) {
            const sp_check_item_t *it = &out->items[i];
            if (it->verdict == SP_VERDICT_UNMAPPED) {
                n++;
                bytes += it->state_bytes;
            } else if (!it->ok) {
                only_unmapped = false;
            }
        }
        if (only_unmapped && n && !opts->allow_non_restored_state) {
            char b[32];
            fmt_bytes(bytes, b, sizeof b);
            list_add(&hints,
                     "with --allow-non-restored-state (flink run -n) Flink would restore the job and drop %s of "
                     "state of %u operator%s",
                     b, n, n == 1 ? "" : "s");
        }
    }
    if (fails.nomem || hints.nomem) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto done;
    }
    out->n_failures = fails.n;
    out->failures = fails.v;
    out->n_hints = hints.n;
    out->hints = hints.v;
    fails.v = hints.v = NULL;
    fails.n = hints.n = 0;
done:
    for (uint32_t i = 0; i < fails.n; i++)
        free(fails.v[i]);
    free(fails.v);
    for (uint32_t i = 0; i < hints.n; i++)
        free(hints.v[i]);
    free(hints.v);
    sp_summary_free(&sum);
    free(exp);
    free(exp_idx);
    free(job_match);
    free(job_count);
    if (s)
        sp_check_result_free(out);
    return s;
}

void sp_check_result_free(sp_check_result_t *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->n_items; i++) {
        free(r->items[i].uid);
        free(r->items[i].name);
    }
    free(r->items);
    for (uint32_t i = 0; i < r->n_failures; i++)
        free(r->failures[i]);
    free(r->failures);
    for (uint32_t i = 0; i < r->n_hints; i++)
        free(r->hints[i]);
    free(r->hints);
    memset(r, 0, sizeof *r);
}
