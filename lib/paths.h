/*
 * paths.h - path rules and the path list shared by relocate and dispose
 * (internal).
 */
#ifndef SP_PATHS_H
#define SP_PATHS_H

#include <stdbool.h>
#include <stdint.h>

#include "sp_dispose.h"

/* A temporary file that an sp process which no longer runs left behind:
 * "<name>.sp-tmp-<pid>[-<n>]" (store_local, store_archive, fs). */
bool sp_path_stale_temp(const char *name);

/* True when a path (absolute, or relative such as an S3 key) has "." or ".."
 * components, or an empty one ("//", a trailing "/"): such a path is never
 * taken to be inside a directory on the strength of its prefix.  "" is false. */
bool sp_path_has_dot_segments(const char *p);

/* A growing list of paths with sizes, as sp_dispose reports them (dispose.c, dispose_s3.c). */
typedef struct sp_dispose_list {
    sp_dispose_item_t *v;
    uint32_t n, cap;
} dispose_list_t;

/* Append a copy of key; false when out of memory. */
bool dispose_list_push(dispose_list_t *l, const char *key, int64_t size);
/* Hand the items to a result field (the list is empty afterwards). */
void dispose_list_take(dispose_list_t *l, uint32_t *n, sp_dispose_item_t **v);
void dispose_list_free(dispose_list_t *l);

#endif
