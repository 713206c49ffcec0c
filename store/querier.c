/*
 * querier.c: `querier.v1.QuerierService` over the Connect unary protocol,
 * and Pyroscope's legacy `GET /pyroscope/render` (see querier.h).
 *
 * Connect unary: `POST /querier.v1.QuerierService/<Method>` with the
 * message as the whole body, `Content-Type: application/proto` (Grafana's
 * Go backend, connect-go) or `application/json` (protojson: Profiles
 * Drilldown through Grafana's proxy, without `Connect-Protocol-Version`).
 * The answer uses the request's format; an error is a JSON body
 * `{"code":"invalid_argument","message":"..."}` with the HTTP status
 * connect-go maps the code to (grafana.md A1).
 *
 * Requests are decoded through one field table per method (number, kind,
 * protobuf name, where it goes in pl_qrequest): the protobuf reader and
 * the protojson reader walk the same table, so both formats accept exactly
 * the same fields. JSON keys match the proto name and the lowerCamel JSON
 * name alike (Drilldown mixes `profile_typeID` with `maxNodes`). A nested
 * message (stack_trace_selector) has a table of its own, walked the same
 * way, whose fields land in the same pl_qrequest. Bodies are
 * bounded by the API listener (64 KiB), strings and lists by the table
 * walker, and every string is copied into the request's arena.
 *
 * Responses go through one writer that emits either protobuf (nested
 * messages into child buffers, then length-prefixed) or protojson
 * (lowerCamel names, int64 as strings), so each message is described once.
 */
#include "store/querier_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/component.h"
#include "net/compress.h"
#include "net/http_server.h"
#include "proto/json_reader.h"
#include "proto/otlp_pb.h"
#include "proto/pb_wire.h"
#include "proto/pprof.h"

#define SERVICE_PREFIX "/querier.v1.QuerierService/"
#define MAX_STRING     16384

/* ---- request decoding --------------------------------------------------- */

/* F_MSG is a nested message whose fields (its `sub` table) go into the same
 * pl_qrequest; F_MSGS a repeated one, each element one entry of the list at
 * `off`, which its F_ELEM field (a string) sets (Location{name}). */
typedef enum fkind {
    F_STR,
    F_STRS,
    F_I64,
    F_DBL,
    F_BOOL,
    F_ENUM,
    F_MSG,
    F_MSGS,
    F_ELEM,
    F_SKIP
} fkind;

typedef struct qfield {
    uint32_t num;
    fkind kind;
    const char *name;         /* the proto name; JSON also takes its lowerCamel form */
    size_t off;               /* into pl_qrequest */
    ptrdiff_t has;            /* offset of the bool set when present, or -1 */
    const struct qfield *sub; /* F_MSG, F_MSGS: the message's fields */
    uint32_t max;             /* F_MSGS: entries; F_ELEM: bytes (0: the defaults) */
} qfield;

#define R(m)  offsetof(pl_qrequest, m)
#define NOHAS (-1)
#define F(n, k, name, m)                                                                           \
    {                                                                                              \
        n, k, name, R(m), NOHAS, NULL, 0                                                           \
    }
#define FH(n, k, name, m, has_m)                                                                   \
    {                                                                                              \
        n, k, name, R(m), (ptrdiff_t)R(has_m), NULL, 0                                             \
    }
#define SKIP(n, name)                                                                              \
    {                                                                                              \
        n, F_SKIP, name, 0, NOHAS, NULL, 0                                                         \
    }
#define END                                                                                        \
    {                                                                                              \
        0, F_SKIP, NULL, 0, NOHAS, NULL, 0                                                         \
    }

/* types.v1.StackTraceSelector{call_site=1 repeated Location{name=1};
 * go_pgo=2 GoPGO{keep_locations=1 uint32; aggregate_callees=2 bool}} */
static const qfield location_fields[] = {
    {1, F_ELEM, "name", R(call_site), NOHAS, NULL, PL_QCALL_SITE_NAME_MAX}, END};
static const qfield go_pgo_fields[] = {F(1, F_I64, "keep_locations", keep_locations),
                                       F(2, F_BOOL, "aggregate_callees", aggregate_callees), END};
static const qfield stack_trace_selector_fields[] = {
    {1, F_MSGS, "call_site", R(call_site), NOHAS, location_fields, PL_QCALL_SITE_MAX},
    {2, F_MSG, "go_pgo", 0, NOHAS, go_pgo_fields, 0},
    END};
#define STACK_TRACE_SELECTOR(n)                                                                    \
    {                                                                                              \
        n, F_MSG, "stack_trace_selector", 0, NOHAS, stack_trace_selector_fields, 0                 \
    }

static const qfield range_fields[] = {F(1, F_I64, "start", start_ms), F(2, F_I64, "end", end_ms),
                                      END};
static const qfield label_names_fields[] = {F(1, F_STRS, "matchers", matchers),
                                            F(2, F_I64, "start", start_ms),
                                            F(3, F_I64, "end", end_ms), END};
static const qfield label_values_fields[] = {
    F(1, F_STR, "name", name), F(2, F_STRS, "matchers", matchers), F(3, F_I64, "start", start_ms),
    F(4, F_I64, "end", end_ms), END};
static const qfield series_fields[] = {
    F(1, F_STRS, "matchers", matchers), F(2, F_STRS, "label_names", label_names),
    F(3, F_I64, "start", start_ms), F(4, F_I64, "end", end_ms), END};
static const qfield merge_fields[] = {
    F(1, F_STR, "profile_typeID", profile_type), F(2, F_STR, "label_selector", label_selector),
    F(3, F_I64, "start", start_ms), F(4, F_I64, "end", end_ms),
    FH(5, F_I64, "max_nodes", max_nodes, has_max_nodes), F(6, F_ENUM, "format", format),
    STACK_TRACE_SELECTOR(7), F(8, F_STRS, "profile_id_selector", profile_id_selector),
    SKIP(9, "async"), F(10, F_STRS, "trace_id_selector", trace_id_selector),
    F(11, F_STRS, "span_selector", span_selector),
    /* proflink: also the samples of every span below the selected ones */
    F(100, F_BOOL, "include_descendants", include_descendants), END};
static const qfield span_fields[] = {F(1, F_STR, "profile_typeID", profile_type),
                                     F(2, F_STR, "label_selector", label_selector),
                                     F(3, F_STRS, "span_selector", span_selector),
                                     F(4, F_I64, "start", start_ms),
                                     F(5, F_I64, "end", end_ms),
                                     FH(6, F_I64, "max_nodes", max_nodes, has_max_nodes),
                                     F(7, F_ENUM, "format", format),
                                     F(100, F_BOOL, "include_descendants", include_descendants),
                                     END};
static const qfield series_select_fields[] = {F(1, F_STR, "profile_typeID", profile_type),
                                              F(2, F_STR, "label_selector", label_selector),
                                              F(3, F_I64, "start", start_ms),
                                              F(4, F_I64, "end", end_ms),
                                              F(5, F_STRS, "group_by", group_by),
                                              F(6, F_DBL, "step", step),
                                              SKIP(7, "aggregation"),
                                              STACK_TRACE_SELECTOR(8),
                                              FH(9, F_I64, "limit", limit, has_limit),
                                              SKIP(10, "exemplar_type"),
                                              END};
static const qfield profile_fields[] = {F(1, F_STR, "profile_typeID", profile_type),
                                        F(2, F_STR, "label_selector", label_selector),
                                        F(3, F_I64, "start", start_ms),
                                        F(4, F_I64, "end", end_ms),
                                        FH(5, F_I64, "max_nodes", max_nodes, has_max_nodes),
                                        STACK_TRACE_SELECTOR(6),
                                        F(7, F_STRS, "profile_id_selector", profile_id_selector),
                                        F(8, F_STRS, "trace_id_selector", trace_id_selector),
                                        END};
static const qfield no_fields[] = {END};

typedef struct decoder {
    pl_arena *arena;
    pl_qrequest *req;
    pl_err *err;
} decoder;

static const qfield *field_by_num(const qfield *t, uint32_t num)
{
    for (; t->name; t++)
        if (t->num == num)
            return t;
    return NULL;
}

static const qfield *field_by_key(const qfield *t, const uint8_t *key, size_t len)
{
    for (; t->name; t++)
        if (pl_jr_key_folded_eq(key, len, t->name))
            return t;
    return NULL;
}

/* Appends an entry to the list at f->off (at most f->max entries, or
 * PL_QREQ_MAX_LIST). */
static pl_status list_append(decoder *d, const qfield *f, const char *v)
{
    pl_qlist *l = (pl_qlist *)((char *)d->req + f->off);
    size_t max = f->max ? f->max : PL_QREQ_MAX_LIST;
    if (l->n >= max)
        return pl_errf(d->err, PL_ERR_INVALID, "%s: more than %zu entries", f->name, max);
    if (l->n == 0) {
        l->items = pl_arena_calloc(d->arena, max, sizeof(char *));
        if (!l->items)
            return pl_errf(d->err, PL_ERR_NOMEM, "out of memory");
    }
    l->items[l->n++] = v;
    return PL_OK;
}

static pl_status put_string(decoder *d, const qfield *f, const uint8_t *s, size_t len)
{
    size_t max = f->kind == F_ELEM && f->max ? f->max : MAX_STRING;
    if (len > max)
        return pl_errf(d->err, PL_ERR_INVALID, "%s: longer than %zu bytes", f->name, max);
    if (memchr(s, 0, len) || !pl_utf8_valid(s, len))
        return pl_errf(d->err, PL_ERR_INVALID, "%s: not a valid UTF-8 string", f->name);
    char *copy = pl_arena_alloc(d->arena, len + 1);
    if (!copy)
        return pl_errf(d->err, PL_ERR_NOMEM, "out of memory");
    if (len)
        memcpy(copy, s, len);
    copy[len] = 0;
    char *base = (char *)d->req;
    if (f->kind == F_STR) {
        *(const char **)(base + f->off) = copy;
        return PL_OK;
    }
    if (f->kind == F_ELEM) { /* the entry of the element being decoded */
        pl_qlist *l = (pl_qlist *)(base + f->off);
        if (!l->n)
            return pl_errf(d->err, PL_ERR_INVALID, "%s: outside its message", f->name);
        l->items[l->n - 1] = copy;
        return PL_OK;
    }
    return list_append(d, f, copy);
}

/* A nested message starts: F_MSG marks its presence, F_MSGS adds the entry
 * its fields then set ("" until they do). */
static pl_status begin_message(decoder *d, const qfield *f)
{
    if (f->kind == F_MSGS)
        return list_append(d, f, "");
    if (f->has >= 0)
        *(bool *)((char *)d->req + f->has) = true;
    return PL_OK;
}

static void put_number(decoder *d, const qfield *f, int64_t i, double v)
{
    char *base = (char *)d->req;
    if (f->kind == F_DBL)
        *(double *)(base + f->off) = v;
    else if (f->kind == F_BOOL)
        *(bool *)(base + f->off) = i != 0;
    else
        *(int64_t *)(base + f->off) = i;
    if (f->has >= 0)
        *(bool *)(base + f->has) = true;
}

static pl_status decode_proto(decoder *d, const qfield *table, const uint8_t *p, size_t len)
{
    pl_pb_reader r = {p, p + len};
    while (r.p < r.end) {
        uint64_t key, v = 0;
        if (pl_pb_read_varint(&r, &key) < 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
            return pl_errf(d->err, PL_ERR_INVALID, "request: bad protobuf field key");
        uint32_t num = (uint32_t)(key >> 3), wt = (uint32_t)(key & 7);
        const uint8_t *data = NULL;
        switch (wt) {
        case PL_PB_VARINT:
            if (pl_pb_read_varint(&r, &v) < 0)
                return pl_errf(d->err, PL_ERR_INVALID, "request: truncated varint");
            break;
        case PL_PB_I64:
        case PL_PB_I32: {
            size_t n = wt == PL_PB_I64 ? 8 : 4;
            if ((size_t)(r.end - r.p) < n)
                return pl_errf(d->err, PL_ERR_INVALID, "request: truncated fixed field");
            for (size_t i = 0; i < n; i++)
                v |= (uint64_t)r.p[i] << (8 * i);
            r.p += n;
            break;
        }
        case PL_PB_LEN:
            if (pl_pb_read_varint(&r, &v) < 0 || v > (uint64_t)(r.end - r.p))
                return pl_errf(d->err, PL_ERR_INVALID, "request: bad length-delimited field");
            data = r.p;
            r.p += v;
            break;
        default:
            return pl_errf(d->err, PL_ERR_INVALID, "request: unsupported wire type %u", wt);
        }
        const qfield *f = field_by_num(table, num);
        if (!f || f->kind == F_SKIP)
            continue;
        bool msg = f->kind == F_MSG || f->kind == F_MSGS;
        bool want_len = msg || f->kind == F_STR || f->kind == F_STRS || f->kind == F_ELEM;
        bool want_i64 = f->kind == F_DBL;
        if ((want_len && wt != PL_PB_LEN) || (want_i64 && wt != PL_PB_I64) ||
            (!want_len && !want_i64 && wt != PL_PB_VARINT))
            return pl_errf(d->err, PL_ERR_INVALID, "%s: wrong wire type %u", f->name, wt);
        if (msg) { /* the tables nest a fixed number of levels */
            pl_status st = begin_message(d, f);
            if (st == PL_OK)
                st = decode_proto(d, f->sub, data, (size_t)v);
            if (st != PL_OK)
                return st;
        } else if (want_len) {
            pl_status st = put_string(d, f, data, (size_t)v);
            if (st != PL_OK)
                return st;
        } else if (want_i64) {
            double x;
            memcpy(&x, &v, sizeof(x));
            put_number(d, f, 0, x);
        } else {
            put_number(d, f, (int64_t)v, 0);
        }
    }
    return PL_OK;
}

/* ProfileFormat and other enums by name (protojson writes names). */
static int64_t enum_value(const uint8_t *s, size_t len)
{
    static const char *const formats[] = {"PROFILE_FORMAT_UNSPECIFIED", "PROFILE_FORMAT_FLAMEGRAPH",
                                          "PROFILE_FORMAT_TREE", "PROFILE_FORMAT_DOT",
                                          "PROFILE_FORMAT_PPROF"};
    for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
        if (strlen(formats[i]) == len && memcmp(formats[i], s, len) == 0)
            return (int64_t)i;
    return 0;
}

static pl_status json_string(decoder *d, pl_jr *jr, const qfield *f)
{
    pl_jstr s;
    if (!pl_jr_string(jr, &s))
        return pl_errf(d->err, PL_ERR_INVALID, "%s: expected a string", f->name);
    if (!s.escaped)
        return put_string(d, f, s.ptr, s.len);
    uint8_t *tmp = malloc(s.len + 1);
    if (!tmp)
        return pl_errf(d->err, PL_ERR_NOMEM, "out of memory");
    long n = pl_jr_unescape(&s, tmp);
    pl_status st = n < 0 ? pl_errf(d->err, PL_ERR_INVALID, "%s: bad escape", f->name)
                         : put_string(d, f, tmp, (size_t)n);
    free(tmp);
    return st;
}

/* A JSON number or a quoted number (protojson int64 and double). */
static pl_status json_number(decoder *d, pl_jr *jr, const qfield *f)
{
    char tmp[64];
    const char *text;
    size_t len;
    pl_jtype t = pl_jr_peek(jr);
    if (t == PL_JT_NUMBER) {
        if (!pl_jr_number(jr, &text, &len))
            return pl_errf(d->err, PL_ERR_INVALID, "%s: bad number", f->name);
    } else if (t == PL_JT_STRING) {
        pl_jstr s;
        if (!pl_jr_string(jr, &s) || s.escaped)
            return pl_errf(d->err, PL_ERR_INVALID, "%s: expected a number", f->name);
        if (f->kind == F_ENUM) {
            put_number(d, f, enum_value(s.ptr, s.len), 0);
            return PL_OK;
        }
        text = (const char *)s.ptr;
        len = s.len;
    } else {
        return pl_errf(d->err, PL_ERR_INVALID, "%s: expected a number", f->name);
    }
    if (len == 0 || len >= sizeof(tmp))
        return pl_errf(d->err, PL_ERR_INVALID, "%s: bad number", f->name);
    memcpy(tmp, text, len);
    tmp[len] = 0;
    char *end;
    if (f->kind == F_DBL) {
        double v = strtod(tmp, &end);
        if (*end || !isfinite(v))
            return pl_errf(d->err, PL_ERR_INVALID, "%s: bad number", f->name);
        put_number(d, f, 0, v);
        return PL_OK;
    }
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (*end == '.' || *end == 'e' || *end == 'E') { /* 1e3, 10.0: integral values only */
        double x = strtod(tmp, &end);
        if (*end || x != floor(x) || fabs(x) > 9.2e18)
            return pl_errf(d->err, PL_ERR_INVALID, "%s: not an integer", f->name);
        v = (long long)x;
    } else if (*end || errno) {
        return pl_errf(d->err, PL_ERR_INVALID, "%s: not a 64-bit integer", f->name);
    }
    put_number(d, f, v, 0);
    return PL_OK;
}

static pl_status json_object(decoder *d, pl_jr *jr, const qfield *table);

/* A nested message: an object (F_MSG), an array of objects (F_MSGS). */
static pl_status json_message(decoder *d, pl_jr *jr, const qfield *f)
{
    if (f->kind == F_MSG) {
        if (pl_jr_peek(jr) != PL_JT_OBJECT)
            return pl_errf(d->err, PL_ERR_INVALID, "%s: expected an object", f->name);
        pl_status st = begin_message(d, f);
        return st == PL_OK ? json_object(d, jr, f->sub) : st;
    }
    if (!pl_jr_array_begin(jr))
        return pl_errf(d->err, PL_ERR_INVALID, "%s: expected an array", f->name);
    unsigned count = 0;
    int more;
    while ((more = pl_jr_array_next(jr, &count)) == 1) {
        if (pl_jr_peek(jr) != PL_JT_OBJECT)
            return pl_errf(d->err, PL_ERR_INVALID, "%s: expected an array of objects", f->name);
        pl_status st = begin_message(d, f);
        if (st == PL_OK)
            st = json_object(d, jr, f->sub);
        if (st != PL_OK)
            return st;
    }
    return more == 0 ? PL_OK : pl_errf(d->err, PL_ERR_INVALID, "%s: bad array", f->name);
}

static pl_status json_value(decoder *d, pl_jr *jr, const qfield *f)
{
    if (!f || f->kind == F_SKIP || pl_jr_peek(jr) == PL_JT_NULL)
        return pl_jr_skip(jr) ? PL_OK : pl_errf(d->err, PL_ERR_INVALID, "request: bad JSON");
    switch (f->kind) {
    case F_STR:
    case F_ELEM:
        return json_string(d, jr, f);
    case F_STRS: {
        if (!pl_jr_array_begin(jr))
            return pl_errf(d->err, PL_ERR_INVALID, "%s: expected an array", f->name);
        unsigned count = 0;
        int more;
        while ((more = pl_jr_array_next(jr, &count)) == 1) {
            pl_status st = json_string(d, jr, f);
            if (st != PL_OK)
                return st;
        }
        return more == 0 ? PL_OK : pl_errf(d->err, PL_ERR_INVALID, "%s: bad array", f->name);
    }
    case F_MSG:
    case F_MSGS:
        return json_message(d, jr, f);
    case F_BOOL: {
        pl_jtype t = pl_jr_peek(jr);
        if ((t != PL_JT_TRUE && t != PL_JT_FALSE) || !pl_jr_literal(jr))
            return pl_errf(d->err, PL_ERR_INVALID, "%s: expected true or false", f->name);
        put_number(d, f, t == PL_JT_TRUE, 0);
        return PL_OK;
    }
    default:
        return json_number(d, jr, f);
    }
}

/* The members of an object (its '{' next) by the table's fields. */
static pl_status json_object(decoder *d, pl_jr *jr, const qfield *table)
{
    if (!pl_jr_object_begin(jr))
        return pl_errf(d->err, PL_ERR_INVALID, "request: expected a JSON object");
    unsigned count = 0;
    pl_jstr key;
    int more;
    while ((more = pl_jr_object_next(jr, &count, &key)) == 1) {
        const qfield *f = key.escaped ? NULL : field_by_key(table, key.ptr, key.len);
        pl_status st = json_value(d, jr, f);
        if (st != PL_OK)
            return st;
    }
    if (more < 0)
        return pl_errf(d->err, PL_ERR_INVALID, "request: bad JSON: %s at byte %zu",
                       jr->error ? jr->error : "syntax error", jr->error_at);
    return PL_OK;
}

static pl_status decode_json(decoder *d, const qfield *table, const uint8_t *p, size_t len)
{
    pl_jr jr;
    pl_jr_init(&jr, p, len, 16);
    if (len == 0)
        return PL_OK;
    if (pl_jr_peek(&jr) != PL_JT_OBJECT)
        return pl_errf(d->err, PL_ERR_INVALID, "request: expected a JSON object");
    pl_status st = json_object(d, &jr, table);
    if (st == PL_OK && !pl_jr_finish(&jr))
        return pl_errf(d->err, PL_ERR_INVALID, "request: bad JSON: %s at byte %zu",
                       jr.error ? jr.error : "syntax error", jr.error_at);
    return st;
}

/* ---- response writer ---------------------------------------------------- */

#define W_DEPTH 8

typedef struct writer {
    bool json;
    pl_buf *out;             /* the top-level buffer */
    pl_buf stack[W_DEPTH];   /* protobuf: open nested messages */
    uint32_t field[W_DEPTH]; /* their field numbers */
    bool first[W_DEPTH + 1]; /* JSON: nothing written yet at this depth */
    int depth;
    bool failed;
} writer;

static pl_buf *w_buf(writer *w)
{
    return w->depth && !w->json ? &w->stack[w->depth - 1] : w->out;
}

static void w_init(writer *w, bool json, pl_buf *out)
{
    memset(w, 0, sizeof(*w));
    w->json = json;
    w->out = out;
    w->first[0] = true;
    if (json)
        pl_buf_append_byte(out, '{');
}

static void w_key(writer *w, const char *name)
{
    pl_buf *b = w->out;
    if (!w->first[w->depth])
        pl_buf_append_byte(b, ',');
    w->first[w->depth] = false;
    if (name) {
        pl_buf_json_string(b, name, strlen(name));
        pl_buf_append_byte(b, ':');
    }
}

/* Opens a message (name NULL: an element of a repeated field). */
static void w_begin(writer *w, uint32_t field, const char *name)
{
    if (w->depth == W_DEPTH) {
        w->failed = true;
        return;
    }
    if (w->json) {
        w_key(w, name);
        pl_buf_append_byte(w->out, '{');
    } else {
        pl_buf_init(&w->stack[w->depth]);
        w->field[w->depth] = field;
    }
    w->depth++;
    w->first[w->depth] = true;
}

static void w_end(writer *w)
{
    if (w->depth == 0) {
        w->failed = true;
        return;
    }
    w->depth--;
    if (w->json) {
        pl_buf_append_byte(w->out, '}');
        return;
    }
    pl_buf *child = &w->stack[w->depth];
    if (!pl_buf_ok(child))
        w->failed = true;
    pl_pb_put_bytes(w_buf(w), w->field[w->depth], child->data, child->len);
    pl_buf_free(child);
}

/* JSON arrays around repeated fields (no-ops for protobuf). */
static void w_list(writer *w, const char *name)
{
    if (!w->json)
        return;
    w_key(w, name);
    pl_buf_append_byte(w->out, '[');
    w->depth++;
    w->first[w->depth] = true;
}

static void w_list_end(writer *w)
{
    if (!w->json)
        return;
    w->depth--;
    pl_buf_append_byte(w->out, ']');
}

static void w_string(writer *w, uint32_t field, const char *name, const char *s)
{
    if (w->json) {
        w_key(w, name);
        pl_buf_json_string(w->out, s, strlen(s));
    } else {
        pl_pb_put_bytes(w_buf(w), field, s, strlen(s));
    }
}

static void w_int64(writer *w, uint32_t field, const char *name, int64_t v)
{
    if (w->json) {
        w_key(w, name);
        pl_buf_printf(w->out, "\"%" PRId64 "\"", v);
    } else {
        pl_pb_put_varint(w_buf(w), (uint64_t)field << 3 | PL_PB_VARINT);
        pl_pb_put_varint(w_buf(w), (uint64_t)v);
    }
}

static void w_bool(writer *w, uint32_t field, const char *name, bool v)
{
    if (w->json) {
        w_key(w, name);
        pl_buf_append_str(w->out, v ? "true" : "false");
    } else {
        pl_pb_put_varint(w_buf(w), (uint64_t)field << 3 | PL_PB_VARINT);
        pl_pb_put_varint(w_buf(w), v);
    }
}

static void w_double(writer *w, uint32_t field, const char *name, double v)
{
    if (w->json) {
        w_key(w, name);
        pl_buf_printf(w->out, "%.17g", isfinite(v) ? v : 0.0);
        return;
    }
    uint8_t le[8];
    uint64_t bits;
    memcpy(&bits, &v, 8);
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(bits >> (8 * i));
    pl_buf *b = w_buf(w);
    pl_pb_put_varint(b, (uint64_t)field << 3 | PL_PB_I64);
    pl_buf_append(b, le, 8);
}

/* A packed repeated int64 (JSON: an array of strings). */
static void w_packed(writer *w, uint32_t field, const char *name, const int64_t *v, size_t n)
{
    if (w->json) {
        w_key(w, name);
        pl_buf_append_byte(w->out, '[');
        for (size_t i = 0; i < n; i++)
            pl_buf_printf(w->out, i ? ",\"%" PRId64 "\"" : "\"%" PRId64 "\"", v[i]);
        pl_buf_append_byte(w->out, ']');
        return;
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += pl_pb_varint_len((uint64_t)v[i]);
    pl_buf *b = w_buf(w);
    pl_pb_put_len(b, field, len);
    for (size_t i = 0; i < n; i++)
        pl_pb_put_varint(b, (uint64_t)v[i]);
}

static bool w_finish(writer *w)
{
    while (w->depth && !w->json) { /* only after a failure */
        w->depth--;
        pl_buf_free(&w->stack[w->depth]);
    }
    if (w->json)
        pl_buf_append_byte(w->out, '}');
    return !w->failed && pl_buf_ok(w->out);
}

/* ---- messages ----------------------------------------------------------- */

static void w_names(writer *w, const char *name, const char *const *v, size_t n)
{
    w_list(w, name);
    for (size_t i = 0; i < n; i++)
        w_string(w, 1, NULL, v[i]);
    w_list_end(w);
}

static void w_labels(writer *w, uint32_t field, const char *name, const pl_qlabel *l, size_t n)
{
    w_list(w, name);
    for (size_t i = 0; i < n; i++) {
        w_begin(w, field, NULL);
        w_string(w, 1, "name", l[i].name);
        w_string(w, 2, "value", l[i].value);
        w_end(w);
    }
    w_list_end(w);
}

static void w_flamegraph(writer *w, uint32_t field, const pl_qflame *f)
{
    w_begin(w, field, "flamegraph");
    w_names(w, "names", f->names, f->n_names);
    w_list(w, "levels");
    for (size_t d = 0; d < f->n_levels; d++) {
        w_begin(w, 2, NULL);
        w_packed(w, 1, "values", f->levels[d], f->level_len[d]);
        w_end(w);
    }
    w_list_end(w);
    w_int64(w, 3, "total", f->total);
    w_int64(w, 4, "maxSelf", f->max_self);
    w_end(w);
}

static void w_series(writer *w, const pl_qseries *s, size_t n, bool points)
{
    w_list(w, points ? "series" : "labelsSet");
    for (size_t i = 0; i < n; i++) {
        w_begin(w, points ? 1 : 2, NULL);
        w_labels(w, 1, "labels", s[i].labels, s[i].n_labels);
        if (points) {
            w_list(w, "points");
            for (size_t k = 0; k < s[i].n_points; k++) {
                w_begin(w, 2, NULL);
                w_double(w, 1, "value", s[i].values[k]);
                w_int64(w, 2, "timestamp", s[i].ts_ms[k]);
                w_end(w);
            }
            w_list_end(w);
        }
        w_end(w);
    }
    w_list_end(w);
}

/* ---- methods ------------------------------------------------------------ */

typedef struct call {
    pl_qctx *q;
    pl_qrequest *req;
    writer *w;
    pl_buf *raw; /* SelectMergeProfile: the pprof bytes, written as they are */
} call;

typedef pl_status (*method_fn)(call *c);

static pl_status m_profile_types(call *c)
{
    const pl_qtype **t;
    size_t n;
    pl_status st = pl_q_profile_types(c->q, c->req, &t, &n);
    if (st != PL_OK)
        return st;
    w_list(c->w, "profileTypes");
    for (size_t i = 0; i < n; i++) {
        w_begin(c->w, 1, NULL);
        w_string(c->w, 1, "ID", t[i]->id);
        w_string(c->w, 2, "name", t[i]->name);
        w_string(c->w, 4, "sampleType", t[i]->sample_type);
        w_string(c->w, 5, "sampleUnit", t[i]->sample_unit);
        w_string(c->w, 6, "periodType", t[i]->period_type);
        w_string(c->w, 7, "periodUnit", t[i]->period_unit);
        w_end(c->w);
    }
    w_list_end(c->w);
    return PL_OK;
}

static pl_status m_label_names(call *c)
{
    const char **v;
    size_t n;
    pl_status st = pl_q_label_names(c->q, c->req, &v, &n);
    if (st == PL_OK)
        w_names(c->w, "names", v, n);
    return st;
}

static pl_status m_label_values(call *c)
{
    const char **v;
    size_t n;
    pl_status st = pl_q_label_values(c->q, c->req, &v, &n);
    if (st == PL_OK)
        w_names(c->w, "names", v, n);
    return st;
}

static pl_status m_series(call *c)
{
    pl_qseries *s;
    size_t n;
    pl_status st = pl_q_series(c->q, c->req, &s, &n);
    if (st == PL_OK)
        w_series(c->w, s, n, false);
    return st;
}

static pl_status merged_flamegraph(call *c, bool spans)
{
    if (c->req->format > 1)
        return pl_errf(c->q->err, PL_ERR_UNSUPPORTED,
                       "format: only the flame graph is implemented (not tree, dot or pprof)");
    if (c->req->has_max_nodes && c->req->max_nodes < 0)
        return pl_errf(c->q->err, PL_ERR_INVALID, "max_nodes: must not be negative");
    pl_qtree *tree = pl_qtree_new();
    if (!tree)
        return pl_errf(c->q->err, PL_ERR_NOMEM, "out of memory");
    const pl_qtype *type;
    pl_status st = pl_q_merge(c->q, c->req, spans, tree, &type);
    pl_qflame f;
    if (st == PL_OK && pl_qtree_flamegraph(tree, c->req->max_nodes, &f) < 0)
        st = pl_errf(c->q->err, PL_ERR_NOMEM, "out of memory");
    if (st == PL_OK) {
        w_flamegraph(c->w, 1, &f);
        pl_qflame_free(&f);
    }
    pl_qtree_free(tree);
    return st;
}

static pl_status m_merge_stacktraces(call *c)
{
    return merged_flamegraph(c, c->req->span_selector.n > 0);
}

static pl_status m_merge_span_profile(call *c)
{
    return merged_flamegraph(c, true);
}

static pl_status m_select_series(call *c)
{
    pl_qseries *s;
    size_t n;
    pl_status st = pl_q_select_series(c->q, c->req, &s, &n);
    if (st == PL_OK)
        w_series(c->w, s, n, true);
    return st;
}

static pl_status m_profile_stats(call *c)
{
    bool ingested;
    int64_t oldest, newest;
    pl_status st = pl_q_profile_stats(c->q, &ingested, &oldest, &newest);
    if (st != PL_OK)
        return st;
    w_bool(c->w, 1, "dataIngested", ingested);
    w_int64(c->w, 2, "oldestProfileTime", oldest);
    w_int64(c->w, 3, "newestProfileTime", newest);
    return PL_OK;
}

typedef struct pprof_add {
    pl_pprof_writer *w;
    int rc;
} pprof_add;

static void add_pprof_stack(void *arg, const char *const *frames, size_t n, int64_t self)
{
    pprof_add *a = arg;
    pl_bytes *b = malloc((n ? n : 1) * sizeof(pl_bytes));
    if (!b) {
        a->rc = -1;
        return;
    }
    for (size_t i = 0; i < n; i++)
        b[i] = pl_bytes_from_cstr(frames[i]);
    if (pl_pprof_writer_add(a->w, b, n, self) < 0)
        a->rc = -1;
    free(b);
}

/* go_pgo.keep_locations: the stacks of `from` cut to their `keep` leaf-most
 * frames, merged into `to` (stacks that become the same add up). */
typedef struct truncated {
    pl_qtree *to;
    size_t keep;
    int rc;
} truncated;

static void add_truncated(void *arg, const char *const *frames, size_t n, int64_t self)
{
    truncated *t = arg;
    size_t k = n < t->keep ? n : t->keep;
    int32_t *names = malloc((k ? k : 1) * sizeof(int32_t));
    if (!names) {
        t->rc = -1;
        return;
    }
    for (size_t i = 0; i < k; i++) { /* frames are leaf first; the tree root first */
        names[k - 1 - i] = pl_qtree_name(t->to, frames[i], strlen(frames[i]));
        if (names[k - 1 - i] < 0)
            t->rc = -1;
    }
    if (t->rc == 0 && pl_qtree_add(t->to, names, k, self) < 0)
        t->rc = -1;
    free(names);
}

static pl_status keep_locations(call *c, pl_qtree **tree)
{
    if (c->req->keep_locations < 0 || c->req->keep_locations > UINT32_MAX)
        return pl_errf(c->q->err, PL_ERR_INVALID, "keep_locations: not a uint32");
    if (c->req->keep_locations == 0)
        return PL_OK;
    truncated t = {pl_qtree_new(), (size_t)c->req->keep_locations, 0};
    if (!t.to || pl_qtree_stacks(*tree, add_truncated, &t) < 0 || t.rc < 0) {
        pl_qtree_free(t.to);
        return pl_errf(c->q->err, PL_ERR_NOMEM, "out of memory");
    }
    pl_qtree_free(*tree);
    *tree = t.to;
    return PL_OK;
}

static pl_status m_merge_profile(call *c)
{
    if (c->w->json)
        return pl_errf(c->q->err, PL_ERR_UNSUPPORTED,
                       "SelectMergeProfile: only application/proto (pprof) is implemented");
    pl_qtree *tree = pl_qtree_new();
    if (!tree)
        return pl_errf(c->q->err, PL_ERR_NOMEM, "out of memory");
    const pl_qtype *type;
    pl_status st = pl_q_merge(c->q, c->req, false, tree, &type);
    if (st == PL_OK)
        st = keep_locations(c, &tree);
    if (st == PL_OK) {
        int64_t start, end;
        end = c->req->end_ms > 0 ? c->req->end_ms : (int64_t)(pl_time_now_ns() / 1000000);
        start = c->req->start_ms > 0 ? c->req->start_ms : end - 3600000;
        pl_pprof_writer_options opt = {
            .sample_type = type ? type->sample_type : "samples",
            .sample_unit = type ? type->sample_unit : "count",
            .period_type = type && *type->period_type ? type->period_type : NULL,
            .period_unit = type && *type->period_unit ? type->period_unit : NULL,
            .time_unix_nano = (uint64_t)start * 1000000ull,
            .duration_nano = end > start ? (uint64_t)(end - start) * 1000000ull : 0,
        };
        pprof_add a = {pl_pprof_writer_new(&opt), 0};
        if (!a.w || pl_qtree_stacks(tree, add_pprof_stack, &a) < 0 || a.rc < 0 ||
            pl_pprof_writer_finish(a.w, c->raw) < 0)
            st = pl_errf(c->q->err, PL_ERR_NOMEM, "out of memory");
        pl_pprof_writer_free(a.w);
    }
    pl_qtree_free(tree);
    return st;
}

typedef struct method {
    const char *name;
    const qfield *fields;
    method_fn fn;
} method;

static const method methods[] = {
    {"ProfileTypes", range_fields, m_profile_types},
    {"LabelNames", label_names_fields, m_label_names},
    {"LabelValues", label_values_fields, m_label_values},
    {"Series", series_fields, m_series},
    {"SelectMergeStacktraces", merge_fields, m_merge_stacktraces},
    {"SelectMergeSpanProfile", span_fields, m_merge_span_profile},
    {"SelectSeries", series_select_fields, m_select_series},
    {"SelectMergeProfile", profile_fields, m_merge_profile},
    {"GetProfileStats", no_fields, m_profile_stats},
};

/* ---- Connect transport -------------------------------------------------- */

static const struct {
    pl_status st;
    const char *code;
    int http;
} codes[] = {
    {PL_ERR_INVALID, "invalid_argument", 400},     {PL_ERR_TOO_LARGE, "resource_exhausted", 429},
    {PL_ERR_UNSUPPORTED, "unimplemented", 404},    {PL_ERR_REFUSED, "unavailable", 503},
    {PL_ERR_THROTTLED, "resource_exhausted", 429}, {PL_ERR_UNAUTHENTICATED, "unauthenticated", 401},
    {PL_ERR_NOT_FOUND, "not_found", 404},          {PL_ERR_NOMEM, "resource_exhausted", 429},
};

static void connect_error(pl_http_response *res, pl_status st, const char *msg)
{
    const char *code = "internal";
    int http = 500;
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (codes[i].st == st) {
            code = codes[i].code;
            http = codes[i].http;
        }
    pl_buf b;
    pl_buf_init(&b);
    pl_buf_printf(&b, "{\"code\":\"%s\",\"message\":", code);
    pl_buf_json_string(&b, msg, strlen(msg));
    pl_buf_append_byte(&b, '}');
    pl_http_header h[2] = {{"Content-Type", 12, "application/json", 16},
                           {"Cache-Control", 13, "no-store", 8}};
    if (pl_buf_ok(&b))
        pl_http_respond(res, http, h, 2, b.data, b.len);
    else
        pl_http_respond(res, 500, h, 2, "{\"code\":\"internal\"}", 19);
    pl_buf_free(&b);
}

static bool header_is(const pl_http_request *req, const char *name, const char *want)
{
    size_t len;
    const char *v = pl_http_header_get(req, name, &len);
    size_t n = strlen(want);
    if (!v || len < n || strncasecmp(v, want, n) != 0)
        return false;
    return len == n || v[n] == ';' || v[n] == ' ';
}

static void respond_ok(pl_http_response *res, bool json, const pl_buf *b)
{
    const char *type = json ? "application/json" : "application/proto";
    pl_http_header h[2] = {{"Content-Type", 12, type, strlen(type)},
                           {"Cache-Control", 13, "no-store", 8}};
    pl_http_respond(res, 200, h, 2, b->data ? (const void *)b->data : "", b->len);
}

static void handle_connect(pl_store *store, const pl_err *open_err, const char *tenant,
                           pl_http_request *req, pl_http_response *res)
{
    const char *name = req->path + strlen(SERVICE_PREFIX);
    const method *m = NULL;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strcmp(methods[i].name, name) == 0)
            m = &methods[i];
    if (!m) {
        char msg[160];
        snprintf(msg, sizeof(msg), "querier.v1.QuerierService/%.60s is not implemented", name);
        connect_error(res, PL_ERR_UNSUPPORTED, msg);
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        pl_http_header h[2] = {{"Allow", 5, "POST", 4},
                               {"Content-Type", 12, "application/json", 16}};
        static const char body[] = "{\"code\":\"unimplemented\",\"message\":\"use POST\"}";
        pl_http_respond(res, 405, h, 2, body, sizeof(body) - 1);
        return;
    }
    bool json = header_is(req, "Content-Type", "application/json");
    if (!json && !header_is(req, "Content-Type", "application/proto")) {
        pl_http_header h[1] = {{"Accept-Post", 11, "application/proto, application/json", 35}};
        pl_http_respond(res, 415, h, 1, NULL, 0);
        return;
    }
    size_t vlen;
    const char *ver = pl_http_header_get(req, "Connect-Protocol-Version", &vlen);
    if (ver && !(vlen == 1 && ver[0] == '1')) {
        connect_error(res, PL_ERR_INVALID, "Connect-Protocol-Version: only 1 is supported");
        return;
    }
    pl_err err = {{0}};
    size_t elen = 0;
    const char *enc_name = pl_http_header_get(req, "Content-Encoding", &elen);
    pl_encoding enc = PL_ENCODING_IDENTITY;
    if (enc_name && !pl_encoding_parse(enc_name, elen, &enc)) {
        connect_error(res, PL_ERR_UNSUPPORTED, "Content-Encoding: use gzip, zstd or none");
        return;
    }
    uint8_t *body = NULL;
    size_t body_len = 0;
    pl_status st = pl_request_body(req, enc, 1 << 20, &body, &body_len, &err);
    if (st != PL_OK) {
        connect_error(res, st, err.msg);
        return;
    }
    if (!store) {
        free(body);
        connect_error(res, PL_ERR_REFUSED,
                      open_err && *open_err->msg ? open_err->msg : "store not readable yet");
        return;
    }
    pl_qctx q;
    st = pl_qctx_init(&q, store, tenant, &err);
    pl_qrequest r;
    memset(&r, 0, sizeof(r));
    if (st == PL_OK) {
        decoder d = {&q.arena, &r, &err};
        st = json ? decode_json(&d, m->fields, body, body_len)
                  : decode_proto(&d, m->fields, body, body_len);
    }
    free(body);
    pl_buf out, raw;
    pl_buf_init(&out);
    pl_buf_init(&raw);
    writer w;
    w_init(&w, json, &out);
    if (st == PL_OK) {
        call c = {&q, &r, &w, &raw};
        st = m->fn(&c);
    }
    bool ok = w_finish(&w);
    if (st != PL_OK)
        connect_error(res, st, err.msg);
    else if (raw.len || m->fn == m_merge_profile)
        pl_buf_ok(&raw) ? respond_ok(res, false, &raw)
                        : connect_error(res, PL_ERR_NOMEM, "out of memory");
    else if (!ok)
        connect_error(res, PL_ERR_NOMEM, "out of memory");
    else
        respond_ok(res, json, &out);
    pl_buf_free(&out);
    pl_buf_free(&raw);
    if (q.store)
        pl_qctx_free(&q);
}

/* ---- GET /pyroscope/render ---------------------------------------------- */

/* The value of `key` in a query string, percent-decoded into out. */
static bool query_param(const char *query, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    for (const char *p = query; p && *p;) {
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t w = 0;
            for (size_t i = klen + 1; i < len && w + 1 < cap; i++) {
                char c = p[i];
                if (c == '+') {
                    c = ' ';
                } else if (c == '%' && i + 2 < len && pl_hex_digit(p[i + 1]) >= 0 &&
                           pl_hex_digit(p[i + 2]) >= 0) {
                    c = (char)(pl_hex_digit(p[i + 1]) * 16 + pl_hex_digit(p[i + 2]));
                    i += 2;
                }
                out[w++] = c;
            }
            out[w] = 0;
            return true;
        }
        p = amp ? amp + 1 : NULL;
    }
    return false;
}

/* "now", "now-1h", or digits: seconds, ms, us or ns by their count. */
static int parse_time_ms(const char *s, int64_t now_ms, int64_t *out)
{
    if (strncmp(s, "now", 3) == 0) {
        if (!s[3]) {
            *out = now_ms;
            return 0;
        }
        int64_t d;
        if (s[3] != '-' || pl_parse_duration(s + 4, &d) < 0 || d < 0)
            return -1;
        *out = now_ms - d / 1000000;
        return 0;
    }
    size_t n = strlen(s);
    if (n == 0 || n > 19 || strspn(s, "0123456789") != n)
        return -1;
    long long v = strtoll(s, NULL, 10);
    *out = n <= 10 ? v * 1000 : n <= 13 ? v : n <= 16 ? v / 1000 : v / 1000000;
    return 0;
}

static const char *flamebearer_units(const pl_qtype *t)
{
    if (!t)
        return "";
    if (strcmp(t->sample_unit, "bytes") == 0)
        return "bytes";
    if (strstr(t->sample_type, "objects") || strstr(t->sample_type, "alloc_samples"))
        return "objects";
    if (strstr(t->sample_type, "goroutine"))
        return "goroutines";
    if (strcmp(t->name, "mutex") == 0 || strcmp(t->name, "block") == 0)
        return strcmp(t->sample_unit, "count") == 0 ? "lock_samples" : "lock_nanoseconds";
    return "samples";
}

static void handle_render(pl_store *store, const pl_err *open_err, const char *tenant,
                          pl_http_request *req, pl_http_response *res)
{
    char query[PL_QSEL_MAX_LEN + 512], tmp[64], format[16] = "json";
    int64_t now = (int64_t)(pl_time_now_ns() / 1000000), from = now - 3600000, until = now;
    pl_qrequest r;
    memset(&r, 0, sizeof(r));
    if (!query_param(req->query, "query", query, sizeof(query))) {
        connect_error(res, PL_ERR_INVALID, "query: required (<profile type id>{selector})");
        return;
    }
    if ((query_param(req->query, "from", tmp, sizeof(tmp)) && parse_time_ms(tmp, now, &from)) ||
        (query_param(req->query, "until", tmp, sizeof(tmp)) && parse_time_ms(tmp, now, &until))) {
        connect_error(res, PL_ERR_INVALID, "from, until: ms since the epoch or now-<duration>");
        return;
    }
    query_param(req->query, "format", format, sizeof(format));
    if (strcmp(format, "json") != 0) {
        connect_error(res, PL_ERR_UNSUPPORTED, "format: only json is implemented");
        return;
    }
    if (query_param(req->query, "max-nodes", tmp, sizeof(tmp)) ||
        query_param(req->query, "maxNodes", tmp, sizeof(tmp))) {
        r.max_nodes = strtoll(tmp, NULL, 10);
        r.has_max_nodes = true;
    }
    if (!store) {
        connect_error(res, PL_ERR_REFUSED,
                      open_err && *open_err->msg ? open_err->msg : "store not readable yet");
        return;
    }
    char *brace = strchr(query, '{');
    char *type_id = strndup(query, brace ? (size_t)(brace - query) : strlen(query));
    if (!type_id) {
        connect_error(res, PL_ERR_NOMEM, "out of memory");
        return;
    }
    r.profile_type = type_id;
    r.label_selector = brace ? brace : "{}";
    if (until <= from) {
        free(type_id);
        connect_error(res, PL_ERR_INVALID, "until: must be after from");
        return;
    }
    /* timeline steps: 10 s, wider for long ranges (at most ~10,000 points) */
    int64_t step_s = (until - from) / 1000 / 10000 + 1;
    step_s = step_s < 10 ? 10 : (step_s + 9) / 10 * 10;
    r.start_ms = from;
    r.end_ms = until;
    r.step = (double)step_s;
    pl_err err = {{0}};
    pl_qctx q;
    pl_qtree *tree = pl_qtree_new();
    pl_status st =
        tree ? pl_qctx_init(&q, store, tenant, &err) : pl_errf(&err, PL_ERR_NOMEM, "no memory");
    bool have_q = st == PL_OK;
    const pl_qtype *type = NULL;
    pl_qflame f = {0};
    pl_qseries *series = NULL;
    size_t n_series = 0;
    if (st == PL_OK)
        st = pl_q_merge(&q, &r, false, tree, &type);
    if (st == PL_OK)
        st = pl_q_select_series(&q, &r, &series, &n_series);
    if (st == PL_OK && pl_qtree_flamegraph(tree, r.max_nodes, &f) < 0)
        st = pl_errf(&err, PL_ERR_NOMEM, "out of memory");
    pl_buf b;
    pl_buf_init(&b);
    if (st == PL_OK) {
        pl_buf_append_str(&b, "{\"version\":1,\"flamebearer\":{\"names\":[");
        for (size_t i = 0; i < f.n_names; i++) {
            if (i)
                pl_buf_append_byte(&b, ',');
            pl_buf_json_string(&b, f.names[i], strlen(f.names[i]));
        }
        pl_buf_append_str(&b, "],\"levels\":[");
        for (size_t d = 0; d < f.n_levels; d++) {
            pl_buf_append_str(&b, d ? ",[" : "[");
            for (size_t i = 0; i < f.level_len[d]; i++)
                pl_buf_printf(&b, i ? ",%" PRId64 : "%" PRId64, f.levels[d][i]);
            pl_buf_append_byte(&b, ']');
        }
        int64_t rate = type && strcmp(type->sample_unit, "nanoseconds") == 0    ? 1000000000
                       : type && strcmp(type->sample_unit, "microseconds") == 0 ? 1000000
                                                                                : 100;
        pl_buf_printf(
            &b,
            "],\"numTicks\":%" PRId64 ",\"maxSelf\":%" PRId64
            "},\"metadata\":{\"format\":\"single\",\"spyName\":\"\",\"sampleRate\":%" PRId64
            ",\"units\":\"%s\",\"name\":",
            f.total, f.max_self, rate, flamebearer_units(type));
        pl_buf_json_string(&b, r.profile_type, strlen(r.profile_type));
        /* the timeline: step_s steps from `from` (gaps are zeros) */
        int64_t steps = (until - from) / (step_s * 1000) + 1;
        pl_buf_printf(&b, "},\"timeline\":{\"startTime\":%" PRId64 ",\"samples\":[", from / 1000);
        double *vals = calloc((size_t)(steps > 0 ? steps : 1), sizeof(double));
        for (size_t s = 0; vals && s < n_series; s++)
            for (size_t k = 0; k < series[s].n_points; k++) {
                int64_t at = (series[s].ts_ms[k] - from) / (step_s * 1000);
                if (at >= 0 && at < steps)
                    vals[at] += series[s].values[k];
            }
        for (int64_t k = 0; vals && k < steps; k++)
            pl_buf_printf(&b, k ? ",%.0f" : "%.0f", vals[k]);
        free(vals);
        pl_buf_printf(&b, "],\"durationDelta\":%" PRId64 "}}", step_s);
    }
    if (st != PL_OK)
        connect_error(res, st, err.msg);
    else if (!pl_buf_ok(&b))
        connect_error(res, PL_ERR_NOMEM, "out of memory");
    else
        respond_ok(res, true, &b);
    pl_buf_free(&b);
    pl_qflame_free(&f);
    pl_qtree_free(tree);
    if (have_q)
        pl_qctx_free(&q);
    free(type_id);
}

/* ---- entry points ------------------------------------------------------- */

bool pl_store_querier_owns(const char *path)
{
    return strncmp(path, SERVICE_PREFIX, strlen(SERVICE_PREFIX)) == 0 ||
           strncmp(path, "/pyroscope/", 11) == 0;
}

void pl_store_querier_handle(pl_store *store, const pl_err *open_err, const char *tenant,
                             pl_http_request *req, pl_http_response *res)
{
    if (strncmp(req->path, SERVICE_PREFIX, strlen(SERVICE_PREFIX)) == 0) {
        handle_connect(store, open_err, tenant, req, res);
        return;
    }
    if (strcmp(req->path, "/pyroscope/render") == 0) {
        if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
            pl_http_header allow = {"Allow", 5, "GET", 3};
            pl_http_respond(res, 405, &allow, 1, NULL, 0);
            return;
        }
        handle_render(store, open_err, tenant, req, res);
        return;
    }
    connect_error(res, PL_ERR_NOT_FOUND, "not implemented: /pyroscope/render is");
}
