/*
 * intern.h: an interner, byte strings -> dense ids, for tables built from a
 * client's data (dictionary entries deduplicated by content). Keys are
 * copied into one growing buffer; the caller hashes them with the keyed
 * pl_hash_bytes (core/hash.h), so a client cannot choose colliding keys.
 * Ids are the caller's (> 0). The index is a pl_htab (core/hash.h) over the
 * entries, so this file only keeps the keys.
 */
#ifndef PL_CORE_INTERN_H
#define PL_CORE_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "hash.h"

typedef struct pl_intern {
    pl_htab index; /* values: entry number + 1 */
    struct pl_intern_entry {
        size_t off;
        uint32_t len;
        int32_t id;
    } * entries;
    size_t n, cap;
    uint8_t *keys; /* concatenated keys */
    size_t keys_len, keys_cap;
} pl_intern;

/* Looks `key` (hashed to `hash`) up: its id, or 0 when absent (then *slot
 * is where pl_intern_add puts it; add before any other find). -1 on OOM. */
int32_t pl_intern_find(pl_intern *t, const void *key, uint32_t len, uint64_t hash, size_t *slot);
/* Records key -> id (id > 0) at the slot pl_intern_find gave. 0 or -1 (OOM). */
int pl_intern_add(pl_intern *t, size_t slot, const void *key, uint32_t len, uint64_t hash,
                  int32_t id);
/* Looks `key` up without making room for it: its id, or 0 when absent. */
int32_t pl_intern_get(const pl_intern *t, const void *key, uint32_t len, uint64_t hash);
void pl_intern_free(pl_intern *t);

#endif
