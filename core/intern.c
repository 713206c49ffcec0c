/*
 * intern.c: see intern.h. The pl_htab keeps the low 32 bits of each hash
 * beside the entry number, so growing never touches the keys; a key is only
 * compared when those bits match.
 */
#include "intern.h"

#include "buf.h"

#include <stdlib.h>
#include <string.h>

typedef struct intern_key {
    const pl_intern *t;
    const void *key;
    uint32_t len;
} intern_key;

static bool intern_eq(const void *ctx, uint32_t val)
{
    const intern_key *k = ctx;
    const struct pl_intern_entry *e = &k->t->entries[val - 1];
    return e->len == k->len && (k->len == 0 || memcmp(k->t->keys + e->off, k->key, k->len) == 0);
}

int32_t pl_intern_get(const pl_intern *t, const void *key, uint32_t len, uint64_t hash)
{
    intern_key k = {t, key, len};
    uint32_t val = pl_htab_get(&t->index, (uint32_t)hash, intern_eq, &k);
    return val ? t->entries[val - 1].id : 0;
}

int32_t pl_intern_find(pl_intern *t, const void *key, uint32_t len, uint64_t hash, size_t *slot)
{
    intern_key k = {t, key, len};
    uint32_t *s = pl_htab_slot(&t->index, (uint32_t)hash, intern_eq, &k);
    if (!s)
        return -1;
    if (*s)
        return t->entries[*s - 1].id;
    *slot = (size_t)(s - t->index.vals);
    return 0;
}

int pl_intern_add(pl_intern *t, size_t slot, const void *key, uint32_t len, uint64_t hash,
                  int32_t id)
{
    if (pl_array_reserve((void **)&t->entries, t->n, &t->cap, sizeof(*t->entries), 256))
        return -1;
    if (t->keys_len + len > t->keys_cap) {
        size_t cap = (t->keys_len + len) * 2 + 1024;
        uint8_t *k = realloc(t->keys, cap);
        if (!k)
            return -1;
        t->keys = k;
        t->keys_cap = cap;
    }
    if (len)
        memcpy(t->keys + t->keys_len, key, len);
    t->entries[t->n] = (struct pl_intern_entry){t->keys_len, len, id};
    t->keys_len += len;
    uint32_t *s = &t->index.vals[slot];
    *s = (uint32_t)++t->n;
    pl_htab_added(&t->index, s, (uint32_t)hash);
    return 0;
}

void pl_intern_free(pl_intern *t)
{
    pl_htab_free(&t->index);
    free(t->entries);
    free(t->keys);
    memset(t, 0, sizeof(*t));
}
