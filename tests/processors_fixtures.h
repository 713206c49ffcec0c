/*
 * processors_fixtures.h: helpers shared by the processor tests and the
 * processor benchmark: decoding a processor's config from YAML with the
 * real loader tables, driving its hooks, capture consumers, and builders
 * for hand-made trace and profile batches.
 */
#ifndef PL_TEST_PROCESSORS_FIXTURES_H
#define PL_TEST_PROCESSORS_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/decode.h"
#include "config/node.h"
#include "core/component.h"
#include "core/log.h"
#include "core/stats.h"
#include "pipeline/consumer.h"
#include "pipeline/registry.h"

extern const pl_component_type pl_processor_batch;
extern const pl_component_type pl_processor_memory_limiter;
extern const pl_component_type pl_processor_attributes;
extern const pl_component_type pl_processor_resource;
extern const pl_component_type pl_processor_redaction;

/* ---- capture consumer ---------------------------------------------------- */

#define PX_CAPTURE_MAX 256

typedef struct px_capture {
    pl_batch *batches[PX_CAPTURE_MAX];
    size_t n;
    size_t items;
    pl_status answer; /* what the capture returns */
    pl_consumer consumer;
} px_capture;

static __attribute__((unused)) pl_status px_capture_fn(void *arg, pl_batch *b)
{
    px_capture *c = arg;
    c->items += pl_batch_items(b);
    if (c->n < PX_CAPTURE_MAX)
        c->batches[c->n++] = b;
    else
        pl_batch_free(b);
    return c->answer;
}

static __attribute__((unused)) void px_capture_init(px_capture *c)
{
    memset(c, 0, sizeof(*c));
    pl_consumer_init_func(&c->consumer, px_capture_fn, c);
}

static __attribute__((unused)) void px_capture_clear(px_capture *c)
{
    for (size_t i = 0; i < c->n; i++)
        pl_batch_free(c->batches[i]);
    c->n = 0;
    c->items = 0;
}

/* ---- processors driven through their descriptors ------------------------- */

typedef struct px_proc {
    const pl_component_type *type;
    void *cfg;
    void *self;
    pl_stats *stats;
    uv_loop_t *loop;
    char errors[2048]; /* config errors, one per line */
    int n_errors;
    pl_err err;
} px_proc;

/* Decodes `yaml` with the type's config table. Returns the number of
 * errors (their text, with line:col, in p->errors). */
static __attribute__((unused)) int px_decode(px_proc *p, const pl_component_type *type,
                                             const char *yaml)
{
    memset(p, 0, sizeof(*p));
    p->type = type;
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("test.yaml", yaml, strlen(yaml), &errs);
    p->cfg = calloc(1, type->config->size);
    if (doc && p->cfg)
        pl_cfg_decode(type->config, doc->root, doc->root, p->cfg, &errs);
    pl_cfg_errors_sort(&errs);
    p->n_errors = (int)errs.n;
    size_t o = 0;
    for (size_t i = 0; i < errs.n && o < sizeof(p->errors) - 1; i++)
        o += (size_t)snprintf(p->errors + o, sizeof(p->errors) - o, "%s\n", errs.items[i].text);
    pl_cfg_errors_free(&errs);
    if (doc)
        pl_cfg_doc_free(doc);
    return p->n_errors;
}

/* Decodes and creates; returns the create status (PL_ERR_INVALID for
 * config errors). */
static __attribute__((unused)) pl_status px_open(px_proc *p, const pl_component_type *type,
                                                 const char *yaml, uv_loop_t *loop)
{
    if (px_decode(p, type, yaml) != 0) {
        fprintf(stderr, "  config errors:\n%s", p->errors);
        return PL_ERR_INVALID;
    }
    p->loop = loop;
    p->stats = pl_stats_new(type->type, PL_KIND_PROCESSOR);
    pl_create_settings s;
    memset(&s, 0, sizeof(s));
    s.id = type->type;
    s.loop = loop;
    s.stats = p->stats;
    s.signals = type->signals;
    pl_status st = type->create(&s, p->cfg, &p->self, &p->err);
    if (st != PL_OK)
        return st;
    return type->start ? type->start(p->self, &p->err) : PL_OK;
}

static __attribute__((unused)) pl_status px_consume(px_proc *p, pl_batch *b, pl_consumer *next)
{
    return p->type->consume(p->self, b, next);
}

static __attribute__((unused)) void px_close(px_proc *p)
{
    if (p->self) {
        if (p->type->shutdown)
            p->type->shutdown(p->self);
        if (p->loop)
            uv_run(p->loop, UV_RUN_DEFAULT);
        p->type->destroy(p->self);
    }
    if (p->cfg) {
        pl_cfg_free(p->type->config, p->cfg);
        free(p->cfg);
    }
    pl_stats_free(p->stats);
    memset(p, 0, sizeof(*p));
}

static __attribute__((unused)) uint64_t px_counter(px_proc *p, const char *name)
{
    return *pl_stats_counter(p->stats, name, "");
}

/* ---- building batches ---------------------------------------------------- */

static __attribute__((unused)) pl_bytes px_str(pl_batch *b, const char *s)
{
    return pl_batch_bytes(b, s, strlen(s));
}

static __attribute__((unused)) void px_put(pl_batch *b, pl_attrs *a, const char *key, pl_value v)
{
    pl_attrs_put(&b->arena, a, px_str(b, key), v);
}

static __attribute__((unused)) void px_put_str(pl_batch *b, pl_attrs *a, const char *key,
                                               const char *v)
{
    px_put(b, a, key, pl_value_string(px_str(b, v)));
}

/* A traces batch: `n_res` resources (service.name = svc<r>), one scope each,
 * `n_spans` spans per resource named "span<r>.<i>", each with http.route. */
static __attribute__((unused)) pl_batch *px_traces(uint32_t n_res, uint32_t n_spans)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = n_res;
    t->resources = pl_batch_alloc(b, n_res * sizeof(pl_resource_spans));
    for (uint32_t r = 0; r < n_res; r++) {
        pl_resource_spans *rs = &t->resources[r];
        char buf[64];
        rs->has_resource = true;
        snprintf(buf, sizeof(buf), "svc%u", r);
        px_put_str(b, &rs->resource.attrs, "service.name", buf);
        rs->n_scopes = 1;
        rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        pl_scope_spans *ss = &rs->scopes[0];
        ss->has_scope = true;
        ss->scope.name = px_str(b, "lib");
        ss->n_spans = n_spans;
        ss->spans = pl_batch_alloc(b, n_spans * sizeof(pl_span));
        for (uint32_t i = 0; i < n_spans; i++) {
            pl_span *sp = &ss->spans[i];
            snprintf(buf, sizeof(buf), "span%u.%u", r, i);
            sp->name = px_str(b, buf);
            sp->trace_id_len = 16;
            sp->span_id_len = 8;
            sp->trace_id[0] = (uint8_t)(r + 1);
            sp->span_id[0] = (uint8_t)(i + 1);
            sp->start_time_unix_nano = 1000 + i;
            sp->end_time_unix_nano = 2000 + i;
            px_put_str(b, &sp->attrs, "http.route", "/api/items");
        }
    }
    return b;
}

static __attribute__((unused)) pl_span *px_span(pl_batch *b, uint32_t r, uint32_t i)
{
    return &b->data.traces.resources[r].scopes[0].spans[i];
}

/* Dictionary builders (tables grow in the batch arena). */
#define PX_PUSH(b, d, field)                                                                       \
    (((d)->n_##field >= (d)->cap_##field                                                           \
          ? ((d)->field =                                                                          \
                 pl_arena_grow(&(b)->arena, (d)->field, (d)->n_##field,                            \
                               (d)->cap_##field = (d)->cap_##field * 2 + 8, sizeof(*(d)->field)))  \
          : 0),                                                                                    \
     &(d)->field[(d)->n_##field++])

static __attribute__((unused)) int32_t px_s(pl_batch *b, const char *s)
{
    return pl_dict_intern_string(&b->arena, &b->data.profiles.dict, px_str(b, s));
}

static __attribute__((unused)) int32_t px_func(pl_batch *b, const char *name, const char *file)
{
    pl_dictionary *d = &b->data.profiles.dict;
    int32_t n = px_s(b, name), f = px_s(b, file);
    pl_function *fn = PX_PUSH(b, d, functions);
    memset(fn, 0, sizeof(*fn));
    fn->name_strindex = n;
    fn->filename_strindex = f;
    return (int32_t)(d->n_functions - 1);
}

static __attribute__((unused)) int32_t px_mapping(pl_batch *b, const char *file)
{
    pl_dictionary *d = &b->data.profiles.dict;
    int32_t f = px_s(b, file);
    pl_mapping *m = PX_PUSH(b, d, mappings);
    memset(m, 0, sizeof(*m));
    m->filename_strindex = f;
    m->memory_start = 0x1000;
    return (int32_t)(d->n_mappings - 1);
}

static __attribute__((unused)) int32_t px_loc(pl_batch *b, int32_t func, int32_t mapping,
                                              int64_t line)
{
    pl_dictionary *d = &b->data.profiles.dict;
    pl_location *l = PX_PUSH(b, d, locations);
    memset(l, 0, sizeof(*l));
    l->mapping_index = mapping;
    l->address = 0x1000 + (uint64_t)line;
    l->n_lines = 1;
    l->lines = pl_batch_alloc(b, sizeof(pl_line));
    l->lines[0].function_index = func;
    l->lines[0].line = line;
    return (int32_t)(d->n_locations - 1);
}

static __attribute__((unused)) int32_t px_stack(pl_batch *b, uint32_t n, const int32_t *locs)
{
    pl_dictionary *d = &b->data.profiles.dict;
    pl_stack *s = PX_PUSH(b, d, stacks);
    s->n_location_indices = n;
    s->location_indices = pl_batch_alloc(b, n * sizeof(int32_t));
    memcpy(s->location_indices, locs, n * sizeof(int32_t));
    return (int32_t)(d->n_stacks - 1);
}

static __attribute__((unused)) int32_t px_attr_str(pl_batch *b, const char *key, const char *value)
{
    return pl_dict_intern_attribute(&b->arena, &b->data.profiles.dict, px_s(b, key),
                                    pl_value_string(px_str(b, value)), 0);
}

/* A profiles batch: one resource (service.name=<service>), one scope, one
 * CPU profile with `n_samples` samples over 3 stacks built from functions
 * "<prefix>main", "<prefix>work", "<prefix>leaf<k>"; sample i carries the
 * label thread=t<i%2> and every third one a link. */
static __attribute__((unused)) pl_batch *px_profiles(const char *service, const char *prefix,
                                                     uint32_t n_samples)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    ps->has_dictionary = true;
    pl_dict_ensure_zero_entries(&b->arena, &ps->dict);
    char name[128];
    int32_t map = px_mapping(b, "/usr/bin/app");
    snprintf(name, sizeof(name), "%smain", prefix);
    int32_t fmain = px_func(b, name, "main.go");
    snprintf(name, sizeof(name), "%swork", prefix);
    int32_t fwork = px_func(b, name, "work.go");
    int32_t lmain = px_loc(b, fmain, map, 10), lwork = px_loc(b, fwork, map, 20);
    int32_t stacks[3];
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof(name), "%sleaf%d", prefix, k);
        int32_t fl = px_func(b, name, "leaf.go");
        int32_t ll = px_loc(b, fl, map, 30 + k);
        int32_t locs[3] = {ll, lwork, lmain};
        stacks[k] = px_stack(b, 3, locs);
    }
    int32_t threads[2] = {px_attr_str(b, "thread", "t0"), px_attr_str(b, "thread", "t1")};
    pl_link link;
    memset(&link, 0, sizeof(link));
    link.trace_id_len = 16;
    link.span_id_len = 8;
    memset(link.trace_id, 0xab, 16);
    memset(link.span_id, 0xcd, 8);
    int32_t li = pl_dict_intern_link(&b->arena, &ps->dict, &link);

    ps->n_resources = 1;
    ps->resources = pl_batch_alloc(b, sizeof(pl_resource_profiles));
    pl_resource_profiles *rp = &ps->resources[0];
    rp->has_resource = true;
    px_put_str(b, &rp->resource.attrs, "service.name", service);
    rp->n_scopes = 1;
    rp->scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
    pl_scope_profiles *sp = &rp->scopes[0];
    sp->n_profiles = 1;
    sp->profiles = pl_batch_alloc(b, sizeof(pl_profile));
    pl_profile *p = &sp->profiles[0];
    p->has_sample_type = true;
    p->sample_type.type_strindex = px_s(b, "cpu");
    p->sample_type.unit_strindex = px_s(b, "nanoseconds");
    p->time_unix_nano = 1700000000000000000ull;
    p->duration_nano = 10000000000ull;
    p->n_samples = n_samples;
    p->samples = pl_batch_alloc(b, n_samples * sizeof(pl_sample));
    for (uint32_t i = 0; i < n_samples; i++) {
        pl_sample *s = &p->samples[i];
        s->stack_index = stacks[i % 3];
        s->n_attribute_indices = 1;
        s->attribute_indices = pl_batch_alloc(b, sizeof(int32_t));
        s->attribute_indices[0] = threads[i % 2];
        s->link_index = i % 3 == 0 ? li : 0;
        s->n_values = 1;
        s->values = pl_batch_alloc(b, sizeof(int64_t));
        s->values[0] = 10000000 * (int64_t)(i + 1);
    }
    return b;
}

/* Renders one sample with everything resolved through the dictionary:
 * "svc|frame;frame;...|key=value,...|link-or-none|values", so samples can be
 * compared across re-indexed dictionaries. */
static __attribute__((unused)) void px_render_value(char *out, size_t n, const pl_dictionary *d,
                                                    const pl_value *v)
{
    switch (v->type) {
    case PL_VALUE_STRING:
        snprintf(out, n, "%.*s", (int)v->u.str.len, (const char *)v->u.str.ptr);
        break;
    case PL_VALUE_STRINDEX: {
        pl_bytes s = pl_dict_string(d, v->u.strindex);
        snprintf(out, n, "%.*s", (int)s.len, (const char *)s.ptr);
        break;
    }
    case PL_VALUE_INT:
        snprintf(out, n, "%lld", (long long)v->u.i);
        break;
    default:
        snprintf(out, n, "<type %d>", (int)v->type);
    }
}

static __attribute__((unused)) void px_render_sample(char *out, size_t n, const pl_profiles *ps,
                                                     const char *svc, const pl_sample *s)
{
    const pl_dictionary *d = &ps->dict;
    size_t o = (size_t)snprintf(out, n, "%s|", svc);
    if (s->stack_index > 0 && (uint32_t)s->stack_index < d->n_stacks) {
        const pl_stack *st = &d->stacks[s->stack_index];
        for (uint32_t i = 0; i < st->n_location_indices; i++) {
            const pl_location *l = &d->locations[st->location_indices[i]];
            const pl_function *f = &d->functions[l->lines[0].function_index];
            pl_bytes fn = pl_dict_string(d, f->name_strindex);
            pl_bytes file = pl_dict_string(d, f->filename_strindex);
            pl_bytes map = pl_dict_string(d, d->mappings[l->mapping_index].filename_strindex);
            o += (size_t)snprintf(out + o, n - o, "%.*s@%.*s:%lld[%.*s];", (int)fn.len,
                                  (const char *)fn.ptr, (int)file.len, (const char *)file.ptr,
                                  (long long)l->lines[0].line, (int)map.len, (const char *)map.ptr);
        }
    }
    o += (size_t)snprintf(out + o, n - o, "|");
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        const pl_kvu *a = &d->attributes[s->attribute_indices[i]];
        pl_bytes k = pl_dict_string(d, a->key_strindex);
        char v[256];
        px_render_value(v, sizeof(v), d, &a->value);
        o += (size_t)snprintf(out + o, n - o, "%.*s=%s,", (int)k.len, (const char *)k.ptr, v);
    }
    if (s->link_index > 0) {
        char hex[33];
        pl_hex_encode(d->links[s->link_index].span_id, 8, hex);
        o += (size_t)snprintf(out + o, n - o, "|link=%s", hex);
    } else {
        o += (size_t)snprintf(out + o, n - o, "|nolink");
    }
    for (uint32_t i = 0; i < s->n_values; i++)
        o += (size_t)snprintf(out + o, n - o, "|%lld", (long long)s->values[i]);
}

#endif
