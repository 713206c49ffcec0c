/* correlation_index.c: see correlation.c for the design. */
#include "correlation_int.h"

/* ---- the span table --------------------------------------------------------------------- */

int corr_span_table_init(span_table *t, uint32_t cap)
{
    t->slots = calloc(cap, sizeof(span_entry));
    if (!t->slots)
        return -1;
    t->mask = cap - 1;
    t->count = 0;
    return 0;
}

static void span_table_put_raw(span_table *t, const span_entry *e)
{
    uint32_t i = (uint32_t)id_hash(e->key) & t->mask;
    while (t->slots[i].key)
        i = (i + 1) & t->mask;
    t->slots[i] = *e;
    t->count++;
}

/* Rebuilds the table with `cap` slots (a power of two that holds count). */
int corr_span_table_resize(span_table *t, uint64_t cap)
{
    span_table bigger;
    if (cap > (1u << 31) || cap < 1024 || corr_span_table_init(&bigger, (uint32_t)cap))
        return -1;
    for (uint32_t i = 0; i <= t->mask; i++) {
        uint32_t ahead = (i + 16) & t->mask;
        if (t->slots[ahead].key)
            __builtin_prefetch(&bigger.slots[(uint32_t)id_hash(t->slots[ahead].key) & bigger.mask],
                               1);
        if (t->slots[i].key)
            span_table_put_raw(&bigger, &t->slots[i]);
    }
    free(t->slots);
    *t = bigger;
    return 0;
}

static int span_table_grow(span_table *t)
{
    return corr_span_table_resize(t, ((uint64_t)t->mask + 1) * 2);
}

/* Keeps the load at or under one half. -1 on OOM, or when MAX_SAME_ID
 * entries already share the key: span ids are chosen by clients, and a flood
 * of one id would otherwise make every probe walk all of them (the keyed
 * hash only spreads different ids). */
int corr_span_table_insert(span_table *t, const span_entry *e)
{
    if ((t->count + 1) * 2 > t->mask + 1 && span_table_grow(t))
        return -1;
    uint32_t i = (uint32_t)id_hash(e->key) & t->mask, same = 0;
    while (t->slots[i].key) {
        if (t->slots[i].key == e->key && ++same >= MAX_SAME_ID)
            return -1;
        i = (i + 1) & t->mask;
    }
    t->slots[i] = *e;
    t->count++;
    return 0;
}

/* Backward-shift deletion: entries after the hole move back, never past it. */
void corr_span_table_delete(span_table *t, uint32_t hole)
{
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & t->mask;
        if (!t->slots[i].key)
            break;
        uint32_t home = (uint32_t)id_hash(t->slots[i].key) & t->mask;
        /* Can the entry at i move to the hole? Only if its home is not in (hole, i]. */
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        t->slots[hole] = t->slots[i];
        hole = i;
    }
    memset(&t->slots[hole], 0, sizeof(span_entry));
    t->count--;
}

/* ---- the pending table (same scheme) ---------------------------------------------------- */

int corr_pending_table_init(pending_table *t, uint32_t cap)
{
    t->slots = calloc(cap, sizeof(pending_entry));
    if (!t->slots)
        return -1;
    t->mask = cap - 1;
    t->count = 0;
    return 0;
}

static void pending_table_put_raw(pending_table *t, const pending_entry *e)
{
    uint32_t i = (uint32_t)id_hash(e->key) & t->mask;
    while (t->slots[i].key)
        i = (i + 1) & t->mask;
    t->slots[i] = *e;
    t->count++;
}

int corr_pending_table_resize(pending_table *t, uint64_t cap)
{
    pending_table bigger;
    if (cap > (1u << 31) || cap < 1024 || corr_pending_table_init(&bigger, (uint32_t)cap))
        return -1;
    for (uint32_t i = 0; i <= t->mask; i++)
        if (t->slots[i].key)
            pending_table_put_raw(&bigger, &t->slots[i]);
    free(t->slots);
    *t = bigger;
    return 0;
}

int corr_pending_table_insert(pending_table *t, const pending_entry *e)
{
    if ((t->count + 1) * 2 > t->mask + 1 &&
        corr_pending_table_resize(t, ((uint64_t)t->mask + 1) * 2))
        return -1;
    uint32_t i = (uint32_t)id_hash(e->key) & t->mask, same = 0;
    while (t->slots[i].key) {
        if (t->slots[i].key == e->key && ++same >= MAX_SAME_ID)
            return -1; /* as for spans: a flood of one id stays linear */
        i = (i + 1) & t->mask;
    }
    t->slots[i] = *e;
    t->count++;
    return 0;
}

uint32_t corr_pending_table_next(const pending_table *t, uint64_t key, uint32_t from)
{
    uint32_t i = from == UINT32_MAX ? (uint32_t)id_hash(key) & t->mask : from;
    while (t->slots[i].key) {
        if (t->slots[i].key == key)
            return i;
        i = (i + 1) & t->mask;
    }
    return UINT32_MAX;
}

void corr_pending_table_delete(pending_table *t, uint32_t hole)
{
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & t->mask;
        if (!t->slots[i].key)
            break;
        uint32_t home = (uint32_t)id_hash(t->slots[i].key) & t->mask;
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        t->slots[hole] = t->slots[i];
        hole = i;
    }
    memset(&t->slots[hole], 0, sizeof(pending_entry));
    t->count--;
}

/* ---- span statistics -------------------------------------------------------------------- */

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
         * (realloc of an array this size remaps pages, not copies). */
        uint32_t cap = self->cap_stats ? self->cap_stats + self->cap_stats / 4 : 256;
        span_stats *a = realloc(self->stats_arr, (size_t)cap * sizeof(span_stats));
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

void corr_stats_release(correlation *self, uint32_t i)
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

span_stats *corr_entry_stats(correlation *self, span_entry *e)
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
uint32_t corr_fn_pool_id(correlation *self, pl_bytes name)
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

top_fn *corr_stats_fns(span_stats *s)
{
    return s->cap_fns > 2 ? s->fns : s->fn_inline;
}

void corr_stats_add_function(correlation *self, span_stats *s, uint32_t fn, uint64_t weight)
{
    if (!weight || !fn)
        return;
    s->top_weight += weight;
    top_fn *fns = corr_stats_fns(s);
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

uint32_t corr_held_alloc(correlation *self)
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

void corr_held_link(correlation *self, uint32_t i)
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

void corr_held_unlink_and_free(correlation *self, uint32_t i)
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
bool corr_span_time_matches(correlation *self, const pl_span *sp, uint64_t lo, uint64_t hi)
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
span_entry *corr_find_span(correlation *self, uint64_t key, const uint8_t *trace, bool held,
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

const uint8_t *corr_span_trace(const pl_span *sp)
{
    return trace_id_valid(sp->trace_id, sp->trace_id_len) ? sp->trace_id : NULL;
}

/* The parent span id of a held or spilled entry (0: none known). A spilled
 * span's parent id is kept with its batch record, at the entry's position. */
static uint64_t entry_parent(correlation *self, const span_entry *e)
{
    if (e->state == ENTRY_HELD) {
        const pl_span *sp = e->span;
        return span_id_valid(sp->parent_span_id, sp->parent_span_id_len)
                   ? id_key(sp->parent_span_id)
                   : 0;
    }
    if (e->state == ENTRY_SPILLED) {
        const held_batch *h = &self->held[e->held];
        return h->parents && e->expiry_ms < h->n_parents ? h->parents[e->expiry_ms] : 0;
    }
    return 0;
}

/* Adds c to the totals of every known ancestor of `e` (held or spilled);
 * parks it in a placeholder for the first ancestor not seen yet. `trace`:
 * the trace when e is spilled (NULL: unknown). */
void corr_roll_up(correlation *self, span_entry *e, contrib c, const uint8_t *trace)
{
    if (e->state == ENTRY_HELD)
        trace = corr_span_trace(e->span);
    for (int depth = 0; e && depth < MAX_ANCESTRY; depth++) {
        uint64_t pkey = entry_parent(self, e);
        if (!pkey)
            return;
        span_entry *p = corr_find_span(self, pkey, trace, true, true);
        if (!p) {
            /* A gone parent already left: nothing to add to. */
            SPAN_EACH(&self->spans, pkey, i)
            {
                span_entry *g = &self->spans.slots[i];
                if (g->state == ENTRY_GONE)
                    return;
                if (g->state == ENTRY_SPILLED) {
                    span_stats *gs = g->stats ? &self->stats_arr[g->stats] : NULL;
                    if (trace && gs && gs->has_trace && memcmp(gs->trace_id, trace, 16) != 0)
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
            if (corr_span_table_insert(&self->spans, &ph)) {
                corr_stats_release(self, ph.stats);
                return;
            }
            self->markers++;
            return;
        }
        span_stats *s = corr_entry_stats(self, p);
        if (!s)
            return;
        s->samples_total += c.samples;
        s->cpu_total += c.cpu;
        s->wall_total += c.wall;
        if (p->state != ENTRY_HELD && p->state != ENTRY_SPILLED)
            return;
        e = p;
    }
}
