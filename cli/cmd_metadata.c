/* sp metadata export|import: the complete JSON form of _metadata, both ways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "out.h"

static const char *out_path;
static bool compact, force;
static const cli_option_t export_opts[] = {
    {"output", 'o', OPT_STRING, &out_path, "FILE", "write the JSON to FILE (atomically; an existing FILE needs --force)"},
    {"compact", 0, OPT_FLAG, &compact, NULL, "no indentation"},
    {"force", 0, OPT_FLAG, &force, NULL, "replace an existing output file"},
    {0},
};
static const cli_option_t import_opts[] = {
    {"force", 0, OPT_FLAG, &force, NULL, "replace OUT if it exists"},
    {0},
};
static const cli_command_t export_cmd = {"metadata export", NULL, "SNAP [-o FILE] [--compact] [--force]",
                                         "Print the complete JSON form of a snapshot's _metadata."};
static const cli_command_t import_cmd = {"metadata import", NULL, "JSON OUT [--force]",
                                         "Write a _metadata file from its JSON form (JSON may be - for stdin)."};

/* Relative paths edited into the JSON are checked as sp inspect would. */
static int check_ref_paths(const sp_ref_t *ref, void *user)
{
    sp_error_t *err = user;
    if (ref->kind != SP_REF_RELATIVE)
        return 0;
    const char *problem = sp_relative_path_problem(ref->path.ptr, ref->path.len);
    if (!problem)
        return 0;
    sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "relative path", "%s: \"%.*s\"", problem,
                 (int)(ref->path.len > 200 ? 200 : ref->path.len), (const char *)ref->path.ptr);
    return 1;
}

static int do_export(const cli_command_t *cmd, int argc, char **argv)
{
    const char *out;
    (void)cmd;
    cmd = &export_cmd;
    int n, r = opts_parse(cmd, export_opts, argc, argv, &n);
    out = out_path;
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "export takes exactly one snapshot");
    sp_error_t err;
    sp_snapshot_t *snap;
    /* no relative-path check: export is how a bad path gets repaired */
    sp_status_t s = sp_snapshot_open(argv[0], SP_OPEN_NO_PATH_CHECK, &snap, &err);
    if (s)
        return report_error("metadata export", &err, false);
    char *json;
    s = sp_meta_to_json(snap->meta, compact ? 0 : 1, &json, &err);
    sp_snapshot_close(snap);
    if (s)
        return report_error("metadata export", &err, false);
    size_t len = strlen(json);
    json[len] = '\0';
    if (out) {
        char *withnl = malloc(len + 2);
        if (!withnl) {
            free(json);
            return EXIT_STORAGE;
        }
        memcpy(withnl, json, len);
        withnl[len] = '\n';
        s = sp_fs_write_atomic(out, withnl, len + 1, force, &err);
        free(withnl);
        free(json);
        return s ? report_error("metadata export", &err, false) : 0;
    }
    fputs(json, stdout);
    fputc('\n', stdout);
    free(json);
    return fflush(stdout) == 0 ? 0 : EXIT_STORAGE;
}

static int do_import(const cli_command_t *cmd, int argc, char **argv)
{
    (void)cmd;
    cmd = &import_cmd;
    int n, r = opts_parse(cmd, import_opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 2)
        return opts_usage_error(cmd, "import takes JSON (a file or - for stdin) and OUT");
    sp_error_t err;
    char *text;
    size_t len;
    sp_status_t s = sp_fs_read_all(argv[0], &text, &len, &err);
    if (s)
        return report_error("metadata import", &err, false);
    sp_metadata_t *m;
    s = sp_meta_from_json(text, len, &m, &err);
    free(text);
    if (s) {
        sp_error_set_file(&err, argv[0]);
        return report_error("metadata import", &err, false);
    }
    if (sp_meta_visit_refs(m, check_ref_paths, &err)) {
        sp_meta_free(m);
        sp_error_set_file(&err, argv[0]);
        return report_error("metadata import", &err, false);
    }
    uint8_t *bytes;
    size_t blen;
    s = sp_meta_encode(m, &bytes, &blen, &err);
    sp_meta_free(m);
    if (s) {
        sp_error_set_file(&err, argv[0]);
        return report_error("metadata import", &err, false);
    }
    s = sp_fs_write_atomic(argv[1], bytes, blen, force, &err);
    free(bytes);
    if (s)
        return report_error("metadata import", &err, false);
    return 0;
}

int cmd_metadata(int argc, char **argv)
{
    const cli_command_t *cmd = command_find("metadata");
    if (argc >= 2 && strcmp(argv[1], "export") == 0)
        return do_export(cmd, argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "import") == 0)
        return do_import(cmd, argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        opts_help(&export_cmd, export_opts);
        printf("\n");
        opts_help(&import_cmd, import_opts);
        return 0;
    }
    return opts_usage_error(cmd, argc >= 2 ? "unknown action '%s' (export or import)" : "missing action%s (export or import)",
                            argc >= 2 ? argv[1] : "");
}
