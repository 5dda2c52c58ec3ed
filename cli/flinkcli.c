/* flinkcli.c - cluster resolution and helpers shared by the cluster commands (see flinkcli.h). */
#include "flinkcli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "out.h"

int64_t flink_cli_duration_ms(const char *s)
{
    if (!s || !*s)
        return -1;
    if (strcmp(s, "none") == 0)
        return 0;
    int64_t total = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (errno || end == p || v < 0 || *p == '-' || *p == '+')
            return -1;
        double unit;
        if (!*end) {
            if (p != s)
                return -1; /* "1h30" */
            unit = 1000;
        } else if (strncmp(end, "ms", 2) == 0) {
            unit = 1, end += 2;
        } else if (*end == 's') {
            unit = 1000, end++;
        } else if (*end == 'm') {
            unit = 60000, end++;
        } else if (*end == 'h') {
            unit = 3600000, end++;
        } else if (*end == 'd') {
            unit = 86400000, end++;
        } else {
            return -1;
        }
        if (v * unit > 9e15)
            return -1;
        total += (int64_t)(v * unit + 0.5);
        p = end;
    }
    return total;
}

int64_t flink_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sp_status_t flink_cli_conf(sp_flinkconf_t **out, sp_error_t *err)
{
    *out = NULL;
    const char *dir = getenv("FLINK_CONF_DIR");
    if (!dir || !*dir)
        return SP_OK;
    sp_status_t s = sp_flinkconf_load(dir, out, err);
    if (s && err && s == SP_ERR_NOT_FOUND)
        snprintf(err->message, sizeof err->message,
                 "FLINK_CONF_DIR names a directory without config.yaml or flink-conf.yaml");
    return s;
}

sp_status_t flink_cli_rest_url(const char *flag, char *out, size_t n, const char **source, sp_error_t *err)
{
    if (flag && *flag) {
        snprintf(out, n, "%s", flag);
        *source = "--rest-url";
        return SP_OK;
    }
    const char *env = getenv("SP_REST_URL");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        *source = "SP_REST_URL";
        return SP_OK;
    }
    sp_flinkconf_t *conf;
    sp_status_t s = flink_cli_conf(&conf, err);
    if (s)
        return s;
    if (conf) {
        s = sp_flinkconf_rest_url(conf, out, n, err);
        sp_flinkconf_free(conf);
        if (s != SP_ERR_NOT_FOUND) {
            *source = "FLINK_CONF_DIR";
            return s;
        }
    }
    sp_error_clear(err);
    return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "rest-url",
                        "no Flink cluster given: use --rest-url URL, set SP_REST_URL, or set FLINK_CONF_DIR to a "
                        "directory whose config.yaml (or flink-conf.yaml) sets rest.address");
}

static void trace_stderr(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "sp: rest: %s\n", line);
}

sp_status_t flink_cli_open(const flink_cli_t *c, sp_flink_t **out, sp_error_t *err)
{
    char url[2048];
    const char *src;
    sp_status_t s = flink_cli_rest_url(c->rest_url, url, sizeof url, &src, err);
    if (s)
        return s;
    sp_flink_options_t o = {0};
    /* a server that accepts and never answers fails in well under a minute */
    o.connect_timeout_ms = 10000;
    o.request_timeout_ms = 20000;
    if (c->timeout && !c->timeout_per_wait) {
        int64_t t = flink_cli_duration_ms(c->timeout);
        if (t > 0)
            o.total_timeout_ms = (long)t;
    }
    if (c->verbose) {
        o.trace = trace_stderr;
        char shown[2048];
        sp_flink_redact_url(url, shown, sizeof shown);
        fprintf(stderr, "sp: cluster %s (from %s)\n", shown, src);
    }
    return sp_flink_open(url, &o, out, err);
}

int flink_cli_fail(const char *cmd, const sp_error_t *err, const char *trace, bool verbose, bool json)
{
    int rc = report_error(cmd, err, json);
    if (trace && *trace) {
        if (verbose)
            fprintf(stderr, "Flink's stack trace:\n%s\n", trace);
        else
            fprintf(stderr, "(--verbose shows Flink's full stack trace)\n");
    }
    return rc;
}

bool flink_cli_local_dir(const char *location, char *out, size_t n)
{
    const char *p = location;
    if (strncmp(p, "file://", 7) == 0)
        p += 7;
    else if (strncmp(p, "file:", 5) == 0)
        p += 5;
    else if (strstr(p, "://"))
        return false;
    while (p[0] == '/' && p[1] == '/')
        p++;
    if (!*p)
        return false;
    snprintf(out, n, "%s", p);
    size_t l = strlen(out);
    while (l > 1 && out[l - 1] == '/')
        out[--l] = '\0';
    struct stat st;
    if (stat(out, &st) != 0)
        return false;
    if (!S_ISDIR(st.st_mode)) {
        char *slash = strrchr(out, '/');
        if (!slash || slash == out)
            return false;
        *slash = '\0';
    }
    return true;
}

sp_status_t flink_cli_check_location(const char *location, bool *unchecked, sp_error_t *err)
{
    *unchecked = false;
    const char *sep = strstr(location, "://");
    bool is_file = strncmp(location, "file:", 5) == 0 || !sep;
    if (is_file) {
        char dir[4096];
        if (!flink_cli_local_dir(location, dir, sizeof dir)) {
            *unchecked = true;
            sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "the path is not visible on this machine");
            return SP_OK;
        }
        return sp_flink_check_location(location, err);
    }
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t s = sp_flink_check_location(location, &e);
    if (s == SP_OK)
        return SP_OK;
    bool s3 = strncmp(location, "s3://", 5) == 0 || strncmp(location, "s3a://", 6) == 0 ||
              strncmp(location, "s3p://", 6) == 0;
    if (s3 && (s == SP_ERR_MALFORMED || s == SP_ERR_UNSUPPORTED)) {
        if (err)
            *err = e;
        return s;
    }
    *unchecked = true;
    if (err) {
        *err = e;
        if (!s3)
            snprintf(err->message, sizeof err->message, "sp cannot read %.*s:// locations", (int)(sep - location),
                     location);
    }
    return SP_OK;
}

void flink_cli_warn_unchecked(const char *cmd, const char *location, const sp_error_t *why)
{
    fprintf(stderr,
            "sp %s: warning: the savepoint's _metadata at %s could not be checked (%s); no ownership record was "
            "written\n", cmd, location, why && why->message[0] ? why->message : "not readable from here");
}

/* ---- the record query ---- */

/* Ask the cluster at url; true when it gave a definite answer. */
static bool ask(flink_cli_query_t *c, const char *url, sp_record_query_t *q)
{
    if (!c->fl || strcmp(c->url, url) != 0) {
        sp_flink_close(c->fl);
        c->fl = NULL;
        sp_flink_options_t o = {.connect_timeout_ms = 5000, .request_timeout_ms = 15000, .max_attempts = 2};
        if (c->verbose)
            o.trace = trace_stderr;
        if (sp_flink_open(url, &o, &c->fl, NULL) != SP_OK)
            return false;
        snprintf(c->url, sizeof c->url, "%s", url);
    }
    sp_flink_record_query(c->fl, q);
    /* "no such job" means the job is gone only from the cluster it was restored on */
    if (q->released == SP_RELEASE_JOB_UNKNOWN && strcmp(url, q->restore->cluster) != 0) {
        q->released = SP_RELEASE_UNKNOWN;
        return false;
    }
    return q->released != SP_RELEASE_UNKNOWN;
}

void flink_cli_record_query(void *user, sp_record_query_t *q)
{
    flink_cli_query_t *c = user;
    char cands[3][1024];
    int n = 0;
    if (c->rest_url && *c->rest_url)
        snprintf(cands[n++], sizeof cands[0], "%s", c->rest_url);
    if (q->restore->cluster[0])
        snprintf(cands[n++], sizeof cands[0], "%s", q->restore->cluster);
    char url[1024];
    const char *src;
    if (flink_cli_rest_url(NULL, url, sizeof url, &src, NULL) == SP_OK)
        snprintf(cands[n++], sizeof cands[0], "%s", url);
    if (n == 0) {
        snprintf(q->why, sizeof q->why, "no cluster to ask: --rest-url, SP_REST_URL or FLINK_CONF_DIR");
        return;
    }
    char why[256] = "";
    for (int i = 0; i < n; i++) {
        bool dup = false;
        for (int k = 0; k < i; k++)
            dup |= strcmp(cands[k], cands[i]) == 0;
        if (dup)
            continue;
        if (ask(c, cands[i], q))
            return;
        if (!why[0])
            snprintf(why, sizeof why, "%s", q->why);
    }
    snprintf(q->why, sizeof q->why, "%s", why);
}

void flink_cli_query_close(flink_cli_query_t *q)
{
    sp_flink_close(q->fl);
    q->fl = NULL;
}
