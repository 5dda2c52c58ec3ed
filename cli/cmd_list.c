/* sp list ROOT: every snapshot under a root, one row each (facts from sp_catalog_scan). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "out.h"

const char *fmt_time_utc(int64_t ms, char *buf, size_t n)
{
    struct tm tm;
    time_t t = (time_t)(ms / 1000);
    if (ms <= 0 || !gmtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, n, "-");
    return buf;
}

/* Kind and format as sp inspect names them; NULL where the entry does not tell. */
static const char *kind_of(const sp_catalog_entry_t *e)
{
    return e->has_metadata ? sp_kind_name(e->kind) : NULL;
}

static const char *format_of(const sp_catalog_entry_t *e)
{
    return e->has_metadata && e->kind == SP_KIND_SAVEPOINT && e->format ? sp_format_name(e->format) : NULL;
}

void catalog_entry_json(jw_t *w, const sp_catalog_entry_t *e)
{
    char t[32];
    jw_key(w, "location");
    jw_str(w, e->location);
    jw_key(w, "path");
    jw_str(w, e->path);
    jw_key(w, "archive");
    jw_bool(w, e->archive);
    jw_key(w, "state");
    jw_str(w, sp_catalog_state_name(e->state));
    jw_key(w, "job");
    if (e->job[0]) jw_str(w, e->job); else jw_null(w);
    jw_key(w, "kind");
    if (kind_of(e)) jw_str(w, kind_of(e)); else jw_null(w);
    jw_key(w, "format");
    if (format_of(e)) jw_str(w, format_of(e)); else jw_null(w);
    jw_key(w, "checkpoint_id");
    if (e->has_metadata) jw_int(w, e->checkpoint_id); else jw_null(w);
    jw_key(w, "metadata_version");
    if (e->has_metadata) jw_int(w, e->metadata_version); else jw_null(w);
    jw_key(w, "total_bytes");
    if (e->has_metadata) jw_uint(w, e->total_state_bytes); else jw_null(w);
    jw_key(w, "metadata_bytes");
    if (e->has_metadata) jw_uint(w, e->metadata_bytes); else jw_null(w);
    jw_key(w, "modified");
    if (e->mtime_ms > 0) jw_str(w, fmt_time_utc(e->mtime_ms, t, sizeof t)); else jw_null(w);
    jw_key(w, "modified_ms");
    if (e->mtime_ms > 0) jw_int(w, e->mtime_ms); else jw_null(w);
    jw_key(w, "pinned");
    jw_bool(w, e->record.pins > 0);
    jw_key(w, "pin_reason");
    if (e->record.pins && e->record.pin_reason[0]) jw_str(w, e->record.pin_reason); else jw_null(w);
    jw_key(w, "restores");
    jw_obj(w);
    jw_key(w, "claim");
    jw_uint(w, e->record.restores_claim);
    jw_key(w, "no_claim");
    jw_uint(w, e->record.restores_no_claim);
    jw_key(w, "legacy");
    jw_uint(w, e->record.restores_legacy);
    jw_obj_end(w);
    jw_key(w, "record");
    jw_str(w, e->record_unreadable ? "unreadable" : e->record.exists ? "present" : "none");
    jw_key(w, "complete");
    if (e->complete == SP_COMPLETE_UNCHECKED) jw_null(w); else jw_bool(w, e->complete == SP_COMPLETE_YES);
    jw_key(w, "problems");
    if (e->complete == SP_COMPLETE_UNCHECKED) jw_null(w); else jw_uint(w, e->problems);
    jw_key(w, "error");
    if (e->state == SP_CATALOG_OK) {
        jw_null(w);
    } else {
        jw_obj(w);
        jw_key(w, "code");
        if (e->error.code) jw_str(w, sp_status_token(e->error.code)); else jw_null(w);
        jw_key(w, "message");
        jw_str(w, e->error.message);
        jw_key(w, "file");
        if (e->error.file[0]) jw_str(w, e->error.file); else jw_null(w);
        jw_key(w, "offset");
        if (e->error.offset != SP_NO_OFFSET) jw_uint(w, e->error.offset); else jw_null(w);
        jw_key(w, "field");
        if (e->error.field[0]) jw_str(w, e->error.field); else jw_null(w);
        jw_obj_end(w);
    }
}

/* The STATE column: the state (with --verify, complete / damaged), then what the record holds. */
static void state_text(const sp_catalog_entry_t *e, char *buf, size_t n)
{
    int k;
    if (e->state != SP_CATALOG_OK)
        k = snprintf(buf, n, "%s", sp_catalog_state_name(e->state));
    else if (e->complete == SP_COMPLETE_YES)
        k = snprintf(buf, n, "complete");
    else if (e->complete == SP_COMPLETE_NO)
        k = snprintf(buf, n, "damaged (%u problem%s)", e->problems, e->problems == 1 ? "" : "s");
    else
        k = snprintf(buf, n, "ok");
    size_t used = k > 0 && (size_t)k < n ? (size_t)k : n - 1;
    if (e->record.pins)
        used += (size_t)snprintf(buf + used, n - used, ", pinned");
    if (used < n && e->record.restores_claim)
        used += (size_t)snprintf(buf + used, n - used, ", CLAIM-restored");
    if (used < n && e->record_unreadable)
        snprintf(buf + used, n - used, ", record unreadable");
}

enum { COLS = 9 };
static const char *const headers[COLS] = {"LOCATION", "JOB", "KIND", "FORMAT", "CHECKPOINT ID", "VERSION", "SIZE",
                                           "MODIFIED", "STATE"};
static const bool right[COLS] = {false, false, false, false, true, true, true, false, false};

static void row_cells(const sp_catalog_entry_t *e, char cells[COLS][4096])
{
    char *shown = term_safe(e->path);
    snprintf(cells[0], 4096, "%s", shown ? shown : e->path);
    free(shown);
    snprintf(cells[1], 96, "%s", e->job[0] ? e->job : "-");
    snprintf(cells[2], 96, "%s", kind_of(e) ? kind_of(e) : "-");
    snprintf(cells[3], 96, "%s", format_of(e) ? format_of(e) : "-");
    if (e->has_metadata) {
        snprintf(cells[4], 96, "%" PRId64, e->checkpoint_id);
        snprintf(cells[5], 96, "%d", (int)e->metadata_version);
        fmt_iec(e->total_state_bytes, cells[6], 96);
    } else {
        strcpy(cells[4], "-");
        strcpy(cells[5], "-");
        strcpy(cells[6], "-");
    }
    fmt_time_utc(e->mtime_ms, cells[7], 96);
    state_text(e, cells[8], 96);
}

static void print_table(const sp_catalog_t *cat)
{
    size_t width[COLS];
    for (int c = 0; c < COLS; c++)
        width[c] = strlen(headers[c]);
    char cells[COLS][4096];
    for (uint32_t i = 0; i < cat->n; i++) {
        row_cells(&cat->entries[i], cells);
        for (int c = 0; c < COLS; c++)
            if (strlen(cells[c]) > width[c])
                width[c] = strlen(cells[c]);
    }
    /* the location can be long: it is not padded beyond what the other rows need */
    for (int c = 0; c < COLS; c++)
        printf(right[c] ? "%*s%s" : "%-*s%s", c == COLS - 1 ? 0 : (int)width[c], headers[c], c == COLS - 1 ? "\n" : "  ");
    for (uint32_t i = 0; i < cat->n; i++) {
        row_cells(&cat->entries[i], cells);
        for (int c = 0; c < COLS; c++)
            printf(right[c] ? "%*s%s" : "%-*s%s", c == COLS - 1 ? 0 : (int)width[c], cells[c], c == COLS - 1 ? "\n" : "  ");
    }
}

int cmd_list(int argc, char **argv)
{
    bool json = false, verify = false;
    const cli_option_t opts[] = {
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: root and snapshots"},
        {"verify", 0, OPT_FLAG, &verify, NULL, "check every snapshot's referenced files (complete or damaged)"},
        {0},
    };
    const cli_command_t *cmd = command_find("list");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 1)
        return opts_usage_error(cmd, "give exactly one root directory");
    sp_catalog_options_t co = {.verify = verify};
    sp_catalog_t cat;
    sp_error_t err;
    sp_error_clear(&err);
    sp_status_t s = sp_catalog_scan(argv[0], &co, &cat, &err);
    if (s) {
        sp_catalog_free(&cat);
        return report_error("list", &err, json);
    }
    /* problems found: something to look at (exit 1, as sp verify) */
    uint32_t bad = 0, pinned = 0;
    for (uint32_t i = 0; i < cat.n; i++) {
        const sp_catalog_entry_t *e = &cat.entries[i];
        bad += e->state != SP_CATALOG_OK || e->complete == SP_COMPLETE_NO;
        pinned += e->record.pins > 0;
    }
    if (json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "root");
        jw_str(&w, cat.root);
        jw_key(&w, "verified");
        jw_bool(&w, verify);
        jw_key(&w, "snapshots");
        jw_arr(&w);
        for (uint32_t i = 0; i < cat.n; i++) {
            jw_obj(&w);
            catalog_entry_json(&w, &cat.entries[i]);
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
        jw_obj_end(&w);
        jw_end(&w);
    } else if (cat.n == 0) {
        printf("No snapshots under %s\n", cat.root);
    } else {
        print_table(&cat);
        /* why each entry that is not ok is not: under the table, one line each */
        bool first = true;
        for (uint32_t i = 0; i < cat.n; i++) {
            const sp_catalog_entry_t *e = &cat.entries[i];
            if (e->state == SP_CATALOG_OK)
                continue;
            printf("%s%s: ", first ? "\n" : "", e->path);
            if (e->error.offset != SP_NO_OFFSET)
                printf("at byte %" PRIu64 " (0x%" PRIx64 "), ", e->error.offset, e->error.offset);
            if (e->error.field[0])
                printf("field %s: ", e->error.field);
            printf("%s\n", e->error.message);
            first = false;
        }
        printf("\n%u snapshot%s under %s, %u pinned, %u with problems\n", cat.n, cat.n == 1 ? "" : "s", cat.root,
               pinned, bad);
    }
    sp_catalog_free(&cat);
    return bad ? EXIT_PROBLEMS : EXIT_OK_;
}
