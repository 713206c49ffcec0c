/*
 * test_graph.c: the pipeline graph and the service lifecycle, built from
 * YAML text with the fixture components (tests/pipeline_fixtures.h):
 * fan-out, one shared processor instance, every exporter gets every batch,
 * start/stop order, flush on shutdown, drain, counters, reload.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "config/config.h"
#include "core/log.h"
#include "core/stats.h"
#include "pipeline/graph.h"
#include "pipeline/service.h"
#include "pipeline/telemetry.h"
#include "testlib.h"
#include "pipeline_fixtures.h"

static uv_loop_t loop;

static pl_config *load(const char *text)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load_string("g.yaml", text, strlen(text), fx_registry(), &errs);
    for (size_t i = 0; i < errs.n; i++)
        fprintf(stderr, "    %s\n", errs.items[i].text);
    pl_cfg_errors_free(&errs);
    return cfg;
}

/* Builds and starts the graph of `cfg` on the test loop; NULL (and the
 * error on stderr) when either fails. */
static pl_graph *build_and_start(pl_config *cfg)
{
    pl_err err = {{0}};
    pl_graph *g = pl_graph_build(cfg, &loop, &err);
    if (g && pl_graph_start(g, &err) == PL_OK)
        return g;
    fprintf(stderr, "  %s: %s\n", g ? "start" : "build", err.msg);
    return NULL;
}

/* load, then build_and_start; *cfg gets the config (free it after the
 * graph) even when the graph does not start. */
static pl_graph *start_graph(const char *yaml, pl_config **cfg)
{
    *cfg = load(yaml);
    return *cfg ? build_and_start(*cfg) : NULL;
}

/* Shuts down, lets the loop close handles, destroys. */
static void teardown(pl_graph *g)
{
    pl_graph_shutdown(g);
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_graph_destroy(g);
    uv_run(&loop, UV_RUN_NOWAIT);
}

static void test_receiver_fans_out_to_every_pipeline(void)
{
    pl_config *cfg = NULL;
    pl_graph *g = start_graph("receivers: {feeder: }\n"
                              "exporters: {capture/a: , capture/b: {self_count: true}}\n"
                              "service:\n"
                              "  telemetry: {metrics: {address: none}}\n"
                              "  pipelines:\n"
                              "    traces/a: {receivers: [feeder], exporters: [capture/a]}\n"
                              "    traces/b: {receivers: [feeder], exporters: [capture/b]}\n",
                              &cfg);
    REQUIRE(g != NULL);
    feeder *f = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder");
    REQUIRE(f != NULL);
    CHECK(f->next[PL_SIGNAL_PROFILES] == NULL); /* no profiles pipeline */
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(feeder_push(f, PL_SIGNAL_TRACES, 2), PL_OK);
    capture *a = pl_graph_instance(g, PL_KIND_EXPORTER, "capture/a");
    capture *b = pl_graph_instance(g, PL_KIND_EXPORTER, "capture/b");
    REQUIRE(a && b && a != b);
    CHECK_EQ_UINT(a->batches[PL_SIGNAL_TRACES], 3);
    CHECK_EQ_UINT(b->batches[PL_SIGNAL_TRACES], 3);
    CHECK_EQ_UINT(a->items[PL_SIGNAL_TRACES], 6);
    CHECK_EQ_UINT(b->items[PL_SIGNAL_TRACES], 6);
    /* each pipeline had its own copy */
    CHECK(a->last[PL_SIGNAL_TRACES] != b->last[PL_SIGNAL_TRACES]);
    /* counters: the receiver accepted 6 spans, each exporter 6 */
    CHECK_EQ_UINT(pl_stats_get(pl_graph_stats(g, PL_KIND_RECEIVER, "feeder"), PL_SIGNAL_TRACES,
                               PL_STAT_ACCEPTED),
                  6);
    CHECK_EQ_UINT(pl_stats_get(pl_graph_stats(g, PL_KIND_EXPORTER, "capture/b"), PL_SIGNAL_TRACES,
                               PL_STAT_ACCEPTED),
                  6);
    teardown(g);
    pl_config_free(cfg);
}

static void test_processor_shared_between_pipelines_is_one_instance(void)
{
    int creates_before = fx_counter_creates;
    pl_config *cfg = NULL;
    pl_graph *g = start_graph("receivers: {feeder: }\n"
                              "processors: {counter/shared: , counter/traces_only: }\n"
                              "exporters: {capture: }\n"
                              "service:\n"
                              "  pipelines:\n"
                              "    traces:\n"
                              "      receivers: [feeder]\n"
                              "      processors: [counter/traces_only, counter/shared]\n"
                              "      exporters: [capture]\n"
                              "    profiles:\n"
                              "      receivers: [feeder]\n"
                              "      processors: [counter/shared]\n"
                              "      exporters: [capture]\n",
                              &cfg);
    REQUIRE(g != NULL);
    CHECK_EQ_INT(fx_counter_creates - creates_before, 2);
    CHECK_EQ_UINT(pl_graph_instance_count(g), 4);
    feeder *f = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder");
    REQUIRE(f != NULL);
    feeder_push(f, PL_SIGNAL_TRACES, 1);
    feeder_push(f, PL_SIGNAL_PROFILES, 5);
    feeder_push(f, PL_SIGNAL_PROFILES, 5);
    counter *shared = pl_graph_instance(g, PL_KIND_PROCESSOR, "counter/shared");
    counter *only = pl_graph_instance(g, PL_KIND_PROCESSOR, "counter/traces_only");
    REQUIRE(shared && only);
    /* one object saw both signals */
    CHECK_EQ_UINT(shared->batches[PL_SIGNAL_TRACES], 1);
    CHECK_EQ_UINT(shared->batches[PL_SIGNAL_PROFILES], 2);
    CHECK_EQ_UINT(only->batches[PL_SIGNAL_PROFILES], 0);
    capture *x = pl_graph_instance(g, PL_KIND_EXPORTER, "capture");
    CHECK_EQ_UINT(x->items[PL_SIGNAL_PROFILES], 10);
    CHECK_EQ_UINT(x->items[PL_SIGNAL_TRACES], 1);
    pl_stats *ps = pl_graph_stats(g, PL_KIND_PROCESSOR, "counter/shared");
    CHECK_EQ_UINT(pl_stats_get(ps, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED), 10);
    CHECK_EQ_UINT(pl_stats_get(ps, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED), 1);
    teardown(g);
    pl_config_free(cfg);
}

static void test_every_exporter_gets_every_batch(void)
{
    pl_config *cfg = NULL;
    pl_graph *g = start_graph("receivers: {feeder: , feeder/2: }\n"
                              "exporters: {capture/1: , capture/2: , capture/3: }\n"
                              "service:\n"
                              "  pipelines:\n"
                              "    profiles:\n"
                              "      receivers: [feeder, feeder/2]\n"
                              "      exporters: [capture/1, capture/2, capture/3]\n",
                              &cfg);
    REQUIRE(g != NULL);
    feeder *f1 = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder");
    feeder *f2 = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder/2");
    REQUIRE(f1 && f2);
    for (int i = 0; i < 4; i++)
        feeder_push(f1, PL_SIGNAL_PROFILES, 3);
    feeder_push(f2, PL_SIGNAL_PROFILES, 7);
    const char *ids[] = {"capture/1", "capture/2", "capture/3"};
    for (int i = 0; i < 3; i++) {
        capture *x = pl_graph_instance(g, PL_KIND_EXPORTER, ids[i]);
        REQUIRE(x != NULL);
        CHECK_EQ_UINT(x->batches[PL_SIGNAL_PROFILES], 5);
        CHECK_EQ_UINT(x->items[PL_SIGNAL_PROFILES], 19);
    }
    teardown(g);
    pl_config_free(cfg);
}

static void test_worst_exporter_status_reaches_the_receiver(void)
{
    pl_config *cfg = NULL;
    pl_graph *g =
        start_graph("receivers: {feeder: }\n"
                    "exporters:\n"
                    "  capture/ok: \n"
                    "  capture/bad: {answer: invalid}\n"
                    "  capture/full: {answer: refused}\n"
                    "service:\n"
                    "  pipelines:\n"
                    "    traces/1: {receivers: [feeder], exporters: [capture/ok, capture/bad]}\n"
                    "    traces/2: {receivers: [feeder], exporters: [capture/ok, "
                    "capture/full]}\n"
                    "    profiles: {receivers: [feeder], exporters: [capture/ok, "
                    "capture/bad]}\n",
                    &cfg);
    REQUIRE(g != NULL);
    feeder *f = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder");
    /* one pipeline says invalid, the other refused: the sender must retry */
    CHECK_EQ_INT(feeder_push(f, PL_SIGNAL_TRACES, 2), PL_ERR_REFUSED);
    CHECK_EQ_INT(feeder_push(f, PL_SIGNAL_PROFILES, 2), PL_ERR_INVALID);
    capture *ok = pl_graph_instance(g, PL_KIND_EXPORTER, "capture/ok");
    CHECK_EQ_UINT(ok->batches[PL_SIGNAL_TRACES], 2); /* every exporter still got the batch */
    pl_stats *full = pl_graph_stats(g, PL_KIND_EXPORTER, "capture/full");
    CHECK_EQ_UINT(pl_stats_get(full, PL_SIGNAL_TRACES, PL_STAT_REFUSED), 2);
    CHECK_EQ_UINT(pl_stats_get(full, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED), 0);
    CHECK_EQ_UINT(pl_stats_get(pl_graph_stats(g, PL_KIND_RECEIVER, "feeder"), PL_SIGNAL_TRACES,
                               PL_STAT_REFUSED),
                  2);
    teardown(g);
    pl_config_free(cfg);
}

static void test_start_and_shutdown_order(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "processors: {counter: }\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder], processors: [counter], exporters: "
                          "[capture]}\n");
    REQUIRE(cfg != NULL);
    fx_reset();
    pl_graph *g = build_and_start(cfg);
    REQUIRE(g != NULL);
    CHECK(fx_pos("start:capture") >= 0);
    CHECK(fx_pos("start:capture") < fx_pos("start:counter"));
    CHECK(fx_pos("start:counter") < fx_pos("start:feeder"));
    pl_graph_shutdown(g);
    CHECK(fx_pos("shutdown:feeder") >= 0);
    CHECK(fx_pos("shutdown:feeder") < fx_pos("shutdown:counter"));
    CHECK(fx_pos("shutdown:counter") < fx_pos("shutdown:capture"));
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_graph_destroy(g);
    uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(fx_pos("destroy:feeder") < fx_pos("destroy:counter"));
    CHECK(fx_pos("destroy:counter") < fx_pos("destroy:capture"));
    pl_config_free(cfg);
}

static void test_failed_start_stops_what_started(void)
{
    pl_config *cfg = load("receivers: {feeder/fail: }\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder/fail], exporters: [capture]}\n");
    REQUIRE(cfg != NULL);
    fx_reset();
    fx_fail_start = 1;
    pl_err err = {{0}};
    pl_graph *g = pl_graph_build(cfg, &loop, &err);
    REQUIRE(g != NULL);
    CHECK(pl_graph_start(g, &err) != PL_OK);
    CHECK_EQ_STR(err.msg, "receiver feeder/fail: 127.0.0.1:1: address already in use");
    CHECK(fx_pos("shutdown:capture") >= 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_graph_destroy(g);
    uv_run(&loop, UV_RUN_NOWAIT);
    fx_fail_start = 0;
    pl_config_free(cfg);
}

static void test_shutdown_flushes_held_data_to_its_pipeline(void)
{
    pl_config *cfg = NULL;
    pl_graph *g =
        start_graph("receivers: {feeder: }\n"
                    "processors: {holder: }\n"
                    "exporters: {capture/t: , capture/p: }\n"
                    "service:\n"
                    "  pipelines:\n"
                    "    traces: {receivers: [feeder], processors: [holder], exporters: "
                    "[capture/t]}\n"
                    "    profiles: {receivers: [feeder], processors: [holder], exporters: "
                    "[capture/p]}\n",
                    &cfg);
    REQUIRE(g != NULL);
    feeder *f = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder");
    feeder_push(f, PL_SIGNAL_TRACES, 4);
    feeder_push(f, PL_SIGNAL_PROFILES, 9);
    capture *t = pl_graph_instance(g, PL_KIND_EXPORTER, "capture/t");
    capture *p = pl_graph_instance(g, PL_KIND_EXPORTER, "capture/p");
    CHECK_EQ_UINT(t->batches[PL_SIGNAL_TRACES], 0);
    pl_graph_shutdown(g);
    /* the shared holder flushed each batch into the pipeline it came from */
    CHECK_EQ_UINT(t->items[PL_SIGNAL_TRACES], 4);
    CHECK_EQ_UINT(t->items[PL_SIGNAL_PROFILES], 0);
    CHECK_EQ_UINT(p->items[PL_SIGNAL_PROFILES], 9);
    CHECK_EQ_UINT(p->items[PL_SIGNAL_TRACES], 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_graph_destroy(g);
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_config_free(cfg);
}

/* sending_queue.batch: the exporter gets batches of at least min_size
 * items (or what flush_timeout gathered), and what is held when the graph
 * shuts down is handed to it. */
static void test_exporter_side_batching(void)
{
    pl_config *cfg = NULL;
    pl_graph *g =
        start_graph("receivers: {feeder: }\n"
                    "exporters:\n"
                    "  capture/b: {sending_queue: {batch: {min_size: 10, flush_timeout: 1h}}}\n"
                    "  capture/plain:\n"
                    "service:\n"
                    "  pipelines:\n"
                    "    traces: {receivers: [feeder], exporters: [capture/b, capture/plain]}\n",
                    &cfg);
    REQUIRE(g != NULL);
    feeder *f = pl_graph_instance(g, PL_KIND_RECEIVER, "feeder");
    capture *b = pl_graph_instance(g, PL_KIND_EXPORTER, "capture/b");
    capture *plain = pl_graph_instance(g, PL_KIND_EXPORTER, "capture/plain");
    REQUIRE(f && b && plain);
    for (int i = 0; i < 2; i++)
        feeder_push(f, PL_SIGNAL_TRACES, 4);
    CHECK_EQ_UINT(b->batches[PL_SIGNAL_TRACES], 0); /* 8 < min_size: held */
    CHECK_EQ_UINT(plain->batches[PL_SIGNAL_TRACES], 2);
    feeder_push(f, PL_SIGNAL_TRACES, 4);
    CHECK_EQ_UINT(b->batches[PL_SIGNAL_TRACES], 1); /* 12 >= 10: sent as one */
    CHECK_EQ_UINT(b->items[PL_SIGNAL_TRACES], 12);
    feeder_push(f, PL_SIGNAL_TRACES, 3);
    CHECK_EQ_UINT(b->items[PL_SIGNAL_TRACES], 12);
    CHECK(pl_graph_pending(g) >= 3);
    pl_graph_shutdown(g); /* the held 3 go to the exporter */
    CHECK_EQ_UINT(b->items[PL_SIGNAL_TRACES], 15);
    CHECK_EQ_UINT(b->batches[PL_SIGNAL_TRACES], 2);
    CHECK_EQ_UINT(plain->items[PL_SIGNAL_TRACES], 15);
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_graph_destroy(g);
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_config_free(cfg);
}

/* ---- service lifecycle --------------------------------------------------- */

static char config_path[256];

static void write_config(const char *text)
{
    FILE *f = fopen(config_path, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

static pl_service *start_service(const char *text)
{
    write_config(text);
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load_file(config_path, fx_registry(), &errs);
    for (size_t i = 0; i < errs.n; i++)
        fprintf(stderr, "    %s\n", errs.items[i].text);
    pl_cfg_errors_free(&errs);
    if (!cfg)
        return NULL;
    pl_err err = {{0}};
    pl_service *s = pl_service_start(&loop, cfg, false, &err);
    if (!s)
        fprintf(stderr, "    start: %s\n", err.msg);
    return s;
}

static void finish(pl_service *s)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    pl_service_free(s);
}

static const char drain_yaml[] = "receivers: {feeder: }\n"
                                 "processors: {holder: }\n"
                                 "exporters: {capture/slow: {backlog: 5, drain_every: 10ms}}\n"
                                 "service:\n"
                                 "  shutdown_timeout: 5s\n"
                                 "  telemetry: {metrics: {address: \"\"}, logs: {level: warn}}\n"
                                 "  pipelines:\n"
                                 "    traces: {receivers: [feeder], processors: [holder], "
                                 "exporters: [capture/slow]}\n";

static void test_stop_drains_until_nothing_is_pending(void)
{
    fx_reset();
    pl_service *s = start_service(drain_yaml);
    REQUIRE(s != NULL);
    CHECK_EQ_INT(pl_service_get_state(s), PL_SERVICE_RUNNING);
    feeder *f = pl_graph_instance(pl_service_graph(s), PL_KIND_RECEIVER, "feeder");
    REQUIRE(f != NULL);
    feeder_push(f, PL_SIGNAL_TRACES, 3);
    uint64_t t0 = pl_time_mono_ns();
    pl_service_stop(s);
    CHECK_EQ_INT(pl_service_get_state(s), PL_SERVICE_DRAINING);
    finish(s);
    uint64_t took_ms = (pl_time_mono_ns() - t0) / 1000000;
    capture_record *r = fx_record("capture/slow");
    REQUIRE(r != NULL);
    CHECK_EQ_UINT(r->items[PL_SIGNAL_TRACES], 3); /* the held batch was flushed */
    CHECK_EQ_INT(r->backlog_at_destroy, 0);       /* destroy waited for the drain */
    CHECK(took_ms >= 40);                         /* 5 items, one per 10 ms */
    CHECK(took_ms < 3000);
}

static void test_drain_deadline_bounds_the_wait(void)
{
    pl_service *s =
        start_service("receivers: {feeder: }\n"
                      "exporters: {capture/stuck: {backlog: 1000000, drain_every: "
                      "1h}}\n"
                      "service:\n"
                      "  shutdown_timeout: 100ms\n"
                      "  telemetry: {metrics: {address: \"\"}, logs: {level: error}}\n"
                      "  pipelines:\n"
                      "    traces: {receivers: [feeder], exporters: [capture/stuck]}\n");
    REQUIRE(s != NULL);
    uint64_t t0 = pl_time_mono_ns();
    pl_service_stop(s);
    finish(s);
    uint64_t took_ms = (pl_time_mono_ns() - t0) / 1000000;
    CHECK(took_ms >= 90);
    CHECK(took_ms < 2000);
    capture_record *r = fx_record("capture/stuck");
    REQUIRE(r != NULL);
    CHECK(r->backlog_at_destroy > 0);
}

static void on_reload_check(uv_timer_t *t)
{
    pl_service *s = t->data;
    if (pl_service_get_state(s) == PL_SERVICE_RUNNING && pl_service_reloads(s) > 0) {
        uv_timer_stop(t);
        uv_close((uv_handle_t *)t, NULL);
        pl_service_stop(s);
    }
}

static void test_reload_with_errors_keeps_running_graph(void)
{
    fx_reset();
    pl_service *s = start_service(drain_yaml);
    REQUIRE(s != NULL);
    pl_graph *before = pl_service_graph(s);
    feeder *f = pl_graph_instance(before, PL_KIND_RECEIVER, "feeder");
    feeder_push(f, PL_SIGNAL_TRACES, 2);

    /* a broken file: nothing changes */
    write_config("receivers: {feeder: }\n"
                 "exporters: {capture: {backlog: lots}}\n"
                 "service: {pipelines: {traces: {receivers: [feeder], exporters: [capture]}}}\n");
    CHECK_EQ_INT(pl_service_reload(s), -1);
    CHECK_EQ_INT(pl_service_get_state(s), PL_SERVICE_RUNNING);
    CHECK(pl_service_graph(s) == before);
    CHECK(fx_pos("shutdown:") < 0);
    /* the old pipelines still carry data */
    feeder_push(f, PL_SIGNAL_TRACES, 1);

    /* a valid new file: the swap is immediate; what was replaced or removed
     * (the holder, flushing what it held, and capture/slow) drains while the
     * new graph runs, and the unchanged receiver is kept as it is */
    write_config("receivers: {feeder: }\n"
                 "exporters: {capture/new: }\n"
                 "service:\n"
                 "  telemetry: {metrics: {address: \"\"}, logs: {level: warn}}\n"
                 "  pipelines:\n"
                 "    traces: {receivers: [feeder], exporters: [capture/new]}\n");
    CHECK_EQ_INT(pl_service_reload(s), 0);
    CHECK_EQ_INT(pl_service_get_state(s), PL_SERVICE_RUNNING);
    CHECK(pl_graph_instance(pl_service_graph(s), PL_KIND_RECEIVER, "feeder") == f);
    uv_timer_t check;
    uv_timer_init(&loop, &check);
    check.data = s;
    uv_timer_start(&check, on_reload_check, 5, 5);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_UINT(pl_service_reloads(s), 1);
    CHECK_EQ_INT(pl_service_get_state(s), PL_SERVICE_STOPPED);
    capture_record *old = fx_record("capture/slow");
    REQUIRE(old != NULL);
    CHECK_EQ_UINT(old->items[PL_SIGNAL_TRACES], 3);
    CHECK(fx_record("capture/new") != NULL);
    /* the removed processor stopped (and flushed) before anything new
     * started; the kept receiver only stopped with the service */
    CHECK(fx_pos("shutdown:holder") >= 0);
    CHECK(fx_pos("shutdown:holder") < fx_pos("start:capture/new"));
    CHECK(fx_pos("start:capture/new") < fx_pos("shutdown:feeder"));
    pl_service_free(s);
}

static void test_reload_failing_start_restores_previous(void)
{
    fx_reset();
    pl_service *s = start_service("receivers: {feeder: }\n"
                                  "exporters: {capture/keep: }\n"
                                  "service:\n"
                                  "  telemetry: {metrics: {address: \"\"}, logs: {level: off}}\n"
                                  "  pipelines:\n"
                                  "    traces: {receivers: [feeder], exporters: [capture/keep]}\n");
    REQUIRE(s != NULL);
    write_config("receivers: {feeder/fail: }\n"
                 "exporters: {capture/new: }\n"
                 "service:\n"
                 "  telemetry: {metrics: {address: \"\"}, logs: {level: off}}\n"
                 "  pipelines:\n"
                 "    traces: {receivers: [feeder/fail], exporters: [capture/new]}\n");
    fx_fail_start = 1;
    CHECK_EQ_INT(pl_service_reload(s), -1); /* the new receiver cannot start */
    while (pl_service_get_state(s) == PL_SERVICE_RELOADING)
        uv_run(&loop, UV_RUN_ONCE);
    fx_fail_start = 0;
    CHECK_EQ_INT(pl_service_get_state(s), PL_SERVICE_RUNNING);
    CHECK_EQ_UINT(pl_service_reloads(s), 0);
    CHECK(pl_graph_instance(pl_service_graph(s), PL_KIND_EXPORTER, "capture/keep") != NULL);
    CHECK_EQ_STR(pl_service_config(s)->components[0].id, "feeder");
    pl_service_stop(s);
    finish(s);
}

/* A reload keeps what did not change: the same instance, the data it holds
 * and its counters; a changed component gets a new instance whose counters
 * continue from the old one's. */
static void test_reload_keeps_unchanged_components(void)
{
    fx_reset();
    static const char yaml1[] = "receivers: {feeder: }\n"
                                "processors: {holder: }\n"
                                "exporters: {capture/a: {backlog: 0}}\n"
                                "service:\n"
                                "  telemetry: {metrics: {address: \"\"}, logs: {level: warn}}\n"
                                "  pipelines:\n"
                                "    traces: {receivers: [feeder], processors: [holder], "
                                "exporters: [capture/a]}\n";
    pl_service *s = start_service(yaml1);
    REQUIRE(s != NULL);
    pl_graph *g1 = pl_service_graph(s);
    feeder *f = pl_graph_instance(g1, PL_KIND_RECEIVER, "feeder");
    void *holder1 = pl_graph_instance(g1, PL_KIND_PROCESSOR, "holder");
    feeder_push(f, PL_SIGNAL_TRACES, 4); /* held by the holder */
    pl_stats *cap_stats = pl_graph_stats(g1, PL_KIND_EXPORTER, "capture/a");
    REQUIRE(cap_stats != NULL);
    uint64_t recv_before = pl_stats_get(pl_graph_stats(g1, PL_KIND_RECEIVER, "feeder"),
                                        PL_SIGNAL_TRACES, PL_STAT_ACCEPTED);
    CHECK_EQ_UINT(recv_before, 4);

    /* only the exporter's settings change */
    write_config("receivers: {feeder: }\n"
                 "processors: {holder: }\n"
                 "exporters: {capture/a: {backlog: 1}}\n"
                 "service:\n"
                 "  telemetry: {metrics: {address: \"\"}, logs: {level: warn}}\n"
                 "  pipelines:\n"
                 "    traces: {receivers: [feeder], processors: [holder], "
                 "exporters: [capture/a]}\n");
    CHECK_EQ_INT(pl_service_reload(s), 0);
    pl_graph *g2 = pl_service_graph(s);
    CHECK(g2 != g1);
    /* the same receiver and processor objects, still holding the data */
    CHECK(pl_graph_instance(g2, PL_KIND_RECEIVER, "feeder") == f);
    CHECK(pl_graph_instance(g2, PL_KIND_PROCESSOR, "holder") == holder1);
    CHECK(fx_pos("shutdown:holder") < 0);
    CHECK(fx_pos("shutdown:feeder") < 0);
    CHECK(fx_pos("shutdown:capture/a") >= 0); /* the changed one was replaced */
    /* counters go on across the reload */
    CHECK(pl_graph_stats(g2, PL_KIND_EXPORTER, "capture/a") == cap_stats);
    feeder_push(f, PL_SIGNAL_TRACES, 1);
    CHECK_EQ_UINT(pl_stats_get(pl_graph_stats(g2, PL_KIND_RECEIVER, "feeder"), PL_SIGNAL_TRACES,
                               PL_STAT_ACCEPTED),
                  5);
    /* on stop the kept holder flushes everything it held into the NEW
     * exporter instance */
    /* the holder took 5 and handed on none yet (incoming / outgoing items) */
    pl_stats *hs = pl_graph_stats(g2, PL_KIND_PROCESSOR, "holder");
    REQUIRE(hs != NULL);
    CHECK_EQ_UINT(hs->flow[PL_SIGNAL_TRACES][0], 5);
    CHECK_EQ_UINT(hs->flow[PL_SIGNAL_TRACES][1], 0);
    /* a full run, not UV_RUN_ONCE steps: ONCE runs due timers again after
     * the close phase, so handles closed by the last drain tick would still
     * be pending when the service is freed */
    pl_service_stop(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(pl_service_get_state(s), PL_SERVICE_STOPPED);
    capture_record *rec = fx_record("capture/a");
    REQUIRE(rec != NULL);
    CHECK_EQ_UINT(rec->items[PL_SIGNAL_TRACES], 5);
    pl_service_free(s);
}

static void test_metrics_text_lists_component_counters(void)
{
    pl_config *cfg = NULL;
    pl_graph *g = start_graph("receivers: {feeder/m: }\n"
                              "exporters: {capture/m: }\n"
                              "service:\n"
                              "  pipelines:\n"
                              "    traces: {receivers: [feeder/m], exporters: [capture/m]}\n",
                              &cfg);
    REQUIRE(g != NULL);
    feeder_push(pl_graph_instance(g, PL_KIND_RECEIVER, "feeder/m"), PL_SIGNAL_TRACES, 7);
    *pl_stats_gauge(pl_graph_stats(g, PL_KIND_EXPORTER, "capture/m"), "queue_size",
                    "Items in the queue.") = 3;
    size_t len = 0;
    char *text = pl_telemetry_render_metrics(&len);
    REQUIRE(text != NULL);
    CHECK(len == strlen(text));
    CHECK(strstr(text, "otelcol_receiver_accepted_spans{receiver=\"feeder/m\"} 7\n") != NULL);
    CHECK(strstr(text, "proflink_exporter_accepted_spans{exporter=\"capture/m\"} 7\n") != NULL);
    CHECK(strstr(text, "# TYPE proflink_exporter_queue_size gauge\n") != NULL);
    CHECK(strstr(text, "proflink_exporter_queue_size{exporter=\"capture/m\"} 3\n") != NULL);
    CHECK(strstr(text, "otelcol_process_memory_rss ") != NULL);
    CHECK(strstr(text, "otelcol_process_cpu_seconds ") != NULL);
    free(text);
    /* a receiver with transports: what it counted without naming one goes
     * to http, what it named to its own series */
    pl_stats *fs = pl_graph_stats(g, PL_KIND_RECEIVER, "feeder/m");
    pl_stats_add_via(fs, PL_TRANSPORT_HTTP, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED, 0);
    pl_stats_add_via(fs, PL_TRANSPORT_GRPC, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED, 2);
    text = pl_telemetry_render_metrics(&len);
    REQUIRE(text != NULL);
    CHECK(strstr(text, "otelcol_receiver_accepted_spans{receiver=\"feeder/m\",transport=\"grpc\"} "
                       "2\n") != NULL);
    CHECK(strstr(text, "otelcol_receiver_accepted_spans{receiver=\"feeder/m\",transport=\"http\"} "
                       "7\n") != NULL);
    /* only the signals the component is used with */
    CHECK(strstr(text, "otelcol_receiver_accepted_profile_samples{receiver=\"feeder/m\"") == NULL);
    CHECK(strstr(text, "otelcol_exporter_sent_log_records{exporter=\"capture/m\"") == NULL);
    /* each family is declared once */
    const char *first = strstr(text, "# TYPE otelcol_receiver_accepted_spans");
    CHECK(first && !strstr(first + 1, "# TYPE otelcol_receiver_accepted_spans"));
    free(text);
    teardown(g);
    pl_config_free(cfg);
}

int main(void)
{
    pl_log_set_level(PL_LOG_WARN);
    uv_loop_init(&loop);
    snprintf(config_path, sizeof(config_path), "/tmp/proflink-test-graph-%d.yaml", (int)getpid());
    PL_RUN(test_receiver_fans_out_to_every_pipeline);
    PL_RUN(test_processor_shared_between_pipelines_is_one_instance);
    PL_RUN(test_every_exporter_gets_every_batch);
    PL_RUN(test_worst_exporter_status_reaches_the_receiver);
    PL_RUN(test_start_and_shutdown_order);
    PL_RUN(test_failed_start_stops_what_started);
    PL_RUN(test_shutdown_flushes_held_data_to_its_pipeline);
    PL_RUN(test_exporter_side_batching);
    PL_RUN(test_stop_drains_until_nothing_is_pending);
    PL_RUN(test_drain_deadline_bounds_the_wait);
    PL_RUN(test_reload_with_errors_keeps_running_graph);
    PL_RUN(test_reload_failing_start_restores_previous);
    PL_RUN(test_reload_keeps_unchanged_components);
    PL_RUN(test_metrics_text_lists_component_counters);
    unlink(config_path);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return pl_test_done();
}
