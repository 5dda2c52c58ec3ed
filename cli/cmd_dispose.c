/* sp dispose SNAP: delete a snapshot safely, offline. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "flinkcli.h"
#include "out.h"

static void json_items(jw_t *w, const char *key, const sp_dispose_item_t *v, uint32_t n)
{
    jw_key(w, key);
    jw_arr(w);
    for (uint32_t i = 0; i < n; i++) {
        jw_obj(w);
        jw_key(w, "path");
        jw_str(w, v[i].key);
        jw_key(w, "size_bytes");
        if (v[i].size >= 0) jw_int(w, v[i].size); else jw_null(w);
        jw_obj_end(w);
    }
    jw_arr_end(w);
}

int cmd_dispose(int argc, char **argv)
{
    bool dry_run = false, force = false, unref = false, external = false, json = false;
    const char *rest_url = NULL;
    const cli_option_t opts[] = {
        {"dry-run", 'n', OPT_FLAG, &dry_run, NULL, "list what would be deleted; delete nothing"},
        {"force", 0, OPT_FLAG, &force, NULL, "delete although the ownership record asks to keep it (pins, NO_CLAIM, LEGACY)"},
        {"include-unreferenced", 0, OPT_FLAG, &unref, NULL, "also delete files in the directory no handle references"},
        {"include-external", 0, OPT_FLAG, &external, NULL, "also delete referenced files outside the directory"},
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: deleted, external, unreferenced"},
        {"rest-url", 0, OPT_STRING, &rest_url, "URL", "the cluster to ask about NO_CLAIM / LEGACY restores (default: the one recorded)"},
        {0},
    };
    const cli_command_t *cmd = command_find("dispose");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "give exactly one snapshot");
    flink_cli_query_t q = {.rest_url = rest_url};
    sp_dispose_options_t o = {.dry_run = dry_run, .force = force, .include_unreferenced = unref,
                              .include_external = external, .record_query = flink_cli_record_query,
                              .record_query_user = &q};
    sp_dispose_result_t res;
    sp_error_t err;
    sp_error_clear(&err);
    sp_status_t s = sp_dispose(argv[0], &o, &res, &err);
    flink_cli_query_close(&q);
    if (res.record_warning)
        fprintf(stderr, "sp dispose: warning: %s\n", res.record_warning);
    if (json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "directory");
        if (res.directory) jw_str(&w, res.directory); else jw_null(&w);
        jw_key(&w, "dry_run");
        jw_bool(&w, dry_run);
        jw_key(&w, "ok");
        jw_bool(&w, s == SP_OK);
        jw_key(&w, "resumed");
        jw_bool(&w, res.resumed);
        jw_key(&w, "directory_removed");
        jw_bool(&w, res.directory_removed);
        jw_key(&w, "bytes");
        jw_uint(&w, res.bytes);
        json_items(&w, dry_run ? "to_delete" : "deleted", res.deleted, res.n_deleted);
        json_items(&w, "external", res.external, res.n_external);
        json_items(&w, "unreferenced", res.unreferenced, res.n_unreferenced);
        jw_key(&w, "error");
        jw_error(&w, s ? &err : NULL);
        jw_obj_end(&w);
        jw_end(&w);
    } else if (!s || res.n_deleted) {
        char b[32];
        if (dry_run)
            for (uint32_t i = 0; i < res.n_deleted; i++) {
                bool outside = false; /* listed below, with what it is */
                for (uint32_t k = 0; external && k < res.n_external && !outside; k++)
                    outside = strcmp(res.external[k].key, res.deleted[i].key) == 0;
                if (!outside)
                    printf("would delete %s\n", res.deleted[i].key);
            }
        for (uint32_t i = 0; i < res.n_external; i++)
            printf("%s %s (referenced, outside the snapshot)\n", external ? (dry_run ? "would delete" : "deleted") : "left",
                   res.external[i].key);
        for (uint32_t i = 0; i < res.n_unreferenced; i++)
            printf("%s %s (not referenced by the metadata)\n", unref ? (dry_run ? "would delete" : "deleted") : "left",
                   res.unreferenced[i].key);
        if (!s)
            printf("%s %s: %u file%s, %s%s%s\n", dry_run ? "Would dispose" : "Disposed", res.directory, res.n_deleted,
                   res.n_deleted == 1 ? "" : "s", fmt_iec(res.bytes, b, sizeof b),
                   res.resumed ? " (finished an interrupted dispose)" : "",
                   dry_run ? "" : res.directory_removed ? ", removed" : ", directory kept (files remain)");
    }
    int rc = s ? report_error("dispose", &err, false) : 0;
    sp_dispose_result_free(&res);
    return rc;
}
