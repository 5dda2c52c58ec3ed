#include "metadata_writer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sp_status_t wr_fail(wr_t *w, const char *field, const char *fmt, ...)
{
    w->failed = true;
    if (!w->err)
        return SP_ERR_INVALID;
    char msg[sizeof w->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sp_error_set(w->err, SP_ERR_INVALID, SP_NO_OFFSET, field, "%s", msg);
}

static sp_status_t grow(wr_t *w, size_t n)
{
    if (w->cap - w->len >= n)
        return SP_OK;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap - w->len < n) {
        if (cap > SIZE_MAX / 2)
            return sp_error_set(w->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "output too large");
        cap *= 2;
    }
    uint8_t *b = realloc(w->buf, cap);
    if (!b)
        return sp_error_set(w->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    w->buf = b;
    w->cap = cap;
    return SP_OK;
}

sp_status_t wr_raw(wr_t *w, const void *p, size_t n)
{
    if (n == 0)
        return SP_OK;
    sp_status_t s = grow(w, n);
    if (s)
        return s;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    return SP_OK;
}

sp_status_t wr_u8(wr_t *w, uint8_t v) { return wr_raw(w, &v, 1); }

sp_status_t wr_i32(wr_t *w, int32_t v)
{
    uint32_t u = (uint32_t)v;
    uint8_t b[4] = {(uint8_t)(u >> 24), (uint8_t)(u >> 16), (uint8_t)(u >> 8), (uint8_t)u};
    return wr_raw(w, b, 4);
}

sp_status_t wr_i64(wr_t *w, int64_t v)
{
    uint64_t u = (uint64_t)v;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (56 - 8 * i));
    return wr_raw(w, b, 8);
}

sp_status_t wr_utf(wr_t *w, sp_str_t s, const char *field)
{
    if (s.len > 65535)
        return wr_fail(w, field, "string of %u bytes exceeds the 65535-byte limit of Java's writeUTF", s.len);
    uint8_t b[2] = {(uint8_t)(s.len >> 8), (uint8_t)s.len};
    sp_status_t st = wr_raw(w, b, 2);
    return st ? st : wr_raw(w, s.ptr, s.len);
}

sp_status_t wr_be64_array(wr_t *w, const uint8_t *p, uint32_t n, const char *field)
{
    if (n && !p)
        return wr_fail(w, field, "%u offsets declared but none stored", n);
    return wr_raw(w, p, (size_t)n * 8);
}
