/*
 * pprof.c: pprof decoder into the profiles model, and pprof encoder from it.
 * See pprof.h for the mapping rules; this comment covers how.
 *
 * The protobuf reading is a small hand-written wire reader rather than
 * nanopb-generated structs: pprof is a flat list of repeated top-level
 * messages, and reading it in place gives zero-copy string views and no
 * per-element allocation or callback. The decoder walks the top-level fields
 * a few times, once per table, in dependency order (strings, mappings,
 * functions, locations, sample types, samples), so a pprof whose tables come
 * in any order decodes the same. Each walk only skips the other fields, which
 * costs a varint read per field.
 *
 * The dictionary tables of the batch are appended to directly (not through
 * pl_dict_intern_string, which scans linearly): the builder keeps open-
 * addressing hash indexes of strings, stacks, attributes and links.
 */
#include "pprof.h"

#include "core/hash.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- wire reader ------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p, *end;
} reader;

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

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

/* ---- hashing ----------------------------------------------------------- */

/* Every index below is keyed by ids and bytes the client chose, so all of
 * them hash under the per-process key (core/hash.h): a pprof cannot be
 * crafted offline whose ids or strings all land in one probe chain. The
 * seed separates the tables' hash families. */
static inline uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
    return pl_hash_bytes_with(seed, data, len);
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

/* ---- gzip -------------------------------------------------------------- */

pl_status pl_gunzip(const uint8_t *data, size_t len, size_t limit, uint8_t **out, size_t *out_len,
                    pl_err *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return pl_errf(err, PL_ERR_NOMEM, "gzip: cannot initialise zlib");
    size_t cap = len * 4 + 1024;
    if (cap > limit + 1)
        cap = limit + 1;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        inflateEnd(&zs);
        return pl_errf(err, PL_ERR_NOMEM, "gzip: out of memory");
    }
    size_t n = 0;
    const uint8_t *in = data;
    size_t in_left = len;
    pl_status st = PL_OK;
    for (;;) {
        if (n == cap) {
            if (cap > limit) {
                st =
                    pl_errf(err, PL_ERR_TOO_LARGE, "gzip: decompressed size over %zu bytes", limit);
                break;
            }
            size_t ncap = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                st = pl_errf(err, PL_ERR_NOMEM, "gzip: out of memory");
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t in_chunk = in_left > UINT32_MAX ? UINT32_MAX : in_left;
        size_t out_chunk = cap - n > UINT32_MAX ? UINT32_MAX : cap - n;
        zs.next_in = (Bytef *)in;
        zs.avail_in = (uInt)in_chunk;
        zs.next_out = buf + n;
        zs.avail_out = (uInt)out_chunk;
        int rc = inflate(&zs, Z_NO_FLUSH);
        in += in_chunk - zs.avail_in;
        in_left -= in_chunk - zs.avail_in;
        n += out_chunk - zs.avail_out;
        if (rc == Z_STREAM_END) {
            /* Concatenated gzip members are legal; continue if more input. */
            if (in_left > 0 && pl_is_gzip(in, in_left)) {
                if (inflateReset(&zs) != Z_OK) {
                    st = pl_errf(err, PL_ERR_INVALID, "gzip: corrupt stream");
                    break;
                }
                continue;
            }
            break;
        }
        if (rc == Z_BUF_ERROR && zs.avail_out != 0) {
            st = pl_errf(err, PL_ERR_INVALID, "gzip: truncated stream");
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = pl_errf(err, PL_ERR_INVALID, "gzip: corrupt stream (%s)",
                         zs.msg ? zs.msg : "inflate error");
            break;
        }
    }
    inflateEnd(&zs);
    if (st == PL_OK && n > limit)
        st = pl_errf(err, PL_ERR_TOO_LARGE, "gzip: decompressed size over %zu bytes", limit);
    if (st != PL_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_len = n;
    return PL_OK;
}

int pl_gzip(const uint8_t *data, size_t len, pl_buf *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    /* Level 1 (BestSpeed), as the Go runtime writes pprof: about 5x faster
     * than the default level on profiles, for a slightly larger output. */
    if (deflateInit2(&zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    size_t bound = deflateBound(&zs, (uLong)len) + 32;
    if (!pl_buf_reserve(out, bound)) {
        deflateEnd(&zs);
        return -1;
    }
    zs.next_in = (Bytef *)data;
    zs.avail_in = (uInt)len;
    zs.next_out = out->data + out->len;
    zs.avail_out = (uInt)(out->cap - out->len);
    int rc = deflate(&zs, Z_FINISH);
    if (rc != Z_STREAM_END) {
        deflateEnd(&zs);
        return -1;
    }
    out->len += zs.total_out;
    deflateEnd(&zs);
    return 0;
}

/* ---- the builder --------------------------------------------------------- */

typedef struct raw_label {
    int64_t key, str, num, num_unit;
} raw_label;

struct pl_pprof_builder {
    pl_batch *batch;
    pl_htab strings, stacks, attrs, links;
    size_t samples;
    /* The request's budget (pl_pprof_builder_set_budget); 0 = none. */
    size_t budget_bytes, budget_objects;
    size_t objects; /* objects decoded so far, against budget_objects */
    /* scratch, grown as needed, reused for every sample */
    int32_t *scratch_locs;
    size_t cap_locs;
    int64_t *scratch_vals;
    size_t cap_vals;
    raw_label *scratch_labels;
    size_t cap_labels;
    int32_t *scratch_attrs;
    size_t cap_attrs;
};

static pl_dictionary *bdict(pl_pprof_builder *b)
{
    return &b->batch->data.profiles.dict;
}

/* Makes room for `extra` more entries in a dictionary table. */
static int table_reserve(pl_arena *arena, void **items, uint32_t n, uint32_t *cap, size_t elem,
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

#define RESERVE(b, field, extra)                                                                   \
    table_reserve(&(b)->batch->arena, (void **)&bdict(b)->field, bdict(b)->n_##field,              \
                  &bdict(b)->cap_##field, sizeof(*bdict(b)->field), (extra))

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
static int32_t intern_string(pl_pprof_builder *b, pl_bytes s)
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

static int32_t intern_cstr(pl_pprof_builder *b, const char *s)
{
    return intern_string(b, (pl_bytes){(const uint8_t *)s, (uint32_t)strlen(s)});
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

static int32_t intern_stack(pl_pprof_builder *b, const int32_t *locs, uint32_t n)
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

static int32_t intern_attr(pl_pprof_builder *b, int32_t key, pl_value value, int32_t unit)
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

static int32_t intern_link(pl_pprof_builder *b, const pl_link *link)
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

static int grow_scratch(void **p, size_t *cap, size_t need, size_t elem)
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

/* ---- decoding one pprof -------------------------------------------------- */

/* pprof top-level field numbers (profile.proto). */
enum {
    P_SAMPLE_TYPE = 1,
    P_SAMPLE = 2,
    P_MAPPING = 3,
    P_LOCATION = 4,
    P_FUNCTION = 5,
    P_STRING_TABLE = 6,
    P_DROP_FRAMES = 7,
    P_KEEP_FRAMES = 8,
    P_TIME_NANOS = 9,
    P_DURATION_NANOS = 10,
    P_PERIOD_TYPE = 11,
    P_PERIOD = 12,
    P_COMMENT = 13,
    P_DEFAULT_SAMPLE_TYPE = 14,
};

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
    /* sample types */
    pl_vtype *sample_types;
    bool has_period_type;
    pl_vtype period_type;
    int64_t period, time_nanos, duration_nanos;
    int32_t span_id_key, profile_id_key, trace_id_key; /* pprof string indices, -1 none */
    uint8_t *seen_keys; /* per pprof string: key already seen on this sample */
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
    int32_t d = intern_string(c->b, c->strs[i]);
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
        case P_TIME_NANOS:
        case P_DURATION_NANOS:
        case P_PERIOD:
        case P_DROP_FRAMES:
        case P_KEEP_FRAMES:
        case P_DEFAULT_SAMPLE_TYPE:
            if (read_scalar(&r, wt, &v))
                return BAD(c, "pprof: field %u: wrong wire type or truncated", field);
            if (field == P_TIME_NANOS)
                c->time_nanos = (int64_t)v;
            else if (field == P_DURATION_NANOS)
                c->duration_nanos = (int64_t)v;
            else if (field == P_PERIOD)
                c->period = (int64_t)v;
            continue;
        case P_SAMPLE_TYPE:
        case P_SAMPLE:
        case P_MAPPING:
        case P_LOCATION:
        case P_FUNCTION:
        case P_STRING_TABLE:
        case P_PERIOD_TYPE:
            if (wt != WT_LEN)
                return BAD(c, "pprof: field %u: wrong wire type %u", field, wt);
            break;
        default:
            break;
        }
        if (skip_field(&r, wt))
            return BAD(c, "pprof: truncated or corrupt field %u", field);
        switch (field) {
        case P_SAMPLE_TYPE:
            c->n_sample_types++;
            break;
        case P_SAMPLE:
            c->n_samples++;
            break;
        case P_MAPPING:
            c->n_mappings++;
            break;
        case P_LOCATION:
            c->n_locations++;
            break;
        case P_FUNCTION:
            c->n_functions++;
            break;
        case P_STRING_TABLE:
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
    return read_value_type(c, r, &c->sample_types[i], "sample_type", i);
}

static pl_status on_period_type(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    c->has_period_type = true;
    return read_value_type(c, r, &c->period_type, "period_type", i);
}

/* Mapping {id=1, memory_start=2, memory_limit=3, file_offset=4, filename=5,
 * build_id=6, has_*=7..10} */
static pl_status on_mapping(decode_ctx *c, reader *r, uint32_t wt, uint32_t i)
{
    reader m;
    if (read_len(r, &m))
        return BAD(c, "pprof: mapping %u truncated", i);
    uint64_t f_[7] = {0};
    while (m.p < m.end) {
        uint32_t f, w;
        uint64_t v;
        if (read_tag(&m, &f, &w))
            return BAD(c, "pprof: mapping %u corrupt", i);
        if (f >= 1 && f <= 10) {
            if (read_scalar(&m, w, &v))
                return BAD(c, "pprof: mapping %u field %u corrupt", i, f);
            if (f <= 6)
                f_[f] = v;
        } else if (skip_field(&m, w))
            return BAD(c, "pprof: mapping %u corrupt", i);
    }
    pl_pprof_builder *b = c->b;
    pl_mapping *mp = &bdict(b)->mappings[c->mapping_base + i];
    memset(mp, 0, sizeof(*mp));
    c->ids[i] = f_[1];
    mp->memory_start = f_[2];
    mp->memory_limit = f_[3];
    mp->file_offset = f_[4];
    MAP_STRING(c, mp->filename_strindex, f_[5], "mapping %u filename", i);
    int32_t build_id;
    MAP_STRING(c, build_id, f_[6], "mapping %u build_id", i);
    if (build_id) {
        int32_t key = intern_cstr(b, "process.executable.build_id.gnu");
        int32_t attr =
            key < 0 ? -1 : intern_attr(b, key, pl_value_string(bdict(b)->strings[build_id]), 0);
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
    reader m;
    if (read_len(r, &m))
        return BAD(c, "pprof: function %u truncated", i);
    uint64_t f_[6] = {0};
    while (m.p < m.end) {
        uint32_t f, w;
        uint64_t v;
        if (read_tag(&m, &f, &w))
            return BAD(c, "pprof: function %u corrupt", i);
        if (f >= 1 && f <= 5) {
            if (read_scalar(&m, w, &v))
                return BAD(c, "pprof: function %u field %u corrupt", i, f);
            f_[f] = v;
        } else if (skip_field(&m, w))
            return BAD(c, "pprof: function %u corrupt", i);
    }
    pl_function *fn = &bdict(c->b)->functions[c->function_base + i];
    c->ids[i] = f_[1];
    MAP_STRING(c, fn->name_strindex, f_[2], "function %u name", i);
    MAP_STRING(c, fn->system_name_strindex, f_[3], "function %u system_name", i);
    MAP_STRING(c, fn->filename_strindex, f_[4], "function %u filename", i);
    fn->start_line = (int64_t)f_[5];
    return PL_OK;
}

/* Line {function_id=1, line=2, column=3} */
static pl_status read_line(decode_ctx *c, reader *r, pl_line *out, uint32_t loc)
{
    reader m;
    if (read_len(r, &m))
        return BAD(c, "pprof: location %u: line truncated", loc);
    uint64_t f_[4] = {0};
    while (m.p < m.end) {
        uint32_t f, w;
        uint64_t v;
        if (read_tag(&m, &f, &w))
            return BAD(c, "pprof: location %u: line corrupt", loc);
        if (f >= 1 && f <= 3) {
            if (read_scalar(&m, w, &v))
                return BAD(c, "pprof: location %u: line corrupt", loc);
            f_[f] = v;
        } else if (skip_field(&m, w))
            return BAD(c, "pprof: location %u: line corrupt", loc);
    }
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
    pl_location *loc = &bdict(c->b)->locations[c->location_base + i];
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
    if (grow_scratch((void **)&b->scratch_locs, &b->cap_locs, s->n_locs + 1, sizeof(int32_t))) {
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
    if (grow_scratch((void **)&b->scratch_vals, &b->cap_vals, s->n_vals + 1, sizeof(int64_t))) {
        s->st = NOMEM(s->c);
        return 1;
    }
    b->scratch_vals[s->n_vals++] = (int64_t)v;
    return 0;
}

/* Label {key=1, str=2, num=3, num_unit=4} */
static pl_status read_label(decode_ctx *c, reader *r, raw_label *out, uint32_t sample)
{
    reader m;
    if (read_len(r, &m))
        return BAD(c, "pprof: sample %u: label truncated", sample);
    uint64_t f_[5] = {0};
    while (m.p < m.end) {
        uint32_t f, w;
        uint64_t v;
        if (read_tag(&m, &f, &w))
            return BAD(c, "pprof: sample %u: label corrupt", sample);
        if (f >= 1 && f <= 4) {
            if (read_scalar(&m, w, &v))
                return BAD(c, "pprof: sample %u: label corrupt", sample);
            f_[f] = v;
        } else if (skip_field(&m, w))
            return BAD(c, "pprof: sample %u: label corrupt", sample);
    }
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
            if (grow_scratch((void **)&b->scratch_labels, &b->cap_labels, n_labels + 1,
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

    int32_t stack = intern_stack(b, b->scratch_locs, s.n_locs);
    if (stack < 0)
        return NOMEM(c);

    /* Labels: the link labels first, then attributes (first of a key wins). */
    pl_link link;
    memset(&link, 0, sizeof(link));
    bool has_span = false, has_trace = false;
    uint32_t n_attrs = 0;
    if (grow_scratch((void **)&b->scratch_attrs, &b->cap_attrs, n_labels, sizeof(int32_t)))
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
        int32_t attr = intern_attr(b, key, value, unit);
        if (attr < 0)
            return NOMEM(c);
        b->scratch_attrs[n_attrs++] = attr;
    }
    for (uint32_t k = 0; k < n_labels; k++)
        c->seen_keys[b->scratch_labels[k].key] = 0;
    int32_t link_index = 0;
    if (has_span) {
        link_index = intern_link(b, &link);
        if (link_index < 0)
            return NOMEM(c);
    } else if (has_trace) {
        /* A trace id without a span id links nothing: keep it as a label. */
        int32_t key, v;
        MAP_STRING(c, key, c->trace_id_key, "sample %u", i);
        char hex[33];
        pl_hex_encode(link.trace_id, 16, hex);
        v = intern_string(b, pl_batch_bytes(b->batch, hex, 32));
        int32_t attr = v < 0 ? -1 : intern_attr(b, key, pl_value_string(bdict(b)->strings[v]), 0);
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
        if (field != P_SAMPLE) {
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

static pl_status decode_into(decode_ctx *c, const pl_pprof_meta *meta)
{
    pl_pprof_builder *b = c->b;
    pl_batch *batch = b->batch;
    pl_dictionary *d = bdict(b);
    pl_status st = count_fields(c);
    if (st != PL_OK)
        return st;
    if ((st = check_budget(c)) != PL_OK)
        return st;

    /* Strings. */
    if (c->n_strs) {
        c->strs = malloc(c->n_strs * sizeof(pl_bytes));
        c->str_map = malloc(c->n_strs * sizeof(int32_t));
        c->seen_keys = calloc(c->n_strs, 1);
        if (!c->strs || !c->str_map || !c->seen_keys)
            return NOMEM(c);
        if ((st = walk(c, P_STRING_TABLE, on_string)) != PL_OK)
            return st;
        if (c->strs[0].len != 0)
            return BAD(c, "pprof: string_table[0] must be empty");
        c->str_map[0] = 0;
    }
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
    c->mapping_base = d->n_mappings;
    if ((st = check_u32(c, c->n_mappings, c->mapping_base, "mappings")) != PL_OK)
        return st;
    if (RESERVE(b, mappings, c->n_mappings))
        return NOMEM(c);
    if ((st = walk(c, P_MAPPING, on_mapping)) != PL_OK)
        return st;
    long dup = idmap_build(&c->mappings, c->ids, c->n_mappings);
    if (dup < 0)
        return NOMEM(c);
    if (dup > 0)
        return BAD(c, "pprof: mapping %ld: id %" PRIu64 " is zero or repeated", dup - 1,
                   c->ids[dup - 1]);
    d->n_mappings += c->n_mappings;

    c->function_base = d->n_functions;
    if ((st = check_u32(c, c->n_functions, c->function_base, "functions")) != PL_OK)
        return st;
    if (RESERVE(b, functions, c->n_functions))
        return NOMEM(c);
    if ((st = walk(c, P_FUNCTION, on_function)) != PL_OK)
        return st;
    dup = idmap_build(&c->functions, c->ids, c->n_functions);
    if (dup < 0)
        return NOMEM(c);
    if (dup > 0)
        return BAD(c, "pprof: function %ld: id %" PRIu64 " is zero or repeated", dup - 1,
                   c->ids[dup - 1]);
    d->n_functions += c->n_functions;

    c->location_base = d->n_locations;
    if ((st = check_u32(c, c->n_locations, c->location_base, "locations")) != PL_OK)
        return st;
    if (RESERVE(b, locations, c->n_locations))
        return NOMEM(c);
    if ((st = walk(c, P_LOCATION, on_location)) != PL_OK)
        return st;
    dup = idmap_build(&c->locations, c->ids, c->n_locations);
    if (dup < 0)
        return NOMEM(c);
    if (dup > 0)
        return BAD(c, "pprof: location %ld: id %" PRIu64 " is zero or repeated", dup - 1,
                   c->ids[dup - 1]);
    d->n_locations += c->n_locations;

    /* Sample types and period type. */
    if (c->n_sample_types) {
        c->sample_types = pl_arena_calloc(&batch->arena, c->n_sample_types, sizeof(pl_vtype));
        if (!c->sample_types)
            return NOMEM(c);
        if ((st = walk(c, P_SAMPLE_TYPE, on_sample_type)) != PL_OK)
            return st;
    }
    if ((st = walk(c, P_PERIOD_TYPE, on_period_type)) != PL_OK)
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

/* ---- encoding ------------------------------------------------------------ */

static void put_varint(pl_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    pl_buf_append(b, tmp, n);
}

static void put_uint(pl_buf *b, uint32_t field, uint64_t v)
{
    if (!v)
        return; /* proto3: zero is the default and is not written */
    put_varint(b, (uint64_t)field << 3 | WT_VARINT);
    put_varint(b, v);
}

static void put_bytes(pl_buf *b, uint32_t field, const void *data, size_t len)
{
    put_varint(b, (uint64_t)field << 3 | WT_LEN);
    put_varint(b, len);
    pl_buf_append(b, data, len);
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
    if (grow_scratch((void **)&e->strings, &e->cap_strings, e->n_strings + 1, sizeof(pl_bytes)))
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
    put_bytes(&e->msg, 3, e->sub.data, e->sub.len);
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
        put_varint(&e->sub, id);
    }
    if (e->sub.len)
        put_bytes(&e->msg, 1, e->sub.data, e->sub.len);
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
    put_varint(&e->sub, (uint64_t)value);
    put_bytes(&e->msg, 2, e->sub.data, e->sub.len);
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
    put_bytes(samples, 2, e->msg.data, e->msg.len);
    return PL_OK;
}

static void enc_value_type(encoder *e, pl_buf *out, uint32_t field, int64_t type, int64_t unit)
{
    pl_buf_reset(&e->sub);
    put_uint(&e->sub, 1, (uint64_t)type);
    put_uint(&e->sub, 2, (uint64_t)unit);
    put_bytes(out, field, e->sub.data, e->sub.len);
}

static pl_status encode_profile(encoder *e, const pl_profile *p, const pl_pprof_encode_options *o,
                                pl_buf *out, pl_arena *tmp)
{
    const pl_dictionary *d = e->d;
    pl_status st = PL_OK;
    if (!pl_buf_reserve(&e->msg, 64))
        return pl_errf(e->err, PL_ERR_NOMEM, "pprof encode: out of memory");
    pl_bytes empty = {(const uint8_t *)"", 0};
    if (grow_scratch((void **)&e->strings, &e->cap_strings, 1, sizeof(pl_bytes)))
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
        put_bytes(out, 3, e->msg.data, e->msg.len);
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
            put_bytes(&e->msg, 4, e->sub.data, e->sub.len);
        }
        put_bytes(out, 4, e->msg.data, e->msg.len);
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
        put_bytes(out, 5, e->msg.data, e->msg.len);
    }
    for (size_t k = 0; k < e->n_strings; k++)
        put_bytes(out, 6, e->strings[k].ptr, e->strings[k].len);
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

/* ---- Pyroscope profile names --------------------------------------------- */

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

pl_bytes pl_pprof_profile_name(const pl_dictionary *dict, const pl_profile *profile,
                               bool *cpu_special)
{
    pl_bytes type = pl_dict_string(dict, profile->sample_type.type_strindex);
    pl_bytes unit = pl_dict_string(dict, profile->sample_type.unit_strindex);
    pl_bytes ptype = profile->has_period_type
                         ? pl_dict_string(dict, profile->period_type.type_strindex)
                         : (pl_bytes){NULL, 0};
    pl_bytes punit = profile->has_period_type
                         ? pl_dict_string(dict, profile->period_type.unit_strindex)
                         : (pl_bytes){NULL, 0};
    if (cpu_special)
        *cpu_special = false;
    if (pl_bytes_eq_cstr(type, "samples") && pl_bytes_eq_cstr(unit, "count") &&
        pl_bytes_eq_cstr(ptype, "cpu") && pl_bytes_eq_cstr(punit, "nanoseconds")) {
        if (cpu_special)
            *cpu_special = true;
        return PL_BYTES_LIT("process_cpu");
    }
    if (pl_bytes_eq_cstr(type, "off_cpu") && ptype.len == 0)
        return PL_BYTES_LIT("off_cpu");
    if (pl_bytes_eq_cstr(type, "wall"))
        return PL_BYTES_LIT("wall");
    if (bytes_contains(type, "cpu"))
        return PL_BYTES_LIT("process_cpu");
    if (bytes_contains(type, "alloc_") || bytes_contains(type, "inuse_") ||
        pl_bytes_eq_cstr(type, "space") || pl_bytes_eq_cstr(type, "objects"))
        return PL_BYTES_LIT("memory");
    if (bytes_contains(type, "mutex_"))
        return PL_BYTES_LIT("mutex");
    if (bytes_contains(type, "block_"))
        return PL_BYTES_LIT("block");
    if (bytes_contains(type, "goroutine"))
        return PL_BYTES_LIT("goroutines");
    if (ptype.len)
        return ptype;
    return type;
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
    if (grow_scratch((void **)&w->e.strings, &w->e.cap_strings, 1, sizeof(pl_bytes))) {
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
        if (id < 0 || grow_scratch((void **)&w->is_fn, &w->cap_is_fn, (size_t)id + 1, 1))
            return -1;
        if (id == 0)
            continue; /* an empty frame name carries nothing */
        w->is_fn[id] = 1;
        put_varint(&w->msg, (uint64_t)id);
    }
    pl_buf_reset(&w->e.msg);
    if (w->msg.len)
        put_bytes(&w->e.msg, 1, w->msg.data, w->msg.len);
    pl_buf_reset(&w->msg);
    put_varint(&w->msg, (uint64_t)value);
    put_bytes(&w->e.msg, 2, w->msg.data, w->msg.len);
    put_bytes(&w->samples, 2, w->e.msg.data, w->e.msg.len);
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
        put_bytes(&e->msg, 4, e->sub.data, e->sub.len);
        put_bytes(out, 4, e->msg.data, e->msg.len); /* location id = function id */
        pl_buf_reset(&e->msg);
        put_uint(&e->msg, 1, id);
        put_uint(&e->msg, 2, id);
        put_bytes(out, 5, e->msg.data, e->msg.len);
    }
    for (size_t k = 0; k < e->n_strings; k++)
        put_bytes(out, 6, e->strings[k].ptr, e->strings[k].len);
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
