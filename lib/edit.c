/*
 * edit.c - `sp metadata edit`: apply metadata-only edits to a decoded model
 * and write the result as a new snapshot directory or in place (sp_edit.h).
 */
#define _GNU_SOURCE
#include "sp_edit.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sp_fs.h"
#include "sp_inspect.h"
#include "sp_mutf8.h"
#include "sp_record.h"
#include "sp_uid.h"
#include "sp_verify.h"
#include "strmap.h"

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* ------------------------------------------------------------------ */
/* parsing                                                             */
/* ------------------------------------------------------------------ */

static const char *kind_option(sp_edit_kind_t k)
{
    return k == SP_EDIT_DROP_OPERATOR ? "--drop-operator" : k == SP_EDIT_SET_UID ? "--set-uid" : "--rewrite-prefix";
}

sp_status_t sp_edit_parse(sp_edit_kind_t kind, const char *text, sp_edit_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    if (!text || !(out->text_ = xstrdup(text)))
        return sp_error_set(err, text ? SP_ERR_NOMEM : SP_ERR_INVALID, SP_NO_OFFSET, "", "%s needs a value",
                            kind_option(kind));
    char *t = out->text_;
    sp_status_t s = SP_OK;
    if (kind == SP_EDIT_DROP_OPERATOR) {
        s = sp_opref_parse(t, &out->target, err);
    } else {
        char *eq = strchr(t, '=');
        if (!eq || eq == t || !eq[1]) {
            s = sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, kind_option(kind), "'%s': expected %s", text,
                             kind == SP_EDIT_SET_UID ? "ID=NEW_UID or uid:OLD_UID=NEW_UID" : "FROM=TO");
        } else {
            *eq = '\0';
            if (kind == SP_EDIT_SET_UID) {
                s = sp_opref_parse(t, &out->target, err);
                out->new_uid = eq + 1;
                uint8_t *tmp = malloc(3 * strlen(out->new_uid) + 1);
                long ml = tmp ? sp_utf8_to_mutf8(out->new_uid, strlen(out->new_uid), tmp) : -1;
                free(tmp);
                if (!s && ml < 0)
                    s = sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "--set-uid", "'%s': the new uid is not valid UTF-8",
                                     text);
                if (!s && ml > 65535)
                    s = sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "--set-uid",
                                     "the new uid has %ld bytes; Java's writeUTF stores at most 65535", ml);
            } else {
                out->from = t;
                out->to = eq + 1;
            }
        }
    }
    if (s)
        sp_edit_free(out);
    return s;
}

void sp_edit_free(sp_edit_t *e)
{
    if (e) {
        free(e->text_);
        memset(e, 0, sizeof *e);
    }
}

/* ------------------------------------------------------------------ */
/* applying                                                            */
/* ------------------------------------------------------------------ */

typedef struct opstat {
    uint32_t op;
    uint64_t bytes;
    uint32_t files;
} opstat_t;

static int count_op(const sp_ref_t *ref, void *user)
{
    opstat_t *c = user;
    if (ref->operator_index != c->op || ref->kind == SP_REF_DIRECTORY)
        return 0;
    if (ref->size > 0)
        c->bytes += (uint64_t)ref->size;
    if (ref->kind != SP_REF_INLINE)
        c->files++;
    return 0;
}

static const char *opref_text(const sp_edit_t *e, char *buf, size_t n)
{
    char hex[33];
    sp_id_to_hex(e->target.id, hex);
    if (e->target.by_uid)
        snprintf(buf, n, "uid '%s' (operator ID %s)", e->target.uid, hex);
    else
        snprintf(buf, n, "operator %s", hex);
    return buf;
}

typedef struct rwctx {
    sp_metadata_t *m;
    const uint8_t *from, *to;
    size_t from_len, to_len;
    uint64_t count;
    sp_status_t status;
    sp_error_t *err;
} rwctx_t;

/* An absolute path or URI: "/..." or "scheme:..." */
static bool looks_absolute(const uint8_t *p, size_t n)
{
    if (n && p[0] == '/')
        return true;
    size_t i = 0;
    while (i < n && ((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9') ||
                     p[i] == '+' || p[i] == '-' || p[i] == '.'))
        i++;
    return i > 0 && i < n && p[i] == ':';
}

static int rewrite_ref(const sp_ref_t *ref, void *user)
{
    rwctx_t *c = user;
    if ((ref->kind != SP_REF_ABSOLUTE && ref->kind != SP_REF_SEGMENT && ref->kind != SP_REF_DIRECTORY) ||
        !ref->handle)
        return 0;
    const sp_str_t p = ref->path;
    if (p.len < c->from_len || memcmp(p.ptr, c->from, c->from_len) != 0)
        return 0;
    /* at a path boundary: FROM ends with '/', or the path ends or continues with '/' */
    if (!(c->from_len && c->from[c->from_len - 1] == '/') && p.len > c->from_len && p.ptr[c->from_len] != '/')
        return 0;
    size_t n = c->to_len + (p.len - c->from_len);
    if (n > 65535) {
        c->status = sp_error_set(c->err, SP_ERR_INVALID, ref->handle->offset, "path",
                                 "the rewritten path would have %zu bytes; Java's writeUTF stores at most 65535", n);
        return 1;
    }
    uint8_t *np = sp_meta_alloc(c->m, n + 1);
    if (!np) {
        c->status = sp_error_set(c->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
        return 1;
    }
    memcpy(np, c->to, c->to_len);
    memcpy(np + c->to_len, p.ptr + c->from_len, p.len - c->from_len);
    if (!looks_absolute(np, n)) {
        c->status = sp_error_set(c->err, SP_ERR_INVALID, ref->handle->offset, "path",
                                 "rewriting \"%.*s\" gives \"%.*s\", which is not an absolute path or URI",
                                 (int)(p.len > 200 ? 200 : p.len), (const char *)p.ptr, (int)(n > 200 ? 200 : n),
                                 (const char *)np);
        return 1;
    }
    sp_str_t ns = {np, (uint32_t)n};
    sp_handle_t *h = ref->handle;
    if (ref->kind == SP_REF_ABSOLUTE)
        h->u.file.path = ns;
    else if (ref->kind == SP_REF_SEGMENT)
        h->u.segment.path = ns;
    else if (p.ptr == h->u.operator_stream.task_owned_dir.ptr)
        h->u.operator_stream.task_owned_dir = ns;
    else
        h->u.operator_stream.shared_dir = ns;
    c->count++;
    return 0;
}

static sp_status_t edit_error(sp_error_t *err, uint32_t i, sp_status_t code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static sp_status_t edit_error(sp_error_t *err, uint32_t i, sp_status_t code, const char *fmt, ...)
{
    char msg[512], field[32];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(field, sizeof field, "edit[%u]", i);
    return sp_error_set(err, code, SP_NO_OFFSET, field, "%s", msg);
}

sp_status_t sp_edit_apply(sp_snapshot_t *snap, const sp_edit_t *edits, uint32_t n, sp_edit_outcome_t *outcomes,
                          sp_error_t *err)
{
    sp_metadata_t *m = snap->meta;
    for (uint32_t i = 0; i < n; i++) {
        const sp_edit_t *e = &edits[i];
        sp_edit_outcome_t oc;
        memset(&oc, 0, sizeof oc);
        char what[200];
        if (e->kind == SP_EDIT_DROP_OPERATOR || e->kind == SP_EDIT_SET_UID) {
            int32_t idx = sp_opref_find(m, &e->target);
            if (idx < 0)
                return edit_error(err, i, SP_ERR_INVALID, "%s %s: no such operator in the snapshot",
                                  kind_option(e->kind), opref_text(e, what, sizeof what));
            sp_operator_t *op = &m->operators[idx];
            opstat_t st = {(uint32_t)idx, 0, 0};
            sp_meta_visit_refs(m, count_op, &st);
            memcpy(oc.old_id, op->id, 16);
            oc.state_bytes = st.bytes;
            oc.files = st.files;
            if (e->kind == SP_EDIT_DROP_OPERATOR) {
                memmove(op, op + 1, (size_t)(m->n_operators - (uint32_t)idx - 1) * sizeof *op);
                m->n_operators--;
            } else {
                uint8_t nid[16];
                char oldhex[33], newhex[33];
                sp_uid_to_operator_id(e->new_uid, strlen(e->new_uid), nid);
                sp_id_to_hex(op->id, oldhex);
                sp_id_to_hex(nid, newhex);
                for (uint32_t k = 0; k < m->n_operators; k++)
                    if ((int32_t)k != idx && memcmp(m->operators[k].id, nid, 16) == 0)
                        return edit_error(err, i, SP_ERR_INVALID,
                                          "--set-uid: uid '%s' has operator ID %s, which the snapshot already has "
                                          "(operators[%u]); drop that operator first if its state is to be replaced",
                                          e->new_uid, newhex, k);
                memcpy(op->id, nid, 16);
                memcpy(oc.new_id, nid, 16);
                if (m->version >= 5) {
                    size_t ul = strlen(e->new_uid);
                    uint8_t *mu = malloc(3 * ul + 1);
                    long ml = mu ? sp_utf8_to_mutf8(e->new_uid, ul, mu) : -1;
                    if (ml < 0 || ml > 65535) {
                        free(mu);
                        return edit_error(err, i, mu ? SP_ERR_INVALID : SP_ERR_NOMEM, "--set-uid: the new uid cannot be stored");
                    }
                    op->uid = sp_meta_str(m, mu, (size_t)ml);
                    free(mu);
                    if (ml > 0 && !op->uid.ptr)
                        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
                }
                /* Flink names operator-coordinator state after the operator ID */
                sp_handle_t *co = op->coordinator;
                if (co && co->tag == SP_TAG_BYTE_STREAM && co->u.byte_stream.name.len == 32 &&
                    memcmp(co->u.byte_stream.name.ptr, oldhex, 32) == 0)
                    co->u.byte_stream.name = sp_meta_str(m, newhex, 32);
            }
        } else {
            size_t fl = strlen(e->from), tl = strlen(e->to);
            uint8_t *f = malloc(3 * fl + 1), *t = malloc(3 * tl + 1);
            long fml = f ? sp_utf8_to_mutf8(e->from, fl, f) : -1;
            long tml = t ? sp_utf8_to_mutf8(e->to, tl, t) : -1;
            if (fml <= 0 || tml <= 0) {
                free(f);
                free(t);
                return edit_error(err, i, f && t ? SP_ERR_INVALID : SP_ERR_NOMEM,
                                  "--rewrite-prefix: FROM and TO must be non-empty UTF-8");
            }
            rwctx_t c = {m, f, t, (size_t)fml, (size_t)tml, 0, SP_OK, err};
            sp_meta_visit_refs(m, rewrite_ref, &c);
            free(f);
            free(t);
            if (c.status) {
                if (err)
                    snprintf(err->field, sizeof err->field, "edit[%u]", i);
                return c.status;
            }
            if (c.count == 0)
                return edit_error(err, i, SP_ERR_INVALID,
                                  "--rewrite-prefix: no absolute reference starts with '%s' (at a path boundary); "
                                  "'sp inspect --files' lists them",
                                  e->from);
            oc.rewritten = c.count;
        }
        if (outcomes)
            outcomes[i] = oc;
    }
    return SP_OK;
}

/* ------------------------------------------------------------------ */
/* writing                                                             */
/* ------------------------------------------------------------------ */

static sp_status_t io_fail(sp_error_t *err, const char *path, const char *what)
{
    int e = errno;
    sp_error_set_file(err, path);
    return sp_error_set(err, e == ENOENT ? SP_ERR_NOT_FOUND : SP_ERR_IO, SP_NO_OFFSET, "", "%s: %s", what,
                        strerror(e));
}

/* The real path of p; for a p that does not exist (or whose last step is not to be
 * followed), its parent's real path and its last name.  false when neither resolves. */
static bool real_of(const char *p, bool follow_last, char *out)
{
    if (follow_last && realpath(p, out))
        return true;
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        n--;
    if (n >= PATH_MAX)
        return false;
    char tmp[PATH_MAX];
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    char *slash = strrchr(tmp, '/');
    char rp[PATH_MAX];
    if (!slash)
        return realpath(".", rp) && snprintf(out, PATH_MAX, "%s/%s", strcmp(rp, "/") ? rp : "", tmp) < PATH_MAX;
    if (slash == tmp) {
        snprintf(out, PATH_MAX, "%s", tmp);
        return true;
    }
    *slash = '\0';
    if (!realpath(tmp, rp))
        return false;
    return snprintf(out, PATH_MAX, "%s/%s", strcmp(rp, "/") ? rp : "", slash + 1) < PATH_MAX;
}

/* a equals b or lies under it */
static bool same_or_under(const char *a, const char *b)
{
    size_t n = strlen(b);
    if (n == 1 && b[0] == '/')
        return a[0] == '/';
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

static sp_status_t encode_checked(const sp_metadata_t *m, uint8_t **bytes, size_t *len, sp_error_t *err)
{
    sp_status_t s = sp_meta_encode(m, bytes, len, err);
    if (s)
        return s;
    sp_metadata_t *check;
    if ((s = sp_meta_decode(*bytes, *len, NULL, &check, err))) {
        free(*bytes);
        *bytes = NULL;
        return s;
    }
    sp_meta_free(check);
    return SP_OK;
}

static sp_status_t verify_problems(const sp_snapshot_t *snap, const char *what, sp_status_t code, sp_error_t *err)
{
    sp_verify_result_t vr;
    sp_status_t s = sp_verify(snap, &vr, err);
    if (s)
        return s;
    if (vr.n_problems) {
        char path[PATH_MAX];
        const sp_verify_item_t *p = &vr.problems[0];
        if (!sp_snapshot_local_path(snap, &p->ref, path, sizeof path))
            snprintf(path, sizeof path, "%.*s", (int)p->ref.path.len, (const char *)p->ref.path.ptr);
        sp_error_set_file(err, path);
        s = sp_error_set(err, code, SP_NO_OFFSET, "", "%s: %u problem%s, the first: %s", what, vr.n_problems,
                         vr.n_problems == 1 ? "" : "s", sp_problem_name(p->problem));
    }
    sp_verify_result_free(&vr);
    return s;
}

static sp_status_t write_in_place(sp_snapshot_t *snap, const sp_edit_write_options_t *opts,
                                  sp_edit_write_result_t *res, sp_error_t *err)
{
    if (snap->store != snap->local)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location",
                            "%s: in-place edits need a local directory; write a new snapshot with --output",
                            snap->location);
    sp_record_summary_t rs;
    sp_status_t s = sp_record_read(snap->dir_key, &rs, err);
    if (s)
        return s;
    /* the record sits beside the real directory: a link to the snapshot must not hide it */
    char real[PATH_MAX];
    if (!rs.restores_claim && realpath(snap->dir_key, real) && strcmp(real, snap->dir_key) != 0) {
        sp_record_summary_t rr;
        if ((s = sp_record_read(real, &rr, err)))
            return s;
        rs.restores_claim += rr.restores_claim;
    }
    if (rs.restores_claim) {
        sp_error_set_file(err, snap->dir);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "a job was restored from this snapshot in CLAIM mode: Flink owns it now; write an edited "
                            "copy with --output instead");
    }
    if ((s = verify_problems(snap, "the edited snapshot would not verify; nothing was written", SP_ERR_REFUSED, err)))
        return s;
    uint8_t *bytes;
    size_t len;
    if ((s = encode_checked(snap->meta, &bytes, &len, err)))
        return s;
    /* the previous metadata, beside the snapshot directory (or beside a metadata file not named _metadata) */
    const char *mbase = strrchr(snap->metadata_path, '/');
    mbase = mbase ? mbase + 1 : snap->metadata_path;
    const char *base = strcmp(mbase, "_metadata") == 0 ? snap->dir_key : snap->metadata_path;
    if (strcmp(mbase, "_metadata") == 0 && strcmp(snap->dir_key, "/") == 0) {
        free(bytes);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "location", "a snapshot at / has no place beside it");
    }
    time_t t = (time_t)(opts->now_ms / 1000);
    struct tm tm;
    char stamp[32];
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    size_t bl = strlen(base) + sizeof SP_EDIT_BACKUP_INFIX + sizeof stamp + 16;
    char *backup = malloc(bl);
    if (!backup) {
        free(bytes);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    for (int k = 1;; k++) {
        if (k == 1)
            snprintf(backup, bl, "%s%s%s", base, SP_EDIT_BACKUP_INFIX, stamp);
        else
            snprintf(backup, bl, "%s%s%s-%d", base, SP_EDIT_BACKUP_INFIX, stamp, k);
        s = sp_fs_write_atomic(backup, snap->bytes, snap->size, false, err);
        if (s != SP_ERR_REFUSED || k > 1000)
            break;
        sp_error_clear(err);
    }
    if (s) {
        free(backup);
        free(bytes);
        return s;
    }
    res->backup_path = backup;
    s = sp_fs_write_atomic(snap->metadata_path, bytes, len, true, err);
    free(bytes);
    if (s)
        return s;
    res->metadata_path = xstrdup(snap->metadata_path);
    /* the result, read back from storage */
    sp_snapshot_t *again;
    if ((s = sp_snapshot_open(snap->metadata_path, 0, &again, err)))
        return s;
    char what[PATH_MAX + 96];
    snprintf(what, sizeof what, "the edited snapshot does not verify (the previous metadata is kept as %s)",
             backup);
    s = verify_problems(again, what, SP_ERR_IO, err);
    sp_snapshot_close(again);
    return s;
}

/* ---- output: a new directory ---- */

typedef struct place {
    sp_store_t *store;     /* where the source is */
    char *src;             /* key in store */
    char *rel;             /* path under the new directory */
    int64_t size;          /* recorded size, -1 unknown (segments: whole file) */
    bool dir;              /* a file-merging directory: created, nothing copied */
} place_t;

typedef struct octx {
    sp_snapshot_t *snap;
    const char *dst;       /* final directory (absolute) */
    place_t *v;
    uint32_t n, cap;
    strmap_t by_rel;
    const char *real_dir;  /* realpath of the original directory (local), NULL otherwise */
    uint64_t external;
    sp_status_t status;
    sp_error_t *err;
} octx_t;

static bool add_place(octx_t *c, sp_store_t *store, const char *src, const char *rel, int64_t size, bool dir)
{
    uint32_t existing;
    if (!strmap_put(&c->by_rel, rel, c->n, &existing))
        return false;
    if (existing != UINT32_MAX)
        return true;
    if (c->n == c->cap) {
        uint32_t nc = c->cap ? c->cap * 2 : 64;
        place_t *nv = realloc(c->v, nc * sizeof *nv);
        if (!nv)
            return false;
        c->v = nv;
        c->cap = nc;
    }
    place_t *p = &c->v[c->n];
    p->store = store;
    p->src = xstrdup(src);
    p->rel = xstrdup(rel);
    p->size = size;
    p->dir = dir;
    if (!p->src || !p->rel) {
        free(p->src);
        free(p->rel);
        return false;
    }
    c->n++;
    return true;
}

static int plan_ref(const sp_ref_t *ref, void *user)
{
    octx_t *c = user;
    if (ref->kind == SP_REF_INLINE)
        return 0;
    sp_snapshot_t *snap = c->snap;
    char key[PATH_MAX];
    if (ref->kind == SP_REF_RELATIVE) {
        if (!sp_snapshot_ref_location(snap, ref, key, sizeof key)) {
            c->status = sp_error_set(c->err, SP_ERR_INVALID, SP_NO_OFFSET, "path", "path too long");
            return 1;
        }
        char rel[PATH_MAX];
        snprintf(rel, sizeof rel, "%.*s", (int)ref->path.len, (const char *)ref->path.ptr);
        if (!add_place(c, snap->store, key, rel, ref->size, false))
            goto nomem;
        return 0;
    }
    /* absolute: inside the original directory (local snapshots) it moves with the copy; compared
     * resolved (the directory part of the reference and the snapshot directory, through links) */
    char real[PATH_MAX];
    size_t dl = c->real_dir ? strlen(c->real_dir) : 0;
    if (snap->store != snap->local || !c->real_dir || !sp_snapshot_local_path(snap, ref, key, sizeof key) ||
        !ref->handle || !real_of(key, ref->kind == SP_REF_DIRECTORY, real) || !same_or_under(real, c->real_dir) ||
        strlen(real) <= dl + (dl > 1)) {
        if (ref->kind != SP_REF_DIRECTORY)
            c->external++;
        return 0;
    }
    const char *rel = real + dl + (dl > 1);
    if (!add_place(c, snap->local, real, rel, ref->kind == SP_REF_ABSOLUTE ? ref->size : -1,
                   ref->kind == SP_REF_DIRECTORY))
        goto nomem;
    /* the stored form keeps its scheme prefix ("file:", "file://") */
    size_t local_len = strlen(key);
    size_t prefix = ref->path.len >= local_len ? ref->path.len - local_len : 0;
    size_t n = prefix + strlen(c->dst) + 1 + strlen(rel);
    if (n > 65535) {
        c->status = sp_error_set(c->err, SP_ERR_INVALID, SP_NO_OFFSET, "path", "the new path is too long");
        return 1;
    }
    uint8_t *np = sp_meta_alloc(snap->meta, n + 1);
    if (!np)
        goto nomem;
    memcpy(np, ref->path.ptr, prefix);
    snprintf((char *)np + prefix, n + 1 - prefix, "%s/%s", c->dst, rel);
    sp_str_t ns = {np, (uint32_t)n};
    sp_handle_t *h = ref->handle;
    if (ref->kind == SP_REF_ABSOLUTE)
        h->u.file.path = ns;
    else if (ref->kind == SP_REF_SEGMENT)
        h->u.segment.path = ns;
    else if (ref->path.ptr == h->u.operator_stream.task_owned_dir.ptr)
        h->u.operator_stream.task_owned_dir = ns;
    else
        h->u.operator_stream.shared_dir = ns;
    return 0;
nomem:
    c->status = sp_error_set(c->err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    return 1;
}

/* Reflink, else hard link (unless forbidden), else copy, src -> dst (a new file). */
static sp_status_t place_local(const char *src, const char *dst, int64_t size, bool no_hardlink,
                               sp_edit_write_result_t *res, sp_error_t *err)
{
    struct stat st;
    if (lstat(src, &st) != 0) {
        sp_status_t s = io_fail(err, src, "referenced file");
        if (s == SP_ERR_NOT_FOUND && err)
            snprintf(err->message, sizeof err->message, "referenced file is missing; run sp verify, nothing was written");
        return s;
    }
    if (S_ISLNK(st.st_mode)) {
        sp_error_set_file(err, src);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "referenced file is a symbolic link; sp does not follow links out of a snapshot");
    }
    if (!S_ISREG(st.st_mode)) {
        sp_error_set_file(err, src);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "referenced path is not a regular file");
    }
    if (size >= 0 && st.st_size != size) {
        sp_error_set_file(err, src);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "file has %lld bytes but the metadata records %lld; run sp verify, nothing was written",
                            (long long)st.st_size, (long long)size);
    }
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (in < 0)
        return io_fail(err, src, "cannot open");
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return io_fail(err, dst, "cannot create");
    }
    if (ioctl(out, FICLONE, in) == 0) {
        close(in);
        if (close(out) != 0)
            return io_fail(err, dst, "cannot write");
        res->files_reflinked++;
        res->bytes += (uint64_t)st.st_size;
        return SP_OK;
    }
    if (!no_hardlink) {
        close(out);
        unlink(dst);
        if (link(src, dst) == 0) {
            close(in);
            res->files_hardlinked++;
            res->bytes += (uint64_t)st.st_size;
            return SP_OK;
        }
        out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (out < 0) {
            close(in);
            return io_fail(err, dst, "cannot create");
        }
    }
    off_t left = st.st_size;
    while (left > 0) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        left -= n;
    }
    sp_status_t s = SP_OK;
    char buf[1 << 16];
    while (left > 0 && !s) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            s = n < 0 ? io_fail(err, src, "cannot read") : SP_OK;
            break;
        }
        for (ssize_t w = 0; w < n && !s;) {
            ssize_t k = write(out, buf + w, (size_t)(n - w));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                s = io_fail(err, dst, "cannot write");
            else
                w += k;
        }
        left -= n;
    }
    close(in);
    if (close(out) != 0 && !s)
        s = io_fail(err, dst, "cannot write");
    if (!s) {
        res->files_copied++;
        res->bytes += (uint64_t)st.st_size;
    }
    return s;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

/* Remove our own temporary directory (never follows links). */
static void remove_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static sp_status_t write_output(sp_snapshot_t *snap, const sp_edit_write_options_t *opts, sp_edit_write_result_t *res,
                                sp_error_t *err)
{
    sp_location_t loc;
    sp_status_t s = sp_location_parse(opts->output, &loc, err);
    if (s)
        return s;
    if (loc.kind != SP_LOC_LOCAL) {
        sp_location_free(&loc);
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "output",
                            "%s: --output writes a local directory (sp relocate writes archives)", opts->output);
    }
    char *dst = xstrdup(loc.key);
    sp_location_free(&loc);
    if (!dst)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    struct stat st;
    if (lstat(dst, &st) == 0) {
        sp_error_set_file(err, dst);
        free(dst);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "",
                            "already exists; the edited snapshot goes to a new directory");
    }
    /* compared resolved: the snapshot or the output may be reached through a link */
    char *real_dir = snap->store == snap->local ? realpath(snap->dir_key, NULL) : NULL;
    char real_dst[PATH_MAX];
    size_t dl = strlen(snap->dir_key);
    if (snap->store == snap->local &&
        ((strcmp(dst, snap->dir_key) == 0 || (strncmp(dst, snap->dir_key, dl) == 0 && dst[dl] == '/')) ||
         (real_dir && real_of(dst, false, real_dst) && same_or_under(real_dst, real_dir)))) {
        sp_error_set_file(err, dst);
        free(dst);
        free(real_dir);
        return sp_error_set(err, SP_ERR_REFUSED, SP_NO_OFFSET, "", "the output lies inside the original snapshot");
    }
    /* the edited metadata's references must hold before anything is created (a retry must not meet
     * a half-made output) */
    if ((s = verify_problems(snap, "the edited snapshot would not verify; nothing was written", SP_ERR_REFUSED,
                             err))) {
        free(dst);
        free(real_dir);
        return s;
    }
    size_t tl = strlen(dst) + 32;
    char *tmp = malloc(tl);
    if (!tmp) {
        free(dst);
        free(real_dir);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    snprintf(tmp, tl, "%s.sp-tmp-%ld-XXXXXX", dst, (long)getpid());
    if (!mkdtemp(tmp) || chmod(tmp, 0755) != 0) {
        s = io_fail(err, tmp, "cannot create the new snapshot directory");
        free(tmp);
        free(dst);
        free(real_dir);
        return s;
    }
    octx_t c;
    memset(&c, 0, sizeof c);
    c.real_dir = real_dir;
    c.snap = snap;
    c.dst = dst;
    c.err = err;
    sp_meta_visit_refs(snap->meta, plan_ref, &c);
    s = c.status;
    res->external_refs = c.external;
    char path[PATH_MAX * 2];
    for (uint32_t i = 0; !s && i < c.n; i++) {
        place_t *p = &c.v[i];
        snprintf(path, sizeof path, "%s/%s", tmp, p->rel);
        if (p->dir) {
            if (sp_fs_mkdirs(path) != 0)
                s = io_fail(err, path, "cannot create directory");
            continue;
        }
        if (sp_fs_mkdirs_parent(path) != 0) {
            s = io_fail(err, path, "cannot create the parent directory");
            break;
        }
        if (p->store == snap->local) {
            s = place_local(p->src, path, p->size, opts->no_hardlink, res, err);
        } else {
            uint64_t bytes = 0;
            s = sp_store_copy(p->store, p->src, snap->local, path, &bytes, err);
            if (!s) {
                res->files_copied++;
                res->bytes += bytes;
            }
        }
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (!s)
        s = encode_checked(snap->meta, &bytes, &len, err);
    char *mpath = malloc(strlen(tmp) + 16);
    if (!s && !mpath)
        s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    if (!s) {
        sprintf(mpath, "%s/_metadata", tmp);
        s = sp_fs_write_atomic(mpath, bytes, len, false, err);
    }
    free(bytes);
    free(mpath);
    if (!s && snap->local->ops->sync)
        s = snap->local->ops->sync(snap->local, tmp, err);
    if (!s)
        s = snap->local->ops->rename(snap->local, tmp, dst, err);
    if (s) {
        remove_tree(tmp);
    } else {
        /* the rename is durable once the parent directory is */
        char *parent = xstrdup(dst);
        char *slash = parent ? strrchr(parent, '/') : NULL;
        if (slash) {
            *(slash == parent ? slash + 1 : slash) = '\0';
            int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            if (fd >= 0) {
                fsync(fd);
                close(fd);
            }
        }
        free(parent);
        size_t ml = strlen(dst) + 16;
        res->metadata_path = malloc(ml);
        if (res->metadata_path)
            snprintf(res->metadata_path, ml, "%s/_metadata", dst);
        sp_snapshot_t *again;
        s = sp_snapshot_open(dst, 0, &again, err);
        if (!s) {
            s = verify_problems(again, "the new snapshot does not verify", SP_ERR_IO, err);
            sp_snapshot_close(again);
        }
    }
    for (uint32_t i = 0; i < c.n; i++) {
        free(c.v[i].src);
        free(c.v[i].rel);
    }
    free(c.v);
    strmap_free(&c.by_rel);
    free(tmp);
    free(dst);
    free(real_dir);
    return s;
}

sp_status_t sp_edit_write(sp_snapshot_t *snap, const sp_edit_write_options_t *opts, sp_edit_write_result_t *res,
                          sp_error_t *err)
{
    memset(res, 0, sizeof *res);
    if (!opts || (!opts->in_place && !opts->output) || (opts->in_place && opts->output))
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "output",
                            "give either an output directory or in-place");
    return opts->in_place ? write_in_place(snap, opts, res, err) : write_output(snap, opts, res, err);
}

void sp_edit_write_result_free(sp_edit_write_result_t *r)
{
    if (r) {
        free(r->metadata_path);
        free(r->backup_path);
        memset(r, 0, sizeof *r);
    }
}
