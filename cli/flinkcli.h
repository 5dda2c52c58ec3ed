/*
 * flinkcli.h - what the commands that talk to a Flink cluster share:
 * resolving the cluster (--rest-url, then SP_REST_URL, then Flink's own
 * configuration in $FLINK_CONF_DIR), the default savepoint directory,
 * durations, --verbose tracing, and the ownership-record query that lets
 * dispose / prune / relocate --move ask the cluster about restores.
 * The library never reads the environment; this file does, for it.
 */
#ifndef SP_CLI_FLINKCLI_H
#define SP_CLI_FLINKCLI_H

#include <stdbool.h>
#include <stdint.h>

#include "sp.h"

/* Options every cluster command has. */
typedef struct flink_cli {
    const char *rest_url;   /* --rest-url */
    const char *timeout;    /* --timeout */
    bool verbose;           /* --verbose */
    bool json;              /* --json */
    bool timeout_per_wait;  /* --timeout bounds each wait only (sp restore), not the whole command */
} flink_cli_t;

/* "--rest-url URL" help text */
#define FLINK_CLI_REST_URL_HELP "the JobManager's REST address (default: SP_REST_URL, then rest.address/rest.port in $FLINK_CONF_DIR)"

/*
 * "90s", "5m", "1h", "500ms", "2h30m"; a bare number is seconds; "0" or "none" = no limit (0).
 * Returns -1 when not a duration.
 */
int64_t flink_cli_duration_ms(const char *s);

/* Milliseconds since the epoch. */
int64_t flink_cli_now_ms(void);

/*
 * Flink's configuration from $FLINK_CONF_DIR (NULL, and no error, when the
 * variable is unset).  A set variable naming a directory without a
 * configuration is an error.
 */
sp_status_t flink_cli_conf(sp_flinkconf_t **out, sp_error_t *err);

/* The REST URL: flag, then SP_REST_URL, then the configuration.  *source says which ("--rest-url", ...). */
sp_status_t flink_cli_rest_url(const char *flag, char *out, size_t n, const char **source, sp_error_t *err);

/* Open a client for the resolved URL; with verbose every HTTP exchange is traced on stderr. */
sp_status_t flink_cli_open(const flink_cli_t *c, sp_flink_t **out, sp_error_t *err);

/*
 * Report a failure: the one-line error (report_error) and, for an
 * asynchronous failure, the readable cause; with verbose the full trace.
 * Returns the exit code.
 */
int flink_cli_fail(const char *cmd, const sp_error_t *err, const char *trace, bool verbose, bool json);

/*
 * The local snapshot directory of a location Flink reports ("file:/x/sp",
 * "/x/sp/_metadata") into out; false when it is not on the local file system.
 */
bool flink_cli_local_dir(const char *location, char *out, size_t n);

/*
 * Check the _metadata of a location Flink reported COMPLETED.  A location
 * sp cannot read from here (another scheme such as hdfs:// gs:// abfs://,
 * a local path not visible on this machine, an object store without
 * access) is not a failure: *unchecked is set and err holds why.  A
 * location that sp can reach but whose metadata is missing or broken is
 * an error (the status of sp_flink_check_location).
 */
sp_status_t flink_cli_check_location(const char *location, bool *unchecked, sp_error_t *err);

/* The warning for an unchecked location: printed on stderr. */
void flink_cli_warn_unchecked(const char *cmd, const char *location, const sp_error_t *why);

/*
 * Ownership-record query for dispose / prune / relocate --move (an
 * sp_record_query_fn): asks the cluster given by --rest-url / SP_REST_URL /
 * $FLINK_CONF_DIR, else the cluster the restore was recorded on.
 */
typedef struct flink_cli_query {
    const char *rest_url;   /* --rest-url of the command, or NULL */
    bool verbose;
    sp_flink_t *fl;         /* opened on first use */
    char url[1024];         /* the URL fl talks to */
    bool failed;            /* no cluster could be opened */
} flink_cli_query_t;

void flink_cli_record_query(void *user, sp_record_query_t *q);

/* sp trigger / sp stop (cmd_trigger.c). */
int flink_cli_savepoint(int argc, char **argv, bool stop);

/* Write the "created" entry of a savepoint's record (cmd_trigger.c); the record path, or NULL with a note on stderr. */
const char *flink_cli_record_origin(const char *by, const char *job, const char *trig, const sp_flink_t *fl,
                                    const sp_flink_version_t *v, const char *fmt, bool drain, const char *location);
void flink_cli_query_close(flink_cli_query_t *q);

#endif
