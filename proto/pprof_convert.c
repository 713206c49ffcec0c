/*
 * pprof_convert.c: the builder that pprof decoding fills (pprof.h), i.e. the
 * conversion into the profiles model's dictionary; gzip for pprof bodies
 * (net/compress.c's, the one gzip of proflink); Pyroscope profile names.
 *
 * Every entry goes into the batch's dictionary through its builder
 * (core/dict.h), whose indexes deduplicate across every pprof the batch
 * receives and every processor that adds to it later.
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
    /* What the batch already holds is indexed by the dictionary builder,
     * so new entries are shared with it. */
    return b;
}

void pl_pprof_builder_free(pl_pprof_builder *b)
{
    if (!b)
        return;
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
    int32_t key = pl_dict_intern_string(BARENA(b), bdict(b), PL_BYTES_LIT(PL_PPROF_NAME_ATTRIBUTE));
    int32_t attr = copy.ptr && key >= 0 ? pl_dict_intern_attribute(BARENA(b), bdict(b), key,
                                                                   pl_value_string(copy), 0)
                                        : -1;
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
