/*
 * sp_metadata.h - the in-memory model of a Flink checkpoint/savepoint
 * `_metadata` file, and its byte-exact codec (versions 0 to 7).
 *
 * Follows Flink's org.apache.flink.runtime.checkpoint.metadata.MetadataV{2..6}Serializer
 * (and V0/V1 of Flink 1.1/1.2, V7 of master), byte layouts as in
 * shared/spec/metadata-format.md.  Pure: no I/O, no globals, no printing.
 *
 * Ownership: every object of a decoded model lives in one arena owned by the
 * sp_metadata_t (freed with sp_meta_free()).  Strings and blobs decoded from a
 * buffer point INTO that buffer (zero copy), so the buffer handed to
 * sp_meta_decode() must outlive the model.  Writers that build or edit a model
 * allocate from the model's arena (sp_meta_alloc / sp_meta_strdup / ...).
 *
 * Byte exactness: decoding then sp_meta_encode() of an unchanged model
 * reproduces the input byte for byte: order of operators, subtasks, map and
 * list entries is kept; strings are kept as their raw modified-UTF-8 bytes;
 * the V4+ properties trailer is kept as opaque bytes; tags are re-emitted as
 * read (3 stays 3, 5 stays 5, ...).
 */
#ifndef SP_METADATA_H
#define SP_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Header magic of every `_metadata` file ("HEADER_MAGIC_NUMBER"). */
#define SP_META_MAGIC 0x4960672DU
/** Magic in front of each master state (MetadataV2V3SerializerBase). */
#define SP_META_MASTER_STATE_MAGIC 0xC96B1696U
/** Highest metadata version this codec knows. */
#define SP_META_MAX_VERSION 7

/** State handle type tags (MetadataV2V3SerializerBase constants). */
enum sp_tag {
    SP_TAG_NULL = 0,                       /* NULL_HANDLE */
    SP_TAG_BYTE_STREAM = 1,                /* ByteStreamStateHandle: inline bytes */
    SP_TAG_FILE = 2,                       /* FileStateHandle: absolute path */
    SP_TAG_KEY_GROUPS = 3,                 /* KeyGroupsStateHandle (legacy, no id) */
    SP_TAG_OPERATOR_STREAM = 4,            /* OperatorStreamStateHandle */
    SP_TAG_INCREMENTAL = 5,                /* IncrementalRemoteKeyedStateHandle V1 */
    SP_TAG_RELATIVE = 6,                   /* RelativeFileStateHandle */
    SP_TAG_KEY_GROUPS_SAVEPOINT = 7,       /* KeyGroupsSavepointStateHandle */
    SP_TAG_CHANGELOG = 8,                  /* ChangelogStateBackendHandle V1 */
    SP_TAG_CHANGELOG_BYTES = 9,            /* InMemoryChangelogStateHandle */
    SP_TAG_CHANGELOG_FILE = 10,            /* ChangelogStateHandleStreamImpl V1 */
    SP_TAG_INCREMENTAL_V2 = 11,            /* IncrementalRemoteKeyedStateHandle V2 */
    SP_TAG_KEY_GROUPS_V2 = 12,             /* KeyGroupsStateHandle V2 (with id) */
    SP_TAG_CHANGELOG_FILE_V2 = 13,         /* ChangelogStateHandleStreamImpl V2 */
    SP_TAG_CHANGELOG_V2 = 14,              /* ChangelogStateBackendHandle V2 */
    SP_TAG_SEGMENT = 15,                   /* SegmentFileStateHandle (file merging) */
    SP_TAG_EMPTY_SEGMENT = 16,             /* EmptySegmentFileStateHandle */
    SP_TAG_SEGMENT_OPERATOR_STREAM = 17,   /* FileMergingOperatorStreamStateHandle */
    SP_TAG_COUNT_ = 18
};

/** Flink's constant name of a tag ("RELATIVE_STREAM_STATE_HANDLE"), or NULL if unknown. */
const char *sp_tag_name(int tag);
/** Inverse of sp_tag_name(); -1 if the name is unknown. */
int sp_tag_from_name(const char *name);

/** A string exactly as stored: raw Java modified-UTF-8 bytes (no NUL terminator). */
typedef struct sp_str {
    const uint8_t *ptr;
    uint32_t len; /* <= 65535 for every string the codec writes */
} sp_str_t;

/** A byte blob exactly as stored. */
typedef struct sp_blob {
    const uint8_t *ptr;
    size_t len;
} sp_blob_t;

/** Read big-endian i64 number i of an array stored as raw big-endian bytes. */
static inline int64_t sp_be64_at(const uint8_t *p, size_t i)
{
    const uint8_t *q = p + 8 * i;
    uint64_t v = ((uint64_t)q[0] << 56) | ((uint64_t)q[1] << 48) | ((uint64_t)q[2] << 40) |
                 ((uint64_t)q[3] << 32) | ((uint64_t)q[4] << 24) | ((uint64_t)q[5] << 16) |
                 ((uint64_t)q[6] << 8) | (uint64_t)q[7];
    return (int64_t)v;
}

typedef struct sp_handle sp_handle_t;

/** One entry of a HandleAndLocalPath list (RocksDB file name -> stream handle). */
typedef struct sp_handle_path {
    sp_str_t local_path;  /* e.g. "000042.sst", "MANIFEST-000003" */
    sp_handle_t *handle;  /* stream handle; NULL = tag 0 */
} sp_handle_path_t;

/** One change of an InMemoryChangelogStateHandle (tag 9). */
typedef struct sp_change {
    int32_t key_group; /* -1 = META_KEY_GROUP */
    sp_blob_t bytes;
} sp_change_t;

/** One (offset, handle) pair of a ChangelogStateHandleStreamImpl (tags 10, 13). */
typedef struct sp_offset_handle {
    int64_t offset;
    sp_handle_t *handle;
} sp_offset_handle_t;

/** One named operator state in an OperatorStreamStateHandle (tags 4, 17). */
typedef struct sp_op_state_entry {
    sp_str_t name;
    int8_t distribution_mode;   /* 0 SPLIT_DISTRIBUTE, 1 UNION, 2 BROADCAST */
    uint32_t n_offsets;
    const uint8_t *offsets;     /* n_offsets big-endian i64 (use sp_be64_at) */
} sp_op_state_entry_t;

/**
 * A state handle.  `tag` selects the union member:
 *   1        byte_stream        2      file            6 relative
 *   3, 7, 12 key_groups         4, 17  operator_stream
 *   5, 11    incremental        8, 14  changelog       9 changelog_bytes
 *   10, 13   changelog_file     15     segment         16 (no fields)
 * A NULL pointer anywhere a handle is expected means tag 0 (null).
 */
struct sp_handle {
    uint8_t tag;
    uint64_t offset; /* byte offset of the tag byte in the decoded file (0 if built) */
    union {
        struct { sp_str_t name; sp_blob_t data; } byte_stream;
        struct { int64_t size; sp_str_t path; } file;
        struct { sp_str_t path; int64_t size; } relative;
        struct {
            int32_t start_key_group, num_key_groups;
            const uint8_t *offsets;     /* num_key_groups big-endian i64 */
            sp_handle_t *delegate;
            sp_str_t handle_id;         /* tag 12 only */
        } key_groups;
        struct {
            uint32_t n_states;
            sp_op_state_entry_t *states;
            sp_str_t task_owned_dir;    /* tag 17 only */
            sp_str_t shared_dir;        /* tag 17 only */
            uint8_t is_empty;           /* tag 17 only (0/1) */
            sp_handle_t *delegate;
        } operator_stream;
        struct {
            int64_t checkpoint_id;
            sp_str_t backend_id;
            int32_t start_key_group, num_key_groups;
            int64_t checkpointed_size;  /* tag 11 only */
            sp_handle_t *meta;
            uint32_t n_shared, n_private;
            sp_handle_path_t *shared, *private_state;
            sp_str_t handle_id;         /* tag 11 only */
        } incremental;
        struct {
            int32_t start_key_group, num_key_groups;
            int64_t checkpointed_size;
            uint32_t n_materialized, n_non_materialized;
            sp_handle_t **materialized, **non_materialized; /* entries may be NULL (tag 0) */
            int64_t materialization_id;
            int64_t checkpoint_id;      /* tag 14 only */
            sp_str_t handle_id;
        } changelog;
        struct {
            int32_t start_key_group, num_key_groups;
            int64_t from, to;
            uint32_t n_changes;
            sp_change_t *changes;
            sp_str_t handle_id;
        } changelog_bytes;
        struct {
            int32_t start_key_group, num_key_groups;
            uint32_t n_handles;
            sp_offset_handle_t *handles;
            int64_t state_size, checkpointed_size;
            sp_str_t handle_id;
            sp_str_t storage_id;        /* tag 13 only */
        } changelog_file;
        struct {
            int64_t start_pos, size;
            int32_t scope;              /* 0 EXCLUSIVE, 1 SHARED */
            sp_str_t path, logical_file_id;
        } segment;
    } u;
};

/**
 * A channel-state handle (unaligned checkpoints), metadata V3+.
 * type: 0 = "channel V1" encoding (V3-V5, no type byte; the list says input
 * or output), 1 input, 2 result subpartition, 3 merged input, 4 merged result
 * subpartition ("channel V2" encoding of V6+).
 */
typedef struct sp_channel_handle {
    uint8_t type;
    int32_t subtask_index;      /* not on the wire in Flink 1.11 files (sp_metadata_t.channel_without_subtask_index) */
    int32_t info_a, info_b;     /* gate/channel or partition/subpartition (types 0-2) */
    uint32_t n_offsets;
    const uint8_t *offsets;     /* types 0-2: n_offsets big-endian i64 */
    int64_t state_size;
    sp_handle_t *delegate;
    sp_blob_t merged;           /* types 3-4: serialized channel offsets blob, kept opaque */
} sp_channel_handle_t;

/** A list of handle pointers (V1 chained lists; V2+ singletons as 0 or 1 entries). */
typedef struct sp_handle_list {
    uint32_t n;
    sp_handle_t **items; /* entries may be NULL (tag 0) */
} sp_handle_list_t;

/** The state of one subtask of one operator. */
typedef struct sp_subtask {
    int32_t index;          /* real subtask index (>= 0) */
    bool finished;          /* V3+: stored as -(index+1); nothing else is stored */

    /* V0 (Flink 1.1): Java-serialized StreamTaskStateList, kept opaque */
    bool v0_null;           /* length -1 */
    sp_blob_t v0_state;
    int64_t v0_state_size, v0_duration;

    int64_t duration;       /* V1, V2 (-1 as written by Flink) */

    /* V1: one entry per chained operator; V2+: 0 or 1 entry (the presence flag) */
    sp_handle_list_t legacy;          /* V1, V2 only */
    sp_handle_list_t managed_operator;
    sp_handle_list_t raw_operator;
    sp_handle_t *managed_keyed, *raw_keyed;

    /* V3+ */
    uint32_t n_input_channels, n_output_channels;
    sp_channel_handle_t *input_channels, *output_channels;

    /* V7 */
    uint8_t v7_marker;      /* as read: 1 = ref id present */
    int64_t v7_ref_checkpoint_id;
} sp_subtask_t;

/** The state of one operator (V0/V1: one task = operator chain, ID = JobVertexID). */
typedef struct sp_operator {
    sp_str_t name, uid;     /* V5+; len 0 = not known */
    uint8_t id[16];         /* OperatorID bytes in file order = Flink's hex string */
    int32_t parallelism;
    int32_t max_parallelism;/* V0: not stored, -1 */
    int32_t chain_length;   /* V1, V2 */
    sp_handle_t *coordinator; /* V3+, tag 1 or NULL */
    bool fully_finished;    /* V3+: subtask count stored as -1 */
    uint32_t n_subtasks;
    sp_subtask_t *subtasks;
} sp_operator_t;

/** A master hook state (V2+). */
typedef struct sp_master_state {
    int32_t hook_version;
    sp_str_t name;
    sp_blob_t data;
} sp_master_state_t;

typedef struct sp_arena sp_arena_t;

/** A decoded `_metadata` file. */
typedef struct sp_metadata {
    int32_t version;            /* 0..7 */
    int64_t checkpoint_id;
    uint32_t n_master_states;
    sp_master_state_t *master_states;
    uint32_t n_operators;
    sp_operator_t *operators;
    bool has_trailer;           /* V4+ */
    sp_blob_t trailer;          /* V4+: Java-serialized CheckpointProperties, opaque */
    bool channel_without_subtask_index; /* V3 file of Flink 1.11 (channel V1 without subtaskIndex) */
    sp_arena_t *arena;
} sp_metadata_t;

/** Limits applied while decoding untrusted bytes. */
typedef struct sp_decode_limits {
    size_t max_depth;           /* nested handles (default 16) */
} sp_decode_limits_t;

/**
 * Decode a `_metadata` file held in buf[0..len).
 * On success *out is a new model (free with sp_meta_free); strings and blobs
 * point into buf, which must stay alive and unchanged while the model is used.
 * Every count and length is checked against the remaining bytes before any
 * allocation, so memory is bounded by a small multiple of len.
 * Errors (err->offset and err->field name where):
 *   SP_ERR_MALFORMED   wrong magic, truncated, bad count/length/flag, trailing bytes
 *   SP_ERR_UNSUPPORTED unknown version or tag, V0 key-group states
 *   SP_ERR_NOMEM       allocation failed
 * limits may be NULL (defaults).
 */
sp_status_t sp_meta_decode(const uint8_t *buf, size_t len, const sp_decode_limits_t *limits,
                           sp_metadata_t **out, sp_error_t *err);

/**
 * Encode the model in its own version (m->version) into a new malloc'd buffer
 * (*out_buf, *out_len; free() it).  Unchanged decoded models give back the
 * input bytes exactly.
 * Errors: SP_ERR_INVALID (a field the version cannot hold, a string > 65535
 * bytes, a V0/V1 model without what it needs), SP_ERR_NOMEM.
 */
sp_status_t sp_meta_encode(const sp_metadata_t *m, uint8_t **out_buf, size_t *out_len, sp_error_t *err);

/** Create an empty model of the given version (0..7) with its own arena. NULL on allocation failure. */
sp_metadata_t *sp_meta_new(int32_t version);

/** Free a model and everything in its arena.  NULL is allowed. */
void sp_meta_free(sp_metadata_t *m);

/** Allocate n zeroed bytes from the model's arena (NULL on failure).  Freed with the model. */
void *sp_meta_alloc(sp_metadata_t *m, size_t n);

/** Copy bytes into the arena and return them as an sp_str_t / sp_blob_t (ptr NULL on failure when len > 0). */
sp_str_t sp_meta_str(sp_metadata_t *m, const void *bytes, size_t len);
sp_blob_t sp_meta_blob(sp_metadata_t *m, const void *bytes, size_t len);

/** Allocate a zeroed handle with the given tag from the arena. */
sp_handle_t *sp_meta_new_handle(sp_metadata_t *m, int tag);

/** Lowercase hex of a 16-byte ID into out[33] (NUL-terminated). */
void sp_id_to_hex(const uint8_t id[16], char out[33]);
/** Parse 32 hex characters (either case) into id[16]; returns false if not exactly 32 hex digits. */
bool sp_id_from_hex(const char *hex, uint8_t id[16]);

/** The Flink releases that write a metadata version ("1.16 - 1.20"), or "unknown". */
const char *sp_meta_version_writers(int32_t version);

/* ---- file references ---- */

/** What kind of leaf a reference is. */
typedef enum sp_ref_kind {
    SP_REF_RELATIVE = 0,  /* tag 6: path relative to the directory holding _metadata */
    SP_REF_ABSOLUTE = 1,  /* tag 2: absolute path / URI */
    SP_REF_SEGMENT = 2,   /* tag 15: a segment [offset, offset+size) of an absolute file */
    SP_REF_INLINE = 3,    /* tag 1 / tag 9 / V0 blob: bytes stored in _metadata itself */
    SP_REF_DIRECTORY = 4  /* tag 17: task-owned / shared file-merging directory (absolute) */
} sp_ref_kind_t;

/** Where in the subtask state a reference sits. */
typedef enum sp_ref_slot {
    SP_SLOT_COORDINATOR = 0, SP_SLOT_LEGACY, SP_SLOT_MANAGED_OPERATOR, SP_SLOT_RAW_OPERATOR,
    SP_SLOT_MANAGED_KEYED, SP_SLOT_RAW_KEYED, SP_SLOT_INPUT_CHANNEL, SP_SLOT_OUTPUT_CHANNEL,
    SP_SLOT_V0_STATE
} sp_ref_slot_t;

/** One leaf reference found by sp_meta_visit_refs(). */
typedef struct sp_ref {
    sp_ref_kind_t kind;
    sp_ref_slot_t slot;
    sp_str_t path;           /* as stored (RELATIVE/ABSOLUTE/SEGMENT/DIRECTORY); handle name for INLINE tag 1 */
    int64_t size;            /* bytes recorded (file size; segment length; inline length); -1 unknown */
    int64_t segment_offset;  /* SEGMENT only */
    uint32_t operator_index; /* index into m->operators */
    int32_t subtask_index;   /* real subtask index; -1 for operator-level (coordinator) */
    sp_handle_t *handle;     /* the leaf handle (NULL for V0 blobs / master states); may be edited */
    int parent_tag;          /* tag of the enclosing keyed/operator handle, 0 if none */
} sp_ref_t;

/** Return non-zero from the visitor to stop the walk; that value is returned by sp_meta_visit_refs. */
typedef int (*sp_ref_visitor_t)(const sp_ref_t *ref, void *user);

/**
 * Walk every leaf reference of the model (nested handles depth-first in
 * serialisation order, repeated references reported each time).  Inline
 * payloads are reported as SP_REF_INLINE.  Master states (hook data) are not
 * state handles and are not reported.  Returns 0 or the visitor's stop value.
 */
int sp_meta_visit_refs(sp_metadata_t *m, sp_ref_visitor_t visit, void *user);

#ifdef __cplusplus
}
#endif
#endif
