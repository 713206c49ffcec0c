/*
 * intern.c: see intern.h. Open addressing with linear probing, at most half
 * full; the full 64-bit hash is kept per slot so growing never rehashes keys.
 */
#include "intern.h"

#include <stdlib.h>
#include <string.h>

/* Looks `key` up; returns its index, or 0 when absent (then *slot_out is
 * where to insert). -1 on OOM. */
int32_t pl_intern_find(pl_intern *d, const void *key, uint32_t len, uint64_t h, size_t *slot_out)
{
    if ((d->n + 1) * 2 > d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 256;
        struct pl_intern_slot *s = calloc(cap, sizeof(*s));
        if (!s)
            return -1;
        for (size_t i = 0; i < d->cap; i++) {
            if (!d->slots[i].index)
                continue;
            size_t j = d->slots[i].hash & (cap - 1);
            while (s[j].index)
                j = (j + 1) & (cap - 1);
            s[j] = d->slots[i];
        }
        free(d->slots);
        d->slots = s;
        d->cap = cap;
    }
    size_t j = h & (d->cap - 1);
    while (d->slots[j].index) {
        struct pl_intern_slot *s = &d->slots[j];
        if (s->hash == h && s->len == len && (len == 0 || memcmp(d->keys + s->off, key, len) == 0))
            return s->index;
        j = (j + 1) & (d->cap - 1);
    }
    *slot_out = j;
    return 0;
}

int pl_intern_add(pl_intern *d, size_t slot, const void *key, uint32_t len, uint64_t h,
                  int32_t index)
{
    if (d->keys_len + len > d->keys_cap) {
        size_t cap = (d->keys_len + len) * 2 + 1024;
        uint8_t *k = realloc(d->keys, cap);
        if (!k)
            return -1;
        d->keys = k;
        d->keys_cap = cap;
    }
    if (len)
        memcpy(d->keys + d->keys_len, key, len);
    d->slots[slot] = (struct pl_intern_slot){h, d->keys_len, len, index};
    d->keys_len += len;
    d->n++;
    return 0;
}

void pl_intern_free(pl_intern *d)
{
    free(d->slots);
    free(d->keys);
    memset(d, 0, sizeof(*d));
}
