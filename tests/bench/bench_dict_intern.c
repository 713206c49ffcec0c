/*
 * bench_dict_intern.c: pl_dict_intern_string on a client's large string
 * table, the way a processor uses it: a few strings of its own interned
 * again and again, and strings the client already sent looked up. Prints
 * ns per call for each table size (median of 5 runs).
 *
 * usage: bench_dict_intern [calls]   (default 40000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/model.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double run(int table, int calls)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    if (!b)
        exit(1);
    pl_dictionary *d = &b->data.profiles.dict;
    pl_dict_ensure_zero_entries(&b->arena, d);
    char s[32];
    /* The client's table, as a decoder appends it. */
    for (int i = 0; i < table; i++) {
        int n = snprintf(s, sizeof s, "client-%d", i);
        if (d->n_strings == d->cap_strings) {
            pl_bytes *t = pl_arena_grow(&b->arena, d->strings, d->n_strings,
                                        d->cap_strings * 2 + 16, sizeof(pl_bytes));
            if (!t)
                exit(1);
            d->strings = t;
            d->cap_strings = d->cap_strings * 2 + 16;
        }
        d->strings[d->n_strings++] = pl_batch_bytes(b, s, (size_t)n);
    }
    double t0 = now_s();
    for (int i = 0; i < calls / 2; i++) {
        int n = snprintf(s, sizeof s, "added-%d", i % 50);
        pl_dict_intern_string(&b->arena, d, pl_batch_bytes(b, s, (size_t)n));
        n = snprintf(s, sizeof s, "client-%d", (int)(((long long)i * 7919) % table));
        pl_dict_intern_string(&b->arena, d, pl_batch_bytes(b, s, (size_t)n));
    }
    double ns = (now_s() - t0) * 1e9 / calls;
    pl_batch_free(b);
    return ns;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 40000;
    const int tables[] = {50, 1000, 20000, 200000};
    printf("| strings in the table | ns per pl_dict_intern_string |\n|---:|---:|\n");
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
        double r[5];
        for (int i = 0; i < 5; i++)
            r[i] = run(tables[t], calls);
        qsort(r, 5, sizeof r[0], cmp);
        printf("| %d | %.0f |\n", tables[t], r[2]);
    }
    return 0;
}
