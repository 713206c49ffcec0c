/*
 * pprof_convert.c: the builder that pprof decoding fills (pprof.h), i.e. the
 * conversion into the profiles model's dictionary; gzip for pprof bodies
 * (net/compress.c's, the one gzip of proflink); Pyroscope profile names.
 *
 * The dictionary tables of the batch are appended to directly (not through
 * pl_dict_intern_string, which scans linearly): the builder keeps open-
 * addressing hash indexes of strings, stacks, attributes and links, keyed
 * per process (core/hash.h) since their keys come from clients.
 */
#include "pprof_internal.h"

#include "proto/coding.h"

/* ---- gzip (net/compress.c) ----------------------------------------------- */

pl_status pl_gunzip(const uint8_t *data, size_t len, size_t limit, uint8_t **out, size_t *out_len,
                    pl_err *err)
{
    pl_status st = pl_decompress(PL_ENCODING_GZIP, data, len, limit, out, out_len, err);
    if (st == PL_ERR_TOO_LARGE)
        pl_errf(err, st, "gzip: decompressed size over %zu bytes", limit);
    return st;
}

int pl_gzip(const uint8_t *data, size_t len, pl_buf *out)
{
    /* Level 1 (BestSpeed), as the Go runtime writes pprof: about 5x faster
     * than the default level on profiles, for a slightly larger output. */
    pl_err err = {{0}};
    return pl_compress(PL_ENCODING_GZIP, data, len, 1, out, &err) == PL_OK ? 0 : -1;
}

/* ---- the builder --------------------------------------------------------- */

/* Makes room for `extra` more entries in a dictionary table. */
int pl_pprof_table_reserve(pl_arena *arena, void **items, uint32_t n, uint32_t *cap, size_t elem,
                           size_t extra)
{
    if ((size_t)n + extra <= *cap && *items)
        return 0;
    size_t want = (size_t)n + extra;
    if (want > INT32_MAX)
        return -1;
    size_t c = *cap ? *cap : 16;
    while (c < want)
        c *= 2;
    if (c > INT32_MAX)
        c = INT32_MAX;
    void *p = pl_arena_grow(arena, *items, n, c, elem);
    if (!p)
        return -1;
    *items = p;
    *cap = (uint32_t)c;
    return 0;
}

typedef struct str_key {
    const pl_dictionary *dict;
    pl_bytes s;
} str_key;

static bool str_eq(const void *ctx, uint32_t val)
{
    const str_key *k = ctx;
    return pl_bytes_eq(k->dict->strings[val], k->s);
}

/* Interns a string that lives at least as long as the batch. -1 on OOM. */
int32_t pl_pprof_intern_string(pl_pprof_builder *b, pl_bytes s)
{
    if (s.len == 0)
        return 0;
    pl_dictionary *d = bdict(b);
    str_key key = {d, s};
    uint32_t hash = (uint32_t)hash_bytes(s.ptr, s.len, 1);
    uint32_t *slot = pl_htab_slot(&b->strings, hash, str_eq, &key);
    if (!slot)
        return -1;
    if (*slot)
        return (int32_t)*slot;
    if (RESERVE(b, strings, 1))
        return -1;
    uint32_t idx = d->n_strings++;
    d->strings[idx] = s;
    *slot = idx;
    pl_htab_added(&b->strings, slot, hash);
    return (int32_t)idx;
}

int32_t pl_pprof_intern_cstr(pl_pprof_builder *b, const char *s)
{
    return pl_pprof_intern_string(b, (pl_bytes){(const uint8_t *)s, (uint32_t)strlen(s)});
}

typedef struct stack_key {
    const pl_dictionary *dict;
    const int32_t *locs;
    uint32_t n;
} stack_key;

static bool stack_eq(const void *ctx, uint32_t val)
{
    const stack_key *k = ctx;
    const pl_stack *s = &k->dict->stacks[val];
    return s->n_location_indices == k->n &&
           (k->n == 0 || memcmp(s->location_indices, k->locs, k->n * sizeof(int32_t)) == 0);
}

int32_t pl_pprof_intern_stack(pl_pprof_builder *b, const int32_t *locs, uint32_t n)
{
    pl_dictionary *d = bdict(b);
    stack_key key = {d, locs, n};
    uint32_t hash = (uint32_t)hash_bytes(locs, n * sizeof(int32_t), 2);
    uint32_t *slot = pl_htab_slot(&b->stacks, hash, stack_eq, &key);
    if (!slot)
        return -1;
    if (*slot)
        return (int32_t)*slot;
    if (RESERVE(b, stacks, 1))
        return -1;
    int32_t *copy = NULL;
    if (n) {
        copy = pl_arena_alloc(&b->batch->arena, n * sizeof(int32_t));
        if (!copy)
            return -1;
        memcpy(copy, locs, n * sizeof(int32_t));
    }
    uint32_t idx = d->n_stacks++;
    d->stacks[idx] = (pl_stack){copy, n};
    *slot = idx;
    pl_htab_added(&b->stacks, slot, hash);
    return (int32_t)idx;
}

/* Attributes made here are strings or ints only; the key below covers both. */
typedef struct attr_key {
    const pl_dictionary *dict;
    int32_t key, unit;
    const pl_value *value;
} attr_key;

static bool attr_eq(const void *ctx, uint32_t val)
{
    const attr_key *k = ctx;
    const pl_kvu *a = &k->dict->attributes[val];
    return a->key_strindex == k->key && a->unit_strindex == k->unit &&
           pl_value_eq(&a->value, k->value);
}

int32_t pl_pprof_intern_attr(pl_pprof_builder *b, int32_t key, pl_value value, int32_t unit)
{
    pl_dictionary *d = bdict(b);
    attr_key k = {d, key, unit, &value};
    uint64_t h = pl_hash_u64((uint64_t)(uint32_t)key << 32 | (uint32_t)unit) ^ value.type;
    if (value.type == PL_VALUE_STRING)
        h = hash_bytes(value.u.str.ptr, value.u.str.len, h);
    else if (value.type == PL_VALUE_INT || value.type == PL_VALUE_BOOL)
        h = pl_hash_u64(h ^ (uint64_t)value.u.i);
    uint32_t hash = (uint32_t)h;
    uint32_t *slot = pl_htab_slot(&b->attrs, hash, attr_eq, &k);
    if (!slot)
        return -1;
    if (*slot)
        return (int32_t)*slot;
    if (RESERVE(b, attributes, 1))
        return -1;
    uint32_t idx = d->n_attributes++;
    d->attributes[idx] = (pl_kvu){key, value, unit};
    *slot = idx;
    pl_htab_added(&b->attrs, slot, hash);
    return (int32_t)idx;
}

typedef struct link_key {
    const pl_dictionary *dict;
    const pl_link *link;
} link_key;

static bool link_eq(const void *ctx, uint32_t val)
{
    const link_key *k = ctx;
    const pl_link *a = &k->dict->links[val], *l = k->link;
    return a->trace_id_len == l->trace_id_len && a->span_id_len == l->span_id_len &&
           memcmp(a->trace_id, l->trace_id, 16) == 0 && memcmp(a->span_id, l->span_id, 8) == 0;
}

int32_t pl_pprof_intern_link(pl_pprof_builder *b, const pl_link *link)
{
    pl_dictionary *d = bdict(b);
    link_key k = {d, link};
    uint32_t hash = (uint32_t)hash_bytes(link, sizeof(*link), 3);
    uint32_t *slot = pl_htab_slot(&b->links, hash, link_eq, &k);
    if (!slot)
        return -1;
    if (*slot)
        return (int32_t)*slot;
    if (RESERVE(b, links, 1))
        return -1;
    uint32_t idx = d->n_links++;
    d->links[idx] = *link;
    *slot = idx;
    pl_htab_added(&b->links, slot, hash);
    return (int32_t)idx;
}

pl_pprof_builder *pl_pprof_builder_new(pl_batch *batch)
{
    pl_pprof_builder *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->batch = batch;
    pl_profiles *ps = &batch->data.profiles;
    if (pl_dict_ensure_zero_entries(&batch->arena, &ps->dict)) {
        free(b);
        return NULL;
    }
    ps->has_dictionary = true;
    /* Index what the batch already holds, so new entries are shared with it.
     * Entries are never equal to each other in a well-formed dictionary; if
     * they are, the first one wins (any is correct). */
    pl_dictionary *d = &ps->dict;
    int fail = 0;
    for (uint32_t i = 1; i < d->n_strings && !fail; i++) {
        str_key key = {d, d->strings[i]};
        uint32_t hash = (uint32_t)hash_bytes(d->strings[i].ptr, d->strings[i].len, 1);
        uint32_t *slot = pl_htab_slot(&b->strings, hash, str_eq, &key);
        if (!slot)
            fail = 1;
        else if (!*slot) {
            *slot = i;
            pl_htab_added(&b->strings, slot, hash);
        }
    }
    for (uint32_t i = 1; i < d->n_stacks && !fail; i++) {
        stack_key key = {d, d->stacks[i].location_indices, d->stacks[i].n_location_indices};
        uint32_t hash = (uint32_t)hash_bytes(key.locs, key.n * sizeof(int32_t), 2);
        uint32_t *slot = pl_htab_slot(&b->stacks, hash, stack_eq, &key);
        if (!slot)
            fail = 1;
        else if (!*slot) {
            *slot = i;
            pl_htab_added(&b->stacks, slot, hash);
        }
    }
    for (uint32_t i = 1; i < d->n_links && !fail; i++) {
        link_key key = {d, &d->links[i]};
        uint32_t hash = (uint32_t)hash_bytes(&d->links[i], sizeof(pl_link), 3);
        uint32_t *slot = pl_htab_slot(&b->links, hash, link_eq, &key);
        if (!slot)
            fail = 1;
        else if (!*slot) {
            *slot = i;
            pl_htab_added(&b->links, slot, hash);
        }
    }
    /* Existing attributes are not indexed: a few duplicates across sources
     * are harmless, and attributes of other types would need their own hash. */
    if (fail) {
        pl_pprof_builder_free(b);
        return NULL;
    }
    return b;
}

void pl_pprof_builder_free(pl_pprof_builder *b)
{
    if (!b)
        return;
    pl_htab_free(&b->strings);
    pl_htab_free(&b->stacks);
    pl_htab_free(&b->attrs);
    pl_htab_free(&b->links);
    free(b->scratch_locs);
    free(b->scratch_vals);
    free(b->scratch_labels);
    free(b->scratch_attrs);
    free(b);
}

size_t pl_pprof_builder_samples(const pl_pprof_builder *b)
{
    return b->samples;
}

int pl_pprof_grow_scratch(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *n = realloc(*p, c * elem);
    if (!n)
        return -1;
    *p = n;
    *cap = c;
    return 0;
}

/* ---- Pyroscope profile names --------------------------------------------- */

int pl_pprof_name_profiles(pl_pprof_builder *b, pl_profile *profiles, uint32_t n, pl_bytes name)
{
    if (!n || !name.len)
        return n ? 0 : -1;
    pl_bytes copy = pl_batch_bytes(b->batch, name.ptr, name.len);
    int32_t key = pl_pprof_intern_cstr(b, PL_PPROF_NAME_ATTRIBUTE);
    int32_t attr =
        copy.ptr && key >= 0 ? pl_pprof_intern_attr(b, key, pl_value_string(copy), 0) : -1;
    if (attr < 0)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        pl_profile *p = &profiles[i];
        bool named = false;
        for (uint32_t k = 0; k < p->n_attribute_indices && !named; k++)
            named = p->attribute_indices[k] == attr;
        if (named)
            continue;
        int32_t *list =
            pl_arena_alloc(&b->batch->arena, (p->n_attribute_indices + 1) * sizeof(int32_t));
        if (!list)
            return -1;
        /* the name goes first: it replaces any name an earlier tier gave */
        list[0] = attr;
        uint32_t m = 1;
        for (uint32_t k = 0; k < p->n_attribute_indices; k++) {
            int32_t ai = p->attribute_indices[k];
            const pl_dictionary *d = bdict(b);
            if (ai > 0 && (uint32_t)ai < d->n_attributes &&
                pl_bytes_eq_cstr(pl_dict_string(d, d->attributes[ai].key_strindex),
                                 PL_PPROF_NAME_ATTRIBUTE))
                continue;
            list[m++] = ai;
        }
        p->attribute_indices = list;
        p->n_attribute_indices = m;
    }
    return 0;
}

int pl_pprof_builder_name_last(pl_pprof_builder *b, pl_bytes name)
{
    return pl_pprof_name_profiles(b, b->last_profiles, b->n_last, name);
}

uint32_t pl_pprof_builder_last_types(pl_pprof_builder *b, pl_bytes *out, uint32_t max)
{
    uint32_t n = b->n_last < max ? b->n_last : max;
    for (uint32_t i = 0; i < n; i++)
        out[i] = pl_dict_string(bdict(b), b->last_profiles[i].sample_type.type_strindex);
    return b->n_last;
}

bool pl_pprof_builder_bad_strings(const pl_pprof_builder *b)
{
    return b->bad_strings;
}

static bool bytes_contains(pl_bytes s, const char *needle)
{
    size_t n = strlen(needle);
    if (n > s.len)
        return false;
    for (size_t i = 0; i + n <= s.len; i++)
        if (memcmp(s.ptr + i, needle, n) == 0)
            return true;
    return false;
}

/* Pyroscope's default sample type mapping (its DefaultSampleTypeMapping),
 * the display names of uploads without a sample_type_config. */
static pl_bytes default_display(pl_bytes type)
{
    static const char *const map[][2] = {{"samples", "cpu"},
                                         {"goroutine", "goroutines"},
                                         {"contentions", "mutex_count"},
                                         {"delay", "mutex_duration"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (pl_bytes_eq_cstr(type, map[i][0]))
            return pl_bytes_from_cstr(map[i][1]);
    return type;
}

pl_bytes pl_pprof_ingest_name(const pl_bytes *types, const pl_bytes *display, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (pl_bytes_eq_cstr(types[i], "wall"))
            return PL_BYTES_LIT("wall");
    pl_bytes st = {NULL, 0};
    for (uint32_t i = 0; i < n; i++) {
        st = display ? (display[i].len ? display[i] : types[i]) : default_display(types[i]);
        if (bytes_contains(st, "cpu"))
            return PL_BYTES_LIT("process_cpu");
        if (bytes_contains(st, "alloc_") || bytes_contains(st, "inuse_") ||
            pl_bytes_eq_cstr(st, "space") || pl_bytes_eq_cstr(st, "objects"))
            return PL_BYTES_LIT("memory");
        if (bytes_contains(st, "mutex_"))
            return PL_BYTES_LIT("mutex");
        if (bytes_contains(st, "block_"))
            return PL_BYTES_LIT("block");
        if (bytes_contains(st, "goroutines"))
            return PL_BYTES_LIT("goroutines");
    }
    return st;
}

/* The name a Pyroscope API gave the profile (PL_PPROF_NAME_ATTRIBUTE). */
static bool given_name(const pl_dictionary *dict, const pl_profile *profile, pl_bytes *out)
{
    for (uint32_t i = 0; i < profile->n_attribute_indices; i++) {
        int32_t ai = profile->attribute_indices[i];
        if (ai <= 0 || (uint32_t)ai >= dict->n_attributes)
            continue;
        const pl_kvu *a = &dict->attributes[ai];
        if (a->value.type == PL_VALUE_STRING && a->value.u.str.len &&
            pl_bytes_eq_cstr(pl_dict_string(dict, a->key_strindex), PL_PPROF_NAME_ATTRIBUTE)) {
            *out = a->value.u.str;
            return true;
        }
    }
    return false;
}

pl_bytes pl_pprof_profile_name(const pl_dictionary *dict, const pl_profile *profile,
                               bool *cpu_special)
{
    if (cpu_special)
        *cpu_special = false;
    pl_bytes name;
    if (given_name(dict, profile, &name))
        return name;
    pl_bytes type = pl_dict_string(dict, profile->sample_type.type_strindex);
    pl_bytes unit = pl_dict_string(dict, profile->sample_type.unit_strindex);
    bool period = profile->has_period_type && profile->period != 0;
    pl_bytes ptype =
        period ? pl_dict_string(dict, profile->period_type.type_strindex) : (pl_bytes){NULL, 0};
    pl_bytes punit =
        period ? pl_dict_string(dict, profile->period_type.unit_strindex) : (pl_bytes){NULL, 0};
    if (pl_bytes_eq_cstr(type, "samples") && pl_bytes_eq_cstr(unit, "count") &&
        pl_bytes_eq_cstr(ptype, "cpu") && pl_bytes_eq_cstr(punit, "nanoseconds")) {
        if (cpu_special)
            *cpu_special = true;
        return PL_BYTES_LIT("process_cpu");
    }
    if ((pl_bytes_eq_cstr(type, "events") || pl_bytes_eq_cstr(type, "off_cpu")) &&
        pl_bytes_eq_cstr(unit, "nanoseconds") && ptype.len == 0)
        return PL_BYTES_LIT("off_cpu");
    return PL_BYTES_LIT("process_cpu");
}
