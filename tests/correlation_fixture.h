/*
 * correlation_fixture.h: what the correlation tests share: an injected clock,
 * capture consumers, a fixture driving the processor through its descriptor,
 * builders of spans (mk_traces: one resource per call, its service.name
 * given) and profiles (mk_profiles: one cpu/nanoseconds profile; each sample
 * names its span by OTLP Link or by label, a timestamp or the profile window,
 * a CPU value and a leaf function), and readers of the results.
 */
#ifndef PL_TEST_CORRELATION_FIXTURE_H
#define PL_TEST_CORRELATION_FIXTURE_H

#pragma GCC diagnostic ignored "-Wunused-function"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "core/stats.h"
#include "pipeline/consumer.h"
#include "processors/correlation.h"
#include "testlib.h"
#include "traces_fixture.h"

#define S(x) ((uint64_t)(x)*1000000000ull) /* seconds to ns */
#define BASE S(1700000000)                 /* a plausible Unix time */

/* ---- clock and capture ---------------------------------------------------------------------- */

static uint64_t fake_now;
static uint64_t fake_clock(void *arg)
{
    (void)arg;
    return fake_now;
}

typedef struct capture {
    pl_batch *b[64];
    int n;
} capture;

static pl_status capture_fn(void *arg, pl_batch *batch)
{
    capture *c = arg;
    if (c->n < 64)
        c->b[c->n++] = batch;
    else
        pl_batch_free(batch);
    return PL_OK;
}

typedef struct fixture {
    void *self;
    pl_stats *stats;
    capture traces, profiles;
    pl_consumer next_traces, next_profiles;
} fixture;

/* The defaults, with hold_compression from PL_TEST_HOLD_COMPRESSION when set:
 * meson runs the correlation tests under both settings. */
static void fx_defaults(pl_correlation_config *cfg)
{
    pl_correlation_config_defaults(cfg);
    cfg->hold_compression = getenv("PL_TEST_HOLD_COMPRESSION");
}

static pl_correlation_config test_config(void)
{
    pl_correlation_config cfg;
    fx_defaults(&cfg);
    cfg.early_release = false; /* most tests look at the window alone */
    cfg.max_window = 0;        /* fixed windows: no cadence learning */
    cfg.late_window = 0;       /* no summaries of departed spans */
    return cfg;
}

static int fx_init(fixture *f, const pl_correlation_config *cfg)
{
    memset(f, 0, sizeof(*f));
    fake_now = BASE;
    f->stats = pl_stats_new("correlation", PL_KIND_PROCESSOR);
    pl_create_settings st;
    memset(&st, 0, sizeof(st));
    st.id = "correlation";
    st.stats = f->stats;
    st.clock = (pl_clock){fake_clock, NULL};
    st.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    pl_err err;
    if (pl_processor_correlation.create(&st, cfg, &f->self, &err) != PL_OK)
        return -1;
    if (pl_processor_correlation.start(f->self, &err) != PL_OK)
        return -1;
    pl_consumer_init_func(&f->next_traces, capture_fn, &f->traces);
    pl_consumer_init_func(&f->next_profiles, capture_fn, &f->profiles);
    return 0;
}

static void fx_done(fixture *f)
{
    pl_processor_correlation.shutdown(f->self);
    pl_processor_correlation.destroy(f->self);
    for (int i = 0; i < f->traces.n; i++)
        pl_batch_free(f->traces.b[i]);
    for (int i = 0; i < f->profiles.n; i++)
        pl_batch_free(f->profiles.b[i]);
    pl_stats_free(f->stats);
}

static void deliver(fixture *f, pl_batch *b)
{
    pl_consumer *next = b->signal == PL_SIGNAL_TRACES ? &f->next_traces : &f->next_profiles;
    pl_processor_correlation.consume(f->self, b, next);
}

static pl_correlation_counters counters(fixture *f)
{
    pl_correlation_counters c;
    pl_correlation_get_counters(f->self, &c);
    return c;
}

static void advance(fixture *f, uint64_t ns)
{
    fake_now += ns;
    pl_correlation_tick(f->self);
}

/* ---- building spans ------------------------------------------------------------------------- */

static void id8(uint64_t v, uint8_t out[8])
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (uint8_t)v;
}

static void id16(uint8_t t, uint8_t out[16])
{
    memset(out, 0, 16);
    out[15] = t;
    out[0] = t;
}

typedef struct span_spec {
    uint8_t trace; /* 0: no trace id */
    uint64_t id, parent;
    uint64_t start, end;
    const char *name;
    const char *route; /* http.route attribute, or NULL */
} span_spec;

static pl_batch *mk_traces(const char *service, const span_spec *specs, int n)
{
    pl_span *spans;
    pl_batch *b = tf_traces(service, NULL, (uint32_t)n, &spans);
    for (int i = 0; i < n; i++) {
        pl_span *sp = &spans[i];
        const span_spec *s = &specs[i];
        if (s->trace) {
            id16(s->trace, sp->trace_id);
            sp->trace_id_len = 16;
        }
        id8(s->id, sp->span_id);
        sp->span_id_len = 8;
        if (s->parent) {
            id8(s->parent, sp->parent_span_id);
            sp->parent_span_id_len = 8;
        }
        sp->start_time_unix_nano = s->start;
        sp->end_time_unix_nano = s->end;
        sp->name = pl_bytes_from_cstr(s->name ? s->name : "op");
        if (s->route)
            pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("http.route"),
                         pl_value_string(pl_bytes_from_cstr(s->route)));
    }
    return b;
}

/* ---- building profiles ---------------------------------------------------------------------- */

enum { BY_LINK = 0, BY_SPAN_LABEL = 1, BY_PROFILE_LABEL = 2, NO_SPAN = 3 };

typedef struct sample_spec {
    uint64_t span;
    uint8_t trace; /* 0: none */
    int how;       /* BY_LINK, BY_SPAN_LABEL, ... */
    uint64_t ts;   /* 0: no timestamp (the profile window applies) */
    int64_t value;
    int fn; /* leaf function: 0 main, 1 work, 2 hot */
} sample_spec;

static const char *fn_names[] = {"main", "work", "hot"};

static int32_t str(pl_batch *b, const char *s)
{
    return pl_dict_intern_string(&b->arena, &b->data.profiles.dict, pl_bytes_from_cstr(s));
}

static int32_t str_attr(pl_batch *b, const char *k, const char *v)
{
    pl_dictionary *d = &b->data.profiles.dict;
    return pl_dict_intern_attribute(&b->arena, d, str(b, k),
                                    pl_value_string(pl_batch_bytes(b, v, strlen(v))), 0);
}

/* type/unit of the profile's values, e.g. "cpu","nanoseconds"; period type
 * optional (NULL). */
static pl_batch *mk_profiles_typed(const char *service, uint64_t time, uint64_t dur,
                                   const sample_spec *specs, int n, const char *type,
                                   const char *unit, const char *ptype, const char *punit,
                                   int64_t period)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    pl_dictionary *d = &ps->dict;
    ps->has_dictionary = true;
    pl_dict_ensure_zero_entries(&b->arena, d);
    /* functions 1..3, locations 1..3, stacks 1..3 = [leaf fn, main] */
    d->functions = pl_arena_grow(&b->arena, d->functions, d->n_functions, 4, sizeof(pl_function));
    d->locations = pl_arena_grow(&b->arena, d->locations, d->n_locations, 4, sizeof(pl_location));
    d->stacks = pl_arena_grow(&b->arena, d->stacks, d->n_stacks, 4, sizeof(pl_stack));
    d->cap_functions = d->cap_locations = d->cap_stacks = 4;
    for (int i = 0; i < 3; i++) {
        d->functions[i + 1] = (pl_function){str(b, fn_names[i]), 0, str(b, "app.js"), 1};
        pl_line *line = pl_batch_alloc(b, sizeof(pl_line));
        line->function_index = i + 1;
        d->locations[i + 1] = (pl_location){0, 0x1000u + (uint64_t)i, line, 1, NULL, 0};
        int32_t *locs = pl_batch_alloc(b, 2 * sizeof(int32_t));
        locs[0] = i + 1;
        locs[1] = 1;
        d->stacks[i + 1] = (pl_stack){locs, i == 0 ? 1u : 2u};
    }
    d->n_functions = d->n_locations = d->n_stacks = 4;

    ps->n_resources = 1;
    ps->resources = pl_batch_alloc(b, sizeof(pl_resource_profiles));
    pl_resource_profiles *rp = &ps->resources[0];
    rp->has_resource = true;
    pl_attrs_put(&b->arena, &rp->resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(pl_bytes_from_cstr(service)));
    rp->n_scopes = 1;
    rp->scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
    rp->scopes[0].n_profiles = 1;
    rp->scopes[0].profiles = pl_batch_alloc(b, sizeof(pl_profile));
    pl_profile *p = &rp->scopes[0].profiles[0];
    p->has_sample_type = true;
    p->sample_type = (pl_vtype){str(b, type), str(b, unit)};
    if (ptype) {
        p->has_period_type = true;
        p->period_type = (pl_vtype){str(b, ptype), str(b, punit)};
        p->period = period;
    }
    p->time_unix_nano = time;
    p->duration_nano = dur;
    p->n_samples = (uint32_t)n;
    p->samples = pl_batch_alloc(b, (size_t)n * sizeof(pl_sample));
    for (int i = 0; i < n; i++) {
        const sample_spec *s = &specs[i];
        pl_sample *sm = &p->samples[i];
        sm->stack_index = s->fn + 1;
        sm->n_values = 1;
        sm->values = pl_batch_alloc(b, sizeof(int64_t));
        sm->values[0] = s->value;
        if (s->ts) {
            sm->n_timestamps = 1;
            sm->timestamps_unix_nano = pl_batch_alloc(b, sizeof(uint64_t));
            sm->timestamps_unix_nano[0] = s->ts;
        }
        if (s->how == BY_LINK) {
            pl_link l;
            memset(&l, 0, sizeof(l));
            id8(s->span, l.span_id);
            l.span_id_len = 8;
            if (s->trace) {
                id16(s->trace, l.trace_id);
                l.trace_id_len = 16;
            }
            sm->link_index = pl_dict_intern_link(&b->arena, d, &l);
        } else if (s->how != NO_SPAN) {
            uint8_t raw[8];
            char hex[33];
            id8(s->span, raw);
            pl_hex_encode(raw, 8, hex);
            sm->attribute_indices = pl_batch_alloc(b, 3 * sizeof(int32_t));
            sm->attribute_indices[sm->n_attribute_indices++] =
                str_attr(b, s->how == BY_SPAN_LABEL ? "span_id" : "profile_id", hex);
            sm->attribute_indices[sm->n_attribute_indices++] = str_attr(b, "thread", "main");
            if (s->trace) {
                uint8_t t16[16];
                id16(s->trace, t16);
                pl_hex_encode(t16, 16, hex);
                sm->attribute_indices[sm->n_attribute_indices++] = str_attr(b, "trace_id", hex);
            }
        }
    }
    return b;
}

static pl_batch *mk_profiles(const char *service, uint64_t time, uint64_t dur,
                             const sample_spec *specs, int n)
{
    return mk_profiles_typed(service, time, dur, specs, n, "cpu", "nanoseconds", NULL, NULL, 0);
}

/* ---- reading results ------------------------------------------------------------------------ */

static pl_span *find_span_in(capture *c, uint64_t id, uint8_t trace)
{
    uint8_t want[8];
    id8(id, want);
    for (int i = 0; i < c->n; i++) {
        pl_traces *t = &c->b[i]->data.traces;
        for (uint32_t r = 0; r < t->n_resources; r++)
            for (uint32_t s = 0; s < t->resources[r].n_scopes; s++)
                for (uint32_t k = 0; k < t->resources[r].scopes[s].n_spans; k++) {
                    pl_span *sp = &t->resources[r].scopes[s].spans[k];
                    if (memcmp(sp->span_id, want, 8) == 0 && (!trace || sp->trace_id[15] == trace))
                        return sp;
                }
    }
    return NULL;
}

static int64_t span_int(const pl_span *sp, const char *key)
{
    if (!sp)
        return -1;
    pl_kv *kv = pl_attrs_find(&sp->attrs, key, strlen(key));
    return kv && kv->value.type == PL_VALUE_INT ? kv->value.u.i : -1;
}

static char *span_str(const pl_span *sp, const char *key, char *buf)
{
    buf[0] = 0;
    if (!sp)
        return NULL;
    pl_kv *kv = pl_attrs_find(&sp->attrs, key, strlen(key));
    if (!kv || kv->value.type != PL_VALUE_STRING)
        return NULL;
    snprintf(buf, 256, "%.*s", (int)kv->value.u.str.len, (const char *)kv->value.u.str.ptr);
    return buf;
}

static pl_sample *sample_at(pl_batch *b, uint32_t i)
{
    return &b->data.profiles.resources[0].scopes[0].profiles[0].samples[i];
}

/* Value of a sample attribute as text (NULL if absent); counts the key's
 * occurrences in *count. */
static const char *sample_attr(pl_batch *b, uint32_t i, const char *key, char *buf, int *count)
{
    pl_dictionary *d = &b->data.profiles.dict;
    pl_sample *s = sample_at(b, i);
    const char *found = NULL;
    int n = 0;
    for (uint32_t k = 0; k < s->n_attribute_indices; k++) {
        pl_kvu *a = &d->attributes[s->attribute_indices[k]];
        if (!pl_bytes_eq_cstr(pl_dict_string(d, a->key_strindex), key))
            continue;
        n++;
        pl_bytes v = a->value.type == PL_VALUE_STRINDEX ? pl_dict_string(d, a->value.u.strindex)
                                                        : a->value.u.str;
        snprintf(buf, 256, "%.*s", (int)v.len, (const char *)v.ptr);
        found = buf;
    }
    if (count)
        *count = n;
    return found;
}

/* The ids a sample's link carries, as hex ("" when absent). */
static const char *link_hex(pl_batch *b, uint32_t i, bool trace, char *buf)
{
    pl_dictionary *d = &b->data.profiles.dict;
    pl_sample *s = sample_at(b, i);
    buf[0] = 0;
    if (s->link_index <= 0 || (uint32_t)s->link_index >= d->n_links)
        return buf;
    pl_link *l = &d->links[s->link_index];
    if (trace && l->trace_id_len == 16)
        pl_hex_encode(l->trace_id, 16, buf), buf[32] = 0;
    else if (!trace && l->span_id_len == 8)
        pl_hex_encode(l->span_id, 8, buf), buf[16] = 0;
    return buf;
}

static char *hex_id(uint64_t id, char *buf)
{
    uint8_t raw[8];
    id8(id, raw);
    pl_hex_encode(raw, 8, buf);
    buf[16] = 0;
    return buf;
}

static char *hex_trace(uint8_t t, char *buf)
{
    uint8_t raw[16];
    id16(t, raw);
    pl_hex_encode(raw, 16, buf);
    buf[32] = 0;
    return buf;
}

/* ---- a next consumer that refuses on demand ------------------------------------------------ */

/* A next consumer that refuses while `refusing` is set (it takes the batch
 * whatever it answers, as every consumer does). */
typedef struct gate {
    bool refusing;
    int refused;
    capture *cap;
} gate;

static pl_status gate_fn(void *arg, pl_batch *batch)
{
    gate *g = arg;
    if (g->refusing) {
        g->refused++;
        pl_batch_free(batch);
        return PL_ERR_REFUSED;
    }
    return capture_fn(g->cap, batch);
}

#endif
