/* sp metadata export|import: the complete JSON form of _metadata, both ways.
 * sp metadata edit: metadata-only edits (drop an operator, set a uid, rewrite a path prefix). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static const char *edit_output;
static bool in_place, edit_copy, edit_dry_run, edit_json;
static cli_list_t drops, set_uids, prefixes;
static const cli_option_t edit_opts[] = {
    {"output", 'o', OPT_STRING, &edit_output, "DST", "write the edited snapshot as a new directory DST"},
    {"in-place", 0, OPT_FLAG, &in_place, NULL, "replace _metadata atomically; the previous one is kept beside the snapshot"},
    {"drop-operator", 0, OPT_LIST, &drops, "ID|uid:U", "remove an operator's state (repeatable)"},
    {"set-uid", 0, OPT_LIST, &set_uids, "ID|uid:OLD=NEW", "move an operator's state to the operator ID of uid NEW"},
    {"rewrite-prefix", 0, OPT_LIST, &prefixes, "FROM=TO", "absolute references starting with FROM start with TO"},
    {"copy", 0, OPT_FLAG, &edit_copy, NULL, "with --output: never hard-link files (reflink or copy them)"},
    {"dry-run", 0, OPT_FLAG, &edit_dry_run, NULL, "apply the edits in memory and report; write nothing"},
    {"json", 0, OPT_FLAG, &edit_json, NULL, "one JSON object: the edits, what was written"},
    {0},
};
static const cli_command_t edit_cmd = {"metadata edit", NULL,
                                       "SNAP (--output DST | --in-place) [--drop-operator ID|uid:U]... "
                                       "[--set-uid ID|uid:OLD=NEW]... [--rewrite-prefix FROM=TO]... [--copy] "
                                       "[--dry-run] [--json]",
                                       "Edit a snapshot's _metadata only: drop operators, change uids, rewrite paths."};

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
    out = out_path && strcmp(out_path, "-") != 0 ? out_path : NULL; /* "-" is stdout */
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "export takes exactly one snapshot");
    sp_error_t err;
    sp_error_clear(&err);
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
    sp_error_clear(&err);
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
    if (strcmp(argv[1], "-") == 0) {
        /* "-" writes the binary metadata to stdout, e.g. for a pipe into a store */
        size_t w = fwrite(bytes, 1, blen, stdout);
        free(bytes);
        return w == blen && fflush(stdout) == 0 ? 0 : EXIT_STORAGE;
    }
    s = sp_fs_write_atomic(argv[1], bytes, blen, force, &err);
    free(bytes);
    if (s)
        return report_error("metadata import", &err, false);
    return 0;
}

/* "uid 'u' (hex)" / "hex": the operator an edit names, read before anything changes */
static char *edit_label(const sp_metadata_t *m, const sp_edit_t *e)
{
    char hex[33], buf[600];
    int32_t idx = sp_opref_find(m, &e->target);
    char *uid = idx >= 0 && m->operators[idx].uid.len ? mutf8_display(m->operators[idx].uid) : NULL;
    sp_id_to_hex(idx >= 0 ? m->operators[idx].id : e->target.id, hex);
    if (uid || e->target.by_uid)
        snprintf(buf, sizeof buf, "%s (uid '%s')", hex, uid ? uid : e->target.uid);
    else
        snprintf(buf, sizeof buf, "%s", hex);
    free(uid);
    size_t n = strlen(buf) + 1;
    char *l = malloc(n);
    if (l)
        memcpy(l, buf, n);
    return l;
}

static int do_edit(const cli_command_t *cmd, int argc, char **argv)
{
    (void)cmd;
    cmd = &edit_cmd;
    int n, r = opts_parse(cmd, edit_opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "edit takes exactly one snapshot");
    if (!!edit_output == in_place)
        return opts_usage_error(cmd, "give either --output DST (a new snapshot) or --in-place");
    if (edit_copy && !edit_output)
        return opts_usage_error(cmd, "--copy applies to --output");
    uint32_t n_edits = (uint32_t)(drops.n + set_uids.n + prefixes.n);
    if (!n_edits)
        return opts_usage_error(cmd, "no edit given: --drop-operator, --set-uid or --rewrite-prefix");
    /* drops first, then uid changes, then prefix rewrites, each in the order given */
    sp_edit_t *edits = calloc(n_edits, sizeof *edits);
    sp_edit_outcome_t *oc = calloc(n_edits, sizeof *oc);
    char **labels = calloc(n_edits, sizeof *labels);
    if (!edits || !oc || !labels) {
        free(edits);
        free(oc);
        free(labels);
        return EXIT_STORAGE;
    }
    sp_error_t err;
    sp_error_clear(&err);
    uint32_t k = 0;
    int code = 0;
    struct { const cli_list_t *l; sp_edit_kind_t kind; } groups[] = {
        {&drops, SP_EDIT_DROP_OPERATOR}, {&set_uids, SP_EDIT_SET_UID}, {&prefixes, SP_EDIT_REWRITE_PREFIX}};
    for (size_t g = 0; g < 3 && !code; g++)
        for (int i = 0; i < groups[g].l->n && !code; i++) {
            if (sp_edit_parse(groups[g].kind, groups[g].l->v[i], &edits[k], &err))
                code = opts_usage_error(cmd, "%s", err.message);
            else
                k++;
        }
    sp_snapshot_t *snap = NULL;
    sp_edit_write_result_t res;
    memset(&res, 0, sizeof res);
    if (!code && sp_snapshot_open(argv[0], 0, &snap, &err))
        code = report_error("metadata edit", &err, edit_json);
    for (uint32_t i = 0; !code && i < n_edits; i++)
        if (edits[i].kind != SP_EDIT_REWRITE_PREFIX)
            labels[i] = edit_label(snap->meta, &edits[i]);
    if (!code && sp_edit_apply(snap, edits, n_edits, oc, &err)) {
        sp_error_set_file(&err, snap->metadata_path);
        code = report_error("metadata edit", &err, edit_json);
    }
    if (!code && !edit_dry_run) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        sp_edit_write_options_t wo = {edit_output, in_place, edit_copy, (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000};
        if (sp_edit_write(snap, &wo, &res, &err))
            code = report_error("metadata edit", &err, edit_json);
    }
    if (!code && edit_json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "snapshot");
        jw_str(&w, snap->location);
        jw_key(&w, "output");
        if (edit_output) jw_str(&w, edit_output); else jw_null(&w);
        jw_key(&w, "in_place");
        jw_bool(&w, in_place);
        jw_key(&w, "dry_run");
        jw_bool(&w, edit_dry_run);
        jw_key(&w, "edits");
        jw_arr(&w);
        for (uint32_t i = 0; i < n_edits; i++) {
            char h1[33], h2[33];
            sp_id_to_hex(oc[i].old_id, h1);
            sp_id_to_hex(oc[i].new_id, h2);
            jw_obj(&w);
            jw_key(&w, "edit");
            jw_str(&w, edits[i].kind == SP_EDIT_DROP_OPERATOR ? "drop_operator"
                       : edits[i].kind == SP_EDIT_SET_UID   ? "set_uid"
                                                             : "rewrite_prefix");
            if (edits[i].kind == SP_EDIT_REWRITE_PREFIX) {
                jw_key(&w, "from");
                jw_str(&w, edits[i].from);
                jw_key(&w, "to");
                jw_str(&w, edits[i].to);
                jw_key(&w, "references");
                jw_uint(&w, oc[i].rewritten);
            } else {
                jw_key(&w, "operator_id");
                jw_str(&w, h1);
                jw_key(&w, "operator");
                jw_str(&w, labels[i] ? labels[i] : h1);
                jw_key(&w, "state_size_bytes");
                jw_uint(&w, oc[i].state_bytes);
                if (edits[i].kind == SP_EDIT_SET_UID) {
                    jw_key(&w, "new_uid");
                    jw_str(&w, edits[i].new_uid);
                    jw_key(&w, "new_operator_id");
                    jw_str(&w, h2);
                } else {
                    jw_key(&w, "file_references");
                    jw_uint(&w, oc[i].files);
                }
            }
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
        jw_key(&w, "metadata_path");
        if (res.metadata_path) jw_str(&w, res.metadata_path); else jw_null(&w);
        jw_key(&w, "backup_path");
        if (res.backup_path) jw_str(&w, res.backup_path); else jw_null(&w);
        jw_key(&w, "files");
        jw_obj(&w);
        jw_key(&w, "reflinked");
        jw_uint(&w, res.files_reflinked);
        jw_key(&w, "hard_linked");
        jw_uint(&w, res.files_hardlinked);
        jw_key(&w, "copied");
        jw_uint(&w, res.files_copied);
        jw_key(&w, "bytes");
        jw_uint(&w, res.bytes);
        jw_obj_end(&w);
        jw_key(&w, "external_references");
        jw_uint(&w, res.external_refs);
        jw_obj_end(&w);
        jw_end(&w);
    } else if (!code) {
        char b1[32], h2[33];
        for (uint32_t i = 0; i < n_edits; i++) {
            fmt_iec(oc[i].state_bytes, b1, sizeof b1);
            sp_id_to_hex(oc[i].new_id, h2);
            if (edits[i].kind == SP_EDIT_DROP_OPERATOR)
                printf("dropped    operator %s: %s of state; %u file reference%s no longer referenced%s\n", labels[i],
                       b1, oc[i].files, oc[i].files == 1 ? "" : "s",
                       in_place && oc[i].files ? " (the files stay in the directory)" : "");
            else if (edits[i].kind == SP_EDIT_SET_UID)
                printf("set uid    operator %s -> uid '%s', operator ID %s (%s of state)\n", labels[i],
                       edits[i].new_uid, h2, b1);
            else
                printf("rewrote    %" PRIu64 " reference%s: %s -> %s\n", oc[i].rewritten,
                       oc[i].rewritten == 1 ? "" : "s", edits[i].from, edits[i].to);
        }
        if (edit_dry_run) {
            printf("dry run: nothing was written\n");
        } else {
            if (edit_output)
                printf("wrote      %s: %" PRIu64 " files (%" PRIu64 " reflinked, %" PRIu64 " hard-linked, %" PRIu64
                       " copied), %s\n",
                       res.metadata_path, res.files_reflinked + res.files_hardlinked + res.files_copied,
                       res.files_reflinked, res.files_hardlinked, res.files_copied, fmt_iec(res.bytes, b1, sizeof b1));
            else
                printf("replaced   %s\nkept       the previous metadata as %s\n", res.metadata_path, res.backup_path);
            if (res.external_refs)
                printf("note       %" PRIu64 " reference%s point%s outside the original directory and %s shared with "
                       "it (sp relocate gathers them)\n",
                       res.external_refs, res.external_refs == 1 ? "" : "s", res.external_refs == 1 ? "s" : "",
                       res.external_refs == 1 ? "is" : "are");
            printf("verified   sp verify: OK\n");
        }
    }
    for (uint32_t i = 0; i < n_edits; i++) {
        sp_edit_free(&edits[i]);
        free(labels[i]);
    }
    free(edits);
    free(oc);
    free(labels);
    sp_edit_write_result_free(&res);
    sp_snapshot_close(snap);
    if (!code && fflush(stdout) != 0)
        return EXIT_STORAGE;
    return code;
}

int cmd_metadata(int argc, char **argv)
{
    const cli_command_t *cmd = command_find("metadata");
    if (argc >= 2 && strcmp(argv[1], "export") == 0)
        return do_export(cmd, argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "import") == 0)
        return do_import(cmd, argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "edit") == 0)
        return do_edit(cmd, argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        opts_help(&export_cmd, export_opts);
        printf("\n");
        opts_help(&import_cmd, import_opts);
        printf("\n");
        opts_help(&edit_cmd, edit_opts);
        return 0;
    }
    return opts_usage_error(cmd, argc >= 2 ? "unknown action '%s' (export, import or edit)" : "missing action%s (export, import or edit)",
                            argc >= 2 ? argv[1] : "");
}
