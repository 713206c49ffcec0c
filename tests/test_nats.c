/*
 * test_nats.c: the `nats` components without a server: the subject
 * partition of a trace (fixed, spread, shared by a trace's spans and the
 * samples that link to it), the checks of both components' configs, and
 * the subject and name rules.
 */
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/decode.h"
#include "core/component.h"
#include "exporters/lb_ring.h"
#include "exporters/nats.h"
#include "net/nats_conn.h"
#include "pipeline/registry.h"
#include "profile_fixture.h"
#include "cfg_errors_fixture.h"
#include "testlib.h"

extern const pl_component_type pl_receiver_nats;

/* ---- partitions ------------------------------------------------------------ */

static void trace_id_of(uint64_t i, uint8_t id[16])
{
    memset(id, 0, 16);
    memcpy(id, &i, sizeof(i));
    id[15] = 0x77;
}

static void test_partition_is_the_fixed_hash_mod_n(void)
{
    uint8_t id[16];
    for (uint64_t i = 0; i < 1000; i++) {
        trace_id_of(i, id);
        CHECK_EQ_UINT(pl_nats_trace_partition(id, 8), pl_lb_hash(id, 16) % 8);
        CHECK_EQ_UINT(pl_nats_trace_partition(id, 1), 0);
    }
}

static void test_partitions_spread_evenly(void)
{
    enum { N = 4, KEYS = 100000 };
    size_t count[N] = {0};
    uint8_t id[16];
    for (uint64_t i = 0; i < KEYS; i++) {
        trace_id_of(i, id);
        unsigned p = pl_nats_trace_partition(id, N);
        REQUIRE(p < N);
        count[p]++;
    }
    for (int p = 0; p < N; p++) {
        double share = (double)count[p] / KEYS;
        if (share < 0.23 || share > 0.27)
            PL_FAIL_("partition %d has %.3f of the traces", p, share);
    }
}

/* Spans of 3 traces (ids 1, 2, 3 in the first byte), 3 spans each. */
static pl_batch *make_spans(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = 1;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    pl_resource_spans *rs = &t->resources[0];
    rs->n_scopes = 1;
    rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    rs->scopes[0].n_spans = 9;
    rs->scopes[0].spans = pl_batch_alloc(b, 9 * sizeof(pl_span));
    for (int i = 0; i < 9; i++) {
        pl_span *s = &rs->scopes[0].spans[i];
        s->trace_id_len = 16;
        s->trace_id[0] = (uint8_t)(1 + i % 3);
        s->trace_id[7] = 0x42;
        s->span_id_len = 8;
        s->span_id[0] = (uint8_t)(i + 1);
    }
    return b;
}

/* One profile: a sample linked to each of the 3 traces, in reverse order. */
static pl_batch *make_samples(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *p = &b->data.profiles;
    p->has_dictionary = true;
    CHECK(pl_dict_ensure_zero_entries(&b->arena, &p->dict) == 0);
    pl_profile *pr = add_single_profile(b, 3);
    for (int i = 0; i < 3; i++) {
        pl_link l = {.trace_id_len = 16, .span_id_len = 8};
        l.trace_id[0] = (uint8_t)(3 - i);
        l.trace_id[7] = 0x42;
        l.span_id[0] = (uint8_t)(3 - i);
        int32_t idx = pl_dict_intern_link(&b->arena, &p->dict, &l);
        CHECK(idx > 0);
        pr->samples[i].link_index = idx;
    }
    return b;
}

static void test_samples_share_their_traces_partition(void)
{
    pl_batch *spans = make_spans();
    pl_batch *samples = make_samples();
    int ds[9], dp[3];
    REQUIRE(pl_nats_partitions(spans, 5, ds) == 9);
    REQUIRE(pl_nats_partitions(samples, 5, dp) == 3);
    for (int i = 0; i < 9; i++) {
        uint8_t id[16] = {0};
        id[0] = (uint8_t)(1 + i % 3);
        id[7] = 0x42;
        CHECK_EQ_INT(ds[i], (int)pl_nats_trace_partition(id, 5));
    }
    /* sample i links to trace 3 - i, whose spans are at index 2 - i */
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(dp[i], ds[2 - i]);
    pl_batch_free(spans);
    pl_batch_free(samples);
}

/* ---- config ----------------------------------------------------------------- */

static pl_cfg_errors errs;

static pl_config *load(const char *text)
{
    pl_cfg_errors_free(&errs);
    pl_cfg_errors_init(&errs);
    return pl_config_load_string("t.yaml", text, strlen(text), pl_component_types, &errs);
}

#define CHECK_ERROR(part)                                                                          \
    CHECK_CFG_ERROR(&errs, cfg_error_contains(&errs, part), "containing \"" part "\"")

/* A config with a nats exporter and a nats receiver whose extra lines are
 * `exporter` and `receiver` (indented by the caller). */
static pl_config *load_with(const char *exporter, const char *receiver)
{
    char text[4096];
    snprintf(text, sizeof(text),
             "receivers:\n"
             "  nats:\n"
             "    traces: {stream: OTEL_SPANS}\n"
             "%s"
             "exporters:\n"
             "  nats:\n"
             "%s"
             "service:\n"
             "  telemetry: {metrics: {address: \"\"}}\n"
             "  pipelines:\n"
             "    traces: {receivers: [nats], exporters: [nats]}\n",
             receiver, exporter);
    return load(text);
}

static void test_good_config_loads(void)
{
    pl_config *cfg = load_with("    endpoint: nats://a:4222, nats://b:4222\n"
                               "    jetstream: {publish_timeout: 2s}\n"
                               "    traces: {subject: '\"spans\"', marshaler: otlp_json}\n"
                               "    profiles: {subject: prof.all}\n"
                               "    partitions: 4\n"
                               "    token: {token: s3cret}\n",
                               "    endpoint: tls://nats:4222\n"
                               "    jetstream: {ack_wait: 5s, max_deliver: 10}\n"
                               "    partitions: [0, 3]\n"
                               "    profiles: {subject: prof, stream: OTEL_PROFILES, durable: gw}\n"
                               "    logs: {subject: 'logs.>', encoding: otlp_json}\n"
                               "    user: {username: u, password: p}\n");
    CHECK(cfg != NULL);
    CHECK_EQ_UINT(errs.n, 0);
    for (size_t i = 0; i < errs.n; i++)
        fprintf(stderr, "    %s\n", errs.items[i].text);
    pl_config_free(cfg);
}

static void test_exporter_mistakes_are_reported(void)
{
    pl_config *cfg = load_with("    endpoint: http://nats:4222\n"
                               "    traces: {subject: 'spans.*', marshaler: avro}\n"
                               "    logs: {marshaler: otlp_json}\n"
                               "    metrics: {subject: 'resource.attributes[\"x\"]'}\n"
                               "    partitions: 2000\n"
                               "    jetstream: {publish_timeout: 0s}\n"
                               "    user: {username: u}\n"
                               "    token: {token: t}\n"
                               "    nkey: {public_key: UABC, seed: SUABC}\n",
                               "");
    CHECK(cfg == NULL);
    CHECK_ERROR("'endpoint': must be a NATS URL");
    CHECK_ERROR("subject \"spans.*\" is not a NATS subject without wildcards");
    CHECK_ERROR("marshaler must be otlp_proto or otlp_json");
    CHECK_ERROR("marshaler otlp_json is for traces and profiles");
    CHECK_ERROR("not other OTTL expressions");
    CHECK_ERROR("'partitions': must be");
    CHECK_ERROR("'publish_timeout': must be positive");
    CHECK_ERROR("'user': needs both username and password");
    CHECK_ERROR("token, user and nkey_user_file exclude each other");
    CHECK_ERROR("'nkey': is not supported by proflink");
    pl_config_free(cfg);
}

static void test_receiver_mistakes_are_reported(void)
{
    pl_config *cfg = load_with("", "    partitions: [0, x, 5000]\n"
                                   "    profiles: {subject: 'prof.>', stream: a.b, durable: 'd*'}\n"
                                   "    metrics: {encoding: zipkin}\n"
                                   "    jetstream: {ack_wait: 0s}\n"
                                   "    nkey_jwt: {jwt: e30, seed: SUABC}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("\"x\" is not a partition number");
    CHECK_ERROR("\"5000\" is not a partition number");
    CHECK_ERROR("without wildcards (partitions are appended to it)");
    CHECK_ERROR("stream \"a.b\" is not a stream name");
    CHECK_ERROR("durable \"d*\" is not a consumer name");
    CHECK_ERROR("encoding must be otlp_proto or otlp_json");
    CHECK_ERROR("'ack_wait': must be positive");
    CHECK_ERROR("'nkey_jwt': is not supported by proflink");
    pl_config_free(cfg);
    /* wildcards are fine without partitions */
    cfg = load_with("", "    logs: {subject: 'logs.>', stream: L}\n");
    CHECK(cfg != NULL);
    CHECK_EQ_UINT(errs.n, 0);
    pl_config_free(cfg);
}

/* A signal a pipeline takes needs its stream: create says which. */
static void test_receiver_needs_a_stream_per_signal(void)
{
    const pl_cfg_section *sec = pl_receiver_nats.config;
    void *cfg = calloc(1, sec->size);
    REQUIRE(cfg && pl_cfg_defaults(sec, cfg) == 0);
    uv_loop_t loop;
    REQUIRE(uv_loop_init(&loop) == 0);
    pl_create_settings s = {.id = "nats", .loop = &loop};
    s.next[PL_SIGNAL_PROFILES] = (pl_consumer *)&s; /* only tested for NULL here */
    void *self = NULL;
    pl_err err = {0};
    CHECK_EQ_INT(pl_receiver_nats.create(&s, cfg, &self, &err), PL_ERR_INVALID);
    CHECK(strstr(err.msg, "profiles::stream is required") != NULL);
    CHECK(self == NULL);
    pl_cfg_free(sec, cfg);
    free(cfg);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* ---- subjects and names ----------------------------------------------------- */

static void test_subject_and_name_rules(void)
{
    CHECK(pl_nats_subject_valid("otel_spans", false));
    CHECK(pl_nats_subject_valid("otel.spans.3", false));
    CHECK(!pl_nats_subject_valid("", false));
    CHECK(!pl_nats_subject_valid("a..b", false));
    CHECK(!pl_nats_subject_valid(".a", false));
    CHECK(!pl_nats_subject_valid("a.", false));
    CHECK(!pl_nats_subject_valid("a b", false));
    CHECK(!pl_nats_subject_valid("a.*", false));
    CHECK(pl_nats_subject_valid("a.*", true));
    CHECK(pl_nats_subject_valid("a.>", true));
    CHECK(!pl_nats_subject_valid("a.>.b", true));
    CHECK(!pl_nats_subject_valid("a.b*", true));
    CHECK(pl_nats_name_valid("OTEL_SPANS"));
    CHECK(!pl_nats_name_valid("a.b"));
    CHECK(!pl_nats_name_valid("a b"));
    CHECK(!pl_nats_name_valid("a/b"));
    CHECK(!pl_nats_name_valid(""));
    bool json = true;
    CHECK_EQ_INT(pl_nats_marshaler_parse(NULL, &json), 0);
    CHECK(!json);
    CHECK_EQ_INT(pl_nats_marshaler_parse("otlp_json", &json), 0);
    CHECK(json);
    CHECK_EQ_INT(pl_nats_marshaler_parse("json", &json), -1);
}

int main(void)
{
    PL_RUN(test_partition_is_the_fixed_hash_mod_n);
    PL_RUN(test_partitions_spread_evenly);
    PL_RUN(test_samples_share_their_traces_partition);
    PL_RUN(test_good_config_loads);
    PL_RUN(test_exporter_mistakes_are_reported);
    PL_RUN(test_receiver_mistakes_are_reported);
    PL_RUN(test_receiver_needs_a_stream_per_signal);
    PL_RUN(test_subject_and_name_rules);
    pl_cfg_errors_free(&errs);
    return pl_test_done();
}
