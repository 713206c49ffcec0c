/*
 * arena.c: see arena.h. Blocks start at 4 KiB and double up to 1 MiB, so a
 * small request costs one malloc and a large one a handful. A request larger
 * than the next block size gets a block of its own, kept behind the current
 * block while that one still has room.
 */
#include "arena.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct pl_arena_block {
    pl_arena_block *next;
    size_t used;
    size_t size;
    /* followed by `size` bytes of payload, 16-aligned */
    _Alignas(16) unsigned char data[];
};

#define ARENA_MIN_BLOCK 4096u
#define ARENA_MAX_BLOCK (1024u * 1024u)

void pl_arena_init(pl_arena *arena)
{
    arena->head = NULL;
    arena->allocated = 0;
    arena->limit = 0;
    arena->over_limit = 0;
}

static pl_arena_block *arena_new_block(pl_arena *arena, size_t need)
{
    size_t size = arena->head ? arena->head->size * 2 : ARENA_MIN_BLOCK;
    if (size > ARENA_MAX_BLOCK)
        size = ARENA_MAX_BLOCK;
    bool own = size < need; /* a large request: a block of its own */
    if (size < need)
        size = need;
    if (arena->limit &&
        (size > arena->limit || arena->allocated + sizeof(pl_arena_block) + size > arena->limit)) {
        /* Near the limit a smaller block may still fit the request. */
        size = need;
        if (arena->allocated + sizeof(pl_arena_block) + size > arena->limit ||
            size > arena->limit) {
            arena->over_limit = 1;
            return NULL;
        }
    }
    pl_arena_block *block = malloc(sizeof(*block) + size);
    if (!block)
        return NULL;
    block->size = size;
    block->used = 0;
    arena->allocated += sizeof(*block) + size;
    pl_arena_block *head = arena->head;
    if (head && own) {
        /* A large array gets a block of its own behind the current one:
         * small objects keep filling the current block, and the next block
         * grows from its size, not the array's (a 600 KiB span array was
         * followed by a fresh 1 MiB block for a few strings). */
        block->next = head->next;
        head->next = block;
        return block;
    }
    block->next = head;
    arena->head = block;
    return block;
}

void *pl_arena_alloc(pl_arena *arena, size_t size)
{
    size_t rounded = (size + 7u) & ~(size_t)7u;
    if (rounded < size)
        return NULL;
    pl_arena_block *block = arena->head;
    if (!block || block->size - block->used < rounded) {
        block = arena_new_block(arena, rounded ? rounded : 8);
        if (!block)
            return NULL;
    }
    void *p = block->data + block->used;
    block->used += rounded;
    return p;
}

void *pl_arena_calloc(pl_arena *arena, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = pl_arena_alloc(arena, n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

char *pl_arena_memdup(pl_arena *arena, const void *src, size_t len)
{
    char *p = pl_arena_alloc(arena, len + 1);
    if (!p)
        return NULL;
    if (len)
        memcpy(p, src, len);
    p[len] = '\0';
    return p;
}

void *pl_arena_grow_raw(pl_arena *arena, void *old, size_t old_n, size_t new_n, size_t elem_size)
{
    if (new_n <= old_n)
        return old;
    if (elem_size && new_n > SIZE_MAX / elem_size)
        return NULL;
    void *p = pl_arena_alloc(arena, new_n * elem_size);
    if (p && old_n)
        memcpy(p, old, old_n * elem_size);
    return p;
}

void *pl_arena_grow(pl_arena *arena, void *old, size_t old_n, size_t new_n, size_t elem_size)
{
    if (new_n <= old_n)
        return old;
    void *p = pl_arena_grow_raw(arena, old, old_n, new_n, elem_size);
    if (p)
        memset((char *)p + old_n * elem_size, 0, (new_n - old_n) * elem_size);
    return p;
}

int pl_arena_reserve(pl_arena *arena, void **items, uint32_t n, uint32_t *cap, size_t elem_size,
                     uint32_t first)
{
    if (n < *cap)
        return 0;
    if (*cap >= UINT32_MAX / 2)
        return -1;
    uint32_t c = *cap ? *cap * 2 : first;
    void *p = pl_arena_grow(arena, *items, n, c, elem_size);
    if (!p)
        return -1;
    *items = p;
    *cap = c;
    return 0;
}

void pl_arena_free(pl_arena *arena)
{
    pl_arena_block *block = arena->head;
    while (block) {
        pl_arena_block *next = block->next;
        free(block);
        block = next;
    }
    arena->head = NULL;
    arena->allocated = 0;
}

size_t pl_arena_bytes(const pl_arena *arena)
{
    return arena->allocated;
}
