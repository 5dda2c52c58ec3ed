/*
 * sp_fs.h - small local file helpers with the project's safety rules:
 * writes go to a temporary name in the same directory and are renamed into
 * place, so a reader never sees a half-written file.
 */
#ifndef SP_FS_H
#define SP_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Write buf[0..len) to `path` atomically: write "<path>.sp-tmp-<pid>", fsync,
 * rename over `path`, fsync the directory.  With overwrite false an existing
 * `path` is left alone and SP_ERR_REFUSED is returned.
 * Errors: SP_ERR_IO (with err->file), SP_ERR_REFUSED.
 */
sp_status_t sp_fs_write_atomic(const char *path, const void *buf, size_t len, bool overwrite, sp_error_t *err);

/**
 * Read a whole file ("-" = standard input) into a malloc'd buffer with a NUL
 * after the last byte (*out, *len; free() it).
 * Errors: SP_ERR_NOT_FOUND, SP_ERR_IO, SP_ERR_NOMEM.
 */
sp_status_t sp_fs_read_all(const char *path, char **out, size_t *len, sp_error_t *err);

/**
 * Create the directory `path` and its missing parents (mode 0755), like
 * `mkdir -p`; an existing directory is fine.  Returns 0, or -1 with errno set
 * (ENAMETOOLONG for a path longer than 2 * PATH_MAX; what mkdir(2) sets).
 */
int sp_fs_mkdirs(const char *path);

/** sp_fs_mkdirs() of the directory that holds `path` (nothing for "/x" or "x"). */
int sp_fs_mkdirs_parent(const char *path);

#ifdef __cplusplus
}
#endif
#endif
