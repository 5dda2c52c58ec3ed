/*
 * sp_inspect.h - what `sp inspect` shows: per-operator totals, reference
 * counts by kind, savepoint vs checkpoint, canonical vs native, and whether
 * a plain copy of the directory would be a working snapshot (relocatable).
 */
#ifndef SP_INSPECT_H
#define SP_INSPECT_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Totals of one operator (index into snap->meta->operators). */
typedef struct sp_op_summary {
    uint32_t subtasks_with_state; /* subtasks with at least one state handle (finished ones excluded) */
    uint32_t finished_subtasks;   /* subtasks stored as finished (V3+) */
    uint64_t state_bytes;         /* recorded bytes of every file reference + inline bytes */
    uint64_t inline_bytes;        /* bytes stored in _metadata itself */
    uint64_t file_refs;           /* file references (relative + absolute + segment) */
} sp_op_summary_t;

/** Where the snapshot kind / format was learned from. */
typedef enum sp_kind_source {
    SP_KIND_FROM_NONE = 0,      /* nothing tells */
    SP_KIND_FROM_PROPERTIES,    /* the V4+ properties trailer: authoritative */
    SP_KIND_FROM_HANDLES,       /* state handle types (e.g. tag 7 is written only into savepoints) */
    SP_KIND_FROM_DIRECTORY      /* directory name (chk-N / savepoint-...), a hint only */
} sp_kind_source_t;

/** Summary of a snapshot. */
typedef struct sp_summary {
    sp_snapshot_kind_t kind;
    sp_savepoint_format_t format;
    sp_kind_source_t kind_source;
    sp_kind_source_t format_source;
    uint32_t n_operators;
    sp_op_summary_t *operators;   /* n_operators entries, same order as the model */
    uint64_t ref_count[5];        /* by sp_ref_kind_t */
    uint64_t ref_bytes[5];        /* recorded bytes by sp_ref_kind_t (unknown sizes count 0) */
    uint64_t total_state_bytes;
    uint64_t channel_state_handles;
    bool relocatable;             /* every reference is relative or inline */
    uint64_t blockers;            /* references that stop a plain copy (absolute, segment, directory) */
} sp_summary_t;

/**
 * Summarise an opened snapshot into *out (free with sp_summary_free).
 * Errors: SP_ERR_NOMEM.
 */
sp_status_t sp_summarize(const sp_snapshot_t *snap, sp_summary_t *out, sp_error_t *err);

/** Free what sp_summarize() allocated (NULL allowed). */
void sp_summary_free(sp_summary_t *s);

/** "checkpoint", "savepoint" or "unknown". */
const char *sp_kind_name(sp_snapshot_kind_t k);
/** "canonical", "native" or "unknown". */
const char *sp_format_name(sp_savepoint_format_t f);
/** Stable tokens: "properties", "state_handles", "directory_name" or "none". */
const char *sp_kind_source_name(sp_kind_source_t s);
/** "relative", "absolute", "segment", "inline", "directory". */
const char *sp_ref_kind_name(sp_ref_kind_t k);
/** Slot name in Flink terms: "managed_keyed_state", "coordinator_state", ... */
const char *sp_ref_slot_name(sp_ref_slot_t s);

#ifdef __cplusplus
}
#endif
#endif
