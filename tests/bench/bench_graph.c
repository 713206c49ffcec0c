/*
 * bench_graph.c: the cost of the pipeline machinery itself: a batch of 100
 * spans pushed from a receiver through the graph to exporters that only
 * count, for three shapes:
 *   1. one pipeline, no processor            (dispatch only)
 *   2. one pipeline, three pass-through processors
 *   3. a receiver fanning out to two pipelines (one clone per batch)
 * and the time to load and check a config file. Prints ns per batch and
 * batches per second (median of 5 runs).
 *
 * usage: bench_graph [batches]   (default 200000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config/config.h"
#include "core/log.h"
#include "pipeline/graph.h"
#include "../pipeline_fixtures.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double run_shape(uv_loop_t *loop, const char *yaml, long batches)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load_string("bench.yaml", yaml, strlen(yaml), fx_registry(), &errs);
    if (!cfg) {
        pl_cfg_errors_print(&errs, stderr);
        exit(1);
    }
    pl_cfg_errors_free(&errs);
    pl_err err;
    pl_graph *g = pl_graph_build(cfg, loop, &err);
    if (!g || pl_graph_start(g, &err) != PL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    feeder *f = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder");
    /* batches are prepared outside the timed loop: only the graph is measured */
    pl_batch *template = fx_batch(PL_SIGNAL_TRACES, 100);
    double samples[5];
    for (int r = 0; r < 5; r++) {
        uint64_t total = 0;
        for (long i = 0; i < batches; i++) {
            pl_batch *b = pl_batch_clone(template);
            uint64_t t0 = pl_time_mono_ns();
            pl_consumer_consume(f->next[PL_SIGNAL_TRACES], b);
            total += pl_time_mono_ns() - t0;
        }
        samples[r] = (double)total / (double)batches;
    }
    pl_batch_free(template);
    qsort(samples, 5, sizeof(double), cmp_double);
    pl_graph_shutdown(g);
    uv_run(loop, UV_RUN_NOWAIT);
    pl_graph_destroy(g);
    pl_config_free(cfg);
    return samples[2];
}

int main(int argc, char **argv)
{
    long batches = argc > 1 ? atol(argv[1]) : 200000;
    pl_log_set_level(PL_LOG_ERROR);
    uv_loop_t loop;
    uv_loop_init(&loop);
    static const struct {
        const char *name;
        const char *yaml;
    } shapes[] = {
        {"1 pipeline, 0 processors",
         "receivers: {feeder: }\nexporters: {capture: }\n"
         "service: {pipelines: {traces: {receivers: [feeder], exporters: [capture]}}}\n"},
        {"1 pipeline, 3 processors",
         "receivers: {feeder: }\nprocessors: {counter/1: , counter/2: , counter/3: }\n"
         "exporters: {capture: }\n"
         "service: {pipelines: {traces: {receivers: [feeder], processors: [counter/1, "
         "counter/2, counter/3], exporters: [capture]}}}\n"},
        {"fan-out to 2 pipelines",
         "receivers: {feeder: }\nexporters: {capture/a: , capture/b: }\n"
         "service: {pipelines: {traces/a: {receivers: [feeder], exporters: [capture/a]}, "
         "traces/b: {receivers: [feeder], exporters: [capture/b]}}}\n"},
    };
    printf("batches of 100 spans, %ld per run, median of 5 runs\n", batches);
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        double ns = run_shape(&loop, shapes[i].yaml, batches);
        printf("%-28s %9.1f ns/batch %12.0f batches/s\n", shapes[i].name, ns, 1e9 / ns);
    }

    /* config load + check of collector.yaml-sized text */
    const char *yaml = shapes[1].yaml;
    double samples[5];
    for (int r = 0; r < 5; r++) {
        uint64_t t0 = pl_time_mono_ns();
        for (int i = 0; i < 2000; i++) {
            pl_cfg_errors errs;
            pl_cfg_errors_init(&errs);
            pl_config_free(
                pl_config_load_string("b.yaml", yaml, strlen(yaml), fx_registry(), &errs));
            pl_cfg_errors_free(&errs);
        }
        samples[r] = (double)(pl_time_mono_ns() - t0) / 2000.0;
    }
    qsort(samples, 5, sizeof(double), cmp_double);
    printf("%-28s %9.1f us/load\n", "config load + check", samples[2] / 1000.0);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}
