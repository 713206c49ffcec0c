/*
 * jfr.c: the JFR reader (see jfr.h): chunk headers, the metadata event,
 * constant pools, events. The profile side is jfr_pprof.c.
 *
 * Layout of a chunk (all offsets from the chunk's start):
 *
 *   header (68 bytes, big-endian): "FLR\0", u16 major (2), u16 minor,
 *     i64 chunk size, i64 constant pool offset, i64 metadata offset,
 *     i64 start (ns since epoch), i64 duration (ns), i64 start ticks,
 *     i64 ticks per second, i32 features (bit 0: integers compressed)
 *   then events back to back, each: int size (including itself), long type
 *     id, then the type's fields in declaration order.
 *   Type 0 is the metadata event: start, duration, metadata id, a string
 *     table, and an element tree (root > metadata > class > field, with
 *     attributes name/id/class/constantPool/dimension as string indices).
 *   Type 1 is a checkpoint: start, duration, delta to the previous one, a
 *     flush byte, then pools: type id, count, and (key, value) pairs.
 *
 * Compressed integers (what the JDK and async-profiler write) are LEB128
 * with a 9th byte that holds a full 8 bits; short, char, int and long all
 * use it. Strings start with an encoding byte: 0 null, 1 empty, 2 a key
 * into the java.lang.String pool, 3 UTF-8, 4 UTF-16 chars (each an
 * integer), 5 Latin-1.
 *
 * Each chunk is read in two passes over its events: the first reads every
 * checkpoint (a chunk's pools may come after the events that use them),
 * the second the events. Values of any type are read or skipped from the
 * metadata alone; a type whose inline fields contain itself is refused, and
 * nesting (arrays of structs of arrays ...) is limited in depth.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/jfr_internal.h"
#include "proto/otlp_pb.h" /* pl_utf8_valid */

#define HEADER_SIZE      68
#define MAX_DEPTH        24
#define NSLOTS           9
#define MAX_WALL_SAMPLES (1u << 20) /* per event: more is not a real profiler's */
#define MAX_DURATION_NS  (1000000000ull * 86400 * 365)

enum prim { P_STRUCT, P_BOOL, P_BYTE, P_CHAR, P_SHORT, P_INT, P_LONG, P_FLOAT, P_DOUBLE, P_STRING };

enum role {
    R_NONE,
    R_STACKTRACE,
    R_FRAME,
    R_METHOD,
    R_CLASS,
    R_SYMBOL, /* jdk.types.Symbol, jdk.types.ThreadState, java.lang.String: keys to text */
    R_EV_EXEC,
    R_EV_NATIVE,
    R_EV_WALL,
    R_EV_TLAB_NEW,
    R_EV_TLAB_OUT,
    R_EV_ALLOC_SAMPLE,
    R_EV_MONITOR,
    R_EV_PARK,
    R_EV_LIVE,       /* async-profiler's live objects */
    R_EV_OLD_OBJECT, /* the JDK's old object sample: its live objects */
    R_EV_MALLOC,     /* async-profiler's native memory allocations */
    R_EV_SETTING,
};
#define IS_EVENT(r) ((r) >= R_EV_EXEC)

/* Capture slots (the fields a role reads). */
enum {
    S_STACK = 0, /* events: stackTrace; stack trace: frames; frame: method; method: type; class,
                    symbol: name */
    S_STATE = 1, /* events: state; frame: lineNumber; method: name */
    S_CONTEXT = 2,
    S_DURATION = 3,
    S_VALUE = 4, /* tlabSize, allocationSize, weight, samples; setting: value */
    S_NAME = 5,  /* setting: name */
    S_TRUNCATED = 6,
    S_SPAN_ID = 7,   /* events: spanId (async-profiler's OpenTelemetry context) */
    S_SPAN_NAME = 8, /* events: spanName, a string id of the labels part */
};

static const struct {
    int role;
    const char *field;
    int slot;
} slot_table[] = {
    {R_STACKTRACE, "frames", S_STACK},
    {R_FRAME, "method", S_STACK},
    {R_FRAME, "lineNumber", S_STATE},
    {R_METHOD, "type", S_STACK},
    {R_METHOD, "name", S_STATE},
    {R_CLASS, "name", S_STACK},
    {R_SYMBOL, "string", S_STACK},
    {R_SYMBOL, "name", S_STACK}, /* jdk.types.ThreadState */
    {R_EV_SETTING, "name", S_NAME},
    {R_EV_SETTING, "value", S_VALUE},
    {R_EV_TLAB_NEW, "tlabSize", S_VALUE},
    {R_EV_TLAB_OUT, "allocationSize", S_VALUE},
    {R_EV_ALLOC_SAMPLE, "weight", S_VALUE},
    {R_EV_WALL, "samples", S_VALUE},
    {R_EV_MALLOC, "size", S_VALUE},
};

static const struct {
    const char *name;
    int role;
} role_table[] = {
    {"jdk.types.StackTrace", R_STACKTRACE},
    {"jdk.types.StackFrame", R_FRAME},
    {"jdk.types.Method", R_METHOD},
    {"java.lang.Class", R_CLASS},
    {"jdk.types.Symbol", R_SYMBOL},
    {"jdk.types.ThreadState", R_SYMBOL},
    {"jdk.ExecutionSample", R_EV_EXEC},
    {"jdk.NativeMethodSample", R_EV_NATIVE},
    {"profiler.WallClockSample", R_EV_WALL},
    {"jdk.ObjectAllocationInNewTLAB", R_EV_TLAB_NEW},
    {"jdk.ObjectAllocationOutsideTLAB", R_EV_TLAB_OUT},
    {"jdk.ObjectAllocationSample", R_EV_ALLOC_SAMPLE},
    {"jdk.JavaMonitorEnter", R_EV_MONITOR},
    {"jdk.ThreadPark", R_EV_PARK},
    {"profiler.LiveObject", R_EV_LIVE},
    {"jdk.OldObjectSample", R_EV_OLD_OBJECT},
    {"profiler.Malloc", R_EV_MALLOC},
    {"jdk.ActiveSetting", R_EV_SETTING},
};

enum { V_NONE, V_NUM, V_STR, V_REF };

typedef struct jval {
    uint8_t kind;
    uint32_t cls; /* V_REF: the pool's class */
    uint64_t u;   /* V_NUM value, V_REF key */
    pl_bytes s;   /* V_STR */
} jval;

typedef struct jfield {
    uint32_t name; /* metadata string index */
    uint64_t type_id;
    uint32_t cls;
    bool cp, array;
    int8_t slot;
} jfield;

typedef struct jclass {
    uint64_t id;
    pl_bytes name;
    uint32_t first_field, n_fields;
    uint8_t prim, role, visit;
    uint32_t min_size;
} jclass;

typedef struct jframe {
    uint64_t method;
    int32_t line;
} jframe;

typedef struct pool_stack {
    uint64_t key;
    uint32_t off, n;
} pool_stack;

typedef struct pool_method {
    uint64_t key, class_key;
    jval name;
} pool_method;

typedef struct pool_class {
    uint64_t key;
    jval name;
} pool_class;

typedef struct pool_text {
    uint32_t cls;
    uint64_t key;
    jval text;
} pool_text;

typedef struct pool_ref { /* a cache: key -> index of an output object */
    uint64_t key;
    int32_t value;
} pool_ref;

typedef struct jcur {
    const uint8_t *p, *end;
} jcur;

typedef struct rctx {
    /* the whole call */
    jfr_out out;
    pl_jfr_result *res;
    pl_err *err;
    size_t max_memory, max_objects, objects;
    uint64_t work, max_work; /* fields read: a bound on CPU per byte of input */
    /* the chunk */
    pl_arena arena;
    bool compressed;
    uint64_t ticks_per_second;
    pl_bytes *mstrings;
    uint32_t n_mstrings;
    jclass *classes;
    uint32_t n_classes, cap_classes;
    jfield *fields;
    uint32_t n_fields, cap_fields;
    pl_htab class_index;
    uint32_t string_class; /* java.lang.String, or UINT32_MAX */
    jframe *frames;
    uint32_t n_frames, cap_frames;
    pool_stack *stacks;
    uint32_t n_stacks, cap_stacks;
    pl_htab stack_index;
    pool_method *methods;
    uint32_t n_methods, cap_methods;
    pl_htab method_index;
    pool_class *pclasses;
    uint32_t n_pclasses, cap_pclasses;
    pl_htab pclass_index;
    pool_text *texts;
    uint32_t n_texts, cap_texts;
    pl_htab text_index;
    pool_ref *fn_cache; /* method key -> function */
    uint32_t n_fn_cache, cap_fn_cache;
    pl_htab fn_cache_index;
    pool_ref *st_cache; /* stack trace key -> stack */
    uint32_t n_st_cache, cap_st_cache;
    pl_htab st_cache_index;
    uint32_t *scratch_locs;
    uint32_t cap_scratch;
} rctx;

#define BAD(...) pl_errf(x->err, PL_ERR_INVALID, __VA_ARGS__)
#define NOMEM()  pl_errf(x->err, PL_ERR_NOMEM, "out of memory")

/* ---- budget ------------------------------------------------------------------ */

static size_t htab_bytes(const pl_htab *h)
{
    return (size_t)h->cap * 8;
}

static pl_status check_budget(rctx *x)
{
    if (x->objects > x->max_objects)
        return pl_errf(x->err, PL_ERR_TOO_LARGE,
                       "JFR: more than %zu objects (pool entries, events, samples) in one request",
                       x->max_objects);
    size_t mem = pl_jfr_out_memory(&x->out) + pl_arena_bytes(&x->arena) +
                 htab_bytes(&x->class_index) + htab_bytes(&x->stack_index) +
                 htab_bytes(&x->method_index) + htab_bytes(&x->pclass_index) +
                 htab_bytes(&x->text_index) + htab_bytes(&x->fn_cache_index) +
                 htab_bytes(&x->st_cache_index) + (size_t)x->cap_scratch * 4;
    if (mem > x->max_memory)
        return pl_errf(x->err, PL_ERR_TOO_LARGE,
                       "JFR: decoding needs more than %zu bytes of memory (the request's budget)",
                       x->max_memory);
    return PL_OK;
}

#define GROW(field, n, cap)                                                                        \
    pl_arena_reserve(&x->arena, (void **)&x->field, x->n, &x->cap, sizeof(*x->field), 32)

/* ---- primitives ----------------------------------------------------------------- */

static int rd_u8(jcur *c, uint8_t *v)
{
    if (c->p >= c->end)
        return -1;
    *v = *c->p++;
    return 0;
}

static int rd_be(jcur *c, int n, uint64_t *v)
{
    if (c->end - c->p < n)
        return -1;
    uint64_t r = 0;
    for (int i = 0; i < n; i++)
        r = r << 8 | c->p[i];
    c->p += n;
    *v = r;
    return 0;
}

/* JFR's LEB128: up to 8 groups of 7 bits, then a 9th byte of 8 bits. */
static int rd_var(jcur *c, uint64_t *v)
{
    uint64_t r = 0;
    for (int i = 0; i < 8; i++) {
        if (c->p >= c->end)
            return -1;
        uint8_t b = *c->p++;
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    if (c->p >= c->end)
        return -1;
    *v = r | (uint64_t)*c->p++ << 56;
    return 0;
}

static int rd_int(const rctx *x, jcur *c, uint64_t *v)
{
    if (x->compressed)
        return rd_var(c, v);
    if (rd_be(c, 4, v))
        return -1;
    *v = (uint64_t)(int64_t)(int32_t)(uint32_t)*v;
    return 0;
}

static int rd_long(const rctx *x, jcur *c, uint64_t *v)
{
    return x->compressed ? rd_var(c, v) : rd_be(c, 8, v);
}

/* A count or length: non-negative and at most what is left (each element
 * takes at least one byte), so a count can never make a loop outrun the
 * input. */
static int rd_count(const rctx *x, jcur *c, uint64_t *n)
{
    if (rd_int(x, c, n) || (int64_t)*n < 0 || *n > (uint64_t)(c->end - c->p))
        return -1;
    return 0;
}

/* UTF-8 of one UTF-16 code unit (lone surrogates and NUL become U+FFFD:
 * the text ends up in pprof strings, which must be UTF-8 without NUL). */
static size_t utf8_put(uint8_t *o, uint32_t ch)
{
    if ((ch >= 0xd800 && ch <= 0xdfff) || ch == 0)
        ch = 0xfffd;
    if (ch < 0x80) {
        o[0] = (uint8_t)ch;
        return 1;
    }
    if (ch < 0x800) {
        o[0] = (uint8_t)(0xc0 | ch >> 6);
        o[1] = (uint8_t)(0x80 | (ch & 0x3f));
        return 2;
    }
    o[0] = (uint8_t)(0xe0 | ch >> 12);
    o[1] = (uint8_t)(0x80 | ((ch >> 6) & 0x3f));
    o[2] = (uint8_t)(0x80 | (ch & 0x3f));
    return 3;
}

/* A string value. With out == NULL it is only skipped. */
static pl_status rd_string(rctx *x, jcur *c, jval *out, const char *what)
{
    uint8_t enc;
    uint64_t n, ch;
    if (rd_u8(c, &enc))
        return BAD("JFR: truncated %s", what);
    switch (enc) {
    case 0:
    case 1:
        if (out)
            *out = (jval){V_STR, 0, 0, {(const uint8_t *)"", 0}};
        return PL_OK;
    case 2:
        if (rd_long(x, c, &n))
            return BAD("JFR: truncated %s", what);
        if (out)
            *out = (jval){V_REF, x->string_class, n, {NULL, 0}};
        return PL_OK;
    case 3:
    case 5: {
        if (rd_count(x, c, &n))
            return BAD("JFR: %s: bad string length", what);
        const uint8_t *p = c->p;
        c->p += n;
        if (!out)
            return PL_OK;
        /* UTF-8 (3) is kept when it is valid and has no NUL; Latin-1 (5)
         * when it is ASCII without NUL; otherwise each byte is taken as a
         * Latin-1 character (NUL as U+FFFD) */
        bool plain = !memchr(p, 0, n);
        if (plain && enc == 5)
            for (uint64_t i = 0; i < n && plain; i++)
                plain = p[i] < 0x80;
        else if (plain)
            plain = pl_utf8_valid(p, n);
        if (plain) {
            *out = (jval){V_STR, 0, 0, {p, (uint32_t)n}};
            return PL_OK;
        }
        uint8_t *o = pl_arena_alloc(&x->arena, n * 3 + 1); /* U+FFFD takes 3 */
        if (!o)
            return NOMEM();
        size_t k = 0;
        for (uint64_t i = 0; i < n; i++)
            k += utf8_put(o + k, p[i]);
        *out = (jval){V_STR, 0, 0, {o, (uint32_t)k}};
        return PL_OK;
    }
    case 4: {
        if (rd_count(x, c, &n))
            return BAD("JFR: %s: bad string length", what);
        uint8_t *o = out ? pl_arena_alloc(&x->arena, n * 3 + 1) : NULL;
        if (out && !o)
            return NOMEM();
        size_t k = 0;
        for (uint64_t i = 0; i < n; i++) {
            if (x->compressed ? rd_var(c, &ch) : rd_be(c, 2, &ch))
                return BAD("JFR: truncated %s", what);
            if (o)
                k += utf8_put(o + k, (uint32_t)(ch & 0xffff));
        }
        if (out)
            *out = (jval){V_STR, 0, 0, {o, (uint32_t)k}};
        return PL_OK;
    }
    default:
        return BAD("JFR: %s: unknown string encoding %u", what, enc);
    }
}

/* ---- values of any type ------------------------------------------------------------- */

static pl_status rd_struct(rctx *x, jcur *c, uint32_t ci, int depth, jval *cap);

/* One value of class `ci` (not an array). */
static pl_status rd_single(rctx *x, jcur *c, uint32_t ci, bool cp, int depth, jval *out)
{
    const jclass *k = &x->classes[ci];
    uint64_t v;
    if (cp) {
        if (rd_long(x, c, &v))
            return BAD("JFR: truncated constant pool reference (%.*s)", (int)k->name.len,
                       (const char *)k->name.ptr);
        if (out)
            *out = (jval){V_REF, ci, v, {NULL, 0}};
        return PL_OK;
    }
    int r = 0;
    switch (k->prim) {
    case P_BOOL:
    case P_BYTE: {
        uint8_t b;
        r = rd_u8(c, &b);
        v = b;
        break;
    }
    case P_CHAR:
    case P_SHORT:
        r = x->compressed ? rd_var(c, &v) : rd_be(c, 2, &v);
        break;
    case P_INT:
        r = rd_int(x, c, &v);
        break;
    case P_LONG:
        r = rd_long(x, c, &v);
        break;
    case P_FLOAT:
        r = rd_be(c, 4, &v);
        break;
    case P_DOUBLE:
        r = rd_be(c, 8, &v);
        break;
    case P_STRING:
        return rd_string(x, c, out, "string");
    default:
        return rd_struct(x, c, ci, depth + 1, NULL); /* inline structs: nothing captured */
    }
    if (r)
        return BAD("JFR: truncated value of type %.*s", (int)k->name.len,
                   (const char *)k->name.ptr);
    if (out)
        *out = (jval){V_NUM, 0, v, {NULL, 0}};
    return PL_OK;
}

/* The frames array of a stack trace: appended to x->frames. */
static pl_status rd_frames(rctx *x, jcur *c, const jfield *f, int depth)
{
    uint64_t n;
    if (rd_count(x, c, &n))
        return BAD("JFR: stack trace: bad frame count");
    for (uint64_t i = 0; i < n; i++) {
        jval cap[NSLOTS];
        memset(cap, 0, sizeof(cap));
        pl_status st = f->cp ? rd_single(x, c, f->cls, true, depth, NULL)
                             : rd_struct(x, c, f->cls, depth + 1, cap);
        if (st != PL_OK)
            return st;
        if (f->cp || cap[S_STACK].kind != V_REF)
            continue; /* a frame without a method reference: nothing to show */
        if (GROW(frames, n_frames, cap_frames))
            return NOMEM();
        int64_t line = cap[S_STATE].kind == V_NUM ? (int64_t)cap[S_STATE].u : 0;
        x->frames[x->n_frames++] =
            (jframe){cap[S_STACK].u, line > 0 && line < INT32_MAX ? (int32_t)line : 0};
    }
    return PL_OK;
}

/* The fields of class `ci` in order; those with a slot of the class's role
 * are captured into cap (when given). */
static pl_status rd_struct(rctx *x, jcur *c, uint32_t ci, int depth, jval *cap)
{
    if (depth > MAX_DEPTH)
        return BAD("JFR: values nested deeper than %d", MAX_DEPTH);
    const jclass *k = &x->classes[ci];
    /* Types with many fields that take no bytes (empty structs) could make
     * a small body cost much reading time: the fields read are counted. */
    x->work += k->n_fields + 1;
    if (x->work > x->max_work)
        return pl_errf(x->err, PL_ERR_TOO_LARGE,
                       "JFR: more than %llu fields to read for a body of this size (types with "
                       "many empty fields)",
                       (unsigned long long)x->max_work);
    for (uint32_t i = 0; i < k->n_fields; i++) {
        const jfield *f = &x->fields[k->first_field + i];
        int slot = cap ? f->slot : -1;
        pl_status st;
        if (slot == S_STACK && k->role == R_STACKTRACE && f->array) {
            st = rd_frames(x, c, f, depth);
        } else if (f->array) {
            uint64_t n;
            if (rd_count(x, c, &n))
                return BAD("JFR: %.*s: bad array length", (int)k->name.len,
                           (const char *)k->name.ptr);
            if (!f->cp && x->classes[f->cls].min_size == 0)
                continue; /* elements of zero bytes: nothing to read */
            st = PL_OK;
            for (uint64_t j = 0; j < n && st == PL_OK; j++)
                st = rd_single(x, c, f->cls, f->cp, depth, NULL);
        } else {
            st = rd_single(x, c, f->cls, f->cp, depth, slot >= 0 ? &cap[slot] : NULL);
        }
        if (st != PL_OK)
            return st;
    }
    return PL_OK;
}

/* ---- metadata ------------------------------------------------------------------------ */

static bool mstr_is(const rctx *x, uint64_t i, const char *s)
{
    return i < x->n_mstrings && pl_bytes_eq_cstr(x->mstrings[i], s);
}

static int parse_u64(pl_bytes s, uint64_t *out)
{
    if (!s.len || s.len > 20)
        return -1;
    uint64_t v = 0;
    for (uint32_t i = 0; i < s.len; i++) {
        if (s.ptr[i] < '0' || s.ptr[i] > '9' || v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(s.ptr[i] - '0');
    }
    *out = v;
    return 0;
}

/* One element of the metadata tree and its children. `cls` is the class
 * being declared (fields belong to it), or -1; -2 inside a field. */
static pl_status walk_element(rctx *x, jcur *c, int depth, int64_t cls)
{
    if (depth > MAX_DEPTH)
        return BAD("JFR: metadata nested deeper than %d", MAX_DEPTH);
    uint64_t name, n_attrs, n_children, k, v;
    if (rd_int(x, c, &name) || name >= x->n_mstrings || rd_count(x, c, &n_attrs))
        return BAD("JFR: corrupt metadata element");
    bool is_class = mstr_is(x, name, "class") && cls == -1;
    bool is_field = mstr_is(x, name, "field") && cls >= 0;
    if (mstr_is(x, name, "class") && cls != -1)
        return BAD("JFR: metadata: a class declared inside a class");
    jclass nc = {0};
    jfield nf = {0};
    bool has_id = false, has_name = false, has_type = false;
    nf.slot = -1;
    for (uint64_t i = 0; i < n_attrs; i++) {
        if (rd_int(x, c, &k) || rd_int(x, c, &v) || k >= x->n_mstrings || v >= x->n_mstrings)
            return BAD("JFR: corrupt metadata attribute");
        pl_bytes val = x->mstrings[v];
        if (is_class && mstr_is(x, k, "id")) {
            if (parse_u64(val, &nc.id))
                return BAD("JFR: metadata: bad class id \"%.*s\"",
                           (int)(val.len > 40 ? 40 : val.len), (const char *)val.ptr);
            has_id = true;
        } else if (is_class && mstr_is(x, k, "name")) {
            nc.name = val;
            has_name = true;
        } else if (is_field && mstr_is(x, k, "name")) {
            nf.name = (uint32_t)v;
            has_name = true;
        } else if (is_field && mstr_is(x, k, "class")) {
            if (parse_u64(val, &nf.type_id))
                return BAD("JFR: metadata: bad field type id");
            has_type = true;
        } else if (is_field && mstr_is(x, k, "constantPool")) {
            nf.cp = pl_bytes_eq_cstr(val, "true");
        } else if (is_field && mstr_is(x, k, "dimension")) {
            if (!pl_bytes_eq_cstr(val, "0") && !pl_bytes_eq_cstr(val, "1"))
                return BAD("JFR: metadata: array dimension %.*s not supported",
                           (int)(val.len > 20 ? 20 : val.len), (const char *)val.ptr);
            nf.array = pl_bytes_eq_cstr(val, "1");
        }
    }
    int64_t child_cls = cls >= 0 ? -2 : cls;
    if (is_class) {
        if (!has_id || !has_name)
            return BAD("JFR: metadata: a class without id or name");
        if (GROW(classes, n_classes, cap_classes))
            return NOMEM();
        nc.first_field = x->n_fields;
        x->classes[x->n_classes] = nc;
        child_cls = x->n_classes++;
        x->objects++;
    } else if (is_field) {
        if (!has_name || !has_type)
            return BAD("JFR: metadata: a field without name or type");
        if (GROW(fields, n_fields, cap_fields))
            return NOMEM();
        x->fields[x->n_fields++] = nf;
        x->classes[cls].n_fields++;
        x->objects++;
    }
    if (rd_count(x, c, &n_children))
        return BAD("JFR: corrupt metadata element");
    for (uint64_t i = 0; i < n_children; i++) {
        pl_status st = walk_element(x, c, depth + 1, child_cls);
        if (st != PL_OK)
            return st;
    }
    return check_budget(x);
}

typedef struct id_key {
    const rctx *x;
    uint64_t id;
} id_key;

static bool class_eq(const void *ctx, uint32_t val)
{
    const id_key *k = ctx;
    return k->x->classes[val - 1].id == k->id;
}

static int32_t class_by_id(const rctx *x, uint64_t id)
{
    id_key k = {x, id};
    uint32_t v = pl_htab_get(&x->class_index, (uint32_t)pl_hash_u64(id), class_eq, &k);
    return v ? (int32_t)v - 1 : -1;
}

/* Smallest encoding of a value of class ci, in bytes; -1 for a type that
 * contains itself inline (it could never end). */
static int64_t min_size(rctx *x, uint32_t ci)
{
    jclass *k = &x->classes[ci];
    if (k->visit == 2)
        return k->min_size;
    if (k->visit == 1)
        return -1;
    k->visit = 1;
    uint64_t total = 0;
    if (k->prim == P_FLOAT)
        total = 4;
    else if (k->prim == P_DOUBLE)
        total = 8;
    else if (k->prim != P_STRUCT)
        total = 1;
    for (uint32_t i = 0; i < k->n_fields; i++) {
        const jfield *f = &x->fields[k->first_field + i];
        if (f->array || f->cp) {
            total += 1;
            continue;
        }
        int64_t m = min_size(x, f->cls);
        if (m < 0)
            return -1;
        total += (uint64_t)m;
    }
    k = &x->classes[ci];
    k->visit = 2;
    k->min_size = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
    return k->min_size;
}

static pl_status parse_metadata(rctx *x, const uint8_t *chunk, uint64_t chunk_size, uint64_t offset)
{
    if (offset < HEADER_SIZE || offset >= chunk_size)
        return BAD("JFR: metadata offset %llu outside the chunk", (unsigned long long)offset);
    jcur c = {chunk + offset, chunk + chunk_size};
    uint64_t size, type, n;
    if (rd_int(x, &c, &size) || size < 2 || size > chunk_size - offset)
        return BAD("JFR: corrupt metadata event size");
    c.end = chunk + offset + size;
    uint64_t skip;
    if (rd_long(x, &c, &type) || type != 0)
        return BAD("JFR: no metadata event at the metadata offset");
    if (rd_long(x, &c, &skip) || rd_long(x, &c, &skip) || rd_long(x, &c, &skip) ||
        rd_count(x, &c, &n))
        return BAD("JFR: truncated metadata event");
    x->mstrings = pl_arena_calloc(&x->arena, n ? n : 1, sizeof(pl_bytes));
    if (!x->mstrings)
        return NOMEM();
    x->n_mstrings = (uint32_t)n;
    x->objects += n;
    pl_status st = check_budget(x);
    for (uint64_t i = 0; i < n && st == PL_OK; i++) {
        jval v;
        st = rd_string(x, &c, &v, "metadata string");
        if (st == PL_OK && v.kind != V_STR)
            st = BAD("JFR: metadata string %llu refers to a constant pool", (unsigned long long)i);
        x->mstrings[i] = v.s;
    }
    if (st == PL_OK)
        st = walk_element(x, &c, 0, -1);
    if (st != PL_OK)
        return st;
    /* Resolve: ids, field types, primitive kinds, roles, slots, sizes. */
    x->string_class = UINT32_MAX;
    for (uint32_t i = 0; i < x->n_classes; i++) {
        jclass *k = &x->classes[i];
        id_key key = {x, k->id};
        uint32_t h = (uint32_t)pl_hash_u64(k->id);
        uint32_t *slot = pl_htab_slot(&x->class_index, h, class_eq, &key);
        if (!slot)
            return NOMEM();
        if (*slot)
            return BAD("JFR: metadata: class id %llu declared twice", (unsigned long long)k->id);
        *slot = i + 1;
        pl_htab_added(&x->class_index, slot, h);
        static const char *const prims[] = {
            NULL,  "boolean", "byte",  "char",   "short",
            "int", "long",    "float", "double", "java.lang.String"};
        k->prim = P_STRUCT;
        for (int p = 1; p <= P_STRING && k->n_fields == 0; p++)
            if (pl_bytes_eq_cstr(k->name, prims[p]))
                k->prim = (uint8_t)p;
        if (k->prim == P_STRING)
            x->string_class = i;
        k->role = R_NONE;
        for (size_t r = 0; r < sizeof(role_table) / sizeof(role_table[0]); r++)
            if (pl_bytes_eq_cstr(k->name, role_table[r].name))
                k->role = (uint8_t)role_table[r].role;
    }
    for (uint32_t i = 0; i < x->n_classes; i++) {
        jclass *k = &x->classes[i];
        for (uint32_t j = 0; j < k->n_fields; j++) {
            jfield *f = &x->fields[k->first_field + j];
            int32_t t = class_by_id(x, f->type_id);
            if (t < 0)
                return BAD("JFR: metadata: field of %.*s has unknown type %llu",
                           (int)(k->name.len > 80 ? 80 : k->name.len), (const char *)k->name.ptr,
                           (unsigned long long)f->type_id);
            f->cls = (uint32_t)t;
            f->slot = -1;
            pl_bytes fname = x->mstrings[f->name];
            if (IS_EVENT(k->role)) {
                if (pl_bytes_eq_cstr(fname, "stackTrace"))
                    f->slot = S_STACK;
                else if (pl_bytes_eq_cstr(fname, "state"))
                    f->slot = S_STATE;
                else if (pl_bytes_eq_cstr(fname, "contextId"))
                    f->slot = S_CONTEXT;
                else if (pl_bytes_eq_cstr(fname, "spanId"))
                    f->slot = S_SPAN_ID;
                else if (pl_bytes_eq_cstr(fname, "spanName"))
                    f->slot = S_SPAN_NAME;
                else if (pl_bytes_eq_cstr(fname, "duration"))
                    f->slot = S_DURATION;
            }
            for (size_t s = 0; s < sizeof(slot_table) / sizeof(slot_table[0]); s++)
                if (slot_table[s].role == k->role && pl_bytes_eq_cstr(fname, slot_table[s].field))
                    f->slot = (int8_t)slot_table[s].slot;
        }
    }
    for (uint32_t i = 0; i < x->n_classes; i++)
        if (min_size(x, i) < 0)
            return BAD("JFR: metadata: type %.*s contains itself",
                       (int)(x->classes[i].name.len > 80 ? 80 : x->classes[i].name.len),
                       (const char *)x->classes[i].name.ptr);
    return PL_OK;
}

/* ---- constant pools ------------------------------------------------------------------ */

typedef struct key_ctx {
    const void *arr;
    size_t stride;
    uint64_t key;
    uint32_t cls; /* texts only */
    bool with_cls;
} key_ctx;

static bool key_eq(const void *ctx, uint32_t val)
{
    const key_ctx *k = ctx;
    const uint8_t *e = (const uint8_t *)k->arr + (size_t)(val - 1) * k->stride;
    if (k->with_cls) {
        const pool_text *t = (const pool_text *)e;
        return t->key == k->key && t->cls == k->cls;
    }
    uint64_t key;
    memcpy(&key, e, sizeof(key));
    return key == k->key;
}

/* Finds or makes the entry for `key` in a pool table (any struct whose
 * first member is the uint64_t key). Returns its index, -1 on OOM. */
static int64_t pool_put(rctx *x, void **arr, uint32_t *n, uint32_t *cap, size_t stride,
                        pl_htab *index, uint64_t key, uint32_t cls, bool with_cls)
{
    key_ctx k = {*arr, stride, key, cls, with_cls};
    uint32_t h = (uint32_t)pl_hash_u64(with_cls ? key ^ pl_hash_u64(cls) : key);
    uint32_t *slot = pl_htab_slot(index, h, key_eq, &k);
    if (!slot)
        return -1;
    if (*slot)
        return *slot - 1; /* a key written again (e.g. after a flush): the later one wins */
    if (pl_arena_reserve(&x->arena, arr, *n, cap, stride, 32))
        return -1;
    memset((uint8_t *)*arr + (size_t)*n * stride, 0, stride);
    *slot = ++*n;
    pl_htab_added(index, slot, h);
    return *n - 1;
}

static int64_t pool_get(const void *arr, size_t stride, const pl_htab *index, uint64_t key,
                        uint32_t cls, bool with_cls)
{
    key_ctx k = {arr, stride, key, cls, with_cls};
    uint32_t h = (uint32_t)pl_hash_u64(with_cls ? key ^ pl_hash_u64(cls) : key);
    uint32_t v = pl_htab_get(index, h, key_eq, &k);
    return v ? (int64_t)v - 1 : -1;
}

/* The text of a value: a string, or a key into a pool of texts (a symbol, a
 * thread state, a pooled string), followed at most a few times. */
static bool text_of(const rctx *x, jval v, pl_bytes *out)
{
    for (int hops = 0; hops < 4; hops++) {
        if (v.kind == V_STR) {
            *out = v.s;
            return true;
        }
        if (v.kind != V_REF)
            return false;
        int64_t i = pool_get(x->texts, sizeof(pool_text), &x->text_index, v.u, v.cls, true);
        if (i < 0)
            return false;
        v = x->texts[i].text;
    }
    return false;
}

static pl_status parse_checkpoint(rctx *x, jcur *c)
{
    uint64_t skip, n_pools;
    uint8_t flush;
    if (rd_long(x, c, &skip) || rd_long(x, c, &skip) || rd_long(x, c, &skip) || rd_u8(c, &flush) ||
        rd_count(x, c, &n_pools))
        return BAD("JFR: truncated checkpoint");
    for (uint64_t p = 0; p < n_pools; p++) {
        uint64_t type, count;
        if (rd_long(x, c, &type) || rd_count(x, c, &count))
            return BAD("JFR: truncated constant pool");
        int32_t ci = class_by_id(x, type);
        if (ci < 0)
            return BAD("JFR: constant pool of unknown type %llu", (unsigned long long)type);
        const jclass *k = &x->classes[ci];
        uint8_t role = k->prim == P_STRING ? R_SYMBOL : k->role;
        for (uint64_t e = 0; e < count; e++) {
            uint64_t key;
            if (rd_long(x, c, &key))
                return BAD("JFR: truncated constant pool %.*s", (int)k->name.len,
                           (const char *)k->name.ptr);
            jval cap[NSLOTS];
            memset(cap, 0, sizeof(cap));
            uint32_t frames_off = x->n_frames;
            pl_status st;
            if (k->prim == P_STRING)
                st = rd_string(x, c, &cap[S_STACK], "pooled string");
            else if (role != R_NONE)
                st = rd_struct(x, c, (uint32_t)ci, 0, cap);
            else
                st = rd_single(x, c, (uint32_t)ci, false, 0, NULL);
            if (st != PL_OK)
                return st;
            x->objects++;
            int64_t i;
            switch (role) {
            case R_STACKTRACE:
                i = pool_put(x, (void **)&x->stacks, &x->n_stacks, &x->cap_stacks,
                             sizeof(pool_stack), &x->stack_index, key, 0, false);
                if (i < 0)
                    return NOMEM();
                x->stacks[i] = (pool_stack){key, frames_off, x->n_frames - frames_off};
                break;
            case R_METHOD:
                i = pool_put(x, (void **)&x->methods, &x->n_methods, &x->cap_methods,
                             sizeof(pool_method), &x->method_index, key, 0, false);
                if (i < 0)
                    return NOMEM();
                x->methods[i] = (pool_method){
                    key, cap[S_STACK].kind == V_REF ? cap[S_STACK].u : UINT64_MAX, cap[S_STATE]};
                break;
            case R_CLASS:
                i = pool_put(x, (void **)&x->pclasses, &x->n_pclasses, &x->cap_pclasses,
                             sizeof(pool_class), &x->pclass_index, key, 0, false);
                if (i < 0)
                    return NOMEM();
                x->pclasses[i] = (pool_class){key, cap[S_STACK]};
                break;
            case R_SYMBOL:
                i = pool_put(x, (void **)&x->texts, &x->n_texts, &x->cap_texts, sizeof(pool_text),
                             &x->text_index, key, (uint32_t)ci, true);
                if (i < 0)
                    return NOMEM();
                x->texts[i] = (pool_text){(uint32_t)ci, key, cap[S_STACK]};
                break;
            default:
                break;
            }
            if ((x->objects & 1023) == 0 && (st = check_budget(x)) != PL_OK)
                return st;
        }
    }
    return check_budget(x);
}

/* ---- events --------------------------------------------------------------------------- */

static int64_t cache_get(const pool_ref *arr, const pl_htab *index, uint64_t key)
{
    int64_t i = pool_get(arr, sizeof(pool_ref), index, key, 0, false);
    return i < 0 ? -1 : arr[i].value;
}

static int cache_put(rctx *x, pool_ref **arr, uint32_t *n, uint32_t *cap, pl_htab *index,
                     uint64_t key, int32_t value)
{
    int64_t i = pool_put(x, (void **)arr, n, cap, sizeof(pool_ref), index, key, 0, false);
    if (i < 0)
        return -1;
    (*arr)[i] = (pool_ref){key, value};
    return 0;
}

/* The function of a method: "package.Class.method". -1 when the method or
 * its class is not in the pools (the frame is left out, as Pyroscope does),
 * -2 on OOM. */
static int32_t method_function(rctx *x, uint64_t method)
{
    int64_t cached = cache_get(x->fn_cache, &x->fn_cache_index, method);
    if (cached != -1)
        return (int32_t)cached;
    int32_t fn = -1;
    int64_t mi = pool_get(x->methods, sizeof(pool_method), &x->method_index, method, 0, false);
    pl_bytes mname, cname;
    int64_t ki = mi >= 0 ? pool_get(x->pclasses, sizeof(pool_class), &x->pclass_index,
                                    x->methods[mi].class_key, 0, false)
                         : -1;
    if (ki >= 0 && text_of(x, x->methods[mi].name, &mname) &&
        text_of(x, x->pclasses[ki].name, &cname)) {
        size_t len = (size_t)cname.len + 1 + mname.len;
        char *s = pl_arena_alloc(&x->out.arena, len + 1);
        if (!s)
            return -2;
        for (uint32_t i = 0; i < cname.len; i++)
            s[i] = cname.ptr[i] == '/' ? '.' : (char)cname.ptr[i];
        s[cname.len] = '.';
        memcpy(s + cname.len + 1, mname.ptr, mname.len);
        int32_t name = pl_jfr_out_string(&x->out, (pl_bytes){(const uint8_t *)s, (uint32_t)len});
        fn = name < 0 ? -2 : pl_jfr_out_function(&x->out, (uint32_t)name);
        if (fn == -1)
            fn = -2;
    }
    if (fn == -2)
        return -2;
    if (cache_put(x, &x->fn_cache, &x->n_fn_cache, &x->cap_fn_cache, &x->fn_cache_index, method,
                  fn))
        return -2;
    return fn;
}

/* The output stack of a stack trace key: >= 0, -1 if not in the pools, -2 on OOM. */
static int32_t stack_of(rctx *x, uint64_t key)
{
    int64_t cached = cache_get(x->st_cache, &x->st_cache_index, key);
    if (cached != -1)
        return (int32_t)cached;
    int64_t si = pool_get(x->stacks, sizeof(pool_stack), &x->stack_index, key, 0, false);
    if (si < 0)
        return -1;
    const pool_stack *ps = &x->stacks[si];
    if (ps->n > x->cap_scratch) {
        uint32_t *p = realloc(x->scratch_locs, ps->n * sizeof(uint32_t));
        if (!p)
            return -2;
        x->scratch_locs = p;
        x->cap_scratch = ps->n;
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < ps->n; i++) {
        const jframe *f = &x->frames[ps->off + i];
        int32_t fn = method_function(x, f->method);
        if (fn == -2)
            return -2;
        if (fn < 0)
            continue;
        int32_t loc = pl_jfr_out_location(&x->out, (uint32_t)fn, f->line);
        if (loc < 0)
            return -2;
        x->scratch_locs[n++] = (uint32_t)loc;
    }
    int32_t stack = pl_jfr_out_stack(&x->out, x->scratch_locs, n);
    if (stack < 0 || cache_put(x, &x->st_cache, &x->n_st_cache, &x->cap_st_cache,
                               &x->st_cache_index, key, stack))
        return -2;
    return stack;
}

static uint64_t ticks_to_ns(const rctx *x, uint64_t ticks)
{
    if ((int64_t)ticks <= 0)
        return 0;
    unsigned __int128 ns = (unsigned __int128)ticks * 1000000000u / x->ticks_per_second;
    return ns > MAX_DURATION_NS ? MAX_DURATION_NS : (uint64_t)ns;
}

static pl_status add(rctx *x, pl_jfr_kind kind, int32_t stack, const jfr_corr *ctx, int64_t v0,
                     int64_t v1)
{
    x->res->events_by_kind[kind]++;
    int r = pl_jfr_out_sample(&x->out, kind, (uint32_t)stack, ctx, v0, v1);
    if (r < 0)
        return NOMEM();
    x->objects += (uint64_t)r;
    return PL_OK;
}

static pl_status handle_event(rctx *x, uint8_t role, const jval *cap)
{
    if (role == R_EV_SETTING) {
        pl_bytes name, value;
        if (text_of(x, cap[S_NAME], &name) && pl_bytes_eq_cstr(name, "event") &&
            text_of(x, cap[S_VALUE], &value)) {
            size_t n = value.len < sizeof(x->res->event_setting) - 1
                           ? value.len
                           : sizeof(x->res->event_setting) - 1;
            memcpy(x->res->event_setting, value.ptr, n);
            x->res->event_setting[n] = '\0';
        }
        return PL_OK;
    }
    int32_t stack = cap[S_STACK].kind == V_REF ? stack_of(x, cap[S_STACK].u) : -1;
    if (stack == -2)
        return NOMEM();
    if (stack < 0) {
        x->res->skipped_no_stack++;
        return PL_OK;
    }
    /* the labels context and the span (read where the event declares them) */
    jfr_corr corr = {cap[S_CONTEXT].kind == V_NUM ? cap[S_CONTEXT].u : 0,
                     cap[S_SPAN_ID].kind == V_NUM ? cap[S_SPAN_ID].u : 0,
                     cap[S_SPAN_NAME].kind == V_NUM ? cap[S_SPAN_NAME].u : 0};
    const jfr_corr *ctx = &corr;
    pl_bytes state = {NULL, 0};
    bool has_state = text_of(x, cap[S_STATE], &state);
    bool wall_mode = strcmp(x->res->event_setting, "wall") == 0;
    int64_t value = cap[S_VALUE].kind == V_NUM ? (int64_t)cap[S_VALUE].u : 0;
    int64_t delay =
        (int64_t)(cap[S_DURATION].kind == V_NUM ? ticks_to_ns(x, cap[S_DURATION].u) : 0);
    pl_status st = PL_OK;
    switch (role) {
    case R_EV_EXEC:
        if (!has_state || !pl_bytes_eq_cstr(state, "STATE_SLEEPING"))
            st = add(x, PL_JFR_CPU, stack, ctx, 1, 0);
        if (st == PL_OK && wall_mode)
            st = add(x, PL_JFR_WALL, stack, ctx, 1, 0);
        return st;
    case R_EV_NATIVE:
        return add(x, PL_JFR_WALL, stack, ctx, 1, 0);
    case R_EV_WALL:
        value = cap[S_VALUE].kind == V_NUM ? value : 1;
        if (value < 0 || value > (int64_t)MAX_WALL_SAMPLES)
            value = value < 0 ? 0 : MAX_WALL_SAMPLES;
        if (wall_mode && has_state && pl_bytes_eq_cstr(state, "STATE_RUNNABLE"))
            st = add(x, PL_JFR_CPU, stack, ctx, value, 0);
        return st == PL_OK ? add(x, PL_JFR_WALL, stack, ctx, value, 0) : st;
    case R_EV_TLAB_NEW:
        return add(x, PL_JFR_ALLOC_IN_NEW_TLAB, stack, ctx, 1, value < 0 ? 0 : value);
    case R_EV_TLAB_OUT:
        return add(x, PL_JFR_ALLOC_OUTSIDE_TLAB, stack, ctx, 1, value < 0 ? 0 : value);
    case R_EV_ALLOC_SAMPLE:
        return add(x, PL_JFR_ALLOC_SAMPLE, stack, ctx, 1, value < 0 ? 0 : value);
    case R_EV_MONITOR:
        return add(x, PL_JFR_LOCK, stack, ctx, 1, delay);
    case R_EV_PARK:
        return add(x, PL_JFR_PARK, stack, ctx, 1, delay);
    case R_EV_LIVE:
    case R_EV_OLD_OBJECT:
        return add(x, PL_JFR_LIVE, stack, ctx, 1, 0);
    case R_EV_MALLOC:
        return add(x, PL_JFR_MALLOC, stack, ctx, 1, value < 0 ? 0 : value);
    default:
        return PL_OK;
    }
}

/* ---- chunks ------------------------------------------------------------------------------ */

static void chunk_reset(rctx *x)
{
    pl_htab_free(&x->class_index);
    pl_htab_free(&x->stack_index);
    pl_htab_free(&x->method_index);
    pl_htab_free(&x->pclass_index);
    pl_htab_free(&x->text_index);
    pl_htab_free(&x->fn_cache_index);
    pl_htab_free(&x->st_cache_index);
    pl_arena_free(&x->arena);
    pl_arena_init(&x->arena);
    x->mstrings = NULL;
    x->n_mstrings = 0;
    x->classes = NULL;
    x->n_classes = x->cap_classes = 0;
    x->fields = NULL;
    x->n_fields = x->cap_fields = 0;
    x->frames = NULL;
    x->n_frames = x->cap_frames = 0;
    x->stacks = NULL;
    x->n_stacks = x->cap_stacks = 0;
    x->methods = NULL;
    x->n_methods = x->cap_methods = 0;
    x->pclasses = NULL;
    x->n_pclasses = x->cap_pclasses = 0;
    x->texts = NULL;
    x->n_texts = x->cap_texts = 0;
    x->fn_cache = NULL;
    x->n_fn_cache = x->cap_fn_cache = 0;
    x->st_cache = NULL;
    x->n_st_cache = x->cap_st_cache = 0;
}

static uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

typedef struct chunk_times {
    uint64_t start_ns, duration_ns;
} chunk_times;

/* Reads one chunk at data[0..len); *used gets its size. */
static pl_status read_chunk(rctx *x, const uint8_t *data, size_t len, size_t *used,
                            chunk_times *times)
{
    uint32_t idx = x->res->chunks;
    if (len < HEADER_SIZE)
        return BAD("JFR: chunk %u: truncated header (%zu bytes)", idx, len);
    if (!pl_is_jfr(data, len))
        return BAD("JFR: chunk %u: no \"FLR\\0\" magic", idx);
    unsigned major = (unsigned)data[4] << 8 | data[5];
    if (major != 2)
        return BAD("JFR: chunk %u: version %u not supported (2.x is)", idx, major);
    uint64_t size = be64(data + 8), meta = be64(data + 24);
    times->start_ns = be64(data + 32);
    times->duration_ns = be64(data + 40);
    x->ticks_per_second = be64(data + 56);
    uint32_t features =
        (uint32_t)data[64] << 24 | (uint32_t)data[65] << 16 | (uint32_t)data[66] << 8 | data[67];
    x->compressed = features & 1;
    if (size == 0)
        return BAD("JFR: chunk %u: size 0 (a recording still being written)", idx);
    if (size < HEADER_SIZE || size > len)
        return BAD("JFR: chunk %u: size %llu but %zu bytes left (truncated?)", idx,
                   (unsigned long long)size, len);
    if (x->ticks_per_second == 0 || (int64_t)x->ticks_per_second < 0)
        return BAD("JFR: chunk %u: bad ticks per second", idx);
    *used = (size_t)size;
    pl_status st = parse_metadata(x, data, size, meta);
    if (st != PL_OK)
        return st;
    /* pass 1: the constant pools; pass 2: the events */
    for (int pass = 1; pass <= 2; pass++) {
        uint64_t pos = HEADER_SIZE;
        while (pos < size) {
            jcur c = {data + pos, data + size};
            uint64_t esize, type;
            if (rd_int(x, &c, &esize) || esize < 2 || esize > size - pos)
                return BAD("JFR: chunk %u: bad event size at byte %llu", idx,
                           (unsigned long long)pos);
            c.end = data + pos + esize;
            if (rd_long(x, &c, &type))
                return BAD("JFR: chunk %u: truncated event at byte %llu", idx,
                           (unsigned long long)pos);
            if (pass == 1 && type == 1) {
                st = parse_checkpoint(x, &c);
            } else if (pass == 2 && type > 1) {
                x->res->events++;
                x->objects++;
                int32_t ci = class_by_id(x, type);
                uint8_t role = ci >= 0 ? x->classes[ci].role : R_NONE;
                if (IS_EVENT(role)) {
                    jval cap[NSLOTS];
                    memset(cap, 0, sizeof(cap));
                    st = rd_struct(x, &c, (uint32_t)ci, 0, cap);
                    if (st == PL_OK)
                        st = handle_event(x, role, cap);
                }
                if (st == PL_OK && (x->objects & 1023) == 0)
                    st = check_budget(x);
            }
            if (st != PL_OK) {
                if (st == PL_ERR_INVALID && x->err) {
                    char inner[sizeof(x->err->msg)];
                    memcpy(inner, x->err->msg, sizeof(inner));
                    pl_errf(x->err, st, "%s (chunk %u, event at byte %llu)", inner, idx,
                            (unsigned long long)pos);
                }
                return st;
            }
            pos += esize;
        }
    }
    return check_budget(x);
}

pl_status pl_jfr_to_pprof(const uint8_t *data, size_t len, const pl_jfr_options *options,
                          pl_jfr_result *out, pl_err *err)
{
    memset(out, 0, sizeof(*out));
    pl_jfr_options o = options ? *options : (pl_jfr_options){0};
    rctx *x = calloc(1, sizeof(*x));
    if (!x)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    pl_jfr_out_init(&x->out);
    pl_arena_init(&x->arena);
    x->res = out;
    x->err = err;
    x->max_memory = o.max_memory ? o.max_memory : PL_JFR_DEFAULT_MAX_MEMORY;
    x->max_objects = o.max_objects ? o.max_objects : PL_JFR_DEFAULT_MAX_OBJECTS;
    x->max_work = (uint64_t)len * 64 + (16u << 20);
    pl_status st = PL_OK;
    if (len == 0)
        st = BAD("JFR: empty body");
    uint64_t first_start = 0, total_duration = 0;
    size_t pos = 0;
    while (st == PL_OK && pos < len) {
        size_t used = 0;
        chunk_times t = {0, 0};
        st = read_chunk(x, data + pos, len - pos, &used, &t);
        chunk_reset(x);
        if (st != PL_OK)
            break;
        if (!out->chunks)
            first_start = t.start_ns;
        total_duration += t.duration_ns;
        out->chunks++;
        pos += used;
    }
    if (st == PL_OK) {
        jfr_encode_info info = {
            .period = 1000000000 /
                      (o.sample_rate > 0 && o.sample_rate <= 1000000000 ? o.sample_rate : 100),
            .time_unix_nano = o.time_unix_nano ? o.time_unix_nano : first_start,
            .duration_nano = o.time_unix_nano ? o.duration_nano : total_duration,
            .labels = o.labels,
        };
        for (int k = 0; k < PL_JFR_KINDS && st == PL_OK; k++) {
            if (!x->out.kinds[k].n)
                continue;
            pl_jfr_profile *p = &out->profiles[out->n_profiles++];
            p->kind = (pl_jfr_kind)k;
            p->name = pl_jfr_kind_name((pl_jfr_kind)k);
            p->events = x->out.kinds[k].events;
            p->samples = x->out.kinds[k].n;
            pl_buf_init(&p->pprof);
            if (pl_jfr_out_encode(&x->out, (pl_jfr_kind)k, &info, &p->pprof))
                st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
            else if (p->pprof.len > x->max_memory)
                st = pl_errf(err, PL_ERR_TOO_LARGE, "JFR: profile over the memory budget");
        }
    }
    chunk_reset(x);
    pl_arena_free(&x->arena);
    free(x->scratch_locs);
    pl_jfr_out_free(&x->out);
    free(x);
    return st;
}

void pl_jfr_result_free(pl_jfr_result *r)
{
    for (uint32_t i = 0; i < r->n_profiles; i++)
        pl_buf_free(&r->profiles[i].pprof);
    r->n_profiles = 0;
}
