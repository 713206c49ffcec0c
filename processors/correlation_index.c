/* correlation_index.c: see correlation.c for the design. */
#include "correlation_int.h"
#include <sys/mman.h>

/* ---- the span and pending tables ------------------------------------------------------ */

/* Both are open-addressing tables (linear probing, power-of-two capacity,
 * load at most one half) of fixed-size entries whose first 8 bytes are the
 * span id key (0 = empty slot). The generic parts below take the entry size;
 * keys are read with memcpy, so either entry type goes through them. */

static inline uint64_t slot_key(const void *slots, size_t elem, uint32_t i)
{
    uint64_t k;
    memcpy(&k, (const char *)slots + (size_t)i * elem, sizeof(k));
    return k;
}

static inline uint32_t slot_home(uint64_t key, uint32_t mask)
{
    return (uint32_t)id_hash(key) & mask;
}

/* A copy of the table in `cap` slots (a power of two that holds all
 * entries); NULL when out of memory or cap is out of range. */
static void *table_rehash(const void *slots, uint32_t mask, size_t elem, uint64_t cap)
{
    if (cap > (1u << 31) || cap < 1024)
        return NULL;
    char *bigger = calloc(cap, elem);
    if (!bigger)
        return NULL;
    uint32_t bmask = (uint32_t)cap - 1;
    for (uint32_t i = 0; i <= mask; i++) {
        uint64_t ahead = slot_key(slots, elem, (i + 16) & mask);
        if (ahead)
            __builtin_prefetch(bigger + (size_t)slot_home(ahead, bmask) * elem, 1);
        uint64_t key = slot_key(slots, elem, i);
        if (!key)
            continue;
        uint32_t j = slot_home(key, bmask);
        while (slot_key(bigger, elem, j))
            j = (j + 1) & bmask;
        memcpy(bigger + (size_t)j * elem, (const char *)slots + (size_t)i * elem, elem);
    }
    return bigger;
}

/* The free slot a new entry with `key` goes to; UINT32_MAX when MAX_SAME_ID
 * entries already share the key: span ids are chosen by clients, and a flood
 * of one id would otherwise make every probe walk all of them (the keyed
 * hash only spreads different ids). */
static uint32_t table_free_slot(const void *slots, uint32_t mask, size_t elem, uint64_t key,
                                uint32_t *n_same)
{
    uint32_t i = slot_home(key, mask), same = 0;
    for (uint64_t k; (k = slot_key(slots, elem, i)); i = (i + 1) & mask)
        if (k == key && ++same >= MAX_SAME_ID)
            return UINT32_MAX;
    *n_same = same;
    return i;
}

/* Backward-shift deletion: entries after the hole move back, never past it. */
static void table_delete(void *slots, uint32_t mask, size_t elem, uint32_t hole)
{
    char *s = slots;
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & mask;
        uint64_t key = slot_key(s, elem, i);
        if (!key)
            break;
        uint32_t home = slot_home(key, mask);
        /* Can the entry at i move to the hole? Only if its home is not in (hole, i]. */
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        memcpy(s + (size_t)hole * elem, s + (size_t)i * elem, elem);
        hole = i;
    }
    memset(s + (size_t)hole * elem, 0, elem);
}

/* Resizes the table to `cap` slots: the new array (*mask updated, the old
 * one freed), or NULL with nothing changed. */
static void *table_resize(void *slots, uint32_t *mask, size_t elem, uint64_t cap)
{
    void *s = table_rehash(slots, *mask, elem, cap);
    if (s) {
        free(slots);
        *mask = (uint32_t)cap - 1;
    }
    return s;
}

/* Inserts entry e (growing to keep the load at or under one half): the
 * array, new if it grew; *ok false when out of memory or MAX_SAME_ID entries
 * share its key; *same: how many entries had its key before. */
static void *table_insert(void *slots, uint32_t *mask, uint32_t *count, size_t elem, const void *e,
                          bool *ok, uint32_t *same)
{
    *same = 0;
    *ok = false;
    if ((*count + 1) * 2 > *mask + 1) {
        void *s = table_resize(slots, mask, elem, ((uint64_t)*mask + 1) * 2);
        if (!s)
            return slots;
        slots = s;
    }
    uint64_t key;
    memcpy(&key, e, sizeof(key));
    uint32_t i = table_free_slot(slots, *mask, elem, key, same);
    if (i != UINT32_MAX) {
        memcpy((char *)slots + (size_t)i * elem, e, elem);
        (*count)++;
        *ok = true;
    }
    return slots;
}

/* The typed operations of one table type T of entries E: init, resize (to
 * `cap` slots, a power of two that holds count), insert, delete. */
#define TABLE_OPS(T, E, prefix)                                                                    \
    int prefix##_init(T *t, uint32_t cap)                                                          \
    {                                                                                              \
        *t = (T){calloc(cap, sizeof(E)), cap - 1, 0};                                              \
        return t->slots ? 0 : -1;                                                                  \
    }                                                                                              \
    int prefix##_resize(T *t, uint64_t cap)                                                        \
    {                                                                                              \
        E *s = table_resize(t->slots, &t->mask, sizeof(E), cap);                                   \
        t->slots = s ? s : t->slots;                                                               \
        return s ? 0 : -1;                                                                         \
    }                                                                                              \
    int prefix##_insert(T *t, const E *e, uint32_t *same)                                          \
    {                                                                                              \
        bool ok;                                                                                   \
        uint32_t n;                                                                                \
        t->slots =                                                                                 \
            table_insert(t->slots, &t->mask, &t->count, sizeof(E), e, &ok, same ? same : &n);      \
        return ok ? 0 : -1;                                                                        \
    }                                                                                              \
    void prefix##_delete(T *t, uint32_t hole)                                                      \
    {                                                                                              \
        table_delete(t->slots, t->mask, sizeof(E), hole);                                          \
        t->count--;                                                                                \
    }

TABLE_OPS(span_table, span_entry, pl_corr_span_table)
TABLE_OPS(pending_table, pending_entry, pl_corr_pending_table)

uint32_t pl_corr_pending_table_next(const pending_table *t, uint64_t key, uint32_t from)
{
    uint32_t i = from == UINT32_MAX ? (uint32_t)id_hash(key) & t->mask : from;
    while (t->slots[i].key) {
        if (t->slots[i].key == key)
            return i;
        i = (i + 1) & t->mask;
    }
    return UINT32_MAX;
}

/* ---- span statistics -------------------------------------------------------------------- */

/* The statistics array is its own anonymous mapping, grown with mremap: at a
 * million spans with samples it is over 100 MB, and realloc (below glibc's
 * mmap threshold, which rises to 32 MiB after frees) copied it at every
 * growth, faulting in a fresh copy's pages in the middle of linking. mremap
 * moves the page tables instead, and only new entries' pages are touched. */
static size_t stats_map_len(uint32_t cap)
{
    return ((size_t)cap * sizeof(span_stats) + 4095) & ~(size_t)4095;
}

static span_stats *stats_remap(span_stats *old, uint32_t old_cap, uint32_t cap)
{
    void *p = old ? mremap(old, stats_map_len(old_cap), stats_map_len(cap), MREMAP_MAYMOVE)
                  : mmap(NULL, stats_map_len(cap), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void pl_corr_stats_free(correlation *self)
{
    if (self->stats_arr)
        munmap(self->stats_arr, stats_map_len(self->cap_stats));
    self->stats_arr = NULL;
    self->cap_stats = self->n_stats = self->free_stats = 0;
}

static uint32_t stats_alloc(correlation *self)
{
    if (self->free_stats) {
        uint32_t i = self->free_stats;
        self->free_stats = self->stats_arr[i].next_free;
        memset(&self->stats_arr[i], 0, sizeof(span_stats));
        return i;
    }
    if (self->n_stats == self->cap_stats) {
        /* A quarter more each time: a few hundred thousand spans with
         * samples are normal, and doubling left up to half of it unused
         * (mremap moves pages, it does not copy them). */
        uint32_t cap = self->cap_stats ? self->cap_stats + self->cap_stats / 4 : 256;
        span_stats *a =
            cap > self->cap_stats ? stats_remap(self->stats_arr, self->cap_stats, cap) : NULL;
        if (!a)
            return 0;
        self->stats_arr = a;
        self->cap_stats = cap;
    }
    if (self->n_stats == 0)
        self->n_stats = 1; /* index 0 means "none" */
    uint32_t i = self->n_stats++;
    memset(&self->stats_arr[i], 0, sizeof(span_stats));
    return i;
}

void pl_corr_stats_release(correlation *self, uint32_t i)
{
    if (!i)
        return;
    span_stats *s = &self->stats_arr[i];
    if (s->cap_fns > 2) {
        free(s->fns);
        self->fn_bytes -= s->cap_fns * sizeof(top_fn);
    }
    memset(s, 0, sizeof(*s));
    s->next_free = self->free_stats;
    self->free_stats = i;
}

span_stats *pl_corr_entry_stats(correlation *self, span_entry *e)
{
    if (!e->stats)
        e->stats = stats_alloc(self);
    return e->stats ? &self->stats_arr[e->stats] : NULL;
}

/* Adds a name to the function-name pool and its index. */
static uint32_t fn_pool_add(correlation *self, pl_bytes name, uint64_t h)
{
    if (self->n_fn_names >= self->cap_fn_names) {
        uint32_t cap = self->cap_fn_names ? self->cap_fn_names * 2 : 256;
        fn_name *a = realloc(self->fn_names, cap * sizeof(fn_name));
        if (!a)
            return 0;
        self->fn_names = a;
        self->cap_fn_names = cap;
    }
    if ((self->n_fn_names + 1) * 2 > self->fn_index_mask + 1) {
        uint32_t cap = (self->fn_index_mask + 1) * 2;
        uint32_t *idx = calloc(cap, sizeof(uint32_t));
        if (!idx)
            return 0;
        for (uint32_t k = 1; k < self->n_fn_names; k++) {
            uint32_t j = (uint32_t)self->fn_names[k].hash & (cap - 1);
            while (idx[j])
                j = (j + 1) & (cap - 1);
            idx[j] = k;
        }
        free(self->fn_index);
        self->fn_index = idx;
        self->fn_index_mask = cap - 1;
    }
    char *copy = malloc(name.len + 1);
    if (!copy)
        return 0;
    if (name.len)
        memcpy(copy, name.ptr, name.len);
    copy[name.len] = 0;
    uint32_t id = self->n_fn_names++;
    self->fn_names[id] = (fn_name){copy, name.len, h};
    self->fn_bytes += name.len + 1;
    uint32_t j = (uint32_t)h & self->fn_index_mask;
    while (self->fn_index[j])
        j = (j + 1) & self->fn_index_mask;
    self->fn_index[j] = id;
    return id;
}

/* Pool id of a function name, interned once for the processor's life.
 * Beyond MAX_FN_NAMES distinct names everything new shares id 1, "[other]".
 * 0 on OOM. */
uint32_t pl_corr_fn_pool_id(correlation *self, pl_bytes name)
{
    if (!self->fn_index) {
        self->fn_index = calloc(1024, sizeof(uint32_t));
        if (!self->fn_index)
            return 0;
        self->fn_index_mask = 1023;
        self->n_fn_names = 1; /* id 0 means none */
        pl_bytes other = PL_BYTES_LIT("[other]");
        if (fn_pool_add(self, other, pl_hash_bytes(other.ptr, other.len)) != 1)
            return 0;
    }
    uint64_t h = pl_hash_bytes(name.ptr, name.len);
    uint32_t i = (uint32_t)h & self->fn_index_mask;
    while (self->fn_index[i]) {
        const fn_name *f = &self->fn_names[self->fn_index[i]];
        if (f->hash == h && f->len == name.len && memcmp(f->name, name.ptr, name.len) == 0)
            return self->fn_index[i];
        i = (i + 1) & self->fn_index_mask;
    }
    if (self->n_fn_names >= MAX_FN_NAMES || name.len > MAX_FN_NAME_LEN ||
        self->fn_bytes + name.len + 1 > MAX_FN_BYTES)
        return 1;
    return fn_pool_add(self, name, h);
}

top_fn *pl_corr_stats_fns(span_stats *s)
{
    return s->cap_fns > 2 ? s->fns : s->fn_inline;
}

void pl_corr_stats_add_function(correlation *self, span_stats *s, uint32_t fn, uint64_t weight)
{
    if (!weight || !fn)
        return;
    s->top_weight += weight;
    top_fn *fns = pl_corr_stats_fns(s);
    for (uint32_t i = 0; i < s->n_fns; i++) {
        if (fns[i].fn == fn) {
            fns[i].weight += weight;
            return;
        }
    }
    if (s->n_fns >= MAX_TOP_CANDIDATES)
        return; /* counted in top_weight (so shares stay honest), not listed */
    if (s->n_fns >= 2 && s->n_fns >= s->cap_fns) {
        uint32_t cap = s->cap_fns > 2 ? s->cap_fns * 2u : 4u;
        top_fn *f = malloc(cap * sizeof(top_fn));
        if (!f)
            return;
        memcpy(f, fns, s->n_fns * sizeof(top_fn));
        if (s->cap_fns > 2) {
            free(s->fns);
            self->fn_bytes -= s->cap_fns * sizeof(top_fn);
        }
        self->fn_bytes += cap * sizeof(top_fn);
        s->fns = f;
        s->cap_fns = (uint8_t)cap;
        fns = f;
    }
    fns[s->n_fns++] = (top_fn){fn, weight};
}

/* ---- held batches ----------------------------------------------------------------------- */

uint32_t pl_corr_held_alloc(correlation *self)
{
    if (self->free_held) {
        uint32_t i = self->free_held;
        self->free_held = self->held[i].next_free;
        memset(&self->held[i], 0, sizeof(held_batch));
        return i;
    }
    if (self->n_held == self->cap_held) {
        uint32_t cap = self->cap_held ? self->cap_held * 2 : 64;
        held_batch *a = realloc(self->held, (size_t)cap * sizeof(held_batch));
        if (!a)
            return 0;
        self->held = a;
        self->cap_held = cap;
    }
    if (self->n_held == 0)
        self->n_held = 1;
    uint32_t i = self->n_held++;
    memset(&self->held[i], 0, sizeof(held_batch));
    return i;
}

void pl_corr_held_link(correlation *self, uint32_t i)
{
    held_batch *h = &self->held[i];
    int s = h->side;
    h->prev = self->tail[s];
    h->next_held = 0;
    if (self->tail[s])
        self->held[self->tail[s]].next_held = i;
    else
        self->head[s] = i;
    self->tail[s] = i;
    self->held_batches[s]++;
}

void pl_corr_held_unlink_and_free(correlation *self, uint32_t i)
{
    held_batch *h = &self->held[i];
    int s = h->side;
    if (h->prev)
        self->held[h->prev].next_held = h->next_held;
    else
        self->head[s] = h->next_held;
    if (h->next_held)
        self->held[h->next_held].prev = h->prev;
    else
        self->tail[s] = h->prev;
    self->held_batches[s]--;
    free(h->covers);
    free(h->refs);
    free(h->parents);
    free(h->packed); /* normally read back (pl_corr_spill_load) before */
    memset(h, 0, sizeof(*h));
    h->next_free = self->free_held;
    self->free_held = i;
}

/* ---- span-side helpers ------------------------------------------------------------------ */

static bool span_has_times(const pl_span *sp)
{
    return sp->start_time_unix_nano || sp->end_time_unix_nano;
}

/* Does [lo, hi] (a sample's time) overlap the span widened by the skew? */
bool pl_corr_span_time_matches(correlation *self, const pl_span *sp, uint64_t lo, uint64_t hi)
{
    if (!span_has_times(sp))
        return true;
    uint64_t start = sp->start_time_unix_nano ? sp->start_time_unix_nano : sp->end_time_unix_nano;
    uint64_t end = sp->end_time_unix_nano > start ? sp->end_time_unix_nano : start;
    uint64_t a = start > self->skew ? start - self->skew : 0;
    uint64_t b = sat_add(end, self->skew);
    return lo <= b && hi >= a;
}

/* Finds the entry of `key` in `trace` (HELD, or a PLACEHOLDER when
 * want_placeholder). trace may be NULL (unknown). */
span_entry *pl_corr_find_span(correlation *self, uint64_t key, const uint8_t *trace, bool held,
                              bool want_placeholder)
{
    SPAN_EACH(&self->spans, key, i)
    {
        span_entry *e = &self->spans.slots[i];
        if (held && e->state == ENTRY_HELD) {
            const pl_span *sp = e->span;
            if (!trace || !trace_id_valid(sp->trace_id, sp->trace_id_len) ||
                memcmp(sp->trace_id, trace, 16) == 0)
                return e;
        } else if (want_placeholder && e->state == ENTRY_PLACEHOLDER) {
            span_stats *s = e->stats ? &self->stats_arr[e->stats] : NULL;
            if (!trace || !s || !s->has_trace || memcmp(s->trace_id, trace, 16) == 0)
                return e;
        }
    }
    return NULL;
}

const uint8_t *pl_corr_span_trace(const pl_span *sp)
{
    return trace_id_valid(sp->trace_id, sp->trace_id_len) ? sp->trace_id : NULL;
}

/* Where spilled entry e's parent id is kept: with its batch record, at the
 * entry's position (NULL: it has none). */
const uint64_t *pl_corr_spilled_parent(const correlation *self, const span_entry *e)
{
    const held_batch *h = &self->held[e->held];
    return h->parents && e->expiry_ms < h->n_parents ? &h->parents[e->expiry_ms] : NULL;
}

/* The parent span id of a held or spilled entry (0: none known). */
uint64_t pl_corr_entry_parent(const correlation *self, const span_entry *e)
{
    if (e->state == ENTRY_HELD) {
        const pl_span *sp = e->span;
        return span_id_valid(sp->parent_span_id, sp->parent_span_id_len)
                   ? id_key(sp->parent_span_id)
                   : 0;
    }
    const uint64_t *pk = e->state == ENTRY_SPILLED ? pl_corr_spilled_parent(self, e) : NULL;
    return pk ? *pk : 0;
}

/* Adds c to the totals of every known ancestor of `e` (held or spilled);
 * parks it in a placeholder for the first ancestor not seen yet. `trace`:
 * the trace when e is spilled (NULL: unknown). */
void pl_corr_roll_up(correlation *self, span_entry *e, contrib c, const uint8_t *trace)
{
    if (e->state == ENTRY_HELD)
        trace = pl_corr_span_trace(e->span);
    pl_corr_roll_up_from(self, e, c, trace, 0);
}

/* The walk of pl_corr_roll_up from `e`, `depth` generations above the span
 * the contribution came from (its nearer ancestors already have it), in
 * that span's `trace`. */
void pl_corr_roll_up_from(correlation *self, span_entry *e, contrib c, const uint8_t *trace,
                          int depth)
{
    for (; e && depth < MAX_ANCESTRY; depth++) {
        uint64_t pkey = pl_corr_entry_parent(self, e);
        if (!pkey)
            return;
        span_entry *p = NULL;
        uint32_t first = span_table_next(&self->spans, pkey, UINT32_MAX);
        span_entry *only = first != UINT32_MAX ? &self->spans.slots[first] : NULL;
        if (only && corr_ref_exact(only)) {
            /* An exact spilled parent is the only entry with its id: no held
             * one, placeholder or gone one to look for, no further slots. */
            if (pl_corr_spilled_in_trace(self, only, trace))
                p = only;
        } else if (!(p = pl_corr_find_span(self, pkey, trace, true, true))) {
            /* A gone parent already left: nothing to add to. */
            SPAN_EACH(&self->spans, pkey, i)
            {
                span_entry *g = &self->spans.slots[i];
                if (g->state == ENTRY_GONE)
                    return;
                if (g->state == ENTRY_SPILLED) {
                    if (!pl_corr_spilled_in_trace(self, g, trace))
                        continue;
                    p = g; /* its batch is on disk: its totals still grow */
                    break;
                }
            }
        }
        if (!p) {
            if (self->markers >= (size_t)self->cfg.max_spans)
                return;
            span_entry ph = {0};
            ph.key = pkey;
            ph.state = ENTRY_PLACEHOLDER;
            ph.expiry_ms = to_ms(self, now_ns(self) + self->span_window);
            ph.stats = stats_alloc(self);
            if (!ph.stats)
                return;
            span_stats *s = &self->stats_arr[ph.stats];
            if (trace) {
                memcpy(s->trace_id, trace, 16);
                s->has_trace = true;
            }
            s->samples_total = c.samples;
            s->cpu_total = c.cpu;
            s->wall_total = c.wall;
            uint32_t same;
            ph.alone = true;
            if (pl_corr_span_table_insert(&self->spans, &ph, &same)) {
                pl_corr_stats_release(self, ph.stats);
                return;
            }
            if (same)
                pl_corr_not_alone(self, pkey);
            self->markers++;
            return;
        }
        span_stats *s = pl_corr_entry_stats(self, p);
        if (!s)
            return;
        if (p->state == ENTRY_SPILLED && !s->has_trace)
            pl_corr_spilled_keep_trace(self, p, s);
        s->samples_total += c.samples;
        s->cpu_total += c.cpu;
        s->wall_total += c.wall;
        if (p->state != ENTRY_HELD && p->state != ENTRY_SPILLED)
            return;
        e = p;
    }
}
