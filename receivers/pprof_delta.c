/*
 * pprof_delta.c: see pprof_delta.h.
 */
#include "receivers/pprof_delta.h"

#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/hash.h"

typedef struct fp128 {
    uint64_t a, b;
} fp128;

/* One scrape's totals: fingerprints and k cumulative values each. */
typedef struct totals {
    fp128 *fps;
    int64_t *vals;
    uint32_t n, cap, k;
    pl_htab index;
} totals;

struct pl_pprof_delta {
    pl_delta_mode mode;
    bool primed;
    uint64_t last_ns;
    uint64_t columns; /* fingerprint of the cumulative columns' names */
    totals prev;
};

static void totals_free(totals *t)
{
    free(t->fps);
    free(t->vals);
    pl_htab_free(&t->index);
    memset(t, 0, sizeof(*t));
}

typedef struct fp_key {
    const totals *t;
    fp128 fp;
} fp_key;

static bool fp_eq(const void *ctx, uint32_t val)
{
    const fp_key *k = ctx;
    const fp128 *f = &k->t->fps[val - 1];
    return f->a == k->fp.a && f->b == k->fp.b;
}

/* Index of fp in t, adding it (values 0) when absent; -1 on OOM. */
static int64_t totals_put(totals *t, fp128 fp, bool *added)
{
    fp_key k = {t, fp};
    uint32_t *slot = pl_htab_slot(&t->index, (uint32_t)fp.a, fp_eq, &k);
    if (!slot)
        return -1;
    *added = !*slot;
    if (*slot)
        return *slot - 1;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 256;
        fp128 *f = realloc(t->fps, cap * sizeof(fp128));
        if (!f)
            return -1;
        t->fps = f;
        int64_t *v = realloc(t->vals, (size_t)cap * (t->k ? t->k : 1) * sizeof(int64_t));
        if (!v)
            return -1;
        t->vals = v;
        t->cap = cap;
    }
    t->fps[t->n] = fp;
    memset(t->vals + (size_t)t->n * t->k, 0, t->k * sizeof(int64_t));
    *slot = ++t->n;
    pl_htab_added(&t->index, slot, (uint32_t)fp.a);
    return t->n - 1;
}

static int64_t totals_get(const totals *t, fp128 fp)
{
    fp_key k = {t, fp};
    uint32_t v = pl_htab_get(&t->index, (uint32_t)fp.a, fp_eq, &k);
    return v ? (int64_t)v - 1 : -1;
}

pl_pprof_delta *pl_pprof_delta_new(pl_delta_mode mode)
{
    pl_pprof_delta *d = calloc(1, sizeof(*d));
    if (d)
        d->mode = mode;
    return d;
}

void pl_pprof_delta_free(pl_pprof_delta *d)
{
    if (!d)
        return;
    totals_free(&d->prev);
    free(d);
}

size_t pl_pprof_delta_size(const pl_pprof_delta *d)
{
    return d ? d->prev.n : 0;
}

static void put_u64(pl_buf *b, uint64_t v)
{
    pl_buf_append(b, &v, sizeof(v));
}

static void put_str(pl_buf *b, pl_bytes s)
{
    put_u64(b, s.len);
    pl_buf_append(b, s.ptr, s.len);
}

/* What identifies a sample across scrapes: its frames (function, file,
 * line, address) and its labels (key, value, unit) and span link. */
static fp128 sample_fp(const pl_dictionary *d, const pl_sample *s, pl_buf *scratch)
{
    pl_buf_reset(scratch);
    if (s->stack_index > 0 && (uint32_t)s->stack_index < d->n_stacks) {
        const pl_stack *st = &d->stacks[s->stack_index];
        for (uint32_t i = 0; i < st->n_location_indices; i++) {
            int32_t li = st->location_indices[i];
            if (li <= 0 || (uint32_t)li >= d->n_locations)
                continue;
            const pl_location *loc = &d->locations[li];
            put_u64(scratch, loc->address);
            put_u64(scratch, loc->n_lines);
            for (uint32_t l = 0; l < loc->n_lines; l++) {
                int32_t fi = loc->lines[l].function_index;
                if (fi > 0 && (uint32_t)fi < d->n_functions) {
                    put_str(scratch, pl_dict_string(d, d->functions[fi].name_strindex));
                    put_str(scratch, pl_dict_string(d, d->functions[fi].filename_strindex));
                }
                put_u64(scratch, (uint64_t)loc->lines[l].line);
            }
        }
    }
    put_u64(scratch, UINT64_MAX); /* stack | labels */
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        if (ai <= 0 || (uint32_t)ai >= d->n_attributes)
            continue;
        const pl_kvu *a = &d->attributes[ai];
        put_str(scratch, pl_dict_string(d, a->key_strindex));
        put_u64(scratch, a->value.type);
        if (a->value.type == PL_VALUE_STRING)
            put_str(scratch, a->value.u.str);
        else if (a->value.type == PL_VALUE_STRINDEX)
            put_str(scratch, pl_dict_string(d, a->value.u.strindex));
        else if (a->value.type == PL_VALUE_INT)
            put_u64(scratch, (uint64_t)a->value.u.i);
        put_str(scratch, pl_dict_string(d, a->unit_strindex));
    }
    if (s->link_index > 0 && (uint32_t)s->link_index < d->n_links) {
        const pl_link *l = &d->links[s->link_index];
        pl_buf_append(scratch, l->span_id, l->span_id_len);
        pl_buf_append(scratch, l->trace_id, l->trace_id_len);
    }
    fp128 fp = {pl_hash_bytes(scratch->data, scratch->len),
                pl_hash_bytes_with(0x243f6a8885a308d3ull, scratch->data, scratch->len)};
    return fp;
}

static bool cumulative(pl_delta_mode mode, pl_bytes type)
{
    return mode == PL_DELTA_ALL || (type.len > 6 && memcmp(type.ptr, "alloc_", 6) == 0);
}

pl_status pl_pprof_delta_apply(pl_pprof_delta *d, pl_batch *batch, uint64_t now_ns, bool *empty,
                               pl_err *err)
{
    *empty = false;
    pl_profiles *ps = &batch->data.profiles;
    if (batch->signal != PL_SIGNAL_PROFILES || ps->n_resources != 1 ||
        ps->resources[0].n_scopes != 1)
        return pl_errf(err, PL_ERR_INVALID, "delta: not one pprof");
    pl_scope_profiles *sc = &ps->resources[0].scopes[0];
    const pl_dictionary *dict = &ps->dict;
    uint32_t n = sc->n_profiles ? sc->profiles[0].n_samples : 0;
    uint32_t cols[64], k = 0;
    bool keep[64];
    if (sc->n_profiles > 64)
        return pl_errf(err, PL_ERR_INVALID, "delta: more than 64 sample types");
    uint64_t columns = 0x9e3779b97f4a7c15ull;
    for (uint32_t c = 0; c < sc->n_profiles; c++) {
        const pl_profile *p = &sc->profiles[c];
        if (p->n_samples != n)
            return pl_errf(err, PL_ERR_INVALID, "delta: columns of different lengths");
        pl_bytes type = pl_dict_string(dict, p->sample_type.type_strindex);
        pl_bytes unit = pl_dict_string(dict, p->sample_type.unit_strindex);
        bool cum = cumulative(d->mode, type);
        keep[c] = cum || d->mode == PL_DELTA_HEAP;
        if (d->mode == PL_DELTA_INUSE) {
            keep[c] = !cum; /* the allocs profile carries alloc_* */
            continue;
        }
        if (cum) {
            cols[k++] = c;
            columns = pl_hash_bytes_with(columns, type.ptr, type.len);
            columns = pl_hash_bytes_with(columns, unit.ptr, unit.len);
        }
    }

    /* This scrape's totals per identity; first[i]: sample i is the first of its identity. */
    totals cur = {.k = k};
    uint32_t *which = malloc((n ? n : 1) * sizeof(uint32_t));
    uint8_t *first = calloc(n ? n : 1, 1);
    pl_buf scratch;
    pl_buf_init(&scratch);
    pl_status st = PL_OK;
    if (!which || !first)
        st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; st == PL_OK && k && i < n; i++) {
        fp128 fp = sample_fp(dict, &sc->profiles[0].samples[i], &scratch);
        bool added = false;
        int64_t j = totals_put(&cur, fp, &added);
        if (j < 0 || !pl_buf_ok(&scratch)) {
            st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
            break;
        }
        which[i] = (uint32_t)j;
        first[i] = added;
        for (uint32_t x = 0; x < k; x++) {
            int64_t v = sc->profiles[cols[x]].samples[i].n_values
                            ? sc->profiles[cols[x]].samples[i].values[0]
                            : 0;
            int64_t *t = &cur.vals[(size_t)j * k + x];
            if (__builtin_add_overflow(*t, v, t))
                *t = INT64_MAX;
        }
    }
    pl_buf_free(&scratch);

    /* Prime again unless the previous scrape had the same columns and no
     * total went down (a restart starts the counts from zero). */
    bool prime = !d->primed || d->columns != columns || d->prev.k != k;
    for (uint32_t j = 0; st == PL_OK && !prime && j < cur.n; j++) {
        int64_t pj = totals_get(&d->prev, cur.fps[j]);
        for (uint32_t x = 0; pj >= 0 && x < k && !prime; x++)
            prime = cur.vals[(size_t)j * k + x] < d->prev.vals[(size_t)pj * k + x];
    }
    uint64_t since = d->primed && now_ns > d->last_ns ? now_ns - d->last_ns : 0;
    for (uint32_t x = 0; st == PL_OK && !prime && x < k; x++) {
        pl_profile *p = &sc->profiles[cols[x]];
        pl_sample *out = pl_batch_alloc(batch, (n ? n : 1) * sizeof(pl_sample));
        int64_t *vals = pl_batch_alloc(batch, (n ? n : 1) * sizeof(int64_t));
        if (!out || !vals) {
            st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
            break;
        }
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (!first[i])
                continue;
            uint32_t j = which[i];
            int64_t pj = totals_get(&d->prev, cur.fps[j]);
            int64_t delta =
                cur.vals[(size_t)j * k + x] - (pj >= 0 ? d->prev.vals[(size_t)pj * k + x] : 0);
            if (delta <= 0)
                continue;
            out[m] = p->samples[i];
            vals[m] = delta;
            out[m].values = &vals[m];
            out[m].n_values = 1;
            m++;
        }
        p->samples = out;
        p->n_samples = m;
        if (since) {
            p->time_unix_nano = d->last_ns;
            p->duration_nano = since;
        }
    }
    free(which);
    free(first);
    if (st != PL_OK) {
        totals_free(&cur);
        return st;
    }
    /* Keep what is worth sending: a primed scrape drops its cumulative
     * columns, and any column left without samples goes too. */
    uint32_t kept = 0;
    for (uint32_t c = 0; c < sc->n_profiles; c++) {
        bool cum = false;
        for (uint32_t x = 0; x < k; x++)
            cum |= cols[x] == c;
        if (!keep[c] || (cum && prime) || sc->profiles[c].n_samples == 0)
            continue;
        sc->profiles[kept++] = sc->profiles[c];
    }
    sc->n_profiles = kept;
    *empty = kept == 0;
    totals_free(&d->prev);
    d->prev = cur;
    d->primed = true;
    d->columns = columns;
    d->last_ns = now_ns;
    return PL_OK;
}
