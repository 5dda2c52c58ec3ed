/* sp relocate SRC DST: copy or move a snapshot so that the copy is complete and self-contained. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "out.h"
#include "flinkcli.h"
#include "progress.h"
#include "s3_config.h"

static void json_plan(jw_t *w, const sp_snapshot_t *snap, const sp_relocate_plan_t *plan, bool dry_run)
{
    jw_key(w, "schema_version");
    jw_int(w, 1);
    jw_key(w, "source");
    jw_str(w, snap->location);
    jw_key(w, "destination");
    jw_str(w, plan->dst_display);
    jw_key(w, "dry_run");
    jw_bool(w, dry_run);
    jw_key(w, "archive");
    jw_bool(w, plan->archive);
    jw_key(w, "rename");
    jw_bool(w, plan->rename_whole);
    jw_key(w, "resume");
    jw_bool(w, plan->resume);
    jw_key(w, "complete");
    jw_bool(w, plan->complete);
    jw_key(w, "total_bytes");
    jw_uint(w, plan->total_bytes);
    jw_key(w, "rewrites");
    jw_uint(w, plan->rewrites);
    jw_key(w, "files");
    jw_arr(w);
    for (uint32_t i = 0; i < plan->n_files; i++) {
        const sp_relocate_file_t *f = &plan->files[i];
        jw_obj(w);
        jw_key(w, "source");
        jw_str(w, f->src_key);
        jw_key(w, "destination");
        jw_str(w, f->dst_rel);
        jw_key(w, "size_bytes");
        jw_int(w, f->size);
        jw_key(w, "external");
        jw_bool(w, f->external);
        jw_key(w, "unreferenced");
        jw_bool(w, f->unreferenced);
        jw_obj_end(w);
    }
    jw_arr_end(w);
    jw_key(w, "unreferenced");
    jw_arr(w);
    for (uint32_t i = 0; i < plan->n_unreferenced; i++)
        jw_str(w, plan->unreferenced[i]);
    jw_arr_end(w);
}


/* `--move` killed after the source's _metadata was deleted: the source no longer opens, but its dispose
 * journal names the destination, and the same command finishes the job.  Otherwise the open error stands. */
static int resume_move(const char *src, const char *dst, bool force, bool json, sp_error_t *open_err)
{
    sp_relocate_result_t res;
    sp_error_t err;
    sp_error_clear(&err);
    sp_status_t s = sp_relocate_resume_move(src, dst, force, &res, &err);
    if (s == SP_ERR_NOT_FOUND)
        return report_error("relocate", open_err, json);
    if (s)
        return report_error("relocate", &err, json);
    if (json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "resumed_move");
        jw_bool(&w, true);
        jw_key(&w, "result");
        jw_obj(&w);
        jw_key(&w, "files_copied");
        jw_uint(&w, 0);
        jw_key(&w, "files_skipped");
        jw_uint(&w, 0);
        jw_key(&w, "bytes_copied");
        jw_uint(&w, 0);
        jw_key(&w, "source_deleted");
        jw_bool(&w, res.source_deleted);
        jw_key(&w, "metadata");
        jw_str(&w, res.metadata_location ? res.metadata_location : "");
        jw_obj_end(&w);
        jw_obj_end(&w);
        jw_end(&w);
    } else {
        printf("Finishing an interrupted move %s -> %s: the copy verified; source deleted\n", src, dst);
    }
    sp_relocate_result_free(&res);
    return 0;
}

int cmd_relocate(int argc, char **argv)
{
    bool move = false, dry_run = false, json = false, checksum = false, unreferenced = false, force = false;
    const char *rest_url = NULL;
    long jobs = 8, zthreads = 0;
    const cli_option_t opts[] = {
        {"move", 0, OPT_FLAG, &move, NULL, "delete the source's own files once the copy is verified"},
        {"dry-run", 'n', OPT_FLAG, &dry_run, NULL, "print the plan (files, bytes, rewrites); change nothing"},
        {"json", 0, OPT_FLAG, &json, NULL, "one JSON object: the plan and the result"},
        {"jobs", 'j', OPT_INT, &jobs, "N", "copy N files at a time (default 8: file copies wait on storage, not CPU)"},
        {"checksum", 0, OPT_FLAG, &checksum, NULL, "compare every copied byte, not only sizes"},
        {"include-unreferenced", 0, OPT_FLAG, &unreferenced, NULL, "also copy files no state handle references"},
        {"zstd-threads", 0, OPT_INT, &zthreads, "N", "zstd worker threads for .tar.zst (default: one per core)"},
        {"force", 0, OPT_FLAG, &force, NULL, "--move although the ownership record asks to keep the source (pins, NO_CLAIM, LEGACY)"},
        {"rest-url", 0, OPT_STRING, &rest_url, "URL", "--move: the cluster to ask about NO_CLAIM / LEGACY restores"},
        {0},
    };
    const cli_command_t *cmd = command_find("relocate");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 2)
        return opts_usage_error(cmd, "give the source snapshot and the destination");
    if (jobs < 1 || jobs > 256)
        return opts_usage_error(cmd, "--jobs must be between 1 and 256");
    if (zthreads < 0 || zthreads > 256)
        return opts_usage_error(cmd, "--zstd-threads must be between 0 (one per core) and 256");
    s3_cli_set_jobs((int)jobs); /* S3: at most N transfers in flight per bucket */
    sp_error_t err;
    sp_error_clear(&err);
    sp_snapshot_t *snap;
    sp_status_t s = sp_snapshot_open(argv[0], 0, &snap, &err);
    if (s && move && !dry_run)
        return resume_move(argv[0], argv[1], force, json, &err);
    if (s)
        return report_error("relocate", &err, json);
    progress_t bar;
    progress_init(&bar, "copying");
    sp_relocate_options_t ro = {.move = move, .checksum = checksum, .include_unreferenced = unreferenced,
                                .jobs = (int)jobs, .zstd_threads = (int)zthreads,
                                .progress = progress_update, .progress_user = &bar};
    flink_cli_query_t q = {.rest_url = rest_url};
    ro.force = force;
    ro.record_query = flink_cli_record_query;
    ro.record_query_user = &q;
    sp_relocate_plan_t plan;
    s = sp_relocate_plan(snap, argv[1], &ro, &plan, &err);
    flink_cli_query_close(&q);
    if (!s && plan.record_warning)
        fprintf(stderr, "sp relocate: warning: %s\n", plan.record_warning);
    if (s) {
        sp_relocate_plan_free(&plan);
        sp_snapshot_close(snap);
        return report_error("relocate", &err, json);
    }
    char b1[32];
    if (!json) {
        printf("%s %s -> %s: %u file%s, %s, %" PRIu64 " handle%s rewritten%s\n", dry_run ? "Plan:" : "Relocating",
               snap->dir, plan.dst_display, plan.n_files, plan.n_files == 1 ? "" : "s",
               fmt_iec(plan.total_bytes, b1, sizeof b1), plan.rewrites, plan.rewrites == 1 ? "" : "s",
               plan.rename_whole ? " (same file system: the directory is renamed)"
               : plan.complete   ? " (the destination already holds this relocation: verifying it)"
               : plan.resume     ? " (finishing an earlier, interrupted run)"
                                 : "");
        if (dry_run)
            for (uint32_t i = 0; i < plan.n_files; i++)
                printf("  copy %12" PRId64 "  %s -> %s%s\n", plan.files[i].size, plan.files[i].src_key,
                       plan.files[i].dst_rel, plan.files[i].external ? "  (gathered from outside; handle rewritten)" : "");
        for (uint32_t i = 0; i < plan.n_unreferenced; i++) {
            bool copied = false; /* --include-unreferenced copies regular files only */
            for (uint32_t k = 0; unreferenced && k < plan.n_files && !copied; k++)
                copied = plan.files[k].unreferenced && strcmp(plan.files[k].src_key, plan.unreferenced[i]) == 0;
            printf("  %s %s (no state handle references it%s)\n", copied ? "copy" : "left", plan.unreferenced[i],
                   unreferenced && !copied ? "; not a regular file" : "");
        }
    }
    sp_relocate_result_t res = {0};
    if (!dry_run) {
        s = sp_relocate_run(snap, &plan, &ro, &res, &err);
        progress_end(&bar);
    }
    if (json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        json_plan(&w, snap, &plan, dry_run);
        jw_key(&w, "result");
        if (dry_run || s) {
            jw_null(&w);
        } else {
            jw_obj(&w);
            jw_key(&w, "files_copied");
            jw_uint(&w, res.files_copied);
            jw_key(&w, "files_skipped");
            jw_uint(&w, res.files_skipped);
            jw_key(&w, "bytes_copied");
            jw_uint(&w, res.bytes_copied);
            jw_key(&w, "source_deleted");
            jw_bool(&w, res.source_deleted);
            jw_key(&w, "metadata");
            jw_str(&w, res.metadata_location ? res.metadata_location : "");
            jw_obj_end(&w);
        }
        jw_obj_end(&w);
        jw_end(&w);
    } else if (!dry_run && !s) {
        printf("Done: %" PRIu64 " copied, %" PRIu64 " already there, %s; verified%s\n", res.files_copied,
               res.files_skipped, fmt_iec(res.bytes_copied, b1, sizeof b1),
               res.source_deleted ? "; source deleted" : "");
    }
    int rc = 0;
    if (s)
        rc = report_error("relocate", &err, false);
    sp_relocate_result_free(&res);
    sp_relocate_plan_free(&plan);
    sp_snapshot_close(snap);
    return rc;
}
