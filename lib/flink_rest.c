/*
 * flink_rest.c - the Flink REST client (see sp_flink.h): libcurl for HTTP,
 * cJSON for bodies.  Facts: ../shared/spec/flink-rest-and-cli.md.
 */
#include "sp_flink.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_snapshot.h"

struct sp_flink {
    CURL *curl;
    char *base;          /* with credentials, no trailing '/' */
    char *display;       /* without credentials */
    sp_flink_options_t o;
    int64_t deadline;    /* mono_ms() bound of total_timeout_ms, INT64_MAX when none */
    bool have_version;
    sp_flink_version_t version;
    bool unanswered;     /* the last request failed after it may have reached the cluster */
};

typedef struct resp {
    long status;
    char *body;
    size_t len, cap;
} resp_t;

/* How a request may be repeated after a failure. */
typedef enum retry {
    RETRY_SAFE,     /* idempotent (GET, or a POST with a client-chosen ID): any dropped connection, 503 */
    RETRY_CONNECT   /* only when nothing reached the server: connection refused / resolve errors, 503 */
} retry_t;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static char *xstrdup(const char *s) { return s ? strdup(s) : NULL; }

static bool final_state(const char *st);

/* "60 s", "1.5 s", "250 ms": a duration for messages. */
static const char *fmt_dur(int64_t ms, char buf[32])
{
    if (ms < 1000)
        snprintf(buf, 32, "%lld ms", (long long)ms);
    else if (ms % 1000 == 0)
        snprintf(buf, 32, "%lld s", (long long)(ms / 1000));
    else
        snprintf(buf, 32, "%.1f s", (double)ms / 1000);
    return buf;
}

void sp_flink_redact_url(const char *url, char *out, size_t n)
{
    const char *scheme_end = strstr(url, "://");
    const char *host = scheme_end ? scheme_end + 3 : url;
    const char *path = host + strcspn(host, "/?#");
    const char *at = NULL;
    for (const char *p = host; p < path; p++)
        if (*p == '@')
            at = p;
    if (!at) {
        snprintf(out, n, "%s", url);
        return;
    }
    snprintf(out, n, "%.*s%s", (int)(host - url), url, at + 1);
}

sp_status_t sp_flink_open(const char *base_url, const sp_flink_options_t *opts, sp_flink_t **out, sp_error_t *err)
{
    *out = NULL;
    if (!base_url || (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0)) {
        char shown[512];
        sp_flink_redact_url(base_url ? base_url : "", shown, sizeof shown);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "rest-url",
                            "'%s' is not a REST URL (expected http://host:port or https://...)", shown);
    }
    sp_flink_t *fl = calloc(1, sizeof *fl);
    if (!fl)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    if (opts)
        fl->o = *opts;
    if (fl->o.connect_timeout_ms <= 0)
        fl->o.connect_timeout_ms = 10000;
    if (fl->o.request_timeout_ms <= 0)
        fl->o.request_timeout_ms = 60000;
    if (fl->o.max_attempts <= 0)
        fl->o.max_attempts = 8;
    if (fl->o.retry_delay_ms <= 0)
        fl->o.retry_delay_ms = 250;
    fl->deadline = fl->o.total_timeout_ms > 0 ? mono_ms() + fl->o.total_timeout_ms : INT64_MAX;
    size_t n = strlen(base_url);
    while (n > 0 && base_url[n - 1] == '/')
        n--;
    fl->base = strndup(base_url, n);
    fl->display = malloc(n + 1);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fl->curl = curl_easy_init();
    if (!fl->base || !fl->display || !fl->curl) {
        sp_flink_close(fl);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    sp_flink_redact_url(fl->base, fl->display, n + 1);
    *out = fl;
    return SP_OK;
}

void sp_flink_close(sp_flink_t *fl)
{
    if (!fl)
        return;
    if (fl->curl)
        curl_easy_cleanup(fl->curl);
    free(fl->base);
    free(fl->display);
    free(fl);
}

const char *sp_flink_url(const sp_flink_t *fl) { return fl ? fl->display : ""; }

/*
 * The deadline of a wait of timeout_ms (<= 0: none) inside the client's
 * total timeout (sp_flink_options_t.total_timeout_ms), whichever ends
 * first; *bound_ms gets the duration a timeout message names (0: none).
 */
static int64_t wait_deadline(const sp_flink_t *fl, int64_t timeout_ms, int64_t *bound_ms)
{
    int64_t d = timeout_ms > 0 ? mono_ms() + timeout_ms : INT64_MAX;
    *bound_ms = timeout_ms > 0 ? timeout_ms : 0;
    if (fl->deadline < d) {
        d = fl->deadline;
        *bound_ms = fl->o.total_timeout_ms;
    }
    return d;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
    resp_t *r = user;
    size_t n = size * nmemb;
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *b = realloc(r->body, cap);
        if (!b)
            return 0;
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, ptr, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

static void resp_free(resp_t *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

static void trace(sp_flink_t *fl, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void trace(sp_flink_t *fl, const char *fmt, ...)
{
    if (!fl->o.trace)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fl->o.trace(fl->o.trace_user, line);
}

/* Whether a curl failure left the request unsent (safe to repeat any request). */
static bool not_sent(CURLcode c)
{
    return c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST || c == CURLE_COULDNT_RESOLVE_PROXY;
}

static bool transient(CURLcode c)
{
    return not_sent(c) || c == CURLE_GOT_NOTHING || c == CURLE_RECV_ERROR || c == CURLE_SEND_ERROR ||
           c == CURLE_PARTIAL_FILE || c == CURLE_OPERATION_TIMEDOUT;
}

/*
 * One request with retries.  body: JSON text (POST/PATCH), or NULL; mime: a
 * multipart form (upload).  On SP_OK r->status is the final HTTP status
 * (any, including errors: callers interpret them).
 */
static sp_status_t http(sp_flink_t *fl, const char *method, const char *path, const char *body, curl_mime *mime,
                        retry_t retry, resp_t *r, sp_error_t *err)
{
    memset(r, 0, sizeof *r);
    size_t ul = strlen(fl->base) + strlen(path) + 1;
    char *url = malloc(ul);
    if (!url)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    snprintf(url, ul, "%s%s", fl->base, path);
    long delay = fl->o.retry_delay_ms;
    sp_status_t s = SP_OK;
    for (int attempt = 1;; attempt++) {
        CURL *c = fl->curl;
        curl_easy_reset(c);
        resp_free(r);
        struct curl_slist *hdrs = NULL;
        hdrs = curl_slist_append(hdrs, "Accept: application/json");
        if (body)
            hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        /* the jar upload docs ask for no "Expect: 100-continue" (section 1) */
        hdrs = curl_slist_append(hdrs, "Expect:");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, fl->o.connect_timeout_ms);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "sp");
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        if (mime) {
            curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
            /* uploads may be large: bound by stalls, and by the total timeout when there is one */
            curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
            curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
            if (fl->deadline != INT64_MAX) {
                int64_t left = fl->deadline - mono_ms();
                curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, left < 1000 ? 1000L : (long)left);
            }
        } else {
            long tmo = fl->o.request_timeout_ms;
            int64_t left = fl->deadline - mono_ms();
            if (left < tmo)
                tmo = left < 1000 ? 1000 : (long)left;
            curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, tmo);
            if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
            }
            if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
            else if (strcmp(method, "POST") == 0 && !body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
            }
        }
        char ebuf[CURL_ERROR_SIZE] = "";
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
        int64_t t0 = mono_ms();
        CURLcode cc = curl_easy_perform(c);
        curl_slist_free_all(hdrs);
        long status = 0;
        if (cc == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        r->status = status;
        const char *what = cc == CURLE_OK ? NULL : (ebuf[0] ? ebuf : curl_easy_strerror(cc));
        if (cc == CURLE_OK)
            trace(fl, "%s %s%s%s%s -> %ld (%lld ms)", method, fl->display, path, body ? " " : "", body ? body : "",
                  status, (long long)(mono_ms() - t0));
        else
            trace(fl, "%s %s%s%s%s -> %s", method, fl->display, path, body ? " " : "", body ? body : "", what);
        bool again = false;
        fl->unanswered = cc != CURLE_OK && !not_sent(cc);
        if (cc != CURLE_OK)
            again = retry == RETRY_SAFE ? transient(cc) : not_sent(cc);
        if (cc == CURLE_OPERATION_TIMEDOUT)
            again = false; /* a server that accepts and never answers: do not multiply the wait */
        else if (status == 503)
            again = true; /* leader election (section 1): nothing was done */
        bool out_of_time = mono_ms() + delay >= fl->deadline;
        if (!again || attempt >= fl->o.max_attempts || out_of_time) {
            char dur[32];
            if (cc == CURLE_OPERATION_TIMEDOUT && fl->deadline != INT64_MAX && mono_ms() >= fl->deadline - 100)
                s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "timed out after %s waiting for the cluster to "
                                 "answer %s %s%s", fmt_dur(fl->o.total_timeout_ms, dur), method, fl->display, path);
            else if (cc == CURLE_OPERATION_TIMEDOUT)
                s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "",
                                 "%s %s%s: no answer from the cluster in time (%s)%s: is the address that of a Flink "
                                 "JobManager's REST endpoint, and is it responsive?", method, fl->display, path, what,
                                 attempt > 1 ? ", after retries" : "");
            else if (cc != CURLE_OK)
                s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "%s %s%s: %s%s", method, fl->display, path, what,
                                 attempt > 1 ? " (after retries)" : "");
            break;
        }
        trace(fl, "retrying in %ld ms (%s)", delay, cc != CURLE_OK ? what : "503: leader election in progress");
        sleep_ms(delay);
        delay = delay * 2 > 4000 ? 4000 : delay * 2;
    }
    free(url);
    return s;
}

/* Shorten "org.apache.flink...RestHandlerException: msg" to "msg" for handler errors. */
static const char *strip_handler_class(const char *line)
{
    static const char *const prefixes[] = {"org.apache.flink.runtime.rest.handler.RestHandlerException: ",
                                           "org.apache.flink.runtime.rest.NotFoundException: "};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(line, prefixes[i], strlen(prefixes[i])) == 0)
            return line + strlen(prefixes[i]);
    return line;
}

/* The first line of s, at most n bytes, into out. */
static void first_line(const char *s, char *out, size_t n)
{
    size_t l = strcspn(s, "\r\n");
    snprintf(out, n, "%.*s", (int)l, s);
}

/* The last "Caused by: X: msg" line of a Java stack trace (without "Caused by: "), or "". */
static void root_cause(const char *trace, char *out, size_t n)
{
    out[0] = '\0';
    const char *p = trace, *last = NULL;
    while ((p = strstr(p, "Caused by: ")) != NULL) {
        last = p + 11;
        p = last;
    }
    if (last)
        first_line(last, out, n);
}

/* Drop java.util.concurrent wrappers: "java.util.concurrent.CompletionException: X: m" -> "X: m". */
static const char *unwrap(const char *line)
{
    static const char *const w[] = {"java.util.concurrent.CompletionException: ",
                                    "java.util.concurrent.ExecutionException: ",
                                    "java.lang.RuntimeException: "};
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
            if (strncmp(line, w[i], strlen(w[i])) == 0 && strchr(line + strlen(w[i]), ':')) {
                line += strlen(w[i]);
                again = true;
            }
    }
    return line;
}

/* "outer; caused by root" from a Java stack trace. */
static void summarize_trace(const char *trace, char *out, size_t n)
{
    char outer[512], root[512];
    first_line(trace, outer, sizeof outer);
    root_cause(trace, root, sizeof root);
    const char *o = unwrap(outer), *r = unwrap(root);
    if (!root[0] || strcmp(o, r) == 0 || strstr(o, r))
        snprintf(out, n, "%s", o);
    else
        snprintf(out, n, "%s (caused by %s)", o, r);
}

/* Put a prefix before the message of an error already set. */
static void prefix_error(sp_error_t *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void prefix_error(sp_error_t *err, const char *fmt, ...)
{
    if (!err)
        return;
    char pre[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    size_t pl = strlen(pre), cap = sizeof err->message;
    size_t ml = strnlen(err->message, cap - 1);
    if (pl >= cap)
        return;
    if (pl + ml >= cap)
        ml = cap - 1 - pl;
    memmove(err->message + pl, err->message, ml);
    memcpy(err->message, pre, pl);
    err->message[pl + ml] = '\0';
}

/* Change the code of an error already set. */
static sp_status_t recode(sp_error_t *err, sp_status_t code)
{
    if (err)
        err->code = code;
    return code;
}

/* Turn an HTTP error answer into an sp_error: "what: HTTP 400: Flink's message". */
static sp_status_t http_error(sp_flink_t *fl, const char *what, const resp_t *r, sp_error_t *err)
{
    char msg[768] = "";
    cJSON *j = r->body ? cJSON_Parse(r->body) : NULL;
    const cJSON *errors = cJSON_GetObjectItemCaseSensitive(j, "errors");
    const cJSON *e0 = cJSON_GetArrayItem(errors, 0), *e1 = cJSON_GetArrayItem(errors, 1);
    if (cJSON_IsString(e0)) {
        if (cJSON_IsString(e1) && strstr(e1->valuestring, "Exception on server side")) {
            /* 500: "Internal server error." + the server side trace */
            char sum[512];
            const char *t = strchr(e1->valuestring, '\n');
            summarize_trace(t ? t + 1 : e1->valuestring, sum, sizeof sum);
            snprintf(msg, sizeof msg, "%s %s", e0->valuestring, sum);
        } else {
            char line[512], root[512];
            first_line(strip_handler_class(e0->valuestring), line, sizeof line);
            root_cause(e0->valuestring, root, sizeof root);
            const char *ru = unwrap(root);
            if (root[0] && !strstr(line, ru))
                snprintf(msg, sizeof msg, "%s (caused by %s)", line, ru);
            else
                snprintf(msg, sizeof msg, "%s", line);
        }
    } else if (r->body && r->len) {
        first_line(r->body, msg, 200);
    }
    cJSON_Delete(j);
    (void)fl;
    return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "%s: HTTP %ld%s%s", what, r->status, msg[0] ? ": " : "", msg);
}

/* GET path and parse JSON; 200 expected.  *out owned by caller.  404 -> SP_ERR_NOT_FOUND. */
static sp_status_t get_json(sp_flink_t *fl, const char *path, cJSON **out, sp_error_t *err)
{
    *out = NULL;
    resp_t r;
    sp_status_t s = http(fl, "GET", path, NULL, NULL, RETRY_SAFE, &r, err);
    if (s) {
        resp_free(&r);
        return s;
    }
    char what[300];
    snprintf(what, sizeof what, "GET %s%s", fl->display, path);
    if (r.status != 200) {
        s = http_error(fl, what, &r, err);
        if (r.status == 404)
            s = recode(err, SP_ERR_NOT_FOUND);
        resp_free(&r);
        return s;
    }
    *out = r.body ? cJSON_Parse(r.body) : NULL;
    resp_free(&r);
    if (!*out)
        return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "%s: the answer is not JSON", what);
    return SP_OK;
}

/* ---- version ---- */

bool sp_flink_version_parse(const char *s, sp_flink_version_t *out)
{
    memset(out, 0, sizeof *out);
    out->patch = -1;
    if (!s)
        return false;
    snprintf(out->text, sizeof out->text, "%s", s);
    const char *p = s;
    while (*p && (*p < '0' || *p > '9'))
        p++; /* vendor prefixes ("v1.20.1") */
    int a, b, c, n = 0;
    int k = sscanf(p, "%d.%d%n.%d%n", &a, &b, &n, &c, &n);
    if (k < 2)
        return false;
    out->major = a;
    out->minor = b;
    out->patch = k >= 3 ? c : -1;
    return true;
}

int sp_flink_version_cmp(const sp_flink_version_t *v, int major, int minor)
{
    if (v->major != major)
        return v->major < major ? -1 : 1;
    if (v->minor != minor)
        return v->minor < minor ? -1 : 1;
    return 0;
}

sp_status_t sp_flink_get_version(sp_flink_t *fl, sp_flink_version_t *out, sp_error_t *err)
{
    if (!fl->have_version) {
        cJSON *j;
        sp_status_t s = get_json(fl, "/config", &j, err);
        if (s)
            return s == SP_ERR_NOT_FOUND ? recode(err, SP_ERR_REST) : s;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "flink-version");
        bool ok = cJSON_IsString(v) && sp_flink_version_parse(v->valuestring, &fl->version);
        cJSON_Delete(j);
        if (!ok)
            return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "flink-version",
                                "GET %s/config: no Flink version in the answer (is this a Flink JobManager?)", fl->display);
        fl->have_version = true;
    }
    *out = fl->version;
    return SP_OK;
}

/* ---- IDs ---- */

sp_status_t sp_flink_new_id(char out[33], sp_error_t *err)
{
    unsigned char b[16];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof b)
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot read /dev/urandom for a new ID");
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return SP_OK;
}

bool sp_flink_id_valid(const char *s)
{
    if (!s || strlen(s) != 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F')))
            return false;
    return true;
}

static void lower_id(const char *in, char out[33])
{
    for (int i = 0; i < 32; i++)
        out[i] = (char)(in[i] >= 'A' && in[i] <= 'F' ? in[i] - 'A' + 'a' : in[i]);
    out[32] = '\0';
}

static sp_status_t check_id(const char *what, const char *id, char out[33], sp_error_t *err)
{
    if (!sp_flink_id_valid(id))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, what, "'%s' is not a %s (32 hexadecimal digits)",
                            id ? id : "", what);
    lower_id(id, out);
    return SP_OK;
}

/* ---- savepoints ---- */

char *sp_flink_savepoint_body(const sp_flink_version_t *v, const sp_flink_savepoint_request_t *req)
{
    cJSON *j = cJSON_CreateObject();
    /* /savepoints uses hyphenated names, /stop camelCase (section 4.13 / 4.15) */
    if (req->stop) {
        if (req->target_dir)
            cJSON_AddStringToObject(j, "targetDirectory", req->target_dir);
        cJSON_AddBoolToObject(j, "drain", req->drain);
    } else {
        if (req->target_dir)
            cJSON_AddStringToObject(j, "target-directory", req->target_dir);
        cJSON_AddBoolToObject(j, "cancel-job", false);
    }
    if (req->trigger_id)
        cJSON_AddStringToObject(j, "triggerId", req->trigger_id);
    /* formatType: 1.15+ (section 9) */
    if (sp_flink_version_cmp(v, 1, 15) >= 0)
        cJSON_AddStringToObject(j, "formatType", req->format == SP_FLINK_NATIVE ? "NATIVE" : "CANONICAL");
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

sp_status_t sp_flink_savepoint_trigger(sp_flink_t *fl, const char *job_id, const sp_flink_savepoint_request_t *req,
                                       sp_error_t *err)
{
    char job[33], trig[33];
    sp_status_t s;
    if ((s = check_id("job ID", job_id, job, err)) || (s = check_id("trigger ID", req->trigger_id, trig, err)))
        return s;
    sp_flink_version_t v;
    if ((s = sp_flink_get_version(fl, &v, err)))
        return s;
    if (req->format == SP_FLINK_NATIVE && sp_flink_version_cmp(&v, 1, 15) < 0)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "type",
                            "the cluster runs Flink %s; native savepoints need Flink 1.15 or later", v.text);
    sp_flink_savepoint_request_t r = *req;
    r.trigger_id = trig;
    char *body = sp_flink_savepoint_body(&v, &r);
    if (!body)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/%s", job, req->stop ? "stop" : "savepoints");
    resp_t resp;
    s = http(fl, "POST", path, body, NULL, RETRY_SAFE, &resp, err);
    free(body);
    if (s && fl->unanswered) {
        /* the POST may have reached the cluster and only its answer been lost: the trigger ID is ours, so ask
         * for the operation before calling it failed */
        sp_flink_operation_t op;
        memset(&op, 0, sizeof op);
        sp_error_t e;
        sp_status_t known = sp_flink_savepoint_status(fl, job, trig, &op, &e);
        bool found = known == SP_OK || op.completed; /* a completed failure is known too: its wait reports it */
        sp_flink_operation_free(&op);
        if (found) {
            sp_error_clear(err);
            fl->unanswered = false;
            return SP_OK;
        }
        fl->unanswered = true;
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%.380s; the request may have reached the cluster: follow trigger ID %s with "
                 "`sp status %s %s`", err->message, trig, job, trig);
        snprintf(err->message, sizeof err->message, "%s", msg);
        return s;
    }
    if (s)
        return s;
    char what[256];
    snprintf(what, sizeof what, "%s for job %s (trigger ID %s)", req->stop ? "stop-with-savepoint" : "savepoint", job, trig);
    if (resp.status != 202 && resp.status != 200) {
        s = http_error(fl, what, &resp, err);
    } else {
        cJSON *j = resp.body ? cJSON_Parse(resp.body) : NULL;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "request-id");
        if (!cJSON_IsString(id))
            s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "request-id", "%s: no request-id in the answer", what);
        else if (strcasecmp(id->valuestring, trig) != 0)
            s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "request-id",
                             "%s: the cluster answered with another trigger ID (%s); it ignored the one sp chose",
                             what, id->valuestring);
        cJSON_Delete(j);
    }
    resp_free(&resp);
    return s;
}

void sp_flink_operation_free(sp_flink_operation_t *op)
{
    if (!op)
        return;
    free(op->location);
    free(op->failure_class);
    free(op->failure_summary);
    free(op->failure_trace);
    free(op->stop_savepoint);
    memset(op, 0, sizeof *op);
}

/* StopWithSavepointStoppingException: "A savepoint has been created at: <path>, but ..." (section 4.15) */
static char *stop_savepoint_path(const char *trace)
{
    const char *p = strstr(trace, "created at: ");
    if (!p)
        return NULL;
    p += 12;
    size_t n = strcspn(p, ", \n");
    return n ? strndup(p, n) : NULL;
}

static sp_status_t operation_from(const char *what, cJSON *j, sp_flink_operation_t *op, sp_error_t *err)
{
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "status"), "id");
    if (!cJSON_IsString(st))
        return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "status.id", "%s: no status in the answer", what);
    if (strcmp(st->valuestring, "IN_PROGRESS") == 0)
        return SP_OK;
    if (strcmp(st->valuestring, "COMPLETED") != 0)
        return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "status.id", "%s: unknown status '%s'", what, st->valuestring);
    op->completed = true;
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "operation");
    const cJSON *loc = cJSON_GetObjectItemCaseSensitive(o, "location");
    const cJSON *fc = cJSON_GetObjectItemCaseSensitive(o, "failure-cause");
    if (cJSON_IsObject(fc)) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(fc, "class");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(fc, "stack-trace");
        op->failure_class = xstrdup(cJSON_IsString(cls) ? cls->valuestring : "unknown");
        op->failure_trace = xstrdup(cJSON_IsString(tr) ? tr->valuestring : "");
        char sum[512];
        if (op->failure_trace[0])
            summarize_trace(op->failure_trace, sum, sizeof sum);
        else
            snprintf(sum, sizeof sum, "%s", op->failure_class);
        op->failure_summary = xstrdup(sum);
        op->stop_savepoint = stop_savepoint_path(op->failure_trace);
        if (op->stop_savepoint)
            return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "%s: the savepoint was written to %s, but the job "
                                "failed while stopping: %s", what, op->stop_savepoint, sum);
        return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "%s failed: %s", what, sum);
    }
    if (!cJSON_IsString(loc) || !loc->valuestring[0])
        return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "operation.location",
                            "%s: the cluster reports it COMPLETED but names no savepoint location", what);
    op->location = xstrdup(loc->valuestring);
    return SP_OK;
}

/* After a 404 for a trigger: say what the job's newest savepoint is, when the cluster knows the job. */
static void expired_hint(sp_flink_t *fl, const char *job, char *out, size_t n)
{
    out[0] = '\0';
    sp_flink_checkpoints_t c;
    if (sp_flink_checkpoints(fl, job, &c, NULL) == SP_OK) {
        if (c.latest_savepoint_path)
            snprintf(out, n, "; the job's newest savepoint is %s (checkpoint %lld)", c.latest_savepoint_path,
                     (long long)c.latest_savepoint_id);
        sp_flink_checkpoints_free(&c);
    }
}

sp_status_t sp_flink_savepoint_status(sp_flink_t *fl, const char *job_id, const char *trigger_id,
                                      sp_flink_operation_t *op, sp_error_t *err)
{
    memset(op, 0, sizeof *op);
    char job[33], trig[33];
    sp_status_t s;
    if ((s = check_id("job ID", job_id, job, err)) || (s = check_id("trigger ID", trigger_id, trig, err)))
        return s;
    char path[128], what[160];
    snprintf(path, sizeof path, "/jobs/%s/savepoints/%s", job, trig);
    snprintf(what, sizeof what, "savepoint %s of job %s", trig, job);
    cJSON *j;
    s = get_json(fl, path, &j, err);
    if (s == SP_ERR_NOT_FOUND) {
        char hint[600];
        expired_hint(fl, job, hint, sizeof hint);
        return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "",
                            "the cluster has no savepoint operation %s for job %s: it never existed there, or its "
                            "result expired (kept for rest.async.store-duration, 5 min by default) or the JobManager "
                            "restarted%s", trig, job, hint);
    }
    if (s)
        return s;
    s = operation_from(what, j, op, err);
    cJSON_Delete(j);
    return s;
}

sp_status_t sp_flink_savepoint_wait(sp_flink_t *fl, const char *job_id, const char *trigger_id, int64_t timeout_ms,
                                    sp_flink_operation_t *op, sp_error_t *err)
{
    int64_t bound;
    int64_t deadline = wait_deadline(fl, timeout_ms, &bound);
    long delay = 100;
    for (;;) {
        sp_status_t s = sp_flink_savepoint_status(fl, job_id, trigger_id, op, err);
        if (s || op->completed)
            return s;
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            char st[24] = "", dur[32];
            if (sp_flink_job_state(fl, job_id, st, NULL) != SP_OK)
                snprintf(st, sizeof st, "state unknown");
            return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "",
                                "timed out after %s waiting for savepoint %s of job %s to complete (the cluster "
                                "reports it IN_PROGRESS, job %s); it goes on in the cluster: follow it with "
                                "'sp status %s %s'", fmt_dur(bound, dur), trigger_id, job_id, st, job_id, trigger_id);
        }
        sleep_ms(delay < left ? delay : (long)left);
        delay = delay * 2 > 2000 ? 2000 : delay * 2;
    }
}

sp_status_t sp_flink_stop_trigger_reused(sp_flink_t *fl, const char *job_id, const char *trigger_id, bool *reused,
                                         char **location, sp_error_t *err)
{
    *reused = false;
    *location = NULL;
    char job[33], trig[33], path[128];
    sp_status_t s;
    if ((s = check_id("job ID", job_id, job, err)) || (s = check_id("trigger ID", trigger_id, trig, err)))
        return s;
    snprintf(path, sizeof path, "/jobs/%s/savepoints/%s", job, trig);
    cJSON *j;
    s = get_json(fl, path, &j, err);
    if (s == SP_ERR_NOT_FOUND) {
        sp_error_clear(err);
        return SP_OK; /* the cluster does not know the trigger ID: a stop with it starts a new operation */
    }
    if (s)
        return s;
    sp_flink_operation_t op;
    memset(&op, 0, sizeof op);
    sp_status_t os = operation_from("", j, &op, NULL);
    cJSON_Delete(j);
    /* a completed savepoint while the job runs: a stop-with-savepoint would have ended the job */
    char st[24];
    if (os == SP_OK && op.completed && op.location && (s = sp_flink_job_state(fl, job, st, err)) == SP_OK &&
        strcmp(st, "RUNNING") == 0) {
        *reused = true;
        *location = op.location;
        op.location = NULL;
    }
    sp_flink_operation_free(&op);
    return s;
}

sp_status_t sp_flink_check_location(const char *location, sp_error_t *err)
{
    sp_snapshot_t *snap;
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t s = sp_snapshot_open(location, 0, &snap, &e);
    if (s) {
        if (err) {
            *err = e;
            snprintf(err->message, sizeof err->message,
                     "Flink reported the savepoint complete at %.200s, but its _metadata cannot be read: %.250s",
                     location, e.message);
        }
        return s;
    }
    sp_snapshot_close(snap);
    return SP_OK;
}

/* ---- jobs ---- */

static int64_t num(const cJSON *o, const char *k, int64_t d)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : d;
}

static void str_into(const cJSON *o, const char *k, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(out, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

sp_status_t sp_flink_jobs(sp_flink_t *fl, sp_flink_job_t **jobs, size_t *n, sp_error_t *err)
{
    *jobs = NULL;
    *n = 0;
    cJSON *j;
    sp_status_t s = get_json(fl, "/jobs/overview", &j, err);
    if (s)
        return s == SP_ERR_NOT_FOUND ? recode(err, SP_ERR_REST) : s;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "jobs");
    int cnt = cJSON_IsArray(arr) ? cJSON_GetArraySize(arr) : 0;
    *jobs = calloc(cnt > 0 ? (size_t)cnt : 1, sizeof **jobs);
    if (!*jobs) {
        cJSON_Delete(j);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        sp_flink_job_t *jb = &(*jobs)[(*n)++];
        str_into(e, "jid", jb->id, sizeof jb->id);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
        jb->name = xstrdup(cJSON_IsString(name) ? name->valuestring : "");
        str_into(e, "state", jb->state, sizeof jb->state);
        jb->start_time_ms = num(e, "start-time", -1);
        jb->end_time_ms = num(e, "end-time", -1);
        jb->duration_ms = num(e, "duration", -1);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "tasks");
        jb->tasks_total = (int)num(t, "total", 0);
        jb->tasks_running = (int)num(t, "running", 0);
    }
    cJSON_Delete(j);
    return SP_OK;
}

void sp_flink_jobs_free(sp_flink_job_t *jobs, size_t n)
{
    for (size_t i = 0; jobs && i < n; i++)
        free(jobs[i].name);
    free(jobs);
}

static sp_status_t job_details(sp_flink_t *fl, const char *job, cJSON **out, sp_error_t *err)
{
    char path[64];
    snprintf(path, sizeof path, "/jobs/%s", job);
    sp_status_t s = get_json(fl, path, out, err);
    if (s == SP_ERR_NOT_FOUND)
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "the cluster at %s does not know job %s",
                            fl->display, job);
    return s;
}

sp_status_t sp_flink_job_state(sp_flink_t *fl, const char *job_id, char state[24], sp_error_t *err)
{
    char job[33];
    sp_status_t s = check_id("job ID", job_id, job, err);
    cJSON *j;
    if (s || (s = job_details(fl, job, &j, err)))
        return s;
    str_into(j, "state", state, 24);
    cJSON_Delete(j);
    return SP_OK;
}

sp_status_t sp_flink_job_exception(sp_flink_t *fl, const char *job_id, char **summary, char **trace_out, sp_error_t *err)
{
    *summary = *trace_out = NULL;
    char job[33], path[96];
    sp_status_t s = check_id("job ID", job_id, job, err);
    if (s)
        return s;
    snprintf(path, sizeof path, "/jobs/%s/exceptions", job);
    cJSON *j;
    if ((s = get_json(fl, path, &j, err)))
        return s;
    const char *t = NULL;
    const cJSON *root = cJSON_GetObjectItemCaseSensitive(j, "root-exception");
    if (cJSON_IsString(root))
        t = root->valuestring;
    const cJSON *entries =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "exceptionHistory"), "entries");
    const cJSON *e0 = cJSON_GetArrayItem(entries, 0);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(e0, "stacktrace");
    if (!t && cJSON_IsString(st))
        t = st->valuestring;
    if (t && *t) {
        char sum[512];
        summarize_trace(t, sum, sizeof sum);
        *summary = xstrdup(sum);
        *trace_out = xstrdup(t);
    }
    cJSON_Delete(j);
    return SP_OK;
}

/* Flink's globally terminal job states (JobStatus#isGloballyTerminalState).  SUSPENDED is not one: with
 * high availability a new leader resumes the job, from the snapshot it was restored from when no checkpoint
 * completed since, so a suspended NO_CLAIM job still needs its snapshot. */
static bool final_state(const char *st)
{
    return strcmp(st, "FAILED") == 0 || strcmp(st, "CANCELED") == 0 || strcmp(st, "FINISHED") == 0;
}

sp_status_t sp_flink_wait_running(sp_flink_t *fl, const char *job_id, int64_t timeout_ms, char state[24], sp_error_t *err)
{
    char job[33];
    sp_status_t s = check_id("job ID", job_id, job, err);
    if (s)
        return s;
    int64_t bound;
    int64_t deadline = wait_deadline(fl, timeout_ms, &bound);
    long delay = 200;
    state[0] = '\0';
    for (;;) {
        cJSON *j;
        s = job_details(fl, job, &j, err);
        if (s)
            return s;
        str_into(j, "state", state, 24);
        bool all = strcmp(state, "RUNNING") == 0;
        int nv = 0, nrun = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(j, "vertices")) {
            char vs[24];
            str_into(v, "status", vs, sizeof vs);
            nv++;
            if (strcmp(vs, "RUNNING") != 0 && strcmp(vs, "FINISHED") != 0)
                all = false;
            else
                nrun++;
        }
        cJSON_Delete(j);
        if (all)
            return SP_OK;
        if (final_state(state)) {
            char *sum = NULL, *tr = NULL;
            sp_flink_job_exception(fl, job, &sum, &tr, NULL);
            s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "job %s is %s%s%s", job, state, sum ? ": " : "",
                             sum ? sum : "");
            free(sum);
            free(tr);
            return s;
        }
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            char dur[32];
            return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "timed out after %s waiting for job %s to run "
                                "(job %s, %d of %d tasks running)", fmt_dur(bound, dur), job, state, nrun, nv);
        }
        sleep_ms(delay < left ? delay : (long)left);
        delay = delay * 2 > 2000 ? 2000 : delay * 2;
    }
}

/* ---- checkpoints ---- */

void sp_flink_checkpoints_free(sp_flink_checkpoints_t *c)
{
    if (!c)
        return;
    free(c->restored_path);
    free(c->latest_completed_path);
    free(c->latest_savepoint_path);
    memset(c, 0, sizeof *c);
}

static char *path_of(const cJSON *o)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "external_path");
    return cJSON_IsString(p) ? xstrdup(p->valuestring) : NULL;
}

sp_status_t sp_flink_checkpoints(sp_flink_t *fl, const char *job_id, sp_flink_checkpoints_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->restored_id = out->latest_completed_id = out->latest_savepoint_id = -1;
    char job[33], path[96];
    sp_status_t s = check_id("job ID", job_id, job, err);
    if (s)
        return s;
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", job);
    cJSON *j;
    sp_error_t e;
    sp_error_clear(&e);
    s = get_json(fl, path, &j, &e);
    if (s == SP_ERR_NOT_FOUND) {
        if (strstr(e.message, "not been enabled") || strstr(e.message, "not enabled"))
            return SP_OK; /* enabled stays false */
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "the cluster at %s does not know job %s",
                            fl->display, job);
    }
    if (s) {
        if (err)
            *err = e;
        return s;
    }
    out->enabled = true;
    const cJSON *latest = cJSON_GetObjectItemCaseSensitive(j, "latest");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(latest, "restored");
    if (cJSON_IsObject(r)) {
        out->has_restored = true;
        out->restored_id = num(r, "id", -1);
        out->restored_is_savepoint = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "is_savepoint"));
        out->restored_path = path_of(r);
    }
    /* the newest completed checkpoint that is not a savepoint: latest.completed and the history (section 4.7) */
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(latest, "completed");
    if (cJSON_IsObject(c) && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "is_savepoint"))) {
        out->latest_completed_id = num(c, "id", -1);
        out->latest_completed_path = path_of(c);
    }
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(latest, "savepoint");
    if (cJSON_IsObject(sv)) {
        out->latest_savepoint_id = num(sv, "id", -1);
        out->latest_savepoint_path = path_of(sv);
    }
    const cJSON *h;
    cJSON_ArrayForEach(h, cJSON_GetObjectItemCaseSensitive(j, "history")) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(h, "status");
        if (!cJSON_IsString(st) || strcmp(st->valuestring, "COMPLETED") != 0 ||
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "is_savepoint")))
            continue;
        int64_t id = num(h, "id", -1);
        if (id > out->latest_completed_id) {
            out->latest_completed_id = id;
            free(out->latest_completed_path);
            out->latest_completed_path = path_of(h);
        }
    }
    cJSON_Delete(j);
    return SP_OK;
}

/* Normalise a snapshot path for comparison: no scheme, no trailing "/_metadata" or '/'. */
static void norm_path(const char *p, char *out, size_t n)
{
    if (strncmp(p, "file://", 7) == 0)
        p += 7;
    else if (strncmp(p, "file:", 5) == 0)
        p += 5;
    while (p[0] == '/' && p[1] == '/')
        p++;
    snprintf(out, n, "%s", p);
    size_t l = strlen(out);
    while (l > 1 && out[l - 1] == '/')
        out[--l] = '\0';
    if (l >= 10 && strcmp(out + l - 10, "/_metadata") == 0)
        out[l -= 10] = '\0';
    while (l > 1 && out[l - 1] == '/')
        out[--l] = '\0';
}

bool sp_flink_same_path(const char *a, const char *b)
{
    if (!a || !b)
        return false;
    char x[4096], y[4096];
    norm_path(a, x, sizeof x);
    norm_path(b, y, sizeof y);
    return strcmp(x, y) == 0;
}

/* ---- jars and restore ---- */

sp_status_t sp_flink_jar_upload(sp_flink_t *fl, const char *path, char **jar_id, sp_error_t *err)
{
    *jar_id = NULL;
    struct stat st;
    memset(&st, 0, sizeof st);
    errno = 0;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        sp_error_set_file(err, path);
        if (st.st_mode && S_ISDIR(st.st_mode) && e != ENOENT)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "jar", "a directory, not a jar file");
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "cannot read the jar file: %s",
                            strerror(e ? e : ENOENT));
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strlen(base);
    if (bl < 4 || strcmp(base + bl - 4, ".jar") != 0) {
        sp_error_set_file(err, path);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "jar", "Flink accepts only files named *.jar");
    }
    curl_mime *mime = curl_mime_init(fl->curl);
    curl_mimepart *part = curl_mime_addpart(mime);
    curl_mime_name(part, "jarfile"); /* the part name the REST docs use (section 4.10) */
    curl_mime_type(part, "application/x-java-archive");
    if (curl_mime_filedata(part, path) != CURLE_OK) {
        curl_mime_free(mime);
        sp_error_set_file(err, path);
        return sp_error_set(err, SP_ERR_IO, SP_NO_OFFSET, "", "cannot read the jar");
    }
    curl_mime_filename(part, base);
    resp_t r;
    sp_status_t s = http(fl, "POST", "/jars/upload", NULL, mime, RETRY_CONNECT, &r, err);
    curl_mime_free(mime);
    if (s) {
        prefix_error(err, "uploading %.200s: ", path);
        return s;
    }
    char what[512];
    snprintf(what, sizeof what, "upload of %.300s", path);
    if (r.status != 200) {
        s = http_error(fl, what, &r, err);
    } else {
        cJSON *j = r.body ? cJSON_Parse(r.body) : NULL;
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "filename");
        if (cJSON_IsString(f)) {
            /* jar ID = base name of the stored file (section 4.10) */
            const char *slash = strrchr(f->valuestring, '/');
            *jar_id = xstrdup(slash ? slash + 1 : f->valuestring);
        } else {
            s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "filename", "%s: no filename in the answer", what);
        }
        cJSON_Delete(j);
    }
    resp_free(&r);
    return s;
}

sp_status_t sp_flink_jar_delete(sp_flink_t *fl, const char *jar_id, sp_error_t *err)
{
    if (!jar_id || !*jar_id || strchr(jar_id, '/') || strchr(jar_id, '?') || strchr(jar_id, '#'))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "jar-id", "'%s' is not a jar ID", jar_id ? jar_id : "");
    char *esc = curl_easy_escape(fl->curl, jar_id, 0);
    size_t pl = strlen(esc) + 8;
    char *path = malloc(pl);
    if (path)
        snprintf(path, pl, "/jars/%s", esc);
    curl_free(esc);
    if (!path)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    resp_t r;
    /* deleting twice does no harm: a dropped connection may be retried */
    sp_status_t s = http(fl, "DELETE", path, NULL, NULL, RETRY_SAFE, &r, err);
    free(path);
    if (!s && r.status != 200) {
        char what[300];
        snprintf(what, sizeof what, "deleting jar %.200s", jar_id);
        s = http_error(fl, what, &r, err);
    }
    resp_free(&r);
    return s;
}

const char *sp_flink_claim_mode_name(sp_flink_claim_mode_t m)
{
    switch (m) {
    case SP_CLAIM_CLAIM: return "CLAIM";
    case SP_CLAIM_LEGACY: return "LEGACY";
    case SP_CLAIM_NO_CLAIM: break;
    }
    return "NO_CLAIM";
}

bool sp_flink_claim_mode_parse(const char *s, sp_flink_claim_mode_t *out)
{
    if (!s)
        return false;
    if (strcasecmp(s, "CLAIM") == 0)
        *out = SP_CLAIM_CLAIM;
    else if (strcasecmp(s, "NO_CLAIM") == 0)
        *out = SP_CLAIM_NO_CLAIM;
    else if (strcasecmp(s, "LEGACY") == 0)
        *out = SP_CLAIM_LEGACY;
    else
        return false;
    return true;
}

char *sp_flink_run_body(const sp_flink_version_t *v, const sp_flink_run_request_t *req, sp_error_t *err)
{
    if (req->savepoint_path && sp_flink_version_cmp(v, 1, 15) < 0) {
        sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "claim-mode",
                     "the cluster runs Flink %s: claim modes (and sp restore) need Flink 1.15 or later", v->text);
        return NULL;
    }
    cJSON *j = cJSON_CreateObject();
    if (req->entry_class)
        cJSON_AddStringToObject(j, "entryClass", req->entry_class);
    if (req->n_args) {
        /* programArgsList, never the deprecated programArgs string (gone in 2.x) */
        cJSON *a = cJSON_AddArrayToObject(j, "programArgsList");
        for (size_t i = 0; i < req->n_args; i++)
            cJSON_AddItemToArray(a, cJSON_CreateString(req->args[i]));
    }
    if (req->parallelism > 0)
        cJSON_AddNumberToObject(j, "parallelism", req->parallelism);
    if (req->job_id)
        cJSON_AddStringToObject(j, "jobId", req->job_id);
    if (req->savepoint_path) {
        cJSON_AddStringToObject(j, "savepointPath", req->savepoint_path);
        cJSON_AddBoolToObject(j, "allowNonRestoredState", req->allow_non_restored_state);
        /* restoreMode 1.15-1.19, claimMode from 1.20 (section 9; FLINK-35302 makes a wrong name silent) */
        cJSON_AddStringToObject(j, sp_flink_version_cmp(v, 1, 20) >= 0 ? "claimMode" : "restoreMode",
                                sp_flink_claim_mode_name(req->claim_mode));
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s)
        sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    return s;
}

sp_status_t sp_flink_jar_run(sp_flink_t *fl, const char *jar_id, const sp_flink_run_request_t *req,
                             char job_id_out[33], bool *rejected, sp_error_t *err)
{
    job_id_out[0] = '\0';
    bool dummy;
    if (!rejected)
        rejected = &dummy;
    *rejected = true;
    if (!jar_id || !*jar_id || strchr(jar_id, '/') || strchr(jar_id, '?') || strchr(jar_id, '#'))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "jar-id", "'%s' is not a jar ID", jar_id ? jar_id : "");
    sp_flink_version_t v;
    sp_status_t s = sp_flink_get_version(fl, &v, err);
    if (s)
        return s;
    sp_flink_run_request_t r = *req;
    char fixed[33];
    if (req->job_id) {
        if ((s = check_id("job ID", req->job_id, fixed, err)))
            return s;
        r.job_id = fixed;
    }
    char *body = sp_flink_run_body(&v, &r, err);
    if (!body)
        return err ? err->code : SP_ERR_INVALID;
    char *esc = curl_easy_escape(fl->curl, jar_id, 0);
    size_t pl = strlen(esc) + 16;
    char *path = malloc(pl);
    if (path)
        snprintf(path, pl, "/jars/%s/run", esc);
    curl_free(esc);
    if (!path) {
        free(body);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    resp_t resp;
    /* with a fixed job ID a repeated submission is recognised below, so any failure may be retried */
    s = http(fl, "POST", path, body, NULL, r.job_id ? RETRY_SAFE : RETRY_CONNECT, &resp, err);
    free(body);
    free(path);
    if (s) {
        /* no answer: the cluster may have taken the job all the same; with a fixed job ID that can be asked */
        char st[24];
        if (r.job_id && sp_flink_job_state(fl, r.job_id, st, NULL) == SP_OK) {
            snprintf(job_id_out, 33, "%s", r.job_id);
            return SP_OK;
        }
        *rejected = false;
        prefix_error(err, "submitting the job of jar %.200s: ", jar_id);
        return s;
    }
    if (resp.status == 200) {
        cJSON *j = resp.body ? cJSON_Parse(resp.body) : NULL;
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "jobid");
        if (cJSON_IsString(id) && sp_flink_id_valid(id->valuestring))
            lower_id(id->valuestring, job_id_out);
        else
            s = sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "jobid", "run of jar %s: no job ID in the answer", jar_id);
        cJSON_Delete(j);
    } else {
        char what[300];
        snprintf(what, sizeof what, "run of jar %s", jar_id);
        sp_error_t e;
        sp_error_clear(&e);
        s = http_error(fl, what, &resp, &e);
        /* an earlier attempt may have gone through: the fixed job ID then exists */
        char st[24];
        if (r.job_id && strstr(e.message, "already") && sp_flink_job_state(fl, r.job_id, st, NULL) == SP_OK) {
            snprintf(job_id_out, 33, "%s", r.job_id);
            s = SP_OK;
        } else if (err) {
            *err = e;
        }
    }
    resp_free(&resp);
    return s;
}

/* ---- released? ---- */

sp_status_t sp_flink_released(sp_flink_t *fl, const char *job_id, int64_t snapshot_id, bool *released,
                              int64_t *checkpoint_id, sp_error_t *err)
{
    *released = false;
    *checkpoint_id = -1;
    sp_flink_checkpoints_t c;
    sp_status_t s = sp_flink_checkpoints(fl, job_id, &c, err);
    if (s)
        return s;
    if (!c.enabled) {
        sp_flink_checkpoints_free(&c);
        return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "",
                            "checkpointing is not enabled for job %s: it will never complete a checkpoint that "
                            "releases the snapshot", job_id);
    }
    int64_t r = snapshot_id >= 0 ? snapshot_id : c.restored_id;
    *checkpoint_id = c.latest_completed_id;
    /* a completed checkpoint (not a savepoint) above the restored one; or a failover already recovered
     * from such a checkpoint (section 8) */
    if (r >= 0 && c.latest_completed_id > r)
        *released = true;
    if (r >= 0 && c.has_restored && !c.restored_is_savepoint && c.restored_id > r)
        *released = true;
    sp_flink_checkpoints_free(&c);
    return SP_OK;
}

sp_status_t sp_flink_wait_released(sp_flink_t *fl, const char *job_id, int64_t snapshot_id, int64_t timeout_ms,
                                   int64_t *checkpoint_id, sp_error_t *err)
{
    int64_t bound;
    int64_t deadline = wait_deadline(fl, timeout_ms, &bound);
    for (;;) {
        bool rel;
        sp_status_t s = sp_flink_released(fl, job_id, snapshot_id, &rel, checkpoint_id, err);
        if (s || rel)
            return s;
        char st[24] = "";
        if (sp_flink_job_state(fl, job_id, st, NULL) == SP_OK && final_state(st))
            return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "",
                                "job %s is %s without having completed a checkpoint after the restore", job_id, st);
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            char dur[32], last[64];
            if (*checkpoint_id >= 0)
                snprintf(last, sizeof last, "last completed checkpoint %lld", (long long)*checkpoint_id);
            else
                snprintf(last, sizeof last, "no completed checkpoint yet");
            char above[48] = "";
            if (snapshot_id >= 0)
                snprintf(above, sizeof above, " above %lld", (long long)snapshot_id);
            return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "",
                                "timed out after %s waiting for job %s to complete a checkpoint%s (job %s, %s); "
                                "until it does, the job still needs the snapshot", fmt_dur(bound, dur), job_id, above,
                                st[0] ? st : "state unknown", last);
        }
        sleep_ms(left < 1000 ? (long)left : 1000);
    }
}

sp_status_t sp_flink_wait_stopped(sp_flink_t *fl, const char *job_id, int64_t timeout_ms, char state[24],
                                  sp_error_t *err)
{
    char job[33];
    state[0] = '\0';
    sp_status_t s = check_id("job ID", job_id, job, err);
    if (s)
        return s;
    int64_t bound;
    int64_t deadline = wait_deadline(fl, timeout_ms > 0 ? timeout_ms : SP_FLINK_STOP_CONFIRM_MS, &bound);
    long delay = 100;
    for (;;) {
        sp_error_t e;
        sp_error_clear(&e);
        s = sp_flink_job_state(fl, job, state, &e);
        if (s == SP_ERR_NOT_FOUND) {
            state[0] = '\0'; /* the cluster no longer knows the job: it is not running there */
            return SP_OK;
        }
        if (s) {
            state[0] = '\0';
            if (err)
                *err = e;
            return s;
        }
        if (final_state(state))
            return SP_OK;
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            char dur[32];
            return sp_error_set(err, SP_ERR_REST, SP_NO_OFFSET, "", "timed out after %s waiting for job %s to end "
                                "after its stop-with-savepoint completed (job %s)", fmt_dur(bound, dur), job, state);
        }
        sleep_ms(delay < left ? delay : (long)left);
        delay = delay * 2 > 1000 ? 1000 : delay * 2;
    }
}

void sp_flink_record_query(void *user, sp_record_query_t *q)
{
    sp_flink_t *fl = user;
    sp_error_t e;
    sp_error_clear(&e);
    bool rel;
    int64_t ck;
    sp_status_t s = sp_flink_released(fl, q->restore->job_id, q->restore->snapshot_checkpoint_id, &rel, &ck, &e);
    char st[24] = "";
    if (s == SP_ERR_NOT_FOUND) {
        q->released = SP_RELEASE_JOB_UNKNOWN;
        snprintf(q->why, sizeof q->why, "%.250s", e.message);
        return;
    }
    if ((s || !rel) && sp_flink_job_state(fl, q->restore->job_id, st, NULL) == SP_OK && final_state(st)) {
        q->released = SP_RELEASE_JOB_OVER;
        q->checkpoint_id = s ? -1 : ck;
        snprintf(q->why, sizeof q->why, "asked %.200s: job is %s", fl->display, st);
        return;
    }
    if (s) {
        q->released = SP_RELEASE_UNKNOWN;
        snprintf(q->why, sizeof q->why, "%.250s", e.message);
        return;
    }
    q->released = rel ? SP_RELEASE_RELEASED : SP_RELEASE_NOT_YET;
    q->checkpoint_id = ck;
    snprintf(q->why, sizeof q->why, "asked %.200s", fl->display);
    sp_flink_checkpoints_t c;
    if (sp_flink_checkpoints(fl, q->restore->job_id, &c, NULL) == SP_OK) {
        if (c.latest_completed_path)
            snprintf(q->checkpoint_path, sizeof q->checkpoint_path, "%s", c.latest_completed_path);
        sp_flink_checkpoints_free(&c);
    }
}

bool sp_flink_outcome_unknown(const sp_flink_t *fl)
{
    return fl && fl->unanswered;
}
