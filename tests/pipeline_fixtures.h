/*
 * pipeline_fixtures.h: small component types for the config, graph and
 * lifecycle tests, listed with the built-in types in fx_registry(), the registry
 * the tests load YAML with, so they build real graphs without any network.
 *
 *   receiver  feeder     traces+profiles; the test pushes batches into the
 *                        consumers it was given (feeder_next)
 *   processor counter    all signals; counts batches, passes them on
 *   processor holder     traces+profiles; keeps every batch until shutdown,
 *                        then hands them on (a processor that must flush)
 *   exporter  capture    traces+profiles; records batches and items;
 *                        `pending` reports a configurable backlog that a
 *                        timer drains (an exporter with a queue)
 *   processor kitchen    a config table with every field type (config tests)
 *
 * Every hook appends "hook:id" to a global event log so tests can check the
 * order of start and shutdown.
 */
#ifndef PL_TEST_PIPELINE_FIXTURES_H
#define PL_TEST_PIPELINE_FIXTURES_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "core/component.h"
#include "exporters/queue.h"
#include "pipeline/consumer.h"
#include "pipeline/registry.h"

/* ---- event log ----------------------------------------------------------- */

static char fx_events[8192];

static inline void fx_event(const char *hook, const char *id)
{
    size_t len = strlen(fx_events);
    snprintf(fx_events + len, sizeof(fx_events) - len, "%s%s:%s", len ? " " : "", hook, id);
}

static inline void fx_reset(void)
{
    fx_events[0] = '\0';
}

/* Position of `needle` in the log, or -1. */
static inline long fx_pos(const char *needle)
{
    const char *p = strstr(fx_events, needle);
    return p ? (long)(p - fx_events) : -1;
}

/* ---- batches ------------------------------------------------------------- */

/* A traces batch with `spans` spans, or a profiles batch with one profile
 * of `spans` samples. */
static pl_batch *fx_batch(pl_signal signal, uint32_t items)
{
    pl_batch *b = pl_batch_new(signal);
    if (!b)
        return NULL;
    if (signal == PL_SIGNAL_TRACES) {
        pl_resource_spans *rs = pl_batch_alloc(b, sizeof(*rs));
        pl_scope_spans *ss = pl_batch_alloc(b, sizeof(*ss));
        ss->spans = pl_batch_alloc(b, items * sizeof(pl_span) + 1);
        ss->n_spans = items;
        for (uint32_t i = 0; i < items; i++) {
            ss->spans[i].name = pl_batch_bytes(b, "op", 2);
            ss->spans[i].span_id_len = 8;
            ss->spans[i].span_id[7] = (uint8_t)(i + 1);
        }
        rs->scopes = ss;
        rs->n_scopes = 1;
        b->data.traces.resources = rs;
        b->data.traces.n_resources = 1;
    } else if (signal == PL_SIGNAL_PROFILES) {
        pl_resource_profiles *rp = pl_batch_alloc(b, sizeof(*rp));
        pl_scope_profiles *sp = pl_batch_alloc(b, sizeof(*sp));
        pl_profile *prof = pl_batch_alloc(b, sizeof(*prof));
        prof->samples = pl_batch_alloc(b, items * sizeof(pl_sample) + 1);
        prof->n_samples = items;
        sp->profiles = prof;
        sp->n_profiles = 1;
        rp->scopes = sp;
        rp->n_scopes = 1;
        b->data.profiles.resources = rp;
        b->data.profiles.n_resources = 1;
    }
    return b;
}

/* ---- feeder receiver ----------------------------------------------------- */

typedef struct feeder {
    char id[64];
    pl_consumer *next[PL_SIGNAL_COUNT];
    pl_stats *stats;
} feeder;

static pl_status feeder_create(const pl_create_settings *s, const void *cfg, void **out,
                               pl_err *err)
{
    (void)cfg;
    feeder *f = calloc(1, sizeof(*f));
    if (!f)
        return pl_errf(err, PL_ERR_NOMEM, "oom");
    snprintf(f->id, sizeof(f->id), "%s", s->id);
    memcpy(f->next, s->next, sizeof(f->next));
    f->stats = s->stats;
    fx_event("create", s->id);
    *out = f;
    return PL_OK;
}

static int fx_fail_start; /* when set, feeder/fail refuses to start */

static pl_status feeder_start(void *self, pl_err *err)
{
    feeder *f = self;
    fx_event("start", f->id);
    if (fx_fail_start && strcmp(f->id, "feeder/fail") == 0)
        return pl_errf(err, PL_ERR_INTERNAL, "127.0.0.1:1: address already in use");
    return PL_OK;
}

static void feeder_shutdown(void *self)
{
    fx_event("shutdown", ((feeder *)self)->id);
}

static void feeder_destroy(void *self)
{
    fx_event("destroy", ((feeder *)self)->id);
    free(self);
}

/* Like a real receiver: hands a batch on and counts the outcome. */
static inline pl_status feeder_push(feeder *f, pl_signal signal, uint32_t items)
{
    pl_status st = pl_consumer_consume(f->next[signal], fx_batch(signal, items));
    pl_stats_add(f->stats, signal, st == PL_OK ? PL_STAT_ACCEPTED : PL_STAT_REFUSED, items);
    return st;
}

static const pl_component_type fx_feeder = {
    .type = "feeder",
    .kind = PL_KIND_RECEIVER,
    .signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
    .description = "test receiver",
    .create = feeder_create,
    .start = feeder_start,
    .shutdown = feeder_shutdown,
    .destroy = feeder_destroy,
};

/* ---- counter processor --------------------------------------------------- */

static int fx_counter_creates;

typedef struct counter {
    char id[64];
    size_t batches[PL_SIGNAL_COUNT];
} counter;

static pl_status counter_create(const pl_create_settings *s, const void *cfg, void **out,
                                pl_err *err)
{
    (void)cfg;
    counter *c = calloc(1, sizeof(*c));
    if (!c)
        return pl_errf(err, PL_ERR_NOMEM, "oom");
    snprintf(c->id, sizeof(c->id), "%s", s->id);
    fx_counter_creates++;
    fx_event("create", s->id);
    *out = c;
    return PL_OK;
}

static pl_status counter_start(void *self, pl_err *err)
{
    (void)err;
    fx_event("start", ((counter *)self)->id);
    return PL_OK;
}

static pl_status counter_consume(void *self, pl_batch *batch, pl_consumer *next)
{
    counter *c = self;
    c->batches[batch->signal]++;
    return pl_consumer_consume(next, batch);
}

static void counter_shutdown(void *self)
{
    fx_event("shutdown", ((counter *)self)->id);
}

static void counter_destroy(void *self)
{
    fx_event("destroy", ((counter *)self)->id);
    free(self);
}

static const pl_component_type fx_counter = {
    .type = "counter",
    .kind = PL_KIND_PROCESSOR,
    .signals = PL_SIGNALS_ALL,
    .description = "test processor",
    .create = counter_create,
    .start = counter_start,
    .consume = counter_consume,
    .shutdown = counter_shutdown,
    .destroy = counter_destroy,
};

/* ---- holder processor ---------------------------------------------------- */

typedef struct held {
    pl_batch *batch;
    pl_consumer *next;
} held;

typedef struct holder {
    char id[64];
    held items[64];
    size_t n;
} holder;

static pl_status holder_create(const pl_create_settings *s, const void *cfg, void **out,
                               pl_err *err)
{
    (void)cfg;
    holder *h = calloc(1, sizeof(*h));
    if (!h)
        return pl_errf(err, PL_ERR_NOMEM, "oom");
    snprintf(h->id, sizeof(h->id), "%s", s->id);
    *out = h;
    return PL_OK;
}

static pl_status holder_consume(void *self, pl_batch *batch, pl_consumer *next)
{
    holder *h = self;
    if (h->n == 64)
        return pl_consumer_consume(next, batch);
    h->items[h->n].batch = batch;
    h->items[h->n].next = next; /* the pipeline the batch came through */
    h->n++;
    return PL_OK;
}

static void holder_shutdown(void *self)
{
    holder *h = self;
    fx_event("shutdown", h->id);
    for (size_t i = 0; i < h->n; i++)
        pl_consumer_consume(h->items[i].next, h->items[i].batch);
    h->n = 0;
}

static void holder_destroy(void *self)
{
    holder *h = self;
    for (size_t i = 0; i < h->n; i++)
        pl_batch_free(h->items[i].batch);
    free(h);
}

static const pl_component_type fx_holder = {
    .type = "holder",
    .kind = PL_KIND_PROCESSOR,
    .signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
    .description = "test processor that holds data until shutdown",
    .create = holder_create,
    .consume = holder_consume,
    .shutdown = holder_shutdown,
    .destroy = holder_destroy,
};

/* ---- capture exporter ---------------------------------------------------- */

typedef struct capture_cfg {
    int64_t backlog;                       /* pending items reported after shutdown */
    int64_t drain_every_ns;                /* how fast the backlog drains: one item per tick */
    bool self_count;                       /* counts accepted items itself */
    char *answer;                          /* "ok", "refused" or "invalid": what export returns */
    pl_sending_queue_config sending_queue; /* only its batch: the graph's batcher */
} capture_cfg;

static const pl_cfg_field capture_fields[] = {
    {"backlog", PL_CFG_INT, "0", offsetof(capture_cfg, backlog), "pending items at shutdown", NULL},
    {"drain_every", PL_CFG_DURATION, "1ms", offsetof(capture_cfg, drain_every_ns),
     "one backlog item drains per period", NULL},
    {"self_count", PL_CFG_BOOL, "false", offsetof(capture_cfg, self_count),
     "count accepted items in the exporter", NULL},
    {"answer", PL_CFG_STRING, "ok", offsetof(capture_cfg, answer), "what export returns", NULL},
    {"sending_queue", PL_CFG_SECTION, NULL, offsetof(capture_cfg, sending_queue),
     "batch: batching in front of the exporter", &pl_sending_queue_section},
    {0},
};
static const pl_cfg_section capture_section = {sizeof(capture_cfg), capture_fields, NULL};

typedef struct capture {
    char id[64];
    size_t batches[PL_SIGNAL_COUNT];
    size_t items[PL_SIGNAL_COUNT];
    const pl_batch *last[PL_SIGNAL_COUNT];
    int64_t backlog;
    uint64_t drain_ns;
    uv_timer_t timer;
    bool timer_on, shut_down, self_count;
    pl_status answer;
    pl_stats *stats;
    bool *destroyed_flag;
} capture;

/* The most recently created capture exporters, by id, for tests to inspect
 * after the graph is gone. */
typedef struct capture_record {
    char id[64];
    size_t batches[PL_SIGNAL_COUNT];
    size_t items[PL_SIGNAL_COUNT];
    int64_t backlog_at_destroy;
} capture_record;
static capture_record fx_records[256];
static size_t fx_n_records;

static inline capture_record *fx_record(const char *id)
{
    for (size_t i = fx_n_records; i-- > 0;)
        if (strcmp(fx_records[i].id, id) == 0)
            return &fx_records[i];
    return NULL;
}

static pl_status capture_create(const pl_create_settings *s, const void *cfg, void **out,
                                pl_err *err)
{
    const capture_cfg *c = cfg;
    capture *x = calloc(1, sizeof(*x));
    if (!x)
        return pl_errf(err, PL_ERR_NOMEM, "oom");
    snprintf(x->id, sizeof(x->id), "%s", s->id);
    x->backlog = c ? c->backlog : 0;
    x->drain_ns = c ? (uint64_t)c->drain_every_ns : 1000000;
    x->self_count = c && c->self_count;
    x->answer = PL_OK;
    if (c && c->answer && strcmp(c->answer, "refused") == 0)
        x->answer = PL_ERR_REFUSED;
    if (c && c->answer && strcmp(c->answer, "invalid") == 0)
        x->answer = PL_ERR_INVALID;
    x->stats = s->stats;
    uv_timer_init(s->loop, &x->timer);
    x->timer.data = x;
    fx_event("create", s->id);
    *out = x;
    return PL_OK;
}

static pl_status capture_start(void *self, pl_err *err)
{
    (void)err;
    fx_event("start", ((capture *)self)->id);
    return PL_OK;
}

static pl_status capture_export(void *self, const pl_batch *batch)
{
    capture *x = self;
    x->batches[batch->signal]++;
    x->items[batch->signal] += pl_batch_items(batch);
    x->last[batch->signal] = batch;
    if (x->self_count)
        pl_stats_add(x->stats, batch->signal, PL_STAT_ACCEPTED, pl_batch_items(batch));
    return x->answer;
}

static void capture_tick(uv_timer_t *t)
{
    capture *x = t->data;
    if (x->backlog > 0)
        x->backlog--;
    if (x->backlog == 0)
        uv_timer_stop(t);
}

static void capture_shutdown(void *self)
{
    capture *x = self;
    x->shut_down = true;
    fx_event("shutdown", x->id);
    if (x->backlog > 0) {
        uint64_t ms = x->drain_ns / 1000000;
        uv_timer_start(&x->timer, capture_tick, ms ? ms : 1, ms ? ms : 1);
    }
}

static size_t capture_pending(void *self)
{
    capture *x = self;
    return x->shut_down ? (size_t)x->backlog : 0;
}

static void capture_closed(uv_handle_t *h)
{
    free(h->data);
}

static void capture_destroy(void *self)
{
    capture *x = self;
    fx_event("destroy", x->id);
    if (fx_n_records < 256) {
        capture_record *r = &fx_records[fx_n_records++];
        snprintf(r->id, sizeof(r->id), "%s", x->id);
        memcpy(r->batches, x->batches, sizeof(r->batches));
        memcpy(r->items, x->items, sizeof(r->items));
        r->backlog_at_destroy = x->backlog;
    }
    uv_close((uv_handle_t *)&x->timer, capture_closed);
}

static const pl_component_type fx_capture = {
    .type = "capture",
    .kind = PL_KIND_EXPORTER,
    .signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
    .description = "test exporter",
    .config = &capture_section,
    .create = capture_create,
    .start = capture_start,
    .export = capture_export,
    .shutdown = capture_shutdown,
    .pending = capture_pending,
    .destroy = capture_destroy,
};

/* ---- kitchen: every config field type ------------------------------------ */

typedef struct kitchen_tls {
    char *ca_file;
    bool insecure;
} kitchen_tls;

typedef struct kitchen_rule {
    char *key;
    char *action;
} kitchen_rule;

typedef struct kitchen_cfg {
    char *endpoint;
    int64_t max_items;
    bool enabled;
    double ratio;
    int64_t timeout;
    uint64_t max_size;
    pl_strlist attributes;
    pl_strmap headers;
    kitchen_tls tls;
    pl_cfg_list rules;
} kitchen_cfg;

static int kitchen_rule_validate(void *cfg, pl_cfg_ctx *ctx)
{
    kitchen_rule *r = cfg;
    if (!r->key || !*r->key) {
        pl_cfg_errorf(ctx, "key", "a rule needs a key");
        return 1;
    }
    return 0;
}

static int kitchen_validate(void *cfg, pl_cfg_ctx *ctx)
{
    kitchen_cfg *k = cfg;
    if (k->max_items < 0) {
        pl_cfg_errorf(ctx, "max_items", "must not be negative");
        return 1;
    }
    return 0;
}

static const pl_cfg_field kitchen_tls_fields[] = {
    {"ca_file", PL_CFG_STRING, NULL, offsetof(kitchen_tls, ca_file), "CA file", NULL},
    {"insecure", PL_CFG_BOOL, "false", offsetof(kitchen_tls, insecure), "no TLS", NULL},
    {0},
};
static const pl_cfg_section kitchen_tls_section = {sizeof(kitchen_tls), kitchen_tls_fields, NULL};

static const pl_cfg_field kitchen_rule_fields[] = {
    {"key", PL_CFG_STRING, NULL, offsetof(kitchen_rule, key), "attribute key", NULL},
    {"action", PL_CFG_STRING, "upsert", offsetof(kitchen_rule, action), "what to do", NULL},
    {0},
};
static const pl_cfg_section kitchen_rule_section = {sizeof(kitchen_rule), kitchen_rule_fields,
                                                    kitchen_rule_validate};

static const pl_cfg_field kitchen_fields[] = {
    {"endpoint", PL_CFG_STRING, "127.0.0.1:4317", offsetof(kitchen_cfg, endpoint), "address", NULL},
    {"max_items", PL_CFG_INT, "100", offsetof(kitchen_cfg, max_items), "limit", NULL},
    {"enabled", PL_CFG_BOOL, "true", offsetof(kitchen_cfg, enabled), "on/off", NULL},
    {"ratio", PL_CFG_DOUBLE, "0.5", offsetof(kitchen_cfg, ratio), "a ratio", NULL},
    {"timeout", PL_CFG_DURATION, "5s", offsetof(kitchen_cfg, timeout), "a timeout", NULL},
    {"max_size", PL_CFG_SIZE, "4MiB", offsetof(kitchen_cfg, max_size), "a size", NULL},
    {"attributes", PL_CFG_STRLIST, "[http.route, http.method]", offsetof(kitchen_cfg, attributes),
     "keys", NULL},
    {"headers", PL_CFG_STRMAP, NULL, offsetof(kitchen_cfg, headers), "headers", NULL},
    {"tls", PL_CFG_SECTION, NULL, offsetof(kitchen_cfg, tls), "TLS", &kitchen_tls_section},
    {"rules", PL_CFG_LIST, NULL, offsetof(kitchen_cfg, rules), "rules", &kitchen_rule_section},
    {0},
};
static const pl_cfg_section kitchen_section = {sizeof(kitchen_cfg), kitchen_fields,
                                               kitchen_validate};

static const pl_component_type fx_kitchen = {
    .type = "kitchen",
    .kind = PL_KIND_PROCESSOR,
    .signals = PL_SIGNALS_ALL,
    .description = "test processor with every config type",
    .config = &kitchen_section,
};

/* The registry these tests load their configurations with: the built-in
 * types followed by the fixtures. */
static const pl_component_type *const *fx_registry(void)
{
    static const pl_component_type *types[128];
    if (!types[0]) {
        static const pl_component_type *const mine[] = {&fx_feeder,  &fx_counter, &fx_holder,
                                                        &fx_capture, &fx_kitchen, NULL};
        size_t n = 0;
        for (size_t i = 0; pl_component_types[i]; i++)
            types[n++] = pl_component_types[i];
        for (size_t i = 0; mine[i]; i++)
            types[n++] = mine[i];
    }
    return types;
}

#endif
