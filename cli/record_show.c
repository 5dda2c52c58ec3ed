/* record_show.c - the ownership record of a snapshot as sp inspect shows it (human and JSON). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "flinkcli.h"
#include "out.h"

/* The local directory a record belongs to, or NULL (archives and remote stores show none). */
static const char *record_dir(const sp_snapshot_t *snap)
{
    return snap->store == snap->local ? snap->dir : NULL;
}

void record_json(jw_t *w, const sp_snapshot_t *snap)
{
    jw_key(w, "record");
    const char *dir = record_dir(snap);
    sp_record_t r;
    if (!dir || sp_record_load(dir, &r, NULL) != SP_OK || !r.exists) {
        jw_null(w);
        return;
    }
    jw_obj(w);
    jw_key(w, "path");
    jw_str(w, r.path);
    jw_key(w, "created");
    if (r.has_origin) {
        const sp_record_origin_t *o = &r.origin;
        jw_obj(w);
        jw_key(w, "by");
        jw_str(w, o->by);
        jw_key(w, "job_id");
        jw_str(w, o->job_id);
        jw_key(w, "trigger_id");
        jw_str(w, o->trigger_id);
        jw_key(w, "time_ms");
        jw_int(w, o->time_ms);
        jw_key(w, "cluster");
        jw_str(w, o->cluster);
        jw_key(w, "flink_version");
        jw_str(w, o->flink_version);
        jw_key(w, "format");
        if (o->format[0]) jw_str(w, o->format); else jw_null(w);
        jw_key(w, "drain");
        jw_bool(w, o->drain);
        jw_key(w, "location");
        jw_str(w, o->location);
        jw_obj_end(w);
    } else {
        jw_null(w);
    }
    jw_key(w, "pins");
    jw_uint(w, r.summary.pins);
    jw_key(w, "pin_reason");
    if (r.summary.pins && r.summary.pin_reason[0]) jw_str(w, r.summary.pin_reason); else jw_null(w);
    jw_key(w, "restores");
    jw_arr(w);
    for (uint32_t i = 0; i < r.n_restores; i++) {
        const sp_record_restore_t *x = &r.restores[i];
        jw_obj(w);
        jw_key(w, "job_id");
        jw_str(w, x->job_id);
        jw_key(w, "claim_mode");
        jw_str(w, x->claim_mode);
        jw_key(w, "time_ms");
        jw_int(w, x->time_ms);
        jw_key(w, "cluster");
        if (x->cluster[0]) jw_str(w, x->cluster); else jw_null(w);
        jw_key(w, "flink_version");
        if (x->flink_version[0]) jw_str(w, x->flink_version); else jw_null(w);
        jw_key(w, "snapshot_checkpoint_id");
        if (x->snapshot_checkpoint_id >= 0) jw_int(w, x->snapshot_checkpoint_id); else jw_null(w);
        jw_key(w, "released");
        jw_bool(w, x->released);
        jw_key(w, "released_checkpoint_id");
        if (x->released && x->released_checkpoint_id >= 0) jw_int(w, x->released_checkpoint_id); else jw_null(w);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_obj_end(w);
    sp_record_free(&r);
}

void record_human(const sp_snapshot_t *snap)
{
    const char *dir = record_dir(snap);
    sp_record_t r;
    sp_error_t err;
    sp_error_clear(&err);
    if (!dir)
        return;
    if (sp_record_load(dir, &r, &err) != SP_OK) {
        printf("Record        unreadable: %s\n", err.message);
        return;
    }
    if (!r.exists)
        return;
    char t[32];
    printf("Record        %s\n", r.path);
    if (r.has_origin) {
        const sp_record_origin_t *o = &r.origin;
        printf("  created     %s, %s, job %s, trigger %s", o->by[0] ? o->by : "?", fmt_time_utc(o->time_ms, t, sizeof t),
               o->job_id, o->trigger_id);
        if (o->format[0])
            printf(", %s%s", o->format, o->drain ? ", drained" : "");
        if (o->flink_version[0] || o->cluster[0])
            printf(" (Flink %s at %s)", o->flink_version[0] ? o->flink_version : "?", o->cluster[0] ? o->cluster : "?");
        printf("\n");
    }
    if (r.summary.pins)
        printf("  pinned      %u pin%s%s%s%s\n", r.summary.pins, r.summary.pins == 1 ? "" : "s",
               r.summary.pin_reason[0] ? " (\"" : "", r.summary.pin_reason, r.summary.pin_reason[0] ? "\")" : "");
    for (uint32_t i = 0; i < r.n_restores; i++) {
        const sp_record_restore_t *x = &r.restores[i];
        printf("  restored    %s job %s, %s", x->claim_mode, x->job_id, fmt_time_utc(x->time_ms, t, sizeof t));
        if (x->flink_version[0] || x->cluster[0])
            printf(" (Flink %s at %s)", x->flink_version[0] ? x->flink_version : "?", x->cluster[0] ? x->cluster : "?");
        if (strcmp(x->claim_mode, "CLAIM") == 0)
            printf(": owned by Flink, never deleted by sp");
        else if (strcmp(x->claim_mode, "NO_CLAIM") == 0 && x->released)
            printf(": released at checkpoint %lld", (long long)x->released_checkpoint_id);
        else if (strcmp(x->claim_mode, "NO_CLAIM") == 0)
            printf(": needed until the job completes a checkpoint");
        else
            printf(": later checkpoints may use its files");
        printf("\n");
    }
    sp_record_free(&r);
}
