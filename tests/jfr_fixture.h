/*
 * jfr_fixture.h: a hand-built JFR chunk in async-profiler's style, for what
 * the JDK's own recordings cannot show: events with a `contextId` (the
 * labels of the Pyroscope Java agent), the jdk.ActiveSetting `event` mode,
 * 5-byte padded sizes, an event type the reader does not use. Header-only:
 * test_jfr.c and the fuzz seed writer include it; tests/jfr/async_context.jfr
 * is its output (test_jfr checks the file is what this writes).
 *
 * Stacks: A = work:10 <- main:5, B = other:20 <- main:6 (leaf first).
 * ExecutionSample events: A with context 1 three times, B with context 2
 * twice, A with context 0 once; one ObjectAllocationInNewTLAB (A, context
 * 1, tlabSize 4096); one jdk.Unused event; ActiveSetting event = `mode`.
 */
#ifndef PL_TEST_JFR_FIXTURE_H
#define PL_TEST_JFR_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "core/buf.h"
#include "pb_writer_fixture.h"

/* JFR's compressed integers, as async-profiler writes them: LEB128. */
static inline void jw_var(pl_buf *b, uint64_t v)
{
    w_varint(b, v);
}

/* A 5-byte padded LEB128, as async-profiler writes sizes it patches later. */
static inline void jw_var5(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)((v >> (7 * i)) & 0x7f) | 0x80;
    p[4] = (uint8_t)(v >> 28);
}

static inline void jw_str(pl_buf *b, const char *s)
{
    pl_buf_append_byte(b, 3); /* UTF-8 */
    jw_var(b, strlen(s));
    pl_buf_append_str(b, s);
}

/* Starts an event: 5 bytes of size patched by jw_end. */
static inline size_t jw_begin(pl_buf *b, uint64_t type)
{
    size_t at = b->len;
    uint8_t pad[5] = {0};
    pl_buf_append(b, pad, 5);
    jw_var(b, type);
    return at;
}

static inline void jw_end(pl_buf *b, size_t at)
{
    if (pl_buf_ok(b))
        jw_var5(b->data + at, (uint32_t)(b->len - at));
}

static inline void jw_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

/* Metadata strings (indices into its string table). */
enum {
    M_ROOT,
    M_METADATA,
    M_CLASS,
    M_FIELD,
    M_NAME,
    M_ID,
    M_CLS,
    M_CP,
    M_DIM,
    M_TRUE,
    M_ONE,
    M_LONG,
    M_INT,
    M_BOOLEAN,
    M_STRING,
    M_SYMBOL,
    M_JCLASS,
    M_METHOD,
    M_FRAME,
    M_TRACE,
    M_STATE,
    M_EXEC,
    M_SETTING,
    M_TLAB,
    M_UNUSED,
    M_F_STRING,
    M_F_NAME,
    M_F_TYPE,
    M_F_METHOD,
    M_F_LINE,
    M_F_TRUNC,
    M_F_FRAMES,
    M_F_START,
    M_F_STACK,
    M_F_STATE,
    M_F_CONTEXT,
    M_F_VALUE,
    M_F_TLAB,
    M_ID_LONG,
    M_ID_INT,
    M_ID_BOOLEAN,
    M_ID_STRING,
    M_ID_SYMBOL,
    M_ID_JCLASS,
    M_ID_METHOD,
    M_ID_FRAME,
    M_ID_TRACE,
    M_ID_STATE,
    M_ID_EXEC,
    M_ID_SETTING,
    M_ID_TLAB,
    M_ID_UNUSED,
    /* async-profiler 3.x: span context, live objects, native memory, locks */
    M_LIVE,
    M_MALLOC,
    M_FREE,
    M_MONITOR,
    M_F_SPAN_ID,
    M_F_SPAN_NAME,
    M_F_SIZE,
    M_F_ADDRESS,
    M_F_DURATION,
    M_F_ALLOC_SIZE,
    M_ID_LIVE,
    M_ID_MALLOC,
    M_ID_FREE,
    M_ID_MONITOR,
    M_N
};
static const char *const jw_mstrings[M_N] = {
    "root",
    "metadata",
    "class",
    "field",
    "name",
    "id",
    "class",
    "constantPool",
    "dimension",
    "true",
    "1",
    "long",
    "int",
    "boolean",
    "java.lang.String",
    "jdk.types.Symbol",
    "java.lang.Class",
    "jdk.types.Method",
    "jdk.types.StackFrame",
    "jdk.types.StackTrace",
    "jdk.types.ThreadState",
    "jdk.ExecutionSample",
    "jdk.ActiveSetting",
    "jdk.ObjectAllocationInNewTLAB",
    "jdk.Unused",
    "string",
    "name",
    "type",
    "method",
    "lineNumber",
    "truncated",
    "frames",
    "startTime",
    "stackTrace",
    "state",
    "contextId",
    "value",
    "tlabSize",
    "100",
    "101",
    "102",
    "103",
    "104",
    "105",
    "106",
    "107",
    "108",
    "109",
    "110",
    "111",
    "112",
    "113",
    "profiler.LiveObject",
    "profiler.Malloc",
    "profiler.Free",
    "jdk.JavaMonitorEnter",
    "spanId",
    "spanName",
    "size",
    "address",
    "duration",
    "allocationSize",
    "114",
    "115",
    "116",
    "117",
};

/* <field name=... class=... [constantPool=true] [dimension=1]/> */
static inline void jw_field(pl_buf *b, int name, int type_id, int cp, int array)
{
    jw_var(b, M_FIELD);
    jw_var(b, 2 + (cp ? 1 : 0) + (array ? 1 : 0));
    jw_var(b, M_NAME), jw_var(b, (uint64_t)name);
    jw_var(b, M_CLS), jw_var(b, (uint64_t)type_id);
    if (cp)
        jw_var(b, M_CP), jw_var(b, M_TRUE);
    if (array)
        jw_var(b, M_DIM), jw_var(b, M_ONE);
    jw_var(b, 0); /* no children */
}

/* <class id=... name=...> fields </class>; `id` and `name` are metadata
 * string indices; `fields` as {name, type id string, cp, array} */
static inline void jw_class(pl_buf *b, int id, int name, const int (*fields)[4], int n)
{
    jw_var(b, M_CLASS);
    jw_var(b, 2);
    jw_var(b, M_ID), jw_var(b, (uint64_t)id);
    jw_var(b, M_NAME), jw_var(b, (uint64_t)name);
    jw_var(b, (uint64_t)n);
    for (int i = 0; i < n; i++)
        jw_field(b, fields[i][0], fields[i][1], fields[i][2], fields[i][3]);
}

/* Pool keys. */
enum {
    K_SYM_WORKLOAD = 1,
    K_SYM_WORK,
    K_SYM_OTHER,
    K_SYM_MAIN,
    K_CLASS = 1,
    K_M_WORK = 1,
    K_M_OTHER,
    K_M_MAIN,
    K_STACK_A = 1,
    K_STACK_B,
    K_RUNNABLE = 1
};

static inline void jw_exec(pl_buf *b, uint64_t stack, uint64_t context)
{
    size_t e = jw_begin(b, 110);
    jw_var(b, 1000); /* startTime */
    jw_var(b, stack);
    jw_var(b, K_RUNNABLE);
    jw_var(b, context);
    jw_end(b, e);
}

/* The checkpoint: symbols, a class, methods, stack traces A and B, thread
 * states. */
static inline void jw_pools(pl_buf *out)
{
    size_t e;
    e = jw_begin(out, 1);
    jw_var(out, 1000), jw_var(out, 0), jw_var(out, 0); /* start, duration, delta */
    pl_buf_append_byte(out, 1);                        /* flush */
    jw_var(out, 5);                                    /* pools */
    jw_var(out, 104), jw_var(out, 4);                  /* symbols */
    static const char *const syms[] = {"proflink/fixture/Workload", "work", "other", "main"};
    for (int i = 0; i < 4; i++)
        jw_var(out, (uint64_t)i + 1), jw_str(out, syms[i]);
    jw_var(out, 105), jw_var(out, 1); /* classes */
    jw_var(out, K_CLASS), jw_var(out, K_SYM_WORKLOAD);
    jw_var(out, 106), jw_var(out, 3); /* methods */
    jw_var(out, K_M_WORK), jw_var(out, K_CLASS), jw_var(out, K_SYM_WORK);
    jw_var(out, K_M_OTHER), jw_var(out, K_CLASS), jw_var(out, K_SYM_OTHER);
    jw_var(out, K_M_MAIN), jw_var(out, K_CLASS), jw_var(out, K_SYM_MAIN);
    jw_var(out, 108), jw_var(out, 2); /* stack traces */
    jw_var(out, K_STACK_A), pl_buf_append_byte(out, 0), jw_var(out, 2);
    jw_var(out, K_M_WORK), jw_var(out, 10), jw_var(out, K_M_MAIN), jw_var(out, 5);
    jw_var(out, K_STACK_B), pl_buf_append_byte(out, 0), jw_var(out, 2);
    jw_var(out, K_M_OTHER), jw_var(out, 20), jw_var(out, K_M_MAIN), jw_var(out, 6);
    jw_var(out, 109), jw_var(out, 1); /* thread states */
    jw_var(out, K_RUNNABLE), jw_str(out, "STATE_RUNNABLE");
    jw_end(out, e);
}

/* The metadata classes every fixture chunk declares (10 of them). */
static inline void jw_common_classes(pl_buf *out)
{
    jw_class(out, M_ID_LONG, M_LONG, NULL, 0);
    jw_class(out, M_ID_INT, M_INT, NULL, 0);
    jw_class(out, M_ID_BOOLEAN, M_BOOLEAN, NULL, 0);
    jw_class(out, M_ID_STRING, M_STRING, NULL, 0);
    static const int sym_f[][4] = {{M_F_STRING, M_ID_STRING, 0, 0}};
    jw_class(out, M_ID_SYMBOL, M_SYMBOL, sym_f, 1);
    static const int cls_f[][4] = {{M_F_NAME, M_ID_SYMBOL, 1, 0}};
    jw_class(out, M_ID_JCLASS, M_JCLASS, cls_f, 1);
    static const int meth_f[][4] = {{M_F_TYPE, M_ID_JCLASS, 1, 0}, {M_F_NAME, M_ID_SYMBOL, 1, 0}};
    jw_class(out, M_ID_METHOD, M_METHOD, meth_f, 2);
    static const int frame_f[][4] = {{M_F_METHOD, M_ID_METHOD, 1, 0}, {M_F_LINE, M_ID_INT, 0, 0}};
    jw_class(out, M_ID_FRAME, M_FRAME, frame_f, 2);
    static const int trace_f[][4] = {{M_F_TRUNC, M_ID_BOOLEAN, 0, 0},
                                     {M_F_FRAMES, M_ID_FRAME, 0, 1}};
    jw_class(out, M_ID_TRACE, M_TRACE, trace_f, 2);
    static const int state_f[][4] = {{M_F_NAME, M_ID_STRING, 0, 0}};
    jw_class(out, M_ID_STATE, M_STATE, state_f, 1);
}

/* Patches the chunk header of the chunk that starts at `start`. */
static inline void jw_finish(pl_buf *out, size_t start, size_t cp_at, size_t meta_at)
{
    if (!pl_buf_ok(out))
        return;
    uint8_t *h = out->data + start;
    jw_be(h + 8, out->len - start, 8);        /* chunk size */
    jw_be(h + 16, cp_at, 8);                  /* constant pool offset */
    jw_be(h + 24, meta_at, 8);                /* metadata offset */
    jw_be(h + 32, 1700000000000000000ull, 8); /* start, ns */
    jw_be(h + 40, 10000000000ull, 8);         /* duration: 10 s */
    jw_be(h + 48, 0, 8);                      /* start ticks */
    jw_be(h + 56, 1000000000ull, 8);          /* ticks per second */
    jw_be(h + 64, 1, 4);                      /* compressed integers */
}

/* Appends one chunk; `mode` is the ActiveSetting `event` ("itimer", "wall"). */
static inline void build_async_jfr(pl_buf *out, const char *mode)
{
    size_t start = out->len;
    uint8_t header[68] = {'F', 'L', 'R', 0, 0, 2, 0, 0};
    pl_buf_append(out, header, sizeof(header));

    /* events first (the pools follow, as in a real chunk) */
    size_t e = jw_begin(out, 111); /* ActiveSetting */
    jw_var(out, 1000);
    jw_str(out, "event");
    jw_str(out, mode);
    jw_end(out, e);
    for (int i = 0; i < 3; i++)
        jw_exec(out, K_STACK_A, 1);
    jw_exec(out, K_STACK_B, 2);
    jw_exec(out, K_STACK_B, 2);
    jw_exec(out, K_STACK_A, 0);
    e = jw_begin(out, 112); /* InNewTLAB */
    jw_var(out, 1000), jw_var(out, K_STACK_A), jw_var(out, 1), jw_var(out, 4096);
    jw_end(out, e);
    e = jw_begin(out, 113); /* an event type the reader skips */
    jw_var(out, 1000), jw_var(out, 77);
    jw_end(out, e);

    size_t cp_at = out->len - start;
    jw_pools(out);
    size_t meta_at = out->len - start;
    e = jw_begin(out, 0);
    jw_var(out, 1000), jw_var(out, 0), jw_var(out, 1); /* start, duration, metadata id */
    jw_var(out, M_N);
    for (int i = 0; i < M_N; i++)
        jw_str(out, jw_mstrings[i]);
    jw_var(out, M_ROOT), jw_var(out, 0), jw_var(out, 1); /* <root> one child */
    jw_var(out, M_METADATA), jw_var(out, 0), jw_var(out, 14);
    jw_common_classes(out);
    static const int exec_f[][4] = {{M_F_START, M_ID_LONG, 0, 0},
                                    {M_F_STACK, M_ID_TRACE, 1, 0},
                                    {M_F_STATE, M_ID_STATE, 1, 0},
                                    {M_F_CONTEXT, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_EXEC, M_EXEC, exec_f, 4);
    static const int set_f[][4] = {{M_F_START, M_ID_LONG, 0, 0},
                                   {M_F_NAME, M_ID_STRING, 0, 0},
                                   {M_F_VALUE, M_ID_STRING, 0, 0}};
    jw_class(out, M_ID_SETTING, M_SETTING, set_f, 3);
    static const int tlab_f[][4] = {{M_F_START, M_ID_LONG, 0, 0},
                                    {M_F_STACK, M_ID_TRACE, 1, 0},
                                    {M_F_CONTEXT, M_ID_LONG, 0, 0},
                                    {M_F_TLAB, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_TLAB, M_TLAB, tlab_f, 4);
    static const int unused_f[][4] = {{M_F_START, M_ID_LONG, 0, 0}, {M_F_VALUE, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_UNUSED, M_UNUSED, unused_f, 2);
    jw_end(out, e);

    jw_finish(out, start, cp_at, meta_at);
}

/* An async-profiler 3.x chunk with OpenTelemetry span context in its events
 * (jfr.md: `spanId`, `spanName`, `contextId` on ExecutionSample,
 * ObjectAllocationInNewTLAB and JavaMonitorEnter), live objects and native
 * memory (malloc and free). The span names are string ids of the upload's
 * LabelsSnapshot (SPAN_NAME_CHECKOUT, SPAN_NAME_EMPTY).
 *
 *   ExecutionSample: A ctx 1 span 239 name 1 x3; B ctx 2 span SPAN_B name 2
 *     x2; A ctx 1 span 0 x1; A ctx 0 span 239 name 1 x1
 *   InNewTLAB: A ctx 1 span 239 name 1, tlabSize 4096
 *   JavaMonitorEnter: B span SPAN_B, 5 ms and 7 ms
 *   LiveObject: A x2, B x1
 *   Malloc: A 100 and 28 bytes, B 1000 bytes; Free x2 (not a profile) */
#define SPAN_A             239ull
#define SPAN_B             0x1234abcd00ff0001ull
#define SPAN_NAME_CHECKOUT 1
#define SPAN_NAME_EMPTY    2

static inline void jw_span_exec(pl_buf *b, uint64_t stack, uint64_t context, uint64_t span,
                                uint64_t name)
{
    size_t e = jw_begin(b, 110);
    jw_var(b, 1000), jw_var(b, stack), jw_var(b, K_RUNNABLE);
    jw_var(b, context), jw_var(b, span), jw_var(b, name);
    jw_end(b, e);
}

static inline void build_async_span_jfr(pl_buf *out)
{
    size_t start = out->len;
    uint8_t header[68] = {'F', 'L', 'R', 0, 0, 2, 0, 0};
    pl_buf_append(out, header, sizeof(header));
    size_t e = jw_begin(out, 111); /* ActiveSetting */
    jw_var(out, 1000), jw_str(out, "event"), jw_str(out, "itimer");
    jw_end(out, e);
    for (int i = 0; i < 3; i++)
        jw_span_exec(out, K_STACK_A, 1, SPAN_A, SPAN_NAME_CHECKOUT);
    jw_span_exec(out, K_STACK_B, 2, SPAN_B, SPAN_NAME_EMPTY);
    jw_span_exec(out, K_STACK_B, 2, SPAN_B, SPAN_NAME_EMPTY);
    jw_span_exec(out, K_STACK_A, 1, 0, 0);
    jw_span_exec(out, K_STACK_A, 0, SPAN_A, SPAN_NAME_CHECKOUT);
    e = jw_begin(out, 112); /* InNewTLAB */
    jw_var(out, 1000), jw_var(out, K_STACK_A), jw_var(out, 1), jw_var(out, 4096);
    jw_var(out, SPAN_A), jw_var(out, SPAN_NAME_CHECKOUT);
    jw_end(out, e);
    for (int i = 0; i < 2; i++) { /* JavaMonitorEnter: 5 ms, 7 ms */
        e = jw_begin(out, 117);
        jw_var(out, 1000), jw_var(out, i ? 7000000 : 5000000), jw_var(out, K_STACK_B);
        jw_var(out, 0), jw_var(out, SPAN_B), jw_var(out, 0);
        jw_end(out, e);
    }
    static const uint64_t live[] = {K_STACK_A, K_STACK_A, K_STACK_B};
    for (int i = 0; i < 3; i++) {
        e = jw_begin(out, 114);
        jw_var(out, 1000), jw_var(out, live[i]), jw_var(out, 64);
        jw_end(out, e);
    }
    static const uint64_t malloc_stack[] = {K_STACK_A, K_STACK_A, K_STACK_B};
    static const uint64_t malloc_size[] = {100, 28, 1000};
    for (int i = 0; i < 3; i++) {
        e = jw_begin(out, 115);
        jw_var(out, 1000), jw_var(out, malloc_stack[i]), jw_var(out, 0x7f0000 + (uint64_t)i);
        jw_var(out, malloc_size[i]);
        jw_end(out, e);
    }
    for (int i = 0; i < 2; i++) {
        e = jw_begin(out, 116); /* Free: no stack trace, not a profile */
        jw_var(out, 1000), jw_var(out, 0x7f0000 + (uint64_t)i);
        jw_end(out, e);
    }

    size_t cp_at = out->len - start;
    jw_pools(out);
    size_t meta_at = out->len - start;
    e = jw_begin(out, 0);
    jw_var(out, 1000), jw_var(out, 0), jw_var(out, 1);
    jw_var(out, M_N);
    for (int i = 0; i < M_N; i++)
        jw_str(out, jw_mstrings[i]);
    jw_var(out, M_ROOT), jw_var(out, 0), jw_var(out, 1);
    jw_var(out, M_METADATA), jw_var(out, 0), jw_var(out, 17);
    jw_common_classes(out);
    static const int exec_f[][4] = {
        {M_F_START, M_ID_LONG, 0, 0},   {M_F_STACK, M_ID_TRACE, 1, 0},
        {M_F_STATE, M_ID_STATE, 1, 0},  {M_F_CONTEXT, M_ID_LONG, 0, 0},
        {M_F_SPAN_ID, M_ID_LONG, 0, 0}, {M_F_SPAN_NAME, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_EXEC, M_EXEC, exec_f, 6);
    static const int set_f[][4] = {{M_F_START, M_ID_LONG, 0, 0},
                                   {M_F_NAME, M_ID_STRING, 0, 0},
                                   {M_F_VALUE, M_ID_STRING, 0, 0}};
    jw_class(out, M_ID_SETTING, M_SETTING, set_f, 3);
    static const int tlab_f[][4] = {
        {M_F_START, M_ID_LONG, 0, 0},   {M_F_STACK, M_ID_TRACE, 1, 0},
        {M_F_CONTEXT, M_ID_LONG, 0, 0}, {M_F_TLAB, M_ID_LONG, 0, 0},
        {M_F_SPAN_ID, M_ID_LONG, 0, 0}, {M_F_SPAN_NAME, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_TLAB, M_TLAB, tlab_f, 6);
    static const int mon_f[][4] = {
        {M_F_START, M_ID_LONG, 0, 0},   {M_F_DURATION, M_ID_LONG, 0, 0},
        {M_F_STACK, M_ID_TRACE, 1, 0},  {M_F_CONTEXT, M_ID_LONG, 0, 0},
        {M_F_SPAN_ID, M_ID_LONG, 0, 0}, {M_F_SPAN_NAME, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_MONITOR, M_MONITOR, mon_f, 6);
    static const int live_f[][4] = {{M_F_START, M_ID_LONG, 0, 0},
                                    {M_F_STACK, M_ID_TRACE, 1, 0},
                                    {M_F_ALLOC_SIZE, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_LIVE, M_LIVE, live_f, 3);
    static const int malloc_f[][4] = {{M_F_START, M_ID_LONG, 0, 0},
                                      {M_F_STACK, M_ID_TRACE, 1, 0},
                                      {M_F_ADDRESS, M_ID_LONG, 0, 0},
                                      {M_F_SIZE, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_MALLOC, M_MALLOC, malloc_f, 4);
    static const int free_f[][4] = {{M_F_START, M_ID_LONG, 0, 0}, {M_F_ADDRESS, M_ID_LONG, 0, 0}};
    jw_class(out, M_ID_FREE, M_FREE, free_f, 2);
    jw_end(out, e);
    jw_finish(out, start, cp_at, meta_at);
}

#endif
