/*
 * s3_http.c - the S3 transfer engine: one libcurl multi handle, driven by
 * one thread per store.  Callers (any thread) queue requests and wait for
 * them; the engine runs at most max_transfers at once, signs each with
 * libcurl's AWS SigV4, retries the ones that may succeed later (429, 500,
 * 502, 503, 504, RequestTimeout / InternalError / SlowDown bodies,
 * connection errors) after an exponential backoff with full jitter, and
 * wakes the waiters when a request is finally done.
 */
#define _GNU_SOURCE
#include "s3_internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

struct s3_engine {
    s3_engine_opts_t o;
    char *sigv4, *userpwd, *token_header, *ca_bundle;
    CURLM *multi;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;      /* broadcast when a request is done */
    s3_req_t *queue;          /* waiting to start (possibly not before some time) */
    int active;               /* transfers in the multi handle */
    int outstanding;          /* submitted and not done */
    bool stop;
    unsigned rng;
};

/* ------------------------------------------------------------------ buffers */

bool s3_buf_add(s3_buf_t *b, const void *data, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

bool s3_buf_addf(s3_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    bool ok = s3_buf_add(b, s, (size_t)n);
    free(s);
    return ok;
}

void s3_buf_free(s3_buf_t *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

bool s3_uri_encode(s3_buf_t *b, const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/')) {
            if (!s3_buf_add(b, p, 1))
                return false;
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            if (!s3_buf_add(b, e, 3))
                return false;
        }
    }
    return true;
}

void s3_content_md5(const void *data, size_t n, char out[25])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    out[0] = '\0';
    if (EVP_Digest(data, n, md, &mdlen, EVP_md5(), NULL) == 1 && mdlen == 16)
        EVP_EncodeBlock((unsigned char *)out, md, 16);
}

/* ------------------------------------------------------------------ requests */

bool s3_req_header(s3_req_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return false;
    struct curl_slist *l = curl_slist_append(r->headers, s);
    free(s);
    if (!l)
        return false;
    r->headers = l;
    return true;
}

void s3_req_free(s3_req_t *r)
{
    free(r->url);
    curl_slist_free_all(r->headers);
    s3_buf_free(&r->resp);
    memset(r, 0, sizeof *r);
}

static void clear_answer(s3_req_t *r)
{
    r->status = 0;
    r->cc = CURLE_OK;
    r->curl_error[0] = '\0';
    r->resp.n = 0;
    if (r->resp.p)
        r->resp.p[0] = '\0';
    r->etag[0] = r->s3_code[0] = r->s3_message[0] = '\0';
    r->content_length = -1;
    r->range_total = -1;
    r->last_modified_ms = 0;
}

bool s3_req_ok(const s3_req_t *r)
{
    return r->cc == CURLE_OK && r->status >= 200 && r->status < 300 && !r->s3_code[0];
}

sp_status_t s3_req_error(const s3_req_t *r, const char *what, sp_error_t *err)
{
    char where[1024];
    snprintf(where, sizeof where, "s3://%s%s%s", r->bucket ? r->bucket : "", r->key && r->key[0] ? "/" : "",
             r->key ? r->key : "");
    sp_error_set_file(err, where);
    if (r->cc != CURLE_OK)
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "%s failed%s: %s%s%s", what,
                            r->attempts > 1 ? " after retries" : "", curl_easy_strerror(r->cc),
                            r->curl_error[0] ? ": " : "", r->curl_error);
    const char *code = r->s3_code[0] ? r->s3_code
                       : r->status == 404 ? "NotFound"
                       : r->status == 403 ? "Forbidden"
                       : r->status == 301 ? "PermanentRedirect"
                                           : "";
    const char *hint = "";
    if (r->status == 301 || r->status == 307 || strcmp(code, "PermanentRedirect") == 0 ||
        strcmp(code, "AuthorizationHeaderMalformed") == 0)
        hint = " (the bucket is in another region: set --region or AWS_REGION)";
    else if (strcmp(code, "NoSuchBucket") == 0)
        hint = " (no such bucket)";
    else if (r->status == 403 && !r->s3_code[0])
        hint = " (access denied: check the credentials and the bucket policy)";
    sp_status_t st = (r->status == 404 || strcmp(code, "NoSuchKey") == 0 || strcmp(code, "NoSuchBucket") == 0)
                         ? SP_ERR_NOT_FOUND
                         : SP_ERR_IO;
    return sp_error_set(err, st, SP_NO_OFFSET, "", "%s: HTTP %ld%s%s%s%s%s%s", what, r->status, code[0] ? " " : "",
                        code, r->s3_message[0] ? ": " : "", r->s3_message, hint,
                        r->attempts > 1 ? " (after retries)" : "");
}

/* ------------------------------------------------------------------ callbacks */

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *user)
{
    s3_req_t *r = user;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (r->keep_body || status >= 300 || r->error_in_200) {
        if (status >= 300 && r->resp.n > (1u << 20))
            return n; /* an error body: the start is enough */
        if (!s3_buf_add(&r->resp, ptr, n))
            return 0; /* out of memory: fails the transfer */
    }
    return n;
}

static int64_t parse_int(const char *s, size_t n)
{
    int64_t v = 0;
    bool any = false;
    for (size_t i = 0; i < n && isdigit((unsigned char)s[i]); i++) {
        v = v * 10 + (s[i] - '0');
        any = true;
    }
    return any ? v : -1;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *user)
{
    s3_req_t *r = user;
    size_t n = size * nitems;
    if (n >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
        /* a new answer (after 100 Continue): forget the previous one's headers */
        r->etag[0] = '\0';
        r->range_total = -1;
        return n;
    }
    const char *colon = memchr(buf, ':', n);
    if (!colon)
        return n;
    size_t nl = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vl = n - nl - 1;
    while (vl && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    if (nl == 4 && strncasecmp(buf, "etag", 4) == 0) {
        size_t c = vl < sizeof r->etag - 1 ? vl : sizeof r->etag - 1;
        memcpy(r->etag, v, c);
        r->etag[c] = '\0';
    } else if (nl == 13 && strncasecmp(buf, "content-range", 13) == 0) {
        const char *slash = memchr(v, '/', vl);
        if (slash)
            r->range_total = parse_int(slash + 1, vl - (size_t)(slash + 1 - v));
    }
    return n;
}

/* curl's trace, with the headers that carry secrets redacted. */
static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *user)
{
    (void)h;
    s3_engine_t *e = user;
    if (!e->o.log || (type != CURLINFO_TEXT && type != CURLINFO_HEADER_IN && type != CURLINFO_HEADER_OUT))
        return 0;
    const char *prefix = type == CURLINFO_TEXT ? "* " : type == CURLINFO_HEADER_IN ? "< " : "> ";
    size_t i = 0;
    while (i < size) {
        size_t j = i;
        while (j < size && data[j] != '\n' && data[j] != '\r')
            j++;
        if (j > i) {
            char line[1200];
            const char *s = data + i;
            size_t len = j - i;
            const char *user = type == CURLINFO_TEXT ? memmem(s, len, "with user '", 11) : NULL;
            if (user) {
                /* "Server auth using AWS_SIGV4 with user 'KEYID'": the key ID stays out of the trace too */
                snprintf(line, sizeof line, "s3: %s%.*s[redacted]", prefix, (int)(user + 10 - s), s);
            } else if ((len >= 14 && strncasecmp(s, "authorization:", 14) == 0) ||
                (len >= 21 && strncasecmp(s, "x-amz-security-token:", 21) == 0) ||
                (len >= 20 && strncasecmp(s, "proxy-authorization:", 20) == 0)) {
                const char *colon = memchr(s, ':', len);
                snprintf(line, sizeof line, "s3: %s%.*s: [redacted]", prefix, (int)(colon - s), s);
            } else {
                if (len > 1000)
                    len = 1000;
                snprintf(line, sizeof line, "s3: %s%.*s", prefix, (int)len, s);
            }
            e->o.log(e->o.log_user, line);
        }
        while (j < size && (data[j] == '\n' || data[j] == '\r'))
            j++;
        i = j;
    }
    return 0;
}

/* ------------------------------------------------------------------ engine */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static CURL *make_easy(s3_engine_t *e, s3_req_t *r)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_URL, r->url);
    curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L); /* keys are sent as they are: no "/./" folding */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PRIVATE, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->curl_error);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_FILETIME, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)e->o.connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(e->o.stall_timeout_ms + 999) / 1000);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_MAXAGE_CONN, 4L); /* before servers close idle connections (node: 5 s) */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    if (e->o.no_verify_tls) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (e->ca_bundle)
        curl_easy_setopt(h, CURLOPT_CAINFO, e->ca_bundle);
    if (e->sigv4 && e->userpwd) {
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, e->sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, e->userpwd);
    }
    if (e->o.log) {
        curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(h, CURLOPT_DEBUGDATA, e);
        curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
    }
    const char *m = r->method;
    if (strcmp(m, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(m, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(m, "PUT") == 0 || strcmp(m, "POST") == 0) {
        /* a body from memory: curl sends it as it is, again after a reconnect, and asks "Expect:
           100-continue" only for large ones (an "Expect:" header of our own would be signed yet not sent) */
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, m);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, r->headers);
    return h;
}

/* Whether an answer is worth another try. */
static bool retryable(const s3_req_t *r)
{
    switch (r->cc) {
    case CURLE_OK:
        break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_WEIRD_SERVER_REPLY:
        return true;
    default:
        return false;
    }
    switch (r->status) {
    case 429:
    case 500:
    case 502:
    case 503:
    case 504:
        return true;
    default:
        break;
    }
    return strcmp(r->s3_code, "RequestTimeout") == 0 || strcmp(r->s3_code, "InternalError") == 0 ||
           strcmp(r->s3_code, "SlowDown") == 0 || strcmp(r->s3_code, "ServiceUnavailable") == 0;
}

/* Read S3's <Error><Code>..</Code><Message>..</Message></Error>, if the body is one. */
static void parse_error_body(s3_req_t *r)
{
    if (!r->resp.n)
        return;
    const char *x = (const char *)r->resp.p;
    const char *start;
    size_t len, pos = 0;
    if (!s3_xml_next(x, r->resp.n, &pos, "Error", &start, &len))
        return;
    /* only an answer whose root is <Error> (DeleteObjects lists per-key <Error>s inside <DeleteResult>) */
    const char *root = strstr(x, "<Error>");
    const char *dr = strstr(x, "<DeleteResult");
    if (dr && dr < root)
        return;
    s3_xml_get(start, len, "Code", r->s3_code, sizeof r->s3_code);
    s3_xml_get(start, len, "Message", r->s3_message, sizeof r->s3_message);
}

static void finish(s3_engine_t *e, CURL *h, CURLcode cc)
{
    s3_req_t *r = NULL;
    curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&r);
    r->cc = cc;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    curl_off_t cl = -1, ft = -1;
    if (curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK)
        r->content_length = cl;
    if (curl_easy_getinfo(h, CURLINFO_FILETIME_T, &ft) == CURLE_OK && ft > 0)
        r->last_modified_ms = (int64_t)ft * 1000;
    if (cc == CURLE_OK && (r->status >= 300 || (r->error_in_200 && r->status == 200)))
        parse_error_body(r);
    curl_multi_remove_handle(e->multi, h);
    curl_easy_cleanup(h);
    r->easy = NULL;
    r->attempts++;
    pthread_mutex_lock(&e->lock);
    e->active--;
    if (retryable(r) && r->attempts < e->o.max_attempts && !e->stop) {
        /* full jitter: a random wait in [0, base * 2^(attempt-1)], at most 10 s */
        int64_t cap = (int64_t)e->o.retry_base_ms << (r->attempts - 1 < 16 ? r->attempts - 1 : 16);
        if (cap > 10000)
            cap = 10000;
        int64_t wait = cap > 0 ? (int64_t)(rand_r(&e->rng) % (unsigned)(cap + 1)) : 0;
        if (e->o.log) {
            char line[600];
            snprintf(line, sizeof line, "s3: retrying %s s3://%s/%s in %lld ms (attempt %d of %d: %s%s%ld %s)",
                     r->method, r->bucket ? r->bucket : "", r->key ? r->key : "", (long long)wait, r->attempts + 1,
                     e->o.max_attempts, cc ? curl_easy_strerror(cc) : "", cc ? "" : "HTTP ", cc ? 0L : r->status,
                     r->s3_code);
            e->o.log(e->o.log_user, line);
        }
        clear_answer(r);
        r->not_before_ms = now_ms() + wait;
        r->next = e->queue;
        e->queue = r;
    } else {
        r->done = true;
        e->outstanding--;
        pthread_cond_broadcast(&e->cond);
    }
    pthread_mutex_unlock(&e->lock);
}

static void fail_now(s3_engine_t *e, s3_req_t *r)
{
    /* could not even set up the transfer (out of memory) */
    r->cc = CURLE_OUT_OF_MEMORY;
    r->done = true;
    e->outstanding--;
    pthread_cond_broadcast(&e->cond);
}

static void *engine_main(void *arg)
{
    s3_engine_t *e = arg;
    pthread_mutex_lock(&e->lock);
    for (;;) {
        if (e->stop && e->outstanding == 0)
            break;
        /* start what may start: oldest first, up to the transfer bound */
        int64_t now = now_ms(), next_due = -1;
        while (e->active < e->o.max_transfers) {
            s3_req_t **pp = &e->queue, **pick = NULL;
            for (; *pp; pp = &(*pp)->next) {
                if ((*pp)->not_before_ms <= now)
                    pick = pp; /* the list is newest first: the last ready one is the oldest */
                else if (next_due < 0 || (*pp)->not_before_ms < next_due)
                    next_due = (*pp)->not_before_ms;
            }
            if (!pick)
                break;
            s3_req_t *r = *pick;
            *pick = r->next;
            r->next = NULL;
            r->easy = make_easy(e, r);
            if (!r->easy || curl_multi_add_handle(e->multi, r->easy) != CURLM_OK) {
                if (r->easy)
                    curl_easy_cleanup(r->easy);
                r->easy = NULL;
                fail_now(e, r);
                continue;
            }
            e->active++;
            next_due = -1; /* recomputed on the next scan */
        }
        if (next_due < 0)
            for (s3_req_t *q = e->queue; q; q = q->next)
                if (next_due < 0 || q->not_before_ms < next_due)
                    next_due = q->not_before_ms;
        pthread_mutex_unlock(&e->lock);

        int running = 0;
        curl_multi_perform(e->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(e->multi, &left)))
            if (m->msg == CURLMSG_DONE)
                finish(e, m->easy_handle, m->data.result);
        int timeout = 1000;
        if (next_due >= 0) {
            int64_t d = next_due - now_ms();
            timeout = d < 0 ? 0 : d < timeout ? (int)d : timeout;
        }
        curl_multi_poll(e->multi, NULL, 0, timeout, NULL);
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;
static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

sp_status_t s3_engine_create(const s3_engine_opts_t *o, s3_engine_t **out, sp_error_t *err)
{
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "libcurl cannot be initialised: %s",
                            curl_easy_strerror(global_rc));
    s3_engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    e->o = *o;
    e->sigv4 = dup_or_null(o->sigv4);
    e->userpwd = dup_or_null(o->userpwd);
    e->ca_bundle = dup_or_null(o->ca_bundle);
    e->o.sigv4 = e->o.userpwd = e->o.token = e->o.ca_bundle = NULL;
    if (e->o.max_transfers <= 0)
        e->o.max_transfers = 8;
    if (e->o.max_attempts <= 0)
        e->o.max_attempts = 5;
    if (e->o.retry_base_ms <= 0)
        e->o.retry_base_ms = 200;
    if (e->o.connect_timeout_ms <= 0)
        e->o.connect_timeout_ms = 10000;
    if (e->o.stall_timeout_ms <= 0)
        e->o.stall_timeout_ms = 60000;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    e->rng = (unsigned)(ts.tv_nsec ^ (uintptr_t)e);
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cond, NULL);
    e->multi = curl_multi_init();
    if (!e->multi || (o->sigv4 && !e->sigv4) || (o->userpwd && !e->userpwd) || (o->ca_bundle && !e->ca_bundle)) {
        s3_engine_destroy(e);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)e->o.max_transfers);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)e->o.max_transfers * 2);
    if (pthread_create(&e->thread, NULL, engine_main, e) != 0) {
        s3_engine_destroy(e);
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot start the S3 transfer thread");
    }
    e->thread_started = true;
    *out = e;
    return SP_OK;
}

void s3_engine_destroy(s3_engine_t *e)
{
    if (!e)
        return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->lock);
        e->stop = true;
        pthread_mutex_unlock(&e->lock);
        curl_multi_wakeup(e->multi);
        pthread_join(e->thread, NULL);
    }
    if (e->multi)
        curl_multi_cleanup(e->multi);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    free(e->sigv4);
    if (e->userpwd) {
        memset(e->userpwd, 0, strlen(e->userpwd));
        free(e->userpwd);
    }
    free(e->ca_bundle);
    free(e);
}

void s3_submit(s3_engine_t *e, s3_req_t *r)
{
    clear_answer(r);
    r->attempts = 0;
    r->done = false;
    r->not_before_ms = 0;
    pthread_mutex_lock(&e->lock);
    r->next = e->queue;
    e->queue = r;
    e->outstanding++;
    pthread_mutex_unlock(&e->lock);
    curl_multi_wakeup(e->multi);
}

void s3_wait(s3_engine_t *e, s3_req_t *r)
{
    pthread_mutex_lock(&e->lock);
    while (!r->done)
        pthread_cond_wait(&e->cond, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

bool s3_is_done(s3_engine_t *e, s3_req_t *r)
{
    pthread_mutex_lock(&e->lock);
    bool d = r->done;
    pthread_mutex_unlock(&e->lock);
    return d;
}

void s3_run(s3_engine_t *e, s3_req_t *r)
{
    s3_submit(e, r);
    s3_wait(e, r);
}
