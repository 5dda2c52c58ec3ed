/*
 * sp_prune.h - retention for the snapshots of a catalog (`sp prune`,
 * design.md sections 5 to 7): decide which to keep, then dispose of the rest
 * one by one with sp_dispose().
 *
 * Rules, applied per group:
 *  - A group is one job as the names tell it (sp_catalog_entry_t.job): the
 *    6-hex-digit prefix of savepoint-<6>-<12> names, or the full job ID of
 *    <job-id>/chk-N.  A job's savepoints and its retained checkpoints are
 *    therefore separate groups (a savepoint name carries only 6 digits of
 *    the ID, which can be shared by two jobs; it is not guessed which).
 *  - Entries whose job the names do not tell are kept, unless all_jobs is
 *    set: then they form one group "unknown" (as if they were one job).
 *  - In scope: readable (state OK) savepoints, plus checkpoints when
 *    include_checkpoints is set.  A snapshot whose kind is unknown (metadata
 *    before Flink 1.16 with no telling name or handles) is never in scope.
 *  - In a group, entries are ordered newest first by checkpoint ID, then
 *    modification time of `_metadata`.  The first keep_last are kept, and
 *    every entry younger than max_age_ms (when > 0).  Pinned entries count
 *    towards keep_last like any other.
 *  - The newest complete entry of a group (sp_verify finds no problem) is
 *    never disposed, so a group whose newest snapshots are damaged keeps a
 *    working one.
 *  - Pinned entries (ownership record) beyond the retention are skipped and
 *    reported; force does not override a pin (unpin it first).
 *  - Everything else in scope is disposed, oldest first.  The ownership
 *    record is checked again just before (a pin taken meanwhile wins), and
 *    sp_dispose() checks it too: CLAIM restores are always refused, NO_CLAIM
 *    and LEGACY restores unless force.  A failure is recorded in that
 *    decision and the others go on; the entry stays for the next run.
 *  - An interrupted dispose (state DISPOSING) is finished: its files are
 *    already partly deleted, so nothing can restore from it.
 *  - Relocations in progress (INCOMPLETE) and unreadable entries are kept.
 */
#ifndef SP_PRUNE_H
#define SP_PRUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_catalog.h"
#include "sp_error.h"
#include "sp_record.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Options of sp_prune_plan() and sp_prune_run(). */
typedef struct sp_prune_options {
    uint32_t keep_last;        /* newest entries kept per group; must be >= 1 */
    int64_t max_age_ms;        /* also keep entries younger than this (ms); 0 = no age rule */
    int64_t now_ms;            /* the current time, ms since the epoch (ages are measured from it) */
    bool include_checkpoints;  /* retained checkpoints are in scope too */
    bool all_jobs;             /* entries with no job in their names form one group "unknown" */
    bool force;                /* passed to sp_dispose: override NO_CLAIM / LEGACY refusals (never pins or CLAIM) */
    bool dry_run;              /* sp_prune_run() only plans each dispose (sp_dispose dry run) */
    /* optional: passed to sp_dispose (asks a Flink cluster about restores; sp_record.h) */
    sp_record_query_fn record_query;
    void *record_query_user;
} sp_prune_options_t;

/** Why an entry is kept or disposed. */
typedef enum sp_prune_reason {
    SP_PRUNE_KEEP_LAST = 0,        /* among the newest keep_last of its group */
    SP_PRUNE_KEEP_AGE,             /* younger than max_age_ms */
    SP_PRUNE_KEEP_NEWEST_COMPLETE, /* the newest complete entry of its group */
    SP_PRUNE_KEEP_PINNED,          /* beyond the retention, but pinned */
    SP_PRUNE_KEEP_OUT_OF_SCOPE,    /* a checkpoint without include_checkpoints, or the kind is unknown */
    SP_PRUNE_KEEP_NO_JOB,          /* the names do not tell the job (and not all_jobs) */
    SP_PRUNE_KEEP_STATE,           /* incomplete relocation, unreadable, or its record cannot be read */
    SP_PRUNE_DISPOSE_EXPIRED,      /* beyond the retention: disposed */
    SP_PRUNE_DISPOSE_RESUME,       /* an interrupted dispose: finished */
    SP_PRUNE_KEEP_REFERENCED       /* beyond the retention, but another snapshot under ROOT references its files */
} sp_prune_reason_t;

/** What happened to an entry to dispose, after sp_prune_run(). */
typedef enum sp_prune_outcome {
    SP_PRUNE_PLANNED = 0,   /* not run yet, or a dry run that would succeed */
    SP_PRUNE_DISPOSED,      /* deleted */
    SP_PRUNE_FAILED,        /* sp_dispose failed or refused (error); the entry is left for the next run */
    SP_PRUNE_SKIPPED_PINNED /* pinned between the scan and the dispose: left */
} sp_prune_outcome_t;

/** The decision about one catalog entry. */
typedef struct sp_prune_decision {
    uint32_t entry;            /* index into the catalog's entries */
    const char *group;         /* the group: the entry's job, "unknown", or NULL when not grouped (points into
                                  the catalog, or is a constant) */
    uint32_t rank;             /* 1 = newest of its group; 0 when not grouped */
    bool dispose;              /* dispose (reason DISPOSE_*) or keep */
    sp_prune_reason_t reason;
    sp_prune_outcome_t outcome;
    uint64_t bytes;            /* bytes deleted (or, dry run, to delete) */
    sp_error_t error;          /* outcome FAILED: why */
    char record_warning[256];  /* what force overrode in the ownership record ("" when nothing) */
} sp_prune_decision_t;

/** The plan: one decision per catalog entry, in catalog order. */
typedef struct sp_prune_plan {
    uint32_t n;
    sp_prune_decision_t *decisions;
    uint32_t to_dispose, pinned_skipped;
    uint32_t disposed, failed;  /* after sp_prune_run() */
    uint64_t bytes;             /* after sp_prune_run(): bytes deleted (or, dry run, to delete) */
} sp_prune_plan_t;

/**
 * Decide for every entry of `cat` under the rules above.  Reads nothing but
 * the files of each group's newest complete candidate (sp_verify of the
 * newest entries until one is complete; the result is stored in the
 * catalog entries).  Deletes nothing.
 * Errors: SP_ERR_INVALID (keep_last 0, max_age_ms < 0), SP_ERR_NOMEM.
 */
sp_status_t sp_prune_plan(sp_catalog_t *cat, const sp_prune_options_t *opts, sp_prune_plan_t *plan,
                          sp_error_t *err);

/**
 * Carry out a plan: sp_dispose() every decision marked dispose, oldest
 * first, recording each outcome; a failure does not stop the others.
 * Returns SP_OK when every dispose succeeded (or would, dry run); otherwise
 * the status of the first failure, with its error in *err (every failure is
 * also in its decision).
 */
sp_status_t sp_prune_run(const sp_catalog_t *cat, sp_prune_plan_t *plan, const sp_prune_options_t *opts,
                         sp_error_t *err);

/** Free a plan (NULL allowed). */
void sp_prune_plan_free(sp_prune_plan_t *plan);

/** A token for the reason: "keep-last", "max-age", "newest-complete", "pinned", "out-of-scope", "no-job",
 *  "state", "expired", "resume". */
const char *sp_prune_reason_name(sp_prune_reason_t r);

/** A token for the outcome: "planned", "disposed", "failed", "skipped-pinned". */
const char *sp_prune_outcome_name(sp_prune_outcome_t o);

#ifdef __cplusplus
}
#endif
#endif
