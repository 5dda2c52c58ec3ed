#include "sp_error.h"

#include <stdio.h>
#include <string.h>

void sp_error_clear(sp_error_t *err)
{
    if (!err)
        return;
    memset(err, 0, sizeof *err);
    err->code = SP_OK;
    err->offset = SP_NO_OFFSET;
}

sp_status_t sp_error_set(sp_error_t *err, sp_status_t code, uint64_t offset, const char *field,
                         const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    err->offset = offset;
    snprintf(err->field, sizeof err->field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return code;
}

void sp_error_set_file(sp_error_t *err, const char *file)
{
    if (err)
        snprintf(err->file, sizeof err->file, "%s", file ? file : "");
}

const char *sp_status_name(sp_status_t code)
{
    switch (code) {
    case SP_OK: return "ok";
    case SP_ERR_MALFORMED: return "malformed input";
    case SP_ERR_UNSUPPORTED: return "unsupported input";
    case SP_ERR_IO: return "I/O error";
    case SP_ERR_NOMEM: return "out of memory";
    case SP_ERR_INVALID: return "invalid argument";
    case SP_ERR_NOT_FOUND: return "not found";
    case SP_ERR_REFUSED: return "refused";
    case SP_ERR_REST: return "Flink REST error";
    }
    return "unknown error";
}

const char *sp_status_token(sp_status_t code)
{
    static const char *const t[] = {"ok", "malformed", "unsupported", "io", "nomem",
                                    "invalid", "not_found", "refused", "rest"};
    return (unsigned)code < sizeof t / sizeof t[0] ? t[code] : "unknown";
}
