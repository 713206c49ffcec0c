/*
 * bench_jfr.c: JFR uploads decoded per CPU-second, what the pyroscope
 * receiver does for a Java agent's /ingest?format=jfr: the recording read
 * into one pprof per kind (proto/jfr.c), then those pprofs decoded into the
 * profiles model (proto/pprof_decode.c), as the receiver hands them on.
 *
 * Input: tests/jfr/bench_10s.jfr, a 10-second recording by OpenJDK 17 of
 * tests/jfr/Workload.java (CPU samples, three allocation event types,
 * monitor and park events; see tests/jfr/README.md), or a file given.
 * Figures are per CPU-second of this process (CLOCK_PROCESS_CPUTIME_ID),
 * the median of 7 runs of at least 0.5 s each.
 *
 *   ninja -C build tests/bench_jfr && ./build/tests/bench_jfr [recording.jfr]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/jfr.h"
#include "proto/pprof.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One upload: the recording to pprofs, and optionally those into a batch. */
static int once(const uint8_t *data, size_t len, bool to_model, uint64_t *events)
{
    pl_jfr_result r;
    pl_err err = {{0}};
    pl_jfr_options o = {.sample_rate = 100};
    if (pl_jfr_to_pprof(data, len, &o, &r, &err) != PL_OK) {
        fprintf(stderr, "decode: %s\n", err.msg);
        return -1;
    }
    *events = r.events;
    if (to_model) {
        pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
        pl_pprof_builder *b = pl_pprof_builder_new(batch);
        pl_pprof_meta meta = {0};
        for (uint32_t i = 0; i < r.n_profiles; i++)
            if (pl_pprof_builder_add(b, r.profiles[i].pprof.data, r.profiles[i].pprof.len, &meta,
                                     &err) != PL_OK) {
                fprintf(stderr, "pprof: %s\n", err.msg);
                return -1;
            }
        pl_pprof_builder_free(b);
        pl_batch_free(batch);
    }
    pl_jfr_result_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "tests/jfr/bench_10s.jfr";
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)n);
    if (!data || fread(data, 1, (size_t)n, f) != (size_t)n)
        return 1;
    fclose(f);
    uint64_t events = 0;
    for (int model = 0; model < 2; model++) {
        double rates[7];
        for (int run = 0; run < 7; run++) {
            double t0 = cpu_now(), t;
            int iters = 0;
            do {
                if (once(data, (size_t)n, model, &events))
                    return 1;
                iters++;
                t = cpu_now() - t0;
            } while (t < 0.5);
            rates[run] = iters / t;
        }
        qsort(rates, 7, sizeof(double), cmp);
        double med = rates[3];
        printf(
            "%s: %s (%ld bytes, %llu events): %.0f recordings/CPU-s, %.1f MB/s, %.2f M events/s\n",
            model ? "JFR -> pprofs -> profiles model" : "JFR -> pprofs", path, n,
            (unsigned long long)events, med, med * n / 1e6, med * events / 1e6);
    }
    free(data);
    return 0;
}
