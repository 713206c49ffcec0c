/*
 * correlation_late.c: summaries of departed spans, for samples that come
 * after their span left.
 *
 * An SDK that uploads late (a busy Node.js event loop, a retry) or a span
 * pushed out by a bound leaves samples behind their span. When a held span
 * leaves, a compact summary of it stays for `late_window`: span id, trace id,
 * times, name, local root name, service and the `span_attributes` values
 * (found on the span or its ancestors up to the local root, as for on-time
 * samples). A sample that finds no held span but a summary is enriched from
 * it like an on-time one, and counted in `late_linked_samples`.
 *
 * The store is a ring of LATE_GENS generations, each with its own entries,
 * span-id index, and interned strings. New summaries go into the newest; a
 * generation is opened every late_window / LATE_GENS, or when the newest
 * reaches its share of late_max_spans or late_max_bytes, and the oldest is
 * dropped whole once its last summary is older than late_window or a bound is
 * exceeded. Nothing is ever deleted from a table, so no tombstones, and
 * expiry costs one free() per table. A lookup looks in every generation,
 * newest first.
 *
 * Span ids are chosen by clients: the index hashes with the process key, and
 * at most LATE_SAME_ID summaries of one generation share a span id (more are
 * not kept), so that a flood of one id stays linear.
 */
#include "correlation_int.h"

#define LATE_GENS       8
#define LATE_SAME_ID    4
#define LATE_MAX_STRING 4096             /* longer names and values are not kept */
#define IDS_MAX_SPANS   ((1u << 24) - 2) /* summaries per generation (24-bit index) */

typedef struct late_str {
    uint32_t off, len;
} late_str;

typedef struct late_gen {
    late_span *spans;
    uint32_t n, cap;
    uint32_t n_dead; /* retired summaries (key 0): found no more, freed with the generation */
    uint32_t *ids;   /* span id -> (spans index + 1) << 8 | 8 bits of its hash; 0 empty */
    uint32_t ids_cap, n_ids; /* power of two, at most 3/4 full */
    late_str *strs;
    uint32_t n_strs, cap_strs;
    pl_htab str_index; /* string -> strs index + 1 */
    char *text;
    size_t text_len, text_cap;
    late_val *vals;
    uint32_t n_vals, cap_vals;
    uint64_t opened_ns, newest_ns;
    uint64_t serial; /* which opening of this ring slot (0: none), for summary refs */
} late_gen;

struct late_store {
    late_gen gens[LATE_GENS];
    uint32_t cur;
    size_t count, bytes;
    uint64_t window;
    size_t max_count, max_bytes;
    uint64_t serials; /* generations opened */
};

/* A reference to one summary, kept by the spilled entry it stands for, so
 * that a sample of a spilled (or packed) span finds the summary without
 * searching every generation: its index, its generation's ring slot, and
 * that generation's serial (a slot reopened or cleared has another, so a
 * reference to a summary that went is recognised, never followed). */
#define REF_IDX_BITS    24
#define REF_GEN_BITS    3
#define REF_SERIAL_MASK ((1ull << (64 - REF_IDX_BITS - REF_GEN_BITS)) - 1)
_Static_assert(IDS_MAX_SPANS < (1u << REF_IDX_BITS), "a summary index fits a reference");
_Static_assert(LATE_GENS <= (1u << REF_GEN_BITS), "a ring slot fits a reference");

static size_t gen_bytes(const late_gen *g)
{
    return (size_t)g->cap * sizeof(late_span) + (size_t)g->ids_cap * 4 +
           (size_t)g->cap_strs * sizeof(late_str) + (size_t)g->str_index.cap * 8 + g->text_cap +
           (size_t)g->cap_vals * sizeof(late_val);
}

static void gen_clear(struct late_store *ls, late_gen *g)
{
    ls->count -= g->n - g->n_dead;
    ls->bytes -= gen_bytes(g);
    free(g->spans);
    free(g->ids);
    free(g->strs);
    pl_htab_free(&g->str_index);
    free(g->text);
    free(g->vals);
    memset(g, 0, sizeof(*g));
}

int pl_corr_late_init(correlation *self)
{
    if (self->cfg.late_window <= 0 || self->cfg.late_max_spans <= 0 || !self->cfg.late_max_bytes)
        return 0;
    struct late_store *ls = calloc(1, sizeof(*ls));
    if (!ls)
        return -1;
    ls->window = (uint64_t)self->cfg.late_window;
    ls->max_count = (size_t)self->cfg.late_max_spans;
    ls->max_bytes = (size_t)self->cfg.late_max_bytes;
    self->late = ls;
    return 0;
}

/* The summaries of spilled spans are their batches' stand-ins while on
 * disk, and a spilled span leaves a second, fresh summary when it is read
 * back: room for both comes on top of late_max_spans / late_max_bytes, so
 * spilling does not shorten what is kept for late samples (the generations
 * go oldest first, whatever they hold). */
void pl_corr_late_room_for(correlation *self, size_t spilled)
{
    struct late_store *ls = self->late;
    if (!ls)
        return;
    /* Retired summaries (pl_corr_late_retire) keep their bytes until their
     * generation goes: room for them too, or they would push live ones out. */
    size_t dead = 0;
    for (int i = 0; i < LATE_GENS; i++)
        dead += ls->gens[i].n_dead;
    size_t each = ls->count + dead ? ls->bytes / (ls->count + dead) : 160;
    ls->max_count = (size_t)self->cfg.late_max_spans + 2 * spilled;
    ls->max_bytes = (size_t)self->cfg.late_max_bytes + (2 * spilled + dead) * each;
}

void pl_corr_late_free(correlation *self)
{
    struct late_store *ls = self->late;
    if (!ls)
        return;
    for (int i = 0; i < LATE_GENS; i++)
        gen_clear(ls, &ls->gens[i]);
    free(ls);
    self->late = NULL;
}

size_t pl_corr_late_count(const correlation *self)
{
    return self->late ? self->late->count : 0;
}

size_t pl_corr_late_bytes(const correlation *self)
{
    return self->late ? self->late->bytes + sizeof(struct late_store) : 0;
}

/* Drops generations whose newest summary is older than the window, and the
 * oldest ones while a bound is exceeded (never the newest). */
void pl_corr_late_expire(correlation *self, uint64_t now)
{
    struct late_store *ls = self->late;
    if (!ls)
        return;
    for (uint32_t k = 1; k <= LATE_GENS; k++) {
        uint32_t i = (ls->cur + k) % LATE_GENS; /* oldest first */
        late_gen *g = &ls->gens[i];
        if (!g->n && !g->cap)
            continue;
        bool old = sat_add(g->newest_ns, ls->window) <= now;
        bool over = i != ls->cur && (ls->count > ls->max_count || ls->bytes > ls->max_bytes);
        if (old || over)
            gen_clear(ls, g);
    }
}

/* Opens a new generation when the newest has its share of time or room. */
static late_gen *gen_for_add(correlation *self, uint64_t now)
{
    struct late_store *ls = self->late;
    late_gen *g = &ls->gens[ls->cur];
    uint64_t span = ls->window / LATE_GENS;
    /* Retired summaries take no share of the count (their bytes still do). */
    bool full = g->n - g->n_dead >= ls->max_count / LATE_GENS + 1 || g->n >= IDS_MAX_SPANS ||
                gen_bytes(g) >= ls->max_bytes / LATE_GENS + 4096;
    if (g->n && (now >= sat_add(g->opened_ns, span) || full)) {
        ls->cur = (ls->cur + 1) % LATE_GENS;
        g = &ls->gens[ls->cur];
        gen_clear(ls, g); /* the oldest goes when the ring comes round */
    }
    if (!g->n) {
        g->opened_ns = now;
        ls->serials = (ls->serials + 1) & REF_SERIAL_MASK;
        if (!ls->serials)
            ls->serials = 1;
        g->serial = ls->serials;
    }
    return g;
}

/* Grows an array to hold `need` elements, doubling, but to no more than
 * `most` when that is enough (a generation's summaries stop at its share of
 * late_max_spans: doubling past it left up to half of the array unused). */
static bool grow_upto(void **items, uint32_t *cap, uint32_t need, uint32_t most, size_t elem,
                      size_t *bytes)
{
    if (need <= *cap)
        return true;
    uint32_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    if (c > most && most >= need)
        c = most;
    void *p = realloc(*items, (size_t)c * elem);
    if (!p)
        return false;
    *bytes += (size_t)(c - *cap) * elem;
    *items = p;
    *cap = c;
    return true;
}

static bool grow(void **items, uint32_t *cap, uint32_t need, size_t elem, size_t *bytes)
{
    return grow_upto(items, cap, need, UINT32_MAX, elem, bytes);
}

/* The most summaries the current generation takes (see gen_for_add). */
static uint32_t gen_share(const struct late_store *ls)
{
    size_t n = ls->max_count / LATE_GENS + 1;
    return n < IDS_MAX_SPANS ? (uint32_t)n : IDS_MAX_SPANS;
}

typedef struct str_key {
    const late_gen *g;
    pl_bytes s;
} str_key;

static bool str_eq(const void *ctx, uint32_t val)
{
    const str_key *k = ctx;
    const late_str *s = &k->g->strs[val - 1];
    return s->len == k->s.len && memcmp(k->g->text + s->off, k->s.ptr, s->len) == 0;
}

/* Interns s in generation g: its id (index + 1), 0 when empty, too long or
 * out of memory. */
static uint32_t gen_string(struct late_store *ls, late_gen *g, pl_bytes s)
{
    if (!s.len || s.len > LATE_MAX_STRING)
        return 0;
    uint32_t h = (uint32_t)pl_hash_bytes(s.ptr, s.len);
    str_key k = {g, s};
    if (g->n_strs >= LATE_MAX_STRINGS)
        return pl_htab_get(&g->str_index, h, str_eq, &k); /* known ones still resolve */
    size_t before = gen_bytes(g), dummy = 0;
    uint32_t id = 0;
    uint32_t *slot = pl_htab_slot(&g->str_index, h, str_eq, &k);
    if (!slot || *slot) {
        id = slot ? *slot : 0;
    } else if (grow((void **)&g->strs, &g->cap_strs, g->n_strs + 1, sizeof(late_str), &dummy)) {
        if (g->text_len + s.len > g->text_cap) {
            size_t c = g->text_cap ? g->text_cap : 4096;
            while (c < g->text_len + s.len)
                c *= 2;
            char *t = realloc(g->text, c);
            if (t) {
                g->text = t;
                g->text_cap = c;
            }
        }
        if (g->text_len + s.len <= g->text_cap) {
            memcpy(g->text + g->text_len, s.ptr, s.len);
            g->strs[g->n_strs++] = (late_str){(uint32_t)g->text_len, s.len};
            g->text_len += s.len;
            *slot = id = g->n_strs;
            pl_htab_added(&g->str_index, slot, h);
        }
    }
    /* Every table that grew is counted, whether or not the string went in
     * (gen_clear takes gen_bytes off again). */
    ls->bytes += gen_bytes(g) - before;
    return id;
}

static pl_bytes gen_text(const late_gen *g, uint32_t id)
{
    if (!id || id > g->n_strs)
        return (pl_bytes){NULL, 0};
    const late_str *s = &g->strs[id - 1];
    return (pl_bytes){(const uint8_t *)g->text + s->off, s->len};
}

/* The span_attributes values of summary s of generation g (NULL: none). */
static const late_val *span_vals(const correlation *self, const late_gen *g, const late_span *s)
{
    size_t nk = self->n_span_attr_keys < 64 ? self->n_span_attr_keys : 64;
    return nk ? &g->vals[(size_t)(s - g->spans) * nk] : NULL;
}

/* Which generation holds summary ls (for its strings). */
static const late_gen *gen_of(const correlation *self, const late_span *s)
{
    for (int i = 0; i < LATE_GENS; i++) {
        const late_gen *g = &self->late->gens[i];
        if (g->n && s >= g->spans && s < g->spans + g->n)
            return g;
    }
    return NULL;
}

typedef struct id_key_ctx {
    const late_gen *g;
    uint64_t key;
    const uint8_t *trace; /* NULL: any */
    bool has_time;
    uint64_t lo, hi, skew;
    uint32_t same; /* insert: summaries seen with this key */
    bool insert;
} id_key_ctx;

static bool id_eq(const void *ctx, uint32_t val)
{
    id_key_ctx *k = (id_key_ctx *)ctx;
    const late_span *s = &k->g->spans[val - 1];
    if (s->key != k->key)
        return false;
    if (k->insert)
        return ++k->same >= LATE_SAME_ID; /* stops the probe: no room for this id */
    if (k->trace && s->has_trace && memcmp(s->trace_id, k->trace, 16) != 0)
        return false;
    if (k->has_time && (s->start || s->end)) {
        uint64_t a = s->start > k->skew ? s->start - k->skew : 0;
        if (!(k->lo <= sat_add(s->end, k->skew) && k->hi >= a))
            return false;
    }
    return true;
}

/* The span-id index of a generation: 4 bytes a slot, the summary's index
 * and 8 bits of the keyed hash (most probes of other ids stop there, without
 * touching the summary), at most three quarters full. The home slot comes
 * from the hash's low bits. */
static uint32_t ids_get(const late_gen *g, uint32_t h, id_key_ctx *c)
{
    if (!g->ids_cap)
        return 0;
    uint32_t mask = g->ids_cap - 1, i = h & mask, tag = h >> 24;
    for (; g->ids[i]; i = (i + 1) & mask)
        if ((g->ids[i] & 0xff) == tag && id_eq(c, g->ids[i] >> 8))
            return g->ids[i] >> 8;
    return 0;
}

static bool ids_grow(late_gen *g, uint32_t cap)
{
    uint32_t *t = calloc(cap, sizeof(uint32_t));
    if (!t)
        return false;
    for (uint32_t i = 0; i < g->ids_cap; i++) {
        uint32_t v = g->ids[i];
        if (!v)
            continue;
        uint32_t j = (uint32_t)id_hash(g->spans[(v >> 8) - 1].key) & (cap - 1);
        while (t[j])
            j = (j + 1) & (cap - 1);
        t[j] = v;
    }
    free(g->ids);
    g->ids = t;
    g->ids_cap = cap;
    return true;
}

/* The empty slot for a new summary of c->key; NULL when out of memory or
 * LATE_SAME_ID summaries of this generation have the id already. */
static uint32_t *ids_slot(late_gen *g, uint32_t h, id_key_ctx *c)
{
    if ((uint64_t)(g->n_ids + 1) * 4 > (uint64_t)g->ids_cap * 3 &&
        !ids_grow(g, g->ids_cap ? g->ids_cap * 2 : 64))
        return NULL;
    uint32_t mask = g->ids_cap - 1, i = h & mask, tag = h >> 24;
    for (; g->ids[i]; i = (i + 1) & mask)
        if ((g->ids[i] & 0xff) == tag && id_eq(c, g->ids[i] >> 8))
            return NULL;
    return &g->ids[i];
}

/* A departed span's summary for a sample (span id, trace id when known,
 * time when known); NULL when none. */
const late_span *pl_corr_late_find(correlation *self, uint64_t key, const uint8_t *trace,
                                   bool has_time, uint64_t lo, uint64_t hi)
{
    struct late_store *ls = self->late;
    if (!ls || !ls->count)
        return NULL;
    uint32_t h = (uint32_t)id_hash(key);
    for (uint32_t k = 0; k < LATE_GENS; k++) {
        const late_gen *g = &ls->gens[(ls->cur + LATE_GENS - k) % LATE_GENS];
        if (!g->n)
            continue;
        id_key_ctx c = {g, key, trace, has_time, lo, hi, self->skew, 0, false};
        uint32_t v = ids_get(g, h, &c);
        if (v)
            return &g->spans[v - 1];
    }
    return NULL;
}

/* Retires the summary left when a span's batch was packed
 * (hold_compression), as the span leaves with a fresh one: one summary per
 * span, aged from its departure. Its key becomes 0 (no span id is 0), so it
 * matches nothing; its memory goes with its generation. */
void pl_corr_late_retire(correlation *self, uint64_t key, const uint8_t *trace)
{
    struct late_store *ls = self->late;
    if (!ls || !ls->count)
        return;
    uint32_t h = (uint32_t)id_hash(key);
    for (uint32_t k = 0; k < LATE_GENS; k++) {
        late_gen *g = &ls->gens[(ls->cur + LATE_GENS - k) % LATE_GENS];
        if (!g->n)
            continue;
        id_key_ctx c = {g, key, trace, false, 0, 0, self->skew, 0, false};
        uint32_t v = ids_get(g, h, &c);
        if (v) {
            g->spans[v - 1].key = 0;
            g->n_dead++;
            ls->count--;
            return;
        }
    }
}

static bool scalar(const pl_value *v)
{
    return v->type == PL_VALUE_STRING || v->type == PL_VALUE_INT || v->type == PL_VALUE_DOUBLE ||
           v->type == PL_VALUE_BOOL;
}

/* Keeps a summary of held span `e` (about to leave) for late samples. Its
 * reference (see REF_IDX_BITS; 0 when not added). *only: it is the only
 * summary with this span id in its generation (else a lookup could find
 * another first). A spilled entry with e's id may rely on its own summary
 * being the newest with the id, which no longer holds: when e is not in the
 * span table, the caller calls pl_corr_not_alone. */
uint64_t pl_corr_late_add(correlation *self, span_entry *e, uint64_t now, bool *only)
{
    struct late_store *ls = self->late;
    if (only)
        *only = false;
    if (!ls)
        return 0;
    const pl_span *sp = e->span;
    late_gen *g = gen_for_add(self, now);
    uint32_t h = (uint32_t)id_hash(e->key);
    size_t before = gen_bytes(g);
    id_key_ctx c = {g, e->key, NULL, false, 0, 0, 0, 0, true};
    uint32_t *slot = ids_slot(g, h, &c);
    size_t dummy = 0;
    if (!slot || *slot ||
        !grow_upto((void **)&g->spans, &g->cap, g->n + 1, gen_share(ls), sizeof(late_span),
                   &dummy)) {
        ls->bytes += gen_bytes(g) - before;
        return 0; /* out of memory, or too many summaries with this span id */
    }
    ls->bytes += gen_bytes(g) - before;
    late_span s;
    memset(&s, 0, sizeof(s));
    s.key = e->key;
    s.service = e->service;
    s.start = sp->start_time_unix_nano;
    s.end = sp->end_time_unix_nano;
    if (trace_id_valid(sp->trace_id, sp->trace_id_len)) {
        memcpy(s.trace_id, sp->trace_id, 16);
        s.has_trace = true;
    }
    s.name = gen_string(ls, g, sp->name);

    /* The local root and the span_attributes values, as for on-time samples:
     * up the held ancestors of the same service; a parent that already left
     * hands over what its own summary found. */
    const pl_span *chain[MAX_ANCESTRY];
    int n_chain = 0;
    chain[n_chain++] = sp;
    const pl_span *root = sp;
    const late_span *gone_parent = NULL;
    while (n_chain < MAX_ANCESTRY) {
        if (!span_id_valid(root->parent_span_id, root->parent_span_id_len))
            break;
        uint64_t pkey = id_key(root->parent_span_id);
        span_entry *p = pl_corr_find_span(self, pkey, pl_corr_span_trace(root), true, false);
        if (!p) {
            const late_span *lp =
                pl_corr_late_find(self, pkey, pl_corr_span_trace(root), false, 0, 0);
            if (lp && lp->service == e->service)
                gone_parent = lp;
            break;
        }
        if (p->service != e->service)
            break;
        root = p->span;
        chain[n_chain++] = root;
    }
    const late_gen *pg = gone_parent ? gen_of(self, gone_parent) : NULL;
    if (pg)
        s.root = gen_string(ls, g, gen_text(pg, gone_parent->root));
    else
        s.root = root == sp ? s.name : gen_string(ls, g, root->name);
    size_t nk = self->n_span_attr_keys < 64 ? self->n_span_attr_keys : 64;
    before = gen_bytes(g);
    bool vals_ok = !nk || grow_upto((void **)&g->vals, &g->cap_vals, g->n_vals + (uint32_t)nk,
                                    gen_share(ls) * (uint32_t)nk, sizeof(late_val), &dummy);
    ls->bytes += gen_bytes(g) - before;
    if (!vals_ok)
        return 0; /* out of memory: the values follow the summaries in step */
    const late_val *gone_vals = pg ? span_vals(self, pg, gone_parent) : NULL;
    for (size_t k = 0; k < nk; k++) {
        pl_bytes key = self->span_attr_keys[k];
        late_val v;
        memset(&v, 0, sizeof(v));
        for (int depth = 0; depth < n_chain; depth++) {
            pl_kv *kv = pl_attrs_find(&chain[depth]->attrs, (const char *)key.ptr, key.len);
            if (kv && scalar(&kv->value)) {
                v.type = (uint8_t)kv->value.type;
                if (kv->value.type == PL_VALUE_STRING) {
                    v.u.str = gen_string(ls, g, kv->value.u.str);
                    if (!v.u.str)
                        v.type = 0;
                } else if (kv->value.type == PL_VALUE_INT) {
                    v.u.i = kv->value.u.i;
                } else if (kv->value.type == PL_VALUE_DOUBLE) {
                    v.u.d = kv->value.u.d;
                } else {
                    v.u.b = kv->value.u.b;
                }
                break;
            }
        }
        if (!v.type && gone_vals) {
            v = gone_vals[k];
            if (v.type == PL_VALUE_STRING) {
                v.u.str = gen_string(ls, g, gen_text(pg, v.u.str));
                if (!v.u.str)
                    v.type = 0;
            }
        }
        g->vals[g->n_vals++] = v;
    }
    /* Only the string tables changed since: the id slot is still the one. */
    g->spans[g->n++] = s;
    *slot = g->n << 8 | h >> 24;
    g->n_ids++;
    if (now > g->newest_ns)
        g->newest_ns = now;
    ls->count++;
    if (only)
        *only = c.same == 0;
    return g->serial << (REF_IDX_BITS + REF_GEN_BITS) | (uint64_t)ls->cur << REF_IDX_BITS |
           (g->n - 1);
}

/* The summary reference `ref` names, if it is still there (NULL: gone). */
static const late_span *ref_summary(const struct late_store *ls, uint64_t ref, uint64_t key)
{
    const late_gen *g = &ls->gens[(ref >> REF_IDX_BITS) & (LATE_GENS - 1)];
    uint32_t idx = (uint32_t)(ref & ((1u << REF_IDX_BITS) - 1));
    if (!ref || g->serial != ref >> (REF_IDX_BITS + REF_GEN_BITS) || idx >= g->n ||
        g->spans[idx].key != key)
        return NULL;
    return &g->spans[idx];
}

/* The summary spilled entry e keeps its span's details in (NULL: none, or
 * gone with its generation). */
const late_span *pl_corr_late_ref_summary(const correlation *self, const span_entry *e)
{
    return self->late && e->late_ref ? ref_summary(self->late, e->late_ref, e->key) : NULL;
}

/* For a sample (trace id when known, time when known) of spilled entry e:
 * its span's own summary when the sample matches it with the usual join
 * rule (as pl_corr_late_find tests a summary); NULL when not, or when the
 * summary is gone. */
const late_span *pl_corr_late_ref_match(correlation *self, const span_entry *e,
                                        const uint8_t *trace, bool has_time, uint64_t lo,
                                        uint64_t hi)
{
    const late_span *s = pl_corr_late_ref_summary(self, e);
    if (!s)
        return NULL;
    const late_gen *g = &self->late->gens[(e->late_ref >> REF_IDX_BITS) & (LATE_GENS - 1)];
    id_key_ctx c = {g, e->key, trace, has_time, lo, hi, self->skew, 0, false};
    return id_eq(&c, (uint32_t)(s - g->spans) + 1) ? s : NULL;
}

/* Asks for the lines of the summary `ref` names that linking reads (the
 * summary, and with `vals` its span_attributes values): a prefetch only
 * (correlation_warm.c). */
void pl_corr_late_ref_prefetch(const correlation *self, uint64_t ref, bool vals)
{
    const struct late_store *ls = self->late;
    const late_gen *g = ls ? &ls->gens[(ref >> REF_IDX_BITS) & (LATE_GENS - 1)] : NULL;
    uint32_t idx = (uint32_t)(ref & ((1u << REF_IDX_BITS) - 1));
    if (!g || idx >= g->n)
        return;
    const char *p = (const char *)&g->spans[idx];
    __builtin_prefetch(p);
    __builtin_prefetch(p + sizeof(late_span) - 1);
    size_t nk = self->n_span_attr_keys < 64 ? self->n_span_attr_keys : 64;
    if (vals && nk) {
        const char *q = (const char *)&g->vals[(size_t)idx * nk];
        __builtin_prefetch(q);
        __builtin_prefetch(q + nk * sizeof(late_val) - 1);
    }
}

/* The labels of a summary, as build_span_labels makes them for a held span:
 * span name, local root name, service.name, then the span_attributes found.
 * Strings point into the store (valid until the next release). */
size_t pl_corr_late_labels(correlation *self, const late_span *s, label *items, size_t max)
{
    const late_gen *g = gen_of(self, s);
    size_t n = 0;
    if (!g || max < 3)
        return 0;
    items[n++] = (label){self->names[NAME_SPAN_NAME], pl_value_string(gen_text(g, s->name)), 0};
    items[n++] =
        (label){self->names[NAME_ROOT_SPAN_NAME], pl_value_string(gen_text(g, s->root)), 1};
    pl_bytes svc = pl_corr_service_name(self, s->service);
    if (svc.len)
        items[n++] = (label){self->names[NAME_SERVICE_NAME], pl_value_string(svc), 2};
    const late_val *vals = span_vals(self, g, s);
    size_t nk = self->n_span_attr_keys < 64 ? self->n_span_attr_keys : 64;
    for (size_t k = 0; vals && k < nk && n < max; k++) {
        const late_val *v = &vals[k];
        pl_value val;
        memset(&val, 0, sizeof(val));
        switch (v->type) {
        case PL_VALUE_STRING:
            val = pl_value_string(gen_text(g, v->u.str));
            break;
        case PL_VALUE_INT:
            val = pl_value_int(v->u.i);
            break;
        case PL_VALUE_DOUBLE:
            val.type = PL_VALUE_DOUBLE;
            val.u.d = v->u.d;
            break;
        case PL_VALUE_BOOL:
            val.type = PL_VALUE_BOOL;
            val.u.b = v->u.b;
            break;
        default:
            continue;
        }
        items[n++] = (label){self->span_attr_keys[k], val, 3 + (uint32_t)k};
    }
    return n;
}

/* What the labels pl_corr_late_labels makes of summary s depend on, and its
 * hash: its generation, name, root name, service and span_attributes
 * values. Within one linking session (the store unchanged) equal keys give
 * equal labels. */
uint64_t pl_corr_late_labels_key(const correlation *self, const late_span *s, late_labels_key *k)
{
    const late_gen *g = gen_of(self, s);
    k->gen = g;
    k->ids = (uint64_t)s->name | (uint64_t)s->root << 23 | (uint64_t)s->service << 47;
    k->vals = g ? span_vals(self, g, s) : NULL;
    k->n_vals = k->vals ? (uint32_t)(self->n_span_attr_keys < 64 ? self->n_span_attr_keys : 64) : 0;
    uint64_t h = pl_mix64((uintptr_t)g ^ pl_mix64(k->ids));
    const uint8_t *p = (const uint8_t *)k->vals;
    for (size_t left = k->n_vals * sizeof(late_val); left;) {
        uint64_t w = 0;
        size_t n = left < 8 ? left : 8;
        memcpy(&w, p, n);
        h = pl_mix64(h ^ w);
        p += n;
        left -= n;
    }
    return h;
}

bool pl_corr_late_labels_key_eq(const late_labels_key *a, const late_labels_key *b)
{
    if (a->gen != b->gen || a->ids != b->ids || a->n_vals != b->n_vals)
        return false;
    for (uint32_t k = 0; k < a->n_vals; k++) /* (whole values: they are written zeroed) */
        if (a->vals[k].type != b->vals[k].type || a->vals[k].u.i != b->vals[k].u.i)
            return false;
    return true;
}

/* For a held span whose ancestor already left: the local root's name and
 * the span_attributes value k its summary holds (strings point into the
 * store, valid until the next release). */
pl_bytes pl_corr_late_root_name(correlation *self, const late_span *s)
{
    const late_gen *g = gen_of(self, s);
    return g ? gen_text(g, s->root) : (pl_bytes){NULL, 0};
}

bool pl_corr_late_attr(correlation *self, const late_span *s, size_t k, pl_value *out)
{
    const late_gen *g = gen_of(self, s);
    if (!g || k >= self->n_span_attr_keys || k >= 64)
        return false;
    const late_val *v = &span_vals(self, g, s)[k];
    memset(out, 0, sizeof(*out));
    switch (v->type) {
    case PL_VALUE_STRING:
        *out = pl_value_string(gen_text(g, v->u.str));
        return true;
    case PL_VALUE_INT:
        *out = pl_value_int(v->u.i);
        return true;
    case PL_VALUE_DOUBLE:
        out->type = PL_VALUE_DOUBLE;
        out->u.d = v->u.d;
        return true;
    case PL_VALUE_BOOL:
        out->type = PL_VALUE_BOOL;
        out->u.b = v->u.b;
        return true;
    default:
        return false;
    }
}
