/*
 * sp_record.h - ownership records: a small JSON file beside a snapshot
 * (outside its directory, so Flink's own deletion of a claimed directory is
 * never blocked) that says who may delete it (design.md section 6).
 *
 *   /flink/savepoints/savepoint-3c7c0a-07c49f841952               the snapshot
 *   /flink/savepoints/savepoint-3c7c0a-07c49f841952.sp-record.json its record
 *
 * Contents (schema_version 1; every key but schema_version is optional):
 *   {"schema_version": 1, "snapshot": "savepoint-3c7c0a-07c49f841952",
 *    "created": {"by": "sp trigger|sp stop|sp status", "job_id": "32 hex", "trigger_id": "32 hex",
 *                "time_ms": N, "cluster": "http://host:8081", "flink_version": "1.20.1",
 *                "format": "CANONICAL|NATIVE", "drain": false, "location": "file:/..."},
 *    "pins": [{"reason": "...", "time_ms": 1764000000000, "by": "user"}],
 *    "restores": [{"job_id": "32 hex", "claim_mode": "CLAIM|NO_CLAIM|LEGACY", "time_ms": N,
 *                  "cluster": "http://host:8081", "flink_version": "2.0.0",
 *                  "snapshot_checkpoint_id": 7,
 *                  "released": {"checkpoint_id": 8, "time_ms": N}}]}
 * "cluster" never holds credentials (user:password@ is removed).  "released"
 * is written once the restored job (NO_CLAIM) completed a checkpoint with an
 * ID above snapshot_checkpoint_id.  Unknown keys are kept when the record is
 * rewritten; every rewrite is atomic (temporary file + rename).
 *
 * Rules (checked by dispose, prune and relocate --move):
 *   pinned                 -> refuse unless forced
 *   restored with CLAIM    -> refuse: Flink owns the snapshot now; only when
 *                             the cluster the restore was recorded on answers
 *                             that it does not know the job (its submission
 *                             failed, or it was forgotten), forced: allowed
 *   restored with NO_CLAIM -> allowed once the restored job completed a
 *                             checkpoint with a higher ID (the record says
 *                             "released", or the query callback finds it on
 *                             the cluster), or ended (CANCELED, FAILED,
 *                             FINISHED), or its cluster does not know it;
 *                             otherwise refuse unless forced
 *   restored with LEGACY   -> refuse while a newer snapshot found beside it
 *                             (sibling directories; for a chk-N, the other
 *                             jobs' chk-* under the same checkpoint root) or
 *                             the restored job's newest checkpoint (query
 *                             callback) references files inside it; forced:
 *                             allowed
 * A forced override is reported in a warning (sp_record_check_options_t).
 */
#ifndef SP_RECORD_H
#define SP_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Suffix of a record file, appended to the snapshot directory's path. */
#define SP_RECORD_SUFFIX ".sp-record.json"

/** What a record says, in short. */
typedef struct sp_record_summary {
    bool exists;
    uint32_t pins;
    uint32_t restores_claim, restores_no_claim, restores_legacy;
    char pin_reason[256];      /* reason of the newest pin ("" if none) */
} sp_record_summary_t;

/**
 * Read the record of the snapshot directory `dir` (a local path, or an S3
 * prefix "s3://bucket/prefix": its record is the object
 * "prefix.sp-record.json", read and written with the default S3
 * configuration).  A missing record is not an error (out->exists false).
 * Errors: SP_ERR_MALFORMED (not JSON / wrong shape; err->file is the record), SP_ERR_IO.
 */
sp_status_t sp_record_read(const char *dir, sp_record_summary_t *out, sp_error_t *err);

/**
 * Whether the snapshot at `dir` may be deleted under its record, without a
 * cluster to ask (sp_record_check_delete_ex() with only `force`).
 * Returns SP_OK, or SP_ERR_REFUSED with the reason in err->message.
 */
sp_status_t sp_record_check_delete(const char *dir, bool force, sp_error_t *err);

/**
 * Add a pin (reason may be NULL) or remove all pins, rewriting the record
 * atomically (created when missing).  time_ms: milliseconds since the epoch.
 * Errors: SP_ERR_NOT_FOUND (no such snapshot directory), SP_ERR_MALFORMED, SP_ERR_IO.
 */
sp_status_t sp_record_pin(const char *dir, const char *reason, const char *by, int64_t time_ms, sp_error_t *err);
sp_status_t sp_record_unpin(const char *dir, sp_error_t *err);

/* ---- the full record (sp trigger / stop / restore write it, sp inspect shows it) ---- */

/** Who created the snapshot (sp trigger / sp stop). */
typedef struct sp_record_origin {
    char by[16];               /* "sp trigger" or "sp stop"; "sp status" when the operation is unknown */
    char job_id[33];
    char trigger_id[33];
    int64_t time_ms;
    char cluster[256];         /* REST URL, without credentials */
    char flink_version[64];
    char format[12];           /* "CANONICAL" / "NATIVE" */
    bool drain;                /* stop --drain */
    char location[1024];       /* as Flink reported it */
} sp_record_origin_t;

/** One restore of the snapshot. */
typedef struct sp_record_restore {
    char job_id[33];
    char claim_mode[12];       /* "CLAIM", "NO_CLAIM", "LEGACY" */
    int64_t time_ms;
    char cluster[256];         /* "" when not recorded */
    char flink_version[64];
    int64_t snapshot_checkpoint_id;  /* the snapshot's checkpoint ID; -1 unknown */
    bool released;             /* NO_CLAIM: the job completed a later checkpoint */
    int64_t released_checkpoint_id;  /* that checkpoint (-1 unknown) */
    int64_t released_time_ms;
} sp_record_restore_t;

/** A whole record. */
typedef struct sp_record {
    bool exists;
    char *path;                /* the record file */
    sp_record_summary_t summary;
    bool has_origin;
    sp_record_origin_t origin;
    uint32_t n_restores;
    sp_record_restore_t *restores;
} sp_record_t;

/** The record file of snapshot directory `dir` (malloc'd: "<dir>.sp-record.json"). */
char *sp_record_path(const char *dir);

/**
 * Read the whole record of `dir` (a missing record: out->exists false).
 * Errors as sp_record_read().
 */
sp_status_t sp_record_load(const char *dir, sp_record_t *out, sp_error_t *err);
void sp_record_free(sp_record_t *r);

/** Set (replace) the "created" entry.  Errors as sp_record_pin(). */
sp_status_t sp_record_set_origin(const char *dir, const sp_record_origin_t *origin, sp_error_t *err);

/** Append a restore (an entry with the same job ID is replaced).  Errors as sp_record_pin(). */
sp_status_t sp_record_add_restore(const char *dir, const sp_record_restore_t *restore, sp_error_t *err);

/**
 * As sp_record_add_restore(), after sp_record_check_restore() of the same
 * record, both under one lock beside the record: of two restores of one
 * snapshot started at the same time, only one can claim it.  force turns a
 * refusal into SP_OK (the caller warns).  Errors: those of both functions.
 */
sp_status_t sp_record_add_restore_checked(const char *dir, const sp_record_restore_t *restore, bool force,
                                          sp_error_t *err);

/** Remove the restore of job_id (a submission that failed); no such entry is not an error. */
sp_status_t sp_record_remove_restore(const char *dir, const char *job_id, sp_error_t *err);

/** Mark the restore of job_id released at checkpoint_id.  Errors: SP_ERR_NOT_FOUND (no such restore), others as sp_record_pin(). */
sp_status_t sp_record_mark_released(const char *dir, const char *job_id, int64_t checkpoint_id, int64_t time_ms,
                                    sp_error_t *err);

/* ---- pending records: what an operation still in progress is ---- */

/*
 * A savepoint or stop that has not completed yet (sp trigger / sp stop
 * --detached, or a wait that timed out) has no snapshot directory to keep a
 * record beside.  What sp knows at trigger time (the command, the job, the
 * trigger ID, the format, drain) is kept in a pending record, a small JSON
 * file in a directory (the target directory, where the savepoint will
 * appear, or any other):
 *   <dir>/.sp-pending-<job_id>-<trigger_id>.json
 *   {"schema_version": 1, "pending": {the "created" entry's keys}}
 * Whoever sees the operation complete (sp status) writes the snapshot's
 * record from it and removes it.  Local directories only.
 */
#define SP_RECORD_PENDING_PREFIX ".sp-pending-"

/**
 * Write the pending record of o->job_id / o->trigger_id into dir (atomic;
 * an earlier one is replaced).  Errors: SP_ERR_NOT_FOUND (dir is not a local
 * directory), SP_ERR_INVALID (IDs), SP_ERR_IO.
 */
sp_status_t sp_record_pending_save(const char *dir, const sp_record_origin_t *o, sp_error_t *err);

/**
 * Read the pending record of job_id / trigger_id from dir: *found false
 * (and SP_OK) when there is none.  Errors: SP_ERR_MALFORMED, SP_ERR_IO.
 */
sp_status_t sp_record_pending_load(const char *dir, const char *job_id, const char *trigger_id,
                                   sp_record_origin_t *out, bool *found, sp_error_t *err);

/**
 * The directory for pending records that cannot go beside the savepoint (the
 * target directory is not local, or does not exist yet), from the values of
 * XDG_STATE_HOME and HOME the caller read (either may be NULL):
 * "$XDG_STATE_HOME/sp/pending", else "$HOME/.local/state/sp/pending".  With
 * create, the directory is made (mode 0700).  Errors: SP_ERR_NOT_FOUND (both
 * unset), SP_ERR_IO.
 */
sp_status_t sp_record_pending_user_dir(const char *xdg_state_home, const char *home, bool create, char *out, size_t n,
                                       sp_error_t *err);

/** Remove that pending record; none is not an error.  Errors: SP_ERR_IO. */
sp_status_t sp_record_pending_remove(const char *dir, const char *job_id, const char *trigger_id, sp_error_t *err);

/* ---- the delete check with a cluster ---- */

typedef enum sp_record_release {
    SP_RELEASE_UNKNOWN = 0,    /* cannot tell (no cluster, unreachable, job unknown to it) */
    SP_RELEASE_NOT_YET,        /* the job has not completed a later checkpoint */
    SP_RELEASE_RELEASED,       /* it has: the snapshot is no longer needed by it */
    SP_RELEASE_JOB_OVER,       /* the job is CANCELED/FAILED/FINISHED without a later checkpoint: it is over */
    SP_RELEASE_JOB_UNKNOWN     /* the recorded cluster answered 404: it does not know (any more) the job */
} sp_record_release_t;

/** A question about one restore, answered by a query callback (e.g. sp_flink_record_query). */
typedef struct sp_record_query {
    const sp_record_restore_t *restore; /* in */
    sp_record_release_t released;       /* out (NO_CLAIM); preset UNKNOWN */
    int64_t checkpoint_id;              /* out: the job's newest completed checkpoint, -1 unknown */
    char checkpoint_path[1024];         /* out: its path ("" unknown), used for LEGACY */
    char why[256];                      /* out: a short explanation ("cluster unreachable: ...") */
} sp_record_query_t;

typedef void (*sp_record_query_fn)(void *user, sp_record_query_t *q);

/** Options of sp_record_check_delete_ex(). */
typedef struct sp_record_check_options {
    bool force;                  /* override pins, NO_CLAIM and LEGACY refusals; CLAIM only when the
                                    cluster reports the job unknown (SP_RELEASE_JOB_UNKNOWN) */
    sp_record_query_fn query;    /* optional: asks the cluster about restores */
    void *query_user;
    char *warning;               /* optional out: what force overrode ("" when nothing) */
    size_t warning_size;
} sp_record_check_options_t;

/**
 * The delete check of the rules above.  Returns SP_OK (with a warning when
 * force overrode a refusal) or SP_ERR_REFUSED with the reason.
 */
sp_status_t sp_record_check_delete_ex(const char *dir, const sp_record_check_options_t *opts, sp_error_t *err);

/**
 * Whether a new restore in claim_mode ("CLAIM", ...) is allowed: not after a
 * CLAIM restore (Flink owns the snapshot and may have deleted it), and a
 * CLAIM restore not while an earlier job may still need the snapshot
 * (LEGACY, or NO_CLAIM not known to be released).  SP_ERR_REFUSED otherwise.
 */
sp_status_t sp_record_check_restore(const char *dir, const char *claim_mode, sp_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
