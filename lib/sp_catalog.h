/*
 * sp_catalog.h - find every snapshot under a local root directory (for
 * `sp list` and `sp prune`, design.md section 5).
 *
 * The walk never follows a symbolic link.  A directory holding `_metadata`,
 * `.sp-relocate.json` or `.sp-dispose.json` is one entry and is not
 * descended into; archives (.tar, .tar.zst, ...) are entries when `_metadata`
 * sits at their root.  Inside a job directory (a directory named by a
 * 32-hex-digit job ID, as Flink lays out <checkpoint-dir>/<job-id>/chk-N)
 * the `shared/` and `taskowned/` directories are skipped: they hold the
 * files of incremental checkpoints, never snapshots, and can be large.
 *
 * Flink 1.1 / 1.2 single-file savepoints (no `_metadata` name) are not
 * found by the walk; open them one at a time with sp_snapshot_open().
 *
 * An entry that cannot be opened is listed with its state and error rather
 * than failing the scan.
 */
#ifndef SP_CATALOG_H
#define SP_CATALOG_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_properties.h"
#include "sp_record.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What state an entry is in. */
typedef enum sp_catalog_state {
    SP_CATALOG_OK = 0,        /* _metadata decoded */
    SP_CATALOG_INCOMPLETE,    /* holds `.sp-relocate.json`: a relocation into it has not finished */
    SP_CATALOG_DISPOSING,     /* holds `.sp-dispose.json`: a dispose of it was interrupted */
    SP_CATALOG_UNREADABLE     /* _metadata cannot be read or decoded (see error) */
} sp_catalog_state_t;

/** Whether an entry's referenced files were checked (sp_verify). */
typedef enum sp_catalog_complete {
    SP_COMPLETE_UNCHECKED = 0, /* not verified (scan without verify, or not readable) */
    SP_COMPLETE_YES,           /* every referenced file exists with its recorded size */
    SP_COMPLETE_NO             /* sp_verify found problems (see problems) */
} sp_catalog_complete_t;

/**
 * One snapshot found under the root.  Strings are owned by the catalog.
 * Fields from the metadata (checkpoint_id ... total_state_bytes) are
 * meaningful only when has_metadata is true; an INCOMPLETE or DISPOSING
 * entry may still have them when its `_metadata` could be read.
 */
typedef struct sp_catalog_entry {
    char *location;               /* local path of the directory or archive (usable as SNAP) */
    const char *path;             /* location relative to the root ("." for the root itself); points into location */
    bool archive;                 /* an archive file rather than a directory */
    sp_catalog_state_t state;
    sp_error_t error;             /* why not OK (code SP_OK when state is OK) */
    bool has_metadata;
    int64_t checkpoint_id;
    sp_snapshot_kind_t kind;      /* from sp_summarize: properties, handles, or the directory name */
    sp_savepoint_format_t format;
    int32_t metadata_version;     /* 0..7; -1 when unknown */
    uint64_t total_state_bytes;   /* recorded bytes of every file reference plus inline bytes */
    uint64_t metadata_bytes;      /* size of _metadata itself */
    int64_t mtime_ms;             /* modification time of _metadata, ms since the epoch; else of the
                                     directory / archive file (unreadable entries, archives that record none) */
    char job[33];                 /* job from the names, "" when they do not tell: the 6 hex digits of
                                     savepoint-<6>-<12>, or the 32-hex job ID a chk-N directory sits in */
    sp_record_summary_t record;   /* the ownership record (record.exists false when there is none) */
    bool record_unreadable;       /* the record exists but cannot be read: treat as "keep" */
    sp_catalog_complete_t complete;
    uint32_t problems;            /* problems sp_verify found (complete == SP_COMPLETE_NO) */
} sp_catalog_entry_t;

/** Options of sp_catalog_scan(). */
typedef struct sp_catalog_options {
    bool verify;                  /* run sp_verify on every readable entry (stats every referenced file) */
} sp_catalog_options_t;

/** The result of a scan: entries sorted by location. */
typedef struct sp_catalog {
    char *root;                   /* the root as an absolute, normalised path */
    uint32_t n;
    sp_catalog_entry_t *entries;
} sp_catalog_t;

/**
 * Walk `root` (a local directory, a file:// URI, one archive file, or an
 * S3 prefix "s3://bucket/prefix": one recursive listing, every prefix that
 * holds `_metadata` or a journal is an entry, nothing below an entry is one,
 * a job's shared/ and taskowned/ are skipped; archives in S3 are not entries) and
 * fill *out (free with sp_catalog_free, also after an error).  opts may be
 * NULL (no verify).  Problems with single entries are recorded in the
 * entries, not returned.
 * Errors: SP_ERR_NOT_FOUND (no such root), SP_ERR_INVALID (the root is not
 * a directory or archive, or a remote location), SP_ERR_IO (the root cannot
 * be listed), SP_ERR_NOMEM.
 */
sp_status_t sp_catalog_scan(const char *root, const sp_catalog_options_t *opts, sp_catalog_t *out,
                            sp_error_t *err);

/**
 * Verify one entry now (reopen it and run sp_verify), setting e->complete
 * and e->problems.  An entry that is not OK is left SP_COMPLETE_UNCHECKED.
 * Errors: those of sp_snapshot_open (the entry changed since the scan), SP_ERR_NOMEM.
 */
sp_status_t sp_catalog_verify_entry(sp_catalog_entry_t *e, sp_error_t *err);

/** Free what sp_catalog_scan() allocated (NULL allowed). */
void sp_catalog_free(sp_catalog_t *c);

/** "ok", "incomplete", "disposing" or "unreadable". */
const char *sp_catalog_state_name(sp_catalog_state_t s);

/**
 * The job a snapshot's name tells: for a final path component (an archive
 * suffix removed) `savepoint-<6 hex>-<12 hex>` the 6 hex digits; for
 * `chk-<N>` whose parent directory is a 32-hex-digit job ID that ID.
 * Writes it to job[0..33) and returns true, or returns false.
 */
bool sp_catalog_job_from_path(const char *path, char job[33]);

#ifdef __cplusplus
}
#endif
#endif
