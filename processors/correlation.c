/*
 * correlation.c: the correlation processor. One instance sits in a traces
 * pipeline and a profiles pipeline and joins the two signals: profile samples
 * that carry a span id (OTLP Link, or the `span_id` / `profile_id` labels of
 * Pyroscope SDKs) are linked to the span with that id, inside time windows.
 *
 * Join rule. A sample is linked to a span when its span id equals the span's
 * id, both trace ids agree when both are known, and (when both sides have
 * times) the sample's time overlaps the span's [start - skew, end + skew]. A
 * sample's time is [min, max] of its timestamps_unix_nano, or, when it has
 * none, [time_unix_nano - duration_nano, time_unix_nano + duration_nano]:
 * pprof's time_nanos is the collection start, but the Node.js SDK stamps the
 * end. Bounds are inclusive, so a timestamp exactly at end + skew links.
 *
 * Batches are the unit of holding. A traces batch is indexed (span id ->
 * entry in the span table) and held until span-linked profiles of its
 * services covering its spans' end (+ skew) have been seen, until its hold
 * ends (each service's learned upload cadence, within [span_window,
 * max_window]: correlation_cadence.c), or until a bound or memory pressure
 * pushes it out. Then its spans get their profile
 * summary and the batch goes to the `next` it came with. A profiles batch is
 * linked at once against the held spans; samples whose span is not yet known
 * wait in their batch (in the pending table); the batch goes on as soon as
 * none waits any more, or when its window closes. Linked samples are
 * enriched the moment they link, so a sample never needs its span's batch
 * after that. Nothing is ever dropped: whatever leaves early leaves with what
 * it has.
 *
 * Correlation answers 200 for what it holds, so what the next consumer
 * refuses later (a store or queue that is full or cannot write) is kept and
 * offered again, whatever released it, and while it waits new data of its
 * signal is refused (503 / UNAVAILABLE: clients retry) and nothing leaves by
 * its window (correlation_release.c, hand_on). Only bounds drop, counted and
 * logged. Holds and timers run on the monotonic clock; senders' timestamps
 * only match samples to spans, measure coverage, and are compared with the
 * wall clock to report their skew (correlation_cadence.c).
 *
 * While no profiles come (none within the longest hold, the sample window and
 * a minute), traces batches are held without being indexed: a pipeline with
 * no profiler pays a counter per span. The next profiles batch indexes them,
 * oldest first. A service without span-linked profiles after the warm-up is
 * not held at all.
 *
 * A span that leaves leaves a compact summary for late_window, from which a
 * sample arriving after it is enriched like an on-time one
 * (correlation_late.c).
 *
 * Files: this one has the config, the consume paths and the component;
 * correlation_index.c the span and pending tables, statistics and placeholders;
 * correlation_enrich.c the sample-side reading and the enrichment of samples
 * and spans; correlation_release.c holding, releasing, bounds and expiry;
 * correlation_cadence.c services and their cadences; correlation_late.c the
 * departed spans' summaries. correlation_int.h holds what they share.
 *
 * Linking works in sessions (one incoming batch): the labels of a (request,
 * span) pair are built once and reused for every sample of that span, and
 * the totals for the ancestors are handed up once per pair when the session
 * ends. Until then nothing is inserted in the span table, so entry pointers
 * stay valid. A sample keeps (or gets) the span's ids in its Link, completed
 * with the trace id; it gets trace_id / span_id attributes only when it has
 * no link, because the pprof encoder writes labels from both.
 *
 * The span table is an open-addressing multimap (linear probing, backward
 * shift deletion) of 32-byte entries keyed by the 8-byte span id; the key 0
 * marks an empty slot, which is safe because an all-zero span id is invalid
 * and never indexed. Duplicate span ids (in different traces) are simply
 * several entries with the same key. An entry points at its span inside the
 * held batch instead of copying trace id, times and name, which keeps the
 * index near 64 bytes per held span at the 0.5 maximum load. The statistics
 * of spans that had samples live in a side array, allocated only for them.
 *
 * Besides held spans, the span table keeps two kinds of markers, which expire
 * after a window and are swept incrementally: a placeholder for a parent span
 * not seen yet (it collects its descendants' totals, handed over when the
 * parent arrives: long requests end, and so are exported, after their
 * children), and a "gone" marker for a released span, so that a sample
 * arriving after its span left is counted as a late partner. The pending
 * table keeps "gone" markers for released unlinked samples likewise.
 *
 * Local roots and ancestors: a linked sample counts toward its span's self
 * totals and toward the total of every known ancestor in the same trace. The
 * local root (reported on samples) is the topmost known ancestor of the same
 * service. Samples stamped only with the local root's id (Pyroscope Go and
 * .NET) therefore land on that root, as they should.
 *
 * Profile values. OTLP profiles carry one sample type per profile, so a pprof
 * with several sample types arrives as several profiles holding the same
 * samples. To count each hit once, the statistics of a scope come from one
 * profile per quantity: sample counts from the samples/count profile (or one
 * per sample entry of the time profile when there is none), CPU time from the
 * cpu/nanoseconds profile (or samples/count x period when the period type is
 * cpu/nanoseconds and no cpu/nanoseconds profile exists), wall time likewise
 * from wall/nanoseconds. The hottest functions are the leaf functions weighted
 * by CPU time, else wall time, else sample count. Other profiles (heap, ...)
 * are linked and enriched but add nothing to the summary.
 */
#include "correlation_int.h"

#include <stddef.h>

#include <sys/stat.h>

/* ---- config ----------------------------------------------------------------------------- */

static int correlation_validate(void *p, pl_cfg_ctx *ctx)
{
    pl_correlation_config *c = p;
    int errors = 0; /* single options' limits: the schema (correlation.config.yaml) */
    if (c->span_window < 0 || c->sample_window < 0) {
        pl_cfg_errorf(ctx, c->span_window < 0 ? "span_window" : "sample_window",
                      "a window cannot be negative");
        errors++;
    }
    if (c->max_window < 0 || c->warmup < 0 || c->late_window < 0) {
        pl_cfg_errorf(ctx,
                      c->max_window < 0 ? "max_window"
                      : c->warmup < 0   ? "warmup"
                                        : "late_window",
                      "a window cannot be negative");
        errors++;
    }
    struct stat sst;
    if (c->storage && !c->storage[0]) {
        pl_cfg_errorf(ctx, "storage", "storage must name a directory");
        errors++;
    } else if (c->storage && stat(c->storage, &sst) == 0 && !S_ISDIR(sst.st_mode)) {
        pl_cfg_errorf(ctx, "storage", "%s is not a directory", c->storage);
        errors++;
    }
    if (c->hold_compression && strcmp(c->hold_compression, "zstd") != 0 &&
        strcmp(c->hold_compression, "none") != 0) {
        pl_cfg_errorf(ctx, "hold_compression", "hold_compression must be zstd or none");
        errors++;
    }
    if (c->storage && c->max_spill_bytes == 0) {
        pl_cfg_errorf(ctx, "max_spill_bytes", "max_spill_bytes must be positive");
        errors++;
    }
    if (c->top_functions < 0 || c->top_functions > MAX_TOP_CANDIDATES) {
        pl_cfg_errorf(ctx, "top_functions", "top_functions must be between 0 and %d",
                      MAX_TOP_CANDIDATES);
        errors++;
    }
    return errors;
}

#include "processors/correlation.config.inc"

void pl_correlation_config_defaults(pl_correlation_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->window = 30 * 1000000000LL;
    cfg->max_clock_skew = 1000000000LL;
    cfg->clock_skew_warning = 60 * 1000000000LL;
    cfg->max_spans = 1000000;
    cfg->max_pending_samples = 1000000;
    cfg->max_bytes = 256ull << 20;
    cfg->top_functions = 5;
    cfg->early_release = true;
    cfg->max_window = 180 * 1000000000LL;
    cfg->warmup = 180 * 1000000000LL;
    cfg->late_window = 600 * 1000000000LL;
    cfg->late_max_spans = 1000000;
    cfg->late_max_bytes = 128ull << 20;
    cfg->bus_lag_wait = 300 * 1000000000LL;
    cfg->bus_lag_max_bytes = 64ull << 20;
    cfg->max_spill_bytes = 1ull << 30;
}

/* ---- consuming traces ------------------------------------------------------------------- */

static bool add_cover(held_batch *h, uint16_t service, uint64_t end)
{
    for (uint32_t i = 0; i < h->n_covers; i++) {
        if (h->covers[i].service == service) {
            if (end > h->covers[i].max_end)
                h->covers[i].max_end = end;
            return true;
        }
    }
    cover *c = realloc(h->covers, (h->n_covers + 1) * sizeof(cover));
    if (!c)
        return false;
    h->covers = c;
    h->covers[h->n_covers++] = (cover){service, end};
    return true;
}

span_entry *pl_corr_entry_of_span(correlation *self, const pl_span *sp)
{
    SPAN_EACH(&self->spans, id_key(sp->span_id), i)
    {
        if (self->spans.slots[i].state == ENTRY_HELD && self->spans.slots[i].span == sp)
            return &self->spans.slots[i];
    }
    return NULL;
}

static void remember_adopted(correlation *self, pl_span *sp)
{
    if (self->n_adopted == self->cap_adopted) {
        uint32_t cap = self->cap_adopted ? self->cap_adopted * 2 : 16;
        pl_span **a = realloc(self->adopted, cap * sizeof(pl_span *));
        if (!a)
            return; /* its descendants' totals stay with it, not its ancestors */
        self->adopted = a;
        self->cap_adopted = cap;
    }
    self->adopted[self->n_adopted++] = sp;
}

/* Links the samples waiting for span `sp` (just indexed). */
static void link_waiting_samples(correlation *self, pl_span *sp)
{
    pending_table *t = &self->pending;
    uint64_t key = id_key(sp->span_id);
    const uint8_t *strace = pl_corr_span_trace(sp);
    uint32_t i = pl_corr_pending_table_next(t, key, UINT32_MAX);
    bool counted_late = false;
    while (i != UINT32_MAX) {
        pending_entry *pe = &t->slots[i];
        if (pe->state == 1) {
            /* Samples of this span id left unlinked before it came. */
            if (!counted_late) {
                (*self->c_late_spans)++;
                counted_late = true;
            }
            pl_corr_pending_table_delete(t, i);
            self->pending_markers--;
            i = pl_corr_pending_table_next(t, key, i);
            continue;
        }
        uint8_t trace[16];
        bool has_trace;
        uint64_t k2, lo = 0, hi = 0;
        pl_dictionary *dict = &pe->pinfo->batch->data.profiles.dict;
        pl_corr_sample_ids(dict, pe->sample, &k2, trace, &has_trace);
        bool has_time = pl_corr_sample_time(pe->pinfo, pe->sample, &lo, &hi);
        bool ok = (!has_trace || !strace || memcmp(trace, strace, 16) == 0) &&
                  (!has_time || pl_corr_span_time_matches(self, sp, lo, hi));
        span_entry *e = ok ? pl_corr_entry_of_span(self, sp) : NULL;
        if (!e) {
            i = pl_corr_pending_table_next(t, key, (i + 1) & t->mask);
            continue;
        }
        uint32_t hidx = pe->held;
        pl_corr_link_sample(self, e, pe->sample, pe->pinfo);
        pl_corr_pending_table_delete(t, i);
        self->pending_samples--;
        if (--self->held[hidx].items == 0)
            pl_corr_queue_release(self, hidx);
        i = pl_corr_pending_table_next(t, key, i);
    }
}

/* Links the samples that waited for the spans of batch b, just indexed (or
 * a spilled batch read back, its entries held again: their summaries had
 * gone from the late store). */
void pl_corr_link_waiting_batch(correlation *self, pl_batch *b)
{
    if (!self->pending.count)
        return;
    pl_traces *t = &b->data.traces;
    pl_corr_cache_clear(self);
    for (uint32_t r = 0; r < t->n_resources; r++) {
        pl_resource_spans *rs = &t->resources[r];
        for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
            pl_scope_spans *ss = &rs->scopes[sc];
            for (uint32_t k = 0; k < ss->n_spans; k++) {
                pl_span *sp = &ss->spans[k];
                if (span_id_valid(sp->span_id, sp->span_id_len))
                    link_waiting_samples(self, sp);
            }
        }
    }
    pl_corr_link_session_end(self);
}

/* Indexes the spans of held batch `hi` (span id -> entry), hands the totals
 * of adopted placeholders up, and links the samples waiting for them. */
static void index_span_batch(correlation *self, uint32_t hi)
{
    if (self->held[hi].packed && !pl_corr_unpack(self, hi))
        return; /* lost (logged), its record gone */
    held_batch *h = &self->held[hi];
    pl_traces *t = &h->batch->data.traces;
    self->n_adopted = 0;
    bool cover_ok = true;
    h->indexed = true;
    self->unindexed_batches--;
    for (uint32_t r = 0; r < t->n_resources; r++) {
        pl_resource_spans *rs = &t->resources[r];
        uint16_t svc = pl_corr_service_id(self, pl_corr_resource_service(&rs->resource));
        for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
            pl_scope_spans *ss = &rs->scopes[sc];
            for (uint32_t k = 0; k < ss->n_spans; k++) {
                pl_span *sp = &ss->spans[k];
                if (k + PREFETCH_AHEAD < ss->n_spans)
                    corr_span_table_prefetch(&self->spans, &ss->spans[k + PREFETCH_AHEAD]);
                if (!span_id_valid(sp->span_id, sp->span_id_len))
                    continue;
                uint64_t key = id_key(sp->span_id);
                span_entry *ph =
                    self->markers
                        ? pl_corr_find_span(self, key, pl_corr_span_trace(sp), false, true)
                        : NULL;
                if (ph) {
                    /* A placeholder with descendants' totals: the span takes them. */
                    ph->state = ENTRY_HELD;
                    ph->span = sp;
                    ph->held = hi;
                    ph->service = svc;
                    ph->expiry_ms = 0;
                    self->markers--;
                    remember_adopted(self, sp);
                } else {
                    span_entry e = {0};
                    e.key = key;
                    e.span = sp;
                    e.held = hi;
                    e.service = svc;
                    e.state = ENTRY_HELD;
                    uint32_t same;
                    e.alone = true;
                    if (pl_corr_span_table_insert(&self->spans, &e, &same))
                        continue; /* out of memory: this span stays unlinked */
                    if (same)
                        pl_corr_not_alone(self, key);
                }
                self->indexed_spans++;
                uint64_t end =
                    sp->end_time_unix_nano ? sp->end_time_unix_nano : sp->start_time_unix_nano;
                if (cover_ok && !add_cover(h, svc, end))
                    cover_ok = false;
            }
        }
    }
    if (!cover_ok)
        h->n_covers = 0; /* cannot prove coverage: wait for the window */

    /* Second pass, now that every span of the batch is indexed (parents
     * included): hand adopted totals up, then link waiting samples. Entries
     * are found again by span each time: a placeholder insert may move them. */
    for (uint32_t a = 0; a < self->n_adopted; a++) {
        pl_span *sp = self->adopted[a];
        span_entry *e = pl_corr_entry_of_span(self, sp);
        if (!e || !e->stats)
            continue;
        span_stats *st = &self->stats_arr[e->stats];
        contrib c = {st->samples_total, st->cpu_total, st->wall_total, 0};
        if (c.samples || c.cpu || c.wall)
            pl_corr_roll_up(self, e, c, NULL);
    }
    self->n_adopted = 0;
    pl_corr_link_waiting_batch(self, h->batch);
}

/* Spans with a valid id; *latest: the latest end (data time) of any. */
static uint32_t count_spans(const pl_batch *batch, uint64_t *latest)
{
    const pl_traces *t = &batch->data.traces;
    uint32_t n = 0;
    uint64_t end = 0;
    for (uint32_t r = 0; r < t->n_resources; r++)
        for (uint32_t sc = 0; sc < t->resources[r].n_scopes; sc++) {
            const pl_scope_spans *ss = &t->resources[r].scopes[sc];
            for (uint32_t k = 0; k < ss->n_spans; k++) {
                n += span_id_valid(ss->spans[k].span_id, ss->spans[k].span_id_len);
                if (ss->spans[k].end_time_unix_nano > end)
                    end = ss->spans[k].end_time_unix_nano;
            }
        }
    *latest = end;
    return n;
}

/* Have profiles come lately? Until they do, span batches are held without
 * being indexed: a pipeline with no profiler pays almost nothing per span.
 * The horizon covers both windows plus the slowest SDK upload period. */
static bool profiles_present(correlation *self, uint64_t now)
{
    return self->last_profiles_ns &&
           now <= sat_add(self->last_profiles_ns,
                          self->max_hold + self->sample_window + PROFILES_HORIZON_NS);
}

static pl_status consume_traces(correlation *self, pl_batch *batch, pl_consumer *next)
{
    uint64_t latest;
    uint32_t n_spans = count_spans(batch, &latest);
    pl_corr_clock_saw(self, latest, wall_ns(self));
    if (n_spans == 0)
        return pl_consumer_consume(next, batch);
    /* The batch is held as long as its slowest service needs. */
    uint64_t now = now_ns(self), hold = 0;
    const pl_traces *tr = &batch->data.traces;
    for (uint32_t r = 0; r < tr->n_resources; r++) {
        uint16_t svc =
            pl_corr_service_id(self, pl_corr_resource_service(&tr->resources[r].resource));
        pl_corr_service_saw_span(self, svc, now);
        uint64_t h = pl_corr_service_hold(self, svc, now);
        if (h > hold)
            hold = h;
    }
    if (hold == 0) {
        /* No service in it sends span-linked profiles: nothing to wait for. */
        *self->c_not_held += n_spans;
        return pl_consumer_consume(next, batch);
    }
    uint32_t hi = pl_corr_held_alloc(self);
    if (!hi)
        return pl_consumer_consume(next, batch);
    held_batch *h = &self->held[hi];
    h->batch = batch;
    h->next = next;
    h->side = SIDE_SPANS;
    h->seq = ++self->seq;
    h->deadline = sat_add(now, hold);
    h->arrived = now;
    h->epoch = self->cadence_epoch;
    h->items = n_spans;
    self->held_spans += n_spans;
    h->bytes = pl_batch_memory(batch);
    self->held_bytes += h->bytes;
    self->unindexed_batches++;
    pl_corr_held_link(self, hi);
    if (profiles_present(self, now)) {
        index_span_batch(self, hi);
        pl_corr_flush_release_queue(self);
        if (self->cfg.early_release && self->held[hi].batch == batch &&
            pl_corr_batch_covered(self, &self->held[hi]))
            pl_corr_release(self, hi, RELEASE_COVERED);
        else if (self->held[hi].batch == batch)
            pl_corr_pack(self, hi);
    } else {
        pl_corr_pack_unindexed(self, hi);
    }
    pl_corr_enforce_bounds(self);
    pl_corr_update_gauges(self);
    return PL_OK;
}

/* ---- consuming profiles ----------------------------------------------------------------- */

static bool vt_is(const pl_dictionary *d, pl_vtype vt, const char *type, const char *unit)
{
    return pl_bytes_eq_cstr(pl_dict_string(d, vt.type_strindex), type) &&
           pl_bytes_eq_cstr(pl_dict_string(d, vt.unit_strindex), unit);
}

/* Decides what each profile of a scope contributes (see the header comment). */
static void classify_scope(pl_batch *batch, pl_scope_profiles *sp, profile_info *infos)
{
    const pl_dictionary *d = &batch->data.profiles.dict;
    int cpu = -1, wall = -1, count = -1;
    for (uint32_t i = 0; i < sp->n_profiles; i++) {
        pl_profile *p = &sp->profiles[i];
        if (!p->has_sample_type)
            continue;
        if (cpu < 0 && vt_is(d, p->sample_type, "cpu", "nanoseconds"))
            cpu = (int)i;
        else if (wall < 0 && vt_is(d, p->sample_type, "wall", "nanoseconds"))
            wall = (int)i;
        else if (count < 0 && vt_is(d, p->sample_type, "samples", "count"))
            count = (int)i;
    }
    int cpu_src = cpu, wall_src = wall;
    if (count >= 0) {
        profile_info *ci = &infos[count];
        pl_profile *p = &sp->profiles[count];
        ci->counts_samples = true;
        if (p->has_period_type && p->period > 0) {
            if (cpu < 0 && vt_is(d, p->period_type, "cpu", "nanoseconds")) {
                ci->cpu_mult = p->period;
                cpu_src = count;
            } else if (wall < 0 && vt_is(d, p->period_type, "wall", "nanoseconds")) {
                ci->wall_mult = p->period;
                wall_src = count;
            }
        }
    }
    if (cpu >= 0)
        infos[cpu].cpu_mult = 1;
    if (wall >= 0)
        infos[wall].wall_mult = 1;
    if (count < 0) {
        int primary = cpu >= 0 ? cpu : wall;
        if (primary >= 0)
            infos[primary].counts_entries = true;
    }
    if (cpu_src >= 0)
        infos[cpu_src].top_kind = 1;
    else if (wall_src >= 0)
        infos[wall_src].top_kind = 2;
    else if (count >= 0)
        infos[count].top_kind = 3;
}

typedef struct waiting {
    uint64_t key;
    pl_sample *sample;
    profile_info *pinfo;
} waiting;

static pl_status consume_profiles(correlation *self, pl_batch *batch, pl_consumer *next)
{
    pl_profiles *ps = &batch->data.profiles;
    pl_dictionary *dict = &ps->dict;
    waiting *wait = NULL;
    size_t n_wait = 0, cap_wait = 0;
    bool coverage_moved = false;
    uint64_t spill_wait = 0; /* a waiting sample's span is on disk: wait for it to leave */
    corr_warm warm;          /* loading ahead (correlation_warm.c) */
    self->last_profiles_ns = now_ns(self);
    uint64_t wall = wall_ns(self);
    if (self->unindexed_batches) {
        /* Profiles are back: index the spans held meanwhile, oldest first. */
        for (uint32_t i = self->head[SIDE_SPANS], nx; i; i = nx) {
            nx = self->held[i].next_held; /* i may go (a packed batch lost) */
            if (!self->held[i].indexed)
                index_span_batch(self, i);
        }
        pl_corr_flush_release_queue(self);
        pl_corr_pack_indexed(self);
    }
    pl_corr_cache_clear(self);

    for (uint32_t r = 0; r < ps->n_resources; r++) {
        pl_resource_profiles *rp = &ps->resources[r];
        uint16_t svc = pl_corr_service_id(self, pl_corr_resource_service(&rp->resource));
        for (uint32_t sc = 0; sc < rp->n_scopes; sc++) {
            pl_scope_profiles *sp = &rp->scopes[sc];
            if (!sp->n_profiles)
                continue;
            profile_info *infos = pl_batch_alloc(batch, sp->n_profiles * sizeof(profile_info));
            if (!infos)
                continue;
            classify_scope(batch, sp, infos);
            for (uint32_t pi = 0; pi < sp->n_profiles; pi++) {
                pl_profile *p = &sp->profiles[pi];
                profile_info *info = &infos[pi];
                info->batch = batch;
                info->profile = p;
                info->service = svc;
                /* pprof says time_nanos is the collection start, but the
                 * Node.js SDK (@datadog/pprof) stamps the end: a sample
                 * with only this window may lie up to one duration either
                 * side of time_unix_nano. For early release the profile
                 * proves coverage only up to time_unix_nano (or its latest
                 * sample timestamp): spans then wait at most one profile
                 * longer, never lose samples. */
                info->t_start = p->time_unix_nano > p->duration_nano
                                    ? p->time_unix_nano - p->duration_nano
                                    : (p->time_unix_nano ? 1 : 0);
                info->t_end = sat_add(p->time_unix_nano, p->duration_nano);
                uint64_t covered = p->time_unix_nano;
                bool any_link = false;
                pl_corr_warm_start(self, &warm, dict, p->samples, p->n_samples);
                for (uint32_t si = 0; si < p->n_samples; si++) {
                    pl_sample *s = &p->samples[si];
                    pl_corr_warm_next(self, &warm, si);
                    for (uint32_t ti = 0; ti < s->n_timestamps; ti++)
                        if (s->timestamps_unix_nano[ti] > covered)
                            covered = s->timestamps_unix_nano[ti];
                    uint64_t key, lo = 0, hi = 0;
                    uint8_t trace[16];
                    bool has_trace;
                    if (!pl_corr_sample_ids(dict, s, &key, trace, &has_trace))
                        continue;
                    any_link = true;
                    bool has_time = pl_corr_sample_time(info, s, &lo, &hi);
                    span_entry *se = NULL;
                    const late_span *ls = NULL;
                    span_entry *e = self->spans.count
                                        ? pl_corr_match_sample(self, key, has_trace ? trace : NULL,
                                                               has_time, lo, hi, &se, &ls)
                                        : NULL;
                    if (e) {
                        pl_corr_link_sample(self, e, s, info);
                        continue;
                    }
                    if (ls) {
                        /* Its span is packed (or on disk), its summary at hand. */
                        pl_corr_link_spilled(self, se, ls, s, info);
                        continue;
                    }
                    ls = self->late ? pl_corr_late_find(self, key, has_trace ? trace : NULL,
                                                        has_time, lo, hi)
                                    : NULL;
                    se = ls ? pl_corr_spilled_entry(self, ls) : NULL;
                    if (se) {
                        /* Its span is held on disk: on time after all. */
                        pl_corr_link_spilled(self, se, ls, s, info);
                        continue;
                    }
                    if (ls) {
                        /* Its span left: enriched from the span's summary. */
                        pl_corr_link_late(self, ls, s, info);
                        (*self->c_late_samples)++;
                        continue;
                    }
                    bool gone = false;
                    if (self->markers) {
                        SPAN_EACH(&self->spans, key, i)
                        {
                            if (self->spans.slots[i].state == ENTRY_GONE) {
                                gone = true;
                                break;
                            }
                        }
                    }
                    if (gone) {
                        /* Its span already left: flows on unenriched. */
                        (*self->c_late_samples)++;
                        (*self->c_unlinked_samples)++;
                        continue;
                    }
                    if (n_wait == cap_wait) {
                        size_t cap = cap_wait ? cap_wait * 2 : 64;
                        waiting *w2 = realloc(wait, cap * sizeof(waiting));
                        if (!w2) {
                            (*self->c_unlinked_samples)++;
                            continue;
                        }
                        wait = w2;
                        cap_wait = cap;
                    }
                    wait[n_wait++] = (waiting){key, s, info};
                    if (self->spilled_spans) {
                        uint64_t d = pl_corr_spilled_deadline(self, key);
                        if (d > spill_wait)
                            spill_wait = d;
                    }
                }
                /* Coverage comes only from the streams that carry span ids
                 * (see correlation_cadence.c). */
                pl_bytes ty = {NULL, 0}, un = {NULL, 0};
                if (p->has_sample_type) {
                    ty = pl_dict_string(dict, p->sample_type.type_strindex);
                    un = pl_dict_string(dict, p->sample_type.unit_strindex);
                }
                pl_corr_clock_saw(self, covered, wall);
                if (pl_corr_stream_upload(self, svc, ty, un, any_link, covered, p->duration_nano,
                                          self->last_profiles_ns, pl_corr_sender_now(self, wall)))
                    coverage_moved = true;
            }
        }
    }
    pl_corr_link_session_end(self);

    uint32_t hi = n_wait ? pl_corr_held_alloc(self) : 0;
    if (hi) {
        held_batch *h = &self->held[hi];
        h->batch = batch;
        h->next = next;
        h->side = SIDE_SAMPLES;
        h->seq = ++self->seq;
        h->deadline = sat_add(now_ns(self), self->sample_window);
        if (spill_wait > h->deadline)
            h->deadline = sat_add(spill_wait, 1000000000ull); /* read back first */
        h->refs = malloc(n_wait * sizeof(pending_ref));
        for (size_t i = 0; h->refs && i < n_wait; i++) {
            pending_entry pe = {0};
            pe.key = wait[i].key;
            pe.sample = wait[i].sample;
            pe.pinfo = wait[i].pinfo;
            pe.held = hi;
            if (pl_corr_pending_table_insert(&self->pending, &pe, NULL)) {
                (*self->c_unlinked_samples)++;
                continue;
            }
            h->refs[h->n_refs++] = (pending_ref){wait[i].key, wait[i].sample};
        }
        if (!h->refs)
            *self->c_unlinked_samples += n_wait;
        h->items = h->n_refs;
        self->pending_samples += h->n_refs;
        h->bytes = pl_batch_memory(batch);
        self->held_bytes += h->bytes;
        pl_corr_held_link(self, hi);
        if (h->items == 0) {
            /* Nothing could be held after all (out of memory): flow on. */
            pl_corr_release(self, hi, RELEASE_WINDOW);
            free(wait);
            if (coverage_moved)
                pl_corr_release_covered(self);
            pl_corr_update_gauges(self);
            return PL_OK;
        }
        pl_corr_compact_samples(self, hi);
        pl_corr_bus_hold(self, hi);
    } else if (n_wait) {
        *self->c_unlinked_samples += n_wait; /* no room to hold it */
    }
    free(wait);
    if (!hi) {
        if (coverage_moved)
            pl_corr_release_covered(self);
        pl_corr_update_gauges(self);
        return pl_consumer_consume(next, batch);
    }
    if (coverage_moved)
        pl_corr_release_covered(self);
    pl_corr_enforce_bounds(self);
    pl_corr_update_gauges(self);
    return PL_OK;
}

/* ---- the component ---------------------------------------------------------------------- */

static pl_status correlation_consume(void *p, pl_batch *batch, pl_consumer *next)
{
    correlation *self = p;
    pl_signal sig = batch->signal;
    pl_stats_add(self->stats, sig, PL_STAT_ACCEPTED, pl_batch_items(batch));
    unsigned both = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    /* With only one of the two signals there is nothing to join. */
    if (self->shut_down || (self->signals & both) != both ||
        (sig != PL_SIGNAL_TRACES && sig != PL_SIGNAL_PROFILES))
        return pl_consumer_consume(next, batch);
    pl_status refusal;
    if (self->n_retry && !pl_corr_retry(self, now_ns(self), sig, &refusal)) {
        /* The next consumer refuses what was released: pass that on. */
        pl_stats_add(self->stats, sig, PL_STAT_REFUSED, pl_batch_items(batch));
        pl_batch_free(batch);
        return refusal;
    }
    if (pl_host_memory_state(self->host) == PL_MEMORY_HARD)
        pl_corr_release_all(self, RELEASE_EARLY);
    if (self->n_leftovers && sig == PL_SIGNAL_TRACES)
        pl_corr_spill_replay(self, next); /* spill files of an earlier run */
    pl_corr_bus_note(self, batch);
    pl_status st = sig == PL_SIGNAL_TRACES ? consume_traces(self, batch, next)
                                           : consume_profiles(self, batch, next);
    pl_corr_bus_progress(self);
    return st;
}

static pl_bytes name_or(const char *configured, const char *dflt)
{
    return pl_bytes_from_cstr(configured && *configured ? configured : dflt);
}

static void correlation_free(correlation *self)
{
    for (uint32_t i = 1; i < self->n_stats; i++) {
        if (self->stats_arr[i].cap_fns > 2)
            free(self->stats_arr[i].fns);
    }
    for (uint32_t i = 1; i < self->n_fn_names; i++)
        free(self->fn_names[i].name);
    free(self->fn_names);
    free(self->fn_index);
    for (uint32_t i = 1; i < self->n_held; i++) {
        free(self->held[i].covers);
        free(self->held[i].refs);
        free(self->held[i].parents);
    }
    pl_corr_writer_reset(&self->writer);
    pl_corr_services_free(self);
    pl_corr_late_free(self);
    pl_corr_retry_free(self);
    pl_corr_spill_free(self);
    pl_corr_stats_free(self);
    free(self->held);
    free(self->spans.slots);
    free(self->pending.slots);
    free(self->cache);
    free(self->cache_used);
    free(self->release_queue);
    free(self->adopted);
    for (size_t i = 0; i < self->n_span_attr_keys; i++)
        free((void *)self->span_attr_keys[i].ptr);
    free(self->span_attr_keys);
    for (size_t i = 0; i < sizeof(self->names) / sizeof(self->names[0]); i++)
        free((void *)self->names[i].ptr);
    free(self->id);
    if (self->own_stats)
        pl_stats_free(self->own_stats);
    free(self);
}

static pl_status correlation_create(const pl_create_settings *settings, const void *config,
                                    void **out_self, pl_err *err)
{
    const pl_correlation_config *cfg = config;
    correlation *self = calloc(1, sizeof(*self));
    if (!self)
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    self->cfg = *cfg;
    /* Strings and lists stay with the caller's config: copy what we keep. */
    self->cfg.span_attributes = (pl_strlist){NULL, 0};
    const char *const defaults[] = {"trace_id",
                                    "span_id",
                                    "span_name",
                                    "root_span_name",
                                    "service.name",
                                    "pyroscope.profile.id",
                                    "profile.samples",
                                    "profile.cpu_time_ns",
                                    "profile.cpu_time_total_ns",
                                    "profile.wall_time_ns",
                                    "profile.top_functions"};
    const char *const configured[] = {
        cfg->trace_id_attribute,        cfg->span_id_attribute,      cfg->span_name_attribute,
        cfg->root_span_name_attribute,  cfg->service_name_attribute, cfg->profile_id_attribute,
        cfg->profile_samples_attribute, cfg->cpu_time_attribute,     cfg->cpu_time_total_attribute,
        cfg->wall_time_attribute,       cfg->top_functions_attribute};
    for (int i = 0; i < 11; i++) {
        pl_bytes b = name_or(configured[i], defaults[i]);
        char *copy = strndup((const char *)b.ptr, b.len);
        if (!copy) {
            correlation_free(self);
            return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
        }
        self->names[i] = (pl_bytes){(const uint8_t *)copy, b.len};
    }
    self->cfg.trace_id_attribute = self->cfg.span_id_attribute = NULL;
    self->cfg.span_name_attribute = self->cfg.root_span_name_attribute = NULL;
    self->cfg.service_name_attribute = self->cfg.profile_id_attribute = NULL;
    self->cfg.profile_samples_attribute = self->cfg.cpu_time_attribute = NULL;
    self->cfg.cpu_time_total_attribute = self->cfg.wall_time_attribute = NULL;
    self->cfg.top_functions_attribute = NULL;
    self->cfg.storage = NULL;
    self->pack = !cfg->hold_compression || strcmp(cfg->hold_compression, "none") != 0;
    self->cfg.hold_compression = NULL;
    if (cfg->storage && cfg->storage[0] && !(self->spill_dir = strdup(cfg->storage))) {
        correlation_free(self);
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    }
    if (!self->cfg.max_spill_bytes)
        self->cfg.max_spill_bytes = 1ull << 30;
    if (cfg->span_attributes.n) {
        self->span_attr_keys = calloc(cfg->span_attributes.n, sizeof(pl_bytes));
        if (!self->span_attr_keys) {
            correlation_free(self);
            return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
        }
        for (size_t i = 0; i < cfg->span_attributes.n; i++) {
            char *copy = strdup(cfg->span_attributes.items[i]);
            if (!copy) {
                correlation_free(self);
                return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
            }
            self->span_attr_keys[self->n_span_attr_keys++] =
                (pl_bytes){(const uint8_t *)copy, (uint32_t)strlen(copy)};
        }
    }
    if (self->cfg.window <= 0)
        self->cfg.window = 30 * 1000000000LL;
    if (self->cfg.max_spans <= 0)
        self->cfg.max_spans = 1000000;
    if (self->cfg.max_pending_samples <= 0)
        self->cfg.max_pending_samples = 1000000;
    if (!self->cfg.max_bytes)
        self->cfg.max_bytes = 256ull << 20;
    if (self->cfg.top_functions < 0)
        self->cfg.top_functions = 0;
    if (self->cfg.top_functions > MAX_TOP_CANDIDATES)
        self->cfg.top_functions = MAX_TOP_CANDIDATES;
    self->span_window =
        (uint64_t)(self->cfg.span_window > 0 ? self->cfg.span_window : self->cfg.window);
    self->sample_window =
        (uint64_t)(self->cfg.sample_window > 0 ? self->cfg.sample_window : self->cfg.window);
    self->skew = (uint64_t)(self->cfg.max_clock_skew > 0 ? self->cfg.max_clock_skew : 0);
    if (self->cfg.max_window < 0)
        self->cfg.max_window = 0;
    if (self->cfg.warmup < 0)
        self->cfg.warmup = 0;
    self->max_hold = (uint64_t)self->cfg.max_window > self->span_window
                         ? (uint64_t)self->cfg.max_window
                         : self->span_window;

    self->id = strdup(settings && settings->id ? settings->id : "correlation");
    self->loop = settings ? settings->loop : NULL;
    self->clock = settings ? settings->clock : (pl_clock){NULL, NULL};
    self->host = settings ? settings->host : NULL;
    self->signals = settings && settings->signals ? settings->signals : PL_SIGNALS_ALL;
    self->stats = settings ? settings->stats : NULL;
    if (!self->stats) {
        self->own_stats = pl_stats_new(self->id ? self->id : "correlation", PL_KIND_PROCESSOR);
        self->stats = self->own_stats;
    }
    self->base_ns = now_ns(self);
    self->retry_ns = 1000000000ull;
    self->last_sweep_ns = self->base_ns;
    if (!self->id || !self->stats || pl_corr_span_table_init(&self->spans, 1024) ||
        pl_corr_pending_table_init(&self->pending, 1024)) {
        correlation_free(self);
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    }
    pl_stats *st = self->stats;
    self->c_linked_samples =
        pl_stats_counter(st, "linked_samples", "profile samples linked to a span");
    self->c_unlinked_samples = pl_stats_counter(
        st, "unlinked_samples", "samples with a span id that left without finding their span");
    self->c_late_samples = pl_stats_counter(
        st, "late_samples", "samples that arrived after their span had been released");
    self->c_early_samples = pl_stats_counter(
        st, "released_early_samples", "waiting samples pushed out by a bound or memory pressure");
    self->c_linked_spans = pl_stats_counter(st, "linked_spans", "spans released with samples");
    self->c_unlinked_spans =
        pl_stats_counter(st, "unlinked_spans", "spans released without samples of their own");
    self->c_late_spans = pl_stats_counter(
        st, "late_spans", "spans that arrived after their samples had been released");
    self->c_early_spans = pl_stats_counter(st, "released_early_spans",
                                           "spans pushed out by a bound or memory pressure");
    self->c_covered_spans =
        pl_stats_counter(st, "spans_released_on_coverage",
                         "spans released once their service's profiles covered them");
    self->c_late_linked = pl_stats_counter(
        st, "late_linked_samples", "late samples enriched from the summary of their departed span");
    self->c_not_held = pl_stats_counter(
        st, "spans_not_held", "spans of services without span-linked profiles, passed on at once");
    self->c_refused = pl_stats_counter(st, "refused_items",
                                       "released spans or samples the next consumer refused");
    self->g_held_spans = pl_stats_gauge(st, "held_spans", "spans held waiting for samples");
    self->g_pending_samples =
        pl_stats_gauge(st, "pending_samples", "samples waiting for their span");
    self->g_held_bytes = pl_stats_gauge(
        st, "held_bytes", "memory held: batches, index, names and the summaries of departed spans");
    self->g_clock_skew = pl_stats_gauge(
        st, "clock_skew_seconds",
        "proflink's wall clock minus the senders' latest data times (minimum over 10 s): "
        "positive when senders lag, negative when they stamp times in proflink's future");
    if (!self->c_linked_samples || !self->c_unlinked_samples || !self->c_late_samples ||
        !self->c_early_samples || !self->c_linked_spans || !self->c_unlinked_spans ||
        !self->c_late_spans || !self->c_early_spans || !self->c_covered_spans ||
        !self->g_held_spans || !self->g_pending_samples || !self->g_held_bytes ||
        !self->c_late_linked || !self->c_not_held || !self->c_refused || !self->g_clock_skew ||
        pl_corr_late_init(self) || pl_corr_bus_init(self)) {
        correlation_free(self);
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    }
    pl_status sst = pl_corr_spill_init(self, err);
    if (sst != PL_OK) {
        correlation_free(self);
        return sst;
    }
    *out_self = self;
    return PL_OK;
}

static pl_status correlation_start(void *p, pl_err *err)
{
    correlation *self = p;
    self->started = true;
    if (!self->loop)
        return PL_OK; /* tests drive time with pl_correlation_tick */
    uint64_t w = self->span_window < self->sample_window ? self->span_window : self->sample_window;
    uint64_t interval_ms = w / 10 / 1000000u;
    if (interval_ms < 10)
        interval_ms = 10;
    if (interval_ms > 1000)
        interval_ms = 1000;
    if (uv_timer_init(self->loop, &self->timer))
        return pl_errf(err, PL_ERR_INTERNAL, "correlation: cannot create its sweep timer");
    self->timer.data = self;
    self->timer_open = true;
    uv_timer_start(&self->timer, pl_corr_on_timer, interval_ms, interval_ms);
    return PL_OK;
}

static void correlation_shutdown(void *p)
{
    correlation *self = p;
    if (self->shut_down)
        return;
    self->shut_down = true;
    if (self->timer_open) {
        uv_timer_stop(&self->timer);
        uv_close((uv_handle_t *)&self->timer, NULL);
        self->timer_open = false;
    }
    /* Everything held flows on with what it has (reload and stop alike),
     * oldest first, as long as the next consumer takes it; the rest goes
     * on from the drain (correlation_pending) until shutdown_timeout. */
    self->retry_ns = DRAIN_RETRY_NS;
    pl_corr_flush(self);
    pl_corr_update_gauges(self);
}

/* While the service drains: offers what was refused again, flushes what
 * is still held, and says how many items wait. */
static size_t correlation_pending(void *p)
{
    correlation *self = p;
    if (!self->shut_down)
        return 0;
    pl_status refusal;
    pl_corr_retry(self, now_ns(self), (pl_signal)PL_SIGNAL_COUNT, &refusal);
    pl_corr_flush(self);
    return pl_corr_waiting_items(self);
}

static void correlation_destroy(void *p)
{
    correlation *self = p;
    if (!self)
        return;
    size_t dropped = 0;
    for (int side = 0; side < 2; side++) {
        while (self->head[side]) {
            uint32_t hi = self->head[side];
            if (self->held[hi].spilled || self->held[hi].packed) {
                if (self->held[hi].packed)
                    dropped += self->held[hi].items;
                pl_corr_spill_drop(self, hi); /* its file is replayed at the next start */
            } else {
                dropped += self->held[hi].items;
                pl_batch_wal_refused(self->held[hi].batch); /* kept for replay, if logged */
                pl_batch_free(self->held[hi].batch);
            }
            pl_corr_held_unlink_and_free(self, hi);
        }
    }
    if (dropped)
        pl_warn(COMPONENT, "%s: destroyed without shutdown, %zu held items dropped", self->id,
                dropped);
    correlation_free(self);
}

void pl_correlation_get_usage(void *p, pl_correlation_usage *out)
{
    correlation *self = p;
    out->held_spans = self->held_spans;
    out->indexed_spans = self->indexed_spans;
    out->pending_samples = self->pending_samples;
    out->held_span_batches = self->held_batches[SIDE_SPANS];
    out->held_sample_batches = self->held_batches[SIDE_SAMPLES];
    out->held_bytes = self->held_bytes;
    out->held_sample_bytes = 0;
    for (uint32_t i = self->head[SIDE_SAMPLES]; i; i = self->held[i].next_held)
        out->held_sample_bytes += self->held[i].bytes;
    out->index_bytes = pl_corr_index_bytes(self);
    out->span_table_slots = (size_t)self->spans.mask + 1;
    out->markers = self->markers + self->pending_markers;
    out->late_spans = pl_corr_late_count(self);
    out->late_bytes = pl_corr_late_bytes(self);
    out->name_bytes = self->name_bytes + self->fn_bytes;
    out->services = self->n_services ? self->n_services - 1 : 0;
    out->spilled_spans = self->spilled_spans - self->packed_entries;
    out->packed_spans = self->packed_spans;
    out->packed_bytes = self->packed_bytes;
    out->spill_bytes = self->spill_disk;
}

void pl_correlation_get_counters(void *p, pl_correlation_counters *out)
{
    correlation *self = p;
    out->linked_samples = *self->c_linked_samples;
    out->unlinked_samples = *self->c_unlinked_samples;
    out->late_samples = *self->c_late_samples;
    out->released_early_samples = *self->c_early_samples;
    out->linked_spans = *self->c_linked_spans;
    out->unlinked_spans = *self->c_unlinked_spans;
    out->late_spans = *self->c_late_spans;
    out->released_early_spans = *self->c_early_spans;
    out->spans_released_on_coverage = *self->c_covered_spans;
    out->late_linked_samples = *self->c_late_linked;
    out->spans_not_held = *self->c_not_held;
    out->refused_items = *self->c_refused;
    out->spilled_batches = *self->c_spilled_batches;
    out->spilled_bytes = *self->c_spilled_bytes;
    out->spill_failures = *self->c_spill_failures;
    out->bus_lag_held_samples = *self->c_bus_held;
    out->bus_lag_caught_up_samples = *self->c_bus_caught_up;
    out->bus_lag_bound_samples = *self->c_bus_bound;
}

const pl_component_type pl_processor_correlation = {
    .type = "correlation",
    .kind = PL_KIND_PROCESSOR,
    .signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
    .description = "joins profile samples to spans by span id within time windows, and enriches "
                   "both",
    .config = &pl_correlation_config_section,
    .create = correlation_create,
    .start = correlation_start,
    .consume = correlation_consume,
    .shutdown = correlation_shutdown,
    .destroy = correlation_destroy,
    .pending = correlation_pending,
};
