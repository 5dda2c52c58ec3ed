/* sp pin SNAP / sp unpin SNAP: write or remove a pin in the snapshot's ownership record. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commands.h"
#include "out.h"

/*
 * The path the record belongs to: the snapshot directory (SNAP itself, or the
 * directory of a _metadata / single-file savepoint), or a whole archive.
 * A folder inside an archive has no place for a record beside it.
 */
static sp_status_t record_target(const char *arg, char *out, size_t n, sp_error_t *err)
{
    sp_location_t loc;
    sp_status_t s = sp_location_parse(arg, &loc, err);
    if (s)
        return s;
    if (loc.kind == SP_LOC_ARCHIVE && !loc.key[0]) {
        snprintf(out, n, "%s", loc.store_location);
    } else if (loc.kind == SP_LOC_LOCAL) {
        snprintf(out, n, "%s", loc.key);
        struct stat st, target;
        char real[PATH_MAX];
        if (lstat(out, &st) != 0) {
            sp_error_set_file(err, out);
            s = sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "", "no such snapshot");
        } else if (S_ISLNK(st.st_mode) && stat(out, &target) == 0 && S_ISDIR(target.st_mode) && realpath(out, real)) {
            /* a link to a snapshot directory: the record belongs beside the directory itself, where dispose,
             * prune and relocate look for it */
            snprintf(out, n, "%s", real);
        } else if (!S_ISDIR(st.st_mode)) {
            char *slash = strrchr(out, '/');
            if (slash && slash != out)
                *slash = '\0';
        }
    } else if (loc.kind == SP_LOC_S3) {
        /* s3://bucket/prefix: the record is the object <prefix>.sp-record.json (a _metadata object names its prefix) */
        const char *base = strrchr(loc.key, '/') ? strrchr(loc.key, '/') + 1 : loc.key;
        size_t kl = strcmp(base, "_metadata") == 0 ? (size_t)(base - loc.key) - (base > loc.key) : strlen(loc.key);
        snprintf(out, n, "%s/%.*s", loc.store_location, (int)kl, loc.key);
        if (kl == 0)
            s = sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location",
                             "%s: a snapshot at the root of a bucket has no place for a record beside it", arg);
    } else {
        s = sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location",
                         "%s: a record is kept beside a snapshot directory, an S3 prefix or a whole archive", arg);
    }
    sp_location_free(&loc);
    return s;
}

static void print_json(const char *target, const sp_record_summary_t *r, uint32_t removed)
{
    jw_t w;
    jw_init(&w, stdout, true);
    jw_obj(&w);
    jw_key(&w, "schema_version");
    jw_int(&w, 1);
    jw_key(&w, "snapshot");
    jw_str(&w, target);
    jw_key(&w, "record");
    char rec[PATH_MAX + sizeof SP_RECORD_SUFFIX];
    snprintf(rec, sizeof rec, "%s%s", target, SP_RECORD_SUFFIX);
    jw_str(&w, rec);
    jw_key(&w, "pinned");
    jw_bool(&w, r->pins > 0);
    jw_key(&w, "pins");
    jw_uint(&w, r->pins);
    jw_key(&w, "pin_reason");
    if (r->pins && r->pin_reason[0]) jw_str(&w, r->pin_reason); else jw_null(&w);
    jw_key(&w, "removed_pins");
    jw_uint(&w, removed);
    jw_obj_end(&w);
    jw_end(&w);
}

int cmd_pin(int argc, char **argv)
{
    const char *reason = NULL;
    bool json = false;
    const cli_option_t opts[] = {
        {"reason", 0, OPT_STRING, &reason, "TEXT", "why it is kept (shown by sp list, sp prune and refusals)"},
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: the snapshot, its record and pins"},
        {0},
    };
    const cli_command_t *cmd = command_find("pin");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "give exactly one snapshot");
    char target[PATH_MAX];
    sp_error_t err;
    sp_error_clear(&err);
    sp_status_t s = record_target(argv[0], target, sizeof target, &err);
    /* only a snapshot is pinned: a typo must not leave a stray record */
    sp_snapshot_t *snap = NULL;
    if (!s)
        s = sp_snapshot_open(target, 0, &snap, &err);
    sp_snapshot_close(snap);
    if (!s) {
        const char *by = getenv("USER");
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = sp_record_pin(target, reason, by ? by : "", (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, &err);
    }
    sp_record_summary_t rec;
    if (!s)
        s = sp_record_read(target, &rec, &err);
    if (s)
        return report_error("pin", &err, json);
    if (json)
        print_json(target, &rec, 0);
    else
        printf("Pinned %s%s%s%s (record %s%s)\n", target, reason && *reason ? " (\"" : "", reason && *reason ? reason : "",
               reason && *reason ? "\")" : "", target, SP_RECORD_SUFFIX);
    return EXIT_OK_;
}

int cmd_unpin(int argc, char **argv)
{
    bool json = false;
    const cli_option_t opts[] = {
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: the snapshot, its record and pins"},
        {0},
    };
    const cli_command_t *cmd = command_find("unpin");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "give exactly one snapshot");
    char target[PATH_MAX];
    sp_error_t err;
    sp_error_clear(&err);
    sp_record_summary_t rec;
    sp_status_t s = record_target(argv[0], target, sizeof target, &err);
    if (!s)
        s = sp_record_read(target, &rec, &err);
    uint32_t removed = s ? 0 : rec.pins;
    /* no pins: nothing to write (and no record is created just to say so) */
    if (!s && rec.pins)
        s = sp_record_unpin(target, &err);
    if (!s && removed)
        s = sp_record_read(target, &rec, &err);
    if (s)
        return report_error("unpin", &err, json);
    if (json)
        print_json(target, &rec, removed);
    else if (removed)
        printf("Unpinned %s (%u pin%s removed)\n", target, removed, removed == 1 ? "" : "s");
    else
        printf("%s was not pinned\n", target);
    return EXIT_OK_;
}
