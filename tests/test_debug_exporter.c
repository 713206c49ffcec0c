/*
 * test_debug_exporter.c: what the `debug` exporter prints at each
 * verbosity, driven through its descriptor from a YAML config, with stderr
 * captured in a temporary file.
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
#include "testlib.h"
#include "pipeline_fixtures.h"

static uv_loop_t loop;
static char captured[65536];

/* Runs `fn` with stderr going to a file, then reads it into `captured`. */
static void capture_stderr(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/proflink-debug-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        abort();
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, captured, sizeof(captured) - 1);
    captured[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
}

static pl_batch *traces_with_attributes(void)
{
    pl_batch *b = fx_batch(PL_SIGNAL_TRACES, 2);
    pl_span *sp = &b->data.traces.resources[0].scopes[0].spans[0];
    sp->name = pl_batch_bytes(b, "GET /users", 10);
    sp->trace_id_len = 16;
    for (int i = 0; i < 16; i++)
        sp->trace_id[i] = (uint8_t)(0xa0 + i);
    sp->start_time_unix_nano = 1000000000;
    sp->end_time_unix_nano = 1002500000;
    pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("http.route"),
                 pl_value_string(PL_BYTES_LIT("/users")));
    pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("http.status_code"), pl_value_int(200));
    return b;
}

/* One profile, one sample: stack main <- handler, linked to a span. */
static pl_batch *profile_with_stack(void)
{
    pl_batch *b = fx_batch(PL_SIGNAL_PROFILES, 1);
    pl_profiles *p = &b->data.profiles;
    pl_dictionary *d = &p->dict;
    p->has_dictionary = true;
    pl_dict_ensure_zero_entries(&b->arena, d);
    int32_t s_cpu = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu"));
    int32_t s_ns = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("nanoseconds"));
    int32_t s_main = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("main"));
    int32_t s_handler = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("handler"));
    pl_function *fns = pl_batch_alloc(b, 3 * sizeof(*fns));
    fns[1].name_strindex = s_main;
    fns[2].name_strindex = s_handler;
    d->functions = fns;
    d->n_functions = d->cap_functions = 3;
    pl_location *locs = pl_batch_alloc(b, 3 * sizeof(*locs));
    pl_line *lines = pl_batch_alloc(b, 2 * sizeof(*lines));
    lines[0].function_index = 1;
    lines[1].function_index = 2;
    locs[1].lines = &lines[0];
    locs[1].n_lines = 1;
    locs[2].lines = &lines[1];
    locs[2].n_lines = 1;
    d->locations = locs;
    d->n_locations = d->cap_locations = 3;
    pl_stack *stacks = pl_batch_alloc(b, 2 * sizeof(*stacks));
    int32_t *idx = pl_batch_alloc(b, 2 * sizeof(int32_t));
    idx[0] = 2; /* leaf first: handler, then main */
    idx[1] = 1;
    stacks[1].location_indices = idx;
    stacks[1].n_location_indices = 2;
    d->stacks = stacks;
    d->n_stacks = d->cap_stacks = 2;
    pl_link link = {{0}, {0}, 16, 8};
    link.span_id[7] = 0x42;
    int32_t li = pl_dict_intern_link(&b->arena, d, &link);

    pl_profile *prof = &p->resources[0].scopes[0].profiles[0];
    prof->sample_type.type_strindex = s_cpu;
    prof->sample_type.unit_strindex = s_ns;
    prof->duration_nano = 10000000000ull;
    pl_sample *smp = &prof->samples[0];
    smp->stack_index = 1;
    smp->link_index = li;
    smp->values = pl_batch_alloc(b, sizeof(int64_t));
    smp->values[0] = 30000000;
    smp->n_values = 1;
    return b;
}

typedef struct run {
    const char *verbosity;
    pl_graph *graph;
} run;

static void push_both(void *arg)
{
    run *r = arg;
    feeder *f = pl_graph_instance(r->graph, PL_KIND_RECEIVER, "feeder");
    pl_consumer_consume(f->next[PL_SIGNAL_TRACES], traces_with_attributes());
    pl_consumer_consume(f->next[PL_SIGNAL_PROFILES], profile_with_stack());
}

static pl_graph *build(const char *verbosity, pl_config **out_cfg)
{
    char yaml[512];
    snprintf(yaml, sizeof(yaml),
             "receivers: {feeder: }\n"
             "exporters: {debug: {verbosity: %s}}\n"
             "service:\n"
             "  pipelines:\n"
             "    traces: {receivers: [feeder], exporters: [debug]}\n"
             "    profiles: {receivers: [feeder], exporters: [debug]}\n",
             verbosity);
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load_string("d.yaml", yaml, strlen(yaml), fx_registry(), &errs);
    pl_cfg_errors_free(&errs);
    *out_cfg = cfg;
    if (!cfg)
        return NULL;
    pl_err err;
    pl_graph *g = pl_graph_build(cfg, &loop, &err);
    if (g && pl_graph_start(g, &err) != PL_OK) {
        pl_graph_destroy(g);
        g = NULL;
    }
    return g;
}

static void teardown(pl_graph *g, pl_config *cfg)
{
    pl_graph_shutdown(g);
    uv_run(&loop, UV_RUN_NOWAIT);
    pl_graph_destroy(g);
    pl_config_free(cfg);
}

static void test_basic_prints_one_line_per_batch(void)
{
    pl_config *cfg;
    run r = {"basic", build("basic", &cfg)};
    REQUIRE(r.graph != NULL);
    capture_stderr(push_both, &r);
    CHECK(strstr(captured, "[debug] traces: 1 resources, 1 scopes, 2 spans\n") != NULL);
    CHECK(strstr(captured, "[debug] profiles: 1 resources, 1 profiles, 1 samples\n") != NULL);
    CHECK(strstr(captured, "span ") == NULL);
    CHECK(strstr(captured, "sample #") == NULL);
    /* the exporter counts what it delivered */
    pl_stats *st = pl_graph_stats(r.graph, PL_KIND_EXPORTER, "debug");
    CHECK_EQ_UINT(pl_stats_get(st, PL_SIGNAL_TRACES, PL_STAT_SENT), 2);
    CHECK_EQ_UINT(pl_stats_get(st, PL_SIGNAL_PROFILES, PL_STAT_SENT), 1);
    teardown(r.graph, cfg);
}

static void test_normal_adds_one_line_per_span_and_profile(void)
{
    pl_config *cfg;
    run r = {"normal", build("normal", &cfg)};
    REQUIRE(r.graph != NULL);
    capture_stderr(push_both, &r);
    CHECK(strstr(captured, "span GET /users trace=a0a1a2a3a4a5a6a7a8a9aaabacadaeaf "
                           "span=0000000000000001 parent=- 2.500ms\n") != NULL);
    CHECK(strstr(captured, "profile cpu/nanoseconds samples=1 duration=10.000s\n") != NULL);
    CHECK(strstr(captured, "http.route") == NULL);
    teardown(r.graph, cfg);
}

static void test_detailed_prints_attributes_and_stacks(void)
{
    pl_config *cfg;
    run r = {"detailed", build("detailed", &cfg)};
    REQUIRE(r.graph != NULL);
    capture_stderr(push_both, &r);
    CHECK(strstr(captured, "2.500ms http.route=\"/users\", http.status_code=200\n") != NULL);
    CHECK(strstr(captured, "sample #0 values=[30000000] trace=00000000000000000000000000000000 "
                           "span=0000000000000042 stack=handler;main\n") != NULL);
    teardown(r.graph, cfg);
}

static void test_bad_verbosity_is_a_config_error(void)
{
    pl_config *cfg;
    CHECK(build("loud", &cfg) == NULL);
    CHECK(cfg == NULL);
}

int main(void)
{
    pl_log_set_level(PL_LOG_INFO);
    uv_loop_init(&loop);
    PL_RUN(test_basic_prints_one_line_per_batch);
    PL_RUN(test_normal_adds_one_line_per_span_and_profile);
    PL_RUN(test_detailed_prints_attributes_and_stacks);
    PL_RUN(test_bad_verbosity_is_a_config_error);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return pl_test_done();
}
