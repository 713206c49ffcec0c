/* correlation_release.c: see correlation.c for the design. */
#include "correlation_int.h"

/* ---- releasing -------------------------------------------------------------------------- */

void pl_corr_update_gauges(correlation *self)
{
    if (self->spill_dir || self->pack)
        pl_corr_late_room_for(self, self->spilled_spans);
    *self->g_held_spans = (int64_t)self->held_spans;
    *self->g_pending_samples = (int64_t)self->pending_samples;
    *self->g_held_bytes =
        (int64_t)(self->held_bytes + pl_corr_index_bytes(self) + pl_corr_late_bytes(self));
}

/* Heaviest first; ties by pool id (first seen first), so output is stable. */
static int cmp_fn_weight(const void *a, const void *b)
{
    const top_fn *x = a, *y = b;
    if (x->weight != y->weight)
        return x->weight < y->weight ? 1 : -1;
    return x->fn < y->fn ? -1 : x->fn > y->fn;
}

static void put_int(pl_batch *b, pl_span *sp, pl_bytes key, uint64_t v)
{
    pl_bytes k = pl_batch_bytes(b, key.ptr, key.len);
    if (k.ptr)
        pl_attrs_put(&b->arena, &sp->attrs, k, pl_value_int((int64_t)v));
}

/* Writes the profile summary on a span. */
static void enrich_span(correlation *self, pl_batch *b, pl_span *sp, span_stats *s)
{
    if (s->linked) {
        char hex[17];
        pl_hex_encode(sp->span_id, 8, hex);
        pl_bytes k =
            pl_batch_bytes(b, self->names[NAME_PROFILE_ID].ptr, self->names[NAME_PROFILE_ID].len);
        pl_bytes v = pl_batch_bytes(b, hex, 16);
        if (k.ptr && v.ptr)
            pl_attrs_put(&b->arena, &sp->attrs, k, pl_value_string(v));
        put_int(b, sp, self->names[NAME_SAMPLES], s->samples);
        put_int(b, sp, self->names[NAME_CPU], s->cpu_self);
        if (s->wall_self)
            put_int(b, sp, self->names[NAME_WALL], s->wall_self);
        uint32_t n_top = s->n_fns < (uint32_t)self->cfg.top_functions
                             ? s->n_fns
                             : (uint32_t)self->cfg.top_functions;
        if (n_top && s->top_weight) {
            top_fn *fns = pl_corr_stats_fns(s);
            qsort(fns, s->n_fns, sizeof(top_fn), cmp_fn_weight);
            pl_value *items = pl_batch_alloc(b, n_top * sizeof(pl_value));
            pl_bytes k2 = pl_batch_bytes(b, self->names[NAME_TOP].ptr, self->names[NAME_TOP].len);
            if (items && k2.ptr) {
                for (uint32_t i = 0; i < n_top; i++) {
                    char buf[64];
                    double share = 100.0 * (double)fns[i].weight / (double)s->top_weight;
                    int m = snprintf(buf, sizeof(buf), " (%.1f%%)", share);
                    const fn_name *fname = &self->fn_names[fns[i].fn];
                    size_t len = fname->len + (size_t)m;
                    char *text = pl_batch_alloc(b, len + 1);
                    if (!text)
                        return;
                    memcpy(text, fname->name, fname->len);
                    memcpy(text + fname->len, buf, (size_t)m);
                    items[i] = pl_value_string((pl_bytes){(const uint8_t *)text, (uint32_t)len});
                }
                pl_value arr;
                memset(&arr, 0, sizeof(arr));
                arr.type = PL_VALUE_ARRAY;
                arr.u.array.items = items;
                arr.u.array.n = n_top;
                pl_attrs_put(&b->arena, &sp->attrs, k2, arr);
            }
        }
    }
    if (s->linked || s->cpu_total)
        put_int(b, sp, self->names[NAME_CPU_TOTAL], s->cpu_total);
}

/* ---- handing on, and the next consumer's refusals ------------------------------------------ */

/* A released batch the next consumer refused with a retryable status (a
 * full queue, a store that cannot write, memory pressure downstream): kept,
 * in order, and offered again every retry_ns. Meanwhile
 * - new batches of its signal are refused with the same status, so clients
 *   retry (503 / UNAVAILABLE with Retry-After) instead of being answered for
 *   data that could not go on;
 * - nothing is released by window or coverage (held batches wait, compact,
 *   past their deadline), so what waits here grows only by what a bound
 *   pushes out.
 * The consumer takes a batch whatever it answers, so each attempt sends a
 * copy; the original is freed once a copy is taken. What waits is bounded
 * by max_bytes / 4: beyond it the oldest are dropped, counted in `dropped`
 * and logged once per DROP_LOG_NS with the count. Under hard memory
 * pressure no copy is made, so a refusal then drops (counted). */
typedef struct retry_item {
    pl_batch *batch;
    pl_consumer *next;
    size_t items, bytes;
    uint32_t refusals; /* copies of it refused so far (each marked its entries lost) */
} retry_item;

#define DROP_LOG_NS (10000000000ull) /* at most one line about drops per 10 s */

/* Writes the drops counted since the last line, if any and if due (or
 * `force`d). */
static void log_drops(correlation *self, uint64_t now, bool force)
{
    if (!self->drops_unlogged)
        return;
    if (!force && self->drop_logged_ns && now - self->drop_logged_ns < DROP_LOG_NS)
        return;
    pl_error(COMPONENT, "%s: %zu items dropped%s: %s", self->id, self->drops_unlogged,
             self->drop_logged_ns ? " in the last 10 s or so" : "", self->drop_why);
    self->drops_unlogged = 0;
    self->drop_logged_ns = now ? now : 1;
}

static void dropped(correlation *self, pl_signal sig, size_t items, pl_status st, const char *why)
{
    pl_stats_add(self->stats, sig, PL_STAT_DROPPED, items);
    snprintf(self->drop_why, sizeof(self->drop_why), "%s the next consumer refused (%s)%s",
             pl_signal_name(sig), pl_status_name(st), why);
    self->drops_unlogged += items;
    log_drops(self, now_ns(self), false);
}

/* Frees a batch that could not go on. Its write-ahead entries, if any, are
 * kept for replay at the next start rather than deleted. */
static void drop_batch(pl_batch *b)
{
    pl_batch_wal_refused(b);
    pl_batch_free(b);
}

static void keep(correlation *self, pl_consumer *next, pl_batch *b, size_t items, pl_status st,
                 uint32_t refusals)
{
    if (self->n_retry == self->cap_retry) {
        uint32_t cap = self->cap_retry ? self->cap_retry * 2 : 16;
        retry_item *r = realloc(self->retry, cap * sizeof(retry_item));
        if (!r) {
            dropped(self, b->signal, items, st, ", out of memory to keep them");
            drop_batch(b);
            return;
        }
        self->retry = r;
        self->cap_retry = cap;
    }
    size_t bytes = pl_batch_memory(b);
    self->retry[self->n_retry++] = (retry_item){b, next, items, bytes, refusals};
    self->retry_bytes += bytes;
    if (st != PL_OK)
        self->retry_status = st;
    /* Bounded: a quarter of max_bytes; beyond it the oldest go. */
    while (self->n_retry > 1 && self->retry_bytes > self->cfg.max_bytes / 4) {
        retry_item *o = &self->retry[0];
        dropped(self, o->batch->signal, o->items, self->retry_status,
                ", more than max_bytes / 4 waiting");
        self->retry_bytes -= o->bytes;
        drop_batch(o->batch);
        memmove(self->retry, self->retry + 1, (self->n_retry - 1) * sizeof(retry_item));
        self->n_retry--;
    }
}

/* Hands a released batch on; what the next consumer refuses (retryable) is
 * kept, whatever made it leave. */
static void hand_on(correlation *self, pl_consumer *next, pl_batch *b, int reason)
{
    (void)reason;
    size_t items = pl_batch_items(b);
    pl_signal sig = b->signal;
    if (self->n_retry) {
        keep(self, next, b, items, PL_OK, 0); /* behind those refused earlier */
        return;
    }
    pl_batch *copy = pl_host_memory_state(self->host) == PL_MEMORY_HARD ? NULL : pl_batch_clone(b);
    if (!copy) {
        pl_status st = pl_consumer_consume(next, b);
        if (st != PL_OK) {
            *self->c_refused += items;
            dropped(self, sig, items, st, ", with no memory to keep them");
        }
        return;
    }
    pl_status st = pl_consumer_consume(next, copy);
    if (st == PL_OK) {
        pl_batch_wal_handoff(b); /* the copy carries its write-ahead entries on */
        pl_batch_free(b);
        return;
    }
    *self->c_refused += items;
    if (!pl_status_retryable(st)) {
        dropped(self, sig, items, st, "");
        drop_batch(b);
        return;
    }
    pl_warn(COMPONENT, "%s: the next consumer refused %zu %s (%s); kept, and %s refused meanwhile",
            self->id, items, pl_signal_name(sig), pl_status_name(st), pl_signal_name(sig));
    self->retry_at = sat_add(now_ns(self), self->retry_ns);
    keep(self, next, b, items, st, 1);
}

/* Offers the kept batches again (at most once per retry_ns unless forced by
 * now = UINT64_MAX). True when none of signal `sig` is left waiting (any
 * signal when sig is PL_SIGNAL_COUNT); *refusal is the status to answer with
 * otherwise. */
bool pl_corr_retry(correlation *self, uint64_t now, pl_signal sig, pl_status *refusal)
{
    if (self->n_retry && now >= self->retry_at) {
        self->retry_at = now == UINT64_MAX ? 0 : sat_add(now, self->retry_ns);
        uint32_t done = 0;
        while (done < self->n_retry) {
            retry_item *r = &self->retry[done];
            bool last = now == UINT64_MAX; /* shutdown: no copy, no keeping */
            pl_batch *copy = last ? r->batch : pl_batch_clone(r->batch);
            if (!copy)
                break;
            if (last) /* goes on itself: a refusal now marks its entries again */
                pl_batch_wal_recovered(r->batch, r->refusals);
            pl_status st = pl_consumer_consume(r->next, copy);
            if (st != PL_OK && pl_status_retryable(st) && !last) {
                self->retry_status = st;
                r->refusals++;
                break;
            }
            if (st != PL_OK)
                dropped(self, r->batch->signal, r->items, st, last ? " at shutdown" : "");
            if (!last && st == PL_OK) {
                /* The copy that went on carries the entries: the earlier
                 * refusals must not replay them at the next start. */
                pl_batch_wal_recovered(r->batch, r->refusals);
                pl_batch_wal_handoff(r->batch);
                pl_batch_free(r->batch);
            } else if (!last) {
                drop_batch(r->batch);
            }
            self->retry_bytes -= r->bytes;
            done++;
        }
        memmove(self->retry, self->retry + done, (self->n_retry - done) * sizeof(retry_item));
        self->n_retry -= done;
        pl_corr_update_gauges(self);
    }
    for (uint32_t i = 0; i < self->n_retry; i++) {
        if (sig == PL_SIGNAL_COUNT || self->retry[i].batch->signal == sig) {
            *refusal = self->retry_status != PL_OK ? self->retry_status : PL_ERR_REFUSED;
            return false;
        }
    }
    return true;
}

/* Shutdown: held batches leave, oldest first, as long as the next consumer
 * takes them; the first it refuses waits with the kept ones, and so do all
 * still held (correlation_pending goes on). */
void pl_corr_flush(correlation *self)
{
    for (int side = 0; side < 2; side++)
        while (self->head[side] && !self->n_retry)
            pl_corr_release(self, self->head[side], RELEASE_FLUSH);
}

/* Items still held or waiting to be taken (1 for a batch of none). */
size_t pl_corr_waiting_items(const correlation *self)
{
    size_t n = self->held_batches[SIDE_SPANS] + self->held_batches[SIDE_SAMPLES];
    n = n ? self->held_spans + self->pending_samples + 1 : 0;
    for (uint32_t i = 0; i < self->n_retry; i++)
        n += self->retry[i].items ? self->retry[i].items : 1;
    return n;
}

void pl_corr_retry_free(correlation *self)
{
    for (uint32_t i = 0; i < self->n_retry; i++) {
        dropped(self, self->retry[i].batch->signal, self->retry[i].items, self->retry_status,
                " until shutdown_timeout");
        drop_batch(self->retry[i].batch);
    }
    log_drops(self, now_ns(self), true);
    free(self->retry);
    self->retry = NULL;
    self->n_retry = self->cap_retry = 0;
    self->retry_bytes = 0;
}

/* A spilled batch whose file cannot be read back: its spans are lost
 * (logged and counted in spill_failures); its entries go. */
static void spill_lost(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    for (uint32_t i = 0; i <= self->spans.mask;) {
        span_entry *e = &self->spans.slots[i];
        if (e->key && e->state == ENTRY_SPILLED && e->held == hi) {
            pl_corr_stats_release(self, e->stats);
            pl_corr_span_table_delete(&self->spans, i);
            self->spilled_spans--;
            self->indexed_spans--;
            continue; /* the slot may hold a moved entry now */
        }
        i++;
    }
    pl_stats_add(self->stats, PL_SIGNAL_TRACES, PL_STAT_DROPPED, h->items);
    *self->c_unlinked_spans += h->items;
    self->held_spans -= h->items;
    pl_corr_spill_remove(self, h->spill_seq, h->spill_bytes);
    pl_corr_held_unlink_and_free(self, hi);
    pl_corr_update_gauges(self);
}

/* The entries of spilled batch hi hold the spans of its read-back copy b. */
static void rehold(correlation *self, uint32_t hi, pl_batch *b)
{
    pl_traces *t = &b->data.traces;
    for (uint32_t r = 0; r < t->n_resources; r++) {
        pl_resource_spans *rs = &t->resources[r];
        for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
            pl_scope_spans *ss = &rs->scopes[sc];
            for (uint32_t k = 0; k < ss->n_spans; k++) {
                pl_span *sp = &ss->spans[k];
                if (!span_id_valid(sp->span_id, sp->span_id_len))
                    continue;
                SPAN_EACH(&self->spans, id_key(sp->span_id), i)
                {
                    span_entry *e = &self->spans.slots[i];
                    if (e->state == ENTRY_SPILLED && e->held == hi) {
                        e->span = sp;
                        e->state = ENTRY_HELD;
                        e->expiry_ms = 0;
                        self->spilled_spans--;
                        break;
                    }
                }
            }
        }
    }
    free(self->held[hi].parents); /* the spans carry their parents again */
    self->held[hi].parents = NULL;
    self->held[hi].n_parents = 0;
}

static void release_span_batch(correlation *self, uint32_t hi, int reason)
{
    held_batch *h = &self->held[hi];
    if (!h->spilled && h->packed && !pl_corr_unpack(self, hi))
        return; /* lost (logged), its record gone */
    h = &self->held[hi];
    bool spilled = h->spilled;
    bool packed = h->packed != NULL;
    if (spilled) {
        h->batch = pl_corr_spill_load(self, hi);
        if (!h->batch) {
            spill_lost(self, hi);
            return;
        }
    }
    pl_batch *b = h->batch;
    pl_consumer *next = h->next;
    uint32_t linked = 0;
    if (spilled) {
        /* Read back: its entries hold its spans again, the samples that
         * waited for them link, and it leaves like any held batch (with
         * fresh summaries: those left at the spill may have gone). */
        rehold(self, hi, b);
        pl_corr_link_waiting_batch(self, b);
        h = &self->held[hi];
    }
    if (h->indexed) {
        uint64_t now = now_ns(self);
        uint32_t expiry = to_ms(self, now + self->sample_window);
        pl_traces *t = &b->data.traces;
        for (uint32_t r = 0; r < t->n_resources; r++) {
            pl_resource_spans *rs = &t->resources[r];
            for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
                pl_scope_spans *ss = &rs->scopes[sc];
                for (uint32_t k = 0; k < ss->n_spans; k++) {
                    pl_span *sp = &ss->spans[k];
                    if (k + PREFETCH_AHEAD < ss->n_spans)
                        corr_span_table_prefetch(&self->spans, &ss->spans[k + PREFETCH_AHEAD]);
                    if (!span_id_valid(sp->span_id, sp->span_id_len))
                        continue;
                    uint64_t key = id_key(sp->span_id);
                    uint32_t slot = UINT32_MAX;
                    SPAN_EACH(&self->spans, key, i)
                    {
                        const span_entry *c = &self->spans.slots[i];
                        if (c->state == ENTRY_HELD && c->span == sp) {
                            slot = i;
                            break;
                        }
                    }
                    if (slot == UINT32_MAX)
                        continue; /* not indexed (out of memory at insert) */
                    span_entry *e = &self->spans.slots[slot];
                    if (e->stats) {
                        span_stats *st = &self->stats_arr[e->stats];
                        linked += st->linked > 0;
                        enrich_span(self, b, sp, st);
                        pl_corr_stats_release(self, e->stats);
                        e->stats = 0;
                    }
                    self->indexed_spans--;
                    /* A packed span leaves a fresh summary for the one it
                     * left when packed: one per span, aged from now. */
                    if (packed)
                        pl_corr_late_retire(self, key, pl_corr_span_trace(sp));
                    if (reason != RELEASE_FLUSH)
                        pl_corr_late_add(self, e, now, NULL);
                    if (reason != RELEASE_FLUSH && self->markers < (size_t)self->cfg.max_spans) {
                        /* Remember it for a sample window, to count late samples. */
                        e->span = NULL;
                        e->held = 0;
                        e->state = ENTRY_GONE;
                        e->expiry_ms = expiry;
                        self->markers++;
                    } else {
                        pl_corr_span_table_delete(&self->spans, slot);
                    }
                }
            }
        }
    } else {
        self->unindexed_batches--;
        if (reason != RELEASE_FLUSH && self->late) {
            /* Held before any profile came (a first upload can come late):
             * their samples may still follow, so they leave summaries too. */
            uint64_t now = now_ns(self);
            pl_traces *t = &b->data.traces;
            for (uint32_t r = 0; r < t->n_resources; r++) {
                pl_resource_spans *rs = &t->resources[r];
                uint16_t svc = pl_corr_service_id(self, pl_corr_resource_service(&rs->resource));
                for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
                    pl_scope_spans *ss = &rs->scopes[sc];
                    for (uint32_t k = 0; k < ss->n_spans; k++) {
                        pl_span *sp = &ss->spans[k];
                        if (!span_id_valid(sp->span_id, sp->span_id_len))
                            continue;
                        span_entry e = {0};
                        e.key = id_key(sp->span_id);
                        e.span = sp;
                        e.service = svc;
                        e.state = ENTRY_HELD;
                        pl_corr_late_add(self, &e, now, NULL);
                        if (self->spilled_spans) /* e is not in the table */
                            pl_corr_not_alone(self, e.key);
                    }
                }
            }
        }
    }
    *self->c_linked_spans += linked;
    *self->c_unlinked_spans += h->items - linked;
    if (reason == RELEASE_EARLY)
        *self->c_early_spans += h->items;
    else if (reason == RELEASE_COVERED)
        *self->c_covered_spans += h->items;
    self->held_spans -= h->items;
    self->held_bytes -= h->bytes;
    uint64_t spill_seq = h->spill_seq;
    size_t spill_size = h->spill_bytes;
    pl_corr_held_unlink_and_free(self, hi);
    pl_corr_update_gauges(self);
    hand_on(self, next, b, reason);
    if (spilled) {
        pl_corr_spill_remove(self, spill_seq, spill_size);
        pl_corr_flush_release_queue(self); /* sample batches completed by the read-back */
    }
}

static void release_sample_batch(correlation *self, uint32_t hi, int reason)
{
    held_batch *h = &self->held[hi];
    pl_batch *b = h->batch;
    pl_consumer *next = h->next;
    uint32_t expiry = to_ms(self, now_ns(self) + self->span_window);
    pl_corr_bus_unhold(self, h, h->items == 0); /* held for lag: its spans all came? */
    for (uint32_t r = 0; r < h->n_refs; r++) {
        pending_ref *ref = &h->refs[r];
        uint32_t i = pl_corr_pending_table_next(&self->pending, ref->key, UINT32_MAX);
        while (i != UINT32_MAX) {
            pending_entry *pe = &self->pending.slots[i];
            if (pe->state == 0 && pe->sample == ref->sample)
                break;
            i = pl_corr_pending_table_next(&self->pending, ref->key, (i + 1) & self->pending.mask);
        }
        if (i == UINT32_MAX)
            continue; /* linked meanwhile */
        pending_entry *pe = &self->pending.slots[i];
        (*self->c_unlinked_samples)++;
        if (reason == RELEASE_EARLY)
            (*self->c_early_samples)++;
        self->pending_samples--;
        if (reason != RELEASE_FLUSH &&
            self->pending_markers < (size_t)self->cfg.max_pending_samples) {
            pe->sample = NULL;
            pe->pinfo = NULL;
            pe->held = 0;
            pe->state = 1;
            pe->expiry_ms = expiry & 0x7fffffff;
            self->pending_markers++;
        } else {
            pl_corr_pending_table_delete(&self->pending, i);
        }
    }
    self->held_bytes -= h->bytes;
    pl_corr_held_unlink_and_free(self, hi);
    pl_corr_update_gauges(self);
    hand_on(self, next, b, reason);
}

void pl_corr_release(correlation *self, uint32_t hi, int reason)
{
    if (self->held[hi].side == SIDE_SPANS)
        release_span_batch(self, hi, reason);
    else
        release_sample_batch(self, hi, reason);
}

void pl_corr_release_all(correlation *self, int reason)
{
    for (int side = 0; side < 2; side++)
        while (self->head[side])
            pl_corr_release(self, self->head[side], reason);
}

size_t pl_corr_index_bytes(const correlation *self)
{
    return ((size_t)self->spans.mask + 1) * sizeof(span_entry) +
           ((size_t)self->pending.mask + 1) * sizeof(pending_entry) +
           (size_t)self->cap_stats * sizeof(span_stats) +
           (size_t)self->cap_held * sizeof(held_batch) +
           (size_t)self->cap_fn_names * sizeof(fn_name) +
           ((size_t)self->fn_index_mask + 1) * sizeof(uint32_t) + self->fn_bytes +
           pl_corr_service_bytes(self);
}

/* Pushes the oldest batches out while a bound is exceeded. */
void pl_corr_enforce_bounds(correlation *self)
{
    if (pl_host_memory_state(self->host) == PL_MEMORY_HARD) {
        pl_corr_release_all(self, RELEASE_EARLY);
        return;
    }
    while (self->head[SIDE_SPANS] && self->held_spans > (size_t)self->cfg.max_spans)
        pl_corr_release(self, self->head[SIDE_SPANS], RELEASE_EARLY);
    while (self->head[SIDE_SAMPLES] &&
           self->pending_samples > (size_t)self->cfg.max_pending_samples)
        pl_corr_release(self, self->head[SIDE_SAMPLES], RELEASE_EARLY);
    while ((self->head[0] || self->head[1]) &&
           self->held_bytes + pl_corr_index_bytes(self) > self->cfg.max_bytes) {
        /* With storage the oldest span batch in memory spills instead
         * (spilled ones keep their place in the FIFO, and their hold). */
        uint32_t a = self->head[SIDE_SPANS], b = self->head[SIDE_SAMPLES];
        while (a && self->held[a].spilled && !self->held[a].packed)
            a = self->held[a].next_held;
        if (a && pl_corr_spill(self, a))
            continue;
        if (!a && !b)
            a = self->head[SIDE_SPANS]; /* only spilled ones: the index itself is too big */
        uint32_t oldest = !a ? b : !b ? a : self->held[a].seq < self->held[b].seq ? a : b;
        pl_corr_release(self, oldest, RELEASE_EARLY);
    }
}

bool pl_corr_batch_covered(correlation *self, const held_batch *h)
{
    uint64_t now = now_ns(self);
    for (uint32_t i = 0; i < h->n_covers; i++) {
        const cover *c = &h->covers[i];
        if (!pl_corr_service_covers(self, c->service, c->max_end, now))
            return false;
    }
    return h->n_covers > 0;
}

void pl_corr_release_covered(correlation *self)
{
    if (!self->cfg.early_release || self->n_retry)
        return; /* the next consumer refuses: they wait (see hand_on) */
    uint32_t i = self->head[SIDE_SPANS];
    while (i && !self->n_retry) {
        uint32_t next = self->held[i].next_held;
        if (pl_corr_batch_covered(self, &self->held[i]))
            pl_corr_release(self, i, RELEASE_COVERED);
        i = next;
    }
}

void pl_corr_flush_release_queue(correlation *self)
{
    for (uint32_t k = 0; k < self->n_release; k++) {
        uint32_t hi = self->release_queue[k];
        if (self->held[hi].batch && self->held[hi].side == SIDE_SAMPLES &&
            self->held[hi].items == 0)
            pl_corr_release(self, hi, RELEASE_WINDOW);
    }
    self->n_release = 0;
}

/* One profile of a held sample batch and its deep copy. */
typedef struct prof_map {
    const pl_profile *old;
    pl_profile *copy;
    profile_info *info; /* in the copy's arena, filled at first use */
} prof_map;

static int cmp_prof_map(const void *a, const void *b)
{
    const pl_profile *x = ((const prof_map *)a)->old, *y = ((const prof_map *)b)->old;
    return x < y ? -1 : x > y;
}

static prof_map *prof_find(prof_map *m, size_t n, const pl_profile *p)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m[mid].old < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && m[lo].old == p ? &m[lo] : NULL;
}

/* A sample batch that waits (for the spans of a few of its samples) is held
 * whole, for up to sample_window. Linking the others grew its dictionary
 * tables in its arena, leaving the outgrown arrays behind (a quarter to a
 * third of the batch): it is held as a deep copy instead, and the waiting
 * samples' entries point into the copy. Nothing else refers to the batch
 * once the consume call that held it has ended its link session. */
void pl_corr_compact_samples(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    pl_batch *old = h->batch;
    pl_profiles *ps = &old->data.profiles;
    size_t n = 0;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t sc = 0; sc < ps->resources[r].n_scopes; sc++)
            n += ps->resources[r].scopes[sc].n_profiles;
    if (!n || !h->n_refs)
        return;
    pl_batch *c = pl_batch_clone(old);
    prof_map *m = c ? calloc(n, sizeof(prof_map)) : NULL;
    if (!m || pl_batch_memory(c) > h->bytes - h->bytes / 8) {
        free(m);
        pl_batch_free(c); /* not worth it (or out of memory): keep the original */
        return;
    }
    size_t k = 0;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t sc = 0; sc < ps->resources[r].n_scopes; sc++) {
            pl_scope_profiles *o = &ps->resources[r].scopes[sc];
            pl_scope_profiles *cs = &c->data.profiles.resources[r].scopes[sc];
            for (uint32_t pi = 0; pi < o->n_profiles; pi++, k++)
                m[k] = (prof_map){&o->profiles[pi], &cs->profiles[pi], NULL};
        }
    qsort(m, n, sizeof(prof_map), cmp_prof_map);
    pending_table *t = &self->pending;
    for (uint32_t i = 0; i < h->n_refs; i++) {
        pending_ref *ref = &h->refs[i];
        for (uint32_t j = pl_corr_pending_table_next(t, ref->key, UINT32_MAX); j != UINT32_MAX;
             j = pl_corr_pending_table_next(t, ref->key, (j + 1) & t->mask)) {
            pending_entry *pe = &t->slots[j];
            if (pe->state != 0 || pe->held != hi || pe->sample != ref->sample)
                continue;
            prof_map *pm = prof_find(m, n, pe->pinfo->profile);
            if (!pm)
                break; /* cannot happen: every waiting sample is in a profile of the batch */
            if (!pm->info && (pm->info = pl_batch_alloc(c, sizeof(profile_info)))) {
                *pm->info = *pe->pinfo;
                pm->info->batch = c;
                pm->info->profile = pm->copy;
            }
            if (!pm->info)
                break;
            pl_sample *ns = pm->copy->samples + (pe->sample - pm->old->samples);
            pe->sample = ns;
            pe->pinfo = pm->info;
            ref->sample = ns;
            break;
        }
    }
    free(m);
    self->held_bytes -= h->bytes;
    h->bytes = pl_batch_memory(c);
    self->held_bytes += h->bytes;
    h->batch = c;
    pl_batch_free(old); /* the copy took over its write-ahead entries */
}

void pl_corr_queue_release(correlation *self, uint32_t hi)
{
    if (self->n_release == self->cap_release) {
        uint32_t cap = self->cap_release ? self->cap_release * 2 : 16;
        uint32_t *q = realloc(self->release_queue, cap * sizeof(uint32_t));
        if (!q)
            return; /* it will leave when its window closes */
        self->release_queue = q;
        self->cap_release = cap;
    }
    self->release_queue[self->n_release++] = hi;
}

/* ---- expiry of markers ------------------------------------------------------------------ */

/* How many slots of a table of `cap` to visit now: the whole table once per
 * (shortest) window, spread over the ticks by elapsed time, so a marker
 * outlives its expiry by at most about one window. */
static uint32_t sweep_budget(correlation *self, uint32_t cap, uint64_t now)
{
    uint64_t w = self->span_window < self->sample_window ? self->span_window : self->sample_window;
    uint64_t elapsed = now > self->last_sweep_ns ? now - self->last_sweep_ns : 0;
    if (!w || elapsed >= w)
        return cap;
    uint64_t b = (uint64_t)cap * elapsed / w + 64;
    return b > cap ? cap : (uint32_t)b;
}

static void sweep_markers(correlation *self, uint64_t now)
{
    uint32_t now_ms = to_ms(self, now);
    span_table *t = &self->spans;
    uint32_t cap = t->mask + 1;
    uint32_t budget = self->markers ? sweep_budget(self, cap, now) : 0;
    uint32_t i = self->sweep_pos & t->mask;
    /* Only slots moved past count against the budget: a deletion may pull
     * the next entry into slot i, which is then looked at again. */
    for (uint32_t n = 0; n < budget;) {
        span_entry *e = &t->slots[i];
        if (e->key && e->state != ENTRY_HELD && e->state != ENTRY_SPILLED &&
            e->expiry_ms <= now_ms) {
            pl_corr_stats_release(self, e->stats);
            pl_corr_span_table_delete(t, i);
            self->markers--;
            continue;
        }
        i = (i + 1) & t->mask;
        n++;
    }
    self->sweep_pos = i;

    pending_table *p = &self->pending;
    cap = p->mask + 1;
    budget = self->pending_markers ? sweep_budget(self, cap, now) : 0;
    i = self->pending_sweep_pos & p->mask;
    for (uint32_t n = 0; n < budget;) {
        pending_entry *e = &p->slots[i];
        if (e->key && e->state == 1 && e->expiry_ms <= now_ms) {
            pl_corr_pending_table_delete(p, i);
            self->pending_markers--;
            continue;
        }
        i = (i + 1) & p->mask;
        n++;
    }
    self->pending_sweep_pos = i;
    self->last_sweep_ns = now;
}

/* After a burst the tables would keep their size: halve them (down to 1024
 * slots) while they are less than an eighth full, so that memory follows
 * what is held. Only between linking sessions: entries move. */
static void shrink_tables(correlation *self)
{
    uint64_t cap = (uint64_t)self->spans.mask + 1;
    if (cap > 1024 && (uint64_t)self->spans.count * 8 < cap) {
        uint64_t want = cap;
        while (want > 1024 && (uint64_t)self->spans.count * 8 < want)
            want /= 2;
        pl_corr_span_table_resize(&self->spans, want); /* on failure the old table stays */
        self->sweep_pos = 0;
    }
    cap = (uint64_t)self->pending.mask + 1;
    if (cap > 1024 && (uint64_t)self->pending.count * 8 < cap) {
        uint64_t want = cap;
        while (want > 1024 && (uint64_t)self->pending.count * 8 < want)
            want /= 2;
        pl_corr_pending_table_resize(&self->pending, want);
        self->pending_sweep_pos = 0;
    }
}

void pl_correlation_tick(void *p)
{
    correlation *self = p;
    uint64_t now = now_ns(self);
    pl_status refusal;
    pl_corr_retry(self, now, (pl_signal)PL_SIGNAL_COUNT, &refusal);
    log_drops(self, now, false);
    pl_corr_clock_tick(self, now);
    /* While the next consumer refuses (from before, or from the first
     * release of this tick on), nothing leaves by its window: it would only
     * wait decoded in the retry list (see hand_on). */
    /* Span batches hold for their services' cadences, so their deadlines
     * are not in arrival order: look at each. Samples wait one window. */
    for (uint32_t i = self->head[SIDE_SPANS]; i && !self->n_retry;) {
        uint32_t next = self->held[i].next_held;
        held_batch *h = &self->held[i];
        if (h->epoch != self->cadence_epoch && h->n_covers && self->cfg.max_window) {
            /* A cadence was learned since it came: its hold follows. */
            uint64_t hold = 0;
            for (uint32_t k = 0; k < h->n_covers; k++) {
                uint64_t hs = pl_corr_service_hold(self, h->covers[k].service, now);
                if (hs > hold)
                    hold = hs;
            }
            h->deadline = sat_add(h->arrived, hold);
            h->epoch = self->cadence_epoch;
        }
        if (h->deadline <= now)
            pl_corr_release(self, i, RELEASE_WINDOW);
        i = next;
    }
    /* Samples wait one window, in arrival order, except those waiting for
     * a span on disk or packed (correlation_spill.c), or for the spans of a
     * lagging bus partition (correlation_bus.c): then look at each. */
    if (!self->spill_dir && !self->pack && !self->bus_held_batches) {
        while (self->head[SIDE_SAMPLES] && !self->n_retry &&
               self->held[self->head[SIDE_SAMPLES]].deadline <= now)
            pl_corr_release(self, self->head[SIDE_SAMPLES], RELEASE_WINDOW);
    } else {
        for (uint32_t i = self->head[SIDE_SAMPLES]; i && !self->n_retry;) {
            uint32_t next = self->held[i].next_held;
            if (self->held[i].deadline <= now)
                pl_corr_release(self, i, RELEASE_WINDOW);
            i = next;
        }
    }
    sweep_markers(self, now);
    pl_corr_late_expire(self, now);
    shrink_tables(self);
    pl_corr_enforce_bounds(self);
    pl_corr_update_gauges(self);
}

void pl_corr_on_timer(uv_timer_t *t)
{
    pl_correlation_tick(t->data);
}
