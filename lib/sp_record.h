/*
 * sp_record.h - ownership records: a small JSON file beside a snapshot
 * (outside its directory, so Flink's own deletion of a claimed directory is
 * never blocked) that says who may delete it (design.md section 6).
 *
 *   /flink/savepoints/savepoint-3c7c0a-07c49f841952               the snapshot
 *   /flink/savepoints/savepoint-3c7c0a-07c49f841952.sp-record.json its record
 *
 * Contents (schema_version 1):
 *   {"schema_version": 1, "snapshot": "savepoint-3c7c0a-07c49f841952",
 *    "pins": [{"reason": "...", "time_ms": 1764000000000, "by": "user"}],
 *    "restores": [{"job_id": "32 hex", "claim_mode": "CLAIM|NO_CLAIM|LEGACY", "time_ms": N}]}
 * Unknown keys are kept when the record is rewritten.
 *
 * Rules (checked by dispose, prune and relocate --move):
 *   pinned                 -> refuse unless forced
 *   restored with CLAIM    -> refuse, always: Flink owns the snapshot now
 *   restored with NO_CLAIM -> refuse unless forced (the restored job's first
 *                             checkpoint must have completed)
 *   restored with LEGACY   -> refuse unless forced (later checkpoints may
 *                             reference its files)
 */
#ifndef SP_RECORD_H
#define SP_RECORD_H

#include <stdbool.h>
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
 * Read the record of the snapshot directory `dir` (a local path).  A missing
 * record is not an error (out->exists false).
 * Errors: SP_ERR_MALFORMED (not JSON / wrong shape; err->file is the record), SP_ERR_IO.
 */
sp_status_t sp_record_read(const char *dir, sp_record_summary_t *out, sp_error_t *err);

/**
 * Whether the snapshot at `dir` may be deleted under its record.
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

#ifdef __cplusplus
}
#endif
#endif
