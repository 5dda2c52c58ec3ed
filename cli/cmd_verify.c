/* sp verify SNAP: is every referenced file there, with its recorded size? */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "out.h"

static void json_item(jw_t *w, const sp_snapshot_t *s, const sp_verify_item_t *it, bool problem)
{
    char hex[33] = "";
    char path[4096];
    if (it->ref.operator_index < s->meta->n_operators)
        sp_id_to_hex(s->meta->operators[it->ref.operator_index].id, hex);
    jw_obj(w);
    if (problem) {
        jw_key(w, "problem");
        jw_str(w, sp_problem_token(it->problem));
        jw_key(w, "message");
        jw_str(w, sp_problem_name(it->problem));
    }
    jw_key(w, "kind");
    jw_str(w, sp_ref_kind_name(it->ref.kind));
    jw_key(w, "path");
    jw_mutf8(w, it->ref.path);
    jw_key(w, "resolved_path");
    if (sp_snapshot_local_path(s, &it->ref, path, sizeof path))
        jw_str(w, path);
    else
        jw_null(w);
    jw_key(w, "size_bytes");
    if (it->ref.size >= 0) jw_int(w, it->ref.size); else jw_null(w);
    if (problem) {
        jw_key(w, "actual_size_bytes");
        if (it->actual_size >= 0) jw_int(w, it->actual_size); else jw_null(w);
    } else {
        jw_key(w, "checked");
        jw_bool(w, it->checked);
    }
    jw_key(w, "operator_id");
    jw_str(w, hex);
    jw_key(w, "subtask");
    if (it->ref.subtask_index >= 0) jw_int(w, it->ref.subtask_index); else jw_null(w);
    jw_obj_end(w);
}

int cmd_verify(int argc, char **argv)
{
    bool json = false;
    const cli_option_t opts[] = {
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: ok, problems, external references"},
        {0},
    };
    const cli_command_t *cmd = command_find("verify");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, n ? "give exactly one snapshot" : "missing snapshot (a directory or its _metadata file)");
    sp_error_t err;
    sp_error_clear(&err);
    sp_snapshot_t *snap;
    sp_status_t s = sp_snapshot_open(argv[0], 0, &snap, &err);
    if (s)
        return report_error("verify", &err, json);
    sp_verify_result_t res;
    s = sp_verify(snap, &res, &err);
    if (s) {
        sp_snapshot_close(snap);
        return report_error("verify", &err, json);
    }
    bool ok = res.n_problems == 0 && res.n_metadata_problems == 0;
    if (json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "location");
        jw_str(&w, snap->location);
        jw_key(&w, "ok");
        jw_bool(&w, ok);
        jw_key(&w, "files_checked");
        jw_uint(&w, res.files_checked);
        jw_key(&w, "problems");
        jw_arr(&w);
        for (uint32_t i = 0; i < res.n_problems; i++)
            json_item(&w, snap, &res.problems[i], true);
        jw_arr_end(&w);
        jw_key(&w, "metadata_problems");
        jw_arr(&w);
        for (uint32_t i = 0; i < res.n_metadata_problems; i++) {
            const sp_metadata_problem_t *p = &res.metadata_problems[i];
            char hex[33] = "";
            if (p->operator_index < snap->meta->n_operators)
                sp_id_to_hex(snap->meta->operators[p->operator_index].id, hex);
            jw_obj(&w);
            jw_key(&w, "operator_id");
            jw_str(&w, hex);
            jw_key(&w, "subtask");
            if (p->subtask_index >= 0) jw_int(&w, p->subtask_index); else jw_null(&w);
            jw_key(&w, "message");
            jw_str(&w, p->message);
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
        jw_key(&w, "external");
        jw_arr(&w);
        for (uint32_t i = 0; i < res.n_external; i++)
            json_item(&w, snap, &res.external[i], false);
        jw_arr_end(&w);
        jw_obj_end(&w);
        jw_end(&w);
    } else {
        char b1[32], path[4096];
        for (uint32_t i = 0; i < res.n_problems; i++) {
            const sp_verify_item_t *it = &res.problems[i];
            char hex[33] = "-";
            if (it->ref.operator_index < snap->meta->n_operators)
                sp_id_to_hex(snap->meta->operators[it->ref.operator_index].id, hex);
            const char *shown = sp_snapshot_local_path(snap, &it->ref, path, sizeof path) ? path : "";
            char *stored = mutf8_term(it->ref.path);
            printf("PROBLEM  %s: %s (operator %s, subtask %d, %s)", sp_problem_name(it->problem),
                   shown[0] ? shown : (stored ? stored : ""), hex, it->ref.subtask_index,
                   sp_ref_slot_name(it->ref.slot));
            if (it->problem == SP_PROBLEM_SIZE_MISMATCH)
                printf(": metadata records %" PRId64 " bytes, file has %" PRId64, it->ref.size, it->actual_size);
            printf("\n");
            free(stored);
        }
        for (uint32_t i = 0; i < res.n_metadata_problems; i++) {
            const sp_metadata_problem_t *p = &res.metadata_problems[i];
            char hex[33] = "-";
            if (p->operator_index < snap->meta->n_operators)
                sp_id_to_hex(snap->meta->operators[p->operator_index].id, hex);
            printf("PROBLEM  metadata: operator %s%s%.0d: %s\n", hex, p->subtask_index >= 0 ? " subtask " : "",
                   p->subtask_index >= 0 ? p->subtask_index : 0, p->message);
        }
        for (uint32_t i = 0; i < res.n_external; i++) {
            char *p = mutf8_term(res.external[i].ref.path);
            printf("EXTERNAL %s %s%s\n", sp_ref_kind_name(res.external[i].ref.kind), p ? p : "",
                   res.external[i].checked ? "" : " (not checked: not a local path)");
            free(p);
        }
        printf("%s: %" PRIu64 " file reference%s checked, %u problem%s, %u external path%s (%s metadata)\n",
               res.n_problems ? "INCOMPLETE" : ok ? "OK" : "INCONSISTENT", res.files_checked,
               res.files_checked == 1 ? "" : "s", res.n_problems + res.n_metadata_problems,
               res.n_problems + res.n_metadata_problems == 1 ? "" : "s", res.n_external, res.n_external == 1 ? "" : "s",
               fmt_iec(snap->size, b1, sizeof b1));
    }
    sp_verify_result_free(&res);
    sp_snapshot_close(snap);
    return ok ? 0 : EXIT_PROBLEMS;
}
