#include "paths.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

bool sp_path_stale_temp(const char *name)
{
    const char *t = strstr(name, ".sp-tmp-");
    if (!t)
        return false;
    char *end;
    long pid = strtol(t + 8, &end, 10);
    if (pid <= 0 || end == t + 8 || (*end != '\0' && *end != '-'))
        return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

bool sp_path_has_dot_segments(const char *p)
{
    if (!*p)
        return false;
    const char *c = p[0] == '/' ? p + 1 : p; /* the empty name before an absolute path's root is fine */
    for (;;) {
        size_t len = strcspn(c, "/");
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
            return true;
        if (!c[len])
            return false;
        c += len + 1;
    }
}

bool dispose_list_push(dispose_list_t *l, const char *key, int64_t size)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 64;
        sp_dispose_item_t *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].key = strdup(key);
    l->v[l->n].size = size;
    return l->v[l->n++].key != NULL;
}

void dispose_list_take(dispose_list_t *l, uint32_t *n, sp_dispose_item_t **v)
{
    *n = l->n;
    *v = l->v;
    memset(l, 0, sizeof *l);
}

void dispose_list_free(dispose_list_t *l)
{
    for (uint32_t i = 0; i < l->n; i++)
        free(l->v[i].key);
    free(l->v);
    memset(l, 0, sizeof *l);
}
