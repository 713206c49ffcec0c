/*
 * jfr_pprof.c: the profile side of the JFR reader (see jfr.h): strings,
 * functions, locations and stacks shared by every kind of profile of one
 * body, in a profiles dictionary built through core/dict.h; samples summed
 * per (stack, context id); the pprof encoder; and the LabelsSnapshot
 * (labels part) decoder.
 *
 * Every table is keyed by data from the upload (names, line numbers, stack
 * contents, context ids), so each index is a pl_htab under the process's
 * hash key (the dictionary builder's, and the samples' and labels' here).
 * A pprof holds only what its samples use: locations, functions and strings
 * are renumbered per profile at encoding time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "labels.pb.h"
#include "profile.pb.h"
#include "proto/jfr_internal.h"
#include "proto/otlp_pb.h" /* pl_utf8_valid */
#include "proto/pb_wire.h"

void pl_jfr_out_init(jfr_out *o)
{
    memset(o, 0, sizeof(*o));
    pl_arena_init(&o->arena);
}

void pl_jfr_out_free(jfr_out *o)
{
    for (int k = 0; k < PL_JFR_KINDS; k++)
        pl_htab_free(&o->kinds[k].index);
    pl_arena_free(&o->arena);
}

size_t pl_jfr_out_memory(const jfr_out *o)
{
    size_t n = pl_arena_bytes(&o->arena); /* the dictionary and its indexes */
    for (int k = 0; k < PL_JFR_KINDS; k++)
        n += (size_t)o->kinds[k].index.cap * 8;
    return n;
}

/* ---- strings, functions, locations, stacks ------------------------------------ */

int32_t pl_jfr_out_string(jfr_out *o, pl_bytes s)
{
    return pl_dict_intern_string(&o->arena, &o->dict, s);
}

int32_t pl_jfr_out_function(jfr_out *o, uint32_t name_string)
{
    pl_function f = {(int32_t)name_string, (int32_t)name_string, 0, 0};
    return pl_dict_intern_function(&o->arena, &o->dict, &f);
}

int32_t pl_jfr_out_location(jfr_out *o, uint32_t function, int32_t line)
{
    pl_line ln = {(int32_t)function, line, 0};
    pl_location loc = {0, 0, &ln, 1, NULL, 0};
    return pl_dict_intern_location(&o->arena, &o->dict, &loc);
}

int32_t pl_jfr_out_stack(jfr_out *o, const uint32_t *locs, uint32_t n)
{
    return pl_dict_intern_stack(&o->arena, &o->dict, (const int32_t *)locs, n);
}

/* ---- samples ------------------------------------------------------------------ */

typedef struct sample_key {
    const jfr_kind_state *ks;
    uint32_t stack;
    const jfr_corr *corr;
} sample_key;

static bool sample_eq(const void *ctx, uint32_t val)
{
    const sample_key *k = ctx;
    const jfr_sample *s = &k->ks->samples[val - 1];
    return s->stack == k->stack && s->corr.context == k->corr->context &&
           s->corr.span_id == k->corr->span_id && s->corr.span_name == k->corr->span_name;
}

int pl_jfr_out_sample(jfr_out *o, pl_jfr_kind kind, uint32_t stack, const jfr_corr *corr,
                      int64_t v0, int64_t v1)
{
    jfr_kind_state *ks = &o->kinds[kind];
    ks->events++;
    uint32_t h = (uint32_t)pl_hash_u64(
        ((uint64_t)stack << 32) ^
        pl_hash_u64(corr->context ^ pl_hash_u64(corr->span_id ^ pl_hash_u64(corr->span_name))));
    sample_key k = {ks, stack, corr};
    uint32_t *slot = pl_htab_slot(&ks->index, h, sample_eq, &k);
    if (!slot)
        return -1;
    if (*slot) {
        jfr_sample *s = &ks->samples[*slot - 1];
        /* saturating: hostile values must not wrap a total around */
        if (__builtin_add_overflow(s->v[0], v0, &s->v[0]))
            s->v[0] = INT64_MAX;
        if (__builtin_add_overflow(s->v[1], v1, &s->v[1]))
            s->v[1] = INT64_MAX;
        return 0;
    }
    if (pl_arena_reserve(&o->arena, (void **)&ks->samples, ks->n, &ks->cap, sizeof(jfr_sample), 64))
        return -1;
    ks->samples[ks->n] = (jfr_sample){stack, *corr, {v0, v1}};
    *slot = ++ks->n;
    pl_htab_added(&ks->index, slot, h);
    return 1;
}

/* ---- the LabelsSnapshot ----------------------------------------------------------- */

typedef struct label_string {
    int64_t id;
    pl_bytes text;
} label_string;

typedef struct label_context {
    int64_t id;
    uint32_t off, n; /* into pairs */
} label_context;

struct pl_jfr_labels {
    pl_arena arena;
    label_string *strings;
    uint32_t n_strings, cap_strings;
    pl_htab string_index;
    label_context *contexts;
    uint32_t n_contexts, cap_contexts;
    pl_htab context_index;
    int64_t (*pairs)[2];
    uint32_t n_pairs, cap_pairs;
};

typedef struct id_key {
    const void *arr;
    size_t stride;
    int64_t id;
} id_key;

static bool id_eq(const void *ctx, uint32_t val)
{
    const id_key *k = ctx;
    int64_t id;
    memcpy(&id, (const uint8_t *)k->arr + (size_t)(val - 1) * k->stride, sizeof(id));
    return id == k->id;
}

#define LBAD(...) (pl_errf(err, PL_ERR_INVALID, __VA_ARGS__), NULL)

pl_jfr_labels *pl_jfr_labels_decode(const uint8_t *data, size_t len, pl_err *err)
{
    pl_jfr_labels *l = calloc(1, sizeof(*l));
    if (!l) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    pl_arena_init(&l->arena);
    pl_pb_reader r = {data, data + len};
    while (r.p < r.end) {
        uint32_t f, wt;
        uint64_t v;
        pl_pb_reader entry = {0};
        if (pl_pb_next_field(&r, &f, &wt, &v, &entry)) {
            pl_jfr_labels_free(l);
            return LBAD("labels: corrupt protobuf at byte %zu", (size_t)(r.p - data));
        }
        if (wt != 2 ||
            (f != jfr_LabelsSnapshot_contexts_tag && f != jfr_LabelsSnapshot_strings_tag))
            continue;
        int64_t id = 0;
        pl_bytes text = {(const uint8_t *)"", 0};
        pl_pb_reader ctx = {NULL, NULL};
        while (entry.p < entry.end) {
            uint32_t g, w;
            pl_pb_reader sub = {0};
            if (pl_pb_next_field(&entry, &g, &w, &v, &sub)) {
                pl_jfr_labels_free(l);
                return LBAD("labels: corrupt map entry");
            }
            if (g == 1 && w == 0)
                id = (int64_t)v;
            else if (g == 2 && w == 2) {
                if (f == jfr_LabelsSnapshot_strings_tag) {
                    text = (pl_bytes){sub.p, (uint32_t)(sub.end - sub.p)};
                    /* label text must make valid pprof strings: text that
                     * is not UTF-8 or holds NUL counts as empty (its labels
                     * are left out) */
                    if (memchr(text.ptr, 0, text.len) || !pl_utf8_valid(text.ptr, text.len))
                        text = (pl_bytes){(const uint8_t *)"", 0};
                } else
                    ctx = sub;
            }
        }
        /* a repeated key replaces the earlier entry, as for any proto3 map */
        if (f == jfr_LabelsSnapshot_strings_tag) {
            id_key k = {l->strings, sizeof(label_string), id};
            uint32_t h = (uint32_t)pl_hash_u64((uint64_t)id);
            uint32_t *slot = pl_htab_slot(&l->string_index, h, id_eq, &k);
            if (slot && *slot) {
                l->strings[*slot - 1].text = text;
                continue;
            }
            if (!slot || pl_arena_reserve(&l->arena, (void **)&l->strings, l->n_strings,
                                          &l->cap_strings, sizeof(label_string), 64)) {
                pl_jfr_labels_free(l);
                pl_errf(err, PL_ERR_NOMEM, "out of memory");
                return NULL;
            }
            l->strings[l->n_strings] = (label_string){id, text};
            *slot = ++l->n_strings;
            pl_htab_added(&l->string_index, slot, h);
            continue;
        }
        uint32_t off = l->n_pairs;
        while (ctx.p && ctx.p < ctx.end) {
            uint32_t g, w;
            pl_pb_reader pair = {0};
            if (pl_pb_next_field(&ctx, &g, &w, &v, &pair)) {
                pl_jfr_labels_free(l);
                return LBAD("labels: context %lld: corrupt protobuf", (long long)id);
            }
            if (g != jfr_Context_labels_tag || w != 2)
                continue;
            int64_t kv[2] = {0, 0};
            while (pair.p < pair.end) {
                uint32_t h, w2;
                pl_pb_reader unused;
                if (pl_pb_next_field(&pair, &h, &w2, &v, &unused)) {
                    pl_jfr_labels_free(l);
                    return LBAD("labels: context %lld: corrupt label", (long long)id);
                }
                if (w2 == 0 && (h == jfr_Context_LabelsEntry_key_tag ||
                                h == jfr_Context_LabelsEntry_value_tag))
                    kv[h - 1] = (int64_t)v;
            }
            if (pl_arena_reserve(&l->arena, (void **)&l->pairs, l->n_pairs, &l->cap_pairs,
                                 sizeof(kv), 64)) {
                pl_jfr_labels_free(l);
                pl_errf(err, PL_ERR_NOMEM, "out of memory");
                return NULL;
            }
            memcpy(l->pairs[l->n_pairs++], kv, sizeof(kv));
        }
        id_key k = {l->contexts, sizeof(label_context), id};
        uint32_t h = (uint32_t)pl_hash_u64((uint64_t)id);
        uint32_t *slot = pl_htab_slot(&l->context_index, h, id_eq, &k);
        if (slot && *slot) {
            l->contexts[*slot - 1].off = off;
            l->contexts[*slot - 1].n = l->n_pairs - off;
            continue;
        }
        if (!slot || pl_arena_reserve(&l->arena, (void **)&l->contexts, l->n_contexts,
                                      &l->cap_contexts, sizeof(label_context), 64)) {
            pl_jfr_labels_free(l);
            pl_errf(err, PL_ERR_NOMEM, "out of memory");
            return NULL;
        }
        l->contexts[l->n_contexts] = (label_context){id, off, l->n_pairs - off};
        *slot = ++l->n_contexts;
        pl_htab_added(&l->context_index, slot, h);
    }
    return l;
}

void pl_jfr_labels_free(pl_jfr_labels *l)
{
    if (!l)
        return;
    pl_htab_free(&l->string_index);
    pl_htab_free(&l->context_index);
    pl_arena_free(&l->arena);
    free(l);
}

size_t pl_jfr_labels_contexts(const pl_jfr_labels *l)
{
    return l ? l->n_contexts : 0;
}

static const label_string *labels_string(const pl_jfr_labels *l, int64_t id)
{
    id_key k = {l->strings, sizeof(label_string), id};
    uint32_t v = pl_htab_get(&l->string_index, (uint32_t)pl_hash_u64((uint64_t)id), id_eq, &k);
    return v ? &l->strings[v - 1] : NULL;
}

static const label_context *labels_context(const pl_jfr_labels *l, int64_t id)
{
    id_key k = {l->contexts, sizeof(label_context), id};
    uint32_t v = pl_htab_get(&l->context_index, (uint32_t)pl_hash_u64((uint64_t)id), id_eq, &k);
    return v ? &l->contexts[v - 1] : NULL;
}

/* ---- the pprof encoder --------------------------------------------------------------- */

static const struct kind_desc {
    const char *name; /* __name__ */
    const char *types[2][2];
    const char *period[2];
    int columns;
    bool sampled; /* values are samples: x period */
} kinds[PL_JFR_KINDS] = {
    [PL_JFR_CPU] = {"process_cpu", {{"cpu", "nanoseconds"}}, {"cpu", "nanoseconds"}, 1, true},
    [PL_JFR_WALL] = {"wall", {{"wall", "nanoseconds"}}, {"wall", "nanoseconds"}, 1, true},
    [PL_JFR_ALLOC_IN_NEW_TLAB] = {"memory",
                                  {{"alloc_in_new_tlab_objects", "count"},
                                   {"alloc_in_new_tlab_bytes", "bytes"}},
                                  {"space", "bytes"},
                                  2,
                                  false},
    [PL_JFR_ALLOC_OUTSIDE_TLAB] = {"memory",
                                   {{"alloc_outside_tlab_objects", "count"},
                                    {"alloc_outside_tlab_bytes", "bytes"}},
                                   {"space", "bytes"},
                                   2,
                                   false},
    [PL_JFR_ALLOC_SAMPLE] = {"memory",
                             {{"alloc_sample_objects", "count"}, {"alloc_sample_bytes", "bytes"}},
                             {"space", "bytes"},
                             2,
                             false},
    [PL_JFR_LOCK] = {"mutex",
                     {{"contentions", "count"}, {"delay", "nanoseconds"}},
                     {"mutex", "count"},
                     2,
                     false},
    [PL_JFR_PARK] = {"block",
                     {{"contentions", "count"}, {"delay", "nanoseconds"}},
                     {"block", "count"},
                     2,
                     false},
    [PL_JFR_LIVE] = {"memory", {{"live", "count"}}, {"objects", "count"}, 1, false},
    /* no period type: Pyroscope's parser sets none for malloc */
    [PL_JFR_MALLOC] = {"memory",
                       {{"malloc_objects", "count"}, {"malloc_bytes", "bytes"}},
                       {NULL, NULL},
                       2,
                       false},
};

const char *pl_jfr_kind_name(pl_jfr_kind kind)
{
    return kinds[kind].name;
}

static void put_uint(pl_buf *b, uint32_t field, uint64_t v)
{
    pl_pb_put_varint(b, (uint64_t)field << 3);
    pl_pb_put_varint(b, v);
}

/* Appends `m` as a sub-message and empties it. */
static void put_msg(pl_buf *b, uint32_t field, pl_buf *m)
{
    pl_pb_put_bytes(b, field, m->data, m->len);
    if (!pl_buf_ok(m))
        b->failed = true;
    pl_buf_reset(m);
}

#define F_PROFILE(f) perftools_profiles_Profile_##f##_tag

int pl_jfr_out_encode(const jfr_out *oc, pl_jfr_kind kind, const jfr_encode_info *info, pl_buf *out)
{
    jfr_out *o = (jfr_out *)oc; /* label strings are interned into the shared table */
    const struct kind_desc *kd = &kinds[kind];
    const jfr_kind_state *ks = &o->kinds[kind];
    int32_t fixed[6];
    for (int c = 0; c < kd->columns; c++) {
        fixed[2 * c] = pl_jfr_out_string(o, pl_bytes_from_cstr(kd->types[c][0]));
        fixed[2 * c + 1] = pl_jfr_out_string(o, pl_bytes_from_cstr(kd->types[c][1]));
    }
    bool has_period = kd->period[0] != NULL;
    fixed[4] = has_period ? pl_jfr_out_string(o, pl_bytes_from_cstr(kd->period[0])) : 0;
    fixed[5] = has_period ? pl_jfr_out_string(o, pl_bytes_from_cstr(kd->period[1])) : 0;
    int32_t span_id_key = pl_jfr_out_string(o, PL_BYTES_LIT("span_id"));
    int32_t span_name_key = pl_jfr_out_string(o, PL_BYTES_LIT("span_name"));
    if (span_id_key < 0 || span_name_key < 0)
        return -1;
    for (int i = 0; i < 6; i++)
        if ((i < 2 * kd->columns || i >= 4) && fixed[i] < 0)
            return -1;

    /* Context labels, resolved once per context (string ids into o). */
    uint32_t *label_off = calloc(ks->n + 1, sizeof(uint32_t));
    int32_t(*label_kv)[2] = NULL;
    uint32_t n_kv = 0, cap_kv = 0;
    const pl_dictionary *d = &o->dict;
    uint32_t *loc_map = calloc(d->n_locations + 1, sizeof(uint32_t));
    uint32_t *fn_map = calloc(d->n_functions + 1, sizeof(uint32_t));
    int rc = -1;
    if (!label_off || !loc_map || !fn_map)
        goto done;
    for (uint32_t i = 0; i < ks->n; i++) {
        label_off[i] = n_kv;
        const jfr_corr *corr = &ks->samples[i].corr;
        const label_context *lc = info->labels && corr->context
                                      ? labels_context(info->labels, (int64_t)corr->context)
                                      : NULL;
        /* the context's labels, then the event's span */
        uint32_t n_pairs = lc ? lc->n : 0;
        for (uint32_t j = 0; j < n_pairs + 2; j++) {
            int32_t key = -1, value = -1;
            if (j < n_pairs) {
                const label_string *k =
                    labels_string(info->labels, info->labels->pairs[lc->off + j][0]);
                const label_string *v =
                    labels_string(info->labels, info->labels->pairs[lc->off + j][1]);
                if (!k || !v || !k->text.len || !v->text.len)
                    continue;
                /* the event's own span replaces a span id of its context */
                if (corr->span_id && (pl_bytes_eq_cstr(k->text, "span_id") ||
                                      pl_bytes_eq_cstr(k->text, "profile_id")))
                    continue;
                key = pl_jfr_out_string(o, k->text);
                value = pl_jfr_out_string(o, v->text);
            } else if (j == n_pairs) {
                if (!corr->span_id)
                    continue;
                char hex[17];
                snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)corr->span_id);
                char *copy = pl_arena_memdup(&o->arena, hex, 16);
                if (!copy)
                    goto done;
                key = span_id_key;
                value = pl_jfr_out_string(o, (pl_bytes){(const uint8_t *)copy, 16});
            } else {
                const label_string *name =
                    info->labels && corr->span_name
                        ? labels_string(info->labels, (int64_t)corr->span_name)
                        : NULL;
                if (!name || !name->text.len)
                    continue;
                key = span_name_key;
                value = pl_jfr_out_string(o, name->text);
            }
            if (key < 0 || value < 0)
                goto done;
            if (n_kv == cap_kv) {
                cap_kv = cap_kv ? cap_kv * 2 : 64;
                void *p = realloc(label_kv, cap_kv * sizeof(*label_kv));
                if (!p)
                    goto done;
                label_kv = p;
            }
            label_kv[n_kv][0] = key;
            label_kv[n_kv][1] = value;
            n_kv++;
        }
    }
    label_off[ks->n] = n_kv;

    /* Renumber what this profile uses: locations, functions, strings. */
    uint32_t *str_map = calloc(d->n_strings + 1, sizeof(uint32_t));
    if (!str_map)
        goto done;
    uint32_t n_loc = 0, n_fn = 0;
    for (uint32_t i = 0; i < ks->n; i++) {
        const pl_stack *st = &d->stacks[ks->samples[i].stack];
        for (uint32_t j = 0; j < st->n_location_indices; j++) {
            int32_t l = st->location_indices[j];
            if (loc_map[l])
                continue;
            loc_map[l] = ++n_loc;
            int32_t f = d->locations[l].lines[0].function_index;
            if (!fn_map[f]) {
                fn_map[f] = ++n_fn;
                str_map[d->functions[f].name_strindex] = 1;
            }
        }
    }
    for (uint32_t i = 0; i < n_kv; i++)
        str_map[label_kv[i][0]] = str_map[label_kv[i][1]] = 1;
    for (int i = 0; i < 6; i++)
        if (i < 2 * kd->columns || (i >= 4 && has_period))
            str_map[fixed[i]] = 1;
    uint32_t n_str = 1;
    str_map[0] = 0;
    for (uint32_t s = 1; s < d->n_strings; s++)
        if (str_map[s])
            str_map[s] = n_str++;

    pl_buf m, sub;
    pl_buf_init(&m);
    pl_buf_init(&sub);
    for (int c = 0; c < kd->columns; c++) {
        put_uint(&m, perftools_profiles_ValueType_type_tag, str_map[fixed[2 * c]]);
        put_uint(&m, perftools_profiles_ValueType_unit_tag, str_map[fixed[2 * c + 1]]);
        put_msg(out, F_PROFILE(sample_type), &m);
    }
    for (uint32_t i = 0; i < ks->n; i++) {
        const jfr_sample *s = &ks->samples[i];
        const pl_stack *st = &d->stacks[s->stack];
        for (uint32_t j = 0; j < st->n_location_indices; j++)
            pl_pb_put_varint(&sub, loc_map[st->location_indices[j]]);
        put_msg(&m, perftools_profiles_Sample_location_id_tag, &sub);
        for (int c = 0; c < kd->columns; c++) {
            int64_t v = s->v[c];
            if (c == 0 && kd->sampled)
                v *= info->period;
            pl_pb_put_varint(&sub, (uint64_t)v);
        }
        put_msg(&m, perftools_profiles_Sample_value_tag, &sub);
        for (uint32_t j = label_off[i]; j < label_off[i + 1]; j++) {
            put_uint(&sub, perftools_profiles_Label_key_tag, str_map[label_kv[j][0]]);
            put_uint(&sub, perftools_profiles_Label_str_tag, str_map[label_kv[j][1]]);
            put_msg(&m, perftools_profiles_Sample_label_tag, &sub);
        }
        put_msg(out, F_PROFILE(sample), &m);
    }
    for (uint32_t l = 1; l < d->n_locations; l++) {
        if (!loc_map[l])
            continue;
        const pl_line *ln = &d->locations[l].lines[0];
        put_uint(&m, perftools_profiles_Location_id_tag, loc_map[l]);
        put_uint(&sub, perftools_profiles_Line_function_id_tag, fn_map[ln->function_index]);
        if (ln->line > 0)
            put_uint(&sub, perftools_profiles_Line_line_tag, (uint64_t)ln->line);
        put_msg(&m, perftools_profiles_Location_line_tag, &sub);
        put_msg(out, F_PROFILE(location), &m);
    }
    for (uint32_t f = 1; f < d->n_functions; f++) {
        if (!fn_map[f])
            continue;
        put_uint(&m, perftools_profiles_Function_id_tag, fn_map[f]);
        put_uint(&m, perftools_profiles_Function_name_tag, str_map[d->functions[f].name_strindex]);
        put_uint(&m, perftools_profiles_Function_system_name_tag,
                 str_map[d->functions[f].system_name_strindex]);
        put_msg(out, F_PROFILE(function), &m);
    }
    pl_pb_put_bytes(out, F_PROFILE(string_table), "", 0);
    for (uint32_t s = 1; s < d->n_strings; s++)
        if (str_map[s])
            pl_pb_put_bytes(out, F_PROFILE(string_table), d->strings[s].ptr, d->strings[s].len);
    if (info->time_unix_nano)
        put_uint(out, F_PROFILE(time_nanos), info->time_unix_nano);
    if (info->duration_nano)
        put_uint(out, F_PROFILE(duration_nanos), info->duration_nano);
    if (has_period) {
        put_uint(&m, perftools_profiles_ValueType_type_tag, str_map[fixed[4]]);
        put_uint(&m, perftools_profiles_ValueType_unit_tag, str_map[fixed[5]]);
        put_msg(out, F_PROFILE(period_type), &m);
        put_uint(out, F_PROFILE(period), kd->sampled ? (uint64_t)info->period : 1);
    }
    rc = pl_buf_ok(out) && pl_buf_ok(&m) && pl_buf_ok(&sub) ? 0 : -1;
    pl_buf_free(&m);
    pl_buf_free(&sub);
    free(str_map);
done:
    free(label_off);
    free(label_kv);
    free(loc_map);
    free(fn_map);
    return rc;
}
