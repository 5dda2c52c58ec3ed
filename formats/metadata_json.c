/*
 * metadata_json.c - the complete, lossless JSON form of a `_metadata` model
 * (`sp metadata export` / `sp metadata import`).
 *
 * Every field of the model that reaches the wire has a JSON member, so
 * import(export(m)) encodes to the bytes of m.  The form is also meant to be
 * edited by hand, hence Flink's names (tag constants, snake_case field names)
 * and plain JSON strings wherever that loses nothing.  Schema: see the
 * "JSON FORM" section of man/sp-metadata.1.
 *
 * Layout: value writers (j_*) and value readers (v_*) come in symmetrical
 * pairs; every handle family has one writer and one reader, dispatched by
 * the tag table `handle_codecs`.  Readers never trust the JSON: every type,
 * range, length and nesting depth is checked and reported with the JSON path
 * of the offending value.
 */
#include "sp_metadata_json.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_mutf8.h"
#include "sp_properties.h"

#define JSON_FORMAT_NAME "flink-metadata"
/* Handles nest (key groups -> delegate, changelog -> materialized -> ...);
 * Flink never goes beyond 3 levels, so 32 only stops hostile input. */
#define MAX_HANDLE_DEPTH 32
/* JavaScript's Number.MAX_SAFE_INTEGER: every integer up to here survives a
 * trip through a double (cJSON, jq, browsers).  Larger ones are written as
 * decimal strings, and numbers beyond it are refused on import because the
 * double cJSON parsed them into may already have lost digits. */
#define MAX_SAFE_INT 9007199254740991LL
/* writeUTF cannot store more bytes than this. */
#define MAX_UTF_BYTES 65535u

#define TRY(expr)                            \
    do {                                     \
        sp_status_t try_st_ = (expr);        \
        if (try_st_ != SP_OK)                \
            return try_st_;                  \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Base64 (RFC 4648, standard alphabet, padded)                             */
/* ------------------------------------------------------------------------ */

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* malloc'd NUL-terminated text, NULL on allocation failure. */
static char *b64_encode(const uint8_t *p, size_t n)
{
    if (n > (SIZE_MAX / 4 - 1) * 3)
        return NULL;
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[v >> 12 & 63];
        *o++ = b64_chars[v >> 6 & 63];
        *o++ = b64_chars[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[v >> 12 & 63];
        *o++ = i + 1 < n ? b64_chars[v >> 6 & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/*
 * Strict decoding, so that every blob has exactly one spelling and a typo
 * is reported instead of silently changing bytes: length a multiple of 4,
 * only the alphabet, '=' only as the last one or two characters, and the
 * unused low bits of the last group zero.  out holds n / 4 * 3 bytes.
 * Returns false on bad input; *bad is the offending character's position.
 */
static bool b64_decode(const char *s, size_t n, uint8_t *out, size_t *out_len, size_t *bad, const char **why)
{
    *why = "length not a multiple of 4";
    *out_len = 0;
    if (n % 4 != 0) {
        *bad = n;
        return false;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        size_t pad = 0;
        for (size_t k = 0; k < 4; k++) {
            unsigned char c = (unsigned char)s[i + k];
            if (c == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '=')) {
                v[k] = 0;
                pad++;
                continue;
            }
            v[k] = b64_value(c);
            if (v[k] < 0 || pad) {
                *bad = i + k;
                *why = "not a base64 character (or '=' not at the end)";
                return false;
            }
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        if ((pad == 1 && (w & 0xFF)) || (pad == 2 && (w & 0xFFFF))) {
            *bad = i + 3 - pad;
            *why = "unused low bits of the last character before '=' are not zero";
            return false;
        }
        out[o++] = (uint8_t)(w >> 16);
        if (pad < 2)
            out[o++] = (uint8_t)(w >> 8);
        if (pad < 1)
            out[o++] = (uint8_t)w;
    }
    *out_len = o;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Writing: model -> cJSON tree                                              */
/* ------------------------------------------------------------------------ */

/* Value constructors return NULL only when memory runs out; put()/append()
 * record that in `oom`, so construction code stays a flat list of fields. */
typedef struct jw {
    const sp_metadata_t *m;
    bool oom;
} jw_t;

static void put(jw_t *w, cJSON *obj, const char *key, cJSON *item)
{
    if (!item)
        w->oom = true;
    else if (!cJSON_AddItemToObject(obj, key, item)) {
        w->oom = true;
        cJSON_Delete(item);
    }
}

static void append(jw_t *w, cJSON *arr, cJSON *item)
{
    if (!item)
        w->oom = true;
    else if (!cJSON_AddItemToArray(arr, item)) {
        w->oom = true;
        cJSON_Delete(item);
    }
}

/* Integers are emitted as raw text so that cJSON's double formatting never
 * turns 1000000000000000 into 1e+15; beyond ±2^53-1 as decimal strings. */
static cJSON *j_int(int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return v >= -MAX_SAFE_INT && v <= MAX_SAFE_INT ? cJSON_CreateRaw(buf) : cJSON_CreateString(buf);
}

static cJSON *j_bool(bool b) { return cJSON_CreateBool(b); }

static cJSON *j_b64(const uint8_t *p, size_t n)
{
    char *t = b64_encode(p, n);
    cJSON *s = t ? cJSON_CreateString(t) : NULL;
    free(t);
    return s;
}

/*
 * A stored string: a plain JSON string when the modified-UTF-8 bytes come
 * back identical from standard UTF-8 and hold no NUL (cJSON strings are C
 * strings); otherwise {"mutf8_base64": raw bytes} so nothing is lost.
 */
static cJSON *j_str(jw_t *w, const sp_str_t *s)
{
    if (s->len == 0)
        return cJSON_CreateString("");
    if (sp_mutf8_is_canonical(s->ptr, s->len)) {
        char *u = malloc(2 * (size_t)s->len + 1);
        if (!u)
            return NULL;
        long n = sp_mutf8_to_utf8(s->ptr, s->len, u);
        if (n >= 0 && strlen(u) == (size_t)n) {
            cJSON *item = cJSON_CreateString(u);
            free(u);
            return item;
        }
        free(u);
    }
    cJSON *o = cJSON_CreateObject();
    if (o)
        put(w, o, "mutf8_base64", j_b64(s->ptr, s->len));
    return o;
}

/* V5+ operator name/uid: "" means "not known" and is shown as null. */
static cJSON *j_str_or_null(jw_t *w, const sp_str_t *s)
{
    return s->len == 0 ? cJSON_CreateNull() : j_str(w, s);
}

/* Small enums (distribution mode, scope) by name; out-of-range raw values
 * as numbers, so the JSON still reproduces the bytes. */
static cJSON *j_enum(int64_t v, const char *const *names, int64_t n)
{
    return v >= 0 && v < n ? cJSON_CreateString(names[v]) : j_int(v);
}

static cJSON *j_offsets(jw_t *w, const uint8_t *p, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        append(w, a, j_int(sp_be64_at(p, i)));
    return a;
}

/* An array of n model elements of `size` bytes, each rendered by fn. */
typedef cJSON *(*elem_writer_t)(jw_t *w, const void *elem);

static cJSON *j_list(jw_t *w, const void *items, size_t n, size_t size, elem_writer_t fn)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        append(w, a, fn(w, (const char *)items + i * size));
    return a;
}

static cJSON *j_handle(jw_t *w, const sp_handle_t *h);

static cJSON *j_handle_elem(jw_t *w, const void *elem)
{
    return j_handle(w, *(sp_handle_t *const *)elem);
}

/* ------------------------------------------------------------------------ */
/* Reading: cJSON tree -> model                                              */
/* ------------------------------------------------------------------------ */

typedef struct jr {
    sp_metadata_t *m;
    sp_error_t *err;
    int depth;         /* handle nesting */
    size_t plen;
    char path[256];    /* JSON path of the value being read, for errors */
} jr_t;

static size_t path_push(jr_t *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static size_t path_push(jr_t *r, const char *fmt, ...)
{
    size_t old = r->plen, room = sizeof r->path - r->plen;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->path + r->plen, room, fmt, ap);
    va_end(ap);
    if (k > 0)
        r->plen += (size_t)k < room ? (size_t)k : room - 1;
    return old;
}

static size_t path_key(jr_t *r, const char *key)
{
    return path_push(r, r->plen ? ".%s" : "%s", key);
}

static void path_pop(jr_t *r, size_t old)
{
    r->plen = old;
    r->path[old] = '\0';
}

static sp_status_t failc(jr_t *r, sp_status_t code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static sp_status_t failc(jr_t *r, sp_status_t code, const char *fmt, ...)
{
    char msg[sizeof r->err->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sp_error_set(r->err, code, SP_NO_OFFSET, r->path, "%s", msg);
}

#define fail(r, ...) failc((r), SP_ERR_MALFORMED, __VA_ARGS__)
#define nomem(r) failc((r), SP_ERR_NOMEM, "out of memory")

static const cJSON *field(const cJSON *o, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* A value reader: checks `it` and stores it into *out (type fixed per reader). */
typedef sp_status_t (*val_reader_t)(jr_t *r, const cJSON *it, void *out);

/* Required member `key` of object o, read by fn (errors name path.key). */
static sp_status_t rd(jr_t *r, const cJSON *o, const char *key, val_reader_t fn, void *out)
{
    size_t old = path_key(r, key);
    const cJSON *it = field(o, key);
    sp_status_t st = it ? fn(r, it, out) : fail(r, "missing (this field is required here)");
    path_pop(r, old);
    return st;
}

/* Optional member: *out is left as it is when the member is absent. */
static sp_status_t rd_opt(jr_t *r, const cJSON *o, const char *key, val_reader_t fn, void *out)
{
    return field(o, key) ? rd(r, o, key, fn, out) : SP_OK;
}

static sp_status_t v_object(jr_t *r, const cJSON *it, const char *what)
{
    return cJSON_IsObject(it) ? SP_OK : fail(r, "expected %s (a JSON object)", what);
}

/* An integer in [lo, hi]: a JSON number within ±2^53-1 or a decimal string. */
static sp_status_t v_int(jr_t *r, const cJSON *it, int64_t lo, int64_t hi, int64_t *out)
{
    int64_t v = 0;
    if (cJSON_IsNumber(it)) {
        double d = it->valuedouble;
        /* written this way round so NaN and infinities fail too */
        if (!(d >= (double)-MAX_SAFE_INT && d <= (double)MAX_SAFE_INT))
            return fail(r, "expected an integer; beyond +/-9007199254740991 write it as a decimal string "
                           "(\"-9223372036854775808\") so no digit is lost");
        v = (int64_t)d;
        if ((double)v != d)
            return fail(r, "expected an integer, not a fraction");
    } else if (cJSON_IsString(it)) {
        const char *s = it->valuestring;
        bool neg = *s == '-';
        s += neg;
        uint64_t acc = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
        if (!*s)
            return fail(r, "expected an integer as a decimal string");
        for (; *s; s++) {
            if (*s < '0' || *s > '9')
                return fail(r, "expected an integer as a decimal string (digits, optional leading '-')");
            unsigned d = (unsigned)(*s - '0');
            if (acc > (limit - d) / 10)
                return fail(r, "integer does not fit in 64 bits");
            acc = acc * 10 + d;
        }
        v = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    } else {
        return fail(r, "expected an integer");
    }
    if (v < lo || v > hi)
        return fail(r, "expected an integer in [%" PRId64 ", %" PRId64 "], got %" PRId64, lo, hi, v);
    *out = v;
    return SP_OK;
}

static sp_status_t v_i64(jr_t *r, const cJSON *it, void *out)
{
    return v_int(r, it, INT64_MIN, INT64_MAX, out);
}

static sp_status_t v_i32(jr_t *r, const cJSON *it, void *out)
{
    int64_t v = 0;
    TRY(v_int(r, it, INT32_MIN, INT32_MAX, &v));
    *(int32_t *)out = (int32_t)v;
    return SP_OK;
}

/* Counts stored as i32 that Flink (and sp_meta_decode) reject when negative. */
static sp_status_t v_count32(jr_t *r, const cJSON *it, void *out)
{
    int64_t v = 0;
    TRY(v_int(r, it, 0, INT32_MAX, &v));
    *(int32_t *)out = (int32_t)v;
    return SP_OK;
}

static sp_status_t v_u8(jr_t *r, const cJSON *it, void *out)
{
    int64_t v = 0;
    TRY(v_int(r, it, 0, 255, &v));
    *(uint8_t *)out = (uint8_t)v;
    return SP_OK;
}

static sp_status_t v_bool(jr_t *r, const cJSON *it, void *out)
{
    if (!cJSON_IsBool(it))
        return fail(r, "expected true or false");
    *(bool *)out = cJSON_IsTrue(it);
    return SP_OK;
}

/* Base64 text into a new arena buffer of at most max bytes. */
static sp_status_t b64_to_arena(jr_t *r, const char *s, size_t max, const uint8_t **ptr, size_t *len)
{
    size_t n = strlen(s), bad = 0;
    const char *why = "";
    if (n / 4 * 3 > max + 2)
        return fail(r, "base64 data longer than the %zu bytes this field can hold", max);
    uint8_t *buf = sp_meta_alloc(r->m, n / 4 * 3 + 1);
    if (!buf)
        return nomem(r);
    if (!b64_decode(s, n, buf, len, &bad, &why))
        return fail(r, "expected base64 (RFC 4648: A-Z a-z 0-9 + /, '=' padded to a multiple of 4): %s at "
                       "character %zu", why, bad);
    if (*len > max)
        return fail(r, "base64 data longer than the %zu bytes this field can hold", max);
    *ptr = buf;
    return SP_OK;
}

/* Blobs with an i32 length on the wire. */
static sp_status_t v_blob(jr_t *r, const cJSON *it, void *out)
{
    sp_blob_t *b = out;
    if (!cJSON_IsString(it))
        return fail(r, "expected a base64 string");
    return b64_to_arena(r, it->valuestring, INT32_MAX, &b->ptr, &b->len);
}

static sp_status_t v_str(jr_t *r, const cJSON *it, void *out)
{
    sp_str_t *s = out;
    if (cJSON_IsString(it)) {
        size_t n = strlen(it->valuestring);
        /* modified UTF-8 is never shorter than UTF-8, so this bounds the buffer */
        if (n > MAX_UTF_BYTES)
            return fail(r, "string too long: %zu bytes, Flink stores at most 65535", n);
        uint8_t *buf = sp_meta_alloc(r->m, 3 * n + 1);
        if (!buf)
            return nomem(r);
        long k = sp_utf8_to_mutf8(it->valuestring, n, buf);
        if (k < 0)
            return fail(r, "expected valid UTF-8 text");
        if ((size_t)k > MAX_UTF_BYTES)
            return fail(r, "string too long: %ld bytes in modified UTF-8, Flink stores at most 65535", k);
        s->ptr = buf;
        s->len = (uint32_t)k;
        return SP_OK;
    }
    if (cJSON_IsObject(it)) {
        const cJSON *b = field(it, "mutf8_base64");
        size_t old = path_key(r, "mutf8_base64"), len = 0;
        sp_status_t st = cJSON_IsString(b) ? b64_to_arena(r, b->valuestring, MAX_UTF_BYTES, &s->ptr, &len)
                                           : fail(r, "expected a base64 string of raw modified UTF-8 bytes");
        path_pop(r, old);
        s->len = (uint32_t)len;
        return st;
    }
    return fail(r, "expected a string or {\"mutf8_base64\": \"...\"}");
}

static sp_status_t v_str_or_null(jr_t *r, const cJSON *it, void *out)
{
    if (cJSON_IsNull(it)) {
        *(sp_str_t *)out = (sp_str_t){(const uint8_t *)"", 0};
        return SP_OK;
    }
    return v_str(r, it, out);
}

static sp_status_t v_enum(jr_t *r, const cJSON *it, const char *const *names, int64_t n, int64_t lo,
                          int64_t hi, int64_t *out)
{
    if (cJSON_IsString(it)) {
        for (int64_t i = 0; i < n; i++)
            if (strcmp(it->valuestring, names[i]) == 0) {
                *out = i;
                return SP_OK;
            }
        char list[128] = "";
        for (int64_t i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
        return fail(r, "expected one of %s (or the raw number)", list);
    }
    return v_int(r, it, lo, hi, out);
}

/* Offsets arrays are kept as raw big-endian i64s in the model (see sp_be64_at). */
typedef struct offsets {
    uint32_t n;
    const uint8_t *p;
} offsets_t;

static sp_status_t v_offsets(jr_t *r, const cJSON *it, void *out)
{
    offsets_t *o = out;
    if (!cJSON_IsArray(it))
        return fail(r, "expected an array of integers");
    size_t n = (size_t)cJSON_GetArraySize(it), i = 0;
    uint8_t *p = sp_meta_alloc(r->m, n * 8 + 1);
    if (!p)
        return nomem(r);
    const cJSON *el;
    cJSON_ArrayForEach(el, it) {
        int64_t v = 0;
        size_t old = path_push(r, "[%zu]", i);
        sp_status_t st = v_i64(r, el, &v);
        path_pop(r, old);
        if (st != SP_OK)
            return st;
        for (int k = 0; k < 8; k++)
            p[8 * i + (size_t)k] = (uint8_t)((uint64_t)v >> (56 - 8 * k));
        i++;
    }
    o->n = (uint32_t)n;
    o->p = p;
    return SP_OK;
}

/* An array into a new arena array of elements of `size` bytes, each read by fn. */
static sp_status_t v_list(jr_t *r, const cJSON *it, size_t size, val_reader_t fn, uint32_t *n_out,
                          void *items_out)
{
    if (!cJSON_IsArray(it))
        return fail(r, "expected an array");
    size_t n = (size_t)cJSON_GetArraySize(it), i = 0;
    char *items = sp_meta_alloc(r->m, n * size + 1);
    if (!items)
        return nomem(r);
    const cJSON *el;
    cJSON_ArrayForEach(el, it) {
        size_t old = path_push(r, "[%zu]", i);
        sp_status_t st = fn(r, el, items + i * size);
        path_pop(r, old);
        if (st != SP_OK)
            return st;
        i++;
    }
    *n_out = (uint32_t)n;
    memcpy(items_out, &items, sizeof items);
    return SP_OK;
}

static sp_status_t rd_list(jr_t *r, const cJSON *o, const char *key, size_t size, val_reader_t fn,
                           uint32_t *n_out, void *items_out)
{
    size_t old = path_key(r, key);
    const cJSON *it = field(o, key);
    sp_status_t st = it ? v_list(r, it, size, fn, n_out, items_out)
                        : fail(r, "missing (this field is required here)");
    path_pop(r, old);
    return st;
}

/* Where a handle sits decides which tags Flink's reader accepts there. */
typedef struct slot_kind {
    const char *what;
    uint32_t tags; /* bit per allowed tag */
} slot_kind_t;

#define T(tag) (1u << (tag))
static const slot_kind_t STREAM_SLOT = {
    "stream", T(SP_TAG_NULL) | T(SP_TAG_BYTE_STREAM) | T(SP_TAG_FILE) | T(SP_TAG_KEY_GROUPS) |
              T(SP_TAG_RELATIVE) | T(SP_TAG_SEGMENT) | T(SP_TAG_EMPTY_SEGMENT)};
static const slot_kind_t KEYED_SLOT = {
    "keyed", T(SP_TAG_NULL) | T(SP_TAG_KEY_GROUPS) | T(SP_TAG_INCREMENTAL) | T(SP_TAG_KEY_GROUPS_SAVEPOINT) |
             T(SP_TAG_CHANGELOG) | T(SP_TAG_CHANGELOG_BYTES) | T(SP_TAG_CHANGELOG_FILE) |
             T(SP_TAG_INCREMENTAL_V2) | T(SP_TAG_KEY_GROUPS_V2) | T(SP_TAG_CHANGELOG_FILE_V2) |
             T(SP_TAG_CHANGELOG_V2)};
static const slot_kind_t OPERATOR_SLOT = {
    "operator", T(SP_TAG_NULL) | T(SP_TAG_OPERATOR_STREAM) | T(SP_TAG_SEGMENT_OPERATOR_STREAM)};
static const slot_kind_t COORDINATOR_SLOT = {"coordinator", T(SP_TAG_NULL) | T(SP_TAG_BYTE_STREAM)};
/* the delegate of a file-merging operator state (Flink asserts a segment) */
static const slot_kind_t SEGMENT_SLOT = {"segment", T(SP_TAG_SEGMENT) | T(SP_TAG_EMPTY_SEGMENT)};
#undef T

static sp_status_t v_handle(jr_t *r, const cJSON *it, const slot_kind_t *kind, sp_handle_t **out);

static sp_status_t v_stream_handle(jr_t *r, const cJSON *it, void *out) { return v_handle(r, it, &STREAM_SLOT, out); }
static sp_status_t v_keyed_handle(jr_t *r, const cJSON *it, void *out) { return v_handle(r, it, &KEYED_SLOT, out); }
static sp_status_t v_operator_handle(jr_t *r, const cJSON *it, void *out) { return v_handle(r, it, &OPERATOR_SLOT, out); }
static sp_status_t v_coordinator_handle(jr_t *r, const cJSON *it, void *out) { return v_handle(r, it, &COORDINATOR_SLOT, out); }
static sp_status_t v_segment_handle(jr_t *r, const cJSON *it, void *out) { return v_handle(r, it, &SEGMENT_SLOT, out); }

/* ------------------------------------------------------------------------ */
/* Handle families: one writer and one reader each                           */
/* ------------------------------------------------------------------------ */

/* Tag 1: inline bytes. */
static void w_byte_stream(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "name", j_str(w, &h->u.byte_stream.name));
    put(w, o, "data_base64", j_b64(h->u.byte_stream.data.ptr, h->u.byte_stream.data.len));
}

static sp_status_t r_byte_stream(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    TRY(rd(r, o, "name", v_str, &h->u.byte_stream.name));
    return rd(r, o, "data_base64", v_blob, &h->u.byte_stream.data);
}

/* Tag 2: absolute path (size first on the wire, but path first here for reading). */
static void w_file(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "path", j_str(w, &h->u.file.path));
    put(w, o, "size", j_int(h->u.file.size));
}

static sp_status_t r_file(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    TRY(rd(r, o, "path", v_str, &h->u.file.path));
    return rd(r, o, "size", v_i64, &h->u.file.size);
}

/* Tag 6: path relative to the directory holding _metadata. */
static void w_relative(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "path", j_str(w, &h->u.relative.path));
    put(w, o, "size", j_int(h->u.relative.size));
}

static sp_status_t r_relative(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    TRY(rd(r, o, "path", v_str, &h->u.relative.path));
    return rd(r, o, "size", v_i64, &h->u.relative.size);
}

/* Tags 3, 7, 12: key-group offsets into a delegate stream. */
static void w_key_groups(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    int32_t n = h->u.key_groups.num_key_groups;
    put(w, o, "start_key_group", j_int(h->u.key_groups.start_key_group));
    put(w, o, "num_key_groups", j_int(n));
    put(w, o, "offsets", j_offsets(w, h->u.key_groups.offsets, n > 0 ? (size_t)n : 0));
    put(w, o, "delegate", j_handle(w, h->u.key_groups.delegate));
    if (h->tag == SP_TAG_KEY_GROUPS_V2)
        put(w, o, "handle_id", j_str(w, &h->u.key_groups.handle_id));
}

static sp_status_t r_key_groups(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    offsets_t off = {0, NULL};
    TRY(rd(r, o, "start_key_group", v_i32, &h->u.key_groups.start_key_group));
    TRY(rd(r, o, "num_key_groups", v_count32, &h->u.key_groups.num_key_groups));
    TRY(rd(r, o, "offsets", v_offsets, &off));
    /* the wire has one count for both, so they must agree */
    if ((int64_t)off.n != h->u.key_groups.num_key_groups) {
        size_t old = path_key(r, "offsets");
        sp_status_t st = fail(r, "expected num_key_groups (%" PRId32 ") offsets, got %" PRIu32,
                              h->u.key_groups.num_key_groups, off.n);
        path_pop(r, old);
        return st;
    }
    h->u.key_groups.offsets = off.p;
    TRY(rd(r, o, "delegate", v_stream_handle, &h->u.key_groups.delegate));
    if (h->tag == SP_TAG_KEY_GROUPS_V2)
        TRY(rd(r, o, "handle_id", v_str, &h->u.key_groups.handle_id));
    return SP_OK;
}

/* Tags 4, 17: named operator states (partitions at offsets of the delegate). */
static const char *const distribution_modes[] = {"SPLIT_DISTRIBUTE", "UNION", "BROADCAST"};

static cJSON *j_op_state(jw_t *w, const void *elem)
{
    const sp_op_state_entry_t *e = elem;
    cJSON *o = cJSON_CreateObject();
    put(w, o, "name", j_str(w, &e->name));
    put(w, o, "distribution_mode", j_enum(e->distribution_mode, distribution_modes, 3));
    put(w, o, "offsets", j_offsets(w, e->offsets, e->n_offsets));
    return o;
}

static sp_status_t v_op_state(jr_t *r, const cJSON *it, void *out)
{
    sp_op_state_entry_t *e = out;
    offsets_t off = {0, NULL};
    int64_t mode = 0;
    TRY(v_object(r, it, "an operator state entry"));
    TRY(rd(r, it, "name", v_str, &e->name));
    size_t old = path_key(r, "distribution_mode");
    const cJSON *m = field(it, "distribution_mode");
    sp_status_t st = m ? v_enum(r, m, distribution_modes, 3, INT8_MIN, INT8_MAX, &mode)
                       : fail(r, "missing (this field is required here)");
    path_pop(r, old);
    TRY(st);
    e->distribution_mode = (int8_t)mode;
    TRY(rd(r, it, "offsets", v_offsets, &off));
    e->n_offsets = off.n;
    e->offsets = off.p;
    return SP_OK;
}

static void w_operator_stream(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "states", j_list(w, h->u.operator_stream.states, h->u.operator_stream.n_states,
                               sizeof *h->u.operator_stream.states, j_op_state));
    if (h->tag == SP_TAG_SEGMENT_OPERATOR_STREAM) {
        put(w, o, "task_owned_dir", j_str(w, &h->u.operator_stream.task_owned_dir));
        put(w, o, "shared_dir", j_str(w, &h->u.operator_stream.shared_dir));
        put(w, o, "is_empty", j_bool(h->u.operator_stream.is_empty != 0));
    }
    put(w, o, "delegate", j_handle(w, h->u.operator_stream.delegate));
}

static sp_status_t v_byte_bool(jr_t *r, const cJSON *it, void *out)
{
    bool b = false;
    TRY(v_bool(r, it, &b));
    *(uint8_t *)out = b ? 1 : 0;
    return SP_OK;
}

static sp_status_t r_operator_stream(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    TRY(rd_list(r, o, "states", sizeof *h->u.operator_stream.states, v_op_state, &h->u.operator_stream.n_states,
                &h->u.operator_stream.states));
    if (h->tag == SP_TAG_SEGMENT_OPERATOR_STREAM) {
        TRY(rd(r, o, "task_owned_dir", v_str, &h->u.operator_stream.task_owned_dir));
        TRY(rd(r, o, "shared_dir", v_str, &h->u.operator_stream.shared_dir));
        TRY(rd(r, o, "is_empty", v_byte_bool, &h->u.operator_stream.is_empty));
    }
    return rd(r, o, "delegate", h->tag == SP_TAG_SEGMENT_OPERATOR_STREAM ? v_segment_handle : v_stream_handle,
              &h->u.operator_stream.delegate);
}

/* Tags 5, 11: RocksDB incremental state (files by local name). */
static cJSON *j_handle_path(jw_t *w, const void *elem)
{
    const sp_handle_path_t *e = elem;
    cJSON *o = cJSON_CreateObject();
    put(w, o, "local_path", j_str(w, &e->local_path));
    put(w, o, "handle", j_handle(w, e->handle));
    return o;
}

static sp_status_t v_handle_path(jr_t *r, const cJSON *it, void *out)
{
    sp_handle_path_t *e = out;
    TRY(v_object(r, it, "a {\"local_path\", \"handle\"} entry"));
    TRY(rd(r, it, "local_path", v_str, &e->local_path));
    return rd(r, it, "handle", v_stream_handle, &e->handle);
}

static void w_incremental(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    bool v2 = h->tag == SP_TAG_INCREMENTAL_V2;
    put(w, o, "checkpoint_id", j_int(h->u.incremental.checkpoint_id));
    put(w, o, "backend_id", j_str(w, &h->u.incremental.backend_id));
    put(w, o, "start_key_group", j_int(h->u.incremental.start_key_group));
    put(w, o, "num_key_groups", j_int(h->u.incremental.num_key_groups));
    if (v2)
        put(w, o, "checkpointed_size", j_int(h->u.incremental.checkpointed_size));
    put(w, o, "meta", j_handle(w, h->u.incremental.meta));
    put(w, o, "shared_state", j_list(w, h->u.incremental.shared, h->u.incremental.n_shared,
                                     sizeof *h->u.incremental.shared, j_handle_path));
    put(w, o, "private_state", j_list(w, h->u.incremental.private_state, h->u.incremental.n_private,
                                      sizeof *h->u.incremental.private_state, j_handle_path));
    if (v2)
        put(w, o, "handle_id", j_str(w, &h->u.incremental.handle_id));
}

static sp_status_t r_incremental(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    bool v2 = h->tag == SP_TAG_INCREMENTAL_V2;
    TRY(rd(r, o, "checkpoint_id", v_i64, &h->u.incremental.checkpoint_id));
    TRY(rd(r, o, "backend_id", v_str, &h->u.incremental.backend_id));
    TRY(rd(r, o, "start_key_group", v_i32, &h->u.incremental.start_key_group));
    TRY(rd(r, o, "num_key_groups", v_count32, &h->u.incremental.num_key_groups));
    h->u.incremental.checkpointed_size = -1; /* tag 5: unknown, as Flink reads it */
    if (v2)
        TRY(rd(r, o, "checkpointed_size", v_i64, &h->u.incremental.checkpointed_size));
    TRY(rd(r, o, "meta", v_stream_handle, &h->u.incremental.meta));
    TRY(rd_list(r, o, "shared_state", sizeof *h->u.incremental.shared, v_handle_path, &h->u.incremental.n_shared,
                &h->u.incremental.shared));
    TRY(rd_list(r, o, "private_state", sizeof *h->u.incremental.private_state, v_handle_path,
                &h->u.incremental.n_private, &h->u.incremental.private_state));
    if (v2)
        TRY(rd(r, o, "handle_id", v_str, &h->u.incremental.handle_id));
    return SP_OK;
}

/* Tags 8, 14: changelog backend = materialized + non-materialized keyed handles. */
static void w_changelog(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "start_key_group", j_int(h->u.changelog.start_key_group));
    put(w, o, "num_key_groups", j_int(h->u.changelog.num_key_groups));
    put(w, o, "checkpointed_size", j_int(h->u.changelog.checkpointed_size));
    put(w, o, "materialized", j_list(w, h->u.changelog.materialized, h->u.changelog.n_materialized,
                                     sizeof *h->u.changelog.materialized, j_handle_elem));
    put(w, o, "non_materialized", j_list(w, h->u.changelog.non_materialized, h->u.changelog.n_non_materialized,
                                         sizeof *h->u.changelog.non_materialized, j_handle_elem));
    put(w, o, "materialization_id", j_int(h->u.changelog.materialization_id));
    if (h->tag == SP_TAG_CHANGELOG_V2)
        put(w, o, "checkpoint_id", j_int(h->u.changelog.checkpoint_id));
    put(w, o, "handle_id", j_str(w, &h->u.changelog.handle_id));
}

static sp_status_t r_changelog(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    TRY(rd(r, o, "start_key_group", v_i32, &h->u.changelog.start_key_group));
    TRY(rd(r, o, "num_key_groups", v_count32, &h->u.changelog.num_key_groups));
    TRY(rd(r, o, "checkpointed_size", v_i64, &h->u.changelog.checkpointed_size));
    TRY(rd_list(r, o, "materialized", sizeof *h->u.changelog.materialized, v_keyed_handle,
                &h->u.changelog.n_materialized, &h->u.changelog.materialized));
    TRY(rd_list(r, o, "non_materialized", sizeof *h->u.changelog.non_materialized, v_keyed_handle,
                &h->u.changelog.n_non_materialized, &h->u.changelog.non_materialized));
    TRY(rd(r, o, "materialization_id", v_i64, &h->u.changelog.materialization_id));
    h->u.changelog.checkpoint_id = h->u.changelog.materialization_id; /* tag 8: as Flink reads it */
    if (h->tag == SP_TAG_CHANGELOG_V2)
        TRY(rd(r, o, "checkpoint_id", v_i64, &h->u.changelog.checkpoint_id));
    return rd(r, o, "handle_id", v_str, &h->u.changelog.handle_id);
}

/* Tag 9: in-memory changelog (changes inline). */
static cJSON *j_change(jw_t *w, const void *elem)
{
    const sp_change_t *c = elem;
    cJSON *o = cJSON_CreateObject();
    put(w, o, "key_group", j_int(c->key_group));
    put(w, o, "data_base64", j_b64(c->bytes.ptr, c->bytes.len));
    return o;
}

static sp_status_t v_change(jr_t *r, const cJSON *it, void *out)
{
    sp_change_t *c = out;
    TRY(v_object(r, it, "a {\"key_group\", \"data_base64\"} change"));
    TRY(rd(r, it, "key_group", v_i32, &c->key_group));
    return rd(r, it, "data_base64", v_blob, &c->bytes);
}

static void w_changelog_bytes(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "start_key_group", j_int(h->u.changelog_bytes.start_key_group));
    put(w, o, "num_key_groups", j_int(h->u.changelog_bytes.num_key_groups));
    put(w, o, "from", j_int(h->u.changelog_bytes.from));
    put(w, o, "to", j_int(h->u.changelog_bytes.to));
    put(w, o, "changes", j_list(w, h->u.changelog_bytes.changes, h->u.changelog_bytes.n_changes,
                                sizeof *h->u.changelog_bytes.changes, j_change));
    put(w, o, "handle_id", j_str(w, &h->u.changelog_bytes.handle_id));
}

static sp_status_t r_changelog_bytes(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    TRY(rd(r, o, "start_key_group", v_i32, &h->u.changelog_bytes.start_key_group));
    TRY(rd(r, o, "num_key_groups", v_count32, &h->u.changelog_bytes.num_key_groups));
    TRY(rd(r, o, "from", v_i64, &h->u.changelog_bytes.from));
    TRY(rd(r, o, "to", v_i64, &h->u.changelog_bytes.to));
    TRY(rd_list(r, o, "changes", sizeof *h->u.changelog_bytes.changes, v_change, &h->u.changelog_bytes.n_changes,
                &h->u.changelog_bytes.changes));
    return rd(r, o, "handle_id", v_str, &h->u.changelog_bytes.handle_id);
}

/* Tags 10, 13: changelog in files ((offset, stream handle) pairs). */
static cJSON *j_offset_handle(jw_t *w, const void *elem)
{
    const sp_offset_handle_t *e = elem;
    cJSON *o = cJSON_CreateObject();
    put(w, o, "offset", j_int(e->offset));
    put(w, o, "handle", j_handle(w, e->handle));
    return o;
}

static sp_status_t v_offset_handle(jr_t *r, const cJSON *it, void *out)
{
    sp_offset_handle_t *e = out;
    TRY(v_object(r, it, "an {\"offset\", \"handle\"} entry"));
    TRY(rd(r, it, "offset", v_i64, &e->offset));
    return rd(r, it, "handle", v_stream_handle, &e->handle);
}

static void w_changelog_file(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "start_key_group", j_int(h->u.changelog_file.start_key_group));
    put(w, o, "num_key_groups", j_int(h->u.changelog_file.num_key_groups));
    put(w, o, "handles", j_list(w, h->u.changelog_file.handles, h->u.changelog_file.n_handles,
                                sizeof *h->u.changelog_file.handles, j_offset_handle));
    put(w, o, "state_size", j_int(h->u.changelog_file.state_size));
    put(w, o, "checkpointed_size", j_int(h->u.changelog_file.checkpointed_size));
    put(w, o, "handle_id", j_str(w, &h->u.changelog_file.handle_id));
    if (h->tag == SP_TAG_CHANGELOG_FILE_V2)
        put(w, o, "storage_id", j_str(w, &h->u.changelog_file.storage_id));
}

static sp_status_t r_changelog_file(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    TRY(rd(r, o, "start_key_group", v_i32, &h->u.changelog_file.start_key_group));
    TRY(rd(r, o, "num_key_groups", v_count32, &h->u.changelog_file.num_key_groups));
    TRY(rd_list(r, o, "handles", sizeof *h->u.changelog_file.handles, v_offset_handle,
                &h->u.changelog_file.n_handles, &h->u.changelog_file.handles));
    TRY(rd(r, o, "state_size", v_i64, &h->u.changelog_file.state_size));
    TRY(rd(r, o, "checkpointed_size", v_i64, &h->u.changelog_file.checkpointed_size));
    TRY(rd(r, o, "handle_id", v_str, &h->u.changelog_file.handle_id));
    if (h->tag == SP_TAG_CHANGELOG_FILE_V2)
        TRY(rd(r, o, "storage_id", v_str, &h->u.changelog_file.storage_id));
    return SP_OK;
}

/* Tag 15: a segment of a merged physical file. */
static const char *const segment_scopes[] = {"EXCLUSIVE", "SHARED"};

static void w_segment(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    put(w, o, "start_pos", j_int(h->u.segment.start_pos));
    put(w, o, "size", j_int(h->u.segment.size));
    put(w, o, "scope", j_enum(h->u.segment.scope, segment_scopes, 2));
    put(w, o, "path", j_str(w, &h->u.segment.path));
    put(w, o, "logical_file_id", j_str(w, &h->u.segment.logical_file_id));
}

static sp_status_t r_segment(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    int64_t scope = 0;
    TRY(rd(r, o, "start_pos", v_i64, &h->u.segment.start_pos));
    TRY(rd(r, o, "size", v_i64, &h->u.segment.size));
    size_t old = path_key(r, "scope");
    const cJSON *s = field(o, "scope");
    sp_status_t st = s ? v_enum(r, s, segment_scopes, 2, INT32_MIN, INT32_MAX, &scope)
                       : fail(r, "missing (this field is required here)");
    path_pop(r, old);
    TRY(st);
    h->u.segment.scope = (int32_t)scope;
    TRY(rd(r, o, "path", v_str, &h->u.segment.path));
    return rd(r, o, "logical_file_id", v_str, &h->u.segment.logical_file_id);
}

/* Tag 16: the empty-segment placeholder has no fields. */
static void w_none(jw_t *w, cJSON *o, const sp_handle_t *h)
{
    (void)w, (void)o, (void)h;
}

static sp_status_t r_none(jr_t *r, const cJSON *o, sp_handle_t *h)
{
    (void)r, (void)o, (void)h;
    return SP_OK;
}

typedef struct handle_codec {
    void (*write)(jw_t *w, cJSON *o, const sp_handle_t *h);
    sp_status_t (*read)(jr_t *r, const cJSON *o, sp_handle_t *h);
} handle_codec_t;

static const handle_codec_t handle_codecs[SP_TAG_COUNT_] = {
    [SP_TAG_NULL] = {NULL, NULL},
    [SP_TAG_BYTE_STREAM] = {w_byte_stream, r_byte_stream},
    [SP_TAG_FILE] = {w_file, r_file},
    [SP_TAG_KEY_GROUPS] = {w_key_groups, r_key_groups},
    [SP_TAG_OPERATOR_STREAM] = {w_operator_stream, r_operator_stream},
    [SP_TAG_INCREMENTAL] = {w_incremental, r_incremental},
    [SP_TAG_RELATIVE] = {w_relative, r_relative},
    [SP_TAG_KEY_GROUPS_SAVEPOINT] = {w_key_groups, r_key_groups},
    [SP_TAG_CHANGELOG] = {w_changelog, r_changelog},
    [SP_TAG_CHANGELOG_BYTES] = {w_changelog_bytes, r_changelog_bytes},
    [SP_TAG_CHANGELOG_FILE] = {w_changelog_file, r_changelog_file},
    [SP_TAG_INCREMENTAL_V2] = {w_incremental, r_incremental},
    [SP_TAG_KEY_GROUPS_V2] = {w_key_groups, r_key_groups},
    [SP_TAG_CHANGELOG_FILE_V2] = {w_changelog_file, r_changelog_file},
    [SP_TAG_CHANGELOG_V2] = {w_changelog, r_changelog},
    [SP_TAG_SEGMENT] = {w_segment, r_segment},
    [SP_TAG_EMPTY_SEGMENT] = {w_none, r_none},
    [SP_TAG_SEGMENT_OPERATOR_STREAM] = {w_operator_stream, r_operator_stream},
};

/* A handle: null, or {"type": "<Flink constant>", ...fields of its family}. */
static cJSON *j_handle(jw_t *w, const sp_handle_t *h)
{
    if (!h)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    const char *name = sp_tag_name(h->tag);
    if (!o)
        return NULL;
    /* an unknown tag cannot be encoded anyway; keep its number visible */
    put(w, o, "type", name ? cJSON_CreateString(name) : j_int(h->tag));
    if (name && handle_codecs[h->tag].write)
        handle_codecs[h->tag].write(w, o, h);
    return o;
}

static sp_status_t v_handle(jr_t *r, const cJSON *it, const slot_kind_t *kind, sp_handle_t **out)
{
    bool nullable = kind->tags & 1u << SP_TAG_NULL;
    *out = NULL;
    if (cJSON_IsNull(it) && nullable)
        return SP_OK;
    if (!cJSON_IsObject(it))
        return fail(r, "expected a %s state handle ({\"type\": ...})%s", kind->what, nullable ? " or null" : "");
    const cJSON *t = field(it, "type");
    size_t old = path_key(r, "type");
    int tag = cJSON_IsString(t) ? sp_tag_from_name(t->valuestring) : -1;
    if (tag < 0 || !(kind->tags >> tag & 1)) {
        char list[400] = "";
        for (int i = 0; i < SP_TAG_COUNT_; i++)
            if (kind->tags >> i & 1)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", *list ? ", " : "",
                         sp_tag_name(i));
        sp_status_t st = fail(r, "expected a %s state handle type: one of %s", kind->what, list);
        path_pop(r, old);
        return st;
    }
    path_pop(r, old);
    if (tag == SP_TAG_NULL)
        return SP_OK;
    if (r->depth >= MAX_HANDLE_DEPTH)
        return fail(r, "state handles nested more than %d deep", MAX_HANDLE_DEPTH);
    sp_handle_t *h = sp_meta_new_handle(r->m, tag);
    if (!h)
        return nomem(r);
    r->depth++;
    sp_status_t st = handle_codecs[tag].read(r, it, h);
    r->depth--;
    *out = h;
    return st;
}

/*
 * A subtask's operator-state slot (sp_handle_list_t).  V1 stores a list per
 * chained operator: written as an array.  V2+ stores a presence flag and then
 * one handle (which may itself be NULL_HANDLE): written as null (flag 0), the
 * handle, or {"type": "NULL_HANDLE"} (flag 1 then tag 0).  The reader accepts
 * all three shapes in every version; the encoder checks what fits.
 */
static cJSON *j_slot(jw_t *w, const sp_handle_list_t *l)
{
    if (w->m->version == 1 || l->n > 1)
        return j_list(w, l->items, l->n, sizeof *l->items, j_handle_elem);
    if (l->n == 0)
        return cJSON_CreateNull();
    if (l->items[0])
        return j_handle(w, l->items[0]);
    cJSON *o = cJSON_CreateObject();
    put(w, o, "type", cJSON_CreateString(sp_tag_name(SP_TAG_NULL)));
    return o;
}

static sp_status_t v_slot(jr_t *r, const cJSON *it, val_reader_t handle_reader, sp_handle_list_t *l)
{
    l->n = 0;
    l->items = NULL;
    if (cJSON_IsNull(it))
        return SP_OK;
    if (cJSON_IsArray(it))
        return v_list(r, it, sizeof *l->items, handle_reader, &l->n, &l->items);
    l->items = sp_meta_alloc(r->m, sizeof *l->items);
    if (!l->items)
        return nomem(r);
    l->n = 1;
    return handle_reader(r, it, &l->items[0]);
}

static sp_status_t v_stream_slot(jr_t *r, const cJSON *it, void *out) { return v_slot(r, it, v_stream_handle, out); }
static sp_status_t v_operator_slot(jr_t *r, const cJSON *it, void *out) { return v_slot(r, it, v_operator_handle, out); }

/* ------------------------------------------------------------------------ */
/* Channel state, subtasks, operators, master states                         */
/* ------------------------------------------------------------------------ */

static bool channel_has_subtask_index(const sp_metadata_t *m, int type)
{
    /* Flink 1.11 files lack it in the "channel V1" encoding (type 0) */
    return !(type == 0 && m->channel_without_subtask_index);
}

static cJSON *j_channel(jw_t *w, const void *elem)
{
    const sp_channel_handle_t *c = elem;
    cJSON *o = cJSON_CreateObject();
    put(w, o, "type", j_int(c->type));
    if (channel_has_subtask_index(w->m, c->type))
        put(w, o, "subtask_index", j_int(c->subtask_index));
    if (c->type <= 2) {
        cJSON *info = cJSON_CreateArray();
        append(w, info, j_int(c->info_a));
        append(w, info, j_int(c->info_b));
        put(w, o, "info", info);
        put(w, o, "offsets", j_offsets(w, c->offsets, c->n_offsets));
    }
    put(w, o, "state_size", j_int(c->state_size));
    put(w, o, "delegate", j_handle(w, c->delegate));
    if (c->type > 2)
        put(w, o, "merged_base64", j_b64(c->merged.ptr, c->merged.len));
    return o;
}

static sp_status_t v_info(jr_t *r, const cJSON *it, void *out)
{
    int32_t *ab = out;
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2)
        return fail(r, "expected [gate or partition index, channel or subpartition index]");
    size_t old = path_push(r, "[0]");
    sp_status_t st = v_i32(r, it->child, &ab[0]);
    path_pop(r, old);
    TRY(st);
    old = path_push(r, "[1]");
    st = v_i32(r, it->child->next, &ab[1]);
    path_pop(r, old);
    return st;
}

/*
 * Which types a list may hold is checked here, as sp_meta_decode() does:
 * V3-V5 have no type byte (type 0), V6+ inputs are 1 or 3, outputs 2 or 4.
 */
static sp_status_t v_channel(jr_t *r, const cJSON *it, bool input, sp_channel_handle_t *c)
{
    int32_t info[2] = {0, 0};
    offsets_t off = {0, NULL};
    TRY(v_object(r, it, "a channel state handle"));
    size_t old = path_key(r, "type");
    const cJSON *t = field(it, "type");
    int64_t type = 0;
    sp_status_t st = t ? v_int(r, t, 0, 4, &type) : fail(r, "missing (this field is required here)");
    if (st == SP_OK && r->m->version < 6 && type != 0)
        st = fail(r, "expected 0: metadata version %d has no channel handle types", (int)r->m->version);
    else if (st == SP_OK && r->m->version >= 6 && type != (input ? 1 : 2) && type != (input ? 3 : 4))
        st = fail(r, "expected %s", input ? "1 (input channel) or 3 (merged input channels)"
                                          : "2 (result subpartition) or 4 (merged result subpartitions)");
    path_pop(r, old);
    TRY(st);
    c->type = (uint8_t)type;
    c->subtask_index = -1; /* not on the wire for Flink 1.11: unknown */
    if (channel_has_subtask_index(r->m, c->type))
        TRY(rd(r, it, "subtask_index", v_i32, &c->subtask_index));
    if (c->type <= 2) {
        TRY(rd(r, it, "info", v_info, info));
        c->info_a = info[0];
        c->info_b = info[1];
        TRY(rd(r, it, "offsets", v_offsets, &off));
        c->n_offsets = off.n;
        c->offsets = off.p;
    }
    TRY(rd(r, it, "state_size", v_i64, &c->state_size));
    TRY(rd(r, it, "delegate", v_stream_handle, &c->delegate));
    if (c->type > 2)
        TRY(rd(r, it, "merged_base64", v_blob, &c->merged));
    return SP_OK;
}

static sp_status_t v_input_channel(jr_t *r, const cJSON *it, void *out) { return v_channel(r, it, true, out); }
static sp_status_t v_output_channel(jr_t *r, const cJSON *it, void *out) { return v_channel(r, it, false, out); }

static cJSON *j_subtask(jw_t *w, const void *elem)
{
    const sp_subtask_t *s = elem;
    int v = w->m->version;
    cJSON *o = cJSON_CreateObject();
    put(w, o, "index", j_int(s->index));
    if (v >= 3 && s->finished) {
        put(w, o, "finished", j_bool(true)); /* nothing else is stored */
        return o;
    }
    if (v == 0) {
        put(w, o, "state_base64", s->v0_null ? cJSON_CreateNull() : j_b64(s->v0_state.ptr, s->v0_state.len));
        put(w, o, "state_size", j_int(s->v0_state_size));
        put(w, o, "duration", j_int(s->v0_duration));
        return o;
    }
    if (v <= 2) {
        put(w, o, "duration", j_int(s->duration));
        put(w, o, "legacy_operator_state", j_slot(w, &s->legacy));
    }
    put(w, o, "managed_operator_state", j_slot(w, &s->managed_operator));
    put(w, o, "raw_operator_state", j_slot(w, &s->raw_operator));
    put(w, o, "managed_keyed_state", j_handle(w, s->managed_keyed));
    put(w, o, "raw_keyed_state", j_handle(w, s->raw_keyed));
    if (v >= 3) {
        put(w, o, "input_channel_state",
            j_list(w, s->input_channels, s->n_input_channels, sizeof *s->input_channels, j_channel));
        put(w, o, "result_subpartition_state",
            j_list(w, s->output_channels, s->n_output_channels, sizeof *s->output_channels, j_channel));
    }
    if (v >= 7) {
        put(w, o, "v7_marker", j_int(s->v7_marker));
        if (s->v7_marker == 1)
            put(w, o, "ref_checkpoint_id", j_int(s->v7_ref_checkpoint_id));
    }
    return o;
}

static sp_status_t v_v0_state(jr_t *r, const cJSON *it, void *out)
{
    sp_subtask_t *s = out;
    s->v0_null = cJSON_IsNull(it);
    return s->v0_null ? SP_OK : v_blob(r, it, &s->v0_state);
}

static sp_status_t v_subtask(jr_t *r, const cJSON *it, void *out)
{
    sp_subtask_t *s = out;
    int v = r->m->version;
    TRY(v_object(r, it, "a subtask state"));
    TRY(rd(r, it, "index", v_i32, &s->index));
    if (v >= 3) {
        /* a negative index on the wire means "finished", so real ones are >= 0 */
        if (s->index < 0) {
            size_t old = path_key(r, "index");
            sp_status_t st = fail(r, "expected a subtask index >= 0");
            path_pop(r, old);
            return st;
        }
        TRY(rd_opt(r, it, "finished", v_bool, &s->finished));
        if (s->finished)
            return SP_OK;
    }
    if (v == 0) {
        TRY(rd(r, it, "state_base64", v_v0_state, s));
        TRY(rd(r, it, "state_size", v_i64, &s->v0_state_size));
        return rd(r, it, "duration", v_i64, &s->v0_duration);
    }
    if (v <= 2) {
        TRY(rd(r, it, "duration", v_i64, &s->duration));
        TRY(rd(r, it, "legacy_operator_state", v_stream_slot, &s->legacy));
    }
    TRY(rd(r, it, "managed_operator_state", v_operator_slot, &s->managed_operator));
    TRY(rd(r, it, "raw_operator_state", v_operator_slot, &s->raw_operator));
    TRY(rd(r, it, "managed_keyed_state", v_keyed_handle, &s->managed_keyed));
    TRY(rd(r, it, "raw_keyed_state", v_keyed_handle, &s->raw_keyed));
    if (v >= 3) {
        TRY(rd_list(r, it, "input_channel_state", sizeof *s->input_channels, v_input_channel, &s->n_input_channels,
                    &s->input_channels));
        TRY(rd_list(r, it, "result_subpartition_state", sizeof *s->output_channels, v_output_channel,
                    &s->n_output_channels, &s->output_channels));
    }
    if (v >= 7) {
        /* the marker defaults to what the presence of the reference id says */
        bool has_ref = field(it, "ref_checkpoint_id") != NULL;
        s->v7_marker = has_ref ? 1 : 0;
        TRY(rd_opt(r, it, "v7_marker", v_u8, &s->v7_marker));
        if (s->v7_marker == 1)
            TRY(rd(r, it, "ref_checkpoint_id", v_i64, &s->v7_ref_checkpoint_id));
    }
    return SP_OK;
}

static cJSON *j_operator(jw_t *w, const void *elem)
{
    const sp_operator_t *op = elem;
    int v = w->m->version;
    char hex[33];
    cJSON *o = cJSON_CreateObject();
    sp_id_to_hex(op->id, hex);
    put(w, o, "operator_id", cJSON_CreateString(hex));
    if (v >= 5) {
        put(w, o, "name", j_str_or_null(w, &op->name));
        put(w, o, "uid", j_str_or_null(w, &op->uid));
    }
    put(w, o, "parallelism", j_int(op->parallelism));
    if (v >= 1)
        put(w, o, "max_parallelism", j_int(op->max_parallelism));
    if (v == 1 || v == 2)
        put(w, o, "chain_length", j_int(op->chain_length));
    if (v >= 3) {
        put(w, o, "coordinator_state", j_handle(w, op->coordinator));
        put(w, o, "fully_finished", j_bool(op->fully_finished));
    }
    put(w, o, "subtasks", j_list(w, op->subtasks, op->n_subtasks, sizeof *op->subtasks, j_subtask));
    return o;
}

static sp_status_t v_operator_id(jr_t *r, const cJSON *it, void *out)
{
    if (!cJSON_IsString(it) || !sp_id_from_hex(it->valuestring, out))
        return fail(r, "expected an operator ID: 32 hex digits");
    return SP_OK;
}

static sp_status_t v_operator(jr_t *r, const cJSON *it, void *out)
{
    sp_operator_t *op = out;
    int v = r->m->version;
    TRY(v_object(r, it, "an operator state"));
    TRY(rd(r, it, "operator_id", v_operator_id, op->id));
    if (v >= 5) {
        TRY(rd(r, it, "name", v_str_or_null, &op->name));
        TRY(rd(r, it, "uid", v_str_or_null, &op->uid));
    }
    TRY(rd(r, it, "parallelism", v_i32, &op->parallelism));
    op->max_parallelism = -1; /* V0 has none */
    if (v >= 1)
        TRY(rd(r, it, "max_parallelism", v_i32, &op->max_parallelism));
    if (v == 1 || v == 2)
        TRY(rd(r, it, "chain_length", v_i32, &op->chain_length));
    if (v >= 3) {
        TRY(rd(r, it, "coordinator_state", v_coordinator_handle, &op->coordinator));
        TRY(rd(r, it, "fully_finished", v_bool, &op->fully_finished));
    }
    return rd_list(r, it, "subtasks", sizeof *op->subtasks, v_subtask, &op->n_subtasks, &op->subtasks);
}

static cJSON *j_master_state(jw_t *w, const void *elem)
{
    const sp_master_state_t *ms = elem;
    cJSON *o = cJSON_CreateObject();
    put(w, o, "hook_version", j_int(ms->hook_version));
    put(w, o, "name", j_str(w, &ms->name));
    put(w, o, "data_base64", j_b64(ms->data.ptr, ms->data.len));
    return o;
}

static sp_status_t v_master_state(jr_t *r, const cJSON *it, void *out)
{
    sp_master_state_t *ms = out;
    TRY(v_object(r, it, "a master state"));
    TRY(rd(r, it, "hook_version", v_i32, &ms->hook_version));
    TRY(rd(r, it, "name", v_str, &ms->name));
    return rd(r, it, "data_base64", v_blob, &ms->data);
}

/* ------------------------------------------------------------------------ */
/* Properties trailer and top level                                          */
/* ------------------------------------------------------------------------ */

static const char *snapshot_kind_name(sp_snapshot_kind_t k)
{
    return k == SP_KIND_CHECKPOINT ? "checkpoint" : k == SP_KIND_SAVEPOINT ? "savepoint" : "unknown";
}

static const char *savepoint_format_name(sp_savepoint_format_t f)
{
    return f == SP_FORMAT_CANONICAL ? "canonical" : f == SP_FORMAT_NATIVE ? "native" : "unknown";
}

/* Read-only view of the trailer for people reading the export; import
 * ignores it (the trailer is restored from "base64" alone). */
static cJSON *j_properties_decoded(jw_t *w, const sp_blob_t *t)
{
    sp_properties_t p;
    if (sp_properties_decode(t->ptr, t->len, 0, &p, NULL) != SP_OK)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    if (p.is_null) {
        put(w, o, "null", j_bool(true));
        return o;
    }
    put(w, o, "kind", cJSON_CreateString(snapshot_kind_name(p.kind)));
    put(w, o, "snapshot_name", cJSON_CreateString(p.snapshot_name));
    if (p.kind == SP_KIND_SAVEPOINT) {
        put(w, o, "savepoint_format", cJSON_CreateString(savepoint_format_name(p.format)));
        put(w, o, "post_checkpoint_action", cJSON_CreateString(p.post_checkpoint_action));
    } else {
        put(w, o, "sharing_files_strategy", cJSON_CreateString(p.sharing_files_strategy));
    }
    put(w, o, "forced", j_bool(p.forced));
    put(w, o, "unclaimed", j_bool(p.unclaimed));
    put(w, o, "discard_subsumed", j_bool(p.discard_subsumed));
    put(w, o, "discard_finished", j_bool(p.discard_finished));
    put(w, o, "discard_cancelled", j_bool(p.discard_cancelled));
    put(w, o, "discard_failed", j_bool(p.discard_failed));
    put(w, o, "discard_suspended", j_bool(p.discard_suspended));
    return o;
}

static cJSON *j_properties(jw_t *w, const sp_metadata_t *m)
{
    if (!m->has_trailer)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    put(w, o, "base64", j_b64(m->trailer.ptr, m->trailer.len));
    cJSON *decoded = j_properties_decoded(w, &m->trailer);
    if (decoded)
        put(w, o, "decoded", decoded);
    return o;
}

static sp_status_t v_properties(jr_t *r, const cJSON *it, void *out)
{
    sp_metadata_t *m = out;
    m->has_trailer = !cJSON_IsNull(it);
    if (!m->has_trailer)
        return SP_OK;
    TRY(v_object(r, it, "{\"base64\": the serialized CheckpointProperties} or null"));
    return rd(r, it, "base64", v_blob, &m->trailer);
}

static cJSON *j_metadata(jw_t *w, const sp_metadata_t *m)
{
    cJSON *o = cJSON_CreateObject();
    put(w, o, "format", cJSON_CreateString(JSON_FORMAT_NAME));
    put(w, o, "schema_version", j_int(SP_META_JSON_SCHEMA_VERSION));
    put(w, o, "metadata_version", j_int(m->version));
    put(w, o, "checkpoint_id", j_int(m->checkpoint_id));
    if (m->channel_without_subtask_index)
        put(w, o, "channel_without_subtask_index", j_bool(true));
    if (m->version >= 2 || m->n_master_states)
        put(w, o, "master_states", j_list(w, m->master_states, m->n_master_states, sizeof *m->master_states,
                                          j_master_state));
    put(w, o, "operators", j_list(w, m->operators, m->n_operators, sizeof *m->operators, j_operator));
    put(w, o, "properties", j_properties(w, m));
    return o;
}

static sp_status_t v_format(jr_t *r, const cJSON *it, void *out)
{
    (void)out;
    if (!cJSON_IsString(it) || strcmp(it->valuestring, JSON_FORMAT_NAME) != 0)
        return fail(r, "expected \"" JSON_FORMAT_NAME "\" (this is not an `sp metadata export` document)");
    return SP_OK;
}

static sp_status_t v_schema_version(jr_t *r, const cJSON *it, void *out)
{
    int64_t v = 0;
    (void)out;
    TRY(v_int(r, it, 1, INT32_MAX, &v));
    if (v != SP_META_JSON_SCHEMA_VERSION)
        return failc(r, SP_ERR_UNSUPPORTED, "schema_version %" PRId64 " is newer than this sp understands (%d)", v,
                     SP_META_JSON_SCHEMA_VERSION);
    return SP_OK;
}

static sp_status_t v_checkpoint_id(jr_t *r, const cJSON *it, void *out)
{
    /* Flink refuses negative checkpoint IDs when reading _metadata */
    return v_int(r, it, 0, INT64_MAX, out);
}

static sp_status_t read_metadata(jr_t *r, const cJSON *root)
{
    sp_metadata_t *m = r->m;
    if (!cJSON_IsObject(root))
        return fail(r, "expected a JSON object (the output of `sp metadata export`)");
    TRY(rd(r, root, "format", v_format, NULL));
    TRY(rd(r, root, "schema_version", v_schema_version, NULL));
    TRY(rd(r, root, "checkpoint_id", v_checkpoint_id, &m->checkpoint_id));
    TRY(rd_opt(r, root, "channel_without_subtask_index", v_bool, &m->channel_without_subtask_index));
    if (m->version >= 2 || field(root, "master_states"))
        TRY(rd_list(r, root, "master_states", sizeof *m->master_states, v_master_state, &m->n_master_states,
                    &m->master_states));
    TRY(rd_list(r, root, "operators", sizeof *m->operators, v_operator, &m->n_operators, &m->operators));
    m->has_trailer = false;
    if (m->version >= 4)
        return rd(r, root, "properties", v_properties, m);
    return rd_opt(r, root, "properties", v_properties, m);
}

/* ------------------------------------------------------------------------ */
/* Public API                                                                */
/* ------------------------------------------------------------------------ */

sp_status_t sp_meta_to_json(const sp_metadata_t *m, int pretty, char **out, sp_error_t *err)
{
    if (!m || !out)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "no model or output given");
    *out = NULL;
    jw_t w = {m, false};
    cJSON *root = j_metadata(&w, m);
    char *text = root && !w.oom ? (pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root)) : NULL;
    cJSON_Delete(root);
    if (!text)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory while rendering JSON");
    *out = text;
    return SP_OK;
}

/*
 * cJSON turns "\u0000" into a C-string terminator and silently cuts the
 * string there; find it (and raw NUL bytes) first so such input is refused
 * rather than imported wrong.  Returns the offset, or len if there is none.
 */
static size_t find_nul(const char *t, size_t len)
{
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\0')
            return i;
        if (!in_string) {
            in_string = t[i] == '"';
        } else if (t[i] == '"') {
            in_string = false;
        } else if (t[i] == '\\') {
            if (len - i > 5 && memcmp(t + i + 1, "u0000", 5) == 0)
                return i;
            i++; /* skip the escaped character (it may be a quote) */
        }
    }
    return len;
}

static void line_column(const char *t, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (t[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

sp_status_t sp_meta_from_json(const char *text, size_t len, sp_metadata_t **out, sp_error_t *err)
{
    if (!out || (!text && len))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "no text or output given");
    *out = NULL;
    size_t line, col, nul = find_nul(text, len);
    if (nul < len) {
        line_column(text, nul, &line, &col);
        return sp_error_set(err, SP_ERR_MALFORMED, nul, "",
                            text[nul] ? "line %zu, column %zu: \\u0000 cannot be imported in a JSON string; write "
                                        "such a string as {\"mutf8_base64\": \"...\"}"
                                      : "line %zu, column %zu: NUL byte in the JSON text",
                            line, col);
    }
    const char *end = NULL;
    bool trailing = false;
    cJSON *root = len ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
    if (root) {
        /* cJSON stops after the first value; anything but blanks after it is an error */
        size_t off = (size_t)(end - text);
        while (off < len && (text[off] == ' ' || text[off] == '\t' || text[off] == '\n' || text[off] == '\r'))
            off++;
        if (off < len) {
            cJSON_Delete(root);
            root = NULL;
            end = text + off;
            trailing = true;
        }
    }
    if (!root) {
        size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
        line_column(text, off, &line, &col);
        return sp_error_set(err, SP_ERR_MALFORMED, off, "", "%s (line %zu, column %zu)",
                            trailing ? "unexpected text after the JSON document" : "not valid JSON", line, col);
    }

    /* the version decides which fields exist, so it is read before the model is made */
    jr_t r = {.err = err};
    int64_t version = 0;
    sp_status_t st = cJSON_IsObject(root) ? rd(&r, root, "metadata_version", v_i64, &version)
                                          : fail(&r, "expected a JSON object (the output of `sp metadata export`)");
    if (st == SP_OK && (version < 0 || version > SP_META_MAX_VERSION)) {
        path_key(&r, "metadata_version");
        st = failc(&r, SP_ERR_UNSUPPORTED, "expected a metadata version from 0 to %d", SP_META_MAX_VERSION);
    }
    if (st == SP_OK) {
        r.m = sp_meta_new((int32_t)version);
        st = r.m ? read_metadata(&r, root) : nomem(&r);
    }
    cJSON_Delete(root);
    if (st != SP_OK) {
        sp_meta_free(r.m);
        return st;
    }
    *out = r.m;
    return SP_OK;
}
