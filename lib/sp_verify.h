/*
 * sp_verify.h - is a snapshot complete?  Every referenced file exists with
 * the size the metadata records; no reference escapes the snapshot through a
 * symlink; absolute references are listed as external (and checked where
 * they are local files).
 */
#ifndef SP_VERIFY_H
#define SP_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What is wrong with one reference. */
typedef enum sp_problem {
    SP_PROBLEM_MISSING = 0,       /* the file does not exist */
    SP_PROBLEM_SIZE_MISMATCH,     /* exists, but its size differs from the recorded size */
    SP_PROBLEM_NOT_A_FILE,        /* a directory, device, ... */
    SP_PROBLEM_SYMLINK_ESCAPES,   /* a symlink that resolves outside the snapshot directory */
    SP_PROBLEM_UNREADABLE,        /* stat failed for another reason (permissions, I/O) */
    SP_PROBLEM_SEGMENT_BEYOND_EOF /* a file-merging segment ends after the end of its physical file */
} sp_problem_t;

/** One finding.  ref.path points into the snapshot's model. */
typedef struct sp_verify_item {
    sp_ref_t ref;
    sp_problem_t problem;         /* meaningful in `problems` only */
    int64_t actual_size;          /* -1 when unknown */
    bool checked;                 /* externals: whether a local file was checked */
} sp_verify_item_t;

/** A value in the metadata Flink would reject or mishandle at restore. */
typedef struct sp_metadata_problem {
    uint32_t operator_index;      /* index into meta->operators */
    int32_t subtask_index;        /* -1: the operator as a whole */
    char message[240];
} sp_metadata_problem_t;

/** Result of sp_verify(). */
typedef struct sp_verify_result {
    uint64_t files_checked;       /* file references looked at */
    uint64_t distinct_external;   /* distinct absolute paths */
    uint32_t n_problems;
    sp_verify_item_t *problems;
    uint32_t n_external;          /* absolute / segment / directory references, first occurrence of each path */
    sp_verify_item_t *external;
    uint32_t n_metadata_problems; /* from sp_verify_metadata() */
    sp_metadata_problem_t *metadata_problems;
} sp_verify_result_t;

/**
 * Check the metadata's own values against Flink's restore preconditions
 * (parallelism and max parallelism bounds, unique operator IDs, subtask
 * indices, key-group ranges, recorded sizes); findings are appended to
 * out->metadata_problems.  sp_verify() calls it.  Errors: SP_ERR_NOMEM.
 */
sp_status_t sp_verify_metadata(const sp_metadata_t *m, sp_verify_result_t *out, sp_error_t *err);

/**
 * Check every file reference of an opened snapshot against the local file
 * system.  A problem is not an error: the call returns SP_OK and fills
 * out->problems.  Errors: SP_ERR_NOMEM.
 */
sp_status_t sp_verify(const sp_snapshot_t *snap, sp_verify_result_t *out, sp_error_t *err);

/** Free what sp_verify() allocated (NULL allowed). */
void sp_verify_result_free(sp_verify_result_t *r);

/** A sentence fragment: "missing", "size mismatch", ... */
const char *sp_problem_name(sp_problem_t p);
/** A stable token for JSON: "missing", "size_mismatch", "not_a_file", "symlink_escapes", "unreadable", "segment_beyond_eof". */
const char *sp_problem_token(sp_problem_t p);

#ifdef __cplusplus
}
#endif
#endif
