/* sp prune ROOT --keep-last N: dispose of the oldest snapshots per job (rules in lib/sp_prune.h). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "flinkcli.h"
#include "out.h"

/* "30d", "12h", "90m", "2w", "45s" -> milliseconds; -1 when not a duration. */
static int64_t parse_duration_ms(const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 0 || s[0] == '-' || s[0] == '+' || !end[0] || end[1])
        return -1;
    int64_t unit;
    switch (*end) {
    case 's': unit = 1000; break;
    case 'm': unit = 60 * 1000; break;
    case 'h': unit = 3600 * 1000; break;
    case 'd': unit = 86400 * 1000LL; break;
    case 'w': unit = 7 * 86400 * 1000LL; break;
    default: return -1;
    }
    if (v > INT64_MAX / unit)
        return -1;
    return (int64_t)v * unit;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The ACTION column: what happened (or, dry run, would happen). */
static const char *action_text(const sp_prune_decision_t *d, bool dry_run)
{
    if (!d->dispose)
        return d->reason == SP_PRUNE_KEEP_PINNED ? "skip" : "keep";
    switch (d->outcome) {
    case SP_PRUNE_PLANNED: return dry_run ? "would dispose" : "dispose";
    case SP_PRUNE_DISPOSED: return "disposed";
    case SP_PRUNE_FAILED: return "FAILED";
    case SP_PRUNE_SKIPPED_PINNED: return "skip";
    }
    return "?";
}

/* The REASON column, in words. */
static void reason_text(const sp_prune_decision_t *d, const sp_catalog_entry_t *e, const sp_prune_options_t *o,
                        char *buf, size_t n)
{
    switch (d->reason) {
    case SP_PRUNE_KEEP_LAST:
        snprintf(buf, n, "among the newest %u of its job (#%u)", o->keep_last, d->rank);
        break;
    case SP_PRUNE_KEEP_AGE: snprintf(buf, n, "younger than --max-age"); break;
    case SP_PRUNE_KEEP_NEWEST_COMPLETE: snprintf(buf, n, "newest complete snapshot of its job"); break;
    case SP_PRUNE_KEEP_PINNED:
        snprintf(buf, n, "pinned%s%s%s", e->record.pin_reason[0] ? " (" : "", e->record.pin_reason,
                 e->record.pin_reason[0] ? ")" : "");
        break;
    case SP_PRUNE_KEEP_OUT_OF_SCOPE:
        snprintf(buf, n, "%s", e->kind == SP_KIND_CHECKPOINT ? "checkpoint (--include-checkpoints)" : "kind unknown");
        break;
    case SP_PRUNE_KEEP_NO_JOB: snprintf(buf, n, "names do not tell the job (--all-jobs)"); break;
    case SP_PRUNE_KEEP_REFERENCED: snprintf(buf, n, "another snapshot under ROOT references its files"); break;
    case SP_PRUNE_KEEP_STATE:
        snprintf(buf, n, "%s", e->record_unreadable ? "ownership record unreadable" : sp_catalog_state_name(e->state));
        break;
    case SP_PRUNE_DISPOSE_EXPIRED:
        snprintf(buf, n, d->outcome == SP_PRUNE_SKIPPED_PINNED ? "pinned since the scan" : "beyond the retention");
        break;
    case SP_PRUNE_DISPOSE_RESUME: snprintf(buf, n, "finishes an interrupted dispose"); break;
    }
}

enum { COLS = 7 };
static const char *const headers[COLS] = {"ACTION", "LOCATION", "JOB", "CHECKPOINT ID", "MODIFIED", "SIZE", "REASON"};
static const bool right[COLS] = {false, false, false, true, false, true, false};

static void row_cells(const sp_prune_decision_t *d, const sp_catalog_entry_t *e, const sp_prune_options_t *o,
                      char cells[COLS][300])
{
    snprintf(cells[0], 300, "%s", action_text(d, o->dry_run));
    char *shown = term_safe(e->path);
    snprintf(cells[1], 300, "%s", shown ? shown : e->path);
    free(shown);
    snprintf(cells[2], 300, "%s", e->job[0] ? e->job : "-");
    if (e->has_metadata)
        snprintf(cells[3], 300, "%" PRId64, e->checkpoint_id);
    else
        strcpy(cells[3], "-");
    fmt_time_utc(e->mtime_ms, cells[4], 300);
    if (e->has_metadata)
        fmt_iec(e->total_state_bytes, cells[5], 300);
    else
        strcpy(cells[5], "-");
    reason_text(d, e, o, cells[6], 300);
}

static void print_table(const sp_catalog_t *cat, const sp_prune_plan_t *plan, const sp_prune_options_t *o)
{
    size_t width[COLS];
    static char cells[COLS][300];
    for (int c = 0; c < COLS; c++)
        width[c] = strlen(headers[c]);
    for (uint32_t i = 0; i < plan->n; i++) {
        row_cells(&plan->decisions[i], &cat->entries[plan->decisions[i].entry], o, cells);
        for (int c = 0; c < COLS; c++)
            if (strlen(cells[c]) > width[c])
                width[c] = strlen(cells[c]);
    }
    for (int c = 0; c < COLS; c++)
        printf(right[c] ? "%*s%s" : "%-*s%s", c == COLS - 1 ? 0 : (int)width[c], headers[c], c == COLS - 1 ? "\n" : "  ");
    for (uint32_t i = 0; i < plan->n; i++) {
        row_cells(&plan->decisions[i], &cat->entries[plan->decisions[i].entry], o, cells);
        for (int c = 0; c < COLS; c++)
            printf(right[c] ? "%*s%s" : "%-*s%s", c == COLS - 1 ? 0 : (int)width[c], cells[c], c == COLS - 1 ? "\n" : "  ");
    }
}

static void print_json(const sp_catalog_t *cat, const sp_prune_plan_t *plan, const sp_prune_options_t *o)
{
    jw_t w;
    jw_init(&w, stdout, true);
    jw_obj(&w);
    jw_key(&w, "schema_version");
    jw_int(&w, 1);
    jw_key(&w, "root");
    jw_str(&w, cat->root);
    jw_key(&w, "dry_run");
    jw_bool(&w, o->dry_run);
    jw_key(&w, "keep_last");
    jw_uint(&w, o->keep_last);
    jw_key(&w, "max_age_ms");
    if (o->max_age_ms > 0) jw_int(&w, o->max_age_ms); else jw_null(&w);
    jw_key(&w, "include_checkpoints");
    jw_bool(&w, o->include_checkpoints);
    jw_key(&w, "all_jobs");
    jw_bool(&w, o->all_jobs);
    jw_key(&w, "snapshots");
    jw_arr(&w);
    for (uint32_t i = 0; i < plan->n; i++) {
        const sp_prune_decision_t *d = &plan->decisions[i];
        jw_obj(&w);
        catalog_entry_json(&w, &cat->entries[d->entry]);
        jw_key(&w, "group");
        if (d->group) jw_str(&w, d->group); else jw_null(&w);
        jw_key(&w, "rank");
        if (d->rank) jw_uint(&w, d->rank); else jw_null(&w);
        jw_key(&w, "action");
        jw_str(&w, d->dispose ? "dispose" : "keep");
        jw_key(&w, "reason");
        jw_str(&w, sp_prune_reason_name(d->reason));
        jw_key(&w, "outcome");
        if (d->dispose) jw_str(&w, sp_prune_outcome_name(d->outcome)); else jw_null(&w);
        jw_key(&w, "disposed_bytes");
        if (d->dispose && d->outcome != SP_PRUNE_FAILED && d->outcome != SP_PRUNE_SKIPPED_PINNED)
            jw_uint(&w, d->bytes);
        else
            jw_null(&w);
        jw_key(&w, "dispose_error");
        jw_error(&w, d->outcome == SP_PRUNE_FAILED ? &d->error : NULL);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "to_dispose");
    jw_uint(&w, plan->to_dispose);
    jw_key(&w, "disposed");
    jw_uint(&w, plan->disposed);
    jw_key(&w, "failed");
    jw_uint(&w, plan->failed);
    jw_key(&w, "pinned_skipped");
    jw_uint(&w, plan->pinned_skipped);
    jw_key(&w, "bytes");
    jw_uint(&w, plan->bytes);
    jw_obj_end(&w);
    jw_end(&w);
}

int cmd_prune(int argc, char **argv)
{
    long keep_last = LONG_MIN; /* not given */
    const char *max_age = NULL;
    bool dry_run = false, json = false, checkpoints = false, force = false, all_jobs = false;
    const char *rest_url = NULL;
    const cli_option_t opts[] = {
        {"keep-last", 0, OPT_INT, &keep_last, "N", "keep the newest N snapshots of each job (required, N >= 1)"},
        {"max-age", 0, OPT_STRING, &max_age, "DURATION", "also keep every snapshot younger than this (30d, 12h, 90m, 2w)"},
        {"dry-run", 'n', OPT_FLAG, &dry_run, NULL, "show what would be disposed; delete nothing"},
        {"include-checkpoints", 0, OPT_FLAG, &checkpoints, NULL, "prune retained checkpoints (chk-N) too, not only savepoints"},
        {"all-jobs", 0, OPT_FLAG, &all_jobs, NULL, "prune snapshots whose names do not tell the job, as one group"},
        {"force", 0, OPT_FLAG, &force, NULL, "dispose although restored in NO_CLAIM or LEGACY mode (never pinned or CLAIM)"},
        {"rest-url", 0, OPT_STRING, &rest_url, "URL", "the cluster to ask about NO_CLAIM / LEGACY restores (default: the one recorded)"},
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: every snapshot with its decision and outcome"},
        {0},
    };
    const cli_command_t *cmd = command_find("prune");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "give exactly one root directory");
    if (keep_last < 1 || keep_last > UINT32_MAX)
        return opts_usage_error(cmd, keep_last == LONG_MIN ? "--keep-last N is required"
                                                     : "--keep-last must be at least 1 (the newest snapshot is always kept)");
    int64_t age = 0;
    if (max_age && (age = parse_duration_ms(max_age)) < 0)
        return opts_usage_error(cmd, "--max-age expects a duration such as 30d, 12h, 90m or 2w, got '%s'", max_age);
    sp_prune_options_t o = {
        .keep_last = (uint32_t)keep_last, .max_age_ms = age, .now_ms = now_ms(),
        .include_checkpoints = checkpoints, .all_jobs = all_jobs, .force = force, .dry_run = dry_run,
    };
    flink_cli_query_t q = {.rest_url = rest_url};
    o.record_query = flink_cli_record_query;
    o.record_query_user = &q;

    sp_catalog_t cat;
    sp_prune_plan_t plan;
    sp_error_t err;
    sp_error_clear(&err);
    sp_status_t s = sp_catalog_scan(argv[0], NULL, &cat, &err);
    if (!s)
        s = sp_prune_plan(&cat, &o, &plan, &err);
    if (s) {
        sp_catalog_free(&cat);
        return report_error("prune", &err, json);
    }
    sp_status_t first = sp_prune_run(&cat, &plan, &o, &err);
    flink_cli_query_close(&q);
    for (uint32_t i = 0; i < plan.n; i++)
        if (plan.decisions[i].record_warning[0])
            fprintf(stderr, "sp prune: warning: %s: %s\n", cat.entries[plan.decisions[i].entry].location,
                    plan.decisions[i].record_warning);
    if (json) {
        print_json(&cat, &plan, &o);
    } else if (cat.n == 0) {
        printf("No snapshots under %s\n", cat.root);
    } else {
        char b[32];
        uint32_t done = 0, kept = 0;
        for (uint32_t i = 0; i < plan.n; i++) {
            const sp_prune_decision_t *d = &plan.decisions[i];
            done += d->dispose && d->outcome == (dry_run ? SP_PRUNE_PLANNED : SP_PRUNE_DISPOSED);
            kept += !d->dispose && d->reason != SP_PRUNE_KEEP_PINNED;
        }
        print_table(&cat, &plan, &o);
        printf("\n%s %u snapshot%s (%s), kept %u, skipped %u pinned, %u failed\n",
               dry_run ? "Would dispose" : "Disposed", done, done == 1 ? "" : "s", fmt_iec(plan.bytes, b, sizeof b),
               kept, plan.pinned_skipped, plan.failed);
    }
    /* every failure on stderr; the entry is left for the next run */
    for (uint32_t i = 0; i < plan.n; i++) {
        const sp_prune_decision_t *d = &plan.decisions[i];
        if (d->outcome != SP_PRUNE_FAILED)
            continue;
        sp_error_t e = d->error;
        if (!e.file[0])
            snprintf(e.file, sizeof e.file, "%s", cat.entries[d->entry].location);
        report_error("prune", &e, false);
    }
    sp_prune_plan_free(&plan);
    sp_catalog_free(&cat);
    return first ? exit_code_for(first) : EXIT_OK_;
}
