/*
 * test_codec.c - primitives and the _metadata codec:
 *   modified UTF-8 vectors (spec 2.1), uid -> operator ID vectors (spec 8.2),
 *   a model holding every handle tag in every version it fits, encoded,
 *   decoded and re-encoded byte for byte, and hostile input: wrong magic,
 *   unknown version and tag, huge counts, truncation at every offset and
 *   random byte flips of corpus files (argv[1] = corpus root), which must end
 *   in an error naming a field and an in-range offset, never a crash.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "sp.h"

static int hexeq(const uint8_t *b, size_t n, const char *hex)
{
    char buf[512];
    for (size_t i = 0; i < n && 2 * i + 1 < sizeof buf; i++)
        sprintf(buf + 2 * i, "%02x", b[i]);
    buf[2 * n] = '\0';
    return strcmp(buf, hex) == 0;
}

static void test_mutf8(void)
{
    static const struct { const char *utf8; size_t len; const char *hex; } v[] = {
        {"a", 1, "61"},
        {"", 0, ""},
        {"\0", 1, "c080"},
        {"\xc3\xa9", 2, "c3a9"},
        {"\xe2\x82\xac", 3, "e282ac"},
        {"\xf0\x9f\x9a\x80", 4, "eda0bdedba80"}, /* U+1F680 as two surrogates */
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t out[32];
        long n = sp_utf8_to_mutf8(v[i].utf8, v[i].len, out);
        tap_ok(n >= 0 && hexeq(out, (size_t)n, v[i].hex), "writeUTF vector %zu -> %s", i, v[i].hex);
        char back[64];
        long m = sp_mutf8_to_utf8(out, (size_t)n, back);
        tap_ok(m == (long)v[i].len && memcmp(back, v[i].utf8, v[i].len) == 0, "readUTF vector %zu round trip", i);
    }
    const uint8_t lone[] = {0xed, 0xa0, 0x80};
    char tmp[16];
    tap_ok(sp_mutf8_to_utf8(lone, 3, tmp) == -1, "lone surrogate has no standard UTF-8 form");
    tap_ok(!sp_mutf8_is_canonical(lone, 3), "lone surrogate is not canonical (kept as raw bytes)");
    const uint8_t four[] = {0xf0, 0x9f, 0x9a, 0x80};
    tap_ok(sp_mutf8_to_utf8(four, 4, tmp) == -1, "4-byte UTF-8 is rejected as Java readUTF does");
    tap_ok(sp_utf8_to_mutf8("\xc0\x80", 2, (uint8_t *)tmp) == -1, "overlong UTF-8 input is rejected");
}

static void test_uid_vectors(void)
{
    static const struct { const char *uid; const char *id; } v[] = {
        {"source-id", "bd9c186e89cc37a76d776844dfa8ccba"},
        {"mapper-id", "c9cecfed5cae9d489451c50e442666e3"},
        {"uid", "0e1febe90327d1cea326114660ec1de8"},
        {"", "00000000000000000000000000000000"},
        {"a", "897859f6655555855a890e51483ab5e6"},
        {"my-operator", "7d711bbc5b4963725a4372048e77bbd7"},
        {"Source: Custom Source", "1640a1cd8726ec8c7d93a05ed1e790e7"},
        {"\xc3\xbc" "ber-map", "536ca6a70e925d3f1513e77a52cad2a5"},
        {"\xf0\x9f\x9a\x80rocket", "d5a32713645235f100c9aefc09f41122"},
        {"window-agg-1", "2e795e0b208a497a604a80ffeb5b8cd1"},
        {"BrCheckpointingSource1", "81afaf64abeedc40a0f29989b81a3659"},
        {"kafka-source-operator-uid", "cb16aa5adb311e8ac72482def19accbe"},
        {"long-udf-with-master-hook-uid", "6ed3f40bff3c8dfcdfcb95128a1018f1"},
        {"LegacyCheckpointedSource", "c4e49e546d86951780eded4825c37bcc"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t id[16];
        char hex[33];
        sp_uid_to_operator_id(v[i].uid, strlen(v[i].uid), id);
        sp_id_to_hex(id, hex);
        tap_ok(strcmp(hex, v[i].id) == 0, "uid-hash \"%s\" = %s (got %s)", v[i].uid, v[i].id, hex);
    }
}

/* ---- a model with every tag ---- */

static sp_str_t S(sp_metadata_t *m, const char *s) { return sp_meta_str(m, s, strlen(s)); }

static const uint8_t *offsets(sp_metadata_t *m, uint32_t n)
{
    uint8_t *p = sp_meta_alloc(m, n * 8 + 8);
    for (uint32_t i = 0; i < n * 8; i++)
        p[i] = (uint8_t)(i * 7);
    return p;
}

static sp_handle_t *rel(sp_metadata_t *m, const char *name, int64_t size)
{
    sp_handle_t *h = sp_meta_new_handle(m, SP_TAG_RELATIVE);
    h->u.relative.path = S(m, name);
    h->u.relative.size = size;
    return h;
}

static sp_handle_t *stream(sp_metadata_t *m, int tag)
{
    sp_handle_t *h = sp_meta_new_handle(m, tag);
    switch (tag) {
    case SP_TAG_BYTE_STREAM:
        h->u.byte_stream.name = S(m, "inline");
        h->u.byte_stream.data = sp_meta_blob(m, "\x01\x02\x03", 3);
        break;
    case SP_TAG_FILE:
        h->u.file.size = -1;
        h->u.file.path = S(m, "s3://bucket/ckpt/job/shared/0c1e");
        break;
    case SP_TAG_RELATIVE:
        return rel(m, "7a6f1a2e-0000-4000-8000-000000000001", 123);
    case SP_TAG_SEGMENT:
        h->u.segment.start_pos = 4096;
        h->u.segment.size = 512;
        h->u.segment.scope = 1;
        h->u.segment.path = S(m, "file:/ckpt/job/shared/merged-1");
        h->u.segment.logical_file_id = S(m, "logical-1");
        break;
    case SP_TAG_KEY_GROUPS:
        h->u.key_groups.start_key_group = 3;
        h->u.key_groups.num_key_groups = 2;
        h->u.key_groups.offsets = offsets(m, 2);
        h->u.key_groups.delegate = rel(m, "nested", 10);
        break;
    default:
        break;
    }
    return h;
}

static sp_handle_t *keyed(sp_metadata_t *m, int tag)
{
    sp_handle_t *h = sp_meta_new_handle(m, tag);
    switch (tag) {
    case SP_TAG_KEY_GROUPS:
    case SP_TAG_KEY_GROUPS_SAVEPOINT:
    case SP_TAG_KEY_GROUPS_V2:
        h->u.key_groups.start_key_group = 0;
        h->u.key_groups.num_key_groups = 4;
        h->u.key_groups.offsets = offsets(m, 4);
        h->u.key_groups.delegate = stream(m, SP_TAG_RELATIVE);
        h->u.key_groups.handle_id = S(m, "hid-12");
        break;
    case SP_TAG_INCREMENTAL:
    case SP_TAG_INCREMENTAL_V2:
        h->u.incremental.checkpoint_id = 9;
        h->u.incremental.backend_id = S(m, "backend");
        h->u.incremental.start_key_group = 0;
        h->u.incremental.num_key_groups = 64;
        h->u.incremental.checkpointed_size = 999;
        h->u.incremental.meta = stream(m, SP_TAG_RELATIVE);
        h->u.incremental.n_shared = 2;
        h->u.incremental.shared = sp_meta_alloc(m, 2 * sizeof(sp_handle_path_t));
        h->u.incremental.shared[0].local_path = S(m, "000010.sst");
        h->u.incremental.shared[0].handle = stream(m, SP_TAG_FILE);
        h->u.incremental.shared[1].local_path = S(m, "000011.sst");
        h->u.incremental.shared[1].handle = stream(m, SP_TAG_SEGMENT);
        h->u.incremental.n_private = 1;
        h->u.incremental.private_state = sp_meta_alloc(m, sizeof(sp_handle_path_t));
        h->u.incremental.private_state[0].local_path = S(m, "MANIFEST-000004");
        h->u.incremental.private_state[0].handle = stream(m, SP_TAG_EMPTY_SEGMENT);
        h->u.incremental.handle_id = S(m, "hid-11");
        break;
    case SP_TAG_CHANGELOG:
    case SP_TAG_CHANGELOG_V2:
        h->u.changelog.start_key_group = 0;
        h->u.changelog.num_key_groups = 8;
        h->u.changelog.checkpointed_size = 77;
        h->u.changelog.n_materialized = 2;
        h->u.changelog.materialized = sp_meta_alloc(m, 2 * sizeof(sp_handle_t *));
        h->u.changelog.materialized[0] = keyed(m, SP_TAG_KEY_GROUPS_V2);
        h->u.changelog.materialized[1] = NULL;
        h->u.changelog.n_non_materialized = 2;
        h->u.changelog.non_materialized = sp_meta_alloc(m, 2 * sizeof(sp_handle_t *));
        h->u.changelog.non_materialized[0] = keyed(m, SP_TAG_CHANGELOG_BYTES);
        h->u.changelog.non_materialized[1] = keyed(m, tag == SP_TAG_CHANGELOG ? SP_TAG_CHANGELOG_FILE : SP_TAG_CHANGELOG_FILE_V2);
        h->u.changelog.materialization_id = 5;
        h->u.changelog.checkpoint_id = tag == SP_TAG_CHANGELOG ? 5 : 6;
        h->u.changelog.handle_id = S(m, "hid-14");
        break;
    case SP_TAG_CHANGELOG_BYTES:
        h->u.changelog_bytes.num_key_groups = 8;
        h->u.changelog_bytes.from = 1;
        h->u.changelog_bytes.to = 3;
        h->u.changelog_bytes.n_changes = 2;
        h->u.changelog_bytes.changes = sp_meta_alloc(m, 2 * sizeof(sp_change_t));
        h->u.changelog_bytes.changes[0].key_group = -1;
        h->u.changelog_bytes.changes[0].bytes = sp_meta_blob(m, "meta", 4);
        h->u.changelog_bytes.changes[1].key_group = 5;
        h->u.changelog_bytes.changes[1].bytes = sp_meta_blob(m, "x", 1);
        h->u.changelog_bytes.handle_id = S(m, "hid-9");
        break;
    case SP_TAG_CHANGELOG_FILE:
    case SP_TAG_CHANGELOG_FILE_V2:
        h->u.changelog_file.num_key_groups = 8;
        h->u.changelog_file.n_handles = 1;
        h->u.changelog_file.handles = sp_meta_alloc(m, sizeof(sp_offset_handle_t));
        h->u.changelog_file.handles[0].offset = 17;
        h->u.changelog_file.handles[0].handle = stream(m, SP_TAG_FILE);
        h->u.changelog_file.state_size = 100;
        h->u.changelog_file.checkpointed_size = 50;
        h->u.changelog_file.handle_id = S(m, "hid-13");
        h->u.changelog_file.storage_id = S(m, "filesystem");
        break;
    }
    return h;
}

static sp_handle_t *op_handle(sp_metadata_t *m, int tag)
{
    sp_handle_t *h = sp_meta_new_handle(m, tag);
    h->u.operator_stream.n_states = 2;
    h->u.operator_stream.states = sp_meta_alloc(m, 2 * sizeof(sp_op_state_entry_t));
    h->u.operator_stream.states[0].name = S(m, "union-state");
    h->u.operator_stream.states[0].distribution_mode = 1;
    h->u.operator_stream.states[0].n_offsets = 3;
    h->u.operator_stream.states[0].offsets = offsets(m, 3);
    h->u.operator_stream.states[1].name = S(m, "broadcast");
    h->u.operator_stream.states[1].distribution_mode = 2;
    if (tag == SP_TAG_SEGMENT_OPERATOR_STREAM) {
        h->u.operator_stream.task_owned_dir = S(m, "file:/ckpt/job/taskowned/op_0_2_");
        h->u.operator_stream.shared_dir = S(m, "file:/ckpt/job/shared/op_0_2_");
        h->u.operator_stream.delegate = stream(m, SP_TAG_SEGMENT);
    } else {
        h->u.operator_stream.delegate = stream(m, SP_TAG_BYTE_STREAM);
    }
    return h;
}

static sp_handle_list_t one(sp_metadata_t *m, sp_handle_t *h)
{
    sp_handle_list_t l = {1, sp_meta_alloc(m, sizeof(sp_handle_t *))};
    l.items[0] = h;
    return l;
}

static sp_metadata_t *every_tag_model(int version)
{
    sp_metadata_t *m = sp_meta_new(version);
    m->checkpoint_id = 42;
    if (version >= 2) {
        m->n_master_states = 1;
        m->master_states = sp_meta_alloc(m, sizeof(sp_master_state_t));
        m->master_states[0].hook_version = 1;
        m->master_states[0].name = S(m, "com.example.Hook");
        m->master_states[0].data = sp_meta_blob(m, "12345678", 8);
    }
    static const int keyed_tags[] = {3, 5, 7, 8, 9, 10, 11, 12, 13, 14};
    int nk = (int)(sizeof keyed_tags / sizeof keyed_tags[0]);
    m->n_operators = 3;
    m->operators = sp_meta_alloc(m, 3 * sizeof(sp_operator_t));
    for (int o = 0; o < 3; o++) {
        sp_operator_t *op = &m->operators[o];
        sp_uid_to_operator_id(o == 0 ? "a" : o == 1 ? "b" : "c", 1, op->id);
        if (version >= 5) {
            op->name = S(m, "Map");
            op->uid = o == 0 ? S(m, "a") : S(m, "");
        }
        op->parallelism = nk;
        op->max_parallelism = 128;
        op->chain_length = 1;
        if (o == 2 && version >= 3) {
            op->fully_finished = true;
            continue;
        }
        if (version >= 3 && o == 0) {
            op->coordinator = stream(m, SP_TAG_BYTE_STREAM);
        }
        op->n_subtasks = (uint32_t)nk + (version >= 3 ? 1 : 0);
        op->subtasks = sp_meta_alloc(m, op->n_subtasks * sizeof(sp_subtask_t));
        for (int i = 0; i < nk; i++) {
            sp_subtask_t *st = &op->subtasks[i];
            st->index = i;
            st->duration = -1;
            if (version == 2 && i == 0)
                st->legacy = one(m, stream(m, SP_TAG_KEY_GROUPS)); /* nested tag 3 in a stream position */
            st->managed_operator = one(m, op_handle(m, i % 2 ? SP_TAG_SEGMENT_OPERATOR_STREAM : SP_TAG_OPERATOR_STREAM));
            if (i == 1)
                st->raw_operator = one(m, NULL); /* present flag, null handle */
            st->managed_keyed = keyed(m, keyed_tags[i]);
            st->raw_keyed = i == 0 ? keyed(m, SP_TAG_KEY_GROUPS_V2) : NULL;
            if (version >= 3 && i == 2) {
                st->n_input_channels = 1;
                st->input_channels = sp_meta_alloc(m, sizeof(sp_channel_handle_t));
                st->input_channels[0].type = version >= 6 ? 1 : 0;
                st->input_channels[0].subtask_index = i;
                st->input_channels[0].info_a = 0;
                st->input_channels[0].info_b = 1;
                st->input_channels[0].n_offsets = 2;
                st->input_channels[0].offsets = offsets(m, 2);
                st->input_channels[0].state_size = 10;
                st->input_channels[0].delegate = stream(m, SP_TAG_RELATIVE);
                st->n_output_channels = version >= 6 ? 2 : 1;
                st->output_channels = sp_meta_alloc(m, 2 * sizeof(sp_channel_handle_t));
                st->output_channels[0] = st->input_channels[0];
                st->output_channels[0].type = version >= 6 ? 2 : 0;
                if (version >= 6) {
                    st->output_channels[1].type = 4;
                    st->output_channels[1].subtask_index = i;
                    st->output_channels[1].state_size = 20;
                    st->output_channels[1].delegate = stream(m, SP_TAG_RELATIVE);
                    st->output_channels[1].merged = sp_meta_blob(m, "\0\0\0\0", 4);
                }
            }
            if (version >= 7 && i == 3) {
                st->v7_marker = 1;
                st->v7_ref_checkpoint_id = 40;
            }
        }
        if (version >= 3) {
            op->subtasks[nk].index = nk;
            op->subtasks[nk].finished = true;
        }
    }
    if (version >= 4) {
        m->has_trailer = true;
        m->trailer = sp_meta_blob(m, "\xac\xed\x00\x05\x70", 5);
    }
    return m;
}

static int count_ref(const sp_ref_t *r, void *u)
{
    ((int *)u)[r->kind]++;
    return 0;
}

static void test_every_tag(void)
{
    for (int v = 2; v <= SP_META_MAX_VERSION; v++) {
        sp_metadata_t *m = every_tag_model(v);
        uint8_t *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        sp_error_t err;
        sp_status_t s = sp_meta_encode(m, &a, &al, &err);
        tap_ok(s == SP_OK, "V%d model with every handle tag encodes (%s %s)", v, err.field, err.message);
        sp_metadata_t *d = NULL;
        s = s ? s : sp_meta_decode(a, al, NULL, &d, &err);
        tap_ok(s == SP_OK, "V%d every-tag file decodes (%s at %llu: %s)", v, err.field, (unsigned long long)err.offset,
               err.message);
        if (d) {
            s = sp_meta_encode(d, &b, &bl, &err);
            tap_ok(s == SP_OK && bl == al && memcmp(a, b, al) == 0, "V%d every-tag file re-encodes byte for byte", v);
            int kinds[5] = {0};
            sp_meta_visit_refs(d, count_ref, kinds);
            tap_ok(kinds[SP_REF_RELATIVE] > 0 && kinds[SP_REF_ABSOLUTE] > 0 && kinds[SP_REF_SEGMENT] > 0 &&
                       kinds[SP_REF_INLINE] > 0 && kinds[SP_REF_DIRECTORY] > 0,
                   "V%d visitor reports relative, absolute, segment, inline and directory references", v);
            /* every truncation of the synthetic file fails cleanly */
            int clean = 1;
            for (size_t cut = 0; cut < al; cut++) {
                sp_metadata_t *t = NULL;
                sp_error_t e;
                if (sp_meta_decode(a, cut, NULL, &t, &e) == SP_OK || e.field[0] == '\0' ||
                    (e.offset != SP_NO_OFFSET && e.offset > cut)) {
                    clean = 0;
                    sp_meta_free(t);
                }
            }
            tap_ok(clean, "V%d every truncation of the every-tag file fails with field and offset", v);
        }
        sp_meta_free(d);
        sp_meta_free(m);
        free(a);
        free(b);
    }
}

static void expect_error(const uint8_t *b, size_t n, sp_status_t want, const char *field, const char *what)
{
    sp_metadata_t *m = NULL;
    sp_error_t e;
    sp_status_t s = sp_meta_decode(b, n, NULL, &m, &e);
    tap_ok(s == want && strstr(e.field, field) != NULL, "%s -> %s in field %s (got %d, field '%s': %s)", what,
           sp_status_name(want), field, s, e.field, e.message);
    sp_meta_free(m);
}

static void test_hostile_headers(void)
{
    const uint8_t wrong_magic[] = {0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 3};
    expect_error(wrong_magic, sizeof wrong_magic, SP_ERR_MALFORMED, "magic", "wrong magic");
    const uint8_t bad_version[] = {0x49, 0x60, 0x67, 0x2d, 0, 0, 0, 9};
    expect_error(bad_version, sizeof bad_version, SP_ERR_UNSUPPORTED, "version", "unknown version 9");
    /* V3: checkpoint 1, no master states, 2^31-1 operators */
    const uint8_t huge[] = {0x49, 0x60, 0x67, 0x2d, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff};
    expect_error(huge, sizeof huge, SP_ERR_MALFORMED, "num_operator_states", "huge operator count");
    const uint8_t neg[] = {0x49, 0x60, 0x67, 0x2d, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff};
    expect_error(neg, sizeof neg, SP_ERR_MALFORMED, "num_master_states", "negative master state count");
    /* one V3 operator whose managed keyed state has tag 99 */
    uint8_t t[96] = {0x49, 0x60, 0x67, 0x2d, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1};
    size_t n = 24 + 16; /* operator id */
    uint8_t rest[] = {0, 0, 0, 1, 0, 0, 0, 1, 0 /*coord*/, 0, 0, 0, 1, 0, 0, 0, 0 /*idx*/, 0, 0, 0, 0, 0, 0, 0, 0,
                      99};
    memcpy(t + n, rest, sizeof rest);
    expect_error(t, n + sizeof rest, SP_ERR_UNSUPPORTED, "managed_keyed_state.tag", "unknown tag 99");
    t[n + sizeof rest - 1] = 4; /* operator handle in a keyed position */
    expect_error(t, n + sizeof rest, SP_ERR_MALFORMED, "managed_keyed_state.tag", "tag 4 in a keyed position");
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = b ? fread(b, 1, (size_t)n, f) : 0;
    fclose(f);
    return b;
}

static void test_corpus_damage(const char *root)
{
    static const char *const cases[] = {
        "new-stateful-broadcast-udf-migration-itcase-flink1.16-rocksdb-checkpoint",
        "new-stateful-broadcast-udf-migration-itcase-flink1.10-savepoint",
        "kafka-connector_kafka-source-savepoint_enum2-split0",
        "legacy-single-file_stateful-udf-migration-itcase-flink1.1-savepoint/stateful-udf-migration-itcase-flink1.1-savepoint",
        "legacy-single-file_stateful-udf-migration-itcase-flink1.2-savepoint/stateful-udf-migration-itcase-flink1.2-savepoint",
        "state-processing-api_table-state",
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/flink/%s%s", root, cases[c], strstr(cases[c], "legacy-") ? "" : "/_metadata");
        size_t len;
        uint8_t *b = slurp(path, &len);
        if (!b) {
            tap_skip("corpus case missing");
            continue;
        }
        int clean = 1;
        size_t bad_cut = 0;
        for (size_t cut = 0; cut < len && clean; cut++) {
            /* an exact-size copy, so a read past the end is caught by ASan */
            uint8_t *t = malloc(cut ? cut : 1);
            memcpy(t, b, cut);
            sp_metadata_t *m = NULL;
            sp_error_t e;
            if (sp_meta_decode(t, cut, NULL, &m, &e) == SP_OK || e.field[0] == '\0' || e.offset > cut) {
                clean = 0;
                bad_cut = cut;
            }
            sp_meta_free(m);
            free(t);
        }
        tap_ok(clean, "%s: truncation at each of %zu offsets fails with field and offset (first bad cut %zu)", cases[c],
               len, bad_cut);
        srand(12345 + (unsigned)c);
        int flips_ok = 1;
        for (int k = 0; k < 3000; k++) {
            uint8_t *t = malloc(len);
            memcpy(t, b, len);
            size_t at = (size_t)rand() % len;
            t[at] ^= (uint8_t)(1 + rand() % 255);
            sp_metadata_t *m = NULL;
            sp_error_t e;
            sp_status_t s = sp_meta_decode(t, len, NULL, &m, &e);
            if (s == SP_OK) {
                /* a flip that still decodes must re-encode to the flipped bytes */
                uint8_t *o;
                size_t ol;
                if (sp_meta_encode(m, &o, &ol, &e) != SP_OK || ol != len || memcmp(o, t, len) != 0)
                    flips_ok = 0;
                else
                    free(o);
            } else if (e.field[0] == '\0' || (e.offset != SP_NO_OFFSET && e.offset > len)) {
                flips_ok = 0;
            }
            sp_meta_free(m);
            free(t);
        }
        tap_ok(flips_ok, "%s: 3000 random byte flips decode exactly or fail with field and offset", cases[c]);
        free(b);
    }
}

int main(int argc, char **argv)
{
    test_mutf8();
    test_uid_vectors();
    test_every_tag();
    test_hostile_headers();
    const char *root = argc > 1 ? argv[1] : NULL;
    DIR *d = root ? opendir(root) : NULL;
    if (d) {
        closedir(d);
        test_corpus_damage(root);
    } else {
        tap_skip("../shared/corpus not found: corpus damage tests skipped");
    }
    return tap_done();
}
