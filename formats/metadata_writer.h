/*
 * metadata_writer.h - growable big-endian output buffer (internal).
 */
#ifndef SP_METADATA_WRITER_H
#define SP_METADATA_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"
#include "sp_metadata.h"

typedef struct wr {
    uint8_t *buf;
    size_t len, cap;
    int version;
    bool channel_without_subtask_index;
    size_t depth;
    sp_error_t *err;
    bool failed;
} wr_t;

sp_status_t wr_raw(wr_t *w, const void *p, size_t n);
sp_status_t wr_u8(wr_t *w, uint8_t v);
sp_status_t wr_i32(wr_t *w, int32_t v);
sp_status_t wr_i64(wr_t *w, int64_t v);
/* writeUTF of raw modified-UTF-8 bytes; SP_ERR_INVALID above 65535 bytes. */
sp_status_t wr_utf(wr_t *w, sp_str_t s, const char *field);
/* n big-endian i64 stored as raw bytes (NULL allowed when n == 0). */
sp_status_t wr_be64_array(wr_t *w, const uint8_t *p, uint32_t n, const char *field);
sp_status_t wr_fail(wr_t *w, const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
