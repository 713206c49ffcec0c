/*
 * attributes.c: the `attributes` and `resource` processors and the action
 * engine they share.
 *
 * Both take the Collector's action list:
 *
 *   attributes:
 *     actions:
 *       - { key: env, action: insert, value: prod }
 *       - { key: user.email, action: hash }
 *       - { key: http.url, action: extract, pattern: '^(?P<scheme>[a-z]+)://' }
 *       - { key: retries, action: convert, converted_type: int }
 *
 * `attributes` works on span attributes (traces), on sample attributes
 * (profiles), and on log record and metric data point attributes inside
 * the opaque logs / metrics requests (opaque_attrs.c; services matched on
 * the resource's service.name); `resource` (list key `attributes:`) works
 * on the resource of every ResourceSpans / ResourceProfiles /
 * ResourceLogs / ResourceMetrics. `attributes` also takes the
 * Collector's include/exclude ({match_type: strict|regexp, services,
 * span_names}): every property given must match; profiles are matched on
 * their resource's service.name, and a matcher naming span_names never
 * matches them.
 *
 * Actions (Collector semantics): insert (only if absent), update (only if
 * present), upsert (always), delete (key, or every key matching `pattern`),
 * hash (SHA-256 hex of the value; key or `pattern`), extract (named groups
 * of `pattern` matched on the string value become attributes), convert
 * (`converted_type` int, double or string). insert/update/upsert take their
 * value from `value` or from another attribute (`from_attribute`). YAML
 * gives the loader text only, so `value` is typed by `value_type` (string
 * by default; int, double, bool), where the Collector would look at how the
 * scalar was quoted.
 *
 * Profiles keep sample attributes in the request's dictionary, shared by
 * many samples, so entries are never edited in place: a sample's attribute
 * set is materialised as a plain list, the actions run on it, and the result
 * is written back as new (deduplicated) dictionary entries. Most samples of
 * a request share a handful of attribute sets, so results are memoised per
 * distinct index list: the actions run once per set, not once per sample.
 *
 * Patterns are compiled once at create (the config's validate hook compiles
 * them too, only to report errors at their file:line:col). New strings and
 * copies of configured keys/values come from the batch arena, so a batch
 * never points into processor memory.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/component.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strlist.h"
#include "core/value_json.h"
#include "opaque_attrs.h"
#include "core/pattern.h"
#include "proto/otlp_pb.h"
#include "proto/pb_wire.h"
#include "resource_fixed.h"

/* ---- config ------------------------------------------------------------- */

#include "processors/attributes.config.h"

typedef enum action_kind {
    ACT_INSERT,
    ACT_UPDATE,
    ACT_UPSERT,
    ACT_DELETE,
    ACT_HASH,
    ACT_EXTRACT,
    ACT_CONVERT,
} action_kind;

static const char *const action_names[] = {"insert", "update",  "upsert",  "delete",
                                           "hash",   "extract", "convert", NULL};

typedef enum conv_type { CONV_INT = 1, CONV_DOUBLE, CONV_STRING } conv_type;

static int lookup_name(const char *const *names, const char *s)
{
    for (int i = 0; s && names[i]; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

static bool str_set(const char *s)
{
    return s && *s;
}

/* Parses `text` as `type`; 0 or -1. */
static int parse_typed_value(const char *type, const char *text, pl_value *out)
{
    char *end;
    if (!type || strcmp(type, "string") == 0) {
        *out = pl_value_string(pl_bytes_from_cstr(text));
        return 0;
    }
    if (strcmp(type, "int") == 0) {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end)
            return -1;
        *out = pl_value_int(v);
        return 0;
    }
    if (strcmp(type, "double") == 0) {
        errno = 0;
        double d = strtod(text, &end);
        if (errno || end == text || *end)
            return -1;
        *out = pl_value_double(d);
        return 0;
    }
    if (strcmp(type, "bool") == 0) {
        if (strcmp(text, "true") == 0)
            *out = pl_value_bool(true);
        else if (strcmp(text, "false") == 0)
            *out = pl_value_bool(false);
        else
            return -1;
        return 0;
    }
    return -1;
}

static int action_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    attr_action_cfg *cfg = cfg_;
    int errors = 0;
    int kind = lookup_name(action_names, cfg->action);
    if (!str_set(cfg->action)) {
        pl_cfg_errorf(ctx, "action",
                      "missing \"action\" (one of insert, update, upsert, delete, "
                      "hash, extract, convert)");
        return 1;
    }
    if (kind < 0) {
        pl_cfg_errorf(ctx, "action",
                      "unknown action \"%s\" (one of insert, update, upsert, delete, hash, "
                      "extract, convert)",
                      cfg->action);
        return 1;
    }
    pl_pattern pattern;
    bool has_pattern = str_set(cfg->pattern);
    if (has_pattern) {
        char msg[300];
        if (pl_pattern_compile(&pattern, cfg->pattern, msg, sizeof(msg)) != 0) {
            pl_cfg_errorf(ctx, "pattern", "invalid regular expression \"%s\": %s", cfg->pattern,
                          msg);
            errors++;
            has_pattern = false;
        }
    }
    switch ((action_kind)kind) {
    case ACT_INSERT:
    case ACT_UPDATE:
    case ACT_UPSERT:
        errors += pl_cfg_check(ctx, str_set(cfg->key), "key", "action \"%s\" needs a \"key\"",
                               cfg->action);
        if ((cfg->value != NULL) + str_set(cfg->from_attribute) + str_set(cfg->from_context) != 1) {
            pl_cfg_errorf(ctx, NULL,
                          "action \"%s\" needs exactly one of \"value\", "
                          "\"from_attribute\" or \"from_context\"",
                          cfg->action);
            errors++;
        } else if (cfg->value) {
            pl_value v;
            errors += pl_cfg_check(ctx, parse_typed_value(cfg->value_type, cfg->value, &v) == 0,
                                   "value", "\"%s\" is not a valid %s value (value_type)",
                                   cfg->value, cfg->value_type ? cfg->value_type : "string");
        }
        break;
    case ACT_DELETE:
    case ACT_HASH:
        errors += pl_cfg_check(ctx, str_set(cfg->key) || str_set(cfg->pattern), "key",
                               "action \"%s\" needs a \"key\" or a \"pattern\"", cfg->action);
        break;
    case ACT_EXTRACT:
        errors += pl_cfg_check(ctx, str_set(cfg->key), "key", "action \"extract\" needs a \"key\"");
        if (!str_set(cfg->pattern)) {
            pl_cfg_errorf(ctx, "pattern", "action \"extract\" needs a \"pattern\"");
            errors++;
        } else if (has_pattern && pattern.n_named == 0) {
            pl_cfg_errorf(ctx, "pattern", "pattern \"%s\" has no named group such as (?P<name>...)",
                          cfg->pattern);
            errors++;
        }
        break;
    case ACT_CONVERT: {
        static const char *const conv_names[] = {"", "int", "double", "string", NULL};
        errors += pl_cfg_check(ctx, str_set(cfg->key), "key", "action \"convert\" needs a \"key\"");
        errors +=
            pl_cfg_check(ctx, lookup_name(conv_names, cfg->converted_type) > 0, "converted_type",
                         "action \"convert\" needs \"converted_type\": int, double or string");
        break;
    }
    }
    if (has_pattern)
        pl_pattern_free(&pattern);
    return errors;
}

/* include / exclude: which spans (or profile resources) the actions apply
 * to, as in the Collector's attributes processor. */

static int match_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    match_cfg *m = cfg_;
    int errors = 0;
    if (!m->services.n && !m->span_names.n)
        return 0;
    bool regexp = m->match_type && strcmp(m->match_type, "regexp") == 0;
    if (!m->match_type || (!regexp && strcmp(m->match_type, "strict") != 0)) {
        pl_cfg_errorf(ctx, "match_type", "match_type must be \"strict\" or \"regexp\"");
        return 1;
    }
    const pl_strlist *lists[2] = {&m->services, &m->span_names};
    const char *keys[2] = {"services", "span_names"};
    for (int l = 0; regexp && l < 2; l++) {
        for (size_t i = 0; i < lists[l]->n; i++) {
            pl_pattern pt;
            char msg[300];
            if (pl_pattern_compile(&pt, lists[l]->items[i], msg, sizeof(msg)) != 0) {
                pl_cfg_errorf(ctx, keys[l], "entry %zu: invalid regular expression \"%s\": %s", i,
                              lists[l]->items[i], msg);
                errors++;
            } else {
                pl_pattern_free(&pt);
            }
        }
    }
    return errors;
}

/* Both processors need at least one action, under `key`. */
static int require_actions(pl_cfg_ctx *ctx, const pl_cfg_list *actions, const char *key)
{
    if (actions->n)
        return 0;
    pl_cfg_errorf(ctx, key, "at least one action is required");
    return 1;
}

static int attributes_validate(void *cfg, pl_cfg_ctx *ctx)
{
    return require_actions(ctx, &((attributes_cfg *)cfg)->actions, "actions");
}

static int resource_validate(void *cfg, pl_cfg_ctx *ctx)
{
    return require_actions(ctx, &((resource_cfg *)cfg)->attributes, "attributes");
}

#include "processors/attributes.config.inc"

/* ---- the compiled engine ------------------------------------------------ */

typedef struct attr_action {
    action_kind kind;
    char *key;
    size_t key_len;
    char *from_attribute;
    char *from_context; /* metadata key */
    size_t from_len;
    bool has_value;
    pl_value value; /* STRING values point at value_text */
    char *value_text;
    bool has_pattern;
    pl_pattern pattern;
    conv_type converted;
} attr_action;

typedef struct attr_engine {
    attr_action *actions;
    size_t n;
    size_t max_groups; /* largest n_groups + 1 over extract patterns */
} attr_engine;

static void engine_free(attr_engine *e)
{
    for (size_t i = 0; i < e->n; i++) {
        attr_action *a = &e->actions[i];
        free(a->key);
        free(a->from_attribute);
        free(a->from_context);
        free(a->value_text);
        if (a->has_pattern)
            pl_pattern_free(&a->pattern);
    }
    free(e->actions);
    memset(e, 0, sizeof(*e));
}

static pl_status engine_build(attr_engine *e, const pl_cfg_list *list, pl_err *err)
{
    memset(e, 0, sizeof(*e));
    e->actions = calloc(list->n ? list->n : 1, sizeof(attr_action));
    if (!e->actions)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < list->n; i++) {
        const attr_action_cfg *c = (const attr_action_cfg *)list->items + i;
        attr_action *a = &e->actions[i];
        e->n = i + 1;
        int kind = lookup_name(action_names, c->action);
        if (kind < 0) {
            engine_free(e);
            return pl_errf(err, PL_ERR_INVALID, "action %zu: unknown action \"%s\"", i,
                           c->action ? c->action : "");
        }
        a->kind = (action_kind)kind;
        if (str_set(c->key)) {
            a->key = strdup(c->key);
            a->key_len = strlen(c->key);
        }
        if (str_set(c->from_attribute)) {
            a->from_attribute = strdup(c->from_attribute);
            a->from_len = strlen(c->from_attribute);
        }
        if (str_set(c->from_context)) {
            /* metadata.<key> is the request's metadata; auth.username is
             * what proflink's authenticators record as auth.user */
            const char *k = c->from_context;
            if (strncmp(k, "metadata.", 9) == 0)
                k += 9;
            else if (strcmp(k, "auth.username") == 0)
                k = "auth.user";
            a->from_context = strdup(k);
        }
        if (c->value) {
            a->value_text = strdup(c->value);
            if (!a->value_text || parse_typed_value(c->value_type, a->value_text, &a->value)) {
                engine_free(e);
                return pl_errf(err, PL_ERR_INVALID, "action %zu: bad value \"%s\"", i, c->value);
            }
            a->has_value = true;
        }
        if (str_set(c->pattern)) {
            char msg[300];
            if (pl_pattern_compile(&a->pattern, c->pattern, msg, sizeof(msg)) != 0) {
                engine_free(e);
                return pl_errf(err, PL_ERR_INVALID, "action %zu: invalid pattern \"%s\": %s", i,
                               c->pattern, msg);
            }
            a->has_pattern = true;
            if (a->pattern.n_groups + 1 > e->max_groups)
                e->max_groups = a->pattern.n_groups + 1;
        }
        if (c->converted_type) {
            if (strcmp(c->converted_type, "int") == 0)
                a->converted = CONV_INT;
            else if (strcmp(c->converted_type, "double") == 0)
                a->converted = CONV_DOUBLE;
            else if (strcmp(c->converted_type, "string") == 0)
                a->converted = CONV_STRING;
        }
        bool ok = true;
        switch (a->kind) {
        case ACT_INSERT:
        case ACT_UPDATE:
        case ACT_UPSERT:
            ok = a->key &&
                 a->has_value + (a->from_attribute != NULL) + (a->from_context != NULL) == 1;
            break;
        case ACT_DELETE:
        case ACT_HASH:
            ok = a->key || a->has_pattern;
            break;
        case ACT_EXTRACT:
            ok = a->key && a->has_pattern && a->pattern.n_named > 0;
            break;
        case ACT_CONVERT:
            ok = a->key && a->converted;
            break;
        }
        if (!ok) {
            engine_free(e);
            return pl_errf(err, PL_ERR_INVALID, "action %zu (%s): incomplete configuration", i,
                           action_names[kind]);
        }
    }
    return PL_OK;
}

/* Per-batch state: the batch's arena, and lazily made arena copies of the
 * configured keys and values so the batch never points at our memory. */
typedef struct apply_ctx {
    const attr_engine *engine;
    pl_batch *batch;
    pl_bytes *keys;   /* [n] */
    pl_value *values; /* [n] */
    bool *copied;     /* [n] */
    pl_match *groups;
    bool oom;
    /* Profiles: string indices of keys already interned in this batch, so
     * that each distinct attribute set does not rescan the string table. */
    struct {
        pl_bytes key;
        int32_t index;
    } key_cache[16];
    unsigned n_key_cache;
} apply_ctx;

static bool apply_ctx_init(apply_ctx *c, const attr_engine *e, pl_batch *batch)
{
    memset(c, 0, sizeof(*c));
    c->engine = e;
    c->batch = batch;
    size_t n = e->n ? e->n : 1;
    c->keys = pl_arena_calloc(&batch->arena, n, sizeof(pl_bytes));
    c->values = pl_arena_calloc(&batch->arena, n, sizeof(pl_value));
    c->copied = pl_arena_calloc(&batch->arena, n, sizeof(bool));
    c->groups = pl_arena_calloc(&batch->arena, e->max_groups ? e->max_groups : 1, sizeof(pl_match));
    return c->keys && c->values && c->copied && c->groups;
}

static void apply_ctx_done(apply_ctx *c)
{
    (void)c; /* everything lives in the batch arena */
}

static bool ensure_copied(apply_ctx *c, size_t i)
{
    if (c->copied[i])
        return true;
    const attr_action *a = &c->engine->actions[i];
    if (a->key) {
        c->keys[i] = pl_batch_bytes(c->batch, a->key, a->key_len);
        if (!c->keys[i].ptr)
            return false;
    }
    c->values[i] = a->value;
    if (a->has_value && a->value.type == PL_VALUE_STRING) {
        size_t len = strlen(a->value_text);
        pl_bytes s = pl_batch_bytes(c->batch, a->value_text, len);
        if (!s.ptr)
            return false;
        c->values[i].u.str = s;
    }
    c->copied[i] = true;
    return true;
}

static pl_kv *find_attr(pl_attrs *attrs, const char *key, size_t len)
{
    return pl_attrs_find(attrs, key, len);
}

/* Collector hashing: the string's bytes, bool as one byte, int/double as
 * their 8 little-endian bytes; other types (and "") become "". Bytes values
 * are hashed like strings. */
static bool hash_value(apply_ctx *c, pl_value *v)
{
    uint8_t buf[8];
    const void *data = NULL;
    size_t len = 0;
    switch (v->type) {
    case PL_VALUE_STRING:
    case PL_VALUE_BYTES:
        data = v->u.str.ptr;
        len = v->u.str.len;
        break;
    case PL_VALUE_BOOL:
        buf[0] = v->u.b ? 1 : 0;
        data = buf;
        len = 1;
        break;
    case PL_VALUE_INT:
    case PL_VALUE_DOUBLE: {
        uint64_t bits;
        if (v->type == PL_VALUE_INT)
            bits = (uint64_t)v->u.i;
        else
            memcpy(&bits, &v->u.d, 8);
        for (int i = 0; i < 8; i++)
            buf[i] = (uint8_t)(bits >> (8 * i));
        data = buf;
        len = 8;
        break;
    }
    default:
        break;
    }
    if (len == 0) {
        *v = pl_value_string((pl_bytes){NULL, 0});
        return true;
    }
    char hex[65];
    pl_sha256_hex(data, len, hex);
    pl_bytes s = pl_batch_bytes(c->batch, hex, 64);
    if (!s.ptr)
        return false;
    *v = pl_value_string(s);
    return true;
}

/* ---- value to string (Collector's AsString) ----------------------------- */

/* The Collector's AsString: JSON (core/value_json, pl_vj_attributes) for
 * arrays and maps and inside them; at the top, bytes as bare base64 and
 * non-finite doubles as bare NaN / +Inf / -Inf. */
static void value_to_text(pl_buf *b, const pl_value *v)
{
    if (v->type == PL_VALUE_BYTES) {
        pl_base64_encode(v->u.str.ptr, v->u.str.len, b, true);
    } else if (v->type == PL_VALUE_DOUBLE && !isfinite(v->u.d)) {
        pl_buf_append_str(b, isnan(v->u.d) ? "NaN" : v->u.d > 0 ? "+Inf" : "-Inf");
    } else {
        pl_value_json(b, v, &pl_vj_attributes);
    }
}

/* Parses a whole byte string as a base-10 int64. */
static bool bytes_to_int(pl_bytes s, int64_t *out)
{
    char buf[32];
    if (s.len == 0 || s.len >= sizeof(buf))
        return false;
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end || end == buf)
        return false;
    *out = v;
    return true;
}

static bool bytes_to_double(pl_bytes s, double *out)
{
    char buf[64];
    if (s.len == 0 || s.len >= sizeof(buf))
        return false;
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = '\0';
    char *end;
    errno = 0;
    double d = strtod(buf, &end);
    if (*end || end == buf || (errno == ERANGE && isinf(d)))
        return false;
    *out = d;
    return true;
}

/* Converts in place; a value that does not convert is left as it is (as in
 * the Collector). Returns false only on OOM. */
static bool convert_value(apply_ctx *c, pl_value *v, conv_type to)
{
    if (v->type == PL_VALUE_EMPTY)
        return true;
    switch (to) {
    case CONV_INT:
        if (v->type == PL_VALUE_DOUBLE) {
            if (!isnan(v->u.d) && v->u.d >= -9223372036854775808.0 &&
                v->u.d < 9223372036854775808.0)
                *v = pl_value_int((int64_t)v->u.d);
        } else if (v->type == PL_VALUE_BOOL) {
            *v = pl_value_int(v->u.b ? 1 : 0);
        } else if (v->type == PL_VALUE_STRING) {
            int64_t i;
            if (bytes_to_int(v->u.str, &i))
                *v = pl_value_int(i);
        }
        return true;
    case CONV_DOUBLE:
        if (v->type == PL_VALUE_INT) {
            *v = pl_value_double((double)v->u.i);
        } else if (v->type == PL_VALUE_BOOL) {
            *v = pl_value_double(v->u.b ? 1.0 : 0.0);
        } else if (v->type == PL_VALUE_STRING) {
            double d;
            if (bytes_to_double(v->u.str, &d))
                *v = pl_value_double(d);
        }
        return true;
    case CONV_STRING: {
        if (v->type == PL_VALUE_STRING)
            return true;
        pl_buf b;
        pl_buf_init(&b);
        value_to_text(&b, v);
        if (!pl_buf_ok(&b)) {
            pl_buf_free(&b);
            return false;
        }
        size_t n = b.len;
        pl_bytes s = n ? pl_batch_bytes(c->batch, b.data, n) : (pl_bytes){NULL, 0};
        pl_buf_free(&b);
        if (n && !s.ptr)
            return false;
        *v = pl_value_string(s);
        return true;
    }
    }
    return true;
}

static bool key_matches(const attr_action *a, const pl_kv *kv)
{
    if (a->has_pattern)
        return pl_pattern_exec(&a->pattern, kv->key, NULL, 0);
    return kv->key.len == a->key_len && memcmp(kv->key.ptr, a->key, a->key_len) == 0;
}

/* Runs one action on attrs; false on OOM. *changed is set when attrs changed. */
static bool apply_action(apply_ctx *c, size_t ai, pl_attrs *attrs, bool *changed)
{
    const attr_action *a = &c->engine->actions[ai];
    pl_arena *arena = &c->batch->arena;
    switch (a->kind) {
    case ACT_INSERT:
    case ACT_UPDATE:
    case ACT_UPSERT: {
        pl_kv *kv = find_attr(attrs, a->key, a->key_len);
        if ((a->kind == ACT_INSERT && kv) || (a->kind == ACT_UPDATE && !kv))
            return true;
        pl_value v;
        pl_bytes ctx_value;
        if (a->from_attribute) {
            pl_kv *src = find_attr(attrs, a->from_attribute, a->from_len);
            if (!src)
                return true;
            v = src->value;
        } else if (a->from_context) {
            /* the metadata lives as long as the batch */
            if (!pl_batch_metadata_get(c->batch, a->from_context, &ctx_value))
                return true;
            v = pl_value_string(ctx_value);
        } else {
            if (!ensure_copied(c, ai))
                return false;
            v = c->values[ai];
        }
        if (kv) {
            kv->value = v;
        } else {
            if (!ensure_copied(c, ai))
                return false;
            if (!pl_attrs_put(arena, attrs, c->keys[ai], v))
                return false;
        }
        *changed = true;
        return true;
    }
    case ACT_DELETE: {
        uint32_t o = 0;
        for (uint32_t i = 0; i < attrs->n; i++) {
            if (key_matches(a, &attrs->items[i]))
                continue;
            if (o != i)
                attrs->items[o] = attrs->items[i];
            o++;
        }
        if (o != attrs->n) {
            attrs->n = o;
            *changed = true;
        }
        return true;
    }
    case ACT_HASH:
        for (uint32_t i = 0; i < attrs->n; i++) {
            if (!key_matches(a, &attrs->items[i]))
                continue;
            if (!hash_value(c, &attrs->items[i].value))
                return false;
            *changed = true;
        }
        return true;
    case ACT_EXTRACT: {
        pl_kv *kv = find_attr(attrs, a->key, a->key_len);
        if (!kv || kv->value.type != PL_VALUE_STRING)
            return true;
        pl_bytes s = kv->value.u.str;
        size_t ng = a->pattern.n_groups + 1;
        if (!pl_pattern_exec(&a->pattern, s, c->groups, ng))
            return true;
        for (size_t g = 1; g < ng; g++) {
            const char *name = a->pattern.group_names[g];
            if (!name || c->groups[g].so < 0)
                continue;
            pl_bytes part = {s.ptr + c->groups[g].so,
                             (uint32_t)(c->groups[g].eo - c->groups[g].so)};
            pl_kv *existing = find_attr(attrs, name, strlen(name));
            if (existing) {
                existing->value = pl_value_string(part);
            } else {
                pl_bytes key = pl_batch_bytes(c->batch, name, strlen(name));
                if (!key.ptr || !pl_attrs_put(arena, attrs, key, pl_value_string(part)))
                    return false;
            }
            *changed = true;
        }
        return true;
    }
    case ACT_CONVERT: {
        pl_kv *kv = find_attr(attrs, a->key, a->key_len);
        if (!kv)
            return true;
        pl_value before = kv->value;
        if (!convert_value(c, &kv->value, a->converted))
            return false;
        if (!pl_value_eq(&before, &kv->value))
            *changed = true;
        return true;
    }
    }
    return true;
}

static bool engine_apply(apply_ctx *c, pl_attrs *attrs, bool *changed)
{
    for (size_t i = 0; i < c->engine->n; i++)
        if (!apply_action(c, i, attrs, changed))
            return false;
    return true;
}

/* Profiles resources may name keys and string values through the string
 * table; rewrite them as plain bytes (same text) so the actions see them. */
static void normalize_attrs(pl_attrs *attrs, const pl_dictionary *dict)
{
    for (uint32_t i = 0; i < attrs->n; i++) {
        pl_kv *kv = &attrs->items[i];
        if (kv->key.len == 0 && kv->key_strindex != 0) {
            kv->key = pl_dict_string(dict, kv->key_strindex);
            kv->key_strindex = 0;
        }
        if (kv->value.type == PL_VALUE_STRINDEX)
            kv->value = pl_value_string(pl_dict_string(dict, kv->value.u.strindex));
    }
}

/* ---- profiles: sample attribute sets ------------------------------------ */

typedef struct memo_entry {
    const int32_t *in;
    uint32_t n_in;
    int32_t *out;
    uint32_t n_out;
} memo_entry;

/* Distinct input lists (core/hash.h pl_htab over `entries`). */
typedef struct memo {
    pl_htab index; /* values: entry number + 1 */
    memo_entry *entries;
    size_t n, cap;
} memo;

typedef struct memo_key {
    const memo *m;
    const int32_t *in;
    uint32_t n;
} memo_key;

/* Attribute index lists come from the client: keyed hash (core/hash.h). */
static uint32_t hash_indices(const int32_t *idx, uint32_t n)
{
    return (uint32_t)pl_hash_bytes(idx, (size_t)n * sizeof(*idx));
}

static bool memo_eq(const void *ctx, uint32_t val)
{
    const memo_key *k = ctx;
    const memo_entry *e = &k->m->entries[val - 1];
    return e->n_in == k->n && (k->n == 0 || memcmp(e->in, k->in, k->n * sizeof(int32_t)) == 0);
}

/* The entry of the list `in`, new (*found false: its result still to be
 * computed) or memoised; valid until the next call. NULL on OOM. */
static memo_entry *memo_find(memo *m, const int32_t *in, uint32_t n, uint32_t h, bool *found)
{
    memo_key k = {m, in, n};
    uint32_t *slot = pl_htab_slot(&m->index, h, memo_eq, &k);
    if (!slot)
        return NULL;
    *found = *slot != 0;
    if (*found)
        return &m->entries[*slot - 1];
    if (m->n >= UINT32_MAX - 1 ||
        pl_array_reserve((void **)&m->entries, m->n, &m->cap, sizeof(*m->entries), 64))
        return NULL;
    m->entries[m->n] = (memo_entry){in, n, NULL, 0};
    *slot = (uint32_t)++m->n;
    pl_htab_added(&m->index, slot, h);
    return &m->entries[m->n - 1];
}

/* Computes the new attribute index list for one distinct input list. */
static bool rewrite_sample_attrs(apply_ctx *c, pl_dictionary *dict, const int32_t *in, uint32_t n,
                                 int32_t **out, uint32_t *n_out)
{
    pl_arena *arena = &c->batch->arena;
    pl_attrs attrs = {NULL, 0, 0};
    if (n) {
        attrs.items = pl_arena_calloc(arena, n, sizeof(pl_kv));
        if (!attrs.items)
            return false;
        attrs.cap = n;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (in[i] <= 0 || (uint32_t)in[i] >= dict->n_attributes) {
            /* Out of range: leave this sample's list alone. */
            *out = (int32_t *)in;
            *n_out = n;
            return true;
        }
        const pl_kvu *e = &dict->attributes[in[i]];
        pl_kv *kv = &attrs.items[attrs.n++];
        kv->key = pl_dict_string(dict, e->key_strindex);
        kv->value = e->value;
        if (kv->value.type == PL_VALUE_STRINDEX)
            kv->value = pl_value_string(pl_dict_string(dict, kv->value.u.strindex));
    }
    bool changed = false;
    if (!engine_apply(c, &attrs, &changed))
        return false;
    if (!changed) {
        *out = (int32_t *)in;
        *n_out = n;
        return true;
    }
    int32_t *res = attrs.n ? pl_arena_calloc(arena, attrs.n, sizeof(int32_t)) : NULL;
    if (attrs.n && !res)
        return false;
    for (uint32_t i = 0; i < attrs.n; i++) {
        const pl_kv *kv = &attrs.items[i];
        int32_t idx = -1;
        /* Reuse an original entry when key and value are unchanged (keeps
         * its unit and its string-table form). */
        for (uint32_t j = 0; j < n; j++) {
            const pl_kvu *e = &dict->attributes[in[j]];
            pl_value ev = e->value;
            if (ev.type == PL_VALUE_STRINDEX)
                ev = pl_value_string(pl_dict_string(dict, ev.u.strindex));
            if (pl_bytes_eq(pl_dict_string(dict, e->key_strindex), kv->key) &&
                pl_value_eq(&ev, &kv->value)) {
                idx = in[j];
                break;
            }
        }
        if (idx < 0) {
            int32_t key = -1;
            for (unsigned k = 0; k < c->n_key_cache && key < 0; k++)
                if (pl_bytes_eq(c->key_cache[k].key, kv->key))
                    key = c->key_cache[k].index;
            if (key < 0) {
                key = pl_dict_intern_string(arena, dict, kv->key);
                if (key < 0)
                    return false;
                unsigned slot = c->n_key_cache < 16 ? c->n_key_cache++ : (unsigned)key % 16;
                c->key_cache[slot].key = kv->key;
                c->key_cache[slot].index = key;
            }
            idx = pl_dict_intern_attribute(arena, dict, key, kv->value, 0);
            if (idx < 0)
                return false;
        }
        res[i] = idx;
    }
    *out = res;
    *n_out = attrs.n;
    return true;
}

typedef struct attr_proc attr_proc;
static bool selected(const attr_proc *p, pl_bytes service, const pl_bytes *span_name);
static pl_bytes resource_service(const pl_attrs *attrs, const pl_dictionary *dict);

static bool apply_to_samples(const attr_proc *p, apply_ctx *c, pl_profiles *ps)
{
    pl_dictionary *dict = &ps->dict;
    if (pl_dict_ensure_zero_entries(&c->batch->arena, dict) != 0)
        return false;
    memo m = {0};
    bool ok = true;
    for (uint32_t r = 0; ok && r < ps->n_resources; r++) {
        pl_resource_profiles *rp = &ps->resources[r];
        if (!selected(p, resource_service(&rp->resource.attrs, dict), NULL))
            continue;
        for (uint32_t s = 0; ok && s < rp->n_scopes; s++) {
            pl_scope_profiles *sp = &rp->scopes[s];
            for (uint32_t k = 0; ok && k < sp->n_profiles; k++) {
                pl_profile *prof = &sp->profiles[k];
                for (uint32_t i = 0; i < prof->n_samples; i++) {
                    pl_sample *smp = &prof->samples[i];
                    uint32_t h = hash_indices(smp->attribute_indices, smp->n_attribute_indices);
                    bool found;
                    memo_entry *e =
                        memo_find(&m, smp->attribute_indices, smp->n_attribute_indices, h, &found);
                    if (!e) {
                        ok = false;
                        break;
                    }
                    if (!found &&
                        !rewrite_sample_attrs(c, dict, smp->attribute_indices,
                                              smp->n_attribute_indices, &e->out, &e->n_out)) {
                        ok = false; /* the entry is never read again: we stop here */
                        break;
                    }
                    smp->attribute_indices = e->out;
                    smp->n_attribute_indices = e->n_out;
                }
            }
        }
    }
    pl_htab_free(&m.index);
    free(m.entries);
    return ok;
}

/* ---- include / exclude --------------------------------------------------- */

typedef struct matcher {
    bool active;
    bool regexp;
    bool has_services, has_span_names;
    pl_strlist services, span_names;     /* owned copies (strict) */
    pl_pattern_list service_re, name_re; /* regexp */
} matcher;

static void matcher_free(matcher *m)
{
    pl_strlist_free(&m->services);
    pl_strlist_free(&m->span_names);
    pl_pattern_list_free(&m->service_re);
    pl_pattern_list_free(&m->name_re);
    memset(m, 0, sizeof(*m));
}

static int copy_list(pl_strlist *dst, const pl_strlist *src, pl_pattern_list *re, bool regexp,
                     pl_err *err)
{
    return regexp ? pl_pattern_list_build(re, src, NULL, err) : pl_strlist_copy(dst, src);
}

static int matcher_build(matcher *m, const match_cfg *c, pl_err *err)
{
    memset(m, 0, sizeof(*m));
    if (!c->services.n && !c->span_names.n)
        return 0;
    m->active = true;
    m->regexp = c->match_type && strcmp(c->match_type, "regexp") == 0;
    if (copy_list(&m->services, &c->services, &m->service_re, m->regexp, err) ||
        copy_list(&m->span_names, &c->span_names, &m->name_re, m->regexp, err)) {
        if (!err->msg[0])
            pl_errf(err, PL_ERR_NOMEM, "out of memory");
        matcher_free(m);
        return -1;
    }
    m->has_services = c->services.n > 0;
    m->has_span_names = c->span_names.n > 0;
    return 0;
}

static bool list_matches(const matcher *m, const pl_strlist *strict, const pl_pattern_list *re,
                         pl_bytes value)
{
    return m->regexp ? pl_pattern_list_any(re, value) : pl_strlist_contains(strict, value);
}

/* Every property given must match. Profiles have no span name, so a
 * matcher that names span_names never matches a profile resource. */
static bool matcher_matches(const matcher *m, pl_bytes service, const pl_bytes *span_name)
{
    if (m->has_services && !list_matches(m, &m->services, &m->service_re, service))
        return false;
    if (m->has_span_names &&
        (!span_name || !list_matches(m, &m->span_names, &m->name_re, *span_name)))
        return false;
    return true;
}

static pl_bytes resource_service(const pl_attrs *attrs, const pl_dictionary *dict)
{
    for (uint32_t i = 0; i < attrs->n; i++) {
        const pl_kv *kv = &attrs->items[i];
        pl_bytes key = kv->key;
        if (!key.len && kv->key_strindex && dict)
            key = pl_dict_string(dict, kv->key_strindex);
        if (!pl_bytes_eq_cstr(key, "service.name"))
            continue;
        if (kv->value.type == PL_VALUE_STRING)
            return kv->value.u.str;
        if (kv->value.type == PL_VALUE_STRINDEX && dict)
            return pl_dict_string(dict, kv->value.u.strindex);
    }
    return (pl_bytes){NULL, 0};
}

/* ---- the processors ----------------------------------------------------- */

struct attr_proc {
    matcher include, exclude;
    attr_engine engine;
    pl_stats *stats;
    bool resource; /* the `resource` processor */
    char id[128];
};

static pl_status attr_create_common(const pl_create_settings *s, const pl_cfg_list *list,
                                    bool resource, void **out, pl_err *err)
{
    attr_proc *p = calloc(1, sizeof(*p));
    if (!p)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    pl_status st = engine_build(&p->engine, list, err);
    if (st != PL_OK) {
        free(p);
        return st;
    }
    p->stats = s ? s->stats : NULL;
    p->resource = resource;
    snprintf(p->id, sizeof(p->id), "%s",
             s && s->id ? s->id : (resource ? "resource" : "attributes"));
    *out = p;
    return PL_OK;
}

static void attr_destroy(void *self);

static pl_status attributes_create(const pl_create_settings *s, const void *config, void **out,
                                   pl_err *err)
{
    const attributes_cfg *cfg = config;
    pl_status st = attr_create_common(s, &cfg->actions, false, out, err);
    if (st != PL_OK)
        return st;
    attr_proc *p = *out;
    if (err)
        err->msg[0] = '\0';
    pl_err local;
    pl_err *e = err ? err : &local;
    e->msg[0] = '\0';
    if (matcher_build(&p->include, &cfg->include, e) != 0 ||
        matcher_build(&p->exclude, &cfg->exclude, e) != 0) {
        attr_destroy(p);
        *out = NULL;
        return PL_ERR_INVALID;
    }
    return PL_OK;
}

/* Whether the actions apply to a span (span_name != NULL) or to the samples
 * of a profile resource (span_name == NULL). */
static bool selected(const attr_proc *p, pl_bytes service, const pl_bytes *span_name)
{
    if (p->include.active && !matcher_matches(&p->include, service, span_name))
        return false;
    if (p->exclude.active && matcher_matches(&p->exclude, service, span_name))
        return false;
    return true;
}

static pl_status resource_create(const pl_create_settings *s, const void *config, void **out,
                                 pl_err *err)
{
    const resource_cfg *cfg = config;
    return attr_create_common(s, &cfg->attributes, true, out, err);
}

static pl_status attr_start(void *self, pl_err *err)
{
    return PL_OK;
}

static bool apply_to_batch(attr_proc *p, apply_ctx *c, pl_batch *batch)
{
    bool changed = false;
    if (batch->signal == PL_SIGNAL_TRACES) {
        pl_traces *t = &batch->data.traces;
        for (uint32_t r = 0; r < t->n_resources; r++) {
            pl_resource_spans *rs = &t->resources[r];
            if (p->resource) {
                if (!engine_apply(c, &rs->resource.attrs, &changed))
                    return false;
                if (rs->resource.attrs.n)
                    rs->has_resource = true;
                continue;
            }
            bool filtered = p->include.active || p->exclude.active;
            pl_bytes service =
                filtered ? resource_service(&rs->resource.attrs, NULL) : (pl_bytes){NULL, 0};
            for (uint32_t s = 0; s < rs->n_scopes; s++) {
                pl_scope_spans *ss = &rs->scopes[s];
                for (uint32_t i = 0; i < ss->n_spans; i++) {
                    if (filtered && !selected(p, service, &ss->spans[i].name))
                        continue;
                    if (!engine_apply(c, &ss->spans[i].attrs, &changed))
                        return false;
                }
            }
        }
        return true;
    }
    if (batch->signal == PL_SIGNAL_PROFILES) {
        pl_profiles *ps = &batch->data.profiles;
        if (!p->resource)
            return apply_to_samples(p, c, ps);
        for (uint32_t r = 0; r < ps->n_resources; r++) {
            pl_resource_profiles *rp = &ps->resources[r];
            normalize_attrs(&rp->resource.attrs, &ps->dict);
            if (!engine_apply(c, &rp->resource.attrs, &changed))
                return false;
            if (rp->resource.attrs.n)
                rp->has_resource = true;
        }
        return true;
    }
    return true;
}

/* ---- resource of logs and metrics ---------------------------------------- */

/* One Resource message (its bytes; NULL/0: absent) through the actions:
 * decoded and encoded with the traces codec, as the only content of a
 * request of one ResourceSpans, so the actions see it exactly as a span's
 * resource. Appends the new Resource field (field 1) to `out`, or nothing
 * when it ends up empty. false when the bytes do not decode or on OOM. */
static bool rewrite_resource(attr_proc *p, const pl_batch *batch, const uint8_t *res, size_t len,
                             bool present, pl_buf *out)
{
    pl_buf wrap, enc;
    pl_buf_init(&wrap);
    pl_buf_init(&enc);
    pl_buf inner;
    pl_buf_init(&inner);
    if (present)
        pl_pb_put_bytes(&inner, 1, res, len); /* ResourceSpans.resource */
    pl_pb_put_bytes(&wrap, 1, inner.data ? inner.data : (const uint8_t *)"", inner.len);
    pl_buf_free(&inner);
    pl_batch *tmp = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err = {{0}};
    bool ok = tmp && pl_buf_ok(&wrap) &&
              pl_otlp_decode_traces(tmp, wrap.data, wrap.len, &err) == PL_OK &&
              tmp->data.traces.n_resources == 1;
    if (ok) {
        tmp->metadata = batch->metadata; /* from_context reads it; it outlives tmp */
        pl_resource_spans *rs = &tmp->data.traces.resources[0];
        apply_ctx c;
        bool changed = false;
        ok = apply_ctx_init(&c, &p->engine, tmp) && engine_apply(&c, &rs->resource.attrs, &changed);
        apply_ctx_done(&c);
        if (rs->resource.attrs.n)
            rs->has_resource = true;
        ok = ok && pl_otlp_encode_traces(&tmp->data.traces, &enc) && pl_buf_ok(&enc);
        tmp->metadata = (pl_metadata){0};
    }
    /* the encoded request: field 1 (ResourceSpans) holding field 1 (Resource) */
    pl_pb_reader r = {enc.data, enc.data + enc.len};
    uint32_t field, wt;
    uint64_t v;
    pl_pb_reader rs_msg = {0};
    bool found = false;
    while (ok && r.p < r.end) {
        pl_pb_reader sub;
        if (pl_pb_next_field(&r, &field, &wt, &v, &sub) != 0) {
            ok = false;
            break;
        }
        if (field == 1 && wt == PL_PB_LEN) {
            rs_msg = sub;
            found = true;
        }
    }
    while (ok && found && rs_msg.p < rs_msg.end) {
        const uint8_t *start = rs_msg.p;
        pl_pb_reader sub;
        if (pl_pb_next_field(&rs_msg, &field, &wt, &v, &sub) != 0) {
            ok = false;
            break;
        }
        if (field == 1 && wt == PL_PB_LEN)
            pl_buf_append(out, start, (size_t)(rs_msg.p - start));
    }
    pl_batch_free(tmp);
    pl_buf_free(&wrap);
    pl_buf_free(&enc);
    return ok;
}

/* Logs and metrics are opaque protobuf in proflink; the resource processor
 * still acts on them: each ResourceLogs / ResourceMetrics (field 1 of the
 * request) gets its Resource (its field 1) rewritten, every other byte is
 * copied as it came. The batch then points at the new request. false on
 * bytes that do not parse, or OOM. */
static bool apply_to_opaque_resources(attr_proc *p, pl_batch *batch)
{
    pl_buf out;
    pl_buf_init(&out);
    pl_pb_reader req = {batch->data.raw.ptr, batch->data.raw.ptr + batch->data.raw.len};
    bool ok = true;
    while (ok && req.p < req.end) {
        const uint8_t *start = req.p;
        uint32_t field, wt;
        uint64_t v;
        pl_pb_reader msg;
        if (pl_pb_next_field(&req, &field, &wt, &v, &msg) != 0) {
            ok = false;
            break;
        }
        if (field != 1 || wt != PL_PB_LEN) {
            pl_buf_append(&out, start, (size_t)(req.p - start));
            continue;
        }
        /* one ResourceLogs / ResourceMetrics: the resource first, then the
         * rest in its order */
        pl_buf body;
        pl_buf_init(&body);
        const uint8_t *res = NULL;
        size_t res_len = 0;
        bool has_res = false;
        pl_pb_reader scan = msg;
        while (ok && scan.p < scan.end) {
            pl_pb_reader sub;
            if (pl_pb_next_field(&scan, &field, &wt, &v, &sub) != 0) {
                ok = false;
                break;
            }
            if (field == 1 && wt == PL_PB_LEN) {
                res = sub.p;
                res_len = (size_t)(sub.end - sub.p);
                has_res = true;
            }
        }
        ok = ok && rewrite_resource(p, batch, res, res_len, has_res, &body);
        scan = msg;
        while (ok && scan.p < scan.end) {
            const uint8_t *f0 = scan.p;
            pl_pb_reader sub;
            if (pl_pb_next_field(&scan, &field, &wt, &v, &sub) != 0) {
                ok = false;
                break;
            }
            if (!(field == 1 && wt == PL_PB_LEN))
                pl_buf_append(&body, f0, (size_t)(scan.p - f0));
        }
        ok = ok && pl_buf_ok(&body);
        if (ok)
            pl_pb_put_bytes(&out, 1, body.data ? body.data : (const uint8_t *)"", body.len);
        pl_buf_free(&body);
    }
    ok = ok && pl_buf_ok(&out);
    if (ok && out.len && pl_batch_adopt(batch, out.data, out.cap) == 0) {
        batch->data.raw = (pl_bytes){out.data, out.len};
        return true;
    }
    if (ok && !out.len) {
        batch->data.raw = (pl_bytes){0};
        return true;
    }
    pl_buf_free(&out);
    return false;
}

/* One log record's or data point's attributes (pl_opaque_rewrite_attrs). */
static bool apply_to_opaque_record(void *arg, pl_batch *tmp, pl_attrs *attrs, pl_bytes service)
{
    attr_proc *p = arg;
    if (!selected(p, service, NULL))
        return true;
    apply_ctx c;
    bool changed = false;
    bool ok = apply_ctx_init(&c, &p->engine, tmp) && engine_apply(&c, attrs, &changed);
    apply_ctx_done(&c);
    return ok;
}

static pl_status attr_consume(void *self, pl_batch *batch, pl_consumer *next)
{
    attr_proc *p = self;
    if ((batch->signal == PL_SIGNAL_LOGS || batch->signal == PL_SIGNAL_METRICS) &&
        batch->data.raw.len &&
        !(p->resource ? apply_to_opaque_resources(p, batch)
                      : pl_opaque_rewrite_attrs(batch, false, apply_to_opaque_record, p))) {
        pl_warn(p->id, "%s request that does not parse or out of memory; handed on unchanged",
                pl_signal_name(batch->signal));
    }
    if (batch->signal == PL_SIGNAL_TRACES || batch->signal == PL_SIGNAL_PROFILES) {
        apply_ctx c;
        bool ok = apply_ctx_init(&c, &p->engine, batch) && apply_to_batch(p, &c, batch);
        apply_ctx_done(&c);
        if (!ok) {
            pl_warn(p->id, "out of memory applying actions; %zu %s refused", pl_batch_items(batch),
                    pl_signal_name(batch->signal));
            pl_batch_free(batch);
            return PL_ERR_NOMEM;
        }
    }
    return pl_consumer_consume(next, batch);
}

static void attr_shutdown(void *self) {}

static void attr_destroy(void *self)
{
    attr_proc *p = self;
    if (!p)
        return;
    matcher_free(&p->include);
    matcher_free(&p->exclude);
    engine_free(&p->engine);
    free(p);
}

const pl_component_type pl_processor_attributes = {
    PL_COMPONENT_HEAD("attributes", PL_KIND_PROCESSOR, PL_SIGNALS_ALL, &attributes_section),
    .description = "insert, update, upsert, delete, hash, extract and convert span, profile "
                   "sample, log record and metric data point attributes",
    PL_COMPONENT_LIFECYCLE(attributes_create, attr_start, attr_shutdown, attr_destroy),
    .consume = attr_consume,
};

const pl_component_type pl_processor_resource = {
    PL_COMPONENT_HEAD("resource", PL_KIND_PROCESSOR, PL_SIGNALS_ALL, &resource_section),
    .description = "insert, update, upsert, delete, hash, extract and convert resource attributes",
    PL_COMPONENT_LIFECYCLE(resource_create, attr_start, attr_shutdown, attr_destroy),
    .consume = attr_consume,
};

/* ---- fixed resource attributes (resource_fixed.h) ------------------------ */

pl_status pl_resource_fixed_create(const pl_create_settings *s, const char *const *keys,
                                   const char *const *values, size_t n, bool override, void **out,
                                   pl_err *err)
{
    attr_action_cfg *acts = calloc(n ? n : 1, sizeof(*acts));
    if (!acts)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        acts[i].key = (char *)keys[i];
        acts[i].action = (char *)(override ? "upsert" : "insert");
        acts[i].value = (char *)values[i];
    }
    pl_cfg_list list = {acts, n};
    pl_status st = attr_create_common(s, &list, true, out, err);
    free(acts);
    return st;
}

pl_status pl_resource_fixed_consume(void *self, pl_batch *batch, pl_consumer *next)
{
    return attr_consume(self, batch, next);
}

void pl_resource_fixed_destroy(void *self)
{
    attr_destroy(self);
}
