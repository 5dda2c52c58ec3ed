/*
 * test_check.c - sp_check (Flink's restore rules), the job descriptions,
 * sp_edit (drop, set uid, rewrite prefix, writing) and sp_diff, on models
 * built with the project's own encoder and written to a temporary
 * directory.  Cases follow Flink's documentation on savepoints and
 * upgrades: operator removed, added, reordered with uids, uid changed,
 * stateless operator removed, max parallelism changed, parallelism above
 * the max parallelism; plus coordinator-only state, channel state, fully
 * finished operators, setUidHash alternative IDs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tap.h"
#include "sp.h"

static char tmpdir[256];

typedef enum { ST_KEYED, ST_OPERATOR, ST_EMPTY_SUBTASKS, ST_NO_SUBTASKS, ST_COORDINATOR, ST_FINISHED,
               ST_FINISHED_SUBTASKS, ST_CHANNEL, ST_ABSOLUTE } st_kind_t;

static sp_handle_t *inline_bytes(sp_metadata_t *m, const char *name, size_t n)
{
    sp_handle_t *h = sp_meta_new_handle(m, SP_TAG_BYTE_STREAM);
    uint8_t data[64];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7 + n);
    h->u.byte_stream.name = sp_meta_str(m, name, strlen(name));
    h->u.byte_stream.data = sp_meta_blob(m, data, n < sizeof data ? n : sizeof data);
    return h;
}

/* Add an operator with uid (or a fixed ID when uid is NULL) and state of the given kind. */
static sp_operator_t *add_op(sp_metadata_t *m, const char *uid, const char *hex_id, int p, int mp, st_kind_t kind)
{
    sp_operator_t *ops = sp_meta_alloc(m, (m->n_operators + 1) * sizeof *ops);
    if (m->n_operators)
        memcpy(ops, m->operators, m->n_operators * sizeof *ops);
    m->operators = ops;
    sp_operator_t *op = &ops[m->n_operators++];
    memset(op, 0, sizeof *op);
    if (uid)
        sp_uid_to_operator_id(uid, strlen(uid), op->id);
    else
        sp_id_from_hex(hex_id, op->id);
    if (m->version >= 5 && uid) {
        op->uid = sp_meta_str(m, uid, strlen(uid));
        char name[64];
        snprintf(name, sizeof name, "Name of %s", uid);
        op->name = sp_meta_str(m, name, strlen(name));
    }
    op->parallelism = p;
    op->max_parallelism = mp;
    op->chain_length = 1;
    if (kind == ST_FINISHED) {
        op->fully_finished = true;
        return op;
    }
    if (kind == ST_NO_SUBTASKS)
        return op;
    if (kind == ST_COORDINATOR) {
        char hex[33];
        sp_id_to_hex(op->id, hex);
        op->coordinator = inline_bytes(m, hex, 24);
    }
    op->n_subtasks = (uint32_t)p;
    op->subtasks = sp_meta_alloc(m, (size_t)p * sizeof *op->subtasks);
    for (int i = 0; i < p; i++) {
        sp_subtask_t *st = &op->subtasks[i];
        st->index = i;
        st->duration = -1;
        if (kind == ST_FINISHED_SUBTASKS) {
            st->finished = true;
        } else if (kind == ST_KEYED) {
            sp_handle_t *h = sp_meta_new_handle(m, SP_TAG_KEY_GROUPS_SAVEPOINT);
            int s = (i * mp + p - 1) / p, e = ((i + 1) * mp - 1) / p;
            h->u.key_groups.start_key_group = s;
            h->u.key_groups.num_key_groups = e - s + 1;
            h->u.key_groups.offsets = sp_meta_alloc(m, (size_t)(e - s + 1) * 8 + 8);
            h->u.key_groups.delegate = inline_bytes(m, "kg", 40 + (size_t)i);
            st->managed_keyed = h;
        } else if (kind == ST_OPERATOR || kind == ST_ABSOLUTE) {
            sp_handle_t *h = sp_meta_new_handle(m, SP_TAG_OPERATOR_STREAM);
            h->u.operator_stream.n_states = 1;
            h->u.operator_stream.states = sp_meta_alloc(m, sizeof(sp_op_state_entry_t));
            h->u.operator_stream.states[0].name = sp_meta_str(m, "s", 1);
            h->u.operator_stream.states[0].n_offsets = 1;
            h->u.operator_stream.states[0].offsets = sp_meta_alloc(m, 8);
            if (kind == ST_ABSOLUTE) {
                char path[512];
                snprintf(path, sizeof path, "file:%s/old/data-%d", tmpdir, i);
                sp_handle_t *f = sp_meta_new_handle(m, SP_TAG_FILE);
                f->u.file.path = sp_meta_str(m, path, strlen(path));
                f->u.file.size = 3;
                h->u.operator_stream.delegate = f;
            } else {
                h->u.operator_stream.delegate = inline_bytes(m, "op", 16);
            }
            st->managed_operator.n = 1;
            st->managed_operator.items = sp_meta_alloc(m, sizeof(sp_handle_t *));
            st->managed_operator.items[0] = h;
        } else if (kind == ST_CHANNEL) {
            st->n_input_channels = 1;
            st->input_channels = sp_meta_alloc(m, sizeof *st->input_channels);
            st->input_channels[0].type = m->version >= 6 ? 1 : 0;
            st->input_channels[0].subtask_index = i;
            st->input_channels[0].n_offsets = 1;
            st->input_channels[0].offsets = sp_meta_alloc(m, 8);
            st->input_channels[0].state_size = 8;
            st->input_channels[0].delegate = inline_bytes(m, "ch", 8);
        }
    }
    return op;
}

static sp_metadata_t *model(int version)
{
    sp_metadata_t *m = sp_meta_new(version);
    m->checkpoint_id = 17;
    if (version >= 4) {
        sp_properties_t p;
        memset(&p, 0, sizeof p);
        p.kind = SP_KIND_SAVEPOINT;
        p.format = SP_FORMAT_CANONICAL;
        uint8_t *t;
        size_t tl;
        if (sp_properties_encode(&p, &t, &tl, NULL) == SP_OK) {
            m->has_trailer = true;
            m->trailer = sp_meta_blob(m, t, tl);
            free(t);
        }
    }
    return m;
}

static int seq;

/* Write the model as DIR/_metadata (a new DIR under tmpdir) and open it. */
static sp_snapshot_t *write_open(sp_metadata_t *m, char *dir_out)
{
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/snap-%d", tmpdir, ++seq);
    mkdir(dir, 0755);
    uint8_t *b;
    size_t len;
    sp_error_t err;
    if (sp_meta_encode(m, &b, &len, &err) != SP_OK) {
        printf("# encode: %s: %s\n", err.field, err.message);
        sp_meta_free(m);
        return NULL;
    }
    snprintf(path, sizeof path, "%s/_metadata", dir);
    sp_fs_write_atomic(path, b, len, true, &err);
    free(b);
    sp_meta_free(m);
    sp_snapshot_t *s = NULL;
    if (sp_snapshot_open(dir, 0, &s, &err) != SP_OK)
        printf("# open: %s\n", err.message);
    if (dir_out)
        strcpy(dir_out, dir);
    return s;
}

/* The job: uids separated by spaces, each optionally "uid@P/MP" (P, MP may be '-') */
static void job_of(sp_job_t *job, const char *spec)
{
    sp_job_init(job);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) {
        int p = -1, mp = -1;
        char *at = strchr(t, '@');
        if (at) {
            *at = '\0';
            char *sl = strchr(at + 1, '/');
            if (at[1] != '-')
                p = atoi(at + 1);
            if (sl && sl[1] != '-')
                mp = atoi(sl + 1);
        }
        sp_error_t err;
        if (sp_job_add(job, t, false, NULL, p, mp, NULL, "test", &err) != SP_OK)
            printf("# job_add %s: %s\n", t, err.message);
    }
}

static const sp_check_item_t *item_of(const sp_check_result_t *r, const char *uid)
{
    uint8_t id[16];
    sp_uid_to_operator_id(uid, strlen(uid), id);
    for (uint32_t i = 0; i < r->n_items; i++)
        if (memcmp(r->items[i].operator_id, id, 16) == 0)
            return &r->items[i];
    return NULL;
}

static sp_check_verdict_t verdict_of(const sp_check_result_t *r, const char *uid)
{
    const sp_check_item_t *it = item_of(r, uid);
    return it ? it->verdict : (sp_check_verdict_t)-1;
}

/* Run a check; returns the result (caller frees). */
static sp_check_result_t run(sp_snapshot_t *s, const char *jobspec, bool allow, const char **expect, uint32_t n_exp)
{
    sp_job_t job;
    job_of(&job, jobspec);
    sp_check_options_t o = {allow, n_exp, expect};
    sp_check_result_t r;
    sp_error_t err;
    if (sp_check(s, &job, &o, &r, &err) != SP_OK) {
        printf("# check: %s\n", err.message);
        memset(&r, 0, sizeof r);
    }
    sp_job_free(&job);
    return r;
}

/* the standard snapshot: source (coordinator + operator state), map (operator state), keyed, window, stateless sink */
static sp_snapshot_t *standard(int version, int p, int mp)
{
    sp_metadata_t *m = model(version);
    add_op(m, "source", NULL, p, mp, ST_OPERATOR)->coordinator = inline_bytes(m, "c", 12);
    add_op(m, "map", NULL, p, mp, ST_OPERATOR);
    add_op(m, "keyed", NULL, p, mp, ST_KEYED);
    add_op(m, "window", NULL, p, mp, ST_KEYED);
    add_op(m, "sink", NULL, p, mp, ST_EMPTY_SUBTASKS);
    return write_open(m, NULL);
}

static void test_flink_cases(int version)
{
    sp_snapshot_t *s = standard(version, 2, 128);
    if (!tap_ok(s != NULL, "V%d: standard snapshot written and opened", version))
        return;
    sp_check_result_t r;

    r = run(s, "source map keyed window sink", false, NULL, 0);
    tap_ok(r.ok && r.restorable && r.n_restored == 5 && r.n_failures == 0, "V%d: same job: every operator restored",
           version);
    sp_check_result_free(&r);

    r = run(s, "sink window keyed map source", false, NULL, 0);
    tap_ok(r.ok && r.n_restored == 5, "V%d: operators reordered, same uids: restored", version);
    sp_check_result_free(&r);

    r = run(s, "source map keyed window sink extra", false, NULL, 0);
    tap_ok(r.ok && r.n_new == 1 && verdict_of(&r, "extra") == SP_VERDICT_NEW, "V%d: operator added: starts empty, ok",
           version);
    sp_check_result_free(&r);

    r = run(s, "source map keyed window", false, NULL, 0);
    tap_ok(r.ok && verdict_of(&r, "sink") == SP_VERDICT_SKIPPED, "V%d: stateless operator removed: skipped, ok",
           version);
    sp_check_result_free(&r);

    r = run(s, "source map keyed sink", false, NULL, 0);
    tap_ok(!r.ok && !r.restorable && verdict_of(&r, "window") == SP_VERDICT_UNMAPPED && r.n_failures == 1,
           "V%d: stateful operator removed: unmapped, the restore fails", version);
    tap_ok(r.n_failures == 1 && strstr(r.failures[0], "Cannot map checkpoint/savepoint state"),
           "V%d: the failure quotes Flink's message", version);
    bool hint_n = false;
    for (uint32_t i = 0; i < r.n_hints; i++)
        hint_n |= strstr(r.hints[i], "--allow-non-restored-state") != NULL;
    tap_ok(hint_n, "V%d: a hint says -n would restore it", version);
    sp_check_result_free(&r);

    r = run(s, "source map keyed sink", true, NULL, 0);
    tap_ok(r.restorable && !r.ok && verdict_of(&r, "window") == SP_VERDICT_DROPPED && r.dropped_bytes > 0,
           "V%d: removed with -n: dropped with its bytes; not expected, so not ok", version);
    sp_check_result_free(&r);

    const char *exp[] = {"uid:window"};
    r = run(s, "source map keyed sink", true, exp, 1);
    tap_ok(r.ok && r.n_dropped == 1 && item_of(&r, "window")->expected_drop, "V%d: -n --expect-dropped uid:window: ok",
           version);
    sp_check_result_free(&r);

    char hex[33];
    uint8_t wid[16];
    sp_uid_to_operator_id("window", 6, wid);
    sp_id_to_hex(wid, hex);
    const char *exp_hex[] = {hex};
    r = run(s, "source map keyed sink", true, exp_hex, 1);
    tap_ok(r.ok, "V%d: --expect-dropped by operator ID", version);
    sp_check_result_free(&r);

    r = run(s, "source map keyed sink", false, exp, 1);
    tap_ok(!r.ok && !r.restorable, "V%d: --expect-dropped without -n: still fails (Flink needs -n)", version);
    sp_check_result_free(&r);

    const char *exp_kept[] = {"uid:keyed"};
    r = run(s, "source map keyed sink window", true, exp_kept, 1);
    tap_ok(r.restorable && !r.ok && !item_of(&r, "keyed")->ok,
           "V%d: --expect-dropped naming a restored operator is a failure", version);
    sp_check_result_free(&r);

    const char *exp_none[] = {"uid:nothing-like-this"};
    r = run(s, "source map keyed sink window", true, exp_none, 1);
    tap_ok(r.restorable && !r.ok && r.n_failures == 1 && strstr(r.failures[0], "names no operator"),
           "V%d: --expect-dropped naming no operator is a failure", version);
    sp_check_result_free(&r);

    /* uid changed */
    r = run(s, "source map keyed-renamed window sink", false, NULL, 0);
    tap_ok(!r.ok && verdict_of(&r, "keyed") == SP_VERDICT_UNMAPPED && verdict_of(&r, "keyed-renamed") == SP_VERDICT_NEW,
           "V%d: uid changed: old state unmapped, new operator starts empty", version);
    bool hint = false;
    for (uint32_t i = 0; i < r.n_hints; i++)
        hint |= strstr(r.hints[i], "--set-uid") && strstr(r.hints[i], "keyed-renamed");
    tap_ok(hint, "V%d: a hint suggests sp metadata edit --set-uid", version);
    const sp_check_item_t *it = item_of(&r, "keyed");
    if (version >= 5)
        tap_ok(it && it->uid && strcmp(it->uid, "keyed") == 0 && it->uid_from_snapshot,
               "V%d: the unmatched operator is shown by its stored uid", version);
    else
        tap_ok(it && !it->uid, "V%d: no uids stored: the unmatched operator is shown by operator ID", version);
    it = item_of(&r, "map");
    tap_ok(it && it->uid && strcmp(it->uid, "map") == 0 && it->uid_from_snapshot == (version >= 5),
           "V%d: matched operators show the uid (%s)", version, version >= 5 ? "stored" : "given, hashed and matched");
    sp_check_result_free(&r);

    /* max parallelism */
    r = run(s, "source@2/256 map@2/256 keyed@2/256 window@2/256 sink@2/256", false, NULL, 0);
    tap_ok(!r.restorable && verdict_of(&r, "keyed") == SP_VERDICT_MAX_PARALLELISM_MISMATCH &&
               strstr(item_of(&r, "keyed")->reason, "Max parallelism mismatch"),
           "V%d: max parallelism set to 256 (saved 128): mismatch, fails", version);
    tap_ok(verdict_of(&r, "sink") == SP_VERDICT_MAX_PARALLELISM_MISMATCH,
           "V%d: ... for stateless matched operators too (Flink checks every matched operator)", version);
    sp_check_result_free(&r);
    r = run(s, "source@2/256 map@2/256 keyed@2/256 window@2/256 sink@2/256", true, NULL, 0);
    tap_ok(!r.restorable, "V%d: max parallelism mismatch fails with -n too", version);
    sp_check_result_free(&r);
    r = run(s, "source@4/- map@4/- keyed@4/- window@4/- sink@4/-", false, NULL, 0);
    tap_ok(r.ok && strstr(item_of(&r, "keyed")->reason, "adopted"),
           "V%d: max parallelism not set: Flink adopts the saved one, rescale 2 -> 4 ok", version);
    sp_check_result_free(&r);
    r = run(s, "source@2/128 map@2/128 keyed@2/128 window@2/128 sink@2/128", false, NULL, 0);
    tap_ok(r.ok, "V%d: max parallelism set to the saved value: ok", version);
    sp_check_result_free(&r);
    sp_snapshot_close(s);

    /* parallelism above the saved max parallelism */
    s = standard(version, 2, 4);
    r = run(s, "source@6/- map@6/- keyed@6/- window@6/- sink@6/-", false, NULL, 0);
    tap_ok(!r.restorable && verdict_of(&r, "keyed") == SP_VERDICT_PARALLELISM_ABOVE_MAX &&
               strstr(item_of(&r, "keyed")->reason, "lower than the configured parallelism"),
           "V%d: parallelism 6 above the saved max parallelism 4 (max not set): fails", version);
    sp_check_result_free(&r);
    r = run(s, "source@4/- map@4/- keyed@4/- window@4/- sink@4/-", false, NULL, 0);
    tap_ok(r.ok, "V%d: parallelism 4 = the saved max parallelism: ok", version);
    sp_check_result_free(&r);
    r = run(s, "source@6/4 map@6/4 keyed@6/4 window@6/4 sink@6/4", false, NULL, 0);
    tap_ok(!r.restorable && verdict_of(&r, "keyed") == SP_VERDICT_INVALID_JOB,
           "V%d: parallelism 6 above its own max parallelism 4: the job is invalid", version);
    sp_check_result_free(&r);
    r = run(s, "source@6/8 map@6/8 keyed@6/8 window@6/8 sink@6/8", false, NULL, 0);
    tap_ok(!r.restorable && verdict_of(&r, "keyed") == SP_VERDICT_MAX_PARALLELISM_MISMATCH &&
               strstr(item_of(&r, "keyed")->reason, "lower than the configured parallelism"),
           "V%d: max parallelism 8 and parallelism 6: mismatch, both reasons given", version);
    sp_check_result_free(&r);
    sp_snapshot_close(s);
}

static void test_state_kinds(void)
{
    sp_metadata_t *m = model(6);
    add_op(m, "keyed", NULL, 2, 128, ST_KEYED);
    add_op(m, "coord-only", NULL, 2, 128, ST_COORDINATOR);
    add_op(m, "no-subtasks", NULL, 2, 128, ST_NO_SUBTASKS);
    add_op(m, "finished", NULL, 2, 128, ST_FINISHED);
    add_op(m, "finished-subtasks", NULL, 2, 128, ST_FINISHED_SUBTASKS);
    add_op(m, "channel", NULL, 2, 128, ST_CHANNEL);
    sp_snapshot_t *s = write_open(m, NULL);
    if (!tap_ok(s != NULL, "snapshot with every kind of (no) state"))
        return;
    sp_check_result_t r = run(s, "keyed", false, NULL, 0);
    tap_ok(verdict_of(&r, "coord-only") == SP_VERDICT_UNMAPPED, "coordinator state only: has state (unmapped)");
    tap_ok(verdict_of(&r, "no-subtasks") == SP_VERDICT_SKIPPED, "no subtask states: skipped");
    tap_ok(verdict_of(&r, "finished") == SP_VERDICT_SKIPPED, "fully finished operator: no state, skipped");
    tap_ok(verdict_of(&r, "finished-subtasks") == SP_VERDICT_SKIPPED, "only finished subtasks: skipped");
    tap_ok(verdict_of(&r, "channel") == SP_VERDICT_UNMAPPED, "channel state only (unaligned): has state");
    sp_check_result_free(&r);
    r = run(s, "keyed@2/64 finished@2/128 coord-only channel finished-subtasks no-subtasks", false, NULL, 0);
    tap_ok(!r.restorable && verdict_of(&r, "finished") == SP_VERDICT_RESTORED &&
               strstr(item_of(&r, "finished")->reason, "finished"),
           "a matched fully finished operator restores as finished");
    sp_check_result_free(&r);
    r = run(s, "keyed finished@8/- no-subtasks@300/- coord-only channel finished-subtasks", false, NULL, 0);
    tap_ok(r.ok, "no parallelism check for operators without subtask states (finished, none stored)");
    sp_check_result_free(&r);
    sp_snapshot_close(s);
}

static void test_uid_hash(void)
{
    /* an operator whose ID was set with setUidHash */
    sp_metadata_t *m = model(4);
    add_op(m, NULL, "0123456789abcdef0123456789abcdef", 1, 128, ST_KEYED);
    add_op(m, "plain", NULL, 1, 128, ST_KEYED);
    sp_snapshot_t *s = write_open(m, NULL);
    sp_job_t job;
    sp_error_t err;
    sp_job_init(&job);
    const char *js = "{\"operators\": [{\"uid\": \"new-uid\", \"uid_hash\": \"0123456789ABCDEF0123456789abcdef\"},"
                     " {\"uid\": \"plain\", \"parallelism\": 1}]}";
    tap_ok(sp_job_parse_json(&job, js, strlen(js), "job.json", &err) == SP_OK && job.n_operators == 2 &&
               job.operators[0].has_uid_hash,
           "job JSON with uid_hash parses");
    sp_check_result_t r;
    sp_check(s, &job, NULL, &r, &err);
    tap_ok(r.ok && r.n_restored == 2 && r.items[0].by_uid_hash, "state under a setUidHash ID is matched through it");
    sp_check_result_free(&r);
    sp_job_free(&job);
    sp_snapshot_close(s);

    /* the generated ID and the uid hash both have state: Flink uses the uid hash one */
    m = model(4);
    add_op(m, NULL, "0123456789abcdef0123456789abcdef", 1, 128, ST_KEYED);
    add_op(m, "new-uid", NULL, 1, 128, ST_KEYED);
    s = write_open(m, NULL);
    sp_job_init(&job);
    sp_job_parse_json(&job, js, strlen(js), "job.json", &err);
    sp_check(s, &job, NULL, &r, &err);
    tap_ok(r.restorable && !r.ok && verdict_of(&r, "new-uid") == SP_VERDICT_SHADOWED && r.items[0].ok,
           "generated-ID state shadowed by the uid hash's: restorable, but its state is ignored");
    sp_check_result_free(&r);
    sp_job_free(&job);
    sp_snapshot_close(s);
}

static void test_job_parsing(void)
{
    sp_job_t job;
    sp_error_t err;
    sp_job_init(&job);
    const char *uids = "# the new job\nsource\n  map  \n\n\t# indented comment\nkeyed\r\nsource\n";
    tap_ok(sp_job_parse_uids(&job, uids, strlen(uids), "uids.txt", &err) == SP_OK && job.n_operators == 3 &&
               strcmp(job.operators[1].uid, "map") == 0,
           "uids file: comments, blanks, spaces, CRLF, duplicates merged");
    sp_job_free(&job);
    const char *bom_uids = "\xef\xbb\xbfsource\nmap\n";
    sp_job_init(&job);
    tap_ok(sp_job_parse_uids(&job, bom_uids, strlen(bom_uids), "uids.txt", &err) == SP_OK && job.n_operators == 2 &&
               strcmp(job.operators[0].uid, "source") == 0,
           "uids file: a leading UTF-8 BOM is not part of the first uid");
    sp_job_free(&job);
    const char *bom_json = "\xef\xbb\xbf{\"operators\": [{\"uid\": \"a\"}]}\n";
    sp_job_init(&job);
    tap_ok(sp_job_parse_json(&job, bom_json, strlen(bom_json), "job.json", &err) == SP_OK && job.n_operators == 1,
           "job JSON: a leading UTF-8 BOM is skipped");
    sp_job_free(&job);
    const char *trail = "{\"operators\": [{\"uid\": \"a\"}]} {\"x\": 1}";
    sp_job_init(&job);
    tap_ok(sp_job_parse_json(&job, trail, strlen(trail), "job.json", &err) == SP_ERR_INVALID,
           "job JSON: text after the JSON value is an error");
    sp_job_free(&job);

    const char *bad[] = {
        "{\"operators\": [{\"uid\": \"a\", \"paralelism\": 2}]}",
        "{\"operators\": [{\"parallelism\": 2}]}",
        "{\"operators\": [{\"uid\": \"a\", \"parallelism\": 0}]}",
        "{\"operators\": [{\"operator_id\": \"xyz\"}]}",
        "{\"operators\": [{\"uid\": \"a\", \"operator_id\": \"0123456789abcdef0123456789abcdef\"}]}",
        "{\"operators\": []}",
        "[1, 2]",
        "{\"operators\": [{\"uid\": \"a\", \"parallelism\": 2}, {\"uid\": \"a\", \"parallelism\": 3}]}",
        "{not json",
    };
    const char *field[] = {"operators[0].paralelism", "operators[0]", "operators[0].parallelism",
                           "operators[0].operator_id", "operators[0].operator_id", "operators", "", "", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sp_job_init(&job);
        sp_error_clear(&err);
        sp_status_t s = sp_job_parse_json(&job, bad[i], strlen(bad[i]), "job.json", &err);
        tap_ok(s == SP_ERR_INVALID && (!field[i][0] || strcmp(err.field, field[i]) == 0) &&
                   strcmp(err.file, "job.json") == 0,
               "bad job JSON %zu rejected, naming file and field '%s' (got '%s': %s)", i, field[i], err.field,
               err.message);
        sp_job_free(&job);
    }
    const char *good = "{\"parallelism\": 3, \"max_parallelism\": 64, \"operators\": [{\"uid\": \"a\"}, "
                       "{\"operator_id\": \"0123456789abcdef0123456789abcdef\", \"parallelism\": 5, \"name\": \"x\"}]}";
    sp_job_init(&job);
    tap_ok(sp_job_parse_json(&job, good, strlen(good), "job.json", &err) == SP_OK && job.n_operators == 2 &&
               job.operators[0].parallelism == 3 && job.operators[0].max_parallelism == 64 &&
               job.operators[1].parallelism == 5 && strcmp(job.operators[1].name, "x") == 0,
           "job JSON: defaults and per-operator values");
    sp_job_free(&job);

    /* Flink REST plans: POST /jars/:id/plan, 1.15 string plan, job details vertices */
    const char *plan = "{\"plan\":{\"jid\":\"b2bbf388b79529ac8a1155432b33594f\",\"name\":\"j\",\"type\":\"STREAMING\","
                       "\"nodes\":[{\"id\":\"e8655176e9d6a7be7b41a90e375c1cf4\",\"parallelism\":2,\"operator\":\"\","
                       "\"description\":\"Window(...)<br/>+- sink: Writer<br/>\",\"inputs\":[{\"id\":"
                       "\"7978ee100b0b4f4965a628c53e3d81d2\",\"num\":0}]},{\"id\":\"7978ee100b0b4f4965a628c53e3d81d2\","
                       "\"parallelism\":3,\"description\":\"keyed-process<br/>\"}]}}";
    sp_job_init(&job);
    tap_ok(sp_job_parse_plan(&job, plan, strlen(plan), "plan.json", &err) == SP_OK && job.n_operators == 2 &&
               job.from_plan && job.operators[1].parallelism == 3 && job.operators[1].max_parallelism == -1 &&
               strcmp(job.operators[1].name, "keyed-process") == 0,
           "plan: job vertices with parallelism, max parallelism unknown, description as name");
    sp_job_free(&job);
    const char *plan15 = "{\"plan\": \"{\\\"nodes\\\":[{\\\"id\\\":\\\"7978ee100b0b4f4965a628c53e3d81d2\\\","
                         "\\\"parallelism\\\":2}]}\"}";
    sp_job_init(&job);
    tap_ok(sp_job_parse_plan(&job, plan15, strlen(plan15), "p", &err) == SP_OK && job.n_operators == 1,
           "plan as a JSON string (Flink 1.15)");
    sp_job_free(&job);
    const char *details = "{\"jid\":\"x\",\"vertices\":[{\"id\":\"7978ee100b0b4f4965a628c53e3d81d2\",\"name\":\"k\","
                          "\"parallelism\":2,\"maxParallelism\":128}]}";
    sp_job_init(&job);
    tap_ok(sp_job_parse_plan(&job, details, strlen(details), "p", &err) == SP_OK && job.n_operators == 1 &&
               job.operators[0].max_parallelism == -1,
           "job details (GET /jobs/:id): vertices");
    sp_job_free(&job);
    const char *noplan = "{\"jobs\": []}";
    sp_job_init(&job);
    tap_ok(sp_job_parse_plan(&job, noplan, strlen(noplan), "p", &err) == SP_ERR_INVALID, "not a plan: rejected");
    sp_job_free(&job);

    sp_opref_t ref;
    tap_ok(sp_opref_parse("uid:", &ref, &err) == SP_ERR_INVALID, "opref 'uid:' (empty) rejected");
    tap_ok(sp_opref_parse("window", &ref, &err) == SP_ERR_INVALID && strstr(err.message, "uid:"),
           "opref without uid: prefix and not hex: rejected with a hint");
    tap_ok(sp_opref_parse("E8655176E9D6A7BE7B41A90E375C1CF4", &ref, &err) == SP_OK && !ref.by_uid,
           "opref: upper-case hex ID");
    sp_job_init(&job);
    tap_ok(sp_job_add(&job, "a", false, NULL, 40000, -1, NULL, "t", &err) == SP_ERR_INVALID,
           "parallelism above 32768 rejected");
    sp_job_free(&job);
}

static void test_like(void)
{
    sp_snapshot_t *a = standard(6, 2, 128);
    sp_metadata_t *m = model(6);
    add_op(m, "source", NULL, 2, 128, ST_OPERATOR);
    add_op(m, "map", NULL, 2, 128, ST_OPERATOR);
    add_op(m, "keyed", NULL, 4, 256, ST_KEYED);
    add_op(m, "window", NULL, 2, 128, ST_KEYED);
    add_op(m, "sink", NULL, 2, 128, ST_NO_SUBTASKS);
    sp_snapshot_t *b = write_open(m, NULL);
    sp_job_t job;
    sp_error_t err;
    sp_job_init(&job);
    sp_job_add_snapshot(&job, a->meta, "--like a", &err);
    sp_check_result_t r;
    sp_check(a, &job, NULL, &r, &err);
    tap_ok(r.ok && r.n_restored == 5, "--like itself: restores");
    sp_check_result_free(&r);
    sp_job_free(&job);
    sp_job_init(&job);
    sp_job_add_snapshot(&job, b->meta, "--like b", &err);
    sp_check(a, &job, NULL, &r, &err);
    tap_ok(!r.restorable && verdict_of(&r, "keyed") == SP_VERDICT_MAX_PARALLELISM_MISMATCH,
           "--like a snapshot whose operator runs with max parallelism 256: mismatch");
    sp_check_result_free(&r);
    sp_job_free(&job);
    sp_snapshot_close(a);
    sp_snapshot_close(b);
}

static int count_files(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls -1 '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

static void test_edit(int version)
{
    char dir[512], out[600];
    sp_metadata_t *m = model(version);
    add_op(m, "source", NULL, 2, 128, ST_COORDINATOR);
    add_op(m, "keyed", NULL, 2, 128, ST_KEYED);
    add_op(m, "window", NULL, 2, 128, ST_KEYED);
    sp_snapshot_t *s = write_open(m, dir);
    sp_error_t err;
    sp_edit_t e[3];
    tap_ok(sp_edit_parse(SP_EDIT_SET_UID, "uid:source=source-v2", &e[0], &err) == SP_OK &&
               strcmp(e[0].new_uid, "source-v2") == 0 && e[0].target.by_uid,
           "V%d: parse --set-uid uid:OLD=NEW", version);
    tap_ok(sp_edit_parse(SP_EDIT_DROP_OPERATOR, "uid:window", &e[1], &err) == SP_OK, "V%d: parse --drop-operator",
           version);
    sp_edit_outcome_t oc[2];
    tap_ok(sp_edit_apply(s, e, 2, oc, &err) == SP_OK && s->meta->n_operators == 2, "V%d: set uid + drop applied",
           version);
    uint8_t nid[16];
    char nhex[33];
    sp_uid_to_operator_id("source-v2", 9, nid);
    sp_id_to_hex(nid, nhex);
    const sp_operator_t *op = &s->meta->operators[0];
    tap_ok(memcmp(op->id, nid, 16) == 0 && memcmp(oc[0].new_id, nid, 16) == 0, "V%d: new operator ID = hash of the new uid",
           version);
    if (version >= 5)
        tap_ok(op->uid.len == 9 && memcmp(op->uid.ptr, "source-v2", 9) == 0 && op->name.len &&
                   memcmp(op->name.ptr, "Name of source", 14) == 0,
               "V%d: stored uid updated, name kept", version);
    tap_ok(op->coordinator && memcmp(op->coordinator->u.byte_stream.name.ptr, nhex, 32) == 0,
           "V%d: coordinator state named after the new operator ID", version);
    snprintf(out, sizeof out, "%s-edited", dir);
    sp_edit_write_options_t wo = {out, false, false, 0};
    sp_edit_write_result_t res;
    tap_ok(sp_edit_write(s, &wo, &res, &err) == SP_OK && res.metadata_path, "V%d: written to a new directory (%s)",
           version, err.message);
    sp_edit_write_result_free(&res);
    tap_ok(sp_edit_write(s, &wo, &res, &err) == SP_ERR_REFUSED, "V%d: an existing output is refused", version);
    sp_edit_write_result_free(&res);
    sp_snapshot_t *o = NULL;
    sp_snapshot_open(out, 0, &o, &err);
    sp_job_t job;
    job_of(&job, "source-v2 keyed");
    sp_check_result_t r;
    sp_check(o, &job, NULL, &r, &err);
    tap_ok(o && r.ok && r.n_restored == 2, "V%d: edit --set-uid then check --uid NEW passes", version);
    sp_check_result_free(&r);
    sp_job_free(&job);
    sp_snapshot_t *orig = NULL;
    sp_snapshot_open(dir, 0, &orig, &err);
    sp_diff_result_t d;
    tap_ok(orig && sp_diff(orig, o, &d, &err) == SP_OK && d.removed == 1 && d.moved == 1 && d.same == 1 &&
               d.added == 0 && !d.identical,
           "V%d: diff: window removed, source moved, keyed unchanged", version);
    tap_ok(d.n_ops == 3 && d.ops[0].kind == SP_DIFF_MOVED && (d.ops[0].changes & SP_DIFF_OPERATOR_ID) &&
               (version < 5 || (d.ops[0].changes & SP_DIFF_UID)),
           "V%d: the moved operator: ID%s changed", version, version >= 5 ? " and uid" : "");
    sp_diff_result_free(&d);
    sp_diff(orig, orig, &d, &err);
    tap_ok(d.identical && d.same == 3, "V%d: a snapshot is identical to itself", version);
    sp_diff_result_free(&d);
    sp_snapshot_close(o);
    sp_snapshot_close(orig);

    /* errors */
    sp_snapshot_close(s);
    sp_snapshot_open(dir, 0, &s, &err);
    sp_edit_t bad;
    sp_edit_parse(SP_EDIT_SET_UID, "uid:source=keyed", &bad, &err);
    tap_ok(sp_edit_apply(s, &bad, 1, NULL, &err) == SP_ERR_INVALID && strstr(err.message, "already has") &&
               strcmp(err.field, "edit[0]") == 0,
           "V%d: --set-uid to a uid whose operator ID exists: refused", version);
    sp_edit_free(&bad);
    sp_edit_parse(SP_EDIT_DROP_OPERATOR, "uid:nope", &bad, &err);
    tap_ok(sp_edit_apply(s, &bad, 1, NULL, &err) == SP_ERR_INVALID && strstr(err.message, "no such operator"),
           "V%d: dropping an operator that is not there: refused", version);
    sp_edit_free(&bad);
    tap_ok(sp_edit_parse(SP_EDIT_SET_UID, "uid:source", &bad, &err) == SP_ERR_INVALID, "V%d: --set-uid without =NEW",
           version);

    /* in place: the previous metadata is kept beside the directory */
    sp_snapshot_close(s);
    sp_snapshot_open(dir, 0, &s, &err);
    size_t before_len = s->size;
    uint8_t *before = malloc(before_len);
    memcpy(before, s->bytes, before_len);
    sp_edit_apply(s, &e[1], 1, NULL, &err);
    sp_edit_write_options_t ip = {NULL, true, false, 1764000000000LL};
    tap_ok(sp_edit_write(s, &ip, &res, &err) == SP_OK && res.backup_path, "V%d: in place", version);
    char want[700];
    snprintf(want, sizeof want, "%s._metadata.sp-backup-20251124T160000Z", dir);
    tap_ok(res.backup_path && strcmp(res.backup_path, want) == 0, "V%d: backup beside the directory: %s", version,
           res.backup_path ? res.backup_path : "(none)");
    char *bk = NULL;
    size_t bl = 0;
    tap_ok(res.backup_path && sp_fs_read_all(res.backup_path, &bk, &bl, &err) == SP_OK && bl == before_len &&
               memcmp(bk, before, bl) == 0,
           "V%d: the backup holds the original metadata byte for byte", version);
    free(bk);
    free(before);
    tap_ok(count_files(dir) == 1, "V%d: nothing was added inside the snapshot directory", version);
    sp_edit_write_result_free(&res);
    sp_snapshot_close(s);
    sp_snapshot_open(dir, 0, &s, &err);
    tap_ok(s && s->meta->n_operators == 2, "V%d: the in-place result has the operator dropped", version);
    /* a second in-place edit in the same second keeps both backups */
    sp_edit_parse(SP_EDIT_DROP_OPERATOR, "uid:keyed", &bad, &err);
    sp_edit_apply(s, &bad, 1, NULL, &err);
    tap_ok(sp_edit_write(s, &ip, &res, &err) == SP_OK && res.backup_path && strstr(res.backup_path, "Z-2"),
           "V%d: a second backup at the same time gets its own name", version);
    sp_edit_write_result_free(&res);
    sp_edit_free(&bad);
    sp_snapshot_close(s);
    sp_edit_free(&e[0]);
    sp_edit_free(&e[1]);
}

static void test_rewrite_prefix(void)
{
    char dir[512], old[600], path[700];
    snprintf(old, sizeof old, "%s/old", tmpdir);
    mkdir(old, 0755);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/data-%d", old, i);
        FILE *f = fopen(path, "wb");
        fputs("abc", f);
        fclose(f);
    }
    sp_metadata_t *m = model(6);
    add_op(m, "files", NULL, 2, 128, ST_ABSOLUTE);
    sp_snapshot_t *s = write_open(m, dir);
    sp_error_t err;
    sp_edit_t e;
    char moved[600], arg[1400];
    snprintf(moved, sizeof moved, "%s/moved", tmpdir);
    /* not at a path boundary: "file:<tmp>/ol" must not match "file:<tmp>/old/..." */
    snprintf(arg, sizeof arg, "file:%s/ol=file:%s", tmpdir, moved);
    sp_edit_parse(SP_EDIT_REWRITE_PREFIX, arg, &e, &err);
    tap_ok(sp_edit_apply(s, &e, 1, NULL, &err) == SP_ERR_INVALID && strstr(err.message, "no absolute reference"),
           "rewrite-prefix matches at path boundaries only");
    sp_edit_free(&e);
    snprintf(arg, sizeof arg, "file:%s=file:%s", old, moved);
    sp_edit_parse(SP_EDIT_REWRITE_PREFIX, arg, &e, &err);
    sp_edit_outcome_t oc;
    tap_ok(sp_edit_apply(s, &e, 1, &oc, &err) == SP_OK && oc.rewritten == 2, "rewrite-prefix rewrote 2 references");
    sp_edit_free(&e);
    sp_edit_write_options_t ip = {NULL, true, false, 0};
    sp_edit_write_result_t res;
    tap_ok(sp_edit_write(s, &ip, &res, &err) == SP_ERR_REFUSED && strstr(err.message, "would not verify"),
           "in place: refused while the new paths do not exist (nothing written)");
    sp_edit_write_result_free(&res);
    rename(old, moved);
    tap_ok(sp_edit_write(s, &ip, &res, &err) == SP_OK, "in place: written once the files are there (%s)", err.message);
    sp_edit_write_result_free(&res);
    sp_snapshot_close(s);
    snprintf(arg, sizeof arg, "file:%s=relative/path", moved);
    sp_snapshot_open(dir, 0, &s, &err);
    sp_edit_parse(SP_EDIT_REWRITE_PREFIX, arg, &e, &err);
    tap_ok(sp_edit_apply(s, &e, 1, NULL, &err) == SP_ERR_INVALID && strstr(err.message, "not an absolute"),
           "rewrite-prefix refuses to make a reference relative");
    sp_edit_free(&e);
    sp_snapshot_close(s);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/sp-test-check-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_flink_cases(6);
    test_flink_cases(4);
    test_flink_cases(2);
    test_state_kinds();
    test_uid_hash();
    test_job_parsing();
    test_like();
    test_edit(6);
    test_edit(4);
    test_rewrite_prefix();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (!tap_failed && system(cmd) != 0)
        printf("# could not remove %s\n", tmpdir);
    return tap_done();
}
