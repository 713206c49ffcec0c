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
#include "otlp_json.h"
#include "otlp_pb.h"

/* Reader nesting limit: each AnyValue level costs three JSON levels. */
#define JSON_MAX_DEPTH (3 * PL_OTLP_MAX_DEPTH + 32)
#define PATH_SLOTS     32

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

/* ---- decoder state and errors ------------------------------------------- */

typedef struct jdec {
    pl_jr r;
    pl_arena *arena;
    pl_err *err;
    pl_status status;
    size_t budget, used;
    uint8_t *scratch;
    size_t scratch_len, scratch_cap;
    unsigned depth;
    struct {
        const char *name;
        int64_t index;
    } path[PATH_SLOTS];
} jdec;

static inline void path_push(jdec *d, const char *name, int64_t index)
{
    if (d->depth < PATH_SLOTS) {
        d->path[d->depth].name = name;
        d->path[d->depth].index = index;
    }
    d->depth++;
}

static inline void path_pop(jdec *d)
{
    d->depth--;
}

__attribute__((format(printf, 3, 4))) static int fail(jdec *d, const char *field, const char *fmt,
                                                      ...)
{
    if (!d->err)
        return -1;
    char where[320], what[192];
    size_t len = 0;
    where[0] = '\0';
    unsigned n = d->depth < PATH_SLOTS ? d->depth : PATH_SLOTS;
    for (unsigned i = 0; i < n && len < sizeof where; i++) {
        int w =
            d->path[i].index >= 0
                ? snprintf(where + len, sizeof where - len, "%s%s[%" PRId64 "]", i ? "." : "",
                           d->path[i].name, d->path[i].index)
                : snprintf(where + len, sizeof where - len, "%s%s", i ? "." : "", d->path[i].name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    if (field && len < sizeof where)
        snprintf(where + len, sizeof where - len, "%s%s", len ? "." : "", field);
    if (!where[0])
        snprintf(where, sizeof where, "(request)");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(d->err->msg, sizeof d->err->msg, "%s: %s", where, what);
    return -1;
}

static int oom(jdec *d)
{
    d->status = PL_ERR_NOMEM;
    if (d->err)
        snprintf(d->err->msg, sizeof d->err->msg, "out of memory while decoding");
    return -1;
}

/* A syntax error from the reader. */
static int syntax(jdec *d)
{
    d->status = PL_ERR_INVALID;
    if (d->err)
        snprintf(d->err->msg, sizeof d->err->msg, "invalid JSON at offset %zu: %s", d->r.error_at,
                 d->r.error ? d->r.error : "unexpected input");
    return -1;
}

/* Charges decoded memory against the request's budget. */
static inline int charge(jdec *d, size_t n)
{
    d->used += n;
    if (d->used <= d->budget)
        return 0;
    d->status = PL_ERR_TOO_LARGE;
    if (d->err)
        snprintf(d->err->msg, sizeof d->err->msg,
                 "decoded request larger than the limit of %zu bytes (%s)", d->budget,
                 "every object counts");
    return -1;
}

static void *arena_copy(jdec *d, const void *src, size_t n)
{
    void *p = pl_arena_alloc(d->arena, n);
    if (p)
        memcpy(p, src, n);
    return p;
}

/* ---- scalars ------------------------------------------------------------ */

/* A short string's text, unescaped into buf (NUL-terminated). Longer ones
 * are cut (they never match a name or fit a number). */
static int short_text(jdec *d, const pl_jstr *s, char *buf, size_t cap, size_t *len)
{
    if (!s->escaped) {
        size_t n = s->len < cap - 1 ? s->len : cap - 1;
        memcpy(buf, s->ptr, n);
        buf[n] = '\0';
        *len = s->len;
        return 0;
    }
    uint8_t *tmp = malloc(s->len + 1);
    if (!tmp)
        return oom(d);
    long n = pl_jr_unescape(s, tmp);
    if (n < 0) {
        free(tmp);
        return fail(d, NULL, "invalid UTF-8");
    }
    size_t c = (size_t)n < cap - 1 ? (size_t)n : cap - 1;
    memcpy(buf, tmp, c);
    buf[c] = '\0';
    *len = (size_t)n;
    free(tmp);
    return 0;
}

static int parse_decimal(const char *s, size_t len, bool is_signed, uint64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+')) {
        if (!is_signed && s[i] == '-')
            return -1;
        neg = s[i] == '-';
        i++;
    }
    if (i == len)
        return -1;
    uint64_t v = 0;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned dgt = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - dgt) / 10)
            return -1;
        v = v * 10 + dgt;
    }
    if (is_signed) {
        if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX)
            return -1;
        *out = neg ? (uint64_t)(-(int64_t)(v - 1) - 1) : v;
    } else {
        *out = v;
    }
    return 0;
}

/* A JSON number token as an integer: integral syntax exactly, or a
 * fraction/exponent whose value is integral. */
static int number_to_int(jdec *d, const char *name, const char *t, size_t n, bool is_signed,
                         uint64_t *u)
{
    bool integral = true;
    for (size_t i = 0; i < n; i++)
        if (t[i] == '.' || t[i] == 'e' || t[i] == 'E')
            integral = false;
    if (integral) {
        if (t[0] == '-' && !is_signed) {
            /* "-0" is zero */
            bool zero = true;
            for (size_t i = 1; i < n; i++)
                zero &= t[i] == '0';
            if (!zero)
                return fail(d, name, "negative value for an unsigned field");
            *u = 0;
            return 0;
        }
        if (parse_decimal(t, n, is_signed, u))
            return fail(d, name, "integer out of range");
        return 0;
    }
    char tmp[64];
    if (n >= sizeof tmp)
        return fail(d, name, "want an integer");
    memcpy(tmp, t, n);
    tmp[n] = '\0';
    double x = strtod(tmp, NULL);
    /* Exact powers of two bound the convertible range (2^63, 2^64). */
    if (!isfinite(x) || x != floor(x) || x < (is_signed ? -9223372036854775808.0 : 0) ||
        x >= (is_signed ? 9223372036854775808.0 : 18446744073709551616.0))
        return fail(d, name,
                    x < 0 && !is_signed ? "negative value for an unsigned field"
                                        : "want an integer");
    *u = is_signed ? (uint64_t)(int64_t)x : (uint64_t)x;
    return 0;
}

/* Integers: a JSON number (integral) or a decimal string; null is 0. */
static int get_int(jdec *d, const char *name, bool is_signed, int64_t min, uint64_t max_u,
                   uint64_t *out)
{
    uint64_t u = 0;
    switch (pl_jr_peek(&d->r)) {
    case PL_JT_NUMBER: {
        const char *t;
        size_t n;
        if (!pl_jr_number(&d->r, &t, &n))
            return syntax(d);
        if (number_to_int(d, name, t, n, is_signed, &u))
            return -1;
        break;
    }
    case PL_JT_STRING: {
        pl_jstr s;
        char buf[48];
        size_t n;
        if (!pl_jr_string(&d->r, &s))
            return syntax(d);
        if (short_text(d, &s, buf, sizeof buf, &n))
            return -1;
        if (n >= sizeof buf || parse_decimal(buf, n, is_signed, &u))
            return fail(d, name, "\"%.40s\" is not a decimal integer", buf);
        break;
    }
    case PL_JT_NULL:
        if (!pl_jr_literal(&d->r))
            return syntax(d);
        break;
    case PL_JT_NONE:
        return syntax(d);
    default:
        if (!pl_jr_skip(&d->r))
            return syntax(d);
        return fail(d, name, "want an integer");
    }
    if (is_signed) {
        int64_t s = (int64_t)u;
        if (s < min || (s > 0 && (uint64_t)s > max_u))
            return fail(d, name, "%" PRId64 " out of range", s);
    } else if (u > max_u) {
        return fail(d, name, "%" PRIu64 " out of range", u);
    }
    *out = u;
    return 0;
}

/* An enum: an integer, or one of `names` (index = value). */
static int get_enum(jdec *d, const char *name, const char *const *names, int n_names, int32_t *out)
{
    if (pl_jr_peek(&d->r) == PL_JT_STRING) {
        pl_jstr s;
        char buf[48];
        size_t n;
        if (!pl_jr_string(&d->r, &s))
            return syntax(d);
        if (short_text(d, &s, buf, sizeof buf, &n))
            return -1;
        if (n < sizeof buf) {
            for (int i = 0; i < n_names; i++) {
                if (strcmp(buf, names[i]) == 0) {
                    *out = i;
                    return 0;
                }
            }
            uint64_t u;
            if (parse_decimal(buf, n, true, &u) == 0 && (int64_t)u >= INT32_MIN &&
                (int64_t)u <= INT32_MAX) {
                *out = (int32_t)(int64_t)u;
                return 0;
            }
        }
        return fail(d, name, "unknown enum value \"%.40s\"", buf);
    }
    uint64_t u;
    if (get_int(d, name, true, INT32_MIN, INT32_MAX, &u))
        return -1;
    *out = (int32_t)(int64_t)u;
    return 0;
}

static int get_double(jdec *d, const char *name, double *out)
{
    const char *t;
    size_t n;
    char buf[72];
    switch (pl_jr_peek(&d->r)) {
    case PL_JT_NUMBER:
        if (!pl_jr_number(&d->r, &t, &n))
            return syntax(d);
        if (n >= sizeof buf) {
            /* Many digits: strtod needs them all to round correctly. */
            char *big = malloc(n + 1);
            if (!big)
                return oom(d);
            memcpy(big, t, n);
            big[n] = '\0';
            *out = strtod(big, NULL);
            free(big);
            return 0;
        }
        memcpy(buf, t, n);
        buf[n] = '\0';
        *out = strtod(buf, NULL);
        return 0;
    case PL_JT_STRING: {
        pl_jstr s;
        if (!pl_jr_string(&d->r, &s))
            return syntax(d);
        if (short_text(d, &s, buf, sizeof buf, &n))
            return -1;
        if (n < sizeof buf) {
            if (strcmp(buf, "NaN") == 0) {
                *out = NAN;
                return 0;
            }
            if (strcmp(buf, "Infinity") == 0) {
                *out = INFINITY;
                return 0;
            }
            if (strcmp(buf, "-Infinity") == 0) {
                *out = -INFINITY;
                return 0;
            }
            char *end;
            double x = strtod(buf, &end);
            if (*buf && !*end && isfinite(x)) {
                *out = x;
                return 0;
            }
        }
        return fail(d, name, "\"%.40s\" is not a number", buf);
    }
    case PL_JT_NONE:
        return syntax(d);
    default:
        if (!pl_jr_skip(&d->r))
            return syntax(d);
        return fail(d, name, "want a number");
    }
}

/* A string (or null: empty) as raw view; -1 with the error set otherwise. */
static int get_jstr(jdec *d, const char *name, const char *want, pl_jstr *s)
{
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_STRING)
        return pl_jr_string(&d->r, s) ? 0 : syntax(d);
    if (t == PL_JT_NULL) {
        *s = (pl_jstr){NULL, 0, false};
        return pl_jr_literal(&d->r) ? 0 : syntax(d);
    }
    if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
        return syntax(d);
    return fail(d, name, "%s", want);
}

/* Text fields point into the request unless they hold escapes. */
static int get_string(jdec *d, const char *name, pl_bytes *out)
{
    pl_jstr s;
    if (get_jstr(d, name, "want a string", &s))
        return -1;
    if (s.len == 0) {
        *out = (pl_bytes){NULL, 0};
        return 0;
    }
    if (s.len > UINT32_MAX)
        return fail(d, name, "string too long");
    if (!s.escaped) {
        *out = (pl_bytes){s.ptr, (uint32_t)s.len};
        return 0;
    }
    if (charge(d, s.len))
        return -1;
    uint8_t *p = pl_arena_alloc(d->arena, s.len);
    if (!p)
        return oom(d);
    long n = pl_jr_unescape(&s, p);
    if (n < 0)
        return fail(d, name, "invalid UTF-8");
    *out = (pl_bytes){n ? p : NULL, (uint32_t)n};
    return 0;
}

static int get_base64(jdec *d, const char *name, pl_bytes *out)
{
    pl_jstr s;
    if (get_jstr(d, name, "want a base64 string", &s))
        return -1;
    const char *text = (const char *)s.ptr;
    size_t n = s.len;
    if (charge(d, n))
        return -1;
    if (s.escaped) {
        uint8_t *u = pl_arena_alloc(d->arena, n + 1);
        if (!u)
            return oom(d);
        long m = pl_jr_unescape(&s, u);
        if (m < 0)
            return fail(d, name, "invalid base64 character");
        text = (const char *)u;
        n = (size_t)m;
    }
    while (n && text[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return fail(d, name, "bad base64 length");
    uint8_t *p = pl_arena_alloc(d->arena, n * 3 / 4 + 1);
    if (!p)
        return oom(d);
    size_t o = 0, bad = 0;
    if (pl_otlp_base64_decode_into(text, n, p, &o, &bad) != 0)
        return fail(d, name, "invalid base64 character at %zu", bad);
    *out = (pl_bytes){o ? p : NULL, (uint32_t)o};
    return 0;
}

static int get_hex_id(jdec *d, const char *name, uint8_t *dst, uint8_t *dst_len, size_t want)
{
    pl_jstr s;
    if (get_jstr(d, name, "want a hex string", &s))
        return -1;
    char buf[40];
    size_t n;
    if (short_text(d, &s, buf, sizeof buf, &n))
        return -1;
    if (n == 0) {
        *dst_len = 0;
        return 0;
    }
    if (n != 2 * want)
        return fail(d, name, "%zu hex chars, want %zu", n, 2 * want);
    if (pl_hex_decode(buf, n, dst, want))
        return fail(d, name, "invalid hex");
    *dst_len = (uint8_t)want;
    return 0;
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
            return oom(d);
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
                return syntax(d);
            return fail(d, NULL, "want an object");
        }
        return dec_msg(d, f->sub, elem, depth);
    case FK_I32S:
        if (get_int(d, NULL, true, INT32_MIN, INT32_MAX, &u))
            return -1;
        *(int32_t *)elem = (int32_t)(int64_t)u;
        return 0;
    case FK_I64S:
        if (get_int(d, NULL, true, INT64_MIN, INT64_MAX, &u))
            return -1;
        *(int64_t *)elem = (int64_t)u;
        return 0;
    case FK_U64S:
        return get_int(d, NULL, false, 0, UINT64_MAX, (uint64_t *)elem);
    default: /* FK_STRS */
        return get_string(d, NULL, (pl_bytes *)elem);
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

/* Fixed charge per element on top of its size: what a list of empty
 * objects costs beyond its structs (arena headers, the scratch copy). */
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
        return pl_jr_literal(&d->r) ? 0 : syntax(d);
    if (t != PL_JT_ARRAY) {
        if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
            return syntax(d);
        return fail(d, f->name, "want an array");
    }
    if (!pl_jr_array_begin(&d->r))
        return syntax(d);
    size_t size = elem_size(f), start = d->scratch_len;
    _Alignas(16) uint8_t elem[MAX_ELEM];
    unsigned k = 0;
    int rc;
    uint32_t n = 0;
    while ((rc = pl_jr_array_next(&d->r, &k)) == 1) {
        if (charge(d, size + ELEM_OVERHEAD))
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
        return syntax(d);
    if (n) {
        if (!(*items = arena_copy(d, d->scratch + start, (size_t)n * size)))
            return oom(d);
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
        return get_string(d, f->name, dst);
    case FK_B64:
        return get_base64(d, f->name, dst);
    case FK_ID:
        return get_hex_id(d, f->name, dst, base + f->aux, f->arg);
    case FK_U32:
        if (get_int(d, f->name, false, 0, UINT32_MAX, &u))
            return -1;
        *(uint32_t *)dst = (uint32_t)u;
        return 0;
    case FK_I32:
        if (get_int(d, f->name, true, INT32_MIN, INT32_MAX, &u))
            return -1;
        *(int32_t *)dst = (int32_t)(int64_t)u;
        return 0;
    case FK_U64:
        return get_int(d, f->name, false, 0, UINT64_MAX, dst);
    case FK_I64:
        if (get_int(d, f->name, true, INT64_MIN, INT64_MAX, &u))
            return -1;
        *(int64_t *)dst = (int64_t)u;
        return 0;
    case FK_ENUM:
        return get_enum(d, f->name, f->sub, f->arg, dst);
    case FK_MSG:
    case FK_ANY: {
        pl_jtype t = pl_jr_peek(&d->r);
        if (t == PL_JT_NULL)
            return pl_jr_literal(&d->r) ? 0 : syntax(d);
        path_push(d, f->name, -1);
        if (t != PL_JT_OBJECT) {
            if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                return syntax(d);
            return fail(d, NULL, "want an object");
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
        return syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        const jfield *f = find_field(m, &key);
        if (!f) {
            if (!pl_jr_skip(&d->r))
                return syntax(d);
            continue;
        }
        if (dec_field(d, f, dst, depth))
            return -1;
    }
    return rc < 0 ? syntax(d) : 0;
}

/* ---- AnyValue (a oneof) ------------------------------------------------- */

static const jfield f_any_kvlist = {"kvlistValue.values", 18,     FK_LIST,    0, 0,
                                    sizeof(void *),       NO_OFF, &m_keyvalue};

static int dec_array_values(jdec *d, pl_value *v, int depth)
{
    /* {"values": [AnyValue...]}; elements via the scratch stack. */
    if (!pl_jr_object_begin(&d->r))
        return syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    v->u.array.items = NULL;
    v->u.array.n = 0;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        if (!(key.len == 6 && memcmp(key.ptr, "values", 6) == 0)) {
            if (!pl_jr_skip(&d->r))
                return syntax(d);
            continue;
        }
        pl_jtype t = pl_jr_peek(&d->r);
        if (t == PL_JT_NULL) {
            if (!pl_jr_literal(&d->r))
                return syntax(d);
            continue;
        }
        if (t != PL_JT_ARRAY) {
            if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                return syntax(d);
            return fail(d, "arrayValue.values", "want an array");
        }
        if (!pl_jr_array_begin(&d->r))
            return syntax(d);
        size_t start = d->scratch_len;
        unsigned ak = 0;
        uint32_t n = 0;
        while ((rc = pl_jr_array_next(&d->r, &ak)) == 1) {
            pl_value item;
            memset(&item, 0, sizeof item);
            if (charge(d, sizeof item + ELEM_OVERHEAD))
                return -1;
            path_push(d, "arrayValue.values", n);
            if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
                if (!pl_jr_skip(&d->r))
                    return syntax(d);
                return fail(d, NULL, "want an object");
            }
            if (dec_anyvalue(d, &item, depth + 1))
                return -1;
            path_pop(d);
            if (scratch_push(d, &item, sizeof item))
                return -1;
            n++;
        }
        if (rc < 0)
            return syntax(d);
        v->u.array.items = NULL;
        if (n && !(v->u.array.items = arena_copy(d, d->scratch + start, n * sizeof(pl_value))))
            return oom(d);
        v->u.array.n = n;
        d->scratch_len = start;
    }
    return rc < 0 ? syntax(d) : 0;
}

static int dec_kvlist_values(jdec *d, pl_value *v, int depth)
{
    if (!pl_jr_object_begin(&d->r))
        return syntax(d);
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
            return syntax(d);
        }
    }
    return rc < 0 ? syntax(d) : 0;
}

static int dec_anyvalue(jdec *d, pl_value *v, int depth)
{
    memset(v, 0, sizeof(*v));
    if (depth > PL_OTLP_MAX_DEPTH) {
        fail(d, NULL, "values nested deeper than %d levels", PL_OTLP_MAX_DEPTH);
        return -1;
    }
    if (!pl_jr_object_begin(&d->r))
        return syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        if (pl_jr_peek(&d->r) == PL_JT_NULL) {
            if (!pl_jr_literal(&d->r))
                return syntax(d);
            continue;
        }
        char name[24];
        size_t n = key.len < sizeof name - 1 ? key.len : 0;
        memcpy(name, key.ptr, n);
        name[n] = '\0';
        uint64_t u;
#define IS(camel) (strcmp(name, camel) == 0 || pl_jr_key_folded_eq(key.ptr, key.len, camel))
        if (IS("stringValue")) {
            if (get_string(d, "stringValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_STRING;
        } else if (IS("boolValue")) {
            pl_jtype t = pl_jr_peek(&d->r);
            if (t != PL_JT_TRUE && t != PL_JT_FALSE) {
                if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                    return syntax(d);
                return fail(d, "boolValue", "want true or false");
            }
            if (!pl_jr_literal(&d->r))
                return syntax(d);
            v->u.b = t == PL_JT_TRUE;
            v->type = PL_VALUE_BOOL;
        } else if (IS("intValue")) {
            if (get_int(d, "intValue", true, INT64_MIN, INT64_MAX, &u))
                return -1;
            v->u.i = (int64_t)u;
            v->type = PL_VALUE_INT;
        } else if (IS("doubleValue")) {
            if (get_double(d, "doubleValue", &v->u.d))
                return -1;
            v->type = PL_VALUE_DOUBLE;
        } else if (IS("bytesValue")) {
            if (get_base64(d, "bytesValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_BYTES;
        } else if (IS("stringValueStrindex")) {
            if (get_int(d, "stringValueStrindex", true, INT32_MIN, INT32_MAX, &u))
                return -1;
            v->u.strindex = (int32_t)(int64_t)u;
            v->type = PL_VALUE_STRINDEX;
        } else if (IS("arrayValue") || IS("kvlistValue")) {
            bool array = IS("arrayValue");
            if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
                if (!pl_jr_skip(&d->r))
                    return syntax(d);
                return fail(d, array ? "arrayValue" : "kvlistValue", "want an object");
            }
            if (array ? dec_array_values(d, v, depth) : dec_kvlist_values(d, v, depth))
                return -1;
            v->type = array ? PL_VALUE_ARRAY : PL_VALUE_KVLIST;
        } else if (!pl_jr_skip(&d->r)) {
            return syntax(d);
        }
#undef IS
    }
    return rc < 0 ? syntax(d) : 0;
}

/* ---- entry points ------------------------------------------------------- */

static pl_status decode(pl_batch *b, const jmsg *root, void *dst, const uint8_t *buf, size_t len,
                        size_t budget, pl_err *err)
{
    jdec *d = calloc(1, sizeof(*d));
    if (!d)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory while decoding");
    pl_jr_init(&d->r, buf, len, JSON_MAX_DEPTH);
    d->arena = &b->arena;
    d->err = err;
    d->status = PL_ERR_INVALID;
    d->budget = budget;
    if (err)
        err->msg[0] = '\0';
    memset(dst, 0, root->size);
    int rc = 0;
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_OBJECT) {
        rc = dec_msg(d, root, dst, 0);
        if (rc == 0 && !pl_jr_finish(&d->r))
            rc = syntax(d);
    } else if (t == PL_JT_NONE || t == PL_JT_BAD) {
        pl_jr_fail(&d->r, t == PL_JT_NONE ? "unexpected end of input" : "unexpected character");
        rc = syntax(d);
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
