/*
 * bench_codec.c: throughput of the OTLP codecs on a typical request:
 * 100 spans, each with 10 string attributes, 16/8-byte ids, name, kind,
 * times and a status, under one resource with 3 attributes.
 *
 *   bench_codec [seconds-per-measurement]    (default 2)
 *
 * Prints, for protobuf and JSON, decode and encode throughput in spans/s and
 * MB/s of encoded request, per second of CPU time (single thread). Decoding includes creating and
 * freeing the batch (what a receiver does per request). "hand-written" rows
 * measure the encoders the table walkers replaced (tests/tools/ref_*_enc.c)
 * on the same batch.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "../tools/ref_enc.h"
#include "../traces_fixture.h"

#define SPANS 100
#define ATTRS 10

/* Process CPU time, not wall time: the benchmark machine is shared, and
 * CPU time is what the codec costs. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static pl_batch *build(void)
{
    static const char *keys[ATTRS] = {
        "http.method", "http.route",   "http.target", "net.peer.name", "net.peer.port",
        "db.system",   "db.statement", "user.id",     "thread.name",   "code.namespace"};
    pl_span *spans;
    pl_batch *b = tf_traces("checkout", "@opentelemetry/instrumentation-http", SPANS, &spans);
    pl_resource_spans *rs = &b->data.traces.resources[0];
    pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("host.name"),
                 pl_value_string(PL_BYTES_LIT("ip-10-0-0-12")));
    pl_attrs_put(&b->arena, &rs->resource.attrs, PL_BYTES_LIT("telemetry.sdk.language"),
                 pl_value_string(PL_BYTES_LIT("nodejs")));
    rs->scopes[0].scope.version = PL_BYTES_LIT("0.57.0");
    for (int i = 0; i < SPANS; i++) {
        pl_span *sp = &spans[i];
        for (int k = 0; k < 16; k++)
            sp->trace_id[k] = (uint8_t)(k * 7 + 1);
        sp->trace_id_len = 16;
        for (int k = 0; k < 8; k++)
            sp->span_id[k] = (uint8_t)(i + k + 1);
        sp->span_id_len = 8;
        memcpy(sp->parent_span_id, spans[0].span_id, 8);
        sp->parent_span_id_len = i ? 8 : 0;
        sp->name = PL_BYTES_LIT("GET /api/cart/items");
        sp->kind = 2;
        sp->start_time_unix_nano = 1700000000000000000ull + (uint64_t)i * 1000;
        sp->end_time_unix_nano = sp->start_time_unix_nano + 2500000;
        sp->has_status = true;
        sp->status.code = 1;
        for (int a = 0; a < ATTRS; a++) {
            char *v = pl_batch_alloc(b, 32);
            int n = snprintf(v, 32, "value-%d-%d-abcdefgh", i, a);
            pl_attrs_put(&b->arena, &sp->attrs, pl_bytes_from_cstr(keys[a]),
                         pl_value_string((pl_bytes){(const uint8_t *)v, (uint32_t)n}));
        }
    }
    return b;
}

typedef pl_status (*decode_fn)(pl_batch *, const uint8_t *, size_t, pl_err *);

static void bench_decode(const char *name, decode_fn fn, const pl_buf *req, double secs)
{
    size_t iters = 0;
    double t0 = now(), t;
    do {
        for (int k = 0; k < 50; k++) {
            pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
            pl_err err;
            if (fn(b, req->data, req->len, &err) != PL_OK) {
                fprintf(stderr, "decode failed: %s\n", err.msg);
                exit(1);
            }
            pl_batch_free(b);
        }
        iters += 50;
        t = now() - t0;
    } while (t < secs);
    printf("%-14s decode: %10.0f spans/s  %7.1f MB/s  (%zu-byte request, %.1f us/request)\n", name,
           (double)iters * SPANS / t, (double)iters * (double)req->len / t / 1e6, req->len,
           t / (double)iters * 1e6);
}

typedef bool (*encode_fn)(const pl_traces *, pl_buf *);

static void bench_encode(const char *name, encode_fn fn, const pl_batch *b, double secs)
{
    size_t iters = 0, bytes = 0;
    pl_buf out;
    pl_buf_init(&out);
    double t0 = now(), t;
    do {
        for (int k = 0; k < 50; k++) {
            pl_buf_reset(&out);
            fn(&b->data.traces, &out);
            bytes += out.len;
        }
        iters += 50;
        t = now() - t0;
    } while (t < secs);
    printf("%-14s encode: %10.0f spans/s  %7.1f MB/s  (%.1f us/request)\n", name,
           (double)iters * SPANS / t, (double)bytes / t / 1e6, t / (double)iters * 1e6);
    pl_buf_free(&out);
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    if (secs <= 0)
        secs = 2.0;
    pl_batch *b = build();
    pl_buf pb, js;
    pl_buf_init(&pb);
    pl_buf_init(&js);
    pl_otlp_encode_traces(&b->data.traces, &pb);
    pl_otlp_json_encode_traces(&b->data.traces, &js);
    printf("request: %d spans x %d string attributes; protobuf %zu bytes, JSON %zu bytes\n", SPANS,
           ATTRS, pb.len, js.len);
    bench_decode("otlp protobuf", pl_otlp_decode_traces, &pb, secs);
    bench_encode("otlp protobuf", pl_otlp_encode_traces, b, secs);
    bench_encode("  hand-written", ref_pb_encode_traces, b, secs);
    bench_decode("otlp json", pl_otlp_json_decode_traces, &js, secs);
    bench_encode("otlp json", pl_otlp_json_encode_traces, b, secs);
    bench_encode("  hand-written", ref_json_encode_traces, b, secs);
    pl_buf_free(&pb);
    pl_buf_free(&js);
    pl_batch_free(b);
    return 0;
}
