/*
 * sp - manage Apache Flink savepoints and checkpoints.
 * main.c holds only the table of subcommands (after git.c); each command
 * lives in cmd_<name>.c and is a thin client of libsp.
 */
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "s3_config.h"
#include "sp.h"

static const cli_command_t commands[] = {
    {"inspect", cmd_inspect, "SNAP [--json] [--files] [--subtasks]",
     "Show what a checkpoint or savepoint holds: version, checkpoint ID, kind, operators, references."},
    {"verify", cmd_verify, "SNAP [--json]",
     "Check that every file the metadata references exists with its recorded size."},
    {"uid-hash", cmd_uid_hash, "UID... [--json]", "Print the operator ID Flink derives from each uid."},
    {"relocate", cmd_relocate, "SRC DST [--move] [--dry-run] [--json] [--jobs N] [--checksum]",
     "Copy or move a snapshot to a new directory or archive; the copy is complete and relocatable."},
    {"dispose", cmd_dispose, "SNAP [--dry-run] [--force] [--include-unreferenced] [--include-external] [--json]",
     "Delete a snapshot safely: journal first, data files, _metadata last; never outside it."},
    {"list", cmd_list, "ROOT [--json] [--verify]",
     "Find every snapshot under a directory: job, kind, checkpoint ID, version, size, time, pins."},
    {"prune", cmd_prune, "ROOT --keep-last N [--max-age DURATION] [--dry-run] [--include-checkpoints] [--all-jobs] [--force] [--json]",
     "Dispose of the oldest savepoints of each job beyond a retention; pinned ones are kept."},
    {"pin", cmd_pin, "SNAP [--reason TEXT] [--json]", "Pin a snapshot in its ownership record: dispose and prune keep it."},
    {"unpin", cmd_unpin, "SNAP [--json]", "Remove every pin from a snapshot's ownership record."},
    {"trigger", cmd_trigger, "JOB_ID [TARGET_DIR] [--type canonical|native] [--detached] [--timeout D] [--json]",
     "Take a savepoint of a running job over Flink's REST API; prints its location."},
    {"stop", cmd_stop, "JOB_ID [TARGET_DIR] [--drain] [--type canonical|native] [--detached] [--timeout D] [--json]",
     "Stop a job with a savepoint (stop-with-savepoint); prints the savepoint's location."},
    {"status", cmd_status, "JOB_ID TRIGGER_ID [--wait] [--timeout D] [--json]",
     "Show the state of a savepoint or stop started with --detached."},
    {"restore", cmd_restore, "SNAP (--jar-id ID | --jar FILE [--keep-jar]) [--claim-mode CLAIM|NO_CLAIM|LEGACY] [-n] "
     "[--entry-class C] [--parallelism P] [--arg A]... [--wait-released] [--timeout D] [--json] [-- ARGS...]",
     "Start a job from a snapshot with a claim mode, and record the restore beside the snapshot."},
    {"jobs", cmd_jobs, "[--all] [--json]", "List the cluster's running jobs."},
    {"metadata", cmd_metadata, "export SNAP [-o FILE] [--compact] | import JSON OUT [--force] | edit SNAP (--output DST | --in-place) EDIT...",
     "Convert _metadata to its complete JSON form and back, byte for byte; edit it (drop operators, change uids)."},
    {"check", cmd_check, "SNAP (--uid U... | --uids-file F | --operator-id HEX... | --job FILE | --plan FILE | --like SNAP2) [-n] [--expect-dropped ID|uid:U]... [--json]",
     "Would the snapshot restore into the new job? Flink's restore rules, offline, for CI."},
    {"diff", cmd_diff, "SNAP_A SNAP_B [--all] [--json]",
     "Operators added, removed, changed or moved, and references that differ between two snapshots."},
};

const cli_command_t *command_find(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sp [--verbose] <command> [options] [args]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'sp <command> --help' shows a command's options; man sp-<command> has the details.\n"
               "S3 (s3://bucket/prefix) options of every command: --endpoint-url URL, --region REGION,\n"
               "--profile NAME, --ca-bundle FILE, --no-verify-ssl, --verbose (man sp: S3 LOCATIONS).\n"
               "Exit codes: 0 ok, 1 problems found, 2 usage, 3 malformed input, 4 storage I/O,\n"
               "5 Flink REST error, 6 refused to protect data.\n");
}

/*
 * Global options may come before the command name ("sp --verbose jobs ...",
 * "sp -v trigger JOB", "sp --endpoint-url URL list s3://b/p"): they are
 * moved behind it, where every command takes them.  --verbose and -v mean
 * the global --verbose there: s3_cli_extract() takes it (S3 tracing) and
 * opts_parse() turns on the command's own --verbose.  Before --help, help,
 * --version and version they change nothing and are dropped.  Returns the
 * new argc, or -1 after a usage error.
 */
static int leading_global_options(int argc, char **argv)
{
    static char verbose[] = "--verbose";
    static const char *const with_value[] = {"endpoint-url", "region", "profile", "ca-bundle"}; /* s3_config.h */
    int i = 1;
    while (i < argc && argv[i][0] == '-') {
        const char *a = argv[i];
        if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0 || strcmp(a, "--no-verify-ssl") == 0) {
            i++;
            continue;
        }
        int step = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0] && !step; k++) {
            size_t n = strlen(with_value[k]);
            if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, with_value[k], n) != 0)
                continue;
            if (a[2 + n] == '=')
                step = 1;
            else if (a[2 + n] == '\0')
                step = 2;
        }
        if (!step)
            break; /* --help, --version, or an option sp does not know */
        if (i + step > argc) {
            fprintf(stderr, "sp: %s needs a value\n", a);
            return -1;
        }
        i += step;
    }
    int moved = i - 1;
    if (moved == 0)
        return argc;
    if (i >= argc) {
        fprintf(stderr, "sp: no command after %s\n\n", argv[i - 1]);
        usage(stderr);
        return -1;
    }
    const char *next = argv[i];
    if (next[0] == '-' || strcmp(next, "help") == 0 || strcmp(next, "version") == 0) {
        /* drop them: main handles what follows as if they were not there */
        memmove(argv + 1, argv + i, (size_t)(argc - i + 1) * sizeof *argv);
        return argc - moved;
    }
    /* argv[1 .. i-1] are global options, argv[i] the command: the command goes first */
    char *name = argv[i];
    memmove(argv + 2, argv + 1, (size_t)moved * sizeof *argv);
    argv[1] = name;
    for (int k = 2; k <= moved + 1; k++)
        if (strcmp(argv[k], "-v") == 0)
            argv[k] = verbose;
    return argc;
}

int main(int argc, char **argv)
{
    /* the user's locale decides how wide characters are for aligned tables; output stays UTF-8 */
    if (!setlocale(LC_CTYPE, ""))
        setlocale(LC_CTYPE, "C.UTF-8");
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    argc = leading_global_options(argc, argv);
    if (argc < 0)
        return 2;
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (argc > 2 && command_find(argv[2])) {
            char help[] = "--help";
            char *av[] = {argv[2], help, NULL};
            return command_find(argv[2])->run(2, av);
        }
        if (argc > 2) {
            fprintf(stderr, "sp: '%s' is not an sp command\n\n", argv[2]);
            usage(stderr);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("sp %s\n", sp_version());
        return 0;
    }
    const cli_command_t *c = command_find(name);
    if (!c && name[0] == '-') {
        fprintf(stderr, "sp: unknown option '%s' before the command (there: --verbose, -v, --help, --version and the "
                        "S3 options; a command's own options follow its name)\n\n", name);
        usage(stderr);
        return 2;
    }
    if (!c) {
        fprintf(stderr, "sp: '%s' is not an sp command\n\n", name);
        usage(stderr);
        return 2;
    }
    /* the global S3 options (--endpoint-url, --region, --profile, ..., --verbose): see s3_config.h */
    int r = s3_cli_extract(&argc, argv);
    if (!r)
        r = s3_cli_apply();
    if (r)
        return r;
    return c->run(argc - 1, argv + 1);
}
