/* Java modified UTF-8, as DataOutputStream.writeUTF writes it: every UTF-16
 * code unit separately (so supplementary characters are two 3-byte
 * surrogates), and U+0000 as C0 80. */
#include "sp_mutf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decode src into UTF-16 code units, as readUTF would; returns count or -1. */
static long decode_units(const uint8_t *s, size_t len, uint16_t *units)
{
    size_t i = 0;
    long n = 0;
    while (i < len) {
        uint8_t c = s[i];
        switch (c >> 4) {
        case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7:
            units[n++] = c;
            i += 1;
            break;
        case 12: case 13:
            if (i + 1 >= len || (s[i + 1] & 0xC0) != 0x80)
                return -1;
            units[n++] = (uint16_t)(((c & 0x1F) << 6) | (s[i + 1] & 0x3F));
            i += 2;
            break;
        case 14:
            if (i + 2 >= len || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80)
                return -1;
            units[n++] = (uint16_t)(((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F));
            i += 3;
            break;
        default:
            return -1;
        }
    }
    return n;
}

long sp_mutf8_to_utf8(const uint8_t *src, size_t len, char *out)
{
    uint16_t stackbuf[256];
    uint16_t *units = len <= 256 ? stackbuf : malloc(len * sizeof *units);
    if (!units)
        return -1;
    long n = decode_units(src, len, units);
    long o = 0;
    for (long i = 0; i < n && o >= 0; i++) {
        uint32_t cp = units[i];
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < n && units[i + 1] >= 0xDC00 && units[i + 1] <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (units[i + 1] - 0xDC00);
            i++;
        } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            o = -1; /* lone surrogate */
            break;
        }
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else if (cp < 0x800) {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xE0 | (cp >> 12));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (cp >> 18));
            out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    if (units != stackbuf)
        free(units);
    if (n < 0 || o < 0)
        return -1;
    out[o] = '\0';
    return o;
}

static long put_unit(uint8_t *out, long o, uint32_t c)
{
    if (c >= 1 && c <= 0x7F) {
        out[o++] = (uint8_t)c;
    } else if (c <= 0x7FF) {
        out[o++] = (uint8_t)(0xC0 | ((c >> 6) & 0x1F));
        out[o++] = (uint8_t)(0x80 | (c & 0x3F));
    } else {
        out[o++] = (uint8_t)(0xE0 | ((c >> 12) & 0x0F));
        out[o++] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        out[o++] = (uint8_t)(0x80 | (c & 0x3F));
    }
    return o;
}

long sp_utf8_to_mutf8(const char *src, size_t len, uint8_t *out)
{
    const uint8_t *s = (const uint8_t *)src;
    size_t i = 0;
    long o = 0;
    while (i < len) {
        uint32_t cp;
        uint8_t c = s[i];
        size_t need;
        if (c < 0x80) { cp = c; need = 1; }
        else if ((c & 0xE0) == 0xC0) { cp = c & 0x1F; need = 2; }
        else if ((c & 0xF0) == 0xE0) { cp = c & 0x0F; need = 3; }
        else if ((c & 0xF8) == 0xF0) { cp = c & 0x07; need = 4; }
        else return -1;
        if (i + need > len)
            return -1;
        for (size_t k = 1; k < need; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return -1;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        /* reject overlong forms and values outside Unicode */
        if ((need == 2 && cp < 0x80) || (need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return -1;
        i += need;
        if (cp >= 0x10000) {
            cp -= 0x10000;
            o = put_unit(out, o, 0xD800 + (cp >> 10));
            o = put_unit(out, o, 0xDC00 + (cp & 0x3FF));
        } else {
            o = put_unit(out, o, cp);
        }
    }
    return o;
}

bool sp_mutf8_is_canonical(const uint8_t *src, size_t len)
{
    /* fast path: plain ASCII without NUL is always canonical */
    size_t i = 0;
    while (i < len && src[i] >= 1 && src[i] < 0x80)
        i++;
    if (i == len)
        return true;
    char *u = malloc(2 * len + 1);
    uint8_t *back = malloc(3 * (2 * len + 1));
    bool ok = false;
    if (u && back) {
        long n = sp_mutf8_to_utf8(src, len, u);
        if (n >= 0) {
            long m = sp_utf8_to_mutf8(u, (size_t)n, back);
            ok = m == (long)len && memcmp(back, src, len) == 0;
        }
    }
    free(u);
    free(back);
    return ok;
}

char *sp_mutf8_display(const uint8_t *src, size_t len)
{
    char *out = malloc(6 * len + 1);
    if (!out)
        return NULL;
    if (sp_mutf8_to_utf8(src, len, out) >= 0 && !memchr(src, 0xC0, len))
        return out;
    /* not representable: show non-ASCII bytes as \xNN */
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = src[i];
        if (c >= 0x20 && c < 0x7F)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
    }
    out[o] = '\0';
    return out;
}
