/* commands.h - the builtin subcommands, one file each (cmd_*.c). */
#ifndef SP_CLI_COMMANDS_H
#define SP_CLI_COMMANDS_H

#include "opts.h"
#include "out.h"

/* cmd_list.c, shared with cmd_prune.c: an ISO 8601 UTC time ("-" for 0), and a catalog entry's JSON members. */
const char *fmt_time_utc(int64_t ms, char *buf, size_t n);
void catalog_entry_json(jw_t *w, const sp_catalog_entry_t *e);

int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_uid_hash(int argc, char **argv);
int cmd_metadata(int argc, char **argv);
int cmd_relocate(int argc, char **argv);
int cmd_dispose(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_pin(int argc, char **argv);
int cmd_unpin(int argc, char **argv);
int cmd_trigger(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_jobs(int argc, char **argv);

/* record_show.c: a snapshot's ownership record, for sp inspect (JSON member "record", human lines). */
void record_json(jw_t *w, const sp_snapshot_t *snap);
void record_human(const sp_snapshot_t *snap);

int cmd_check(int argc, char **argv);
int cmd_diff(int argc, char **argv);

/* The command table entry of a subcommand (for help and errors). */
const cli_command_t *command_find(const char *name);

#endif
