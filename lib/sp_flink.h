/*
 * sp_flink.h - a client of the Apache Flink REST API (JobManager, Flink
 * 1.15 to 2.x) for what sp does with a cluster: savepoints, stop with a
 * savepoint, restoring a job from a snapshot with a claim mode, and asking
 * whether a restored job still needs its snapshot.
 * Facts it relies on: ../shared/spec/flink-rest-and-cli.md (section numbers
 * below refer to it).
 *
 * Version awareness (sections 1, 7, 9): the cluster's version is read once
 * from GET /config and every request body carries exactly the field names
 * that version understands.  Up to 1.19 Flink rejects an unknown field with
 * 400; from 1.20 on it ignores it silently (FLINK-35302), so a wrong name
 * would quietly restore in NO_CLAIM mode.  Claim mode: `restoreMode` for
 * 1.15-1.19, `claimMode` from 1.20.
 *
 * Robustness: 503 (leader election) and connection failures are retried with
 * backoff; requests that are not idempotent are retried only where a
 * client-chosen ID makes a retry harmless (savepoint trigger ID, fixed job ID).
 *
 * No global state: every call goes through an sp_flink_t handle.  Nothing
 * is printed; an optional trace callback sees one line per HTTP exchange
 * (URLs never carry credentials there, nor in error messages).
 */
#ifndef SP_FLINK_H
#define SP_FLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_record.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A connection to one cluster's REST endpoint. */
typedef struct sp_flink sp_flink_t;

/** Options of sp_flink_open(); zero means the default. */
typedef struct sp_flink_options {
    long connect_timeout_ms;  /* per connection attempt; default 10000 */
    long request_timeout_ms;  /* per request (not uploads); default 60000 */
    int max_attempts;         /* tries of one request on 503 / a dropped connection; default 8 */
    long retry_delay_ms;      /* first backoff delay, doubled up to 4 s; default 250 */
    long total_timeout_ms;    /* one deadline, from sp_flink_open() on, for every request and retry, jar upload
                                 and wait (savepoint, RUNNING, released, stopped); 0: none.  A request near the
                                 end still gets at least 1 s, so a wait loop can report its own timeout, which
                                 names this bound ("timed out after 60 s waiting for ...") */
    /* optional: one line per HTTP exchange ("POST http://h:8081/jobs/../savepoints {..} -> 202 (12 ms)") */
    void (*trace)(void *user, const char *line);
    void *trace_user;
} sp_flink_options_t;

/**
 * Open a client for `base_url` ("http://host:8081", "https://..."; a path
 * prefix is kept).  Nothing is sent yet.
 * Errors: SP_ERR_INVALID (not an http(s) URL), SP_ERR_NOMEM.
 */
sp_status_t sp_flink_open(const char *base_url, const sp_flink_options_t *opts, sp_flink_t **out, sp_error_t *err);

/** Close (NULL allowed). */
void sp_flink_close(sp_flink_t *fl);

/** The base URL without user name or password, for display. */
const char *sp_flink_url(const sp_flink_t *fl);

/** Copy `url` to out without any "user:password@" part. */
void sp_flink_redact_url(const char *url, char *out, size_t n);

/* ---- version ---- */

/** A Flink version as GET /config reports it ("1.20.1", "2.1-SNAPSHOT"). */
typedef struct sp_flink_version {
    int major, minor, patch;  /* patch -1 when absent */
    char text[64];            /* as reported */
} sp_flink_version_t;

/** Parse the leading "major.minor[.patch]" of s; false when there is none. */
bool sp_flink_version_parse(const char *s, sp_flink_version_t *out);

/** <0, 0, >0 as v is older than, equal to, newer than major.minor. */
int sp_flink_version_cmp(const sp_flink_version_t *v, int major, int minor);

/**
 * The cluster's version (GET /config, asked once and kept).
 * Errors: SP_ERR_REST (unreachable, HTTP error, no flink-version).
 */
sp_status_t sp_flink_get_version(sp_flink_t *fl, sp_flink_version_t *out, sp_error_t *err);

/* ---- IDs ---- */

/** A new random 32-hex-digit ID (a trigger ID or job ID chosen by the client). */
sp_status_t sp_flink_new_id(char out[33], sp_error_t *err);

/** Whether s is 32 hex digits (JobID, TriggerId). */
bool sp_flink_id_valid(const char *s);

/* ---- savepoints (sections 3, 4.13-4.15) ---- */

typedef enum sp_flink_format { SP_FLINK_CANONICAL = 0, SP_FLINK_NATIVE = 1 } sp_flink_format_t;

typedef struct sp_flink_savepoint_request {
    const char *target_dir;   /* NULL: the cluster's default savepoint directory */
    sp_flink_format_t format;
    bool stop;                /* stop-with-savepoint (POST /jobs/:id/stop) instead of a savepoint */
    bool drain;               /* stop only: emit MAX_WATERMARK first */
    const char *trigger_id;   /* required: 32 hex digits chosen by the caller (sp_flink_new_id), shown
                                 to the user before the call so that a retry never starts a second one */
} sp_flink_savepoint_request_t;

/**
 * Whether the last request of fl failed after it may have reached the
 * cluster (no answer in time, connection dropped after sending): what it
 * asked for may have happened.  False after a refused connection.
 */
bool sp_flink_outcome_unknown(const sp_flink_t *fl);

/** The body the request would carry for version v (malloc'd JSON text; for tests and --verbose). */
char *sp_flink_savepoint_body(const sp_flink_version_t *v, const sp_flink_savepoint_request_t *req);

/**
 * Trigger a savepoint or stop-with-savepoint of job_id.  The POST is retried
 * with the same trigger ID on 503 and dropped connections; Flink starts
 * nothing new for a trigger ID it already knows.
 * When no answer comes (timeout, connection dropped after sending), the
 * operation is looked up by its trigger ID: a cluster that knows it means
 * the trigger went through (SP_OK); otherwise the error says the request may
 * have reached the cluster, and sp_flink_outcome_unknown() is true.
 * Errors: SP_ERR_INVALID (bad IDs; native format before Flink 1.15),
 * SP_ERR_REST (HTTP error, e.g. 400 with no default savepoint directory;
 * the message carries Flink's).
 */
sp_status_t sp_flink_savepoint_trigger(sp_flink_t *fl, const char *job_id, const sp_flink_savepoint_request_t *req,
                                       sp_error_t *err);

/** The state of an asynchronous savepoint / stop operation. */
typedef struct sp_flink_operation {
    bool completed;           /* status COMPLETED (with a location or a failure) */
    char *location;           /* the savepoint, fully qualified ("file:/...", "s3://...") */
    char *failure_class;      /* failure: the exception class Flink reports */
    char *failure_summary;    /* failure: "Class: message" of the outer and root exceptions, readable */
    char *failure_trace;      /* failure: the full stack trace */
    char *stop_savepoint;     /* stop failed after the savepoint was written: that savepoint's path */
} sp_flink_operation_t;

/**
 * One status request (GET /jobs/:id/savepoints/:trigger).  Returns SP_OK for
 * IN_PROGRESS and for a successful completion; SP_ERR_REST when the
 * operation failed (op holds the cause), completed without a location, or
 * the cluster does not know the trigger (404: never existed, or its result
 * expired from the cache after rest.async.store-duration).
 */
sp_status_t sp_flink_savepoint_status(sp_flink_t *fl, const char *job_id, const char *trigger_id,
                                      sp_flink_operation_t *op, sp_error_t *err);

/**
 * Poll the status with backoff (100 ms doubling to 2 s) until it completes
 * or timeout_ms passes (<= 0: no limit; the client's total_timeout_ms
 * bounds it too, as it bounds every wait below).  Connection failures while
 * polling are retried.  Errors as sp_flink_savepoint_status(); a timeout is
 * SP_ERR_REST with op->completed false, and a message naming the bound, the
 * trigger ID and the job's state ("timed out after 60 s waiting for
 * savepoint T of job J to complete (... job RUNNING); ... 'sp status J T'").
 */
sp_status_t sp_flink_savepoint_wait(sp_flink_t *fl, const char *job_id, const char *trigger_id, int64_t timeout_ms,
                                    sp_flink_operation_t *op, sp_error_t *err);

/**
 * Before a stop-with-savepoint with a trigger ID the caller chose: Flink
 * keeps savepoints and stops in one cache keyed by (job, trigger ID), and
 * answers a stop whose trigger ID an earlier savepoint used with that
 * savepoint's result, without stopping the job.  *reused is set when the
 * cluster holds a completed savepoint under trigger_id while the job is
 * RUNNING (a completed stop would have ended it); *location (malloc'd)
 * names that savepoint.  An unknown trigger ID (404) or one in progress is
 * not reused (sp_flink_wait_stopped() catches the latter afterwards).
 * Errors: SP_ERR_INVALID (bad IDs), SP_ERR_REST, SP_ERR_NOT_FOUND (the job).
 */
sp_status_t sp_flink_stop_trigger_reused(sp_flink_t *fl, const char *job_id, const char *trigger_id, bool *reused,
                                         char **location, sp_error_t *err);

/** The bound of sp_flink_wait_stopped() when none is given: 30 s. */
#define SP_FLINK_STOP_CONFIRM_MS 30000

/**
 * After a stop-with-savepoint reported its savepoint COMPLETED: wait until
 * the job has ended (FINISHED, or another final state; a job the cluster no
 * longer knows counts as ended, with state ""), polling GET /jobs/:id for
 * up to timeout_ms (<= 0: SP_FLINK_STOP_CONFIRM_MS).  state gets the last
 * state seen.  A job still RUNNING then was not stopped (the trigger ID
 * belonged to an earlier savepoint: sp_flink_stop_trigger_reused()).
 * Errors: SP_ERR_REST on timeout ("timed out after 30 s waiting for job J
 * to end after its stop-with-savepoint completed (job RUNNING)"; state is
 * non-empty) or when the cluster cannot be asked (state "").
 */
sp_status_t sp_flink_wait_stopped(sp_flink_t *fl, const char *job_id, int64_t timeout_ms, char state[24],
                                  sp_error_t *err);

void sp_flink_operation_free(sp_flink_operation_t *op);

/**
 * Check that a savepoint location Flink reported is a readable snapshot
 * (its `_metadata` opens and decodes).  Errors: those of sp_snapshot_open(),
 * with a message naming the location.
 */
sp_status_t sp_flink_check_location(const char *location, sp_error_t *err);

/* ---- jobs ---- */

typedef struct sp_flink_job {
    char id[33];
    char *name;
    char state[24];           /* RUNNING, FINISHED, ... */
    int64_t start_time_ms, end_time_ms, duration_ms;
    int tasks_total, tasks_running;
} sp_flink_job_t;

/** Every job the cluster knows (GET /jobs/overview).  Errors: SP_ERR_REST, SP_ERR_NOMEM. */
sp_status_t sp_flink_jobs(sp_flink_t *fl, sp_flink_job_t **jobs, size_t *n, sp_error_t *err);
void sp_flink_jobs_free(sp_flink_job_t *jobs, size_t n);

/**
 * A job's state (GET /jobs/:id).  Errors: SP_ERR_NOT_FOUND (the cluster does
 * not know the job), SP_ERR_REST.
 */
sp_status_t sp_flink_job_state(sp_flink_t *fl, const char *job_id, char state[24], sp_error_t *err);

/** The job's root exception, readable (*summary) and in full (*trace); NULLs when there is none. */
sp_status_t sp_flink_job_exception(sp_flink_t *fl, const char *job_id, char **summary, char **trace, sp_error_t *err);

/**
 * Wait until the job is RUNNING (and all its tasks run) or reaches a final
 * state, up to timeout_ms (<= 0: no limit).  state gets the last state.
 * Errors: SP_ERR_REST when the job failed / was cancelled / finished before
 * running (the root exception is in the message), or on timeout ("timed
 * out after 60 s waiting for job J to run (job CREATED, 0 of 2 tasks
 * running)").
 */
sp_status_t sp_flink_wait_running(sp_flink_t *fl, const char *job_id, int64_t timeout_ms, char state[24],
                                  sp_error_t *err);

/* ---- checkpoints (section 4.7) ---- */

typedef struct sp_flink_checkpoints {
    bool enabled;                  /* false: checkpointing is not enabled for the job (404) */
    bool has_restored;             /* latest.restored is set */
    int64_t restored_id;
    bool restored_is_savepoint;    /* false after a CLAIM restore (the snapshot became one of the job's checkpoints) */
    char *restored_path;
    int64_t latest_completed_id;   /* newest completed non-savepoint checkpoint, -1 when none */
    char *latest_completed_path;
    int64_t latest_savepoint_id;   /* newest completed savepoint, -1 when none */
    char *latest_savepoint_path;
} sp_flink_checkpoints_t;

/** GET /jobs/:id/checkpoints.  Errors: SP_ERR_NOT_FOUND (unknown job), SP_ERR_REST. */
sp_status_t sp_flink_checkpoints(sp_flink_t *fl, const char *job_id, sp_flink_checkpoints_t *out, sp_error_t *err);
void sp_flink_checkpoints_free(sp_flink_checkpoints_t *c);

/**
 * Whether two snapshot paths name the same snapshot: schemes "file:" /
 * "file://" / none, a trailing "/_metadata" and trailing slashes are ignored.
 */
bool sp_flink_same_path(const char *a, const char *b);

/* ---- jars and restore (sections 4.10, 4.12) ---- */

/**
 * Upload a jar (multipart POST /jars/upload); *jar_id (malloc'd) is what
 * /jars/:id/run takes.  The upload is bounded by stalls (60 s without a
 * byte) and by the client's total_timeout_ms.
 */
sp_status_t sp_flink_jar_upload(sp_flink_t *fl, const char *path, char **jar_id, sp_error_t *err);

/**
 * Delete an uploaded jar (DELETE /jars/:jarid), e.g. once its job was
 * submitted: a session cluster keeps every upload until deleted.
 * Errors: SP_ERR_INVALID (not a jar ID), SP_ERR_REST.
 */
sp_status_t sp_flink_jar_delete(sp_flink_t *fl, const char *jar_id, sp_error_t *err);

typedef enum sp_flink_claim_mode {
    SP_CLAIM_NO_CLAIM = 0,  /* Flink's default */
    SP_CLAIM_CLAIM = 1,
    SP_CLAIM_LEGACY = 2     /* deprecated since Flink 1.19 */
} sp_flink_claim_mode_t;

/** "NO_CLAIM", "CLAIM", "LEGACY". */
const char *sp_flink_claim_mode_name(sp_flink_claim_mode_t m);
/** Parse a claim mode, any case ("no_claim", "Claim"); false when unknown. */
bool sp_flink_claim_mode_parse(const char *s, sp_flink_claim_mode_t *out);

typedef struct sp_flink_run_request {
    const char *savepoint_path;   /* the snapshot to restore (NULL: a fresh start) */
    sp_flink_claim_mode_t claim_mode;
    bool allow_non_restored_state;
    const char *entry_class;      /* NULL: the jar's manifest */
    int parallelism;              /* <= 0: the cluster default */
    const char *const *args;      /* program arguments (programArgsList) */
    size_t n_args;
    const char *job_id;           /* fixed job ID (32 hex); NULL: Flink picks one.  With it a retried
                                     submission is recognised instead of starting a second job. */
} sp_flink_run_request_t;

/**
 * The body POST /jars/:id/run gets for version v (malloc'd JSON), or NULL
 * with *err when the version cannot express the request (claim modes before
 * 1.15).
 */
char *sp_flink_run_body(const sp_flink_version_t *v, const sp_flink_run_request_t *req, sp_error_t *err);

/**
 * Submit the jar's job (POST /jars/:jar_id/run); job_id_out gets its ID.
 * Errors: SP_ERR_INVALID (as sp_flink_run_body), SP_ERR_REST (400 "Could
 * not execute application." with the root cause, e.g. a missing savepoint).
 * *rejected (NULL allowed) tells the two kinds of SP_ERR_REST apart: true
 * when the cluster answered with an error (it did not take the job), false
 * when the request got no answer (a timeout, a lost connection): the
 * cluster may then still start the job.  With a fixed req->job_id that job
 * is asked for once after such a failure, and a job that exists is SP_OK.
 */
sp_status_t sp_flink_jar_run(sp_flink_t *fl, const char *jar_id, const sp_flink_run_request_t *req,
                             char job_id_out[33], bool *rejected, sp_error_t *err);

/* ---- is a NO_CLAIM snapshot released? (section 8) ---- */

/**
 * Whether the restored job `job_id` no longer needs the snapshot it was
 * restored from in NO_CLAIM mode: it completed a checkpoint (not a
 * savepoint) with an ID above the restored one.  snapshot_id: the
 * snapshot's checkpoint ID when known (else -1: the job's latest.restored
 * is used).  *checkpoint_id gets the newest completed checkpoint (-1 none).
 * Returns SP_OK with *released set; errors: SP_ERR_NOT_FOUND (the cluster
 * does not know the job), SP_ERR_REST.
 */
sp_status_t sp_flink_released(sp_flink_t *fl, const char *job_id, int64_t snapshot_id, bool *released,
                              int64_t *checkpoint_id, sp_error_t *err);

/**
 * Poll sp_flink_released() every second until released or timeout_ms (<= 0:
 * no limit).  Errors: those of sp_flink_released(); SP_ERR_REST when the job
 * ended first, or on timeout ("timed out after 60 s waiting for job J to
 * complete a checkpoint above 17 (job RUNNING, last completed checkpoint
 * 16); until it does, the job still needs the snapshot").
 */
sp_status_t sp_flink_wait_released(sp_flink_t *fl, const char *job_id, int64_t snapshot_id, int64_t timeout_ms,
                                   int64_t *checkpoint_id, sp_error_t *err);

/**
 * An sp_record_query_fn (see sp_record.h) answering from this cluster:
 * user is an sp_flink_t *.  Fills q->released for NO_CLAIM restores and
 * q->checkpoint_path with the restored job's newest completed checkpoint.
 */
void sp_flink_record_query(void *user, sp_record_query_t *q);

#ifdef __cplusplus
}
#endif
#endif
