/*
 * sp_relocate.h - copy or move a snapshot to another location so that the
 * result is complete and self-contained (design.md sections 4, 7).
 *
 * Every file the metadata references is copied: relative files keep their
 * relative place; absolute references into the source directory, and files
 * gathered from outside it (a checkpoint's shared/ and taskowned/ files,
 * entropy-injected paths), are placed in the destination and their handles
 * rewritten as relative ones (tag 2 FileStateHandle -> tag 6
 * RelativeFileStateHandle, as Flink 1.11+ writes for exclusive files), so the
 * copy is relocatable.  Metadata versions 0-2 (Flink <= 1.10) have no
 * relative handle: there absolute references are rewritten to the
 * destination's absolute path.  The new `_metadata` keeps the version.
 *
 * Safety: the source is untouched until the destination is verified; a
 * directory destination carries a journal (`.sp-relocate.json`) until the
 * end and gets `_metadata` last, so an interrupted run leaves something that
 * is clearly incomplete and that the same command finishes; an archive
 * destination is written under a temporary name and renamed into place.
 */
#ifndef SP_RELOCATE_H
#define SP_RELOCATE_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_record.h"
#include "sp_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Name of the journal a directory destination carries while a relocation runs. */
#define SP_RELOCATE_JOURNAL ".sp-relocate.json"

/** Options of sp_relocate_plan() / sp_relocate_run(). */
typedef struct sp_relocate_options {
    bool move;                 /* delete the source's own files after the destination verified */
    bool checksum;             /* compare every copied byte, not only sizes */
    bool include_unreferenced; /* also copy files in the source directory that no handle references */
    int jobs;                  /* parallel copies (<= 0: 8) */
    int zstd_threads;          /* archive destinations: zstd workers (0 = one per core) */
    /* progress: called from the copying threads (serialised), bytes done / total */
    void (*progress)(uint64_t done, uint64_t total, void *user);
    void *progress_user;
    /* move: the source's ownership record is checked when planning (as sp_dispose does); force overrides
     * pins, NO_CLAIM and LEGACY refusals (never CLAIM); record_query optionally asks a cluster (sp_record.h) */
    bool force;
    sp_record_query_fn record_query;
    void *record_query_user;
} sp_relocate_options_t;

/** One file of the plan. */
typedef struct sp_relocate_file {
    char *src_key;            /* key in the source store (or the local store for external files) */
    bool src_local;           /* src_key is in snap->local (an absolute reference) rather than snap->store */
    char *dst_rel;            /* path relative to the destination directory */
    int64_t size;             /* bytes (from the metadata, or stat when it records none) */
    bool external;            /* gathered from outside the source directory */
    bool unreferenced;        /* copied because of include_unreferenced */
    uint32_t references;      /* handles that point at it */
} sp_relocate_file_t;

/** The plan: what will be copied and which handles rewritten. */
typedef struct sp_relocate_plan {
    char *dst_display;        /* destination as given */
    uint32_t n_files;
    sp_relocate_file_t *files;
    uint64_t total_bytes;
    uint64_t rewrites;        /* handles whose stored path changes */
    uint32_t n_unreferenced;  /* files in the source directory no handle references */
    char **unreferenced;      /* their keys */
    bool archive;             /* destination is an archive */
    bool rename_whole;        /* --move on one local file system: the directory is renamed */
    bool resume;              /* the destination holds a journal of an earlier run of the same relocation */
    bool complete;            /* the destination already holds exactly this relocation, verified (resume is set too) */
    void *priv_;
    char *record_warning;     /* move: what force overrode in the source's ownership record (NULL: nothing) */
} sp_relocate_plan_t;

/**
 * Work out the plan for relocating `snap` to `dst` (a local directory, or
 * an S3 prefix "s3://bucket/prefix", that must not exist yet (S3: no object
 * under it), unless it holds the journal of an unfinished run of the same
 * relocation; or an archive path that must not exist).  An S3 snapshot's
 * files are copied from its own bucket (and local file: references); a
 * reference into another bucket is SP_ERR_INVALID.  Within one S3 endpoint
 * the objects are copied by the server.  Nothing is written.
 * Errors: SP_ERR_REFUSED (destination exists, or lies inside the source),
 * SP_ERR_INVALID (unsupported reference scheme or destination), SP_ERR_IO,
 * SP_ERR_NOT_FOUND (a referenced file is missing: verify first), SP_ERR_NOMEM.
 */
sp_status_t sp_relocate_plan(sp_snapshot_t *snap, const char *dst, const sp_relocate_options_t *opts,
                             sp_relocate_plan_t *plan, sp_error_t *err);

/** Result of a run. */
typedef struct sp_relocate_result {
    uint64_t files_copied, files_skipped; /* skipped: already complete from an earlier run */
    uint64_t bytes_copied;                /* bytes of the files copied by this run (not the skipped ones) */
    bool source_deleted;                  /* --move finished */
    char *metadata_location;              /* the new _metadata */
} sp_relocate_result_t;

/**
 * Carry out a plan: copy, write the new metadata, verify the destination,
 * and with opts->move dispose of the source's own files.  `snap` must be the
 * snapshot the plan was made for; its model is rewritten in memory.
 * Errors: SP_ERR_IO (with err->file), SP_ERR_REFUSED, SP_ERR_MALFORMED (the
 * destination does not verify), SP_ERR_NOMEM.
 */
sp_status_t sp_relocate_run(sp_snapshot_t *snap, sp_relocate_plan_t *plan, const sp_relocate_options_t *opts,
                            sp_relocate_result_t *result, sp_error_t *err);

/**
 * Finish an `sp relocate --move SRC DST` that was killed after the copy was
 * verified and the source's deletion had begun, when `_metadata` of SRC is
 * already gone (so SRC no longer opens as a snapshot): the dispose journal in
 * SRC names the destination it was moved to.  DST must be that destination
 * (compared by real path); it is verified again, then the deletion of SRC is
 * finished from its journal (or, when the journal is gone too and SRC holds
 * nothing but sp's temporary files, SRC is removed once DST verifies).
 * `force` is what --force was: the source's ownership record is consulted
 * again only in that last case (a journal means the check was passed).
 * result->files_* stay 0; source_deleted and
 * metadata_location are set.  Local source directories only.
 * Errors: SP_ERR_NOT_FOUND (SRC holds no journal of an interrupted move),
 * SP_ERR_REFUSED (the journal names another destination), the errors of
 * sp_verify (the destination does not verify: nothing more is deleted) and
 * of sp_dispose.
 */
sp_status_t sp_relocate_resume_move(const char *src, const char *dst, bool force, sp_relocate_result_t *result,
                                    sp_error_t *err);

/** Free a plan / result (NULL allowed). */
void sp_relocate_plan_free(sp_relocate_plan_t *plan);
void sp_relocate_result_free(sp_relocate_result_t *r);

#ifdef __cplusplus
}
#endif
#endif
