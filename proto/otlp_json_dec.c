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
#include "otlp_tables.h"
#include "otlp_json.h"
#include "otlp_pb.h"

/* ---- message tables ----------------------------------------------------- */

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

static inline bool name_is(const jfield *f, const pl_jstr *key)
{
    return f->name_len == key->len && (!key->len || f->name[0] == key->ptr[0]) &&
           memcmp(f->name, key->ptr, key->len) == 0;
}

/* The row of a key: exact names first, from *next on (members usually come
 * in row order, so the first probe matches), then folded. */
static const jfield *find_field(const jmsg *m, const pl_jstr *key, unsigned *next)
{
    for (unsigned k = 0, i = *next; k < m->n_fields; k++, i++) {
        if (i >= m->n_fields)
            i = 0;
        const jfield *f = &m->fields[i];
        if (name_is(f, key)) {
            *next = i + 1;
            return f;
        }
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
            return pl_json_dec_oom(d);
        d->scratch = p;
        d->scratch_cap = cap;
    }
    memcpy(d->scratch + d->scratch_len, elem, size);
    d->scratch_len += size;
    return 0;
}

/* The attribute as SDKs write it, {"key":"K","value":{"stringValue":"V"}}
 * exactly (no white space, K and V plain ASCII without escapes), read in
 * one step into the zeroed kv: what dec_msg would read from it. False, with
 * nothing read, for anything else. */
static bool keyvalue_plain(jdec *d, pl_kv *kv, int depth)
{
    static const char kv_open[] = "{\"key\":\"", mid[] = "\",\"value\":{\"stringValue\":\"",
                      kv_close[] = "\"}}";
    const uint8_t *p = d->r.p, *e = d->r.end;
    if (depth + 1 > PL_OTLP_MAX_DEPTH || d->r.depth + 2 > d->r.max_depth ||
        (size_t)(e - p) < sizeof kv_open - 1 || memcmp(p, kv_open, sizeof kv_open - 1) != 0)
        return false;
    const uint8_t *key = p + sizeof kv_open - 1;
    size_t klen = pl_jr_plain_len(key, e);
    const uint8_t *v = key + klen;
    if ((size_t)(e - v) < sizeof mid - 1 || memcmp(v, mid, sizeof mid - 1) != 0)
        return false;
    v += sizeof mid - 1;
    size_t vlen = pl_jr_plain_len(v, e);
    const uint8_t *ve = v + vlen;
    if ((size_t)(e - ve) < sizeof kv_close - 1 || memcmp(ve, kv_close, sizeof kv_close - 1) != 0 ||
        klen > UINT32_MAX || vlen > UINT32_MAX)
        return false;
    kv->key = (pl_bytes){klen ? key : NULL, (uint32_t)klen};
    kv->value.type = PL_VALUE_STRING;
    kv->value.u.str = (pl_bytes){vlen ? v : NULL, (uint32_t)vlen};
    d->r.p = ve + sizeof kv_close - 1;
    return true;
}

/* One element of a repeated field into `elem` (zeroed, `size` bytes). */
static int dec_elem(jdec *d, const jfield *f, void *elem, int depth)
{
    uint64_t u;
    switch (f->kind) {
    case FK_LIST:
        if (f->sub == &pl_tm_keyvalue && keyvalue_plain(d, elem, depth))
            return 0;
        if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
            if (!pl_jr_skip(&d->r))
                return pl_json_dec_syntax(d);
            return pl_json_dec_fail(d, NULL, "want an object");
        }
        return dec_msg(d, f->sub, elem, depth);
    case FK_ANYS:
        if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
            if (!pl_jr_skip(&d->r))
                return pl_json_dec_syntax(d);
            return pl_json_dec_fail(d, NULL, "want an object");
        }
        return dec_anyvalue(d, elem, depth + 1);
    case FK_I32S:
        if (pl_json_dec_int(d, NULL, true, INT32_MIN, INT32_MAX, &u))
            return -1;
        *(int32_t *)elem = (int32_t)(int64_t)u;
        return 0;
    case FK_I64S:
        if (pl_json_dec_int(d, NULL, true, INT64_MIN, INT64_MAX, &u))
            return -1;
        *(int64_t *)elem = (int64_t)u;
        return 0;
    case FK_U64S:
        return pl_json_dec_int(d, NULL, false, 0, UINT64_MAX, (uint64_t *)elem);
    default: /* FK_STRS */
        return pl_json_dec_string(d, NULL, (pl_bytes *)elem);
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
        return pl_jr_literal(&d->r) ? 0 : pl_json_dec_syntax(d);
    if (t != PL_JT_ARRAY) {
        if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
            return pl_json_dec_syntax(d);
        return pl_json_dec_fail(d, f->name, "want an array");
    }
    if (!pl_jr_array_begin(&d->r))
        return pl_json_dec_syntax(d);
    size_t size = pl_tm_elem_size(f), start = d->scratch_len;
    _Alignas(16) uint8_t elem[MAX_ELEM];
    unsigned k = 0;
    int rc;
    uint32_t n = 0;
    while ((rc = pl_jr_array_next(&d->r, &k)) == 1) {
        if (pl_json_dec_charge(d, 2 * size + ELEM_OVERHEAD))
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
        return pl_json_dec_syntax(d);
    if (n) {
        if (!(*items = arena_copy(d, d->scratch + start, (size_t)n * size)))
            return pl_json_dec_oom(d);
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
        return pl_json_dec_string(d, f->name, dst);
    case FK_B64:
        return pl_json_dec_base64(d, f->name, dst);
    case FK_ID:
        return pl_json_dec_hex_id(d, f->name, dst, base + f->aux, f->arg);
    case FK_U32:
    case FK_FX32:
        if (pl_json_dec_int(d, f->name, false, 0, UINT32_MAX, &u))
            return -1;
        *(uint32_t *)dst = (uint32_t)u;
        return 0;
    case FK_I32:
        if (pl_json_dec_int(d, f->name, true, INT32_MIN, INT32_MAX, &u))
            return -1;
        *(int32_t *)dst = (int32_t)(int64_t)u;
        return 0;
    case FK_U64:
    case FK_FX64:
        return pl_json_dec_int(d, f->name, false, 0, UINT64_MAX, dst);
    case FK_I64:
        if (pl_json_dec_int(d, f->name, true, INT64_MIN, INT64_MAX, &u))
            return -1;
        *(int64_t *)dst = (int64_t)u;
        return 0;
    case FK_ENUM:
        return pl_json_dec_enum(d, f->name, f->sub, NULL, f->arg, dst);
    case FK_MSG:
    case FK_ANY: {
        pl_jtype t = pl_jr_peek(&d->r);
        if (t == PL_JT_NULL)
            return pl_jr_literal(&d->r) ? 0 : pl_json_dec_syntax(d);
        path_push(d, f->name, -1);
        if (t != PL_JT_OBJECT) {
            if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                return pl_json_dec_syntax(d);
            return pl_json_dec_fail(d, NULL, "want an object");
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
        return pl_json_dec_syntax(d);
    unsigned k = 0, next = 0;
    pl_jstr key;
    int rc;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        const jfield *f = find_field(m, &key, &next);
        if (!f) {
            if (!pl_jr_skip(&d->r))
                return pl_json_dec_syntax(d);
            continue;
        }
        if (dec_field(d, f, dst, depth))
            return -1;
    }
    return rc < 0 ? pl_json_dec_syntax(d) : 0;
}

/* ---- AnyValue (a oneof) ------------------------------------------------- */

static int dec_anyvalue(jdec *d, pl_value *v, int depth)
{
    memset(v, 0, sizeof(*v));
    if (depth > PL_OTLP_MAX_DEPTH) {
        pl_json_dec_fail(d, NULL, "values nested deeper than %d levels", PL_OTLP_MAX_DEPTH);
        return -1;
    }
    if (!pl_jr_object_begin(&d->r))
        return pl_json_dec_syntax(d);
    unsigned k = 0;
    pl_jstr key;
    int rc;
    while ((rc = pl_jr_object_next(&d->r, &k, &key)) == 1) {
        if (pl_jr_peek(&d->r) == PL_JT_NULL) {
            if (!pl_jr_literal(&d->r))
                return pl_json_dec_syntax(d);
            continue;
        }
        if (key.len == 11 && memcmp(key.ptr, "stringValue", 11) == 0) {
            /* nearly every value (the IS() below would match it first) */
            if (pl_json_dec_string(d, "stringValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_STRING;
            continue;
        }
        char name[24];
        size_t n = key.len < sizeof name - 1 ? key.len : 0;
        memcpy(name, key.ptr, n);
        name[n] = '\0';
        uint64_t u;
#define IS(camel) (strcmp(name, camel) == 0 || pl_jr_key_folded_eq(key.ptr, key.len, camel))
        if (IS("stringValue")) {
            if (pl_json_dec_string(d, "stringValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_STRING;
        } else if (IS("boolValue")) {
            pl_jtype t = pl_jr_peek(&d->r);
            if (t != PL_JT_TRUE && t != PL_JT_FALSE) {
                if (t == PL_JT_NONE || !pl_jr_skip(&d->r))
                    return pl_json_dec_syntax(d);
                return pl_json_dec_fail(d, "boolValue", "want true or false");
            }
            if (!pl_jr_literal(&d->r))
                return pl_json_dec_syntax(d);
            v->u.b = t == PL_JT_TRUE;
            v->type = PL_VALUE_BOOL;
        } else if (IS("intValue")) {
            if (pl_json_dec_int(d, "intValue", true, INT64_MIN, INT64_MAX, &u))
                return -1;
            v->u.i = (int64_t)u;
            v->type = PL_VALUE_INT;
        } else if (IS("doubleValue")) {
            if (pl_json_dec_double(d, "doubleValue", &v->u.d))
                return -1;
            v->type = PL_VALUE_DOUBLE;
        } else if (IS("bytesValue")) {
            if (pl_json_dec_base64(d, "bytesValue", &v->u.str))
                return -1;
            v->type = PL_VALUE_BYTES;
        } else if (IS("stringValueStrindex")) {
            if (pl_json_dec_int(d, "stringValueStrindex", true, INT32_MIN, INT32_MAX, &u))
                return -1;
            v->u.strindex = (int32_t)(int64_t)u;
            v->type = PL_VALUE_STRINDEX;
        } else if (IS("arrayValue") || IS("kvlistValue")) {
            bool array = IS("arrayValue");
            if (pl_jr_peek(&d->r) != PL_JT_OBJECT) {
                if (!pl_jr_skip(&d->r))
                    return pl_json_dec_syntax(d);
                return pl_json_dec_fail(d, array ? "arrayValue" : "kvlistValue", "want an object");
            }
            /* Array items sit one level down, as do a kvlist's key-values. */
            path_push(d, array ? "arrayValue" : "kvlistValue", -1);
            if (array ? dec_msg(d, &pl_tm_arrayvalue, &v->u.array, depth)
                      : dec_msg(d, &pl_tm_kvlist, &v->u.kvlist, depth + 1))
                return -1;
            path_pop(d);
            v->type = array ? PL_VALUE_ARRAY : PL_VALUE_KVLIST;
        } else if (!pl_jr_skip(&d->r)) {
            return pl_json_dec_syntax(d);
        }
#undef IS
    }
    return rc < 0 ? pl_json_dec_syntax(d) : 0;
}

/* ---- entry points ------------------------------------------------------- */

static pl_status decode(pl_batch *b, const jmsg *root, void *dst, const uint8_t *buf, size_t len,
                        size_t budget, pl_err *err)
{
    jdec *d = malloc(sizeof(*d));
    if (!d)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory while decoding");
    pl_json_dec_init(d, &b->arena, buf, len, budget, err);
    memset(dst, 0, root->size);
    int rc = 0;
    pl_jtype t = pl_jr_peek(&d->r);
    if (t == PL_JT_OBJECT) {
        rc = dec_msg(d, root, dst, 0);
        if (rc == 0 && !pl_jr_finish(&d->r))
            rc = pl_json_dec_syntax(d);
    } else if (t == PL_JT_NONE || t == PL_JT_BAD) {
        pl_jr_fail(&d->r, t == PL_JT_NONE ? "unexpected end of input" : "unexpected character");
        rc = pl_json_dec_syntax(d);
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
    return decode(b, &pl_tm_traces, &b->data.traces, buf, len, budget, err);
}

static pl_status decode_profiles(pl_batch *b, const uint8_t *buf, size_t len, size_t budget,
                                 pl_err *err)
{
    pl_status st = decode(b, &pl_tm_profiles, &b->data.profiles, buf, len, budget, err);
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
