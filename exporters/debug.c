/*
 * debug.c: the `debug` exporter: shows what flows through a pipeline, on
 * stderr through the log.
 *
 *   verbosity: basic     one line per batch with its counts
 *              normal    plus one line per span / profile
 *              detailed  plus every attribute, and every sample with its
 *                        stack (function names, leaf first) and values
 *
 * It borrows the batch and prints synchronously, so it never holds data
 * and `pending` is always 0. Meant for first steps and troubleshooting, not
 * for production traffic.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/component.h"
#include "core/log.h"
#include "core/value_json.h"

#include "exporters/debug.config.h"

enum { VERB_BASIC, VERB_NORMAL, VERB_DETAILED };

static int parse_verbosity(const char *v)
{
    if (!v || strcmp(v, "basic") == 0)
        return VERB_BASIC;
    if (strcmp(v, "normal") == 0)
        return VERB_NORMAL;
    if (strcmp(v, "detailed") == 0)
        return VERB_DETAILED;
    return -1;
}

static int debug_validate(void *cfg, pl_cfg_ctx *ctx)
{
    debug_cfg *c = cfg;
    if (parse_verbosity(c->verbosity) < 0) {
        pl_cfg_errorf(ctx, "verbosity", "must be basic, normal or detailed, not '%s'",
                      c->verbosity);
        return 1;
    }
    return 0;
}

#include "exporters/debug.config.inc"

typedef struct debug_exporter {
    char *id;
    int verbosity;
    pl_stats *stats;
} debug_exporter;

static pl_status debug_create(const pl_create_settings *settings, const void *config,
                              void **out_self, pl_err *err)
{
    const debug_cfg *c = config;
    debug_exporter *d = calloc(1, sizeof(*d));
    if (!d)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    d->id = strdup(settings->id ? settings->id : "debug");
    d->verbosity = parse_verbosity(c ? c->verbosity : NULL);
    if (d->verbosity < 0)
        d->verbosity = VERB_BASIC;
    d->stats = settings->stats;
    *out_self = d;
    return PL_OK;
}

static void append_bytes(pl_buf *b, pl_bytes s)
{
    pl_buf_append(b, s.ptr, s.len);
}

/* A value for people (core/value_json, pl_vj_debug); string_value_strindex
 * resolved through dict when there is one. */
static void append_value(pl_buf *b, const pl_value *v, const pl_dictionary *dict)
{
    pl_value_json_opts o = pl_vj_debug;
    o.dict = dict;
    pl_value_json(b, v, &o);
}

static void append_attrs(pl_buf *b, const pl_attrs *attrs)
{
    for (uint32_t i = 0; i < attrs->n; i++) {
        pl_buf_append_str(b, i ? ", " : " ");
        append_bytes(b, attrs->items[i].key);
        pl_buf_append_byte(b, '=');
        append_value(b, &attrs->items[i].value, NULL);
    }
}

static void flush_line(debug_exporter *d, pl_buf *b)
{
    pl_buf_append_byte(b, 0);
    if (pl_buf_ok(b))
        pl_info(d->id, "%s", (const char *)b->data);
    pl_buf_reset(b);
}

/* The line naming resource #r and its attributes (detailed verbosity). */
static void print_resource(debug_exporter *d, pl_buf *b, uint32_t r, const pl_resource *res)
{
    if (d->verbosity < VERB_DETAILED)
        return;
    pl_buf_printf(b, "resource #%u:", r);
    append_attrs(b, &res->attrs);
    flush_line(d, b);
}

static void print_traces(debug_exporter *d, const pl_traces *t, pl_buf *b)
{
    for (uint32_t r = 0; r < t->n_resources; r++) {
        const pl_resource_spans *rs = &t->resources[r];
        print_resource(d, b, r, &rs->resource);
        for (uint32_t s = 0; s < rs->n_scopes; s++) {
            const pl_scope_spans *ss = &rs->scopes[s];
            for (uint32_t i = 0; i < ss->n_spans; i++) {
                const pl_span *sp = &ss->spans[i];
                char trace[33], span[17], parent[17];
                pl_hex_encode(sp->trace_id, sp->trace_id_len, trace);
                pl_hex_encode(sp->span_id, sp->span_id_len, span);
                pl_hex_encode(sp->parent_span_id, sp->parent_span_id_len, parent);
                double ms = sp->end_time_unix_nano > sp->start_time_unix_nano
                                ? (double)(sp->end_time_unix_nano - sp->start_time_unix_nano) / 1e6
                                : 0;
                pl_buf_append_str(b, "span ");
                append_bytes(b, sp->name);
                pl_buf_printf(b, " trace=%s span=%s parent=%s %.3fms", trace, span,
                              parent[0] ? parent : "-", ms);
                if (d->verbosity >= VERB_DETAILED)
                    append_attrs(b, &sp->attrs);
                flush_line(d, b);
            }
        }
    }
}

static void print_stack(pl_buf *b, const pl_dictionary *dict, const pl_sample *smp)
{
    if (smp->stack_index <= 0 || (uint32_t)smp->stack_index >= dict->n_stacks)
        return;
    const pl_stack *st = &dict->stacks[smp->stack_index];
    pl_buf_append_str(b, " stack=");
    for (uint32_t i = 0; i < st->n_location_indices && i < 64; i++) {
        int32_t li = st->location_indices[i];
        if (i)
            pl_buf_append_str(b, ";");
        if (li < 0 || (uint32_t)li >= dict->n_locations) {
            pl_buf_append_str(b, "?");
            continue;
        }
        const pl_location *loc = &dict->locations[li];
        if (loc->n_lines == 0) {
            pl_buf_printf(b, "0x%" PRIx64, loc->address);
            continue;
        }
        int32_t fi = loc->lines[0].function_index;
        if (fi > 0 && (uint32_t)fi < dict->n_functions)
            append_bytes(b, pl_dict_string(dict, dict->functions[fi].name_strindex));
        else
            pl_buf_append_str(b, "?");
    }
}

static void print_profiles(debug_exporter *d, const pl_profiles *p, pl_buf *b)
{
    const pl_dictionary *dict = &p->dict;
    for (uint32_t r = 0; r < p->n_resources; r++) {
        const pl_resource_profiles *rp = &p->resources[r];
        print_resource(d, b, r, &rp->resource);
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            const pl_scope_profiles *sp = &rp->scopes[s];
            for (uint32_t i = 0; i < sp->n_profiles; i++) {
                const pl_profile *prof = &sp->profiles[i];
                pl_buf_append_str(b, "profile ");
                append_bytes(b, pl_dict_string(dict, prof->sample_type.type_strindex));
                pl_buf_append_byte(b, '/');
                append_bytes(b, pl_dict_string(dict, prof->sample_type.unit_strindex));
                pl_buf_printf(b, " samples=%u duration=%.3fs", prof->n_samples,
                              (double)prof->duration_nano / 1e9);
                flush_line(d, b);
                if (d->verbosity < VERB_DETAILED)
                    continue;
                for (uint32_t k = 0; k < prof->n_samples; k++) {
                    const pl_sample *smp = &prof->samples[k];
                    pl_buf_printf(b, "  sample #%u values=[", k);
                    for (uint32_t v = 0; v < smp->n_values; v++)
                        pl_buf_printf(b, "%s%" PRId64, v ? "," : "", smp->values[v]);
                    pl_buf_append_byte(b, ']');
                    if (smp->link_index > 0 && (uint32_t)smp->link_index < dict->n_links) {
                        const pl_link *l = &dict->links[smp->link_index];
                        char trace[33], span[17];
                        pl_hex_encode(l->trace_id, l->trace_id_len, trace);
                        pl_hex_encode(l->span_id, l->span_id_len, span);
                        pl_buf_printf(b, " trace=%s span=%s", trace, span);
                    }
                    for (uint32_t a = 0; a < smp->n_attribute_indices; a++) {
                        int32_t ai = smp->attribute_indices[a];
                        if (ai < 0 || (uint32_t)ai >= dict->n_attributes)
                            continue;
                        pl_buf_append_byte(b, ' ');
                        append_bytes(b, pl_dict_string(dict, dict->attributes[ai].key_strindex));
                        pl_buf_append_byte(b, '=');
                        append_value(b, &dict->attributes[ai].value, dict);
                    }
                    print_stack(b, dict, smp);
                    flush_line(d, b);
                }
            }
        }
    }
}

static pl_status debug_export(void *self, const pl_batch *batch)
{
    debug_exporter *d = self;
    size_t items = pl_batch_items(batch);
    pl_buf b;
    pl_buf_init(&b);
    switch (batch->signal) {
    case PL_SIGNAL_TRACES: {
        uint32_t scopes = 0;
        for (uint32_t r = 0; r < batch->data.traces.n_resources; r++)
            scopes += batch->data.traces.resources[r].n_scopes;
        pl_buf_printf(&b, "traces: %u resources, %u scopes, %zu spans",
                      batch->data.traces.n_resources, scopes, items);
        flush_line(d, &b);
        if (d->verbosity >= VERB_NORMAL)
            print_traces(d, &batch->data.traces, &b);
        break;
    }
    case PL_SIGNAL_PROFILES: {
        uint32_t profiles = 0;
        for (uint32_t r = 0; r < batch->data.profiles.n_resources; r++)
            for (uint32_t s = 0; s < batch->data.profiles.resources[r].n_scopes; s++)
                profiles += batch->data.profiles.resources[r].scopes[s].n_profiles;
        pl_buf_printf(&b, "profiles: %u resources, %u profiles, %zu samples",
                      batch->data.profiles.n_resources, profiles, items);
        flush_line(d, &b);
        if (d->verbosity >= VERB_NORMAL)
            print_profiles(d, &batch->data.profiles, &b);
        break;
    }
    default:
        pl_buf_printf(&b, "%s: one request of %u bytes", pl_signal_name(batch->signal),
                      batch->data.raw.len);
        flush_line(d, &b);
        break;
    }
    pl_buf_free(&b);
    pl_stats_add(d->stats, batch->signal, PL_STAT_SENT, items);
    return PL_OK;
}

static void debug_destroy(void *self)
{
    debug_exporter *d = self;
    if (!d)
        return;
    free(d->id);
    free(d);
}

const pl_component_type pl_exporter_debug = {
    PL_COMPONENT_HEAD("debug", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &debug_section),
    .description = "Prints what flows through a pipeline to the log (stderr).",
    .create = debug_create,
    .export = debug_export,
    .destroy = debug_destroy,
};
