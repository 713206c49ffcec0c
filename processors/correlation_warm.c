/*
 * correlation_warm.c: loading ahead what linking a profile's samples reads.
 *
 * Linking a sample to a span among millions touches a chain of cache lines,
 * each found only through the one before: the span's table slot; the span
 * (or, packed, its summary, attribute values and parent id) and its
 * statistics; its parent's slot; the parent and its statistics; the name
 * and attribute bytes. A random line costs about 300 ns here (a virtual
 * machine: a TLB miss and a DRAM access), while the processor keeps a dozen
 * or more misses in flight. Waiting for each link of each chain in turn
 * made a sample cost several latencies; walking the chain with plain loads
 * for a group of samples at once (one link per pass) waited one latency per
 * pass and group.
 *
 * So the chain is walked as a pipeline of prefetches, one stage per link, a
 * group of samples apart: when group g is about to be linked, group g+1 gets
 * its last stage, g+2 the one before, and so on up to g+5, which gets its
 * first. Each stage reads only lines an earlier stage asked for at least one
 * group (a few microseconds of linking) before, and asks for the next ones
 * without waiting. Linking itself is unchanged and finds everything again:
 * nothing here changes any state. Between stages linking goes on and may
 * add entries or grow the table, so a stage remembers keys and home slots,
 * never pointers, and looks its entry up again (a wrong guess only costs a
 * useless prefetch).
 */
#include "correlation_int.h"

static inline void pf(const void *p)
{
    __builtin_prefetch(p, 0, 3);
}

/* The home slot of key (UINT32_MAX for none). */
static uint32_t home_of(const correlation *self, uint64_t key)
{
    return key ? (uint32_t)id_hash(key) & self->spans.mask : UINT32_MAX;
}

/* The held entry of key, or its exact spilled one (corr_ref_exact), probing
 * from its home `at`. */
static const span_entry *probe(const correlation *self, uint64_t key, uint32_t at)
{
    if (at == UINT32_MAX || at > self->spans.mask)
        return NULL;
    at = span_table_next(&self->spans, key, at);
    if (at == UINT32_MAX)
        return NULL;
    const span_entry *e = &self->spans.slots[at];
    return e->state == ENTRY_HELD || corr_ref_exact(e) ? e : NULL;
}

/* Asks for the lines of entry e that linking reads: for the span a sample
 * hit (`whole`), its ids, name, times and attributes (a spilled one's
 * summary, attribute values and parent id) and all its statistics; for an
 * ancestor, the totals its roll-up adds to and the trace it is told apart
 * by (held: the span's first lines; spilled: the statistics' trace, its
 * summary only when they have none: see ask_entry_data). */
static void ask_entry(const correlation *self, const span_entry *e, bool whole)
{
    if (e->state == ENTRY_HELD) {
        const char *sp = (const char *)e->span;
        pf(sp);
        pf(sp + 64);
        pf(sp + offsetof(pl_span, attrs) + sizeof(pl_attrs) - 1);
    } else if (whole) {
        const uint64_t *pk = pl_corr_spilled_parent(self, e);
        if (pk)
            pf(pk);
        pl_corr_late_ref_prefetch(self, e->late_ref, true);
    }
    if (e->stats && e->stats < self->n_stats) {
        const span_stats *st = &self->stats_arr[e->stats];
        pf(st);
        if (whole) {
            pf((const char *)st + 64);
            pf((const char *)(st + 1) - 1);
        } else {
            pf((const char *)(&st->wall_total + 1) - 1);
        }
    }
}

/* Asks for the lines found through those: the name bytes and attributes of
 * a held span, the function list of the span a sample hit when it outgrew
 * its inline two, and what a spilled ancestor's statistics leave open. */
static void ask_entry_data(const correlation *self, const span_entry *e, bool whole)
{
    if (e->state == ENTRY_HELD) { /* (a summary's strings are shared by many: mostly cached) */
        const pl_span *sp = e->span;
        if (sp->name.len)
            pf(sp->name.ptr);
        if (sp->attrs.n) {
            pf(sp->attrs.items);
            pf((const char *)sp->attrs.items + sizeof(pl_kv) - 1);
        }
    }
    const span_stats *st = e->stats && e->stats < self->n_stats ? &self->stats_arr[e->stats] : NULL;
    if (whole && st && st->cap_fns > 2)
        pf(st->fns);
    if (!whole && e->state != ENTRY_HELD) {
        /* A spilled ancestor: its parent id, and its summary when its
         * statistics do not know its trace (pl_corr_spilled_in_trace). */
        const uint64_t *pk = pl_corr_spilled_parent(self, e);
        if (pk)
            pf(pk);
        if (!st || !st->has_trace)
            pl_corr_late_ref_prefetch(self, e->late_ref, false);
    }
}

/* One stage for samples [from, to) of the profile. */
static void stage(const correlation *self, corr_warm *w, int k, uint32_t from, uint32_t to)
{
    for (uint32_t i = from; i < to; i++) {
        warm_state *ws = &w->ring[i % WARM_RING];
        const span_entry *e;
        switch (k) {
        case 0: { /* the sample's span id: ask for its home slot */
            const pl_sample *s = &w->samples[i];
            int32_t li = s->link_index;
            const pl_dictionary *d = w->dict;
            ws->key = li > 0 && (uint32_t)li < d->n_links && d->links[li].span_id_len == 8
                          ? id_key(d->links[li].span_id)
                          : 0;
            ws->home = home_of(self, ws->key);
            ws->pkey = 0;
            ws->phome = UINT32_MAX;
            if (ws->home != UINT32_MAX)
                pf(&self->spans.slots[ws->home]);
            break;
        }
        case 1: /* its entry: ask for its span or summary and statistics */
            if ((e = probe(self, ws->key, ws->home)))
                ask_entry(self, e, true);
            break;
        case 2: /* its parent's id: ask for the parent's slot, and the span's data */
            if ((e = probe(self, ws->key, ws->home))) {
                ws->pkey = pl_corr_entry_parent(self, e);
                ws->phome = home_of(self, ws->pkey);
                if (ws->phome != UINT32_MAX)
                    pf(&self->spans.slots[ws->phome]);
                ask_entry_data(self, e, true);
            }
            break;
        case 3: /* the parent's entry: its span or summary and totals */
            if ((e = probe(self, ws->pkey, ws->phome)))
                ask_entry(self, e, false);
            break;
        default: /* the parent's data */
            if ((e = probe(self, ws->pkey, ws->phome)))
                ask_entry_data(self, e, false);
            break;
        }
    }
}

static void stage_group(const correlation *self, corr_warm *w, int k, int64_t g)
{
    if (g < 0)
        return;
    uint64_t from = (uint64_t)g * WARM_GROUP;
    if (from >= w->n)
        return;
    uint64_t to = from + WARM_GROUP < w->n ? from + WARM_GROUP : w->n;
    stage(self, w, k, (uint32_t)from, (uint32_t)to);
}

/* Before linking group g: stage k for group g + WARM_STAGES - k. */
static void step(const correlation *self, corr_warm *w, int64_t g)
{
    for (int k = 0; k < WARM_STAGES; k++)
        stage_group(self, w, k, g + WARM_STAGES - k);
}

void pl_corr_warm_start(const correlation *self, corr_warm *w, const pl_dictionary *dict,
                        const pl_sample *samples, uint32_t n)
{
    w->dict = dict;
    w->samples = samples;
    w->n = self->spans.count ? n : 0;
    /* Fill the pipeline: the stages the first groups would have had. */
    for (int64_t g = -WARM_STAGES; g < 0 && w->n; g++)
        step(self, w, g);
}

void pl_corr_warm_next(const correlation *self, corr_warm *w, uint32_t si)
{
    if (si % WARM_GROUP == 0 && w->n)
        step(self, w, si / WARM_GROUP);
}
