/*
 * sp_check.h - will a snapshot restore into a new job?  The restore rules
 * Flink applies when a job starts from a savepoint or retained checkpoint
 * (`flink run -s SNAP [-n]`), evaluated offline, for CI (design.md 5).
 *
 * Flink's rules, followed here (Checkpoints.loadAndValidateCheckpoint,
 * StateAssignmentOperation.checkParallelismPreconditions and
 * SchedulerBase.computeVertexParallelismStore, Flink 1.x and 2.x):
 *
 *  - every operator state in the snapshot is matched to the new job by
 *    operator ID: the ID Flink generates (the murmur3 hash of the uid, see
 *    sp_uid.h, or the hash of the graph position without a uid), and, when
 *    nothing has that ID, the user-defined alternative IDs (setUidHash);
 *  - an operator of the snapshot the new job does not have is skipped when
 *    it has no state; when it has state (a subtask with any keyed, operator
 *    or channel state handle, or operator-coordinator state), the restore
 *    fails ("Cannot map checkpoint/savepoint state for operator ... to the
 *    new program"), unless allowNonRestoredState (`-n`) is set: then the
 *    state is dropped without a word;
 *  - a matched operator whose new max parallelism was set explicitly must
 *    have the saved max parallelism ("Max parallelism mismatch"); when it
 *    was not set, Flink adopts the saved value;
 *  - a matched operator holding subtask states cannot restore at a
 *    parallelism above its saved max parallelism ("The maximum parallelism
 *    (M) of the restored state is lower than the configured parallelism");
 *  - a job vertex whose parallelism exceeds its own explicit max
 *    parallelism is rejected before any state is looked at;
 *  - operators stored as fully finished (Flink 1.14+) carry no subtask
 *    state: they are matched or skipped like any other and restore as
 *    finished.
 *
 * Not checked (they need more than operator IDs): state schema / serializer
 * compatibility, the finished-vertex topology rules of
 * VertexFinishedStateChecker, and channel-state rescaling of unaligned
 * checkpoints.
 */
#ifndef SP_CHECK_H
#define SP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* naming an operator: "32 hex" or "uid:U"                             */
/* ------------------------------------------------------------------ */

/** An operator named by the user: an operator ID, or a uid and its hash. */
typedef struct sp_opref {
    bool by_uid;           /* given as "uid:U" */
    const char *uid;       /* by_uid: the uid (standard UTF-8), pointing into the parsed text */
    uint8_t id[16];        /* the operator ID given, or the one Flink derives from the uid */
} sp_opref_t;

/**
 * Parse "HEX" (32 hex digits, an operator ID as Flink prints it) or
 * "uid:U" (a uid; its operator ID is computed as Flink does).  The result
 * points into `text`, which must outlive it.
 * Errors: SP_ERR_INVALID (neither form, an empty or invalid UTF-8 uid).
 */
sp_status_t sp_opref_parse(const char *text, sp_opref_t *out, sp_error_t *err);

/**
 * Index of the operator of `m` that `ref` names, or -1.  A uid names the
 * operator with the uid's operator ID; failing that (metadata V5+, which
 * stores uids), the operator whose stored uid is that uid (its ID was set
 * with setUidHash).
 */
int32_t sp_opref_find(const sp_metadata_t *m, const sp_opref_t *ref);

/**
 * Whether an operator has state in Flink's sense (OperatorState with
 * coordinator state, or a subtask whose OperatorSubtaskState.hasState():
 * any managed/raw operator or keyed state handle, input or output channel
 * state; Flink 1.1 task states and Flink <= 1.2 legacy handles count too).
 * Finished subtasks and fully finished operators hold none.
 */
bool sp_operator_has_state(const sp_metadata_t *m, const sp_operator_t *op);

/* ------------------------------------------------------------------ */
/* the new job                                                         */
/* ------------------------------------------------------------------ */

/** One operator of the new job. */
typedef struct sp_job_operator {
    char *uid;                /* the uid (standard UTF-8), NULL when given by operator ID only */
    uint8_t id[16];           /* operator ID Flink generates: murmur3 of the uid, or as given */
    bool has_uid_hash;        /* an alternative user-defined operator ID (setUidHash) */
    uint8_t uid_hash[16];
    int32_t parallelism;      /* -1: not known */
    int32_t max_parallelism;  /* -1: not set explicitly (Flink then adopts the saved value) */
    char *name;               /* display name or NULL (plan node, --like snapshot operator) */
    char *origin;             /* where it was described: "--uid", "job.json: operators[2]", ... */
} sp_job_operator_t;

/** The new job: its operators (by operator ID; each ID once). */
typedef struct sp_job {
    uint32_t n_operators;
    sp_job_operator_t *operators;
    bool from_plan;           /* some operators came from a Flink job plan (chain heads only) */
    uint32_t cap_;
} sp_job_t;

/** Start an empty job description. */
void sp_job_init(sp_job_t *job);

/** Free what a job description holds (NULL allowed); it is empty afterwards. */
void sp_job_free(sp_job_t *job);

/**
 * Add an operator (merging with one of the same operator ID: unknown
 * fields are filled in, the first uid and name are kept).  `op->uid`,
 * `name` and `origin` are copied.  A uid given without an ID is hashed
 * (pass has_id false); a uid given with an ID must hash to it.
 * Errors: SP_ERR_INVALID (empty / invalid UTF-8 uid, uid and ID disagree,
 * the same operator given twice with different parallelism or max
 * parallelism, parallelism or max parallelism out of Flink's range
 * 1..32768), SP_ERR_NOMEM.
 */
sp_status_t sp_job_add(sp_job_t *job, const char *uid, bool has_id, const uint8_t id[16], int32_t parallelism,
                       int32_t max_parallelism, const char *name, const char *origin, sp_error_t *err);

/**
 * Add the uids of a uids file: one uid per line; blank lines and lines
 * whose first non-blank character is '#' are skipped; spaces and tabs
 * around a uid are removed.  `file` names the file in errors and origins.
 * Errors: SP_ERR_INVALID (a line that is not valid UTF-8, with err->field
 * "line N"), SP_ERR_NOMEM.
 */
sp_status_t sp_job_parse_uids(sp_job_t *job, const char *text, size_t len, const char *file, sp_error_t *err);

/**
 * Add the operators of a job description in JSON:
 *   {"parallelism": N, "max_parallelism": N,          (optional defaults)
 *    "operators": [{"uid": "U"} | {"operator_id": "32 hex"},
 *                  optional "uid_hash": "32 hex" (setUidHash),
 *                  "parallelism": N, "max_parallelism": N, "name": "..."]}
 * Errors: SP_ERR_INVALID (not JSON, wrong shape, unknown key; err->file is
 * `file`, err->field the JSON path such as "operators[2].parallelism"),
 * SP_ERR_NOMEM.
 */
sp_status_t sp_job_parse_json(sp_job_t *job, const char *text, size_t len, const char *file, sp_error_t *err);

/**
 * Add the job vertices of a Flink job plan as the REST API returns it:
 * GET /jobs/:jobid/plan or POST /jars/:jarid/plan ({"plan": {"nodes":
 * [{"id", "parallelism", "description", ...}]}}, "plan" also as a JSON
 * string as Flink 1.15 typed it), the bare plan object, or GET /jobs/:jobid
 * (its "vertices" or "plan").  A node's ID is its JobVertexID, which Flink
 * derives from the chain's first operator: it is that operator's ID, and
 * the operators chained behind it are not visible in a plan.  Max
 * parallelism is not taken from a plan (whether it was set explicitly is not
 * recorded there).  Sets job->from_plan.
 * Errors: SP_ERR_INVALID (not JSON, no nodes, a node without a 32-hex id;
 * err->file, err->field), SP_ERR_NOMEM.
 */
sp_status_t sp_job_parse_plan(sp_job_t *job, const char *text, size_t len, const char *file, sp_error_t *err);

/**
 * Add the operators of another snapshot (`sp check --like SNAP2`, e.g. one
 * taken from the new job in staging): operator IDs, stored uids and names
 * (V5+), parallelism and max parallelism, the latter taken as set
 * explicitly (a snapshot records the max parallelism its job ran with).
 * Errors: SP_ERR_NOMEM, SP_ERR_INVALID (a value out of range).
 */
sp_status_t sp_job_add_snapshot(sp_job_t *job, const sp_metadata_t *m, const char *origin, sp_error_t *err);

/**
 * Give every operator without its own value the job-wide parallelism /
 * max parallelism (what env.setParallelism / env.setMaxParallelism do);
 * -1 leaves a value unknown.
 */
void sp_job_set_defaults(sp_job_t *job, int32_t parallelism, int32_t max_parallelism);

/* ------------------------------------------------------------------ */
/* the check                                                           */
/* ------------------------------------------------------------------ */

/** What happens to one operator at restore. */
typedef enum sp_check_verdict {
    SP_VERDICT_RESTORED = 0,            /* in the new job: its state (if any) is restored */
    SP_VERDICT_SKIPPED,                 /* not in the new job, no state: Flink skips it */
    SP_VERDICT_UNMAPPED,                /* not in the new job, has state: the restore fails */
    SP_VERDICT_DROPPED,                 /* not in the new job, has state, allowNonRestoredState: discarded */
    SP_VERDICT_SHADOWED,                /* in the new job, but its uid_hash operator's state is used instead */
    SP_VERDICT_MAX_PARALLELISM_MISMATCH,/* explicit new max parallelism differs from the saved one */
    SP_VERDICT_PARALLELISM_ABOVE_MAX,   /* new parallelism above the saved max parallelism */
    SP_VERDICT_INVALID_JOB,             /* new parallelism above the operator's own explicit max parallelism */
    SP_VERDICT_NEW                      /* only in the new job: starts with empty state */
} sp_check_verdict_t;

/** Options of sp_check(). */
typedef struct sp_check_options {
    bool allow_non_restored_state;      /* flink run -n / --allowNonRestoredState */
    uint32_t n_expect_dropped;          /* operators whose state may be dropped ("HEX" or "uid:U") */
    const char *const *expect_dropped;
} sp_check_options_t;

/** The verdict on one operator. */
typedef struct sp_check_item {
    sp_check_verdict_t verdict;
    bool ok;                  /* false: this item is a reason the check fails */
    int32_t operator_index;   /* index into the snapshot's operators; -1 for SP_VERDICT_NEW */
    int32_t job_index;        /* index into job->operators; -1 when not in the new job */
    uint8_t operator_id[16];
    char *uid;                /* uid to show (stored in the snapshot, V5+, else the one given), or NULL */
    bool uid_from_snapshot;   /* uid comes from the metadata */
    char *name;               /* operator name (V5+ snapshot, or job description), or NULL */
    bool by_uid_hash;         /* matched through the job operator's setUidHash ID */
    bool has_state;           /* sp_operator_has_state() */
    bool fully_finished;
    uint64_t state_bytes;     /* recorded bytes of its files plus inline bytes */
    int32_t saved_parallelism, saved_max_parallelism;  /* -1 for SP_VERDICT_NEW (and V0 max) */
    int32_t new_parallelism, new_max_parallelism;      /* -1: unknown / not set */
    bool expected_drop;       /* named by options.expect_dropped */
    char reason[1024];        /* one or more sentences: why this verdict */
} sp_check_item_t;

/** Result of sp_check(). */
typedef struct sp_check_result {
    bool restorable;          /* Flink would restore the job */
    bool ok;                  /* restorable, and every dropped state and expectation as expected: exit 0 */
    uint32_t n_items;         /* the snapshot's operators in metadata order, then new ones in job order */
    sp_check_item_t *items;
    uint32_t n_restored, n_skipped, n_dropped, n_new;
    uint64_t dropped_bytes;
    uint32_t n_failures;      /* reasons the check fails, one sentence each */
    char **failures;
    uint32_t n_hints;         /* suggestions: close uids, -n, plans hiding chained operators */
    char **hints;
} sp_check_result_t;

/**
 * Evaluate the restore of `snap` into `job` with Flink's rules (header
 * comment).  A failing restore is not an error: the call returns SP_OK with
 * out->restorable / out->ok false and each reason in out->failures.
 * Errors: SP_ERR_INVALID (the job has no operator, an expect_dropped entry
 * that is neither "HEX" nor "uid:U"), SP_ERR_NOMEM.
 */
sp_status_t sp_check(const sp_snapshot_t *snap, const sp_job_t *job, const sp_check_options_t *opts,
                     sp_check_result_t *out, sp_error_t *err);

/** Free what sp_check() allocated (NULL allowed). */
void sp_check_result_free(sp_check_result_t *r);

/** Stable token of a verdict for JSON: "restored", "skipped", "unmapped", "dropped", "shadowed",
 *  "max_parallelism_mismatch", "parallelism_above_max_parallelism", "invalid_job", "new". */
const char *sp_check_verdict_token(sp_check_verdict_t v);

#ifdef __cplusplus
}
#endif
#endif
