/*
 * sp status JOB_ID TRIGGER_ID [--wait]: the state of a savepoint or
 * stop-with-savepoint started with --detached (or by anyone, with any
 * trigger ID).  stdout: IN_PROGRESS, or the savepoint location once it
 * completed; a failure is exit 5 with Flink's cause.
 *
 * When it sees the operation complete, it writes the savepoint's ownership
 * record from the pending record sp trigger / sp stop left (sp_record.h):
 * the command that started it, its format and drain flag.  A stop must
 * have ended the job, as sp stop checks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "flinkcli.h"
#include "out.h"

int cmd_status(int argc, char **argv)
{
    flink_cli_t c = {0};
    bool wait = false;
    const cli_option_t opts[] = {
        {"wait", 'w', OPT_FLAG, &wait, NULL, "poll until the operation completes"},
        {"timeout", 0, OPT_STRING, &c.timeout, "DURATION", "with --wait: give up after DURATION (default: no limit)"},
        {"rest-url", 0, OPT_STRING, &c.rest_url, "URL", FLINK_CLI_REST_URL_HELP},
        {"json", 0, OPT_FLAG, &c.json, NULL, "one JSON object: job, trigger ID, status, location, failure"},
        {"verbose", 'v', OPT_FLAG, &c.verbose, NULL, "trace every REST exchange; full stack traces of failures"},
        {0},
    };
    const cli_command_t *cmd = command_find("status");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 2)
        return opts_usage_error(cmd, "give the job ID and the trigger ID");
    if (!sp_flink_id_valid(argv[0]))
        return opts_usage_error(cmd, "'%s' is not a job ID (32 hexadecimal digits)", argv[0]);
    if (!sp_flink_id_valid(argv[1]))
        return opts_usage_error(cmd, "'%s' is not a trigger ID (32 hexadecimal digits)", argv[1]);
    int64_t timeout = c.timeout ? flink_cli_duration_ms(c.timeout) : 0;
    if (timeout < 0)
        return opts_usage_error(cmd, "--timeout: '%s' is not a duration (90s, 10m, 1h, none)", c.timeout);
    char job[33], trig[33];
    for (int i = 0; i < 33; i++) {
        job[i] = (char)(argv[0][i] >= 'A' && argv[0][i] <= 'F' ? argv[0][i] - 'A' + 'a' : argv[0][i]);
        trig[i] = (char)(argv[1][i] >= 'A' && argv[1][i] <= 'F' ? argv[1][i] - 'A' + 'a' : argv[1][i]);
    }
    sp_error_t err;
    sp_error_clear(&err);
    sp_flink_t *fl;
    if (flink_cli_open(&c, &fl, &err))
        return report_error("status", &err, c.json);
    sp_flink_operation_t op;
    sp_status_t s = wait ? sp_flink_savepoint_wait(fl, job, trig, timeout, &op, &err)
                         : sp_flink_savepoint_status(fl, job, trig, &op, &err);
    /* what sp trigger / sp stop knew when the operation started (sp_record.h, pending records) */
    sp_record_origin_t pend;
    char pend_dirs[2][4096];
    int npd = 0;
    bool have_pend = false;
    if (op.completed) {
        char d[4096];
        const char *loc = op.location ? op.location : op.stop_savepoint;
        if (loc && flink_cli_local_dir(loc, d, sizeof d)) {
            char *slash = strrchr(d, '/');
            if (slash && slash != d) {
                *slash = '\0';
                snprintf(pend_dirs[npd++], sizeof pend_dirs[0], "%s", d);
            }
        }
        if (sp_record_pending_user_dir(getenv("XDG_STATE_HOME"), getenv("HOME"), false, d, sizeof d, NULL) == SP_OK)
            snprintf(pend_dirs[npd++], sizeof pend_dirs[0], "%s", d);
        for (int i = 0; i < npd && !have_pend; i++)
            sp_record_pending_load(pend_dirs[i], job, trig, &pend, &have_pend, NULL);
    }
    bool stop = have_pend && strcmp(pend.by, "sp stop") == 0, not_stopped = false;
    if (!s && op.completed && stop) {
        /* a stop must have ended the job: an earlier savepoint's trigger ID gets that savepoint back instead */
        char st[24];
        sp_error_t e;
        sp_error_clear(&e);
        if (sp_flink_wait_stopped(fl, job, 0, st, &e) != SP_OK) {
            if (st[0] && strcmp(st, "RUNNING") == 0)
                s = sp_error_set(&err, SP_ERR_REST, SP_NO_OFFSET, "",
                                 "job %s is still RUNNING after its stop-with-savepoint %s completed: trigger ID %s "
                                 "already belonged to a savepoint of the job (%.200s), and the job was not stopped; "
                                 "retry sp stop without --trigger-id", job, trig, trig, op.location);
            else if (st[0])
                s = sp_error_set(&err, SP_ERR_REST, SP_NO_OFFSET, "", "%s; the job was not stopped", e.message);
            else
                fprintf(stderr, "sp status: warning: the savepoint completed, but whether job %s ended could not be "
                                "checked: %s\n", job, e.message);
            not_stopped = s != SP_OK;
        }
    }
    bool unchecked = false;
    sp_error_t why;
    sp_error_clear(&why);
    if (!s && op.completed) {
        s = flink_cli_check_location(op.location, &unchecked, &why);
        if (s)
            err = why;
        else if (unchecked)
            flink_cli_warn_unchecked("status", op.location, &why);
    }
    const char *rec = NULL;
    if (!s && op.completed && !unchecked) {
        /* the savepoint's record, unless its trigger/stop already wrote one */
        char dir[4096];
        sp_record_t rr;
        if (flink_cli_local_dir(op.location, dir, sizeof dir) && sp_record_load(dir, &rr, NULL) == SP_OK) {
            bool had = rr.has_origin && strcmp(rr.origin.trigger_id, trig) == 0;
            sp_record_free(&rr);
            sp_flink_version_t v;
            if (!had && sp_flink_get_version(fl, &v, NULL) == SP_OK)
                rec = have_pend ? flink_cli_record_origin(pend.by, job, trig, fl, &v, pend.format, pend.drain, op.location)
                                : flink_cli_record_origin("sp status", job, trig, fl, &v, "", false, op.location);
            else if (had) {
                static char p[4096 + 32];
                snprintf(p, sizeof p, "%s%s", dir, SP_RECORD_SUFFIX);
                rec = p;
            }
        }
    }
    else if (op.stop_savepoint && stop) {
        sp_flink_version_t v;
        if (sp_flink_get_version(fl, &v, NULL) == SP_OK)
            rec = flink_cli_record_origin(pend.by, job, trig, fl, &v, pend.format, pend.drain, op.stop_savepoint);
    }
    if (op.completed)
        for (int i = 0; i < npd; i++)
            sp_record_pending_remove(pend_dirs[i], job, trig, NULL);
    const char *state = op.failure_class                ? "FAILED"
                        : op.completed && !not_stopped ? "COMPLETED"
                        : s                            ? "ERROR"
                                                       : "IN_PROGRESS";
    if (c.json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "command");
        jw_str(&w, "status");
        jw_key(&w, "job_id");
        jw_str(&w, job);
        jw_key(&w, "trigger_id");
        jw_str(&w, trig);
        jw_key(&w, "cluster");
        jw_str(&w, sp_flink_url(fl));
        jw_key(&w, "operation");
        if (have_pend) jw_str(&w, stop ? "stop" : "savepoint"); else jw_null(&w);
        jw_key(&w, "status");
        jw_str(&w, state);
        jw_key(&w, "location");
        if (op.location) jw_str(&w, op.location); else if (op.stop_savepoint) jw_str(&w, op.stop_savepoint); else jw_null(&w);
        jw_key(&w, "record");
        if (rec) jw_str(&w, rec); else jw_null(&w);
        jw_key(&w, "failure");
        if (op.failure_class) {
            jw_obj(&w);
            jw_key(&w, "class");
            jw_str(&w, op.failure_class);
            jw_key(&w, "summary");
            jw_str(&w, op.failure_summary ? op.failure_summary : "");
            jw_key(&w, "stack_trace");
            jw_str(&w, op.failure_trace ? op.failure_trace : "");
            jw_obj_end(&w);
        } else {
            jw_null(&w);
        }
        jw_key(&w, "error");
        jw_error(&w, s ? &err : NULL);
        jw_obj_end(&w);
        jw_end(&w);
    }
    int rc = EXIT_OK_;
    if (s) {
        rc = flink_cli_fail("status", &err, op.failure_trace, c.verbose, false);
    } else if (!c.json) {
        if (op.completed)
            printf("%s\n", op.location);
        else
            printf("IN_PROGRESS\n");
    }
    sp_flink_operation_free(&op);
    sp_flink_close(fl);
    return rc;
}
