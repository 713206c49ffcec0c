/*
 * pprof_decode.c: pprof decoder into the profiles model (see pprof.h for the
 * mapping rules; this comment covers how).
 *
 * The protobuf reading is a small hand-written wire reader rather than
 * nanopb-generated structs: pprof is a flat list of repeated top-level
 * messages, and reading it in place gives zero-copy string views and no
 * per-element allocation or callback. The decoder walks the top-level fields
 * a few times, once per table, in dependency order (strings, mappings,
 * functions, locations, sample types, samples), so a pprof whose tables come
 * in any order decodes the same. Each walk only skips the other fields, which
 * costs a varint read per field. What it decodes goes into the batch through
 * the builder (pprof_convert.c).
 */
#include "pprof_internal.h"
#include "profile.pb.h"
#include "proto/otlp_pb.h" /* pl_utf8_valid */

/* ---- wire reader ------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static inline int read_varint(reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return -1;
        uint8_t byte = *r->p++;
        v |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static inline int read_tag(reader *r, uint32_t *field, uint32_t *wire_type)
{
    uint64_t key;
    if (read_varint(r, &key))
        return -1;
    *field = (uint32_t)(key >> 3);
    *wire_type = (uint32_t)(key & 7);
    if (*field == 0 || key >> 32)
        return -1;
    return 0;
}

static inline int read_len(reader *r, reader *sub)
{
    uint64_t len;
    if (read_varint(r, &len) || len > (uint64_t)(r->end - r->p))
        return -1;
    sub->p = r->p;
    sub->end = r->p + len;
    r->p += len;
    return 0;
}

static int skip_field(reader *r, uint32_t wire_type)
{
    uint64_t v;
    reader sub;
    switch (wire_type) {
    case WT_VARINT:
        return read_varint(r, &v);
    case WT_I64:
        if (r->end - r->p < 8)
            return -1;
        r->p += 8;
        return 0;
    case WT_LEN:
        return read_len(r, &sub);
    case WT_I32:
        if (r->end - r->p < 4)
            return -1;
        r->p += 4;
        return 0;
    default:
        return -1; /* groups (3, 4) are not used by pprof */
    }
}

/* A scalar varint field; a wrong wire type is an error. */
static int read_scalar(reader *r, uint32_t wire_type, uint64_t *v)
{
    if (wire_type != WT_VARINT)
        return -1;
    return read_varint(r, v);
}

/* How read_scalars fails. */
enum { SCALARS_OK, SCALARS_TRUNCATED, SCALARS_CORRUPT, SCALARS_BAD_FIELD };

/* Reads a length-delimited message of scalar fields (mapping, function,
 * line, label): fields 1..kept land in f_[field], kept+1..last are read and
 * dropped, others skipped. A field whose value is corrupt is named in *bad. */
static int read_scalars(reader *r, uint64_t *f_, uint32_t kept, uint32_t last, uint32_t *bad)
{
    reader m;
    if (read_len(r, &m))
        return SCALARS_TRUNCATED;
    while (m.p < m.end) {
        uint32_t f, w;
        uint64_t v;
        if (read_tag(&m, &f, &w))
            return SCALARS_CORRUPT;
        if (f >= 1 && f <= last) {
            if (read_scalar(&m, w, &v)) {
                *bad = f;
                return SCALARS_BAD_FIELD;
            }
            if (f <= kept)
                f_[f] = v;
        } else if (skip_field(&m, w))
            return SCALARS_CORRUPT;
    }
    return SCALARS_OK;
}

/* Calls back for each element of a repeated varint field, packed or not. */
typedef int (*varint_fn)(void *ctx, uint64_t v);
static int read_repeated(reader *r, uint32_t wire_type, varint_fn fn, void *ctx)
{
    uint64_t v;
    if (wire_type == WT_VARINT) {
        if (read_varint(r, &v))
            return -1;
        return fn(ctx, v);
    }
    if (wire_type != WT_LEN)
        return -1;
    reader sub;
    if (read_len(r, &sub))
        return -1;
    while (sub.p < sub.end) {
        if (read_varint(&sub, &v))
            return -1;
        int rc = fn(ctx, v);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- id maps (pprof id -> position in its table) ----------------------- */

typedef struct idmap {
    uint32_t *dense; /* dense[id] = position + 1; 0 = absent */
    uint64_t dense_n;
    uint64_t *keys; /* sparse: open addressing, key 0 = empty (ids are non-zero) */
    uint32_t *pos;
    uint32_t cap;
} idmap;

static void idmap_free(idmap *m)
{
    free(m->dense);
    free(m->keys);
    free(m->pos);
    memset(m, 0, sizeof(*m));
}

/* Builds the map from ids[0..n). Returns 0, -1 on OOM, or the 1-based
 * position of the first zero or duplicate id as a positive number. */
static long idmap_build(idmap *m, const uint64_t *ids, uint32_t n)
{
    memset(m, 0, sizeof(*m));
    uint64_t max = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (ids[i] == 0)
            return (long)i + 1;
        if (ids[i] > max)
            max = ids[i];
    }
    if (max <= (uint64_t)n * 4 + 64) {
        m->dense_n = max + 1;
        m->dense = calloc(m->dense_n, sizeof(uint32_t));
        if (!m->dense)
            return -1;
        for (uint32_t i = 0; i < n; i++) {
            if (m->dense[ids[i]])
                return (long)i + 1;
            m->dense[ids[i]] = i + 1;
        }
        return 0;
    }
    uint32_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    m->cap = cap;
    m->keys = calloc(cap, sizeof(uint64_t));
    m->pos = calloc(cap, sizeof(uint32_t));
    if (!m->keys || !m->pos)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = (uint32_t)pl_hash_u64(ids[i]) & (cap - 1);
        while (m->keys[j]) {
            if (m->keys[j] == ids[i])
                return (long)i + 1;
            j = (j + 1) & (cap - 1);
        }
        m->keys[j] = ids[i];
        m->pos[j] = i;
    }
    return 0;
}

/* Position of `id`, or -1 when absent. */
static inline long idmap_get(const idmap *m, uint64_t id)
{
    if (m->dense)
        return id < m->dense_n ? (long)m->dense[id] - 1 : -1;
    if (!m->cap || id == 0)
        return -1;
    uint32_t j = (uint32_t)pl_hash_u64(id) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->keys[j] == id)
            return m->pos[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* ---- decoding one pprof -------------------------------------------------- */

/* pprof top-level field numbers, from profile.proto. */
#define P(field) perftools_profiles_Profile_##field##_tag

typedef struct decode_ctx {
    pl_pprof_builder *b;
    pl_err *err;
    reader all;
    /* string table */
    pl_bytes *strs;
    int32_t *str_map; /* pprof string index -> dict string index, -1 = not yet */
    uint32_t n_strs;
    /* tables */
    uint32_t n_sample_types, n_samples, n_mappings, n_locations, n_functions;
    uint64_t *ids; /* scratch for id lists */
    idmap mappings, functions, locations;
    uint32_t mapping_base, function_base, location_base;
    /* the staged blocks of the dictionary builder being filled (entry k of
     * the pprof's table is dictionary index base + k once committed) */
    pl_mapping *mapping_block;
    pl_function *function_block;
    pl_location *location_block;
    /* sample types */
    pl_vtype *sample_types;
    bool has_period_type;
    pl_vtype period_type;
    int64_t period, time_nanos, duration_nanos;
    int32_t span_id_key, profile_id_key, trace_id_key; /* pprof string indices, -1 none */
    bool repair_dotnet;                                /* pl_pprof_meta.repair_dotnet */
    uint64_t *repair_ids; /* .NET repair: the function ids to use (the location ids) */
    uint8_t *seen_keys;   /* per pprof string: key already seen on this sample */
} decode_ctx;

#define BAD(c, ...) pl_errf((c)->err, PL_ERR_INVALID, __VA_ARGS__)
#define NOMEM(c)    pl_errf((c)->err, PL_ERR_NOMEM, "pprof: out of memory")

/* Dict index of pprof string `i`; -1 out of range, -2 on OOM. */
static int32_t map_string(decode_ctx *c, int64_t i)
{
    if (i < 0 || (uint64_t)i >= c->n_strs)
        return i == 0 ? 0 : -1; /* an empty table still has "" at 0 */
    if (c->str_map[i] >= 0)
        return c->str_map[i];
    int32_t d = pl_dict_intern_string(BARENA(c->b), bdict(c->b), c->strs[i]);
    if (d < 0)
        return -2;
    c->str_map[i] = d;
    return d;
}

/* Maps a string index field, failing with a message naming `what`. */
#define MAP_STRING(c, out, idx, ...)                                                               \
    do {                                                                                           \
        int32_t ms_ = map_string((c), (int64_t)(idx));                                             \
        if (ms_ == -2)                                                                             \
            return NOMEM(c);                                                                       \
        if (ms_ < 0) {                                                                             \
            char what_[128];                                                                       \
            snprintf(what_, sizeof(what_), __VA_ARGS__);                                           \
            return BAD(c, "pprof: %s: string index %" PRId64 " out of range (%u strings)", what_,  \
                       (int64_t)(idx), c->n_strs);                                                 \
        }                                                                                          \
        (out) = ms_;                                                                               \
    } while (0)

/* Walks the top-level fields, handing each one numbered `want` to fn. */
typedef pl_status (*field_fn)(decode_ctx *c, reader *r, uint32_t wire_type, uint32_t i);
static pl_status walk(decode_ctx *c, uint32_t want, field_fn fn)
{
    reader r = c->all;
    uint32_t i = 0;
    while (r.p < r.end) {
        uint32_t field, wt;
        if (read_tag(&r, &field, &wt))
            return BAD(c, "pprof: truncated or corrupt protobuf at byte %zu",
                       (size_t)(r.p - c->all.p));
        if (field != want) {
            if (skip_field(&r, wt))
                return BAD(c, "pprof: truncated or corrupt field %u", field);
            continue;
        }
        pl_status st = fn(c, &r, wt, i++);
        if (st != PL_OK)
            return st;
    }
    return PL_OK;
}

static pl_status count_fields(decode_ctx *c)
{
    reader r = c->all;
    while (r.p < r.end) {
        uint32_t field, wt;
        if (read_tag(&r, &field, &wt))
            return BAD(c, "pprof: truncated or corrupt protobuf at byte %zu",
                       (size_t)(r.p - c->all.p));
        uint64_t v;
        switch (field) {
        case P(time_nanos):
        case P(duration_nanos):
        case P(period):
        case P(drop_frames):
        case P(keep_frames):
        case P(default_sample_type):
            if (read_scalar(&r, wt, &v))
                return BAD(c, "pprof: field %u: wrong wire type or truncated", field);
            if (field == P(time_nanos))
                c->time_nanos = (int64_t)v;
            else if (field == P(duration_nanos))
                c->duration_nanos = (int64_t)v;
            else if (field == P(period))
                c->period = (int64_t)v;
            continue;
        case P(sample_type):
        case P(sample):
        case P(mapping):
        case P(location):
        case P(function):
        case P(string_table):
        case P(period_type):
            if (wt != WT_LEN)
                return BAD(c, "pprof: field %u: wrong wire type %u", field, wt);
            break;
        default:
            break;
        }
        if (skip_field(&r, wt))
            return BAD(c, "pprof: truncated or corrupt field %u", field);
        switch (field) {
        case P(sample_type):
            c->n_sample_types++;
            break;
        case P(sample):
            c->n_samples++;
            break;
        case P(mapping):
            c->n_mappings++;
            break;
        case P(location):
            c->n_locations++;
            break;
        case P(function):
            c->n_functions++;
            break;
        case P(string_table):
            c->n_strs++;
            break;
        default:
            break;
        }
        if (c->n_samples == UINT32_MAX || c->n_strs == UINT32_MAX)
            return BAD(c, "pprof: too many elements");
    }
    return PL_OK;
}

static pl_status on_string(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    reader s;
    if (read_len(r, &s))
        return BAD(c, "pprof: string %u truncated", i);
    c->strs[i] = (pl_bytes){s.p, (uint32_t)(s.end - s.p)};
    c->str_map[i] = -1;
    /* Pyroscope refuses these (a Go protobuf string must be UTF-8); passed
     * on, the backend would refuse what the client was told succeeded. */
    size_t len = (size_t)(s.end - s.p);
    if (memchr(s.p, 0, len) || !pl_utf8_valid(s.p, len)) {
        c->b->bad_strings = true;
        return BAD(c, "pprof: string_table[%u] %s", i,
                   memchr(s.p, 0, len) ? "holds a NUL byte" : "is not valid UTF-8");
    }
    return PL_OK;
}

/* ValueType {type=1, unit=2} */
static pl_status read_value_type(decode_ctx *c, reader *r, pl_vtype *out, const char *what,
                                 uint32_t i)
{
    reader m;
    if (read_len(r, &m))
        return BAD(c, "pprof: %s %u truncated", what, i);
    int64_t type = 0, unit = 0;
    while (m.p < m.end) {
        uint32_t f, wt;
        uint64_t v;
        if (read_tag(&m, &f, &wt))
            return BAD(c, "pprof: %s %u corrupt", what, i);
        if (f == 1 || f == 2) {
            if (read_scalar(&m, wt, &v))
                return BAD(c, "pprof: %s %u corrupt", what, i);
            if (f == 1)
                type = (int64_t)v;
            else
                unit = (int64_t)v;
        } else if (skip_field(&m, wt))
            return BAD(c, "pprof: %s %u corrupt", what, i);
    }
    MAP_STRING(c, out->type_strindex, type, "%s %u type", what, i);
    MAP_STRING(c, out->unit_strindex, unit, "%s %u unit", what, i);
    return PL_OK;
}

static pl_status on_sample_type(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    pl_status st = read_value_type(c, r, &c->sample_types[i], "sample_type", i);
    if (st != PL_OK || !c->repair_dotnet)
        return st;
    /* .NET repair: `inuse-space` -> `inuse_space` (a copy; the pprof string
     * may be used elsewhere as it is) */
    pl_bytes t = bdict(c->b)->strings[c->sample_types[i].type_strindex];
    if (!t.len || !memchr(t.ptr, '-', t.len))
        return PL_OK;
    uint8_t *fixed = pl_arena_alloc(&c->b->batch->arena, t.len);
    if (!fixed)
        return NOMEM(c);
    for (uint32_t k = 0; k < t.len; k++)
        fixed[k] = t.ptr[k] == '-' ? '_' : t.ptr[k];
    int32_t d = pl_dict_intern_string(BARENA(c->b), bdict(c->b), (pl_bytes){fixed, t.len});
    if (d < 0)
        return NOMEM(c);
    c->sample_types[i].type_strindex = d;
    return PL_OK;
}

static pl_status on_period_type(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    c->has_period_type = true;
    return read_value_type(c, r, &c->period_type, "period_type", i);
}

/* The error for a mapping or function that read_scalars refused. */
static pl_status scalars_fail(decode_ctx *c, int rs, const char *what, uint32_t i, uint32_t bad)
{
    if (rs == SCALARS_TRUNCATED)
        return BAD(c, "pprof: %s %u truncated", what, i);
    if (rs == SCALARS_BAD_FIELD)
        return BAD(c, "pprof: %s %u field %u corrupt", what, i, bad);
    return BAD(c, "pprof: %s %u corrupt", what, i);
}

/* The error for a location's line or a sample's label that read_scalars
 * refused (which field is not said). */
static pl_status part_fail(decode_ctx *c, int rs, const char *owner, uint32_t i, const char *part)
{
    if (rs == SCALARS_TRUNCATED)
        return BAD(c, "pprof: %s %u: %s truncated", owner, i, part);
    return BAD(c, "pprof: %s %u: %s corrupt", owner, i, part);
}

/* Mapping {id=1, memory_start=2, memory_limit=3, file_offset=4, filename=5,
 * build_id=6, has_*=7..10} */
static pl_status on_mapping(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    uint64_t f_[7] = {0};
    uint32_t bad;
    int rs = read_scalars(r, f_, 6, 10, &bad);
    if (rs)
        return scalars_fail(c, rs, "mapping", i, bad);
    pl_pprof_builder *b = c->b;
    pl_mapping *mp = &c->mapping_block[i];
    memset(mp, 0, sizeof(*mp));
    c->ids[i] = f_[1];
    mp->memory_start = f_[2];
    mp->memory_limit = f_[3];
    mp->file_offset = f_[4];
    MAP_STRING(c, mp->filename_strindex, f_[5], "mapping %u filename", i);
    int32_t build_id;
    MAP_STRING(c, build_id, f_[6], "mapping %u build_id", i);
    if (build_id) {
        int32_t key = pl_dict_intern_string(BARENA(b), bdict(b),
                                            PL_BYTES_LIT("process.executable.build_id.gnu"));
        int32_t attr =
            key < 0 ? -1
                    : pl_dict_intern_attribute(BARENA(b), bdict(b), key,
                                               pl_value_string(bdict(b)->strings[build_id]), 0);
        int32_t *list = pl_arena_alloc(&b->batch->arena, sizeof(int32_t));
        if (attr < 0 || !list)
            return NOMEM(c);
        list[0] = attr;
        mp->attribute_indices = list;
        mp->n_attribute_indices = 1;
    }
    return PL_OK;
}

/* Function {id=1, name=2, system_name=3, filename=4, start_line=5} */
static pl_status on_function(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    uint64_t f_[6] = {0};
    uint32_t bad;
    int rs = read_scalars(r, f_, 5, 5, &bad);
    if (rs)
        return scalars_fail(c, rs, "function", i, bad);
    pl_function *fn = &c->function_block[i];
    c->ids[i] = c->repair_ids ? c->repair_ids[i] : f_[1];
    MAP_STRING(c, fn->name_strindex, f_[2], "function %u name", i);
    MAP_STRING(c, fn->system_name_strindex, f_[3], "function %u system_name", i);
    MAP_STRING(c, fn->filename_strindex, f_[4], "function %u filename", i);
    fn->start_line = (int64_t)f_[5];
    return PL_OK;
}

/* Line {function_id=1, line=2, column=3} */
static pl_status read_line(decode_ctx *c, reader *r, pl_line *out, uint32_t loc)
{
    uint64_t f_[4] = {0};
    uint32_t bad;
    int rs = read_scalars(r, f_, 3, 3, &bad);
    if (rs)
        return part_fail(c, rs, "location", loc, "line");
    long pos = idmap_get(&c->functions, f_[1]);
    if (pos < 0)
        return BAD(c, "pprof: location %u: function id %" PRIu64 " not found", loc, f_[1]);
    out->function_index = (int32_t)(c->function_base + (uint32_t)pos);
    out->line = (int64_t)f_[2];
    out->column = (int64_t)f_[3];
    return PL_OK;
}

/* Location {id=1, mapping_id=2, address=3, line=4 (repeated), is_folded=5} */
static pl_status on_location(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    reader m;
    if (read_len(r, &m))
        return BAD(c, "pprof: location %u truncated", i);
    /* First pass: scalars and the number of lines. */
    reader scan = m;
    uint64_t id = 0, mapping_id = 0, address = 0;
    uint32_t n_lines = 0;
    while (scan.p < scan.end) {
        uint32_t f, w;
        uint64_t v;
        if (read_tag(&scan, &f, &w))
            return BAD(c, "pprof: location %u corrupt", i);
        if (f == 4) {
            if (w != WT_LEN || skip_field(&scan, w))
                return BAD(c, "pprof: location %u: line corrupt", i);
            n_lines++;
        } else if (f >= 1 && f <= 5) {
            if (read_scalar(&scan, w, &v))
                return BAD(c, "pprof: location %u field %u corrupt", i, f);
            if (f == 1)
                id = v;
            else if (f == 2)
                mapping_id = v;
            else if (f == 3)
                address = v;
        } else if (skip_field(&scan, w))
            return BAD(c, "pprof: location %u corrupt", i);
    }
    pl_location *loc = &c->location_block[i];
    memset(loc, 0, sizeof(*loc));
    c->ids[i] = id;
    loc->address = address;
    if (mapping_id) {
        long pos = idmap_get(&c->mappings, mapping_id);
        if (pos < 0)
            return BAD(c, "pprof: location %u: mapping id %" PRIu64 " not found", i, mapping_id);
        loc->mapping_index = (int32_t)(c->mapping_base + (uint32_t)pos);
    }
    if (n_lines) {
        loc->lines = pl_arena_calloc(&c->b->batch->arena, n_lines, sizeof(pl_line));
        if (!loc->lines)
            return NOMEM(c);
        uint32_t k = 0;
        while (m.p < m.end) {
            uint32_t f = 0, w = 0;
            read_tag(&m, &f, &w); /* checked by the first pass */
            if (f == 4) {
                pl_status st = read_line(c, &m, &loc->lines[k++], i);
                if (st != PL_OK)
                    return st;
            } else
                skip_field(&m, w);
        }
        loc->n_lines = n_lines;
    }
    return PL_OK;
}

static bool valid_hex_id(pl_bytes s, size_t bytes, uint8_t *out)
{
    if (pl_hex_decode((const char *)s.ptr, s.len, out, bytes))
        return false;
    for (size_t i = 0; i < bytes; i++)
        if (out[i])
            return true;
    return false; /* all zero: invalid */
}

typedef struct sample_state {
    decode_ctx *c;
    uint32_t n_locs, n_vals;
    uint32_t sample;
    pl_status st;
} sample_state;

static int on_location_id(void *ctx, uint64_t id)
{
    sample_state *s = ctx;
    decode_ctx *c = s->c;
    pl_pprof_builder *b = c->b;
    long pos = idmap_get(&c->locations, id);
    if (pos < 0) {
        s->st = BAD(c, "pprof: sample %u: location id %" PRIu64 " not found", s->sample, id);
        return 1;
    }
    if (pl_pprof_grow_scratch((void **)&b->scratch_locs, &b->cap_locs, s->n_locs + 1,
                              sizeof(int32_t))) {
        s->st = NOMEM(c);
        return 1;
    }
    b->scratch_locs[s->n_locs++] = (int32_t)(c->location_base + (uint32_t)pos);
    return 0;
}

static int on_value(void *ctx, uint64_t v)
{
    sample_state *s = ctx;
    pl_pprof_builder *b = s->c->b;
    if (pl_pprof_grow_scratch((void **)&b->scratch_vals, &b->cap_vals, s->n_vals + 1,
                              sizeof(int64_t))) {
        s->st = NOMEM(s->c);
        return 1;
    }
    b->scratch_vals[s->n_vals++] = (int64_t)v;
    return 0;
}

/* Label {key=1, str=2, num=3, num_unit=4} */
static pl_status read_label(decode_ctx *c, reader *r, raw_label *out, uint32_t sample)
{
    uint64_t f_[5] = {0};
    uint32_t bad;
    int rs = read_scalars(r, f_, 4, 4, &bad);
    if (rs)
        return part_fail(c, rs, "sample", sample, "label");
    *out = (raw_label){(int64_t)f_[1], (int64_t)f_[2], (int64_t)f_[3], (int64_t)f_[4]};
    if (out->key <= 0 || (uint64_t)out->key >= c->n_strs)
        return BAD(c, "pprof: sample %u: label key string index %" PRId64 " out of range", sample,
                   out->key);
    if (out->str < 0 || (uint64_t)out->str >= (c->n_strs ? c->n_strs : 1))
        return BAD(c, "pprof: sample %u: label value string index %" PRId64 " out of range", sample,
                   out->str);
    if (out->num_unit < 0 || (uint64_t)out->num_unit >= (c->n_strs ? c->n_strs : 1))
        return BAD(c, "pprof: sample %u: label unit string index %" PRId64 " out of range", sample,
                   out->num_unit);
    return PL_OK;
}

typedef struct profile_out {
    pl_sample *samples;
    int64_t *values;
} profile_out;

/* Sample {location_id=1 (repeated), value=2 (repeated), label=3 (repeated)} */
static pl_status on_sample(decode_ctx *c, reader *r, uint32_t wt, uint32_t i, profile_out *outs)
{
    pl_pprof_builder *b = c->b;
    reader m;
    if (read_len(r, &m))
        return BAD(c, "pprof: sample %u truncated", i);
    sample_state s = {c, 0, 0, i, PL_OK};
    uint32_t n_labels = 0;
    while (m.p < m.end) {
        uint32_t f, w;
        if (read_tag(&m, &f, &w))
            return BAD(c, "pprof: sample %u corrupt", i);
        if (f == 1 || f == 2) {
            int rc = read_repeated(&m, w, f == 1 ? on_location_id : on_value, &s);
            if (rc)
                return s.st != PL_OK ? s.st : BAD(c, "pprof: sample %u corrupt", i);
        } else if (f == 3) {
            if (w != WT_LEN)
                return BAD(c, "pprof: sample %u: label corrupt", i);
            if (pl_pprof_grow_scratch((void **)&b->scratch_labels, &b->cap_labels, n_labels + 1,
                                      sizeof(raw_label)))
                return NOMEM(c);
            pl_status st = read_label(c, &m, &b->scratch_labels[n_labels], i);
            if (st != PL_OK)
                return st;
            n_labels++;
        } else if (skip_field(&m, w))
            return BAD(c, "pprof: sample %u corrupt", i);
    }
    if (s.n_vals != c->n_sample_types)
        return BAD(c, "pprof: sample %u has %u values for %u sample types", i, s.n_vals,
                   c->n_sample_types);

    int32_t stack = pl_dict_intern_stack(BARENA(b), bdict(b), b->scratch_locs, s.n_locs);
    if (stack < 0)
        return NOMEM(c);

    /* Labels: the link labels first, then attributes (first of a key wins). */
    pl_link link;
    memset(&link, 0, sizeof(link));
    bool has_span = false, has_trace = false;
    uint32_t n_attrs = 0;
    if (pl_pprof_grow_scratch((void **)&b->scratch_attrs, &b->cap_attrs, n_labels, sizeof(int32_t)))
        return NOMEM(c);
    for (uint32_t k = 0; k < n_labels; k++) {
        raw_label *l = &b->scratch_labels[k];
        /* A repeated key: the first label wins (O(1) per label, so a
         * sample with thousands of labels costs linear time). */
        bool dup = c->seen_keys[l->key];
        c->seen_keys[l->key] = 1;
        bool is_string = l->num == 0 && l->num_unit == 0;
        if (is_string && (l->key == c->span_id_key || l->key == c->profile_id_key)) {
            /* span_id wins over profile_id when both are present. */
            if (!has_span || l->key == c->span_id_key) {
                uint8_t id[8];
                if (valid_hex_id(c->strs[l->str], 8, id)) {
                    if (has_span && l->key != c->span_id_key)
                        continue;
                    memcpy(link.span_id, id, 8);
                    link.span_id_len = 8;
                    has_span = true;
                    continue;
                }
            } else
                continue; /* a second span id label */
        }
        if (is_string && l->key == c->trace_id_key && !has_trace) {
            uint8_t id[16];
            if (valid_hex_id(c->strs[l->str], 16, id)) {
                memcpy(link.trace_id, id, 16);
                link.trace_id_len = 16;
                has_trace = true;
                continue;
            }
        }
        if (dup)
            continue;
        int32_t key, unit = 0;
        MAP_STRING(c, key, l->key, "sample %u label key", i);
        pl_value value;
        if (is_string) {
            int32_t v;
            MAP_STRING(c, v, l->str, "sample %u label value", i);
            value = pl_value_string(bdict(b)->strings[v]);
        } else {
            MAP_STRING(c, unit, l->num_unit, "sample %u label unit", i);
            value = pl_value_int(l->num);
        }
        int32_t attr = pl_dict_intern_attribute(BARENA(b), bdict(b), key, value, unit);
        if (attr < 0)
            return NOMEM(c);
        b->scratch_attrs[n_attrs++] = attr;
    }
    for (uint32_t k = 0; k < n_labels; k++)
        c->seen_keys[b->scratch_labels[k].key] = 0;
    int32_t link_index = 0;
    if (has_span) {
        link_index = pl_dict_intern_link(BARENA(b), bdict(b), &link);
        if (link_index < 0)
            return NOMEM(c);
    } else if (has_trace) {
        /* A trace id without a span id links nothing: keep it as a label. */
        int32_t key, v;
        MAP_STRING(c, key, c->trace_id_key, "sample %u", i);
        char hex[33];
        pl_hex_encode(link.trace_id, 16, hex);
        v = pl_dict_intern_string(BARENA(b), bdict(b), pl_batch_bytes(b->batch, hex, 32));
        int32_t attr = v < 0 ? -1
                             : pl_dict_intern_attribute(BARENA(b), bdict(b), key,
                                                        pl_value_string(bdict(b)->strings[v]), 0);
        if (attr < 0)
            return NOMEM(c);
        b->scratch_attrs[n_attrs++] = attr;
    }
    int32_t *attrs = NULL;
    if (n_attrs) {
        attrs = pl_arena_alloc(&b->batch->arena, n_attrs * sizeof(int32_t));
        if (!attrs)
            return NOMEM(c);
        memcpy(attrs, b->scratch_attrs, n_attrs * sizeof(int32_t));
    }
    /* One sample per column; they share the attribute list (read-only). */
    for (uint32_t t = 0; t < c->n_sample_types; t++) {
        pl_sample *out = &outs[t].samples[i];
        outs[t].values[i] = b->scratch_vals[t];
        out->stack_index = stack;
        out->link_index = link_index;
        out->attribute_indices = attrs;
        out->n_attribute_indices = n_attrs;
        out->values = &outs[t].values[i];
        out->n_values = 1;
    }
    return PL_OK;
}

static pl_status walk_samples(decode_ctx *c, profile_out *outs)
{
    reader r = c->all;
    uint32_t i = 0;
    while (r.p < r.end) {
        uint32_t field, wt;
        if (read_tag(&r, &field, &wt))
            return BAD(c, "pprof: corrupt protobuf");
        if (field != P(sample)) {
            if (skip_field(&r, wt))
                return BAD(c, "pprof: corrupt protobuf");
            continue;
        }
        pl_status st = on_sample(c, &r, wt, i++, outs);
        if (st != PL_OK)
            return st;
    }
    return PL_OK;
}

/* Finds a pprof string index by content (for the link label keys). */
static int32_t find_pprof_string(const decode_ctx *c, const char *s)
{
    size_t len = strlen(s);
    for (uint32_t i = 1; i < c->n_strs; i++)
        if (c->strs[i].len == len && memcmp(c->strs[i].ptr, s, len) == 0)
            return (int32_t)i;
    return -1;
}

static pl_status check_u32(decode_ctx *c, uint32_t n, uint32_t base, const char *what)
{
    if ((uint64_t)n + base > INT32_MAX)
        return BAD(c, "pprof: too many %s", what);
    return PL_OK;
}

/* ---- the per-request budget on decoded data ----------------------------- */

/* Memory the batch holds for this request: the adopted (decompressed) pprofs
 * and everything decoded into its arena. */
static size_t builder_used(const pl_pprof_builder *b)
{
    return b->batch->buffer_bytes + pl_arena_bytes(&b->batch->arena);
}

static pl_status over_budget(const pl_pprof_builder *b, pl_err *err, const char *what)
{
    return pl_errf(err, PL_ERR_TOO_LARGE,
                   "pprof: %s: the request's decoded data would exceed its %zu byte budget "
                   "(max_decoded_memory)",
                   what, b->budget_bytes);
}

/* Checks, before anything is allocated, what decoding the counted pprof will
 * cost: its objects, the dictionary and sample arrays it appends, and the
 * scratch tables the decoder holds meanwhile. The counts come from one cheap
 * walk, so a small pprof that would expand (a million empty samples times a
 * hundred sample types) is refused here rather than after the memory is
 * spent. What the estimate leaves out (lines, label attributes, stack
 * copies) is bounded by the arena limit set in pl_pprof_builder_add. */
static pl_status check_budget(decode_ctx *c)
{
    pl_pprof_builder *b = c->b;
    uint64_t types = c->n_sample_types ? c->n_sample_types : 1;
    uint64_t cells = (uint64_t)c->n_samples * types;
    uint64_t objects =
        (uint64_t)c->n_strs + c->n_mappings + c->n_functions + c->n_locations + cells;
    if (b->budget_objects && b->objects + objects > b->budget_objects)
        return pl_errf(c->err, PL_ERR_TOO_LARGE,
                       "pprof: %" PRIu64 " objects (strings, mappings, functions, locations, "
                       "samples times %" PRIu64 " sample types) would exceed the request's budget "
                       "of %zu (max_decoded_objects)",
                       objects, types, b->budget_objects);
    b->objects += (size_t)objects;
    if (!b->budget_bytes)
        return PL_OK;
    uint64_t max_table = c->n_mappings;
    if (c->n_functions > max_table)
        max_table = c->n_functions;
    if (c->n_locations > max_table)
        max_table = c->n_locations;
    uint64_t scratch = (uint64_t)c->n_strs * (sizeof(pl_bytes) + sizeof(int32_t) + 1) +
                       (max_table + 1) * sizeof(uint64_t) + max_table * 4 * sizeof(uint32_t);
    uint64_t kept = (uint64_t)c->n_strs * sizeof(pl_bytes) +
                    (uint64_t)c->n_mappings * sizeof(pl_mapping) +
                    (uint64_t)c->n_functions * sizeof(pl_function) +
                    (uint64_t)c->n_locations * sizeof(pl_location) +
                    cells * (sizeof(pl_sample) + sizeof(int64_t));
    size_t used = builder_used(b);
    if (used > b->budget_bytes || scratch + kept > b->budget_bytes - used)
        return over_budget(b, c->err, "its tables");
    return PL_OK;
}

/* Mappings, functions and locations load alike: checked against the index
 * range, staged at the end of their dictionary table in pprof order
 * (position k is index *base + k), then their pprof ids (nonzero, unique)
 * mapped to positions, and the block committed. */
static pl_status load_id_table(decode_ctx *c, pl_dict_table t, void **block, uint32_t *base,
                               uint32_t n, uint32_t want, field_fn fn, idmap *map, const char *one,
                               const char *many)
{
    pl_dictionary *d = bdict(c->b);
    *base = pl_dict_count(d, t);
    pl_status st = check_u32(c, n, *base, many);
    if (st != PL_OK)
        return st;
    *block = pl_dict_append_begin(&c->b->batch->arena, d, t, n);
    if (!*block)
        return NOMEM(c);
    *base = pl_dict_count(d, t); /* past the zero entry it may have added */
    if ((st = walk(c, want, fn)) != PL_OK)
        return st;
    long dup = idmap_build(map, c->ids, n);
    if (dup < 0)
        return NOMEM(c);
    if (dup > 0)
        return BAD(c, "pprof: %s %ld: id %" PRIu64 " is zero or repeated", one, dup - 1,
                   c->ids[dup - 1]);
    pl_dict_append_commit(d, t, n);
    return PL_OK;
}

#define LOAD_ID_TABLE(c, one, many, table, want, fn)                                               \
    load_id_table((c), (table), (void **)&(c)->one##_block, &(c)->one##_base, (c)->n_##many,       \
                  (want), (fn), &(c)->many, #one, #many)

/* The id (field 1) of every message numbered `want`, in order, into ids;
 * *all_zero says whether each was 0. */
static pl_status collect_ids(decode_ctx *c, uint32_t want, uint64_t *ids, bool *all_zero)
{
    reader r = c->all;
    uint32_t i = 0;
    *all_zero = true;
    while (r.p < r.end) {
        uint32_t field, wt;
        reader m;
        if (read_tag(&r, &field, &wt))
            return BAD(c, "pprof: corrupt protobuf");
        if (field != want) {
            if (skip_field(&r, wt))
                return BAD(c, "pprof: corrupt protobuf");
            continue;
        }
        if (wt != WT_LEN || read_len(&r, &m))
            return BAD(c, "pprof: field %u corrupt", want);
        uint64_t id = 0;
        while (m.p < m.end) {
            uint32_t f, w;
            uint64_t v;
            if (read_tag(&m, &f, &w))
                return BAD(c, "pprof: field %u corrupt", want);
            if (f == 1 && w == WT_VARINT) {
                if (read_varint(&m, &v))
                    return BAD(c, "pprof: field %u corrupt", want);
                id = v;
            } else if (skip_field(&m, w))
                return BAD(c, "pprof: field %u corrupt", want);
        }
        ids[i++] = id;
        if (id)
            *all_zero = false;
    }
    return PL_OK;
}

/* Pyroscope's repair of old .NET profiler uploads (FixFunctionIDForBrokenDotnet):
 * when every function id is 0 and there are as many functions as locations,
 * function i takes location i's id (what their lines refer to). */
static pl_status plan_dotnet_repair(decode_ctx *c)
{
    if (!c->n_functions || c->n_functions != c->n_locations)
        return PL_OK;
    uint64_t *fids = malloc(c->n_functions * sizeof(uint64_t));
    uint64_t *lids = malloc(c->n_locations * sizeof(uint64_t));
    bool fzero = false, lzero = false;
    pl_status st = fids && lids ? PL_OK : NOMEM(c);
    if (st == PL_OK)
        st = collect_ids(c, P(function), fids, &fzero);
    if (st == PL_OK && fzero)
        st = collect_ids(c, P(location), lids, &lzero);
    free(fids);
    if (st == PL_OK && fzero) {
        c->repair_ids = lids;
        return PL_OK;
    }
    free(lids);
    return st;
}

static pl_status decode_into(decode_ctx *c, const pl_pprof_meta *meta)
{
    pl_pprof_builder *b = c->b;
    pl_batch *batch = b->batch;
    pl_status st = count_fields(c);
    if (st != PL_OK)
        return st;
    if ((st = check_budget(c)) != PL_OK)
        return st;
    /* The dictionary's strings and stacks, with their indexes, sized once
     * for what this pprof can add (each grown by doubling otherwise). */
    if (pl_dict_reserve(&batch->arena, bdict(b), PL_DICT_STRINGS, c->n_strs) ||
        pl_dict_reserve(&batch->arena, bdict(b), PL_DICT_STACKS, c->n_samples))
        return NOMEM(c);

    /* Strings. */
    if (c->n_strs) {
        c->strs = malloc(c->n_strs * sizeof(pl_bytes));
        c->str_map = malloc(c->n_strs * sizeof(int32_t));
        c->seen_keys = calloc(c->n_strs, 1);
        if (!c->strs || !c->str_map || !c->seen_keys)
            return NOMEM(c);
        if ((st = walk(c, P(string_table), on_string)) != PL_OK)
            return st;
        if (c->strs[0].len != 0)
            return BAD(c, "pprof: string_table[0] must be empty");
        c->str_map[0] = 0;
    }
    if (c->repair_dotnet && (st = plan_dotnet_repair(c)) != PL_OK)
        return st;
    c->span_id_key = find_pprof_string(c, "span_id");
    c->profile_id_key = find_pprof_string(c, "profile_id");
    c->trace_id_key = find_pprof_string(c, "trace_id");

    uint32_t max_table = c->n_mappings;
    if (c->n_functions > max_table)
        max_table = c->n_functions;
    if (c->n_locations > max_table)
        max_table = c->n_locations;
    c->ids = malloc((max_table + 1) * sizeof(uint64_t));
    if (!c->ids)
        return NOMEM(c);

    /* Mappings, functions, locations: appended to the dictionary in pprof
     * order, so position k of a table is dictionary index base + k. */
    if ((st = LOAD_ID_TABLE(c, mapping, mappings, PL_DICT_MAPPINGS, P(mapping), on_mapping)) !=
            PL_OK ||
        (st = LOAD_ID_TABLE(c, function, functions, PL_DICT_FUNCTIONS, P(function), on_function)) !=
            PL_OK ||
        (st = LOAD_ID_TABLE(c, location, locations, PL_DICT_LOCATIONS, P(location), on_location)) !=
            PL_OK)
        return st;

    /* Sample types and period type. */
    if (c->n_sample_types) {
        c->sample_types = pl_arena_calloc(&batch->arena, c->n_sample_types, sizeof(pl_vtype));
        if (!c->sample_types)
            return NOMEM(c);
        if ((st = walk(c, P(sample_type), on_sample_type)) != PL_OK)
            return st;
    }
    if ((st = walk(c, P(period_type), on_period_type)) != PL_OK)
        return st;

    if (c->n_sample_types == 0) {
        if (c->n_samples)
            return BAD(c, "pprof: %u samples but no sample_type", c->n_samples);
        return PL_OK; /* an empty profile: nothing to add */
    }

    /* Samples: one OTLP profile per column. */
    profile_out *outs = pl_arena_calloc(&batch->arena, c->n_sample_types, sizeof(profile_out));
    if (!outs)
        return NOMEM(c);
    for (uint32_t t = 0; t < c->n_sample_types; t++) {
        if (c->n_samples) {
            outs[t].samples = pl_arena_calloc(&batch->arena, c->n_samples, sizeof(pl_sample));
            outs[t].values = pl_arena_calloc(&batch->arena, c->n_samples, sizeof(int64_t));
            if (!outs[t].samples || !outs[t].values)
                return NOMEM(c);
        }
    }
    if ((st = walk_samples(c, outs)) != PL_OK)
        return st;

    /* Assemble: one resource, one scope, n_sample_types profiles. */
    pl_scope_profiles *scope = pl_arena_calloc(&batch->arena, 1, sizeof(*scope));
    pl_profile *profiles = pl_arena_calloc(&batch->arena, c->n_sample_types, sizeof(pl_profile));
    if (!scope || !profiles)
        return NOMEM(c);
    uint64_t time_ns = c->time_nanos > 0 ? (uint64_t)c->time_nanos : meta->default_time_unix_nano;
    uint64_t dur_ns =
        c->duration_nanos > 0 ? (uint64_t)c->duration_nanos : meta->default_duration_nano;
    for (uint32_t t = 0; t < c->n_sample_types; t++) {
        pl_profile *p = &profiles[t];
        p->has_sample_type = true;
        p->sample_type = c->sample_types[t];
        p->samples = outs[t].samples;
        p->n_samples = c->n_samples;
        p->time_unix_nano = time_ns;
        p->duration_nano = dur_ns;
        p->has_period_type = c->has_period_type;
        p->period_type = c->period_type;
        p->period = c->period;
        /* original_payload stays empty: it would double the batch size. */
    }
    scope->profiles = profiles;
    scope->n_profiles = c->n_sample_types;
    if (meta->profile_name.len &&
        pl_pprof_name_profiles(b, profiles, c->n_sample_types, meta->profile_name))
        return NOMEM(c);
    if (meta->scope_name.len || meta->scope_version.len) {
        scope->has_scope = true;
        scope->scope.name = pl_batch_bytes(batch, meta->scope_name.ptr, meta->scope_name.len);
        scope->scope.version =
            pl_batch_bytes(batch, meta->scope_version.ptr, meta->scope_version.len);
    }

    pl_resource_profiles rp;
    memset(&rp, 0, sizeof(rp));
    rp.scopes = scope;
    rp.n_scopes = 1;
    if (meta->n_resource_attrs) {
        rp.has_resource = true;
        pl_kv *items = pl_arena_calloc(&batch->arena, meta->n_resource_attrs, sizeof(pl_kv));
        if (!items)
            return NOMEM(c);
        for (uint32_t k = 0; k < meta->n_resource_attrs; k++) {
            const pl_kv *src = &meta->resource_attrs[k];
            items[k].key = pl_batch_bytes(batch, src->key.ptr, src->key.len);
            items[k].value = src->value;
            if (src->value.type == PL_VALUE_STRING)
                items[k].value.u.str =
                    pl_batch_bytes(batch, src->value.u.str.ptr, src->value.u.str.len);
        }
        rp.resource.attrs = (pl_attrs){items, meta->n_resource_attrs, meta->n_resource_attrs};
    }
    pl_profiles *ps = &batch->data.profiles;
    pl_resource_profiles *grown = pl_arena_grow(&batch->arena, ps->resources, ps->n_resources,
                                                ps->n_resources + 1, sizeof(pl_resource_profiles));
    if (!grown)
        return NOMEM(c);
    grown[ps->n_resources] = rp;
    ps->resources = grown;
    ps->n_resources++;
    b->samples += c->n_samples;
    b->last_profiles = profiles;
    b->n_last = c->n_sample_types;
    return PL_OK;
}

void pl_pprof_builder_set_budget(pl_pprof_builder *b, size_t max_bytes, size_t max_objects)
{
    b->budget_bytes = max_bytes;
    b->budget_objects = max_objects;
}

pl_status pl_pprof_builder_add(pl_pprof_builder *b, const uint8_t *data, size_t len,
                               const pl_pprof_meta *meta, pl_err *err)
{
    static const pl_pprof_meta no_meta;
    if (!meta)
        meta = &no_meta;
    size_t limit = meta->max_decoded_size ? meta->max_decoded_size : PL_PPROF_MAX_DECODED;
    /* With a budget, this pprof may inflate to what the request has left. */
    size_t left = SIZE_MAX;
    if (b->budget_bytes) {
        size_t used = builder_used(b);
        if (used >= b->budget_bytes)
            return over_budget(b, err, "before this profile");
        left = b->budget_bytes - used;
    }
    bool budget_bound = left < limit;
    if (budget_bound)
        limit = left;
    uint8_t *bytes;
    size_t n;
    if (pl_is_gzip(data, len)) {
        pl_status st = pl_gunzip(data, len, limit, &bytes, &n, err);
        if (st == PL_ERR_TOO_LARGE && budget_bound)
            return over_budget(b, err, "decompressing");
        if (st != PL_OK)
            return st;
    } else {
        if (len > limit)
            return budget_bound ? over_budget(b, err, "copying")
                                : pl_errf(err, PL_ERR_TOO_LARGE,
                                          "pprof: %zu bytes, over the %zu byte limit", len, limit);
        bytes = malloc(len ? len : 1);
        if (!bytes)
            return pl_errf(err, PL_ERR_NOMEM, "pprof: out of memory");
        if (len)
            memcpy(bytes, data, len);
        n = len;
    }
    /* Strings point into `bytes`, so the batch owns it from now on. */
    if (pl_batch_adopt(b->batch, bytes, n)) {
        free(bytes);
        return pl_errf(err, PL_ERR_NOMEM, "pprof: out of memory");
    }
    pl_arena *arena = &b->batch->arena;
    if (b->budget_bytes) {
        /* What the estimate in check_budget leaves out is caught here: the
         * arena refuses blocks past the request's remaining budget. */
        size_t room = left > n ? left - n : 0;
        arena->limit = pl_arena_bytes(arena) + (room ? room : 1);
        arena->over_limit = 0;
    }
    decode_ctx c;
    memset(&c, 0, sizeof(c));
    c.b = b;
    c.err = err;
    c.repair_dotnet = meta->repair_dotnet;
    b->bad_strings = false;
    b->last_profiles = NULL;
    b->n_last = 0;
    c.all = (reader){bytes, bytes + n};
    pl_status st = decode_into(&c, meta);
    if (b->budget_bytes) {
        if (st == PL_ERR_NOMEM && arena->over_limit)
            st = over_budget(b, err, "decoding");
        arena->limit = 0;
        arena->over_limit = 0;
    }
    free(c.strs);
    free(c.str_map);
    free(c.seen_keys);
    free(c.ids);
    free(c.repair_ids);
    idmap_free(&c.mappings);
    idmap_free(&c.functions);
    idmap_free(&c.locations);
    return st;
}

pl_batch *pl_pprof_decode(const uint8_t *data, size_t len, const pl_pprof_meta *meta, pl_err *err)
{
    pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
    if (!batch) {
        pl_errf(err, PL_ERR_NOMEM, "pprof: out of memory");
        return NULL;
    }
    pl_pprof_builder *b = pl_pprof_builder_new(batch);
    if (!b) {
        pl_batch_free(batch);
        pl_errf(err, PL_ERR_NOMEM, "pprof: out of memory");
        return NULL;
    }
    pl_status st = pl_pprof_builder_add(b, data, len, meta, err);
    pl_pprof_builder_free(b);
    if (st != PL_OK) {
        pl_batch_free(batch);
        return NULL;
    }
    return batch;
}
