/*
 * sp_properties.h - decode the V4+ `_metadata` trailer: a Java-serialized
 * org.apache.flink.runtime.checkpoint.CheckpointProperties (Flink 1.16 - 2.3),
 * for display only.  The trailer itself is always kept as opaque bytes in
 * sp_metadata_t; this decoder never changes it.  Pure, no I/O.
 *
 * Layout: shared/spec/metadata-format.md section 7 (Java Object
 * Serialization Stream Protocol, version 5).
 */
#ifndef SP_PROPERTIES_H
#define SP_PROPERTIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Snapshot kind recorded in the trailer. */
typedef enum sp_snapshot_kind {
    SP_KIND_UNKNOWN = 0,   /* no trailer (V0-V3), null trailer, or unrecognised class */
    SP_KIND_CHECKPOINT = 1,/* checkpointType is a CheckpointType */
    SP_KIND_SAVEPOINT = 2  /* checkpointType is a SavepointType */
} sp_snapshot_kind_t;

/** Savepoint format (SavepointFormatType). */
typedef enum sp_savepoint_format {
    SP_FORMAT_UNKNOWN = 0, SP_FORMAT_CANONICAL = 1, SP_FORMAT_NATIVE = 2
} sp_savepoint_format_t;

/** Decoded CheckpointProperties.  Strings are NUL-terminated copies (truncated to fit). */
typedef struct sp_properties {
    size_t length;               /* trailer bytes */
    bool is_null;                /* trailer is `AC ED 00 05 70` (Java null) */
    sp_snapshot_kind_t kind;
    char snapshot_name[64];      /* "Checkpoint", "Savepoint", "Suspend Savepoint", ... ("" if absent) */
    sp_savepoint_format_t format;/* savepoints only */
    char post_checkpoint_action[16]; /* "NONE", "SUSPEND", "TERMINATE" (savepoints; "" otherwise) */
    char sharing_files_strategy[24]; /* "FORWARD_BACKWARD", "FORWARD", "NO_SHARING" (checkpoints; "" otherwise) */
    bool forced, unclaimed;
    bool discard_subsumed, discard_finished, discard_cancelled, discard_failed, discard_suspended;
} sp_properties_t;

/**
 * Decode trailer bytes buf[0..len) (everything after the last operator state).
 * base_offset is the trailer's offset in the file, used in error offsets.
 * Errors: SP_ERR_MALFORMED (not a Java serialization stream, truncated, bytes
 * after the object, unexpected class shape; err->offset / err->field name where).
 */
sp_status_t sp_properties_decode(const uint8_t *buf, size_t len, uint64_t base_offset,
                                 sp_properties_t *out, sp_error_t *err);

/**
 * Encode *p as a V4+ trailer: a Java-serialized (stream version 5)
 * org.apache.flink.runtime.checkpoint.CheckpointProperties byte-identical to
 * what Flink 1.16 - 2.3 writes (serialVersionUIDs of spec section 7.2, class
 * shapes of Appendix A; later releases UNVERIFIED).  On success *out is a
 * malloc'd buffer the caller free()s and *out_len its size in bytes; on
 * failure *out is NULL and *out_len 0.
 *  - p->is_null: the 5-byte null trailer `AC ED 00 05 70` (nothing else read);
 *  - SP_KIND_CHECKPOINT: a CheckpointType with snapshot_name ("" means
 *    "Checkpoint") and sharing_files_strategy ("" means "FORWARD_BACKWARD");
 *    format and post_checkpoint_action are ignored;
 *  - SP_KIND_SAVEPOINT: a SavepointType with format, snapshot_name ("" means
 *    "Savepoint") and post_checkpoint_action ("" means "NONE");
 *    sharing_files_strategy is ignored;
 * plus the seven booleans in Flink's wire order (discardCancelled,
 * discardFailed, discardFinished, discardSubsumed, discardSuspended, forced,
 * unclaimed).  p->length is ignored.  The output of sp_properties_decode on a
 * Flink trailer encodes back to the same bytes.
 * Errors (err->field names the member):
 *  - SP_ERR_INVALID: p, out or out_len NULL; kind unknown and not is_null;
 *    a savepoint with format SP_FORMAT_UNKNOWN; a string not NUL-terminated
 *    or outside Flink's values (checkpoint snapshot_name "Checkpoint" /
 *    "Full Checkpoint"; sharing_files_strategy FORWARD_BACKWARD / FORWARD /
 *    NO_SHARING; savepoint snapshot_name "Savepoint" / "Suspend Savepoint" /
 *    "Terminate Savepoint"; post_checkpoint_action NONE / SUSPEND / TERMINATE);
 *  - SP_ERR_NOMEM: allocation failed.
 */
sp_status_t sp_properties_encode(const sp_properties_t *p, uint8_t **out, size_t *out_len, sp_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
