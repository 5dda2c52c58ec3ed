/*
 * handles.c - decode and encode of every state-handle tag (0-17) and of
 * channel-state handles, mirror images of each other.  Layouts:
 * metadata-format.md sections 6.2 - 6.5 (Flink MetadataV2V3SerializerBase,
 * MetadataV3Serializer / ChannelStateHandleSerializerV1/V2).
 */
#include "handles.h"

#include <string.h>

#define TRY(x) do { sp_status_t s_ = (x); if (s_) return s_; } while (0)

/* ------------------------------------------------------------------ */
/* decoding                                                            */
/* ------------------------------------------------------------------ */

static bool tag_legal(hpos_t pos, int tag)
{
    switch (pos) {
    case HPOS_STREAM:
        return tag == 0 || tag == 1 || tag == 2 || tag == 3 || tag == 6 || tag == 15 || tag == 16;
    case HPOS_KEYED:
        return tag == 0 || tag == 3 || tag == 5 || (tag >= 7 && tag <= 14);
    case HPOS_OPERATOR:
        return tag == 0 || tag == 4 || tag == 17;
    case HPOS_COORDINATOR:
        return tag == 0 || tag == 1;
    }
    return false;
}

static const char *pos_name(hpos_t pos)
{
    switch (pos) {
    case HPOS_STREAM: return "stream";
    case HPOS_KEYED: return "keyed";
    case HPOS_OPERATOR: return "operator";
    case HPOS_COORDINATOR: return "coordinator";
    }
    return "?";
}

static sp_status_t read_offsets(rd_t *r, const char *leaf, uint32_t n, const uint8_t **out)
{
    if ((size_t)n > rd_left(r) / 8)
        return rd_fail_at(r, SP_ERR_MALFORMED, r->pos, leaf,
                          "%u offsets need %zu bytes, only %zu remain", n, (size_t)n * 8, rd_left(r));
    return rd_bytes(r, (size_t)n * 8, leaf, out);
}

static sp_status_t read_key_group_range(rd_t *r, int32_t *start, int32_t *num)
{
    TRY(rd_i32(r, "start_key_group", start));
    size_t at = r->pos;
    TRY(rd_i32(r, "num_key_groups", num));
    if (*num < 0)
        return rd_fail_at(r, SP_ERR_MALFORMED, at, "num_key_groups", "expected >= 0, found %d", *num);
    return SP_OK;
}

static sp_status_t read_child(rd_t *r, const char *name, long index, hpos_t pos, sp_handle_t **out)
{
    rd_push(r, name, index);
    sp_status_t s = handle_read(r, pos, out);
    rd_pop(r);
    return s;
}

static sp_status_t read_key_groups(rd_t *r, sp_handle_t *h)
{
    TRY(read_key_group_range(r, &h->u.key_groups.start_key_group, &h->u.key_groups.num_key_groups));
    TRY(read_offsets(r, "offsets", (uint32_t)h->u.key_groups.num_key_groups, &h->u.key_groups.offsets));
    TRY(read_child(r, "delegate", -1, HPOS_STREAM, &h->u.key_groups.delegate));
    if (h->tag == SP_TAG_KEY_GROUPS_V2)
        TRY(rd_utf(r, "handle_id", &h->u.key_groups.handle_id));
    return SP_OK;
}

static sp_status_t read_op_states(rd_t *r, sp_handle_t *h)
{
    uint32_t n;
    /* each entry: utf(2) + mode(1) + count(4) */
    TRY(rd_count(r, "num_states", 7, &n));
    sp_op_state_entry_t *e = rd_alloc(r, n, sizeof *e);
    if (n && !e)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        rd_push(r, "states", i);
        TRY(rd_utf(r, "name", &e[i].name));
        size_t at = r->pos;
        uint8_t mode;
        TRY(rd_u8(r, "distribution_mode", &mode));
        e[i].distribution_mode = (int8_t)mode;
        if (mode > 2)
            return rd_fail_at(r, SP_ERR_MALFORMED, at, "distribution_mode",
                              "expected 0 (SPLIT_DISTRIBUTE), 1 (UNION) or 2 (BROADCAST), found %d", (int8_t)mode);
        TRY(rd_count(r, "num_offsets", 8, &e[i].n_offsets));
        TRY(read_offsets(r, "offsets", e[i].n_offsets, &e[i].offsets));
        rd_pop(r);
    }
    h->u.operator_stream.n_states = n;
    h->u.operator_stream.states = e;
    return SP_OK;
}

static sp_status_t read_operator_stream(rd_t *r, sp_handle_t *h)
{
    TRY(read_op_states(r, h));
    if (h->tag == SP_TAG_SEGMENT_OPERATOR_STREAM) {
        TRY(rd_utf(r, "task_owned_dir", &h->u.operator_stream.task_owned_dir));
        TRY(rd_utf(r, "shared_dir", &h->u.operator_stream.shared_dir));
        size_t at = r->pos;
        TRY(rd_u8(r, "is_empty", &h->u.operator_stream.is_empty));
        if (h->u.operator_stream.is_empty > 1)
            return rd_fail_at(r, SP_ERR_MALFORMED, at, "is_empty", "expected boolean 0 or 1, found %u",
                              h->u.operator_stream.is_empty);
        size_t dat = r->pos;
        TRY(read_child(r, "delegate", -1, HPOS_STREAM, &h->u.operator_stream.delegate));
        const sp_handle_t *d = h->u.operator_stream.delegate;
        if (!d || (d->tag != SP_TAG_SEGMENT && d->tag != SP_TAG_EMPTY_SEGMENT))
            return rd_fail_at(r, SP_ERR_MALFORMED, dat, "delegate.tag",
                              "file-merging operator state needs a segment handle (tag 15 or 16), found tag %d",
                              d ? d->tag : 0);
        return SP_OK;
    }
    return read_child(r, "delegate", -1, HPOS_STREAM, &h->u.operator_stream.delegate);
}

static sp_status_t read_handle_paths(rd_t *r, const char *name, uint32_t *n_out, sp_handle_path_t **out)
{
    uint32_t n;
    TRY(rd_count(r, name, 3, &n)); /* utf(2) + tag(1) */
    sp_handle_path_t *e = rd_alloc(r, n, sizeof *e);
    if (n && !e)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        rd_push(r, name, i);
        TRY(rd_utf(r, "local_path", &e[i].local_path));
        TRY(read_child(r, "handle", -1, HPOS_STREAM, &e[i].handle));
        rd_pop(r);
    }
    *n_out = n;
    *out = e;
    return SP_OK;
}

static sp_status_t read_incremental(rd_t *r, sp_handle_t *h)
{
    __typeof__(h->u.incremental) *x = &h->u.incremental;
    TRY(rd_i64(r, "checkpoint_id", &x->checkpoint_id));
    TRY(rd_utf(r, "backend_id", &x->backend_id));
    TRY(read_key_group_range(r, &x->start_key_group, &x->num_key_groups));
    x->checkpointed_size = -1;
    if (h->tag == SP_TAG_INCREMENTAL_V2)
        TRY(rd_i64(r, "checkpointed_size", &x->checkpointed_size));
    TRY(read_child(r, "meta", -1, HPOS_STREAM, &x->meta));
    TRY(read_handle_paths(r, "shared_state", &x->n_shared, &x->shared));
    TRY(read_handle_paths(r, "private_state", &x->n_private, &x->private_state));
    if (h->tag == SP_TAG_INCREMENTAL_V2)
        TRY(rd_utf(r, "handle_id", &x->handle_id));
    return SP_OK;
}

static sp_status_t read_handle_array(rd_t *r, const char *name, hpos_t pos, uint32_t *n_out, sp_handle_t ***out)
{
    uint32_t n;
    TRY(rd_count(r, name, 1, &n));
    sp_handle_t **v = rd_alloc(r, n, sizeof *v);
    if (n && !v)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        TRY(read_child(r, name, i, pos, &v[i]));
    *n_out = n;
    *out = v;
    return SP_OK;
}

static sp_status_t read_changelog(rd_t *r, sp_handle_t *h)
{
    __typeof__(h->u.changelog) *x = &h->u.changelog;
    TRY(read_key_group_range(r, &x->start_key_group, &x->num_key_groups));
    TRY(rd_i64(r, "checkpointed_size", &x->checkpointed_size));
    TRY(read_handle_array(r, "materialized", HPOS_KEYED, &x->n_materialized, &x->materialized));
    TRY(read_handle_array(r, "non_materialized", HPOS_KEYED, &x->n_non_materialized, &x->non_materialized));
    TRY(rd_i64(r, "materialization_id", &x->materialization_id));
    x->checkpoint_id = x->materialization_id;
    if (h->tag == SP_TAG_CHANGELOG_V2)
        TRY(rd_i64(r, "checkpoint_id", &x->checkpoint_id));
    return rd_utf(r, "handle_id", &x->handle_id);
}

static sp_status_t read_changelog_bytes(rd_t *r, sp_handle_t *h)
{
    __typeof__(h->u.changelog_bytes) *x = &h->u.changelog_bytes;
    TRY(read_key_group_range(r, &x->start_key_group, &x->num_key_groups));
    TRY(rd_i64(r, "from", &x->from));
    TRY(rd_i64(r, "to", &x->to));
    TRY(rd_count(r, "num_changes", 8, &x->n_changes));
    x->changes = rd_alloc(r, x->n_changes, sizeof *x->changes);
    if (x->n_changes && !x->changes)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < x->n_changes; i++) {
        rd_push(r, "changes", i);
        TRY(rd_i32(r, "key_group", &x->changes[i].key_group));
        uint32_t len;
        TRY(rd_count(r, "length", 1, &len));
        TRY(rd_bytes(r, len, "bytes", &x->changes[i].bytes.ptr));
        x->changes[i].bytes.len = len;
        rd_pop(r);
    }
    return rd_utf(r, "handle_id", &x->handle_id);
}

static sp_status_t read_changelog_file(rd_t *r, sp_handle_t *h)
{
    __typeof__(h->u.changelog_file) *x = &h->u.changelog_file;
    TRY(read_key_group_range(r, &x->start_key_group, &x->num_key_groups));
    TRY(rd_count(r, "num_handles", 9, &x->n_handles));
    x->handles = rd_alloc(r, x->n_handles, sizeof *x->handles);
    if (x->n_handles && !x->handles)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < x->n_handles; i++) {
        rd_push(r, "handles", i);
        TRY(rd_i64(r, "offset", &x->handles[i].offset));
        TRY(read_child(r, "handle", -1, HPOS_STREAM, &x->handles[i].handle));
        rd_pop(r);
    }
    TRY(rd_i64(r, "state_size", &x->state_size));
    TRY(rd_i64(r, "checkpointed_size", &x->checkpointed_size));
    TRY(rd_utf(r, "handle_id", &x->handle_id));
    if (h->tag == SP_TAG_CHANGELOG_FILE_V2)
        TRY(rd_utf(r, "storage_id", &x->storage_id));
    return SP_OK;
}

static sp_status_t read_body(rd_t *r, sp_handle_t *h)
{
    switch (h->tag) {
    case SP_TAG_BYTE_STREAM: {
        TRY(rd_utf(r, "name", &h->u.byte_stream.name));
        uint32_t n;
        TRY(rd_count(r, "data_length", 1, &n));
        h->u.byte_stream.data.len = n;
        return rd_bytes(r, n, "data", &h->u.byte_stream.data.ptr);
    }
    case SP_TAG_FILE:
        TRY(rd_i64(r, "size", &h->u.file.size));
        return rd_utf(r, "path", &h->u.file.path);
    case SP_TAG_RELATIVE:
        TRY(rd_utf(r, "path", &h->u.relative.path));
        return rd_i64(r, "size", &h->u.relative.size);
    case SP_TAG_KEY_GROUPS:
    case SP_TAG_KEY_GROUPS_SAVEPOINT:
    case SP_TAG_KEY_GROUPS_V2:
        return read_key_groups(r, h);
    case SP_TAG_OPERATOR_STREAM:
    case SP_TAG_SEGMENT_OPERATOR_STREAM:
        return read_operator_stream(r, h);
    case SP_TAG_INCREMENTAL:
    case SP_TAG_INCREMENTAL_V2:
        return read_incremental(r, h);
    case SP_TAG_CHANGELOG:
    case SP_TAG_CHANGELOG_V2:
        return read_changelog(r, h);
    case SP_TAG_CHANGELOG_BYTES:
        return read_changelog_bytes(r, h);
    case SP_TAG_CHANGELOG_FILE:
    case SP_TAG_CHANGELOG_FILE_V2:
        return read_changelog_file(r, h);
    case SP_TAG_SEGMENT:
        TRY(rd_i64(r, "start_pos", &h->u.segment.start_pos));
        TRY(rd_i64(r, "size", &h->u.segment.size));
        TRY(rd_i32(r, "scope", &h->u.segment.scope));
        TRY(rd_utf(r, "path", &h->u.segment.path));
        return rd_utf(r, "logical_file_id", &h->u.segment.logical_file_id);
    case SP_TAG_EMPTY_SEGMENT:
        return SP_OK;
    }
    return rd_fail_at(r, SP_ERR_UNSUPPORTED, h->offset, "tag", "unknown state handle tag %d", h->tag);
}

sp_status_t handle_read(rd_t *r, hpos_t pos, sp_handle_t **out)
{
    size_t at = r->pos;
    uint8_t tag;
    *out = NULL;
    TRY(rd_u8(r, "tag", &tag));
    if (!tag_legal(pos, tag)) {
        const char *name = sp_tag_name(tag);
        return rd_fail_at(r, name ? SP_ERR_MALFORMED : SP_ERR_UNSUPPORTED, at, "tag",
                          "%s state handle tag %u (%s) is not allowed in a %s position", name ? "" : "unknown", tag,
                          name ? name : "not a Flink tag", pos_name(pos));
    }
    if (tag == SP_TAG_NULL)
        return SP_OK;
    if (++r->depth > r->max_depth)
        return rd_fail_at(r, SP_ERR_MALFORMED, at, "tag", "state handles nested deeper than %zu levels",
                          r->max_depth);
    sp_handle_t *h = rd_alloc(r, 1, sizeof *h);
    if (!h)
        return SP_ERR_NOMEM;
    h->tag = tag;
    h->offset = at;
    sp_status_t s = read_body(r, h);
    r->depth--;
    if (s)
        return s;
    *out = h;
    return SP_OK;
}

static sp_status_t read_channel_v1_body(rd_t *r, sp_channel_handle_t *c, bool with_subtask)
{
    if (with_subtask)
        TRY(rd_i32(r, "subtask_index", &c->subtask_index));
    else
        c->subtask_index = -1;
    TRY(rd_i32(r, "info_a", &c->info_a));
    TRY(rd_i32(r, "info_b", &c->info_b));
    TRY(rd_count(r, "num_offsets", 8, &c->n_offsets));
    TRY(read_offsets(r, "offsets", c->n_offsets, &c->offsets));
    TRY(rd_i64(r, "state_size", &c->state_size));
    return read_child(r, "delegate", -1, HPOS_STREAM, &c->delegate);
}

sp_status_t channel_read(rd_t *r, bool input, sp_channel_handle_t *c)
{
    memset(c, 0, sizeof *c);
    if (r->version < 6)
        return read_channel_v1_body(r, c, !r->channel_without_subtask_index);
    size_t at = r->pos;
    TRY(rd_u8(r, "type", &c->type));
    bool ok = input ? (c->type == 1 || c->type == 3) : (c->type == 2 || c->type == 4);
    if (!ok)
        return rd_fail_at(r, c->type >= 1 && c->type <= 4 ? SP_ERR_MALFORMED : SP_ERR_UNSUPPORTED, at, "type",
                          "expected channel handle type %s, found %u",
                          input ? "1 (input channel) or 3 (merged input)"
                                : "2 (result subpartition) or 4 (merged result subpartition)",
                          c->type);
    if (c->type <= 2)
        return read_channel_v1_body(r, c, true);
    TRY(rd_i32(r, "subtask_index", &c->subtask_index));
    TRY(rd_i64(r, "state_size", &c->state_size));
    TRY(read_child(r, "delegate", -1, HPOS_STREAM, &c->delegate));
    uint32_t n;
    TRY(rd_count(r, "merged_length", 1, &n));
    c->merged.len = n;
    return rd_bytes(r, n, "merged", &c->merged.ptr);
}

/* ------------------------------------------------------------------ */
/* encoding                                                            */
/* ------------------------------------------------------------------ */

static sp_status_t write_key_group_range(wr_t *w, int32_t start, int32_t num)
{
    TRY(wr_i32(w, start));
    return wr_i32(w, num);
}

static sp_status_t write_op_states(wr_t *w, const sp_handle_t *h)
{
    const __typeof__(h->u.operator_stream) *x = &h->u.operator_stream;
    TRY(wr_i32(w, (int32_t)x->n_states));
    for (uint32_t i = 0; i < x->n_states; i++) {
        const sp_op_state_entry_t *e = &x->states[i];
        TRY(wr_utf(w, e->name, "operator_state.name"));
        TRY(wr_u8(w, (uint8_t)e->distribution_mode));
        TRY(wr_i32(w, (int32_t)e->n_offsets));
        TRY(wr_be64_array(w, e->offsets, e->n_offsets, "operator_state.offsets"));
    }
    return SP_OK;
}

static sp_status_t write_handle_paths(wr_t *w, uint32_t n, const sp_handle_path_t *v)
{
    TRY(wr_i32(w, (int32_t)n));
    for (uint32_t i = 0; i < n; i++) {
        TRY(wr_utf(w, v[i].local_path, "local_path"));
        TRY(handle_write(w, v[i].handle));
    }
    return SP_OK;
}

static sp_status_t write_handle_array(wr_t *w, uint32_t n, sp_handle_t *const *v)
{
    TRY(wr_i32(w, (int32_t)n));
    for (uint32_t i = 0; i < n; i++)
        TRY(handle_write(w, v[i]));
    return SP_OK;
}

static sp_status_t write_body(wr_t *w, const sp_handle_t *h)
{
    switch (h->tag) {
    case SP_TAG_BYTE_STREAM:
        if (h->u.byte_stream.data.len > INT32_MAX)
            return wr_fail(w, "byte_stream.data", "inline state larger than 2 GiB");
        TRY(wr_utf(w, h->u.byte_stream.name, "byte_stream.name"));
        TRY(wr_i32(w, (int32_t)h->u.byte_stream.data.len));
        return wr_raw(w, h->u.byte_stream.data.ptr, h->u.byte_stream.data.len);
    case SP_TAG_FILE:
        TRY(wr_i64(w, h->u.file.size));
        return wr_utf(w, h->u.file.path, "file.path");
    case SP_TAG_RELATIVE:
        TRY(wr_utf(w, h->u.relative.path, "relative.path"));
        return wr_i64(w, h->u.relative.size);
    case SP_TAG_KEY_GROUPS:
    case SP_TAG_KEY_GROUPS_SAVEPOINT:
    case SP_TAG_KEY_GROUPS_V2: {
        const __typeof__(h->u.key_groups) *x = &h->u.key_groups;
        if (x->num_key_groups < 0)
            return wr_fail(w, "key_groups.num_key_groups", "negative key-group count %d", x->num_key_groups);
        TRY(write_key_group_range(w, x->start_key_group, x->num_key_groups));
        TRY(wr_be64_array(w, x->offsets, (uint32_t)x->num_key_groups, "key_groups.offsets"));
        TRY(handle_write(w, x->delegate));
        if (h->tag == SP_TAG_KEY_GROUPS_V2)
            TRY(wr_utf(w, x->handle_id, "key_groups.handle_id"));
        return SP_OK;
    }
    case SP_TAG_OPERATOR_STREAM:
        TRY(write_op_states(w, h));
        return handle_write(w, h->u.operator_stream.delegate);
    case SP_TAG_SEGMENT_OPERATOR_STREAM:
        TRY(write_op_states(w, h));
        TRY(wr_utf(w, h->u.operator_stream.task_owned_dir, "task_owned_dir"));
        TRY(wr_utf(w, h->u.operator_stream.shared_dir, "shared_dir"));
        TRY(wr_u8(w, h->u.operator_stream.is_empty ? 1 : 0));
        return handle_write(w, h->u.operator_stream.delegate);
    case SP_TAG_INCREMENTAL:
    case SP_TAG_INCREMENTAL_V2: {
        const __typeof__(h->u.incremental) *x = &h->u.incremental;
        TRY(wr_i64(w, x->checkpoint_id));
        TRY(wr_utf(w, x->backend_id, "incremental.backend_id"));
        TRY(write_key_group_range(w, x->start_key_group, x->num_key_groups));
        if (h->tag == SP_TAG_INCREMENTAL_V2)
            TRY(wr_i64(w, x->checkpointed_size));
        TRY(handle_write(w, x->meta));
        TRY(write_handle_paths(w, x->n_shared, x->shared));
        TRY(write_handle_paths(w, x->n_private, x->private_state));
        if (h->tag == SP_TAG_INCREMENTAL_V2)
            TRY(wr_utf(w, x->handle_id, "incremental.handle_id"));
        return SP_OK;
    }
    case SP_TAG_CHANGELOG:
    case SP_TAG_CHANGELOG_V2: {
        const __typeof__(h->u.changelog) *x = &h->u.changelog;
        TRY(write_key_group_range(w, x->start_key_group, x->num_key_groups));
        TRY(wr_i64(w, x->checkpointed_size));
        TRY(write_handle_array(w, x->n_materialized, x->materialized));
        TRY(write_handle_array(w, x->n_non_materialized, x->non_materialized));
        TRY(wr_i64(w, x->materialization_id));
        if (h->tag == SP_TAG_CHANGELOG_V2)
            TRY(wr_i64(w, x->checkpoint_id));
        return wr_utf(w, x->handle_id, "changelog.handle_id");
    }
    case SP_TAG_CHANGELOG_BYTES: {
        const __typeof__(h->u.changelog_bytes) *x = &h->u.changelog_bytes;
        TRY(write_key_group_range(w, x->start_key_group, x->num_key_groups));
        TRY(wr_i64(w, x->from));
        TRY(wr_i64(w, x->to));
        TRY(wr_i32(w, (int32_t)x->n_changes));
        for (uint32_t i = 0; i < x->n_changes; i++) {
            TRY(wr_i32(w, x->changes[i].key_group));
            TRY(wr_i32(w, (int32_t)x->changes[i].bytes.len));
            TRY(wr_raw(w, x->changes[i].bytes.ptr, x->changes[i].bytes.len));
        }
        return wr_utf(w, x->handle_id, "changelog_bytes.handle_id");
    }
    case SP_TAG_CHANGELOG_FILE:
    case SP_TAG_CHANGELOG_FILE_V2: {
        const __typeof__(h->u.changelog_file) *x = &h->u.changelog_file;
        TRY(write_key_group_range(w, x->start_key_group, x->num_key_groups));
        TRY(wr_i32(w, (int32_t)x->n_handles));
        for (uint32_t i = 0; i < x->n_handles; i++) {
            TRY(wr_i64(w, x->handles[i].offset));
            TRY(handle_write(w, x->handles[i].handle));
        }
        TRY(wr_i64(w, x->state_size));
        TRY(wr_i64(w, x->checkpointed_size));
        TRY(wr_utf(w, x->handle_id, "changelog_file.handle_id"));
        if (h->tag == SP_TAG_CHANGELOG_FILE_V2)
            TRY(wr_utf(w, x->storage_id, "changelog_file.storage_id"));
        return SP_OK;
    }
    case SP_TAG_SEGMENT:
        TRY(wr_i64(w, h->u.segment.start_pos));
        TRY(wr_i64(w, h->u.segment.size));
        TRY(wr_i32(w, h->u.segment.scope));
        TRY(wr_utf(w, h->u.segment.path, "segment.path"));
        return wr_utf(w, h->u.segment.logical_file_id, "segment.logical_file_id");
    case SP_TAG_EMPTY_SEGMENT:
        return SP_OK;
    }
    return wr_fail(w, "tag", "unknown state handle tag %d", h->tag);
}

sp_status_t handle_write(wr_t *w, const sp_handle_t *h)
{
    if (!h)
        return wr_u8(w, SP_TAG_NULL);
    if (h->tag == SP_TAG_NULL)
        return wr_u8(w, SP_TAG_NULL);
    if (++w->depth > 64)
        return wr_fail(w, "tag", "state handles nested deeper than 64 levels");
    TRY(wr_u8(w, h->tag));
    sp_status_t s = write_body(w, h);
    w->depth--;
    return s;
}

static sp_status_t write_channel_v1_body(wr_t *w, const sp_channel_handle_t *c, bool with_subtask)
{
    if (with_subtask)
        TRY(wr_i32(w, c->subtask_index));
    TRY(wr_i32(w, c->info_a));
    TRY(wr_i32(w, c->info_b));
    TRY(wr_i32(w, (int32_t)c->n_offsets));
    TRY(wr_be64_array(w, c->offsets, c->n_offsets, "channel.offsets"));
    TRY(wr_i64(w, c->state_size));
    return handle_write(w, c->delegate);
}

sp_status_t channel_write(wr_t *w, const sp_channel_handle_t *c)
{
    if (w->version < 6) {
        if (c->type > 2)
            return wr_fail(w, "channel.type", "merged channel handles need metadata version 6 or later");
        return write_channel_v1_body(w, c, !w->channel_without_subtask_index);
    }
    if (c->type < 1 || c->type > 4)
        return wr_fail(w, "channel.type", "metadata version %d needs channel handle type 1-4, found %u", w->version,
                       c->type);
    TRY(wr_u8(w, c->type));
    if (c->type <= 2)
        return write_channel_v1_body(w, c, true);
    TRY(wr_i32(w, c->subtask_index));
    TRY(wr_i64(w, c->state_size));
    TRY(handle_write(w, c->delegate));
    TRY(wr_i32(w, (int32_t)c->merged.len));
    return wr_raw(w, c->merged.ptr, c->merged.len);
}
