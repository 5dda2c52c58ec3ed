/*
 * sp - manage Apache Flink savepoints and checkpoints.
 * main.c holds only the table of subcommands (after git.c); each command
 * lives in cmd_<name>.c and is a thin client of libsp.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
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
    {"metadata", cmd_metadata, "export SNAP [-o FILE] [--compact] | import JSON OUT [--force]",
     "Convert _metadata to its complete JSON form and back, byte for byte."},
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
               "Exit codes: 0 ok, 1 problems found, 2 usage, 3 malformed input, 4 storage I/O,\n"
               "5 Flink REST error, 6 refused to protect data.\n");
}

int main(int argc, char **argv)
{
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
    return c->run(argc - 1, argv + 1);
}
