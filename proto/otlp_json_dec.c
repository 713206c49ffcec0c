/*
 * otlp_json_dec.c: the OTLP/JSON decoder (see otlp_json.h for the mapping).
 *
 * One walker, driven by a table per message, reads the request straight off
 * the streaming reader (json_reader.h): no document tree is built, and
 * strings without escapes point into the request body, as with protobuf.
 * Each table row names a JSON member (lowerCamelCase; snake_case matches
 * too, compared after folding), the kind of value it holds and where it goes
 * in the model struct. Only AnyValue, a oneof, is read by hand.
 *
 * Repeated fields: JSON does not say how many elements follow, so elements
 * are decoded one at a time into a scratch stack (a malloc'd buffer reused
 * by the whole request) and copied into the batch arena, at their final
 * size, when the array closes. Nested arrays use the stack above their
 * parent's elements, so it only grows with the widest open path.
 *
 * Every element, and every byte decoded into the arena, is charged against
 * the request's budget (pl_otlp_decode_ex): an array of a million empty
 * objects is refused with PL_ERR_TOO_LARGE once its charges pass the budget,
 * before the memory is spent.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_reader.h"
#include "otlp_json_internal.h"
#include "otlp_json.h"
#include "otlp_pb.h"

/* ---- message tables ----------------------------------------------------- */

typedef enum fkind {
    FK_STR, /* pl_bytes, UTF-8 */
    FK_B64, /* pl_bytes, base64 in JSON */
    FK_ID,  /* uint8_t[len] + uint8_t length, hex in JSON */
    FK_U32,
    FK_I32,
    FK_U64,
    FK_I64,
    FK_ENUM, /* int32_t; names accepted */
    FK_MSG,  /* singular sub-message; aux = its bool has_ flag */
    FK_LIST, /* repeated sub-message: pointer at off, uint32_t count at aux, cap at aux2 */
    FK_I32S, /* repeated scalars, same layout as FK_LIST */
    FK_I64S,
    FK_U64S,
    FK_STRS,
    FK_ANY, /* pl_value */
} fkind;

#define NO_OFF 0xffffu

typedef struct jmsg jmsg;
typedef struct jfield {
    const char *name; /* lowerCamelCase, as written */
    uint8_t name_len;
    uint8_t kind;
    uint8_t arg;     /* FK_ID: id length; FK_ENUM: number of names */
    uint16_t off;    /* the member */
    uint16_t aux;    /* FK_ID: length byte; FK_MSG: has_ flag; lists: count */
    uint16_t aux2;   /* lists: capacity */
    const void *sub; /* FK_MSG / FK_LIST: const jmsg *; FK_ENUM: names */
} jfield;

struct jmsg {
    uint16_t size;
    uint16_t n_fields;
    const jfield *fields;
};

#define F(T, name, kind, m)                                                                        \
    {                                                                                              \
        name, sizeof(name) - 1, kind, 0, offsetof(T, m), NO_OFF, NO_OFF, NULL                      \
    }
#define F_ID(T, name, m, len)                                                                      \
    {                                                                                              \
        name, sizeof(name) - 1, FK_ID, len, offsetof(T, m), offsetof(T, m##_len), NO_OFF, NULL     \
    }
#define F_ENUM(T, name, m, names)                                                                  \
    {                                                                                              \
        name, sizeof(name) - 1, FK_ENUM, sizeof(names) / sizeof(names[0]), offsetof(T, m), NO_OFF, \
            NO_OFF, names                                                                          \
    }
#define F_MSG(T, name, m, has, sub)                                                                \
    {                                                                                              \
        name, sizeof(name) - 1, FK_MSG, 0, offsetof(T, m), has, NO_OFF, &sub                       \
    }
#define F_LIST(T, name, kind, m, n, sub)                                                           \
    {                                                                                              \
        name, sizeof(name) - 1, kind, 0, offsetof(T, m), offsetof(T, n), NO_OFF, sub               \
    }
#define F_TABLE(T, name, m, sub)                                                                   \
    {                                                                                              \
        name, sizeof(name) - 1, FK_LIST, 0, offsetof(T, m), offsetof(T, n_##m),                    \
            offsetof(T, cap_##m), &sub                                                             \
    }
#define F_ATTRS(T, name, m)                                                                        \
    {                                                                                              \
        name, sizeof(name) - 1, FK_LIST, 0, offsetof(T, m.items), offsetof(T, m.n),                \
            offsetof(T, m.cap), &m_keyvalue                                                        \
    }
#define MSG(T, fields)                                                                             \
    {                                                                                              \
        sizeof(T), sizeof(fields) / sizeof(fields[0]), fields                                      \
    }

static const jmsg m_keyvalue;

static const jfield f_keyvalue[] = {
    F(pl_kv, "key", FK_STR, key),
    F(pl_kv, "value", FK_ANY, value),
    F(pl_kv, "keyStrindex", FK_I32, key_strindex),
};
static const jmsg m_keyvalue = MSG(pl_kv, f_keyvalue);

static const jfield f_entity_ref[] = {
    F(pl_entity_ref, "schemaUrl", FK_STR, schema_url),
    F(pl_entity_ref, "type", FK_STR, type),
    F_LIST(pl_entity_ref, "idKeys", FK_STRS, id_keys, n_id_keys, NULL),
    F_LIST(pl_entity_ref, "descriptionKeys", FK_STRS, description_keys, n_description_keys, NULL),
};
static const jmsg m_entity_ref = MSG(pl_entity_ref, f_entity_ref);

static const jfield f_resource[] = {
    F_ATTRS(pl_resource, "attributes", attrs),
    F(pl_resource, "droppedAttributesCount", FK_U32, dropped_attributes_count),
    F_LIST(pl_resource, "entityRefs", FK_LIST, entity_refs, n_entity_refs, &m_entity_ref),
};
static const jmsg m_resource = MSG(pl_resource, f_resource);

static const jfield f_scope[] = {
    F(pl_scope, "name", FK_STR, name),
    F(pl_scope, "version", FK_STR, version),
    F_ATTRS(pl_scope, "attributes", attrs),
    F(pl_scope, "droppedAttributesCount", FK_U32, dropped_attributes_count),
};
static const jmsg m_scope = MSG(pl_scope, f_scope);

/* ---- trace.v1 */

static const char *const span_kind_names[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
                                              "SPAN_KIND_SERVER",      "SPAN_KIND_CLIENT",
                                              "SPAN_KIND_PRODUCER",    "SPAN_KIND_CONSUMER"};
static const char *const status_code_names[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK",
                                                "STATUS_CODE_ERROR"};

typedef struct span_status {
    pl_bytes message;
    int32_t code;
} span_status;
_Static_assert(sizeof(span_status) == sizeof(((pl_span *)0)->status), "status layout");

static const jfield f_status[] = {
    F(span_status, "message", FK_STR, message),
    F_ENUM(span_status, "code", code, status_code_names),
};
static const jmsg m_status = MSG(span_status, f_status);

static const jfield f_event[] = {
    F(pl_span_event, "timeUnixNano", FK_U64, time_unix_nano),
    F(pl_span_event, "name", FK_STR, name),
    F_ATTRS(pl_span_event, "attributes", attrs),
    F(pl_span_event, "droppedAttributesCount", FK_U32, dropped_attributes_count),
};
static const jmsg m_event = MSG(pl_span_event, f_event);

static const jfield f_span_link[] = {
    F_ID(pl_span_link, "traceId", trace_id, 16),
    F_ID(pl_span_link, "spanId", span_id, 8),
    F(pl_span_link, "traceState", FK_STR, trace_state),
    F_ATTRS(pl_span_link, "attributes", attrs),
    F(pl_span_link, "droppedAttributesCount", FK_U32, dropped_attributes_count),
    F(pl_span_link, "flags", FK_U32, flags),
};
static const jmsg m_span_link = MSG(pl_span_link, f_span_link);

/* Ordered as senders write them, so the first probe usually hits. */
static const jfield f_span[] = {
    F_ID(pl_span, "traceId", trace_id, 16),
    F_ID(pl_span, "spanId", span_id, 8),
    F_ID(pl_span, "parentSpanId", parent_span_id, 8),
    F(pl_span, "traceState", FK_STR, trace_state),
    F(pl_span, "flags", FK_U32, flags),
    F(pl_span, "name", FK_STR, name),
    F_ENUM(pl_span, "kind", kind, span_kind_names),
    F(pl_span, "startTimeUnixNano", FK_U64, start_time_unix_nano),
    F(pl_span, "endTimeUnixNano", FK_U64, end_time_unix_nano),
    F_ATTRS(pl_span, "attributes", attrs),
    F(pl_span, "droppedAttributesCount", FK_U32, dropped_attributes_count),
    F_LIST(pl_span, "events", FK_LIST, events, n_events, &m_event),
    F(pl_span, "droppedEventsCount", FK_U32, dropped_events_count),
    F_LIST(pl_span, "links", FK_LIST, links, n_links, &m_span_link),
    F(pl_span, "droppedLinksCount", FK_U32, dropped_links_count),
    F_MSG(pl_span, "status", status, offsetof(pl_span, has_status), m_status),
};
static const jmsg m_span = MSG(pl_span, f_span);

static const jfield f_scope_spans[] = {
    F_MSG(pl_scope_spans, "scope", scope, offsetof(pl_scope_spans, has_scope), m_scope),
    F_LIST(pl_scope_spans, "spans", FK_LIST, spans, n_spans, &m_span),
    F(pl_scope_spans, "schemaUrl", FK_STR, schema_url),
};
static const jmsg m_scope_spans = MSG(pl_scope_spans, f_scope_spans);

static const jfield f_resource_spans[] = {
    F_MSG(pl_resource_spans, "resource", resource, offsetof(pl_resource_spans, has_resource),
          m_resource),
    F_LIST(pl_resource_spans, "scopeSpans", FK_LIST, scopes, n_scopes, &m_scope_spans),
    F(pl_resource_spans, "schemaUrl", FK_STR, schema_url),
};
static const jmsg m_resource_spans = MSG(pl_resource_spans, f_resource_spans);

static const jfield f_traces[] = {
    F_LIST(pl_traces, "resourceSpans", FK_LIST, resources, n_resources, &m_resource_spans),
};
static const jmsg m_traces = MSG(pl_traces, f_traces);

/* ---- profiles.v1development */

static const jfield f_value_type[] = {
    F(pl_vtype, "typeStrindex", FK_I32, type_strindex),
    F(pl_vtype, "unitStrindex", FK_I32, unit_strindex),
};
static const jmsg m_value_type = MSG(pl_vtype, f_value_type);

static const jfield f_sample[] = {
    F(pl_sample, "stackIndex", FK_I32, stack_index),
    F_LIST(pl_sample, "attributeIndices", FK_I32S, attribute_indices, n_attribute_indices, NULL),
    F(pl_sample, "linkIndex", FK_I32, link_index),
    F_LIST(pl_sample, "values", FK_I64S, values, n_values, NULL),
    F_LIST(pl_sample, "timestampsUnixNano", FK_U64S, timestamps_unix_nano, n_timestamps, NULL),
};
static const jmsg m_sample = MSG(pl_sample, f_sample);

static const jfield f_profile[] = {
    F_MSG(pl_profile, "sampleType", sample_type, offsetof(pl_profile, has_sample_type),
          m_value_type),
    F_LIST(pl_profile, "samples", FK_LIST, samples, n_samples, &m_sample),
    F(pl_profile, "timeUnixNano", FK_U64, time_unix_nano),
    F(pl_profile, "durationNano", FK_U64, duration_nano),
    F_MSG(pl_profile, "periodType", period_type, offsetof(pl_profile, has_period_type),
          m_value_type),
    F(pl_profile, "period", FK_I64, period),
    F_ID(pl_profile, "profileId", profile_id, 16),
    F(pl_profile, "droppedAttributesCount", FK_U32, dropped_attributes_count),
    F(pl_profile, "originalPayloadFormat", FK_STR, original_payload_format),
    F(pl_profile, "originalPayload", FK_B64, original_payload),
    F_LIST(pl_profile, "attributeIndices", FK_I32S, attribute_indices, n_attribute_indices, NULL),
};
static const jmsg m_profile = MSG(pl_profile, f_profile);

static const jfield f_scope_profiles[] = {
    F_MSG(pl_scope_profiles, "scope", scope, offsetof(pl_scope_profiles, has_scope), m_scope),
    F_LIST(pl_scope_profiles, "profiles", FK_LIST, profiles, n_profiles, &m_profile),
    F(pl_scope_profiles, "schemaUrl", FK_STR, schema_url),
};
static const jmsg m_scope_profiles = MSG(pl_scope_profiles, f_scope_profiles);

static const jfield f_resource_profiles[] = {
    F_MSG(pl_resource_profiles, "resource", resource, offsetof(pl_resource_profiles, has_resource),
          m_resource),
    F_LIST(pl_resource_profiles, "scopeProfiles", FK_LIST, scopes, n_scopes, &m_scope_profiles),
    F(pl_resource_profiles, "schemaUrl", FK_STR, schema_url),
};
static const jmsg m_resource_profiles = MSG(pl_resource_profiles, f_resource_profiles);

static const jfield f_mapping[] = {
    F(pl_mapping, "memoryStart", FK_U64, memory_start),
    F(pl_mapping, "memoryLimit", FK_U64, memory_limit),
    F(pl_mapping, "fileOffset", FK_U64, file_offset),
    F(pl_mapping, "filenameStrindex", FK_I32, filename_strindex),
    F_LIST(pl_mapping, "attributeIndices", FK_I32S, attribute_indices, n_attribute_indices, NULL),
};
static const jmsg m_mapping = MSG(pl_mapping, f_mapping);

static const jfield f_line[] = {
    F(pl_line, "functionIndex", FK_I32, function_index),
    F(pl_line, "line", FK_I64, line),
    F(pl_line, "column", FK_I64, column),
};
static const jmsg m_line = MSG(pl_line, f_line);

static const jfield f_location[] = {
    F(pl_location, "mappingIndex", FK_I32, mapping_index),
    F(pl_location, "address", FK_U64, address),
    F_LIST(pl_location, "lines", FK_LIST, lines, n_lines, &m_line),
    F_LIST(pl_location, "attributeIndices", FK_I32S, attribute_indices, n_attribute_indices, NULL),
};
static const jmsg m_location = MSG(pl_location, f_location);

static const jfield f_function[] = {
    F(pl_function, "nameStrindex", FK_I32, name_strindex),
    F(pl_function, "systemNameStrindex", FK_I32, system_name_strindex),
    F(pl_function, "filenameStrindex", FK_I32, filename_strindex),
    F(pl_function, "startLine", FK_I64, start_line),
};
static const jmsg m_function = MSG(pl_function, f_function);

static const jfield f_link[] = {
    F_ID(pl_link, "traceId", trace_id, 16),
    F_ID(pl_link, "spanId", span_id, 8),
};
static const jmsg m_link = MSG(pl_link, f_link);

static const jfield f_kvu[] = {
    F(pl_kvu, "keyStrindex", FK_I32, key_strindex),
    F(pl_kvu, "value", FK_ANY, value),
    F(pl_kvu, "unitStrindex", FK_I32, unit_strindex),
};
static const jmsg m_kvu = MSG(pl_kvu, f_kvu);

static const jfield f_stack[] = {
    F_LIST(pl_stack, "locationIndices", FK_I32S, location_indices, n_location_indices, NULL),
};
static const jmsg m_stack = MSG(pl_stack, f_stack);

static const jfield f_dictionary[] = {
    F_TABLE(pl_dictionary, "mappingTable", mappings, m_mapping),
    F_TABLE(pl_dictionary, "locationTable", locations, m_location),
    F_TABLE(pl_dictionary, "functionTable", functions, m_function),
    F_TABLE(pl_dictionary, "linkTable", links, m_link),
    {"stringTable", 11, FK_STRS, 0, offsetof(pl_dictionary, strings),
     offsetof(pl_dictionary, n_strings), offsetof(pl_dictionary, cap_strings), NULL},
    F_TABLE(pl_dictionary, "attributeTable", attributes, m_kvu),
    F_TABLE(pl_dictionary, "stackTable", stacks, m_stack),
};
static const jmsg m_dictionary = MSG(pl_dictionary, f_dictionary);

static const jfield f_profiles[] = {
    F_LIST(pl_profiles, "resourceProfiles", FK_LIST, resources, n_resources, &m_resource_profiles),
    F_MSG(pl_profiles, "dictionary", dict, offsetof(pl_profiles, has_dictionary), m_dictionary),
};
static const jmsg m_profiles = MSG(pl_profiles, f_profiles);

/* List elements are decoded into a local buffer of this size first. */
#define MAX_ELEM 256
_Static_assert(sizeof(pl_span) <= MAX_ELEM && sizeof(pl_profile) <= MAX_ELEM &&
                   sizeof(pl_resource_spans) <= MAX_ELEM &&
                   sizeof(pl_resource_profiles) <= MAX_ELEM,
               "list element buffer");

static void *arena_copy(jdec *d, const void *src, size_t n)
{
    void *p = pl_arena_alloc(d->arena, n);
    if (p)
        memcpy(p, src, n);
    return p;
}

/* ---- messages ----------------------------------------------------------- */

static int dec_msg(jdec *d, const jmsg *m, void *dst, int depth);
static int dec_anyvalue(jdec *d, pl_value *v, int depth);

static const jfield *find_field(const jmsg *m, const pl_jstr *key)
{
    for (unsigned i = 0; i < m->n_fields; i++) {
        const jfield *f = &m->fields[i];
        if (f->name_len == key->len && memcmp(f->name, key->ptr, key->len) == 0)
            return f;
    }
    if (key->escaped || key->len > 64)
        return NULL; /* escaped keys are not worth matching */
    for (unsigned i = 0; i < m->n_fields; i++)
        if (pl_jr_key_folded_eq(key->ptr, key->len, m->fields[i].name))
            return &m->fields[i];
    return NULL;
}

static int scratch_push(jdec *d, const void *elem, size_t size)
{
    if (d->scratch_cap - d->scratch_len < size) {
        size_t cap = d->scratch_cap ? d->scratch_cap * 2 : 4096;
        while (cap - d->scratch_len < size)
            cap *= 2;
        uint8_t *p = realloc(d->scratch, cap);
        if (!p)
            return pl_jd_oom(d);
        d->scratch = p;
        d->scratch_cap = cap;
    }
    memcpy(d->scratch + d->scratch_len, elem, size);
    d->scratch_len += size;
    return 0;
}

/* One element of a repeated field into `elem` (zeroed, `size` bytes). */
static int dec_elem(jdec *d, const jfield *f, void *elem, int depth)
{
    uint64_t u;
    switch (f->kind) {
    case FK_LIST:
        if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
            if (!pl_jr_skip(&d->r))
                return pl_jd_syntax(d);
            return pl_jd_fail(d, NULL, "want an object");
        }
        return dec_msg(d, f->sub, elem, depth);
    case FK_I32S:
        if (pl_jd_int(d, NULL, true, INT32_MIN, INT32_MAX, &u))
            return -1;
        *(int32_t *)elem = (int32_t)(int64_t)u;
        return 0;
    case FK_I64S:
        if (pl_jd_int(d, NULL, true, INT64_MIN, INT64_MAX, &u))
            return -1;
        *(int64_t *)elem = (int64_t)u;
        return 0;
    case FK_U64S:
        return pl_jd_int(d, NULL, false, 0, UINT64_MAX, (uint64_t *)elem);
    default: /* FK_STRS */
        return pl_jd_string(d, NULL, (pl_bytes *)elem);
    }
}

static size_t elem_size(const jfield *f)
{
    switch (f->kind) {
    case FK_LIST:
        return ((const jmsg *)f->sub)->size;
    case FK_I32S:
        return 4;
    case FK_I64S:
    case FK_U64S:
        return 8;
    default:
        return sizeof(pl_bytes);
    }
}

/* Fixed charge per element on top of twice its size (an element lives in
 * the scratch stack until its array closes, then in the arena). */
#define ELEM_OVERHEAD 16

static int dec_list(jdec *d, const jfield *f, uint8_t *base, int depth)
{
    void **items = (void **)(base + f->off);
    uint32_t *count = (uint32_t *)(base + f->aux);
    *items = NULL;
    *count = 0;
    if (f->aux2 != NO_OFF)
        *(uint32_t *)(base + f->aux2) = 0;
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_NULL)
        return pl_jr_literal(&d->r) ? 0 : pl_jd_syntax(d);
    if (t != PL_JT_ARRAY) {
        if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
            return pl_jd_syntax(d);
        return pl_jd_fail(d, f->name, "want an array");
    }
    if (!pl_jr_array_begin(&d->r))
        return pl_jd_syntax(d);
    size_t size = elem_size(f), start = d->scratch_len;
    _Alignas(16) uint8_t elem[MAX_ELEM];
    unsigned k = 0;
    int rc;
    uint32_t n = 0;
    while ((rc = pl_jr_array_next(&d->r, &k)) == 1) {
        if (pl_jd_charge(d, 2 * size + ELEM_OVERHEAD))
            return -1;
        memset(elem, 0, size);
        path_push(d, f->name, n);
        if (dec_elem(d, f, elem, depth))
            return -1;
        path_pop(d);
        if (scratch_push(d, elem, size))
            return -1;
        n++;
    }
    if (rc < 0)
        return pl_jd_syntax(d);
    if (n) {
        if (!(*items = arena_copy(d, d->scratch + start, (size_t)n * size)))
            return pl_jd_oom(d);
        *count = n;
        if (f->aux2 != NO_OFF)
            *(uint32_t *)(base + f->aux2) = n;
    }
    d->scratch_len = start;
    return 0;
}

static int dec_field(jdec *d, const jfield *f, uint8_t *base, int depth)
{
    void *dst = base + f->off;
    uint64_t u;
    switch ((fkind)f->kind) {
    case FK_STR:
        return pl_jd_string(d, f->name, dst);
    case FK_B64:
        return pl_jd_base64(d, f->name, dst);
    case FK_ID:
        return pl_jd_hex_id(d, f->name, dst, base + f->aux, f->arg);
    case FK_U32:
        if (pl_jd_int(d, f->name, false, 0, UINT32_MAX, &u))
            return -1;
        *(uint32_t *)dst = (uint32_t)u;
        return 0;
    case FK_I32:
        if (pl_jd_int(d, f->name, true, INT32_MIN, INT32_MAX, &u))
            return -1;
        *(int32_t *)dst = (int32_t)(int64_t)u;
        return 0;
    case FK_U64:
        return pl_jd_int(d, f->name, false, 0, UINT64_MAX, dst);
    case FK_I64:
        if (pl_jd_int(d, f->name, true, INT64_MIN, INT64_MAX, &u))
            return -1;
        *(int64_t *)dst = (int64_t)u;
        return 0;
    case FK_ENUM:
        return pl_jd_enum(d, f->name, f->sub, NULL, f->arg, dst);
    case FK_MSG:
    case FK_ANY: {
        pl_jtype t = pl_jr_peek(&d->r);
        if (t == PL_JT_NULL)
            return pl_jr_literal(&d->r) ? 0 : pl_jd_syntax(d);
        path_push(d, f->name, -1);
        if (t != PL_JT_OBJECT) {
            if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                return pl_jd_syntax(d);
            return pl_jd_fail(d, NULL, "want an object");
        }
        if (f->kind == FK_ANY) {
            if (dec_anyvalue(d, dst, depth + 1))
                return -1;
        } else {
            if (dec_msg(d, f->sub, dst, depth))
                return -1;
            *(bool *)(base + f->aux) = true;
        }
        path_pop(d);
        return 0;
    }
    default:
        return dec_list(d, f, base, depth);
    }
}

/* An object whose members are described by m; the reader is at '{'. */
static int dec_msg(jdec *d, const jmsg *m, void *dst, int depth)
{
    if (!pl_jr_object_begin(&d->r))
        return pl_jd_syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        const jfield *f = find_field(m, &key);
        if (!f) {
            if (!pl_jr_skip(&d->r))
                return pl_jd_syntax(d);
            continue;
        }
        if (dec_field(d, f, dst, depth))
            return -1;
    }
    return rc < 0 ? pl_jd_syntax(d) : 0;
}

/* ---- AnyValue (a oneof) ------------------------------------------------- */

static const jfield f_any_kvlist = {"kvlistValue.values", 18,     FK_LIST,    0, 0,
                                    sizeof(void *),       NO_OFF, &m_keyvalue};

static int dec_array_values(jdec *d, pl_value *v, int depth)
{
    /* {"values": [AnyValue...]}; elements via the scratch stack. */
    if (!pl_jr_object_begin(&d->r))
        return pl_jd_syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    v->u.array.items = NULL;
    v->u.array.n = 0;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        if (!(key.len == 6 && memcmp(key.ptr, "values", 6) == 0)) {
            if (!pl_jr_skip(&d->r))
                return pl_jd_syntax(d);
            continue;
        }
        pl_jtype t = pl_jr_peek(&d->r);
        if (t == PL_JT_NULL) {
            if (!pl_jr_literal(&d->r))
                return pl_jd_syntax(d);
            continue;
        }
        if (t != PL_JT_ARRAY) {
            if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                return pl_jd_syntax(d);
            return pl_jd_fail(d, "arrayValue.values", "want an array");
        }
        if (!pl_jr_array_begin(&d->r))
            return pl_jd_syntax(d);
        size_t start = d->scratch_len;
        unsigned ak = 0;
        uint32_t n = 0;
        while ((rc = pl_jr_array_next(&d->r, &ak)) == 1) {
            pl_value item;
            memset(&item, 0, sizeof item);
            if (pl_jd_charge(d, 2 * sizeof item + ELEM_OVERHEAD))
                return -1;
            path_push(d, "arrayValue.values", n);
            if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
                if (!pl_jr_skip(&d->r))
                    return pl_jd_syntax(d);
                return pl_jd_fail(d, NULL, "want an object");
            }
            if (dec_anyvalue(d, &item, depth + 1))
                return -1;
            path_pop(d);
            if (scratch_push(d, &item, sizeof item))
                return -1;
            n++;
        }
        if (rc < 0)
            return pl_jd_syntax(d);
        v->u.array.items = NULL;
        if (n && !(v->u.array.items = arena_copy(d, d->scratch + start, n * sizeof(pl_value))))
            return pl_jd_oom(d);
        v->u.array.n = n;
        d->scratch_len = start;
    }
    return rc < 0 ? pl_jd_syntax(d) : 0;
}

static int dec_kvlist_values(jdec *d, pl_value *v, int depth)
{
    if (!pl_jr_object_begin(&d->r))
        return pl_jd_syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    v->u.kvlist.items = NULL;
    v->u.kvlist.n = 0;
    _Static_assert(offsetof(pl_value, u.kvlist.n) - offsetof(pl_value, u.kvlist.items) ==
                       sizeof(void *),
                   "kvlist layout");
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        if (key.len == 6 && memcmp(key.ptr, "values", 6) == 0) {
            if (dec_list(d, &f_any_kvlist, (uint8_t *)&v->u.kvlist.items, depth + 1))
                return -1;
        } else if (!pl_jr_skip(&d->r)) {
            return pl_jd_syntax(d);
        }
    }
    return rc < 0 ? pl_jd_syntax(d) : 0;
}

static int dec_anyvalue(jdec *d, pl_value *v, int depth)
{
    memset(v, 0, sizeof(*v));
    if (depth > PL_OTLP_MAX_DEPTH) {
        pl_jd_fail(d, NULL, "values nested deeper than %d levels", PL_OTLP_MAX_DEPTH);
        return -1;
    }
    if (!pl_jr_object_begin(&d->r))
        return pl_jd_syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        if (pl_jr_peek(&d->r) == PL_JT_NULL) {
            if (!pl_jr_literal(&d->r))
                return pl_jd_syntax(d);
            continue;
        }
        char name[24];
        size_t n = key.len < sizeof name - 1 ? key.len : 0;
        memcpy(name, key.ptr, n);
        name[n] = '\0';
        uint64_t u;
#define IS(camel) (strcmp(name, camel) == 0 || pl_jr_key_folded_eq(key.ptr, key.len, camel))
        if (IS("stringValue")) {
            if (pl_jd_string(d, "stringValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_STRING;
        } else if (IS("boolValue")) {
            pl_jtype t = pl_jr_peek(&d->r);
            if (t != PL_JT_TRUE && t != PL_JT_FALSE) {
                if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                    return pl_jd_syntax(d);
                return pl_jd_fail(d, "boolValue", "want true or false");
            }
            if (!pl_jr_literal(&d->r))
                return pl_jd_syntax(d);
            v->u.b = t == PL_JT_TRUE;
            v->type = PL_VALUE_BOOL;
        } else if (IS("intValue")) {
            if (pl_jd_int(d, "intValue", true, INT64_MIN, INT64_MAX, &u))
                return -1;
            v->u.i = (int64_t)u;
            v->type = PL_VALUE_INT;
        } else if (IS("doubleValue")) {
            if (pl_jd_double(d, "doubleValue", &v->u.d))
                return -1;
            v->type = PL_VALUE_DOUBLE;
        } else if (IS("bytesValue")) {
            if (pl_jd_base64(d, "bytesValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_BYTES;
        } else if (IS("stringValueStrindex")) {
            if (pl_jd_int(d, "stringValueStrindex", true, INT32_MIN, INT32_MAX, &u))
                return -1;
            v->u.strindex = (int32_t)(int64_t)u;
            v->type = PL_VALUE_STRINDEX;
        } else if (IS("arrayValue") || IS("kvlistValue")) {
            bool array = IS("arrayValue");
            if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
                if (!pl_jr_skip(&d->r))
                    return pl_jd_syntax(d);
                return pl_jd_fail(d, array ? "arrayValue" : "kvlistValue", "want an object");
            }
            if (array ? dec_array_values(d, v, depth) : dec_kvlist_values(d, v, depth))
                return -1;
            v->type = array ? PL_VALUE_ARRAY : PL_VALUE_KVLIST;
        } else if (!pl_jr_skip(&d->r)) {
            return pl_jd_syntax(d);
        }
#undef IS
    }
    return rc < 0 ? pl_jd_syntax(d) : 0;
}

/* ---- entry points ------------------------------------------------------- */

static pl_status decode(pl_batch *b, const jmsg *root, void *dst, const uint8_t *buf, size_t len,
                        size_t budget, pl_err *err)
{
    jdec *d = malloc(sizeof(*d));
    if (!d)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory while decoding");
    pl_jd_init(d, &b->arena, buf, len, budget, err);
    memset(dst, 0, root->size);
    int rc = 0;
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_OBJECT) {
        rc = dec_msg(d, root, dst, 0);
        if (rc == 0 && !pl_jr_finish(&d->r))
            rc = pl_jd_syntax(d);
    } else if (t == PL_JT_NONE || t == PL_JT_BAD) {
        pl_jr_fail(&d->r, t == PL_JT_NONE ? "unexpected end of input" : "unexpected character");
        rc = pl_jd_syntax(d);
    } else {
        pl_errf(err, PL_ERR_INVALID, "the request must be a JSON object");
        rc = -1;
    }
    pl_status st = rc ? d->status : PL_OK;
    free(d->scratch);
    free(d);
    return st;
}

static pl_status decode_traces(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                               pl_err *err)
{
    return decode(b, &m_traces, &b->data.traces, buf, len, budget, err);
}

static pl_status decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                                 pl_err *err)
{
    pl_status st = decode(b, &m_profiles, &b->data.profiles, buf, len, budget, err);
    return st ? st : pl_otlp_validate_profiles(&b->data.profiles, err);
}

pl_status pl_otlp_json_decode_ex(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                                 pl_err *err)
{
    switch (b->signal) {
    case PL_SIGNAL_TRACES:
        return decode_traces(b, buf, len, budget, err);
    case PL_SIGNAL_PROFILES:
        return decode_profiles(b, buf, len, budget, err);
    default:
        return pl_errf(err, PL_ERR_UNSUPPORTED, "JSON is decoded only for traces and profiles");
    }
}

pl_status pl_otlp_json_decode_traces(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err)
{
    return decode_traces(b, buf, len, PL_OTLP_DECODE_BUDGET, err);
}

pl_status pl_otlp_json_decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err)
{
    return decode_profiles(b, buf, len, PL_OTLP_DECODE_BUDGET, err);
}
