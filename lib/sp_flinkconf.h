/*
 * sp_flinkconf.h - read Flink's own configuration file, the way `bin/flink`
 * finds it, for the settings sp needs (design.md section 9): the REST
 * address (`rest.address`, `rest.port`) and the default savepoint directory
 * (`execution.checkpointing.savepoint-dir`, before Flink 1.20
 * `state.savepoints.dir`).
 *
 * Two file formats exist:
 *   <dir>/config.yaml      Flink 1.19+: standard YAML; keys may be nested
 *                          (rest: {port: 8081}) or flat and dotted
 *                          (rest.port: 8081), or a mix.
 *   <dir>/flink-conf.yaml  before 1.19 (legacy): flat "key: value" lines.
 * config.yaml wins when both exist.  Both are read with libyaml; nested
 * mappings are flattened into dotted keys ("rest" -> "port" = "rest.port").
 *
 * The library never reads the environment: the caller resolves
 * FLINK_CONF_DIR (or Flink's ../conf fallback) and passes the directory.
 */
#ifndef SP_FLINKCONF_H
#define SP_FLINKCONF_H

#include <stddef.h>

#include "sp_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A loaded configuration: flattened key -> scalar value. */
typedef struct sp_flinkconf sp_flinkconf_t;

/** The REST port Flink uses when `rest.port` is not set. */
#define SP_FLINK_DEFAULT_REST_PORT 8081

/**
 * Load the configuration in directory `conf_dir`: config.yaml, else
 * flink-conf.yaml.
 * Errors: SP_ERR_NOT_FOUND (neither file exists; err->file is conf_dir),
 * SP_ERR_MALFORMED (not YAML, or its top level is not a mapping; err->file
 * and, in the message, line and column), SP_ERR_IO, SP_ERR_NOMEM.
 */
sp_status_t sp_flinkconf_load(const char *conf_dir, sp_flinkconf_t **out, sp_error_t *err);

/** Load one file (either format).  Errors as sp_flinkconf_load(). */
sp_status_t sp_flinkconf_load_file(const char *path, sp_flinkconf_t **out, sp_error_t *err);

/** The file that was read. */
const char *sp_flinkconf_file(const sp_flinkconf_t *conf);

/**
 * The value of a dotted key ("rest.port"), or NULL when not set.  A YAML
 * sequence is returned as its items joined by ';' (Flink's list syntax).
 * When a key occurs twice (nested and flat), the later one wins, as in Flink.
 */
const char *sp_flinkconf_get(const sp_flinkconf_t *conf, const char *key);

/** Number of keys, and the i-th key / value (file order), for listing. */
size_t sp_flinkconf_count(const sp_flinkconf_t *conf);
const char *sp_flinkconf_key_at(const sp_flinkconf_t *conf, size_t i);
const char *sp_flinkconf_value_at(const sp_flinkconf_t *conf, size_t i);

/**
 * The REST base URL the configuration names: "http://<rest.address>:<rest.port>"
 * (port 8081 when unset; an IPv6 address is bracketed), written to buf.
 * Errors: SP_ERR_NOT_FOUND (no rest.address), SP_ERR_INVALID (rest.port is
 * not a port number; err->field is the key).
 */
sp_status_t sp_flinkconf_rest_url(const sp_flinkconf_t *conf, char *buf, size_t n, sp_error_t *err);

/**
 * The default savepoint directory: `execution.checkpointing.savepoint-dir`,
 * else the deprecated `state.savepoints.dir`, else the older
 * `savepoints.state.backend.fs.dir`; NULL when none is set.  *key_out (when
 * not NULL) gets the key it came from.
 */
const char *sp_flinkconf_savepoint_dir(const sp_flinkconf_t *conf, const char **key_out);

/** Free a configuration (NULL allowed). */
void sp_flinkconf_free(sp_flinkconf_t *conf);

#ifdef __cplusplus
}
#endif
#endif
