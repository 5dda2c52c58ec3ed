/*
 * metadata_encode.c - the mirror image of metadata_decode.c: writes a model
 * in its own version.  For an unchanged decoded model the output equals the
 * input byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handles.h"

#define TRY(x) do { sp_status_t s_ = (x); if (s_) return s_; } while (0)

static sp_status_t write_master_states(wr_t *w, const sp_metadata_t *m)
{
    TRY(wr_i32(w, (int32_t)m->n_master_states));
    for (uint32_t i = 0; i < m->n_master_states; i++) {
        const sp_master_state_t *ms = &m->master_states[i];
        if (ms->name.len > 65535)
            return wr_fail(w, "master_states.name", "string exceeds 65535 bytes");
        size_t plen = 4 + 2 + (size_t)ms->name.len + 4 + ms->data.len;
        if (plen > INT32_MAX)
            return wr_fail(w, "master_states.data", "master state larger than 2 GiB");
        TRY(wr_i32(w, (int32_t)SP_META_MASTER_STATE_MAGIC));
        TRY(wr_i32(w, (int32_t)plen));
        TRY(wr_i32(w, ms->hook_version));
        TRY(wr_utf(w, ms->name, "master_states.name"));
        TRY(wr_i32(w, (int32_t)ms->data.len));
        TRY(wr_raw(w, ms->data.ptr, ms->data.len));
    }
    return SP_OK;
}

static sp_status_t write_list(wr_t *w, const sp_handle_list_t *l)
{
    TRY(wr_i32(w, (int32_t)l->n));
    for (uint32_t i = 0; i < l->n; i++)
        TRY(handle_write(w, l->items[i]));
    return SP_OK;
}

static sp_status_t write_optional(wr_t *w, const sp_handle_list_t *l, const char *field)
{
    if (l->n > 1)
        return wr_fail(w, field, "metadata version %d holds at most one handle here, found %u", w->version, l->n);
    TRY(wr_i32(w, (int32_t)l->n));
    return l->n ? handle_write(w, l->items[0]) : SP_OK;
}

static sp_status_t write_channels(wr_t *w, uint32_t n, const sp_channel_handle_t *v)
{
    TRY(wr_i32(w, (int32_t)n));
    for (uint32_t i = 0; i < n; i++)
        TRY(channel_write(w, &v[i]));
    return SP_OK;
}

static sp_status_t write_subtask(wr_t *w, const sp_subtask_t *st)
{
    if (st->index < 0)
        return wr_fail(w, "subtasks.index", "subtask index %d is negative", st->index);
    if (st->finished) {
        if (w->version < 3)
            return wr_fail(w, "subtasks.finished", "finished subtasks need metadata version 3 or later");
        return wr_i32(w, -st->index - 1);
    }
    TRY(wr_i32(w, st->index));
    switch (w->version) {
    case 0:
        if (st->v0_null) {
            TRY(wr_i32(w, -1));
        } else {
            if (st->v0_state.len > INT32_MAX)
                return wr_fail(w, "subtasks.state", "state larger than 2 GiB");
            TRY(wr_i32(w, (int32_t)st->v0_state.len));
            TRY(wr_raw(w, st->v0_state.ptr, st->v0_state.len));
        }
        TRY(wr_i64(w, st->v0_state_size));
        return wr_i64(w, st->v0_duration);
    case 1:
        TRY(wr_i64(w, st->duration));
        TRY(write_list(w, &st->legacy));
        TRY(write_list(w, &st->managed_operator));
        TRY(write_list(w, &st->raw_operator));
        TRY(handle_write(w, st->managed_keyed));
        return handle_write(w, st->raw_keyed);
    case 2:
        TRY(wr_i64(w, st->duration));
        TRY(write_optional(w, &st->legacy, "subtasks.legacy_operator_state"));
        TRY(write_optional(w, &st->managed_operator, "subtasks.managed_operator_state"));
        TRY(write_optional(w, &st->raw_operator, "subtasks.raw_operator_state"));
        TRY(handle_write(w, st->managed_keyed));
        return handle_write(w, st->raw_keyed);
    default:
        if (st->legacy.n)
            return wr_fail(w, "subtasks.legacy_operator_state",
                           "legacy operator state cannot be written in metadata version %d", w->version);
        TRY(write_optional(w, &st->managed_operator, "subtasks.managed_operator_state"));
        TRY(write_optional(w, &st->raw_operator, "subtasks.raw_operator_state"));
        TRY(handle_write(w, st->managed_keyed));
        TRY(handle_write(w, st->raw_keyed));
        TRY(write_channels(w, st->n_input_channels, st->input_channels));
        TRY(write_channels(w, st->n_output_channels, st->output_channels));
        if (w->version >= 7) {
            TRY(wr_u8(w, st->v7_marker));
            if (st->v7_marker == 1)
                TRY(wr_i64(w, st->v7_ref_checkpoint_id));
        }
        return SP_OK;
    }
}

static sp_status_t write_operator(wr_t *w, const sp_operator_t *op)
{
    if (w->version >= 5) {
        TRY(wr_utf(w, op->name, "operators.name"));
        TRY(wr_utf(w, op->uid, "operators.uid"));
    }
    TRY(wr_raw(w, op->id, 16));
    TRY(wr_i32(w, op->parallelism));
    if (w->version >= 1)
        TRY(wr_i32(w, op->max_parallelism));
    if (w->version == 1 || w->version == 2)
        TRY(wr_i32(w, op->chain_length));
    if (w->version >= 3) {
        if (op->coordinator && op->coordinator->tag != SP_TAG_BYTE_STREAM)
            return wr_fail(w, "operators.coordinator_state", "coordinator state must be inline bytes (tag 1), found tag %d",
                           op->coordinator->tag);
        TRY(handle_write(w, op->coordinator));
        if (op->fully_finished) {
            if (op->coordinator)
                return wr_fail(w, "operators.coordinator_state",
                               "a fully finished operator must not have coordinator state");
            return wr_i32(w, -1);
        }
    } else if (op->fully_finished) {
        return wr_fail(w, "operators.fully_finished", "fully finished operators need metadata version 3 or later");
    }
    TRY(wr_i32(w, (int32_t)op->n_subtasks));
    for (uint32_t i = 0; i < op->n_subtasks; i++)
        TRY(write_subtask(w, &op->subtasks[i]));
    if (w->version == 0)
        TRY(wr_i32(w, 0)); /* no key-group states */
    return SP_OK;
}

sp_status_t sp_meta_encode(const sp_metadata_t *m, uint8_t **out_buf, size_t *out_len, sp_error_t *err)
{
    *out_buf = NULL;
    *out_len = 0;
    sp_error_clear(err);
    if (m->version < 0 || m->version > SP_META_MAX_VERSION)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "metadata_version", "unknown metadata version %d",
                            m->version);
    wr_t w;
    memset(&w, 0, sizeof w);
    w.version = m->version;
    w.channel_without_subtask_index = m->channel_without_subtask_index;
    w.err = err;
    sp_status_t s = wr_i32(&w, (int32_t)SP_META_MAGIC);
    if (!s) s = wr_i32(&w, m->version);
    if (!s) s = wr_i64(&w, m->checkpoint_id);
    if (!s && m->version >= 2)
        s = write_master_states(&w, m);
    else if (!s && m->n_master_states)
        s = wr_fail(&w, "master_states", "master states need metadata version 2 or later");
    if (!s) s = wr_i32(&w, (int32_t)m->n_operators);
    for (uint32_t i = 0; !s && i < m->n_operators; i++) {
        s = write_operator(&w, &m->operators[i]);
        if (s && err) {
            /* name the operator in the failing field: prefix "operators[i]." */
            char prefix[32];
            size_t k = (size_t)snprintf(prefix, sizeof prefix, "operators[%u].", i);
            size_t n = strlen(err->field);
            if (n + k >= sizeof err->field)
                n = sizeof err->field - k - 1;
            memmove(err->field + k, err->field, n);
            memcpy(err->field, prefix, k);
            err->field[k + n] = '\0';
        }
    }
    if (!s && m->version >= 4) {
        static const uint8_t null_trailer[5] = {0xAC, 0xED, 0x00, 0x05, 0x70};
        /* A model built from scratch without a trailer gets Java null:
         * Flink restores it (the restored properties are nullable). */
        if (m->has_trailer && m->trailer.len)
            s = wr_raw(&w, m->trailer.ptr, m->trailer.len);
        else
            s = wr_raw(&w, null_trailer, sizeof null_trailer);
    }
    if (s) {
        free(w.buf);
        return s;
    }
    *out_buf = w.buf;
    *out_len = w.len;
    return SP_OK;
}
