/* Unit tests: Flink's configuration files (libyaml), version parsing, request bodies per version,
 * path comparison, claim-mode names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sp.h"
#include "tap.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int body_is(const char *got, const char *want, const char *what)
{
    int r = tap_ok(got && strcmp(got, want) == 0, "%s: %s", what, want);
    if (!r)
        printf("#   got %s\n", got ? got : "(null)");
    return r;
}

int main(void)
{
    char dir[] = "/tmp/sp-flinkconf-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char p[512], url[256];
    sp_error_t err;
    sp_flinkconf_t *c;

    /* nested config.yaml (Flink 1.19+), with a flat dotted key mixed in */
    snprintf(p, sizeof p, "%s/config.yaml", dir);
    write_file(p, "# comment\nrest:\n  address: flink-jm.example\n  port: 18081\n"
                  "execution:\n  checkpointing:\n    savepoint-dir: s3://bkt/savepoints\n"
                  "state.savepoints.dir: file:///old\nenv:\n  java:\n    opts:\n      all: [\"-Xa\", \"-Xb\"]\n");
    tap_ok(sp_flinkconf_load(dir, &c, &err) == SP_OK, "config.yaml loads");
    tap_ok(c && strcmp(sp_flinkconf_get(c, "rest.address"), "flink-jm.example") == 0, "nested rest.address");
    tap_ok(c && sp_flinkconf_rest_url(c, url, sizeof url, &err) == SP_OK && strcmp(url, "http://flink-jm.example:18081") == 0,
           "REST URL from rest.address + rest.port");
    const char *key = NULL;
    const char *sd = sp_flinkconf_savepoint_dir(c, &key);
    tap_ok(sd && strcmp(sd, "s3://bkt/savepoints") == 0 && strcmp(key, "execution.checkpointing.savepoint-dir") == 0,
           "execution.checkpointing.savepoint-dir wins over state.savepoints.dir");
    tap_ok(strcmp(sp_flinkconf_get(c, "env.java.opts.all"), "-Xa;-Xb") == 0, "a sequence is joined with ';'");
    sp_flinkconf_free(c);

    /* legacy flat flink-conf.yaml: used when config.yaml is absent */
    unlink(p);
    snprintf(p, sizeof p, "%s/flink-conf.yaml", dir);
    write_file(p, "rest.address: 10.0.0.5\nstate.savepoints.dir: hdfs:///sp\n");
    tap_ok(sp_flinkconf_load(dir, &c, &err) == SP_OK && strstr(sp_flinkconf_file(c), "flink-conf.yaml"),
           "flink-conf.yaml loads when there is no config.yaml");
    tap_ok(sp_flinkconf_rest_url(c, url, sizeof url, &err) == SP_OK && strcmp(url, "http://10.0.0.5:8081") == 0,
           "rest.port defaults to 8081");
    tap_ok(strcmp(sp_flinkconf_savepoint_dir(c, &key), "hdfs:///sp") == 0 && strcmp(key, "state.savepoints.dir") == 0,
           "state.savepoints.dir (before 1.20)");
    sp_flinkconf_free(c);

    write_file(p, "rest.port: notaport\nrest.address: h\n");
    tap_ok(sp_flinkconf_load(dir, &c, &err) == SP_OK && sp_flinkconf_rest_url(c, url, sizeof url, &err) == SP_ERR_INVALID &&
           strcmp(err.field, "rest.port") == 0, "a bad rest.port is named");
    tap_ok(sp_flinkconf_savepoint_dir(c, NULL) == NULL, "no savepoint directory: NULL");
    sp_flinkconf_free(c);
    write_file(p, "rest:\n  address: [unclosed\n");
    tap_ok(sp_flinkconf_load(dir, &c, &err) == SP_ERR_MALFORMED && strstr(err.message, "line"),
           "broken YAML: malformed, with the line (%s)", err.message);
    unlink(p);
    tap_ok(sp_flinkconf_load(dir, &c, &err) == SP_ERR_NOT_FOUND, "no configuration file: not found");
    rmdir(dir);

    /* versions */
    sp_flink_version_t v;
    tap_ok(sp_flink_version_parse("1.20.1", &v) && v.major == 1 && v.minor == 20 && v.patch == 1, "1.20.1");
    tap_ok(sp_flink_version_parse("2.1-SNAPSHOT", &v) && v.major == 2 && v.minor == 1 && v.patch == -1, "2.1-SNAPSHOT");
    tap_ok(!sp_flink_version_parse("unknown", &v), "no version in 'unknown'");

    /* request bodies per version */
    sp_flink_savepoint_request_t sreq = {.target_dir = "s3://b/sp", .format = SP_FLINK_NATIVE,
                                         .trigger_id = "0123456789abcdef0123456789abcdef"};
    sp_flink_version_parse("1.14.6", &v);
    char *b = sp_flink_savepoint_body(&v, &sreq);
    body_is(b, "{\"target-directory\":\"s3://b/sp\",\"cancel-job\":false,\"triggerId\":\"0123456789abcdef0123456789abcdef\"}",
            "1.14 savepoint: no formatType");
    free(b);
    sp_flink_version_parse("1.15.4", &v);
    sreq.stop = true;
    sreq.drain = true;
    b = sp_flink_savepoint_body(&v, &sreq);
    body_is(b, "{\"targetDirectory\":\"s3://b/sp\",\"drain\":true,\"triggerId\":\"0123456789abcdef0123456789abcdef\","
               "\"formatType\":\"NATIVE\"}", "1.15 stop");
    free(b);
    const char *args[] = {"--a", "b c"};
    sp_flink_run_request_t rreq = {.savepoint_path = "/sp/x", .claim_mode = SP_CLAIM_CLAIM, .args = args, .n_args = 2,
                                   .job_id = "ffffffffffffffffffffffffffffffff"};
    sp_flink_version_parse("1.19.1", &v);
    b = sp_flink_run_body(&v, &rreq, &err);
    body_is(b, "{\"programArgsList\":[\"--a\",\"b c\"],\"jobId\":\"ffffffffffffffffffffffffffffffff\",\"savepointPath\":"
               "\"/sp/x\",\"allowNonRestoredState\":false,\"restoreMode\":\"CLAIM\"}", "1.19 run: restoreMode");
    free(b);
    sp_flink_version_parse("1.20.0", &v);
    rreq.allow_non_restored_state = true;
    rreq.claim_mode = SP_CLAIM_LEGACY;
    b = sp_flink_run_body(&v, &rreq, &err);
    body_is(b, "{\"programArgsList\":[\"--a\",\"b c\"],\"jobId\":\"ffffffffffffffffffffffffffffffff\",\"savepointPath\":"
               "\"/sp/x\",\"allowNonRestoredState\":true,\"claimMode\":\"LEGACY\"}", "1.20 run: claimMode");
    free(b);
    sp_flink_version_parse("1.14.0", &v);
    b = sp_flink_run_body(&v, &rreq, &err);
    tap_ok(!b && err.code == SP_ERR_INVALID, "1.14 run from a snapshot: refused (no claim modes)");

    /* paths, ids, claim modes */
    tap_ok(sp_flink_same_path("file:/a/sp-1", "/a/sp-1/_metadata") && sp_flink_same_path("file:///a/sp-1/", "/a/sp-1") &&
           !sp_flink_same_path("/a/sp-1", "/a/sp-2"), "snapshot paths compare without scheme, _metadata, slashes");
    tap_ok(sp_flink_id_valid("0123456789ABCDEF0123456789abcdef") && !sp_flink_id_valid("0123") &&
           !sp_flink_id_valid("g123456789abcdef0123456789abcdef"), "32-hex IDs");
    char id1[33], id2[33];
    tap_ok(sp_flink_new_id(id1, &err) == SP_OK && sp_flink_new_id(id2, &err) == SP_OK && sp_flink_id_valid(id1) &&
           strcmp(id1, id2) != 0, "new IDs are random 32-hex");
    sp_flink_claim_mode_t m;
    tap_ok(sp_flink_claim_mode_parse("no_claim", &m) && m == SP_CLAIM_NO_CLAIM && sp_flink_claim_mode_parse("Claim", &m) &&
           m == SP_CLAIM_CLAIM && !sp_flink_claim_mode_parse("own", &m), "claim modes parse in any case");
    char red[128];
    sp_flink_redact_url("https://user:secret@jm:8443/base", red, sizeof red);
    tap_ok(strcmp(red, "https://jm:8443/base") == 0, "credentials are removed from URLs shown");
    return tap_done();
}
