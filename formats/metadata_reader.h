/*
 * metadata_reader.h - bounds-checked big-endian reader over an untrusted
 * buffer, with a light "field path" stack so errors can name the field and
 * byte offset without formatting anything on the hot path (internal).
 */
#ifndef SP_METADATA_READER_H
#define SP_METADATA_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_metadata.h"

#define RD_MAX_PATH 48

typedef struct rd {
    const uint8_t *buf;
    size_t len, pos;
    sp_metadata_t *m;
    sp_error_t *err;
    int version;
    bool channel_without_subtask_index;
    size_t depth, max_depth;
    int npath;
    struct { const char *name; long index; } path[RD_MAX_PATH];
} rd_t;

/* Path stack: names must be string literals (stored by pointer). */
static inline void rd_push(rd_t *r, const char *name, long index)
{
    if (r->npath < RD_MAX_PATH) {
        r->path[r->npath].name = name;
        r->path[r->npath].index = index;
    }
    r->npath++;
}
static inline void rd_pop(rd_t *r) { r->npath--; }

/* Fail at the given offset; the field is the path stack + leaf. */
sp_status_t rd_fail_at(rd_t *r, sp_status_t code, size_t at, const char *leaf, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static inline size_t rd_left(const rd_t *r) { return r->len - r->pos; }

sp_status_t rd_need(rd_t *r, size_t n, const char *leaf);
sp_status_t rd_u8(rd_t *r, const char *leaf, uint8_t *out);
sp_status_t rd_i32(rd_t *r, const char *leaf, int32_t *out);
sp_status_t rd_i64(rd_t *r, const char *leaf, int64_t *out);
sp_status_t rd_utf(rd_t *r, const char *leaf, sp_str_t *out);
sp_status_t rd_bytes(rd_t *r, size_t n, const char *leaf, const uint8_t **out);
/* A 0/1 presence flag written as i32 (or a boolean byte when one_byte). */
sp_status_t rd_flag32(rd_t *r, const char *leaf, bool *out);
/* An i32 count >= 0 whose elements need at least min_elem bytes each. */
sp_status_t rd_count(rd_t *r, const char *leaf, size_t min_elem, uint32_t *out);
/* Allocate n elements of size sz from the model arena. */
void *rd_alloc(rd_t *r, size_t n, size_t sz);

#endif
