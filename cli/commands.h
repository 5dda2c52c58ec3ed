/* commands.h - the builtin subcommands, one file each (cmd_*.c). */
#ifndef SP_CLI_COMMANDS_H
#define SP_CLI_COMMANDS_H

#include "opts.h"

int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_uid_hash(int argc, char **argv);
int cmd_metadata(int argc, char **argv);
int cmd_relocate(int argc, char **argv);
int cmd_dispose(int argc, char **argv);

/* The command table entry of a subcommand (for help and errors). */
const cli_command_t *command_find(const char *name);

#endif
