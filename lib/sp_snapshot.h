/*
 * sp_snapshot.h - open a snapshot location (a savepoint / checkpoint
 * directory, its `_metadata` file, a legacy single-file savepoint of Flink
 * 1.1 / 1.2, or a file:// URI) and read its metadata.
 *
 * Pointer resolution follows Flink's AbstractFsCheckpointStorageAccess
 * (metadata-format.md 9.3): a directory means <dir>/_metadata and the
 * directory is the "exclusive" directory that relative handles (tag 6)
 * resolve against; a file means its parent directory.
 */
#ifndef SP_SNAPSHOT_H
#define SP_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_metadata.h"
#include "sp_properties.h"
#include "sp_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An opened snapshot.  All fields are read-only for callers. */
typedef struct sp_snapshot {
    char *location;        /* as given by the caller */
    char *dir;             /* exclusive directory (relative references resolve here), no trailing '/' */
    char *metadata_path;   /* the metadata file that was read */
    const uint8_t *bytes;  /* the metadata file's bytes (the model points into them) */
    size_t size;           /* bytes in the metadata file */
    int64_t mtime_ms;      /* metadata file modification time, milliseconds since the epoch */
    sp_metadata_t *meta;   /* the decoded model */
    bool has_properties;   /* V4+ trailer decoded into `properties` */
    sp_properties_t properties;
    sp_store_t *store;     /* where the snapshot lives (local file system or an archive) */
    char *dir_key;         /* the exclusive directory as a key of `store` ("" = an archive's root) */
    sp_store_t *local;     /* the local file system, for absolute file: references */
    void *priv_;
} sp_snapshot_t;

/**
 * Open and decode the snapshot at `location`: a local directory or
 * `_metadata` file, a file:// URI, or an archive (x.tar, x.tar.zst, or a
 * folder inside one as "x.tar.zst//folder") whose root holds `_metadata`,
 * or an S3 prefix "s3://bucket/prefix" (also s3a://, s3p://) holding
 * `_metadata`, or a metadata object itself, read with the default S3
 * configuration (sp_s3.h; then dir is "s3://bucket/prefix", dir_key the
 * prefix and metadata_path "s3://bucket/prefix/_metadata").
 * A directory without `_metadata` that holds exactly one regular file
 * starting with the metadata magic (a Flink 1.1 / 1.2 single-file savepoint
 * kept in its own folder) is accepted too.
 * Besides decoding, every relative reference (tag 6) is checked: one that is
 * empty, absolute, or has a `..` component is rejected (design.md 7: such a
 * path is an error, not a path to follow).
 * flags: 0 or SP_OPEN_NO_PATH_CHECK.
 * Errors (err->file is the metadata path when known):
 *   SP_ERR_NOT_FOUND   no such file or directory / no _metadata in the directory
 *   SP_ERR_IO          the file cannot be read
 *   SP_ERR_MALFORMED, SP_ERR_UNSUPPORTED  from sp_meta_decode(), or a bad relative path
 *   SP_ERR_INVALID     a location scheme this build cannot read (hdfs://, ...)
 *   SP_ERR_NOMEM
 */
sp_status_t sp_snapshot_open(const char *location, unsigned flags, sp_snapshot_t **out, sp_error_t *err);

/** sp_snapshot_open() flag: skip the relative-path check (for `sp metadata export`, to repair such a file). */
#define SP_OPEN_NO_PATH_CHECK 1u

/** Close a snapshot and free everything it holds.  NULL is allowed. */
void sp_snapshot_close(sp_snapshot_t *snap);

/**
 * Where a file reference lives: the store (snap->store for relative
 * references, snap->local for absolute file: paths, the bucket's S3 store
 * for s3:// / s3a:// / s3p:// ones: snap->store when it is that bucket, else
 * one the snapshot opens on first use and closes with itself) and the key in
 * it, written to key[0..keysz).  Returns NULL when the reference has no file
 * (inline) or its scheme is not one this build reads (hdfs://, ...), the
 * bucket's store cannot be opened, or the key does not fit.
 */
sp_store_t *sp_snapshot_ref_location(const sp_snapshot_t *snap, const sp_ref_t *ref, char *key, size_t keysz);

/**
 * Resolve a reference's stored path into a local file system path in
 * out[0..outsz): relative -> "<dir>/<path>"; absolute / segment / directory
 * -> the stored path with a "file:" scheme removed.  Returns false when the
 * path is not local (another scheme such as s3://) or does not fit, or the
 * reference has no path (inline).
 */
bool sp_snapshot_local_path(const sp_snapshot_t *snap, const sp_ref_t *ref, char *out, size_t outsz);

/**
 * Check a relative path as stored in a tag-6 handle: not empty, not
 * absolute, no scheme, no "." or ".." component, no NUL byte.  Returns NULL
 * when fine, else a constant description of the problem.
 */
const char *sp_relative_path_problem(const uint8_t *path, size_t len);

#ifdef __cplusplus
}
#endif
#endif
