/*
 * store_s3.c - the S3 store (see sp_s3.h): the store operations as S3
 * requests, run by the transfer engine of s3_http.c.
 */
#define _GNU_SOURCE
#include "sp_s3.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3_internal.h"
#include "strmap.h"

#define MiB (1024 * 1024)
#define READ_CHUNK (8 * MiB)        /* bytes of one ranged GET */
#define READ_AHEAD 2                /* chunks fetched ahead of the one being read */
#define WRITE_INFLIGHT 4            /* parts of one upload in flight */
#define MAX_SINGLE_COPY (5LL * 1024 * MiB) /* CopyObject's limit; above it UploadPartCopy */
#define DELETE_BATCH 1000           /* DeleteObjects' limit */
#define KEY_MAX 4096

typedef struct s3s {
    char *bucket;
    char *url_base;     /* scheme://host[:port][/path][/bucket]: + "/" + encoded key */
    char *identity;     /* endpoint + access key id: two stores with the same one can copy between them */
    char *token;        /* session token, or NULL */
    bool is_signed;
    int64_t part_size;
    int64_t threshold;
    s3_engine_t *eng;
    /* what this store knows of objects without asking: what it wrote itself, and the listings of prefixes
       that were stat'ed often (a verification of N files is then a few ListObjectsV2 pages, not N HEADs);
       only positive knowledge: a key not known is asked for with HEAD */
    pthread_mutex_t klock;
    strmap_t kmap;       /* key -> index into kv */
    struct known { int64_t size, mtime_ms; bool valid; } *kv;
    size_t kn, kcap;
    strmap_t pmap;       /* parent prefix -> index into pcount */
    uint32_t *pcount;    /* stats under that prefix so far; UINT32_MAX once listed */
    size_t pn, pcap;
} s3s_t;

#define LIST_AFTER_STATS 16 /* list a prefix once this many of its keys were stat'ed */

static void known_set(s3s_t *s, const char *key, int64_t size, int64_t mtime_ms, bool valid)
{
    pthread_mutex_lock(&s->klock);
    uint32_t i = strmap_get(&s->kmap, key);
    if (i == UINT32_MAX && valid && s->kn < UINT32_MAX - 1) {
        if (s->kn == s->kcap) {
            size_t cap = s->kcap ? s->kcap * 2 : 256;
            struct known *nv = realloc(s->kv, cap * sizeof *nv);
            if (nv) {
                s->kv = nv;
                s->kcap = cap;
            }
        }
        if (s->kn < s->kcap && strmap_put(&s->kmap, key, (uint32_t)s->kn, NULL))
            i = (uint32_t)s->kn++;
    }
    if (i != UINT32_MAX)
        s->kv[i] = (struct known){size, mtime_ms, valid};
    pthread_mutex_unlock(&s->klock);
}

static bool known_get(s3s_t *s, const char *key, sp_store_stat_t *out)
{
    pthread_mutex_lock(&s->klock);
    uint32_t i = strmap_get(&s->kmap, key);
    bool found = i != UINT32_MAX && s->kv[i].valid;
    if (found) {
        memset(out, 0, sizeof *out);
        out->exists = true;
        out->size = s->kv[i].size;
        out->mtime_ms = s->kv[i].mtime_ms;
    }
    pthread_mutex_unlock(&s->klock);
    return found;
}

/* Count a stat under `parent`; true once, when the prefix is worth listing. */
static bool worth_listing(s3s_t *s, const char *parent)
{
    pthread_mutex_lock(&s->klock);
    bool list = false;
    uint32_t i = strmap_get(&s->pmap, parent);
    if (i == UINT32_MAX && s->pn == s->pcap) {
        size_t cap = s->pcap ? s->pcap * 2 : 16;
        uint32_t *nv = realloc(s->pcount, cap * sizeof *nv);
        if (nv) {
            s->pcount = nv;
            s->pcap = cap;
        }
    }
    if (i == UINT32_MAX && s->pn < s->pcap && strmap_put(&s->pmap, parent, (uint32_t)s->pn, NULL)) {
        i = (uint32_t)s->pn++;
        s->pcount[i] = 0;
    }
    if (i != UINT32_MAX && s->pcount[i] != UINT32_MAX && ++s->pcount[i] >= LIST_AFTER_STATS) {
        s->pcount[i] = UINT32_MAX;
        list = true;
    }
    pthread_mutex_unlock(&s->klock);
    return list;
}

static int64_t now_ms_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ default configuration */

static pthread_mutex_t def_lock = PTHREAD_MUTEX_INITIALIZER;
static sp_s3_config_t def_cfg;
static char *def_str[7];

static void free_def(void)
{
    for (size_t i = 0; i < sizeof def_str / sizeof def_str[0]; i++) {
        if (def_str[i]) {
            memset(def_str[i], 0, strlen(def_str[i])); /* may hold a secret */
            free(def_str[i]);
        }
        def_str[i] = NULL;
    }
    memset(&def_cfg, 0, sizeof def_cfg);
}

sp_status_t sp_s3_set_default_config(const sp_s3_config_t *cfg, sp_error_t *err)
{
    pthread_mutex_lock(&def_lock);
    free_def();
    sp_status_t st = SP_OK;
    if (cfg) {
        def_cfg = *cfg;
        const char **fields[] = {&def_cfg.endpoint, &def_cfg.region, &def_cfg.access_key_id,
                                 &def_cfg.secret_access_key, &def_cfg.session_token, &def_cfg.ca_bundle};
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
            if (!*fields[i])
                continue;
            def_str[i] = strdup(*fields[i]);
            if (!def_str[i]) {
                free_def();
                st = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
                break;
            }
            *fields[i] = def_str[i];
        }
    }
    pthread_mutex_unlock(&def_lock);
    return st;
}

/* ------------------------------------------------------------------ URIs */

bool sp_s3_split_uri(const char *uri, size_t len, char *bucket, size_t bucketsz, char *key, size_t keysz)
{
    size_t skip;
    if (len >= 5 && memcmp(uri, "s3://", 5) == 0)
        skip = 5;
    else if (len >= 6 && (memcmp(uri, "s3a://", 6) == 0 || memcmp(uri, "s3p://", 6) == 0))
        skip = 6;
    else
        return false;
    const char *b = uri + skip;
    size_t rest = len - skip;
    const char *slash = memchr(b, '/', rest);
    size_t bl = slash ? (size_t)(slash - b) : rest;
    if (bl == 0 || bl >= bucketsz)
        return false;
    memcpy(bucket, b, bl);
    bucket[bl] = '\0';
    const char *k = slash ? slash + 1 : b + rest;
    size_t kl = (size_t)(b + rest - k);
    while (kl && *k == '/') {
        k++;
        kl--;
    }
    if (kl >= keysz)
        return false;
    memcpy(key, k, kl);
    key[kl] = '\0';
    return true;
}

static bool bucket_name_ok(const char *b)
{
    size_t n = strlen(b);
    if (n == 0 || n > 255)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if (!(isalnum(c) || c == '-' || c == '.' || c == '_'))
            return false;
    }
    return true;
}

/* A bucket name usable as a host name label (for virtual-hosted addressing). */
static bool bucket_dns_ok(const char *b, bool https)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63 || !isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if (!(islower(c) || isdigit(c) || c == '-' || c == '.'))
            return false;
        if (c == '.' && (https || b[i + 1] == '.'))
            return false; /* a dotted name does not match the wildcard certificate */
    }
    return true;
}

static char *key_url(const s3s_t *s, const char *key, const char *query)
{
    s3_buf_t b = {0};
    bool ok = s3_buf_add(&b, s->url_base, strlen(s->url_base));
    /* the bucket itself: "http://host/bucket" (path-style) or "http://bucket.host/" */
    const char *hs = strstr(s->url_base, "://") + 3;
    if (key[0] || !strchr(hs, '/'))
        ok = ok && s3_buf_add(&b, "/", 1);
    ok = ok && s3_uri_encode(&b, key, true);
    if (query && query[0])
        ok = ok && s3_buf_add(&b, "?", 1) && s3_buf_add(&b, query, strlen(query));
    if (!ok) {
        s3_buf_free(&b);
        return NULL;
    }
    return (char *)b.p;
}

/* ------------------------------------------------------------------ requests */

static bool req_init(const s3s_t *s, s3_req_t *r, const char *method, const char *key, const char *query)
{
    memset(r, 0, sizeof *r);
    r->method = method;
    r->bucket = s->bucket;
    r->key = key;
    r->url = key_url(s, key, query);
    if (!r->url)
        return false;
    if (s->is_signed && !s3_req_header(r, "x-amz-content-sha256: UNSIGNED-PAYLOAD"))
        return false;
    if (s->token && !s3_req_header(r, "x-amz-security-token: %s", s->token))
        return false;
    return true;
}

static sp_status_t nomem(sp_error_t *err)
{
    return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
}

static s3s_t *S(sp_store_t *st)
{
    return st->impl;
}

/* "a=1&b=2" with values percent-encoded, names in order: the canonical query SigV4 signs. */
static char *list_query(const char *token, const char *prefix, int max_keys)
{
    s3_buf_t q = {0};
    bool ok = true;
    if (token) {
        ok = s3_buf_add(&q, "continuation-token=", 19) && s3_uri_encode(&q, token, false) && s3_buf_add(&q, "&", 1);
    }
    ok = ok && s3_buf_add(&q, "list-type=2", 11);
    if (max_keys > 0)
        ok = ok && s3_buf_addf(&q, "&max-keys=%d", max_keys);
    ok = ok && s3_buf_add(&q, "&prefix=", 8) && s3_uri_encode(&q, prefix, false);
    if (!ok) {
        s3_buf_free(&q);
        return NULL;
    }
    return (char *)q.p;
}

/* One ListObjectsV2 page. */
static sp_status_t list_page(s3s_t *s, const char *prefix, const char *token, int max_keys, s3_req_t *r,
                             sp_error_t *err)
{
    char *q = list_query(token, prefix, max_keys);
    if (!q || !req_init(s, r, "GET", "", q)) {
        free(q);
        s3_req_free(r);
        return nomem(err);
    }
    free(q);
    r->keep_body = true;
    s3_run(s->eng, r);
    if (!s3_req_ok(r)) {
        r->key = prefix;
        sp_status_t st = s3_req_error(r, "ListObjectsV2", err);
        s3_req_free(r);
        return st;
    }
    return SP_OK;
}

/* ------------------------------------------------------------------ stat, list */

static sp_status_t s3_list(sp_store_t *st, const char *key, sp_store_list_cb cb, void *user, sp_error_t *err);

typedef struct learn {
    s3s_t *s;
    const char *parent;
} learn_t;

static int learn_entry(const sp_store_entry_t *e, void *user)
{
    learn_t *l = user;
    char *k = NULL;
    if (asprintf(&k, "%s/%s", l->parent, e->key) >= 0)
        known_set(l->s, k, e->st.size, e->st.mtime_ms, true);
    free(k);
    return 0;
}

static sp_status_t s3_stat(sp_store_t *st, const char *key, sp_store_stat_t *out, sp_error_t *err)
{
    s3s_t *s = S(st);
    memset(out, 0, sizeof *out);
    out->size = -1;
    s3_req_t r = {0};
    if (key[0] && known_get(s, key, out))
        return SP_OK;
    const char *slash = strrchr(key, '/');
    if (slash && slash > key) {
        /* many keys of one prefix asked for: one listing answers them all */
        char *parent = strndup(key, (size_t)(slash - key));
        if (parent && worth_listing(s, parent)) {
            learn_t l = {s, parent};
            s3_list(st, parent, learn_entry, &l, NULL);
        }
        free(parent);
        if (known_get(s, key, out))
            return SP_OK;
        out->size = -1;
    }
    if (key[0]) {
        if (!req_init(s, &r, "HEAD", key, NULL)) {
            s3_req_free(&r);
            return nomem(err);
        }
        s3_run(s->eng, &r);
        if (s3_req_ok(&r)) {
            out->exists = true;
            out->size = r.content_length;
            out->mtime_ms = r.last_modified_ms;
            s3_req_free(&r);
            return SP_OK;
        }
        if (r.status != 404 || r.cc != CURLE_OK) {
            /* an answer to HEAD has no body: ask for one byte to learn S3's error code for the message */
            s3_req_t g = {0};
            memset(&g, 0, sizeof g);
            if (r.cc == CURLE_OK && req_init(s, &g, "GET", key, NULL) && s3_req_header(&g, "Range: bytes=0-0")) {
                s3_run(s->eng, &g);
                if (!s3_req_ok(&g) && g.s3_code[0] && g.status == r.status) {
                    s3_req_free(&r);
                    r = g;
                    memset(&g, 0, sizeof g);
                }
            }
            s3_req_free(&g);
            sp_status_t e = s3_req_error(&r, "HEAD", err);
            s3_req_free(&r);
            return e;
        }
        s3_req_free(&r);
    }
    /* not an object: a prefix of some ("a directory")? */
    char *prefix = NULL;
    if (key[0] && asprintf(&prefix, "%s/", key) < 0)
        return nomem(err);
    sp_status_t e = list_page(s, prefix ? prefix : "", NULL, 1, &r, err);
    free(prefix);
    if (e)
        return e;
    size_t pos = 0, len;
    const char *start;
    if (s3_xml_next((const char *)r.resp.p, r.resp.n, &pos, "Contents", &start, &len)) {
        out->exists = true;
        out->is_dir = true;
    }
    s3_req_free(&r);
    return SP_OK;
}

static sp_status_t s3_list(sp_store_t *st, const char *key, sp_store_list_cb cb, void *user, sp_error_t *err)
{
    s3s_t *s = S(st);
    char *prefix = NULL;
    if (asprintf(&prefix, "%s%s", key, key[0] ? "/" : "") < 0)
        return nomem(err);
    size_t pl = strlen(prefix);
    char *token = NULL;
    char *k = malloc(KEY_MAX);
    sp_status_t rc = k ? SP_OK : nomem(err);
    while (!rc) {
        s3_req_t r = {0};
        if ((rc = list_page(s, prefix, token, 0, &r, err)))
            break;
        const char *x = (const char *)r.resp.p;
        size_t n = r.resp.n, pos = 0, len;
        const char *c;
        while (!rc && s3_xml_next(x, n, &pos, "Contents", &c, &len)) {
            char size[32] = "", mod[64] = "";
            if (!s3_xml_get(c, len, "Key", k, KEY_MAX))
                continue;
            s3_xml_get(c, len, "Size", size, sizeof size);
            s3_xml_get(c, len, "LastModified", mod, sizeof mod);
            size_t kl = strlen(k);
            if (kl <= pl || strncmp(k, prefix, pl) != 0 || k[kl - 1] == '/')
                continue; /* outside, the prefix itself, or a "folder" marker */
            sp_store_entry_t e;
            memset(&e, 0, sizeof e);
            e.key = k + pl;
            e.st.exists = true;
            e.st.size = strtoll(size, NULL, 10);
            e.st.mtime_ms = s3_parse_iso8601(mod);
            int stop = cb(&e, user);
            if (stop)
                rc = (sp_status_t)stop;
        }
        char trunc[16] = "";
        s3_xml_get(x, n, "IsTruncated", trunc, sizeof trunc);
        free(token);
        token = NULL;
        if (!rc && strcmp(trunc, "true") == 0) {
            char *t = malloc(2048);
            if (!t || !s3_xml_get(x, n, "NextContinuationToken", t, 2048) || !t[0]) {
                free(t);
                s3_req_free(&r);
                if (!t)
                    rc = nomem(err);
                else {
                    sp_error_set_file(err, st->location);
                    rc = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "ListObjectsV2 of \"%s\": truncated answer "
                                      "without a continuation token", prefix);
                }
                break;
            }
            token = t;
        }
        s3_req_free(&r);
        if (!token)
            break;
    }
    free(token);
    free(prefix);
    free(k);
    return rc;
}

/* ------------------------------------------------------------------ reading */

typedef struct chunk {
    s3_req_t req;
    int64_t off;
    bool used;
} chunk_t;

struct sp_store_reader {
    s3s_t *s;
    char *key;
    int64_t size;          /* total bytes (known after the first chunk) */
    int64_t next_off;      /* next byte to request */
    char etag[160];
    chunk_t chunks[READ_AHEAD + 1];
    int cur;               /* chunk being read */
    size_t pos;            /* in it */
};

static bool submit_chunk(sp_store_reader_t *r, chunk_t *c, int64_t off)
{
    char *range = NULL;
    if (!req_init(r->s, &c->req, "GET", r->key, NULL) ||
        asprintf(&range, "Range: bytes=%" PRId64 "-%" PRId64, off, off + READ_CHUNK - 1) < 0 ||
        !s3_req_header(&c->req, "%s", range) || (r->etag[0] && !s3_req_header(&c->req, "If-Match: %s", r->etag))) {
        free(range);
        s3_req_free(&c->req);
        return false;
    }
    free(range);
    c->req.keep_body = true;
    c->off = off;
    c->used = true;
    s3_submit(r->s->eng, &c->req);
    return true;
}

static void read_ahead(sp_store_reader_t *r)
{
    for (int i = 1; i <= READ_AHEAD && r->next_off < r->size; i++) {
        chunk_t *c = &r->chunks[(r->cur + i) % (READ_AHEAD + 1)];
        if (c->used)
            continue;
        if (!submit_chunk(r, c, r->next_off))
            return; /* fetched later, when needed */
        r->next_off += READ_CHUNK;
    }
}

static sp_status_t check_chunk(sp_store_reader_t *r, chunk_t *c, sp_error_t *err)
{
    s3_wait(r->s->eng, &c->req);
    if (c->req.status == 412) {
        sp_error_set_file(err, "");
        char where[KEY_MAX + 300];
        snprintf(where, sizeof where, "s3://%s/%s", r->s->bucket, r->key);
        sp_error_set_file(err, where);
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "the object changed while it was being read");
    }
    if (!s3_req_ok(&c->req))
        return s3_req_error(&c->req, "GET", err);
    int64_t want = r->size - c->off < READ_CHUNK ? r->size - c->off : READ_CHUNK;
    if ((int64_t)c->req.resp.n != want) {
        char where[KEY_MAX + 300];
        snprintf(where, sizeof where, "s3://%s/%s", r->s->bucket, r->key);
        sp_error_set_file(err, where);
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "GET of bytes %" PRId64 "- answered %zu bytes, expected %" PRId64,
                            c->off, c->req.resp.n, want);
    }
    return SP_OK;
}

static void s3_close_read(sp_store_reader_t *r)
{
    if (!r)
        return;
    for (int i = 0; i <= READ_AHEAD; i++)
        if (r->chunks[i].used) {
            s3_wait(r->s->eng, &r->chunks[i].req);
            s3_req_free(&r->chunks[i].req);
        }
    free(r->key);
    free(r);
}

static sp_status_t s3_open_read(sp_store_t *st, const char *key, sp_store_reader_t **out, sp_error_t *err)
{
    *out = NULL;
    sp_store_reader_t *r = calloc(1, sizeof *r);
    if (!r || !(r->key = strdup(key))) {
        free(r);
        return nomem(err);
    }
    r->s = S(st);
    r->size = INT64_MAX;
    chunk_t *c = &r->chunks[0];
    if (!submit_chunk(r, c, 0)) {
        s3_close_read(r);
        return nomem(err);
    }
    s3_wait(r->s->eng, &c->req);
    if (c->req.status == 416) {
        /* a range of an empty object cannot be satisfied: it exists and has no bytes */
        r->size = 0;
        c->req.resp.n = 0;
    } else if (!s3_req_ok(&c->req)) {
        sp_status_t e = s3_req_error(&c->req, "GET", err);
        s3_close_read(r);
        return e;
    } else if (c->req.status == 206 && c->req.range_total >= 0) {
        r->size = c->req.range_total;
    } else {
        r->size = (int64_t)c->req.resp.n; /* 200: the server sent it all */
    }
    snprintf(r->etag, sizeof r->etag, "%s", c->req.etag);
    r->next_off = READ_CHUNK;
    read_ahead(r);
    *out = r;
    return SP_OK;
}

static sp_status_t s3_read(sp_store_reader_t *r, void *buf, size_t n, size_t *got, sp_error_t *err)
{
    *got = 0;
    for (;;) {
        chunk_t *c = &r->chunks[r->cur];
        if (c->used && r->pos < c->req.resp.n) {
            size_t k = c->req.resp.n - r->pos;
            if (k > n)
                k = n;
            memcpy(buf, c->req.resp.p + r->pos, k);
            r->pos += k;
            *got = k;
            return SP_OK;
        }
        /* this chunk is read: on to the next */
        int64_t next = c->used ? c->off + READ_CHUNK : 0;
        if (c->used)
            s3_req_free(&c->req);
        c->used = false;
        r->pos = 0;
        if (next >= r->size)
            return SP_OK;
        r->cur = (r->cur + 1) % (READ_AHEAD + 1);
        c = &r->chunks[r->cur];
        if (!c->used) {
            if (!submit_chunk(r, c, next))
                return nomem(err);
            if (r->next_off <= next)
                r->next_off = next + READ_CHUNK;
        }
        sp_status_t e = check_chunk(r, c, err);
        if (e)
            return e;
        read_ahead(r);
    }
}

/* ------------------------------------------------------------------ writing */

typedef struct part {
    s3_req_t req;
    uint8_t *data;
    size_t len;
    int number;
    bool collected;
    char etag[160];
} part_t;

struct sp_store_writer {
    s3s_t *s;
    char *key;
    int64_t part_size;
    size_t single_limit;   /* up to this many bytes: one PUT */
    s3_buf_t cur;          /* bytes not yet sent */
    uint64_t total;
    char *upload_id;
    part_t **parts;
    int n_parts, cap_parts;
    int oldest_open;       /* parts before it are collected */
    sp_status_t failed;
    sp_error_t ferr;
};

static sp_status_t wfail(sp_store_writer_t *w, sp_status_t st, sp_error_t *err)
{
    if (!w->failed) {
        w->failed = st;
        if (err)
            w->ferr = *err;
    }
    return st;
}

static sp_status_t start_upload(sp_store_writer_t *w, sp_error_t *err)
{
    s3_req_t r = {0};
    if (!req_init(w->s, &r, "POST", w->key, "uploads=") ||
        !s3_req_header(&r, "Content-Type: application/octet-stream")) {
        s3_req_free(&r);
        return nomem(err);
    }
    r.keep_body = true;
    s3_run(w->s->eng, &r);
    sp_status_t st = SP_OK;
    char id[1024];
    if (!s3_req_ok(&r))
        st = s3_req_error(&r, "CreateMultipartUpload", err);
    else if (!s3_xml_get((const char *)r.resp.p, r.resp.n, "UploadId", id, sizeof id) || !id[0]) {
        st = s3_req_error(&r, "CreateMultipartUpload (no UploadId in the answer)", err);
        st = SP_ERR_IO;
    } else if (!(w->upload_id = strdup(id)))
        st = nomem(err);
    s3_req_free(&r);
    return st;
}

/* Wait for part i and take its ETag. */
static sp_status_t collect(sp_store_writer_t *w, int i, sp_error_t *err)
{
    part_t *p = w->parts[i];
    if (p->collected)
        return SP_OK;
    s3_wait(w->s->eng, &p->req);
    p->collected = true;
    free(p->data);
    p->data = NULL;
    sp_status_t st = SP_OK;
    if (!s3_req_ok(&p->req)) {
        char what[64];
        snprintf(what, sizeof what, "UploadPart %d", p->number);
        st = s3_req_error(&p->req, what, err);
    } else if (!p->req.etag[0]) {
        char what[64];
        snprintf(what, sizeof what, "UploadPart %d (no ETag in the answer)", p->number);
        s3_req_error(&p->req, what, err);
        st = SP_ERR_IO;
    } else {
        snprintf(p->etag, sizeof p->etag, "%s", p->req.etag);
    }
    s3_req_free(&p->req);
    return st;
}

/* Send `data` (taken over) as the next part. */
static sp_status_t send_part(sp_store_writer_t *w, uint8_t *data, size_t len, sp_error_t *err)
{
    sp_status_t st = SP_OK;
    if (!w->upload_id && (st = start_upload(w, err))) {
        free(data);
        return wfail(w, st, err);
    }
    /* at most WRITE_INFLIGHT parts of this upload in flight: wait for the oldest */
    while (w->n_parts - w->oldest_open >= WRITE_INFLIGHT) {
        if ((st = collect(w, w->oldest_open, err))) {
            free(data);
            return wfail(w, st, err);
        }
        w->oldest_open++;
    }
    if (w->n_parts == 10000) {
        free(data);
        char where[KEY_MAX + 300];
        snprintf(where, sizeof where, "s3://%s/%s", w->s->bucket, w->key);
        sp_error_set_file(err, where);
        return wfail(w, sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "more than 10000 parts: the object is "
                                     "larger than its announced size"), err);
    }
    if (w->n_parts == w->cap_parts) {
        int cap = w->cap_parts ? w->cap_parts * 2 : 16;
        part_t **np = realloc(w->parts, (size_t)cap * sizeof *np);
        if (!np) {
            free(data);
            return wfail(w, nomem(err), err);
        }
        w->parts = np;
        w->cap_parts = cap;
    }
    part_t *p = calloc(1, sizeof *p);
    char *q = NULL;
    s3_buf_t enc = {0};
    if (!p || !s3_uri_encode(&enc, w->upload_id, false) ||
        asprintf(&q, "partNumber=%d&uploadId=%s", w->n_parts + 1, (char *)enc.p) < 0 ||
        !req_init(w->s, &p->req, "PUT", w->key, q)) {
        if (p)
            s3_req_free(&p->req);
        free(p);
        free(q);
        s3_buf_free(&enc);
        free(data);
        return wfail(w, nomem(err), err);
    }
    free(q);
    s3_buf_free(&enc);
    p->data = data;
    p->len = len;
    p->number = w->n_parts + 1;
    p->req.body = data;
    p->req.body_len = len;
    w->parts[w->n_parts++] = p;
    s3_submit(w->s->eng, &p->req);
    return SP_OK;
}

static sp_status_t s3_open_write(sp_store_t *st, const char *key, int64_t size_hint, sp_store_writer_t **out,
                                 sp_error_t *err)
{
    *out = NULL;
    sp_store_writer_t *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(key))) {
        free(w);
        return nomem(err);
    }
    w->s = S(st);
    w->part_size = w->s->part_size;
    if (size_hint > 0 && (size_hint + 9999) / 10000 > w->part_size)
        w->part_size = (size_hint + 9999) / 10000; /* a known size fits in 10000 parts */
    w->single_limit = (size_t)(w->s->threshold > w->part_size ? w->s->threshold : w->part_size);
    *out = w;
    return SP_OK;
}

static sp_status_t s3_write(sp_store_writer_t *w, const void *buf, size_t n, sp_error_t *err)
{
    if (w->failed) {
        if (err)
            *err = w->ferr;
        return w->failed;
    }
    const uint8_t *p = buf;
    size_t limit = w->upload_id ? (size_t)w->part_size : w->single_limit;
    while (n) {
        if (w->cur.n == limit) {
            /* full and more is coming: this is a multipart upload; send what is buffered as parts */
            size_t off = 0;
            while (w->cur.p && w->cur.n - off >= (size_t)w->part_size) {
                uint8_t *data;
                size_t len = (size_t)w->part_size;
                if (off == 0 && w->cur.n == len) {
                    data = w->cur.p; /* hand the buffer over */
                    memset(&w->cur, 0, sizeof w->cur);
                    off = 0;
                    sp_status_t st = send_part(w, data, len, err);
                    if (st)
                        return st;
                    break;
                } else if (!(data = malloc(len))) {
                    return wfail(w, nomem(err), err);
                } else {
                    memcpy(data, w->cur.p + off, len);
                }
                off += len;
                sp_status_t st = send_part(w, data, len, err);
                if (st)
                    return st;
            }
            if (off && w->cur.p) {
                memmove(w->cur.p, w->cur.p + off, w->cur.n - off);
                w->cur.n -= off;
            }
            limit = (size_t)w->part_size;
        }
        if (!w->cur.p && (w->cur.p = malloc(limit + 1)))
            w->cur.cap = limit + 1;
        size_t k = limit - w->cur.n < n ? limit - w->cur.n : n;
        if (!s3_buf_add(&w->cur, p, k))
            return wfail(w, nomem(err), err);
        p += k;
        n -= k;
        w->total += k;
    }
    return SP_OK;
}

static void abort_upload(sp_store_writer_t *w)
{
    for (int i = w->oldest_open; i < w->n_parts; i++)
        if (!w->parts[i]->collected) {
            s3_wait(w->s->eng, &w->parts[i]->req);
            s3_req_free(&w->parts[i]->req);
            w->parts[i]->collected = true;
        }
    if (w->upload_id) {
        /* best effort: a failure leaves an incomplete upload, never a visible object (and S3 lifecycle
           rules for incomplete uploads clean those) */
        s3_req_t r = {0};
        s3_buf_t enc = {0};
        char *q = NULL;
        if (s3_uri_encode(&enc, w->upload_id, false) && asprintf(&q, "uploadId=%s", (char *)enc.p) >= 0 &&
            req_init(w->s, &r, "DELETE", w->key, q))
            s3_run(w->s->eng, &r);
        s3_req_free(&r);
        free(q);
        s3_buf_free(&enc);
    }
}

static void free_writer(sp_store_writer_t *w)
{
    for (int i = 0; i < w->n_parts; i++) {
        free(w->parts[i]->data);
        free(w->parts[i]);
    }
    free(w->parts);
    s3_buf_free(&w->cur);
    free(w->upload_id);
    free(w->key);
    free(w);
}

static void s3_abort(sp_store_writer_t *w)
{
    if (!w)
        return;
    abort_upload(w);
    free_writer(w);
}

static sp_status_t complete_upload(sp_store_writer_t *w, sp_error_t *err)
{
    s3_buf_t x = {0};
    bool ok = s3_buf_addf(&x, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (int i = 0; ok && i < w->n_parts; i++) {
        ok = s3_buf_addf(&x, "<Part><PartNumber>%d</PartNumber><ETag>", w->parts[i]->number) &&
             s3_xml_escape(&x, w->parts[i]->etag) && s3_buf_addf(&x, "</ETag></Part>");
    }
    ok = ok && s3_buf_addf(&x, "</CompleteMultipartUpload>");
    s3_req_t r = {0};
    s3_buf_t enc = {0};
    char *q = NULL;
    if (!ok || !s3_uri_encode(&enc, w->upload_id, false) || asprintf(&q, "uploadId=%s", (char *)enc.p) < 0 ||
        !req_init(w->s, &r, "POST", w->key, q) || !s3_req_header(&r, "Content-Type: application/xml")) {
        s3_req_free(&r);
        s3_buf_free(&x);
        s3_buf_free(&enc);
        free(q);
        return nomem(err);
    }
    free(q);
    s3_buf_free(&enc);
    r.body = x.p;
    r.body_len = x.n;
    r.error_in_200 = true;
    r.keep_body = true;
    s3_run(w->s->eng, &r);
    sp_status_t st = SP_OK;
    if (!s3_req_ok(&r) && r.attempts > 1 && (r.status == 404 || strcmp(r.s3_code, "NoSuchUpload") == 0)) {
        /* the answer to an earlier try was lost, and that try completed the upload: is the object there? */
        s3_req_t h = {0};
        if (req_init(w->s, &h, "HEAD", w->key, NULL)) {
            s3_run(w->s->eng, &h);
            if (s3_req_ok(&h) && h.content_length == (int64_t)w->total)
                r.s3_code[0] = '\0', r.status = 200, r.cc = CURLE_OK;
        }
        s3_req_free(&h);
    }
    if (!s3_req_ok(&r))
        st = s3_req_error(&r, "CompleteMultipartUpload", err);
    s3_req_free(&r);
    s3_buf_free(&x);
    return st;
}

static sp_status_t s3_commit(sp_store_writer_t *w, sp_error_t *err)
{
    sp_status_t st = w->failed;
    if (st && err)
        *err = w->ferr;
    if (!st && !w->upload_id) {
        /* one PUT: the object appears whole or not at all */
        s3_req_t r = {0};
        if (!req_init(w->s, &r, "PUT", w->key, NULL) ||
            !s3_req_header(&r, "Content-Type: application/octet-stream")) {
            s3_req_free(&r);
            st = nomem(err);
        } else {
            r.body = w->cur.p ? w->cur.p : (const uint8_t *)"";
            r.body_len = w->cur.n;
            s3_run(w->s->eng, &r);
            if (!s3_req_ok(&r))
                st = s3_req_error(&r, "PUT", err);
            else
                known_set(w->s, w->key, (int64_t)w->cur.n, now_ms_real(), true);
            s3_req_free(&r);
        }
        free_writer(w);
        return st;
    }
    if (!st && w->cur.n) {
        uint8_t *data = w->cur.p;
        size_t len = w->cur.n;
        memset(&w->cur, 0, sizeof w->cur);
        st = send_part(w, data, len, err);
    }
    for (int i = w->oldest_open; !st && i < w->n_parts; i++)
        if ((st = collect(w, i, err)) == SP_OK)
            w->oldest_open = i + 1;
    if (!st)
        st = complete_upload(w, err);
    if (st)
        abort_upload(w);
    else
        known_set(w->s, w->key, (int64_t)w->total, now_ms_real(), true);
    free_writer(w);
    return st;
}

/* ------------------------------------------------------------------ deleting */

static sp_status_t s3_remove(sp_store_t *st, const char *key, sp_error_t *err)
{
    s3s_t *s = S(st);
    s3_req_t r = {0};
    if (!req_init(s, &r, "DELETE", key, NULL)) {
        s3_req_free(&r);
        return nomem(err);
    }
    known_set(s, key, 0, 0, false);
    s3_run(s->eng, &r);
    sp_status_t e = s3_req_ok(&r) || r.status == 404 ? SP_OK : s3_req_error(&r, "DELETE", err);
    s3_req_free(&r);
    return e;
}

/* Individual DELETEs, all queued at once (the engine bounds them). */
static sp_status_t remove_each(s3s_t *s, const char *const *keys, size_t n, sp_error_t *err)
{
    s3_req_t *rs = calloc(n ? n : 1, sizeof *rs);
    if (!rs)
        return nomem(err);
    size_t queued = 0;
    sp_status_t st = SP_OK;
    for (; queued < n; queued++) {
        if (!req_init(s, &rs[queued], "DELETE", keys[queued], NULL)) {
            s3_req_free(&rs[queued]);
            st = nomem(err);
            break;
        }
        s3_submit(s->eng, &rs[queued]);
    }
    for (size_t i = 0; i < queued; i++) {
        s3_wait(s->eng, &rs[i]);
        if (!st && !s3_req_ok(&rs[i]) && rs[i].status != 404)
            st = s3_req_error(&rs[i], "DELETE", err);
        s3_req_free(&rs[i]);
    }
    free(rs);
    return st;
}

typedef struct batch {
    s3_req_t req;
    s3_buf_t body;
    size_t first, n;
} batch_t;

static sp_status_t s3_remove_many(sp_store_t *st, const char *const *keys, size_t n, sp_error_t *err)
{
    s3s_t *s = S(st);
    if (n == 0)
        return SP_OK;
    for (size_t i = 0; i < n; i++)
        known_set(s, keys[i], 0, 0, false);
    size_t nb = (n + DELETE_BATCH - 1) / DELETE_BATCH;
    batch_t *b = calloc(nb, sizeof *b);
    if (!b)
        return nomem(err);
    sp_status_t rc = SP_OK;
    size_t queued = 0;
    for (; queued < nb; queued++) {
        batch_t *x = &b[queued];
        x->first = queued * DELETE_BATCH;
        x->n = n - x->first < DELETE_BATCH ? n - x->first : DELETE_BATCH;
        bool ok = s3_buf_addf(&x->body, "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>");
        for (size_t i = 0; ok && i < x->n; i++)
            ok = s3_buf_addf(&x->body, "<Object><Key>") && s3_xml_escape(&x->body, keys[x->first + i]) &&
                 s3_buf_addf(&x->body, "</Key></Object>");
        ok = ok && s3_buf_addf(&x->body, "</Delete>");
        char md5[25];
        if (ok) {
            s3_content_md5(x->body.p, x->body.n, md5);
            ok = req_init(s, &x->req, "POST", "", "delete=") && s3_req_header(&x->req, "Content-MD5: %s", md5) &&
                 s3_req_header(&x->req, "Content-Type: application/xml");
        }
        if (!ok) {
            s3_req_free(&x->req);
            s3_buf_free(&x->body);
            rc = nomem(err);
            break;
        }
        x->req.body = x->body.p;
        x->req.body_len = x->body.n;
        x->req.keep_body = true;
        s3_submit(s->eng, &x->req);
    }
    char *k = malloc(KEY_MAX);
    for (size_t q = 0; q < queued; q++) {
        batch_t *x = &b[q];
        s3_wait(s->eng, &x->req);
        if (!rc && (x->req.status == 501 || strcmp(x->req.s3_code, "NotImplemented") == 0)) {
            /* a server without DeleteObjects: one DELETE per key */
            rc = remove_each(s, keys + x->first, x->n, err);
        } else if (!rc && !s3_req_ok(&x->req)) {
            rc = s3_req_error(&x->req, "DeleteObjects", err);
        } else if (!rc && k) {
            /* per-key failures: <Error><Key>k</Key><Code>c</Code><Message>m</Message></Error> */
            const char *xml = (const char *)x->req.resp.p, *e;
            size_t pos = 0, len;
            while (!rc && s3_xml_next(xml, x->req.resp.n, &pos, "Error", &e, &len)) {
                char code[64] = "", msg[256] = "";
                s3_xml_get(e, len, "Code", code, sizeof code);
                s3_xml_get(e, len, "Message", msg, sizeof msg);
                if (!s3_xml_get(e, len, "Key", k, KEY_MAX))
                    k[0] = '\0';
                if (strcmp(code, "NoSuchKey") == 0)
                    continue;
                char where[KEY_MAX + 300];
                snprintf(where, sizeof where, "s3://%s/%s", s->bucket, k);
                sp_error_set_file(err, where);
                rc = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "DeleteObjects: %s%s%s", code[0] ? code : "error",
                                  msg[0] ? ": " : "", msg);
            }
        }
        s3_req_free(&x->req);
        s3_buf_free(&x->body);
    }
    if (!k && !rc)
        rc = nomem(err);
    free(k);
    free(b);
    return rc;
}

/* S3 has no directories: "removing" one succeeds when no object is left under it (a "folder" marker
   object key + "/" is deleted too). */
static sp_status_t s3_remove_dir(sp_store_t *st, const char *key, sp_error_t *err)
{
    s3s_t *s = S(st);
    char *prefix = NULL;
    if (asprintf(&prefix, "%s%s", key, key[0] ? "/" : "") < 0)
        return nomem(err);
    s3_req_t r = {0};
    sp_status_t e = list_page(s, prefix, NULL, 2, &r, err);
    if (e) {
        free(prefix);
        return e;
    }
    const char *x = (const char *)r.resp.p, *c;
    size_t pos = 0, len;
    bool other = false, marker = false;
    char k[KEY_MAX];
    while (s3_xml_next(x, r.resp.n, &pos, "Contents", &c, &len)) {
        if (s3_xml_get(c, len, "Key", k, sizeof k) && strcmp(k, prefix) == 0)
            marker = true;
        else
            other = true;
    }
    s3_req_free(&r);
    if (other) {
        char where[KEY_MAX + 300];
        snprintf(where, sizeof where, "s3://%s/%s", s->bucket, key);
        sp_error_set_file(err, where);
        e = sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "not empty");
    } else if (marker && key[0]) {
        e = s3_remove(st, prefix, err);
    }
    free(prefix);
    return e;
}

/* ------------------------------------------------------------------ server-side copy */

static sp_status_t stream_copy(sp_store_t *src, const char *from, sp_store_t *dst, const char *to, int64_t size,
                               sp_error_t *err)
{
    sp_store_reader_t *r;
    sp_status_t st = src->ops->open_read(src, from, &r, err);
    if (st)
        return st;
    sp_store_writer_t *w;
    if ((st = dst->ops->open_write(dst, to, size, &w, err))) {
        src->ops->close_read(r);
        return st;
    }
    uint8_t *buf = malloc(MiB);
    if (!buf)
        st = nomem(err);
    while (!st) {
        size_t got;
        if ((st = src->ops->read(r, buf, MiB, &got, err)) || got == 0)
            break;
        st = dst->ops->write(w, buf, got, err);
    }
    free(buf);
    src->ops->close_read(r);
    if (st) {
        dst->ops->abort(w);
        return st;
    }
    return dst->ops->commit(w, err);
}

static bool copy_source_header(s3_req_t *r, const s3s_t *src, const char *from)
{
    s3_buf_t h = {0};
    bool ok = s3_buf_addf(&h, "x-amz-copy-source: /") && s3_uri_encode(&h, src->bucket, false) &&
              s3_buf_add(&h, "/", 1) && s3_uri_encode(&h, from, true) && s3_req_header(r, "%s", (char *)h.p);
    s3_buf_free(&h);
    return ok;
}

/* UploadPartCopy, in parts of at most 5 GiB, all queued at once. */
static sp_status_t multipart_copy(s3s_t *dst, s3s_t *src, const char *from, const char *to, int64_t size,
                                  sp_error_t *err)
{
    sp_store_writer_t *w = calloc(1, sizeof *w);
    if (!w || !(w->key = strdup(to))) {
        free(w);
        return nomem(err);
    }
    w->s = dst;
    int64_t part = 512LL * MiB;
    if ((size + 9999) / 10000 > part)
        part = (size + 9999) / 10000;
    int n = (int)((size + part - 1) / part);
    sp_status_t st = start_upload(w, err);
    if (!st && !(w->parts = calloc((size_t)n, sizeof *w->parts)))
        st = nomem(err);
    s3_buf_t enc = {0};
    if (!st && !s3_uri_encode(&enc, w->upload_id, false))
        st = nomem(err);
    for (int i = 0; !st && i < n; i++) {
        part_t *p = calloc(1, sizeof *p);
        char *q = NULL;
        int64_t a = (int64_t)i * part, b = a + part > size ? size - 1 : a + part - 1;
        if (!p || asprintf(&q, "partNumber=%d&uploadId=%s", i + 1, (char *)enc.p) < 0 ||
            !req_init(dst, &p->req, "PUT", to, q) || !copy_source_header(&p->req, src, from) ||
            !s3_req_header(&p->req, "x-amz-copy-source-range: bytes=%" PRId64 "-%" PRId64, a, b)) {
            if (p)
                s3_req_free(&p->req);
            free(p);
            free(q);
            st = nomem(err);
            break;
        }
        free(q);
        p->number = i + 1;
        p->req.keep_body = true;
        p->req.error_in_200 = true;
        w->parts[w->n_parts++] = p;
        s3_submit(dst->eng, &p->req);
    }
    s3_buf_free(&enc);
    for (int i = 0; i < w->n_parts; i++) {
        part_t *p = w->parts[i];
        s3_wait(dst->eng, &p->req);
        p->collected = true;
        if (!st && !s3_req_ok(&p->req)) {
            char what[64];
            snprintf(what, sizeof what, "UploadPartCopy %d", p->number);
            st = s3_req_error(&p->req, what, err);
        } else if (!st && !s3_xml_get((const char *)p->req.resp.p, p->req.resp.n, "ETag", p->etag, sizeof p->etag)) {
            s3_req_error(&p->req, "UploadPartCopy (no ETag in the answer)", err);
            st = SP_ERR_IO;
        }
        s3_req_free(&p->req);
    }
    w->oldest_open = w->n_parts;
    if (!st)
        st = complete_upload(w, err);
    if (st && w->upload_id)
        abort_upload(w);
    free_writer(w);
    return st;
}

static sp_status_t copy_object(sp_store_t *dst_st, sp_store_t *src_st, const char *from, const char *to,
                               sp_error_t *err)
{
    s3s_t *dst = S(dst_st), *src = S(src_st);
    sp_store_stat_t ss;
    sp_status_t st = src_st->ops->stat(src_st, from, &ss, err);
    if (st)
        return st;
    if (!ss.exists || ss.is_dir) {
        char where[KEY_MAX + 300];
        snprintf(where, sizeof where, "s3://%s/%s", src->bucket, from);
        sp_error_set_file(err, where);
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "CopyObject: no such object");
    }
    if (ss.size > MAX_SINGLE_COPY) {
        st = multipart_copy(dst, src, from, to, ss.size, err);
    } else {
        s3_req_t r = {0};
        if (!req_init(dst, &r, "PUT", to, NULL) || !copy_source_header(&r, src, from)) {
            s3_req_free(&r);
            return nomem(err);
        }
        r.keep_body = true;
        r.error_in_200 = true;
        s3_run(dst->eng, &r);
        st = s3_req_ok(&r) ? SP_OK : s3_req_error(&r, "CopyObject", err);
        bool unsupported = r.status == 501 || strcmp(r.s3_code, "NotImplemented") == 0;
        s3_req_free(&r);
        if (!unsupported) {
            if (!st)
                known_set(dst, to, ss.size, now_ms_real(), true);
            return st;
        }
    }
    if (st && (strstr(err ? err->message : "", "NotImplemented") != NULL)) {
        /* a server without CopyObject / UploadPartCopy: through sp after all */
        sp_error_clear(err);
        st = stream_copy(src_st, from, dst_st, to, ss.size, err);
    }
    if (!st)
        known_set(dst, to, ss.size, now_ms_real(), true);
    return st;
}

static sp_status_t s3_copy(sp_store_t *st, const char *from, const char *to, sp_error_t *err)
{
    return copy_object(st, st, from, to, err);
}

static const sp_store_ops_t s3_ops;

static sp_status_t s3_copy_from(sp_store_t *dst, sp_store_t *src, const char *from, const char *to,
                                sp_error_t *err)
{
    if (src->ops != &s3_ops || dst->ops != &s3_ops || strcmp(S(src)->identity, S(dst)->identity) != 0)
        return SP_ERR_UNSUPPORTED; /* another endpoint or other credentials: streamed by the caller */
    return copy_object(dst, src, from, to, err);
}

/* ------------------------------------------------------------------ open, close */

static void s3_close(sp_store_t *st)
{
    if (!st)
        return;
    s3s_t *s = S(st);
    if (s) {
        s3_engine_destroy(s->eng);
        strmap_free(&s->kmap);
        strmap_free(&s->pmap);
        free(s->kv);
        free(s->pcount);
        pthread_mutex_destroy(&s->klock);
        free(s->bucket);
        free(s->url_base);
        free(s->identity);
        if (s->token) {
            memset(s->token, 0, strlen(s->token));
            free(s->token);
        }
        free(s);
    }
    free(st->location);
    free(st);
}

static const sp_store_ops_t s3_ops = {
    .name = "s3",
    .stat = s3_stat,
    .list = s3_list,
    .open_read = s3_open_read,
    .read = s3_read,
    .close_read = s3_close_read,
    .open_write = s3_open_write,
    .write = s3_write,
    .commit = s3_commit,
    .abort = s3_abort,
    .remove = s3_remove,
    .remove_dir = s3_remove_dir,
    .rename = NULL,
    .copy = s3_copy,
    .scan = NULL,
    .sync = NULL,
    .finish = NULL,
    .close = s3_close,
    .remove_many = s3_remove_many,
    .copy_from = s3_copy_from,
};

static bool host_is_ip_or_local(const char *host, size_t n)
{
    if (n == 9 && strncasecmp(host, "localhost", 9) == 0)
        return true;
    if (n && host[0] == '[')
        return true; /* IPv6 literal */
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)host[i]) && host[i] != '.')
            return false;
    return true;
}

static sp_status_t build_base(s3s_t *s, const sp_s3_config_t *c, const char *region, sp_error_t *err)
{
    char *endpoint = NULL;
    if (c->endpoint && c->endpoint[0])
        endpoint = strdup(c->endpoint);
    else if (asprintf(&endpoint, "https://s3.%s.amazonaws.com", region) < 0)
        endpoint = NULL;
    if (!endpoint)
        return nomem(err);
    size_t el = strlen(endpoint);
    while (el && endpoint[el - 1] == '/')
        endpoint[--el] = '\0';
    bool https = strncasecmp(endpoint, "https://", 8) == 0;
    if (!https && strncasecmp(endpoint, "http://", 7) != 0) {
        free(endpoint);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "endpoint",
                            "the S3 endpoint must be an http:// or https:// URL");
    }
    const char *hs = endpoint + (https ? 8 : 7);
    const char *path = strchr(hs, '/');
    size_t hostport = path ? (size_t)(path - hs) : strlen(hs);
    const char *colon = NULL;
    if (hs[0] == '[') {
        const char *rb = memchr(hs, ']', hostport);
        colon = rb && rb + 1 < hs + hostport && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(hs, ':', hostport);
    }
    size_t hostlen = colon ? (size_t)(colon - hs) : hostport;
    bool aws = !c->endpoint || !c->endpoint[0] ||
               (hostlen >= 13 && strncasecmp(hs + hostlen - 13, "amazonaws.com", 13) == 0);
    bool vhost;
    switch (c->addressing) {
    case SP_S3_ADDRESSING_PATH: vhost = false; break;
    case SP_S3_ADDRESSING_VIRTUAL: vhost = true; break;
    default: vhost = aws && bucket_dns_ok(s->bucket, https) && !host_is_ip_or_local(hs, hostlen); break;
    }
    int w;
    if (vhost)
        w = asprintf(&s->url_base, "%.*s%s.%s", (int)(hs - endpoint), endpoint, s->bucket, hs);
    else
        w = asprintf(&s->url_base, "%s/%s", endpoint, s->bucket);
    if (w < 0)
        s->url_base = NULL;
    w = asprintf(&s->identity, "%s|%s", endpoint, c->access_key_id ? c->access_key_id : "");
    if (w < 0)
        s->identity = NULL;
    free(endpoint);
    return s->url_base && s->identity ? SP_OK : nomem(err);
}

static sp_status_t open_with(const char *bucket, const sp_s3_config_t *c, sp_store_t **out, sp_error_t *err)
{
    if (!bucket || !bucket_name_ok(bucket))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location", "\"%s\" is not a valid S3 bucket name",
                            bucket ? bucket : "");
    bool has_id = c->access_key_id && c->access_key_id[0];
    bool has_secret = c->secret_access_key && c->secret_access_key[0];
    if (has_id != has_secret)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "credentials",
                            "an S3 access key ID needs its secret access key, and the reverse");
    const char *region = c->region && c->region[0] ? c->region : "us-east-1";
    for (const char *p = region; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-')
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "region", "\"%s\" is not an S3 region name",
                                region);
    sp_store_t *st = calloc(1, sizeof *st);
    s3s_t *s = calloc(1, sizeof *s);
    if (!st || !s) {
        free(st);
        free(s);
        return nomem(err);
    }
    st->ops = &s3_ops;
    st->impl = s;
    pthread_mutex_init(&s->klock, NULL);
    st->writable = true;
    sp_status_t rc = SP_OK;
    s->bucket = strdup(bucket);
    if (asprintf(&st->location, "s3://%s", bucket) < 0)
        st->location = NULL;
    if (!s->bucket || !st->location)
        rc = nomem(err);
    if (!rc)
        rc = build_base(s, c, region, err);
    s->is_signed = has_id;
    if (!rc && c->session_token && c->session_token[0] && !(s->token = strdup(c->session_token)))
        rc = nomem(err);
    s->part_size = c->part_size > 0 ? c->part_size : 8 * MiB;
    if (s->part_size < 5 * MiB)
        s->part_size = 5 * MiB;
    s->threshold = c->multipart_threshold > 0 ? c->multipart_threshold : 8 * MiB;
    char *sigv4 = NULL, *userpwd = NULL;
    if (!rc && has_id &&
        (asprintf(&sigv4, "aws:amz:%s:s3", region) < 0 ||
         asprintf(&userpwd, "%s:%s", c->access_key_id, c->secret_access_key) < 0))
        rc = nomem(err);
    if (!rc) {
        s3_engine_opts_t o = {
            .max_transfers = c->max_transfers,
            .max_attempts = c->max_attempts,
            .retry_base_ms = c->retry_base_ms,
            .connect_timeout_ms = c->connect_timeout_ms,
            .stall_timeout_ms = c->stall_timeout_ms,
            .no_verify_tls = c->no_verify_tls,
            .ca_bundle = c->ca_bundle && c->ca_bundle[0] ? c->ca_bundle : NULL,
            .sigv4 = sigv4,
            .userpwd = userpwd,
            .log = c->log,
            .log_user = c->log_user,
        };
        rc = s3_engine_create(&o, &s->eng, err);
    }
    free(sigv4);
    if (userpwd) {
        memset(userpwd, 0, strlen(userpwd));
        free(userpwd);
    }
    if (rc) {
        s3_close(st);
        return rc;
    }
    *out = st;
    return SP_OK;
}

sp_status_t sp_store_open_s3(const char *bucket, const sp_s3_config_t *cfg, sp_store_t **out, sp_error_t *err)
{
    *out = NULL;
    if (cfg)
        return open_with(bucket, cfg, out, err);
    pthread_mutex_lock(&def_lock);
    sp_status_t st = open_with(bucket, &def_cfg, out, err);
    pthread_mutex_unlock(&def_lock);
    return st;
}

/* ------------------------------------------------------------------ stores of referenced buckets */

typedef struct store_cache {
    size_t n;
    sp_store_t **v;
} store_cache_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

sp_store_t *s3_store_for_bucket(void **cache, sp_store_t *primary, const char *bucket)
{
    if (primary && primary->ops == &s3_ops && strcmp(S(primary)->bucket, bucket) == 0)
        return primary;
    pthread_mutex_lock(&cache_lock);
    store_cache_t *c = *cache;
    sp_store_t *found = NULL;
    for (size_t i = 0; c && i < c->n && !found; i++)
        if (strcmp(S(c->v[i])->bucket, bucket) == 0)
            found = c->v[i];
    if (!found) {
        if (!c && (c = calloc(1, sizeof *c)))
            *cache = c;
        sp_store_t **nv = c ? realloc(c->v, (c->n + 1) * sizeof *nv) : NULL;
        sp_store_t *st = NULL;
        if (nv) {
            c->v = nv;
            if (sp_store_open_s3(bucket, NULL, &st, NULL) == SP_OK)
                c->v[c->n++] = found = st;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return found;
}

void s3_store_cache_free(void *cache)
{
    store_cache_t *c = cache;
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        sp_store_close(c->v[i]);
    free(c->v);
    free(c);
}

/* ------------------------------------------------------------------ one object by its s3:// location */

bool s3_is_location(const char *s)
{
    return strncmp(s, "s3://", 5) == 0 || strncmp(s, "s3a://", 6) == 0 || strncmp(s, "s3p://", 6) == 0;
}

static sp_status_t open_for(const char *uri, sp_store_t **st, char *key, size_t keysz, sp_error_t *err)
{
    char bucket[256];
    if (!sp_s3_split_uri(uri, strlen(uri), bucket, sizeof bucket, key, keysz)) {
        sp_error_set_file(err, uri);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location", "not an s3:// location");
    }
    return sp_store_open_s3(bucket, NULL, st, err);
}

sp_status_t s3_stat_location(const char *uri, sp_store_stat_t *out, sp_error_t *err)
{
    sp_store_t *st;
    char key[KEY_MAX];
    sp_status_t s = open_for(uri, &st, key, sizeof key, err);
    if (s)
        return s;
    s = st->ops->stat(st, key, out, err);
    sp_store_close(st);
    return s;
}

sp_status_t s3_read_location(const char *uri, size_t max, uint8_t **out, size_t *len, bool *exists,
                             sp_error_t *err)
{
    sp_store_t *st;
    char key[KEY_MAX];
    *out = NULL;
    *len = 0;
    *exists = false;
    sp_status_t s = open_for(uri, &st, key, sizeof key, err);
    if (s)
        return s;
    s = sp_store_read_all(st, key, max, out, len, err);
    if (s == SP_ERR_NOT_FOUND) {
        sp_error_clear(err);
        s = SP_OK;
    } else if (!s) {
        *exists = true;
    }
    sp_store_close(st);
    return s;
}

sp_status_t s3_write_location(const char *uri, const void *buf, size_t len, sp_error_t *err)
{
    sp_store_t *st;
    char key[KEY_MAX];
    sp_status_t s = open_for(uri, &st, key, sizeof key, err);
    if (s)
        return s;
    s = sp_store_write_all(st, key, buf, len, err);
    sp_store_close(st);
    return s;
}
