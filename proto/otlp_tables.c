/*
 * otlp_tables.c: see otlp_tables.h. Rows are ordered as senders usually
 * write the members (and as proflink's JSON encoder writes them), so a JSON
 * key usually matches on the first probe.
 */
#include "otlp_tables.h"

#include <stdlib.h>

#include "common.pb.h"
#include "profiles.pb.h"
#include "profiles_service.pb.h"
#include "resource.pb.h"
#include "trace.pb.h"
#include "trace_service.pb.h"

#define CM(m, f)  opentelemetry_proto_common_v1_##m##_##f##_tag
#define RES(m, f) opentelemetry_proto_resource_v1_##m##_##f##_tag
#define TR(m, f)  opentelemetry_proto_trace_v1_##m##_##f##_tag
#define PR(m, f)  opentelemetry_proto_profiles_v1development_##m##_##f##_tag
#define CTR(m, f) opentelemetry_proto_collector_trace_v1_##m##_##f##_tag
#define CPR(m, f) opentelemetry_proto_collector_profiles_v1development_##m##_##f##_tag

/* clang-format off */
#define ROWE(enc, name, kind, arg, num, off, aux, aux2, sub) \
    {name, sizeof(name) - 1, kind, arg, num, enc, off, aux, aux2, sub}
#define ROW(...) ROWE(0, __VA_ARGS__)
#define F(T, name, kind, num, m)        ROW(name, kind, 0, num, offsetof(T, m), NO_OFF, NO_OFF, NULL)
#define F_ID(T, name, num, m, len)      ROW(name, FK_ID, len, num, offsetof(T, m), offsetof(T, m##_len), NO_OFF, NULL)
#define F_ENUM(T, name, num, m, names)  ROW(name, FK_ENUM, sizeof(names) / sizeof(names[0]), num, offsetof(T, m), NO_OFF, NO_OFF, names)
#define F_MSG(T, name, num, m, has, sub) ROW(name, FK_MSG, 0, num, offsetof(T, m), offsetof(T, has), NO_OFF, &sub)
#define F_LIST(T, name, kind, num, m, n, sub) ROW(name, kind, 0, num, offsetof(T, m), offsetof(T, n), NO_OFF, sub)
#define F_TABLE(T, name, kind, num, m, sub) ROW(name, kind, 0, num, offsetof(T, m), offsetof(T, n_##m), offsetof(T, cap_##m), sub)
#define F_ATTRS(T, num, m)              ROW("attributes", FK_LIST, 0, num, offsetof(T, m.items), offsetof(T, m.n), offsetof(T, m.cap), &pl_tm_keyvalue)
#define MSG_(scope, name, T, fields) \
    static jindex fields##_ix; \
    scope const jmsg name = {sizeof(T), sizeof(fields) / sizeof(fields[0]), fields, &fields##_ix}
#define MSG(name, T, fields)     MSG_(static, name, T, fields)
#define PUB_MSG(name, T, fields) MSG_(, name, T, fields)

/* ---- common.v1, resource.v1 */

static const jfield f_keyvalue[] = {
    ROWE(ENC_JSON_ALWAYS, "key", FK_STR, 0, CM(KeyValue, key), offsetof(pl_kv, key), NO_OFF,
         NO_OFF, NULL),
    ROWE(ENC_JSON_ALWAYS | ENC_PB_ALWAYS, "value", FK_ANY, 0, CM(KeyValue, value),
         offsetof(pl_kv, value), NO_OFF, NO_OFF, NULL),
    F(pl_kv, "keyStrindex", FK_I32, CM(KeyValue, key_strindex), key_strindex),
};
PUB_MSG(pl_tm_keyvalue, pl_kv, f_keyvalue);

/* ArrayValue and KeyValueList, decoded into pl_value's union members (the
 * AnyValue readers name them in error paths: "arrayValue.values[2]"). */
typedef struct value_list {
    void *items;
    uint32_t n;
} value_list;
_Static_assert(offsetof(pl_value, u.array.n) - offsetof(pl_value, u.array.items) ==
                   offsetof(value_list, n) &&
               offsetof(pl_value, u.kvlist.n) - offsetof(pl_value, u.kvlist.items) ==
                   offsetof(value_list, n),
               "value list layout");

static const jfield f_arrayvalue[] = {
    F_LIST(value_list, "values", FK_ANYS, CM(ArrayValue, values), items, n, NULL),
};
PUB_MSG(pl_tm_arrayvalue, value_list, f_arrayvalue);

static const jfield f_kvlist[] = {
    F_LIST(value_list, "values", FK_LIST, CM(KeyValueList, values), items, n,
           &pl_tm_keyvalue),
};
PUB_MSG(pl_tm_kvlist, value_list, f_kvlist);

static const jfield f_entity_ref[] = {
    F(pl_entity_ref, "schemaUrl", FK_STR, CM(EntityRef, schema_url), schema_url),
    F(pl_entity_ref, "type", FK_STR, CM(EntityRef, type), type),
    F_LIST(pl_entity_ref, "idKeys", FK_STRS, CM(EntityRef, id_keys), id_keys, n_id_keys, NULL),
    F_LIST(pl_entity_ref, "descriptionKeys", FK_STRS, CM(EntityRef, description_keys),
           description_keys, n_description_keys, NULL),
};
MSG(m_entity_ref, pl_entity_ref, f_entity_ref);

static const jfield f_resource[] = {
    F_ATTRS(pl_resource, RES(Resource, attributes), attrs),
    F(pl_resource, "droppedAttributesCount", FK_U32, RES(Resource, dropped_attributes_count),
      dropped_attributes_count),
    F_LIST(pl_resource, "entityRefs", FK_LIST, RES(Resource, entity_refs), entity_refs,
           n_entity_refs, &m_entity_ref),
};
MSG(m_resource, pl_resource, f_resource);

static const jfield f_scope[] = {
    F(pl_scope, "name", FK_STR, CM(InstrumentationScope, name), name),
    F(pl_scope, "version", FK_STR, CM(InstrumentationScope, version), version),
    F_ATTRS(pl_scope, CM(InstrumentationScope, attributes), attrs),
    F(pl_scope, "droppedAttributesCount", FK_U32, CM(InstrumentationScope, dropped_attributes_count),
      dropped_attributes_count),
};
MSG(m_scope, pl_scope, f_scope);

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
    F(span_status, "message", FK_STR, TR(Status, message), message),
    F_ENUM(span_status, "code", TR(Status, code), code, status_code_names),
};
MSG(m_status, span_status, f_status);

static const jfield f_event[] = {
    F(pl_span_event, "timeUnixNano", FK_FX64, TR(Span_Event, time_unix_nano), time_unix_nano),
    F(pl_span_event, "name", FK_STR, TR(Span_Event, name), name),
    F_ATTRS(pl_span_event, TR(Span_Event, attributes), attrs),
    F(pl_span_event, "droppedAttributesCount", FK_U32, TR(Span_Event, dropped_attributes_count),
      dropped_attributes_count),
};
MSG(m_event, pl_span_event, f_event);

static const jfield f_span_link[] = {
    F_ID(pl_span_link, "traceId", TR(Span_Link, trace_id), trace_id, 16),
    F_ID(pl_span_link, "spanId", TR(Span_Link, span_id), span_id, 8),
    F(pl_span_link, "traceState", FK_STR, TR(Span_Link, trace_state), trace_state),
    F_ATTRS(pl_span_link, TR(Span_Link, attributes), attrs),
    F(pl_span_link, "droppedAttributesCount", FK_U32, TR(Span_Link, dropped_attributes_count),
      dropped_attributes_count),
    F(pl_span_link, "flags", FK_FX32, TR(Span_Link, flags), flags),
};
MSG(m_span_link, pl_span_link, f_span_link);

static const jfield f_span[] = {
    F_ID(pl_span, "traceId", TR(Span, trace_id), trace_id, 16),
    F_ID(pl_span, "spanId", TR(Span, span_id), span_id, 8),
    F(pl_span, "traceState", FK_STR, TR(Span, trace_state), trace_state),
    F_ID(pl_span, "parentSpanId", TR(Span, parent_span_id), parent_span_id, 8),
    F(pl_span, "flags", FK_FX32, TR(Span, flags), flags),
    F(pl_span, "name", FK_STR, TR(Span, name), name),
    F_ENUM(pl_span, "kind", TR(Span, kind), kind, span_kind_names),
    F(pl_span, "startTimeUnixNano", FK_FX64, TR(Span, start_time_unix_nano), start_time_unix_nano),
    F(pl_span, "endTimeUnixNano", FK_FX64, TR(Span, end_time_unix_nano), end_time_unix_nano),
    F_ATTRS(pl_span, TR(Span, attributes), attrs),
    F(pl_span, "droppedAttributesCount", FK_U32, TR(Span, dropped_attributes_count),
      dropped_attributes_count),
    F_LIST(pl_span, "events", FK_LIST, TR(Span, events), events, n_events, &m_event),
    F(pl_span, "droppedEventsCount", FK_U32, TR(Span, dropped_events_count), dropped_events_count),
    F_LIST(pl_span, "links", FK_LIST, TR(Span, links), links, n_links, &m_span_link),
    F(pl_span, "droppedLinksCount", FK_U32, TR(Span, dropped_links_count), dropped_links_count),
    /* Written when set, or when the model has a code or message without the flag. */
    ROWE(ENC_NONEMPTY, "status", FK_MSG, 0, TR(Span, status), offsetof(pl_span, status),
         offsetof(pl_span, has_status), NO_OFF, &m_status),
};
MSG(m_span, pl_span, f_span);

static const jfield f_scope_spans[] = {
    F_MSG(pl_scope_spans, "scope", TR(ScopeSpans, scope), scope, has_scope, m_scope),
    F_LIST(pl_scope_spans, "spans", FK_LIST, TR(ScopeSpans, spans), spans, n_spans, &m_span),
    F(pl_scope_spans, "schemaUrl", FK_STR, TR(ScopeSpans, schema_url), schema_url),
};
MSG(m_scope_spans, pl_scope_spans, f_scope_spans);

static const jfield f_resource_spans[] = {
    F_MSG(pl_resource_spans, "resource", TR(ResourceSpans, resource), resource, has_resource,
          m_resource),
    F_LIST(pl_resource_spans, "scopeSpans", FK_LIST, TR(ResourceSpans, scope_spans), scopes,
           n_scopes, &m_scope_spans),
    F(pl_resource_spans, "schemaUrl", FK_STR, TR(ResourceSpans, schema_url), schema_url),
};
MSG(m_resource_spans, pl_resource_spans, f_resource_spans);

static const jfield f_traces[] = {
    F_LIST(pl_traces, "resourceSpans", FK_LIST, CTR(ExportTraceServiceRequest, resource_spans),
           resources, n_resources, &m_resource_spans),
};
PUB_MSG(pl_tm_traces, pl_traces, f_traces);

/* ---- profiles.v1development */

static const jfield f_value_type[] = {
    F(pl_vtype, "typeStrindex", FK_I32, PR(ValueType, type_strindex), type_strindex),
    F(pl_vtype, "unitStrindex", FK_I32, PR(ValueType, unit_strindex), unit_strindex),
};
MSG(m_value_type, pl_vtype, f_value_type);

static const jfield f_sample[] = {
    F(pl_sample, "stackIndex", FK_I32, PR(Sample, stack_index), stack_index),
    F_LIST(pl_sample, "attributeIndices", FK_I32S, PR(Sample, attribute_indices),
           attribute_indices, n_attribute_indices, NULL),
    F(pl_sample, "linkIndex", FK_I32, PR(Sample, link_index), link_index),
    F_LIST(pl_sample, "values", FK_I64S, PR(Sample, values), values, n_values, NULL),
    F_LIST(pl_sample, "timestampsUnixNano", FK_U64S, PR(Sample, timestamps_unix_nano),
           timestamps_unix_nano, n_timestamps, NULL),
};
PUB_MSG(pl_tm_sample, pl_sample, f_sample);

static const jfield f_profile[] = {
    F_MSG(pl_profile, "sampleType", PR(Profile, sample_type), sample_type, has_sample_type,
          m_value_type),
    F_LIST(pl_profile, "samples", FK_LIST, PR(Profile, samples), samples, n_samples, &pl_tm_sample),
    F(pl_profile, "timeUnixNano", FK_FX64, PR(Profile, time_unix_nano), time_unix_nano),
    F(pl_profile, "durationNano", FK_U64, PR(Profile, duration_nano), duration_nano),
    F_MSG(pl_profile, "periodType", PR(Profile, period_type), period_type, has_period_type,
          m_value_type),
    F(pl_profile, "period", FK_I64, PR(Profile, period), period),
    F_ID(pl_profile, "profileId", PR(Profile, profile_id), profile_id, 16),
    F(pl_profile, "droppedAttributesCount", FK_U32, PR(Profile, dropped_attributes_count),
      dropped_attributes_count),
    F(pl_profile, "originalPayloadFormat", FK_STR, PR(Profile, original_payload_format),
      original_payload_format),
    F(pl_profile, "originalPayload", FK_B64, PR(Profile, original_payload), original_payload),
    F_LIST(pl_profile, "attributeIndices", FK_I32S, PR(Profile, attribute_indices),
           attribute_indices, n_attribute_indices, NULL),
};
MSG(m_profile, pl_profile, f_profile);

static const jfield f_scope_profiles[] = {
    F_MSG(pl_scope_profiles, "scope", PR(ScopeProfiles, scope), scope, has_scope, m_scope),
    F_LIST(pl_scope_profiles, "profiles", FK_LIST, PR(ScopeProfiles, profiles), profiles,
           n_profiles, &m_profile),
    F(pl_scope_profiles, "schemaUrl", FK_STR, PR(ScopeProfiles, schema_url), schema_url),
};
MSG(m_scope_profiles, pl_scope_profiles, f_scope_profiles);

static const jfield f_resource_profiles[] = {
    F_MSG(pl_resource_profiles, "resource", PR(ResourceProfiles, resource), resource,
          has_resource, m_resource),
    F_LIST(pl_resource_profiles, "scopeProfiles", FK_LIST, PR(ResourceProfiles, scope_profiles),
           scopes, n_scopes, &m_scope_profiles),
    F(pl_resource_profiles, "schemaUrl", FK_STR, PR(ResourceProfiles, schema_url), schema_url),
};
MSG(m_resource_profiles, pl_resource_profiles, f_resource_profiles);

static const jfield f_mapping[] = {
    F(pl_mapping, "memoryStart", FK_U64, PR(Mapping, memory_start), memory_start),
    F(pl_mapping, "memoryLimit", FK_U64, PR(Mapping, memory_limit), memory_limit),
    F(pl_mapping, "fileOffset", FK_U64, PR(Mapping, file_offset), file_offset),
    F(pl_mapping, "filenameStrindex", FK_I32, PR(Mapping, filename_strindex), filename_strindex),
    F_LIST(pl_mapping, "attributeIndices", FK_I32S, PR(Mapping, attribute_indices),
           attribute_indices, n_attribute_indices, NULL),
};
MSG(m_mapping, pl_mapping, f_mapping);

static const jfield f_line[] = {
    F(pl_line, "functionIndex", FK_I32, PR(Line, function_index), function_index),
    F(pl_line, "line", FK_I64, PR(Line, line), line),
    F(pl_line, "column", FK_I64, PR(Line, column), column),
};
MSG(m_line, pl_line, f_line);

static const jfield f_location[] = {
    F(pl_location, "mappingIndex", FK_I32, PR(Location, mapping_index), mapping_index),
    F(pl_location, "address", FK_U64, PR(Location, address), address),
    F_LIST(pl_location, "lines", FK_LIST, PR(Location, lines), lines, n_lines, &m_line),
    F_LIST(pl_location, "attributeIndices", FK_I32S, PR(Location, attribute_indices),
           attribute_indices, n_attribute_indices, NULL),
};
PUB_MSG(pl_tm_location, pl_location, f_location);

static const jfield f_function[] = {
    F(pl_function, "nameStrindex", FK_I32, PR(Function, name_strindex), name_strindex),
    F(pl_function, "systemNameStrindex", FK_I32, PR(Function, system_name_strindex),
      system_name_strindex),
    F(pl_function, "filenameStrindex", FK_I32, PR(Function, filename_strindex), filename_strindex),
    F(pl_function, "startLine", FK_I64, PR(Function, start_line), start_line),
};
PUB_MSG(pl_tm_function, pl_function, f_function);

static const jfield f_link[] = {
    F_ID(pl_link, "traceId", PR(Link, trace_id), trace_id, 16),
    F_ID(pl_link, "spanId", PR(Link, span_id), span_id, 8),
};
MSG(m_link, pl_link, f_link);

static const jfield f_kvu[] = {
    F(pl_kvu, "keyStrindex", FK_I32, PR(KeyValueAndUnit, key_strindex), key_strindex),
    F(pl_kvu, "value", FK_ANY, PR(KeyValueAndUnit, value), value),
    F(pl_kvu, "unitStrindex", FK_I32, PR(KeyValueAndUnit, unit_strindex), unit_strindex),
};
MSG(m_kvu, pl_kvu, f_kvu);

static const jfield f_stack[] = {
    F_LIST(pl_stack, "locationIndices", FK_I32S, PR(Stack, location_indices), location_indices,
           n_location_indices, NULL),
};
PUB_MSG(pl_tm_stack, pl_stack, f_stack);

static const jfield f_dictionary[] = {
    F_TABLE(pl_dictionary, "mappingTable", FK_LIST, PR(ProfilesDictionary, mapping_table),
            mappings, &m_mapping),
    F_TABLE(pl_dictionary, "locationTable", FK_LIST, PR(ProfilesDictionary, location_table),
            locations, &pl_tm_location),
    F_TABLE(pl_dictionary, "functionTable", FK_LIST, PR(ProfilesDictionary, function_table),
            functions, &pl_tm_function),
    F_TABLE(pl_dictionary, "linkTable", FK_LIST, PR(ProfilesDictionary, link_table), links,
            &m_link),
    F_TABLE(pl_dictionary, "stringTable", FK_STRS, PR(ProfilesDictionary, string_table), strings,
            NULL),
    F_TABLE(pl_dictionary, "attributeTable", FK_LIST, PR(ProfilesDictionary, attribute_table),
            attributes, &m_kvu),
    F_TABLE(pl_dictionary, "stackTable", FK_LIST, PR(ProfilesDictionary, stack_table), stacks,
            &pl_tm_stack),
};
MSG(m_dictionary, pl_dictionary, f_dictionary);

static const jfield f_profiles[] = {
    F_LIST(pl_profiles, "resourceProfiles", FK_LIST,
           CPR(ExportProfilesServiceRequest, resource_profiles), resources, n_resources,
           &m_resource_profiles),
    /* Two dictionaries would merge (append) in protobuf; nobody sends that,
     * and merging tables is not worth it. */
    ROW("dictionary", FK_MSG, ARG_NO_MERGE, CPR(ExportProfilesServiceRequest, dictionary),
        offsetof(pl_profiles, dict), offsetof(pl_profiles, has_dictionary), NO_OFF, &m_dictionary),
};
PUB_MSG(pl_tm_profiles, pl_profiles, f_profiles);
/* clang-format on */

/* List elements are decoded into a local buffer of this size first (JSON). */
_Static_assert(sizeof(pl_span) <= 256 && sizeof(pl_profile) <= 256, "element size");

static const jmsg *const all[] = {
    &pl_tm_keyvalue, &pl_tm_arrayvalue, &pl_tm_kvlist,
    &m_entity_ref,   &m_resource,       &m_scope,
    &m_status,       &m_event,          &m_span_link,
    &m_span,         &m_scope_spans,    &m_resource_spans,
    &pl_tm_traces,   &m_value_type,     &pl_tm_sample,
    &m_profile,      &m_scope_profiles, &m_resource_profiles,
    &m_mapping,      &m_line,           &pl_tm_location,
    &pl_tm_function, &m_link,           &m_kvu,
    &pl_tm_stack,    &m_dictionary,     &pl_tm_profiles,
};

__attribute__((constructor)) static void index_tables(void)
{
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const jmsg *m = all[i];
        for (unsigned k = 0; k < m->n_fields; k++) {
            const jfield *f = &m->fields[k];
            if (f->num == 0 || f->num >= 32 || m->n_fields > 32)
                abort(); /* the tables are wrong: caught by any test */
            m->ix->by_num[f->num] = (uint8_t)(k + 1);
            if (f->kind == FK_I32S || f->kind == FK_I64S)
                m->ix->varint_mask |= 1u << f->num;
            if (f->kind == FK_U64S)
                m->ix->fixed64_mask |= 1u << f->num;
            if (FK_IS_LIST(f->kind)) {
                if (m->ix->n_lists == sizeof m->ix->lists)
                    abort();
                m->ix->lists[m->ix->n_lists++] = (uint8_t)k;
                m->ix->has_lists = true;
            }
        }
        unsigned n = 0;
        for (unsigned num = 1; num < 32; num++)
            if (m->ix->by_num[num])
                m->ix->pb_order[n++] = (uint8_t)(m->ix->by_num[num] - 1);
    }
}
