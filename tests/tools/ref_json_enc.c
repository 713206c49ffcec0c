/*
 * ref_json_enc.c: the hand-written OTLP/JSON encoder proflink used before
 * its encoders became table walkers (proto/otlp_json.c), kept as the
 * reference the table walker is checked against byte for byte
 * (tests/test_otlp_encoders.c) and measured against (bench_codec).
 */
#include "ref_enc.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/otlp_json.h"
#include "proto/otlp_json_write.h"

/* ---- encoder ------------------------------------------------------------ */

/* The next element of an array, itself an array or object. */
static void w_elem_open(jw *w, char c)
{
    w_elem(w);
    w_open(w, c);
}

static void w_bytes_str(jw *w, const char *key, pl_bytes s)
{
    if (!s.len)
        return;
    w_key(w, key);
    pl_buf_json_string(w->b, s.ptr, s.len);
}

static void w_u32(jw *w, const char *key, uint32_t v)
{
    if (!v)
        return;
    w_key(w, key);
    pl_buf_printf(w->b, "%" PRIu32, v);
}

static void w_i32(jw *w, const char *key, int32_t v)
{
    if (!v)
        return;
    w_key(w, key);
    pl_buf_printf(w->b, "%" PRId32, v);
}

static void w_u64(jw *w, const char *key, uint64_t v)
{
    if (!v)
        return;
    w_key(w, key);
    pl_buf_printf(w->b, "\"%" PRIu64 "\"", v);
}

static void w_i64(jw *w, const char *key, int64_t v)
{
    if (!v)
        return;
    w_key(w, key);
    pl_buf_printf(w->b, "\"%" PRId64 "\"", v);
}

static void w_hex_id(jw *w, const char *key, const uint8_t *id, uint8_t len)
{
    /* Unlike the Collector (whose model cannot tell an all-zero id from an
     * absent one), an all-zero id of full length is written, so that
     * link_table[0] = {16 zero bytes, 8 zero bytes} survives a round trip. */
    if (!len)
        return;
    char hex[33];
    pl_hex_encode(id, len, hex);
    w_key(w, key);
    pl_buf_append_byte(w->b, '"');
    pl_buf_append(w->b, hex, 2u * len);
    pl_buf_append_byte(w->b, '"');
}

static void w_base64(jw *w, const char *key, pl_bytes s)
{
    if (!s.len)
        return;
    w_key(w, key);
    pl_buf_append_byte(w->b, '"');
    pl_otlp_base64_encode(w->b, s.ptr, s.len);
    pl_buf_append_byte(w->b, '"');
}

static void w_double(pl_buf *b, double x)
{
    if (isnan(x)) {
        pl_buf_append_str(b, "\"NaN\"");
    } else if (isinf(x)) {
        pl_buf_append_str(b, x > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    } else {
        /* Shortest of %.15g / %.17g that reads back to the same value. */
        char tmp[40];
        snprintf(tmp, sizeof tmp, "%.15g", x);
        if (strtod(tmp, NULL) != x)
            snprintf(tmp, sizeof tmp, "%.17g", x);
        pl_buf_append_str(b, tmp);
    }
}

static void enc_kv(jw *w, const pl_kv *kv);

static void enc_anyvalue(jw *w, const pl_value *v)
{
    w_open(w, '{');
    switch (v->type) {
    case PL_VALUE_EMPTY:
        break;
    case PL_VALUE_STRING:
        w_key(w, "stringValue");
        pl_buf_json_string(w->b, v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_BOOL:
        w_key(w, "boolValue");
        pl_buf_append_str(w->b, v->u.b ? "true" : "false");
        break;
    case PL_VALUE_INT:
        w_key(w, "intValue");
        pl_buf_printf(w->b, "\"%" PRId64 "\"", v->u.i);
        break;
    case PL_VALUE_DOUBLE:
        w_key(w, "doubleValue");
        w_double(w->b, v->u.d);
        break;
    case PL_VALUE_BYTES:
        w_key(w, "bytesValue");
        pl_buf_append_byte(w->b, '"');
        pl_otlp_base64_encode(w->b, v->u.str.ptr, v->u.str.len);
        pl_buf_append_byte(w->b, '"');
        break;
    case PL_VALUE_STRINDEX:
        w_key(w, "stringValueStrindex");
        pl_buf_printf(w->b, "%" PRId32, v->u.strindex);
        break;
    case PL_VALUE_ARRAY:
        w_key_open(w, "arrayValue", '{');
        if (v->u.array.n) {
            w_key_open(w, "values", '[');
            for (uint32_t i = 0; i < v->u.array.n; i++) {
                w_elem(w);
                enc_anyvalue(w, &v->u.array.items[i]);
            }
            w_close(w, ']');
        }
        w_close(w, '}');
        break;
    case PL_VALUE_KVLIST:
        w_key_open(w, "kvlistValue", '{');
        if (v->u.kvlist.n) {
            w_key_open(w, "values", '[');
            for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
                w_elem(w);
                enc_kv(w, &v->u.kvlist.items[i]);
            }
            w_close(w, ']');
        }
        w_close(w, '}');
        break;
    }
    w_close(w, '}');
}

static void enc_kv(jw *w, const pl_kv *kv)
{
    w_open(w, '{');
    w_key(w, "key");
    pl_buf_json_string(w->b, kv->key.ptr, kv->key.len);
    w_key(w, "value");
    enc_anyvalue(w, &kv->value);
    w_i32(w, "keyStrindex", kv->key_strindex);
    w_close(w, '}');
}

static void enc_attrs(jw *w, const char *key, const pl_attrs *a)
{
    if (!a->n)
        return;
    w_key_open(w, key, '[');
    for (uint32_t i = 0; i < a->n; i++) {
        w_elem(w);
        enc_kv(w, &a->items[i]);
    }
    w_close(w, ']');
}

static void enc_str_list(jw *w, const char *key, const pl_bytes *s, uint32_t n)
{
    if (!n)
        return;
    w_key_open(w, key, '[');
    for (uint32_t i = 0; i < n; i++) {
        w_elem(w);
        pl_buf_json_string(w->b, s[i].ptr, s[i].len);
    }
    w_close(w, ']');
}

static void enc_resource(jw *w, const pl_resource *r)
{
    w_key_open(w, "resource", '{');
    enc_attrs(w, "attributes", &r->attrs);
    w_u32(w, "droppedAttributesCount", r->dropped_attributes_count);
    if (r->n_entity_refs) {
        w_key_open(w, "entityRefs", '[');
        for (uint32_t i = 0; i < r->n_entity_refs; i++) {
            const pl_entity_ref *e = &r->entity_refs[i];
            w_elem_open(w, '{');
            w_bytes_str(w, "schemaUrl", e->schema_url);
            w_bytes_str(w, "type", e->type);
            enc_str_list(w, "idKeys", e->id_keys, e->n_id_keys);
            enc_str_list(w, "descriptionKeys", e->description_keys, e->n_description_keys);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    w_close(w, '}');
}

static void enc_scope(jw *w, const pl_scope *s)
{
    w_key_open(w, "scope", '{');
    w_bytes_str(w, "name", s->name);
    w_bytes_str(w, "version", s->version);
    enc_attrs(w, "attributes", &s->attrs);
    w_u32(w, "droppedAttributesCount", s->dropped_attributes_count);
    w_close(w, '}');
}

static void enc_span(jw *w, const pl_span *sp)
{
    w_open(w, '{');
    w_hex_id(w, "traceId", sp->trace_id, sp->trace_id_len);
    w_hex_id(w, "spanId", sp->span_id, sp->span_id_len);
    w_bytes_str(w, "traceState", sp->trace_state);
    w_hex_id(w, "parentSpanId", sp->parent_span_id, sp->parent_span_id_len);
    w_u32(w, "flags", sp->flags);
    w_bytes_str(w, "name", sp->name);
    w_i32(w, "kind", sp->kind);
    w_u64(w, "startTimeUnixNano", sp->start_time_unix_nano);
    w_u64(w, "endTimeUnixNano", sp->end_time_unix_nano);
    enc_attrs(w, "attributes", &sp->attrs);
    w_u32(w, "droppedAttributesCount", sp->dropped_attributes_count);
    if (sp->n_events) {
        w_key_open(w, "events", '[');
        for (uint32_t i = 0; i < sp->n_events; i++) {
            const pl_span_event *ev = &sp->events[i];
            w_elem_open(w, '{');
            w_u64(w, "timeUnixNano", ev->time_unix_nano);
            w_bytes_str(w, "name", ev->name);
            enc_attrs(w, "attributes", &ev->attrs);
            w_u32(w, "droppedAttributesCount", ev->dropped_attributes_count);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    w_u32(w, "droppedEventsCount", sp->dropped_events_count);
    if (sp->n_links) {
        w_key_open(w, "links", '[');
        for (uint32_t i = 0; i < sp->n_links; i++) {
            const pl_span_link *l = &sp->links[i];
            w_elem_open(w, '{');
            w_hex_id(w, "traceId", l->trace_id, l->trace_id_len);
            w_hex_id(w, "spanId", l->span_id, l->span_id_len);
            w_bytes_str(w, "traceState", l->trace_state);
            enc_attrs(w, "attributes", &l->attrs);
            w_u32(w, "droppedAttributesCount", l->dropped_attributes_count);
            w_u32(w, "flags", l->flags);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    w_u32(w, "droppedLinksCount", sp->dropped_links_count);
    if (sp->has_status || sp->status.code || sp->status.message.len) {
        w_key_open(w, "status", '{');
        w_bytes_str(w, "message", sp->status.message);
        w_i32(w, "code", sp->status.code);
        w_close(w, '}');
    }
    w_close(w, '}');
}

/* Traces and profiles share their envelope (request -> ResourceX ->
 * ScopeX -> items); one loop writes both, reading the model through offsets
 * of the traces structs (the profiles ones are the same: otlp_pb.c checks). */
typedef void (*enc_item_fn)(jw *w, const void *item);

static void enc_envelope(jw *w, const char *res_key, const char *scope_key, const char *items_key,
                         const void *resources, uint32_t n_resources, size_t item_size,
                         enc_item_fn item)
{
    if (!n_resources)
        return;
    w_key_open(w, res_key, '[');
    for (uint32_t r = 0; r < n_resources; r++) {
        const uint8_t *rs = (const uint8_t *)resources + r * sizeof(pl_resource_spans);
        const void *scopes;
        uint32_t n_scopes;
        memcpy(&scopes, rs + offsetof(pl_resource_spans, scopes), sizeof scopes);
        memcpy(&n_scopes, rs + offsetof(pl_resource_spans, n_scopes), sizeof n_scopes);
        w_elem_open(w, '{');
        if (*(const bool *)(rs + offsetof(pl_resource_spans, has_resource)))
            enc_resource(w, (const pl_resource *)(rs + offsetof(pl_resource_spans, resource)));
        if (n_scopes) {
            w_key_open(w, scope_key, '[');
            for (uint32_t s = 0; s < n_scopes; s++) {
                const uint8_t *ss = (const uint8_t *)scopes + s * sizeof(pl_scope_spans);
                const uint8_t *items;
                uint32_t n_items;
                memcpy(&items, ss + offsetof(pl_scope_spans, spans), sizeof items);
                memcpy(&n_items, ss + offsetof(pl_scope_spans, n_spans), sizeof n_items);
                w_elem_open(w, '{');
                if (*(const bool *)(ss + offsetof(pl_scope_spans, has_scope)))
                    enc_scope(w, (const pl_scope *)(ss + offsetof(pl_scope_spans, scope)));
                if (n_items) {
                    w_key_open(w, items_key, '[');
                    for (uint32_t i = 0; i < n_items; i++) {
                        w_elem(w);
                        item(w, items + i * item_size);
                    }
                    w_close(w, ']');
                }
                w_bytes_str(w, "schemaUrl",
                            *(const pl_bytes *)(ss + offsetof(pl_scope_spans, schema_url)));
                w_close(w, '}');
            }
            w_close(w, ']');
        }
        w_bytes_str(w, "schemaUrl",
                    *(const pl_bytes *)(rs + offsetof(pl_resource_spans, schema_url)));
        w_close(w, '}');
    }
    w_close(w, ']');
}

static void enc_span_item(jw *w, const void *item)
{
    enc_span(w, item);
}

bool ref_json_encode_traces(const pl_traces *t, pl_buf *out)
{
    jw ww = {out, true}, *w = &ww;
    w_open(w, '{');
    enc_envelope(w, "resourceSpans", "scopeSpans", "spans", t->resources, t->n_resources,
                 sizeof(pl_span), enc_span_item);
    w_close(w, '}');
    return pl_buf_ok(out);
}

static void enc_i32_list(jw *w, const char *key, const int32_t *v, uint32_t n)
{
    if (!n)
        return;
    w_key_open(w, key, '[');
    for (uint32_t i = 0; i < n; i++) {
        w_elem(w);
        pl_buf_printf(w->b, "%" PRId32, v[i]);
    }
    w_close(w, ']');
}

static void enc_value_type(jw *w, const char *key, const pl_vtype *vt)
{
    w_key_open(w, key, '{');
    w_i32(w, "typeStrindex", vt->type_strindex);
    w_i32(w, "unitStrindex", vt->unit_strindex);
    w_close(w, '}');
}

static void enc_profile(jw *w, const pl_profile *p)
{
    w_open(w, '{');
    if (p->has_sample_type)
        enc_value_type(w, "sampleType", &p->sample_type);
    if (p->n_samples) {
        w_key_open(w, "samples", '[');
        for (uint32_t i = 0; i < p->n_samples; i++) {
            const pl_sample *s = &p->samples[i];
            w_elem_open(w, '{');
            w_i32(w, "stackIndex", s->stack_index);
            enc_i32_list(w, "attributeIndices", s->attribute_indices, s->n_attribute_indices);
            w_i32(w, "linkIndex", s->link_index);
            if (s->n_values) {
                w_key_open(w, "values", '[');
                for (uint32_t k = 0; k < s->n_values; k++) {
                    w_elem(w);
                    pl_buf_printf(w->b, "\"%" PRId64 "\"", s->values[k]);
                }
                w_close(w, ']');
            }
            if (s->n_timestamps) {
                w_key_open(w, "timestampsUnixNano", '[');
                for (uint32_t k = 0; k < s->n_timestamps; k++) {
                    w_elem(w);
                    pl_buf_printf(w->b, "\"%" PRIu64 "\"", s->timestamps_unix_nano[k]);
                }
                w_close(w, ']');
            }
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    w_u64(w, "timeUnixNano", p->time_unix_nano);
    w_u64(w, "durationNano", p->duration_nano);
    if (p->has_period_type)
        enc_value_type(w, "periodType", &p->period_type);
    w_i64(w, "period", p->period);
    w_hex_id(w, "profileId", p->profile_id, p->profile_id_len);
    w_u32(w, "droppedAttributesCount", p->dropped_attributes_count);
    w_bytes_str(w, "originalPayloadFormat", p->original_payload_format);
    w_base64(w, "originalPayload", p->original_payload);
    enc_i32_list(w, "attributeIndices", p->attribute_indices, p->n_attribute_indices);
    w_close(w, '}');
}

static void enc_dictionary(jw *w, const pl_dictionary *d)
{
    w_key_open(w, "dictionary", '{');
    if (d->n_mappings) {
        w_key_open(w, "mappingTable", '[');
        for (uint32_t i = 0; i < d->n_mappings; i++) {
            const pl_mapping *m = &d->mappings[i];
            w_elem_open(w, '{');
            w_u64(w, "memoryStart", m->memory_start);
            w_u64(w, "memoryLimit", m->memory_limit);
            w_u64(w, "fileOffset", m->file_offset);
            w_i32(w, "filenameStrindex", m->filename_strindex);
            enc_i32_list(w, "attributeIndices", m->attribute_indices, m->n_attribute_indices);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (d->n_locations) {
        w_key_open(w, "locationTable", '[');
        for (uint32_t i = 0; i < d->n_locations; i++) {
            const pl_location *l = &d->locations[i];
            w_elem_open(w, '{');
            w_i32(w, "mappingIndex", l->mapping_index);
            w_u64(w, "address", l->address);
            if (l->n_lines) {
                w_key_open(w, "lines", '[');
                for (uint32_t k = 0; k < l->n_lines; k++) {
                    w_elem_open(w, '{');
                    w_i32(w, "functionIndex", l->lines[k].function_index);
                    w_i64(w, "line", l->lines[k].line);
                    w_i64(w, "column", l->lines[k].column);
                    w_close(w, '}');
                }
                w_close(w, ']');
            }
            enc_i32_list(w, "attributeIndices", l->attribute_indices, l->n_attribute_indices);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (d->n_functions) {
        w_key_open(w, "functionTable", '[');
        for (uint32_t i = 0; i < d->n_functions; i++) {
            const pl_function *f = &d->functions[i];
            w_elem_open(w, '{');
            w_i32(w, "nameStrindex", f->name_strindex);
            w_i32(w, "systemNameStrindex", f->system_name_strindex);
            w_i32(w, "filenameStrindex", f->filename_strindex);
            w_i64(w, "startLine", f->start_line);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (d->n_links) {
        w_key_open(w, "linkTable", '[');
        for (uint32_t i = 0; i < d->n_links; i++) {
            w_elem_open(w, '{');
            w_hex_id(w, "traceId", d->links[i].trace_id, d->links[i].trace_id_len);
            w_hex_id(w, "spanId", d->links[i].span_id, d->links[i].span_id_len);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (d->n_strings) {
        w_key_open(w, "stringTable", '[');
        for (uint32_t i = 0; i < d->n_strings; i++) {
            w_elem(w);
            pl_buf_json_string(w->b, d->strings[i].ptr, d->strings[i].len);
        }
        w_close(w, ']');
    }
    if (d->n_attributes) {
        w_key_open(w, "attributeTable", '[');
        for (uint32_t i = 0; i < d->n_attributes; i++) {
            const pl_kvu *a = &d->attributes[i];
            w_elem_open(w, '{');
            w_i32(w, "keyStrindex", a->key_strindex);
            if (a->value.type != PL_VALUE_EMPTY) {
                w_key(w, "value");
                enc_anyvalue(w, &a->value);
            }
            w_i32(w, "unitStrindex", a->unit_strindex);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (d->n_stacks) {
        w_key_open(w, "stackTable", '[');
        for (uint32_t i = 0; i < d->n_stacks; i++) {
            w_elem_open(w, '{');
            enc_i32_list(w, "locationIndices", d->stacks[i].location_indices,
                         d->stacks[i].n_location_indices);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    w_close(w, '}');
}

static void enc_profile_item(jw *w, const void *item)
{
    enc_profile(w, item);
}

bool ref_json_encode_profiles(const pl_profiles *p, pl_buf *out)
{
    jw ww = {out, true}, *w = &ww;
    w_open(w, '{');
    enc_envelope(w, "resourceProfiles", "scopeProfiles", "profiles", p->resources, p->n_resources,
                 sizeof(pl_profile), enc_profile_item);
    if (p->has_dictionary)
        enc_dictionary(w, &p->dict);
    w_close(w, '}');
    return pl_buf_ok(out);
}
