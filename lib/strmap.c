#include "strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

static bool grow(strmap_t *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    char **keys = calloc(cap, sizeof *keys);
    uint32_t *values = calloc(cap, sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) {
            size_t j = hash(m->keys[i]) & (cap - 1);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            values[j] = m->values[i];
        }
    free(m->keys);
    free(m->values);
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    return true;
}

bool strmap_put(strmap_t *m, const char *key, uint32_t value, uint32_t *existing)
{
    if ((m->n + 1) * 2 > m->cap && !grow(m))
        return false;
    size_t j = hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0) {
            if (existing)
                *existing = m->values[j];
            return true;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->keys[j] = strdup(key);
    if (!m->keys[j])
        return false;
    m->values[j] = value;
    m->n++;
    if (existing)
        *existing = UINT32_MAX;
    return true;
}

uint32_t strmap_get(const strmap_t *m, const char *key)
{
    if (!m->cap)
        return UINT32_MAX;
    size_t j = hash(key) & (m->cap - 1);
    while (m->keys[j]) {
        if (strcmp(m->keys[j], key) == 0)
            return m->values[j];
        j = (j + 1) & (m->cap - 1);
    }
    return UINT32_MAX;
}

void strmap_free(strmap_t *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}
