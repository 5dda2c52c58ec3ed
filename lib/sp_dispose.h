/*
 * sp_dispose.h - delete a snapshot safely, offline (design.md section 7).
 *
 * Unlike Flink's own dispose (which needs a cluster and deletes `_metadata`
 * first), sp writes a journal of what it will delete before deleting
 * anything, deletes the referenced data files first, `_metadata` last, then
 * the journal and the directory.  An interrupted dispose is finished by
 * running it again (the journal is found even after `_metadata` is gone).
 * It deletes only files the metadata references inside the snapshot
 * directory, never follows a symbolic link (a referenced symlink is removed,
 * its target is not), and touches nothing outside the directory unless
 * asked to (include_external).
 */
#ifndef SP_DISPOSE_H
#define SP_DISPOSE_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_record.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Name of the journal kept in the snapshot directory while a dispose runs. */
#define SP_DISPOSE_JOURNAL ".sp-dispose.json"

typedef struct sp_dispose_options {
    bool dry_run;              /* plan only */
    bool force;                /* override an ownership record's refusal (see sp record) */
    bool include_unreferenced; /* also delete files in the directory that no handle references */
    bool include_external;     /* also delete referenced files outside the directory (e.g. shared/) */
    /* optional: asks a Flink cluster about the record's restores (NO_CLAIM released? LEGACY job's newest
     * checkpoint), e.g. sp_flink_record_query with an sp_flink_t * (sp_record.h) */
    sp_record_query_fn record_query;
    void *record_query_user;
    /* set by sp relocate --move: the verified copy's location, written into the journal so that re-running
     * the relocation after an interruption (the source's _metadata may be gone by then) finishes the dispose */
    const char *moved_to;
} sp_dispose_options_t;

/** A path with its size, as reported by dispose. */
typedef struct sp_dispose_item {
    char *key;
    int64_t size;
} sp_dispose_item_t;

typedef struct sp_dispose_result {
    char *directory;            /* the snapshot directory (or archive) */
    bool resumed;               /* finished an earlier, interrupted dispose */
    bool directory_removed;
    uint32_t n_deleted;         /* deleted (or, dry run, to delete) in order; _metadata last */
    sp_dispose_item_t *deleted;
    uint32_t n_external;        /* referenced outside the directory: left (or deleted with include_external) */
    sp_dispose_item_t *external;
    uint32_t n_unreferenced;    /* in the directory but not referenced: left (or deleted when asked) */
    sp_dispose_item_t *unreferenced;
    uint64_t bytes;             /* bytes deleted (or to delete) */
    char *record_warning;       /* what force overrode in the ownership record (NULL when nothing) */
} sp_dispose_result_t;

/**
 * Dispose of the snapshot at `location` (a directory, its _metadata, an
 * archive file, or an S3 prefix "s3://bucket/prefix" or its _metadata
 * object: there the journal is the object prefix/.sp-dispose.json, data
 * objects are deleted with DeleteObjects (1000 keys a request), _metadata
 * after them, the journal last; --include-external deletes only objects of
 * the same bucket; result keys are "s3://bucket/key").  With a journal
 * present it resumes from it.
 * Errors: SP_ERR_REFUSED (an ownership record forbids it and not force; a
 * path leads through a symbolic link), SP_ERR_NOT_FOUND, SP_ERR_IO,
 * SP_ERR_MALFORMED (the metadata cannot be read and no journal exists),
 * SP_ERR_NOMEM.  On error, result lists what was already deleted.
 */
sp_status_t sp_dispose(const char *location, const sp_dispose_options_t *opts, sp_dispose_result_t *result,
                       sp_error_t *err);

void sp_dispose_result_free(sp_dispose_result_t *r);

/**
 * The destination an interrupted `sp relocate --move` copied the local
 * snapshot directory `location` to before it began deleting it: the
 * "moved_to" field of the directory's dispose journal.  Returns a malloc'ed
 * location (free it), or NULL when there is no such journal (no move was
 * interrupted there, or the location is not a local directory).
 */
char *sp_dispose_moved_to(const char *location);

#ifdef __cplusplus
}
#endif
#endif
