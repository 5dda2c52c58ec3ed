/*
 * sp_diff.h - what differs between two snapshots (`sp diff A B`): the
 * operators added, removed, changed (parallelism, max parallelism, state
 * bytes, state handles, uid, name) or moved to another operator ID with the
 * same state (what `sp metadata edit --set-uid` does), and the file
 * references found in only one of them.  Operators are matched by operator
 * ID, as Flink matches state to a job.  Useful to review an edit or what a
 * new job version changed.  Reads the two models only, no storage.
 */
#ifndef SP_DIFF_H
#define SP_DIFF_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How an operator differs. */
typedef enum sp_diff_kind {
    SP_DIFF_SAME = 0,     /* same operator ID, nothing differs */
    SP_DIFF_ADDED,        /* only in B */
    SP_DIFF_REMOVED,      /* only in A */
    SP_DIFF_CHANGED,      /* same operator ID, `changes` says what differs */
    SP_DIFF_MOVED         /* an operator of A only and one of B only with identical, non-empty state */
} sp_diff_kind_t;

/** Bits of sp_diff_op_t.changes. */
enum {
    SP_DIFF_PARALLELISM = 1u << 0,
    SP_DIFF_MAX_PARALLELISM = 1u << 1,
    SP_DIFF_STATE_BYTES = 1u << 2,   /* recorded bytes of its files + inline bytes */
    SP_DIFF_STATE = 1u << 3,         /* state handles differ (files, sizes, inline bytes, subtasks) */
    SP_DIFF_UID = 1u << 4,           /* stored uid (V5+) */
    SP_DIFF_NAME = 1u << 5,          /* stored name (V5+) */
    SP_DIFF_OPERATOR_ID = 1u << 6    /* MOVED: the operator ID */
};

/** One operator of A and/or B. */
typedef struct sp_diff_op {
    sp_diff_kind_t kind;
    int32_t a_index, b_index;        /* into a->meta->operators / b->meta->operators; -1 if absent */
    unsigned changes;                /* SP_DIFF_* bits (CHANGED, MOVED) */
    uint64_t a_state_bytes, b_state_bytes;
} sp_diff_op_t;

/** A file reference found a different number of times in A and in B. */
typedef struct sp_diff_ref {
    sp_ref_kind_t kind;              /* relative, absolute, segment (directories and inline are not listed) */
    sp_str_t path;                   /* as stored; points into the model of A (count_a > 0) or of B */
    int64_t size;                    /* recorded size (segment length) */
    int64_t segment_offset;
    uint32_t count_a, count_b;       /* handles with this reference in A and in B */
} sp_diff_ref_t;

/** Result of sp_diff(). */
typedef struct sp_diff_result {
    bool version_differs;            /* metadata version */
    bool checkpoint_id_differs;
    bool master_states_differ;       /* count, names or bytes of the master hook states */
    bool properties_differ;          /* the V4+ properties trailer (kind, format, ...) */
    uint32_t n_ops;                  /* every operator: A's in A's order (SAME, CHANGED, REMOVED, MOVED), then B's ADDED */
    sp_diff_op_t *ops;
    uint32_t same, added, removed, changed, moved;
    uint32_t n_refs;                 /* references whose count differs, A's first */
    sp_diff_ref_t *refs;
    uint64_t refs_only_a, refs_only_b; /* references in A and not B, in B and not A (with multiplicity) */
    bool identical;                  /* nothing above differs */
} sp_diff_result_t;

/**
 * Compare two opened snapshots.  The result points into both models: keep
 * both snapshots open while using it.
 * Errors: SP_ERR_NOMEM.
 */
sp_status_t sp_diff(const sp_snapshot_t *a, const sp_snapshot_t *b, sp_diff_result_t *out, sp_error_t *err);

/** Free what sp_diff() allocated (NULL allowed). */
void sp_diff_result_free(sp_diff_result_t *r);

/** Stable token of a kind for JSON: "same", "added", "removed", "changed", "moved". */
const char *sp_diff_kind_token(sp_diff_kind_t k);

#ifdef __cplusplus
}
#endif
#endif
