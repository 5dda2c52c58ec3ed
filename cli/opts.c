#include "opts.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void opts_help(const cli_command_t *cmd, const cli_option_t *opts)
{
    printf("usage: sp %s %s\n\n%s\n\noptions:\n", cmd->name, cmd->usage, cmd->summary);
    for (const cli_option_t *o = opts; o && o->long_name; o++) {
        char left[64];
        if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->long_name, o->arg_name ? " " : "",
                     o->arg_name ? o->arg_name : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->long_name, o->arg_name ? " " : "",
                     o->arg_name ? o->arg_name : "");
        printf("  %-28s %s\n", left, o->help);
    }
    printf("  %-28s %s\n", "-h, --help", "show this help");
    printf("\nSee man sp-%.*s for details and exit codes.\n", (int)strcspn(cmd->name, " "), cmd->name);
}

int opts_usage_error(const cli_command_t *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sp %s: ", cmd->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: sp %s %s\n(see 'sp %s --help')\n", cmd->name, cmd->usage, cmd->name);
    return 2;
}

static const cli_option_t *find_long(const cli_option_t *opts, const char *name, size_t len)
{
    for (const cli_option_t *o = opts; o && o->long_name; o++)
        if (strlen(o->long_name) == len && strncmp(o->long_name, name, len) == 0)
            return o;
    return NULL;
}

static const cli_option_t *find_short(const cli_option_t *opts, char c)
{
    for (const cli_option_t *o = opts; o && o->long_name; o++)
        if (o->short_name == c)
            return o;
    return NULL;
}

static int set_value(const cli_command_t *cmd, const cli_option_t *o, const char *arg)
{
    switch (o->type) {
    case OPT_FLAG:
        *(bool *)o->value = true;
        return 0;
    case OPT_STRING:
        *(const char **)o->value = arg;
        return 0;
    case OPT_LIST: {
        cli_list_t *l = o->value;
        if (l->n >= (int)(sizeof l->v / sizeof l->v[0]))
            return opts_usage_error(cmd, "too many --%s options", o->long_name);
        l->v[l->n++] = arg;
        return 0;
    }
    case OPT_INT: {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (errno || end == arg || *end)
            return opts_usage_error(cmd, "--%s expects an integer, got '%s'", o->long_name, arg);
        *(long *)o->value = v;
        return 0;
    }
    }
    return 0;
}

int opts_parse(const cli_command_t *cmd, const cli_option_t *opts, int argc, char **argv, int *npos)
{
    int n = 0;
    bool only_pos = false;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || strcmp(a, "-") == 0) {
            argv[n++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            opts_help(cmd, opts);
            return -1;
        }
        const cli_option_t *o;
        const char *inline_arg = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            o = find_long(opts, name, eq ? (size_t)(eq - name) : strlen(name));
            if (eq)
                inline_arg = eq + 1;
        } else {
            if (a[2] != '\0')
                return opts_usage_error(cmd, "unknown option '%s' (short options cannot be combined)", a);
            o = find_short(opts, a[1]);
        }
        if (!o)
            return opts_usage_error(cmd, "unknown option '%s'", a);
        if (o->type == OPT_FLAG) {
            if (inline_arg)
                return opts_usage_error(cmd, "--%s takes no value", o->long_name);
            set_value(cmd, o, NULL);
            continue;
        }
        if (!inline_arg) {
            if (i + 1 >= argc)
                return opts_usage_error(cmd, "--%s needs a value (%s)", o->long_name, o->arg_name);
            inline_arg = argv[++i];
        }
        int r = set_value(cmd, o, inline_arg);
        if (r)
            return r;
    }
    /* the global --verbose (taken out of argv by s3_cli_extract; given before the command name too, see
     * main.c) also turns on a command's own */
    const cli_option_t *v = opts_global_verbose ? find_long(opts, "verbose", 7) : NULL;
    if (v && v->type == OPT_FLAG)
        set_value(cmd, v, NULL);
    *npos = n;
    return 0;
}

bool opts_global_verbose;
