/*
 * bench_codec.c: throughput of the OTLP codecs on a typical request:
 * 100 spans, each with 10 string attributes, 16/8-byte ids, name, kind,
 * times and a status, under one resource with 3 attributes.
 *
 *   bench_codec [seconds-per-measurement]    (default 2)
 *
 * Then encodes a profiles request (see build_profiles) both ways.
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

/* A profiles request like one converted from a CPU pprof: 4 profiles of 250
 * samples over a dictionary of 300 strings, 200 functions, 400 locations
 * (1-2 lines each), 250 stacks of 12 frames and 8 attributes. */
#define PROFILES 4
#define SAMPLES  250

static pl_batch *build_profiles(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    ps->n_resources = 1;
    ps->resources = pl_batch_alloc(b, sizeof(pl_resource_profiles));
    pl_resource_profiles *rp = &ps->resources[0];
    rp->has_resource = true;
    pl_attrs_put(&b->arena, &rp->resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(PL_BYTES_LIT("checkout")));
    rp->n_scopes = 1;
    rp->scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
    pl_scope_profiles *sp = &rp->scopes[0];
    sp->n_profiles = PROFILES;
    sp->profiles = pl_batch_alloc(b, PROFILES * sizeof(pl_profile));
    pl_dictionary *d = &ps->dict;
    ps->has_dictionary = true;
    d->n_strings = 300;
    d->strings = pl_batch_alloc(b, 300 * sizeof(pl_bytes));
    for (uint32_t i = 1; i < 300; i++) {
        char *v = pl_batch_alloc(b, 48);
        int n = snprintf(v, 48, "com.example.shop.Service%u.handle", i);
        d->strings[i] = (pl_bytes){(const uint8_t *)v, (uint32_t)n};
    }
    d->n_functions = 200;
    d->functions = pl_batch_alloc(b, 200 * sizeof(pl_function));
    for (uint32_t i = 1; i < 200; i++)
        d->functions[i] = (pl_function){(int32_t)i, (int32_t)i, (int32_t)(i % 50 + 250), i * 3};
    d->n_mappings = 2;
    d->mappings = pl_batch_alloc(b, 2 * sizeof(pl_mapping));
    d->mappings[1] = (pl_mapping){0x400000, 0x800000, 0, 299, NULL, 0};
    d->n_locations = 400;
    d->locations = pl_batch_alloc(b, 400 * sizeof(pl_location));
    for (uint32_t i = 1; i < 400; i++) {
        pl_location *l = &d->locations[i];
        l->mapping_index = 1;
        l->address = 0x400000 + i * 64;
        l->n_lines = 1 + i % 2;
        l->lines = pl_batch_alloc(b, l->n_lines * sizeof(pl_line));
        for (uint32_t k = 0; k < l->n_lines; k++)
            l->lines[k] = (pl_line){(int32_t)(1 + (i + k) % 199), 10 + i, 0};
    }
    d->n_stacks = 250;
    d->stacks = pl_batch_alloc(b, 250 * sizeof(pl_stack));
    for (uint32_t i = 1; i < 250; i++) {
        d->stacks[i].n_location_indices = 12;
        d->stacks[i].location_indices = pl_batch_alloc(b, 12 * sizeof(int32_t));
        for (uint32_t k = 0; k < 12; k++)
            d->stacks[i].location_indices[k] = (int32_t)(1 + (i * 7 + k * 13) % 399);
    }
    d->n_attributes = 8;
    d->attributes = pl_batch_alloc(b, 8 * sizeof(pl_kvu));
    for (uint32_t i = 1; i < 8; i++)
        d->attributes[i] = (pl_kvu){(int32_t)i, pl_value_string(d->strings[i + 100]), 0};
    for (uint32_t p = 0; p < PROFILES; p++) {
        pl_profile *pr = &sp->profiles[p];
        pr->has_sample_type = true;
        pr->sample_type = (pl_vtype){1, 2};
        pr->time_unix_nano = 1700000000000000000ull;
        pr->duration_nano = 10000000000ull;
        pr->period = 10000000;
        pr->n_samples = SAMPLES;
        pr->samples = pl_batch_alloc(b, SAMPLES * sizeof(pl_sample));
        for (uint32_t i = 0; i < SAMPLES; i++) {
            pl_sample *sm = &pr->samples[i];
            sm->stack_index = (int32_t)(1 + (i + p) % 249);
            sm->n_values = 1;
            sm->values = pl_batch_alloc(b, sizeof(int64_t));
            sm->values[0] = 10000000 * (1 + i % 5);
            sm->n_attribute_indices = 1;
            sm->attribute_indices = pl_batch_alloc(b, sizeof(int32_t));
            sm->attribute_indices[0] = (int32_t)(1 + i % 7);
        }
    }
    return b;
}

typedef bool (*profiles_fn)(const pl_profiles *, pl_buf *);

static void bench_encode_profiles(const char *name, profiles_fn fn, const pl_batch *b, double secs)
{
    size_t iters = 0, bytes = 0;
    pl_buf out;
    pl_buf_init(&out);
    double t0 = now(), t;
    do {
        for (int k = 0; k < 10; k++) {
            pl_buf_reset(&out);
            fn(&b->data.profiles, &out);
            bytes += out.len;
        }
        iters += 10;
        t = now() - t0;
    } while (t < secs);
    printf("%-14s encode: %10.0f samples/s  %7.1f MB/s  (%.1f us/request)\n", name,
           (double)iters * PROFILES * SAMPLES / t, (double)bytes / t / 1e6,
           t / (double)iters * 1e6);
    pl_buf_free(&out);
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
    pl_batch *pf = build_profiles();
    pl_buf_reset(&pb);
    pl_buf_reset(&js);
    pl_otlp_encode_profiles(&pf->data.profiles, &pb);
    pl_otlp_json_encode_profiles(&pf->data.profiles, &js);
    printf("profiles request: %d profiles x %d samples; protobuf %zu bytes, JSON %zu bytes\n",
           PROFILES, SAMPLES, pb.len, js.len);
    bench_encode_profiles("profiles pb", pl_otlp_encode_profiles, pf, secs);
    bench_encode_profiles("  hand-written", ref_pb_encode_profiles, pf, secs);
    bench_encode_profiles("profiles json", pl_otlp_json_encode_profiles, pf, secs);
    bench_encode_profiles("  hand-written", ref_json_encode_profiles, pf, secs);
    pl_batch_free(pf);
    pl_buf_free(&pb);
    pl_buf_free(&js);
    pl_batch_free(b);
    return 0;
}
