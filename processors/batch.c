/*
 * batch.c: the `batch` processor: gathers small requests into larger ones.
 *
 *   batch:
 *     send_batch_size: 8192      # items (spans / samples) that trigger a send
 *     send_batch_max_size: 0     # upper bound per sent batch; 0 = no split
 *     timeout: 200ms             # send whatever is held after this long
 *     metadata_keys: [tenant]    # one batcher per distinct value set (tenant
 *                                # is always a key: tenants never mix)
 *     metadata_cardinality_limit: 1000
 *
 * Batches are held per (signal, downstream consumer, metadata values): the
 * same instance may sit in a traces and a profiles pipeline, and requests of
 * different tenants must never be merged. Logs and metrics are opaque
 * encoded requests here and pass straight through.
 *
 * Merging copies: every item of a held batch points into that batch's own
 * arena (or its request body), so a merged batch gets a new arena and the
 * spans are deep-copied into it; a single held batch that needs no split is
 * sent as it is, without copying. The same walk splits: it fills output
 * batches of at most send_batch_max_size items.
 *
 * Profiles cannot be concatenated (otlp-proto.md §7/§8: one dictionary per
 * request, everything refers to it by index). Each output batch gets its own
 * dictionary; an entry is copied in the first time something in the output
 * refers to it (so orphans are left behind), and entries are deduplicated by
 * content across the merged requests, which is where batching profiles pays:
 * the function names, stacks and locations of one service repeat from one
 * request to the next.
 *
 * Timing uses one libuv timer per instance, armed for the earliest deadline
 * among the groups. timeout: 0 sends at once (only send_batch_max_size
 * applies). Under the HARD memory state everything held is sent at once and
 * new batches pass straight through: holding data is what the limiter asks
 * us to stop doing. When a send triggered by an incoming request fails
 * downstream, that status is returned to the request (at-least-once: the
 * client retries); failures of timer-driven sends are logged and counted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/component.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strlist.h"

#include "processors/batch.config.h"

static int batch_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    batch_cfg *c = cfg_;
    /* the schema's minimum reports a negative one */
    return pl_cfg_check(ctx,
                        c->send_batch_max_size <= 0 || c->send_batch_max_size >= c->send_batch_size,
                        "send_batch_max_size",
                        "send_batch_max_size (%lld) must be 0 or at least send_batch_size (%lld)",
                        (long long)c->send_batch_max_size, (long long)c->send_batch_size);
}

#include "processors/batch.config.inc"

/* ---- deep copy into another arena (core/model.h's copier) -------------- */

/* String-index remapping for profiles (NULL for traces). */
typedef struct remap remap;
static int32_t remap_string(remap *m, int32_t old);

static int32_t remap_hook(void *m, int32_t old)
{
    return remap_string(m, old);
}

typedef pl_copier copier;

/* A copier into `arena`; `strings` non-NULL: *_strindex fields are remapped. */
static copier copier_for(pl_arena *arena, remap *strings)
{
    return (copier){arena, strings ? remap_hook : NULL, strings, false};
}

static pl_bytes copy_bytes(copier *c, pl_bytes b)
{
    pl_copy_bytes(c, &b);
    return b;
}

/* Grows an arena array by doubling; 0 or -1. */
/* Room for one more output element (lists start at 4). */
static int grow(pl_arena *a, void **items, uint32_t n, uint32_t *cap, size_t elem)
{
    return pl_arena_reserve(a, items, n, cap, elem, 4);
}

/* Appends to an output list a shallow copy of `src`, a resource or scope of
 * either signal, with its list of children (at children_off, count at
 * n_off) empty: the caller deep-copies its own parts and fills the
 * children. NULL on OOM. */
static void *push_shell(pl_arena *a, void **list, uint32_t *n, uint32_t *cap, const void *src,
                        size_t size, size_t children_off, size_t n_off)
{
    if (grow(a, list, *n, cap, size))
        return NULL;
    uint8_t *e = (uint8_t *)*list + (size_t)(*n)++ * size;
    memcpy(e, src, size);
    memset(e + children_off, 0, sizeof(void *));
    memset(e + n_off, 0, sizeof(uint32_t));
    return e;
}

#define PUSH_SHELL(a, list, n, cap, src, type, children)                                           \
    ((type *)push_shell((a), (void **)&(list), &(n), &(cap), (src), sizeof(type),                  \
                        offsetof(type, children), offsetof(type, n_##children)))

static void copy_metadata(copier *c, pl_batch *dst, const pl_batch *src, const pl_strlist *keys)
{
    if (!keys->n || !src->metadata.n)
        return;
    pl_kv *items = pl_arena_calloc(c->arena, keys->n, sizeof(pl_kv));
    if (!items) {
        c->oom = true;
        return;
    }
    uint32_t n = 0;
    for (size_t k = 0; k < keys->n; k++) {
        for (uint32_t i = 0; i < src->metadata.n; i++) {
            const pl_kv *kv = &src->metadata.items[i];
            if (pl_bytes_eq_cstr(kv->key, keys->items[k])) {
                items[n] = *kv;
                items[n].key = copy_bytes(c, kv->key);
                items[n].value.u.str = copy_bytes(c, kv->value.u.str);
                n++;
                break;
            }
        }
    }
    dst->metadata.items = items;
    dst->metadata.n = n;
}

/* ---- repacking: merge and split ----------------------------------------- */

/* Receives each output batch; returns its status. */
typedef struct emitter {
    pl_consumer *next;
    pl_status first_error;
    size_t batches;
    size_t failed_items;
    /* Write-ahead tags of the inputs (core/model.h), when they have any:
     * every output inherits them, and the last output goes on only after
     * the carrier let go, so that its commit is the one that completes the
     * log entries (exporters/queue_wal.h). */
    pl_batch *carrier;
    pl_batch *deferred;
} emitter;

static void emit_now(emitter *e, pl_batch *b)
{
    size_t items = pl_batch_items(b);
    pl_status st = pl_consumer_consume(e->next, b);
    e->batches++;
    if (st != PL_OK) {
        e->failed_items += items;
        if (e->first_error == PL_OK)
            e->first_error = st;
    }
}

static void emit(emitter *e, pl_batch *b)
{
    if (!e->carrier) {
        emit_now(e, b);
        return;
    }
    if (pl_batch_wal_inherit(b, e->carrier))
        pl_batch_wal_refused(e->carrier); /* untracked output: keep the entries */
    if (e->deferred)
        emit_now(e, e->deferred);
    e->deferred = b;
}

/* Moves the inputs' write-ahead tags onto a carrier that outlives them. */
static void carry_tags(emitter *e, pl_batch **in, size_t n)
{
    bool tagged = false;
    for (size_t i = 0; i < n && !tagged; i++)
        tagged = in[i]->wal != NULL;
    if (!tagged)
        return;
    e->carrier = pl_batch_new(in[0]->signal);
    if (!e->carrier) {
        /* Out of memory: the outputs go untagged, so the entries are kept
         * and replayed at the next start (at least once). */
        for (size_t i = 0; i < n; i++)
            pl_batch_wal_refused(in[i]);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (pl_batch_wal_inherit(e->carrier, in[i]))
            pl_batch_wal_refused(e->carrier);
        pl_batch_wal_handoff(in[i]);
    }
}

/* After the repack: `ok` false when it stopped half-way (the entries are
 * then kept for replay). */
static void release_tags(emitter *e, bool ok)
{
    if (!e->carrier)
        return;
    if (ok)
        pl_batch_wal_handoff(e->carrier);
    else
        pl_batch_wal_refused(e->carrier);
    pl_batch_free(e->carrier);
    e->carrier = NULL;
    if (e->deferred) {
        pl_batch *b = e->deferred;
        e->deferred = NULL;
        emit_now(e, b);
    }
}

typedef struct traces_out {
    pl_batch *b;
    uint32_t cap_resources, cap_scopes, cap_spans;
    size_t items;
    const pl_resource_spans *src_rs; /* source of the last output resource */
    const pl_scope_spans *src_ss;    /* source of the last output scope */
} traces_out;

static pl_status repack_traces(pl_batch **in, size_t n_in, size_t limit, const pl_strlist *mkeys,
                               emitter *em)
{
    traces_out o = {0};
    copier c = {0};
    uint64_t received = 0;
    for (size_t k = 0; k < n_in; k++)
        if (!received || (in[k]->received_unix_nano && in[k]->received_unix_nano < received))
            received = in[k]->received_unix_nano;
    for (size_t k = 0; k < n_in && !c.oom; k++) {
        const pl_traces *t = &in[k]->data.traces;
        for (uint32_t r = 0; r < t->n_resources && !c.oom; r++) {
            const pl_resource_spans *rs = &t->resources[r];
            for (uint32_t s = 0; s < rs->n_scopes && !c.oom; s++) {
                const pl_scope_spans *ss = &rs->scopes[s];
                /* Scopes without spans are kept too (same output resource). */
                uint32_t i = 0;
                do {
                    if (!o.b) {
                        o = (traces_out){0};
                        o.b = pl_batch_new(PL_SIGNAL_TRACES);
                        if (!o.b) {
                            c.oom = true;
                            break;
                        }
                        o.b->received_unix_nano = received;
                        c.arena = &o.b->arena;
                        copy_metadata(&c, o.b, in[0], mkeys);
                    }
                    pl_traces *ot = &o.b->data.traces;
                    if (o.src_rs != rs) {
                        pl_resource_spans *nr =
                            PUSH_SHELL(&o.b->arena, ot->resources, ot->n_resources, o.cap_resources,
                                       rs, pl_resource_spans, scopes);
                        if (!nr) {
                            c.oom = true;
                            break;
                        }
                        nr->schema_url = copy_bytes(&c, rs->schema_url);
                        pl_copy_resource(&c, &nr->resource);
                        o.src_rs = rs;
                        o.src_ss = NULL;
                        o.cap_scopes = 0;
                    }
                    pl_resource_spans *cr = &ot->resources[ot->n_resources - 1];
                    if (o.src_ss != ss) {
                        pl_scope_spans *ns = PUSH_SHELL(&o.b->arena, cr->scopes, cr->n_scopes,
                                                        o.cap_scopes, ss, pl_scope_spans, spans);
                        if (!ns) {
                            c.oom = true;
                            break;
                        }
                        ns->schema_url = copy_bytes(&c, ss->schema_url);
                        pl_copy_scope(&c, &ns->scope);
                        o.src_ss = ss;
                        o.cap_spans = 0;
                    }
                    pl_scope_spans *cs = &cr->scopes[cr->n_scopes - 1];
                    /* As many spans as fit in this output batch. */
                    uint32_t room = (uint32_t)(limit - o.items < ss->n_spans - i ? limit - o.items
                                                                                 : ss->n_spans - i);
                    if (room) {
                        pl_span *spans = pl_arena_grow(&o.b->arena, cs->spans, cs->n_spans,
                                                       cs->n_spans + room, sizeof(pl_span));
                        if (!spans) {
                            c.oom = true;
                            break;
                        }
                        memcpy(spans + cs->n_spans, ss->spans + i, room * sizeof(pl_span));
                        for (uint32_t j = 0; j < room; j++)
                            pl_copy_span(&c, &spans[cs->n_spans + j]);
                        cs->spans = spans;
                        cs->n_spans += room;
                        o.items += room;
                        i += room;
                    }
                    if (o.items >= limit) {
                        emit(em, o.b);
                        o.b = NULL;
                    }
                } while (i < ss->n_spans && !c.oom);
            }
            if (rs->n_scopes == 0 && !c.oom) {
                /* A resource with no scopes still travels. */
                if (!o.b) {
                    o = (traces_out){0};
                    o.b = pl_batch_new(PL_SIGNAL_TRACES);
                    if (!o.b) {
                        c.oom = true;
                        break;
                    }
                    c.arena = &o.b->arena;
                    copy_metadata(&c, o.b, in[0], mkeys);
                }
                pl_traces *ot = &o.b->data.traces;
                pl_resource_spans *nr = PUSH_SHELL(&o.b->arena, ot->resources, ot->n_resources,
                                                   o.cap_resources, rs, pl_resource_spans, scopes);
                if (!nr) {
                    c.oom = true;
                    break;
                }
                nr->schema_url = copy_bytes(&c, rs->schema_url);
                pl_copy_resource(&c, &nr->resource);
                o.src_rs = rs;
                o.src_ss = NULL;
            }
        }
    }
    if (c.oom) {
        pl_batch_free(o.b);
        return PL_ERR_NOMEM;
    }
    if (o.b)
        emit(em, o.b);
    return PL_OK;
}

/* ---- profiles: re-indexing into a new dictionary ------------------------ */

/* The output dictionary being filled, through its builder (core/dict.h),
 * whose indexes deduplicate every table. */
typedef struct dict_out {
    pl_batch *b;
    pl_dictionary *d;
    int32_t *scratch; /* a stack's remapped locations before interning */
    uint32_t cap_scratch;
    pl_line *lines; /* a location's remapped lines before interning */
    uint32_t cap_lines;
} dict_out;

/* old index -> new index (0 = not mapped yet; index 0 always maps to 0). */
struct remap {
    dict_out *out;
    const pl_dictionary *src;
    int32_t *strings, *functions, *mappings, *locations, *stacks, *links, *attributes;
    bool oom;
};

static bool in_range(int32_t i, uint32_t n)
{
    return i > 0 && (uint32_t)i < n;
}

/* Every remap_* starts alike: index 0 and indices out of range map to 0 (as
 * does anything after running out of memory), and an entry already remapped
 * answers from the cache. */
#define REMAP_CACHED(m, field, old)                                                                \
    do {                                                                                           \
        if (!in_range((old), (m)->src->n_##field) || (m)->oom)                                     \
            return 0;                                                                              \
        if ((m)->field[old])                                                                       \
            return (m)->field[old];                                                                \
    } while (0)

/* Every remap_* ends alike: the output index the builder gave (`got`, -1 on
 * OOM) is remembered as what `old` maps to. */
static int32_t remap_done(remap *m, int32_t *cache, int32_t old, int32_t got)
{
    if (got < 0) {
        m->oom = true;
        return 0;
    }
    cache[old] = got;
    return got;
}

#define OUT_ARENA(m) (&(m)->out->b->arena)

static int32_t remap_string(remap *m, int32_t old)
{
    REMAP_CACHED(m, strings, old);
    return remap_done(m, m->strings, old,
                      pl_dict_intern_string_copy(OUT_ARENA(m), m->out->d, m->src->strings[old]));
}

static int32_t remap_attribute(remap *m, int32_t old);

/* Remaps a list of attribute indices into new arena memory. */
static int32_t *remap_attr_list(remap *m, const int32_t *idx, uint32_t n)
{
    if (!n)
        return NULL;
    int32_t *out = pl_arena_alloc(OUT_ARENA(m), n * sizeof(int32_t));
    if (!out) {
        m->oom = true;
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        out[i] = remap_attribute(m, idx[i]);
    return out;
}

static int32_t remap_attribute(remap *m, int32_t old)
{
    REMAP_CACHED(m, attributes, old);
    const pl_kvu *a = &m->src->attributes[old];
    int32_t key = remap_string(m, a->key_strindex);
    int32_t unit = remap_string(m, a->unit_strindex);
    /* The value is copied into the output arena with its string indices
     * remapped, then interned. */
    copier c = copier_for(OUT_ARENA(m), m);
    pl_value v = a->value;
    pl_copy_value(&c, &v);
    if (c.oom || m->oom) {
        m->oom = true;
        return 0;
    }
    return remap_done(m, m->attributes, old,
                      pl_dict_intern_attribute(OUT_ARENA(m), m->out->d, key, v, unit));
}

static int32_t remap_function(remap *m, int32_t old)
{
    REMAP_CACHED(m, functions, old);
    pl_function f = m->src->functions[old];
    f.name_strindex = remap_string(m, f.name_strindex);
    f.system_name_strindex = remap_string(m, f.system_name_strindex);
    f.filename_strindex = remap_string(m, f.filename_strindex);
    if (m->oom)
        return 0;
    return remap_done(m, m->functions, old, pl_dict_intern_function(OUT_ARENA(m), m->out->d, &f));
}

static int32_t remap_mapping(remap *m, int32_t old)
{
    REMAP_CACHED(m, mappings, old);
    pl_mapping mp = m->src->mappings[old];
    mp.filename_strindex = remap_string(m, mp.filename_strindex);
    mp.attribute_indices = remap_attr_list(m, mp.attribute_indices, mp.n_attribute_indices);
    if (m->oom)
        return 0;
    return remap_done(m, m->mappings, old, pl_dict_intern_mapping(OUT_ARENA(m), m->out->d, &mp));
}

static int32_t remap_location(remap *m, int32_t old)
{
    REMAP_CACHED(m, locations, old);
    pl_location loc = m->src->locations[old];
    loc.mapping_index = remap_mapping(m, loc.mapping_index);
    dict_out *o = m->out;
    if (loc.n_lines > o->cap_lines) {
        pl_line *p = realloc(o->lines, loc.n_lines * sizeof(pl_line));
        if (!p) {
            m->oom = true;
            return 0;
        }
        o->lines = p;
        o->cap_lines = loc.n_lines;
    }
    for (uint32_t i = 0; i < loc.n_lines; i++) {
        o->lines[i] = loc.lines[i];
        o->lines[i].function_index = remap_function(m, loc.lines[i].function_index);
    }
    loc.lines = loc.n_lines ? o->lines : NULL; /* copied by the builder when new */
    loc.attribute_indices = remap_attr_list(m, loc.attribute_indices, loc.n_attribute_indices);
    if (m->oom)
        return 0;
    return remap_done(m, m->locations, old, pl_dict_intern_location(OUT_ARENA(m), m->out->d, &loc));
}

static int32_t remap_stack(remap *m, int32_t old)
{
    REMAP_CACHED(m, stacks, old);
    const pl_stack *st = &m->src->stacks[old];
    uint32_t n = st->n_location_indices;
    dict_out *o = m->out;
    if (n > o->cap_scratch) {
        int32_t *p = realloc(o->scratch, n * sizeof(int32_t));
        if (!p) {
            m->oom = true;
            return 0;
        }
        o->scratch = p;
        o->cap_scratch = n;
    }
    for (uint32_t i = 0; i < n; i++)
        o->scratch[i] = remap_location(m, st->location_indices[i]);
    if (m->oom)
        return 0;
    return remap_done(m, m->stacks, old, pl_dict_intern_stack(OUT_ARENA(m), o->d, o->scratch, n));
}

static int32_t remap_link(remap *m, int32_t old)
{
    REMAP_CACHED(m, links, old);
    return remap_done(m, m->links, old,
                      pl_dict_intern_link(OUT_ARENA(m), m->out->d, &m->src->links[old]));
}

static void remap_free(remap *m)
{
    free(m->strings);
    free(m->functions);
    free(m->mappings);
    free(m->locations);
    free(m->stacks);
    free(m->links);
    free(m->attributes);
}

static bool remap_init(remap *m, const pl_dictionary *src)
{
    memset(m, 0, sizeof(*m));
    m->src = src;
    m->strings = calloc(src->n_strings + 1, sizeof(int32_t));
    m->functions = calloc(src->n_functions + 1, sizeof(int32_t));
    m->mappings = calloc(src->n_mappings + 1, sizeof(int32_t));
    m->locations = calloc(src->n_locations + 1, sizeof(int32_t));
    m->stacks = calloc(src->n_stacks + 1, sizeof(int32_t));
    m->links = calloc(src->n_links + 1, sizeof(int32_t));
    m->attributes = calloc(src->n_attributes + 1, sizeof(int32_t));
    if (!m->strings || !m->functions || !m->mappings || !m->locations || !m->stacks || !m->links ||
        !m->attributes) {
        remap_free(m);
        return false;
    }
    return true;
}

/* Forgets every mapping (a new output dictionary starts). */
static void remap_reset(remap *m)
{
    const pl_dictionary *s = m->src;
    memset(m->strings, 0, (s->n_strings + 1) * sizeof(int32_t));
    memset(m->functions, 0, (s->n_functions + 1) * sizeof(int32_t));
    memset(m->mappings, 0, (s->n_mappings + 1) * sizeof(int32_t));
    memset(m->locations, 0, (s->n_locations + 1) * sizeof(int32_t));
    memset(m->stacks, 0, (s->n_stacks + 1) * sizeof(int32_t));
    memset(m->links, 0, (s->n_links + 1) * sizeof(int32_t));
    memset(m->attributes, 0, (s->n_attributes + 1) * sizeof(int32_t));
}

static void dict_out_free(dict_out *o)
{
    free(o->scratch);
    free(o->lines);
    memset(o, 0, sizeof(*o));
}

typedef struct profiles_out {
    dict_out dict;
    uint32_t cap_resources, cap_scopes, cap_profiles;
    size_t items;
    unsigned generation; /* bumped per output batch, to reset remaps */
    const pl_resource_profiles *src_rp;
    const pl_scope_profiles *src_sp;
    const pl_profile *src_prof;
} profiles_out;

/* The output scope for source scope `sp` of source resource `rp`: appends a
 * copy of the resource and of the scope (without their profiles) the first
 * time each is met, so consecutive samples of one scope share them. NULL on
 * OOM. */
static pl_scope_profiles *profiles_out_scope(profiles_out *o, copier *c,
                                             const pl_resource_profiles *rp,
                                             const pl_scope_profiles *sp)
{
    pl_batch *b = o->dict.b;
    pl_profiles *ops = &b->data.profiles;
    if (o->src_rp != rp) {
        pl_resource_profiles *nr = PUSH_SHELL(&b->arena, ops->resources, ops->n_resources,
                                              o->cap_resources, rp, pl_resource_profiles, scopes);
        if (!nr)
            return NULL;
        nr->schema_url = copy_bytes(c, rp->schema_url);
        pl_copy_resource(c, &nr->resource);
        o->src_rp = rp;
        o->src_sp = NULL;
        o->cap_scopes = 0;
    }
    pl_resource_profiles *cr = &ops->resources[ops->n_resources - 1];
    if (o->src_sp != sp) {
        pl_scope_profiles *ns = PUSH_SHELL(&b->arena, cr->scopes, cr->n_scopes, o->cap_scopes, sp,
                                           pl_scope_profiles, profiles);
        if (!ns)
            return NULL;
        ns->schema_url = copy_bytes(c, sp->schema_url);
        pl_copy_scope(c, &ns->scope);
        o->src_sp = sp;
        o->src_prof = NULL;
        o->cap_profiles = 0;
    }
    return &cr->scopes[cr->n_scopes - 1];
}

static bool profiles_out_open(profiles_out *o, pl_batch *first, const pl_strlist *mkeys,
                              uint64_t received)
{
    unsigned gen = o->generation + 1;
    dict_out keep = o->dict; /* keep the scratch buffer */
    memset(o, 0, sizeof(*o));
    o->generation = gen;
    o->dict.scratch = keep.scratch;
    o->dict.cap_scratch = keep.cap_scratch;
    o->dict.lines = keep.lines;
    o->dict.cap_lines = keep.cap_lines;
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    if (!b)
        return false;
    b->received_unix_nano = received;
    b->data.profiles.has_dictionary = true;
    o->dict.b = b;
    o->dict.d = &b->data.profiles.dict;
    copier c = copier_for(&b->arena, NULL);
    copy_metadata(&c, b, first, mkeys);
    if (c.oom || pl_dict_ensure_zero_entries(&b->arena, o->dict.d) != 0) {
        pl_batch_free(b);
        o->dict.b = NULL;
        return false;
    }
    return true;
}

/* Sends the current output batch (its dictionary's indexes go with it). */
static void profiles_out_emit(profiles_out *o, emitter *em)
{
    if (!o->dict.b)
        return;
    pl_batch *b = o->dict.b;
    o->dict.b = NULL;
    o->dict.d = NULL;
    emit(em, b);
}

static pl_status repack_profiles(pl_batch **in, size_t n_in, size_t limit, const pl_strlist *mkeys,
                                 emitter *em)
{
    profiles_out o = {0};
    uint64_t received = 0;
    bool oom = false;
    for (size_t k = 0; k < n_in; k++)
        if (!received || (in[k]->received_unix_nano && in[k]->received_unix_nano < received))
            received = in[k]->received_unix_nano;
    for (size_t k = 0; k < n_in && !oom; k++) {
        const pl_profiles *ps = &in[k]->data.profiles;
        remap m;
        if (!remap_init(&m, &ps->dict)) {
            oom = true;
            break;
        }
        unsigned remap_gen = 0;
        for (uint32_t r = 0; r < ps->n_resources && !oom; r++) {
            const pl_resource_profiles *rp = &ps->resources[r];
            for (uint32_t s = 0; s < rp->n_scopes && !oom; s++) {
                const pl_scope_profiles *sp = &rp->scopes[s];
                for (uint32_t p = 0; p < sp->n_profiles && !oom; p++) {
                    const pl_profile *prof = &sp->profiles[p];
                    uint32_t i = 0;
                    do {
                        if (!o.dict.b && !profiles_out_open(&o, in[0], mkeys, received)) {
                            oom = true;
                            break;
                        }
                        if (remap_gen != o.generation) {
                            remap_reset(&m);
                            remap_gen = o.generation;
                        }
                        m.out = &o.dict;
                        pl_batch *b = o.dict.b;
                        copier c = copier_for(&b->arena, &m);
                        pl_scope_profiles *cs = profiles_out_scope(&o, &c, rp, sp);
                        if (!cs) {
                            oom = true;
                            break;
                        }
                        if (o.src_prof != prof) {
                            pl_profile *np = PUSH_SHELL(&b->arena, cs->profiles, cs->n_profiles,
                                                        o.cap_profiles, prof, pl_profile, samples);
                            if (!np) {
                                oom = true;
                                break;
                            }
                            np->sample_type.type_strindex =
                                remap_string(&m, prof->sample_type.type_strindex);
                            np->sample_type.unit_strindex =
                                remap_string(&m, prof->sample_type.unit_strindex);
                            np->period_type.type_strindex =
                                remap_string(&m, prof->period_type.type_strindex);
                            np->period_type.unit_strindex =
                                remap_string(&m, prof->period_type.unit_strindex);
                            np->attribute_indices = remap_attr_list(&m, prof->attribute_indices,
                                                                    prof->n_attribute_indices);
                            /* The raw payload describes the whole profile: it
                             * goes with the part holding its first sample. */
                            if (i == 0) {
                                np->original_payload_format =
                                    copy_bytes(&c, prof->original_payload_format);
                                np->original_payload = copy_bytes(&c, prof->original_payload);
                            } else {
                                np->original_payload_format = (pl_bytes){NULL, 0};
                                np->original_payload = (pl_bytes){NULL, 0};
                            }
                            o.src_prof = prof;
                        }
                        pl_profile *cp = &cs->profiles[cs->n_profiles - 1];
                        uint32_t left = prof->n_samples - i;
                        uint32_t room = (uint32_t)(limit - o.items < left ? limit - o.items : left);
                        if (room) {
                            pl_sample *smp = pl_arena_alloc(&b->arena, room * sizeof(pl_sample));
                            if (!smp) {
                                oom = true;
                                break;
                            }
                            for (uint32_t j = 0; j < room; j++) {
                                const pl_sample *src = &prof->samples[i + j];
                                pl_sample *d = &smp[j];
                                *d = *src;
                                d->stack_index = remap_stack(&m, src->stack_index);
                                d->link_index = remap_link(&m, src->link_index);
                                d->attribute_indices = remap_attr_list(&m, src->attribute_indices,
                                                                       src->n_attribute_indices);
                                if (src->n_values) {
                                    d->values =
                                        pl_arena_alloc(&b->arena, src->n_values * sizeof(int64_t));
                                    if (!d->values) {
                                        oom = true;
                                        break;
                                    }
                                    memcpy(d->values, src->values, src->n_values * sizeof(int64_t));
                                }
                                if (src->n_timestamps) {
                                    d->timestamps_unix_nano = pl_arena_alloc(
                                        &b->arena, src->n_timestamps * sizeof(uint64_t));
                                    if (!d->timestamps_unix_nano) {
                                        oom = true;
                                        break;
                                    }
                                    memcpy(d->timestamps_unix_nano, src->timestamps_unix_nano,
                                           src->n_timestamps * sizeof(uint64_t));
                                }
                            }
                            /* Samples of one profile are contiguous in one
                             * output: append by growing the array. */
                            if (!oom) {
                                pl_sample *all =
                                    cp->n_samples
                                        ? pl_arena_grow(&b->arena, cp->samples, cp->n_samples,
                                                        cp->n_samples + room, sizeof(pl_sample))
                                        : smp;
                                if (!all) {
                                    oom = true;
                                    break;
                                }
                                if (all != smp)
                                    memcpy(all + cp->n_samples, smp, room * sizeof(pl_sample));
                                cp->samples = all;
                                cp->n_samples += room;
                            }
                            o.items += room;
                            i += room;
                        }
                        if (c.oom || m.oom)
                            oom = true;
                        if (!oom && o.items >= limit) {
                            profiles_out_emit(&o, em);
                            o.dict.b = NULL;
                        }
                    } while (i < prof->n_samples && !oom);
                }
                if (sp->n_profiles == 0 && !oom) {
                    /* Keep empty scopes as they came (rare; no re-indexing). */
                    if (!o.dict.b && !profiles_out_open(&o, in[0], mkeys, received)) {
                        oom = true;
                        break;
                    }
                    if (remap_gen != o.generation) {
                        remap_reset(&m);
                        remap_gen = o.generation;
                    }
                    m.out = &o.dict;
                    copier c = copier_for(&o.dict.b->arena, &m);
                    if (!profiles_out_scope(&o, &c, rp, sp))
                        oom = true;
                    if (c.oom || m.oom)
                        oom = true;
                }
            }
        }
        remap_free(&m);
    }
    if (oom) {
        pl_batch *b = o.dict.b;
        dict_out_free(&o.dict);
        pl_batch_free(b);
        return PL_ERR_NOMEM;
    }
    if (o.dict.b)
        profiles_out_emit(&o, em);
    dict_out_free(&o.dict);
    return PL_OK;
}

/* ---- the processor ------------------------------------------------------ */

typedef struct group {
    struct group *next_group;
    pl_signal signal;
    pl_consumer *next;
    char *meta; /* serialised metadata values ("" without metadata_keys) */
    size_t meta_len;
    pl_batch **pending;
    size_t n_pending, cap_pending;
    size_t items;
    uint64_t deadline; /* monotonic ns; valid while n_pending > 0 */
} group;

typedef struct batcher {
    char id[128];
    pl_stats *stats;
    const pl_host *host; /* its memory state */
    uv_loop_t *loop;
    uv_timer_t timer;
    bool timer_init;
    size_t send_size, max_size;
    uint64_t timeout_ns;
    pl_strlist metadata_keys;
    size_t cardinality_limit;
    group *groups;
    size_t n_groups;
    bool shutting_down;
    uint64_t *size_trigger, *timeout_trigger, *batches_sent, *send_failures, *card_refusals;
    int64_t *pending_gauge;
    uint64_t local[5];
    int64_t local_gauge;
} batcher;

static pl_status batch_create(const pl_create_settings *s, const void *config, void **out,
                              pl_err *err)
{
    const batch_cfg *c = config;
    if (c->send_batch_size < 0 || c->send_batch_max_size < 0 || c->timeout < 0)
        return pl_errf(err, PL_ERR_INVALID, "negative batch sizes or timeout");
    batcher *b = calloc(1, sizeof(*b));
    if (!b)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    snprintf(b->id, sizeof(b->id), "%s", s && s->id ? s->id : "batch");
    b->stats = s ? s->stats : NULL;
    b->loop = s ? s->loop : NULL;
    b->host = s ? s->host : NULL;
    b->send_size = (size_t)c->send_batch_size;
    b->max_size = (size_t)c->send_batch_max_size;
    b->timeout_ns = (uint64_t)c->timeout;
    b->cardinality_limit = (size_t)c->metadata_cardinality_limit;
    if (pl_strlist_copy(&b->metadata_keys, &c->metadata_keys) != 0) {
        free(b);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    /* Tenants are never merged, whatever metadata_keys says: "tenant" (the
     * X-Scope-OrgID a request arrived with) is always one of the keys, so
     * each tenant's data stays in batches of its own and keeps its tenant. */
    if (!pl_strlist_contains(&b->metadata_keys, PL_BYTES_LIT("tenant"))) {
        char **items = realloc(b->metadata_keys.items, (b->metadata_keys.n + 1) * sizeof(char *));
        char *t = items ? strdup("tenant") : NULL;
        if (items)
            b->metadata_keys.items = items;
        if (!t) {
            pl_strlist_free(&b->metadata_keys);
            free(b);
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
        items[b->metadata_keys.n++] = t;
    }
    uint64_t **counters[] = {&b->size_trigger, &b->timeout_trigger, &b->batches_sent,
                             &b->send_failures, &b->card_refusals};
    static const char *const names[] = {"batch_size_trigger_send", "timeout_trigger_send",
                                        "batches_sent", "send_failed_items",
                                        "metadata_cardinality_refusals"};
    static const char *const help[] = {
        "sends triggered by send_batch_size", "sends triggered by the timeout",
        "batches handed downstream", "items whose downstream send failed",
        "batches refused: too many distinct metadata combinations"};
    for (int i = 0; i < 5; i++) {
        *counters[i] = b->stats ? pl_stats_counter(b->stats, names[i], help[i]) : NULL;
        if (!*counters[i])
            *counters[i] = &b->local[i];
    }
    b->pending_gauge =
        b->stats ? pl_stats_gauge(b->stats, "pending_items", "items held, waiting to be sent")
                 : NULL;
    if (!b->pending_gauge)
        b->pending_gauge = &b->local_gauge;
    if (b->loop) {
        if (uv_timer_init(b->loop, &b->timer) != 0) {
            free(b);
            return pl_errf(err, PL_ERR_INTERNAL, "cannot create the batch timer");
        }
        b->timer.data = b;
        b->timer_init = true;
    }
    *out = b;
    return PL_OK;
}

static pl_status batch_start(void *self, pl_err *err)
{
    return PL_OK;
}

/* Serialises the values of metadata_keys: "v1\0v2\0" with a presence byte. */
static char *metadata_signature(const batcher *b, const pl_batch *batch, size_t *len)
{
    size_t n = 1;
    for (size_t k = 0; k < b->metadata_keys.n; k++) {
        pl_bytes v;
        n += 2;
        if (pl_batch_metadata_get(batch, b->metadata_keys.items[k], &v))
            n += v.len;
    }
    char *s = malloc(n);
    if (!s)
        return NULL;
    size_t o = 0;
    for (size_t k = 0; k < b->metadata_keys.n; k++) {
        pl_bytes v;
        if (pl_batch_metadata_get(batch, b->metadata_keys.items[k], &v)) {
            s[o++] = 1;
            memcpy(s + o, v.ptr, v.len);
            o += v.len;
        } else {
            s[o++] = 0;
        }
        s[o++] = 0;
    }
    s[o] = 0;
    *len = o;
    return s;
}

static group *find_group(batcher *b, pl_batch *batch, pl_consumer *next, bool *refused)
{
    *refused = false;
    size_t len;
    char *sig = metadata_signature(b, batch, &len);
    if (!sig)
        return NULL;
    for (group *g = b->groups; g; g = g->next_group) {
        if (g->signal == batch->signal && g->next == next && g->meta_len == len &&
            memcmp(g->meta, sig, len) == 0) {
            free(sig);
            return g;
        }
    }
    /* The limit counts combinations holding data, per signal (the Collector
     * has one batcher per signal). */
    if (b->cardinality_limit && b->metadata_keys.n) {
        size_t live = 0;
        for (group *g = b->groups; g; g = g->next_group)
            live += g->n_pending > 0 && g->signal == batch->signal;
        if (live >= b->cardinality_limit) {
            free(sig);
            *refused = true;
            return NULL;
        }
    }
    group *g = NULL;
    for (group **pp = &b->groups; *pp; pp = &(*pp)->next_group) {
        if ((*pp)->n_pending == 0 && b->n_groups > 64) { /* recycle an idle group */
            g = *pp;
            free(g->meta);
            break;
        }
    }
    if (!g) {
        g = calloc(1, sizeof(*g));
        if (!g) {
            free(sig);
            return NULL;
        }
        g->next_group = b->groups;
        b->groups = g;
        b->n_groups++;
    }
    g->signal = batch->signal;
    g->next = next;
    g->meta = sig;
    g->meta_len = len;
    return g;
}

/* Sends what a group holds; returns the first downstream error. */
static pl_status flush_group(batcher *b, group *g)
{
    if (!g->n_pending)
        return PL_OK;
    pl_batch **in = g->pending;
    size_t n = g->n_pending, items = g->items;
    g->pending = NULL;
    g->n_pending = g->cap_pending = 0;
    g->items = 0;
    *b->pending_gauge -= (int64_t)items;
    emitter em = {.next = g->next, .first_error = PL_OK};
    size_t limit = b->max_size ? b->max_size : SIZE_MAX;
    pl_status st = PL_OK;
    if (n == 1 && items <= limit) {
        emit(&em, in[0]); /* nothing to merge or split: no copy */
    } else {
        carry_tags(&em, in, n);
        st = in[0]->signal == PL_SIGNAL_TRACES
                 ? repack_traces(in, n, limit, &b->metadata_keys, &em)
                 : repack_profiles(in, n, limit, &b->metadata_keys, &em);
        release_tags(&em, st == PL_OK);
        for (size_t i = 0; i < n; i++)
            pl_batch_free(in[i]);
        if (st != PL_OK) {
            /* Out of memory half-way: the items not yet emitted are lost. */
            pl_error(b->id, "out of memory while merging batches; up to %zu %s dropped", items,
                     pl_signal_name(g->signal));
            pl_stats_add(b->stats, g->signal, PL_STAT_DROPPED, items);
        }
    }
    free(in);
    *b->batches_sent += em.batches;
    if (em.failed_items) {
        *b->send_failures += em.failed_items;
        pl_warn(b->id, "downstream refused %zu %s: %s", em.failed_items, pl_signal_name(g->signal),
                pl_status_name(em.first_error));
    }
    return st != PL_OK ? st : em.first_error;
}

static pl_status flush_all(batcher *b)
{
    pl_status first = PL_OK;
    for (group *g = b->groups; g; g = g->next_group) {
        pl_status st = flush_group(b, g);
        if (first == PL_OK)
            first = st;
    }
    return first;
}

static void on_timer(uv_timer_t *t);

static void arm_timer(batcher *b)
{
    if (!b->timer_init || b->shutting_down)
        return;
    uint64_t earliest = 0;
    for (group *g = b->groups; g; g = g->next_group)
        if (g->n_pending && (!earliest || g->deadline < earliest))
            earliest = g->deadline;
    if (!earliest) {
        uv_timer_stop(&b->timer);
        return;
    }
    uint64_t now = pl_time_mono_ns();
    uint64_t delay_ms = earliest > now ? (earliest - now + 999999) / 1000000 : 0;
    uv_timer_start(&b->timer, on_timer, delay_ms, 0);
}

static void on_timer(uv_timer_t *t)
{
    batcher *b = t->data;
    uint64_t now = pl_time_mono_ns();
    for (group *g = b->groups; g; g = g->next_group) {
        if (g->n_pending && g->deadline <= now + 500000) {
            (*b->timeout_trigger)++;
            flush_group(b, g);
        }
    }
    arm_timer(b);
}

static pl_status batch_consume(void *self, pl_batch *batch, pl_consumer *next)
{
    batcher *b = self;
    size_t items = pl_batch_items(batch);
    if (batch->signal != PL_SIGNAL_TRACES && batch->signal != PL_SIGNAL_PROFILES) {
        return pl_consumer_consume(next, batch);
    }
    bool empty = batch->signal == PL_SIGNAL_TRACES ? batch->data.traces.n_resources == 0
                                                   : batch->data.profiles.n_resources == 0;
    if (empty) { /* nothing to send */
        pl_batch_free(batch);
        return PL_OK;
    }
    if (pl_host_memory_state(b->host) == PL_MEMORY_HARD || b->shutting_down) {
        /* Hold nothing: release what we have, pass this one on. */
        pl_status st = flush_all(b);
        pl_status st2 = pl_consumer_consume(next, batch);
        arm_timer(b);
        return st2 != PL_OK ? st2 : st;
    }
    bool refused;
    group *g = find_group(b, batch, next, &refused);
    if (!g) {
        if (refused) {
            (*b->card_refusals)++;
            pl_warn(b->id, "more than %zu distinct metadata combinations held; refusing",
                    b->cardinality_limit);
        }
        pl_batch_free(batch);
        return refused ? PL_ERR_REFUSED : PL_ERR_NOMEM;
    }
    if (g->n_pending == g->cap_pending) {
        size_t cap = g->cap_pending ? g->cap_pending * 2 : 8;
        pl_batch **p = realloc(g->pending, cap * sizeof(*p));
        if (!p) {
            pl_batch_free(batch);
            return PL_ERR_NOMEM;
        }
        g->pending = p;
        g->cap_pending = cap;
    }
    if (g->n_pending == 0)
        g->deadline = pl_time_mono_ns() + b->timeout_ns;
    g->pending[g->n_pending++] = batch;
    g->items += items;
    *b->pending_gauge += (int64_t)items;
    if (b->timeout_ns == 0 || (b->send_size && g->items >= b->send_size)) {
        if (b->timeout_ns)
            (*b->size_trigger)++;
        pl_status st = flush_group(b, g);
        arm_timer(b);
        return st;
    }
    if (g->n_pending == 1)
        arm_timer(b);
    return PL_OK;
}

static void batch_shutdown(void *self)
{
    batcher *b = self;
    b->shutting_down = true;
    flush_all(b);
    if (b->timer_init && !uv_is_closing((uv_handle_t *)&b->timer)) {
        uv_timer_stop(&b->timer);
        uv_close((uv_handle_t *)&b->timer, NULL);
    }
}

static size_t batch_pending(void *self)
{
    batcher *b = self;
    return *b->pending_gauge > 0 ? (size_t)*b->pending_gauge : 0;
}

static void batch_destroy(void *self)
{
    batcher *b = self;
    if (!b)
        return;
    group *g = b->groups;
    while (g) {
        group *n = g->next_group;
        for (size_t i = 0; i < g->n_pending; i++)
            pl_batch_free(g->pending[i]);
        free(g->pending);
        free(g->meta);
        free(g);
        g = n;
    }
    pl_strlist_free(&b->metadata_keys);
    free(b);
}

const pl_component_type pl_processor_batch = {
    PL_COMPONENT_HEAD("batch", PL_KIND_PROCESSOR, PL_SIGNALS_ALL, &batch_section),
    .description = "merges small requests into larger ones (per signal and metadata), splits "
                   "oversized ones",
    PL_COMPONENT_LIFECYCLE(batch_create, batch_start, batch_shutdown, batch_destroy),
    .consume = batch_consume,
    .pending = batch_pending,
};
