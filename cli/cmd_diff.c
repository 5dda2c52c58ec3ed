/* sp diff SNAP_A SNAP_B: operators added / removed / changed / moved, and references that differ. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "out.h"

static const struct { unsigned bit; const char *token; } change_names[] = {
    {SP_DIFF_OPERATOR_ID, "operator_id"}, {SP_DIFF_UID, "uid"},
    {SP_DIFF_NAME, "name"},               {SP_DIFF_PARALLELISM, "parallelism"},
    {SP_DIFF_MAX_PARALLELISM, "max_parallelism"}, {SP_DIFF_STATE_BYTES, "state_size"},
    {SP_DIFF_STATE, "state"},
};

static void json_side(jw_t *w, const sp_snapshot_t *s, int32_t idx, uint64_t bytes)
{
    if (idx < 0) {
        jw_null(w);
        return;
    }
    const sp_operator_t *op = &s->meta->operators[idx];
    char hex[33];
    sp_id_to_hex(op->id, hex);
    jw_obj(w);
    jw_key(w, "operator_id");
    jw_str(w, hex);
    jw_key(w, "uid");
    jw_mutf8_or_null(w, op->uid);
    jw_key(w, "name");
    jw_mutf8_or_null(w, op->name);
    jw_key(w, "parallelism");
    jw_int(w, op->parallelism);
    jw_key(w, "max_parallelism");
    if (s->meta->version == 0) jw_null(w); else jw_int(w, op->max_parallelism);
    jw_key(w, "state_size_bytes");
    jw_uint(w, bytes);
    jw_obj_end(w);
}

static void json_snap(jw_t *w, const sp_snapshot_t *s)
{
    jw_obj(w);
    jw_key(w, "location");
    jw_str(w, s->location);
    jw_key(w, "metadata_version");
    jw_int(w, s->meta->version);
    jw_key(w, "checkpoint_id");
    jw_int(w, s->meta->checkpoint_id);
    jw_key(w, "operators");
    jw_uint(w, s->meta->n_operators);
    jw_obj_end(w);
}

static void render_json(const sp_snapshot_t *a, const sp_snapshot_t *b, const sp_diff_result_t *d)
{
    jw_t w;
    jw_init(&w, stdout, true);
    jw_obj(&w);
    jw_key(&w, "schema_version");
    jw_int(&w, 1);
    jw_key(&w, "a");
    json_snap(&w, a);
    jw_key(&w, "b");
    json_snap(&w, b);
    jw_key(&w, "identical");
    jw_bool(&w, d->identical);
    jw_key(&w, "metadata_version_differs");
    jw_bool(&w, d->version_differs);
    jw_key(&w, "checkpoint_id_differs");
    jw_bool(&w, d->checkpoint_id_differs);
    jw_key(&w, "master_states_differ");
    jw_bool(&w, d->master_states_differ);
    jw_key(&w, "properties_differ");
    jw_bool(&w, d->properties_differ);
    jw_key(&w, "summary");
    jw_obj(&w);
    jw_key(&w, "same");
    jw_uint(&w, d->same);
    jw_key(&w, "added");
    jw_uint(&w, d->added);
    jw_key(&w, "removed");
    jw_uint(&w, d->removed);
    jw_key(&w, "changed");
    jw_uint(&w, d->changed);
    jw_key(&w, "moved");
    jw_uint(&w, d->moved);
    jw_key(&w, "references_only_in_a");
    jw_uint(&w, d->refs_only_a);
    jw_key(&w, "references_only_in_b");
    jw_uint(&w, d->refs_only_b);
    jw_obj_end(&w);
    jw_key(&w, "operators");
    jw_arr(&w);
    for (uint32_t i = 0; i < d->n_ops; i++) {
        const sp_diff_op_t *o = &d->ops[i];
        jw_obj(&w);
        jw_key(&w, "change");
        jw_str(&w, sp_diff_kind_token(o->kind));
        jw_key(&w, "changes");
        jw_arr(&w);
        for (size_t k = 0; k < sizeof change_names / sizeof change_names[0]; k++)
            if (o->changes & change_names[k].bit)
                jw_str(&w, change_names[k].token);
        jw_arr_end(&w);
        jw_key(&w, "a");
        json_side(&w, a, o->a_index, o->a_state_bytes);
        jw_key(&w, "b");
        json_side(&w, b, o->b_index, o->b_state_bytes);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_key(&w, "references");
    jw_arr(&w);
    for (uint32_t i = 0; i < d->n_refs; i++) {
        const sp_diff_ref_t *r = &d->refs[i];
        jw_obj(&w);
        jw_key(&w, "kind");
        jw_str(&w, sp_ref_kind_name(r->kind));
        jw_key(&w, "path");
        jw_mutf8(&w, r->path);
        if (r->kind == SP_REF_SEGMENT) {
            jw_key(&w, "offset");
            jw_int(&w, r->segment_offset);
        }
        jw_key(&w, "size_bytes");
        if (r->size >= 0) jw_int(&w, r->size); else jw_null(&w);
        jw_key(&w, "count_a");
        jw_uint(&w, r->count_a);
        jw_key(&w, "count_b");
        jw_uint(&w, r->count_b);
        jw_obj_end(&w);
    }
    jw_arr_end(&w);
    jw_obj_end(&w);
    jw_end(&w);
}

/* "uid (hex)" or "hex" of one side's operator, malloc'd */
static char *op_label(const sp_snapshot_t *s, int32_t idx)
{
    const sp_operator_t *op = &s->meta->operators[idx];
    char hex[33];
    sp_id_to_hex(op->id, hex);
    char *uid = op->uid.len ? mutf8_display(op->uid) : NULL;
    size_t n = 40 + (uid ? strlen(uid) : 0);
    char *l = malloc(n);
    if (l) {
        if (uid)
            snprintf(l, n, "%s  %s", hex, uid);
        else
            snprintf(l, n, "%s", hex);
    }
    free(uid);
    return l;
}

static void render_human(const sp_snapshot_t *a, const sp_snapshot_t *b, const sp_diff_result_t *d, bool all)
{
    char b1[32], b2[32];
    printf("A  %s (metadata version %d, checkpoint %" PRId64 ", %u operators)\n", a->location, a->meta->version,
           a->meta->checkpoint_id, a->meta->n_operators);
    printf("B  %s (metadata version %d, checkpoint %" PRId64 ", %u operators)\n", b->location, b->meta->version,
           b->meta->checkpoint_id, b->meta->n_operators);
    if (d->version_differs)
        printf("metadata version  %d -> %d\n", a->meta->version, b->meta->version);
    if (d->checkpoint_id_differs)
        printf("checkpoint ID     %" PRId64 " -> %" PRId64 "\n", a->meta->checkpoint_id, b->meta->checkpoint_id);
    if (d->master_states_differ)
        printf("master states     differ (%u -> %u)\n", a->meta->n_master_states, b->meta->n_master_states);
    if (d->properties_differ)
        printf("properties        the checkpoint properties (kind, format, ...) differ\n");
    bool header = false;
    for (uint32_t i = 0; i < d->n_ops; i++) {
        const sp_diff_op_t *o = &d->ops[i];
        if (o->kind == SP_DIFF_SAME && !all)
            continue;
        if (!header) {
            printf("\n");
            header = true;
        }
        const sp_operator_t *oa = o->a_index >= 0 ? &a->meta->operators[o->a_index] : NULL;
        const sp_operator_t *ob = o->b_index >= 0 ? &b->meta->operators[o->b_index] : NULL;
        char *la = oa ? op_label(a, o->a_index) : NULL, *lb = ob ? op_label(b, o->b_index) : NULL;
        switch (o->kind) {
        case SP_DIFF_SAME:
            printf("same     %s\n", la ? la : "");
            break;
        case SP_DIFF_REMOVED:
            printf("removed  %s  (%s of state)\n", la ? la : "", fmt_iec(o->a_state_bytes, b1, sizeof b1));
            break;
        case SP_DIFF_ADDED:
            printf("added    %s  (%s of state)\n", lb ? lb : "", fmt_iec(o->b_state_bytes, b1, sizeof b1));
            break;
        case SP_DIFF_MOVED:
            printf("moved    %s\n      -> %s  (the same state, %s)\n", la ? la : "", lb ? lb : "",
                   fmt_iec(o->b_state_bytes, b1, sizeof b1));
            break;
        case SP_DIFF_CHANGED:
            printf("changed  %s\n", la ? la : "");
            break;
        }
        if ((o->kind == SP_DIFF_CHANGED || o->kind == SP_DIFF_MOVED) && oa && ob) {
            if (o->changes & SP_DIFF_UID) {
                char *u1 = mutf8_display(oa->uid), *u2 = mutf8_display(ob->uid);
                printf("         uid %s -> %s\n", oa->uid.len ? u1 : "(none)", ob->uid.len ? u2 : "(none)");
                free(u1);
                free(u2);
            }
            if (o->changes & SP_DIFF_NAME) {
                char *n1 = mutf8_display(oa->name), *n2 = mutf8_display(ob->name);
                printf("         name %s -> %s\n", oa->name.len ? n1 : "(none)", ob->name.len ? n2 : "(none)");
                free(n1);
                free(n2);
            }
            if (o->changes & SP_DIFF_PARALLELISM)
                printf("         parallelism %d -> %d\n", oa->parallelism, ob->parallelism);
            if (o->changes & SP_DIFF_MAX_PARALLELISM)
                printf("         max parallelism %d -> %d\n", oa->max_parallelism, ob->max_parallelism);
            if (o->changes & SP_DIFF_STATE_BYTES)
                printf("         state %s -> %s\n", fmt_iec(o->a_state_bytes, b1, sizeof b1),
                       fmt_iec(o->b_state_bytes, b2, sizeof b2));
            else if (o->changes & SP_DIFF_STATE)
                printf("         state handles differ (same size)\n");
        }
        free(la);
        free(lb);
    }
    if (d->n_refs) {
        printf("\nreferences: %" PRIu64 " only in A (-), %" PRIu64 " only in B (+)\n", d->refs_only_a, d->refs_only_b);
        uint32_t shown = 0;
        for (uint32_t i = 0; i < d->n_refs; i++) {
            const sp_diff_ref_t *r = &d->refs[i];
            if (!all && shown >= 20) {
                printf("  ... and %u more (--all lists every one)\n", d->n_refs - shown);
                break;
            }
            shown++;
            char *p = mutf8_display(r->path);
            char sz[32] = "-";
            if (r->size >= 0)
                snprintf(sz, sizeof sz, "%" PRId64, r->size);
            printf("  %c %-8s %10s  %s", r->count_a > r->count_b ? '-' : '+', sp_ref_kind_name(r->kind), sz,
                   p ? p : "");
            if (r->count_a && r->count_b)
                printf("  (%u handles in A, %u in B)", r->count_a, r->count_b);
            printf("\n");
            free(p);
        }
    }
    printf("\n%s: %u removed, %u added, %u changed, %u moved, %u unchanged; %" PRIu64
           " references only in A, %" PRIu64 " only in B\n",
           d->identical ? "IDENTICAL" : "DIFFERENT", d->removed, d->added, d->changed, d->moved, d->same,
           d->refs_only_a, d->refs_only_b);
}

int cmd_diff(int argc, char **argv)
{
    bool json = false, all = false;
    const cli_option_t opts[] = {
        {"all", 'a', OPT_FLAG, &all, NULL, "also list unchanged operators, and every differing reference"},
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: every operator and every differing reference"},
        {0},
    };
    const cli_command_t *cmd = command_find("diff");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 2)
        return opts_usage_error(cmd, "give two snapshots, A and B");
    sp_error_t err;
    sp_error_clear(&err);
    sp_snapshot_t *a, *b;
    if (sp_snapshot_open(argv[0], 0, &a, &err))
        return report_error("diff", &err, json);
    if (sp_snapshot_open(argv[1], 0, &b, &err)) {
        sp_snapshot_close(a);
        return report_error("diff", &err, json);
    }
    sp_diff_result_t d;
    if (sp_diff(a, b, &d, &err)) {
        sp_snapshot_close(a);
        sp_snapshot_close(b);
        return report_error("diff", &err, json);
    }
    if (json)
        render_json(a, b, &d);
    else
        render_human(a, b, &d, all);
    int code = d.identical ? 0 : EXIT_PROBLEMS;
    sp_diff_result_free(&d);
    sp_snapshot_close(a);
    sp_snapshot_close(b);
    if (fflush(stdout) != 0)
        return EXIT_STORAGE;
    return code;
}
