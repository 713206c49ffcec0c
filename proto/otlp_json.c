/*
 * otlp_json.c: see otlp_json.h.
 *
 * Decoding parses the body with json-c into a tree and walks it into the
 * model; every key is compared after folding case and dropping '_', so
 * "startTimeUnixNano" and "start_time_unix_nano" both match
 * "starttimeunixnano". Encoding does not build a tree: it writes the JSON
 * text directly into the output buffer.
 */
#include "otlp_json.h"

#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp_pb.h"

/* json-c nesting limit: each AnyValue level costs three JSON levels. */
#define JSON_MAX_DEPTH (3 * PL_OTLP_MAX_DEPTH + 32)
#define PATH_SLOTS     32

typedef struct jdec {
    pl_arena *arena;
    pl_err *err;
    pl_status status;
    bool profiles;
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

/* Folds a key: lower case, without '_'. Keys longer than the buffer never
 * match a field name. */
static void fold_key(const char *key, char *out, size_t cap)
{
    size_t n = 0;
    for (; *key && n + 1 < cap; key++) {
        char c = *key;
        if (c == '_')
            continue;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        out[n++] = c;
    }
    out[n] = '\0';
    if (*key)
        out[0] = '\0';
}

#define FOREACH_KEY(obj, k, v)                                                                     \
    char k[48];                                                                                    \
    struct json_object_iterator it_ = json_object_iter_begin(obj),                                 \
                                end_ = json_object_iter_end(obj);                                  \
    for (json_object *v = NULL; !json_object_iter_equal(&it_, &end_) &&                            \
                                (fold_key(json_object_iter_peek_name(&it_), k, sizeof k),          \
                                 v = json_object_iter_peek_value(&it_), 1);                        \
         json_object_iter_next(&it_))

#define KEY(name) (strcmp(k_, name) == 0)

/* ---- scalar readers ----------------------------------------------------- */

static int want_object(jdec *d, json_object *v, const char *name)
{
    if (!json_object_is_type(v, json_type_object))
        return fail(d, name, "want an object");
    return 0;
}

static int get_array(jdec *d, json_object *v, const char *name, size_t *n)
{
    if (json_object_is_type(v, json_type_null)) {
        *n = 0;
        return 0;
    }
    if (!json_object_is_type(v, json_type_array))
        return fail(d, name, "want an array");
    *n = json_object_array_length(v);
    if (*n > UINT32_MAX / 2)
        return fail(d, name, "array too long");
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

/* Integers: a JSON number (integral) or a decimal string. */
static int get_int(jdec *d, json_object *v, const char *name, bool is_signed, int64_t min,
                   uint64_t max_u, uint64_t *out)
{
    uint64_t u;
    switch (json_object_get_type(v)) {
    case json_type_int: {
        int64_t i = json_object_get_int64(v);
        if (i == INT64_MAX) {
            u = json_object_get_uint64(v);
            if (is_signed && u > (uint64_t)INT64_MAX)
                return fail(d, name, "integer out of range");
        } else {
            if (!is_signed && i < 0)
                return fail(d, name, "negative value for an unsigned field");
            u = (uint64_t)i;
        }
        break;
    }
    case json_type_double: {
        /* Exact powers of two bound the convertible range (2^63, 2^64). */
        double x = json_object_get_double(v);
        if (!isfinite(x) || x != floor(x) || x < (is_signed ? -9223372036854775808.0 : 0) ||
            x >= (is_signed ? 9223372036854775808.0 : 18446744073709551616.0))
            return fail(d, name, "want an integer");
        if (is_signed)
            u = (uint64_t)(int64_t)x;
        else
            u = (uint64_t)x;
        break;
    }
    case json_type_string:
        if (parse_decimal(json_object_get_string(v), (size_t)json_object_get_string_len(v),
                          is_signed, &u))
            return fail(d, name, "\"%.40s\" is not a decimal integer", json_object_get_string(v));
        break;
    case json_type_null:
        u = 0;
        break;
    default:
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

#define GET_U64(v, name, dst)                                                                      \
    do {                                                                                           \
        uint64_t u_;                                                                               \
        if (get_int(d, v, name, false, 0, UINT64_MAX, &u_))                                        \
            return -1;                                                                             \
        (dst) = u_;                                                                                \
    } while (0)
#define GET_I64(v, name, dst)                                                                      \
    do {                                                                                           \
        uint64_t u_;                                                                               \
        if (get_int(d, v, name, true, INT64_MIN, INT64_MAX, &u_))                                  \
            return -1;                                                                             \
        (dst) = (int64_t)u_;                                                                       \
    } while (0)
#define GET_U32(v, name, dst)                                                                      \
    do {                                                                                           \
        uint64_t u_;                                                                               \
        if (get_int(d, v, name, false, 0, UINT32_MAX, &u_))                                        \
            return -1;                                                                             \
        (dst) = (uint32_t)u_;                                                                      \
    } while (0)
#define GET_I32(v, name, dst)                                                                      \
    do {                                                                                           \
        uint64_t u_;                                                                               \
        if (get_int(d, v, name, true, INT32_MIN, INT32_MAX, &u_))                                  \
            return -1;                                                                             \
        (dst) = (int32_t)(int64_t)u_;                                                              \
    } while (0)

/* An enum: integer, or one of `names` (index = value). */
static int get_enum(jdec *d, json_object *v, const char *name, const char *const *names,
                    int n_names, int32_t *out)
{
    if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string(v);
        for (int i = 0; i < n_names; i++) {
            if (strcmp(s, names[i]) == 0) {
                *out = i;
                return 0;
            }
        }
        uint64_t u;
        if (parse_decimal(s, strlen(s), true, &u) == 0 && (int64_t)u >= INT32_MIN &&
            (int64_t)u <= INT32_MAX) {
            *out = (int32_t)(int64_t)u;
            return 0;
        }
        return fail(d, name, "unknown enum value \"%.40s\"", s);
    }
    GET_I32(v, name, *out);
    return 0;
}

static int get_double(jdec *d, json_object *v, const char *name, double *out)
{
    switch (json_object_get_type(v)) {
    case json_type_int:
    case json_type_double:
        *out = json_object_get_double(v);
        return 0;
    case json_type_string: {
        const char *s = json_object_get_string(v);
        if (strcmp(s, "NaN") == 0) {
            *out = NAN;
            return 0;
        }
        if (strcmp(s, "Infinity") == 0) {
            *out = INFINITY;
            return 0;
        }
        if (strcmp(s, "-Infinity") == 0) {
            *out = -INFINITY;
            return 0;
        }
        char *end;
        errno = 0;
        double x = strtod(s, &end);
        if (*s && !*end && errno == 0 && isfinite(x)) {
            *out = x;
            return 0;
        }
        return fail(d, name, "\"%.40s\" is not a number", s);
    }
    default:
        return fail(d, name, "want a number");
    }
}

static int get_bool(jdec *d, json_object *v, const char *name, bool *out)
{
    if (!json_object_is_type(v, json_type_boolean))
        return fail(d, name, "want true or false");
    *out = json_object_get_boolean(v);
    return 0;
}

static int get_string(jdec *d, json_object *v, const char *name, pl_bytes *out)
{
    if (json_object_is_type(v, json_type_null)) {
        *out = (pl_bytes){NULL, 0};
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return fail(d, name, "want a string");
    const char *s = json_object_get_string(v);
    size_t n = (size_t)json_object_get_string_len(v);
    if (!pl_utf8_valid((const uint8_t *)s, n))
        return fail(d, name, "invalid UTF-8");
    if (n == 0) {
        *out = (pl_bytes){NULL, 0};
        return 0;
    }
    char *p = pl_arena_memdup(d->arena, s, n);
    if (!p)
        return oom(d);
    *out = (pl_bytes){(const uint8_t *)p, (uint32_t)n};
    return 0;
}

static int get_base64(jdec *d, json_object *v, const char *name, pl_bytes *out)
{
    if (json_object_is_type(v, json_type_null)) {
        *out = (pl_bytes){NULL, 0};
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return fail(d, name, "want a base64 string");
    const char *s = json_object_get_string(v);
    size_t n = (size_t)json_object_get_string_len(v);
    while (n && s[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return fail(d, name, "bad base64 length");
    uint8_t *p = pl_arena_alloc(d->arena, n * 3 / 4 + 1);
    if (!p)
        return oom(d);
    size_t o = 0, bad = 0;
    if (pl_otlp_base64_decode_into(s, n, p, &o, &bad) != 0)
        return fail(d, name, "invalid base64 character at %zu", bad);
    *out = (pl_bytes){o ? p : NULL, (uint32_t)o};
    return 0;
}

static int get_hex_id(jdec *d, json_object *v, const char *name, uint8_t *dst, uint8_t *dst_len,
                      size_t want)
{
    if (json_object_is_type(v, json_type_null)) {
        *dst_len = 0;
        return 0;
    }
    if (!json_object_is_type(v, json_type_string))
        return fail(d, name, "want a hex string");
    const char *s = json_object_get_string(v);
    size_t n = (size_t)json_object_get_string_len(v);
    if (n == 0) {
        *dst_len = 0;
        return 0;
    }
    if (n != 2 * want)
        return fail(d, name, "%zu hex chars, want %zu", n, 2 * want);
    if (pl_hex_decode(s, n, dst, want))
        return fail(d, name, "invalid hex");
    *dst_len = (uint8_t)want;
    return 0;
}

/* Repeated integers into an arena array. */
static int get_int_list(jdec *d, json_object *v, const char *name, int elem, void **out,
                        uint32_t *n_out)
{
    size_t n;
    if (get_array(d, v, name, &n))
        return -1;
    *n_out = 0;
    *out = NULL;
    if (!n)
        return 0;
    void *arr = pl_arena_calloc(d->arena, n, elem == 4 ? 4 : 8);
    if (!arr)
        return oom(d);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        path_push(d, name, (int64_t)i);
        int rc = 0;
        if (elem == 4) {
            uint64_t u;
            rc = get_int(d, e, NULL, true, INT32_MIN, INT32_MAX, &u);
            ((int32_t *)arr)[i] = (int32_t)(int64_t)u;
        } else if (elem == 8) {
            uint64_t u;
            rc = get_int(d, e, NULL, true, INT64_MIN, INT64_MAX, &u);
            ((int64_t *)arr)[i] = (int64_t)u;
        } else {
            rc = get_int(d, e, NULL, false, 0, UINT64_MAX, &((uint64_t *)arr)[i]);
        }
        path_pop(d);
        if (rc)
            return -1;
    }
    *out = arr;
    *n_out = (uint32_t)n;
    return 0;
}

/* ---- common ------------------------------------------------------------- */

static int dec_anyvalue(jdec *d, json_object *o, pl_value *v, int depth);

static int dec_keyvalue(jdec *d, json_object *o, pl_kv *kv, int depth)
{
    memset(kv, 0, sizeof(*kv));
    if (want_object(d, o, NULL))
        return -1;
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("key")) {
            if (get_string(d, v, "key", &kv->key))
                return -1;
        } else if (KEY("value")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            path_push(d, "value", -1);
            if (dec_anyvalue(d, v, &kv->value, depth + 1))
                return -1;
            path_pop(d);
        } else if (KEY("keystrindex")) {
            GET_I32(v, "keyStrindex", kv->key_strindex);
        }
    }
    return 0;
}

static int dec_kv_array(jdec *d, json_object *v, const char *name, pl_kv **items, uint32_t *n_out,
                        int depth)
{
    size_t n;
    if (get_array(d, v, name, &n))
        return -1;
    *items = NULL;
    *n_out = 0;
    if (!n)
        return 0;
    pl_kv *arr = pl_arena_calloc(d->arena, n, sizeof(pl_kv));
    if (!arr)
        return oom(d);
    for (size_t i = 0; i < n; i++) {
        path_push(d, name, (int64_t)i);
        if (dec_keyvalue(d, json_object_array_get_idx(v, i), &arr[i], depth))
            return -1;
        path_pop(d);
    }
    *items = arr;
    *n_out = (uint32_t)n;
    return 0;
}

static int dec_attrs(jdec *d, json_object *v, const char *name, pl_attrs *a)
{
    if (dec_kv_array(d, v, name, &a->items, &a->n, 0))
        return -1;
    a->cap = a->n;
    return 0;
}

static int dec_anyvalue(jdec *d, json_object *o, pl_value *v, int depth)
{
    memset(v, 0, sizeof(*v));
    if (depth > PL_OTLP_MAX_DEPTH)
        return fail(d, NULL, "values nested deeper than %d levels", PL_OTLP_MAX_DEPTH);
    if (want_object(d, o, NULL))
        return -1;
    FOREACH_KEY(o, k_, x)
    {
        if (json_object_is_type(x, json_type_null))
            continue;
        if (KEY("stringvalue")) {
            if (get_string(d, x, "stringValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_STRING;
        } else if (KEY("boolvalue")) {
            if (get_bool(d, x, "boolValue", &v->u.b))
                return -1;
            v->type = PL_VALUE_BOOL;
        } else if (KEY("intvalue")) {
            GET_I64(x, "intValue", v->u.i);
            v->type = PL_VALUE_INT;
        } else if (KEY("doublevalue")) {
            if (get_double(d, x, "doubleValue", &v->u.d))
                return -1;
            v->type = PL_VALUE_DOUBLE;
        } else if (KEY("bytesvalue")) {
            if (get_base64(d, x, "bytesValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_BYTES;
        } else if (KEY("stringvaluestrindex")) {
            GET_I32(x, "stringValueStrindex", v->u.strindex);
            v->type = PL_VALUE_STRINDEX;
        } else if (KEY("arrayvalue")) {
            if (want_object(d, x, "arrayValue"))
                return -1;
            pl_value *items = NULL;
            size_t n = 0;
            json_object *vals;
            if (json_object_object_get_ex(x, "values", &vals)) {
                if (get_array(d, vals, "arrayValue.values", &n))
                    return -1;
                if (n && !(items = pl_arena_calloc(d->arena, n, sizeof(pl_value))))
                    return oom(d);
                for (size_t i = 0; i < n; i++) {
                    path_push(d, "arrayValue.values", (int64_t)i);
                    if (dec_anyvalue(d, json_object_array_get_idx(vals, i), &items[i], depth + 1))
                        return -1;
                    path_pop(d);
                }
            }
            v->type = PL_VALUE_ARRAY;
            v->u.array.items = items;
            v->u.array.n = (uint32_t)n;
        } else if (KEY("kvlistvalue")) {
            if (want_object(d, x, "kvlistValue"))
                return -1;
            pl_kv *items = NULL;
            uint32_t n = 0;
            json_object *vals;
            if (json_object_object_get_ex(x, "values", &vals) &&
                dec_kv_array(d, vals, "kvlistValue.values", &items, &n, depth + 1))
                return -1;
            v->type = PL_VALUE_KVLIST;
            v->u.kvlist.items = items;
            v->u.kvlist.n = n;
        }
    }
    return 0;
}

static int dec_entity_ref(jdec *d, json_object *o, pl_entity_ref *e)
{
    if (want_object(d, o, NULL))
        return -1;
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("schemaurl")) {
            if (get_string(d, v, "schemaUrl", &e->schema_url))
                return -1;
        } else if (KEY("type")) {
            if (get_string(d, v, "type", &e->type))
                return -1;
        } else if (KEY("idkeys") || KEY("descriptionkeys")) {
            bool id = KEY("idkeys");
            const char *name = id ? "idKeys" : "descriptionKeys";
            size_t n;
            if (get_array(d, v, name, &n))
                return -1;
            pl_bytes *arr = NULL;
            if (n && !(arr = pl_arena_calloc(d->arena, n, sizeof(pl_bytes))))
                return oom(d);
            for (size_t i = 0; i < n; i++) {
                path_push(d, name, (int64_t)i);
                int rc = get_string(d, json_object_array_get_idx(v, i), NULL, &arr[i]);
                path_pop(d);
                if (rc)
                    return -1;
            }
            if (id) {
                e->id_keys = arr;
                e->n_id_keys = (uint32_t)n;
            } else {
                e->description_keys = arr;
                e->n_description_keys = (uint32_t)n;
            }
        }
    }
    return 0;
}

static int dec_resource(jdec *d, json_object *o, pl_resource *r)
{
    if (want_object(d, o, NULL))
        return -1;
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("attributes")) {
            if (dec_attrs(d, v, "attributes", &r->attrs))
                return -1;
        } else if (KEY("droppedattributescount")) {
            GET_U32(v, "droppedAttributesCount", r->dropped_attributes_count);
        } else if (KEY("entityrefs")) {
            size_t n;
            if (get_array(d, v, "entityRefs", &n))
                return -1;
            if (n && !(r->entity_refs = pl_arena_calloc(d->arena, n, sizeof(pl_entity_ref))))
                return oom(d);
            for (size_t i = 0; i < n; i++) {
                path_push(d, "entityRefs", (int64_t)i);
                if (dec_entity_ref(d, json_object_array_get_idx(v, i), &r->entity_refs[i]))
                    return -1;
                path_pop(d);
            }
            r->n_entity_refs = (uint32_t)n;
        }
    }
    return 0;
}

static int dec_scope(jdec *d, json_object *o, pl_scope *s)
{
    if (want_object(d, o, NULL))
        return -1;
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("name")) {
            if (get_string(d, v, "name", &s->name))
                return -1;
        } else if (KEY("version")) {
            if (get_string(d, v, "version", &s->version))
                return -1;
        } else if (KEY("attributes")) {
            if (dec_attrs(d, v, "attributes", &s->attrs))
                return -1;
        } else if (KEY("droppedattributescount")) {
            GET_U32(v, "droppedAttributesCount", s->dropped_attributes_count);
        }
    }
    return 0;
}

/* Decodes an array of objects with fn into an arena array. */
#define DEC_LIST(v, name, type, fn, out, n_out)                                                    \
    do {                                                                                           \
        size_t n_;                                                                                 \
        if (get_array(d, (v), (name), &n_))                                                        \
            return -1;                                                                             \
        type *arr_ = NULL;                                                                         \
        if (n_ && !(arr_ = pl_arena_calloc(d->arena, n_, sizeof(type))))                           \
            return oom(d);                                                                         \
        for (size_t i_ = 0; i_ < n_; i_++) {                                                       \
            path_push(d, (name), (int64_t)i_);                                                     \
            json_object *e_ = json_object_array_get_idx((v), i_);                                  \
            if (want_object(d, e_, NULL) || fn(d, e_, &arr_[i_]))                                  \
                return -1;                                                                         \
            path_pop(d);                                                                           \
        }                                                                                          \
        (out) = arr_;                                                                              \
        (n_out) = (uint32_t)n_;                                                                    \
    } while (0)

/* ---- traces ------------------------------------------------------------- */

static const char *const span_kind_names[] = {"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL",
                                              "SPAN_KIND_SERVER",      "SPAN_KIND_CLIENT",
                                              "SPAN_KIND_PRODUCER",    "SPAN_KIND_CONSUMER"};
static const char *const status_code_names[] = {"STATUS_CODE_UNSET", "STATUS_CODE_OK",
                                                "STATUS_CODE_ERROR"};

static int dec_event(jdec *d, json_object *o, pl_span_event *ev)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("timeunixnano")) {
            GET_U64(v, "timeUnixNano", ev->time_unix_nano);
        } else if (KEY("name")) {
            if (get_string(d, v, "name", &ev->name))
                return -1;
        } else if (KEY("attributes")) {
            if (dec_attrs(d, v, "attributes", &ev->attrs))
                return -1;
        } else if (KEY("droppedattributescount")) {
            GET_U32(v, "droppedAttributesCount", ev->dropped_attributes_count);
        }
    }
    return 0;
}

static int dec_span_link(jdec *d, json_object *o, pl_span_link *l)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("traceid")) {
            if (get_hex_id(d, v, "traceId", l->trace_id, &l->trace_id_len, 16))
                return -1;
        } else if (KEY("spanid")) {
            if (get_hex_id(d, v, "spanId", l->span_id, &l->span_id_len, 8))
                return -1;
        } else if (KEY("tracestate")) {
            if (get_string(d, v, "traceState", &l->trace_state))
                return -1;
        } else if (KEY("attributes")) {
            if (dec_attrs(d, v, "attributes", &l->attrs))
                return -1;
        } else if (KEY("droppedattributescount")) {
            GET_U32(v, "droppedAttributesCount", l->dropped_attributes_count);
        } else if (KEY("flags")) {
            GET_U32(v, "flags", l->flags);
        }
    }
    return 0;
}

static int dec_span(jdec *d, json_object *o, pl_span *sp)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("traceid")) {
            if (get_hex_id(d, v, "traceId", sp->trace_id, &sp->trace_id_len, 16))
                return -1;
        } else if (KEY("spanid")) {
            if (get_hex_id(d, v, "spanId", sp->span_id, &sp->span_id_len, 8))
                return -1;
        } else if (KEY("parentspanid")) {
            if (get_hex_id(d, v, "parentSpanId", sp->parent_span_id, &sp->parent_span_id_len, 8))
                return -1;
        } else if (KEY("tracestate")) {
            if (get_string(d, v, "traceState", &sp->trace_state))
                return -1;
        } else if (KEY("flags")) {
            GET_U32(v, "flags", sp->flags);
        } else if (KEY("name")) {
            if (get_string(d, v, "name", &sp->name))
                return -1;
        } else if (KEY("kind")) {
            if (get_enum(d, v, "kind", span_kind_names, 6, &sp->kind))
                return -1;
        } else if (KEY("starttimeunixnano")) {
            GET_U64(v, "startTimeUnixNano", sp->start_time_unix_nano);
        } else if (KEY("endtimeunixnano")) {
            GET_U64(v, "endTimeUnixNano", sp->end_time_unix_nano);
        } else if (KEY("attributes")) {
            if (dec_attrs(d, v, "attributes", &sp->attrs))
                return -1;
        } else if (KEY("droppedattributescount")) {
            GET_U32(v, "droppedAttributesCount", sp->dropped_attributes_count);
        } else if (KEY("events")) {
            DEC_LIST(v, "events", pl_span_event, dec_event, sp->events, sp->n_events);
        } else if (KEY("droppedeventscount")) {
            GET_U32(v, "droppedEventsCount", sp->dropped_events_count);
        } else if (KEY("links")) {
            DEC_LIST(v, "links", pl_span_link, dec_span_link, sp->links, sp->n_links);
        } else if (KEY("droppedlinkscount")) {
            GET_U32(v, "droppedLinksCount", sp->dropped_links_count);
        } else if (KEY("status")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            if (want_object(d, v, "status"))
                return -1;
            path_push(d, "status", -1);
            FOREACH_KEY(v, s_, x)
            {
#define SKEY(name) (strcmp(s_, name) == 0)
                if (SKEY("message")) {
                    if (get_string(d, x, "message", &sp->status.message))
                        return -1;
                } else if (SKEY("code")) {
                    if (get_enum(d, x, "code", status_code_names, 3, &sp->status.code))
                        return -1;
                }
#undef SKEY
            }
            path_pop(d);
            sp->has_status = true;
        }
    }
    return 0;
}

static int dec_scope_spans(jdec *d, json_object *o, pl_scope_spans *ss)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("scope")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            path_push(d, "scope", -1);
            if (dec_scope(d, v, &ss->scope))
                return -1;
            path_pop(d);
            ss->has_scope = true;
        } else if (KEY("spans")) {
            DEC_LIST(v, "spans", pl_span, dec_span, ss->spans, ss->n_spans);
        } else if (KEY("schemaurl")) {
            if (get_string(d, v, "schemaUrl", &ss->schema_url))
                return -1;
        }
    }
    return 0;
}

static int dec_resource_spans(jdec *d, json_object *o, pl_resource_spans *rs)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("resource")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            path_push(d, "resource", -1);
            if (dec_resource(d, v, &rs->resource))
                return -1;
            path_pop(d);
            rs->has_resource = true;
        } else if (KEY("scopespans")) {
            DEC_LIST(v, "scopeSpans", pl_scope_spans, dec_scope_spans, rs->scopes, rs->n_scopes);
        } else if (KEY("schemaurl")) {
            if (get_string(d, v, "schemaUrl", &rs->schema_url))
                return -1;
        }
    }
    return 0;
}

static json_object *parse_json(jdec *d, const uint8_t *buf, size_t len)
{
    if (len > INT32_MAX) {
        d->status = PL_ERR_TOO_LARGE;
        fail(d, NULL, "body of %zu bytes is too large", len);
        return NULL;
    }
    json_tokener *tok = json_tokener_new_ex(JSON_MAX_DEPTH);
    if (!tok) {
        oom(d);
        return NULL;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    json_object *root = json_tokener_parse_ex(tok, (const char *)buf, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        if (root)
            json_object_put(root);
        fail(d, NULL, "invalid JSON at offset %zu: %s", end,
             jerr == json_tokener_continue ? "unexpected end of input"
                                           : json_tokener_error_desc(jerr));
        return NULL;
    }
    for (; end < len; end++) {
        if (buf[end] != ' ' && buf[end] != '\n' && buf[end] != '\r' && buf[end] != '\t') {
            json_object_put(root);
            fail(d, NULL, "invalid JSON: trailing data at offset %zu", end);
            return NULL;
        }
    }
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        fail(d, NULL, "the request must be a JSON object");
        return NULL;
    }
    return root;
}

static void jdec_init(jdec *d, pl_batch *b, pl_err *err)
{
    memset(d, 0, sizeof(*d));
    d->arena = &b->arena;
    d->err = err;
    d->status = PL_ERR_INVALID;
    if (err)
        err->msg[0] = '\0';
}

static int dec_traces_root(jdec *d, json_object *root, pl_traces *t)
{
    FOREACH_KEY(root, k_, v)
    {
        if (KEY("resourcespans"))
            DEC_LIST(v, "resourceSpans", pl_resource_spans, dec_resource_spans, t->resources,
                     t->n_resources);
    }
    return 0;
}

pl_status pl_otlp_json_decode_traces(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err)
{
    jdec dd, *d = &dd;
    jdec_init(d, b, err);
    memset(&b->data.traces, 0, sizeof(b->data.traces));
    json_object *root = parse_json(d, buf, len);
    if (!root)
        return d->status;
    int rc = dec_traces_root(d, root, &b->data.traces);
    json_object_put(root);
    return rc ? d->status : PL_OK;
}

/* ---- profiles ----------------------------------------------------------- */

static int dec_value_type(jdec *d, json_object *o, pl_vtype *vt)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("typestrindex"))
            GET_I32(v, "typeStrindex", vt->type_strindex);
        else if (KEY("unitstrindex"))
            GET_I32(v, "unitStrindex", vt->unit_strindex);
    }
    return 0;
}

static int dec_sample(jdec *d, json_object *o, pl_sample *s)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("stackindex")) {
            GET_I32(v, "stackIndex", s->stack_index);
        } else if (KEY("attributeindices")) {
            if (get_int_list(d, v, "attributeIndices", 4, (void **)&s->attribute_indices,
                             &s->n_attribute_indices))
                return -1;
        } else if (KEY("linkindex")) {
            GET_I32(v, "linkIndex", s->link_index);
        } else if (KEY("values")) {
            if (get_int_list(d, v, "values", 8, (void **)&s->values, &s->n_values))
                return -1;
        } else if (KEY("timestampsunixnano")) {
            if (get_int_list(d, v, "timestampsUnixNano", 0, (void **)&s->timestamps_unix_nano,
                             &s->n_timestamps))
                return -1;
        }
    }
    return 0;
}

static int dec_profile(jdec *d, json_object *o, pl_profile *p)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("sampletype") || KEY("periodtype")) {
            bool st = KEY("sampletype");
            if (json_object_is_type(v, json_type_null))
                continue;
            const char *name = st ? "sampleType" : "periodType";
            if (want_object(d, v, name))
                return -1;
            path_push(d, name, -1);
            if (dec_value_type(d, v, st ? &p->sample_type : &p->period_type))
                return -1;
            path_pop(d);
            if (st)
                p->has_sample_type = true;
            else
                p->has_period_type = true;
        } else if (KEY("samples")) {
            DEC_LIST(v, "samples", pl_sample, dec_sample, p->samples, p->n_samples);
        } else if (KEY("timeunixnano")) {
            GET_U64(v, "timeUnixNano", p->time_unix_nano);
        } else if (KEY("durationnano")) {
            GET_U64(v, "durationNano", p->duration_nano);
        } else if (KEY("period")) {
            GET_I64(v, "period", p->period);
        } else if (KEY("profileid")) {
            if (get_hex_id(d, v, "profileId", p->profile_id, &p->profile_id_len, 16))
                return -1;
        } else if (KEY("droppedattributescount")) {
            GET_U32(v, "droppedAttributesCount", p->dropped_attributes_count);
        } else if (KEY("originalpayloadformat")) {
            if (get_string(d, v, "originalPayloadFormat", &p->original_payload_format))
                return -1;
        } else if (KEY("originalpayload")) {
            if (get_base64(d, v, "originalPayload", &p->original_payload))
                return -1;
        } else if (KEY("attributeindices")) {
            if (get_int_list(d, v, "attributeIndices", 4, (void **)&p->attribute_indices,
                             &p->n_attribute_indices))
                return -1;
        }
    }
    return 0;
}

static int dec_scope_profiles(jdec *d, json_object *o, pl_scope_profiles *sp)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("scope")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            path_push(d, "scope", -1);
            if (dec_scope(d, v, &sp->scope))
                return -1;
            path_pop(d);
            sp->has_scope = true;
        } else if (KEY("profiles")) {
            DEC_LIST(v, "profiles", pl_profile, dec_profile, sp->profiles, sp->n_profiles);
        } else if (KEY("schemaurl")) {
            if (get_string(d, v, "schemaUrl", &sp->schema_url))
                return -1;
        }
    }
    return 0;
}

static int dec_resource_profiles(jdec *d, json_object *o, pl_resource_profiles *rp)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("resource")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            path_push(d, "resource", -1);
            if (dec_resource(d, v, &rp->resource))
                return -1;
            path_pop(d);
            rp->has_resource = true;
        } else if (KEY("scopeprofiles")) {
            DEC_LIST(v, "scopeProfiles", pl_scope_profiles, dec_scope_profiles, rp->scopes,
                     rp->n_scopes);
        } else if (KEY("schemaurl")) {
            if (get_string(d, v, "schemaUrl", &rp->schema_url))
                return -1;
        }
    }
    return 0;
}

static int dec_mapping(jdec *d, json_object *o, pl_mapping *m)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("memorystart")) {
            GET_U64(v, "memoryStart", m->memory_start);
        } else if (KEY("memorylimit")) {
            GET_U64(v, "memoryLimit", m->memory_limit);
        } else if (KEY("fileoffset")) {
            GET_U64(v, "fileOffset", m->file_offset);
        } else if (KEY("filenamestrindex")) {
            GET_I32(v, "filenameStrindex", m->filename_strindex);
        } else if (KEY("attributeindices")) {
            if (get_int_list(d, v, "attributeIndices", 4, (void **)&m->attribute_indices,
                             &m->n_attribute_indices))
                return -1;
        }
    }
    return 0;
}

static int dec_line(jdec *d, json_object *o, pl_line *l)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("functionindex"))
            GET_I32(v, "functionIndex", l->function_index);
        else if (KEY("line"))
            GET_I64(v, "line", l->line);
        else if (KEY("column"))
            GET_I64(v, "column", l->column);
    }
    return 0;
}

static int dec_location(jdec *d, json_object *o, pl_location *l)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("mappingindex")) {
            GET_I32(v, "mappingIndex", l->mapping_index);
        } else if (KEY("address")) {
            GET_U64(v, "address", l->address);
        } else if (KEY("lines")) {
            DEC_LIST(v, "lines", pl_line, dec_line, l->lines, l->n_lines);
        } else if (KEY("attributeindices")) {
            if (get_int_list(d, v, "attributeIndices", 4, (void **)&l->attribute_indices,
                             &l->n_attribute_indices))
                return -1;
        }
    }
    return 0;
}

static int dec_function(jdec *d, json_object *o, pl_function *f)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("namestrindex"))
            GET_I32(v, "nameStrindex", f->name_strindex);
        else if (KEY("systemnamestrindex"))
            GET_I32(v, "systemNameStrindex", f->system_name_strindex);
        else if (KEY("filenamestrindex"))
            GET_I32(v, "filenameStrindex", f->filename_strindex);
        else if (KEY("startline"))
            GET_I64(v, "startLine", f->start_line);
    }
    return 0;
}

static int dec_link(jdec *d, json_object *o, pl_link *l)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("traceid")) {
            if (get_hex_id(d, v, "traceId", l->trace_id, &l->trace_id_len, 16))
                return -1;
        } else if (KEY("spanid")) {
            if (get_hex_id(d, v, "spanId", l->span_id, &l->span_id_len, 8))
                return -1;
        }
    }
    return 0;
}

static int dec_kvu(jdec *d, json_object *o, pl_kvu *a)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("keystrindex")) {
            GET_I32(v, "keyStrindex", a->key_strindex);
        } else if (KEY("unitstrindex")) {
            GET_I32(v, "unitStrindex", a->unit_strindex);
        } else if (KEY("value")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            path_push(d, "value", -1);
            if (dec_anyvalue(d, v, &a->value, 1))
                return -1;
            path_pop(d);
        }
    }
    return 0;
}

static int dec_stack(jdec *d, json_object *o, pl_stack *s)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("locationindices") &&
            get_int_list(d, v, "locationIndices", 4, (void **)&s->location_indices,
                         &s->n_location_indices))
            return -1;
    }
    return 0;
}

static int dec_dictionary(jdec *d, json_object *o, pl_dictionary *t)
{
    FOREACH_KEY(o, k_, v)
    {
        if (KEY("mappingtable")) {
            DEC_LIST(v, "mappingTable", pl_mapping, dec_mapping, t->mappings, t->n_mappings);
            t->cap_mappings = t->n_mappings;
        } else if (KEY("locationtable")) {
            DEC_LIST(v, "locationTable", pl_location, dec_location, t->locations, t->n_locations);
            t->cap_locations = t->n_locations;
        } else if (KEY("functiontable")) {
            DEC_LIST(v, "functionTable", pl_function, dec_function, t->functions, t->n_functions);
            t->cap_functions = t->n_functions;
        } else if (KEY("linktable")) {
            DEC_LIST(v, "linkTable", pl_link, dec_link, t->links, t->n_links);
            t->cap_links = t->n_links;
        } else if (KEY("attributetable")) {
            DEC_LIST(v, "attributeTable", pl_kvu, dec_kvu, t->attributes, t->n_attributes);
            t->cap_attributes = t->n_attributes;
        } else if (KEY("stacktable")) {
            DEC_LIST(v, "stackTable", pl_stack, dec_stack, t->stacks, t->n_stacks);
            t->cap_stacks = t->n_stacks;
        } else if (KEY("stringtable")) {
            size_t n;
            if (get_array(d, v, "stringTable", &n))
                return -1;
            pl_bytes *arr = NULL;
            if (n && !(arr = pl_arena_calloc(d->arena, n, sizeof(pl_bytes))))
                return oom(d);
            for (size_t i = 0; i < n; i++) {
                path_push(d, "stringTable", (int64_t)i);
                int rc = get_string(d, json_object_array_get_idx(v, i), NULL, &arr[i]);
                path_pop(d);
                if (rc)
                    return -1;
            }
            t->strings = arr;
            t->n_strings = t->cap_strings = (uint32_t)n;
        }
    }
    return 0;
}

static int dec_profiles_root(jdec *d, json_object *root, pl_profiles *p)
{
    FOREACH_KEY(root, k_, v)
    {
        if (KEY("resourceprofiles")) {
            DEC_LIST(v, "resourceProfiles", pl_resource_profiles, dec_resource_profiles,
                     p->resources, p->n_resources);
        } else if (KEY("dictionary")) {
            if (json_object_is_type(v, json_type_null))
                continue;
            if (want_object(d, v, "dictionary"))
                return -1;
            path_push(d, "dictionary", -1);
            if (dec_dictionary(d, v, &p->dict))
                return -1;
            path_pop(d);
            p->has_dictionary = true;
        }
    }
    return 0;
}

pl_status pl_otlp_json_decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, pl_err *err)
{
    jdec dd, *d = &dd;
    jdec_init(d, b, err);
    d->profiles = true;
    memset(&b->data.profiles, 0, sizeof(b->data.profiles));
    json_object *root = parse_json(d, buf, len);
    if (!root)
        return d->status;
    int rc = dec_profiles_root(d, root, &b->data.profiles);
    json_object_put(root);
    if (rc)
        return d->status;
    return pl_otlp_validate_profiles(&b->data.profiles, err);
}

/* ---- encoder ------------------------------------------------------------ */

/* The writer tracks whether the current object already has a member, so
 * that optional members can be left out without comma bookkeeping at each
 * call site. */
typedef struct jw {
    pl_buf *b;
    bool first; /* no member written yet in the current object/array */
} jw;

static void w_key(jw *w, const char *key)
{
    size_t n = strlen(key);
    if (!pl_buf_reserve(w->b, n + 4))
        return;
    uint8_t *p = w->b->data + w->b->len;
    if (!w->first)
        *p++ = ',';
    *p++ = '"';
    memcpy(p, key, n);
    p += n;
    *p++ = '"';
    *p++ = ':';
    w->b->len = (size_t)(p - w->b->data);
    w->first = false;
}

static void w_open(jw *w, char c)
{
    pl_buf_append_byte(w->b, (uint8_t)c);
    w->first = true;
}

static void w_close(jw *w, char c)
{
    pl_buf_append_byte(w->b, (uint8_t)c);
    w->first = false;
}

static void w_elem(jw *w)
{
    if (!w->first)
        pl_buf_append_byte(w->b, ',');
    w->first = false;
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

void pl_otlp_base64_encode(pl_buf *b, const uint8_t *s, size_t n)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n == 0 || !pl_buf_reserve(b, (n + 2) / 3 * 4))
        return;
    uint8_t *p = b->data + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t x = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        *p++ = (uint8_t)tbl[x >> 18];
        *p++ = (uint8_t)tbl[(x >> 12) & 63];
        *p++ = (uint8_t)tbl[(x >> 6) & 63];
        *p++ = (uint8_t)tbl[x & 63];
    }
    if (i < n) {
        uint32_t x = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        *p++ = (uint8_t)tbl[x >> 18];
        *p++ = (uint8_t)tbl[(x >> 12) & 63];
        *p++ = i + 1 < n ? (uint8_t)tbl[(x >> 6) & 63] : '=';
        *p++ = '=';
    }
    b->len = (size_t)(p - b->data);
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int pl_otlp_base64_decode_into(const char *in, size_t n, uint8_t *out, size_t *out_len,
                               size_t *bad_at)
{
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int x = b64_value((unsigned char)in[i]);
        if (x < 0) {
            *bad_at = i;
            return -1;
        }
        acc = acc << 6 | (uint32_t)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    *out_len = o;
    return 0;
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
        w_key(w, "arrayValue");
        w_open(w, '{');
        if (v->u.array.n) {
            w_key(w, "values");
            w_open(w, '[');
            for (uint32_t i = 0; i < v->u.array.n; i++) {
                w_elem(w);
                enc_anyvalue(w, &v->u.array.items[i]);
            }
            w_close(w, ']');
        }
        w_close(w, '}');
        break;
    case PL_VALUE_KVLIST:
        w_key(w, "kvlistValue");
        w_open(w, '{');
        if (v->u.kvlist.n) {
            w_key(w, "values");
            w_open(w, '[');
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
    w_key(w, key);
    w_open(w, '[');
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
    w_key(w, key);
    w_open(w, '[');
    for (uint32_t i = 0; i < n; i++) {
        w_elem(w);
        pl_buf_json_string(w->b, s[i].ptr, s[i].len);
    }
    w_close(w, ']');
}

static void enc_resource(jw *w, const pl_resource *r)
{
    w_key(w, "resource");
    w_open(w, '{');
    enc_attrs(w, "attributes", &r->attrs);
    w_u32(w, "droppedAttributesCount", r->dropped_attributes_count);
    if (r->n_entity_refs) {
        w_key(w, "entityRefs");
        w_open(w, '[');
        for (uint32_t i = 0; i < r->n_entity_refs; i++) {
            const pl_entity_ref *e = &r->entity_refs[i];
            w_elem(w);
            w_open(w, '{');
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
    w_key(w, "scope");
    w_open(w, '{');
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
        w_key(w, "events");
        w_open(w, '[');
        for (uint32_t i = 0; i < sp->n_events; i++) {
            const pl_span_event *ev = &sp->events[i];
            w_elem(w);
            w_open(w, '{');
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
        w_key(w, "links");
        w_open(w, '[');
        for (uint32_t i = 0; i < sp->n_links; i++) {
            const pl_span_link *l = &sp->links[i];
            w_elem(w);
            w_open(w, '{');
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
        w_key(w, "status");
        w_open(w, '{');
        w_bytes_str(w, "message", sp->status.message);
        w_i32(w, "code", sp->status.code);
        w_close(w, '}');
    }
    w_close(w, '}');
}

bool pl_otlp_json_encode_traces(const pl_traces *t, pl_buf *out)
{
    jw ww = {out, true}, *w = &ww;
    w_open(w, '{');
    if (t->n_resources) {
        w_key(w, "resourceSpans");
        w_open(w, '[');
        for (uint32_t r = 0; r < t->n_resources; r++) {
            const pl_resource_spans *rs = &t->resources[r];
            w_elem(w);
            w_open(w, '{');
            if (rs->has_resource)
                enc_resource(w, &rs->resource);
            if (rs->n_scopes) {
                w_key(w, "scopeSpans");
                w_open(w, '[');
                for (uint32_t s = 0; s < rs->n_scopes; s++) {
                    const pl_scope_spans *ss = &rs->scopes[s];
                    w_elem(w);
                    w_open(w, '{');
                    if (ss->has_scope)
                        enc_scope(w, &ss->scope);
                    if (ss->n_spans) {
                        w_key(w, "spans");
                        w_open(w, '[');
                        for (uint32_t i = 0; i < ss->n_spans; i++) {
                            w_elem(w);
                            enc_span(w, &ss->spans[i]);
                        }
                        w_close(w, ']');
                    }
                    w_bytes_str(w, "schemaUrl", ss->schema_url);
                    w_close(w, '}');
                }
                w_close(w, ']');
            }
            w_bytes_str(w, "schemaUrl", rs->schema_url);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    w_close(w, '}');
    return pl_buf_ok(out);
}

static void enc_i32_list(jw *w, const char *key, const int32_t *v, uint32_t n)
{
    if (!n)
        return;
    w_key(w, key);
    w_open(w, '[');
    for (uint32_t i = 0; i < n; i++) {
        w_elem(w);
        pl_buf_printf(w->b, "%" PRId32, v[i]);
    }
    w_close(w, ']');
}

static void enc_value_type(jw *w, const char *key, const pl_vtype *vt)
{
    w_key(w, key);
    w_open(w, '{');
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
        w_key(w, "samples");
        w_open(w, '[');
        for (uint32_t i = 0; i < p->n_samples; i++) {
            const pl_sample *s = &p->samples[i];
            w_elem(w);
            w_open(w, '{');
            w_i32(w, "stackIndex", s->stack_index);
            enc_i32_list(w, "attributeIndices", s->attribute_indices, s->n_attribute_indices);
            w_i32(w, "linkIndex", s->link_index);
            if (s->n_values) {
                w_key(w, "values");
                w_open(w, '[');
                for (uint32_t k = 0; k < s->n_values; k++) {
                    w_elem(w);
                    pl_buf_printf(w->b, "\"%" PRId64 "\"", s->values[k]);
                }
                w_close(w, ']');
            }
            if (s->n_timestamps) {
                w_key(w, "timestampsUnixNano");
                w_open(w, '[');
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
    w_key(w, "dictionary");
    w_open(w, '{');
    if (d->n_mappings) {
        w_key(w, "mappingTable");
        w_open(w, '[');
        for (uint32_t i = 0; i < d->n_mappings; i++) {
            const pl_mapping *m = &d->mappings[i];
            w_elem(w);
            w_open(w, '{');
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
        w_key(w, "locationTable");
        w_open(w, '[');
        for (uint32_t i = 0; i < d->n_locations; i++) {
            const pl_location *l = &d->locations[i];
            w_elem(w);
            w_open(w, '{');
            w_i32(w, "mappingIndex", l->mapping_index);
            w_u64(w, "address", l->address);
            if (l->n_lines) {
                w_key(w, "lines");
                w_open(w, '[');
                for (uint32_t k = 0; k < l->n_lines; k++) {
                    w_elem(w);
                    w_open(w, '{');
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
        w_key(w, "functionTable");
        w_open(w, '[');
        for (uint32_t i = 0; i < d->n_functions; i++) {
            const pl_function *f = &d->functions[i];
            w_elem(w);
            w_open(w, '{');
            w_i32(w, "nameStrindex", f->name_strindex);
            w_i32(w, "systemNameStrindex", f->system_name_strindex);
            w_i32(w, "filenameStrindex", f->filename_strindex);
            w_i64(w, "startLine", f->start_line);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (d->n_links) {
        w_key(w, "linkTable");
        w_open(w, '[');
        for (uint32_t i = 0; i < d->n_links; i++) {
            w_elem(w);
            w_open(w, '{');
            w_hex_id(w, "traceId", d->links[i].trace_id, d->links[i].trace_id_len);
            w_hex_id(w, "spanId", d->links[i].span_id, d->links[i].span_id_len);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (d->n_strings) {
        w_key(w, "stringTable");
        w_open(w, '[');
        for (uint32_t i = 0; i < d->n_strings; i++) {
            w_elem(w);
            pl_buf_json_string(w->b, d->strings[i].ptr, d->strings[i].len);
        }
        w_close(w, ']');
    }
    if (d->n_attributes) {
        w_key(w, "attributeTable");
        w_open(w, '[');
        for (uint32_t i = 0; i < d->n_attributes; i++) {
            const pl_kvu *a = &d->attributes[i];
            w_elem(w);
            w_open(w, '{');
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
        w_key(w, "stackTable");
        w_open(w, '[');
        for (uint32_t i = 0; i < d->n_stacks; i++) {
            w_elem(w);
            w_open(w, '{');
            enc_i32_list(w, "locationIndices", d->stacks[i].location_indices,
                         d->stacks[i].n_location_indices);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    w_close(w, '}');
}

bool pl_otlp_json_encode_profiles(const pl_profiles *p, pl_buf *out)
{
    jw ww = {out, true}, *w = &ww;
    w_open(w, '{');
    if (p->n_resources) {
        w_key(w, "resourceProfiles");
        w_open(w, '[');
        for (uint32_t r = 0; r < p->n_resources; r++) {
            const pl_resource_profiles *rp = &p->resources[r];
            w_elem(w);
            w_open(w, '{');
            if (rp->has_resource)
                enc_resource(w, &rp->resource);
            if (rp->n_scopes) {
                w_key(w, "scopeProfiles");
                w_open(w, '[');
                for (uint32_t s = 0; s < rp->n_scopes; s++) {
                    const pl_scope_profiles *sp = &rp->scopes[s];
                    w_elem(w);
                    w_open(w, '{');
                    if (sp->has_scope)
                        enc_scope(w, &sp->scope);
                    if (sp->n_profiles) {
                        w_key(w, "profiles");
                        w_open(w, '[');
                        for (uint32_t i = 0; i < sp->n_profiles; i++) {
                            w_elem(w);
                            enc_profile(w, &sp->profiles[i]);
                        }
                        w_close(w, ']');
                    }
                    w_bytes_str(w, "schemaUrl", sp->schema_url);
                    w_close(w, '}');
                }
                w_close(w, ']');
            }
            w_bytes_str(w, "schemaUrl", rp->schema_url);
            w_close(w, '}');
        }
        w_close(w, ']');
    }
    if (p->has_dictionary)
        enc_dictionary(w, &p->dict);
    w_close(w, '}');
    return pl_buf_ok(out);
}
