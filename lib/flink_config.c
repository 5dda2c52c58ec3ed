/*
 * flink_config.c - Flink's config.yaml / flink-conf.yaml (see sp_flinkconf.h),
 * read with libyaml's document API and flattened into dotted keys.
 */
#include "sp_flinkconf.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "sp_fs.h"

struct sp_flinkconf {
    char *file;
    size_t n, cap;
    char **keys, **values;
};

static bool put(sp_flinkconf_t *c, const char *key, const char *value)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0) {
            /* the later occurrence wins, in place of the earlier */
            char *v = strdup(value);
            if (!v)
                return false;
            free(c->values[i]);
            c->values[i] = v;
            return true;
        }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        char **k = realloc(c->keys, cap * sizeof *k);
        if (!k)
            return false;
        c->keys = k;
        char **v = realloc(c->values, cap * sizeof *v);
        if (!v)
            return false;
        c->values = v;
        c->cap = cap;
    }
    c->keys[c->n] = strdup(key);
    c->values[c->n] = strdup(value);
    if (!c->keys[c->n] || !c->values[c->n]) {
        free(c->keys[c->n]);
        free(c->values[c->n]);
        return false;
    }
    c->n++;
    return true;
}

/* A sequence of scalars as "a;b;c" (Flink's list syntax); nested collections are skipped. */
static char *join_sequence(yaml_document_t *doc, yaml_node_t *seq)
{
    size_t len = 1;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        yaml_node_t *n = yaml_document_get_node(doc, *it);
        if (n && n->type == YAML_SCALAR_NODE)
            len += n->data.scalar.length + 1;
    }
    char *s = malloc(len);
    if (!s)
        return NULL;
    size_t o = 0;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
        yaml_node_t *n = yaml_document_get_node(doc, *it);
        if (!n || n->type != YAML_SCALAR_NODE)
            continue;
        if (o)
            s[o++] = ';';
        memcpy(s + o, n->data.scalar.value, n->data.scalar.length);
        o += n->data.scalar.length;
    }
    s[o] = '\0';
    return s;
}

/* Walk a mapping, prefixing keys with `prefix` ("" at the top). */
static bool flatten(sp_flinkconf_t *c, yaml_document_t *doc, yaml_node_t *map, const char *prefix, int depth)
{
    if (depth > 32)
        return true; /* absurd nesting: ignore the rest */
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v || k->type != YAML_SCALAR_NODE)
            continue;
        size_t pl = strlen(prefix);
        char *key = malloc(pl + k->data.scalar.length + 2);
        if (!key)
            return false;
        if (pl)
            snprintf(key, pl + 2, "%s.", prefix);
        else
            key[0] = '\0';
        memcpy(key + strlen(key), k->data.scalar.value, k->data.scalar.length);
        key[pl + (pl ? 1 : 0) + k->data.scalar.length] = '\0';
        bool ok = true;
        if (v->type == YAML_MAPPING_NODE) {
            ok = flatten(c, doc, v, key, depth + 1);
        } else if (v->type == YAML_SCALAR_NODE) {
            ok = put(c, key, (const char *)v->data.scalar.value);
        } else if (v->type == YAML_SEQUENCE_NODE) {
            char *s = join_sequence(doc, v);
            ok = s && put(c, key, s);
            free(s);
        }
        free(key);
        if (!ok)
            return false;
    }
    return true;
}

const char *sp_flinkconf_file(const sp_flinkconf_t *conf) { return conf ? conf->file : NULL; }

sp_status_t sp_flinkconf_load_file(const char *path, sp_flinkconf_t **out, sp_error_t *err)
{
    *out = NULL;
    char *text;
    size_t len;
    sp_status_t s = sp_fs_read_all(path, &text, &len, err);
    if (s)
        return s;
    sp_flinkconf_t *c = calloc(1, sizeof *c);
    if (!c || !(c->file = strdup(path))) {
        free(c);
        free(text);
        return sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    }
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        sp_error_set_file(err, path);
        s = sp_error_set(err, SP_ERR_MALFORMED, parser.problem_offset ? parser.problem_offset : parser.problem_mark.index, "",
                         "not valid YAML: %s at line %lu, column %lu", parser.problem ? parser.problem : "syntax error",
                         (unsigned long)parser.problem_mark.line + 1, (unsigned long)parser.problem_mark.column + 1);
        yaml_parser_delete(&parser);
        free(text);
        sp_flinkconf_free(c);
        return s;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        if (!flatten(c, &doc, root, "", 0))
            s = sp_error_set(err, SP_ERR_NOMEM, SP_NO_OFFSET, "", "out of memory");
    } else if (root && !(root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) {
        sp_error_set_file(err, path);
        s = sp_error_set(err, SP_ERR_MALFORMED, SP_NO_OFFSET, "", "a Flink configuration file must be a mapping of keys to values");
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    free(text);
    if (s) {
        sp_flinkconf_free(c);
        return s;
    }
    *out = c;
    return SP_OK;
}

sp_status_t sp_flinkconf_load(const char *conf_dir, sp_flinkconf_t **out, sp_error_t *err)
{
    *out = NULL;
    static const char *const names[] = {"config.yaml", "flink-conf.yaml"};
    for (size_t i = 0; i < 2; i++) {
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", conf_dir, names[i]) >= sizeof path)
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "", "configuration directory path too long");
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            return sp_flinkconf_load_file(path, out, err);
    }
    sp_error_set_file(err, conf_dir);
    return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "",
                        "no Flink configuration here (neither config.yaml nor flink-conf.yaml)");
}

const char *sp_flinkconf_get(const sp_flinkconf_t *c, const char *key)
{
    if (!c)
        return NULL;
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->keys[i], key) == 0)
            return c->values[i];
    return NULL;
}

size_t sp_flinkconf_count(const sp_flinkconf_t *c) { return c ? c->n : 0; }
const char *sp_flinkconf_key_at(const sp_flinkconf_t *c, size_t i) { return c && i < c->n ? c->keys[i] : NULL; }
const char *sp_flinkconf_value_at(const sp_flinkconf_t *c, size_t i) { return c && i < c->n ? c->values[i] : NULL; }

sp_status_t sp_flinkconf_rest_url(const sp_flinkconf_t *c, char *buf, size_t n, sp_error_t *err)
{
    const char *addr = sp_flinkconf_get(c, "rest.address");
    if (!addr || !*addr) {
        if (c)
            sp_error_set_file(err, c->file);
        return sp_error_set(err, SP_ERR_NOT_FOUND, SP_NO_OFFSET, "rest.address", "rest.address is not set");
    }
    long port = SP_FLINK_DEFAULT_REST_PORT;
    const char *ps = sp_flinkconf_get(c, "rest.port");
    if (ps && *ps) {
        char *end;
        errno = 0;
        port = strtol(ps, &end, 10);
        if (errno || end == ps || *end || port < 1 || port > 65535) {
            sp_error_set_file(err, c->file);
            return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "rest.port", "not a port number: '%s'", ps);
        }
    }
    bool v6 = strchr(addr, ':') && addr[0] != '[';
    if ((size_t)snprintf(buf, n, "http://%s%s%s:%ld", v6 ? "[" : "", addr, v6 ? "]" : "", port) >= n)
        return sp_error_set(err, SP_ERR_INVALID, SP_NO_OFFSET, "rest.address", "address too long");
    return SP_OK;
}

const char *sp_flinkconf_savepoint_dir(const sp_flinkconf_t *c, const char **key_out)
{
    static const char *const keys[] = {"execution.checkpointing.savepoint-dir", "state.savepoints.dir",
                                       "savepoints.state.backend.fs.dir"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *v = sp_flinkconf_get(c, keys[i]);
        if (v && *v) {
            if (key_out)
                *key_out = keys[i];
            return v;
        }
    }
    return NULL;
}

void sp_flinkconf_free(sp_flinkconf_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->keys[i]);
        free(c->values[i]);
    }
    free(c->keys);
    free(c->values);
    free(c->file);
    free(c);
}
