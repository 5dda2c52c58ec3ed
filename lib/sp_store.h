/*
 * sp_store.h - one storage interface for every place a snapshot can live
 * (design.md section 4).  A store is one namespace of named byte objects:
 *
 *   local     the local file system; keys are absolute paths ("/flink/sp/_metadata")
 *   archive   a .tar or .tar.zst file; keys are entry names ("savepoint-1/_metadata")
 *   s3        one bucket; keys are object keys ("savepoints/sp-1/_metadata"; see sp_s3.h)
 *
 * Commands never look at the backend behind a store: they stat, list, read,
 * write (atomically), delete, and use rename / server-side copy where the
 * backend offers them.  Backends are modules behind sp_store_ops_t, in the
 * manner of libarchive's format modules.
 *
 * Rules every backend keeps:
 *  - a write becomes visible under its key only when committed, all at once
 *    (local: temporary name + rename; archive: the archive file is renamed
 *    into place when the store is finished; s3: one PUT / completed multipart);
 *    commit does not promise durability: sync() does (one syncfs for a whole
 *    relocation instead of an fsync per file);
 *  - delete never follows a symbolic link and never removes a directory
 *    that is not empty;
 *  - errors name the store location and key;
 *  - stat() of a missing key is SP_OK with exists == false;
 *  - commit() and abort() free the writer, also when commit fails;
 *  - readers and writers are closed before the store;
 *  - a scan callback's reader is valid only during the callback (close_read
 *    on it is a no-op); a non-zero return stops list()/scan() and is
 *    returned by them.
 */
#ifndef SP_STORE_H
#define SP_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sp_store sp_store_t;
typedef struct sp_store_reader sp_store_reader_t;
typedef struct sp_store_writer sp_store_writer_t;

/** What stat() and list() report about one key. */
typedef struct sp_store_stat {
    bool exists;
    bool is_dir;          /* a directory (local) or a common prefix */
    bool is_symlink;      /* the key itself is a symbolic link (not followed) */
    int64_t size;         /* bytes; -1 unknown */
    int64_t mtime_ms;     /* modification time, milliseconds since the epoch; 0 unknown */
    uint64_t device;      /* local only: st_dev, to tell when rename() can move a file */
} sp_store_stat_t;

/** One entry of a listing; key is relative to the listed prefix. */
typedef struct sp_store_entry {
    const char *key;
    sp_store_stat_t st;
} sp_store_entry_t;

/** Listing callback: return non-zero to stop (that value is returned by list). */
typedef int (*sp_store_list_cb)(const sp_store_entry_t *e, void *user);

/** Streaming callback for backends read in one pass (archives): the entry's bytes through `r`. */
typedef int (*sp_store_scan_cb)(const sp_store_entry_t *e, sp_store_reader_t *r, void *user);

/** The operations of a backend.  Optional ones are NULL when not offered. */
typedef struct sp_store_ops {
    const char *name; /* "local", "archive", "s3" */
    sp_status_t (*stat)(sp_store_t *s, const char *key, sp_store_stat_t *out, sp_error_t *err);
    /* every object below prefix (recursively), in no particular order */
    sp_status_t (*list)(sp_store_t *s, const char *prefix, sp_store_list_cb cb, void *user, sp_error_t *err);
    sp_status_t (*open_read)(sp_store_t *s, const char *key, sp_store_reader_t **out, sp_error_t *err);
    /* read up to n bytes; *got == 0 at the end */
    sp_status_t (*read)(sp_store_reader_t *r, void *buf, size_t n, size_t *got, sp_error_t *err);
    void (*close_read)(sp_store_reader_t *r);
    /* size_hint: expected bytes or -1 */
    sp_status_t (*open_write)(sp_store_t *s, const char *key, int64_t size_hint, sp_store_writer_t **out,
                              sp_error_t *err);
    sp_status_t (*write)(sp_store_writer_t *w, const void *buf, size_t n, sp_error_t *err);
    sp_status_t (*commit)(sp_store_writer_t *w, sp_error_t *err); /* makes the object visible; frees w */
    void (*abort)(sp_store_writer_t *w);                          /* discards; frees w */
    sp_status_t (*remove)(sp_store_t *s, const char *key, sp_error_t *err);     /* file / object; not found is OK */
    sp_status_t (*remove_dir)(sp_store_t *s, const char *key, sp_error_t *err); /* empty directory; optional */
    sp_status_t (*rename)(sp_store_t *s, const char *from, const char *to, sp_error_t *err); /* optional */
    /* copy within the store without moving bytes through sp (copy_file_range, CopyObject); optional */
    sp_status_t (*copy)(sp_store_t *s, const char *from, const char *to, sp_error_t *err);
    /* one pass over every object (archives); optional */
    sp_status_t (*scan)(sp_store_t *s, sp_store_scan_cb cb, void *user, sp_error_t *err);
    /* make committed objects durable (local: syncfs); optional */
    sp_status_t (*sync)(sp_store_t *s, const char *key, sp_error_t *err);
    /* make everything written visible (archives: close and rename into place); optional */
    sp_status_t (*finish)(sp_store_t *s, sp_error_t *err);
    void (*close)(sp_store_t *s);
    /* delete many files / objects (S3: DeleteObjects, 1000 keys a request); not found is OK; on error
       some may be deleted; optional (callers fall back to remove) */
    sp_status_t (*remove_many)(sp_store_t *s, const char *const *keys, size_t n, sp_error_t *err);
    /* server-side copy into this store from another store of the same backend (S3: another bucket on the
       same endpoint); SP_ERR_UNSUPPORTED when these two stores cannot, and the caller streams; optional */
    sp_status_t (*copy_from)(sp_store_t *dst, sp_store_t *src, const char *from, const char *to, sp_error_t *err);
} sp_store_ops_t;

/** A store instance: ops plus the backend's private state. */
struct sp_store {
    const sp_store_ops_t *ops;
    char *location;   /* what it was opened from, for messages ("/", "backup.tar.zst", "s3://bucket") */
    bool writable;
    void *impl;
};

/** Where a location names something: which store, and which key in it. */
typedef struct sp_location {
    enum { SP_LOC_LOCAL, SP_LOC_ARCHIVE, SP_LOC_S3 } kind;
    char *store_location; /* local: "/"; archive: the archive's local path; s3: "s3://bucket" */
    char *key;            /* local: absolute normalised path; archive: entry prefix ("" = root); s3: key prefix */
} sp_location_t;

/**
 * Parse a user-given location: "/path", "relative/path", "file:///path",
 * "file:/path", "x.tar", "x.tar.zst" (an archive; a path inside one is
 * "x.tar.zst//sub/dir"), "s3://bucket/prefix" (also s3a://, s3p://).
 * Relative local paths are made absolute against the current directory and
 * normalised ("." and ".." removed, no trailing '/').
 * Errors: SP_ERR_INVALID (empty, unknown scheme), SP_ERR_NOMEM.
 */
sp_status_t sp_location_parse(const char *text, sp_location_t *out, sp_error_t *err);
void sp_location_free(sp_location_t *loc);

/** The local file system store (a process-wide instance is fine; it has no state). */
sp_status_t sp_store_open_local(sp_store_t **out, sp_error_t *err);

/**
 * An archive store.  Reading: the archive must exist (.tar, or .tar.zst /
 * .tar.zstd / .tzst compressed with zstd, detected by content).  Writing
 * (create true): entries are written in the order given to a temporary file
 * beside `path`; finish() closes it and renames it to `path`, so an
 * interrupted write leaves no archive under that name.  zstd compression
 * uses `threads` worker threads (0 = one per core) when the name ends in
 * .zst / .zstd / .tzst.
 * Errors: SP_ERR_NOT_FOUND, SP_ERR_IO, SP_ERR_REFUSED (create over an existing file), SP_ERR_MALFORMED
 * (corrupt archive, an entry named with '..' or an absolute path), SP_ERR_INVALID, SP_ERR_NOMEM.
 */
sp_status_t sp_store_open_archive(const char *path, bool create, int threads, sp_store_t **out, sp_error_t *err);

/**
 * Open the store a parsed location lives in (for_write: archives are
 * created).  s3:// locations open the bucket's store with the default S3
 * configuration (sp_s3_set_default_config() in sp_s3.h).
 */
sp_status_t sp_store_open_location(const sp_location_t *loc, bool for_write, int threads, sp_store_t **out,
                                   sp_error_t *err);

/** Close a store (without finish(): an unfinished archive write is discarded).  NULL allowed. */
void sp_store_close(sp_store_t *s);

/** Read a whole object into a malloc'd buffer (*out, *len; free() it).  max: refuse objects larger than this. */
sp_status_t sp_store_read_all(sp_store_t *s, const char *key, size_t max, uint8_t **out, size_t *len,
                              sp_error_t *err);

/** Write a whole object atomically (open_write + write + commit). */
sp_status_t sp_store_write_all(sp_store_t *s, const char *key, const void *buf, size_t len, sp_error_t *err);

/**
 * Copy one object from (src, src_key) to (dst, dst_key): the backend's own
 * copy when src == dst and it has one (or copy_from, for two stores of one
 * backend that can copy between them), else a streamed read/write.
 * *bytes (may be NULL) receives the bytes copied.
 */
sp_status_t sp_store_copy(sp_store_t *src, const char *src_key, sp_store_t *dst, const char *dst_key,
                          uint64_t *bytes, sp_error_t *err);

/** True when the location's name says it is an archive (.tar, .tar.zst, .tar.zstd, .tzst). */
bool sp_is_archive_name(const char *path);

#ifdef __cplusplus
}
#endif
#endif
