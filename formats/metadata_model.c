/* Model helpers: allocation, tag names, IDs, version table. */
#include "sp_metadata.h"

#include <stdlib.h>
#include <string.h>

#include "arena.h"

static const char *const tag_names[SP_TAG_COUNT_] = {
    "NULL_HANDLE",
    "BYTE_STREAM_STATE_HANDLE",
    "FILE_STREAM_STATE_HANDLE",
    "KEY_GROUPS_HANDLE",
    "PARTITIONABLE_OPERATOR_STATE_HANDLE",
    "INCREMENTAL_KEY_GROUPS_HANDLE",
    "RELATIVE_STREAM_STATE_HANDLE",
    "SAVEPOINT_KEY_GROUPS_HANDLE",
    "CHANGELOG_HANDLE",
    "CHANGELOG_BYTE_INCREMENT_HANDLE",
    "CHANGELOG_FILE_INCREMENT_HANDLE",
    "INCREMENTAL_KEY_GROUPS_HANDLE_V2",
    "KEY_GROUPS_HANDLE_V2",
    "CHANGELOG_FILE_INCREMENT_HANDLE_V2",
    "CHANGELOG_HANDLE_V2",
    "SEGMENT_FILE_HANDLE",
    "EMPTY_SEGMENT_FILE_HANDLE",
    "SEGMENT_PARTITIONABLE_OPERATOR_STATE_HANDLE",
};

const char *sp_tag_name(int tag)
{
    return tag >= 0 && tag < SP_TAG_COUNT_ ? tag_names[tag] : NULL;
}

int sp_tag_from_name(const char *name)
{
    for (int i = 0; i < SP_TAG_COUNT_; i++)
        if (strcmp(tag_names[i], name) == 0)
            return i;
    return -1;
}

sp_metadata_t *sp_meta_new(int32_t version)
{
    if (version < 0 || version > SP_META_MAX_VERSION)
        return NULL;
    sp_arena_t *a = sp_arena_new();
    if (!a)
        return NULL;
    sp_metadata_t *m = sp_arena_alloc(a, sizeof *m);
    if (!m) {
        sp_arena_free(a);
        return NULL;
    }
    m->version = version;
    m->arena = a;
    m->has_trailer = version >= 4;
    return m;
}

void sp_meta_free(sp_metadata_t *m)
{
    if (m)
        sp_arena_free(m->arena); /* m itself lives in the arena */
}

void *sp_meta_alloc(sp_metadata_t *m, size_t n)
{
    return sp_arena_alloc(m->arena, n);
}

sp_str_t sp_meta_str(sp_metadata_t *m, const void *bytes, size_t len)
{
    sp_str_t s = {NULL, 0};
    if (len > UINT32_MAX)
        return s;
    uint8_t *p = sp_arena_alloc(m->arena, len + 1);
    if (!p)
        return s;
    if (len)
        memcpy(p, bytes, len);
    s.ptr = p;
    s.len = (uint32_t)len;
    return s;
}

sp_blob_t sp_meta_blob(sp_metadata_t *m, const void *bytes, size_t len)
{
    sp_blob_t b = {NULL, 0};
    uint8_t *p = sp_arena_alloc(m->arena, len + 1);
    if (!p)
        return b;
    if (len)
        memcpy(p, bytes, len);
    b.ptr = p;
    b.len = len;
    return b;
}

sp_handle_t *sp_meta_new_handle(sp_metadata_t *m, int tag)
{
    sp_handle_t *h = sp_arena_alloc(m->arena, sizeof *h);
    if (h)
        h->tag = (uint8_t)tag;
    return h;
}

void sp_id_to_hex(const uint8_t id[16], char out[33])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[id[i] >> 4];
        out[2 * i + 1] = hex[id[i] & 15];
    }
    out[32] = '\0';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool sp_id_from_hex(const char *hex, uint8_t id[16])
{
    if (!hex || strlen(hex) != 32)
        return false;
    for (int i = 0; i < 16; i++) {
        int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        id[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

const char *sp_meta_version_writers(int32_t version)
{
    /* metadata-format.md section 13, confirmed against the corpus */
    switch (version) {
    case 0: return "Flink 1.1";
    case 1: return "Flink 1.2";
    case 2: return "Flink 1.3 - 1.10";
    case 3: return "Flink 1.11 - 1.15";
    case 4: return "Flink 1.16 - 1.20";
    case 5: return "Flink 2.0";
    case 6: return "Flink 2.1 - 2.3";
    case 7: return "no release (experimental, Flink master)";
    }
    return "unknown";
}
