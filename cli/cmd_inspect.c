/* sp inspect SNAP: what a snapshot holds (render only; facts come from libsp). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "out.h"

typedef struct ictx {
    sp_snapshot_t *snap;
    sp_summary_t sum;
    jw_t w;
    bool json;
} ictx_t;

static void op_id_hex(const sp_metadata_t *m, uint32_t idx, char hex[33])
{
    if (idx < m->n_operators)
        sp_id_to_hex(m->operators[idx].id, hex);
    else
        strcpy(hex, "");
}

/* ---------- JSON ---------- */

static int json_ref(const sp_ref_t *ref, void *user)
{
    ictx_t *c = user;
    if (ref->kind == SP_REF_INLINE || ref->kind == SP_REF_DIRECTORY)
        return 0;
    jw_t *w = &c->w;
    char hex[33];
    jw_obj(w);
    jw_key(w, "kind");
    jw_str(w, sp_ref_kind_name(ref->kind));
    jw_key(w, "path");
    jw_mutf8(w, ref->path);
    if (ref->kind == SP_REF_RELATIVE) {
        jw_key(w, "resolved_path");
        char *p = malloc(strlen(c->snap->dir) + ref->path.len + 2);
        if (p) {
            int n = sprintf(p, "%s/", c->snap->dir);
            memcpy(p + n, ref->path.ptr, ref->path.len);
            jw_strn(w, p, (size_t)n + ref->path.len);
            free(p);
        } else {
            jw_null(w);
        }
    }
    if (ref->kind == SP_REF_SEGMENT) {
        jw_key(w, "offset");
        jw_int(w, ref->segment_offset);
    }
    jw_key(w, "size_bytes");
    if (ref->size >= 0)
        jw_int(w, ref->size);
    else
        jw_null(w);
    jw_key(w, "operator_id");
    op_id_hex(c->snap->meta, ref->operator_index, hex);
    jw_str(w, hex);
    jw_key(w, "subtask");
    if (ref->subtask_index >= 0)
        jw_int(w, ref->subtask_index);
    else
        jw_null(w);
    jw_key(w, "slot");
    jw_str(w, sp_ref_slot_name(ref->slot));
    jw_key(w, "handle");
    jw_str(w, ref->handle ? sp_tag_name(ref->handle->tag) : "");
    jw_obj_end(w);
    return 0;
}

static int json_blocker(const sp_ref_t *ref, void *user)
{
    ictx_t *c = user;
    if (ref->kind != SP_REF_ABSOLUTE && ref->kind != SP_REF_SEGMENT && ref->kind != SP_REF_DIRECTORY)
        return 0;
    char hex[33];
    jw_obj(&c->w);
    jw_key(&c->w, "kind");
    jw_str(&c->w, sp_ref_kind_name(ref->kind));
    jw_key(&c->w, "path");
    jw_mutf8(&c->w, ref->path);
    jw_key(&c->w, "operator_id");
    op_id_hex(c->snap->meta, ref->operator_index, hex);
    jw_str(&c->w, hex);
    jw_key(&c->w, "subtask");
    if (ref->subtask_index >= 0)
        jw_int(&c->w, ref->subtask_index);
    else
        jw_null(&c->w);
    jw_obj_end(&c->w);
    return 0;
}

static void json_tag_list(jw_t *w, const sp_handle_list_t *l)
{
    jw_arr(w);
    for (uint32_t i = 0; i < l->n; i++)
        if (l->items[i])
            jw_str(w, sp_tag_name(l->items[i]->tag));
        else
            jw_null(w);
    jw_arr_end(w);
}

static void json_handle_kinds(jw_t *w, const sp_subtask_t *st, int version)
{
    if (version == 1) {
        /* Flink 1.2 stored one entry per chained operator of the task */
        jw_key(w, "legacy_operator_state");
        json_tag_list(w, &st->legacy);
        jw_key(w, "managed_operator_state");
        json_tag_list(w, &st->managed_operator);
        jw_key(w, "raw_operator_state");
        json_tag_list(w, &st->raw_operator);
    }
    if (version != 1) {
    jw_key(w, "managed_operator_state");
    if (st->managed_operator.n && st->managed_operator.items[0])
        jw_str(w, sp_tag_name(st->managed_operator.items[0]->tag));
    else
        jw_null(w);
    jw_key(w, "raw_operator_state");
    if (st->raw_operator.n && st->raw_operator.items[0])
        jw_str(w, sp_tag_name(st->raw_operator.items[0]->tag));
    else
        jw_null(w);
    }
    jw_key(w, "managed_keyed_state");
    if (st->managed_keyed)
        jw_str(w, sp_tag_name(st->managed_keyed->tag));
    else
        jw_null(w);
    jw_key(w, "raw_keyed_state");
    if (st->raw_keyed)
        jw_str(w, sp_tag_name(st->raw_keyed->tag));
    else
        jw_null(w);
    jw_key(w, "input_channel_handles");
    jw_uint(w, st->n_input_channels);
    jw_key(w, "result_subpartition_handles");
    jw_uint(w, st->n_output_channels);
}

static void json_properties(jw_t *w, const sp_snapshot_t *s)
{
    const sp_properties_t *p = &s->properties;
    if (!s->has_properties) {
        jw_null(w);
        return;
    }
    jw_obj(w);
    jw_key(w, "length");
    jw_uint(w, p->length);
    jw_key(w, "null");
    jw_bool(w, p->is_null);
    jw_key(w, "kind");
    jw_str(w, sp_kind_name(p->kind));
    jw_key(w, "snapshot_name");
    if (p->snapshot_name[0]) jw_str(w, p->snapshot_name); else jw_null(w);
    jw_key(w, "format_type");
    if (p->format) jw_str(w, p->format == SP_FORMAT_NATIVE ? "NATIVE" : "CANONICAL"); else jw_null(w);
    jw_key(w, "post_checkpoint_action");
    if (p->post_checkpoint_action[0]) jw_str(w, p->post_checkpoint_action); else jw_null(w);
    jw_key(w, "sharing_files_strategy");
    if (p->sharing_files_strategy[0]) jw_str(w, p->sharing_files_strategy); else jw_null(w);
    jw_key(w, "forced");
    jw_bool(w, p->forced);
    jw_key(w, "unclaimed");
    jw_bool(w, p->unclaimed);
    jw_key(w, "discard_subsumed");
    jw_bool(w, p->discard_subsumed);
    jw_key(w, "discard_finished");
    jw_bool(w, p->discard_finished);
    jw_key(w, "discard_cancelled");
    jw_bool(w, p->discard_cancelled);
    jw_key(w, "discard_failed");
    jw_bool(w, p->discard_failed);
    jw_key(w, "discard_suspended");
    jw_bool(w, p->discard_suspended);
    jw_obj_end(w);
}

static void render_json(ictx_t *c, bool subtasks)
{
    const sp_snapshot_t *s = c->snap;
    const sp_metadata_t *m = s->meta;
    const sp_summary_t *sum = &c->sum;
    jw_t *w = &c->w;
    jw_init(w, stdout, true);
    jw_obj(w);
    jw_key(w, "schema_version");
    jw_int(w, 1);
    jw_key(w, "location");
    jw_str(w, s->location);
    jw_key(w, "directory");
    jw_str(w, s->dir);
    jw_key(w, "metadata_path");
    jw_str(w, s->metadata_path);
    jw_key(w, "metadata_size_bytes");
    jw_uint(w, s->size);
    jw_key(w, "metadata_version");
    jw_int(w, m->version);
    jw_key(w, "written_by");
    jw_str(w, sp_meta_version_writers(m->version));
    jw_key(w, "checkpoint_id");
    jw_int(w, m->checkpoint_id);
    jw_key(w, "kind");
    jw_str(w, sp_kind_name(sum->kind));
    jw_key(w, "kind_source");
    jw_str(w, sp_kind_source_name(sum->kind_source));
    jw_key(w, "format");
    if (sum->format) jw_str(w, sp_format_name(sum->format)); else jw_null(w);
    jw_key(w, "format_source");
    jw_str(w, sp_kind_source_name(sum->format_source));
    jw_key(w, "properties");
    json_properties(w, s);
    jw_key(w, "master_states");
    jw_uint(w, m->n_master_states);
    jw_key(w, "state_size_bytes");
    jw_uint(w, sum->total_state_bytes);
    jw_key(w, "inline_bytes");
    jw_uint(w, sum->ref_bytes[SP_REF_INLINE]);
    jw_key(w, "reference_counts");
    jw_obj(w);
    for (int k = 0; k < 5; k++) {
        jw_key(w, sp_ref_kind_name((sp_ref_kind_t)k));
        jw_uint(w, sum->ref_count[k]);
    }
    jw_obj_end(w);
    jw_key(w, "channel_state_handles");
    jw_uint(w, sum->channel_state_handles);
    jw_key(w, "relocatable");
    jw_bool(w, sum->relocatable);
    jw_key(w, "relocation_blockers");
    jw_arr(w);
    sp_meta_visit_refs(s->meta, json_blocker, c);
    jw_arr_end(w);
    jw_key(w, "operators");
    jw_arr(w);
    for (uint32_t i = 0; i < m->n_operators; i++) {
        const sp_operator_t *op = &m->operators[i];
        const sp_op_summary_t *os = &sum->operators[i];
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
        if (m->version == 0) jw_null(w); else jw_int(w, op->max_parallelism);
        jw_key(w, "subtask_states");
        jw_uint(w, op->n_subtasks);
        jw_key(w, "subtasks_with_state");
        jw_uint(w, os->subtasks_with_state);
        jw_key(w, "finished_subtasks");
        jw_uint(w, os->finished_subtasks);
        jw_key(w, "fully_finished");
        jw_bool(w, op->fully_finished);
        jw_key(w, "has_coordinator_state");
        jw_bool(w, op->coordinator != NULL);
        jw_key(w, "state_size_bytes");
        jw_uint(w, os->state_bytes);
        jw_key(w, "inline_bytes");
        jw_uint(w, os->inline_bytes);
        jw_key(w, "file_references");
        jw_uint(w, os->file_refs);
        if (subtasks) {
            jw_key(w, "subtasks");
            jw_arr(w);
            for (uint32_t j = 0; j < op->n_subtasks; j++) {
                const sp_subtask_t *st = &op->subtasks[j];
                jw_obj(w);
                jw_key(w, "index");
                jw_int(w, st->index);
                jw_key(w, "finished");
                jw_bool(w, st->finished);
                if (m->version == 0) {
                    jw_key(w, "serialized_state_bytes");
                    jw_uint(w, st->v0_state.len);
                    jw_key(w, "state_size");
                    jw_int(w, st->v0_state_size);
                } else if (!st->finished) {
                    json_handle_kinds(w, st, m->version);
                }
                jw_obj_end(w);
            }
            jw_arr_end(w);
        }
        jw_obj_end(w);
    }
    jw_arr_end(w);
    record_json(w, s);
    jw_key(w, "references");
    jw_arr(w);
    sp_meta_visit_refs(s->meta, json_ref, c);
    jw_arr_end(w);
    jw_obj_end(w);
    jw_end(w);
}

/* ---------- human ---------- */

typedef struct hblock {
    ictx_t *c;
    int shown;
} hblock_t;

static int human_blocker(const sp_ref_t *ref, void *user)
{
    hblock_t *b = user;
    if (ref->kind != SP_REF_ABSOLUTE && ref->kind != SP_REF_SEGMENT && ref->kind != SP_REF_DIRECTORY)
        return 0;
    if (b->shown++ >= 5)
        return 1;
    char *p = mutf8_term(ref->path);
    printf("              %-9s %s\n", sp_ref_kind_name(ref->kind), p ? p : "");
    free(p);
    return 0;
}

static int human_file(const sp_ref_t *ref, void *user)
{
    ictx_t *c = user;
    if (ref->kind == SP_REF_INLINE)
        return 0;
    char hex[33], sz[32] = "-";
    op_id_hex(c->snap->meta, ref->operator_index, hex);
    if (ref->size >= 0)
        snprintf(sz, sizeof sz, "%" PRId64, ref->size);
    char sub[16] = "-";
    if (ref->subtask_index >= 0)
        snprintf(sub, sizeof sub, "%d", ref->subtask_index);
    char *p = mutf8_term(ref->path);
    printf("%-9s  %12s  %s  %7s  %-25s  %s\n", sp_ref_kind_name(ref->kind), sz, hex, sub,
           sp_ref_slot_name(ref->slot), p ? p : "");
    free(p);
    return 0;
}

static const char *short_tag(const sp_handle_t *h)
{
    return h ? sp_tag_name(h->tag) : "-";
}

static void render_human(ictx_t *c, bool files, bool subtasks)
{
    const sp_snapshot_t *s = c->snap;
    const sp_metadata_t *m = s->meta;
    const sp_summary_t *sum = &c->sum;
    char b1[32], b2[32];
    printf("Snapshot      %s\n", s->dir);
    printf("Metadata      %s (%s)\n", s->metadata_path, fmt_iec(s->size, b1, sizeof b1));
    printf("Version       %d (written by %s)\n", m->version, sp_meta_version_writers(m->version));
    printf("Checkpoint ID %" PRId64 "\n", m->checkpoint_id);
    printf("Kind          %s", sp_kind_name(sum->kind));
    if (sum->kind == SP_KIND_SAVEPOINT)
        printf(", %s format", sum->format ? sp_format_name(sum->format) : "unknown");
    if (sum->kind_source != SP_KIND_FROM_NONE)
        printf(" (from %s)", sum->kind_source == SP_KIND_FROM_PROPERTIES ? "the properties trailer"
                             : sum->kind_source == SP_KIND_FROM_HANDLES ? "the state handle types"
                                                                        : "the directory name, a hint only");
    else
        printf(" (nothing in the file tells; V4+ files record it)");
    if (s->has_properties && s->properties.snapshot_name[0])
        printf(": \"%s\"", s->properties.snapshot_name);
    printf("\n");
    printf("State         %s in %" PRIu64 " file references, %s inline\n",
           fmt_iec(sum->total_state_bytes - sum->ref_bytes[SP_REF_INLINE], b1, sizeof b1),
           sum->ref_count[SP_REF_RELATIVE] + sum->ref_count[SP_REF_ABSOLUTE] + sum->ref_count[SP_REF_SEGMENT],
           fmt_iec(sum->ref_bytes[SP_REF_INLINE], b2, sizeof b2));
    printf("References    %" PRIu64 " relative, %" PRIu64 " absolute, %" PRIu64 " segment, %" PRIu64 " inline\n",
           sum->ref_count[SP_REF_RELATIVE], sum->ref_count[SP_REF_ABSOLUTE], sum->ref_count[SP_REF_SEGMENT],
           sum->ref_count[SP_REF_INLINE]);
    if (m->n_master_states)
        printf("Master states %u\n", m->n_master_states);
    if (sum->channel_state_handles)
        printf("Channel state %" PRIu64 " handles (unaligned checkpoint)\n", sum->channel_state_handles);
    if (sum->relocatable) {
        printf("Relocatable   yes: every reference is relative to the snapshot directory or inline\n");
    } else {
        printf("Relocatable   no: %" PRIu64 " reference%s outside the directory's relative layout; a plain copy "
               "would still point at them:\n",
               sum->blockers, sum->blockers == 1 ? "" : "s");
        hblock_t hb = {c, 0};
        sp_meta_visit_refs(s->meta, human_blocker, &hb);
        if (sum->blockers > 5)
            printf("              ... and %" PRIu64 " more (sp inspect --files lists all)\n", sum->blockers - 5);
    }
    record_human(s);

    /* operator table: measure the uid/name columns first */
    size_t wuid = 3, wname = 4;
    char **uids = calloc(m->n_operators + 1, sizeof *uids), **names = calloc(m->n_operators + 1, sizeof *names);
    for (uint32_t i = 0; uids && names && i < m->n_operators; i++) {
        uids[i] = m->operators[i].uid.len ? mutf8_term(m->operators[i].uid) : NULL;
        names[i] = m->operators[i].name.len ? mutf8_term(m->operators[i].name) : NULL;
        if (uids[i] && (size_t)term_width(uids[i]) > wuid)
            wuid = (size_t)term_width(uids[i]);
        if (names[i] && (size_t)term_width(names[i]) > wname)
            wname = (size_t)term_width(names[i]);
    }
    /* long uids are cut with an ellipsis (sp inspect --json has them whole) */
    if (wuid > 48) wuid = 48;
    if (wname > 48) wname = 48;
    bool has_names = m->version >= 5;
    printf("\n%-32s  ", "OPERATOR ID");
    if (has_names) {
        term_cell(stdout, "UID", (int)wuid);
        fputs("  ", stdout);
        term_cell(stdout, "NAME", (int)wname);
        fputs("  ", stdout);
    }
    printf("%11s  %8s  %10s  %10s  %5s\n", "PARALLELISM", "MAX PAR.", "WITH STATE", "STATE", "FILES");
    for (uint32_t i = 0; i < m->n_operators; i++) {
        const sp_operator_t *op = &m->operators[i];
        const sp_op_summary_t *os = &sum->operators[i];
        char hex[33], mp[16], ws[24];
        sp_id_to_hex(op->id, hex);
        if (m->version == 0)
            snprintf(mp, sizeof mp, "-");
        else
            snprintf(mp, sizeof mp, "%d", op->max_parallelism);
        if (op->fully_finished)
            snprintf(ws, sizeof ws, "finished");
        else
            snprintf(ws, sizeof ws, "%u", os->subtasks_with_state);
        printf("%-32s  ", hex);
        if (has_names) {
            term_cell(stdout, uids && uids[i] ? uids[i] : "-", (int)wuid);
            fputs("  ", stdout);
            term_cell(stdout, names && names[i] ? names[i] : "-", (int)wname);
            fputs("  ", stdout);
        }
        printf("%11d  %8s  %10s  %10s  %5" PRIu64 "\n", op->parallelism, mp, ws,
               fmt_iec(os->state_bytes, b1, sizeof b1), os->file_refs);
        if (subtasks) {
            for (uint32_t j = 0; j < op->n_subtasks; j++) {
                const sp_subtask_t *st = &op->subtasks[j];
                if (st->finished) {
                    printf("    subtask %-5d finished\n", st->index);
                } else if (m->version == 0) {
                    printf("    subtask %-5d %zu serialized bytes (Flink 1.1 Java serialization)\n", st->index,
                           st->v0_state.len);
                } else {
                    printf("    subtask %-5d operator %s / %s, keyed %s / %s", st->index,
                           st->managed_operator.n ? short_tag(st->managed_operator.items[0]) : "-",
                           st->raw_operator.n ? short_tag(st->raw_operator.items[0]) : "-",
                           short_tag(st->managed_keyed), short_tag(st->raw_keyed));
                    if (st->n_input_channels || st->n_output_channels)
                        printf(", channels %u in / %u out", st->n_input_channels, st->n_output_channels);
                    printf("\n");
                }
            }
        }
    }
    for (uint32_t i = 0; uids && names && i < m->n_operators; i++) {
        free(uids[i]);
        free(names[i]);
    }
    free(uids);
    free(names);
    if (files) {
        printf("\n%-9s  %12s  %-32s  %7s  %-25s  %s\n", "KIND", "BYTES", "OPERATOR ID", "SUBTASK", "SLOT", "PATH");
        sp_meta_visit_refs(s->meta, human_file, c);
        if (sum->ref_count[SP_REF_RELATIVE] + sum->ref_count[SP_REF_ABSOLUTE] + sum->ref_count[SP_REF_SEGMENT] +
                sum->ref_count[SP_REF_INLINE] == 0)
            printf("(no file references: all state is inline or there is none)\n");
    }
}

int cmd_inspect(int argc, char **argv)
{
    bool json = false, files = false, subtasks = false;
    const cli_option_t opts[] = {
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object (schema in man sp-inspect), every reference listed"},
        {"files", 'f', OPT_FLAG, &files, NULL, "list every file reference"},
        {"subtasks", 's', OPT_FLAG, &subtasks, NULL, "show each subtask's state handles"},
        {0},
    };
    const cli_command_t *cmd = command_find("inspect");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, n ? "give exactly one snapshot" : "missing snapshot (a directory or its _metadata file)");
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    ictx_t c;
    memset(&c, 0, sizeof c);
    sp_error_t err;
    sp_error_clear(&err);
    sp_status_t s = sp_snapshot_open(argv[0], 0, &c.snap, &err);
    if (s)
        return report_error("inspect", &err, json);
    s = sp_summarize(c.snap, &c.sum, &err);
    if (s) {
        sp_snapshot_close(c.snap);
        return report_error("inspect", &err, json);
    }
    if (json)
        render_json(&c, subtasks);
    else
        render_human(&c, files, subtasks);
    sp_summary_free(&c.sum);
    sp_snapshot_close(c.snap);
    if (fflush(stdout) != 0)
        return EXIT_STORAGE;
    return 0;
}
