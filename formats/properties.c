/*
 * properties.c - decode the V4+ `_metadata` trailer, a Java-serialized
 * org.apache.flink.runtime.checkpoint.CheckpointProperties, for display.
 * Layout: shared/spec/metadata-format.md section 7 and Appendix A.
 *
 * Two steps:
 *  1. a small, generic reader of the Java Object Serialization Stream
 *     Protocol (stream version 5) turns the bytes into a tiny object graph;
 *  2. the graph is mapped onto sp_properties_t by class and field name, so
 *     field order and serialVersionUIDs (which are release-specific) do not
 *     matter.
 *
 * The input is untrusted (and fuzzed), hence:
 *  - every read is checked against the bytes left, nothing reads past len;
 *  - an allocation sized by a count from the stream is made only after
 *    checking that the remaining bytes could hold that many items, and all
 *    allocations together stay under JS_MEMORY_BUDGET;
 *  - nesting is limited (JS_MAX_DEPTH) and so are class hierarchies;
 *  - a class hierarchy may only use class descriptors that are completely
 *    read, so `super` chains cannot form cycles.
 * Everything the reader builds points into the input or lives on one
 * allocation list freed at the end: no ownership to track.
 */
#include "sp_properties.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- protocol constants (java.io.ObjectStreamConstants) ---------------- */

enum {
    TC_NULL = 0x70,
    TC_REFERENCE = 0x71,
    TC_CLASSDESC = 0x72,
    TC_OBJECT = 0x73,
    TC_STRING = 0x74,
    TC_ARRAY = 0x75,
    TC_CLASS = 0x76,
    TC_BLOCKDATA = 0x77,
    TC_ENDBLOCKDATA = 0x78,
    TC_RESET = 0x79,
    TC_BLOCKDATALONG = 0x7A,
    TC_EXCEPTION = 0x7B,
    TC_LONGSTRING = 0x7C,
    TC_PROXYCLASSDESC = 0x7D,
    TC_ENUM = 0x7E
};

enum {
    SC_WRITE_METHOD = 0x01,
    SC_SERIALIZABLE = 0x02,
    SC_EXTERNALIZABLE = 0x04,
    SC_BLOCK_DATA = 0x08,
    SC_ENUM = 0x10
};

#define JS_BASE_HANDLE 0x7E0000u
#define JS_MAX_DEPTH 32            /* real trailers nest 5 deep */
#define JS_MAX_HIERARCHY 64        /* classes in one object's hierarchy */
#define JS_MEMORY_BUDGET (64u << 20) /* real trailers need a few KiB */

#define CLASS_PROPERTIES "org.apache.flink.runtime.checkpoint.CheckpointProperties"
#define CLASS_CHECKPOINT_TYPE "org.apache.flink.runtime.checkpoint.CheckpointType"
#define CLASS_SAVEPOINT_TYPE "org.apache.flink.runtime.checkpoint.SavepointType"

/* ---- object graph ------------------------------------------------------- */

/* Raw modified-UTF-8 bytes inside the input buffer (not NUL-terminated). */
typedef struct js_bytes {
    const uint8_t *p;
    size_t n;
} js_bytes_t;

typedef struct js_obj js_obj_t;

typedef struct js_field {
    char type;                     /* 'B','C','D','F','I','J','S','Z','L','[' */
    js_bytes_t name;
} js_field_t;

/* One field value of an object. */
typedef struct js_value {
    const js_field_t *field;
    size_t at;                     /* input position, for errors while mapping */
    uint64_t prim;                 /* primitive fields: the big-endian bits */
    js_obj_t *obj;                 /* object fields: NULL is Java null */
} js_value_t;

typedef enum js_kind { JS_CLASSDESC, JS_OBJECT, JS_STRING, JS_ENUM, JS_ARRAY, JS_CLASS } js_kind_t;

/* Anything that gets a handle.  Which members are used depends on kind. */
struct js_obj {
    js_kind_t kind;
    js_bytes_t text;               /* CLASSDESC: class name; STRING: the string */
    /* JS_CLASSDESC */
    bool complete;                 /* whole descriptor read (see file comment) */
    uint8_t flags;
    uint16_t nfields;
    js_field_t *fields;
    js_obj_t *super;               /* NULL: no serializable superclass */
    /* JS_OBJECT, JS_ENUM, JS_ARRAY, JS_CLASS */
    js_obj_t *desc;
    js_value_t *values;            /* JS_OBJECT: every class, super-most first */
    size_t nvalues;
    js_obj_t *constant;            /* JS_ENUM: the constant's name (a JS_STRING) */
};

/* ---- parser state, allocation, errors ----------------------------------- */

typedef struct js_block {
    struct js_block *next;
    max_align_t data[];
} js_block_t;

typedef struct js_parser {
    const uint8_t *buf;
    size_t len, pos;               /* invariant: pos <= len */
    uint64_t base;                 /* file offset of buf[0], for errors */
    sp_error_t *err;
    int depth;
    js_obj_t **handles;
    size_t nhandles, cap;
    js_block_t *blocks;
    size_t used;                   /* bytes allocated so far */
} js_parser_t;

static sp_status_t js_fail_code(js_parser_t *p, sp_status_t code, size_t at, const char *field,
                                const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

static sp_status_t js_fail_code(js_parser_t *p, sp_status_t code, size_t at, const char *field,
                                const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sp_error_set(p->err, code, p->base + at, field, "%s", msg);
}

#define js_fail(p, at, field, ...) js_fail_code((p), SP_ERR_MALFORMED, (at), (field), __VA_ARGS__)

/* Zeroed memory of count*size bytes, freed with the parser. */
static sp_status_t js_alloc(js_parser_t *p, size_t count, size_t size, const char *field, void **out)
{
    *out = NULL;
    if (count == 0)
        return SP_OK;
    if (count > (JS_MEMORY_BUDGET - p->used) / size)
        return js_fail_code(p, SP_ERR_NOMEM, p->pos, field,
                            "decoding the properties needs more than %u MiB", JS_MEMORY_BUDGET >> 20);
    size_t n = count * size;
    js_block_t *b = calloc(1, sizeof *b + n);
    if (!b)
        return js_fail_code(p, SP_ERR_NOMEM, p->pos, field, "out of memory");
    b->next = p->blocks;
    p->blocks = b;
    p->used += n;
    *out = b->data;
    return SP_OK;
}

static void js_free_all(js_parser_t *p)
{
    while (p->blocks) {
        js_block_t *next = p->blocks->next;
        free(p->blocks);
        p->blocks = next;
    }
    free(p->handles);
    p->handles = NULL;
}

/* A new object with the next handle (handles are assigned in stream order). */
static sp_status_t js_new_handle(js_parser_t *p, js_kind_t kind, const char *field, js_obj_t **out)
{
    if (p->nhandles == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        size_t grow = (cap - p->cap) * sizeof *p->handles;
        if (grow > JS_MEMORY_BUDGET - p->used)
            return js_fail_code(p, SP_ERR_NOMEM, p->pos, field, "too many objects in the properties");
        js_obj_t **h = realloc(p->handles, cap * sizeof *h);
        if (!h)
            return js_fail_code(p, SP_ERR_NOMEM, p->pos, field, "out of memory");
        p->handles = h;
        p->cap = cap;
        p->used += grow;
    }
    js_obj_t *o;
    sp_status_t st = js_alloc(p, 1, sizeof *o, field, (void **)&o);
    if (st != SP_OK)
        return st;
    o->kind = kind;
    p->handles[p->nhandles++] = o;
    *out = o;
    return SP_OK;
}

/* ---- primitive reads ---------------------------------------------------- */

static size_t js_left(const js_parser_t *p) { return p->len - p->pos; }

static sp_status_t js_need(js_parser_t *p, size_t n, const char *field, const char *what)
{
    if (js_left(p) >= n)
        return SP_OK;
    return js_fail(p, p->pos, field, "truncated: expected %zu byte%s of %s, %zu left", n,
                   n == 1 ? "" : "s", what, js_left(p));
}

/* Big-endian unsigned integer of n (1..8) bytes. */
static sp_status_t js_read_be(js_parser_t *p, size_t n, const char *field, const char *what,
                              uint64_t *out)
{
    sp_status_t st = js_need(p, n, field, what);
    if (st != SP_OK)
        return st;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p->buf[p->pos + i];
    p->pos += n;
    *out = v;
    return SP_OK;
}

static sp_status_t js_skip(js_parser_t *p, uint64_t n, const char *field, const char *what)
{
    if (n > js_left(p))
        return js_fail(p, p->pos, field, "truncated: expected %llu bytes of %s, %zu left",
                       (unsigned long long)n, what, js_left(p));
    p->pos += (size_t)n;
    return SP_OK;
}

/* Byte sequence of a given length, kept as a pointer into the input. */
static sp_status_t js_read_bytes(js_parser_t *p, uint64_t n, const char *field, const char *what,
                                 js_bytes_t *out)
{
    size_t at = p->pos;
    sp_status_t st = js_skip(p, n, field, what);
    if (st != SP_OK)
        return st;
    out->p = p->buf + at;
    out->n = (size_t)n;
    return SP_OK;
}

/* DataOutput.writeUTF: u16 length + modified UTF-8. */
static sp_status_t js_read_utf(js_parser_t *p, const char *field, const char *what, js_bytes_t *out)
{
    uint64_t n;
    sp_status_t st = js_read_be(p, 2, field, "a string length", &n);
    return st != SP_OK ? st : js_read_bytes(p, n, field, what, out);
}

static bool js_eq(js_bytes_t b, const char *s)
{
    size_t n = strlen(s);
    return b.n == n && memcmp(b.p, s, n) == 0;
}

/* ---- stream grammar ----------------------------------------------------- */

static sp_status_t js_read_content(js_parser_t *p, const char *field, js_obj_t **out);
static sp_status_t js_read_class_desc(js_parser_t *p, const char *field, js_obj_t **out);

/* Depth guard around every recursive production. */
static sp_status_t js_enter(js_parser_t *p, const char *field)
{
    if (p->depth >= JS_MAX_DEPTH)
        return js_fail(p, p->pos, field, "objects nested deeper than %d levels", JS_MAX_DEPTH);
    p->depth++;
    return SP_OK;
}

/* TC_REFERENCE + i32 handle, to something already assigned. */
static sp_status_t js_read_reference(js_parser_t *p, const char *field, js_obj_t **out)
{
    size_t at = p->pos;
    uint64_t h;
    p->pos++; /* TC_REFERENCE */
    sp_status_t st = js_read_be(p, 4, field, "a handle", &h);
    if (st != SP_OK)
        return st;
    if (h < JS_BASE_HANDLE || h - JS_BASE_HANDLE >= p->nhandles)
        return js_fail(p, at, field, "reference to handle 0x%08llx, but only %zu handles are assigned",
                       (unsigned long long)h, p->nhandles);
    *out = p->handles[h - JS_BASE_HANDLE];
    return SP_OK;
}

/* TC_STRING (u16 length) or TC_LONGSTRING (i64 length); gets a new handle. */
static sp_status_t js_read_new_string(js_parser_t *p, const char *field, js_obj_t **out)
{
    bool is_long = p->buf[p->pos] == TC_LONGSTRING;
    uint64_t n;
    p->pos++;
    sp_status_t st = js_read_be(p, is_long ? 8 : 2, field, "a string length", &n);
    if (st != SP_OK)
        return st;
    js_obj_t *s;
    js_bytes_t text;
    /* Read the bytes before allocating: a huge length fails here. */
    if ((st = js_read_bytes(p, n, field, "string bytes", &text)) != SP_OK ||
        (st = js_new_handle(p, JS_STRING, field, &s)) != SP_OK)
        return st;
    s->text = text;
    *out = s;
    return SP_OK;
}

/* A string where the grammar allows only a string or a reference to one
 * (field type signatures, enum constant names), as ObjectInputStream.readString. */
static sp_status_t js_read_string_or_ref(js_parser_t *p, const char *field, js_obj_t **out)
{
    sp_status_t st = js_need(p, 1, field, "a string");
    if (st != SP_OK)
        return st;
    size_t at = p->pos;
    uint8_t tc = p->buf[at];
    if (tc == TC_STRING || tc == TC_LONGSTRING)
        return js_read_new_string(p, field, out);
    if (tc != TC_REFERENCE)
        return js_fail(p, at, field, "expected a string (TC_STRING or TC_REFERENCE), found 0x%02x", tc);
    if ((st = js_read_reference(p, field, out)) != SP_OK)
        return st;
    if ((*out)->kind != JS_STRING)
        return js_fail(p, at, field, "expected a reference to a string");
    return SP_OK;
}

/* Block data and objects up to TC_ENDBLOCKDATA: class annotations, the
 * extra data of classes with writeObject, externalizable contents. */
static sp_status_t js_read_annotation(js_parser_t *p, const char *field)
{
    for (;;) {
        sp_status_t st = js_need(p, 1, field, "an annotation or TC_ENDBLOCKDATA");
        if (st != SP_OK)
            return st;
        uint8_t tc = p->buf[p->pos];
        uint64_t n;
        js_obj_t *ignored;
        if (tc == TC_ENDBLOCKDATA) {
            p->pos++;
            return SP_OK;
        } else if (tc == TC_BLOCKDATA || tc == TC_BLOCKDATALONG) {
            p->pos++;
            st = js_read_be(p, tc == TC_BLOCKDATA ? 1 : 4, field, "a block data length", &n);
            if (st == SP_OK && n > INT32_MAX)
                st = js_fail(p, p->pos - 4, field, "negative block data length");
            if (st == SP_OK)
                st = js_skip(p, n, field, "block data");
        } else {
            st = js_read_content(p, field, &ignored);
        }
        if (st != SP_OK)
            return st;
    }
}

/* fieldDesc: typecode, name, and for object fields a type signature string. */
static sp_status_t js_read_field_desc(js_parser_t *p, js_field_t *f)
{
    const char *field = "properties.classDesc.fields";
    size_t at = p->pos;
    uint64_t type;
    sp_status_t st = js_read_be(p, 1, field, "a field type code", &type);
    if (st != SP_OK)
        return st;
    if (type == 0 || !strchr("BCDFIJSZL[", (int)type))
        return js_fail(p, at, field, "expected a field type code (one of BCDFIJSZL[), found 0x%02x",
                       (unsigned)type);
    f->type = (char)type;
    if ((st = js_read_utf(p, field, "a field name", &f->name)) != SP_OK)
        return st;
    if (f->type == 'L' || f->type == '[') {
        js_obj_t *signature;
        return js_read_string_or_ref(p, "properties.classDesc.fields.signature", &signature);
    }
    return SP_OK;
}

/* Flags as ObjectStreamClass.readNonProxy accepts them. */
static sp_status_t js_check_desc_flags(js_parser_t *p, size_t at, const js_obj_t *d, uint64_t suid,
                                       int nfields)
{
    const char *field = "properties.classDesc.flags";
    if ((d->flags & SC_SERIALIZABLE) && (d->flags & SC_EXTERNALIZABLE))
        return js_fail(p, at, field, "class is flagged both serializable and externalizable");
    if ((d->flags & SC_ENUM) && (suid != 0 || nfields != 0))
        return js_fail(p, at, field, "enum class descriptor with a serialVersionUID or fields");
    return SP_OK;
}

/* fields count and descriptors; the count is checked against the bytes
 * left (a field descriptor takes at least 3) before allocating. */
static sp_status_t js_read_fields(js_parser_t *p, js_obj_t *d, int *nfields_out)
{
    const char *field = "properties.classDesc.fields";
    size_t at = p->pos;
    uint64_t raw;
    sp_status_t st = js_read_be(p, 2, field, "a field count", &raw);
    if (st != SP_OK)
        return st;
    int n = (int)(int16_t)(uint16_t)raw;
    if (n < 0)
        return js_fail(p, at, field, "negative field count %d", n);
    if ((size_t)n * 3 > js_left(p))
        return js_fail(p, at, field, "field count %d does not fit in the %zu bytes left", n, js_left(p));
    if ((st = js_alloc(p, (size_t)n, sizeof *d->fields, field, (void **)&d->fields)) != SP_OK)
        return st;
    for (int i = 0; i < n; i++, d->nfields++)
        if ((st = js_read_field_desc(p, &d->fields[i])) != SP_OK)
            return st;
    *nfields_out = n;
    return SP_OK;
}

/* TC_CLASSDESC className serialVersionUID newHandle flags fields
 * classAnnotation superClassDesc. */
static sp_status_t js_read_new_class_desc(js_parser_t *p, js_obj_t **out)
{
    js_bytes_t name;
    uint64_t suid, flags;
    js_obj_t *d;
    int nfields = 0;
    sp_status_t st;
    p->pos++; /* TC_CLASSDESC */
    if ((st = js_read_utf(p, "properties.classDesc.name", "a class name", &name)) != SP_OK ||
        (st = js_read_be(p, 8, "properties.classDesc.serialVersionUID", "a serialVersionUID",
                         &suid)) != SP_OK ||
        (st = js_new_handle(p, JS_CLASSDESC, "properties.classDesc", &d)) != SP_OK)
        return st;
    d->text = name;
    size_t flags_at = p->pos;
    if ((st = js_read_be(p, 1, "properties.classDesc.flags", "class flags", &flags)) != SP_OK)
        return st;
    d->flags = (uint8_t)flags;
    if ((st = js_read_fields(p, d, &nfields)) != SP_OK ||
        (st = js_check_desc_flags(p, flags_at, d, suid, nfields)) != SP_OK ||
        (st = js_read_annotation(p, "properties.classDesc.annotation")) != SP_OK ||
        (st = js_read_class_desc(p, "properties.classDesc.super", &d->super)) != SP_OK)
        return st;
    d->complete = true;
    *out = d;
    return SP_OK;
}

/* classDesc: a new descriptor, a reference to a complete one, or null. */
static sp_status_t js_read_class_desc_inner(js_parser_t *p, const char *field, js_obj_t **out)
{
    sp_status_t st = js_need(p, 1, field, "a class descriptor");
    if (st != SP_OK)
        return st;
    size_t at = p->pos;
    uint8_t tc = p->buf[at];
    *out = NULL;
    switch (tc) {
    case TC_NULL:
        p->pos++;
        return SP_OK;
    case TC_CLASSDESC:
        return js_read_new_class_desc(p, out);
    case TC_REFERENCE:
        if ((st = js_read_reference(p, field, out)) != SP_OK)
            return st;
        if ((*out)->kind != JS_CLASSDESC)
            return js_fail(p, at, field, "expected a reference to a class descriptor");
        /* An unfinished descriptor here could make a class its own superclass. */
        if (!(*out)->complete)
            return js_fail(p, at, field, "reference to a class descriptor that is still being read");
        return SP_OK;
    case TC_PROXYCLASSDESC:
        return js_fail(p, at, field, "dynamic proxy classes (TC_PROXYCLASSDESC) are not supported");
    default:
        return js_fail(p, at, field, "expected a class descriptor (TC_CLASSDESC, TC_REFERENCE or "
                       "TC_NULL), found 0x%02x", tc);
    }
}

static sp_status_t js_read_class_desc(js_parser_t *p, const char *field, js_obj_t **out)
{
    sp_status_t st = js_enter(p, field);
    if (st != SP_OK)
        return st;
    st = js_read_class_desc_inner(p, field, out);
    p->depth--;
    return st;
}

/* classDesc that must not be null (objects, enums, arrays, classes). */
static sp_status_t js_read_class_desc_nonnull(js_parser_t *p, const char *field, js_obj_t **out)
{
    size_t at = p->pos;
    sp_status_t st = js_read_class_desc(p, field, out);
    if (st == SP_OK && !*out)
        return js_fail(p, at, field, "expected a class descriptor, found null");
    return st;
}

/* The classes of an object, super-most first, and their total field count. */
static sp_status_t js_hierarchy(js_parser_t *p, size_t at, js_obj_t *desc,
                                js_obj_t *chain[JS_MAX_HIERARCHY], int *n, size_t *nvalues)
{
    *n = 0;
    *nvalues = 0;
    for (js_obj_t *d = desc; d; d = d->super) {
        if (*n == JS_MAX_HIERARCHY)
            return js_fail(p, at, "properties.object.classDesc",
                           "class hierarchy deeper than %d classes", JS_MAX_HIERARCHY);
        chain[(*n)++] = d;
        *nvalues += d->nfields;
    }
    for (int i = 0, j = *n - 1; i < j; i++, j--) {
        js_obj_t *t = chain[i];
        chain[i] = chain[j];
        chain[j] = t;
    }
    return SP_OK;
}

static size_t js_prim_size(char type)
{
    switch (type) {
    case 'Z': case 'B': return 1;
    case 'C': case 'S': return 2;
    case 'I': case 'F': return 4;
    case 'J': case 'D': return 8;
    default: return 0;
    }
}

static sp_status_t js_read_value(js_parser_t *p, const js_field_t *f, js_value_t *v)
{
    const char *field = "properties.object.values";
    v->field = f;
    v->at = p->pos;
    size_t size = js_prim_size(f->type);
    if (size)
        return js_read_be(p, size, field, "a primitive field value", &v->prim);
    return js_read_content(p, field, &v->obj);
}

/* classdata of a Serializable object: per class, super-most first, the
 * field values in descriptor order, then writeObject's extra data. */
static sp_status_t js_read_class_data(js_parser_t *p, size_t at, js_obj_t *o)
{
    js_obj_t *chain[JS_MAX_HIERARCHY];
    int nchain;
    size_t total;
    sp_status_t st = js_hierarchy(p, at, o->desc, chain, &nchain, &total);
    if (st != SP_OK)
        return st;
    /* Every value takes at least one byte: check before allocating. */
    if (total > js_left(p))
        return js_fail(p, p->pos, "properties.object.values",
                       "truncated: %zu field values cannot fit in the %zu bytes left", total, js_left(p));
    if ((st = js_alloc(p, total, sizeof *o->values, "properties.object.values",
                       (void **)&o->values)) != SP_OK)
        return st;
    for (int c = 0; c < nchain; c++) {
        const js_obj_t *d = chain[c];
        for (uint16_t i = 0; i < d->nfields; i++, o->nvalues++)
            if ((st = js_read_value(p, &d->fields[i], &o->values[o->nvalues])) != SP_OK)
                return st;
        if ((d->flags & SC_WRITE_METHOD) &&
            (st = js_read_annotation(p, "properties.object.writeObjectData")) != SP_OK)
            return st;
    }
    return SP_OK;
}

/* TC_OBJECT classDesc newHandle classdata. */
static sp_status_t js_read_object(js_parser_t *p, js_obj_t **out)
{
    size_t at = p->pos;
    js_obj_t *desc, *o;
    p->pos++; /* TC_OBJECT */
    sp_status_t st = js_read_class_desc_nonnull(p, "properties.object.classDesc", &desc);
    if (st != SP_OK)
        return st;
    if (!(desc->flags & (SC_SERIALIZABLE | SC_EXTERNALIZABLE)) || (desc->flags & SC_ENUM))
        return js_fail(p, at, "properties.object.classDesc",
                       "class is not serializable as an ordinary object (flags 0x%02x)", desc->flags);
    if ((st = js_new_handle(p, JS_OBJECT, "properties.object", &o)) != SP_OK)
        return st;
    o->desc = desc;
    *out = o;
    if (!(desc->flags & SC_EXTERNALIZABLE))
        return js_read_class_data(p, at, o);
    /* Only protocol-2 externalizable data is self-delimiting. */
    if (!(desc->flags & SC_BLOCK_DATA))
        return js_fail(p, at, "properties.object.classDesc",
                       "externalizable class written without block data cannot be skipped");
    return js_read_annotation(p, "properties.object.externalData");
}

/* TC_ENUM classDesc newHandle constantName. */
static sp_status_t js_read_enum(js_parser_t *p, js_obj_t **out)
{
    size_t at = p->pos;
    js_obj_t *desc, *e;
    p->pos++; /* TC_ENUM */
    sp_status_t st = js_read_class_desc_nonnull(p, "properties.enum.classDesc", &desc);
    if (st != SP_OK)
        return st;
    if (!(desc->flags & SC_ENUM))
        return js_fail(p, at, "properties.enum.classDesc", "TC_ENUM with a class that is not an enum");
    if ((st = js_new_handle(p, JS_ENUM, "properties.enum", &e)) != SP_OK)
        return st;
    e->desc = desc;
    *out = e;
    return js_read_string_or_ref(p, "properties.enum.name", &e->constant);
}

/* TC_ARRAY classDesc newHandle i32 size values.  Kept only as a handle:
 * CheckpointProperties has no array fields, but a generic reader must skip them. */
static sp_status_t js_read_array(js_parser_t *p, js_obj_t **out)
{
    const char *field = "properties.array";
    size_t at = p->pos;
    js_obj_t *desc, *a;
    uint64_t size;
    p->pos++; /* TC_ARRAY */
    sp_status_t st = js_read_class_desc_nonnull(p, "properties.array.classDesc", &desc);
    if (st != SP_OK)
        return st;
    if (desc->text.n < 2 || desc->text.p[0] != '[')
        return js_fail(p, at, "properties.array.classDesc", "array class name does not start with '['");
    if ((st = js_new_handle(p, JS_ARRAY, field, &a)) != SP_OK ||
        (st = js_read_be(p, 4, field, "an array length", &size)) != SP_OK)
        return st;
    a->desc = desc;
    *out = a;
    if (size > INT32_MAX)
        return js_fail(p, p->pos - 4, field, "negative array length");
    size_t elem = js_prim_size((char)desc->text.p[1]);
    if (elem)
        return js_skip(p, size * elem, field, "primitive array elements");
    if (size > js_left(p))
        return js_fail(p, p->pos, field, "truncated: %llu array elements cannot fit in %zu bytes",
                       (unsigned long long)size, js_left(p));
    for (uint64_t i = 0; i < size; i++) {
        js_obj_t *ignored;
        if ((st = js_read_content(p, field, &ignored)) != SP_OK)
            return st;
    }
    return SP_OK;
}

/* TC_CLASS classDesc newHandle (a java.lang.Class value). */
static sp_status_t js_read_class(js_parser_t *p, js_obj_t **out)
{
    js_obj_t *desc, *c;
    p->pos++; /* TC_CLASS */
    sp_status_t st = js_read_class_desc_nonnull(p, "properties.class.classDesc", &desc);
    if (st != SP_OK || (st = js_new_handle(p, JS_CLASS, "properties.class", &c)) != SP_OK)
        return st;
    c->desc = desc;
    *out = c;
    return SP_OK;
}

/* content in object position (ObjectInputStream.readObject); NULL for TC_NULL. */
static sp_status_t js_read_content_inner(js_parser_t *p, const char *field, js_obj_t **out)
{
    sp_status_t st = js_need(p, 1, field, "an object");
    if (st != SP_OK)
        return st;
    size_t at = p->pos;
    uint8_t tc = p->buf[at];
    *out = NULL;
    switch (tc) {
    case TC_NULL: p->pos++; return SP_OK;
    case TC_REFERENCE: return js_read_reference(p, field, out);
    case TC_OBJECT: return js_read_object(p, out);
    case TC_STRING: case TC_LONGSTRING: return js_read_new_string(p, field, out);
    case TC_ENUM: return js_read_enum(p, out);
    case TC_ARRAY: return js_read_array(p, out);
    case TC_CLASS: return js_read_class(p, out);
    case TC_CLASSDESC: case TC_PROXYCLASSDESC: return js_read_class_desc_inner(p, field, out);
    case TC_BLOCKDATA: case TC_BLOCKDATALONG: case TC_ENDBLOCKDATA:
        return js_fail(p, at, field, "expected an object, found block data (0x%02x)", tc);
    case TC_RESET: case TC_EXCEPTION:
        return js_fail(p, at, field, "TC_RESET / TC_EXCEPTION (0x%02x) is not supported here", tc);
    default:
        return js_fail(p, at, field, "expected an object type code (0x70-0x7e), found 0x%02x", tc);
    }
}

static sp_status_t js_read_content(js_parser_t *p, const char *field, js_obj_t **out)
{
    sp_status_t st = js_enter(p, field);
    if (st != SP_OK)
        return st;
    st = js_read_content_inner(p, field, out);
    p->depth--;
    return st;
}

/* ---- mapping onto sp_properties_t --------------------------------------- */

/* Copy a Java string for display: valid 2- and 3-byte sequences are copied
 * as UTF-8 (modified UTF-8 agrees with UTF-8 there); the encoded NUL, lone
 * surrogates, control characters and invalid bytes become '?', so the result
 * is a safe C string.  Truncation never splits a character. */
static void copy_display(char *dst, size_t cap, js_bytes_t s)
{
    size_t o = 0;
    for (size_t i = 0; i < s.n;) {
        const uint8_t *c = s.p + i;
        size_t k = 1;
        bool ok = c[0] >= 0x20 && c[0] < 0x7F;
        if (c[0] >= 0xC2 && c[0] <= 0xDF && s.n - i >= 2 && (c[1] & 0xC0) == 0x80) {
            k = 2, ok = true;
        } else if ((c[0] & 0xF0) == 0xE0 && s.n - i >= 3 && (c[1] & 0xC0) == 0x80 &&
                   (c[2] & 0xC0) == 0x80) {
            unsigned cp = ((c[0] & 0x0Fu) << 12) | ((c[1] & 0x3Fu) << 6) | (c[2] & 0x3Fu);
            k = 3, ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
        }
        size_t emit = ok ? k : 1;
        if (o + emit >= cap)
            break;
        if (ok)
            memcpy(dst + o, c, k);
        else
            dst[o] = '?';
        o += emit;
        i += k;
    }
    dst[o] = '\0';
}

/* The value of the named field, searching the most derived class first. */
static const js_value_t *find_field(const js_obj_t *o, const char *name)
{
    for (size_t i = o->nvalues; i-- > 0;)
        if (o->values[i].field && js_eq(o->values[i].field->name, name))
            return &o->values[i];
    return NULL;
}

/* A boolean field; absent fields (older class shapes) stay false. */
static sp_status_t map_bool(js_parser_t *p, const js_obj_t *o, const char *name, bool *out)
{
    const js_value_t *v = find_field(o, name);
    if (!v)
        return SP_OK;
    if (v->field->type != 'Z')
        return js_fail(p, v->at, "properties.object", "field %s: expected a boolean, found type '%c'",
                       name, v->field->type);
    *out = v->prim != 0;
    return SP_OK;
}

/* An object field that must hold a value of the given kind (or null). */
static sp_status_t map_obj(js_parser_t *p, const js_obj_t *o, const char *name, js_kind_t kind,
                           const char *what, const js_obj_t **out)
{
    const js_value_t *v = find_field(o, name);
    *out = NULL;
    if (!v)
        return SP_OK;
    if (v->field->type != 'L' || (v->obj && v->obj->kind != kind))
        return js_fail(p, v->at, "properties.checkpointType", "field %s: expected %s", name, what);
    *out = v->obj;
    return SP_OK;
}

/* The name of an enum constant field into dst ("" if absent or null). */
static sp_status_t map_enum(js_parser_t *p, const js_obj_t *o, const char *name, char *dst, size_t cap)
{
    const js_obj_t *e;
    sp_status_t st = map_obj(p, o, name, JS_ENUM, "an enum constant", &e);
    if (st == SP_OK && e)
        copy_display(dst, cap, e->constant->text);
    return st;
}

/* checkpointType: a CheckpointType or SavepointType object (Flink >= 1.15). */
static sp_status_t map_snapshot_type(js_parser_t *p, const js_obj_t *t, sp_properties_t *out)
{
    if (t->kind != JS_OBJECT)
        return SP_OK;
    bool is_cp = js_eq(t->desc->text, CLASS_CHECKPOINT_TYPE);
    bool is_sp = js_eq(t->desc->text, CLASS_SAVEPOINT_TYPE);
    if (!is_cp && !is_sp)
        return SP_OK; /* unrecognised class: kind stays unknown */
    const js_obj_t *name;
    sp_status_t st = map_obj(p, t, "name", JS_STRING, "a string", &name);
    if (st != SP_OK)
        return st;
    if (name)
        copy_display(out->snapshot_name, sizeof out->snapshot_name, name->text);
    if (is_cp) {
        out->kind = SP_KIND_CHECKPOINT;
        return map_enum(p, t, "sharingFilesStrategy", out->sharing_files_strategy,
                        sizeof out->sharing_files_strategy);
    }
    out->kind = SP_KIND_SAVEPOINT;
    char format[16] = "";
    if ((st = map_enum(p, t, "formatType", format, sizeof format)) != SP_OK)
        return st;
    out->format = strcmp(format, "CANONICAL") == 0 ? SP_FORMAT_CANONICAL
                : strcmp(format, "NATIVE") == 0    ? SP_FORMAT_NATIVE
                                                   : SP_FORMAT_UNKNOWN;
    return map_enum(p, t, "postCheckpointAction", out->post_checkpoint_action,
                    sizeof out->post_checkpoint_action);
}

static sp_status_t map_properties(js_parser_t *p, const js_obj_t *root, sp_properties_t *out)
{
    if (root->kind != JS_OBJECT || !js_eq(root->desc->text, CLASS_PROPERTIES))
        return js_fail(p, 4, "properties.object", "expected a " CLASS_PROPERTIES " object");
    static const struct {
        const char *name;
        size_t offset;
    } bools[] = {
        {"discardCancelled", offsetof(sp_properties_t, discard_cancelled)},
        {"discardFailed", offsetof(sp_properties_t, discard_failed)},
        {"discardFinished", offsetof(sp_properties_t, discard_finished)},
        {"discardSubsumed", offsetof(sp_properties_t, discard_subsumed)},
        {"discardSuspended", offsetof(sp_properties_t, discard_suspended)},
        {"forced", offsetof(sp_properties_t, forced)},
        {"unclaimed", offsetof(sp_properties_t, unclaimed)},
    };
    sp_status_t st;
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        if ((st = map_bool(p, root, bools[i].name, (bool *)((char *)out + bools[i].offset))) != SP_OK)
            return st;
    const js_value_t *v = find_field(root, "checkpointType");
    if (!v || !v->obj)
        return SP_OK;
    if (v->field->type != 'L')
        return js_fail(p, v->at, "properties.checkpointType", "expected an object field");
    return map_snapshot_type(p, v->obj, out);
}

/* ---- entry point --------------------------------------------------------- */

static sp_status_t decode(js_parser_t *p, sp_properties_t *out)
{
    uint64_t magic, version;
    sp_status_t st;
    if ((st = js_read_be(p, 2, "properties.header", "the stream magic", &magic)) != SP_OK)
        return st;
    if (magic != 0xACED)
        return js_fail(p, 0, "properties.header",
                       "expected the Java serialization magic AC ED, found %04llX", (unsigned long long)magic);
    if ((st = js_read_be(p, 2, "properties.header", "the stream version", &version)) != SP_OK)
        return st;
    if (version != 5)
        return js_fail(p, 2, "properties.header", "expected stream version 5, found %llu",
                       (unsigned long long)version);
    js_obj_t *root;
    if ((st = js_read_content(p, "properties.object", &root)) != SP_OK)
        return st;
    if (p->pos != p->len)
        return js_fail(p, p->pos, "properties", "trailing bytes after the properties object (%zu byte%s)",
                       js_left(p), js_left(p) == 1 ? "" : "s");
    if (!root) {
        out->is_null = true;
        return SP_OK;
    }
    return map_properties(p, root, out);
}

sp_status_t sp_properties_decode(const uint8_t *buf, size_t len, uint64_t base_offset,
                                 sp_properties_t *out, sp_error_t *err)
{
    if (!out || (!buf && len))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "properties",
                            "sp_properties_decode needs an output and a buffer");
    memset(out, 0, sizeof *out);
    out->length = len;
    js_parser_t p = {.buf = buf, .len = len, .base = base_offset, .err = err};
    sp_status_t st = decode(&p, out);
    js_free_all(&p);
    if (st != SP_OK) {
        /* Never hand out a half-filled result. */
        memset(out, 0, sizeof *out);
        out->length = len;
    }
    return st;
}
