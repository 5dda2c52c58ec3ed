/*
 * prune.c - `sp prune`: retention over a catalog (rules in sp_prune.h).
 * Planning decides for every entry and deletes nothing; running disposes of
 * the chosen entries one at a time, so one failure never stops the rest and
 * a failed entry is simply found again by the next run.
 */
#include "sp_prune.h"

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sp_dispose.h"
#include "sp_snapshot.h"
#include "sp_record.h"

static const char UNKNOWN_GROUP[] = "unknown";

/* Sort keys copied out of the catalog: qsort has no user pointer, and a
 * library keeps no global state. */
typedef struct sort_key {
    const char *group;
    int64_t checkpoint_id, mtime_ms;
    const char *location;
    uint32_t decision;
} sort_key_t;

static sort_key_t key_of(const sp_catalog_t *cat, const sp_prune_plan_t *plan, uint32_t i)
{
    const sp_catalog_entry_t *e = &cat->entries[plan->decisions[i].entry];
    const char *g = plan->decisions[i].group;
    return (sort_key_t){g ? g : "", e->checkpoint_id, e->mtime_ms, e->location, i};
}

/* By group, then newest first: checkpoint ID, then _metadata mtime, then location (stable output). */
static int newest_first(const void *pa, const void *pb)
{
    const sort_key_t *a = pa, *b = pb;
    int g = strcmp(a->group, b->group);
    if (g)
        return g;
    if (a->checkpoint_id != b->checkpoint_id)
        return a->checkpoint_id > b->checkpoint_id ? -1 : 1;
    if (a->mtime_ms != b->mtime_ms)
        return a->mtime_ms > b->mtime_ms ? -1 : 1;
    return strcmp(a->location, b->location);
}

/* Disposal order across groups: oldest modification first. */
static int oldest_first(const void *pa, const void *pb)
{
    const sort_key_t *a = pa, *b = pb;
    if (a->mtime_ms != b->mtime_ms)
        return a->mtime_ms < b->mtime_ms ? -1 : 1;
    if (a->checkpoint_id != b->checkpoint_id)
        return a->checkpoint_id < b->checkpoint_id ? -1 : 1;
    return strcmp(a->location, b->location);
}

/* Everything that does not depend on the rest of the group; returns true for a retention candidate. */
static bool classify(const sp_catalog_entry_t *e, const sp_prune_options_t *o, sp_prune_decision_t *d)
{
    d->dispose = false;
    if (e->state == SP_CATALOG_DISPOSING) {
        d->dispose = true;
        d->reason = SP_PRUNE_DISPOSE_RESUME;
        return false;
    }
    if (e->state != SP_CATALOG_OK || !e->has_metadata || e->record_unreadable) {
        d->reason = SP_PRUNE_KEEP_STATE;
        return false;
    }
    if (e->kind == SP_KIND_UNKNOWN || (e->kind == SP_KIND_CHECKPOINT && !o->include_checkpoints)) {
        d->reason = SP_PRUNE_KEEP_OUT_OF_SCOPE;
        return false;
    }
    if (!e->job[0] && !o->all_jobs) {
        d->reason = SP_PRUNE_KEEP_NO_JOB;
        return false;
    }
    d->group = e->job[0] ? e->job : UNKNOWN_GROUP;
    return true;
}

/* The retention of one group: keys[0..n) newest first. */
static void decide_group(sp_catalog_t *cat, sp_prune_plan_t *plan, const sort_key_t *keys, uint32_t n,
                         const sp_prune_options_t *o)
{
    bool any_dispose = false;
    for (uint32_t r = 0; r < n; r++) {
        sp_prune_decision_t *d = &plan->decisions[keys[r].decision];
        const sp_catalog_entry_t *e = &cat->entries[d->entry];
        d->rank = r + 1;
        if (d->rank <= o->keep_last) {
            d->reason = SP_PRUNE_KEEP_LAST;
        } else if (o->max_age_ms > 0 && o->now_ms - e->mtime_ms < o->max_age_ms) {
            d->reason = SP_PRUNE_KEEP_AGE;
        } else {
            d->dispose = true;
            d->reason = SP_PRUNE_DISPOSE_EXPIRED;
            any_dispose = true;
        }
    }
    if (!any_dispose)
        return; /* nothing to protect: spare the stat of every referenced file */
    /* the newest complete snapshot stays, whatever the counts say */
    for (uint32_t r = 0; r < n; r++) {
        sp_prune_decision_t *d = &plan->decisions[keys[r].decision];
        sp_catalog_entry_t *e = &cat->entries[d->entry];
        if (e->complete == SP_COMPLETE_UNCHECKED)
            sp_catalog_verify_entry(e, NULL); /* an entry that cannot be reopened stays unchecked: not complete */
        if (e->complete == SP_COMPLETE_YES) {
            if (d->dispose) {
                d->dispose = false;
                d->reason = SP_PRUNE_KEEP_NEWEST_COMPLETE;
            }
            break;
        }
    }
    /* ... and so does the newest by time: checkpoint IDs start again at 1 when a job with a fixed job ID
     * (application mode with HA) is redeployed without restoring, and then the highest ID is not the
     * latest state.  The complete snapshot whose _metadata was written last stays too. */
    bool *tried = calloc(n, sizeof *tried);
    for (;;) {
        int64_t best_ms = INT64_MIN;
        sp_prune_decision_t *best = NULL;
        uint32_t best_r = 0;
        for (uint32_t r = 0; r < n && tried; r++) {
            sp_prune_decision_t *d = &plan->decisions[keys[r].decision];
            const sp_catalog_entry_t *e = &cat->entries[d->entry];
            if (!tried[r] && e->complete != SP_COMPLETE_NO && e->mtime_ms > best_ms) {
                best_ms = e->mtime_ms;
                best = d;
                best_r = r;
            }
        }
        if (!best)
            break;
        sp_catalog_entry_t *e = &cat->entries[best->entry];
        if (e->complete == SP_COMPLETE_UNCHECKED)
            sp_catalog_verify_entry(e, NULL);
        tried[best_r] = true;
        if (e->complete == SP_COMPLETE_YES) {
            if (best->dispose) {
                best->dispose = false;
                best->reason = SP_PRUNE_KEEP_NEWEST_COMPLETE;
            }
            break;
        }
    }
    free(tried);
    for (uint32_t r = 0; r < n; r++) {
        sp_prune_decision_t *d = &plan->decisions[keys[r].decision];
        if (d->dispose && cat->entries[d->entry].record.pins) {
            d->dispose = false;
            d->reason = SP_PRUNE_KEEP_PINNED;
        }
    }
}

/* A snapshot to dispose whose files another snapshot under ROOT still uses
 * (an absolute reference into its directory, as a retained checkpoint after a
 * LEGACY restore or a relocation by hand has) is kept: deleting it would
 * break the other one. */
typedef struct refscan {
    const sp_snapshot_t *snap;
    const char *dir;
    size_t dl;
    bool hit;
} refscan_t;

static int refs_into(const sp_ref_t *ref, void *user)
{
    refscan_t *r = user;
    if (ref->kind != SP_REF_ABSOLUTE && ref->kind != SP_REF_SEGMENT)
        return 0;
    char path[4096];
    if (sp_snapshot_local_path(r->snap, ref, path, sizeof path) && strncmp(path, r->dir, r->dl) == 0 &&
        path[r->dl] == '/') {
        r->hit = true;
        return 1;
    }
    return 0;
}

static void keep_referenced(const sp_catalog_t *cat, sp_prune_plan_t *plan)
{
    for (uint32_t i = 0; i < plan->n; i++) {
        sp_prune_decision_t *d = &plan->decisions[i];
        if (!d->dispose || d->reason != SP_PRUNE_DISPOSE_EXPIRED)
            continue;
        const char *dir = cat->entries[d->entry].location;
        for (uint32_t k = 0; k < cat->n && d->dispose; k++) {
            if (k == d->entry)
                continue;
            sp_snapshot_t *other;
            sp_error_t e;
            if (sp_snapshot_open(cat->entries[k].location, 0, &other, &e) != SP_OK)
                continue;
            refscan_t r = {other, dir, strlen(dir), false};
            sp_meta_visit_refs(other->meta, refs_into, &r);
            sp_snapshot_close(other);
            if (r.hit) {
                d->dispose = false;
                d->reason = SP_PRUNE_KEEP_REFERENCED;
            }
        }
    }
}

sp_status_t sp_prune_plan(sp_catalog_t *cat, const sp_prune_options_t *opts, sp_prune_plan_t *plan, sp_error_t *err)
{
    memset(plan, 0, sizeof *plan);
    if (!opts || opts->keep_last < 1)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "keep_last", "keep at least the newest snapshot (>= 1)");
    if (opts->max_age_ms < 0)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "max_age", "a negative age");
    plan->n = cat->n;
    plan->decisions = calloc(cat->n ? cat->n : 1, sizeof *plan->decisions);
    sort_key_t *keys = malloc((cat->n ? cat->n : 1) * sizeof *keys);
    if (!plan->decisions || !keys) {
        free(keys);
        sp_prune_plan_free(plan);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    uint32_t nc = 0;
    for (uint32_t i = 0; i < cat->n; i++) {
        sp_prune_decision_t *d = &plan->decisions[i];
        d->entry = i;
        sp_error_clear(&d->error);
        if (classify(&cat->entries[i], opts, d))
            keys[nc++] = key_of(cat, plan, i);
    }
    qsort(keys, nc, sizeof *keys, newest_first);
    for (uint32_t start = 0, end; start < nc; start = end) {
        for (end = start + 1; end < nc && strcmp(keys[end].group, keys[start].group) == 0; end++)
            ;
        decide_group(cat, plan, keys + start, end - start, opts);
    }
    free(keys);
    keep_referenced(cat, plan);
    for (uint32_t i = 0; i < plan->n; i++) {
        plan->to_dispose += plan->decisions[i].dispose;
        plan->pinned_skipped += plan->decisions[i].reason == SP_PRUNE_KEEP_PINNED;
    }
    return SP_OK;
}

/* Dispose of one entry (or plan it, dry run). */
static void dispose_one(const sp_catalog_entry_t *e, sp_prune_decision_t *d, const sp_prune_options_t *o)
{
    if (d->reason == SP_PRUNE_DISPOSE_EXPIRED) {
        /* a pin taken since the scan wins, even with force */
        sp_record_summary_t rec;
        if (sp_record_read(e->location, &rec, &d->error) != SP_OK) {
            d->outcome = SP_PRUNE_FAILED;
            return;
        }
        if (rec.pins) {
            d->outcome = SP_PRUNE_SKIPPED_PINNED;
            return;
        }
    }
    sp_dispose_options_t dopts = {.dry_run = o->dry_run, .force = o->force, .record_query = o->record_query,
                                  .record_query_user = o->record_query_user};
    sp_dispose_result_t res;
    sp_status_t s = sp_dispose(e->location, &dopts, &res, &d->error);
    if (res.record_warning)
        snprintf(d->record_warning, sizeof d->record_warning, "%s", res.record_warning);
    d->bytes = res.bytes;
    d->outcome = s ? SP_PRUNE_FAILED : o->dry_run ? SP_PRUNE_PLANNED : SP_PRUNE_DISPOSED;
    if (!s)
        sp_error_clear(&d->error);
    sp_dispose_result_free(&res);
}

sp_status_t sp_prune_run(const sp_catalog_t *cat, sp_prune_plan_t *plan, const sp_prune_options_t *opts,
                         sp_error_t *err)
{
    sort_key_t *keys = malloc((plan->n ? plan->n : 1) * sizeof *keys);
    if (!keys)
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    uint32_t n = 0;
    for (uint32_t i = 0; i < plan->n; i++)
        if (plan->decisions[i].dispose)
            keys[n++] = key_of(cat, plan, i);
    qsort(keys, n, sizeof *keys, oldest_first);
    sp_status_t first = SP_OK;
    for (uint32_t k = 0; k < n; k++) {
        sp_prune_decision_t *d = &plan->decisions[keys[k].decision];
        dispose_one(&cat->entries[d->entry], d, opts);
        if (d->outcome == SP_PRUNE_FAILED) {
            plan->failed++;
            if (!first) {
                first = d->error.code ? d->error.code : SP_ERR_IO;
                if (err)
                    *err = d->error;
            }
        } else if (d->outcome == SP_PRUNE_SKIPPED_PINNED) {
            plan->pinned_skipped++;
        } else {
            plan->disposed += d->outcome == SP_PRUNE_DISPOSED;
            plan->bytes += d->bytes;
        }
    }
    free(keys);
    return first;
}

void sp_prune_plan_free(sp_prune_plan_t *plan)
{
    if (!plan)
        return;
    free(plan->decisions);
    memset(plan, 0, sizeof *plan);
}

const char *sp_prune_reason_name(sp_prune_reason_t r)
{
    switch (r) {
    case SP_PRUNE_KEEP_LAST: return "keep-last";
    case SP_PRUNE_KEEP_AGE: return "max-age";
    case SP_PRUNE_KEEP_NEWEST_COMPLETE: return "newest-complete";
    case SP_PRUNE_KEEP_PINNED: return "pinned";
    case SP_PRUNE_KEEP_OUT_OF_SCOPE: return "out-of-scope";
    case SP_PRUNE_KEEP_NO_JOB: return "no-job";
    case SP_PRUNE_KEEP_STATE: return "state";
    case SP_PRUNE_DISPOSE_EXPIRED: return "expired";
    case SP_PRUNE_DISPOSE_RESUME: return "resume";
    case SP_PRUNE_KEEP_REFERENCED: return "referenced";
    }
    return "unknown";
}

const char *sp_prune_outcome_name(sp_prune_outcome_t o)
{
    switch (o) {
    case SP_PRUNE_PLANNED: return "planned";
    case SP_PRUNE_DISPOSED: return "disposed";
    case SP_PRUNE_FAILED: return "failed";
    case SP_PRUNE_SKIPPED_PINNED: return "skipped-pinned";
    }
    return "unknown";
}
