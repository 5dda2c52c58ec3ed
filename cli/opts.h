/*
 * opts.h - one option parser for every subcommand (after git's
 * parse-options): each command declares its options as data, and the same
 * table drives parsing and `--help`.
 */
#ifndef SP_CLI_OPTS_H
#define SP_CLI_OPTS_H

#include <stdbool.h>

typedef enum opt_type { OPT_FLAG, OPT_STRING, OPT_INT, OPT_LIST } opt_type_t;

/* The value of an OPT_LIST option: every occurrence, in order (argv strings, not copied). */
typedef struct cli_list {
    const char *v[64];
    int n;
} cli_list_t;

typedef struct cli_option {
    const char *long_name;  /* without "--" */
    char short_name;        /* 0 if none */
    opt_type_t type;
    void *value;            /* bool*, const char**, long*, cli_list_t* */
    const char *arg_name;   /* for help: "N", "FILE" */
    const char *help;
} cli_option_t;

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;      /* "SNAP [--json]" */
    const char *summary;    /* one line */
} cli_command_t;

/*
 * Parse argv[1..] (argv[0] is the subcommand name) against opts (terminated
 * by a zeroed entry).  Positional arguments are compacted into argv[0..*npos).
 * Options may come before or after positionals; "--" ends options.
 * Returns 0 on success, 2 after printing a usage error, -1 after printing
 * help (the caller exits 0).
 */
int opts_parse(const cli_command_t *cmd, const cli_option_t *opts, int argc, char **argv, int *npos);

/*
 * Set when the global --verbose was given, anywhere on the command line or
 * (as --verbose or -v) before the command name (cli/main.c moves it behind;
 * cli/s3_config.c takes it out of argv): opts_parse then sets a command's
 * own --verbose.
 */
extern bool opts_global_verbose;

/* Print "usage: sp NAME USAGE" and the option table to stdout. */
void opts_help(const cli_command_t *cmd, const cli_option_t *opts);

/* Print a usage error to stderr ("sp NAME: MESSAGE" + usage line); returns 2. */
int opts_usage_error(const cli_command_t *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
