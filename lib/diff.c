/*
 * diff.c - `sp diff`: operators matched by operator ID, per-operator state
 * fingerprints (to tell changed state and to find state moved to another
 * operator ID), and the multiset of file references of both snapshots.
 */
#define _GNU_SOURCE
#include "sp_diff.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_inspect.h"
#include "strmap.h"

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= FNV_PRIME;
    }
    return h;
}

static uint64_t fnv_i64(uint64_t h, int64_t v) { return fnv(h, &v, sizeof v); }

/* A reference's path as compared: an absolute reference into the snapshot's own (local)
 * directory is compared by its path relative to that directory, marked so that it never equals
 * an outside path ("\x01" + relative path), so that a copy whose absolute references were moved
 * with it (sp metadata edit --output) compares equal.  Returns the path to hash. */
static sp_str_t compared_path(const sp_snapshot_t *s, const sp_ref_t *ref, char *buf, size_t n)
{
    sp_str_t p = ref->path;
    if (!s || ref->kind == SP_REF_RELATIVE || ref->kind == SP_REF_INLINE || s->store != s->local || !s->dir_key ||
        !s->dir_key[0])
        return p;
    char key[PATH_MAX];
    if (!sp_snapshot_local_path(s, ref, key, sizeof key))
        return p;
    const char *dirs[2] = {s->dir_key, NULL};
    char real_dir[PATH_MAX], real_key[PATH_MAX];
    if (realpath(s->dir_key, real_dir))
        dirs[1] = real_dir;
    const char *keys[2] = {key, NULL};
    char *slash = strrchr(key, '/');
    if (slash && slash != key) {
        *slash = '\0';
        char rp[PATH_MAX];
        if (realpath(key, rp) && (size_t)snprintf(real_key, sizeof real_key, "%s/%s", rp, slash + 1) < sizeof real_key)
            keys[1] = real_key;
        *slash = '/';
    }
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 2; k++) {
            if (!dirs[d] || !keys[k])
                continue;
            size_t dl = strlen(dirs[d]);
            if (dl > 1 && strncmp(keys[k], dirs[d], dl) == 0 && keys[k][dl] == '/' && keys[k][dl + 1]) {
                int w = snprintf(buf, n, "\x01%s", keys[k] + dl + 1);
                if (w > 0 && (size_t)w < n)
                    return (sp_str_t){(const uint8_t *)buf, (uint32_t)w};
            }
        }
    return p;
}

typedef struct fp {
    uint64_t hash;
    uint64_t refs;      /* leaf references (files and inline) */
} fp_t;

typedef struct fpctx {
    fp_t *fps;
    uint32_t n;
    const sp_snapshot_t *snap;
} fpctx_t;

/* Fingerprint of an operator's state: every leaf reference with its
 * subtask, slot, kind, path, size and, for inline handles, the bytes (not
 * the handle's name: Flink names coordinator state after the operator ID). */
static int fp_ref(const sp_ref_t *ref, void *user)
{
    fpctx_t *c = user;
    if (ref->operator_index >= c->n)
        return 0;
    fp_t *f = &c->fps[ref->operator_index];
    uint64_t h = f->hash;
    h = fnv_i64(h, ref->subtask_index);
    h = fnv_i64(h, ref->slot);
    h = fnv_i64(h, ref->kind);
    h = fnv_i64(h, ref->size);
    h = fnv_i64(h, ref->segment_offset);
    if (ref->kind == SP_REF_INLINE) {
        const sp_handle_t *hd = ref->handle;
        if (hd && hd->tag == SP_TAG_BYTE_STREAM)
            h = fnv(h, hd->u.byte_stream.data.ptr, hd->u.byte_stream.data.len);
        else if (hd && hd->tag == SP_TAG_CHANGELOG_BYTES)
            for (uint32_t i = 0; i < hd->u.changelog_bytes.n_changes; i++)
                h = fnv(h, hd->u.changelog_bytes.changes[i].bytes.ptr, hd->u.changelog_bytes.changes[i].bytes.len);
    } else if (ref->path.len) {
        char buf[PATH_MAX + 2];
        sp_str_t p = compared_path(c->snap, ref, buf, sizeof buf);
        h = fnv(h, p.ptr, p.len);
    }
    f->hash = h;
    f->refs++;
    return 0;
}

static fp_t *fingerprints(const sp_snapshot_t *s)
{
    sp_metadata_t *m = s->meta;
    fp_t *fps = calloc(m->n_operators + 1, sizeof *fps);
    if (!fps)
        return NULL;
    for (uint32_t i = 0; i < m->n_operators; i++) {
        const sp_operator_t *op = &m->operators[i];
        uint64_t h = FNV_OFFSET;
        h = fnv_i64(h, op->fully_finished);
        h = fnv_i64(h, op->n_subtasks);
        for (uint32_t j = 0; j < op->n_subtasks; j++) {
            const sp_subtask_t *st = &op->subtasks[j];
            h = fnv_i64(h, st->index);
            h = fnv_i64(h, st->finished);
            if (m->version == 0 && !st->v0_null)
                h = fnv(h, st->v0_state.ptr, st->v0_state.len);
        }
        fps[i].hash = h;
    }
    fpctx_t c = {fps, m->n_operators, s};
    sp_meta_visit_refs(m, fp_ref, &c);
    return fps;
}

/* ---- references ---- */

typedef struct refctx {
    strmap_t map;
    sp_diff_ref_t *refs;
    uint32_t n, cap;
    bool side_b;
    bool nomem;
    const sp_snapshot_t *snap;
} refctx_t;

static int count_ref(const sp_ref_t *ref, void *user)
{
    refctx_t *c = user;
    if (ref->kind != SP_REF_RELATIVE && ref->kind != SP_REF_ABSOLUTE && ref->kind != SP_REF_SEGMENT)
        return 0;
    /* key: kind, size, offset, path as compared (NUL and '\' escaped) */
    char pbuf[PATH_MAX + 2];
    sp_str_t path = compared_path(c->snap, ref, pbuf, sizeof pbuf);
    size_t cap = 64 + 2 * (size_t)path.len;
    char *key = malloc(cap);
    if (!key) {
        c->nomem = true;
        return 1;
    }
    int k = snprintf(key, cap, "%d:%lld:%lld:", (int)ref->kind, (long long)ref->size,
                     (long long)(ref->kind == SP_REF_SEGMENT ? ref->segment_offset : 0));
    size_t o = (size_t)k;
    for (uint32_t i = 0; i < path.len; i++) {
        uint8_t b = path.ptr[i];
        if (b == 0 || b == '\\') {
            key[o++] = '\\';
            key[o++] = b ? '\\' : '0';
        } else {
            key[o++] = (char)b;
        }
    }
    key[o] = '\0';
    uint32_t existing;
    if (!strmap_put(&c->map, key, c->n, &existing)) {
        free(key);
        c->nomem = true;
        return 1;
    }
    free(key);
    if (existing == UINT32_MAX) {
        if (c->n == c->cap) {
            uint32_t nc = c->cap ? c->cap * 2 : 64;
            sp_diff_ref_t *nr = realloc(c->refs, nc * sizeof *nr);
            if (!nr) {
                c->nomem = true;
                return 1;
            }
            c->refs = nr;
            c->cap = nc;
        }
        sp_diff_ref_t *r = &c->refs[c->n++];
        memset(r, 0, sizeof *r);
        r->kind = ref->kind;
        r->path = ref->path;
        r->size = ref->size;
        r->segment_offset = ref->kind == SP_REF_SEGMENT ? ref->segment_offset : 0;
        existing = c->n - 1;
    }
    if (c->side_b)
        c->refs[existing].count_b++;
    else
        c->refs[existing].count_a++;
    return 0;
}

static bool str_eq(sp_str_t a, sp_str_t b) { return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0); }

static bool blob_eq(sp_blob_t a, sp_blob_t b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

const char *sp_diff_kind_token(sp_diff_kind_t k)
{
    switch (k) {
    case SP_DIFF_SAME: return "same";
    case SP_DIFF_ADDED: return "added";
    case SP_DIFF_REMOVED: return "removed";
    case SP_DIFF_CHANGED: return "changed";
    case SP_DIFF_MOVED: return "moved";
    }
    return "unknown";
}

static unsigned compare_ops(const sp_metadata_t *ma, const sp_operator_t *a, const sp_metadata_t *mb,
                            const sp_operator_t *b, const fp_t *fa, const fp_t *fb, uint64_t ba, uint64_t bb)
{
    unsigned c = 0;
    if (a->parallelism != b->parallelism)
        c |= SP_DIFF_PARALLELISM;
    if ((ma->version == 0) != (mb->version == 0) || (ma->version > 0 && a->max_parallelism != b->max_parallelism))
        c |= SP_DIFF_MAX_PARALLELISM;
    if (ba != bb)
        c |= SP_DIFF_STATE_BYTES;
    if (fa->hash != fb->hash || fa->refs != fb->refs)
        c |= SP_DIFF_STATE;
    if (!str_eq(a->uid, b->uid))
        c |= SP_DIFF_UID;
    if (!str_eq(a->name, b->name))
        c |= SP_DIFF_NAME;
    return c;
}

sp_status_t sp_diff(const sp_snapshot_t *a, const sp_snapshot_t *b, sp_diff_result_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    const sp_metadata_t *ma = a->meta, *mb = b->meta;
    sp_summary_t sa, sb;
    memset(&sa, 0, sizeof sa);
    memset(&sb, 0, sizeof sb);
    fp_t *fa = NULL, *fb = NULL;
    int32_t *b_of_a = NULL, *a_of_b = NULL;
    refctx_t rc;
    memset(&rc, 0, sizeof rc);
    sp_status_t s = sp_summarize(a, &sa, err);
    if (!s)
        s = sp_summarize(b, &sb, err);
    if (s)
        goto done;
    fa = fingerprints(a);
    fb = fingerprints(b);
    b_of_a = calloc(ma->n_operators + 1, sizeof *b_of_a);
    a_of_b = calloc(mb->n_operators + 1, sizeof *a_of_b);
    out->ops = calloc((size_t)ma->n_operators + mb->n_operators + 1, sizeof *out->ops);
    if (!fa || !fb || !b_of_a || !a_of_b || !out->ops) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto done;
    }

    out->version_differs = ma->version != mb->version;
    out->checkpoint_id_differs = ma->checkpoint_id != mb->checkpoint_id;
    out->master_states_differ = ma->n_master_states != mb->n_master_states;
    for (uint32_t i = 0; !out->master_states_differ && i < ma->n_master_states; i++) {
        const sp_master_state_t *x = &ma->master_states[i], *y = &mb->master_states[i];
        out->master_states_differ = x->hook_version != y->hook_version || !str_eq(x->name, y->name) ||
                                    !blob_eq(x->data, y->data);
    }
    out->properties_differ = ma->has_trailer != mb->has_trailer || !blob_eq(ma->trailer, mb->trailer);

    /* operators by ID */
    for (uint32_t j = 0; j < mb->n_operators; j++)
        a_of_b[j] = -1;
    for (uint32_t i = 0; i < ma->n_operators; i++) {
        b_of_a[i] = -1;
        for (uint32_t j = 0; j < mb->n_operators; j++)
            if (a_of_b[j] < 0 && memcmp(ma->operators[i].id, mb->operators[j].id, 16) == 0) {
                b_of_a[i] = (int32_t)j;
                a_of_b[j] = (int32_t)i;
                break;
            }
    }
    /* moved: identical non-empty state under another ID */
    int32_t *moved_to = calloc(ma->n_operators + 1, sizeof *moved_to);
    bool *b_taken = calloc(mb->n_operators + 1, sizeof *b_taken);
    if (!moved_to || !b_taken) {
        free(moved_to);
        free(b_taken);
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto done;
    }
    for (uint32_t i = 0; i < ma->n_operators; i++) {
        moved_to[i] = -1;
        if (b_of_a[i] >= 0 || fa[i].refs == 0)
            continue;
        for (uint32_t j = 0; j < mb->n_operators; j++)
            if (a_of_b[j] < 0 && !b_taken[j] && fb[j].refs == fa[i].refs && fb[j].hash == fa[i].hash) {
                moved_to[i] = (int32_t)j;
                b_taken[j] = true;
                break;
            }
    }
    for (uint32_t i = 0; i < ma->n_operators; i++) {
        sp_diff_op_t *d = &out->ops[out->n_ops++];
        d->a_index = (int32_t)i;
        d->a_state_bytes = sa.operators[i].state_bytes;
        int32_t j = b_of_a[i] >= 0 ? b_of_a[i] : moved_to[i];
        d->b_index = j;
        if (j < 0) {
            d->kind = SP_DIFF_REMOVED;
            out->removed++;
            continue;
        }
        d->b_state_bytes = sb.operators[j].state_bytes;
        d->changes = compare_ops(ma, &ma->operators[i], mb, &mb->operators[j], &fa[i], &fb[j], d->a_state_bytes,
                                 d->b_state_bytes);
        if (b_of_a[i] < 0) {
            d->kind = SP_DIFF_MOVED;
            d->changes |= SP_DIFF_OPERATOR_ID;
            out->moved++;
        } else if (d->changes) {
            d->kind = SP_DIFF_CHANGED;
            out->changed++;
        } else {
            d->kind = SP_DIFF_SAME;
            out->same++;
        }
    }
    for (uint32_t j = 0; j < mb->n_operators; j++) {
        if (a_of_b[j] >= 0 || b_taken[j])
            continue;
        sp_diff_op_t *d = &out->ops[out->n_ops++];
        d->kind = SP_DIFF_ADDED;
        d->a_index = -1;
        d->b_index = (int32_t)j;
        d->b_state_bytes = sb.operators[j].state_bytes;
        out->added++;
    }
    free(moved_to);
    free(b_taken);

    /* references: a multiset each, compared */
    rc.side_b = false;
    rc.snap = a;
    sp_meta_visit_refs(a->meta, count_ref, &rc);
    rc.side_b = true;
    rc.snap = b;
    if (!rc.nomem)
        sp_meta_visit_refs(b->meta, count_ref, &rc);
    if (rc.nomem) {
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        goto done;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < rc.n; i++) {
        sp_diff_ref_t *r = &rc.refs[i];
        if (r->count_a == r->count_b)
            continue;
        if (r->count_a > r->count_b)
            out->refs_only_a += r->count_a - r->count_b;
        else
            out->refs_only_b += r->count_b - r->count_a;
        rc.refs[k++] = *r;
    }
    out->n_refs = k;
    out->refs = rc.refs;
    rc.refs = NULL;
    out->identical = !out->version_differs && !out->checkpoint_id_differs && !out->master_states_differ &&
                     !out->properties_differ && out->same == out->n_ops && out->n_refs == 0;
done:
    strmap_free(&rc.map);
    free(rc.refs);
    free(fa);
    free(fb);
    free(b_of_a);
    free(a_of_b);
    sp_summary_free(&sa);
    sp_summary_free(&sb);
    if (s)
        sp_diff_result_free(out);
    return s;
}

void sp_diff_result_free(sp_diff_result_t *r)
{
    if (!r)
        return;
    free(r->ops);
    free(r->refs);
    memset(r, 0, sizeof *r);
}
