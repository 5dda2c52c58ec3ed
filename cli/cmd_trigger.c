/*
 * sp trigger JOB_ID [TARGET_DIR]: take a savepoint over Flink's REST API.
 * sp stop JOB_ID [TARGET_DIR] (cmd_stop.c) shares this file's code: a
 * stop-with-savepoint is the same asynchronous operation on /jobs/:id/stop.
 *
 * The trigger ID is chosen here and printed before anything is sent: a
 * retried request (or a rerun with --trigger-id) never starts a second
 * savepoint.  stdout gets the result alone (the location, or with
 * --detached the trigger ID); progress goes to stderr.
 *
 * A stop is confirmed: Flink answers a stop whose trigger ID an earlier
 * savepoint used with that savepoint and does not stop the job, so after
 * the savepoint the job must have ended.  Until the operation completed,
 * a pending record keeps what it was (sp status writes the ownership
 * record from it).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "flinkcli.h"
#include "out.h"

static void json_result(const char *cmd, const char *job, const char *trig, const sp_flink_t *fl,
                        const sp_flink_version_t *v, const char *dir, const char *fmt, bool drain, bool stop,
                        bool detached, const char *status, const sp_flink_operation_t *op, const char *record,
                        const sp_error_t *err)
{
    jw_t w;
    jw_init(&w, stdout, true);
    jw_obj(&w);
    jw_key(&w, "schema_version");
    jw_int(&w, 1);
    jw_key(&w, "command");
    jw_str(&w, cmd);
    jw_key(&w, "job_id");
    jw_str(&w, job);
    jw_key(&w, "trigger_id");
    jw_str(&w, trig);
    jw_key(&w, "cluster");
    jw_str(&w, sp_flink_url(fl));
    jw_key(&w, "flink_version");
    if (v && v->text[0]) jw_str(&w, v->text); else jw_null(&w);
    jw_key(&w, "target_directory");
    if (dir) jw_str(&w, dir); else jw_null(&w);
    jw_key(&w, "format");
    jw_str(&w, fmt);
    if (stop) {
        jw_key(&w, "drain");
        jw_bool(&w, drain);
    }
    jw_key(&w, "detached");
    jw_bool(&w, detached);
    jw_key(&w, "status");
    jw_str(&w, status);
    jw_key(&w, "location");
    if (op && op->location) jw_str(&w, op->location); else if (op && op->stop_savepoint) jw_str(&w, op->stop_savepoint); else jw_null(&w);
    jw_key(&w, "record");
    if (record) jw_str(&w, record); else jw_null(&w);
    jw_key(&w, "failure");
    if (op && op->failure_class) {
        jw_obj(&w);
        jw_key(&w, "class");
        jw_str(&w, op->failure_class);
        jw_key(&w, "summary");
        jw_str(&w, op->failure_summary ? op->failure_summary : "");
        jw_key(&w, "stack_trace");
        jw_str(&w, op->failure_trace ? op->failure_trace : "");
        jw_obj_end(&w);
    } else {
        jw_null(&w);
    }
    jw_key(&w, "error");
    jw_error(&w, err);
    jw_obj_end(&w);
    jw_end(&w);
}

static void make_origin(sp_record_origin_t *o, const char *by, const char *job, const char *trig, const sp_flink_t *fl,
                        const sp_flink_version_t *v, const char *fmt, bool drain, const char *location)
{
    memset(o, 0, sizeof *o);
    snprintf(o->by, sizeof o->by, "%s", by);
    snprintf(o->job_id, sizeof o->job_id, "%s", job);
    snprintf(o->trigger_id, sizeof o->trigger_id, "%s", trig);
    o->time_ms = flink_cli_now_ms();
    snprintf(o->cluster, sizeof o->cluster, "%s", sp_flink_url(fl));
    snprintf(o->flink_version, sizeof o->flink_version, "%s", v ? v->text : "");
    snprintf(o->format, sizeof o->format, "%s", fmt ? fmt : "");
    o->drain = drain;
    snprintf(o->location, sizeof o->location, "%s", location);
}

/*
 * Keep the pending record of an operation just triggered (sp_record.h): in
 * the target directory when it is a local directory (where sp status finds
 * it beside the savepoint, from any machine that sees it), else in the
 * user's state directory.  *where gets the directory used, "" when none.
 */
static void pending_save(const char *cmd, const char *target, const sp_record_origin_t *o, char *where, size_t n)
{
    where[0] = '\0';
    char d[PATH_MAX];
    sp_error_t e;
    sp_error_clear(&e);
    if ((flink_cli_local_dir(target, d, sizeof d) && sp_record_pending_save(d, o, &e) == SP_OK) ||
        (sp_record_pending_user_dir(getenv("XDG_STATE_HOME"), getenv("HOME"), true, d, sizeof d, &e) == SP_OK &&
         sp_record_pending_save(d, o, &e) == SP_OK)) {
        snprintf(where, n, "%s", d);
        return;
    }
    fprintf(stderr, "sp %s: note: no pending record written (%s): if sp status completes this operation, the "
                    "ownership record cannot say which command started it\n", cmd, e.message);
}

/* The error of a stop that did not stop the job: Flink answered with the savepoint of an earlier trigger. */
static sp_status_t not_stopped(sp_error_t *err, const char *trig, const char *job, const char *location)
{
    return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "",
                        "trigger ID %s already belonged to a savepoint of job %s; the job was not stopped; retry "
                        "without --trigger-id (Flink answered with that savepoint: %.200s)", trig, job,
                        location ? location : "?");
}

/*
 * After a stop's savepoint completed: the job must have left RUNNING (Flink
 * deduplicates by job and trigger ID, so a trigger ID an earlier savepoint
 * used gets that savepoint back and the job runs on).  False, with *err
 * set, when the job still runs; a cluster that cannot be asked is a
 * warning.  (sp status does the same for a detached stop.)
 */
static bool confirm_stopped(const char *cmd, sp_flink_t *fl, const char *job, const char *trig, bool own_trigger_id,
                            const char *location, sp_error_t *err)
{
    char st[24];
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t s = sp_flink_wait_stopped(fl, job, 0, st, &e);
    if (!s)
        return true;
    if (!st[0]) {
        fprintf(stderr, "sp %s: warning: the savepoint completed, but whether job %s ended could not be checked: %s\n",
                cmd, job, e.message);
        return true;
    }
    if (own_trigger_id && strcmp(st, "RUNNING") == 0) {
        not_stopped(err, trig, job, location);
    } else {
        *err = e;
        size_t l = strlen(err->message);
        snprintf(err->message + l, sizeof err->message - l, "; the savepoint is at %.200s, but the job was not stopped",
                 location ? location : "?");
    }
    return false;
}

/* Write the "created" entry of the savepoint's ownership record; returns the record path (static) or NULL. */
const char *flink_cli_record_origin(const char *by, const char *job, const char *trig, const sp_flink_t *fl,
                                    const sp_flink_version_t *v, const char *fmt, bool drain, const char *location)
{
    static char rec[PATH_MAX + 32];
    char dir[PATH_MAX];
    if (!flink_cli_local_dir(location, dir, sizeof dir)) {
        fprintf(stderr, "sp: note: %s is not on the local file system: no ownership record written beside it\n", location);
        return NULL;
    }
    sp_record_origin_t o;
    make_origin(&o, by, job, trig, fl, v, fmt, drain, location);
    sp_error_t err;
    sp_error_clear(&err);
    if (sp_record_set_origin(dir, &o, &err) != SP_OK) {
        fprintf(stderr, "sp: warning: the savepoint is complete, but its ownership record could not be written: %s\n",
                err.message);
        return NULL;
    }
    snprintf(rec, sizeof rec, "%s%s", dir, SP_RECORD_SUFFIX);
    return rec;
}

int flink_cli_savepoint(int argc, char **argv, bool stop)
{
    flink_cli_t c = {0};
    const char *type = "canonical", *trigger_id = NULL;
    bool detached = false, drain = false;
    const cli_option_t trigger_opts[] = {
        {"type", 't', OPT_STRING, &type, "canonical|native", "savepoint format (default canonical; any case)"},
        {"detached", 0, OPT_FLAG, &detached, NULL, "print the trigger ID and return at once (follow with sp status)"},
        {"timeout", 0, OPT_STRING, &c.timeout, "DURATION", "give up waiting after DURATION (90s, 10m, 1h; default: no limit)"},
        {"trigger-id", 0, OPT_STRING, &trigger_id, "ID", "use this trigger ID (32 hex digits), e.g. to resume after a failure"},
        {"rest-url", 0, OPT_STRING, &c.rest_url, "URL", FLINK_CLI_REST_URL_HELP},
        {"json", 0, OPT_FLAG, &c.json, NULL, "one JSON object: job, trigger ID, status, location, failure"},
        {"verbose", 'v', OPT_FLAG, &c.verbose, NULL, "trace every REST exchange; full stack traces of failures"},
        {0},
    };
    const cli_option_t stop_opts[] = {
        {"drain", 'd', OPT_FLAG, &drain, NULL, "emit MAX_WATERMARK first: fire all timers and windows (final stop)"},
        {"type", 't', OPT_STRING, &type, "canonical|native", "savepoint format (default canonical; any case)"},
        {"detached", 0, OPT_FLAG, &detached, NULL, "print the trigger ID and return at once (follow with sp status)"},
        {"timeout", 0, OPT_STRING, &c.timeout, "DURATION", "give up waiting after DURATION (90s, 10m, 1h; default: no limit)"},
        {"trigger-id", 0, OPT_STRING, &trigger_id, "ID", "use this trigger ID (32 hex digits), e.g. to resume after a failure"},
        {"rest-url", 0, OPT_STRING, &c.rest_url, "URL", FLINK_CLI_REST_URL_HELP},
        {"json", 0, OPT_FLAG, &c.json, NULL, "one JSON object: job, trigger ID, status, location, failure"},
        {"verbose", 'v', OPT_FLAG, &c.verbose, NULL, "trace every REST exchange; full stack traces of failures"},
        {0},
    };
    const char *name = stop ? "stop" : "trigger";
    const cli_command_t *cmd = command_find(name);
    int n, r = opts_parse(cmd, stop ? stop_opts : trigger_opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n < 1 || n > 2)
        return opts_usage_error(cmd, "give the job ID and, optionally, the target directory");
    const char *job = argv[0];
    if (!sp_flink_id_valid(job))
        return opts_usage_error(cmd, "'%s' is not a job ID (32 hexadecimal digits; sp jobs lists them)", job);
    sp_flink_format_t fmt;
    if (strcasecmp(type, "canonical") == 0)
        fmt = SP_FLINK_CANONICAL;
    else if (strcasecmp(type, "native") == 0)
        fmt = SP_FLINK_NATIVE;
    else
        return opts_usage_error(cmd, "--type must be canonical or native, not '%s'", type);
    const char *fmt_name = fmt == SP_FLINK_NATIVE ? "NATIVE" : "CANONICAL";
    int64_t timeout = c.timeout ? flink_cli_duration_ms(c.timeout) : 0;
    if (timeout < 0)
        return opts_usage_error(cmd, "--timeout: '%s' is not a duration (90s, 10m, 1h, none)", c.timeout);
    if (trigger_id && !sp_flink_id_valid(trigger_id))
        return opts_usage_error(cmd, "--trigger-id: '%s' is not 32 hexadecimal digits", trigger_id);

    sp_error_t err;
    sp_error_clear(&err);
    sp_error_clear(&err);
    /* the target directory: the argument, else Flink's configured default; neither: stop before contacting the cluster */
    const char *dir = n == 2 ? argv[1] : NULL;
    sp_flinkconf_t *conf = NULL;
    char dirbuf[PATH_MAX];
    if (!dir) {
        sp_status_t s = flink_cli_conf(&conf, &err);
        if (s)
            return report_error(name, &err, c.json);
        const char *d = sp_flinkconf_savepoint_dir(conf, NULL);
        if (d) {
            snprintf(dirbuf, sizeof dirbuf, "%s", d);
            dir = dirbuf;
        }
        sp_flinkconf_free(conf);
        if (!dir) {
            sp_error_set(&err, SP_ERR_INVALID, SP_NO_OFFSET, "target-directory",
                         "no savepoint directory: give TARGET_DIR, or set execution.checkpointing.savepoint-dir "
                         "(before Flink 1.20: state.savepoints.dir) in $FLINK_CONF_DIR/config.yaml");
            return report_error(name, &err, c.json);
        }
    }
    sp_flink_t *fl;
    if (flink_cli_open(&c, &fl, &err))
        return report_error(name, &err, c.json);
    char trig[33];
    if (trigger_id) {
        for (int i = 0; i < 33; i++)
            trig[i] = (char)(trigger_id[i] >= 'A' && trigger_id[i] <= 'F' ? trigger_id[i] - 'A' + 'a' : trigger_id[i]);
    } else if (sp_flink_new_id(trig, &err)) {
        sp_flink_close(fl);
        return report_error(name, &err, c.json);
    }
    char jobl[33];
    for (int i = 0; i < 33; i++)
        jobl[i] = (char)(job[i] >= 'A' && job[i] <= 'F' ? job[i] - 'A' + 'a' : job[i]);
    /* shown before the request goes out: whatever happens next, the operation can be found with it */
    if (stop)
        fprintf(stderr, "%s job \"%s\" with a %s savepoint into %s (trigger ID %s).\n", drain ? "Draining" : "Suspending",
                jobl, fmt_name, dir, trig);
    else
        fprintf(stderr, "Triggering a %s savepoint for job %s into %s (trigger ID %s).\n", fmt_name, jobl, dir, trig);
    sp_flink_version_t v;
    memset(&v, 0, sizeof v);
    sp_flink_savepoint_request_t req = {.target_dir = dir, .format = fmt, .stop = stop, .drain = drain, .trigger_id = trig};
    sp_status_t s = sp_flink_get_version(fl, &v, &err);
    if (!s && stop && trigger_id) {
        /* Flink answers a stop whose trigger ID an earlier savepoint used with that savepoint, and stops nothing */
        bool reused = false;
        char *prev = NULL;
        if (sp_flink_stop_trigger_reused(fl, jobl, trig, &reused, &prev, NULL) == SP_OK && reused)
            s = not_stopped(&err, trig, jobl, prev);
        free(prev);
    }
    if (!s)
        s = sp_flink_savepoint_trigger(fl, jobl, &req, &err);
    if (s && sp_flink_outcome_unknown(fl)) {
        /* it may be running on the cluster: keep what it was, for sp status to record it when it completes */
        sp_record_origin_t maybe;
        make_origin(&maybe, stop ? "sp stop" : "sp trigger", jobl, trig, fl, &v, fmt_name, drain, "");
        char where[PATH_MAX];
        pending_save(name, dir, &maybe, where, sizeof where);
    }
    if (s) {
        if (c.json)
            json_result(name, jobl, trig, fl, &v, dir, fmt_name, drain, stop, detached, "ERROR", NULL, NULL, &err);
        sp_flink_close(fl);
        return report_error(name, &err, false);
    }
    /* what sp knows now, for whoever sees the operation complete (sp status after --detached or a timeout) */
    sp_record_origin_t pending;
    make_origin(&pending, stop ? "sp stop" : "sp trigger", jobl, trig, fl, &v, fmt_name, drain, "");
    char pending_dir[PATH_MAX];
    pending_save(name, dir, &pending, pending_dir, sizeof pending_dir);
    if (detached) {
        fprintf(stderr, "%s in detached mode; follow it with: sp status %s %s\n",
                stop ? "Stop-with-savepoint triggered" : "Savepoint triggered", jobl, trig);
        if (c.json)
            json_result(name, jobl, trig, fl, &v, dir, fmt_name, drain, stop, true, "IN_PROGRESS", NULL, NULL, NULL);
        else
            printf("%s\n", trig);
        sp_flink_close(fl);
        return EXIT_OK_;
    }
    fprintf(stderr, "Waiting for the savepoint...\n");
    sp_flink_operation_t op;
    s = sp_flink_savepoint_wait(fl, jobl, trig, timeout, &op, &err);
    bool stopped = true;
    if (!s && stop)
        stopped = confirm_stopped(name, fl, jobl, trig, trigger_id != NULL, op.location, &err);
    if (!stopped)
        s = err.code;
    if (s && !op.completed && !strstr(err.message, "sp status")) {
        /* the request was accepted; only following it failed (the cluster went away mid-poll) */
        char msg[sizeof err.message];
        snprintf(msg, sizeof msg, "%.360s; the %s was requested (trigger ID %s) and may still complete: follow it "
                 "with `sp status %s %s`", err.message, stop ? "stop-with-savepoint" : "savepoint", trig, jobl, trig);
        snprintf(err.message, sizeof err.message, "%s", msg);
    }
    bool unchecked = false;
    sp_error_t why;
    sp_error_clear(&why);
    if (!s)
        s = flink_cli_check_location(op.location, &unchecked, &why);
    if (s && stopped)
        err = why.code ? why : err;
    if (!s && unchecked)
        flink_cli_warn_unchecked(name, op.location, &why);
    const char *rec = NULL;
    if (!s && !unchecked)
        rec = flink_cli_record_origin(stop ? "sp stop" : "sp trigger", jobl, trig, fl, &v, fmt_name, drain, op.location);
    else if (op.stop_savepoint)
        rec = flink_cli_record_origin("sp stop", jobl, trig, fl, &v, fmt_name, drain, op.stop_savepoint);
    if (op.completed && pending_dir[0])
        sp_record_pending_remove(pending_dir, jobl, trig, NULL);
    int rc = EXIT_OK_;
    if (c.json) {
        const char *st = op.failure_class ? "FAILED" : !stopped ? "ERROR" : op.completed ? "COMPLETED" : "ERROR";
        json_result(name, jobl, trig, fl, &v, dir, fmt_name, drain, stop, false, st, &op, rec, s ? &err : NULL);
    }
    if (s) {
        rc = flink_cli_fail(name, &err, op.failure_trace, c.verbose, false);
    } else {
        fprintf(stderr, "Savepoint completed. Path: %s\n", op.location);
        if (!c.json)
            printf("%s\n", op.location);
    }
    sp_flink_operation_free(&op);
    sp_flink_close(fl);
    return rc;
}

int cmd_trigger(int argc, char **argv) { return flink_cli_savepoint(argc, argv, false); }
