/*
 * test_metadata_json.c - the JSON form of `_metadata` (sp_meta_to_json /
 * sp_meta_from_json) must be lossless: import(export(m)) encodes to the
 * bytes of m.  TAP output.
 *
 *   test_metadata_json [CORPUS_ROOT]
 *
 * Part 1 builds models by hand (every handle tag 0-17, every channel handle
 * type, the V0/V1/V2/V3/V5/V7 specifics, non-canonical strings, int64 values
 * beyond 2^53) and checks encode -> JSON -> model -> encode.  Part 2 checks
 * that hostile or hand-edited JSON is refused with the JSON path of the
 * problem, and never crashes.  Part 3 round-trips every `_metadata` of
 * CORPUS_ROOT/flink/ byte for byte.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sp_metadata.h"
#include "sp_metadata_json.h"

static int n_tests;
static int n_failed;

static bool ok(bool cond, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sok %d - ", cond ? "" : "not ", ++n_tests);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!cond)
        n_failed++;
    fflush(stdout);
    return cond;
}

static void diag_err(const char *what, const sp_error_t *e)
{
    printf("# %s: %s [%s] %s\n", what, sp_status_name(e->code), e->field, e->message);
}

/* ------------------------------------------------------------------ */
/* model building helpers                                              */
/* ------------------------------------------------------------------ */

static sp_str_t S(sp_metadata_t *m, const char *s) { return sp_meta_str(m, s, strlen(s)); }
static sp_str_t RAW(sp_metadata_t *m, const char *s, size_t n) { return sp_meta_str(m, s, n); }
static sp_blob_t B(sp_metadata_t *m, const char *s, size_t n) { return sp_meta_blob(m, s, n); }
static sp_handle_t *H(sp_metadata_t *m, int tag) { return sp_meta_new_handle(m, tag); }

/* n int64 values as big-endian bytes in the arena */
static const uint8_t *OFFS(sp_metadata_t *m, size_t n, ...)
{
    uint8_t *p = sp_meta_alloc(m, n * 8 + 1);
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)va_arg(ap, int64_t);
        for (int k = 0; k < 8; k++)
            p[8 * i + (size_t)k] = (uint8_t)(v >> (56 - 8 * k));
    }
    va_end(ap);
    return p;
}

static void ID(uint8_t id[16], unsigned seed)
{
    for (int i = 0; i < 16; i++)
        id[i] = (uint8_t)(seed * 31 + (unsigned)i * 7);
}

static sp_handle_t *byte_stream(sp_metadata_t *m, const char *name, const char *data)
{
    sp_handle_t *h = H(m, SP_TAG_BYTE_STREAM);
    h->u.byte_stream.name = S(m, name);
    h->u.byte_stream.data = B(m, data, strlen(data));
    return h;
}

static sp_handle_t *file_h(sp_metadata_t *m, const char *path, int64_t size)
{
    sp_handle_t *h = H(m, SP_TAG_FILE);
    h->u.file.path = S(m, path);
    h->u.file.size = size;
    return h;
}

static sp_handle_t *relative(sp_metadata_t *m, const char *path, int64_t size)
{
    sp_handle_t *h = H(m, SP_TAG_RELATIVE);
    h->u.relative.path = S(m, path);
    h->u.relative.size = size;
    return h;
}

static sp_handle_t *key_groups(sp_metadata_t *m, int tag, sp_handle_t *delegate)
{
    sp_handle_t *h = H(m, tag);
    h->u.key_groups.start_key_group = 32;
    h->u.key_groups.num_key_groups = 4;
    h->u.key_groups.offsets = OFFS(m, 4, (int64_t)0, (int64_t)0, INT64_MAX, INT64_MIN);
    h->u.key_groups.delegate = delegate;
    if (tag == SP_TAG_KEY_GROUPS_V2)
        h->u.key_groups.handle_id = S(m, "5f0e8a7c-0b1d-4d3a-9a63-1c0b5e4c2f11");
    return h;
}

static sp_handle_t *operator_stream(sp_metadata_t *m, int tag, sp_handle_t *delegate)
{
    sp_handle_t *h = H(m, tag);
    h->u.operator_stream.n_states = 3;
    h->u.operator_stream.states = sp_meta_alloc(m, 3 * sizeof(sp_op_state_entry_t));
    const char *names[3] = {"split-state", "union-state", "broadcast-state"};
    for (int i = 0; i < 3; i++) {
        sp_op_state_entry_t *e = &h->u.operator_stream.states[i];
        e->name = S(m, names[i]);
        e->distribution_mode = (int8_t)i;
        e->n_offsets = (uint32_t)i;
        e->offsets = OFFS(m, (size_t)i, (int64_t)17, (int64_t)4096);
    }
    h->u.operator_stream.delegate = delegate;
    if (tag == SP_TAG_SEGMENT_OPERATOR_STREAM) {
        h->u.operator_stream.task_owned_dir = S(m, "s3://bucket/ckpt/job/taskowned/op_0_2_");
        h->u.operator_stream.shared_dir = S(m, "s3://bucket/ckpt/job/shared/op_0_2_");
    }
    return h;
}

static sp_handle_path_t *paths(sp_metadata_t *m, uint32_t n)
{
    return sp_meta_alloc(m, n * sizeof(sp_handle_path_t) + 1);
}

static sp_handle_t *incremental(sp_metadata_t *m, int tag)
{
    sp_handle_t *h = H(m, tag);
    h->u.incremental.checkpoint_id = 42;
    h->u.incremental.backend_id = S(m, "8a8f1c4e-2f55-4e1b-8c33-0b9a1d2e3f40");
    h->u.incremental.start_key_group = 0;
    h->u.incremental.num_key_groups = 128;
    h->u.incremental.checkpointed_size = tag == SP_TAG_INCREMENTAL_V2 ? 123456789012LL : -1;
    h->u.incremental.meta = relative(m, "b1a0e7f2-3c4d-4e5f-8a9b-0c1d2e3f4a5b", 1024);
    h->u.incremental.n_shared = 2;
    h->u.incremental.shared = paths(m, 2);
    h->u.incremental.shared[0].local_path = S(m, "000042.sst");
    h->u.incremental.shared[0].handle = file_h(m, "s3://bucket/ckpt/job/shared/0f1e2d3c", 67108864);
    h->u.incremental.shared[1].local_path = S(m, "000043.sst");
    h->u.incremental.shared[1].handle = NULL;
    h->u.incremental.n_private = 2;
    h->u.incremental.private_state = paths(m, 2);
    h->u.incremental.private_state[0].local_path = S(m, "MANIFEST-000003");
    h->u.incremental.private_state[0].handle = byte_stream(m, "manifest", "\x01\x02\x03");
    h->u.incremental.private_state[1].local_path = S(m, "CURRENT");
    h->u.incremental.private_state[1].handle = relative(m, "c0ffee00-0000-4000-8000-000000000000", 16);
    if (tag == SP_TAG_INCREMENTAL_V2)
        h->u.incremental.handle_id = S(m, "11111111-2222-4333-8444-555555555555");
    return h;
}

static sp_handle_t *changelog_bytes(sp_metadata_t *m)
{
    sp_handle_t *h = H(m, SP_TAG_CHANGELOG_BYTES);
    h->u.changelog_bytes.start_key_group = 0;
    h->u.changelog_bytes.num_key_groups = 128;
    h->u.changelog_bytes.from = 0;
    h->u.changelog_bytes.to = INT64_MAX;
    h->u.changelog_bytes.n_changes = 2;
    h->u.changelog_bytes.changes = sp_meta_alloc(m, 2 * sizeof(sp_change_t));
    h->u.changelog_bytes.changes[0].key_group = -1; /* META_KEY_GROUP */
    h->u.changelog_bytes.changes[0].bytes = B(m, "meta\0data", 9);
    h->u.changelog_bytes.changes[1].key_group = 77;
    h->u.changelog_bytes.changes[1].bytes = B(m, "", 0);
    h->u.changelog_bytes.handle_id = S(m, "22222222-3333-4444-8555-666666666666");
    return h;
}

static sp_handle_t *changelog_file(sp_metadata_t *m, int tag)
{
    sp_handle_t *h = H(m, tag);
    h->u.changelog_file.start_key_group = 64;
    h->u.changelog_file.num_key_groups = 64;
    h->u.changelog_file.n_handles = 2;
    h->u.changelog_file.handles = sp_meta_alloc(m, 2 * sizeof(sp_offset_handle_t));
    h->u.changelog_file.handles[0].offset = 0;
    h->u.changelog_file.handles[0].handle = relative(m, "dstl-0001", 4096);
    h->u.changelog_file.handles[1].offset = 9007199254740993LL; /* 2^53 + 1 */
    h->u.changelog_file.handles[1].handle = file_h(m, "hdfs:///dstl/0002", -1);
    h->u.changelog_file.state_size = 8192;
    h->u.changelog_file.checkpointed_size = 4096;
    h->u.changelog_file.handle_id = S(m, "33333333-4444-4555-8666-777777777777");
    if (tag == SP_TAG_CHANGELOG_FILE_V2)
        h->u.changelog_file.storage_id = S(m, "filesystem");
    return h;
}

static sp_handle_t **handle_array(sp_metadata_t *m, uint32_t n)
{
    return sp_meta_alloc(m, n * sizeof(sp_handle_t *) + 1);
}

static sp_handle_t *changelog(sp_metadata_t *m, int tag)
{
    sp_handle_t *h = H(m, tag);
    h->u.changelog.start_key_group = 0;
    h->u.changelog.num_key_groups = 128;
    h->u.changelog.checkpointed_size = 5555;
    h->u.changelog.n_materialized = 2;
    h->u.changelog.materialized = handle_array(m, 2);
    h->u.changelog.materialized[0] = incremental(m, SP_TAG_INCREMENTAL_V2);
    h->u.changelog.materialized[1] = NULL;
    h->u.changelog.n_non_materialized = 3;
    h->u.changelog.non_materialized = handle_array(m, 3);
    h->u.changelog.non_materialized[0] = changelog_bytes(m);
    h->u.changelog.non_materialized[1] = changelog_file(m, SP_TAG_CHANGELOG_FILE);
    h->u.changelog.non_materialized[2] = changelog_file(m, SP_TAG_CHANGELOG_FILE_V2);
    h->u.changelog.materialization_id = 3;
    h->u.changelog.checkpoint_id = tag == SP_TAG_CHANGELOG_V2 ? 9 : 3;
    h->u.changelog.handle_id = S(m, "44444444-5555-4666-8777-888888888888");
    return h;
}

static sp_handle_t *segment(sp_metadata_t *m)
{
    sp_handle_t *h = H(m, SP_TAG_SEGMENT);
    h->u.segment.start_pos = 1LL << 60;
    h->u.segment.size = 4096;
    h->u.segment.scope = 1;
    h->u.segment.path = S(m, "s3://bucket/ckpt/job/shared/op_0_2_/merged-0001");
    h->u.segment.logical_file_id = S(m, "99999999-aaaa-4bbb-8ccc-dddddddddddd");
    return h;
}

static sp_handle_list_t list_of(sp_metadata_t *m, uint32_t n, ...)
{
    sp_handle_list_t l = {n, handle_array(m, n)};
    va_list ap;
    va_start(ap, n);
    for (uint32_t i = 0; i < n; i++)
        l.items[i] = va_arg(ap, sp_handle_t *);
    va_end(ap);
    return l;
}

static sp_operator_t *operators(sp_metadata_t *m, uint32_t n)
{
    m->n_operators = n;
    m->operators = sp_meta_alloc(m, n * sizeof(sp_operator_t));
    for (uint32_t i = 0; i < n; i++) {
        ID(m->operators[i].id, i + 1);
        m->operators[i].parallelism = 2;
        m->operators[i].max_parallelism = m->version == 0 ? -1 : 128;
        m->operators[i].chain_length = 1;
    }
    return m->operators;
}

static sp_subtask_t *subtasks(sp_metadata_t *m, sp_operator_t *op, uint32_t n)
{
    op->n_subtasks = n;
    op->subtasks = sp_meta_alloc(m, n * sizeof(sp_subtask_t));
    for (uint32_t i = 0; i < n; i++) {
        op->subtasks[i].index = (int32_t)i;
        op->subtasks[i].duration = -1;
    }
    return op->subtasks;
}

static sp_channel_handle_t *channels(sp_metadata_t *m, uint32_t n, const int *types)
{
    sp_channel_handle_t *c = sp_meta_alloc(m, n * sizeof *c + 1);
    for (uint32_t i = 0; i < n; i++) {
        c[i].type = (uint8_t)types[i];
        c[i].subtask_index = m->channel_without_subtask_index ? -1 : 1;
        c[i].state_size = 300 + i;
        c[i].delegate = relative(m, "3e1c2b4a-channel-state", 4096);
        if (types[i] <= 2) {
            c[i].info_a = 0;
            c[i].info_b = (int32_t)i;
            c[i].n_offsets = 2;
            c[i].offsets = OFFS(m, 2, (int64_t)0, (int64_t)150);
        } else {
            c[i].merged = B(m, "\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02", 12);
        }
    }
    return c;
}

/* ---- the models ---- */

static sp_metadata_t *model_v0(void)
{
    sp_metadata_t *m = sp_meta_new(0);
    m->checkpoint_id = 7;
    sp_operator_t *op = operators(m, 1);
    sp_subtask_t *s = subtasks(m, op, 2);
    s[0].v0_state = B(m, "\xAC\xED\x00\x05sr\x00\x10java.lang.Object", 25);
    s[0].v0_state_size = INT64_MAX;
    s[0].v0_duration = 12;
    s[1].index = 5;
    s[1].v0_null = true;
    s[1].v0_state_size = 0;
    s[1].v0_duration = INT64_MIN;
    return m;
}

static sp_metadata_t *model_v1(void)
{
    sp_metadata_t *m = sp_meta_new(1);
    m->checkpoint_id = 1;
    sp_operator_t *op = operators(m, 1);
    op->chain_length = 2;
    sp_subtask_t *s = subtasks(m, op, 2);
    s[0].legacy = list_of(m, 2, byte_stream(m, "legacy", "Checkpointed"), NULL);
    s[0].managed_operator = list_of(m, 2, operator_stream(m, SP_TAG_OPERATOR_STREAM, file_h(m, "file:/tmp/op", 99)), NULL);
    s[0].raw_operator = list_of(m, 2, NULL, NULL);
    s[0].managed_keyed = key_groups(m, SP_TAG_KEY_GROUPS, byte_stream(m, "kg", "keyed bytes"));
    /* subtask 1: empty lists */
    return m;
}

static sp_metadata_t *model_v2(void)
{
    sp_metadata_t *m = sp_meta_new(2);
    m->checkpoint_id = 3;
    m->n_master_states = 2;
    m->master_states = sp_meta_alloc(m, 2 * sizeof(sp_master_state_t));
    m->master_states[0].hook_version = 1;
    m->master_states[0].name = S(m, "org.example.Hook");
    m->master_states[0].data = B(m, "\x00\x01\x02\x03\x04\x05\x06\x07", 8);
    m->master_states[1].hook_version = -5;
    m->master_states[1].name = RAW(m, "lone \xED\xB0\x80", 8); /* lone low surrogate */
    m->master_states[1].data = B(m, "", 0);
    sp_operator_t *op = operators(m, 2);
    sp_subtask_t *s = subtasks(m, &op[0], 3);
    s[0].legacy = list_of(m, 1, byte_stream(m, "legacy", "x"));          /* flag 1 + handle */
    s[0].managed_operator = list_of(m, 1, NULL);                          /* flag 1 + tag 0 */
    s[0].managed_keyed = incremental(m, SP_TAG_INCREMENTAL);
    s[0].raw_keyed = key_groups(m, SP_TAG_KEY_GROUPS, key_groups(m, SP_TAG_KEY_GROUPS, file_h(m, "/abs", 5)));
    s[1].raw_operator = list_of(m, 1, operator_stream(m, SP_TAG_OPERATOR_STREAM, NULL));
    s[2].duration = 1234;
    subtasks(m, &op[1], 0);
    return m;
}

static sp_metadata_t *model_v3(void)
{
    static const int t0[] = {0, 0};
    sp_metadata_t *m = sp_meta_new(3);
    m->checkpoint_id = 11;
    m->channel_without_subtask_index = true; /* a Flink 1.11 file */
    sp_operator_t *op = operators(m, 2);
    char hex[33];
    sp_id_to_hex(op[0].id, hex);
    op[0].coordinator = byte_stream(m, hex, "coordinator state");
    sp_subtask_t *s = subtasks(m, &op[0], 3);
    s[0].managed_operator = list_of(m, 1, operator_stream(m, SP_TAG_OPERATOR_STREAM, relative(m, "op-file", 100)));
    s[0].managed_keyed = key_groups(m, SP_TAG_KEY_GROUPS_SAVEPOINT, relative(m, "kg-file", 200));
    s[0].n_input_channels = 2;
    s[0].input_channels = channels(m, 2, t0);
    s[0].n_output_channels = 1;
    s[0].output_channels = channels(m, 1, t0);
    s[1].finished = true;
    s[2].managed_keyed = key_groups(m, SP_TAG_KEY_GROUPS_V2, relative(m, "kg-file-2", 300));
    op[1].fully_finished = true;
    return m;
}

static sp_metadata_t *model_v4(void)
{
    static const int t0[] = {0};
    sp_metadata_t *m = sp_meta_new(4);
    m->checkpoint_id = 1000;
    m->has_trailer = false; /* the encoder writes a Java null */
    sp_operator_t *op = operators(m, 1);
    sp_subtask_t *s = subtasks(m, op, 2);
    s[0].managed_keyed = changelog(m, SP_TAG_CHANGELOG_V2);
    s[0].raw_keyed = changelog(m, SP_TAG_CHANGELOG);
    s[0].n_output_channels = 1;
    s[0].output_channels = channels(m, 1, t0);
    s[1].managed_keyed = changelog_file(m, SP_TAG_CHANGELOG_FILE_V2);
    s[1].raw_keyed = changelog_bytes(m);
    return m;
}

static sp_metadata_t *model_v5(void)
{
    sp_metadata_t *m = sp_meta_new(5);
    m->checkpoint_id = 2;
    sp_operator_t *op = operators(m, 4);
    op[0].name = S(m, "Source: Custom Source");                      /* uid "" -> null */
    op[1].name = RAW(m, "\xED\xA0\x80x", 4);                         /* lone high surrogate */
    op[1].uid = RAW(m, "a\xC0\x80z", 4);                             /* embedded NUL */
    op[2].name = RAW(m, "\xED\xA0\xBD\xED\xBA\x80 rocket", 13);      /* U+1F680, canonical */
    op[2].uid = S(m, "\xC3\xBC" "ber-map");
    op[3].name = RAW(m, "\xC1\x81", 2);                              /* overlong 'A' */
    op[3].uid = RAW(m, "\xE0\x81\x81", 3);                           /* overlong 3-byte */
    sp_subtask_t *s = subtasks(m, &op[0], 2);
    s[0].managed_operator = list_of(m, 1, operator_stream(m, SP_TAG_SEGMENT_OPERATOR_STREAM, segment(m)));
    sp_handle_t *empty = operator_stream(m, SP_TAG_SEGMENT_OPERATOR_STREAM, H(m, SP_TAG_EMPTY_SEGMENT));
    empty->u.operator_stream.is_empty = 1;
    s[0].raw_operator = list_of(m, 1, empty);
    s[0].managed_keyed = incremental(m, SP_TAG_INCREMENTAL_V2);
    s[1].managed_keyed = key_groups(m, SP_TAG_KEY_GROUPS_V2, segment(m));
    s[1].raw_keyed = key_groups(m, SP_TAG_KEY_GROUPS_SAVEPOINT, H(m, SP_TAG_EMPTY_SEGMENT));
    return m;
}

static sp_metadata_t *model_v6(void)
{
    static const int in[] = {1, 3, 1}, out[] = {2, 4};
    sp_metadata_t *m = sp_meta_new(6);
    m->checkpoint_id = 5;
    sp_operator_t *op = operators(m, 1);
    op->name = S(m, "Map");
    op->uid = S(m, "map-uid");
    sp_subtask_t *s = subtasks(m, op, 1);
    s[0].n_input_channels = 3;
    s[0].input_channels = channels(m, 3, in);
    s[0].n_output_channels = 2;
    s[0].output_channels = channels(m, 2, out);
    s[0].managed_keyed = key_groups(m, SP_TAG_KEY_GROUPS_V2, relative(m, "x", 1));
    return m;
}

static sp_metadata_t *model_v7(void)
{
    sp_metadata_t *m = sp_meta_new(7);
    m->checkpoint_id = 9007199254740993LL; /* 2^53 + 1: must travel as a string */
    sp_operator_t *op = operators(m, 1);
    op->name = S(m, "Sink: Unnamed");
    sp_subtask_t *s = subtasks(m, op, 4);
    s[0].v7_marker = 0;
    s[1].v7_marker = 1;
    s[1].v7_ref_checkpoint_id = INT64_MAX;
    s[2].v7_marker = 2; /* any marker other than 1 means "absent"; kept as read */
    s[3].finished = true;
    s[0].managed_keyed = key_groups(m, SP_TAG_KEY_GROUPS_V2, file_h(m, "s3://b/k", INT64_MIN));
    return m;
}

/* ------------------------------------------------------------------ */
/* round trips                                                         */
/* ------------------------------------------------------------------ */

/* m -> JSON -> model -> bytes; compares to `bytes`.  Returns the JSON (malloc'd) or NULL. */
static char *json_round_trip(const sp_metadata_t *m, int pretty, const uint8_t *bytes, size_t len, char *why,
                             size_t why_len)
{
    sp_error_t e;
    char *json = NULL;
    sp_metadata_t *m2 = NULL;
    uint8_t *b2 = NULL;
    size_t n2 = 0;
    why[0] = '\0';
    if (sp_meta_to_json(m, pretty, &json, &e) != SP_OK) {
        snprintf(why, why_len, "to_json: %s", e.message);
        return NULL;
    }
    if (sp_meta_from_json(json, strlen(json), &m2, &e) != SP_OK) {
        snprintf(why, why_len, "from_json: [%s] %s", e.field, e.message);
    } else if (sp_meta_encode(m2, &b2, &n2, &e) != SP_OK) {
        snprintf(why, why_len, "encode: [%s] %s", e.field, e.message);
    } else if (n2 != len || memcmp(b2, bytes, len) != 0) {
        size_t i = 0;
        while (i < len && i < n2 && b2[i] == bytes[i])
            i++;
        snprintf(why, why_len, "bytes differ at offset %zu (lengths %zu vs %zu)", i, len, n2);
    }
    free(b2);
    sp_meta_free(m2);
    if (why[0]) {
        free(json);
        return NULL;
    }
    return json;
}

static void check_model(const char *name, sp_metadata_t *m, const char *const *must_contain)
{
    sp_error_t e;
    uint8_t *bytes = NULL;
    size_t len = 0;
    char why[1024];
    if (!ok(sp_meta_encode(m, &bytes, &len, &e) == SP_OK, "%s: the hand-built model encodes", name)) {
        diag_err("encode", &e);
        sp_meta_free(m);
        return;
    }
    char *json = json_round_trip(m, 1, bytes, len, why, sizeof why);
    if (!ok(json != NULL, "%s: encode -> to_json -> from_json -> encode gives the same bytes", name))
        printf("# %s\n", why);

    if (json) {
        /* export is a fixed point: exporting the imported model gives the same text */
        sp_metadata_t *m2 = NULL;
        char *json2 = NULL;
        bool same = sp_meta_from_json(json, strlen(json), &m2, &e) == SP_OK &&
                    sp_meta_to_json(m2, 1, &json2, &e) == SP_OK && strcmp(json, json2) == 0;
        ok(same, "%s: to_json(from_json(json)) == json", name);
        free(json2);
        sp_meta_free(m2);
        for (const char *const *p = must_contain; p && *p; p++)
            if (!ok(strstr(json, *p) != NULL, "%s: JSON contains %s", name, *p))
                printf("# %s\n", json);
    }

    /* the path real files take: bytes -> decode -> JSON -> model -> bytes */
    sp_metadata_t *d = NULL;
    if (sp_meta_decode(bytes, len, NULL, &d, &e) != SP_OK) {
        ok(false, "%s: decoded model round trips through JSON", name);
        diag_err("decode", &e);
    } else {
        char *j3 = json_round_trip(d, 0, bytes, len, why, sizeof why);
        if (!ok(j3 != NULL, "%s: decoded model round trips through JSON", name))
            printf("# %s\n", why);
        free(j3);
        sp_meta_free(d);
    }
    free(json);
    free(bytes);
    sp_meta_free(m);
}

static void part_models(void)
{
    static const char *const v0[] = {"\"state_base64\":\tnull", "\"9223372036854775807\"",
                                     "\"-9223372036854775808\"", NULL};
    static const char *const v1[] = {"\"legacy_operator_state\":\t[{", "\"raw_operator_state\":\t[null, null]",
                                     "\"chain_length\":\t2", NULL};
    static const char *const v2[] = {"\"type\":\t\"NULL_HANDLE\"", "\"raw_operator_state\":\tnull",
                                     "\"mutf8_base64\":\t\"bG9uZSDtsIA=\"", "INCREMENTAL_KEY_GROUPS_HANDLE\"", NULL};
    static const char *const v3[] = {"\"channel_without_subtask_index\":\ttrue", "\"finished\":\ttrue",
                                     "\"fully_finished\":\ttrue", "SAVEPOINT_KEY_GROUPS_HANDLE", NULL};
    static const char *const v4[] = {"CHANGELOG_HANDLE_V2", "CHANGELOG_BYTE_INCREMENT_HANDLE",
                                     "\"9007199254740993\"", "\"key_group\":\t-1", NULL};
    static const char *const v5[] = {"\"uid\":\tnull", "\"mutf8_base64\":\t\"7aCAeA==\"",
                                     "\"mutf8_base64\":\t\"YcCAeg==\"", "\xF0\x9F\x9A\x80 rocket",
                                     "\"distribution_mode\":\t\"BROADCAST\"", "\"scope\":\t\"SHARED\"",
                                     "\"is_empty\":\ttrue", "EMPTY_SEGMENT_FILE_HANDLE", "\"1152921504606846976\"",
                                     NULL};
    static const char *const v6[] = {"\"merged_base64\":", "\"type\":\t4", NULL};
    static const char *const v7[] = {"\"checkpoint_id\":\t\"9007199254740993\"", "\"v7_marker\":\t2",
                                     "\"ref_checkpoint_id\":\t\"9223372036854775807\"", NULL};
    check_model("V0", model_v0(), v0);
    check_model("V1", model_v1(), v1);
    check_model("V2", model_v2(), v2);
    check_model("V3", model_v3(), v3);
    check_model("V4", model_v4(), v4);
    check_model("V5", model_v5(), v5);
    check_model("V6", model_v6(), v6);
    check_model("V7", model_v7(), v7);
}

/* ------------------------------------------------------------------ */
/* hostile and hand-edited JSON                                        */
/* ------------------------------------------------------------------ */

static const char *const DOC =
    "{\"format\": \"flink-metadata\", \"schema_version\": 1, \"metadata_version\": 6, \"checkpoint_id\": 1,"
    " \"master_states\": [], \"operators\": [{\"operator_id\": \"0123456789abcdef0123456789abcdef\","
    " \"name\": \"Map\", \"uid\": %s, \"parallelism\": 1, \"max_parallelism\": 128, \"coordinator_state\": null,"
    " \"fully_finished\": false, \"subtasks\": [{\"index\": 0, \"managed_operator_state\": null,"
    " \"raw_operator_state\": null, \"managed_keyed_state\": %s, \"raw_keyed_state\": null,"
    " \"input_channel_state\": [], \"result_subpartition_state\": []}]}], \"properties\": null}";

static const char *const KG =
    "{\"type\": \"KEY_GROUPS_HANDLE_V2\", \"start_key_group\": 0, \"num_key_groups\": 2, \"offsets\": %s,"
    " \"delegate\": %s, \"handle_id\": \"id\"}";

static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    va_start(ap, f);
    vsnprintf(s, (size_t)n + 1, f, ap);
    va_end(ap);
    return s;
}

static char *doc_with(const char *uid, const char *offsets, const char *delegate)
{
    char *kg = fmt(KG, offsets, delegate);
    char *d = fmt(DOC, uid, kg);
    free(kg);
    return d;
}

/* Import must fail with `code` and an error field equal to `field`. */
static void expect_error(const char *desc, char *text, sp_status_t code, const char *field)
{
    sp_metadata_t *m = NULL;
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t st = sp_meta_from_json(text, strlen(text), &m, &e);
    if (!ok(st == code && strcmp(e.field, field) == 0 && m == NULL && e.message[0], "refuses %s", desc)) {
        printf("# got status %d field '%s' message '%s'\n", st, e.field, e.message);
        sp_meta_free(m);
    } else {
        printf("#   %s: %s\n", e.field[0] ? e.field : "(top)", e.message);
    }
    free(text);
}

static sp_metadata_t *expect_ok(const char *desc, char *text)
{
    sp_metadata_t *m = NULL;
    sp_error_t e;
    if (!ok(sp_meta_from_json(text, strlen(text), &m, &e) == SP_OK, "accepts %s", desc))
        diag_err("from_json", &e);
    free(text);
    return m;
}

static void fuzz(void)
{
    /* random edits of a rich document must never crash (run under ASan) */
    sp_metadata_t *m = model_v5();
    char *json = NULL;
    sp_error_t e;
    sp_meta_to_json(m, 0, &json, &e);
    sp_meta_free(m);
    size_t len = strlen(json), accepted = 0;
    uint32_t seed = 12345;
#define RND() (seed = seed * 1103515245u + 12345u, (seed >> 8))
    static const char pieces[] = "{}[]\",:0-9e.tfn\\u";
    for (int round = 0; round < 4000; round++) {
        char *t = malloc(len + 1);
        memcpy(t, json, len + 1);
        size_t n = len;
        int edits = 1 + (int)(RND() % 4);
        for (int k = 0; k < edits; k++) {
            size_t at = RND() % n;
            switch (RND() % 4) {
            case 0: t[at] = pieces[RND() % (sizeof pieces - 1)]; break;
            case 1: t[at] = (char)(RND() & 0xFF); break;
            case 2: n = at + 1; break;                       /* truncate */
            case 3: memmove(t + at, t + at + 1, n - at - 1); n--; break;
            }
            if (n < 2)
                break;
        }
        sp_metadata_t *r = NULL;
        if (sp_meta_from_json(t, n, &r, &e) == SP_OK) {
            uint8_t *b = NULL;
            size_t bl;
            accepted++;
            sp_meta_encode(r, &b, &bl, &e);
            free(b);
            sp_meta_free(r);
        }
        free(t);
    }
#undef RND
    free(json);
    ok(true, "4000 randomly damaged documents handled without a crash (%zu still importable)", accepted);
}

static void part_hostile(void)
{
    const char *d1 = "{\"type\": \"BYTE_STREAM_STATE_HANDLE\", \"name\": \"n\", \"data_base64\": \"aGk=\"}";
    const char *op = "operators[0].subtasks[0].managed_keyed_state";
    char f[256];

    sp_metadata_t *m = expect_ok("a minimal hand-written document", doc_with("\"my-uid\"", "[1, \"-9223372036854775808\"]", d1));
    if (m) {
        uint8_t *b = NULL;
        size_t n = 0;
        sp_error_t e;
        sp_metadata_t *d = NULL;
        bool good = sp_meta_encode(m, &b, &n, &e) == SP_OK && sp_meta_decode(b, n, NULL, &d, &e) == SP_OK &&
                    d->operators[0].uid.len == 6 && memcmp(d->operators[0].uid.ptr, "my-uid", 6) == 0 &&
                    sp_be64_at(d->operators[0].subtasks[0].managed_keyed->u.key_groups.offsets, 1) == INT64_MIN;
        ok(good, "hand-written document encodes and decodes with its uid and offsets");
        if (d) sp_meta_free(d);
        free(b);
        sp_meta_free(m);
    }
    m = expect_ok("uid null (stored as \"\")", doc_with("null", "[1, 2]", d1));
    if (m) {
        ok(m->operators[0].uid.len == 0, "null uid imports as the empty string");
        sp_meta_free(m);
    }

    snprintf(f, sizeof f, "%s.offsets[1]", op);
    expect_error("a fractional offset", doc_with("null", "[1, 1.5]", d1), SP_ERR_MALFORMED, f);
    expect_error("a number beyond 2^53", doc_with("null", "[1, 9007199254740993]", d1), SP_ERR_MALFORMED, f);
    expect_error("a decimal string beyond int64", doc_with("null", "[1, \"9223372036854775808\"]", d1),
                 SP_ERR_MALFORMED, f);
    snprintf(f, sizeof f, "%s.offsets", op);
    expect_error("offsets not matching num_key_groups", doc_with("null", "[1, 2, 3]", d1), SP_ERR_MALFORMED, f);
    snprintf(f, sizeof f, "%s.delegate.data_base64", op);
    expect_error("bad base64",
                 doc_with("null", "[1, 2]", "{\"type\": \"BYTE_STREAM_STATE_HANDLE\", \"name\": \"n\", \"data_base64\": \"a*k=\"}"),
                 SP_ERR_MALFORMED, f);
    expect_error("base64 with non-zero padding bits",
                 doc_with("null", "[1, 2]", "{\"type\": \"BYTE_STREAM_STATE_HANDLE\", \"name\": \"n\", \"data_base64\": \"aGl=\"}"),
                 SP_ERR_MALFORMED, f);
    snprintf(f, sizeof f, "%s.delegate.type", op);
    expect_error("an operator handle in a stream position",
                 doc_with("null", "[1, 2]", "{\"type\": \"PARTITIONABLE_OPERATOR_STATE_HANDLE\"}"), SP_ERR_MALFORMED, f);
    expect_error("an unknown handle type", doc_with("null", "[1, 2]", "{\"type\": \"NOPE\"}"), SP_ERR_MALFORMED, f);
    snprintf(f, sizeof f, "%s.delegate.name", op);
    expect_error("a missing field",
                 doc_with("null", "[1, 2]", "{\"type\": \"BYTE_STREAM_STATE_HANDLE\", \"data_base64\": \"\"}"),
                 SP_ERR_MALFORMED, f);
    expect_error("\\u0000 in a string",
                 doc_with("null", "[1, 2]", "{\"type\": \"BYTE_STREAM_STATE_HANDLE\", \"name\": \"a\\u0000b\", \"data_base64\": \"\"}"),
                 SP_ERR_MALFORMED, "");
    static char big[65540]; /* "aaa...": 65536 bytes between the quotes */
    memset(big, 'a', sizeof big);
    big[0] = '"';
    big[65537] = '"';
    big[65538] = '\0';
    expect_error("a uid of 65536 bytes", doc_with(big, "[1, 2]", d1), SP_ERR_MALFORMED, "operators[0].uid");
    expect_error("an operator id of 31 hex digits",
                 fmt("{\"format\": \"flink-metadata\", \"schema_version\": 1, \"metadata_version\": 3, \"checkpoint_id\": 1,"
                     " \"master_states\": [], \"operators\": [{\"operator_id\": \"0123456789abcdef0123456789abcde\"}]}"),
                 SP_ERR_MALFORMED, "operators[0].operator_id");

    /* 40 nested key-group handles: refused at depth 32, no stack trouble */
    char *deep = strdup(d1);
    for (int i = 0; i < 40; i++) {
        char *next = fmt("{\"type\": \"KEY_GROUPS_HANDLE\", \"start_key_group\": 0, \"num_key_groups\": 0, "
                         "\"offsets\": [], \"delegate\": %s}", deep);
        free(deep);
        deep = next;
    }
    char *text = doc_with("null", "[1, 2]", deep);
    free(deep);
    sp_metadata_t *dm = NULL;
    sp_error_t e;
    ok(sp_meta_from_json(text, strlen(text), &dm, &e) == SP_ERR_MALFORMED && strstr(e.message, "nested") != NULL,
       "refuses handles nested 41 deep (%s)", e.message);
    free(text);

    expect_error("a document that is not JSON", strdup("{\"format\": "), SP_ERR_MALFORMED, "");
    expect_error("text after the JSON value", fmt("{} x"), SP_ERR_MALFORMED, "");
    expect_error("a JSON array", strdup("[]"), SP_ERR_MALFORMED, "");
    expect_error("another format", strdup("{\"format\": \"x\", \"metadata_version\": 3}"), SP_ERR_MALFORMED, "format");
    expect_error("a newer schema",
                 strdup("{\"format\": \"flink-metadata\", \"schema_version\": 2, \"metadata_version\": 3}"),
                 SP_ERR_UNSUPPORTED, "schema_version");
    expect_error("metadata version 8",
                 strdup("{\"format\": \"flink-metadata\", \"schema_version\": 1, \"metadata_version\": 8}"),
                 SP_ERR_UNSUPPORTED, "metadata_version");
    char nul[] = "{\"format\": \"flink-metadata\"\0}";
    sp_metadata_t *nm = NULL;
    ok(sp_meta_from_json(nul, sizeof nul - 1, &nm, &e) == SP_ERR_MALFORMED, "refuses a NUL byte in the text");
    fuzz();
}

/* ------------------------------------------------------------------ */
/* corpus                                                              */
/* ------------------------------------------------------------------ */

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0, k;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        k = fread(buf + n, 1, cap - n, f);
        n += k;
    } while (k > 0);
    fclose(f);
    *len = n;
    return buf;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* `_metadata`, or for legacy-single-file_* cases the one regular file in the directory. */
static char *metadata_path(const char *dir, const char *name)
{
    char *p = fmt("%s/%s/_metadata", dir, name);
    struct stat st;
    if (strncmp(name, "legacy-single-file_", 19) != 0 || stat(p, &st) == 0)
        return p;
    free(p);
    char *d = fmt("%s/%s", dir, name);
    struct dirent **ents;
    int n = scandir(d, &ents, NULL, alphasort);
    char *found = NULL;
    for (int i = 0; i < n; i++) {
        char *q = fmt("%s/%s", d, ents[i]->d_name);
        if (!found && ents[i]->d_name[0] != '.' && stat(q, &st) == 0 && S_ISREG(st.st_mode))
            found = q;
        else
            free(q);
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
    free(d);
    return found;
}

static void part_corpus(const char *root)
{
    char *dir = root ? fmt("%s/flink", root) : NULL;
    if (!dir || !is_dir(dir)) {
        printf("ok %d # SKIP ../shared not found\n", ++n_tests);
        free(dir);
        return;
    }
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *name = ents[i]->d_name;
        char *sub = fmt("%s/%s", dir, name);
        if (name[0] == '.' || !is_dir(sub)) {
            free(sub);
            free(ents[i]);
            continue;
        }
        free(sub);
        char *path = metadata_path(dir, name), why[1024] = "";
        size_t len = 0;
        uint8_t *buf = path ? read_file(path, &len) : NULL;
        sp_metadata_t *m = NULL;
        sp_error_t e;
        if (!buf) {
            snprintf(why, sizeof why, "cannot read %s", path ? path : "(no metadata file)");
        } else if (sp_meta_decode(buf, len, NULL, &m, &e) != SP_OK) {
            snprintf(why, sizeof why, "decode: [%s] %s", e.field, e.message);
        } else {
            char *json = json_round_trip(m, i % 2, buf, len, why, sizeof why);
            free(json);
        }
        if (!ok(why[0] == '\0', "corpus %s", name))
            printf("# %s\n", why);
        sp_meta_free(m);
        free(buf);
        free(path);
        free(ents[i]);
    }
    if (n >= 0)
        free(ents);
    free(dir);
}

int main(int argc, char **argv)
{
    part_models();
    part_hostile();
    part_corpus(argc > 1 ? argv[1] : NULL);
    printf("1..%d\n", n_tests);
    return n_failed ? 1 : 0;
}
