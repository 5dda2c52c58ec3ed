/*
 * s3_xml.c - the little XML S3 speaks: find an element, decode its text,
 * escape a key.  S3's answers are flat, namespace-free documents with no
 * attributes on the elements read here, so a scanner is enough; anything
 * unexpected simply is not found.
 */
#define _GNU_SOURCE
#include "s3_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Find "<name>" or "<name " (with attributes) starting at p; returns the position after '>' or NULL. */
static const char *open_tag(const char *xml, size_t n, size_t from, const char *name, size_t *tag_start)
{
    size_t nl = strlen(name);
    for (size_t i = from; i + nl + 2 <= n; i++) {
        if (xml[i] != '<' || memcmp(xml + i + 1, name, nl) != 0)
            continue;
        char c = xml[i + 1 + nl];
        if (c != '>' && c != ' ' && c != '/' && c != '\t' && c != '\n' && c != '\r')
            continue;
        const char *gt = memchr(xml + i, '>', n - i);
        if (!gt)
            return NULL;
        *tag_start = i;
        return gt + 1;
    }
    return NULL;
}

bool s3_xml_next(const char *xml, size_t n, size_t *pos, const char *name, const char **start, size_t *len)
{
    size_t ts;
    const char *body = open_tag(xml, n, *pos, name, &ts);
    if (!body)
        return false;
    if (body[-2] == '/') { /* <name/> */
        *start = body;
        *len = 0;
        *pos = (size_t)(body - xml);
        return true;
    }
    char close[80];
    int cl = snprintf(close, sizeof close, "</%s>", name);
    if (cl < 0 || (size_t)cl >= sizeof close)
        return false;
    size_t off = (size_t)(body - xml);
    const char *end = memmem(body, n - off, close, (size_t)cl);
    if (!end)
        return false;
    *start = body;
    *len = (size_t)(end - body);
    *pos = (size_t)(end - xml) + (size_t)cl;
    return true;
}

static bool put_utf8(char *out, size_t outsz, size_t *o, unsigned long cp)
{
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else if (cp < 0x110000) {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    } else {
        return false;
    }
    if (*o + k >= outsz)
        return false;
    memcpy(out + *o, b, k);
    *o += k;
    return true;
}

bool s3_xml_text(const char *s, size_t n, char *out, size_t outsz)
{
    size_t o = 0;
    if (outsz == 0)
        return false;
    for (size_t i = 0; i < n;) {
        if (s[i] == '&') {
            const char *semi = memchr(s + i, ';', n - i);
            if (!semi)
                return false;
            size_t el = (size_t)(semi - (s + i)) + 1;
            static const struct {
                const char *name;
                char c;
            } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
            bool done = false;
            for (size_t k = 0; k < sizeof ents / sizeof ents[0]; k++)
                if (el == strlen(ents[k].name) && memcmp(s + i, ents[k].name, el) == 0) {
                    if (o + 1 >= outsz)
                        return false;
                    out[o++] = ents[k].c;
                    done = true;
                    break;
                }
            if (!done) {
                if (el < 4 || s[i + 1] != '#')
                    return false;
                unsigned long cp = s[i + 2] == 'x' || s[i + 2] == 'X' ? strtoul(s + i + 3, NULL, 16)
                                                                      : strtoul(s + i + 2, NULL, 10);
                if (cp == 0 || !put_utf8(out, outsz, &o, cp))
                    return false;
            }
            i += el;
        } else {
            if (o + 1 >= outsz)
                return false;
            out[o++] = s[i++];
        }
    }
    out[o] = '\0';
    return true;
}

bool s3_xml_get(const char *xml, size_t n, const char *name, char *out, size_t outsz)
{
    size_t pos = 0;
    const char *start;
    size_t len;
    if (!s3_xml_next(xml, n, &pos, name, &start, &len))
        return false;
    return s3_xml_text(start, len, out, outsz);
}

bool s3_xml_escape(s3_buf_t *b, const char *s)
{
    for (; *s; s++) {
        const char *e = NULL;
        switch (*s) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&quot;"; break;
        case '\'': e = "&apos;"; break;
        case '\r': e = "&#13;"; break;
        case '\n': e = "&#10;"; break;
        default: break;
        }
        if (!(e ? s3_buf_add(b, e, strlen(e)) : s3_buf_add(b, s, 1)))
            return false;
    }
    return true;
}

int64_t s3_parse_iso8601(const char *s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int ms = 0;
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p)
        return 0;
    if (*p == '.') {
        p++;
        int digits = 0;
        while (isdigit((unsigned char)*p)) {
            if (digits < 3)
                ms = ms * 10 + (*p - '0');
            digits++;
            p++;
        }
        while (digits < 3) {
            ms *= 10;
            digits++;
        }
    }
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return 0;
    return (int64_t)t * 1000 + ms;
}
