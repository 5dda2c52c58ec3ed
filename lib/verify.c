/* `sp verify`: stat every referenced file. */
#include "sp_verify.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct vctx {
    const sp_snapshot_t *snap;
    sp_verify_result_t *r;
    char *real_dir;             /* realpath of the snapshot directory */
    uint32_t cap_problems, cap_external;
    /* open-addressing set of external paths already listed */
    const sp_str_t **seen;
    size_t seen_cap, seen_n;
    bool nomem;
} vctx_t;

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

/* Returns true if the path was new (and records it). */
static bool seen_add(vctx_t *c, const sp_str_t *s)
{
    if (c->seen_n * 2 >= c->seen_cap) {
        size_t ncap = c->seen_cap ? c->seen_cap * 2 : 256;
        const sp_str_t **n = calloc(ncap, sizeof *n);
        if (!n) {
            c->nomem = true;
            return false;
        }
        for (size_t i = 0; i < c->seen_cap; i++)
            if (c->seen[i]) {
                size_t j = hash_bytes(c->seen[i]->ptr, c->seen[i]->len) & (ncap - 1);
                while (n[j])
                    j = (j + 1) & (ncap - 1);
                n[j] = c->seen[i];
            }
        free(c->seen);
        c->seen = n;
        c->seen_cap = ncap;
    }
    size_t j = hash_bytes(s->ptr, s->len) & (c->seen_cap - 1);
    while (c->seen[j]) {
        if (c->seen[j]->len == s->len && memcmp(c->seen[j]->ptr, s->ptr, s->len) == 0)
            return false;
        j = (j + 1) & (c->seen_cap - 1);
    }
    c->seen[j] = s;
    c->seen_n++;
    return true;
}

static void push(vctx_t *c, bool external, const sp_ref_t *ref, sp_problem_t p, int64_t actual, bool checked)
{
    sp_verify_item_t **v = external ? &c->r->external : &c->r->problems;
    uint32_t *n = external ? &c->r->n_external : &c->r->n_problems;
    uint32_t *cap = external ? &c->cap_external : &c->cap_problems;
    if (*n == *cap) {
        uint32_t ncap = *cap ? *cap * 2 : 16;
        sp_verify_item_t *nv = realloc(*v, ncap * sizeof *nv);
        if (!nv) {
            c->nomem = true;
            return;
        }
        *v = nv;
        *cap = ncap;
    }
    sp_verify_item_t *it = &(*v)[(*n)++];
    it->ref = *ref;
    it->problem = p;
    it->actual_size = actual;
    it->checked = checked;
}

static bool inside(const char *real_dir, const char *real)
{
    size_t n = strlen(real_dir);
    return strncmp(real, real_dir, n) == 0 && (real[n] == '/' || real[n] == '\0');
}

static int check(const sp_ref_t *ref, void *user)
{
    vctx_t *c = user;
    if (ref->kind == SP_REF_INLINE)
        return 0;
    c->r->files_checked++;
    bool external = ref->kind != SP_REF_RELATIVE;
    char key[PATH_MAX];
    sp_store_t *store = sp_snapshot_ref_location(c->snap, ref, key, sizeof key);
    if (external) {
        /* an absolute path is listed once, however often it is referenced */
        const sp_str_t *p = ref->kind == SP_REF_ABSOLUTE ? &ref->handle->u.file.path
                            : ref->kind == SP_REF_SEGMENT ? &ref->handle->u.segment.path
                            : &ref->path;
        if (ref->kind == SP_REF_DIRECTORY || seen_add(c, p)) {
            if (ref->kind != SP_REF_DIRECTORY)
                c->r->distinct_external++;
            push(c, true, ref, SP_PROBLEM_MISSING, -1, store != NULL && ref->kind != SP_REF_DIRECTORY);
        } else if (ref->kind != SP_REF_SEGMENT) {
            return c->nomem; /* already checked; segments are checked each, for their own range */
        }
        if (!store || ref->kind == SP_REF_DIRECTORY)
            return c->nomem;
    } else if (!store) {
        push(c, false, ref, SP_PROBLEM_UNREADABLE, -1, false);
        return c->nomem;
    }
    sp_store_stat_t st;
    if (store->ops->stat(store, key, &st, NULL) != SP_OK) {
        push(c, false, ref, SP_PROBLEM_UNREADABLE, -1, true);
        return c->nomem;
    }
    if (!st.exists) {
        push(c, false, ref, SP_PROBLEM_MISSING, -1, true);
        return c->nomem;
    }
    if (!external && c->real_dir && memchr(ref->path.ptr, '/', ref->path.len)) {
        /* a nested path: a directory on the way may be a link leading out (lstat only sees the last step) */
        char real[PATH_MAX];
        if (realpath(key, real) && !inside(c->real_dir, real)) {
            push(c, false, ref, SP_PROBLEM_SYMLINK_ESCAPES, -1, true);
            return c->nomem;
        }
    }
    if (st.is_symlink) {
        /* local only: where does it lead? */
        char real[PATH_MAX];
        struct stat ls;
        if (!realpath(key, real) || stat(key, &ls) != 0) {
            push(c, false, ref, SP_PROBLEM_MISSING, -1, true);
            return c->nomem;
        }
        if (!external && c->real_dir && !inside(c->real_dir, real)) {
            push(c, false, ref, SP_PROBLEM_SYMLINK_ESCAPES, -1, true);
            return c->nomem;
        }
        st.is_dir = S_ISDIR(ls.st_mode);
        st.size = S_ISREG(ls.st_mode) ? (int64_t)ls.st_size : -1;
        if (!S_ISREG(ls.st_mode) && !st.is_dir) {
            push(c, false, ref, SP_PROBLEM_NOT_A_FILE, -1, true);
            return c->nomem;
        }
    }
    if (st.is_dir) {
        push(c, false, ref, SP_PROBLEM_NOT_A_FILE, -1, true);
        return c->nomem;
    }
    int64_t actual = st.size;
    if (ref->kind == SP_REF_SEGMENT) {
        if (ref->segment_offset < 0 || ref->size < 0 || ref->segment_offset > actual ||
            ref->size > actual - ref->segment_offset)
            push(c, false, ref, SP_PROBLEM_SEGMENT_BEYOND_EOF, actual, true);
    } else if (ref->size >= 0 && ref->size != actual) {
        push(c, false, ref, SP_PROBLEM_SIZE_MISMATCH, actual, true);
    }
    return c->nomem;
}

sp_status_t sp_verify(const sp_snapshot_t *snap, sp_verify_result_t *out, sp_error_t *err)
{
    memset(out, 0, sizeof *out);
    vctx_t c;
    memset(&c, 0, sizeof c);
    c.snap = snap;
    c.r = out;
    c.real_dir = snap->store == snap->local ? realpath(snap->dir, NULL) : NULL;
    sp_meta_visit_refs(snap->meta, check, &c);
    free(c.real_dir);
    free(c.seen);
    if (!c.nomem && sp_verify_metadata(snap->meta, out, err) != SP_OK)
        c.nomem = true;
    if (c.nomem) {
        sp_verify_result_free(out);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    return SP_OK;
}

void sp_verify_result_free(sp_verify_result_t *r)
{
    if (!r)
        return;
    free(r->problems);
    free(r->external);
    free(r->metadata_problems);
    memset(r, 0, sizeof *r);
}

const char *sp_problem_name(sp_problem_t p)
{
    switch (p) {
    case SP_PROBLEM_MISSING: return "missing";
    case SP_PROBLEM_SIZE_MISMATCH: return "size mismatch";
    case SP_PROBLEM_NOT_A_FILE: return "not a regular file";
    case SP_PROBLEM_SYMLINK_ESCAPES: return "symlink leads outside the snapshot";
    case SP_PROBLEM_UNREADABLE: return "cannot be read";
    case SP_PROBLEM_SEGMENT_BEYOND_EOF: return "segment ends beyond the end of its file";
    }
    return "problem";
}

const char *sp_problem_token(sp_problem_t p)
{
    static const char *const t[] = {"missing", "size_mismatch", "not_a_file", "symlink_escapes", "unreadable",
                                    "segment_beyond_eof"};
    return (unsigned)p < sizeof t / sizeof t[0] ? t[p] : "problem";
}
