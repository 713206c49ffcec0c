/*
 * strlist.c: see strlist.h.
 */
#include "strlist.h"

#include <stdlib.h>
#include <string.h>

int pl_strlist_copy(pl_strlist *dst, const pl_strlist *src)
{
    memset(dst, 0, sizeof(*dst));
    if (!src->n)
        return 0;
    dst->items = calloc(src->n, sizeof(char *));
    if (!dst->items)
        return -1;
    for (size_t i = 0; i < src->n; i++) {
        dst->items[i] = strdup(src->items[i]);
        if (!dst->items[i]) {
            pl_strlist_free(dst);
            return -1;
        }
        dst->n = i + 1;
    }
    return 0;
}

void pl_strlist_free(pl_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

bool pl_strlist_contains(const pl_strlist *l, pl_bytes s)
{
    for (size_t i = 0; i < l->n; i++)
        if (pl_bytes_eq_cstr(s, l->items[i]))
            return true;
    return false;
}
