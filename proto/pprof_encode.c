/*
 * pprof_encode.c: the profiles model to pprof (one Profile of the model per
 * pprof; see pprof.h), and the pprof writer for named stacks (folded text).
 */
#include "pprof_internal.h"
#include "proto/pb_wire.h"

/* ---- encoding ------------------------------------------------------------ */

static void put_uint(pl_buf *b, uint32_t field, uint64_t v)
{
    if (!v)
        return; /* proto3: zero is the default and is not written */
    pl_pb_put_varint(b, (uint64_t)field << 3 | WT_VARINT);
    pl_pb_put_varint(b, v);
}

typedef struct encoder {
    const pl_dictionary *d;
    pl_err *err;
    pl_htab strs;
    pl_bytes *strings;
    size_t n_strings, cap_strings;
    uint32_t *fn_id, *loc_id, *map_id;          /* dict index -> pprof id (0 = unused) */
    uint32_t *fn_order, *loc_order, *map_order; /* pprof id - 1 -> dict index */
    uint32_t n_fn, n_loc, n_map;
    pl_buf msg, sub; /* scratch for nested messages */
    char numbuf[32];
} encoder;

typedef struct enc_str_key {
    const encoder *e;
    pl_bytes s;
} enc_str_key;

static bool enc_str_eq(const void *ctx, uint32_t val)
{
    const enc_str_key *k = ctx;
    return pl_bytes_eq(k->e->strings[val], k->s);
}

/* pprof string index of `s` (which must outlive the encoder), -1 on OOM. */
static int64_t enc_string(encoder *e, pl_bytes s)
{
    if (s.len == 0)
        return 0;
    enc_str_key key = {e, s};
    uint32_t hash = (uint32_t)hash_bytes(s.ptr, s.len, 1);
    uint32_t *slot = pl_htab_slot(&e->strs, hash, enc_str_eq, &key);
    if (!slot)
        return -1;
    if (*slot)
        return *slot;
    if (pl_pprof_grow_scratch((void **)&e->strings, &e->cap_strings, e->n_strings + 1,
                              sizeof(pl_bytes)))
        return -1;
    e->strings[e->n_strings] = s;
    *slot = (uint32_t)e->n_strings;
    pl_htab_added(&e->strs, slot, hash);
    return (int64_t)e->n_strings++;
}

static int64_t enc_dict_string(encoder *e, int32_t idx)
{
    return enc_string(e, pl_dict_string(e->d, idx));
}

#define ENC_BAD(e, ...) pl_errf((e)->err, PL_ERR_INVALID, __VA_ARGS__)

static pl_status enc_function(encoder *e, int32_t fi, uint32_t *id_out)
{
    if (fi < 0 || (uint32_t)fi >= e->d->n_functions)
        return ENC_BAD(e, "pprof encode: function index %d out of range", fi);
    if (!e->fn_id[fi]) {
        e->fn_order[e->n_fn] = (uint32_t)fi;
        e->fn_id[fi] = ++e->n_fn;
    }
    *id_out = e->fn_id[fi];
    return PL_OK;
}

static pl_status enc_location(encoder *e, int32_t li, uint32_t *id_out)
{
    const pl_dictionary *d = e->d;
    if (li < 0 || (uint32_t)li >= d->n_locations)
        return ENC_BAD(e, "pprof encode: location index %d out of range", li);
    if (!e->loc_id[li]) {
        const pl_location *loc = &d->locations[li];
        if (loc->mapping_index < 0 || (uint32_t)loc->mapping_index >= d->n_mappings)
            return ENC_BAD(e, "pprof encode: mapping index %d out of range", loc->mapping_index);
        if (loc->mapping_index > 0 && !e->map_id[loc->mapping_index]) {
            e->map_order[e->n_map] = (uint32_t)loc->mapping_index;
            e->map_id[loc->mapping_index] = ++e->n_map;
        }
        for (uint32_t k = 0; k < loc->n_lines; k++) {
            uint32_t fid = 0;
            pl_status st = enc_function(e, loc->lines[k].function_index, &fid);
            if (st != PL_OK)
                return st;
        }
        e->loc_order[e->n_loc] = (uint32_t)li;
        e->loc_id[li] = ++e->n_loc;
    }
    *id_out = e->loc_id[li];
    return PL_OK;
}

/* Writes one label (field 3 of Sample) into e->sub, appended to e->msg. */
static pl_status enc_label(encoder *e, int64_t key, int64_t str, int64_t num, int64_t unit)
{
    if (key < 0 || str < 0 || unit < 0)
        return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
    pl_buf_reset(&e->sub);
    put_uint(&e->sub, 1, (uint64_t)key);
    put_uint(&e->sub, 2, (uint64_t)str);
    put_uint(&e->sub, 3, (uint64_t)num);
    put_uint(&e->sub, 4, (uint64_t)unit);
    pl_pb_put_bytes(&e->msg, 3, e->sub.data, e->sub.len);
    return PL_OK;
}

static pl_status enc_sample(encoder *e, const pl_profile *p, const pl_sample *s, uint32_t si,
                            const pl_pprof_encode_options *o, pl_buf *samples, pl_arena *tmp)
{
    const pl_dictionary *d = e->d;
    pl_buf_reset(&e->msg);
    /* location ids, packed */
    if (s->stack_index < 0 || (uint32_t)s->stack_index >= d->n_stacks)
        return ENC_BAD(e, "pprof encode: sample %u: stack index %d out of range", si,
                       s->stack_index);
    const pl_stack *stack = &d->stacks[s->stack_index];
    pl_buf_reset(&e->sub);
    for (uint32_t k = 0; k < stack->n_location_indices; k++) {
        uint32_t id = 0;
        pl_status st = enc_location(e, stack->location_indices[k], &id);
        if (st != PL_OK)
            return st;
        pl_pb_put_varint(&e->sub, id);
    }
    if (e->sub.len)
        pl_pb_put_bytes(&e->msg, 1, e->sub.data, e->sub.len);
    /* one value: the sum of the sample's values, or its timestamp count */
    int64_t value = 0;
    if (s->n_values) {
        for (uint32_t k = 0; k < s->n_values; k++)
            value += s->values[k];
    } else
        value = (int64_t)s->n_timestamps;
    if (o->cpu_to_nanoseconds && p->period > 0)
        value *= p->period;
    pl_buf_reset(&e->sub);
    pl_pb_put_varint(&e->sub, (uint64_t)value);
    pl_pb_put_bytes(&e->msg, 2, e->sub.data, e->sub.len);
    /* labels: attributes, then the link. The link is the authority for the
     * span_id / trace_id labels: an attribute of the same name (the
     * correlation processor writes them too) is not repeated. */
    static const uint8_t zero_id[16];
    const pl_link *link =
        s->link_index > 0 && (uint32_t)s->link_index < d->n_links ? &d->links[s->link_index] : NULL;
    bool link_span = link && link->span_id_len == 8 && memcmp(link->span_id, zero_id, 8) != 0;
    bool link_trace = link && link->trace_id_len == 16 && memcmp(link->trace_id, zero_id, 16) != 0;
    for (uint32_t k = 0; k < s->n_attribute_indices; k++) {
        int32_t ai = s->attribute_indices[k];
        if (ai <= 0 || (uint32_t)ai >= d->n_attributes)
            continue; /* 0 = none; out of range: nothing to say about it */
        const pl_kvu *a = &d->attributes[ai];
        pl_bytes key = pl_dict_string(d, a->key_strindex);
        if (key.len == 0)
            continue;
        if (o->skip_attribute && pl_bytes_eq_cstr(key, o->skip_attribute))
            continue;
        if ((link_span && pl_bytes_eq_cstr(key, "span_id")) ||
            (link_trace && pl_bytes_eq_cstr(key, "trace_id")))
            continue;
        int64_t k_idx = enc_string(e, key);
        pl_status st = PL_OK;
        switch (a->value.type) {
        case PL_VALUE_STRING:
            st = enc_label(e, k_idx, enc_string(e, a->value.u.str), 0, 0);
            break;
        case PL_VALUE_STRINDEX:
            st = enc_label(e, k_idx, enc_dict_string(e, a->value.u.strindex), 0, 0);
            break;
        case PL_VALUE_INT:
            if (a->unit_strindex > 0) {
                st = enc_label(e, k_idx, 0, a->value.u.i, enc_dict_string(e, a->unit_strindex));
            } else {
                int n = snprintf(e->numbuf, sizeof(e->numbuf), "%" PRId64, a->value.u.i);
                st = enc_label(
                    e, k_idx,
                    enc_string(e, pl_bytes_from_cstr(pl_arena_memdup(tmp, e->numbuf, (size_t)n))),
                    0, 0);
            }
            break;
        case PL_VALUE_BOOL:
            st = enc_label(
                e, k_idx,
                enc_string(e, a->value.u.b ? PL_BYTES_LIT("true") : PL_BYTES_LIT("false")), 0, 0);
            break;
        case PL_VALUE_DOUBLE: {
            int n = snprintf(e->numbuf, sizeof(e->numbuf), "%.17g", a->value.u.d);
            st = enc_label(
                e, k_idx,
                enc_string(e, pl_bytes_from_cstr(pl_arena_memdup(tmp, e->numbuf, (size_t)n))), 0,
                0);
            break;
        }
        default:
            break; /* arrays, maps, bytes: Pyroscope keeps only scalars */
        }
        if (st != PL_OK)
            return st;
    }
    if (link) {
        const pl_link *l = link;
        char hex[33];
        if (link_span) {
            pl_hex_encode(l->span_id, 8, hex);
            pl_status st =
                enc_label(e, enc_string(e, PL_BYTES_LIT("span_id")),
                          enc_string(e, pl_bytes_from_cstr(pl_arena_memdup(tmp, hex, 16))), 0, 0);
            if (st != PL_OK)
                return st;
        }
        if (link_trace) {
            pl_hex_encode(l->trace_id, 16, hex);
            pl_status st =
                enc_label(e, enc_string(e, PL_BYTES_LIT("trace_id")),
                          enc_string(e, pl_bytes_from_cstr(pl_arena_memdup(tmp, hex, 32))), 0, 0);
            if (st != PL_OK)
                return st;
        }
    }
    pl_pb_put_bytes(samples, 2, e->msg.data, e->msg.len);
    return PL_OK;
}

static void enc_value_type(encoder *e, pl_buf *out, uint32_t field, int64_t type, int64_t unit)
{
    pl_buf_reset(&e->sub);
    put_uint(&e->sub, 1, (uint64_t)type);
    put_uint(&e->sub, 2, (uint64_t)unit);
    pl_pb_put_bytes(out, field, e->sub.data, e->sub.len);
}

static pl_status encode_profile(encoder *e, const pl_profile *p, const pl_pprof_encode_options *o,
                                pl_buf *out, pl_arena *tmp)
{
    const pl_dictionary *d = e->d;
    pl_status st = PL_OK;
    if (!pl_buf_reserve(&e->msg, 64))
        return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
    pl_bytes empty = {(const uint8_t *)"", 0};
    if (pl_pprof_grow_scratch((void **)&e->strings, &e->cap_strings, 1, sizeof(pl_bytes)))
        return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
    e->strings[0] = empty;
    e->n_strings = 1;

    /* sample type (one column) and period type */
    int64_t st_type, st_unit;
    if (o->cpu_to_nanoseconds) {
        st_type = enc_string(e, PL_BYTES_LIT("cpu"));
        st_unit = enc_string(e, PL_BYTES_LIT("nanoseconds"));
    } else {
        st_type = enc_dict_string(e, p->sample_type.type_strindex);
        st_unit = enc_dict_string(e, p->sample_type.unit_strindex);
    }
    int64_t pt_type = enc_dict_string(e, p->period_type.type_strindex);
    int64_t pt_unit = enc_dict_string(e, p->period_type.unit_strindex);
    if (st_type < 0 || st_unit < 0 || pt_type < 0 || pt_unit < 0)
        return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");

    pl_buf samples;
    pl_buf_init(&samples);
    uint32_t n = o->sample_indices ? o->n_sample_indices : p->n_samples;
    for (uint32_t k = 0; k < n && st == PL_OK; k++) {
        uint32_t si = o->sample_indices ? o->sample_indices[k] : k;
        if (si >= p->n_samples) {
            st = ENC_BAD(e, "pprof encode: sample index %u out of range", si);
            break;
        }
        st = enc_sample(e, p, &p->samples[si], si, o, &samples, tmp);
    }
    if (st != PL_OK) {
        pl_buf_free(&samples);
        return st;
    }

    enc_value_type(e, out, 1, st_type, st_unit);
    pl_buf_append(out, samples.data, samples.len);
    pl_buf_free(&samples);

    /* mappings, with has_* flags computed from the lines of their locations */
    bool *has_lines = calloc(e->n_map + 1, sizeof(bool));
    bool *has_inline = calloc(e->n_map + 1, sizeof(bool));
    if (!has_lines || !has_inline) {
        free(has_lines);
        free(has_inline);
        return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
    }
    for (uint32_t k = 0; k < e->n_loc; k++) {
        const pl_location *loc = &d->locations[e->loc_order[k]];
        if (loc->mapping_index > 0) {
            uint32_t mid = e->map_id[loc->mapping_index];
            if (loc->n_lines)
                has_lines[mid] = true;
            if (loc->n_lines > 1)
                has_inline[mid] = true;
        }
    }
    for (uint32_t k = 0; k < e->n_map; k++) {
        const pl_mapping *m = &d->mappings[e->map_order[k]];
        int64_t build_id = 0;
        for (uint32_t a = 0; a < m->n_attribute_indices; a++) {
            int32_t ai = m->attribute_indices[a];
            if (ai <= 0 || (uint32_t)ai >= d->n_attributes)
                continue;
            const pl_kvu *kv = &d->attributes[ai];
            if (!pl_bytes_eq_cstr(pl_dict_string(d, kv->key_strindex),
                                  "process.executable.build_id.gnu"))
                continue;
            if (kv->value.type == PL_VALUE_STRING)
                build_id = enc_string(e, kv->value.u.str);
            else if (kv->value.type == PL_VALUE_STRINDEX)
                build_id = enc_dict_string(e, kv->value.u.strindex);
        }
        int64_t filename = enc_dict_string(e, m->filename_strindex);
        if (build_id < 0 || filename < 0) {
            st = pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
            break;
        }
        pl_buf_reset(&e->msg);
        put_uint(&e->msg, 1, k + 1);
        put_uint(&e->msg, 2, m->memory_start);
        put_uint(&e->msg, 3, m->memory_limit);
        put_uint(&e->msg, 4, m->file_offset);
        put_uint(&e->msg, 5, (uint64_t)filename);
        put_uint(&e->msg, 6, (uint64_t)build_id);
        put_uint(&e->msg, 7, has_lines[k + 1]);
        put_uint(&e->msg, 8, has_lines[k + 1]);
        put_uint(&e->msg, 9, has_lines[k + 1]);
        put_uint(&e->msg, 10, has_inline[k + 1]);
        pl_pb_put_bytes(out, 3, e->msg.data, e->msg.len);
    }
    free(has_lines);
    free(has_inline);
    if (st != PL_OK)
        return st;

    for (uint32_t k = 0; k < e->n_loc; k++) {
        const pl_location *loc = &d->locations[e->loc_order[k]];
        pl_buf_reset(&e->msg);
        put_uint(&e->msg, 1, k + 1);
        if (loc->mapping_index > 0)
            put_uint(&e->msg, 2, e->map_id[loc->mapping_index]);
        put_uint(&e->msg, 3, loc->address);
        for (uint32_t l = 0; l < loc->n_lines; l++) {
            pl_buf_reset(&e->sub);
            put_uint(&e->sub, 1, e->fn_id[loc->lines[l].function_index]);
            put_uint(&e->sub, 2, (uint64_t)loc->lines[l].line);
            put_uint(&e->sub, 3, (uint64_t)loc->lines[l].column);
            pl_pb_put_bytes(&e->msg, 4, e->sub.data, e->sub.len);
        }
        pl_pb_put_bytes(out, 4, e->msg.data, e->msg.len);
    }
    for (uint32_t k = 0; k < e->n_fn; k++) {
        const pl_function *f = &d->functions[e->fn_order[k]];
        int64_t name = enc_dict_string(e, f->name_strindex);
        int64_t sys = enc_dict_string(e, f->system_name_strindex);
        int64_t file = enc_dict_string(e, f->filename_strindex);
        if (name < 0 || sys < 0 || file < 0)
            return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
        pl_buf_reset(&e->msg);
        put_uint(&e->msg, 1, k + 1);
        put_uint(&e->msg, 2, (uint64_t)name);
        put_uint(&e->msg, 3, (uint64_t)sys);
        put_uint(&e->msg, 4, (uint64_t)file);
        put_uint(&e->msg, 5, (uint64_t)f->start_line);
        pl_pb_put_bytes(out, 5, e->msg.data, e->msg.len);
    }
    for (size_t k = 0; k < e->n_strings; k++)
        pl_pb_put_bytes(out, 6, e->strings[k].ptr, e->strings[k].len);
    uint64_t time_ns = p->time_unix_nano ? p->time_unix_nano : o->default_time_unix_nano;
    put_uint(out, 9, time_ns);
    put_uint(out, 10, p->duration_nano);
    if (p->has_period_type || o->cpu_to_nanoseconds)
        enc_value_type(e, out, 11, pt_type, pt_unit);
    put_uint(out, 12, (uint64_t)p->period);
    put_uint(out, 14, (uint64_t)st_type);
    if (!pl_buf_ok(out) || !pl_buf_ok(&e->msg) || !pl_buf_ok(&e->sub))
        return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
    return PL_OK;
}

pl_status pl_pprof_encode(const pl_dictionary *dict, const pl_profile *profile,
                          const pl_pprof_encode_options *options, pl_buf *out, pl_err *err)
{
    static const pl_pprof_encode_options defaults;
    if (!options)
        options = &defaults;
    encoder e;
    memset(&e, 0, sizeof(e));
    e.d = dict;
    e.err = err;
    pl_buf_init(&e.msg);
    pl_buf_init(&e.sub);
    size_t nf = dict->n_functions + 1, nl = dict->n_locations + 1, nm = dict->n_mappings + 1;
    e.fn_id = calloc(nf, sizeof(uint32_t));
    e.loc_id = calloc(nl, sizeof(uint32_t));
    e.map_id = calloc(nm, sizeof(uint32_t));
    e.fn_order = malloc(nf * sizeof(uint32_t));
    e.loc_order = malloc(nl * sizeof(uint32_t));
    e.map_order = malloc(nm * sizeof(uint32_t));
    pl_arena tmp; /* decimal and hex label values */
    pl_arena_init(&tmp);
    pl_status st;
    if (!e.fn_id || !e.loc_id || !e.map_id || !e.fn_order || !e.loc_order || !e.map_order)
        st = pl_errf(err, PL_ERR_NOMEM, "pprof encode: out of memory");
    else
        st = encode_profile(&e, profile, options, out, &tmp);
    pl_arena_free(&tmp);
    pl_htab_free(&e.strs);
    free(e.strings);
    free(e.fn_id);
    free(e.loc_id);
    free(e.map_id);
    free(e.fn_order);
    free(e.loc_order);
    free(e.map_order);
    pl_buf_free(&e.msg);
    pl_buf_free(&e.sub);
    return st;
}

/* ---- pprof writer for named stacks --------------------------------------- */

struct pl_pprof_writer {
    pl_pprof_writer_options o;
    encoder e;      /* for its string table */
    pl_buf samples; /* encoded Sample messages */
    pl_buf msg;     /* scratch */
    uint8_t *is_fn; /* string index -> 1 when it names a function */
    size_t cap_is_fn;
    size_t n_samples;
};

pl_pprof_writer *pl_pprof_writer_new(const pl_pprof_writer_options *options)
{
    pl_pprof_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->o = *options;
    pl_buf_init(&w->samples);
    pl_buf_init(&w->msg);
    pl_buf_init(&w->e.msg);
    pl_buf_init(&w->e.sub);
    if (pl_pprof_grow_scratch((void **)&w->e.strings, &w->e.cap_strings, 1, sizeof(pl_bytes))) {
        free(w);
        return NULL;
    }
    w->e.strings[0] = (pl_bytes){(const uint8_t *)"", 0};
    w->e.n_strings = 1;
    return w;
}

int pl_pprof_writer_add(pl_pprof_writer *w, const pl_bytes *frames, size_t n, int64_t value)
{
    pl_buf_reset(&w->msg);
    for (size_t i = 0; i < n; i++) {
        int64_t id = enc_string(&w->e, frames[i]);
        if (id < 0 || pl_pprof_grow_scratch((void **)&w->is_fn, &w->cap_is_fn, (size_t)id + 1, 1))
            return -1;
        if (id == 0)
            continue; /* an empty frame name carries nothing */
        w->is_fn[id] = 1;
        pl_pb_put_varint(&w->msg, (uint64_t)id);
    }
    pl_buf_reset(&w->e.msg);
    if (w->msg.len)
        pl_pb_put_bytes(&w->e.msg, 1, w->msg.data, w->msg.len);
    pl_buf_reset(&w->msg);
    pl_pb_put_varint(&w->msg, (uint64_t)value);
    pl_pb_put_bytes(&w->e.msg, 2, w->msg.data, w->msg.len);
    pl_pb_put_bytes(&w->samples, 2, w->e.msg.data, w->e.msg.len);
    w->n_samples++;
    return pl_buf_ok(&w->samples) && pl_buf_ok(&w->msg) && pl_buf_ok(&w->e.msg) ? 0 : -1;
}

size_t pl_pprof_writer_samples(const pl_pprof_writer *w)
{
    return w->n_samples;
}

int pl_pprof_writer_finish(pl_pprof_writer *w, pl_buf *out)
{
    encoder *e = &w->e;
    size_t n_names = e->n_strings; /* strings added below are not functions */
    int64_t st = enc_string(e, pl_bytes_from_cstr(w->o.sample_type ? w->o.sample_type : ""));
    int64_t su = enc_string(e, pl_bytes_from_cstr(w->o.sample_unit ? w->o.sample_unit : ""));
    int64_t pt = enc_string(e, pl_bytes_from_cstr(w->o.period_type ? w->o.period_type : ""));
    int64_t pu = enc_string(e, pl_bytes_from_cstr(w->o.period_unit ? w->o.period_unit : ""));
    if (st < 0 || su < 0 || pt < 0 || pu < 0)
        return -1;
    enc_value_type(e, out, 1, st, su);
    pl_buf_append(out, w->samples.data, w->samples.len);
    for (size_t id = 1; id < n_names && id < w->cap_is_fn; id++) {
        if (!w->is_fn[id])
            continue;
        pl_buf_reset(&e->msg);
        put_uint(&e->msg, 1, id);
        pl_buf_reset(&e->sub);
        put_uint(&e->sub, 1, id);
        pl_pb_put_bytes(&e->msg, 4, e->sub.data, e->sub.len);
        pl_pb_put_bytes(out, 4, e->msg.data, e->msg.len); /* location id = function id */
        pl_buf_reset(&e->msg);
        put_uint(&e->msg, 1, id);
        put_uint(&e->msg, 2, id);
        pl_pb_put_bytes(out, 5, e->msg.data, e->msg.len);
    }
    for (size_t k = 0; k < e->n_strings; k++)
        pl_pb_put_bytes(out, 6, e->strings[k].ptr, e->strings[k].len);
    put_uint(out, 9, w->o.time_unix_nano);
    put_uint(out, 10, w->o.duration_nano);
    if (w->o.period_type)
        enc_value_type(e, out, 11, pt, pu);
    put_uint(out, 12, (uint64_t)w->o.period);
    return pl_buf_ok(out) && pl_buf_ok(&e->msg) && pl_buf_ok(&e->sub) ? 0 : -1;
}

void pl_pprof_writer_free(pl_pprof_writer *w)
{
    if (!w)
        return;
    pl_htab_free(&w->e.strs);
    free(w->e.strings);
    pl_buf_free(&w->e.msg);
    pl_buf_free(&w->e.sub);
    pl_buf_free(&w->samples);
    pl_buf_free(&w->msg);
    free(w->is_fn);
    free(w);
}
