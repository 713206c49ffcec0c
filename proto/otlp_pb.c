/*
 * otlp_pb.c: see otlp_pb.h. Profile index validation, the encoder,
 * pass-through checks for logs and metrics, and export responses; decoding
 * into the model is otlp_pb_dec.c.
 *
 * The encoder writes each length-delimited field with a one-byte length
 * placeholder and, once the content is written and its length known, moves
 * the content up when the length needs more bytes. Only messages longer than
 * 127 bytes move, each once, so the work stays linear in the output size
 * (times the nesting depth) instead of re-encoding children to size them.
 */
#include "otlp_pb.h"

#include <stdarg.h>
#include <stdio.h>

#include "otlp_pb_internal.h"

/* The export responses of all signals share one layout; the encoder relies on it. */
_Static_assert(CPR(ExportProfilesServiceResponse, partial_success) ==
                   CTR(ExportTraceServiceResponse, partial_success),
               "response layout");
_Static_assert(CLG(ExportLogsPartialSuccess, rejected_log_records) ==
                   CTR(ExportTracePartialSuccess, rejected_spans),
               "response layout");
_Static_assert(CMT(ExportMetricsPartialSuccess, error_message) ==
                   CTR(ExportTracePartialSuccess, error_message),
               "response layout");

/* Readers accept (NULL, 0); pointer arithmetic on NULL is undefined. */
static const uint8_t empty_input[1];

/* ---- profiles index validation ----------------------------------------- */

typedef struct vctx {
    const pl_dictionary *dict;
    pl_err *err;
} vctx;

/* Index 0 ("not set") is accepted even when a table is empty. */
static inline bool in_range(int32_t i, uint32_t n)
{
    return i == 0 || (i > 0 && (uint32_t)i < n);
}

#define VCHECK(idx, n, table, ...)                                                                 \
    do {                                                                                           \
        if (!in_range((idx), (n))) {                                                               \
            char where_[256];                                                                      \
            snprintf(where_, sizeof where_, __VA_ARGS__);                                          \
            return pl_errf(v->err, PL_ERR_INVALID,                                                 \
                           "%s: index %d out of range (%s has %u entries)", where_, (int)(idx),    \
                           table, (unsigned)(n));                                                  \
        }                                                                                          \
    } while (0)

static pl_status validate_value(const vctx *v, const pl_value *val, const char *where, int depth)
{
    if (depth > PL_OTLP_MAX_DEPTH)
        return pl_errf(v->err, PL_ERR_INVALID, "%s: values nested too deep", where);
    switch (val->type) {
    case PL_VALUE_STRINDEX:
        VCHECK(val->u.strindex, v->dict->n_strings, "string_table", "%s.string_value_strindex",
               where);
        break;
    case PL_VALUE_ARRAY:
        for (uint32_t i = 0; i < val->u.array.n; i++) {
            pl_status st = validate_value(v, &val->u.array.items[i], where, depth + 1);
            if (st)
                return st;
        }
        break;
    case PL_VALUE_KVLIST:
        for (uint32_t i = 0; i < val->u.kvlist.n; i++) {
            VCHECK(val->u.kvlist.items[i].key_strindex, v->dict->n_strings, "string_table",
                   "%s.kvlist_value.values[%u].key_strindex", where, i);
            pl_status st = validate_value(v, &val->u.kvlist.items[i].value, where, depth + 1);
            if (st)
                return st;
        }
        break;
    default:
        break;
    }
    return PL_OK;
}

static pl_status validate_attrs(const vctx *v, const pl_attrs *a, const char *where)
{
    for (uint32_t i = 0; i < a->n; i++) {
        VCHECK(a->items[i].key_strindex, v->dict->n_strings, "string_table",
               "%s.attributes[%u].key_strindex", where, i);
        char w[200];
        snprintf(w, sizeof w, "%s.attributes[%u].value", where, i);
        pl_status st = validate_value(v, &a->items[i].value, w, 0);
        if (st)
            return st;
    }
    return PL_OK;
}

static pl_status validate_indices(const vctx *v, const int32_t *idx, uint32_t n, uint32_t table_n,
                                  const char *table, const char *where)
{
    for (uint32_t i = 0; i < n; i++)
        VCHECK(idx[i], table_n, table, "%s[%u]", where, i);
    return PL_OK;
}

pl_status pl_otlp_validate_profiles(const pl_profiles *ps, pl_err *err)
{
    const pl_dictionary *dict = &ps->dict;
    vctx vc = {dict, err}, *v = &vc;
    pl_status st;
    char w[256];
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        const pl_resource_profiles *rp = &ps->resources[r];
        snprintf(w, sizeof w, "resource_profiles[%u].resource", r);
        if ((st = validate_attrs(v, &rp->resource.attrs, w)))
            return st;
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            const pl_scope_profiles *sp = &rp->scopes[s];
            snprintf(w, sizeof w, "resource_profiles[%u].scope_profiles[%u].scope", r, s);
            if ((st = validate_attrs(v, &sp->scope.attrs, w)))
                return st;
            for (uint32_t k = 0; k < sp->n_profiles; k++) {
                const pl_profile *pr = &sp->profiles[k];
                char pw[128];
                snprintf(pw, sizeof pw, "resource_profiles[%u].scope_profiles[%u].profiles[%u]", r,
                         s, k);
                VCHECK(pr->sample_type.type_strindex, dict->n_strings, "string_table",
                       "%s.sample_type.type_strindex", pw);
                VCHECK(pr->sample_type.unit_strindex, dict->n_strings, "string_table",
                       "%s.sample_type.unit_strindex", pw);
                VCHECK(pr->period_type.type_strindex, dict->n_strings, "string_table",
                       "%s.period_type.type_strindex", pw);
                VCHECK(pr->period_type.unit_strindex, dict->n_strings, "string_table",
                       "%s.period_type.unit_strindex", pw);
                snprintf(w, sizeof w, "%s.attribute_indices", pw);
                if ((st = validate_indices(v, pr->attribute_indices, pr->n_attribute_indices,
                                           dict->n_attributes, "attribute_table", w)))
                    return st;
                for (uint32_t i = 0; i < pr->n_samples; i++) {
                    const pl_sample *sm = &pr->samples[i];
                    VCHECK(sm->stack_index, dict->n_stacks, "stack_table",
                           "%s.samples[%u].stack_index", pw, i);
                    VCHECK(sm->link_index, dict->n_links, "link_table", "%s.samples[%u].link_index",
                           pw, i);
                    snprintf(w, sizeof w, "%s.samples[%u].attribute_indices", pw, i);
                    if ((st = validate_indices(v, sm->attribute_indices, sm->n_attribute_indices,
                                               dict->n_attributes, "attribute_table", w)))
                        return st;
                }
            }
        }
    }
    for (uint32_t i = 0; i < dict->n_mappings; i++) {
        const pl_mapping *m = &dict->mappings[i];
        VCHECK(m->filename_strindex, dict->n_strings, "string_table",
               "dictionary.mapping_table[%u].filename_strindex", i);
        snprintf(w, sizeof w, "dictionary.mapping_table[%u].attribute_indices", i);
        if ((st = validate_indices(v, m->attribute_indices, m->n_attribute_indices,
                                   dict->n_attributes, "attribute_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_locations; i++) {
        const pl_location *l = &dict->locations[i];
        VCHECK(l->mapping_index, dict->n_mappings, "mapping_table",
               "dictionary.location_table[%u].mapping_index", i);
        for (uint32_t k = 0; k < l->n_lines; k++)
            VCHECK(l->lines[k].function_index, dict->n_functions, "function_table",
                   "dictionary.location_table[%u].lines[%u].function_index", i, k);
        snprintf(w, sizeof w, "dictionary.location_table[%u].attribute_indices", i);
        if ((st = validate_indices(v, l->attribute_indices, l->n_attribute_indices,
                                   dict->n_attributes, "attribute_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_functions; i++) {
        const pl_function *f = &dict->functions[i];
        VCHECK(f->name_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].name_strindex", i);
        VCHECK(f->system_name_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].system_name_strindex", i);
        VCHECK(f->filename_strindex, dict->n_strings, "string_table",
               "dictionary.function_table[%u].filename_strindex", i);
    }
    for (uint32_t i = 0; i < dict->n_attributes; i++) {
        const pl_kvu *a = &dict->attributes[i];
        VCHECK(a->key_strindex, dict->n_strings, "string_table",
               "dictionary.attribute_table[%u].key_strindex", i);
        VCHECK(a->unit_strindex, dict->n_strings, "string_table",
               "dictionary.attribute_table[%u].unit_strindex", i);
        snprintf(w, sizeof w, "dictionary.attribute_table[%u].value", i);
        if ((st = validate_value(v, &a->value, w, 0)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_stacks; i++) {
        snprintf(w, sizeof w, "dictionary.stack_table[%u].location_indices", i);
        if ((st = validate_indices(v, dict->stacks[i].location_indices,
                                   dict->stacks[i].n_location_indices, dict->n_locations,
                                   "location_table", w)))
            return st;
    }
    for (uint32_t i = 0; i < dict->n_links; i++) {
        const pl_link *l = &dict->links[i];
        if ((l->trace_id_len != 0 && l->trace_id_len != 16) ||
            (l->span_id_len != 0 && l->span_id_len != 8))
            return pl_errf(err, PL_ERR_INVALID, "dictionary.link_table[%u]: bad id length", i);
    }
    return PL_OK;
}

/* ---- encoder ------------------------------------------------------------ */

static inline bool w_room(pl_buf *b, size_t n)
{
    return !b->failed && (b->cap - b->len >= n || pl_buf_reserve(b, n));
}

static inline void w_varint(pl_buf *b, uint64_t v)
{
    if (!w_room(b, 10))
        return;
    uint8_t *p = b->data + b->len;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    b->len = (size_t)(p - b->data);
}

static inline void w_tag(pl_buf *b, uint32_t num, int wt)
{
    w_varint(b, (uint64_t)num << 3 | (uint64_t)wt);
}

static inline void w_raw(pl_buf *b, const void *p, size_t n)
{
    if (n && w_room(b, n)) {
        memcpy(b->data + b->len, p, n);
        b->len += n;
    }
}

static inline void w_len_field(pl_buf *b, uint32_t num, const void *p, size_t n)
{
    w_tag(b, num, WT_LEN);
    w_varint(b, n);
    w_raw(b, p, n);
}

static inline void w_bytes_opt(pl_buf *b, uint32_t num, pl_bytes s)
{
    if (s.len)
        w_len_field(b, num, s.ptr, s.len);
}

static inline void w_uvarint_opt(pl_buf *b, uint32_t num, uint64_t v)
{
    if (v) {
        w_tag(b, num, WT_VARINT);
        w_varint(b, v);
    }
}

/* int32 is sign-extended to 64 bits on the wire (no zigzag). */
static inline void w_i32_opt(pl_buf *b, uint32_t num, int32_t v)
{
    w_uvarint_opt(b, num, (uint64_t)(int64_t)v);
}

static inline void w_fixed64_opt(pl_buf *b, uint32_t num, uint64_t v)
{
    if (v && w_room(b, 15)) {
        w_tag(b, num, WT_I64);
        uint8_t *p = b->data + b->len;
        for (int i = 0; i < 8; i++)
            p[i] = (uint8_t)(v >> (8 * i));
        b->len += 8;
    }
}

static inline void w_fixed32_opt(pl_buf *b, uint32_t num, uint32_t v)
{
    if (v && w_room(b, 10)) {
        w_tag(b, num, WT_I32);
        uint8_t *p = b->data + b->len;
        for (int i = 0; i < 4; i++)
            p[i] = (uint8_t)(v >> (8 * i));
        b->len += 4;
    }
}

/* Starts a length-delimited field with a one-byte length placeholder;
 * returns the offset where its content starts. */
static inline size_t w_begin(pl_buf *b, uint32_t num)
{
    w_tag(b, num, WT_LEN);
    if (w_room(b, 1))
        b->data[b->len++] = 0;
    return b->len;
}

static inline void w_end(pl_buf *b, size_t start)
{
    if (b->failed)
        return;
    size_t len = b->len - start;
    if (len < 0x80) {
        b->data[start - 1] = (uint8_t)len;
        return;
    }
    size_t extra = 0;
    for (size_t v = len >> 7; v; v >>= 7)
        extra++;
    if (!w_room(b, extra))
        return;
    memmove(b->data + start + extra, b->data + start, len);
    uint8_t *p = b->data + start - 1;
    size_t v = len;
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p = (uint8_t)v;
    b->len += extra;
}

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

bool pl_otlp_encode_traces(const pl_traces *t, pl_buf *b)
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

bool pl_otlp_encode_profiles(const pl_profiles *ps, pl_buf *b)
{
    enc_envelope(b, ps->resources, ps->n_resources, sizeof(pl_profile), enc_profile_item);
    if (ps->has_dictionary)
        enc_dictionary(b, CPR(ExportProfilesServiceRequest, dictionary), &ps->dict);
    return pl_buf_ok(b);
}

/* ---- logs / metrics pass-through ---------------------------------------- */

/* Walks the LEN occurrences of field `num` in [p, end) and calls fn on each. */
typedef int (*walk_fn)(dec *d, const uint8_t *p, const uint8_t *end, size_t *count);

static int walk_children(dec *d, const uint8_t *p, const uint8_t *end, uint32_t num,
                         const char *name, walk_fn fn, size_t *count)
{
    uint32_t idx = 0;
    while (p < end) {
        field f;
        if (pl_pbw_next_field(d, &p, end, &f))
            return -1;
        if (f.num != num)
            continue;
        EXPECT(&f, WT_LEN, name);
        path_push(d, name, idx++);
        int rc = fn(d, f.ptr, f.ptr + f.len, count);
        path_pop(d);
        if (rc)
            return -1;
    }
    return 0;
}

static int walk_count_only(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    (*count)++;
    /* Check the record's own framing too. */
    while (p < end) {
        field f;
        if (pl_pbw_next_field(d, &p, end, &f))
            return -1;
    }
    return 0;
}

static int walk_scope_logs(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, LG(ScopeLogs, log_records), "log_records", walk_count_only,
                         count);
}

static int walk_resource_logs(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, LG(ResourceLogs, scope_logs), "scope_logs", walk_scope_logs,
                         count);
}

static int walk_metric(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    while (p < end) {
        field f;
        if (pl_pbw_next_field(d, &p, end, &f))
            return -1;
        const char *name = NULL;
        switch (f.num) {
        case MT(Metric, gauge):
            name = "gauge";
            break;
        case MT(Metric, sum):
            name = "sum";
            break;
        case MT(Metric, histogram):
            name = "histogram";
            break;
        case MT(Metric, exponential_histogram):
            name = "exponential_histogram";
            break;
        case MT(Metric, summary):
            name = "summary";
            break;
        default:
            continue;
        }
        _Static_assert(MT(Gauge, data_points) == MT(Sum, data_points) &&
                           MT(Sum, data_points) == MT(Histogram, data_points) &&
                           MT(Histogram, data_points) == MT(ExponentialHistogram, data_points) &&
                           MT(ExponentialHistogram, data_points) == MT(Summary, data_points),
                       "data_points share one field number");
        EXPECT(&f, WT_LEN, name);
        path_push(d, name, -1);
        int rc = walk_children(d, f.ptr, f.ptr + f.len, MT(Gauge, data_points), "data_points",
                               walk_count_only, count);
        path_pop(d);
        if (rc)
            return -1;
    }
    return 0;
}

static int walk_scope_metrics(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, MT(ScopeMetrics, metrics), "metrics", walk_metric, count);
}

static int walk_resource_metrics(dec *d, const uint8_t *p, const uint8_t *end, size_t *count)
{
    return walk_children(d, p, end, MT(ResourceMetrics, scope_metrics), "scope_metrics",
                         walk_scope_metrics, count);
}

static pl_status count_request(const uint8_t *buf, size_t len, uint32_t num, const char *name,
                               walk_fn fn, size_t *count, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID};
    size_t n = 0;
    if (err)
        err->msg[0] = '\0';
    if (walk_children(&dd, buf, buf + len, num, name, fn, &n))
        return dd.status;
    if (count)
        *count = n;
    return PL_OK;
}

pl_status pl_otlp_count_logs(const uint8_t *buf, size_t len, size_t *count, pl_err *err)
{
    return count_request(buf, len, CLG(ExportLogsServiceRequest, resource_logs), "resource_logs",
                         walk_resource_logs, count, err);
}

pl_status pl_otlp_count_metrics(const uint8_t *buf, size_t len, size_t *count, pl_err *err)
{
    return count_request(buf, len, CMT(ExportMetricsServiceRequest, resource_metrics),
                         "resource_metrics", walk_resource_metrics, count, err);
}

/* ---- responses and google.rpc.Status ------------------------------------ */

bool pl_otlp_encode_export_response(pl_buf *b, int64_t rejected, const char *message)
{
    size_t s = w_begin(b, CTR(ExportTraceServiceResponse, partial_success));
    w_uvarint_opt(b, CTR(ExportTracePartialSuccess, rejected_spans), (uint64_t)rejected);
    if (message && *message)
        w_len_field(b, CTR(ExportTracePartialSuccess, error_message), message, strlen(message));
    w_end(b, s);
    return pl_buf_ok(b);
}

bool pl_otlp_encode_export_response_json(pl_buf *b, pl_signal signal, int64_t rejected,
                                         const char *message)
{
    static const char *const keys[PL_SIGNAL_COUNT] = {"rejectedSpans", "rejectedProfiles",
                                                      "rejectedLogRecords", "rejectedDataPoints"};
    pl_buf_append_str(b, "{\"partialSuccess\":{");
    bool comma = false;
    if (rejected) {
        pl_buf_printf(b, "\"%s\":\"%" PRId64 "\"",
                      keys[(unsigned)signal < PL_SIGNAL_COUNT ? signal : 0], rejected);
        comma = true;
    }
    if (message && *message) {
        pl_buf_append_str(b, comma ? ",\"errorMessage\":" : "\"errorMessage\":");
        pl_buf_json_string(b, message, strlen(message));
    }
    pl_buf_append_str(b, "}}");
    return pl_buf_ok(b);
}

pl_status pl_otlp_decode_export_response(const uint8_t *buf, size_t len, int64_t *rejected,
                                         pl_bytes *message, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID}, *d = &dd;
    if (rejected)
        *rejected = 0;
    if (message)
        *message = (pl_bytes){NULL, 0};
    const uint8_t *p = buf, *end = buf + len;
    while (p < end) {
        field f;
        if (pl_pbw_next_field(d, &p, end, &f))
            return d->status;
        if (f.num != CTR(ExportTraceServiceResponse, partial_success))
            continue;
        if (f.wt != WT_LEN) {
            pl_pbw_wrong_wt(d, "partial_success", &f, WT_LEN);
            return d->status;
        }
        const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
        path_push(d, "partial_success", -1);
        while (q < qend) {
            field g = {0};
            if (pl_pbw_next_field(d, &q, qend, &g))
                return d->status;
            if (g.num == CTR(ExportTracePartialSuccess, rejected_spans)) {
                if (g.wt != WT_VARINT) {
                    pl_pbw_wrong_wt(d, "rejected", &g, WT_VARINT);
                    return d->status;
                }
                if (rejected)
                    *rejected = (int64_t)g.v;
            } else if (g.num == CTR(ExportTracePartialSuccess, error_message)) {
                pl_bytes m;
                if (get_string(d, &g, "error_message", &m))
                    return d->status;
                if (message)
                    *message = m;
            }
        }
        path_pop(d);
    }
    return PL_OK;
}

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo"

bool pl_rpc_status_encode(pl_buf *b, int32_t code, const char *message, int64_t retry_delay_ns)
{
    w_i32_opt(b, google_rpc_Status_code_tag, code);
    if (message && *message)
        w_len_field(b, google_rpc_Status_message_tag, message, strlen(message));
    if (retry_delay_ns >= 0) {
        size_t any = w_begin(b, google_rpc_Status_details_tag);
        w_len_field(b, google_protobuf_Any_type_url_tag, RETRY_INFO_URL,
                    sizeof(RETRY_INFO_URL) - 1);
        size_t val = w_begin(b, google_protobuf_Any_value_tag);
        size_t dur = w_begin(b, google_rpc_RetryInfo_retry_delay_tag);
        w_uvarint_opt(b, google_protobuf_Duration_seconds_tag,
                      (uint64_t)(retry_delay_ns / 1000000000));
        w_i32_opt(b, google_protobuf_Duration_nanos_tag, (int32_t)(retry_delay_ns % 1000000000));
        w_end(b, dur);
        w_end(b, val);
        w_end(b, any);
    }
    return pl_buf_ok(b);
}

bool pl_rpc_status_encode_json(pl_buf *b, int32_t code, const char *message, int64_t retry_delay_ns)
{
    pl_buf_printf(b, "{\"code\":%d,\"message\":", (int)code);
    pl_buf_json_string(b, message ? message : "", message ? strlen(message) : 0);
    if (retry_delay_ns >= 0) {
        int64_t sec = retry_delay_ns / 1000000000, ns = retry_delay_ns % 1000000000;
        pl_buf_append_str(b, ",\"details\":[{\"@type\":\"" RETRY_INFO_URL "\",\"retryDelay\":\"");
        if (ns == 0)
            pl_buf_printf(b, "%" PRId64 "s", sec);
        else if (ns % 1000000 == 0)
            pl_buf_printf(b, "%" PRId64 ".%03ds", sec, (int)(ns / 1000000));
        else if (ns % 1000 == 0)
            pl_buf_printf(b, "%" PRId64 ".%06ds", sec, (int)(ns / 1000));
        else
            pl_buf_printf(b, "%" PRId64 ".%09ds", sec, (int)ns);
        pl_buf_append_str(b, "\"}]");
    }
    pl_buf_append_byte(b, '}');
    return pl_buf_ok(b);
}

static int parse_retry_info(dec *d, const uint8_t *p, const uint8_t *end, int64_t *delay)
{
    int64_t sec = 0, nanos = 0;
    while (p < end) {
        field f;
        if (pl_pbw_next_field(d, &p, end, &f))
            return -1;
        if (f.num != google_rpc_RetryInfo_retry_delay_tag)
            continue;
        EXPECT(&f, WT_LEN, "retry_delay");
        const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
        while (q < qend) {
            field g = {0};
            if (pl_pbw_next_field(d, &q, qend, &g))
                return -1;
            if (g.num == google_protobuf_Duration_seconds_tag)
                GET_I64(&g, "seconds", sec);
            else if (g.num == google_protobuf_Duration_nanos_tag)
                GET_I32(&g, "nanos", nanos);
        }
    }
    if (sec < 0 || sec > INT64_MAX / 1000000000 - 1)
        sec = sec < 0 ? 0 : INT64_MAX / 1000000000 - 1;
    if (nanos < 0)
        nanos = 0;
    *delay = sec * 1000000000 + nanos;
    return 0;
}

pl_status pl_rpc_status_decode(const uint8_t *buf, size_t len, int32_t *code, pl_bytes *message,
                               int64_t *retry_delay_ns, pl_err *err)
{
    if (!buf)
        buf = empty_input, len = 0;
    dec dd = {.err = err, .base = buf, .status = PL_ERR_INVALID}, *d = &dd;
    int32_t c = 0;
    pl_bytes msg = {NULL, 0};
    int64_t delay = -1;
    const uint8_t *p = buf, *end = buf + len;
    while (p < end) {
        field f;
        if (pl_pbw_next_field(d, &p, end, &f))
            return d->status;
        if (f.num == google_rpc_Status_code_tag) {
            if (f.wt != WT_VARINT) {
                pl_pbw_wrong_wt(d, "code", &f, WT_VARINT);
                return d->status;
            }
            c = (int32_t)(uint32_t)f.v;
        } else if (f.num == google_rpc_Status_message_tag) {
            if (get_bytes(d, &f, "message", &msg))
                return d->status;
        } else if (f.num == google_rpc_Status_details_tag) {
            if (f.wt != WT_LEN) {
                pl_pbw_wrong_wt(d, "details", &f, WT_LEN);
                return d->status;
            }
            pl_bytes url = {NULL, 0}, value = {empty_input, 0};
            const uint8_t *q = f.ptr, *qend = f.ptr + f.len;
            while (q < qend) {
                field g = {0};
                if (pl_pbw_next_field(d, &q, qend, &g))
                    return d->status;
                if (g.num == google_protobuf_Any_type_url_tag && g.wt == WT_LEN)
                    url = (pl_bytes){g.ptr, (uint32_t)g.len};
                else if (g.num == google_protobuf_Any_value_tag && g.wt == WT_LEN)
                    value = (pl_bytes){g.ptr, (uint32_t)g.len};
            }
            if (pl_bytes_eq_cstr(url, RETRY_INFO_URL) &&
                parse_retry_info(d, value.ptr, value.ptr + value.len, &delay))
                return d->status;
        }
    }
    if (code)
        *code = c;
    if (message)
        *message = msg;
    if (retry_delay_ns)
        *retry_delay_ns = delay;
    return PL_OK;
}
