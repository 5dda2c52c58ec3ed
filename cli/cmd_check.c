/* sp check SNAP JOB...: would Flink restore this snapshot into the new job?  (rules in lib/sp_check.h) */
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "out.h"

/* The job description options, in the order they are read (operators merge by operator ID). */
typedef struct jobargs {
    cli_list_t uids, uids_files, ids, jobs, plans, likes;
    long parallelism, max_parallelism;
} jobargs_t;

/* A usage error (exit 2); with --json also the JSON error object on stdout, as sp-check(1) says. */
static int usage_error(const cli_command_t *cmd, bool json, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (json) {
        sp_error_t err;
        sp_error_clear(&err);
        sp_error_set(&err, SP_ERR_INVALID, SP_NO_OFFSET, "", "%s", msg);
        report_error("check", &err, true);
        fprintf(stderr, "usage: sp %s %s\n", cmd->name, cmd->usage);
        return EXIT_USAGE;
    }
    return opts_usage_error(cmd, "%s", msg);
}

/* Matched operators (in the snapshot and in the new job) whose new parallelism is unknown, so not
 * checked against the saved max parallelism. */
static uint32_t parallelism_unchecked(const sp_check_result_t *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n_items; i++)
        if (r->items[i].operator_index >= 0 && r->items[i].job_index >= 0 && r->items[i].new_parallelism < 0)
            n++;
    return n;
}

static int read_file_into(const char *cmdname, const char *path, char **text, size_t *len, bool json)
{
    sp_error_t err;
    sp_error_clear(&err);
    if (sp_fs_read_all(path, text, len, &err))
        return report_error(cmdname, &err, json);
    return 0;
}

/* Build the new job from the options; returns an exit code (0 = fine). */
static int build_job(const jobargs_t *a, sp_job_t *job, bool json)
{
    sp_error_t err;
    sp_error_clear(&err);
    sp_status_t s = SP_OK;
    char *text;
    size_t len;
    int r;
    for (int i = 0; !s && i < a->jobs.n; i++) {
        if ((r = read_file_into("check", a->jobs.v[i], &text, &len, json)))
            return r;
        s = sp_job_parse_json(job, text, len, a->jobs.v[i], &err);
        free(text);
    }
    for (int i = 0; !s && i < a->plans.n; i++) {
        if ((r = read_file_into("check", a->plans.v[i], &text, &len, json)))
            return r;
        s = sp_job_parse_plan(job, text, len, a->plans.v[i], &err);
        free(text);
    }
    for (int i = 0; !s && i < a->likes.n; i++) {
        sp_snapshot_t *other;
        if ((s = sp_snapshot_open(a->likes.v[i], 0, &other, &err)))
            break;
        char origin[600];
        snprintf(origin, sizeof origin, "--like %s", a->likes.v[i]);
        s = sp_job_add_snapshot(job, other->meta, origin, &err);
        sp_snapshot_close(other);
    }
    for (int i = 0; !s && i < a->uids_files.n; i++) {
        if ((r = read_file_into("check", a->uids_files.v[i], &text, &len, json)))
            return r;
        s = sp_job_parse_uids(job, text, len, a->uids_files.v[i], &err);
        free(text);
    }
    for (int i = 0; !s && i < a->uids.n; i++)
        s = sp_job_add(job, a->uids.v[i], false, NULL, -1, -1, NULL, "--uid", &err);
    for (int i = 0; !s && i < a->ids.n; i++) {
        uint8_t id[16];
        if (!sp_id_from_hex(a->ids.v[i], id))
            s = sp_error_set(&err, SP_ERR_INVALID, SP_NO_OFFSET, "--operator-id",
                             "'%s' is not an operator ID (32 hex digits)", a->ids.v[i]);
        else
            s = sp_job_add(job, NULL, true, id, -1, -1, NULL, "--operator-id", &err);
    }
    if (s)
        return report_error("check", &err, json);
    sp_job_set_defaults(job, a->parallelism > 0 ? (int32_t)a->parallelism : -1,
                        a->max_parallelism > 0 ? (int32_t)a->max_parallelism : -1);
    return 0;
}

static const char *origin_summary(const jobargs_t *a, char *buf, size_t n)
{
    buf[0] = '\0';
    struct { int count; const char *what; } parts[] = {
        {a->jobs.n, "--job"}, {a->plans.n, "--plan"}, {a->likes.n, "--like"},
        {a->uids_files.n, "--uids-file"}, {a->uids.n, "--uid"}, {a->ids.n, "--operator-id"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].count) {
            size_t l = strlen(buf);
            snprintf(buf + l, n - l, "%s%s", l ? ", " : "", parts[i].what);
        }
    return buf;
}

static void json_int_or_null(jw_t *w, int32_t v)
{
    if (v >= 0)
        jw_int(w, v);
    else
        jw_null(w);
}

static void render_json(const sp_snapshot_t *snap, const sp_job_t *job, const sp_check_options_t *o,
                        const sp_check_result_t *r, bool verified, const sp_verify_result_t *vr)
{
    jw_t w;
    jw_init(&w, stdout, true);
    jw_obj(&w);
    jw_key(&w, "schema_version");
    jw_int(&w, 1);
    jw_key(&w, "snapshot");
    jw_str(&w, snap->location);
    jw_key(&w, "metadata_path");
    jw_str(&w, snap->metadata_path);
    jw_key(&w, "metadata_version");
    jw_int(&w, snap->meta->version);
    jw_key(&w, "checkpoint_id");
    jw_int(&w, snap->meta->checkpoint_id);
    jw_key(&w, "allow_non_restored_state");
    jw_bool(&w, o->allow_non_restored_state);
    jw_key(&w, "expect_dropped");
    jw_arr(&w);
    for (uint32_t i = 0; i < o->n_expect_dropped; i++)
        jw_str(&w, o->expect_dropped[i]);
    jw_arr_end(&w);
    jw_key(&w, "restorable");
    jw_bool(&w, r->restorable && !(verified && vr->n_problems));
    jw_key(&w, "ok");
    jw_bool(&w, r->ok && !(verified && vr->n_problems));
    jw_key(&w, "summary");
    jw_obj(&w);
    jw_key(&w, "operators_in_snapshot");
    jw_uint(&w, snap->meta->n_operators);
    jw_key(&w, "operators_in_new_job");
    jw_uint(&w, job->n_operators);
    jw_key(&w, "restored");
    jw_uint(&w, r->n_restored);
    jw_key(&w, "skipped");
    jw_uint(&w, r->n_skipped);
    jw_key(&w, "dropped");
    jw_uint(&w, r->n_dropped);
    jw_key(&w, "dropped_state_size_bytes");
    jw_uint(&w, r->dropped_bytes);
    jw_key(&w, "new");
    jw_uint(&w, r->n_new);
    jw_key(&w, "failures");
    jw_uint(&w, r->n_failures + (verified && vr->n_problems ? 1 : 0));
    jw_obj_end(&w);
    jw_key(&w, "parallelism_unchecked");
    jw_uint(&w, parallelism_unchecked(r));
    jw_key(&w, "files_verified");
    jw_bool(&w, verified);
    jw_key(&w, "verify_problems");
    if (verified)
        jw_uint(&w, vr->n_problems);
    else
        jw_null(&w);
    jw_key(&w, "operators");
    jw_arr(&w);
    for (uint32_t i = 0; i < r->n_items; i++) {
        const sp_check_item_t *it = &r->items[i];
        char hex[33];
        sp_id_to_hex(it->operator_id, hex);
        jw_obj(&w);
        jw_key(&w, "operator_id");
        jw_str(&w, hex);
        jw_key(&w, "uid");
        if (it->uid) jw_str(&w, it->uid); else jw_null(&w);
        jw_key(&w, "uid_source");
        if (it->uid) jw_str(&w, it->uid_from_snapshot ? "snapshot" : "job"); else jw_null(&w);
        jw_key(&w, "name");
        if (it->name) jw_str(&w, it->name); else jw_null(&w);
        jw_key(&w, "verdict");
        jw_str(&w, sp_check_verdict_token(it->verdict));
        jw_key(&w, "ok");
        jw_bool(&w, it->ok);
        jw_key(&w, "in_snapshot");
        jw_bool(&w, it->operator_index >= 0);
        jw_key(&w, "in_new_job");
        jw_bool(&w, it->job_index >= 0);
        jw_key(&w, "has_state");
        jw_bool(&w, it->has_state);
        jw_key(&w, "fully_finished");
        jw_bool(&w, it->fully_finished);
        jw_key(&w, "state_size_bytes");
        jw_uint(&w, it->state_bytes);
        jw_key(&w, "saved_parallelism");
        json_int_or_null(&w, it->saved_parallelism);
        jw_key(&w, "saved_max_parallelism");
        json_int_or_null(&w, it->saved_max_parallelism);
        jw_key(&w, "new_parallelism");
        json_int_or_null(&w, it->new_parallelism);
        jw_key(&w, "new_max_parallelism");
        json_int_or_null(&w, it->new_max_parallelism);
        jw_key(&w, "matched_by_uid_hash");
        jw_bool(&w, it->by_uid_hash);
        jw_key(&w, "expected_drop");
        jw_bool(&w, it->expected_drop);
        jw_key(&w, "described_by");
        if (it->job_index >= 0) jw_str(&w, job->operators[it->job_index].origin); else jw_null(&w);
        jw_key(&w, "reason");
        jw_str(&w, it->reason);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "failures");
    jw_arr(&w);
    for (uint32_t i = 0; i < r->n_failures; i++)
        jw_str(&w, r->failures[i]);
    if (verified && vr->n_problems) {
        char buf[256];
        snprintf(buf, sizeof buf, "sp verify: %u problem%s with the snapshot's files, the first: %s", vr->n_problems,
                 vr->n_problems == 1 ? "" : "s", sp_problem_name(vr->problems[0].problem));
        jw_str(&w, buf);
    }
    jw_arr_end(&w);
    jw_key(&w, "hints");
    jw_arr(&w);
    for (uint32_t i = 0; i < r->n_hints; i++)
        jw_str(&w, r->hints[i]);
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_end(&w);
}

/* "saved", "saved -> new"; unknown_new: "saved -> ?" when the new value is not known */
static const char *pair(int32_t saved, int32_t now, bool unknown_new, char *buf, size_t n)
{
    char a[16] = "-", b[16] = "-";
    if (saved >= 0)
        snprintf(a, sizeof a, "%d", saved);
    if (now >= 0)
        snprintf(b, sizeof b, "%d", now);
    if (now < 0 && unknown_new)
        snprintf(buf, n, "%s -> ?", a);
    else if (now < 0 || (saved >= 0 && saved == now))
        snprintf(buf, n, "%s", a);
    else
        snprintf(buf, n, "%s -> %s", a, b);
    return buf;
}

static void render_human(const sp_snapshot_t *snap, const sp_job_t *job, const jobargs_t *a,
                         const sp_check_options_t *o, const sp_check_result_t *r, bool verified,
                         const sp_verify_result_t *vr)
{
    char b1[32], b2[32], org[200];
    uint64_t total = 0;
    for (uint32_t i = 0; i < r->n_items; i++)
        if (r->items[i].operator_index >= 0)
            total += r->items[i].state_bytes;
    printf("Snapshot  %s (metadata version %d, checkpoint %" PRId64 "): %u operators, %s of state\n", snap->location,
           snap->meta->version, snap->meta->checkpoint_id, snap->meta->n_operators, fmt_iec(total, b1, sizeof b1));
    printf("New job   %u operators (%s); --allow-non-restored-state %s\n", job->n_operators,
           origin_summary(a, org, sizeof org), o->allow_non_restored_state ? "on" : "off");
    size_t wop = 8;
    for (uint32_t i = 0; i < r->n_items; i++) {
        char *t = r->items[i].uid ? term_safe(r->items[i].uid) : NULL;
        size_t l = t ? (size_t)term_width(t) : 32;
        free(t);
        if (l > wop)
            wop = l;
    }
    if (wop > 48)
        wop = 48;
    int wv = 7;
    for (uint32_t i = 0; i < r->n_items; i++)
        if ((int)strlen(sp_check_verdict_token(r->items[i].verdict)) > wv)
            wv = (int)strlen(sp_check_verdict_token(r->items[i].verdict));
    printf("\n    %-*s  %-*s  %10s  %-12s  %s\n", wv, "VERDICT", (int)wop, "OPERATOR", "STATE", "PARALLELISM",
           "MAX PARALLELISM");
    for (uint32_t i = 0; i < r->n_items; i++) {
        const sp_check_item_t *it = &r->items[i];
        char hex[33], p[40], mp[40];
        sp_id_to_hex(it->operator_id, hex);
        char *label = term_safe(it->uid ? it->uid : hex);
        printf("%-2s  %-*s  ", it->ok ? "ok" : "NO", wv, sp_check_verdict_token(it->verdict));
        term_cell(stdout, label ? label : hex, (int)wop);
        free(label);
        printf("  %10s  %-12s  %s\n",
               it->operator_index >= 0 ? fmt_iec(it->state_bytes, b2, sizeof b2) : "-",
               pair(it->saved_parallelism, it->new_parallelism, it->operator_index >= 0 && it->job_index >= 0, p,
                    sizeof p),
               pair(it->saved_max_parallelism, it->new_max_parallelism, false, mp, sizeof mp));
    }
    uint32_t unchecked = parallelism_unchecked(r);
    bool vbad = verified && vr->n_problems;
    if (r->n_failures || r->n_hints || unchecked || vbad)
        printf("\n");
    for (uint32_t i = 0; i < r->n_failures; i++) {
        char *t = term_safe(r->failures[i]);
        printf("FAIL  %s\n", t ? t : r->failures[i]);
        free(t);
    }
    if (vbad) {
        char path[PATH_MAX];
        const sp_verify_item_t *p = &vr->problems[0];
        if (!sp_snapshot_local_path(snap, &p->ref, path, sizeof path))
            snprintf(path, sizeof path, "%.*s", (int)p->ref.path.len, (const char *)p->ref.path.ptr);
        char *tp = mutf8_term((sp_str_t){(const uint8_t *)path, (uint32_t)strlen(path)});
        printf("FAIL  sp verify: %u problem%s with the snapshot's files, the first: %s (%s)\n", vr->n_problems,
               vr->n_problems == 1 ? "" : "s", sp_problem_name(p->problem), tp ? tp : path);
        free(tp);
    }
    if (unchecked)
        printf("warning  parallelism not checked for %u operator%s: give -p/--parallelism or a --job with "
               "parallelism\n", unchecked, unchecked == 1 ? "" : "s");
    for (uint32_t i = 0; i < r->n_hints; i++) {
        char *t = term_safe(r->hints[i]);
        printf("hint  %s\n", t ? t : r->hints[i]);
        free(t);
    }
    printf("\n");
    if (r->ok && vbad)
        printf("NOT OK: Flink would restore this job's metadata, but the snapshot's files have %u problem%s "
               "(sp verify)\n", vr->n_problems, vr->n_problems == 1 ? "" : "s");
    else if (r->ok) {
        printf("OK: Flink would restore this job: %u restored, %u skipped (no state), %u dropped (%s), %u new",
               r->n_restored, r->n_skipped, r->n_dropped, fmt_iec(r->dropped_bytes, b1, sizeof b1), r->n_new);
        if (unchecked)
            printf("; parallelism not checked for %u operator%s", unchecked, unchecked == 1 ? "" : "s");
        if (!verified)
            printf("; metadata only checked: sp verify (or --verify) checks the files");
        printf("\n");
    } else if (r->restorable)
        printf("NOT OK: Flink would restore this job, but %u problem%s above (state dropped that "
               "--expect-dropped does not name, or an expectation that does not hold)\n",
               r->n_failures, r->n_failures == 1 ? "" : "s");
    else
        printf("RESTORE FAILS: Flink would not restore this job (%u problem%s above)\n", r->n_failures,
               r->n_failures == 1 ? "" : "s");
}

int cmd_check(int argc, char **argv)
{
    jobargs_t a;
    memset(&a, 0, sizeof a);
    a.parallelism = a.max_parallelism = LONG_MIN; /* not given */
    bool json = false, allow = false, verify = false;
    cli_list_t expect = {0};
    const cli_option_t opts[] = {
        {"uid", 'u', OPT_LIST, &a.uids, "UID", "an operator of the new job by its uid (repeatable)"},
        {"uids-file", 0, OPT_LIST, &a.uids_files, "FILE", "uids of the new job, one per line, # comments"},
        {"operator-id", 0, OPT_LIST, &a.ids, "HEX", "an operator of the new job by operator ID (repeatable)"},
        {"job", 0, OPT_LIST, &a.jobs, "FILE", "the new job as JSON {\"operators\": [{\"uid\"|\"operator_id\", ...}]}"},
        {"plan", 0, OPT_LIST, &a.plans, "FILE", "the new job's plan as the Flink REST API returns it"},
        {"like", 0, OPT_LIST, &a.likes, "SNAP2", "the operators of another snapshot (e.g. of the new job in staging)"},
        {"parallelism", 'p', OPT_INT, &a.parallelism, "N", "parallelism of operators described without one"},
        {"max-parallelism", 0, OPT_INT, &a.max_parallelism, "N",
         "max parallelism set explicitly for operators described without one"},
        {"allow-non-restored-state", 'n', OPT_FLAG, &allow, NULL,
         "as flink run -n: state of operators not in the new job is dropped"},
        {"expect-dropped", 0, OPT_LIST, &expect, "ID|uid:U", "state that may be dropped (repeatable)"},
        {"verify", 0, OPT_FLAG, &verify, NULL, "also check the snapshot's files as sp verify does; fail on problems"},
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: every operator with verdict, bytes and reason"},
        {0},
    };
    const cli_command_t *cmd = command_find("check");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return usage_error(cmd, json, n ? "give exactly one snapshot" : "missing snapshot (a directory or its _metadata file)");
    if (!a.uids.n && !a.uids_files.n && !a.ids.n && !a.jobs.n && !a.plans.n && !a.likes.n)
        return usage_error(cmd, json, "describe the new job: --uid, --uids-file, --operator-id, --job, --plan or --like");
    if ((a.parallelism != LONG_MIN && (a.parallelism < 1 || a.parallelism > 32768)) ||
        (a.max_parallelism != LONG_MIN && (a.max_parallelism < 1 || a.max_parallelism > 32768)))
        return usage_error(cmd, json, "--parallelism and --max-parallelism take a value from 1 to 32768");
    if (a.parallelism == LONG_MIN)
        a.parallelism = -1;
    if (a.max_parallelism == LONG_MIN)
        a.max_parallelism = -1;
    for (int i = 0; i < expect.n; i++) {
        sp_opref_t ref;
        sp_error_t err;
        sp_error_clear(&err);
        if (sp_opref_parse(expect.v[i], &ref, &err))
            return usage_error(cmd, json, "--expect-dropped %s", err.message);
    }
    sp_error_t err;
    sp_error_clear(&err);
    sp_snapshot_t *snap;
    if (sp_snapshot_open(argv[0], 0, &snap, &err))
        return report_error("check", &err, json);
    sp_job_t job;
    sp_job_init(&job);
    if ((r = build_job(&a, &job, json))) {
        sp_job_free(&job);
        sp_snapshot_close(snap);
        return r;
    }
    sp_check_options_t o = {allow, (uint32_t)expect.n, expect.v};
    sp_check_result_t res;
    if (sp_check(snap, &job, &o, &res, &err)) {
        sp_job_free(&job);
        sp_snapshot_close(snap);
        return report_error("check", &err, json);
    }
    sp_verify_result_t vr;
    memset(&vr, 0, sizeof vr);
    if (verify && sp_verify(snap, &vr, &err)) {
        sp_check_result_free(&res);
        sp_job_free(&job);
        sp_snapshot_close(snap);
        return report_error("check", &err, json);
    }
    if (json)
        render_json(snap, &job, &o, &res, verify, &vr);
    else
        render_human(snap, &job, &a, &o, &res, verify, &vr);
    int code = res.ok && !(verify && vr.n_problems) ? 0 : EXIT_PROBLEMS;
    if (verify)
        sp_verify_result_free(&vr);
    sp_check_result_free(&res);
    sp_job_free(&job);
    sp_snapshot_close(snap);
    if (fflush(stdout) != 0)
        return EXIT_STORAGE;
    return code;
}
