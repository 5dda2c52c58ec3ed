/*
 * sp_metadata_json.h - the complete JSON form of a `_metadata` model
 * (`sp metadata export` / `sp metadata import`).  Lossless: import(export(m))
 * encodes to the same bytes as m.  Uses cJSON.  Pure (no I/O).
 *
 * The schema is documented in man/sp-metadata.1 ("JSON FORM").
 */
#ifndef SP_METADATA_JSON_H
#define SP_METADATA_JSON_H

#include <stddef.h>

#include "sp_error.h"
#include "sp_metadata.h"

#ifdef __cplusplus
extern "C" {
#endif

/** schema_version of the JSON form written by sp_meta_to_json(). */
#define SP_META_JSON_SCHEMA_VERSION 1

/**
 * Render the model as the JSON form (pretty-printed when pretty != 0) into a
 * malloc'd NUL-terminated string (*out; free() it).
 * Errors: SP_ERR_NOMEM.
 */
sp_status_t sp_meta_to_json(const sp_metadata_t *m, int pretty, char **out, sp_error_t *err);

/**
 * Parse the JSON form text[0..len) into a new model (*out; sp_meta_free it).
 * The model owns copies of all strings (text may be freed afterwards).
 * Errors: SP_ERR_MALFORMED (not JSON, a field missing or of the wrong type,
 * a value out of range; err->field names the JSON path, e.g.
 * "operators[2].subtasks[0].managed_keyed_state.offsets"), SP_ERR_NOMEM.
 */
sp_status_t sp_meta_from_json(const char *text, size_t len, sp_metadata_t **out, sp_error_t *err);

#ifdef __cplusplus
}
#endif
#endif
