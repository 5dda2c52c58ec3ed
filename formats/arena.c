#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Blocks grow geometrically up to 64 MiB, so a big model costs few mallocs
 * and a small one wastes little. */
#define ARENA_FIRST_BLOCK (16u * 1024u)
#define ARENA_MAX_BLOCK (64u * 1024u * 1024u)

struct block {
    struct block *next;
    size_t size, used;
    max_align_t data[];
};

struct sp_arena {
    struct block *head;
    size_t next_size;
    size_t reserved;
};

sp_arena_t *sp_arena_new(void)
{
    sp_arena_t *a = calloc(1, sizeof *a);
    if (a)
        a->next_size = ARENA_FIRST_BLOCK;
    return a;
}

void sp_arena_free(sp_arena_t *a)
{
    if (!a)
        return;
    struct block *b = a->head;
    while (b) {
        struct block *n = b->next;
        free(b);
        b = n;
    }
    free(a);
}

void *sp_arena_alloc(sp_arena_t *a, size_t n)
{
    if (n > SIZE_MAX - 16)
        return NULL;
    n = (n + 7) & ~(size_t)7;
    if (n == 0)
        n = 8;
    struct block *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = a->next_size;
        if (size < n)
            size = n;
        if (a->next_size < ARENA_MAX_BLOCK)
            a->next_size *= 2;
        b = malloc(sizeof *b + size);
        if (!b)
            return NULL;
        b->size = size;
        b->used = 0;
        b->next = a->head;
        a->head = b;
        a->reserved += size;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

size_t sp_arena_reserved(const sp_arena_t *a)
{
    return a ? a->reserved : 0;
}
