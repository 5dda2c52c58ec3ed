/*
 * sp restore SNAP (--jar-id ID | --jar FILE) [--claim-mode CLAIM|NO_CLAIM|LEGACY] ...:
 * start a job from a snapshot over Flink's REST API (POST /jars/:id/run),
 * the way `flink run -s SNAP -claimMode M` does.
 *
 * Order of work, so that nothing unsafe is left behind:
 *  1. the ownership record beside a local snapshot is checked (a snapshot
 *     restored in CLAIM mode belongs to Flink: no second job from it);
 *  2. the job ID is chosen here and the restore is written to the record
 *     before the job is submitted (a crash cannot leave a job the record
 *     does not know); a submission the cluster rejects is taken out again;
 *  3. the claim-mode field has the name the cluster's version reads
 *     (restoreMode up to 1.19, claimMode from 1.20);
 *  4. after submission sp waits for RUNNING and checks what the cluster
 *     reports: latest.restored names the snapshot, and its is_savepoint flag
 *     is false exactly when the snapshot was claimed (CLAIM);
 *  5. --wait-released (NO_CLAIM) waits for a completed checkpoint with a
 *     higher ID, marks the record released and says the snapshot may go.
 * A jar uploaded with --jar is deleted again once the cluster answered the
 * submission (--keep-jar keeps it).  --timeout is one deadline for the
 * whole command (the client's total timeout); without it the wait for
 * RUNNING is bounded by 10 minutes and --wait-released by nothing.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commands.h"
#include "flinkcli.h"
#include "out.h"

#define DEFAULT_RUNNING_TIMEOUT_MS (10 * 60 * 1000)

typedef struct result {
    const char *snapshot, *jar_id, *mode;
    char job[33];
    const char *state;
    int64_t snapshot_id, restored_id;
    int claimed;             /* -1 not reported, 0 / 1 as the cluster reports */
    bool released;
    int64_t released_checkpoint;
    const char *record;
    bool jar_deleted;        /* the jar sp uploaded was deleted again */
} result_t;

static void print_json(const result_t *r, const sp_flink_t *fl, const sp_flink_version_t *v, const sp_error_t *err)
{
    jw_t w;
    jw_init(&w, stdout, true);
    jw_obj(&w);
    jw_key(&w, "schema_version");
    jw_int(&w, 1);
    jw_key(&w, "snapshot");
    jw_str(&w, r->snapshot);
    jw_key(&w, "cluster");
    if (fl) jw_str(&w, sp_flink_url(fl)); else jw_null(&w);
    jw_key(&w, "flink_version");
    if (v && v->text[0]) jw_str(&w, v->text); else jw_null(&w);
    jw_key(&w, "jar_id");
    if (r->jar_id) jw_str(&w, r->jar_id); else jw_null(&w);
    jw_key(&w, "jar_deleted");
    jw_bool(&w, r->jar_deleted);
    jw_key(&w, "claim_mode");
    jw_str(&w, r->mode);
    jw_key(&w, "job_id");
    if (r->job[0]) jw_str(&w, r->job); else jw_null(&w);
    jw_key(&w, "state");
    if (r->state && r->state[0]) jw_str(&w, r->state); else jw_null(&w);
    jw_key(&w, "snapshot_checkpoint_id");
    if (r->snapshot_id >= 0) jw_int(&w, r->snapshot_id); else jw_null(&w);
    jw_key(&w, "restored_checkpoint_id");
    if (r->restored_id >= 0) jw_int(&w, r->restored_id); else jw_null(&w);
    jw_key(&w, "cluster_reports_claimed");
    if (r->claimed >= 0) jw_bool(&w, r->claimed); else jw_null(&w);
    jw_key(&w, "released");
    jw_bool(&w, r->released);
    jw_key(&w, "released_checkpoint_id");
    if (r->released) jw_int(&w, r->released_checkpoint); else jw_null(&w);
    jw_key(&w, "record");
    if (r->record) jw_str(&w, r->record); else jw_null(&w);
    jw_key(&w, "error");
    jw_error(&w, err);
    jw_obj_end(&w);
    jw_end(&w);
}

/* Delete the jar sp uploaded (unless --keep-jar): a session cluster keeps every upload until deleted, and the
 * submitted job no longer needs it.  A failure is a warning.  True when it was deleted. */
static bool drop_jar(sp_flink_t *fl, const char *uploaded, bool keep)
{
    if (!uploaded)
        return false;
    if (keep) {
        fprintf(stderr, "Kept the uploaded jar on the cluster (--keep-jar): jar ID %s\n", uploaded);
        return false;
    }
    sp_error_t e;
    sp_error_clear(&e);
    if (sp_flink_jar_delete(fl, uploaded, &e) != SP_OK) {
        fprintf(stderr, "sp restore: warning: the uploaded jar %s could not be deleted from the cluster: %s\n", uploaded,
                e.message);
        return false;
    }
    return true;
}

/* "60 s", "1.5 s" */
static const char *fmt_secs(int64_t ms, char buf[32])
{
    if (ms % 1000 == 0)
        snprintf(buf, 32, "%lld s", (long long)(ms / 1000));
    else
        snprintf(buf, 32, "%.1f s", (double)ms / 1000);
    return buf;
}

static int64_t mono_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The path Flink gets: a local path made absolute; anything with a scheme as given. */
static void flink_path(const char *arg, char *out, size_t n)
{
    if (strstr(arg, "://") || strncmp(arg, "file:", 5) == 0 || !realpath(arg, out))
        snprintf(out, n, "%s", arg);
}

int cmd_restore(int argc, char **argv)
{
    flink_cli_t c = {0}; /* --timeout bounds the whole command: the client's total timeout */
    const char *jar_id = NULL, *jar = NULL, *mode_s = "NO_CLAIM", *entry = NULL;
    long parallelism = 0;
    bool allow_nr = false, wait_released = false, force = false, keep_jar = false;
    cli_list_t args = {0};
    const cli_option_t opts[] = {
        {"jar-id", 0, OPT_STRING, &jar_id, "ID", "a jar already uploaded to the cluster (its GET /jars lists them)"},
        {"jar", 0, OPT_STRING, &jar, "FILE", "upload this jar first (deleted from the cluster once the job is submitted)"},
        {"keep-jar", 0, OPT_FLAG, &keep_jar, NULL, "with --jar: leave the uploaded jar on the cluster"},
        {"claim-mode", 0, OPT_STRING, &mode_s, "MODE", "CLAIM, NO_CLAIM (default) or LEGACY (deprecated); any case"},
        {"allow-non-restored-state", 'n', OPT_FLAG, &allow_nr, NULL, "skip state that maps to no operator of the job"},
        {"entry-class", 'c', OPT_STRING, &entry, "CLASS", "the job's main class (default: the jar's manifest)"},
        {"parallelism", 'p', OPT_INT, &parallelism, "P", "the job's default parallelism"},
        {"arg", 0, OPT_LIST, &args, "ARG", "a program argument (repeatable; arguments after -- are added too)"},
        {"wait-released", 0, OPT_FLAG, &wait_released, NULL, "NO_CLAIM: wait until the job no longer needs the snapshot"},
        {"timeout", 0, OPT_STRING, &c.timeout, "DURATION", "bound the whole command (default: 10m for the job to run, "
                                                            "no limit for --wait-released)"},
        {"force", 0, OPT_FLAG, &force, NULL, "restore although the ownership record forbids it (warning)"},
        {"rest-url", 0, OPT_STRING, &c.rest_url, "URL", FLINK_CLI_REST_URL_HELP},
        {"json", 0, OPT_FLAG, &c.json, NULL, "one JSON object: job ID, claim mode, what the cluster reports"},
        {"verbose", 'v', OPT_FLAG, &c.verbose, NULL, "trace every REST exchange; full stack traces of failures"},
        {0},
    };
    const cli_command_t *cmd = command_find("restore");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n < 1)
        return opts_usage_error(cmd, "give the snapshot to restore");
    if (!jar_id == !jar)
        return opts_usage_error(cmd, "give exactly one of --jar-id ID and --jar FILE");
    if (keep_jar && !jar)
        return opts_usage_error(cmd, "--keep-jar goes with --jar FILE (a jar given by --jar-id is never deleted)");
    sp_flink_claim_mode_t mode;
    if (!sp_flink_claim_mode_parse(mode_s, &mode))
        return opts_usage_error(cmd, "--claim-mode must be CLAIM, NO_CLAIM or LEGACY, not '%s'", mode_s);
    if (wait_released && mode != SP_CLAIM_NO_CLAIM)
        return opts_usage_error(cmd, "--wait-released is for NO_CLAIM restores (after CLAIM Flink owns the snapshot; "
                                     "after LEGACY no point in time makes it safe)");
    if (parallelism < 0 || parallelism > 1 << 24)
        return opts_usage_error(cmd, "--parallelism must be positive");
    int64_t timeout = c.timeout ? flink_cli_duration_ms(c.timeout) : -2;
    if (timeout == -1)
        return opts_usage_error(cmd, "--timeout: '%s' is not a duration (90s, 10m, 1h, none)", c.timeout);
    const char *all_args[128];
    size_t nargs = 0;
    for (int i = 0; i < args.n; i++)
        all_args[nargs++] = args.v[i];
    for (int i = 1; i < n && nargs < 128; i++)
        all_args[nargs++] = argv[i];
    const char *mode_name = sp_flink_claim_mode_name(mode);

    result_t res = {.mode = mode_name, .snapshot_id = -1, .restored_id = -1, .claimed = -1};
    char spath[PATH_MAX], dir[PATH_MAX];
    flink_path(argv[0], spath, sizeof spath);
    res.snapshot = spath;
    sp_error_t err;
    sp_error_clear(&err);
    sp_error_clear(&err);
    /* a local snapshot is read first: its checkpoint ID, and no job is started from something unreadable */
    bool local = flink_cli_local_dir(spath, dir, sizeof dir);
    if (!local && !strstr(spath, "://")) {
        sp_error_set_file(&err, argv[0]);
        sp_error_set(&err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no such snapshot");
        return report_error("restore", &err, c.json);
    }
    if (local) {
        sp_snapshot_t *snap;
        if (sp_snapshot_open(spath, 0, &snap, &err))
            return report_error("restore", &err, c.json);
        res.snapshot_id = (int64_t)snap->meta->checkpoint_id;
        sp_snapshot_close(snap);
        sp_status_t s = sp_record_check_restore(dir, mode_name, &err);
        if (s == SP_ERR_REFUSED && force) {
            fprintf(stderr, "sp restore: warning: %s (--force)\n", err.message);
        } else if (s) {
            if (s == SP_ERR_REFUSED)
                snprintf(err.message + strlen(err.message), sizeof err.message - strlen(err.message), " (--force to restore anyway)");
            return report_error("restore", &err, c.json);
        }
    } else {
        fprintf(stderr, "sp restore: note: %s is not on the local file system: its ownership record is not kept\n", spath);
    }
    if (mode == SP_CLAIM_LEGACY)
        fprintf(stderr, "sp restore: warning: claim mode LEGACY is deprecated since Flink 1.19 and will be removed "
                        "(FLINK-34189): ownership of the snapshot stays undefined and later checkpoints may keep using "
                        "its files; prefer CLAIM or NO_CLAIM\n");

    sp_flink_t *fl = NULL;
    sp_flink_version_t v;
    memset(&v, 0, sizeof v);
    char *uploaded = NULL;
    /* one deadline for everything from here on: upload, submission, RUNNING, --wait-released (the client's
     * total timeout bounds every request and wait; this copy bounds sp's own polling below) */
    int64_t deadline = timeout > 0 ? mono_now_ms() + timeout : INT64_MAX;
    sp_status_t s = SP_OK;
    /* a jar that cannot be read stops the command before the cluster is asked anything */
    struct stat jst = {0};
    if (!s && jar && (stat(jar, &jst) != 0 || !S_ISREG(jst.st_mode))) {
        int e = errno;
        sp_error_set_file(&err, jar);
        s = S_ISDIR(jst.st_mode) ? sp_error_set(&err, SP_ERR_INVALID, SP_NO_OFFSET, "jar", "a directory, not a jar file")
                                 : sp_error_set(&err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "cannot read the jar file: %s",
                                                strerror(e ? e : ENOENT));
    }
    if (!s)
        s = flink_cli_open(&c, &fl, &err);
    if (!s)
        s = sp_flink_get_version(fl, &v, &err);
    if (!s) {
        /* the body is built now, so a version that cannot express the request stops everything before the upload */
        sp_flink_run_request_t probe = {.savepoint_path = spath, .claim_mode = mode};
        char *b = sp_flink_run_body(&v, &probe, &err);
        if (!b)
            s = err.code;
        free(b);
    }
    if (!s && jar) {
        fprintf(stderr, "Uploading %s to %s...\n", jar, sp_flink_url(fl));
        s = sp_flink_jar_upload(fl, jar, &uploaded, &err);
        if (!s)
            fprintf(stderr, "Uploaded %s: jar ID %s\n", jar, uploaded);
        jar_id = uploaded;
    }
    res.jar_id = jar_id;
    if (!s)
        s = sp_flink_new_id(res.job, &err);
    char recpath[PATH_MAX + 32] = "";
    if (!s && local) {
        sp_record_restore_t rr;
        memset(&rr, 0, sizeof rr);
        snprintf(rr.job_id, sizeof rr.job_id, "%s", res.job);
        snprintf(rr.claim_mode, sizeof rr.claim_mode, "%s", mode_name);
        rr.time_ms = flink_cli_now_ms();
        snprintf(rr.cluster, sizeof rr.cluster, "%s", sp_flink_url(fl));
        snprintf(rr.flink_version, sizeof rr.flink_version, "%s", v.text);
        rr.snapshot_checkpoint_id = res.snapshot_id;
        rr.released_checkpoint_id = -1;
        s = sp_record_add_restore_checked(dir, &rr, force, &err);
        if (!s) {
            snprintf(recpath, sizeof recpath, "%s%s", dir, SP_RECORD_SUFFIX);
            res.record = recpath;
        }
    }
    if (s) {
        res.job[0] = '\0';
        res.jar_deleted = drop_jar(fl, uploaded, keep_jar);
        if (c.json)
            print_json(&res, fl, &v, &err);
        sp_flink_close(fl);
        free(uploaded);
        return report_error("restore", &err, false);
    }
    fprintf(stderr, "Restoring %s in %s mode on Flink %s (job ID %s).\n", spath, mode_name, v.text, res.job);
    sp_flink_run_request_t req = {
        .savepoint_path = spath, .claim_mode = mode, .allow_non_restored_state = allow_nr, .entry_class = entry,
        .parallelism = (int)parallelism, .args = all_args, .n_args = nargs, .job_id = res.job};
    char got[33];
    bool rejected = true;
    s = sp_flink_jar_run(fl, jar_id, &req, got, &rejected, &err);
    /* submitted or refused: the cluster has what it needs of the jar (with no answer, the cluster may still be
     * reading it: it stays) */
    if (!s || rejected)
        res.jar_deleted = drop_jar(fl, uploaded, keep_jar);
    else if (uploaded)
        fprintf(stderr, "sp restore: note: the uploaded jar %s stays on the cluster (the submission may still be "
                        "running)\n", uploaded);
    if (s && !rejected) {
        /* no answer: the cluster may still start the job, which would then use the snapshot; the restore stays
         * recorded (sp dispose asks the cluster about the job, and a job it does not know releases it) */
        size_t l = strlen(err.message);
        snprintf(err.message + l, sizeof err.message - l, "; the cluster may still start job %s: its restore stays "
                 "in the record", res.job);
        if (c.json)
            print_json(&res, fl, &v, &err);
        sp_flink_close(fl);
        free(uploaded);
        return report_error("restore", &err, false);
    }
    if (s) {
        /* the cluster did not take the job: it does not use the snapshot */
        if (local)
            sp_record_remove_restore(dir, res.job, NULL);
        res.job[0] = '\0';
        res.record = NULL;
        if (c.json)
            print_json(&res, fl, &v, &err);
        sp_flink_close(fl);
        free(uploaded);
        return report_error("restore", &err, false);
    }
    if (strcmp(got, res.job) != 0) {
        /* a cluster that ignored the job ID: record the one it used */
        if (local) {
            sp_record_remove_restore(dir, res.job, NULL);
            sp_record_restore_t rr;
            memset(&rr, 0, sizeof rr);
            snprintf(rr.job_id, sizeof rr.job_id, "%s", got);
            snprintf(rr.claim_mode, sizeof rr.claim_mode, "%s", mode_name);
            rr.time_ms = flink_cli_now_ms();
            snprintf(rr.cluster, sizeof rr.cluster, "%s", sp_flink_url(fl));
            snprintf(rr.flink_version, sizeof rr.flink_version, "%s", v.text);
            rr.snapshot_checkpoint_id = res.snapshot_id;
            sp_record_add_restore(dir, &rr, NULL);
        }
        snprintf(res.job, sizeof res.job, "%s", got);
    }
    fprintf(stderr, "Job has been submitted with JobID %s\n", res.job);
    if (!c.json) {
        printf("%s\n", res.job);
        fflush(stdout);
    }

    char state[24] = "";
    s = sp_flink_wait_running(fl, res.job, timeout == -2 ? DEFAULT_RUNNING_TIMEOUT_MS : 0, state, &err);
    res.state = state;
    /* what the cluster reports about the restore (statistics can lag a few seconds behind) */
    sp_flink_checkpoints_t ck;
    memset(&ck, 0, sizeof ck);
    bool checked = false;
    char dur[32];
    for (int i = 0; !s && i < 40; i++) {
        sp_flink_checkpoints_free(&ck);
        s = sp_flink_checkpoints(fl, res.job, &ck, &err);
        if (s || !ck.enabled || ck.has_restored) {
            checked = !s;
            break;
        }
        if (mono_now_ms() + 250 >= deadline) {
            s = sp_error_set(&err, SP_ERR_REST, SP_NO_OFFSET, "", "timed out after %s waiting for the cluster to "
                             "report job %s's restore (job %s; GET /jobs/:id/checkpoints has no latest.restored yet)",
                             fmt_secs(timeout, dur), res.job, state);
            break;
        }
        struct timespec ts = {0, 250000000L};
        nanosleep(&ts, NULL);
    }
    if (!s && checked && ck.enabled && ck.has_restored) {
        res.restored_id = ck.restored_id;
        res.claimed = !ck.restored_is_savepoint;
        if (!sp_flink_same_path(ck.restored_path, spath)) {
            s = sp_error_set(&err, SP_ERR_REST, SP_NO_OFFSET, "", "job %s restored from %s, not from %s", res.job,
                             ck.restored_path ? ck.restored_path : "?", spath);
        } else if (res.claimed != (mode == SP_CLAIM_CLAIM)) {
            if (res.claimed && local) {
                /* Flink claimed it after all (a cluster-wide claim-mode setting): the record must say so */
                sp_record_restore_t rr;
                memset(&rr, 0, sizeof rr);
                snprintf(rr.job_id, sizeof rr.job_id, "%s", res.job);
                snprintf(rr.claim_mode, sizeof rr.claim_mode, "CLAIM");
                rr.time_ms = flink_cli_now_ms();
                snprintf(rr.cluster, sizeof rr.cluster, "%s", sp_flink_url(fl));
                snprintf(rr.flink_version, sizeof rr.flink_version, "%s", v.text);
                rr.snapshot_checkpoint_id = res.snapshot_id;
                sp_record_add_restore(dir, &rr, NULL);
            }
            s = sp_error_set(&err, SP_ERR_REST, SP_NO_OFFSET, "claim-mode",
                             "%s mode was asked, but the cluster reports job %s's snapshot as %s: the claim mode was "
                             "not applied (Flink %s ignores request fields it does not know)", mode_name, res.job,
                             res.claimed ? "claimed (CLAIM)" : "not claimed (NO_CLAIM or LEGACY)", v.text);
        } else {
            fprintf(stderr, "Job %s is RUNNING, restored from checkpoint %lld; the cluster reports the snapshot %s, "
                            "as asked.\n", res.job, (long long)ck.restored_id,
                    res.claimed ? "claimed (CLAIM)" : "not claimed");
        }
    } else if (!s && checked) {
        fprintf(stderr, "sp restore: note: checkpointing is not enabled for job %s: the cluster reports nothing about "
                        "the restore%s\n", res.job,
                mode == SP_CLAIM_NO_CLAIM ? ", and the snapshot stays needed by it (no later checkpoint will come)" : "");
    }
    if (!s && wait_released) {
        if (!ck.enabled) {
            s = sp_error_set(&err, SP_ERR_REST, SP_NO_OFFSET, "", "--wait-released: checkpointing is not enabled for "
                             "job %s, so it never completes a checkpoint that releases the snapshot", res.job);
        } else {
            int64_t rid = res.snapshot_id >= 0 ? res.snapshot_id : res.restored_id;
            fprintf(stderr, "Waiting for job %s to complete a checkpoint after %lld...\n", res.job, (long long)rid);
            s = sp_flink_wait_released(fl, res.job, rid, 0, &res.released_checkpoint, &err);
            if (!s) {
                res.released = true;
                if (local)
                    sp_record_mark_released(dir, res.job, res.released_checkpoint, flink_cli_now_ms(), NULL);
                fprintf(stderr, "Job %s completed checkpoint %lld: it no longer needs %s, which may be deleted now.\n",
                        res.job, (long long)res.released_checkpoint, spath);
            }
        }
    } else if (!s && mode == SP_CLAIM_NO_CLAIM) {
        fprintf(stderr, "The snapshot stays needed until job %s completed a checkpoint (sp dispose checks this; "
                        "--wait-released waits for it).\n", res.job);
    }
    sp_flink_checkpoints_free(&ck);
    if (c.json)
        print_json(&res, fl, &v, s ? &err : NULL);
    int rc = EXIT_OK_;
    if (s) {
        char *sum = NULL, *tr = NULL;
        if (c.verbose)
            sp_flink_job_exception(fl, res.job, &sum, &tr, NULL);
        rc = flink_cli_fail("restore", &err, tr, c.verbose, false);
        free(sum);
        free(tr);
    }
    sp_flink_close(fl);
    free(uploaded);
    return rc;
}
