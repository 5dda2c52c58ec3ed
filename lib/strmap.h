/* strmap.h - a small string -> uint32 hash map (internal; keys are copied). */
#ifndef SP_STRMAP_H
#define SP_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct strmap {
    char **keys;
    uint32_t *values;
    size_t cap, n;
} strmap_t;

/* Insert key -> value unless present; returns false on allocation failure. *existing gets the old value (or UINT32_MAX when new). */
bool strmap_put(strmap_t *m, const char *key, uint32_t value, uint32_t *existing);
/* The value of key, or UINT32_MAX. */
uint32_t strmap_get(const strmap_t *m, const char *key);
void strmap_free(strmap_t *m);

#endif
