/*
 * sp_error.h - the one error type of libsp.
 *
 * Every fallible call in formats/ and lib/ returns an sp_status_t and, on
 * failure, fills a caller-provided sp_error_t (which may be NULL when the
 * caller does not care about details).  Nothing in the library prints or
 * exits; the CLI maps sp_status_t to the exit codes of design.md section 8.
 */
#ifndef SP_ERROR_H
#define SP_ERROR_H

#include <stdarg.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes.  Values are stable (part of the ABI). */
typedef enum sp_status {
    SP_OK = 0,
    SP_ERR_MALFORMED = 1,   /**< bytes do not follow the format (CLI exit 3) */
    SP_ERR_UNSUPPORTED = 2, /**< a valid-looking but unknown version / tag (CLI exit 3) */
    SP_ERR_IO = 3,          /**< storage I/O error, missing file (CLI exit 4) */
    SP_ERR_NOMEM = 4,       /**< allocation failed or a limit was hit (CLI exit 4) */
    SP_ERR_INVALID = 5,     /**< caller passed an invalid argument (CLI exit 2) */
    SP_ERR_NOT_FOUND = 6,   /**< a named thing does not exist (CLI exit 4) */
    SP_ERR_REFUSED = 7,     /**< refused to protect data (CLI exit 6) */
    SP_ERR_REST = 8         /**< the Flink REST API answered with an error (CLI exit 5) */
} sp_status_t;

/** Where "no offset is known" is meant. */
#define SP_NO_OFFSET UINT64_MAX

/**
 * Details of a failure.  All strings are NUL-terminated and truncated to fit.
 *  - file:   the file (path or URI) being read or written, "" when unknown
 *  - offset: byte offset in that file where the problem was found, or SP_NO_OFFSET
 *  - field:  the format field being decoded ("operator[3].subtask[0].managed_keyed_state.tag"), "" if none
 *  - message: what was expected / what went wrong, in one sentence
 */
typedef struct sp_error {
    sp_status_t code;
    uint64_t offset;
    char file[512];
    char field[192];
    char message[512];
} sp_error_t;

/** Reset *err to "no error" (code SP_OK, empty strings, offset SP_NO_OFFSET). NULL is allowed. */
void sp_error_clear(sp_error_t *err);

/**
 * Fill *err (if not NULL) with code, offset, field and a printf-style message.
 * Returns code, so callers can write `return sp_error_set(...)`.  The file
 * name is left as it was (callers that know the file set it with
 * sp_error_set_file()).
 */
sp_status_t sp_error_set(sp_error_t *err, sp_status_t code, uint64_t offset,
                         const char *field, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/** Record the file an error belongs to (no-op for NULL err). */
void sp_error_set_file(sp_error_t *err, const char *file);

/** A short constant name of a status code ("malformed input", "I/O error", ...). */
const char *sp_status_name(sp_status_t code);

/** A stable machine token of a status code ("malformed", "io", "not_found", ...), for JSON. */
const char *sp_status_token(sp_status_t code);

#ifdef __cplusplus
}
#endif
#endif
