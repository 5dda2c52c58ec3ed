#define _XOPEN_SOURCE 700 /* wcwidth */
#include "out.h"

#include <inttypes.h>
#include <wchar.h>
#include <stdlib.h>
#include <string.h>

int exit_code_for(sp_status_t s)
{
    switch (s) {
    case SP_OK: return EXIT_OK_;
    case SP_ERR_MALFORMED:
    case SP_ERR_UNSUPPORTED: return EXIT_MALFORMED;
    case SP_ERR_INVALID: return EXIT_USAGE;
    case SP_ERR_REFUSED: return EXIT_REFUSED;
    case SP_ERR_REST: return EXIT_REST;
    case SP_ERR_IO:
    case SP_ERR_NOT_FOUND:
    case SP_ERR_NOMEM: return EXIT_STORAGE;
    }
    return EXIT_STORAGE;
}

int report_error(const char *cmd, const sp_error_t *err, bool json)
{
    fprintf(stderr, "sp %s: ", cmd);
    if (err->file[0])
        fprintf(stderr, "%s: ", err->file);
    if (err->offset != SP_NO_OFFSET)
        fprintf(stderr, "at byte %" PRIu64 " (0x%" PRIx64 "), ", err->offset, err->offset);
    if (err->field[0])
        fprintf(stderr, "field %s: ", err->field);
    fprintf(stderr, "%s\n", err->message);
    if (json) {
        jw_t w;
        jw_init(&w, stdout, false);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "error");
        jw_error(&w, err);
        jw_obj_end(&w);
        jw_end(&w);
    }
    return exit_code_for(err->code);
}

void jw_error(jw_t *w, const sp_error_t *err)
{
    if (!err || err->code == SP_OK) {
        jw_null(w);
        return;
    }
    jw_obj(w);
    jw_key(w, "code");
    jw_str(w, sp_status_token(err->code));
    jw_key(w, "exit_code");
    jw_int(w, exit_code_for(err->code));
    jw_key(w, "message");
    jw_str(w, err->message);
    jw_key(w, "file");
    if (err->file[0]) jw_str(w, err->file); else jw_null(w);
    jw_key(w, "offset");
    if (err->offset != SP_NO_OFFSET) jw_uint(w, err->offset); else jw_null(w);
    jw_key(w, "field");
    if (err->field[0]) jw_str(w, err->field); else jw_null(w);
    jw_obj_end(w);
}

const char *fmt_iec(uint64_t bytes, char *buf, size_t n)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes < 1024) {
        snprintf(buf, n, "%" PRIu64 " B", bytes);
        return buf;
    }
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, n, "%.1f %s", v, units[u]);
    return buf;
}

char *mutf8_display(sp_str_t s) { return sp_mutf8_display(s.ptr, s.len); }

char *mutf8_term(sp_str_t s)
{
    char *d = mutf8_display(s);
    char *t = d ? term_safe(d) : NULL;
    free(d);
    return t;
}

int term_width(const char *s)
{
    mbstate_t st;
    memset(&st, 0, sizeof st);
    int w = 0;
    size_t n = strlen(s);
    while (n) {
        wchar_t wc;
        size_t k = mbrtowc(&wc, s, n, &st);
        if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
            /* not decodable in this locale: count bytes */
            memset(&st, 0, sizeof st);
            k = 1;
            w += 1;
        } else {
            int cw = wcwidth(wc);
            w += cw < 0 ? 1 : cw;
        }
        s += k;
        n -= k;
    }
    return w;
}

void term_cell(FILE *f, const char *s, int width)
{
    int w = term_width(s);
    if (w <= width) {
        fputs(s, f);
        for (; w < width; w++)
            fputc(' ', f);
        return;
    }
    /* cut at a character boundary, leaving one column for the ellipsis */
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t n = strlen(s), used = 0;
    int cols = 0;
    while (used < n) {
        wchar_t wc;
        size_t k = mbrtowc(&wc, s + used, n - used, &st);
        int cw = 1;
        if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
            memset(&st, 0, sizeof st);
            k = 1;
        } else if ((cw = wcwidth(wc)) < 0) {
            cw = 1;
        }
        if (cols + cw > width - 1)
            break;
        cols += cw;
        used += k;
    }
    fwrite(s, 1, used, f);
    fputs("\xe2\x80\xa6", f); /* U+2026 */
    for (cols++; cols < width; cols++)
        fputc(' ', f);
}

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0xC2 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : s[0] < 0xF5 ? 4 : 0;
    if (!len || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

/* ---- JSON ---- */

void jw_init(jw_t *w, FILE *f, bool pretty)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->pretty = pretty;
}

static void indent(jw_t *w)
{
    if (!w->pretty)
        return;
    fputc('\n', w->f);
    for (int i = 0; i < w->depth; i++)
        fputs("  ", w->f);
}

static void before_value(jw_t *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->depth > 0) {
        if (w->need_comma[w->depth])
            fputc(',', w->f);
        indent(w);
        w->need_comma[w->depth] = true;
    }
}

static void open_(jw_t *w, char c)
{
    before_value(w);
    fputc(c, w->f);
    if (w->depth < 63)
        w->depth++;
    w->need_comma[w->depth] = false;
}

static void close_(jw_t *w, char c)
{
    bool had = w->need_comma[w->depth];
    w->depth--;
    if (had)
        indent(w);
    fputc(c, w->f);
}

void jw_obj(jw_t *w) { open_(w, '{'); }
void jw_obj_end(jw_t *w) { close_(w, '}'); }
void jw_arr(jw_t *w) { open_(w, '['); }
void jw_arr_end(jw_t *w) { close_(w, ']'); }

static void put_escaped(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t k = utf8_seq((const unsigned char *)s + i, n - i);
            if (k) {
                i += k - 1;
                continue;
            }
            /* not UTF-8 (a file name in another encoding): JSON must stay valid */
            fwrite(s + run, 1, i - run, f);
            fputs("\\ufffd", f);
            run = i + 1;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        fwrite(s + run, 1, i - run, f);
        run = i + 1;
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default: fprintf(f, "\\u%04x", c); break;
        }
    }
    fwrite(s + run, 1, n - run, f);
    fputc('"', f);
}

void jw_key(jw_t *w, const char *k)
{
    before_value(w);
    put_escaped(w->f, k, strlen(k));
    fputs(w->pretty ? ": " : ":", w->f);
    w->after_key = true;
}

void jw_str(jw_t *w, const char *s) { jw_strn(w, s, strlen(s)); }

void jw_strn(jw_t *w, const char *s, size_t n)
{
    before_value(w);
    put_escaped(w->f, s, n);
}

void jw_mutf8(jw_t *w, sp_str_t s)
{
    if (!s.ptr) {
        jw_null(w);
        return;
    }
    /* fast path: ASCII is the same in modified UTF-8 */
    bool ascii = true;
    for (uint32_t i = 0; i < s.len && ascii; i++)
        ascii = s.ptr[i] >= 1 && s.ptr[i] < 0x80;
    if (ascii) {
        jw_strn(w, (const char *)s.ptr, s.len);
        return;
    }
    char *d = mutf8_display(s);
    jw_str(w, d ? d : "");
    free(d);
}

void jw_mutf8_or_null(jw_t *w, sp_str_t s)
{
    if (s.len == 0)
        jw_null(w);
    else
        jw_mutf8(w, s);
}

void jw_int(jw_t *w, int64_t v)
{
    before_value(w);
    fprintf(w->f, "%" PRId64, v);
}

void jw_uint(jw_t *w, uint64_t v)
{
    before_value(w);
    fprintf(w->f, "%" PRIu64, v);
}

void jw_bool(jw_t *w, bool v)
{
    before_value(w);
    fputs(v ? "true" : "false", w->f);
}

void jw_null(jw_t *w)
{
    before_value(w);
    fputs("null", w->f);
}

void jw_end(jw_t *w) { fputc('\n', w->f); }

/* s with control characters shown as \xNN (a stored uid must not reach the terminal raw); malloc'd */
char *term_safe(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n * 4 + 1), *q = o;
    if (!o)
        return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            q += sprintf(q, "\\x%02X", *p);
        else
            *q++ = (char)*p;
    }
    *q = '\0';
    return o;
}
