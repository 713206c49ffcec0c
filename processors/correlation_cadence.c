/*
 * correlation_cadence.c: services, their profile streams, and how long their
 * spans are held.
 *
 * Pyroscope SDKs upload every 10 s (Java, Python, Ruby, .NET, Rust), 15 s
 * (Go) or 60 s (Node.js, later when its event loop is busy). A span must wait
 * until the upload holding its samples has come, so the hold follows each
 * service's own cadence, learned from what arrives:
 *
 * - A stream is the profiles of one service and one sample type. Only a
 *   stream that has carried span ids proves anything: the Node.js SDK sends
 *   its heap profile (no labels) just before its wall profile, and a heap
 *   upload must not release spans whose wall samples are a moment behind.
 * - A stream's coverage is the data time its uploads reached (the profile's
 *   time_unix_nano, or its latest sample timestamp). A service is covered up
 *   to the minimum over its span-linked streams that are still uploading.
 * - Each stream learns its interval (time between uploads) and delay
 *   (arrival after the covered end) as decaying maxima, so one slow upload
 *   raises them at once and they come down slowly.
 * - A span of a service is held until the service's coverage passes its end
 *   (+ max_clock_skew), at most 2 x interval + delay + skew + slack, clamped
 *   to [span_window, max_window]. Before a service's first span-linked
 *   upload the slowest common cadence (60 s, plus 30 s of delay) is assumed.
 *   A service whose spans have come for `warmup` without any span-linked
 *   profile is not held at all: it has no profiler, or one that does not
 *   label samples with span ids.
 *
 * Service names are chosen by clients: they are hashed with the process key,
 * bounded in length and in total bytes with their stream state (counted in
 * the processor's memory).
 * Beyond the bound a new name gets id 0 ("unknown"): its spans are still
 * linked, only not released early.
 */
#include "correlation_int.h"

#define NS                   1000000000ull
#define ASSUMED_INTERVAL_NS  (60 * NS) /* Node.js: the slowest common SDK cadence */
#define ASSUMED_DELAY_NS     (30 * NS) /* an upload can come this much after its end */
#define HOLD_SLACK_NS        (5 * NS)
#define SAME_UPLOAD_NS       (NS) /* profiles of one stream this close are one upload */
#define MAX_SERVICE_NAME_LEN 1024
#define MAX_SERVICE_BYTES    (4u << 20)

pl_bytes pl_corr_resource_service(const pl_resource *r)
{
    pl_kv *kv = pl_attrs_find(&r->attrs, "service.name", 12);
    if (kv && kv->value.type == PL_VALUE_STRING)
        return kv->value.u.str;
    return (pl_bytes){NULL, 0};
}

typedef struct name_key {
    const correlation *self;
    pl_bytes name;
} name_key;

static bool service_eq(const void *ctx, uint32_t val)
{
    const name_key *k = ctx;
    const service *s = &k->self->services[val];
    return s->len == k->name.len && memcmp(s->name, k->name.ptr, k->name.len) == 0;
}

/* Service id for a name (0 = none, too long, or over the name budget). */
uint16_t pl_corr_service_id(correlation *self, pl_bytes name)
{
    if (!name.len || name.len > MAX_SERVICE_NAME_LEN)
        return 0;
    uint64_t h = pl_hash_bytes(name.ptr, name.len);
    name_key k = {self, name};
    uint32_t found = pl_htab_get(&self->service_index, (uint32_t)h, service_eq, &k);
    if (found)
        return (uint16_t)found;
    if (self->n_services >= 0xffff || self->name_bytes + name.len + 1 > MAX_SERVICE_BYTES)
        return 0;
    if (self->n_services == self->cap_services) {
        uint32_t cap = self->cap_services ? self->cap_services * 2 : 16;
        service *a = realloc(self->services, cap * sizeof(service));
        if (!a)
            return 0;
        self->services = a;
        self->cap_services = cap;
    }
    if (self->n_services == 0) {
        memset(&self->services[0], 0, sizeof(service));
        self->n_services = 1;
    }
    uint32_t *slot = pl_htab_slot(&self->service_index, (uint32_t)h, service_eq, &k);
    char *copy = slot ? malloc(name.len + 1) : NULL;
    if (!copy)
        return 0;
    memcpy(copy, name.ptr, name.len);
    copy[name.len] = 0;
    uint32_t id = self->n_services++;
    memset(&self->services[id], 0, sizeof(service));
    self->services[id].name = copy;
    self->services[id].len = name.len;
    self->services[id].hash = h;
    *slot = id;
    pl_htab_added(&self->service_index, slot, (uint32_t)h);
    self->name_bytes += name.len + 1;
    return (uint16_t)id;
}

pl_bytes pl_corr_service_name(correlation *self, uint16_t id)
{
    if (!id || id >= self->n_services)
        return (pl_bytes){NULL, 0};
    return (pl_bytes){(const uint8_t *)self->services[id].name, self->services[id].len};
}

size_t pl_corr_service_bytes(const correlation *self)
{
    /* name_bytes also counts the stream arrays (allocated at a service's
     * first profile): this is called on every consume, so no loop here. */
    return self->name_bytes + (size_t)self->cap_services * sizeof(service) +
           (size_t)self->service_index.cap * 2 * sizeof(uint32_t);
}

void pl_corr_services_free(correlation *self)
{
    for (uint32_t i = 1; i < self->n_services; i++) {
        free(self->services[i].name);
        free(self->services[i].streams);
    }
    free(self->services);
    pl_htab_free(&self->service_index);
}

/* A span of service `svc` came: starts its warm-up clock. */
void pl_corr_service_saw_span(correlation *self, uint16_t svc, uint64_t now)
{
    if (svc && svc < self->n_services && !self->services[svc].first_span_ns)
        self->services[svc].first_span_ns = now ? now : 1;
}

static uint64_t decay_max(uint64_t learned, uint64_t seen)
{
    uint64_t d = learned - learned / 8;
    return seen > d ? seen : d;
}

/* Recomputes a service's coverage: the minimum over its span-linked streams,
 * leaving out those silent for longer than max_window while another still
 * uploads (a profile type that was switched off must not hold spans back). */
static void service_recover(correlation *self, service *s, uint64_t now)
{
    uint64_t cov = UINT64_MAX, cov_all = UINT64_MAX;
    uint64_t silent = self->max_hold;
    for (uint8_t i = 0; i < s->n_streams; i++) {
        const stream *st = &s->streams[i];
        if (!st->links)
            continue;
        if (st->covered_until < cov_all)
            cov_all = st->covered_until;
        if (now - st->last_arrival <= silent && st->covered_until < cov)
            cov = st->covered_until;
    }
    if (cov == UINT64_MAX)
        cov = cov_all;
    s->covered_until = cov == UINT64_MAX ? 0 : cov;
}

/* One profile of service `svc` and sample type (type, unit) arrived at
 * monotonic time `now` (intervals), when the senders' clock read about
 * `sender_now` (delays: pl_corr_sender_now), covering data time up to
 * `covered`; `links` when one of its samples carried a span id. True when
 * the service's coverage moved. */
bool pl_corr_stream_upload(correlation *self, uint16_t svc, pl_bytes type, pl_bytes unit,
                           bool links, uint64_t covered, uint64_t duration, uint64_t now,
                           uint64_t sender_now)
{
    if (!svc || svc >= self->n_services)
        return false;
    service *s = &self->services[svc];
    uint64_t key = pl_hash_bytes_with(pl_hash_bytes(type.ptr, type.len), unit.ptr, unit.len);
    stream *st = NULL;
    for (uint8_t i = 0; i < s->n_streams; i++)
        if (s->streams[i].type == key)
            st = &s->streams[i];
    if (!st) {
        if (!s->streams) {
            if (!(s->streams = calloc(MAX_STREAMS, sizeof(stream))))
                return false;
            self->name_bytes += MAX_STREAMS * sizeof(stream);
        }
        if (s->n_streams >= MAX_STREAMS)
            return false; /* a client inventing sample types: the first ones decide */
        st = &s->streams[s->n_streams++];
        memset(st, 0, sizeof(*st));
        st->type = key;
    }
    uint64_t was_interval = st->interval, was_delay = st->delay;
    bool was_links = st->links;
    if (!st->uploads || now >= st->last_arrival + SAME_UPLOAD_NS) {
        if (st->uploads && now > st->last_arrival)
            st->interval = decay_max(st->interval, now - st->last_arrival);
        else if (!st->interval && duration <= self->max_hold)
            st->interval = duration; /* first upload: its window is the SDK's period */
        st->uploads++;
        st->last_arrival = now;
    }
    if (links)
        st->links = true;
    if (covered > st->covered_until)
        st->covered_until = covered;
    if (covered && sender_now > covered)
        st->delay = decay_max(st->delay, sender_now - covered);
    if (st->links && (st->interval != was_interval || st->delay != was_delay || !was_links))
        self->cadence_epoch++; /* held batches' deadlines follow (corr tick) */
    if (!st->links)
        return false;
    uint64_t before = s->covered_until;
    service_recover(self, s, now);
    return s->covered_until > before;
}

/* The longest learned cadence of a service's span-linked streams. */
static bool service_cadence(const service *s, uint64_t *interval, uint64_t *delay)
{
    bool linked = false;
    *interval = 0;
    *delay = 0;
    for (uint8_t i = 0; i < s->n_streams; i++) {
        const stream *st = &s->streams[i];
        if (!st->links)
            continue;
        linked = true;
        if (st->interval > *interval)
            *interval = st->interval;
        if (st->delay > *delay)
            *delay = st->delay;
    }
    return linked;
}

/* A sample of a profile of service `profile_svc` linked to a span of
 * `span_svc`. When the names differ (Pyroscope's application name is not
 * the span's service.name), the span's service follows the cadence and the
 * coverage of the profiles' service. */
void pl_corr_service_linked(correlation *self, uint16_t span_svc, uint16_t profile_svc)
{
    if (span_svc && profile_svc && span_svc != profile_svc && span_svc < self->n_services &&
        self->services[span_svc].profiled_as != profile_svc) {
        self->services[span_svc].profiled_as = profile_svc;
        self->cadence_epoch++;
    }
}

/* The service whose profile streams speak for `svc`'s spans. */
static const service *profiled_by(const correlation *self, uint16_t svc)
{
    const service *s = &self->services[svc];
    uint64_t iv, dl;
    if (!service_cadence(s, &iv, &dl) && s->profiled_as && s->profiled_as < self->n_services)
        return &self->services[s->profiled_as];
    return s;
}

/* How long a span of service `svc` arriving now is held (0: not at all). */
uint64_t pl_corr_service_hold(correlation *self, uint16_t svc, uint64_t now)
{
    if (!self->cfg.max_window)
        return self->span_window; /* fixed windows, no cadence learning */
    uint64_t interval = ASSUMED_INTERVAL_NS, delay = ASSUMED_DELAY_NS;
    if (svc && svc < self->n_services) {
        const service *s = profiled_by(self, svc);
        uint64_t iv, dl;
        if (service_cadence(s, &iv, &dl)) {
            if (iv) {
                interval = iv;
                delay = dl;
            }
        } else if (self->services[svc].first_span_ns &&
                   now >= self->services[svc].first_span_ns + (uint64_t)self->cfg.warmup) {
            return 0; /* no span-linked profiles after the warm-up: not held */
        }
    }
    uint64_t need = sat_add(sat_add(2 * interval, delay), self->skew + HOLD_SLACK_NS);
    if (need < self->span_window)
        need = self->span_window;
    return need < self->max_hold ? need : self->max_hold;
}

/* Do the profiles of `svc` prove its samples up to `end` have come? */
bool pl_corr_service_covers(correlation *self, uint16_t svc, uint64_t end, uint64_t now)
{
    if (!svc || svc >= self->n_services)
        return false;
    if (self->cfg.max_window && pl_corr_service_hold(self, svc, now) == 0)
        return true; /* not held at all */
    return profiled_by(self, svc)->covered_until >= sat_add(end, self->skew);
}

void pl_correlation_get_cadence(void *p, const char *name, pl_correlation_cadence *out)
{
    correlation *self = p;
    memset(out, 0, sizeof(*out));
    pl_bytes b = pl_bytes_from_cstr(name);
    name_key k = {self, b};
    uint32_t id = b.len ? pl_htab_get(&self->service_index, (uint32_t)pl_hash_bytes(b.ptr, b.len),
                                      service_eq, &k)
                        : 0;
    if (!id)
        return;
    const service *s = profiled_by(self, (uint16_t)id);
    out->known = true;
    out->linked = service_cadence(s, &out->interval, &out->delay);
    out->covered_until = s->covered_until;
    out->hold = pl_corr_service_hold(self, (uint16_t)id, now_ns(self));
}

/* ---- senders' clocks -------------------------------------------------------------------- */

/* The skew is measured per period as the minimum, over span batches and
 * profiles, of proflink's wall clock minus the batch's latest data time
 * (a batch's latest span end, a profile's coverage): data is never sent
 * before it exists, so the minimum is the senders' clock offset plus the
 * shortest delivery delay (a few seconds for span exporters). Positive:
 * proflink's clock is ahead of the senders' (or everything is late);
 * negative: senders stamp times in proflink's future. One comparison per
 * batch or profile, none per span or sample beyond finding the latest. */
#define SKEW_PERIOD_NS  (10 * NS)
#define SKEW_WARN_NS    (600 * NS)
#define SKEW_TRUSTED_NS (86400 * NS)

void pl_corr_clock_saw(correlation *self, uint64_t latest, uint64_t wall)
{
    if (!latest)
        return;
    int64_t d = (int64_t)(wall - latest); /* two's complement: negative when latest > wall */
    if (!self->skew_any || d < self->skew_min) {
        self->skew_min = d;
        self->skew_any = true;
    }
}

static uint64_t abs_ns(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

/* Once per period (from the tick): the period's minimum becomes the
 * estimate, published as the gauge, and warned about past
 * clock_skew_warning (at most every 10 minutes). */
void pl_corr_clock_tick(correlation *self, uint64_t now)
{
    if (!self->skew_period_start) {
        self->skew_period_start = now ? now : 1;
        return;
    }
    if (now - self->skew_period_start < SKEW_PERIOD_NS)
        return;
    self->skew_period_start = now;
    if (!self->skew_any)
        return; /* no data: the estimate stays */
    self->skew_est = self->skew_min;
    self->skew_known = true;
    self->skew_any = false;
    const int64_t sec = (int64_t)NS; /* rounded to the nearest second */
    *self->g_clock_skew = (self->skew_est + (self->skew_est < 0 ? -sec / 2 : sec / 2)) / sec;
    uint64_t limit = (uint64_t)self->cfg.clock_skew_warning;
    /* Again after SKEW_WARN_NS, or at once when the skew moved by more than
     * the limit since the last warning (a clock was stepped). */
    if (limit && abs_ns(self->skew_est) > limit &&
        (!self->skew_warned_ns || now - self->skew_warned_ns >= SKEW_WARN_NS ||
         abs_ns(self->skew_est - self->skew_warned_est) > limit)) {
        self->skew_warned_ns = now;
        self->skew_warned_est = self->skew_est;
        pl_warn(COMPONENT,
                "%s: senders' data times are %.0f s %s proflink's clock (beyond "
                "clock_skew_warning %.0f s): check the clocks (NTP). Holds run on a monotonic "
                "clock and are not affected; upload delays are measured on the senders' clock",
                self->id, (double)abs_ns(self->skew_est) / 1e9,
                self->skew_est > 0 ? "behind" : "ahead of", (double)limit / 1e9);
    }
}

/* What the senders' clocks read now, by the estimate, when it is past
 * clock_skew_warning (below it, delivery delays and skew cannot be told
 * apart, and proflink's wall clock is used as it is). */
uint64_t pl_corr_sender_now(const correlation *self, uint64_t wall)
{
    uint64_t limit = (uint64_t)self->cfg.clock_skew_warning;
    /* Until a period has ended, what this one has seen so far. */
    int64_t est = self->skew_known ? self->skew_est : self->skew_min;
    /* Beyond a day it is not a clock but a sender's bad timestamps (one
     * batch stamped in 2100): reported, not acted upon. */
    if (!(self->skew_known || self->skew_any) || !limit || abs_ns(est) <= limit ||
        abs_ns(est) > SKEW_TRUSTED_NS)
        return wall;
    if (est > 0)
        return wall > (uint64_t)est ? wall - (uint64_t)est : 0;
    return sat_add(wall, abs_ns(est));
}
