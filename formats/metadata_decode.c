/*
 * metadata_decode.c - `_metadata` structure of every version (0-7):
 * header, master states, operator states, subtask states, trailer.
 * Handle bodies are in handles.c.  Layouts: metadata-format.md sections 3-5, 12.
 */
#include <string.h>

#include "arena.h"
#include "handles.h"
#include "sp_properties.h"

#define TRY(x) do { sp_status_t s_ = (x); if (s_) return s_; } while (0)

static sp_status_t read_master_states(rd_t *r)
{
    sp_metadata_t *m = r->m;
    uint32_t n;
    TRY(rd_count(r, "num_master_states", 8, &n));
    m->master_states = rd_alloc(r, n, sizeof *m->master_states);
    if (n && !m->master_states)
        return SP_ERR_NOMEM;
    m->n_master_states = n;
    for (uint32_t i = 0; i < n; i++) {
        sp_master_state_t *ms = &m->master_states[i];
        rd_push(r, "master_states", i);
        size_t at = r->pos;
        int32_t magic, plen;
        TRY(rd_i32(r, "magic", &magic));
        if ((uint32_t)magic != SP_META_MASTER_STATE_MAGIC)
            return rd_fail_at(r, SP_ERR_MALFORMED, at, "magic", "expected master state magic 0xC96B1696, found 0x%08X",
                              (uint32_t)magic);
        at = r->pos;
        TRY(rd_i32(r, "payload_length", &plen));
        if (plen <= 0 || (size_t)plen > rd_left(r))
            return rd_fail_at(r, SP_ERR_MALFORMED, at, "payload_length",
                              "expected a length between 1 and the %zu bytes that remain, found %d", rd_left(r), plen);
        size_t end = r->pos + (size_t)plen;
        /* Parse the payload inside its declared length only. */
        size_t saved_len = r->len;
        r->len = end;
        TRY(rd_i32(r, "hook_version", &ms->hook_version));
        TRY(rd_utf(r, "name", &ms->name));
        uint32_t dlen;
        TRY(rd_count(r, "data_length", 1, &dlen));
        ms->data.len = dlen;
        TRY(rd_bytes(r, dlen, "data", &ms->data.ptr));
        r->len = saved_len;
        if (r->pos != end)
            return rd_fail_at(r, SP_ERR_MALFORMED, r->pos, "payload",
                              "%zu unexpected bytes after the master state data", end - r->pos);
        rd_pop(r);
    }
    return SP_OK;
}

/* A V1 list of handles, one per chained operator. */
static sp_status_t read_list(rd_t *r, const char *name, hpos_t pos, sp_handle_list_t *out)
{
    TRY(rd_count(r, name, 1, &out->n));
    out->items = rd_alloc(r, out->n, sizeof *out->items);
    if (out->n && !out->items)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < out->n; i++) {
        rd_push(r, name, i);
        sp_status_t s = handle_read(r, pos, &out->items[i]);
        rd_pop(r);
        if (s)
            return s;
    }
    return SP_OK;
}

/* A V2+ singleton slot: i32 presence flag, then the handle. */
static sp_status_t read_optional(rd_t *r, const char *name, hpos_t pos, sp_handle_list_t *out)
{
    bool present;
    rd_push(r, name, -1);
    sp_status_t s = rd_flag32(r, "present", &present);
    if (!s && present) {
        out->items = rd_alloc(r, 1, sizeof *out->items);
        if (!out->items)
            s = SP_ERR_NOMEM;
        else {
            out->n = 1;
            s = handle_read(r, pos, &out->items[0]);
        }
    }
    rd_pop(r);
    return s;
}

static sp_status_t read_slot(rd_t *r, const char *name, hpos_t pos, sp_handle_t **out)
{
    rd_push(r, name, -1);
    sp_status_t s = handle_read(r, pos, out);
    rd_pop(r);
    return s;
}

static sp_status_t read_channels(rd_t *r, const char *name, bool input, uint32_t *n_out,
                                 sp_channel_handle_t **out)
{
    uint32_t n;
    TRY(rd_count(r, name, 1, &n));
    sp_channel_handle_t *v = rd_alloc(r, n, sizeof *v);
    if (n && !v)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++) {
        rd_push(r, name, i);
        TRY(channel_read(r, input, &v[i]));
        rd_pop(r);
    }
    *n_out = n;
    *out = v;
    return SP_OK;
}

static sp_status_t read_subtask_v0(rd_t *r, sp_subtask_t *st)
{
    size_t at = r->pos;
    int32_t len;
    TRY(rd_i32(r, "state_length", &len));
    if (len < -1 || (len >= 0 && (size_t)len > rd_left(r)))
        return rd_fail_at(r, SP_ERR_MALFORMED, at, "state_length",
                          "expected -1 (null) or a length up to the %zu bytes that remain, found %d", rd_left(r), len);
    st->v0_null = len == -1;
    if (len >= 0) {
        st->v0_state.len = (size_t)len;
        TRY(rd_bytes(r, (size_t)len, "state", &st->v0_state.ptr));
    }
    TRY(rd_i64(r, "state_size", &st->v0_state_size));
    return rd_i64(r, "duration", &st->v0_duration);
}

static sp_status_t read_subtask_v1(rd_t *r, sp_subtask_t *st)
{
    TRY(rd_i64(r, "duration", &st->duration));
    TRY(read_list(r, "legacy_operator_state", HPOS_STREAM, &st->legacy));
    TRY(read_list(r, "managed_operator_state", HPOS_OPERATOR, &st->managed_operator));
    TRY(read_list(r, "raw_operator_state", HPOS_OPERATOR, &st->raw_operator));
    TRY(read_slot(r, "managed_keyed_state", HPOS_KEYED, &st->managed_keyed));
    return read_slot(r, "raw_keyed_state", HPOS_KEYED, &st->raw_keyed);
}

static sp_status_t read_subtask_v2(rd_t *r, sp_subtask_t *st)
{
    TRY(rd_i64(r, "duration", &st->duration));
    TRY(read_optional(r, "legacy_operator_state", HPOS_STREAM, &st->legacy));
    TRY(read_optional(r, "managed_operator_state", HPOS_OPERATOR, &st->managed_operator));
    TRY(read_optional(r, "raw_operator_state", HPOS_OPERATOR, &st->raw_operator));
    TRY(read_slot(r, "managed_keyed_state", HPOS_KEYED, &st->managed_keyed));
    return read_slot(r, "raw_keyed_state", HPOS_KEYED, &st->raw_keyed);
}

static sp_status_t read_subtask_v3(rd_t *r, sp_subtask_t *st)
{
    TRY(read_optional(r, "managed_operator_state", HPOS_OPERATOR, &st->managed_operator));
    TRY(read_optional(r, "raw_operator_state", HPOS_OPERATOR, &st->raw_operator));
    TRY(read_slot(r, "managed_keyed_state", HPOS_KEYED, &st->managed_keyed));
    TRY(read_slot(r, "raw_keyed_state", HPOS_KEYED, &st->raw_keyed));
    TRY(read_channels(r, "input_channel_state", true, &st->n_input_channels, &st->input_channels));
    TRY(read_channels(r, "result_subpartition_state", false, &st->n_output_channels, &st->output_channels));
    if (r->version >= 7) {
        TRY(rd_u8(r, "ref_checkpoint_marker", &st->v7_marker));
        if (st->v7_marker == 1)
            TRY(rd_i64(r, "ref_checkpoint_id", &st->v7_ref_checkpoint_id));
    }
    return SP_OK;
}

static sp_status_t read_subtasks(rd_t *r, sp_operator_t *op)
{
    size_t at = r->pos;
    int32_t n;
    TRY(rd_i32(r, "num_subtask_states", &n));
    if (n < 0 && r->version >= 3) {
        /* FLIP-147: a fully finished operator, nothing more is stored. */
        if (n != -1)
            return rd_fail_at(r, SP_ERR_MALFORMED, at, "num_subtask_states",
                              "expected a count >= 0 or -1 (fully finished operator), found %d", n);
        if (op->coordinator)
            return rd_fail_at(r, SP_ERR_MALFORMED, at, "num_subtask_states",
                              "a fully finished operator must not have coordinator state");
        op->fully_finished = true;
        return SP_OK;
    }
    /* minimum bytes per subtask: index + the smallest body (V3+: a finished marker is just the index) */
    static const size_t min_body[SP_META_MAX_VERSION + 1] = {24, 26, 26, 4, 4, 4, 4, 4};
    if (n < 0 || (size_t)n > rd_left(r) / min_body[r->version])
        return rd_fail_at(r, SP_ERR_MALFORMED, at, "num_subtask_states",
                          n < 0 ? "expected a count >= 0, found %d" : "count %d does not fit in the bytes that remain",
                          n);
    op->n_subtasks = (uint32_t)n;
    op->subtasks = rd_alloc(r, (size_t)n, sizeof *op->subtasks);
    if (n && !op->subtasks)
        return SP_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) {
        sp_subtask_t *st = &op->subtasks[i];
        rd_push(r, "subtasks", i);
        at = r->pos;
        int32_t idx;
        TRY(rd_i32(r, "index", &idx));
        if (idx < 0) {
            if (r->version < 3)
                return rd_fail_at(r, SP_ERR_MALFORMED, at, "index",
                                  "expected a subtask index >= 0, found %d (finished markers need version 3+)", idx);
            st->finished = true;
            st->index = -(idx + 1);
            rd_pop(r);
            continue;
        }
        st->index = idx;
        switch (r->version) {
        case 0: TRY(read_subtask_v0(r, st)); break;
        case 1: TRY(read_subtask_v1(r, st)); break;
        case 2: TRY(read_subtask_v2(r, st)); break;
        default: TRY(read_subtask_v3(r, st)); break;
        }
        rd_pop(r);
    }
    return SP_OK;
}

static sp_status_t read_operator(rd_t *r, sp_operator_t *op)
{
    if (r->version >= 5) {
        TRY(rd_utf(r, "name", &op->name));
        TRY(rd_utf(r, "uid", &op->uid));
    }
    const uint8_t *id;
    TRY(rd_bytes(r, 16, "operator_id", &id));
    memcpy(op->id, id, 16);
    TRY(rd_i32(r, "parallelism", &op->parallelism));
    op->max_parallelism = -1;
    if (r->version >= 1)
        TRY(rd_i32(r, "max_parallelism", &op->max_parallelism));
    if (r->version == 1 || r->version == 2)
        TRY(rd_i32(r, "chain_length", &op->chain_length));
    if (r->version >= 3)
        TRY(read_slot(r, "coordinator_state", HPOS_COORDINATOR, &op->coordinator));
    TRY(read_subtasks(r, op));
    if (r->version == 0) {
        size_t at = r->pos;
        int32_t kv;
        TRY(rd_i32(r, "num_kv_states", &kv));
        if (kv != 0)
            return rd_fail_at(r, SP_ERR_UNSUPPORTED, at, "num_kv_states",
                              "expected 0 key-group states in a Flink 1.1 savepoint, found %d", kv);
    }
    return SP_OK;
}

static sp_status_t read_body(rd_t *r)
{
    sp_metadata_t *m = r->m;
    size_t at = r->pos;
    TRY(rd_i64(r, "checkpoint_id", &m->checkpoint_id));
    if (m->checkpoint_id < 0)
        return rd_fail_at(r, SP_ERR_MALFORMED, at, "checkpoint_id", "expected a checkpoint ID >= 0, found %lld",
                          (long long)m->checkpoint_id);
    if (r->version >= 2)
        TRY(read_master_states(r));
    /* smallest operator: V0 id+par+count+kv = 28; V2 id + 4 ints = 32; V3 id + 2 ints + tag + count = 29 */
    TRY(rd_count(r, "num_operator_states", 24, &m->n_operators));
    m->operators = rd_alloc(r, m->n_operators, sizeof *m->operators);
    if (m->n_operators && !m->operators)
        return SP_ERR_NOMEM;
    for (uint32_t i = 0; i < m->n_operators; i++) {
        rd_push(r, "operators", i);
        TRY(read_operator(r, &m->operators[i]));
        rd_pop(r);
    }
    if (r->version >= 4) {
        sp_properties_t props;
        size_t tat = r->pos;
        m->has_trailer = true;
        m->trailer.ptr = r->buf + r->pos;
        m->trailer.len = rd_left(r);
        if (m->trailer.len < 5 || memcmp(m->trailer.ptr, "\xAC\xED\x00\x05", 4) != 0)
            return rd_fail_at(r, SP_ERR_MALFORMED, tat, "properties",
                              "expected the Java-serialized checkpoint properties (AC ED 00 05 ...) after the last "
                              "operator state, found %zu byte%s%s",
                              m->trailer.len, m->trailer.len == 1 ? "" : "s",
                              m->trailer.len >= 4 ? " with another header" : "");
        /* The trailer must be exactly one serialized object ending at EOF:
         * that is what catches a file truncated inside it. */
        sp_status_t s = sp_properties_decode(m->trailer.ptr, m->trailer.len, tat, &props, r->err);
        if (s)
            return s;
        r->pos = r->len;
    } else if (rd_left(r) != 0) {
        return rd_fail_at(r, SP_ERR_MALFORMED, r->pos, "end_of_file",
                          "expected end of file after the last operator state, found %zu more bytes", rd_left(r));
    }
    return SP_OK;
}

static sp_status_t decode_once(const uint8_t *buf, size_t len, const sp_decode_limits_t *limits,
                               bool channel_without_subtask_index, sp_metadata_t **out, sp_error_t *err)
{
    rd_t r;
    memset(&r, 0, sizeof r);
    r.buf = buf;
    r.len = len;
    r.err = err;
    r.max_depth = limits && limits->max_depth ? limits->max_depth : 16;
    r.channel_without_subtask_index = channel_without_subtask_index;

    int32_t magic, version;
    if (rd_i32(&r, "magic", &magic))
        return SP_ERR_MALFORMED;
    if ((uint32_t)magic != SP_META_MAGIC)
        return rd_fail_at(&r, SP_ERR_MALFORMED, 0, "magic",
                          "expected the Flink metadata magic 0x4960672D, found 0x%08X (not a Flink checkpoint or "
                          "savepoint metadata file, or a Flink 1.0 savepoint)",
                          (uint32_t)magic);
    if (rd_i32(&r, "version", &version))
        return SP_ERR_MALFORMED;
    if (version < 0 || version > SP_META_MAX_VERSION)
        return rd_fail_at(&r, SP_ERR_UNSUPPORTED, 4, "version",
                          "unknown metadata version %d (this sp reads versions 0 to %d)", version, SP_META_MAX_VERSION);
    r.version = version;
    r.m = sp_meta_new(version);
    if (!r.m)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    r.m->has_trailer = false;
    r.m->channel_without_subtask_index = channel_without_subtask_index;
    sp_status_t s = read_body(&r);
    if (s) {
        sp_meta_free(r.m);
        return s;
    }
    *out = r.m;
    return SP_OK;
}

sp_status_t sp_meta_decode(const uint8_t *buf, size_t len, const sp_decode_limits_t *limits, sp_metadata_t **out,
                           sp_error_t *err)
{
    *out = NULL;
    sp_error_clear(err);
    sp_status_t s = decode_once(buf, len, limits, false, out, err);
    if (s == SP_OK || s == SP_ERR_NOMEM || len < 8 || buf[7] != 3)
        return s;
    /* Flink 1.11 wrote V3 channel handles without subtaskIndex and there is
     * no marker for it: accept that layout only if the whole file then
     * parses to the end (metadata-format.md 6.5.1). */
    sp_error_t retry_err;
    sp_error_clear(&retry_err);
    if (decode_once(buf, len, limits, true, out, &retry_err) == SP_OK) {
        sp_error_clear(err);
        return SP_OK;
    }
    *out = NULL;
    return s;
}
