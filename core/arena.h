/*
 * arena.h: bump allocator, one per batch.
 *
 * A decoded batch holds thousands of small objects (spans, attributes,
 * samples). Allocating each with malloc costs time and fragments the heap;
 * instead every object of a batch comes from one arena and the whole batch is
 * released with one pl_arena_free(). Blocks grow geometrically; an object is
 * never moved once allocated, so pointers into an arena stay valid until it is
 * freed.
 */
#ifndef PL_ARENA_H
#define PL_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct pl_arena_block pl_arena_block;

typedef struct pl_arena {
    pl_arena_block *head; /* newest block; older ones are linked behind it */
    size_t allocated;     /* bytes obtained from malloc, for memory accounting */
    /* 0, or the most `allocated` may reach: a block past it is refused (the
     * allocation returns NULL) and over_limit is set, so a decoder can tell a
     * spent per-request budget (413) from a failed malloc. */
    size_t limit;
    int over_limit;
} pl_arena;

void pl_arena_init(pl_arena *arena);

/* Returns 8-byte aligned memory, or NULL when malloc fails. */
void *pl_arena_alloc(pl_arena *arena, size_t size);

/* Zero-filled; NULL on overflow of n * size or when malloc fails. */
void *pl_arena_calloc(pl_arena *arena, size_t n, size_t size);

/* Copies len bytes and appends a NUL (not counted in len). */
char *pl_arena_memdup(pl_arena *arena, const void *src, size_t len);

/* Grows an array that lives in the arena: returns a new array of new_n
 * elements holding the old_n old ones, the others zeroed (the old memory is
 * simply abandoned). */
void *pl_arena_grow(pl_arena *arena, void *old, size_t old_n, size_t new_n, size_t elem_size);

/* pl_arena_grow leaving the new elements unwritten: for arrays filled one
 * element at a time, whose spare capacity is then never touched (a large
 * block of its own is faulted in only as far as it is used). */
void *pl_arena_grow_raw(pl_arena *arena, void *old, size_t old_n, size_t new_n, size_t elem_size);

/* Makes room for one more element in an arena array of n elements and
 * capacity *cap: when full, doubles the capacity (the first time to
 * `first`). 0, or -1 on OOM or past 2^31 elements. */
int pl_arena_reserve(pl_arena *arena, void **items, uint32_t n, uint32_t *cap, size_t elem_size,
                     uint32_t first);

/* Frees every block; the arena may be reused after pl_arena_init(). */
void pl_arena_free(pl_arena *arena);

size_t pl_arena_bytes(const pl_arena *arena);

#endif
