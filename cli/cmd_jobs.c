/* sp jobs [--all] [--json]: the cluster's jobs (GET /jobs/overview); by default those not yet finished. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "flinkcli.h"
#include "out.h"

static bool terminal(const char *st)
{
    return strcmp(st, "FINISHED") == 0 || strcmp(st, "CANCELED") == 0 || strcmp(st, "FAILED") == 0 ||
           strcmp(st, "SUSPENDED") == 0;
}

static void fmt_duration(int64_t ms, char *buf, size_t n)
{
    if (ms < 0) {
        snprintf(buf, n, "-");
        return;
    }
    int64_t s = ms / 1000;
    if (s < 60)
        snprintf(buf, n, "%llds", (long long)s);
    else if (s < 3600)
        snprintf(buf, n, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
    else
        snprintf(buf, n, "%lldh%02lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

int cmd_jobs(int argc, char **argv)
{
    flink_cli_t c = {0};
    bool all = false;
    const cli_option_t opts[] = {
        {"all", 'a', OPT_FLAG, &all, NULL, "also finished, cancelled and failed jobs"},
        {"rest-url", 0, OPT_STRING, &c.rest_url, "URL", FLINK_CLI_REST_URL_HELP},
        {"json", 0, OPT_FLAG, &c.json, NULL, "one JSON object: the cluster and its jobs"},
        {"verbose", 'v', OPT_FLAG, &c.verbose, NULL, "trace every REST exchange"},
        {0},
    };
    const cli_command_t *cmd = command_find("jobs");
    int n, r = opts_parse(cmd, opts, argc, argv, &n);
    if (r)
        return r < 0 ? 0 : r;
    if (n != 0)
        return opts_usage_error(cmd, "takes no arguments");
    sp_error_t err;
    sp_error_clear(&err);
    sp_flink_t *fl;
    if (flink_cli_open(&c, &fl, &err))
        return report_error("jobs", &err, c.json);
    sp_flink_version_t v;
    sp_flink_job_t *jobs;
    size_t nj;
    sp_status_t s = sp_flink_get_version(fl, &v, &err);
    if (!s)
        s = sp_flink_jobs(fl, &jobs, &nj, &err);
    if (s) {
        sp_flink_close(fl);
        return report_error("jobs", &err, c.json);
    }
    if (c.json) {
        jw_t w;
        jw_init(&w, stdout, true);
        jw_obj(&w);
        jw_key(&w, "schema_version");
        jw_int(&w, 1);
        jw_key(&w, "cluster");
        jw_str(&w, sp_flink_url(fl));
        jw_key(&w, "flink_version");
        jw_str(&w, v.text);
        jw_key(&w, "jobs");
        jw_arr(&w);
        for (size_t i = 0; i < nj; i++) {
            if (!all && terminal(jobs[i].state))
                continue;
            jw_obj(&w);
            jw_key(&w, "job_id");
            jw_str(&w, jobs[i].id);
            jw_key(&w, "name");
            jw_str(&w, jobs[i].name);
            jw_key(&w, "state");
            jw_str(&w, jobs[i].state);
            jw_key(&w, "start_time_ms");
            jw_int(&w, jobs[i].start_time_ms);
            jw_key(&w, "end_time_ms");
            if (jobs[i].end_time_ms >= 0) jw_int(&w, jobs[i].end_time_ms); else jw_null(&w);
            jw_key(&w, "duration_ms");
            jw_int(&w, jobs[i].duration_ms);
            jw_key(&w, "tasks_total");
            jw_int(&w, jobs[i].tasks_total);
            jw_key(&w, "tasks_running");
            jw_int(&w, jobs[i].tasks_running);
            jw_obj_end(&w);
        }
        jw_arr_end(&w);
        jw_obj_end(&w);
        jw_end(&w);
    } else {
        size_t shown = 0;
        for (size_t i = 0; i < nj; i++) {
            if (!all && terminal(jobs[i].state))
                continue;
            if (!shown++)
                printf("%-32s  %-12s  %-20s  %-9s  %s\n", "JOB ID", "STATE", "STARTED", "DURATION", "NAME");
            char t[32], d[32];
            fmt_time_utc(jobs[i].start_time_ms, t, sizeof t);
            fmt_duration(jobs[i].duration_ms, d, sizeof d);
            printf("%-32s  %-12s  %-20s  %-9s  %s\n", jobs[i].id, jobs[i].state, t, d, jobs[i].name);
        }
        if (!shown)
            fprintf(stderr, "No %sjobs on %s (Flink %s).\n", all ? "" : "running ", sp_flink_url(fl), v.text);
    }
    sp_flink_jobs_free(jobs, nj);
    sp_flink_close(fl);
    return EXIT_OK_;
}
