/*
 * test_properties.c - TAP tests of sp_properties_decode (formats/properties.c)
 * and sp_properties_encode (formats/properties_encode.c).
 *
 * Part 1 produces the normal trailers with sp_properties_encode, checks them
 * against an independent little Java-serialization writer kept here (which
 * follows shared/spec/metadata-format.md Appendix A with the real
 * serialVersionUIDs of section 7.2 and also builds the hostile and odd
 * shapes), checks the encoder's defaults and errors, and checks decoding,
 * truncation at every length, corruption and hostile shapes.
 * Part 2 (when argv[1] names the shared corpus root) decodes the trailer of
 * every V4+ case, compares it with expected/<case>.json, and re-encodes the
 * decoded properties, which must give back the trailer byte for byte.
 *
 * Usage: test_properties [corpus-root]
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strndup, dirent */
#endif
#include "sp_properties.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- TAP ------------------------------------------------------------------ */

static int test_no, failures;

static void ok(int cond, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void ok(int cond, const char *fmt, ...)
{
    va_list ap;
    printf("%s %d - ", cond ? "ok" : "not ok", ++test_no);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond)
        failures++;
}

/* ---- a tiny Java serialization writer ------------------------------------- */

typedef struct wbuf {
    uint8_t b[4096];
    size_t n;
} wbuf_t;

static void w8(wbuf_t *w, unsigned v)
{
    if (w->n < sizeof w->b)
        w->b[w->n++] = (uint8_t)v;
}

static void w16(wbuf_t *w, unsigned v) { w8(w, v >> 8); w8(w, v & 0xFF); }

static void w64(wbuf_t *w, uint64_t v)
{
    for (int i = 56; i >= 0; i -= 8)
        w8(w, (unsigned)(v >> i) & 0xFF);
}

static void wutf(wbuf_t *w, const char *s)
{
    w16(w, (unsigned)strlen(s));
    for (; *s; s++)
        w8(w, (uint8_t)*s);
}

static void wstring(wbuf_t *w, const char *s) { w8(w, 0x74); wutf(w, s); }

/* TC_CLASSDESC name suid flags nfields, without the fields. */
static void wdesc(wbuf_t *w, const char *name, uint64_t suid, unsigned flags, unsigned nfields)
{
    w8(w, 0x72);
    wutf(w, name);
    w64(w, suid);
    w8(w, flags);
    w16(w, nfields);
}

static void wobj_field(wbuf_t *w, const char *name, const char *sig)
{
    w8(w, 'L');
    wutf(w, name);
    wstring(w, sig);
}

#define UID_CHECKPOINT_TYPE 0xd6de4f0305ae1d3aULL
#define UID_SAVEPOINT_TYPE 0xa087d308a45814b8ULL
#define PKG "org.apache.flink.runtime.checkpoint."

typedef struct spec {
    int savepoint;             /* else checkpoint */
    const char *name;          /* "Checkpoint", "Savepoint", "Suspend Savepoint" */
    const char *format;        /* savepoints: CANONICAL / NATIVE */
    const char *action;        /* savepoints: NONE / SUSPEND / TERMINATE */
    const char *strategy;      /* checkpoints */
    uint8_t bools[7];          /* cancelled failed finished subsumed suspended forced unclaimed */
} spec_t;

/* The CheckpointProperties header, class descriptor and booleans.  Handles:
 * 0x7E0000 desc, 0x7E0001 SnapshotType signature, 0x7E0002 the object. */
static void wproperties_head(wbuf_t *w, const spec_t *s)
{
    static const char *const names[7] = {"discardCancelled", "discardFailed", "discardFinished",
                                         "discardSubsumed", "discardSuspended", "forced", "unclaimed"};
    w16(w, 0xACED);
    w16(w, 5);
    w8(w, 0x73);
    wdesc(w, PKG "CheckpointProperties", 2, 0x02, 8);
    for (int i = 0; i < 7; i++) {
        w8(w, 'Z');
        wutf(w, names[i]);
    }
    wobj_field(w, "checkpointType", "Lorg/apache/flink/runtime/checkpoint/SnapshotType;");
    w8(w, 0x78);
    w8(w, 0x70);
    for (int i = 0; i < 7; i++)
        w8(w, s->bools[i]);
}

/* enum constant with a java.lang.Enum superclass written anew. */
static void wenum_new_super(wbuf_t *w, const char *cls, const char *constant)
{
    w8(w, 0x7E);
    wdesc(w, cls, 0, 0x12, 0);
    w8(w, 0x78);
    wdesc(w, "java.lang.Enum", 0, 0x12, 0);
    w8(w, 0x78);
    w8(w, 0x70);
    wstring(w, constant);
}

static void wcheckpoint_type(wbuf_t *w, const spec_t *s)
{
    w8(w, 0x73);
    wdesc(w, PKG "CheckpointType", UID_CHECKPOINT_TYPE, 0x02, 2);
    wobj_field(w, "name", "Ljava/lang/String;");
    wobj_field(w, "sharingFilesStrategy",
               "Lorg/apache/flink/runtime/checkpoint/SnapshotType$SharingFilesStrategy;");
    w8(w, 0x78);
    w8(w, 0x70);
    wstring(w, s->name);
    wenum_new_super(w, PKG "SnapshotType$SharingFilesStrategy", s->strategy);
}

/* Handles: 0x7E0003 desc, 04-06 signatures, 07 object, 08 format desc,
 * 09 java.lang.Enum (referenced again by the action enum). */
static void wsavepoint_type(wbuf_t *w, const spec_t *s)
{
    w8(w, 0x73);
    wdesc(w, PKG "SavepointType", UID_SAVEPOINT_TYPE, 0x02, 3);
    wobj_field(w, "formatType", "Lorg/apache/flink/core/execution/SavepointFormatType;");
    wobj_field(w, "name", "Ljava/lang/String;");
    wobj_field(w, "postCheckpointAction",
               "Lorg/apache/flink/runtime/checkpoint/SavepointType$PostCheckpointAction;");
    w8(w, 0x78);
    w8(w, 0x70);
    wenum_new_super(w, "org.apache.flink.core.execution.SavepointFormatType", s->format);
    wstring(w, s->name);
    w8(w, 0x7E);
    wdesc(w, PKG "SavepointType$PostCheckpointAction", 0, 0x12, 0);
    w8(w, 0x78);
    w8(w, 0x71);
    w16(w, 0x007E);
    w16(w, 0x0009);
    wstring(w, s->action);
}

static void build(wbuf_t *w, const spec_t *s)
{
    w->n = 0;
    wproperties_head(w, s);
    if (s->savepoint)
        wsavepoint_type(w, s);
    else
        wcheckpoint_type(w, s);
}

static const spec_t CHECKPOINT = {0, "Checkpoint", NULL, NULL, "FORWARD_BACKWARD", {0, 0, 1, 1, 0, 0, 0}};
static const spec_t SAVEPOINT = {1, "Savepoint", "CANONICAL", "NONE", NULL, {0, 0, 0, 0, 0, 1, 0}};
static const spec_t STOP_NATIVE = {1, "Suspend Savepoint", "NATIVE", "SUSPEND", NULL, {0, 0, 0, 0, 0, 1, 0}};
static const spec_t FULL_CHECKPOINT = {0, "Full Checkpoint", NULL, NULL, "FORWARD", {1, 0, 1, 0, 1, 0, 1}};
static const spec_t TERMINATE = {1, "Terminate Savepoint", "CANONICAL", "TERMINATE", NULL, {0, 1, 0, 1, 0, 1, 1}};

/* ---- the library encoder ---------------------------------------------------- */

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static void spec_to_props(const spec_t *s, sp_properties_t *p)
{
    memset(p, 0, sizeof *p);
    p->kind = s->savepoint ? SP_KIND_SAVEPOINT : SP_KIND_CHECKPOINT;
    copy_str(p->snapshot_name, sizeof p->snapshot_name, s->name);
    if (s->savepoint) {
        p->format = !strcmp(s->format, "NATIVE") ? SP_FORMAT_NATIVE : SP_FORMAT_CANONICAL;
        copy_str(p->post_checkpoint_action, sizeof p->post_checkpoint_action, s->action);
    } else {
        copy_str(p->sharing_files_strategy, sizeof p->sharing_files_strategy, s->strategy);
    }
    p->discard_cancelled = s->bools[0];
    p->discard_failed = s->bools[1];
    p->discard_finished = s->bools[2];
    p->discard_subsumed = s->bools[3];
    p->discard_suspended = s->bools[4];
    p->forced = s->bools[5];
    p->unclaimed = s->bools[6];
}

/* The trailer of s from sp_properties_encode (malloc'd, NULL on failure). */
static uint8_t *encode_spec(const spec_t *s, size_t *n)
{
    sp_properties_t p;
    spec_to_props(s, &p);
    uint8_t *b = NULL;
    sp_error_t e;
    sp_error_clear(&e);
    if (sp_properties_encode(&p, &b, n, &e) != SP_OK) {
        printf("# encode: %s: %s\n", e.field, e.message);
        return NULL;
    }
    return b;
}

/* ---- checks ---------------------------------------------------------------- */

static int bools_match(const sp_properties_t *p, const uint8_t b[7])
{
    return p->discard_cancelled == b[0] && p->discard_failed == b[1] && p->discard_finished == b[2] &&
           p->discard_subsumed == b[3] && p->discard_suspended == b[4] && p->forced == b[5] &&
           p->unclaimed == b[6];
}

static int matches_spec(const sp_properties_t *p, const spec_t *s, size_t len)
{
    if (p->length != len || p->is_null || !bools_match(p, s->bools) || strcmp(p->snapshot_name, s->name))
        return 0;
    if (!s->savepoint)
        return p->kind == SP_KIND_CHECKPOINT && p->format == SP_FORMAT_UNKNOWN &&
               !strcmp(p->sharing_files_strategy, s->strategy) && !p->post_checkpoint_action[0];
    sp_savepoint_format_t f = !strcmp(s->format, "NATIVE") ? SP_FORMAT_NATIVE : SP_FORMAT_CANONICAL;
    return p->kind == SP_KIND_SAVEPOINT && p->format == f && !strcmp(p->post_checkpoint_action, s->action) &&
           !p->sharing_files_strategy[0];
}

/* Decode expecting SP_ERR_MALFORMED, with the error inside the trailer. */
static int fails_malformed(const uint8_t *b, size_t n, const char *msg_part)
{
    sp_properties_t p;
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t st = sp_properties_decode(b, n, 1000, &p, &e);
    return st == SP_ERR_MALFORMED && e.code == st && e.offset >= 1000 && e.offset <= 1000 + n &&
           e.field[0] && e.message[0] && (!msg_part || strstr(e.message, msg_part)) && !p.is_null &&
           p.kind == SP_KIND_UNKNOWN;
}

static void test_null(void)
{
    static const uint8_t nul[] = {0xAC, 0xED, 0x00, 0x05, 0x70};
    sp_properties_t p;
    sp_error_t e;
    sp_status_t st = sp_properties_decode(nul, sizeof nul, 0, &p, &e);
    ok(st == SP_OK && p.is_null && p.kind == SP_KIND_UNKNOWN && p.length == 5 && !p.snapshot_name[0],
       "null trailer decodes as is_null");
    uint8_t extra[] = {0xAC, 0xED, 0x00, 0x05, 0x70, 0x70};
    sp_error_clear(&e);
    st = sp_properties_decode(extra, sizeof extra, 40, &p, &e);
    ok(st == SP_ERR_MALFORMED && e.offset == 45 && strstr(e.message, "trailing bytes after the properties object"),
       "byte after a null trailer is trailing bytes at the right offset");
    ok(fails_malformed(nul, 0, "truncated") && fails_malformed(nul, 4, "truncated"),
       "empty and header-only input are truncated");
    ok(sp_properties_decode(NULL, 0, 0, &p, NULL) == SP_ERR_MALFORMED &&
           sp_properties_decode(nul, 5, 0, NULL, &e) == SP_ERR_INVALID,
       "NULL buffer of length 0 is malformed, NULL output is invalid");
}

/* Encode s with the library, compare with the test's own writer and the
 * booleans at offset 258 (section 7.2), decode and compare with s. */
static void test_built(const spec_t *s, size_t want_len, const char *what)
{
    wbuf_t w;
    build(&w, s);
    size_t n = 0;
    uint8_t *b = encode_spec(s, &n);
    sp_properties_t p;
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t st = b ? sp_properties_decode(b, n, 0, &p, &e) : SP_ERR_NOMEM;
    ok(b && n == want_len && n == w.n && !memcmp(b, w.b, n) && !memcmp(b + 258, s->bools, 7) && st == SP_OK &&
           matches_spec(&p, s, n),
       "%s (%zu bytes) encodes as the hand-built bytes and decodes", what, n);
    if (b && st != SP_OK)
        printf("# %s at %llu: %s\n", e.field, (unsigned long long)e.offset, e.message);
    free(b);
}

/* Every proper prefix must fail cleanly, never read past the end (ASan
 * catches that since each prefix is copied to an exact-size buffer). */
static void test_truncations(const spec_t *s, const char *what)
{
    size_t len = 0;
    uint8_t *b = encode_spec(s, &len);
    int bad = b ? -1 : 0;
    for (size_t n = 0; b && n < len && bad < 0; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, b, n);
        if (!fails_malformed(copy, n, NULL))
            bad = (int)n;
        free(copy);
    }
    ok(bad < 0, "%s truncated at each of %zu lengths is malformed (first bad: %d)", what, len, bad);
    uint8_t *more = b ? malloc(len + 1) : NULL;
    if (more) {
        memcpy(more, b, len);
        more[len] = 0x70;
    }
    ok(more && fails_malformed(more, len + 1, "trailing bytes after the properties object"),
       "%s with one extra byte reports trailing bytes", what);
    free(more);
    free(b);
}

/* Every single-byte corruption must decode or fail cleanly. */
static void test_corruptions(const spec_t *s, const char *what)
{
    size_t len = 0;
    uint8_t *b = encode_spec(s, &len);
    static const uint8_t vals[] = {0x00, 0x01, 0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x76, 0x77,
                                   0x78, 0x7A, 0x7C, 0x7E, 0x7F, 0xFF};
    int bad = b ? 0 : 1;
    for (size_t i = 0; b && i < len; i++)
        for (size_t v = 0; v < sizeof vals; v++) {
            uint8_t *copy = malloc(len);
            memcpy(copy, b, len);
            copy[i] = vals[v];
            sp_properties_t p;
            sp_error_t e;
            sp_status_t st = sp_properties_decode(copy, len, 0, &p, &e);
            if ((st != SP_OK && st != SP_ERR_MALFORMED) || memchr(p.snapshot_name, 0, sizeof p.snapshot_name) == NULL)
                bad++;
            free(copy);
        }
    ok(bad == 0, "%s with any single byte corrupted decodes or fails cleanly (%d bad)", what, bad);
    free(b);
}

/* sp_properties_encode must fail with code on *p, leave no output and name field. */
static int encode_fails(const sp_properties_t *p, sp_status_t code, const char *field)
{
    uint8_t *b = (uint8_t *)&b; /* must be reset to NULL */
    size_t n = 99;
    sp_error_t e;
    sp_error_clear(&e);
    sp_status_t st = sp_properties_encode(p, &b, &n, &e);
    return st == code && e.code == code && b == NULL && n == 0 && e.message[0] &&
           (!field || !strcmp(e.field, field));
}

/* Encode *p and compare with want[0..want_len). */
static int encodes_as(const sp_properties_t *p, const uint8_t *want, size_t want_len)
{
    uint8_t *b = NULL;
    size_t n = 0;
    int good = sp_properties_encode(p, &b, &n, NULL) == SP_OK && n == want_len && !memcmp(b, want, n);
    free(b);
    return good;
}

static void test_encode(void)
{
    static const uint8_t nul[] = {0xAC, 0xED, 0x00, 0x05, 0x70};
    sp_properties_t p;
    memset(&p, 0, sizeof p);
    p.is_null = true;
    ok(encodes_as(&p, nul, sizeof nul), "is_null encodes as AC ED 00 05 70");
    spec_to_props(&SAVEPOINT, &p);
    p.is_null = true;
    p.format = SP_FORMAT_UNKNOWN;
    ok(encodes_as(&p, nul, sizeof nul), "is_null wins over the other members");

    /* defaults for empty names */
    wbuf_t w;
    build(&w, &CHECKPOINT);
    spec_to_props(&CHECKPOINT, &p);
    p.snapshot_name[0] = p.sharing_files_strategy[0] = '\0';
    strcpy(p.post_checkpoint_action, "TERMINATE"); /* ignored for checkpoints */
    p.format = SP_FORMAT_NATIVE;
    p.length = 12345; /* ignored */
    ok(encodes_as(&p, w.b, w.n), "checkpoint: empty name and strategy mean Checkpoint / FORWARD_BACKWARD");
    build(&w, &SAVEPOINT);
    spec_to_props(&SAVEPOINT, &p);
    p.snapshot_name[0] = p.post_checkpoint_action[0] = '\0';
    strcpy(p.sharing_files_strategy, "NO_SHARING"); /* ignored for savepoints */
    ok(encodes_as(&p, w.b, w.n), "savepoint: empty name and action mean Savepoint / NONE");

    /* the other names of Flink's sets, checked against the hand-built bytes */
    build(&w, &FULL_CHECKPOINT);
    spec_to_props(&FULL_CHECKPOINT, &p);
    ok(encodes_as(&p, w.b, w.n) && w.n == 604 + 5 - 9, "Full Checkpoint / FORWARD encodes (%zu bytes)", w.n);
    spec_t ns = CHECKPOINT;
    ns.strategy = "NO_SHARING";
    build(&w, &ns);
    spec_to_props(&ns, &p);
    ok(encodes_as(&p, w.b, w.n), "NO_SHARING checkpoint encodes (%zu bytes)", w.n);
    build(&w, &TERMINATE);
    spec_to_props(&TERMINATE, &p);
    ok(encodes_as(&p, w.b, w.n) && w.n == 745 + 10 + 5, "Terminate Savepoint / TERMINATE encodes (%zu bytes)", w.n);

    /* errors */
    memset(&p, 0, sizeof p);
    ok(encode_fails(&p, SP_ERR_INVALID, "kind"), "kind unknown and not null is invalid");
    p.kind = (sp_snapshot_kind_t)7;
    ok(encode_fails(&p, SP_ERR_INVALID, "kind"), "an out-of-range kind is invalid");
    spec_to_props(&SAVEPOINT, &p);
    p.format = SP_FORMAT_UNKNOWN;
    ok(encode_fails(&p, SP_ERR_INVALID, "format"), "savepoint with unknown format is invalid");
    p.format = (sp_savepoint_format_t)9;
    ok(encode_fails(&p, SP_ERR_INVALID, "format"), "savepoint with an out-of-range format is invalid");
    spec_to_props(&SAVEPOINT, &p);
    strcpy(p.snapshot_name, "Checkpoint");
    ok(encode_fails(&p, SP_ERR_INVALID, "snapshot_name"), "savepoint named Checkpoint is invalid");
    strcpy(p.snapshot_name, "savepoint");
    ok(encode_fails(&p, SP_ERR_INVALID, "snapshot_name"), "savepoint names are case-sensitive");
    spec_to_props(&SAVEPOINT, &p);
    strcpy(p.post_checkpoint_action, "STOP");
    ok(encode_fails(&p, SP_ERR_INVALID, "post_checkpoint_action"), "unknown post_checkpoint_action is invalid");
    spec_to_props(&CHECKPOINT, &p);
    strcpy(p.snapshot_name, "Savepoint");
    ok(encode_fails(&p, SP_ERR_INVALID, "snapshot_name"), "checkpoint named Savepoint is invalid");
    spec_to_props(&CHECKPOINT, &p);
    strcpy(p.sharing_files_strategy, "BACKWARD");
    ok(encode_fails(&p, SP_ERR_INVALID, "sharing_files_strategy"), "unknown sharing_files_strategy is invalid");
    spec_to_props(&CHECKPOINT, &p);
    memset(p.snapshot_name, 'C', sizeof p.snapshot_name);
    ok(encode_fails(&p, SP_ERR_INVALID, "snapshot_name"), "a snapshot_name without NUL is invalid");
    spec_to_props(&SAVEPOINT, &p);
    memset(p.post_checkpoint_action, 'N', sizeof p.post_checkpoint_action);
    ok(encode_fails(&p, SP_ERR_INVALID, "post_checkpoint_action"), "a post_checkpoint_action without NUL is invalid");
    uint8_t *b = NULL;
    size_t n = 0;
    sp_error_t e;
    ok(sp_properties_encode(NULL, &b, &n, &e) == SP_ERR_INVALID && !b &&
           sp_properties_encode(&p, NULL, &n, NULL) == SP_ERR_INVALID &&
           sp_properties_encode(&p, &b, NULL, NULL) == SP_ERR_INVALID && !b,
       "NULL properties or outputs are invalid");
}

static void test_bad_header(void)
{
    uint8_t magic[] = {0xCA, 0xFE, 0x00, 0x05, 0x70};
    uint8_t ver[] = {0xAC, 0xED, 0x00, 0x04, 0x70};
    ok(fails_malformed(magic, sizeof magic, "magic") && fails_malformed(ver, sizeof ver, "version"),
       "wrong magic and wrong stream version are malformed");
}

static void test_hostile(void)
{
    wbuf_t w = {.n = 0};
    /* reference to a handle never assigned */
    w16(&w, 0xACED); w16(&w, 5); w8(&w, 0x71); w16(&w, 0x7E); w16(&w, 0);
    ok(fails_malformed(w.b, w.n, "handle"), "reference to an unassigned handle is malformed");

    /* a class that is its own superclass */
    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5); w8(&w, 0x73);
    wdesc(&w, "A", 1, 0x02, 0); w8(&w, 0x78);
    w8(&w, 0x71); w16(&w, 0x7E); w16(&w, 0);
    ok(fails_malformed(w.b, w.n, "still being read"), "class that is its own superclass is malformed");

    /* 32767 fields announced, a handful of bytes present */
    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5); w8(&w, 0x73);
    wdesc(&w, "A", 1, 0x02, 0x7FFF); w8(&w, 'Z'); wutf(&w, "x");
    ok(fails_malformed(w.b, w.n, "field count"), "huge field count is rejected before allocating");

    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5); w8(&w, 0x73); wdesc(&w, "A", 1, 0x02, 0xFFFF);
    ok(fails_malformed(w.b, w.n, "negative"), "negative field count is malformed");

    /* TC_LONGSTRING claiming 2^63 bytes */
    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5); w8(&w, 0x7C); w64(&w, 0x7FFFFFFFFFFFFFFFULL); w8(&w, 'x');
    ok(fails_malformed(w.b, w.n, "truncated"), "huge TC_LONGSTRING length is malformed");

    /* deep nesting through class annotations: object in annotation in ... */
    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5);
    for (int i = 0; i < 500; i++) {
        w8(&w, 0x73);
        wdesc(&w, "A", 1, 0x02, 0);
    }
    ok(fails_malformed(w.b, w.n, "nested"), "nesting beyond the depth limit is malformed");

    /* a top-level object of another class */
    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5); wstring(&w, "hello");
    ok(fails_malformed(w.b, w.n, "CheckpointProperties"), "a string instead of CheckpointProperties is malformed");

    /* block data where an object is expected */
    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5); w8(&w, 0x77); w8(&w, 0);
    ok(fails_malformed(w.b, w.n, "block data"), "top-level block data is malformed");
}

/* Shapes the mapping must tolerate or reject. */
static void test_shapes(void)
{
    spec_t s = CHECKPOINT;
    wbuf_t w;
    sp_properties_t p;
    sp_error_t e;

    /* checkpointType null */
    w.n = 0;
    wproperties_head(&w, &s);
    w8(&w, 0x70);
    ok(sp_properties_decode(w.b, w.n, 0, &p, &e) == SP_OK && p.kind == SP_KIND_UNKNOWN && p.discard_finished &&
           !p.discard_cancelled,
       "null checkpointType: kind unknown, booleans kept");

    /* checkpointType of an unknown class, with a superclass and annotations */
    w.n = 0;
    wproperties_head(&w, &s);
    w8(&w, 0x73);
    wdesc(&w, PKG "FutureType", 7, 0x03, 1); /* writeObject: extra data follows the fields */
    w8(&w, 'I'); wutf(&w, "n");
    w8(&w, 0x77); w8(&w, 2); w8(&w, 0xAB); w8(&w, 0xCD); w8(&w, 0x78); /* annotation block data */
    wdesc(&w, "Base", 8, 0x02, 1); w8(&w, 'J'); wutf(&w, "m"); w8(&w, 0x78); w8(&w, 0x70);
    w64(&w, 42);                                  /* Base.m (super-most first) */
    w16(&w, 0); w16(&w, 7);                       /* FutureType.n */
    w8(&w, 0x7A); w16(&w, 0); w16(&w, 1); w8(&w, 9); w8(&w, 0x78); /* writeObject data */
    sp_status_t st = sp_properties_decode(w.b, w.n, 0, &p, &e);
    ok(st == SP_OK && p.kind == SP_KIND_UNKNOWN && !p.snapshot_name[0],
       "unknown checkpointType class with superclass and block data: kind unknown");
    if (st != SP_OK)
        printf("# %s at %llu: %s\n", e.field, (unsigned long long)e.offset, e.message);

    /* a long snapshot name is truncated, NUL-terminated */
    char longname[200];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    s.name = longname;
    build(&w, &s);
    ok(sp_properties_decode(w.b, w.n, 0, &p, &e) == SP_OK && strlen(p.snapshot_name) == sizeof p.snapshot_name - 1,
       "a 199-byte snapshot name is truncated to fit");

    /* a non-boolean `forced` is an unexpected class shape */
    w.n = 0;
    w16(&w, 0xACED); w16(&w, 5); w8(&w, 0x73);
    wdesc(&w, PKG "CheckpointProperties", 2, 0x02, 1); w8(&w, 'I'); wutf(&w, "forced");
    w8(&w, 0x78); w8(&w, 0x70); w16(&w, 0); w16(&w, 1);
    ok(fails_malformed(w.b, w.n, "boolean"), "a non-boolean forced field is malformed");
}

/* ---- corpus ------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)n + 1)) &&
            fread(data, 1, (size_t)n, f) == (size_t)n) {
            data[n] = '\0';
            *len = (size_t)n;
        } else {
            free(data);
            data = NULL;
        }
    }
    fclose(f);
    return data;
}

/* Case names (sorted) whose expected JSON has non-null properties. */
static char **list_cases(const char *root, size_t *count)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/expected", root);
    DIR *d = opendir(dir);
    *count = 0;
    if (!d)
        return NULL;
    char **names = NULL;
    size_t cap = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".json"))
            continue;
        char path[4096 + 512];
        size_t jlen;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char *json = read_file(path, &jlen);
        cJSON *doc = json ? cJSON_Parse(json) : NULL;
        cJSON *props = cJSON_GetObjectItemCaseSensitive(doc, "properties");
        if (cJSON_IsObject(props)) {
            if (*count == cap) {
                cap = cap ? cap * 2 : 64;
                names = realloc(names, cap * sizeof *names);
            }
            names[(*count)++] = strndup(de->d_name, n - 5);
        }
        cJSON_Delete(doc);
        free(json);
    }
    closedir(d);
    qsort(names, *count, sizeof *names, cmp_str);
    return names;
}

static int json_bool(const cJSON *o, const char *k) { return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k)); }

/* Expected string or "" when null/absent. */
static const char *json_str(const cJSON *o, const char *k)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    return s ? s : "";
}

/* Compare decoded properties with the expected JSON object; why = first mismatch. */
static const char *compare(const sp_properties_t *p, const cJSON *x)
{
    if (json_bool(x, "null"))
        return p->is_null && p->kind == SP_KIND_UNKNOWN ? NULL : "null";
    const char *kind = p->kind == SP_KIND_CHECKPOINT ? "checkpoint" : p->kind == SP_KIND_SAVEPOINT ? "savepoint" : "";
    const char *fmt = p->format == SP_FORMAT_CANONICAL ? "CANONICAL" : p->format == SP_FORMAT_NATIVE ? "NATIVE" : "";
    if (p->is_null) return "null";
    if (strcmp(kind, json_str(x, "kind"))) return "kind";
    if (strcmp(p->snapshot_name, json_str(x, "snapshot_name"))) return "snapshot_name";
    if (strcmp(fmt, json_str(x, "format_type"))) return "format_type";
    if (strcmp(p->post_checkpoint_action, json_str(x, "post_checkpoint_action"))) return "post_checkpoint_action";
    if (strcmp(p->sharing_files_strategy, json_str(x, "sharing_files_strategy"))) return "sharing_files_strategy";
    if (p->forced != json_bool(x, "forced")) return "forced";
    if (p->unclaimed != json_bool(x, "unclaimed")) return "unclaimed";
    if (p->discard_cancelled != json_bool(x, "discard_cancelled")) return "discard_cancelled";
    if (p->discard_failed != json_bool(x, "discard_failed")) return "discard_failed";
    if (p->discard_finished != json_bool(x, "discard_finished")) return "discard_finished";
    if (p->discard_subsumed != json_bool(x, "discard_subsumed")) return "discard_subsumed";
    if (p->discard_suspended != json_bool(x, "discard_suspended")) return "discard_suspended";
    return NULL;
}

static void test_case(const char *root, const char *name)
{
    char path[4096];
    size_t jlen = 0, flen = 0;
    snprintf(path, sizeof path, "%s/expected/%s.json", root, name);
    char *json = read_file(path, &jlen);
    snprintf(path, sizeof path, "%s/flink/%s/_metadata", root, name);
    char *file = read_file(path, &flen);
    cJSON *doc = json ? cJSON_Parse(json) : NULL;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(doc, "properties");
    const cJSON *jl = cJSON_GetObjectItemCaseSensitive(x, "length");
    const char *why = "unreadable expected JSON or _metadata";
    const char *why_enc = "not decoded";
    sp_error_t e, ee;
    sp_error_clear(&e);
    sp_error_clear(&ee);
    if (file && cJSON_IsNumber(jl) && jl->valuedouble >= 0 && (size_t)jl->valuedouble <= flen) {
        size_t tlen = (size_t)jl->valuedouble;
        const uint8_t *trailer = (const uint8_t *)file + flen - tlen;
        sp_properties_t p;
        if (sp_properties_decode(trailer, tlen, flen - tlen, &p, &e) != SP_OK) {
            why = "decode failed";
        } else {
            why = p.length != tlen ? "length" : compare(&p, x);
            uint8_t *b = NULL;
            size_t n = 0;
            if (sp_properties_encode(&p, &b, &n, &ee) != SP_OK)
                why_enc = "encode failed";
            else
                why_enc = n != tlen ? "length differs" : memcmp(b, trailer, n) ? "bytes differ" : NULL;
            free(b);
        }
    }
    ok(why == NULL, "corpus %s%s%s", name, why ? ": " : "", why ? why : "");
    if (e.code != SP_OK)
        printf("# %s at %llu: %s\n", e.field, (unsigned long long)e.offset, e.message);
    ok(why_enc == NULL, "corpus %s re-encodes byte-identically%s%s", name, why_enc ? ": " : "",
       why_enc ? why_enc : "");
    if (ee.code != SP_OK)
        printf("# encode %s: %s\n", ee.field, ee.message);
    cJSON_Delete(doc);
    free(json);
    free(file);
}

#define FIXED_TESTS 45

int main(int argc, char **argv)
{
    struct stat st;
    const char *root = argc > 1 ? argv[1] : NULL;
    size_t ncases = 0;
    char **cases = NULL;
    if (root && stat(root, &st) == 0 && S_ISDIR(st.st_mode))
        cases = list_cases(root, &ncases);
    printf("1..%d\n", FIXED_TESTS + (ncases ? 2 * (int)ncases : 1));

    test_null();
    test_bad_header();
    test_built(&CHECKPOINT, 604, "checkpoint trailer (Appendix A)");
    test_built(&SAVEPOINT, 745, "forced canonical savepoint trailer (Appendix A)");
    test_built(&STOP_NATIVE, 753, "native stop-with-savepoint trailer (section 7.2)");
    test_encode();
    test_truncations(&CHECKPOINT, "checkpoint trailer");
    test_truncations(&SAVEPOINT, "savepoint trailer");
    test_corruptions(&CHECKPOINT, "checkpoint trailer");
    test_corruptions(&SAVEPOINT, "savepoint trailer");
    test_hostile();
    test_shapes();

    if (!ncases)
        printf("ok %d # SKIP ../shared corpus not found\n", ++test_no);
    for (size_t i = 0; i < ncases; i++) {
        test_case(root, cases[i]);
        free(cases[i]);
    }
    free(cases);
    if (test_no != FIXED_TESTS + (ncases ? 2 * (int)ncases : 1))
        printf("# planned tests do not match the %d run\n", test_no);
    return failures ? 1 : 0;
}
