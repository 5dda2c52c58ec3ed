/* Storage front end: parsing locations, and the generic helpers every
 * command uses on any backend (read_all, write_all, copy). */
#include "sp_store.h"
#include "sp_s3.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *xstrndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* Make a local path absolute and drop ".", "..", "//" and the trailing '/'
 * (lexically: symlinks are never resolved, so ".." cannot sneak through one). */
static char *normalise_local(const char *path)
{
    char cwd[PATH_MAX];
    size_t need = strlen(path) + 2;
    if (path[0] != '/') {
        if (!getcwd(cwd, sizeof cwd))
            return NULL;
        need += strlen(cwd);
    }
    char *joined = malloc(need);
    if (!joined)
        return NULL;
    if (path[0] != '/')
        snprintf(joined, need, "%s/%s", cwd, path);
    else
        snprintf(joined, need, "%s", path);
    char *out = malloc(need + 1);
    if (!out) {
        free(joined);
        return NULL;
    }
    size_t o = 0;
    const char *p = joined;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 0)
            break;
        if (n == 1 && p[0] == '.') {
            /* skip */
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--; /* drop the '/' too */
        } else {
            out[o++] = '/';
            memcpy(out + o, p, n);
            o += n;
        }
        p += n;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    free(joined);
    return out;
}

bool sp_is_archive_name(const char *path);

/* RFC 3986 %XX decoding of a file: URI path; NULL on a bad escape or a NUL. */
static char *percent_decode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            *o++ = s[i];
            continue;
        }
        unsigned v;
        if (i + 2 >= n || sscanf(s + i + 1, "%2x", &v) != 1 || !isxdigit((unsigned char)s[i + 1]) ||
            !isxdigit((unsigned char)s[i + 2]) || v == 0) {
            free(out);
            return NULL;
        }
        *o++ = (char)v;
        i += 2;
    }
    *o = '\0';
    return out;
}

sp_status_t sp_location_parse(const char *text, sp_location_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location", "empty location");
    const char *p = text;
    if (strncmp(p, "s3://", 5) == 0 || strncmp(p, "s3a://", 6) == 0 || strncmp(p, "s3p://", 6) == 0) {
        const char *b = strstr(p, "://") + 3;
        const char *slash = strchr(b, '/');
        size_t blen = slash ? (size_t)(slash - b) : strlen(b);
        if (blen == 0)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location", "%s: no bucket name", text);
        out->kind = SP_LOC_S3;
        out->store_location = malloc(blen + 6);
        if (out->store_location)
            snprintf(out->store_location, blen + 6, "s3://%.*s", (int)blen, b);
        const char *k = slash ? slash + 1 : "";
        size_t klen = strlen(k);
        while (klen && k[klen - 1] == '/')
            klen--;
        out->key = xstrndup(k, klen);
        goto done;
    }
    char *decoded = NULL;
    if (strncmp(p, "file:", 5) == 0) {
        /* file:/p, file:///p and file://localhost/p name a local path; %XX escapes are decoded */
        p += 5;
        if (strncmp(p, "//", 2) == 0) {
            p += 2;
            if (strncmp(p, "localhost/", 10) == 0)
                p += 9;
            else if (*p != '/')
                return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "",
                                    "%s: file:// URIs naming another host are not supported", text);
        }
        decoded = percent_decode(p);
        if (!decoded)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "%s: bad %%-escape in the URI", text);
        p = decoded;
    } else if (strstr(p, "://")) {
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "",
                            "%s: unknown scheme (sp reads local paths, file:// and s3:// URIs, and .tar / .tar.zst "
                            "archives)",
                            text);
    }
    /* an archive, optionally followed by "//path/inside" */
    const char *inner = NULL;
    size_t outer_len = strlen(p);
    for (const char *q = strstr(p, "//"); q; q = strstr(q + 1, "//")) {
        char *head = xstrndup(p, (size_t)(q - p));
        bool arch = head && sp_is_archive_name(head);
        free(head);
        if (arch) {
            outer_len = (size_t)(q - p);
            inner = q + 2;
            break;
        }
    }
    char *outer = xstrndup(p, outer_len);
    if (!outer)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    if (!inner && !sp_is_archive_name(outer)) {
        /* "backup.tar.zst/" (a shell completing a name adds no slash, but people do): the archive, when that
         * is an existing file */
        size_t n = strlen(outer);
        while (n > 1 && outer[n - 1] == '/')
            n--;
        char *bare = xstrndup(outer, n);
        struct stat bs;
        if (bare && n < strlen(outer) && sp_is_archive_name(bare) && stat(bare, &bs) == 0 && !S_ISDIR(bs.st_mode)) {
            free(outer);
            outer = bare;
            bare = NULL;
        }
        free(bare);
    }
    if (inner || sp_is_archive_name(outer)) {
        out->kind = SP_LOC_ARCHIVE;
        out->store_location = normalise_local(outer);
        const char *k = inner ? inner : "";
        while (*k == '/')
            k++;
        size_t klen = strlen(k);
        while (klen && k[klen - 1] == '/')
            klen--;
        out->key = xstrndup(k, klen);
    } else {
        out->kind = SP_LOC_LOCAL;
        out->store_location = xstrndup("/", 1);
        out->key = normalise_local(outer);
    }
    free(outer);
    free(decoded);
done:
    if (!out->store_location || !out->key) {
        sp_location_free(out);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    return SP_OK;
}

void sp_location_free(sp_location_t *loc)
{
    if (!loc)
        return;
    free(loc->store_location);
    free(loc->key);
    loc->store_location = loc->key = NULL;
}

sp_status_t sp_store_open_location(const sp_location_t *loc, bool for_write, int threads, sp_store_t **out,
                                   sp_error_t *err)
{
    switch (loc->kind) {
    case SP_LOC_LOCAL:
        return sp_store_open_local(out, err);
    case SP_LOC_ARCHIVE:
        return sp_store_open_archive(loc->store_location, for_write, threads, out, err);
    case SP_LOC_S3:
        /* "s3://bucket": the bucket's store, with the default S3 configuration (sp_s3.h) */
        return sp_store_open_s3(loc->store_location + 5, NULL, out, err);
    }
    sp_error_set_file(err, loc->store_location);
    return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location", "unknown kind of location");
}

void sp_store_close(sp_store_t *s)
{
    if (s)
        s->ops->close(s);
}

sp_status_t sp_store_read_all(sp_store_t *s, const char *key, size_t max, uint8_t **out, size_t *len,
                              sp_error_t *err)
{
    sp_store_reader_t *r;
    *out = NULL;
    *len = 0;
    sp_status_t st = s->ops->open_read(s, key, &r, err);
    if (st)
        return st;
    size_t cap = 1 << 16, n = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (!b) {
            st = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
            break;
        }
        if (cap - n < 65536) {
            if (cap > max + 65536) {
                sp_error_set_file(err, key);
                st = sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "larger than the %zu bytes allowed", max);
                break;
            }
            uint8_t *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                continue;
            }
            b = nb;
            cap *= 2;
        }
        size_t got;
        st = s->ops->read(r, b + n, cap - n, &got, err);
        if (st || got == 0)
            break;
        n += got;
    }
    s->ops->close_read(r);
    if (st) {
        free(b);
        return st;
    }
    *out = b;
    *len = n;
    return SP_OK;
}

sp_status_t sp_store_write_all(sp_store_t *s, const char *key, const void *buf, size_t len, sp_error_t *err)
{
    sp_store_writer_t *w;
    sp_status_t st = s->ops->open_write(s, key, (int64_t)len, &w, err);
    if (st)
        return st;
    st = s->ops->write(w, buf, len, err);
    if (st) {
        s->ops->abort(w);
        return st;
    }
    return s->ops->commit(w, err);
}

sp_status_t sp_store_copy(sp_store_t *src, const char *src_key, sp_store_t *dst, const char *dst_key,
                          uint64_t *bytes, sp_error_t *err)
{
    if (bytes)
        *bytes = 0;
    /* the same namespace: the same store, or two instances of one backend at one location (relocate opens
     * the destination store itself; two local stores are one file system) */
    bool same = src == dst || (src->ops == dst->ops && src->location && dst->location &&
                               strcmp(src->location, dst->location) == 0);
    if (same && src->ops->copy) {
        sp_status_t st = src->ops->copy(src, src_key, dst_key, err);
        if (!st && bytes) {
            sp_store_stat_t ss;
            if (src->ops->stat(src, dst_key, &ss, NULL) == SP_OK && ss.size > 0)
                *bytes = (uint64_t)ss.size;
        }
        return st;
    }
    if (!same && src->ops == dst->ops && dst->ops->copy_from) {
        /* two stores of one backend that may copy between themselves (S3: two buckets, one endpoint) */
        sp_status_t st = dst->ops->copy_from(dst, src, src_key, dst_key, err);
        if (st != SP_ERR_UNSUPPORTED) {
            sp_store_stat_t ss;
            if (!st && bytes && dst->ops->stat(dst, dst_key, &ss, NULL) == SP_OK && ss.size > 0)
                *bytes = (uint64_t)ss.size;
            return st;
        }
    }
    sp_store_stat_t ss;
    int64_t hint = -1;
    if (src->ops->stat(src, src_key, &ss, NULL) == SP_OK && ss.exists)
        hint = ss.size;
    sp_store_reader_t *r;
    sp_status_t st = src->ops->open_read(src, src_key, &r, err);
    if (st)
        return st;
    sp_store_writer_t *w;
    st = dst->ops->open_write(dst, dst_key, hint, &w, err);
    if (st) {
        src->ops->close_read(r);
        return st;
    }
    enum { BUF = 1 << 20 };
    uint8_t *buf = malloc(BUF);
    uint64_t total = 0;
    if (!buf)
        st = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    while (!st) {
        size_t got;
        st = src->ops->read(r, buf, BUF, &got, err);
        if (st || got == 0)
            break;
        st = dst->ops->write(w, buf, got, err);
        total += got;
    }
    free(buf);
    src->ops->close_read(r);
    if (st) {
        dst->ops->abort(w);
        return st;
    }
    st = dst->ops->commit(w, err);
    if (!st && bytes)
        *bytes = total;
    return st;
}
