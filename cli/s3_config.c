/* s3_config.c - resolve sp's S3 settings from flags, AWS_* variables,
 * ~/.aws files and Flink's config file (see s3_config.h). */
#include "s3_config.h"
#include "opts.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sp.h"
#include "sp_flinkconf.h"
#include "sp_s3.h"

static struct {
    const char *endpoint, *region, *profile, *ca_bundle;
    bool no_verify, verbose;
} flags;

static sp_s3_config_t cfg;
static bool applied;

/* ------------------------------------------------------------------ options */

static const char *const value_opts[] = {"endpoint-url", "region", "profile", "ca-bundle"};

int s3_cli_extract(int *argc, char **argv)
{
    int out = 1;
    int i = 1;
    for (; i < *argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (strcmp(a, "--no-verify-ssl") == 0) {
            flags.no_verify = true;
            continue;
        }
        if (strcmp(a, "--verbose") == 0) {
            flags.verbose = opts_global_verbose = true;
            continue;
        }
        bool taken = false;
        for (size_t k = 0; k < sizeof value_opts / sizeof value_opts[0] && !taken; k++) {
            size_t n = strlen(value_opts[k]);
            if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, value_opts[k], n) != 0 ||
                (a[2 + n] != '\0' && a[2 + n] != '='))
                continue;
            const char *v;
            if (a[2 + n] == '=') {
                v = a + 3 + n;
            } else if (i + 1 < *argc) {
                v = argv[++i];
            } else {
                fprintf(stderr, "sp: --%s needs a value\n", value_opts[k]);
                return 2;
            }
            if (!*v) {
                fprintf(stderr, "sp: --%s needs a value\n", value_opts[k]);
                return 2;
            }
            const char **slot[] = {&flags.endpoint, &flags.region, &flags.profile, &flags.ca_bundle};
            *slot[k] = v;
            taken = true;
        }
        if (!taken)
            argv[out++] = argv[i];
    }
    for (; i < *argc; i++)
        argv[out++] = argv[i];
    argv[out] = NULL;
    *argc = out;
    return 0;
}

/* ------------------------------------------------------------------ ~/.aws files */

/* One INI file, flattened: "section" -> "key" / "sub.key" (indented keys under "sub ="). */
typedef struct ini_kv {
    char *section, *key, *value;
} ini_kv_t;

typedef struct ini {
    ini_kv_t *v;
    size_t n;
    bool loaded;
} ini_t;

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

static void ini_load(ini_t *ini, const char *path)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return;
    ini->loaded = true;
    char line[4096], section[256] = "", parent[256] = "";
    while (fgets(line, sizeof line, f)) {
        bool indented = line[0] == ' ' || line[0] == '\t';
        char *s = trim(line);
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *e = strchr(s, ']');
            if (e)
                *e = '\0';
            snprintf(section, sizeof section, "%s", trim(s + 1));
            parent[0] = '\0';
            continue;
        }
        char *eq = strchr(s, '=');
        if (!eq)
            continue;
        *eq = '\0';
        char *k = trim(s), *val = trim(eq + 1);
        char full[600];
        if (!indented)
            parent[0] = '\0';
        if (indented && parent[0])
            snprintf(full, sizeof full, "%s.%s", parent, k);
        else
            snprintf(full, sizeof full, "%s", k);
        if (!indented && !*val)
            snprintf(parent, sizeof parent, "%s", k); /* "s3 =" opens nested keys */
        ini_kv_t *nv = realloc(ini->v, (ini->n + 1) * sizeof *nv);
        if (!nv)
            break;
        ini->v = nv;
        nv[ini->n].section = strdup(section);
        nv[ini->n].key = strdup(full);
        nv[ini->n].value = strdup(val);
        ini->n++;
    }
    fclose(f);
}

static const char *ini_get(const ini_t *ini, const char *section, const char *key)
{
    const char *found = NULL;
    for (size_t i = 0; i < ini->n; i++)
        if (ini->v[i].section && ini->v[i].key && strcmp(ini->v[i].section, section) == 0 &&
            strcasecmp(ini->v[i].key, key) == 0)
            found = ini->v[i].value;
    return found && *found ? found : NULL;
}

static bool ini_has_section(const ini_t *ini, const char *section)
{
    for (size_t i = 0; i < ini->n; i++)
        if (ini->v[i].section && strcmp(ini->v[i].section, section) == 0)
            return true;
    return false;
}

static char *aws_path(const char *env, const char *name)
{
    const char *e = getenv(env);
    if (e && *e)
        return strdup(e);
    const char *home = getenv("HOME");
    if (!home)
        return NULL;
    size_t n = strlen(home) + strlen(name) + 8;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/.aws/%s", home, name);
    return p;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* ------------------------------------------------------------------ resolving */

static void log_line(void *user, const char *line)
{
    (void)user;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    fprintf(stderr, "%s\n", line);
    pthread_mutex_unlock(&lock);
}

static ini_t creds, conf;
static sp_flinkconf_t *flink;
static char *endpoint_owned;

int s3_cli_apply(void)
{
    applied = true;
    memset(&cfg, 0, sizeof cfg);
    char *cpath = aws_path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    char *fpath = aws_path("AWS_CONFIG_FILE", "config");
    ini_load(&creds, cpath);
    ini_load(&conf, fpath);
    free(cpath);
    free(fpath);
    const char *dir = env("FLINK_CONF_DIR");
    if (dir) {
        sp_error_t err;
        sp_error_clear(&err);
        sp_status_t s = sp_flinkconf_load(dir, &flink, &err);
        if (s && s != SP_ERR_NOT_FOUND)
            fprintf(stderr, "sp: warning: Flink configuration not read for the S3 settings: %s%s%s\n",
                    err.file[0] ? err.file : "", err.file[0] ? ": " : "", err.message);
    }
    const char *fk = NULL;
#define FLINK(key) (flink && (fk = sp_flinkconf_get(flink, key)) && *fk ? fk : NULL)

    /* the profile: --profile, AWS_PROFILE, "default" */
    bool explicit_profile = flags.profile || env("AWS_PROFILE");
    const char *profile = flags.profile ? flags.profile : env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
    char confsec[300];
    snprintf(confsec, sizeof confsec, strcmp(profile, "default") == 0 ? "%s" : "profile %s", profile);
    if (explicit_profile && !ini_has_section(&creds, profile) && !ini_has_section(&conf, confsec)) {
        fprintf(stderr, "sp: the AWS profile \"%s\" is not defined in the credentials or config file\n", profile);
        return 2;
    }
#define PROFILE(key) (ini_get(&creds, profile, key) ? ini_get(&creds, profile, key) : ini_get(&conf, confsec, key))

    /* credentials */
    const char *id = NULL, *secret = NULL, *token = NULL;
    if (flags.profile && PROFILE("aws_access_key_id")) {
        id = PROFILE("aws_access_key_id");
        secret = PROFILE("aws_secret_access_key");
        token = PROFILE("aws_session_token");
    } else if (env("AWS_ACCESS_KEY_ID") || env("AWS_SECRET_ACCESS_KEY")) {
        id = env("AWS_ACCESS_KEY_ID");
        secret = env("AWS_SECRET_ACCESS_KEY");
        token = env("AWS_SESSION_TOKEN");
    } else if (PROFILE("aws_access_key_id")) {
        id = PROFILE("aws_access_key_id");
        secret = PROFILE("aws_secret_access_key");
        token = PROFILE("aws_session_token");
    } else if (FLINK("s3.access-key") || FLINK("s3.access.key")) {
        id = FLINK("s3.access-key") ? FLINK("s3.access-key") : FLINK("s3.access.key");
        secret = FLINK("s3.secret-key") ? FLINK("s3.secret-key") : FLINK("s3.secret.key");
    }
    if (!id != !secret) {
        fprintf(stderr, "sp: an AWS access key ID was given without its secret access key, or the reverse\n");
        return 2;
    }
    cfg.access_key_id = id;
    cfg.secret_access_key = secret;
    cfg.session_token = token;

    /* region, endpoint, addressing */
    cfg.region = flags.region        ? flags.region
                 : env("AWS_REGION") ? env("AWS_REGION")
                 : env("AWS_DEFAULT_REGION") ? env("AWS_DEFAULT_REGION")
                                             : PROFILE("region");
    const char *ep = flags.endpoint                ? flags.endpoint
                     : env("AWS_ENDPOINT_URL_S3")  ? env("AWS_ENDPOINT_URL_S3")
                     : env("AWS_ENDPOINT_URL")     ? env("AWS_ENDPOINT_URL")
                     : PROFILE("s3.endpoint_url")  ? PROFILE("s3.endpoint_url")
                     : PROFILE("endpoint_url")     ? PROFILE("endpoint_url")
                                                   : FLINK("s3.endpoint");
    if (ep && !strstr(ep, "://")) {
        /* Flink's s3.endpoint may be a bare host[:port]: HTTPS, as Flink's S3 file systems assume */
        size_t n = strlen(ep) + 9;
        free(endpoint_owned);
        if ((endpoint_owned = malloc(n)))
            snprintf(endpoint_owned, n, "https://%s", ep);
        ep = endpoint_owned;
    }
    cfg.endpoint = ep;
    const char *style = PROFILE("s3.addressing_style");
    const char *fps = FLINK("s3.path.style.access");
    if (style && strcasecmp(style, "path") == 0)
        cfg.addressing = SP_S3_ADDRESSING_PATH;
    else if (style && strcasecmp(style, "virtual") == 0)
        cfg.addressing = SP_S3_ADDRESSING_VIRTUAL;
    else if (!style && fps && strcasecmp(fps, "true") == 0)
        cfg.addressing = SP_S3_ADDRESSING_PATH;

    /* TLS, retries, trace */
    cfg.no_verify_tls = flags.no_verify;
    cfg.ca_bundle = flags.ca_bundle ? flags.ca_bundle : env("AWS_CA_BUNDLE") ? env("AWS_CA_BUNDLE") : PROFILE("ca_bundle");
    const char *ma = env("AWS_MAX_ATTEMPTS") ? env("AWS_MAX_ATTEMPTS") : PROFILE("max_attempts");
    if (ma && atoi(ma) > 0)
        cfg.max_attempts = atoi(ma);
    if (flags.verbose) {
        cfg.log = log_line;
        fprintf(stderr, "s3: endpoint %s, region %s, %s addressing, credentials: %s%s\n",
                cfg.endpoint ? cfg.endpoint : "(AWS)", cfg.region ? cfg.region : "us-east-1",
                cfg.addressing == SP_S3_ADDRESSING_PATH      ? "path-style"
                : cfg.addressing == SP_S3_ADDRESSING_VIRTUAL ? "virtual-hosted"
                                                             : "automatic",
                id ? "access key " : "none (unsigned requests)", id ? "[redacted]" : "");
    }
#undef PROFILE
#undef FLINK
    sp_error_t err;
    sp_error_clear(&err);
    if (sp_s3_set_default_config(&cfg, &err) != SP_OK) {
        fprintf(stderr, "sp: %s\n", err.message);
        return 4;
    }
    return 0;
}

void s3_cli_set_jobs(int jobs)
{
    if (!applied || jobs <= 0)
        return;
    cfg.max_transfers = jobs;
    sp_s3_set_default_config(&cfg, NULL);
}
