/*
 * ref_pb_enc.c: the hand-written OTLP protobuf encoder proflink used before
 * its encoders became table walkers (proto/otlp_pb_enc.c), kept as the
 * reference the table walker is checked against byte for byte
 * (tests/test_otlp_encoders.c) and measured against (bench_codec). The
 * writing primitives are the library's (proto/otlp_pb_write.h), unchanged.
 */
#include "ref_enc.h"

#include "proto/otlp_pb_internal.h"
#include "proto/otlp_pb_write.h"

/* ---- encoder ------------------------------------------------------------ */

static void enc_kv(pl_buf *b, const pl_kv *kv);

static void enc_anyvalue(pl_buf *b, const pl_value *v)
{
    switch (v->type) {
    case PL_VALUE_EMPTY:
        break;
    case PL_VALUE_STRING:
        w_len_field(b, CM(AnyValue, string_value), v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_BOOL:
        w_tag(b, CM(AnyValue, bool_value), WT_VARINT);
        w_varint(b, v->u.b ? 1 : 0);
        break;
    case PL_VALUE_INT:
        w_tag(b, CM(AnyValue, int_value), WT_VARINT);
        w_varint(b, (uint64_t)v->u.i);
        break;
    case PL_VALUE_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &v->u.d, 8);
        w_tag(b, CM(AnyValue, double_value), WT_I64);
        uint8_t le[8];
        for (int i = 0; i < 8; i++)
            le[i] = (uint8_t)(bits >> (8 * i));
        w_raw(b, le, 8);
        break;
    }
    case PL_VALUE_ARRAY: {
        size_t s = w_begin(b, CM(AnyValue, array_value));
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            size_t e = w_begin(b, CM(ArrayValue, values));
            enc_anyvalue(b, &v->u.array.items[i]);
            w_end(b, e);
        }
        w_end(b, s);
        break;
    }
    case PL_VALUE_KVLIST: {
        size_t s = w_begin(b, CM(AnyValue, kvlist_value));
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            size_t e = w_begin(b, CM(KeyValueList, values));
            enc_kv(b, &v->u.kvlist.items[i]);
            w_end(b, e);
        }
        w_end(b, s);
        break;
    }
    case PL_VALUE_BYTES:
        w_len_field(b, CM(AnyValue, bytes_value), v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_STRINDEX:
        w_tag(b, CM(AnyValue, string_value_strindex), WT_VARINT);
        w_varint(b, (uint64_t)(int64_t)v->u.strindex);
        break;
    }
}

static void enc_kv(pl_buf *b, const pl_kv *kv)
{
    w_bytes_opt(b, CM(KeyValue, key), kv->key);
    size_t s = w_begin(b, CM(KeyValue, value));
    enc_anyvalue(b, &kv->value);
    w_end(b, s);
    w_i32_opt(b, CM(KeyValue, key_strindex), kv->key_strindex);
}

static void enc_attrs(pl_buf *b, uint32_t num, const pl_attrs *a)
{
    for (uint32_t i = 0; i < a->n; i++) {
        size_t s = w_begin(b, num);
        enc_kv(b, &a->items[i]);
        w_end(b, s);
    }
}

static void enc_resource(pl_buf *b, uint32_t num, const pl_resource *r)
{
    size_t s = w_begin(b, num);
    enc_attrs(b, RES(Resource, attributes), &r->attrs);
    w_uvarint_opt(b, RES(Resource, dropped_attributes_count), r->dropped_attributes_count);
    for (uint32_t i = 0; i < r->n_entity_refs; i++) {
        const pl_entity_ref *e = &r->entity_refs[i];
        size_t es = w_begin(b, RES(Resource, entity_refs));
        w_bytes_opt(b, CM(EntityRef, schema_url), e->schema_url);
        w_bytes_opt(b, CM(EntityRef, type), e->type);
        for (uint32_t k = 0; k < e->n_id_keys; k++)
            w_len_field(b, CM(EntityRef, id_keys), e->id_keys[k].ptr, e->id_keys[k].len);
        for (uint32_t k = 0; k < e->n_description_keys; k++)
            w_len_field(b, CM(EntityRef, description_keys), e->description_keys[k].ptr,
                        e->description_keys[k].len);
        w_end(b, es);
    }
    w_end(b, s);
}

static void enc_scope(pl_buf *b, uint32_t num, const pl_scope *sc)
{
    size_t s = w_begin(b, num);
    w_bytes_opt(b, CM(InstrumentationScope, name), sc->name);
    w_bytes_opt(b, CM(InstrumentationScope, version), sc->version);
    enc_attrs(b, CM(InstrumentationScope, attributes), &sc->attrs);
    w_uvarint_opt(b, CM(InstrumentationScope, dropped_attributes_count),
                  sc->dropped_attributes_count);
    w_end(b, s);
}

static void enc_id(pl_buf *b, uint32_t num, const uint8_t *id, uint8_t len)
{
    if (len)
        w_len_field(b, num, id, len);
}

static void enc_span(pl_buf *b, const pl_span *sp)
{
    enc_id(b, TR(Span, trace_id), sp->trace_id, sp->trace_id_len);
    enc_id(b, TR(Span, span_id), sp->span_id, sp->span_id_len);
    w_bytes_opt(b, TR(Span, trace_state), sp->trace_state);
    enc_id(b, TR(Span, parent_span_id), sp->parent_span_id, sp->parent_span_id_len);
    w_bytes_opt(b, TR(Span, name), sp->name);
    w_i32_opt(b, TR(Span, kind), sp->kind);
    w_fixed64_opt(b, TR(Span, start_time_unix_nano), sp->start_time_unix_nano);
    w_fixed64_opt(b, TR(Span, end_time_unix_nano), sp->end_time_unix_nano);
    enc_attrs(b, TR(Span, attributes), &sp->attrs);
    w_uvarint_opt(b, TR(Span, dropped_attributes_count), sp->dropped_attributes_count);
    for (uint32_t i = 0; i < sp->n_events; i++) {
        const pl_span_event *ev = &sp->events[i];
        size_t s = w_begin(b, TR(Span, events));
        w_fixed64_opt(b, TR(Span_Event, time_unix_nano), ev->time_unix_nano);
        w_bytes_opt(b, TR(Span_Event, name), ev->name);
        enc_attrs(b, TR(Span_Event, attributes), &ev->attrs);
        w_uvarint_opt(b, TR(Span_Event, dropped_attributes_count), ev->dropped_attributes_count);
        w_end(b, s);
    }
    w_uvarint_opt(b, TR(Span, dropped_events_count), sp->dropped_events_count);
    for (uint32_t i = 0; i < sp->n_links; i++) {
        const pl_span_link *l = &sp->links[i];
        size_t s = w_begin(b, TR(Span, links));
        enc_id(b, TR(Span_Link, trace_id), l->trace_id, l->trace_id_len);
        enc_id(b, TR(Span_Link, span_id), l->span_id, l->span_id_len);
        w_bytes_opt(b, TR(Span_Link, trace_state), l->trace_state);
        enc_attrs(b, TR(Span_Link, attributes), &l->attrs);
        w_uvarint_opt(b, TR(Span_Link, dropped_attributes_count), l->dropped_attributes_count);
        w_fixed32_opt(b, TR(Span_Link, flags), l->flags);
        w_end(b, s);
    }
    w_uvarint_opt(b, TR(Span, dropped_links_count), sp->dropped_links_count);
    if (sp->has_status || sp->status.code || sp->status.message.len) {
        size_t s = w_begin(b, TR(Span, status));
        w_bytes_opt(b, TR(Status, message), sp->status.message);
        w_i32_opt(b, TR(Status, code), sp->status.code);
        w_end(b, s);
    }
    w_fixed32_opt(b, TR(Span, flags), sp->flags);
}

/* Traces and profiles share their envelope (request -> ResourceX ->
 * ScopeX -> items) field for field, in the wire format and in the model;
 * one loop writes both, reading the model through offsets of the traces
 * structs (the same as the profiles ones, checked here). */
_Static_assert(CTR(ExportTraceServiceRequest, resource_spans) ==
                       CPR(ExportProfilesServiceRequest, resource_profiles) &&
                   TR(ResourceSpans, resource) == PR(ResourceProfiles, resource) &&
                   TR(ResourceSpans, scope_spans) == PR(ResourceProfiles, scope_profiles) &&
                   TR(ResourceSpans, schema_url) == PR(ResourceProfiles, schema_url) &&
                   TR(ScopeSpans, scope) == PR(ScopeProfiles, scope) &&
                   TR(ScopeSpans, spans) == PR(ScopeProfiles, profiles) &&
                   TR(ScopeSpans, schema_url) == PR(ScopeProfiles, schema_url),
               "envelope field numbers");
#define SAME_LAYOUT(a, b, m) (offsetof(a, m) == offsetof(b, m))
_Static_assert(sizeof(pl_resource_spans) == sizeof(pl_resource_profiles) &&
                   SAME_LAYOUT(pl_resource_spans, pl_resource_profiles, has_resource) &&
                   SAME_LAYOUT(pl_resource_spans, pl_resource_profiles, resource) &&
                   SAME_LAYOUT(pl_resource_spans, pl_resource_profiles, scopes) &&
                   SAME_LAYOUT(pl_resource_spans, pl_resource_profiles, n_scopes) &&
                   SAME_LAYOUT(pl_resource_spans, pl_resource_profiles, schema_url) &&
                   sizeof(pl_scope_spans) == sizeof(pl_scope_profiles) &&
                   offsetof(pl_scope_spans, spans) == offsetof(pl_scope_profiles, profiles) &&
                   offsetof(pl_scope_spans, n_spans) == offsetof(pl_scope_profiles, n_profiles) &&
                   SAME_LAYOUT(pl_scope_spans, pl_scope_profiles, has_scope) &&
                   SAME_LAYOUT(pl_scope_spans, pl_scope_profiles, scope) &&
                   SAME_LAYOUT(pl_scope_spans, pl_scope_profiles, schema_url),
               "envelope layout");

typedef void (*enc_item_fn)(pl_buf *b, const void *item);

static void enc_envelope(pl_buf *b, const void *resources, uint32_t n_resources, size_t item_size,
                         enc_item_fn item)
{
    for (uint32_t r = 0; r < n_resources; r++) {
        const uint8_t *rs = (const uint8_t *)resources + r * sizeof(pl_resource_spans);
        const void *scopes;
        uint32_t n_scopes;
        memcpy(&scopes, rs + offsetof(pl_resource_spans, scopes), sizeof scopes);
        memcpy(&n_scopes, rs + offsetof(pl_resource_spans, n_scopes), sizeof n_scopes);
        size_t rstart = w_begin(b, CTR(ExportTraceServiceRequest, resource_spans));
        if (*(const bool *)(rs + offsetof(pl_resource_spans, has_resource)))
            enc_resource(b, TR(ResourceSpans, resource),
                         (const pl_resource *)(rs + offsetof(pl_resource_spans, resource)));
        for (uint32_t s = 0; s < n_scopes; s++) {
            const uint8_t *ss = (const uint8_t *)scopes + s * sizeof(pl_scope_spans);
            const uint8_t *items;
            uint32_t n_items;
            memcpy(&items, ss + offsetof(pl_scope_spans, spans), sizeof items);
            memcpy(&n_items, ss + offsetof(pl_scope_spans, n_spans), sizeof n_items);
            size_t sstart = w_begin(b, TR(ResourceSpans, scope_spans));
            if (*(const bool *)(ss + offsetof(pl_scope_spans, has_scope)))
                enc_scope(b, TR(ScopeSpans, scope),
                          (const pl_scope *)(ss + offsetof(pl_scope_spans, scope)));
            for (uint32_t i = 0; i < n_items; i++) {
                size_t istart = w_begin(b, TR(ScopeSpans, spans));
                item(b, items + i * item_size);
                w_end(b, istart);
            }
            w_bytes_opt(b, TR(ScopeSpans, schema_url),
                        *(const pl_bytes *)(ss + offsetof(pl_scope_spans, schema_url)));
            w_end(b, sstart);
        }
        w_bytes_opt(b, TR(ResourceSpans, schema_url),
                    *(const pl_bytes *)(rs + offsetof(pl_resource_spans, schema_url)));
        w_end(b, rstart);
    }
}

static void enc_span_item(pl_buf *b, const void *item)
{
    enc_span(b, item);
}

bool ref_pb_encode_traces(const pl_traces *t, pl_buf *b)
{
    enc_envelope(b, t->resources, t->n_resources, sizeof(pl_span), enc_span_item);
    return pl_buf_ok(b);
}

static void enc_packed_i32(pl_buf *b, uint32_t num, const int32_t *v, uint32_t n)
{
    if (!n)
        return;
    size_t s = w_begin(b, num);
    for (uint32_t i = 0; i < n; i++)
        w_varint(b, (uint64_t)(int64_t)v[i]);
    w_end(b, s);
}

static void enc_packed_i64(pl_buf *b, uint32_t num, const int64_t *v, uint32_t n)
{
    if (!n)
        return;
    size_t s = w_begin(b, num);
    for (uint32_t i = 0; i < n; i++)
        w_varint(b, (uint64_t)v[i]);
    w_end(b, s);
}

static void enc_packed_fixed64(pl_buf *b, uint32_t num, const uint64_t *v, uint32_t n)
{
    if (!n)
        return;
    w_tag(b, num, WT_LEN);
    w_varint(b, (uint64_t)n * 8);
    if (!w_room(b, (size_t)n * 8))
        return;
    uint8_t *p = b->data + b->len;
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            *p++ = (uint8_t)(v[i] >> (8 * k));
    b->len += (size_t)n * 8;
}

static void enc_value_type(pl_buf *b, uint32_t num, const pl_vtype *vt)
{
    size_t s = w_begin(b, num);
    w_i32_opt(b, PR(ValueType, type_strindex), vt->type_strindex);
    w_i32_opt(b, PR(ValueType, unit_strindex), vt->unit_strindex);
    w_end(b, s);
}

static void enc_profile(pl_buf *b, const pl_profile *pr)
{
    if (pr->has_sample_type)
        enc_value_type(b, PR(Profile, sample_type), &pr->sample_type);
    for (uint32_t i = 0; i < pr->n_samples; i++) {
        const pl_sample *sm = &pr->samples[i];
        size_t s = w_begin(b, PR(Profile, samples));
        w_i32_opt(b, PR(Sample, stack_index), sm->stack_index);
        enc_packed_i32(b, PR(Sample, attribute_indices), sm->attribute_indices,
                       sm->n_attribute_indices);
        w_i32_opt(b, PR(Sample, link_index), sm->link_index);
        enc_packed_i64(b, PR(Sample, values), sm->values, sm->n_values);
        enc_packed_fixed64(b, PR(Sample, timestamps_unix_nano), sm->timestamps_unix_nano,
                           sm->n_timestamps);
        w_end(b, s);
    }
    w_fixed64_opt(b, PR(Profile, time_unix_nano), pr->time_unix_nano);
    w_uvarint_opt(b, PR(Profile, duration_nano), pr->duration_nano);
    if (pr->has_period_type)
        enc_value_type(b, PR(Profile, period_type), &pr->period_type);
    w_uvarint_opt(b, PR(Profile, period), (uint64_t)pr->period);
    enc_id(b, PR(Profile, profile_id), pr->profile_id, pr->profile_id_len);
    w_uvarint_opt(b, PR(Profile, dropped_attributes_count), pr->dropped_attributes_count);
    w_bytes_opt(b, PR(Profile, original_payload_format), pr->original_payload_format);
    w_bytes_opt(b, PR(Profile, original_payload), pr->original_payload);
    enc_packed_i32(b, PR(Profile, attribute_indices), pr->attribute_indices,
                   pr->n_attribute_indices);
}

static void enc_dictionary(pl_buf *b, uint32_t num, const pl_dictionary *d)
{
    size_t ds = w_begin(b, num);
    for (uint32_t i = 0; i < d->n_mappings; i++) {
        const pl_mapping *m = &d->mappings[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, mapping_table));
        w_uvarint_opt(b, PR(Mapping, memory_start), m->memory_start);
        w_uvarint_opt(b, PR(Mapping, memory_limit), m->memory_limit);
        w_uvarint_opt(b, PR(Mapping, file_offset), m->file_offset);
        w_i32_opt(b, PR(Mapping, filename_strindex), m->filename_strindex);
        enc_packed_i32(b, PR(Mapping, attribute_indices), m->attribute_indices,
                       m->n_attribute_indices);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_locations; i++) {
        const pl_location *l = &d->locations[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, location_table));
        w_i32_opt(b, PR(Location, mapping_index), l->mapping_index);
        w_uvarint_opt(b, PR(Location, address), l->address);
        for (uint32_t k = 0; k < l->n_lines; k++) {
            size_t ls = w_begin(b, PR(Location, lines));
            w_i32_opt(b, PR(Line, function_index), l->lines[k].function_index);
            w_uvarint_opt(b, PR(Line, line), (uint64_t)l->lines[k].line);
            w_uvarint_opt(b, PR(Line, column), (uint64_t)l->lines[k].column);
            w_end(b, ls);
        }
        enc_packed_i32(b, PR(Location, attribute_indices), l->attribute_indices,
                       l->n_attribute_indices);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_functions; i++) {
        const pl_function *f = &d->functions[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, function_table));
        w_i32_opt(b, PR(Function, name_strindex), f->name_strindex);
        w_i32_opt(b, PR(Function, system_name_strindex), f->system_name_strindex);
        w_i32_opt(b, PR(Function, filename_strindex), f->filename_strindex);
        w_uvarint_opt(b, PR(Function, start_line), (uint64_t)f->start_line);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_links; i++) {
        const pl_link *l = &d->links[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, link_table));
        enc_id(b, PR(Link, trace_id), l->trace_id, l->trace_id_len);
        enc_id(b, PR(Link, span_id), l->span_id, l->span_id_len);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_strings; i++)
        w_len_field(b, PR(ProfilesDictionary, string_table), d->strings[i].ptr, d->strings[i].len);
    for (uint32_t i = 0; i < d->n_attributes; i++) {
        const pl_kvu *a = &d->attributes[i];
        size_t s = w_begin(b, PR(ProfilesDictionary, attribute_table));
        w_i32_opt(b, PR(KeyValueAndUnit, key_strindex), a->key_strindex);
        if (a->value.type != PL_VALUE_EMPTY) {
            size_t vs = w_begin(b, PR(KeyValueAndUnit, value));
            enc_anyvalue(b, &a->value);
            w_end(b, vs);
        }
        w_i32_opt(b, PR(KeyValueAndUnit, unit_strindex), a->unit_strindex);
        w_end(b, s);
    }
    for (uint32_t i = 0; i < d->n_stacks; i++) {
        size_t s = w_begin(b, PR(ProfilesDictionary, stack_table));
        enc_packed_i32(b, PR(Stack, location_indices), d->stacks[i].location_indices,
                       d->stacks[i].n_location_indices);
        w_end(b, s);
    }
    w_end(b, ds);
}

static void enc_profile_item(pl_buf *b, const void *item)
{
    enc_profile(b, item);
}

bool ref_pb_encode_profiles(const pl_profiles *ps, pl_buf *b)
{
    enc_envelope(b, ps->resources, ps->n_resources, sizeof(pl_profile), enc_profile_item);
    if (ps->has_dictionary)
        enc_dictionary(b, CPR(ExportProfilesServiceRequest, dictionary), &ps->dict);
    return pl_buf_ok(b);
}
