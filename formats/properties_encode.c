/*
 * properties_encode.c - write the V4+ `_metadata` trailer, a Java-serialized
 * org.apache.flink.runtime.checkpoint.CheckpointProperties, byte-identical
 * to what ObjectOutputStream.writeObject produces in Flink 1.16 - 2.3.
 * Layout: shared/spec/metadata-format.md section 7.2 and Appendix A.
 *
 * The object graph is fixed (only names, enum constants and booleans vary),
 * so the writer emits it directly, with the handle numbers Java assigns:
 *   0x7E0000 CheckpointProperties desc, 01 its SnapshotType signature,
 *   02 the CheckpointProperties object, 03 CheckpointType/SavepointType desc,
 *   then signatures, the type object, enum descs, strings, enum constants.
 * The only back-reference Java writes is the savepoint's second use of the
 * java.lang.Enum class descriptor (0x7E0009).  All strings are distinct
 * objects in Flink (no string back-references), since the values allowed
 * here never coincide.
 */
#include "sp_properties.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum {
    TC_NULL = 0x70,
    TC_REFERENCE = 0x71,
    TC_CLASSDESC = 0x72,
    TC_OBJECT = 0x73,
    TC_STRING = 0x74,
    TC_ENDBLOCKDATA = 0x78,
    TC_ENUM = 0x7E
};

enum { SC_SERIALIZABLE = 0x02, SC_ENUM = 0x10 };

#define PKG "org.apache.flink.runtime.checkpoint."
#define UID_PROPERTIES 0x0000000000000002ULL    /* declared */
#define UID_CHECKPOINT_TYPE 0xd6de4f0305ae1d3aULL /* computed, same in 1.16 - 2.3 */
#define UID_SAVEPOINT_TYPE 0xa087d308a45814b8ULL  /* computed, same in 1.16 - 2.3 */
#define HANDLE_JAVA_LANG_ENUM_IN_SAVEPOINT 0x7E0009u

/* ---- growable output buffer ----------------------------------------------- */

typedef struct pe_buf {
    uint8_t *b;
    size_t n, cap;
    bool failed; /* an allocation failed; further writes are ignored */
} pe_buf_t;

static void pe_put(pe_buf_t *w, const void *p, size_t n)
{
    if (w->failed)
        return;
    if (n > w->cap - w->n) {
        size_t cap = w->cap ? w->cap : 1024;
        while (n > cap - w->n) {
            if (cap > SIZE_MAX / 2) {
                w->failed = true;
                return;
            }
            cap *= 2;
        }
        uint8_t *nb = realloc(w->b, cap);
        if (!nb) {
            w->failed = true;
            return;
        }
        w->b = nb;
        w->cap = cap;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void pe_u8(pe_buf_t *w, unsigned v)
{
    uint8_t b = (uint8_t)v;
    pe_put(w, &b, 1);
}

static void pe_u16(pe_buf_t *w, unsigned v)
{
    uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    pe_put(w, b, 2);
}

static void pe_u32(pe_buf_t *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    pe_put(w, b, 4);
}

static void pe_u64(pe_buf_t *w, uint64_t v)
{
    pe_u32(w, (uint32_t)(v >> 32));
    pe_u32(w, (uint32_t)v);
}

/* writeUTF of an ASCII string (all strings written here are short ASCII). */
static void pe_utf(pe_buf_t *w, const char *s)
{
    size_t n = strlen(s);
    pe_u16(w, (unsigned)n);
    pe_put(w, s, n);
}

static void pe_string(pe_buf_t *w, const char *s)
{
    pe_u8(w, TC_STRING);
    pe_utf(w, s);
}

/* TC_CLASSDESC name suid flags nfields (field descriptors follow). */
static void pe_desc(pe_buf_t *w, const char *name, uint64_t suid, unsigned flags, unsigned nfields)
{
    pe_u8(w, TC_CLASSDESC);
    pe_utf(w, name);
    pe_u64(w, suid);
    pe_u8(w, flags);
    pe_u16(w, nfields);
}

static void pe_obj_field(pe_buf_t *w, const char *name, const char *signature)
{
    pe_u8(w, 'L');
    pe_utf(w, name);
    pe_string(w, signature);
}

/* End of class annotations, then no superclass. */
static void pe_end_desc(pe_buf_t *w)
{
    pe_u8(w, TC_ENDBLOCKDATA);
    pe_u8(w, TC_NULL);
}

/* An enum constant whose class and java.lang.Enum descriptors are both new. */
static void pe_enum_new_super(pe_buf_t *w, const char *cls, const char *constant)
{
    pe_u8(w, TC_ENUM);
    pe_desc(w, cls, 0, SC_SERIALIZABLE | SC_ENUM, 0);
    pe_u8(w, TC_ENDBLOCKDATA);
    pe_desc(w, "java.lang.Enum", 0, SC_SERIALIZABLE | SC_ENUM, 0);
    pe_end_desc(w);
    pe_string(w, constant);
}

/* ---- validation --------------------------------------------------------------- */

/* s (a char array of size cap) is NUL-terminated and one of set[], or empty
 * (then *out = set[0], the default). */
static bool pick(const char *s, size_t cap, const char *const *set, size_t nset, const char **out)
{
    if (!memchr(s, '\0', cap))
        return false;
    if (!s[0]) {
        *out = set[0];
        return true;
    }
    for (size_t i = 0; i < nset; i++)
        if (!strcmp(s, set[i])) {
            *out = set[i];
            return true;
        }
    return false;
}

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static sp_status_t bad_value(sp_error_t *err, const char *field, const char *value, size_t cap,
                             const char *allowed)
{
    if (!memchr(value, '\0', cap))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, field, "%s is not NUL-terminated", field);
    return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, field, "%s \"%s\" is not one of %s", field, value,
                        allowed);
}

/* ---- the trailer ------------------------------------------------------------------ */

static void pe_properties_head(pe_buf_t *w, const sp_properties_t *p)
{
    static const char *const names[7] = {"discardCancelled", "discardFailed", "discardFinished",
                                         "discardSubsumed", "discardSuspended", "forced", "unclaimed"};
    const bool values[7] = {p->discard_cancelled, p->discard_failed, p->discard_finished,
                            p->discard_subsumed, p->discard_suspended, p->forced, p->unclaimed};
    pe_u16(w, 0xACED);
    pe_u16(w, 5);
    pe_u8(w, TC_OBJECT);
    pe_desc(w, PKG "CheckpointProperties", UID_PROPERTIES, SC_SERIALIZABLE, 8);
    for (int i = 0; i < 7; i++) {
        pe_u8(w, 'Z');
        pe_utf(w, names[i]);
    }
    pe_obj_field(w, "checkpointType", "Lorg/apache/flink/runtime/checkpoint/SnapshotType;");
    pe_end_desc(w);
    for (int i = 0; i < 7; i++)
        pe_u8(w, values[i] ? 1 : 0);
}

static void pe_checkpoint_type(pe_buf_t *w, const char *name, const char *strategy)
{
    pe_u8(w, TC_OBJECT);
    pe_desc(w, PKG "CheckpointType", UID_CHECKPOINT_TYPE, SC_SERIALIZABLE, 2);
    pe_obj_field(w, "name", "Ljava/lang/String;");
    pe_obj_field(w, "sharingFilesStrategy",
                 "Lorg/apache/flink/runtime/checkpoint/SnapshotType$SharingFilesStrategy;");
    pe_end_desc(w);
    pe_string(w, name);
    pe_enum_new_super(w, PKG "SnapshotType$SharingFilesStrategy", strategy);
}

static void pe_savepoint_type(pe_buf_t *w, const char *format, const char *name, const char *action)
{
    pe_u8(w, TC_OBJECT);
    pe_desc(w, PKG "SavepointType", UID_SAVEPOINT_TYPE, SC_SERIALIZABLE, 3);
    pe_obj_field(w, "formatType", "Lorg/apache/flink/core/execution/SavepointFormatType;");
    pe_obj_field(w, "name", "Ljava/lang/String;");
    pe_obj_field(w, "postCheckpointAction",
                 "Lorg/apache/flink/runtime/checkpoint/SavepointType$PostCheckpointAction;");
    pe_end_desc(w);
    pe_enum_new_super(w, "org.apache.flink.core.execution.SavepointFormatType", format);
    pe_string(w, name);
    pe_u8(w, TC_ENUM);
    pe_desc(w, PKG "SavepointType$PostCheckpointAction", 0, SC_SERIALIZABLE | SC_ENUM, 0);
    pe_u8(w, TC_ENDBLOCKDATA);
    pe_u8(w, TC_REFERENCE);
    pe_u32(w, HANDLE_JAVA_LANG_ENUM_IN_SAVEPOINT);
    pe_string(w, action);
}

sp_status_t sp_properties_encode(const sp_properties_t *p, uint8_t **out, size_t *out_len, sp_error_t *err)
{
    static const char *const checkpoint_names[] = {"Checkpoint", "Full Checkpoint"};
    static const char *const strategies[] = {"FORWARD_BACKWARD", "FORWARD", "NO_SHARING"};
    static const char *const savepoint_names[] = {"Savepoint", "Suspend Savepoint", "Terminate Savepoint"};
    static const char *const actions[] = {"NONE", "SUSPEND", "TERMINATE"};

    if (out)
        *out = NULL;
    if (out_len)
        *out_len = 0;
    if (!p || !out || !out_len)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "no properties or output given");

    pe_buf_t w = {0};
    if (p->is_null) {
        static const uint8_t null_trailer[] = {0xAC, 0xED, 0x00, 0x05, TC_NULL};
        pe_put(&w, null_trailer, sizeof null_trailer);
    } else if (p->kind == SP_KIND_CHECKPOINT) {
        const char *name, *strategy;
        if (!pick(p->snapshot_name, sizeof p->snapshot_name, checkpoint_names, NELEM(checkpoint_names), &name))
            return bad_value(err, "snapshot_name", p->snapshot_name, sizeof p->snapshot_name,
                             "\"Checkpoint\", \"Full Checkpoint\"");
        if (!pick(p->sharing_files_strategy, sizeof p->sharing_files_strategy, strategies, NELEM(strategies),
                  &strategy))
            return bad_value(err, "sharing_files_strategy", p->sharing_files_strategy,
                             sizeof p->sharing_files_strategy, "FORWARD_BACKWARD, FORWARD, NO_SHARING");
        pe_properties_head(&w, p);
        pe_checkpoint_type(&w, name, strategy);
    } else if (p->kind == SP_KIND_SAVEPOINT) {
        const char *name, *action, *format;
        if (p->format == SP_FORMAT_CANONICAL)
            format = "CANONICAL";
        else if (p->format == SP_FORMAT_NATIVE)
            format = "NATIVE";
        else
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "format",
                                "savepoint format %d is neither CANONICAL nor NATIVE", (int)p->format);
        if (!pick(p->snapshot_name, sizeof p->snapshot_name, savepoint_names, NELEM(savepoint_names), &name))
            return bad_value(err, "snapshot_name", p->snapshot_name, sizeof p->snapshot_name,
                             "\"Savepoint\", \"Suspend Savepoint\", \"Terminate Savepoint\"");
        if (!pick(p->post_checkpoint_action, sizeof p->post_checkpoint_action, actions, NELEM(actions), &action))
            return bad_value(err, "post_checkpoint_action", p->post_checkpoint_action,
                             sizeof p->post_checkpoint_action, "NONE, SUSPEND, TERMINATE");
        pe_properties_head(&w, p);
        pe_savepoint_type(&w, format, name, action);
    } else {
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "kind",
                            "snapshot kind %d is neither checkpoint nor savepoint (and the trailer is not null)",
                            (int)p->kind);
    }

    if (w.failed) {
        free(w.b);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory while writing the properties trailer");
    }
    *out = w.b;
    *out_len = w.n;
    return SP_OK;
}
