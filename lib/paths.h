/*
 * paths.h - path rules shared by relocate and dispose (internal).
 */
#ifndef SP_PATHS_H
#define SP_PATHS_H

#include <stdbool.h>

/* A temporary file that an sp process which no longer runs left behind:
 * "<name>.sp-tmp-<pid>[-<n>]" (store_local, store_archive, fs). */
bool sp_path_stale_temp(const char *name);

/* True when an absolute path has "." or ".." components (or "//"): such a
 * path is never taken to be inside a directory on the strength of its prefix. */
bool sp_path_has_dot_segments(const char *p);

#endif
