/*
 * sp stop JOB_ID [TARGET_DIR] [--drain]: stop-with-savepoint over Flink's
 * REST API (POST /jobs/:id/stop; never a savepoint followed by a cancel).
 * The code is cmd_trigger.c's: the same asynchronous operation.
 */
#include "commands.h"
#include "flinkcli.h"

int cmd_stop(int argc, char **argv) { return flink_cli_savepoint(argc, argv, true); }
