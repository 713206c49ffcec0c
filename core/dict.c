/*
 * dict.c: the profiles dictionary builder (see dict.h).
 *
 * Every table is handled alike: a descriptor gives its array, count and
 * capacity inside the pl_dictionary, and a pair of functions hashes an entry
 * and compares two. Each table's index is a pl_htab whose values are
 * positions in the table (entry 0 is never indexed, so 0 stays "empty");
 * the equality callback compares the key with the table's entry as it is
 * now. The index lives in the batch arena with the tables and remembers how
 * many entries it covers, so entries appended without interning (a
 * decoder's block, a link per span) are indexed at the next interning call.
 * A dictionary whose tables were replaced wholesale (a decoder assigning
 * decoded arrays, a clone) is re-indexed from scratch: the index notes the
 * array it covered.
 */
#include "model.h"

#include <string.h>

#include "hash.h"

/* ---- tables --------------------------------------------------------------- */

typedef struct table {
    void **items;
    uint32_t *n, *cap;
    size_t elem;
} table;

static table table_of(pl_dictionary *d, pl_dict_table t)
{
#define T(field)                                                                                   \
    (table)                                                                                        \
    {                                                                                              \
        (void **)&d->field, &d->n_##field, &d->cap_##field, sizeof(*d->field)                      \
    }
    switch (t) {
    case PL_DICT_STRINGS:
        return T(strings);
    case PL_DICT_FUNCTIONS:
        return T(functions);
    case PL_DICT_MAPPINGS:
        return T(mappings);
    case PL_DICT_LOCATIONS:
        return T(locations);
    case PL_DICT_STACKS:
        return T(stacks);
    case PL_DICT_ATTRIBUTES:
        return T(attributes);
    case PL_DICT_LINKS:
    default:
        return T(links);
    }
#undef T
}

uint32_t pl_dict_count(const pl_dictionary *dict, pl_dict_table t)
{
    return *table_of((pl_dictionary *)dict, t).n;
}

/* Room for `extra` more entries past n. Geometric growth in the arena (the
 * old array is abandoned); 0 or -1. */
static int table_reserve(pl_arena *arena, table tb, uint32_t extra)
{
    uint64_t want = (uint64_t)*tb.n + extra;
    if (want > INT32_MAX)
        return -1;
    if (want <= *tb.cap && *tb.items)
        return 0;
    uint64_t c = *tb.cap < 8 ? 16 : (uint64_t)*tb.cap * 2;
    while (c < want)
        c *= 2;
    if (c > INT32_MAX)
        c = INT32_MAX;
    void *p = pl_arena_grow(arena, *tb.items, *tb.n, (size_t)c, tb.elem);
    if (!p)
        return -1;
    *tb.items = p;
    *tb.cap = (uint32_t)c;
    return 0;
}

/* ---- hashing and equality per table ----------------------------------------- */

typedef uint64_t (*entry_hash)(const void *e);
typedef bool (*entry_same)(const void *a, const void *b);

/* Integers chain through the keyed 64-bit finalizer (core/hash.h), byte
 * runs through SipHash: both under the process key. */
static uint64_t mix(uint64_t h, uint64_t x)
{
    return pl_hash_u64((h << 23 | h >> 41) ^ x);
}

static uint64_t hash_i32s(uint64_t h, const int32_t *v, uint32_t n)
{
    return n ? pl_hash_bytes_with(h, v, n * sizeof(int32_t)) : mix(h, 0);
}

static bool same_i32s(const int32_t *a, uint32_t na, const int32_t *b, uint32_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof(int32_t)) == 0);
}

static uint64_t string_hash(const void *e)
{
    const pl_bytes *s = e;
    return pl_hash_bytes(s->ptr, s->len);
}

static bool string_same(const void *a, const void *b)
{
    return pl_bytes_eq(*(const pl_bytes *)a, *(const pl_bytes *)b);
}

static uint64_t function_hash(const void *e)
{
    const pl_function *f = e;
    uint64_t h = mix((uint64_t)(uint32_t)f->name_strindex << 32 | (uint32_t)f->system_name_strindex,
                     (uint32_t)f->filename_strindex);
    return mix(h, (uint64_t)f->start_line);
}

static bool function_same(const void *a, const void *b)
{
    const pl_function *x = a, *y = b;
    return x->name_strindex == y->name_strindex &&
           x->system_name_strindex == y->system_name_strindex &&
           x->filename_strindex == y->filename_strindex && x->start_line == y->start_line;
}

static uint64_t mapping_hash(const void *e)
{
    const pl_mapping *m = e;
    uint64_t h = mix(mix(mix(m->memory_start, m->memory_limit), m->file_offset),
                     (uint32_t)m->filename_strindex);
    return hash_i32s(h, m->attribute_indices, m->n_attribute_indices);
}

static bool mapping_same(const void *a, const void *b)
{
    const pl_mapping *x = a, *y = b;
    return x->memory_start == y->memory_start && x->memory_limit == y->memory_limit &&
           x->file_offset == y->file_offset && x->filename_strindex == y->filename_strindex &&
           same_i32s(x->attribute_indices, x->n_attribute_indices, y->attribute_indices,
                     y->n_attribute_indices);
}

static uint64_t location_hash(const void *e)
{
    const pl_location *l = e;
    uint64_t h = mix(mix((uint32_t)l->mapping_index, l->address), l->n_lines);
    for (uint32_t i = 0; i < l->n_lines; i++) {
        h = mix(h, (uint32_t)l->lines[i].function_index);
        h = mix(h, (uint64_t)l->lines[i].line);
        h = mix(h, (uint64_t)l->lines[i].column);
    }
    return hash_i32s(h, l->attribute_indices, l->n_attribute_indices);
}

static bool location_same(const void *a, const void *b)
{
    const pl_location *x = a, *y = b;
    if (x->mapping_index != y->mapping_index || x->address != y->address ||
        x->n_lines != y->n_lines)
        return false;
    for (uint32_t i = 0; i < x->n_lines; i++)
        if (x->lines[i].function_index != y->lines[i].function_index ||
            x->lines[i].line != y->lines[i].line || x->lines[i].column != y->lines[i].column)
            return false;
    return same_i32s(x->attribute_indices, x->n_attribute_indices, y->attribute_indices,
                     y->n_attribute_indices);
}

static uint64_t stack_hash(const void *e)
{
    const pl_stack *s = e;
    return pl_hash_bytes(s->location_indices, s->n_location_indices * sizeof(int32_t));
}

static bool stack_same(const void *a, const void *b)
{
    const pl_stack *x = a, *y = b;
    return same_i32s(x->location_indices, x->n_location_indices, y->location_indices,
                     y->n_location_indices);
}

/* Hash of a value, consistent with pl_value_eq. */
static uint64_t value_hash(uint64_t h, const pl_value *v)
{
    h = mix(h, (uint64_t)v->type);
    switch (v->type) {
    case PL_VALUE_STRING:
    case PL_VALUE_BYTES:
        return pl_hash_bytes_with(h, v->u.str.ptr, v->u.str.len);
    case PL_VALUE_BOOL:
        return mix(h, v->u.b);
    case PL_VALUE_INT:
        return mix(h, (uint64_t)v->u.i);
    case PL_VALUE_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &v->u.d, sizeof(bits)); /* bitwise, as pl_value_eq */
        return mix(h, bits);
    }
    case PL_VALUE_STRINDEX:
        return mix(h, (uint32_t)v->u.strindex);
    case PL_VALUE_ARRAY:
        h = mix(h, v->u.array.n);
        for (uint32_t i = 0; i < v->u.array.n; i++)
            h = value_hash(h, &v->u.array.items[i]);
        return h;
    case PL_VALUE_KVLIST:
        h = mix(h, v->u.kvlist.n);
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            const pl_kv *kv = &v->u.kvlist.items[i];
            h = pl_hash_bytes_with(h, kv->key.ptr, kv->key.len);
            h = mix(h, (uint32_t)kv->key_strindex);
            h = value_hash(h, &kv->value);
        }
        return h;
    default:
        return h;
    }
}

static uint64_t attribute_hash(const void *e)
{
    const pl_kvu *a = e;
    return value_hash(mix((uint32_t)a->key_strindex, (uint32_t)a->unit_strindex), &a->value);
}

static bool attribute_same(const void *a, const void *b)
{
    const pl_kvu *x = a, *y = b;
    return x->key_strindex == y->key_strindex && x->unit_strindex == y->unit_strindex &&
           pl_value_eq(&x->value, &y->value);
}

static uint64_t link_hash(const void *e)
{
    const pl_link *l = e;
    uint8_t k[26] = {l->trace_id_len, l->span_id_len};
    memcpy(k + 2, l->trace_id, l->trace_id_len <= 16 ? l->trace_id_len : 16);
    memcpy(k + 18, l->span_id, l->span_id_len <= 8 ? l->span_id_len : 8);
    return pl_hash_bytes(k, sizeof(k));
}

static bool link_same(const void *a, const void *b)
{
    const pl_link *x = a, *y = b;
    return x->trace_id_len == y->trace_id_len && x->span_id_len == y->span_id_len &&
           x->trace_id_len <= 16 && x->span_id_len <= 8 &&
           memcmp(x->trace_id, y->trace_id, x->trace_id_len) == 0 &&
           memcmp(x->span_id, y->span_id, x->span_id_len) == 0;
}

static const struct {
    entry_hash hash;
    entry_same same;
} ops[PL_DICT_TABLES] = {
    [PL_DICT_STRINGS] = {string_hash, string_same},
    [PL_DICT_FUNCTIONS] = {function_hash, function_same},
    [PL_DICT_MAPPINGS] = {mapping_hash, mapping_same},
    [PL_DICT_LOCATIONS] = {location_hash, location_same},
    [PL_DICT_STACKS] = {stack_hash, stack_same},
    [PL_DICT_ATTRIBUTES] = {attribute_hash, attribute_same},
    [PL_DICT_LINKS] = {link_hash, link_same},
};

/* ---- the index -------------------------------------------------------------- */

struct pl_dict_index {
    struct table_index {
        pl_htab h;         /* values: positions (>= 1) */
        uint32_t n;        /* entries [1, n) are indexed */
        const void *items; /* the array they were read from */
    } t[PL_DICT_TABLES];
};

typedef struct probe {
    const uint8_t *items;
    size_t elem;
    entry_same same;
    const void *key;
} probe;

static bool probe_eq(const void *ctx, uint32_t val)
{
    const probe *p = ctx;
    return p->same(p->items + (size_t)val * p->elem, p->key);
}

/* The zero entry of each table (link 0 has full-length zero ids). */
static void zero_entry(pl_dict_table t, void *e, size_t elem)
{
    memset(e, 0, elem);
    if (t == PL_DICT_LINKS) {
        ((pl_link *)e)->trace_id_len = 16;
        ((pl_link *)e)->span_id_len = 8;
    }
}

static int ensure_zero(pl_arena *arena, table tb, pl_dict_table t)
{
    if (*tb.n)
        return 0;
    if (table_reserve(arena, tb, 1))
        return -1;
    zero_entry(t, *tb.items, tb.elem);
    *tb.n = 1;
    return 0;
}

/* Puts position i (content already in the table) into the index, as the
 * newest of its equals. 0 or -1. */
static int index_put(struct table_index *ix, table tb, pl_dict_table t, uint32_t i)
{
    const void *e = (const uint8_t *)*tb.items + (size_t)i * tb.elem;
    uint32_t hash = (uint32_t)ops[t].hash(e);
    probe p = {*tb.items, tb.elem, ops[t].same, e};
    uint32_t *slot = pl_htab_slot(&ix->h, hash, probe_eq, &p);
    if (!slot)
        return -1;
    bool added = *slot == 0;
    *slot = i;
    if (added)
        pl_htab_added(&ix->h, slot, hash);
    return 0;
}

/* Table t's index, brought up to date with the table. NULL on OOM. */
static struct table_index *index_sync(pl_arena *arena, pl_dictionary *d, table tb, pl_dict_table t)
{
    if (!d->index) {
        d->index = pl_arena_calloc(arena, 1, sizeof(*d->index));
        if (!d->index)
            return NULL;
        for (int k = 0; k < PL_DICT_TABLES; k++)
            d->index->t[k].h.arena = arena;
    }
    struct table_index *ix = &d->index->t[t];
    if (ix->items != *tb.items || ix->n > *tb.n) {
        /* A table this index did not see grow: index it afresh. */
        pl_htab_clear(&ix->h);
        ix->items = *tb.items;
        ix->n = 1;
    }
    if (ix->n < *tb.n) {
        if (pl_htab_reserve(&ix->h, *tb.n - ix->n))
            return NULL;
        for (; ix->n < *tb.n; ix->n++)
            if (index_put(ix, tb, t, ix->n))
                return NULL;
    }
    return ix;
}

/* The common interning path: the position of an entry equal to `key`, or
 * of a copy of `key` appended (after `persist` moved what it points to into
 * the arena, when given). */
static int32_t intern(pl_arena *arena, pl_dictionary *d, pl_dict_table t, const void *key,
                      int (*persist)(pl_arena *, void *))
{
    table tb = table_of(d, t);
    if (ensure_zero(arena, tb, t))
        return -1;
    struct table_index *ix = index_sync(arena, d, tb, t);
    if (!ix)
        return -1;
    uint32_t hash = (uint32_t)ops[t].hash(key);
    probe p = {*tb.items, tb.elem, ops[t].same, key};
    uint32_t *slot = pl_htab_slot(&ix->h, hash, probe_eq, &p);
    if (!slot)
        return -1;
    if (*slot)
        return (int32_t)*slot;
    if (table_reserve(arena, tb, 1))
        return -1;
    uint32_t i = *tb.n;
    void *e = (uint8_t *)*tb.items + (size_t)i * tb.elem;
    memcpy(e, key, tb.elem);
    if (persist && persist(arena, e))
        return -1;
    *slot = i;
    pl_htab_added(&ix->h, slot, hash);
    *tb.n = i + 1;
    ix->n = i + 1;
    ix->items = *tb.items;
    return (int32_t)i;
}

/* table_reserve for a table the index may cover: an index that was up to
 * date with the old array is with the moved one (the entries it covers were
 * copied as they were). */
static int grow(pl_arena *arena, pl_dictionary *d, table tb, pl_dict_table t, uint32_t extra)
{
    const void *old = *tb.items;
    if (ensure_zero(arena, tb, t) || table_reserve(arena, tb, extra))
        return -1;
    if (d->index && d->index->t[t].items == old)
        d->index->t[t].items = *tb.items;
    return 0;
}

/* ---- the API -------------------------------------------------------------- */

int pl_dict_ensure_zero_entries(pl_arena *arena, pl_dictionary *dict)
{
    for (int t = 0; t < PL_DICT_TABLES; t++)
        if (ensure_zero(arena, table_of(dict, (pl_dict_table)t), (pl_dict_table)t))
            return -1;
    return 0;
}

int32_t pl_dict_intern_string(pl_arena *arena, pl_dictionary *dict, pl_bytes s)
{
    if (s.len == 0) {
        if (ensure_zero(arena, table_of(dict, PL_DICT_STRINGS), PL_DICT_STRINGS))
            return -1;
        return 0;
    }
    return intern(arena, dict, PL_DICT_STRINGS, &s, NULL);
}

static int persist_string(pl_arena *arena, void *e)
{
    pl_bytes *s = e;
    char *copy = pl_arena_memdup(arena, s->ptr, s->len);
    if (!copy)
        return -1;
    s->ptr = (const uint8_t *)copy;
    return 0;
}

int32_t pl_dict_intern_string_copy(pl_arena *arena, pl_dictionary *dict, pl_bytes s)
{
    if (s.len == 0)
        return pl_dict_intern_string(arena, dict, s);
    return intern(arena, dict, PL_DICT_STRINGS, &s, persist_string);
}

int32_t pl_dict_intern_function(pl_arena *arena, pl_dictionary *dict, const pl_function *f)
{
    return intern(arena, dict, PL_DICT_FUNCTIONS, f, NULL);
}

int32_t pl_dict_intern_mapping(pl_arena *arena, pl_dictionary *dict, const pl_mapping *m)
{
    return intern(arena, dict, PL_DICT_MAPPINGS, m, NULL);
}

static int persist_location(pl_arena *arena, void *e)
{
    pl_location *l = e;
    if (l->n_lines) {
        pl_line *lines = pl_arena_alloc(arena, (size_t)l->n_lines * sizeof(pl_line));
        if (!lines)
            return -1;
        memcpy(lines, l->lines, (size_t)l->n_lines * sizeof(pl_line));
        l->lines = lines;
    } else {
        l->lines = NULL;
    }
    return 0;
}

int32_t pl_dict_intern_location(pl_arena *arena, pl_dictionary *dict, const pl_location *l)
{
    return intern(arena, dict, PL_DICT_LOCATIONS, l, persist_location);
}

static int persist_stack(pl_arena *arena, void *e)
{
    pl_stack *s = e;
    if (!s->n_location_indices) {
        s->location_indices = NULL;
        return 0;
    }
    size_t size = (size_t)s->n_location_indices * sizeof(int32_t);
    int32_t *copy = pl_arena_alloc(arena, size);
    if (!copy)
        return -1;
    memcpy(copy, s->location_indices, size);
    s->location_indices = copy;
    return 0;
}

int32_t pl_dict_intern_stack(pl_arena *arena, pl_dictionary *dict, const int32_t *locs, uint32_t n)
{
    pl_stack key = {(int32_t *)locs, n};
    return intern(arena, dict, PL_DICT_STACKS, &key, persist_stack);
}

int32_t pl_dict_intern_attribute(pl_arena *arena, pl_dictionary *dict, int32_t key_strindex,
                                 pl_value value, int32_t unit_strindex)
{
    pl_kvu key = {key_strindex, value, unit_strindex};
    return intern(arena, dict, PL_DICT_ATTRIBUTES, &key, NULL);
}

int32_t pl_dict_intern_link(pl_arena *arena, pl_dictionary *dict, const pl_link *link)
{
    return intern(arena, dict, PL_DICT_LINKS, link, NULL);
}

int32_t pl_dict_append(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, const void *entry)
{
    table tb = table_of(dict, t);
    if (grow(arena, dict, tb, t, 1))
        return -1;
    /* Indexed at the next interning call into t (index_sync). */
    uint32_t i = (*tb.n)++;
    memcpy((uint8_t *)*tb.items + (size_t)i * tb.elem, entry, tb.elem);
    return (int32_t)i;
}

void *pl_dict_append_begin(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, uint32_t n)
{
    table tb = table_of(dict, t);
    if (grow(arena, dict, tb, t, n ? n : 1))
        return NULL;
    void *e = (uint8_t *)*tb.items + (size_t)*tb.n * tb.elem;
    memset(e, 0, (size_t)n * tb.elem);
    return e;
}

void pl_dict_append_commit(pl_dictionary *dict, pl_dict_table t, uint32_t n)
{
    table tb = table_of(dict, t);
    if ((uint64_t)*tb.n + n <= *tb.cap)
        *tb.n += n;
}

int pl_dict_reserve(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, uint32_t extra)
{
    table tb = table_of(dict, t);
    if (grow(arena, dict, tb, t, extra))
        return -1;
    struct table_index *ix = index_sync(arena, dict, tb, t);
    return ix && pl_htab_reserve(&ix->h, extra) == 0 ? 0 : -1;
}

int pl_dict_set(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, int32_t index,
                const void *entry)
{
    table tb = table_of(dict, t);
    if (index <= 0 || (uint32_t)index >= *tb.n)
        return -1;
    memcpy((uint8_t *)*tb.items + (size_t)index * tb.elem, entry, tb.elem);
    if (!dict->index)
        return 0;
    struct table_index *ix = &dict->index->t[t];
    if (ix->items != *tb.items || (uint32_t)index >= ix->n)
        return 0; /* not indexed yet: index_sync reads the new content */
    /* The old content's slot stays behind; it no longer compares equal to
     * anything but the new content. */
    return index_put(ix, tb, t, (uint32_t)index);
}

/* ---- deep copy ------------------------------------------------------------------- */

static int32_t *copy_i32(pl_copier *c, int32_t *src, uint32_t *n, int *fail)
{
    int32_t *p = pl_copy_array(c, src, *n, sizeof(int32_t), fail);
    if (!p)
        *n = 0;
    return p;
}

int pl_dict_copy(pl_copier *c, pl_dictionary *d)
{
    int fail = 0;
    d->index = NULL; /* the source batch's, in its arena */
#define COPY_TABLE(field, nfield, capfield, type)                                                  \
    do {                                                                                           \
        d->field = pl_copy_array(c, d->field, d->nfield, sizeof(type), &fail);                     \
        if (fail)                                                                                  \
            return -1;                                                                             \
        if (!d->field)                                                                             \
            d->nfield = 0;                                                                         \
        d->capfield = d->nfield;                                                                   \
    } while (0)
    COPY_TABLE(mappings, n_mappings, cap_mappings, pl_mapping);
    COPY_TABLE(locations, n_locations, cap_locations, pl_location);
    COPY_TABLE(functions, n_functions, cap_functions, pl_function);
    COPY_TABLE(links, n_links, cap_links, pl_link);
    COPY_TABLE(strings, n_strings, cap_strings, pl_bytes);
    COPY_TABLE(attributes, n_attributes, cap_attributes, pl_kvu);
    COPY_TABLE(stacks, n_stacks, cap_stacks, pl_stack);
#undef COPY_TABLE
    for (uint32_t i = 0; i < d->n_mappings; i++)
        d->mappings[i].attribute_indices = copy_i32(c, d->mappings[i].attribute_indices,
                                                    &d->mappings[i].n_attribute_indices, &fail);
    for (uint32_t i = 0; i < d->n_locations; i++) {
        pl_location *l = &d->locations[i];
        l->attribute_indices = copy_i32(c, l->attribute_indices, &l->n_attribute_indices, &fail);
        l->lines = pl_copy_array(c, l->lines, l->n_lines, sizeof(pl_line), &fail);
        if (!l->lines)
            l->n_lines = 0;
    }
    for (uint32_t i = 0; i < d->n_stacks; i++)
        d->stacks[i].location_indices =
            copy_i32(c, d->stacks[i].location_indices, &d->stacks[i].n_location_indices, &fail);
    if (fail)
        return -1;
    for (uint32_t i = 0; i < d->n_strings; i++)
        if (pl_copy_bytes(c, &d->strings[i]))
            return -1;
    for (uint32_t i = 0; i < d->n_attributes; i++)
        if (pl_copy_value(c, &d->attributes[i].value))
            return -1;
    return 0;
}

pl_bytes pl_dict_string(const pl_dictionary *dict, int32_t index)
{
    if (index < 0 || (uint32_t)index >= dict->n_strings)
        return (pl_bytes){NULL, 0};
    return dict->strings[index];
}
