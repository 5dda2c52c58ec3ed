#include "metadata_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

sp_status_t rd_fail_at(rd_t *r, sp_status_t code, size_t at, const char *leaf, const char *fmt, ...)
{
    if (!r->err)
        return code;
    char field[sizeof r->err->field];
    size_t o = 0;
    int n = r->npath < RD_MAX_PATH ? r->npath : RD_MAX_PATH;
    field[0] = '\0';
    for (int i = 0; i < n && o < sizeof field; i++) {
        int w = r->path[i].index >= 0
                    ? snprintf(field + o, sizeof field - o, "%s%s[%ld]", o ? "." : "", r->path[i].name,
                               r->path[i].index)
                    : snprintf(field + o, sizeof field - o, "%s%s", o ? "." : "", r->path[i].name);
        if (w < 0)
            break;
        o += (size_t)w;
    }
    if (leaf && o < sizeof field)
        snprintf(field + o, sizeof field - o, "%s%s", o ? "." : "", leaf);
    char msg[sizeof r->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sp_error_set(r->err, code, at, field, "%s", msg);
}

sp_status_t rd_need(rd_t *r, size_t n, const char *leaf)
{
    if (rd_left(r) >= n)
        return SP_OK;
    return rd_fail_at(r, SP_ERR_MALFORMED, r->pos, leaf,
                      "truncated: expected %zu more byte%s, file ends after %zu", n, n == 1 ? "" : "s",
                      rd_left(r));
}

sp_status_t rd_u8(rd_t *r, const char *leaf, uint8_t *out)
{
    if (rd_need(r, 1, leaf))
        return r->err ? r->err->code : SP_ERR_MALFORMED;
    *out = r->buf[r->pos++];
    return SP_OK;
}

sp_status_t rd_i32(rd_t *r, const char *leaf, int32_t *out)
{
    if (rd_need(r, 4, leaf))
        return SP_ERR_MALFORMED;
    const uint8_t *p = r->buf + r->pos;
    *out = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
    r->pos += 4;
    return SP_OK;
}

sp_status_t rd_i64(rd_t *r, const char *leaf, int64_t *out)
{
    if (rd_need(r, 8, leaf))
        return SP_ERR_MALFORMED;
    *out = sp_be64_at(r->buf + r->pos, 0);
    r->pos += 8;
    return SP_OK;
}

sp_status_t rd_bytes(rd_t *r, size_t n, const char *leaf, const uint8_t **out)
{
    if (rd_need(r, n, leaf))
        return SP_ERR_MALFORMED;
    *out = r->buf + r->pos;
    r->pos += n;
    return SP_OK;
}

sp_status_t rd_utf(rd_t *r, const char *leaf, sp_str_t *out)
{
    if (rd_need(r, 2, leaf))
        return SP_ERR_MALFORMED;
    uint32_t n = ((uint32_t)r->buf[r->pos] << 8) | r->buf[r->pos + 1];
    if (rd_left(r) - 2 < n)
        return rd_fail_at(r, SP_ERR_MALFORMED, r->pos, leaf,
                          "truncated string: length prefix says %u bytes, only %zu remain", n, rd_left(r) - 2);
    out->ptr = r->buf + r->pos + 2;
    out->len = n;
    r->pos += 2 + (size_t)n;
    return SP_OK;
}

sp_status_t rd_flag32(rd_t *r, const char *leaf, bool *out)
{
    size_t at = r->pos;
    int32_t v;
    if (rd_i32(r, leaf, &v))
        return SP_ERR_MALFORMED;
    /* Flink writes exactly 0 or 1; anything else is corruption (and could
     * not be written back byte-exactly). */
    if (v != 0 && v != 1)
        return rd_fail_at(r, SP_ERR_MALFORMED, at, leaf, "expected presence flag 0 or 1, found %d", v);
    *out = v == 1;
    return SP_OK;
}

sp_status_t rd_count(rd_t *r, const char *leaf, size_t min_elem, uint32_t *out)
{
    size_t at = r->pos;
    int32_t v;
    if (rd_i32(r, leaf, &v))
        return SP_ERR_MALFORMED;
    if (v < 0)
        return rd_fail_at(r, SP_ERR_MALFORMED, at, leaf, "expected a count >= 0, found %d", v);
    if (min_elem && (size_t)v > rd_left(r) / min_elem)
        return rd_fail_at(r, SP_ERR_MALFORMED, at, leaf,
                          "count %d needs at least %zu bytes, only %zu remain", v, (size_t)v * min_elem,
                          rd_left(r));
    *out = (uint32_t)v;
    return SP_OK;
}

void *rd_alloc(rd_t *r, size_t n, size_t sz)
{
    if (n == 0)
        return NULL;
    if (sz && n > SIZE_MAX / sz) {
        rd_fail_at(r, SP_ERR_NOMEM, r->pos, NULL, "allocation too large");
        return NULL;
    }
    void *p = sp_meta_alloc(r->m, n * sz);
    if (!p)
        rd_fail_at(r, SP_ERR_NOMEM, r->pos, NULL, "out of memory");
    return p;
}
