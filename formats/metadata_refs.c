/*
 * metadata_refs.c - walk every leaf reference of a model (files, segments,
 * inline bytes), depth-first in serialisation order.  Used by inspect,
 * verify, relocate and dispose; callers may rewrite paths through ref->handle.
 */
#include <string.h>

#include "sp_metadata.h"

typedef struct walk {
    sp_metadata_t *m;
    sp_ref_visitor_t visit;
    void *user;
    sp_ref_t ref;      /* template: operator, subtask, slot */
    int depth;
} walk_t;

static int emit(walk_t *w, sp_ref_kind_t kind, sp_str_t path, int64_t size, int64_t seg_off, sp_handle_t *h)
{
    sp_ref_t r = w->ref;
    r.kind = kind;
    r.path = path;
    r.size = size;
    r.segment_offset = seg_off;
    r.handle = h;
    return w->visit(&r, w->user);
}

static int walk_handle(walk_t *w, sp_handle_t *h, int parent_tag);

static int walk_list(walk_t *w, uint32_t n, sp_handle_t **v, int parent_tag)
{
    for (uint32_t i = 0; i < n; i++) {
        int s = walk_handle(w, v[i], parent_tag);
        if (s)
            return s;
    }
    return 0;
}

static int walk_paths(walk_t *w, uint32_t n, sp_handle_path_t *v, int parent_tag)
{
    for (uint32_t i = 0; i < n; i++) {
        int s = walk_handle(w, v[i].handle, parent_tag);
        if (s)
            return s;
    }
    return 0;
}

static int walk_handle(walk_t *w, sp_handle_t *h, int parent_tag)
{
    if (!h || w->depth > 64)
        return 0;
    int s = 0;
    int saved_parent = w->ref.parent_tag;
    w->ref.parent_tag = parent_tag;
    w->depth++;
    switch (h->tag) {
    case SP_TAG_BYTE_STREAM:
        s = emit(w, SP_REF_INLINE, h->u.byte_stream.name, (int64_t)h->u.byte_stream.data.len, 0, h);
        break;
    case SP_TAG_FILE:
        s = emit(w, SP_REF_ABSOLUTE, h->u.file.path, h->u.file.size, 0, h);
        break;
    case SP_TAG_RELATIVE:
        s = emit(w, SP_REF_RELATIVE, h->u.relative.path, h->u.relative.size, 0, h);
        break;
    case SP_TAG_SEGMENT:
        s = emit(w, SP_REF_SEGMENT, h->u.segment.path, h->u.segment.size, h->u.segment.start_pos, h);
        break;
    case SP_TAG_KEY_GROUPS:
    case SP_TAG_KEY_GROUPS_SAVEPOINT:
    case SP_TAG_KEY_GROUPS_V2:
        s = walk_handle(w, h->u.key_groups.delegate, h->tag);
        break;
    case SP_TAG_OPERATOR_STREAM:
        s = walk_handle(w, h->u.operator_stream.delegate, h->tag);
        break;
    case SP_TAG_SEGMENT_OPERATOR_STREAM:
        if (h->u.operator_stream.task_owned_dir.len)
            s = emit(w, SP_REF_DIRECTORY, h->u.operator_stream.task_owned_dir, -1, 0, h);
        if (!s && h->u.operator_stream.shared_dir.len)
            s = emit(w, SP_REF_DIRECTORY, h->u.operator_stream.shared_dir, -1, 0, h);
        if (!s)
            s = walk_handle(w, h->u.operator_stream.delegate, h->tag);
        break;
    case SP_TAG_INCREMENTAL:
    case SP_TAG_INCREMENTAL_V2:
        s = walk_handle(w, h->u.incremental.meta, h->tag);
        if (!s)
            s = walk_paths(w, h->u.incremental.n_shared, h->u.incremental.shared, h->tag);
        if (!s)
            s = walk_paths(w, h->u.incremental.n_private, h->u.incremental.private_state, h->tag);
        break;
    case SP_TAG_CHANGELOG:
    case SP_TAG_CHANGELOG_V2:
        s = walk_list(w, h->u.changelog.n_materialized, h->u.changelog.materialized, h->tag);
        if (!s)
            s = walk_list(w, h->u.changelog.n_non_materialized, h->u.changelog.non_materialized, h->tag);
        break;
    case SP_TAG_CHANGELOG_BYTES: {
        int64_t total = 0;
        for (uint32_t i = 0; i < h->u.changelog_bytes.n_changes; i++)
            total += (int64_t)h->u.changelog_bytes.changes[i].bytes.len;
        sp_str_t none = {NULL, 0};
        s = emit(w, SP_REF_INLINE, none, total, 0, h);
        break;
    }
    case SP_TAG_CHANGELOG_FILE:
    case SP_TAG_CHANGELOG_FILE_V2:
        for (uint32_t i = 0; !s && i < h->u.changelog_file.n_handles; i++)
            s = walk_handle(w, h->u.changelog_file.handles[i].handle, h->tag);
        break;
    default:
        break;
    }
    w->depth--;
    w->ref.parent_tag = saved_parent;
    return s;
}

static int walk_channels(walk_t *w, uint32_t n, sp_channel_handle_t *v)
{
    for (uint32_t i = 0; i < n; i++) {
        int s = walk_handle(w, v[i].delegate, 0);
        if (s)
            return s;
    }
    return 0;
}

static int walk_subtask(walk_t *w, sp_subtask_t *st)
{
    int s = 0;
    w->ref.subtask_index = st->index;
    if (st->finished)
        return 0;
    if (w->m->version == 0 && !st->v0_null) {
        sp_str_t none = {NULL, 0};
        w->ref.slot = SP_SLOT_V0_STATE;
        s = emit(w, SP_REF_INLINE, none, (int64_t)st->v0_state.len, 0, NULL);
        if (s)
            return s;
    }
    w->ref.slot = SP_SLOT_LEGACY;
    if ((s = walk_list(w, st->legacy.n, st->legacy.items, 0)))
        return s;
    w->ref.slot = SP_SLOT_MANAGED_OPERATOR;
    if ((s = walk_list(w, st->managed_operator.n, st->managed_operator.items, 0)))
        return s;
    w->ref.slot = SP_SLOT_RAW_OPERATOR;
    if ((s = walk_list(w, st->raw_operator.n, st->raw_operator.items, 0)))
        return s;
    w->ref.slot = SP_SLOT_MANAGED_KEYED;
    if ((s = walk_handle(w, st->managed_keyed, 0)))
        return s;
    w->ref.slot = SP_SLOT_RAW_KEYED;
    if ((s = walk_handle(w, st->raw_keyed, 0)))
        return s;
    w->ref.slot = SP_SLOT_INPUT_CHANNEL;
    if ((s = walk_channels(w, st->n_input_channels, st->input_channels)))
        return s;
    w->ref.slot = SP_SLOT_OUTPUT_CHANNEL;
    return walk_channels(w, st->n_output_channels, st->output_channels);
}

int sp_meta_visit_refs(sp_metadata_t *m, sp_ref_visitor_t visit, void *user)
{
    walk_t w;
    memset(&w, 0, sizeof w);
    w.m = m;
    w.visit = visit;
    w.user = user;
    int s = 0;
    for (uint32_t i = 0; !s && i < m->n_operators; i++) {
        sp_operator_t *op = &m->operators[i];
        w.ref.operator_index = i;
        w.ref.subtask_index = -1;
        w.ref.slot = SP_SLOT_COORDINATOR;
        s = walk_handle(&w, op->coordinator, 0);
        for (uint32_t j = 0; !s && j < op->n_subtasks; j++)
            s = walk_subtask(&w, &op->subtasks[j]);
    }
    return s;
}
