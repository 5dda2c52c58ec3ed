/*
 * out.h - rendering helpers shared by the subcommands: exit codes, error
 * messages, a streaming JSON writer (large snapshots list millions of
 * references, so output is written as it is produced, never built as a
 * tree), IEC sizes, and display of Java modified-UTF-8 strings.
 */
#ifndef SP_CLI_OUT_H
#define SP_CLI_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sp.h"

/* Exit codes of design.md section 8 (man sp(1), EXIT STATUS). */
enum {
    EXIT_OK_ = 0,
    EXIT_PROBLEMS = 1,
    EXIT_USAGE = 2,
    EXIT_MALFORMED = 3,
    EXIT_STORAGE = 4,
    EXIT_REST = 5,
    EXIT_REFUSED = 6
};

/* Map a library status to the exit code. */
int exit_code_for(sp_status_t s);

/* Print "sp CMD: FILE: at byte N (0xN), field F: MESSAGE" to stderr and, when
 * json is set, {"schema_version":1,"error":{...}} to stdout.  Returns the exit code. */
int report_error(const char *cmd, const sp_error_t *err, bool json);

/* "1.5 KiB", "12 B" into buf. */
const char *fmt_iec(uint64_t bytes, char *buf, size_t n);

/* Java modified UTF-8 as displayable UTF-8 (invalid or lone surrogates shown as \uXXXX
 * escapes of the raw bytes).  Returns a malloc'd string. */
char *mutf8_display(sp_str_t s);
/* Display width of UTF-8 text in terminal columns (wide CJK characters count 2). */
int term_width(const char *s);
/* Print s left-aligned in exactly `width` columns, cut with "…" when wider. */
void term_cell(FILE *f, const char *s, int width);
/* s with control characters shown as \xNN, so that a stored uid or a newline in a directory name cannot
 * reach the terminal raw or split a table row; malloc'd (NULL when out of memory). */
char *term_safe(const char *s);

/* As mutf8_display, with control characters also shown as \xNN: for the terminal. */
char *mutf8_term(sp_str_t s);

/* ---- streaming JSON ---- */
typedef struct jw {
    FILE *f;
    int depth;
    bool need_comma[64];
    bool after_key;
    bool pretty;
} jw_t;

void jw_init(jw_t *w, FILE *f, bool pretty);
void jw_obj(jw_t *w);
void jw_obj_end(jw_t *w);
void jw_arr(jw_t *w);
void jw_arr_end(jw_t *w);
void jw_key(jw_t *w, const char *k);
void jw_str(jw_t *w, const char *s);
void jw_strn(jw_t *w, const char *s, size_t n);   /* standard UTF-8 bytes */
void jw_mutf8(jw_t *w, sp_str_t s);                /* stored string; null if s.ptr == NULL */
void jw_mutf8_or_null(jw_t *w, sp_str_t s);        /* null when empty */
void jw_int(jw_t *w, int64_t v);
void jw_uint(jw_t *w, uint64_t v);
void jw_bool(jw_t *w, bool v);
void jw_null(jw_t *w);
void jw_end(jw_t *w);                              /* final newline */

/* The "error" member's value of every --json output: null (err NULL or SP_OK), or
 * {"code", "exit_code", "message", "file", "offset", "field"} as report_error prints it. */
void jw_error(jw_t *w, const sp_error_t *err);

#endif
