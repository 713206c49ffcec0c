/*
 * bench_pprof.c: pprof decode + conversion into the profiles model (what the
 * pyroscope receiver does per upload), and the way back (what the pyroscope
 * exporter does per profile).
 *
 * The input is a synthetic but realistic 10-second Go CPU profile: two value
 * columns (samples/count, cpu/nanoseconds, period 10 ms), 400 functions in
 * 40 packages, call stacks 8 to 40 frames deep drawn from a call tree, 4000
 * samples (Go writes one sample per distinct stack and label set), each with
 * a span_id label out of 200 spans and a thread label, gzipped as the Go
 * runtime writes it. A pprof file given on the command line is measured
 * too (e.g. the Node.js SDK upload in tests/interop/fixtures).
 *
 * Figures are per CPU-second of this process (CLOCK_PROCESS_CPUTIME_ID), the
 * median of 7 runs of at least 0.5 s each.
 *
 *   ninja -C build-<you> tests/bench_pprof && ./build-<you>/tests/bench_pprof [file.pprof.gz]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/pprof.h"
#include "../pb_writer_fixture.h"
#include "../xorshift.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n)
{
    return (uint32_t)(xorshift64(&rng) % n);
}

#define N_FUNCS   400
#define N_SAMPLES 4000
#define N_SPANS   200

static size_t n_strings;
static void add_string(pl_buf *strs, const char *s)
{
    w_bytes(strs, 6, s, strlen(s));
    n_strings++;
}

/* Builds the synthetic profile (uncompressed) into out. */
static void build_go_cpu_profile(pl_buf *out)
{
    pl_buf strs, m, sub, packed;
    pl_buf_init(&strs);
    pl_buf_init(&m);
    pl_buf_init(&sub);
    pl_buf_init(&packed);
    char tmp[128];
    add_string(&strs, "");
    add_string(&strs, "samples");                /* 1 */
    add_string(&strs, "count");                  /* 2 */
    add_string(&strs, "cpu");                    /* 3 */
    add_string(&strs, "nanoseconds");            /* 4 */
    add_string(&strs, "span_id");                /* 5 */
    add_string(&strs, "thread");                 /* 6 */
    add_string(&strs, "/usr/local/bin/service"); /* 7 */
    size_t first_fn = n_strings;
    for (int i = 0; i < N_FUNCS; i++) {
        snprintf(tmp, sizeof(tmp), "github.com/acme/service/pkg%02d.(*Handler).Method%03d", i % 40,
                 i);
        add_string(&strs, tmp);
    }
    size_t first_file = n_strings;
    for (int i = 0; i < 40; i++) {
        snprintf(tmp, sizeof(tmp), "/src/github.com/acme/service/pkg%02d/handler.go", i);
        add_string(&strs, tmp);
    }
    size_t first_span = n_strings;
    for (int i = 0; i < N_SPANS; i++) {
        snprintf(tmp, sizeof(tmp), "%016llx", 0x1000000000000000ull + (unsigned long long)i * 7919);
        add_string(&strs, tmp);
    }
    size_t first_thread = n_strings;
    for (int i = 0; i < 8; i++) {
        snprintf(tmp, sizeof(tmp), "worker-%d", i);
        add_string(&strs, tmp);
    }

    w_uint(&m, 1, 1), w_uint(&m, 2, 2), w_msg(out, 1, &m);
    w_uint(&m, 1, 3), w_uint(&m, 2, 4), w_msg(out, 1, &m);

    /* Call tree: function i's callers are among the functions before it, so
     * stacks walk from a leaf towards main (function 0). */
    for (int s = 0; s < N_SAMPLES; s++) {
        uint64_t locs[64];
        int depth = 8 + (int)rnd(33);
        int f = (int)rnd(N_FUNCS - 1) + 1;
        int n = 0;
        for (; n < depth - 1 && f > 0; n++) {
            locs[n] = (uint64_t)f + 1; /* location id = function index + 1 */
            f = (int)rnd((uint32_t)f);
        }
        locs[n++] = 1; /* main */
        pl_buf_reset(&packed);
        for (int k = 0; k < n; k++)
            w_varint(&packed, locs[k]);
        w_bytes(&m, 1, packed.data, packed.len);
        uint64_t count = 1 + rnd(5);
        pl_buf_reset(&packed);
        w_varint(&packed, count);
        w_varint(&packed, count * 10000000);
        w_bytes(&m, 2, packed.data, packed.len);
        w_uint(&sub, 1, 5), w_uint(&sub, 2, first_span + rnd(N_SPANS)), w_msg(&m, 3, &sub);
        w_uint(&sub, 1, 6), w_uint(&sub, 2, first_thread + rnd(8)), w_msg(&m, 3, &sub);
        w_msg(out, 2, &m);
    }
    w_uint(&m, 1, 1), w_uint(&m, 2, 0x400000), w_uint(&m, 3, 0x1400000), w_uint(&m, 5, 7),
        w_uint(&m, 7, 1), w_uint(&m, 8, 1), w_uint(&m, 9, 1);
    w_msg(out, 3, &m);
    for (int i = 0; i < N_FUNCS; i++) {
        w_uint(&m, 1, (uint64_t)i + 1), w_uint(&m, 2, 1),
            w_uint(&m, 3, 0x401000 + (uint64_t)i * 64);
        w_uint(&sub, 1, (uint64_t)i + 1), w_uint(&sub, 2, 10 + (uint64_t)rnd(400)),
            w_msg(&m, 4, &sub);
        w_msg(out, 4, &m);
    }
    for (int i = 0; i < N_FUNCS; i++) {
        w_uint(&m, 1, (uint64_t)i + 1), w_uint(&m, 2, first_fn + (uint64_t)i),
            w_uint(&m, 3, first_fn + (uint64_t)i), w_uint(&m, 4, first_file + (uint64_t)(i % 40)),
            w_uint(&m, 5, 10);
        w_msg(out, 5, &m);
    }
    pl_buf_append(out, strs.data, strs.len);
    w_uint(out, 9, 1700000000000000000ull);
    w_uint(out, 10, 10000000000ull);
    w_uint(&m, 1, 3), w_uint(&m, 2, 4), w_msg(out, 11, &m);
    w_uint(out, 12, 10000000);
    pl_buf_free(&strs);
    pl_buf_free(&m);
    pl_buf_free(&sub);
    pl_buf_free(&packed);
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef enum { OP_DECODE, OP_ENCODE, OP_ENCODE_GZIP } op_kind;

/* Runs op repeatedly for >= 0.5 s CPU, 7 times; returns the median ops/s. */
static double measure(op_kind op, const uint8_t *data, size_t len, const pl_batch *batch)
{
    double rates[7];
    for (int r = 0; r < 7; r++) {
        long n = 0;
        double start = cpu_now(), now;
        do {
            if (op == OP_DECODE) {
                pl_err err;
                pl_batch *b = pl_pprof_decode(data, len, NULL, &err);
                if (!b) {
                    fprintf(stderr, "decode failed: %s\n", err.msg);
                    exit(1);
                }
                pl_batch_free(b);
            } else {
                const pl_profile *p =
                    &batch->data.profiles.resources[0]
                         .scopes[0]
                         .profiles[1 % batch->data.profiles.resources[0].scopes[0].n_profiles];
                pl_buf out, gz;
                pl_buf_init(&out);
                pl_buf_init(&gz);
                pl_err err;
                if (pl_pprof_encode(&batch->data.profiles.dict, p, NULL, &out, &err) != PL_OK ||
                    (op == OP_ENCODE_GZIP && pl_gzip(out.data, out.len, &gz))) {
                    fprintf(stderr, "encode failed\n");
                    exit(1);
                }
                pl_buf_free(&out);
                pl_buf_free(&gz);
            }
            n++;
            now = cpu_now();
        } while (now - start < 0.5);
        rates[r] = (double)n / (now - start);
    }
    qsort(rates, 7, sizeof(double), cmp_double);
    return rates[3];
}

static void report(const char *name, const uint8_t *data, size_t len)
{
    pl_err err;
    pl_batch *b = pl_pprof_decode(data, len, NULL, &err);
    if (!b) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return;
    }
    const pl_scope_profiles *sc = &b->data.profiles.resources[0].scopes[0];
    size_t samples = sc->n_profiles ? sc->profiles[0].n_samples : 0;
    printf("%s: %zu bytes, %u sample types, %zu pprof samples, %u functions, %u locations, "
           "%u stacks\n",
           name, len, sc->n_profiles, samples, b->data.profiles.dict.n_functions - 1,
           b->data.profiles.dict.n_locations - 1, b->data.profiles.dict.n_stacks - 1);
    double dec = measure(OP_DECODE, data, len, NULL);
    printf("  decode+convert:              %8.0f profiles/CPU-s  %10.0f samples/CPU-s  (%.3f ms "
           "each)\n",
           dec, dec * (double)samples, 1000.0 / dec);
    double enc = measure(OP_ENCODE, NULL, 0, b);
    printf("  encode (one column):         %8.0f profiles/CPU-s  %10.0f samples/CPU-s\n", enc,
           enc * (double)samples);
    enc = measure(OP_ENCODE_GZIP, NULL, 0, b);
    printf("  encode+gzip (exporter path): %8.0f profiles/CPU-s  %10.0f samples/CPU-s\n", enc,
           enc * (double)samples);
    pl_batch_free(b);
}

int main(int argc, char **argv)
{
    pl_buf raw, gz;
    pl_buf_init(&raw);
    pl_buf_init(&gz);
    build_go_cpu_profile(&raw);
    pl_gzip(raw.data, raw.len, &gz);
    report("synthetic Go CPU profile (10 s, gzipped)", gz.data, gz.len);
    report("synthetic Go CPU profile (10 s, raw)", raw.data, raw.len);
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            continue;
        }
        pl_buf file;
        pl_buf_init(&file);
        uint8_t chunk[65536];
        size_t n;
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
            pl_buf_append(&file, chunk, n);
        fclose(f);
        report(argv[i], file.data, file.len);
        pl_buf_free(&file);
    }
    pl_buf_free(&raw);
    pl_buf_free(&gz);
    return 0;
}
