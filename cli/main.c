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
    {"restore", cmd_restore, "SNAP (--jar-id ID | --jar FILE) [--claim-mode CLAIM|NO_CLAIM|LEGACY] [-n] [--entry-class C] "
     "[--parallelism P] [--arg A]... [--wait-released] [--json] [-- ARGS...]",
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
    fprintf(f, "usage: sp <command> [options] [args]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'sp <command> --help' shows a command's options; man sp-<command> has the details.\n"
               "S3 (s3://bucket/prefix) options of every command: --endpoint-url URL, --region REGION,\n"
               "--profile NAME, --ca-bundle FILE, --no-verify-ssl, --verbose (man sp: S3 LOCATIONS).\n"
               "Exit codes: 0 ok, 1 problems found, 2 usage, 3 malformed input, 4 storage I/O,\n"
               "5 Flink REST error, 6 refused to protect data.\n");
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
