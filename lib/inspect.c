/* Snapshot summary for `sp inspect`. */
#define _GNU_SOURCE
#include "sp_inspect.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "strmap.h"

typedef struct acc {
    const sp_snapshot_t *snap;
    sp_summary_t *s;
    bool saw_savepoint_handle;  /* tag 7: KeyGroupsSavepointStateHandle */
    bool saw_changelog;         /* tags 8-10, 13, 14: changelog backend = checkpoint */
    bool saw_shared_dir;        /* an absolute path into a checkpoint's shared/ */
    strmap_t channel_files;     /* channel-state files already counted */
} acc_t;

/* Unaligned-checkpoint channel state: many channel handles share one file
 * (of one subtask or several); the file's bytes count once in the total. */
static bool repeated_channel_file(acc_t *a, const sp_ref_t *ref)
{
    if ((ref->slot != SP_SLOT_INPUT_CHANNEL && ref->slot != SP_SLOT_OUTPUT_CHANNEL) || ref->kind == SP_REF_INLINE)
        return false;
    char key[4096];
    snprintf(key, sizeof key, "%d:%.*s", ref->kind, (int)ref->path.len, (const char *)ref->path.ptr);
    uint32_t existing = UINT32_MAX;
    strmap_put(&a->channel_files, key, 0, &existing);
    return existing != UINT32_MAX;
}

static int add_ref(const sp_ref_t *ref, void *user)
{
    acc_t *a = user;
    sp_summary_t *s = a->s;
    uint64_t bytes = ref->size > 0 ? (uint64_t)ref->size : 0;
    s->ref_count[ref->kind]++;
    s->ref_bytes[ref->kind] += bytes;
    if (ref->kind == SP_REF_ABSOLUTE || ref->kind == SP_REF_SEGMENT || ref->kind == SP_REF_DIRECTORY)
        s->blockers++;
    if (ref->slot == SP_SLOT_INPUT_CHANNEL || ref->slot == SP_SLOT_OUTPUT_CHANNEL)
        s->channel_state_handles++;
    if (ref->parent_tag == SP_TAG_KEY_GROUPS_SAVEPOINT)
        a->saw_savepoint_handle = true;
    if (ref->parent_tag == SP_TAG_CHANGELOG || ref->parent_tag == SP_TAG_CHANGELOG_V2 ||
        (ref->handle && ref->handle->tag == SP_TAG_CHANGELOG_BYTES))
        a->saw_changelog = true;
    if (ref->kind == SP_REF_ABSOLUTE && ref->path.len > 8 && memmem(ref->path.ptr, ref->path.len, "/shared/", 8))
        a->saw_shared_dir = true;
    if (ref->operator_index < s->n_operators && ref->kind != SP_REF_DIRECTORY) {
        sp_op_summary_t *o = &s->operators[ref->operator_index];
        o->state_bytes += bytes;
        if (ref->kind == SP_REF_INLINE)
            o->inline_bytes += bytes;
        else
            o->file_refs++;
    }
    if (ref->kind != SP_REF_DIRECTORY && !repeated_channel_file(a, ref))
        s->total_state_bytes += bytes;
    return 0;
}

static bool subtask_has_state(const sp_subtask_t *st, int version)
{
    if (st->finished)
        return false;
    if (version == 0)
        return !st->v0_null;
    for (uint32_t i = 0; i < st->legacy.n; i++)
        if (st->legacy.items[i])
            return true;
    for (uint32_t i = 0; i < st->managed_operator.n; i++)
        if (st->managed_operator.items[i])
            return true;
    for (uint32_t i = 0; i < st->raw_operator.n; i++)
        if (st->raw_operator.items[i])
            return true;
    return st->managed_keyed || st->raw_keyed || st->n_input_channels || st->n_output_channels;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void decide_kind(acc_t *a)
{
    sp_summary_t *s = a->s;
    const sp_snapshot_t *snap = a->snap;
    if (snap->has_properties && snap->properties.kind != SP_KIND_UNKNOWN) {
        s->kind = snap->properties.kind;
        s->kind_source = SP_KIND_FROM_PROPERTIES;
        if (s->kind == SP_KIND_SAVEPOINT && snap->properties.format != SP_FORMAT_UNKNOWN) {
            s->format = snap->properties.format;
            s->format_source = SP_KIND_FROM_PROPERTIES;
        }
        return;
    }
    /* Without a trailer only some handle types tell (metadata-format.md 9.5, 11). */
    if (a->saw_savepoint_handle) {
        s->kind = SP_KIND_SAVEPOINT;
        s->kind_source = SP_KIND_FROM_HANDLES;
        /* tag 7 is canonical, except RocksDB native savepoints of Flink 1.15 (V3) */
        if (snap->meta->version != 3) {
            s->format = SP_FORMAT_CANONICAL;
            s->format_source = SP_KIND_FROM_HANDLES;
        }
        return;
    }
    if (a->saw_changelog || a->saw_shared_dir) {
        s->kind = SP_KIND_CHECKPOINT;
        s->kind_source = SP_KIND_FROM_HANDLES;
        return;
    }
    const char *b = base_name(snap->dir);
    if (strncmp(b, "chk-", 4) == 0) {
        s->kind = SP_KIND_CHECKPOINT;
        s->kind_source = SP_KIND_FROM_DIRECTORY;
    } else if (strncmp(b, "savepoint-", 10) == 0 || snap->meta->version == 0) {
        /* Flink 1.1 (V0) had no retained checkpoints: its metadata files are savepoints */
        s->kind = SP_KIND_SAVEPOINT;
        s->kind_source = snap->meta->version == 0 ? SP_KIND_FROM_HANDLES : SP_KIND_FROM_DIRECTORY;
    }
    if (s->kind == SP_KIND_SAVEPOINT && snap->meta->version <= 2) {
        /* native savepoints exist from Flink 1.15 (V3) on */
        s->format = SP_FORMAT_CANONICAL;
        s->format_source = s->kind_source;
    }
}

sp_status_t sp_summarize(const sp_snapshot_t *snap, sp_summary_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    sp_metadata_t *m = snap->meta;
    out->n_operators = m->n_operators;
    out->operators = calloc(m->n_operators ? m->n_operators : 1, sizeof *out->operators);
    if (!out->operators)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    for (uint32_t i = 0; i < m->n_operators; i++)
        for (uint32_t j = 0; j < m->operators[i].n_subtasks; j++) {
            const sp_subtask_t *st = &m->operators[i].subtasks[j];
            if (st->finished)
                out->operators[i].finished_subtasks++;
            else if (subtask_has_state(st, m->version))
                out->operators[i].subtasks_with_state++;
        }
    acc_t a = {snap, out, false, false, false, {0}};
    sp_meta_visit_refs(m, add_ref, &a);
    strmap_free(&a.channel_files);
    out->relocatable = out->blockers == 0;
    decide_kind(&a);
    return SP_OK;
}

void sp_summary_free(sp_summary_t *s)
{
    if (s) {
        free(s->operators);
        s->operators = NULL;
    }
}

const char *sp_kind_name(sp_snapshot_kind_t k)
{
    return k == SP_KIND_CHECKPOINT ? "checkpoint" : k == SP_KIND_SAVEPOINT ? "savepoint" : "unknown";
}

const char *sp_format_name(sp_savepoint_format_t f)
{
    return f == SP_FORMAT_CANONICAL ? "canonical" : f == SP_FORMAT_NATIVE ? "native" : "unknown";
}

const char *sp_kind_source_name(sp_kind_source_t s)
{
    switch (s) {
    case SP_KIND_FROM_PROPERTIES: return "properties";
    case SP_KIND_FROM_HANDLES: return "state_handles";
    case SP_KIND_FROM_DIRECTORY: return "directory_name";
    default: return "none";
    }
}

const char *sp_ref_kind_name(sp_ref_kind_t k)
{
    static const char *const n[] = {"relative", "absolute", "segment", "inline", "directory"};
    return (unsigned)k < 5 ? n[k] : "unknown";
}

const char *sp_ref_slot_name(sp_ref_slot_t s)
{
    static const char *const names[] = {"coordinator_state", "legacy_operator_state", "managed_operator_state",
                                        "raw_operator_state", "managed_keyed_state", "raw_keyed_state",
                                        "input_channel_state", "result_subpartition_state", "state"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "state";
}
