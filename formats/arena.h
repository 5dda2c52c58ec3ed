/*
 * arena.h - a bump allocator (internal).  A decoded model is made of many
 * small objects that all die together; one arena keeps malloc overhead and
 * fragmentation out of the way (a 250 MB checkpoint has millions of handles).
 */
#ifndef SP_ARENA_H
#define SP_ARENA_H

#include <stddef.h>

typedef struct sp_arena sp_arena_t;

sp_arena_t *sp_arena_new(void);
void sp_arena_free(sp_arena_t *a);
/** n zeroed bytes, 8-byte aligned; NULL on overflow or allocation failure. */
void *sp_arena_alloc(sp_arena_t *a, size_t n);
/** Total bytes reserved from the system (for tests and benchmarks). */
size_t sp_arena_reserved(const sp_arena_t *a);

#endif
