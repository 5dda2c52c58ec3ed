/*
 * sp_edit.h - metadata-only edits of a snapshot (`sp metadata edit`):
 * drop an operator's state, move an operator's state to the operator ID of
 * a new uid, rewrite the prefix of absolute references.  State files are
 * never rewritten; only `_metadata` changes.
 *
 *  - drop an operator: its OperatorState is removed from the metadata, as
 *    Flink's State Processor API (SavepointWriter.removeOperator) does; its
 *    files are no longer referenced (in place they stay where they are);
 *  - set a uid: the operator's state is given the operator ID Flink derives
 *    from the new uid (murmur3, sp_uid.h), which is what the State Processor
 *    API calls changing the operator identifier
 *    (SavepointWriter.changeOperatorIdentifier), without a batch job; in
 *    metadata V5+ the stored uid becomes the new uid (modified UTF-8) and the
 *    name is kept; inline coordinator state named after the old operator ID
 *    (as Flink names it) is renamed after the new one;
 *  - rewrite a prefix: every absolute reference (FileStateHandle, file-merging
 *    segment and directory paths) that starts with FROM, at a path boundary,
 *    starts with TO instead.
 *
 * Writing (sp_edit_write) either creates a new snapshot directory, which
 * shares no file that could change with the original (every file it
 * references inside the original directory is reflinked, hard-linked or
 * copied into it), or replaces `_metadata` in place, atomically, after
 * keeping the previous one beside the snapshot directory.  The original
 * metadata is never destroyed, and the result must pass sp_verify().
 */
#ifndef SP_EDIT_H
#define SP_EDIT_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_check.h"
#include "sp_snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Infix of the name under which an in-place edit keeps the previous metadata:
 *  "<snapshot directory>._metadata.sp-backup-<UTC time>" beside the directory. */
#define SP_EDIT_BACKUP_INFIX "._metadata.sp-backup-"

/** What an edit does. */
typedef enum sp_edit_kind {
    SP_EDIT_DROP_OPERATOR = 0,   /* text: "HEX" or "uid:U" */
    SP_EDIT_SET_UID,             /* text: "HEX=NEW" or "uid:OLD=NEW" (split at the first '=') */
    SP_EDIT_REWRITE_PREFIX       /* text: "FROM=TO" (split at the first '=') */
} sp_edit_kind_t;

/** One parsed edit.  Strings are owned by the edit (sp_edit_free). */
typedef struct sp_edit {
    sp_edit_kind_t kind;
    sp_opref_t target;           /* DROP_OPERATOR, SET_UID */
    const char *new_uid;         /* SET_UID: standard UTF-8 */
    const char *from, *to;       /* REWRITE_PREFIX */
    char *text_;                 /* owned copy of the text */
} sp_edit_t;

/**
 * Parse the argument of one edit option.
 * Errors: SP_ERR_INVALID (no '=', an empty side, a target that is neither
 * "HEX" nor "uid:U", an invalid new uid, a FROM that is empty), SP_ERR_NOMEM.
 */
sp_status_t sp_edit_parse(sp_edit_kind_t kind, const char *text, sp_edit_t *out, sp_error_t *err);

/** Free an edit's strings (NULL allowed). */
void sp_edit_free(sp_edit_t *e);

/** What one applied edit did. */
typedef struct sp_edit_outcome {
    uint8_t old_id[16];          /* DROP, SET_UID: the operator's ID before */
    uint8_t new_id[16];          /* SET_UID: its new ID */
    uint64_t state_bytes;        /* DROP, SET_UID: the operator's state bytes */
    uint32_t files;              /* DROP: file references no longer referenced */
    uint64_t rewritten;          /* REWRITE_PREFIX: references rewritten */
} sp_edit_outcome_t;

/**
 * Apply edits, in order, to the snapshot's model (snap->meta); nothing is
 * written.  outcomes (may be NULL) receives n entries.
 * Errors: SP_ERR_INVALID with err->field "edit[i]" (the operator named is not
 * in the snapshot; the new uid's operator ID is already used by another
 * operator; the new uid does not fit (65535 bytes); a prefix rewrite matches
 * no absolute reference, or turns one into a relative path), SP_ERR_NOMEM.
 * On error the model may be partly edited: close the snapshot.
 */
sp_status_t sp_edit_apply(sp_snapshot_t *snap, const sp_edit_t *edits, uint32_t n, sp_edit_outcome_t *outcomes,
                          sp_error_t *err);

/** How sp_edit_write() writes. */
typedef struct sp_edit_write_options {
    const char *output;          /* a new snapshot directory (must not exist); NULL with in_place */
    bool in_place;               /* replace _metadata where it is */
    bool no_hardlink;            /* output: never hard-link (reflink or copy) */
    int64_t now_ms;              /* in place: time for the backup name, ms since the epoch */
} sp_edit_write_options_t;

/** What sp_edit_write() did. */
typedef struct sp_edit_write_result {
    char *metadata_path;         /* the new _metadata */
    char *backup_path;           /* in place: where the previous _metadata is kept */
    uint64_t files_reflinked, files_hardlinked, files_copied;
    uint64_t bytes;              /* bytes of the files placed in the new directory */
    uint64_t external_refs;      /* output: absolute references outside the original directory, left as they are */
} sp_edit_write_result_t;

/**
 * Write the edited model of `snap` (after sp_edit_apply()).
 *
 * output: builds "<output>.sp-tmp-<pid>-<random>" beside `output` (the parent must
 * exist), places there every file the metadata references inside the
 * original directory (relative references, and absolute ones into that
 * directory, which are rewritten to point into `output`), by reflink, else
 * hard link (unless no_hardlink), else copy; writes `_metadata`; renames the
 * directory to `output` (never replacing anything) and verifies it.
 * Absolute references elsewhere (a checkpoint's shared/ files) are kept and
 * counted in external_refs.
 *
 * in_place (local directories only): the edited snapshot is verified before
 * anything is written; the current metadata file is copied (fsync'd) to
 * "<dir>._metadata.sp-backup-<UTC time>" (or beside a metadata file not
 * named _metadata), then the new metadata replaces the old one by rename.
 * Refused when the ownership record says Flink owns the snapshot (restored
 * with CLAIM).
 *
 * Errors: SP_ERR_REFUSED (output exists; the edited snapshot would not
 * verify, with the first problem named; a CLAIM-restored snapshot in place),
 * SP_ERR_INVALID (in place on an archive, an output that is not a local
 * directory, no output given), SP_ERR_NOT_FOUND (a referenced file is
 * missing, the output's parent directory does not exist), SP_ERR_IO
 * (err->file names the path),
 * SP_ERR_MALFORMED (the new metadata does not decode: a bug), SP_ERR_NOMEM.
 */
sp_status_t sp_edit_write(sp_snapshot_t *snap, const sp_edit_write_options_t *opts, sp_edit_write_result_t *res,
                          sp_error_t *err);

/** Free what sp_edit_write() allocated (NULL allowed). */
void sp_edit_write_result_free(sp_edit_write_result_t *r);

#ifdef __cplusplus
}
#endif
#endif
