/*
 * verify_metadata.c - consistency of the metadata itself, beyond what the
 * byte layout enforces: values Flink would reject at restore (or silently
 * lose state on), as a hand-edited or damaged file may hold them.
 *   - parallelism >= 1, max parallelism in 1..32768 (KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM)
 *     and parallelism <= max parallelism (V1+)
 *   - operator IDs unique (Flink keeps one of two states with the same ID)
 *   - subtask indices unique and below the parallelism
 *   - key-group ranges inside [0, max parallelism)
 *   - recorded sizes >= -1 (Flink uses -1 for "unknown" only)
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_verify.h"

#define FLINK_MAX_PARALLELISM 32768

typedef struct mctx {
    sp_verify_result_t *r;
    uint32_t cap;
    bool nomem;
} mctx_t;

static void add(mctx_t *c, uint32_t op, int32_t subtask, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static void add(mctx_t *c, uint32_t op, int32_t subtask, const char *fmt, ...)
{
    if (c->r->n_metadata_problems == c->cap) {
        uint32_t ncap = c->cap ? c->cap * 2 : 8;
        sp_metadata_problem_t *v = realloc(c->r->metadata_problems, ncap * sizeof *v);
        if (!v) {
            c->nomem = true;
            return;
        }
        c->r->metadata_problems = v;
        c->cap = ncap;
    }
    sp_metadata_problem_t *p = &c->r->metadata_problems[c->r->n_metadata_problems++];
    p->operator_index = op;
    p->subtask_index = subtask;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, sizeof p->message, fmt, ap);
    va_end(ap);
}

static int cmp_id(const void *a, const void *b) { return memcmp(*(const uint8_t *const *)a, *(const uint8_t *const *)b, 16); }

static void check_key_groups(mctx_t *c, uint32_t op, int32_t subtask, const sp_handle_t *h, int32_t max_par)
{
    if (!h)
        return;
    int32_t start = -1, num = 0;
    switch (h->tag) {
    case SP_TAG_KEY_GROUPS:
    case SP_TAG_KEY_GROUPS_SAVEPOINT:
    case SP_TAG_KEY_GROUPS_V2:
        start = h->u.key_groups.start_key_group;
        num = h->u.key_groups.num_key_groups;
        break;
    case SP_TAG_INCREMENTAL:
    case SP_TAG_INCREMENTAL_V2:
        start = h->u.incremental.start_key_group;
        num = h->u.incremental.num_key_groups;
        break;
    case SP_TAG_CHANGELOG:
    case SP_TAG_CHANGELOG_V2:
        start = h->u.changelog.start_key_group;
        num = h->u.changelog.num_key_groups;
        break;
    default:
        return;
    }
    if (num > 0 && (start < 0 || (int64_t)start + num > max_par))
        add(c, op, subtask, "key groups %d..%lld lie outside 0..%d (max parallelism %d)", start,
            (long long)start + num - 1, max_par - 1, max_par);
}

typedef struct sctx {
    mctx_t *c;
} sctx_t;

static int check_size(const sp_ref_t *ref, void *user)
{
    mctx_t *c = user;
    if (ref->kind != SP_REF_INLINE && ref->kind != SP_REF_DIRECTORY && ref->size < -1)
        add(c, ref->operator_index, ref->subtask_index, "recorded size %lld of \"%.*s\" is negative (only -1 means unknown)",
            (long long)ref->size, (int)(ref->path.len > 120 ? 120 : ref->path.len), (const char *)ref->path.ptr);
    return c->nomem;
}

sp_status_t sp_verify_metadata(const sp_metadata_t *m, sp_verify_result_t *out, sp_error_t *err)
{
    mctx_t c = {out, out->n_metadata_problems, false};
    const uint8_t **ids = calloc(m->n_operators + 1, sizeof *ids);
    if (!ids)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    for (uint32_t i = 0; i < m->n_operators && !c.nomem; i++) {
        const sp_operator_t *op = &m->operators[i];
        ids[i] = op->id;
        if (op->parallelism < 1)
            add(&c, i, -1, "parallelism %d is below 1", op->parallelism);
        if (m->version >= 1) {
            if (op->max_parallelism < 1 || op->max_parallelism > FLINK_MAX_PARALLELISM)
                add(&c, i, -1, "max parallelism %d is outside 1..%d", op->max_parallelism, FLINK_MAX_PARALLELISM);
            else if (op->parallelism > op->max_parallelism)
                add(&c, i, -1, "parallelism %d exceeds max parallelism %d", op->parallelism, op->max_parallelism);
        }
        /* subtask indices: unique and below the parallelism (entries are few; sort a copy) */
        int32_t *idx = op->n_subtasks ? malloc(op->n_subtasks * sizeof *idx) : NULL;
        if (op->n_subtasks && !idx) {
            c.nomem = true;
            break;
        }
        for (uint32_t j = 0; j < op->n_subtasks; j++) {
            const sp_subtask_t *st = &op->subtasks[j];
            idx[j] = st->index;
            if (op->parallelism >= 1 && st->index >= op->parallelism)
                add(&c, i, st->index, "subtask index %d is not below the parallelism %d", st->index, op->parallelism);
            if (m->version >= 1 && op->max_parallelism >= 1 && !st->finished) {
                check_key_groups(&c, i, st->index, st->managed_keyed, op->max_parallelism);
                check_key_groups(&c, i, st->index, st->raw_keyed, op->max_parallelism);
            }
        }
        for (uint32_t j = 0; j < op->n_subtasks; j++)
            for (uint32_t k = j + 1; k < op->n_subtasks; k++)
                if (idx[j] == idx[k]) {
                    add(&c, i, idx[j], "subtask index %d is stored twice", idx[j]);
                    k = op->n_subtasks;
                    j = op->n_subtasks;
                }
        free(idx);
    }
    qsort(ids, m->n_operators, sizeof *ids, cmp_id);
    for (uint32_t i = 1; i < m->n_operators && !c.nomem; i++)
        if (memcmp(ids[i - 1], ids[i], 16) == 0) {
            char hex[33];
            sp_id_to_hex(ids[i], hex);
            uint32_t which = 0;
            for (uint32_t k = 0; k < m->n_operators; k++)
                if (memcmp(m->operators[k].id, ids[i], 16) == 0)
                    which = k;
            add(&c, which, -1, "operator ID %s is stored more than once (Flink would keep only one of them)", hex);
        }
    free(ids);
    if (!c.nomem)
        sp_meta_visit_refs((sp_metadata_t *)m, check_size, &c);
    if (c.nomem)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    return SP_OK;
}
