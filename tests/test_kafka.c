/*
 * test_kafka.c: the kafka exporter and receiver against librdkafka's mock
 * cluster (3 brokers, tests/kafka_fixture.h), checked with a plain
 * librdkafka client on the other end: record format, keys and partitions,
 * splitting, metadata, commits after acceptance and back-pressure.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/decode.h"
#include "config/node.h"
#include "core/stats.h"
#include "core/strlist.h"
#include "exporters/otlp_common.h"
#include "net/kafka.h"
#include "exporters/kafka.config.h"
#include "pipeline/consumer.h"
#include "pipeline/registry.h"
#include "processors/correlation.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "receivers/kafka.config.h"
#include "tests/kafka_fixture.h"
#include "tests/testlib.h"

extern const pl_component_type pl_exporter_kafka;
extern const pl_component_type pl_receiver_kafka;

static const char *const topics[] = {"otlp_spans", "otlp_profiles", "otlp_logs", "otlp_metrics",
                                     NULL};

#define T1 "0af7651916cd43dd8448eb211c80319c"
#define T2 "4bf92f3577b34da6a3ce929d0e0e4736"
#define T3 "11112222333344445555666677778888"

static pl_batch *json_batch(pl_signal signal, const char *json)
{
    pl_batch *b = pl_batch_new(signal);
    pl_err err = {{0}};
    size_t n = strlen(json);
    char *copy = malloc(n);
    memcpy(copy, json, n);
    pl_batch_adopt(b, copy, n);
    pl_status st = pl_otlp_json_decode_ex(b, (const uint8_t *)copy, n, PL_OTLP_DECODE_BUDGET, &err);
    if (st != PL_OK) {
        fprintf(stderr, "  fixture: %s\n", err.msg);
        pl_batch_free(b);
        return NULL;
    }
    return b;
}

static char *span_json(const char *trace, int i, const char *name)
{
    char *s = malloc(512 + strlen(name));
    sprintf(s,
            "{\"traceId\":\"%s\",\"spanId\":\"00000000000000%02x\",\"name\":\"%s\",\"kind\":2,"
            "\"startTimeUnixNano\":\"1000\",\"endTimeUnixNano\":\"2000\"}",
            trace, i + 1, name);
    return s;
}

/* One resource, one scope, spans of the given traces in this order. */
static pl_batch *traces_batch(const char *const *traces, size_t n, const char *name)
{
    pl_buf j;
    pl_buf_init(&j);
    pl_buf_append_str(&j, "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service."
                          "name\",\"value\":{\"stringValue\":\"svc\"}}]},\"scopeSpans\":[{\"scope\""
                          ":{\"name\":\"s\"},\"spans\":[");
    for (size_t i = 0; i < n; i++) {
        char *s = span_json(traces[i], (int)i, name);
        if (i)
            pl_buf_append_byte(&j, ',');
        pl_buf_append_str(&j, s);
        free(s);
    }
    pl_buf_append_str(&j, "]}]}]}");
    pl_buf_append_byte(&j, 0);
    pl_batch *b = json_batch(PL_SIGNAL_TRACES, (const char *)j.data);
    pl_buf_free(&j);
    return b;
}

/* ---- a plain librdkafka client on the other end ------------------------- */

typedef struct record {
    char key[64];
    int32_t partition;
    int64_t offset;
    uint8_t *value;
    size_t len;
    char header_env[32];
    char header_tenant[32];
} record;

/* Reads every record of `topic` (4 partitions) from the start until `want`
 * arrived or 10 s passed. Returns how many. */
static size_t read_topic(const char *bootstrap, const char *topic, record *out, size_t want)
{
    char why[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, why, sizeof(why));
    rd_kafka_conf_set(conf, "group.id", "reader", why, sizeof(why));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(4);
    for (int p = 0; p < 4; p++)
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    size_t n = 0;
    uint64_t end = pl_time_mono_ns() + 10000000000ull;
    while (n < want && pl_time_mono_ns() < end) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (!m->err) {
            record *r = &out[n++];
            memset(r, 0, sizeof(*r));
            snprintf(r->key, sizeof(r->key), "%.*s", (int)m->key_len, (const char *)m->key);
            r->partition = m->partition;
            r->offset = m->offset;
            r->value = malloc(m->len ? m->len : 1);
            memcpy(r->value, m->payload, m->len);
            r->len = m->len;
            rd_kafka_headers_t *h = NULL;
            const void *v;
            size_t vl;
            if (rd_kafka_message_headers(m, &h) == 0) {
                if (rd_kafka_header_get_last(h, "env", &v, &vl) == 0)
                    snprintf(r->header_env, sizeof(r->header_env), "%.*s", (int)vl,
                             (const char *)v);
                if (rd_kafka_header_get_last(h, "tenant", &v, &vl) == 0)
                    snprintf(r->header_tenant, sizeof(r->header_tenant), "%.*s", (int)vl,
                             (const char *)v);
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return n;
}

static void free_records(record *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(r[i].value);
}

/* ---- the exporter ------------------------------------------------------- */

typedef struct xenv {
    uv_loop_t loop;
    pl_stats *stats;
    kafka_exporter_cfg cfg;
    void *x;
} xenv;

static void xenv_init(xenv *e, const kf_cluster *c)
{
    memset(e, 0, sizeof(*e));
    uv_loop_init(&e->loop);
    e->stats = pl_stats_new("kafka", PL_KIND_EXPORTER);
    REQUIRE(pl_cfg_defaults(pl_exporter_kafka.config, &e->cfg) == 0);
    pl_strlist_free(&e->cfg.brokers);
    char *b = strdup(c->bootstrap);
    e->cfg.brokers.items = malloc(sizeof(char *));
    e->cfg.brokers.items[0] = b;
    e->cfg.brokers.n = 1;
    e->cfg.retry_on_failure.initial_interval = 50000000;
}

static bool xenv_start(xenv *e)
{
    pl_create_settings st = {.id = "kafka", .loop = &e->loop, .stats = e->stats};
    pl_err err = {{0}};
    if (pl_exporter_kafka.create(&st, &e->cfg, &e->x, &err) != PL_OK ||
        pl_exporter_kafka.start(e->x, &err) != PL_OK) {
        fprintf(stderr, "  exporter: %s\n", err.msg);
        return false;
    }
    return true;
}

static void xenv_export_and_wait(xenv *e, pl_batch *b)
{
    CHECK_EQ_INT(pl_exporter_kafka.export(e->x, b), PL_OK);
    pl_batch_free(b);
    uint64_t end = pl_time_mono_ns() + 10000000000ull;
    while (pl_exporter_kafka.pending(e->x) && pl_time_mono_ns() < end) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    CHECK_EQ_INT((int)pl_exporter_kafka.pending(e->x), 0);
}

static void xenv_finish(xenv *e)
{
    pl_exporter_kafka.shutdown(e->x);
    pl_exporter_kafka.destroy(e->x);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&e->loop), 0);
    pl_cfg_free(pl_exporter_kafka.config, &e->cfg);
    pl_stats_free(e->stats);
}

static void test_partition_is_the_collectors_default_hasher(void)
{
    /* reference values: 32-bit FNV-1a, read as int32, Go's truncated % and
     * negation (sarama's hash partitioner, franz-go's SaramaCompatHasher) */
    CHECK_EQ_UINT(pl_kafka_fnv1a32("", 0), 0x811c9dc5u);
    CHECK_EQ_UINT(pl_kafka_fnv1a32("a", 1), 0xe40c292cu);
    CHECK_EQ_UINT(pl_kafka_fnv1a32(T1, 32), 0xc3efcb05u);
    CHECK_EQ_INT(pl_kafka_sarama_partition(T1, 32, 4), 3); /* unsigned % would give 1 */
    CHECK_EQ_INT(pl_kafka_sarama_partition(T1, 32, 7), 5);
    CHECK_EQ_INT(pl_kafka_sarama_partition(T1, 32, 12), 7);
    CHECK_EQ_INT(pl_kafka_sarama_partition(T2, 32, 4), 2);
    CHECK_EQ_INT(pl_kafka_sarama_partition("a", 1, 7), 6);
}

static void test_exporter_writes_one_record_per_trace_keyed_on_its_partition(kf_cluster *c)
{
    xenv e;
    xenv_init(&e, c);
    e.cfg.partition_traces_by_id = true;
    e.cfg.record_headers.keys = calloc(1, sizeof(char *));
    e.cfg.record_headers.values = calloc(1, sizeof(char *));
    e.cfg.record_headers.keys[0] = strdup("env");
    e.cfg.record_headers.values[0] = strdup("prod");
    e.cfg.record_headers.n = 1;
    e.cfg.include_metadata_keys.items = calloc(1, sizeof(char *));
    e.cfg.include_metadata_keys.items[0] = strdup("tenant");
    e.cfg.include_metadata_keys.n = 1;
    REQUIRE(xenv_start(&e));
    const char *order[] = {T1, T2, T1, T3, T2, T1};
    pl_batch *b = traces_batch(order, 6, "op");
    REQUIRE(b);
    pl_kv *md = pl_batch_alloc(b, sizeof(pl_kv));
    md->key = PL_BYTES_LIT("tenant");
    md->value = pl_value_string(PL_BYTES_LIT("acme"));
    b->metadata.items = md;
    b->metadata.n = 1;
    xenv_export_and_wait(&e, b);
    record recs[8];
    size_t n = read_topic(c->bootstrap, "otlp_spans", recs, 3);
    CHECK_EQ_INT((int)n, 3);
    int seen[3] = {0};
    const char *ids[] = {T1, T2, T3};
    const int spans_per[] = {3, 2, 1};
    for (size_t i = 0; i < n; i++) {
        int which = -1;
        for (int t = 0; t < 3; t++)
            if (strcmp(recs[i].key, ids[t]) == 0)
                which = t;
        REQUIRE(which >= 0);
        seen[which]++;
        CHECK_EQ_INT(recs[i].partition, pl_kafka_sarama_partition(recs[i].key, 32, 4));
        CHECK_EQ_STR(recs[i].header_env, "prod");
        CHECK_EQ_STR(recs[i].header_tenant, "acme");
        pl_batch *d = pl_batch_new(PL_SIGNAL_TRACES);
        pl_err err = {{0}};
        CHECK_EQ_INT(pl_otlp_decode_traces(d, recs[i].value, recs[i].len, &err), PL_OK);
        CHECK_EQ_INT((int)pl_batch_items(d), spans_per[which]);
        char hex[33];
        const pl_scope_spans *ss = &d->data.traces.resources[0].scopes[0];
        for (uint32_t k = 0; k < ss->n_spans; k++) {
            pl_hex_encode(ss->spans[k].trace_id, 16, hex);
            CHECK_EQ_STR(hex, recs[i].key);
        }
        /* the resource and scope travel with every part */
        CHECK(pl_attrs_find(&d->data.traces.resources[0].resource.attrs, "service.name", 12));
        CHECK_BYTES_STR(ss->scope.name, "s");
        pl_batch_free(d);
    }
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 6);
    free_records(recs, n);
    xenv_finish(&e);
}

static void test_exporter_splits_an_oversized_batch_into_records_that_fit(kf_cluster *c)
{
    xenv e;
    xenv_init(&e, c);
    free(e.cfg.traces.topic);
    e.cfg.traces.topic = strdup("otlp_logs"); /* an empty topic of its own */
    e.cfg.producer.max_message_bytes = 2000;
    REQUIRE(xenv_start(&e));
    char name[301];
    memset(name, 'x', 300);
    name[300] = 0;
    const char *order[20];
    for (int i = 0; i < 20; i++)
        order[i] = T1;
    xenv_export_and_wait(&e, traces_batch(order, 20, name));
    record recs[32];
    size_t n = read_topic(c->bootstrap, "otlp_logs", recs, 32);
    CHECK(n >= 4 && n < 32);
    /* every record fits, and together they hold the 20 spans, each once */
    size_t total = 0;
    bool seen[21] = {false};
    for (size_t i = 0; i < n; i++) {
        CHECK(recs[i].len <= 2000);
        CHECK_EQ_STR(recs[i].key, "");
        pl_batch *d = pl_batch_new(PL_SIGNAL_TRACES);
        pl_err err = {{0}};
        CHECK_EQ_INT(pl_otlp_decode_traces(d, recs[i].value, recs[i].len, &err), PL_OK);
        const pl_scope_spans *ss = &d->data.traces.resources[0].scopes[0];
        for (uint32_t k = 0; k < ss->n_spans; k++) {
            int id = ss->spans[k].span_id[7];
            CHECK(id >= 1 && id <= 20 && !seen[id]);
            if (id >= 1 && id <= 20)
                seen[id] = true;
            total++;
        }
        pl_batch_free(d);
    }
    CHECK_EQ_INT((int)total, 20);
    CHECK(*pl_stats_counter(e.stats, "kafka_oversize_splits", "") > 0);
    free_records(recs, n);
    xenv_finish(&e);
}

static void test_exporter_keys_profiles_by_their_links_trace(kf_cluster *c)
{
    xenv e;
    xenv_init(&e, c);
    e.cfg.partition_traces_by_id = true;
    REQUIRE(xenv_start(&e));
    const char *json =
        "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{"
        "\"typeStrindex\":1,\"unitStrindex\":2},\"samples\":["
        "{\"linkIndex\":1,\"values\":[\"10\"]},{\"linkIndex\":2,\"values\":[\"20\"]},"
        "{\"linkIndex\":1,\"values\":[\"30\"]},{\"values\":[\"40\"]}]}]}]}],"
        "\"dictionary\":{\"linkTable\":[{},{\"traceId\":\"" T1
        "\",\"spanId\":\"0000000000000001\"},"
        "{\"traceId\":\"" T2 "\",\"spanId\":\"0000000000000002\"}],"
        "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\"],\"stackTable\":[{}]}}";
    pl_batch *b = json_batch(PL_SIGNAL_PROFILES, json);
    REQUIRE(b);
    xenv_export_and_wait(&e, b);
    record recs[8];
    size_t n = read_topic(c->bootstrap, "otlp_profiles", recs, 3);
    CHECK_EQ_INT((int)n, 3);
    for (size_t i = 0; i < n; i++) {
        pl_batch *d = pl_batch_new(PL_SIGNAL_PROFILES);
        pl_err err = {{0}};
        CHECK_EQ_INT(pl_otlp_decode_profiles(d, recs[i].value, recs[i].len, &err), PL_OK);
        const pl_profile *pr = &d->data.profiles.resources[0].scopes[0].profiles[0];
        int64_t sum = 0;
        for (uint32_t k = 0; k < pr->n_samples; k++)
            sum += pr->samples[k].values[0];
        if (strcmp(recs[i].key, T1) == 0) {
            CHECK_EQ_INT((int)sum, 40); /* 10 + 30 */
            CHECK_EQ_INT(recs[i].partition, pl_kafka_sarama_partition(T1, 32, 4));
        } else if (strcmp(recs[i].key, T2) == 0) {
            CHECK_EQ_INT((int)sum, 20);
        } else {
            CHECK_EQ_STR(recs[i].key, ""); /* the sample without a link */
            CHECK_EQ_INT((int)sum, 40);
        }
        pl_batch_free(d);
    }
    free_records(recs, n);
    xenv_finish(&e);
}

/* ---- the receiver ------------------------------------------------------- */

typedef struct sink {
    int seen[128]; /* spans per trace number (the id's last two bytes), traces batches */
    int refuse;    /* refuse this many batches first */
    int calls, accepted;
    char offsets[256];
    char last_topic[64], last_header[64], last_attr[64];
    char bus_part[64], bus_lag[32]; /* the first record's bus progress keys */
    int bus_lag_keys;               /* how many items carried PL_META_BUS_SPANS_LAG */
} sink;

static pl_status sink_fn(void *arg, pl_batch *b)
{
    sink *s = arg;
    s->calls++;
    pl_bytes v;
    if (s->refuse > 0) {
        s->refuse--;
        pl_batch_free(b);
        return PL_ERR_REFUSED;
    }
    s->accepted++;
    pl_traces *t = b->signal == PL_SIGNAL_TRACES ? &b->data.traces : NULL;
    for (uint32_t r = 0; t && r < t->n_resources; r++)
        for (uint32_t sc = 0; sc < t->resources[r].n_scopes; sc++)
            for (uint32_t k = 0; k < t->resources[r].scopes[sc].n_spans; k++) {
                const uint8_t *id = t->resources[r].scopes[sc].spans[k].trace_id;
                s->seen[((unsigned)id[14] << 8 | id[15]) & 127]++;
            }
    if (pl_batch_metadata_get(b, "kafka.offset", &v)) {
        size_t at = strlen(s->offsets);
        snprintf(s->offsets + at, sizeof(s->offsets) - at, "%s%.*s", at ? "," : "", (int)v.len,
                 (const char *)v.ptr);
    }
    if (s->accepted == 1 && pl_batch_metadata_get(b, PL_META_BUS_PARTITION, &v))
        snprintf(s->bus_part, sizeof(s->bus_part), "%.*s", (int)v.len, (const char *)v.ptr);
    if (s->accepted == 1 && pl_batch_metadata_get(b, PL_META_BUS_SPANS_LAG, &v))
        snprintf(s->bus_lag, sizeof(s->bus_lag), "%.*s", (int)v.len, (const char *)v.ptr);
    for (uint32_t i = 0; i < b->metadata.n; i++)
        s->bus_lag_keys += pl_bytes_eq_cstr(b->metadata.items[i].key, PL_META_BUS_SPANS_LAG);
    if (pl_batch_metadata_get(b, "kafka.topic", &v))
        snprintf(s->last_topic, sizeof(s->last_topic), "%.*s", (int)v.len, (const char *)v.ptr);
    if (pl_batch_metadata_get(b, "x-source", &v))
        snprintf(s->last_header, sizeof(s->last_header), "%.*s", (int)v.len, (const char *)v.ptr);
    pl_kv *kv =
        pl_attrs_find(&b->data.traces.resources[0].resource.attrs, "kafka.header.x-source", 21);
    if (kv)
        snprintf(s->last_attr, sizeof(s->last_attr), "%.*s", (int)kv->value.u.str.len,
                 (const char *)kv->value.u.str.ptr);
    pl_batch_free(b);
    return PL_OK;
}

static void produce(const char *bootstrap, const char *topic, int32_t partition, const void *value,
                    size_t len, const char *header)
{
    char why[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, why, sizeof(why));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
    rd_kafka_headers_t *h = rd_kafka_headers_new(2);
    rd_kafka_header_add(h, "x-source", -1, header, -1);
    rd_kafka_header_add(h, PL_META_BUS_SPANS_LAG, -1, "0", -1); /* forged: never taken */
    rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                      RD_KAFKA_V_VALUE((void *)value, len), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
    rd_kafka_flush(rk, 5000);
    rd_kafka_destroy(rk);
}

static int64_t committed(const char *bootstrap, const char *group, const char *topic, int32_t p)
{
    char why[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, why, sizeof(why));
    rd_kafka_conf_set(conf, "group.id", group, why, sizeof(why));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, p);
    int64_t off = -1;
    if (rd_kafka_committed(rk, l, 5000) == 0)
        off = l->elems[0].offset;
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return off;
}

typedef struct renv {
    uv_loop_t loop;
    pl_stats *stats;
    kafka_receiver_cfg cfg;
    pl_consumer next;
    sink sink;
    void *r;
} renv;

static bool renv_start(renv *e, const kf_cluster *c, const char *group, const char *topic)
{
    memset(e, 0, sizeof(*e));
    uv_loop_init(&e->loop);
    e->stats = pl_stats_new("kafka", PL_KIND_RECEIVER);
    if (pl_cfg_defaults(pl_receiver_kafka.config, &e->cfg) != 0)
        return false;
    pl_strlist_free(&e->cfg.brokers);
    e->cfg.brokers.items = malloc(sizeof(char *));
    e->cfg.brokers.items[0] = strdup(c->bootstrap);
    e->cfg.brokers.n = 1;
    free(e->cfg.group_id);
    e->cfg.group_id = strdup(group);
    free(e->cfg.initial_offset);
    e->cfg.initial_offset = strdup("earliest");
    pl_strlist_free(&e->cfg.traces.topics);
    e->cfg.traces.topics.items = malloc(sizeof(char *));
    e->cfg.traces.topics.items[0] = strdup(topic);
    e->cfg.traces.topics.n = 1;
    e->cfg.header_extraction.extract_headers = true;
    e->cfg.header_extraction.headers.items = malloc(sizeof(char *));
    e->cfg.header_extraction.headers.items[0] = strdup("x-source");
    e->cfg.header_extraction.headers.n = 1;
    e->cfg.error_backoff.initial_interval = 50000000;
    e->cfg.error_backoff.max_interval = 200000000;
    e->cfg.autocommit.interval = 100000000;
    pl_consumer_init_func(&e->next, sink_fn, &e->sink);
    pl_create_settings st = {.id = "kafka", .loop = &e->loop, .stats = e->stats};
    st.next[PL_SIGNAL_TRACES] = &e->next;
    pl_err err = {{0}};
    if (pl_receiver_kafka.create(&st, &e->cfg, &e->r, &err) != PL_OK ||
        pl_receiver_kafka.start(e->r, &err) != PL_OK) {
        fprintf(stderr, "  receiver: %s\n", err.msg);
        return false;
    }
    return true;
}

static void renv_run_until(renv *e, int accepted, uint64_t ms)
{
    uint64_t end = pl_time_mono_ns() + ms * 1000000ull;
    while (e->sink.accepted < accepted && pl_time_mono_ns() < end) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        usleep(2000);
    }
}

static void renv_finish(renv *e)
{
    pl_receiver_kafka.shutdown(e->r);
    pl_receiver_kafka.destroy(e->r);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&e->loop), 0);
    pl_cfg_free(pl_receiver_kafka.config, &e->cfg);
    pl_stats_free(e->stats);
}

static void encode(const char *trace, pl_buf *pb, pl_buf *js)
{
    const char *one[] = {trace};
    pl_batch *b = traces_batch(one, 1, "op");
    pl_otlp_encode_traces(&b->data.traces, pb);
    pl_otlp_json_encode_traces(&b->data.traces, js);
    pl_batch_free(b);
}

static void test_receiver_delivers_records_with_metadata_and_commits_after_accept(kf_cluster *c)
{
    rd_kafka_mock_topic_create(c->mc, "recv_a", 1, 1);
    pl_buf pb, js;
    pl_buf_init(&pb);
    pl_buf_init(&js);
    encode(T1, &pb, &js);
    produce(c->bootstrap, "recv_a", 0, pb.data, pb.len, "agent-1");
    produce(c->bootstrap, "recv_a", 0, "not otlp", 8, "agent-1"); /* undecodable */
    produce(c->bootstrap, "recv_a", 0, pb.data, pb.len, "agent-2");
    renv e;
    REQUIRE(renv_start(&e, c, "g1", "recv_a"));
    renv_run_until(&e, 1, 10000);
    CHECK_EQ_INT(e.sink.accepted, 1);
    CHECK_EQ_STR(e.sink.last_topic, "recv_a");
    CHECK_EQ_STR(e.sink.last_header, "agent-1");
    CHECK_EQ_STR(e.sink.last_attr, "agent-1");
    /* bus progress: its partition, and the 2 span records after it */
    CHECK_EQ_STR(e.sink.bus_part, "kafka/0");
    CHECK_EQ_STR(e.sink.bus_lag, "2");
    CHECK_EQ_INT(e.sink.bus_lag_keys, 1);
    /* on_error false: the undecodable record stops the partition */
    uv_run(&e.loop, UV_RUN_NOWAIT);
    for (int i = 0; i < 300; i++) {
        uv_run(&e.loop, UV_RUN_NOWAIT);
        usleep(2000);
    }
    CHECK_EQ_INT(e.sink.accepted, 1);
    CHECK(*pl_stats_counter(e.stats, "kafka_records_undecodable", "") >= 2); /* retried */
    renv_finish(&e);
    CHECK_EQ_INT((int)committed(c->bootstrap, "g1", "recv_a", 0), 1);
    pl_buf_free(&pb);
    pl_buf_free(&js);
}

static void test_receiver_refusal_pauses_and_redelivers_in_order(kf_cluster *c)
{
    rd_kafka_mock_topic_create(c->mc, "recv_b", 1, 1);
    pl_buf pb, js;
    pl_buf_init(&pb);
    pl_buf_init(&js);
    encode(T2, &pb, &js);
    produce(c->bootstrap, "recv_b", 0, pb.data, pb.len, "p");
    produce(c->bootstrap, "recv_b", 0, js.data, js.len, "j"); /* read as proto: fails */
    produce(c->bootstrap, "recv_b", 0, pb.data, pb.len, "p");
    produce(c->bootstrap, "recv_b", 0, pb.data, pb.len, "p");
    renv e;
    memset(&e, 0, sizeof(e));
    REQUIRE(renv_start(&e, c, "g2", "recv_b"));
    pl_receiver_kafka.destroy(e.r); /* again, with on_error and refusals */
    uv_run(&e.loop, UV_RUN_DEFAULT);
    e.cfg.message_marking.on_error = true;
    e.sink.refuse = 3;
    pl_create_settings st = {.id = "kafka", .loop = &e.loop, .stats = e.stats};
    st.next[PL_SIGNAL_TRACES] = &e.next;
    pl_err err = {{0}};
    REQUIRE(pl_receiver_kafka.create(&st, &e.cfg, &e.r, &err) == PL_OK);
    REQUIRE(pl_receiver_kafka.start(e.r, &err) == PL_OK);
    renv_run_until(&e, 3, 15000);
    /* offset 0 refused three times, then delivered; 1 skipped (on_error) */
    CHECK_EQ_STR(e.sink.offsets, "0,2,3");
    CHECK_EQ_INT(e.sink.calls, 6);
    CHECK_EQ_UINT(*pl_stats_counter(e.stats, "kafka_records_retried", ""), 3);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_ACCEPTED), 3);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_REFUSED), 3);
    CHECK(*pl_stats_counter(e.stats, "kafka_rebalances", "") >= 1);
    renv_finish(&e);
    CHECK_EQ_INT((int)committed(c->bootstrap, "g2", "recv_b", 0), 4);
    pl_buf_free(&pb);
    pl_buf_free(&js);
}

/* ---- samples before their spans, across the bus ------------------------- */

#define LAG_N 16 /* traces, each one span and one sample linked to it */

typedef struct lagenv {
    uv_loop_t loop;
    pl_stats *rstats, *cstats;
    kafka_receiver_cfg cfg;
    void *r, *corr;
    pl_consumer traces_in, profiles_in, traces_out, profiles_out;
    uint64_t first_profiles_ns; /* when the first profiles batch came (0: not yet) */
    uint64_t spans_held_ns;     /* spans are refused until this long after it */
    int refused, spans_in, spans, samples, enriched;
    uint64_t waited_max_ns, waited_sum_ns;
} lagenv;

static pl_status lag_traces_in(void *arg, pl_batch *b)
{
    lagenv *e = arg;
    /* a traces pipeline pushing back (a full queue, memory_limiter before
     * correlation): the spans partitions pause, the profiles go on */
    if (!e->first_profiles_ns || pl_time_mono_ns() < e->first_profiles_ns + e->spans_held_ns) {
        e->refused++;
        pl_batch_free(b);
        return PL_ERR_REFUSED;
    }
    e->spans_in += (int)pl_batch_items(b);
    return pl_processor_correlation.consume(e->corr, b, &e->traces_out);
}

static pl_status lag_profiles_in(void *arg, pl_batch *b)
{
    lagenv *e = arg;
    if (!e->first_profiles_ns)
        e->first_profiles_ns = pl_time_mono_ns();
    return pl_processor_correlation.consume(e->corr, b, &e->profiles_out);
}

static pl_status lag_traces_out(void *arg, pl_batch *b)
{
    lagenv *e = arg;
    e->spans += (int)pl_batch_items(b);
    pl_batch_free(b);
    return PL_OK;
}

static pl_status lag_profiles_out(void *arg, pl_batch *b)
{
    lagenv *e = arg;
    uint64_t waited = pl_time_now_ns() - b->received_unix_nano;
    pl_profiles *ps = &b->data.profiles;
    pl_dictionary *d = &ps->dict;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t sc = 0; sc < ps->resources[r].n_scopes; sc++)
            for (uint32_t pi = 0; pi < ps->resources[r].scopes[sc].n_profiles; pi++) {
                pl_profile *pr = &ps->resources[r].scopes[sc].profiles[pi];
                for (uint32_t k = 0; k < pr->n_samples; k++) {
                    pl_sample *sm = &pr->samples[k];
                    e->samples++;
                    if (waited > e->waited_max_ns)
                        e->waited_max_ns = waited;
                    e->waited_sum_ns += waited;
                    for (uint32_t a = 0; a < sm->n_attribute_indices; a++)
                        if (pl_bytes_eq_cstr(
                                pl_dict_string(
                                    d, d->attributes[sm->attribute_indices[a]].key_strindex),
                                "span_name"))
                            e->enriched++;
                }
            }
    pl_batch_free(b);
    return PL_OK;
}

static void lag_trace_id(int i, char out[33])
{
    snprintf(out, 33, "%08x%08x%08x%08x", 0x1a2b3c4du, (unsigned)i + 1, 0x5e6f7081u, (unsigned)i);
}

/* LAG_N traces: one span on otlp spans partition i % 2, one sample linked to
 * it on the profiles topic's partition of the same number. */
static void lag_produce(const char *bootstrap, const char *spans_topic, const char *prof_topic)
{
    char why[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, why, sizeof(why));
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
    REQUIRE(rk);
    uint64_t t0 = pl_time_now_ns() - 10000000000ull;
    for (int i = 0; i < LAG_N; i++) {
        char trace[33], json[2048];
        lag_trace_id(i, trace);
        snprintf(json, sizeof(json),
                 "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
                 "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeSpans\":[{\"spans\":[{\"traceId\":"
                 "\"%s\",\"spanId\":\"00000000000001%02x\",\"name\":\"op-%d\",\"kind\":2,"
                 "\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\"}]}]}]}",
                 trace, i + 1, i, (unsigned long long)t0, (unsigned long long)(t0 + 2000000000ull));
        pl_batch *b = json_batch(PL_SIGNAL_TRACES, json);
        REQUIRE(b);
        pl_buf pb;
        pl_buf_init(&pb);
        pl_otlp_encode_traces(&b->data.traces, &pb);
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(spans_topic), RD_KAFKA_V_PARTITION(i % 2),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_VALUE(pb.data, pb.len), RD_KAFKA_V_END);
        pl_buf_free(&pb);
        pl_batch_free(b);
        snprintf(json, sizeof(json),
                 "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
                 "\"value\":{\"stringValue\":\"svc\"}}]},\"scopeProfiles\":[{\"profiles\":[{"
                 "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},\"timeUnixNano\":\"%llu\","
                 "\"durationNano\":\"10000000000\",\"samples\":[{\"linkIndex\":1,\"values\":["
                 "\"10000000\"],\"timestampsUnixNano\":[\"%llu\"]}]}]}]}],\"dictionary\":{"
                 "\"linkTable\":[{},{\"traceId\":\"%s\",\"spanId\":\"00000000000001%02x\"}],"
                 "\"stringTable\":[\"\",\"cpu\",\"nanoseconds\"],\"stackTable\":[{}]}}",
                 (unsigned long long)t0, (unsigned long long)(t0 + 1000000000ull), trace, i + 1);
        b = json_batch(PL_SIGNAL_PROFILES, json);
        REQUIRE(b);
        pl_buf_init(&pb);
        pl_otlp_encode_profiles(&b->data.profiles, &pb);
        rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(prof_topic), RD_KAFKA_V_PARTITION(i % 2),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                          RD_KAFKA_V_VALUE(pb.data, pb.len), RD_KAFKA_V_END);
        pl_buf_free(&pb);
        pl_batch_free(b);
    }
    CHECK_EQ_INT(rd_kafka_flush(rk, 10000), 0);
    rd_kafka_destroy(rk);
}

static void set_topic(pl_strlist *l, const char *topic)
{
    pl_strlist_free(l);
    l->items = malloc(sizeof(char *));
    l->items[0] = strdup(topic);
    l->n = 1;
}

/* One gateway: kafka receiver -> correlation (sample_window 1 s) -> sinks,
 * the spans refused until 3 s after the first profiles came. */
static void lag_run(lagenv *e, const kf_cluster *c, const char *group, int64_t bus_lag_wait)
{
    memset(e, 0, sizeof(*e));
    e->spans_held_ns = 3000000000ull;
    uv_loop_init(&e->loop);
    e->rstats = pl_stats_new("kafka", PL_KIND_RECEIVER);
    e->cstats = pl_stats_new("correlation", PL_KIND_PROCESSOR);
    REQUIRE(pl_cfg_defaults(pl_receiver_kafka.config, &e->cfg) == 0);
    set_topic(&e->cfg.brokers, c->bootstrap);
    free(e->cfg.group_id);
    e->cfg.group_id = strdup(group);
    free(e->cfg.initial_offset);
    e->cfg.initial_offset = strdup("earliest");
    set_topic(&e->cfg.traces.topics, "lag_spans");
    set_topic(&e->cfg.profiles.topics, "lag_profiles");
    e->cfg.error_backoff.initial_interval = 100000000;
    e->cfg.error_backoff.max_interval = 300000000;
    pl_correlation_config cc;
    pl_correlation_config_defaults(&cc);
    cc.sample_window = 1000000000;
    cc.bus_lag_wait = bus_lag_wait;
    pl_err err = {{0}};
    pl_create_settings cs = {.id = "correlation", .loop = &e->loop, .stats = e->cstats};
    cs.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    REQUIRE(pl_processor_correlation.create(&cs, &cc, &e->corr, &err) == PL_OK);
    REQUIRE(pl_processor_correlation.start(e->corr, &err) == PL_OK);
    pl_consumer_init_func(&e->traces_in, lag_traces_in, e);
    pl_consumer_init_func(&e->profiles_in, lag_profiles_in, e);
    pl_consumer_init_func(&e->traces_out, lag_traces_out, e);
    pl_consumer_init_func(&e->profiles_out, lag_profiles_out, e);
    pl_create_settings rs = {.id = "kafka", .loop = &e->loop, .stats = e->rstats};
    rs.next[PL_SIGNAL_TRACES] = &e->traces_in;
    rs.next[PL_SIGNAL_PROFILES] = &e->profiles_in;
    REQUIRE(pl_receiver_kafka.create(&rs, &e->cfg, &e->r, &err) == PL_OK);
    REQUIRE(pl_receiver_kafka.start(e->r, &err) == PL_OK);
    uint64_t end = pl_time_mono_ns() + 30000000000ull;
    while ((e->samples < LAG_N || e->spans_in < LAG_N) && pl_time_mono_ns() < end) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        usleep(2000);
    }
    pl_receiver_kafka.shutdown(e->r);
    pl_receiver_kafka.destroy(e->r);
    pl_processor_correlation.shutdown(e->corr); /* the held spans leave */
    uv_run(&e->loop, UV_RUN_DEFAULT);           /* its timer closes before it is freed */
    pl_processor_correlation.destroy(e->corr);
    CHECK_EQ_INT(uv_loop_close(&e->loop), 0);
    pl_cfg_free(pl_receiver_kafka.config, &e->cfg);
}

static void lag_report(const char *what, lagenv *e)
{
    printf("#   %s: %d of %d samples left with their span's context, %d without; waited "
           "max %.2f s, mean %.2f s; %d span records refused; spans in %d, out %d; held for lag "
           "%llu, let go on catch-up %llu, at a bound %llu\n",
           what, e->enriched, e->samples, e->samples - e->enriched, (double)e->waited_max_ns / 1e9,
           e->samples ? (double)e->waited_sum_ns / e->samples / 1e9 : 0.0, e->refused, e->spans_in,
           e->spans, (unsigned long long)*pl_stats_counter(e->cstats, "bus_lag_held_samples", ""),
           (unsigned long long)*pl_stats_counter(e->cstats, "bus_lag_caught_up_samples", ""),
           (unsigned long long)*pl_stats_counter(e->cstats, "bus_lag_bound_samples", ""));
}

/* Spans lag behind profiles on the bus (their partitions paused by a
 * traces pipeline pushing back for 3 s, longer than sample_window): without
 * the bus hold every sample leaves unlinked after its window; with it every
 * sample waits for its partition's spans and leaves with its span's
 * context. */
static void test_samples_wait_for_lagging_spans_across_the_bus(kf_cluster *c)
{
    rd_kafka_mock_topic_create(c->mc, "lag_spans", 2, 1);
    rd_kafka_mock_topic_create(c->mc, "lag_profiles", 2, 1);
    lag_produce(c->bootstrap, "lag_spans", "lag_profiles");
    lagenv *e = calloc(1, sizeof(*e));
    lag_run(e, c, "lag-off", 0); /* bus_lag_wait 0: sample_window alone */
    lag_report("bus_lag_wait 0 ", e);
    CHECK_EQ_INT(e->samples, LAG_N);
    CHECK_EQ_INT(e->spans, LAG_N);
    CHECK(e->refused > 0);
    CHECK_EQ_INT(e->enriched, 0); /* all left after 1 s, their spans 3 s away */
    pl_stats_free(e->rstats);
    pl_stats_free(e->cstats);

    lag_run(e, c, "lag-on", 300000000000LL); /* the default, 5 min */
    lag_report("bus_lag_wait 5m", e);
    CHECK_EQ_INT(e->samples, LAG_N);
    CHECK_EQ_INT(e->spans, LAG_N);
    CHECK_EQ_INT(e->enriched, LAG_N);
    CHECK(e->waited_max_ns > 2000000000ull); /* they waited for the spans */
    CHECK_EQ_UINT(*pl_stats_counter(e->cstats, "bus_lag_held_samples", ""), LAG_N);
    CHECK_EQ_UINT(*pl_stats_counter(e->cstats, "bus_lag_caught_up_samples", ""), LAG_N);
    CHECK_EQ_UINT(*pl_stats_counter(e->cstats, "unlinked_samples", ""), 0);
    pl_stats_free(e->rstats);
    pl_stats_free(e->cstats);
    free(e);
}

/* ---- a total broker outage ---------------------------------------------- */

static void outage_trace(int i, char out[33])
{
    snprintf(out, 33, "0badcafe00000000000000000000%04x", i);
}

/* Traces [from, to) as one batch, one span per trace. */
static pl_batch *outage_batch(int from, int to)
{
    char ids[64][33];
    const char *p[64];
    for (int i = from; i < to; i++) {
        outage_trace(i, ids[i - from]);
        p[i - from] = ids[i - from];
    }
    return traces_batch(p, (size_t)(to - from), "outage");
}

/* The exporter copies what it queues: the batch stays the caller's. */
static void export_free(void *x, pl_batch *b)
{
    CHECK_EQ_INT(pl_exporter_kafka.export(x, b), PL_OK);
    pl_batch_free(b);
}

static void step_both(xenv *x, renv *r, uint64_t ms)
{
    uint64_t end = pl_time_mono_ns() + ms * 1000000ull;
    while (pl_time_mono_ns() < end) {
        uv_run(&x->loop, UV_RUN_NOWAIT);
        uv_run(&r->loop, UV_RUN_NOWAIT);
        usleep(2000);
    }
}

static int traces_seen(const renv *r, int from, int to, int *dups)
{
    int n = 0;
    for (int i = from; i < to; i++) {
        n += r->sink.seen[i] > 0;
        if (dups && r->sink.seen[i] > 1)
            *dups += r->sink.seen[i] - 1;
    }
    return n;
}

/* Every broker goes down while the exporter writes: its records time out,
 * the sending queue keeps the batches and retries them; once the brokers
 * are back everything is written, and the receiver (whose group
 * coordinator was down as well) resumes and reads every trace. */
static void test_total_broker_outage_loses_nothing(kf_cluster *c)
{
    rd_kafka_mock_topic_create(c->mc, "outage", 3, 1);
    xenv x;
    xenv_init(&x, c);
    free(x.cfg.traces.topic);
    x.cfg.traces.topic = strdup("outage");
    x.cfg.partition_traces_by_id = true;
    x.cfg.timeout = 1500000000; /* records not acknowledged in 1.5 s fail: the batch retries */
    x.cfg.retry_on_failure.initial_interval = 200000000;
    x.cfg.retry_on_failure.max_interval = 1000000000;
    x.cfg.retry_on_failure.max_elapsed_time = 0; /* never give up */
    REQUIRE(xenv_start(&x));
    renv *r = calloc(1, sizeof(*r));
    REQUIRE(renv_start(r, c, "outage-g", "outage"));

    /* before: 10 traces through */
    export_free(x.x, outage_batch(0, 10));
    uint64_t end = pl_time_mono_ns() + 20000000000ull;
    while (traces_seen(r, 0, 10, NULL) < 10 && pl_time_mono_ns() < end)
        step_both(&x, r, 20);
    CHECK_EQ_INT(traces_seen(r, 0, 10, NULL), 10);

    for (int b = 1; b <= 3; b++)
        rd_kafka_mock_broker_set_down(c->mc, b);
    uint64_t down_at = pl_time_mono_ns();
    export_free(x.x, outage_batch(10, 30));
    step_both(&x, r, 1000);
    export_free(x.x, outage_batch(30, 60));
    /* and an agent that starts during the outage (no metadata at all) */
    xenv y;
    xenv_init(&y, c);
    y.cfg.partition_traces_by_id = true;
    free(y.cfg.traces.topic);
    y.cfg.traces.topic = strdup("outage");
    y.cfg.timeout = 1500000000;
    y.cfg.retry_on_failure.initial_interval = 200000000;
    y.cfg.retry_on_failure.max_interval = 1000000000;
    y.cfg.retry_on_failure.max_elapsed_time = 0;
    REQUIRE(xenv_start(&y));
    export_free(y.x, outage_batch(60, 80));
    /* down at least 3 s, and until both have retried (records time out
     * after 1.5 s; librdkafka looks every second) */
    uint64_t retried_by = pl_time_mono_ns() + 30000000000ull;
    for (int k = 0; k < 60 || ((*pl_stats_counter(x.stats, "send_retries", "") == 0 ||
                                *pl_stats_counter(y.stats, "send_retries", "") == 0) &&
                               pl_time_mono_ns() < retried_by);
         k++) {
        step_both(&x, r, 50);
        uv_run(&y.loop, UV_RUN_NOWAIT);
    }
    /* down: nothing written, every batch still queued, none given up */
    CHECK_EQ_INT(traces_seen(r, 10, 80, NULL), 0);
    CHECK_EQ_INT((int)pl_exporter_kafka.pending(x.x), 2);
    CHECK_EQ_INT((int)pl_exporter_kafka.pending(y.x), 1);
    /* the records timed out (timeout: 1.5 s) and the batches were retried */
    CHECK(*pl_stats_counter(x.stats, "send_retries", "") >= 1);
    CHECK(*pl_stats_counter(y.stats, "send_retries", "") >= 1);
    CHECK_EQ_UINT(pl_stats_get(x.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    CHECK_EQ_UINT(pl_stats_get(y.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);

    for (int b = 1; b <= 3; b++)
        rd_kafka_mock_broker_set_up(c->mc, b);
    uint64_t up_at = pl_time_mono_ns();
    uint64_t end2 = up_at + 60000000000ull;
    while ((traces_seen(r, 0, 80, NULL) < 80 || pl_exporter_kafka.pending(x.x) ||
            pl_exporter_kafka.pending(y.x)) &&
           pl_time_mono_ns() < end2) {
        step_both(&x, r, 20);
        uv_run(&y.loop, UV_RUN_NOWAIT);
    }
    uint64_t done_at = pl_time_mono_ns();
    int dups = 0;
    CHECK_EQ_INT(traces_seen(r, 0, 80, &dups), 80);
    CHECK_EQ_INT((int)pl_exporter_kafka.pending(x.x), 0);
    CHECK_EQ_INT((int)pl_exporter_kafka.pending(y.x), 0);
    CHECK_EQ_UINT(pl_stats_get(x.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 60);
    CHECK_EQ_UINT(pl_stats_get(y.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 20);
    CHECK_EQ_UINT(pl_stats_get(x.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    printf("#   outage of all 3 brokers for %.1f s: the running exporter retried %llu times, the "
           "one started during it %llu times; all 80 traces read %.1f s after the brokers "
           "came back (%d read twice)\n",
           (double)(up_at - down_at) / 1e9,
           (unsigned long long)*pl_stats_counter(x.stats, "send_retries", ""),
           (unsigned long long)*pl_stats_counter(y.stats, "send_retries", ""),
           (double)(done_at - up_at) / 1e9, dups);
    xenv_finish(&y);
    renv_finish(r);
    free(r);
    xenv_finish(&x);
}

/* ---- TLS and SASL settings ---------------------------------------------- */

static const char *conf_get(rd_kafka_conf_t *conf, const char *key, char *buf, size_t size)
{
    size_t n = size;
    if (rd_kafka_conf_get(conf, key, buf, &n) != RD_KAFKA_CONF_OK)
        snprintf(buf, size, "<unset>");
    return buf;
}

/* librdkafka's mock cluster speaks plaintext only (a SASL or TLS client
 * cannot connect to it), so TLS and SASL are checked up to librdkafka: the
 * settings it is given, and the errors it reports for bad ones. */
static void test_tls_and_sasl_settings_reach_librdkafka(void)
{
    char buf[256];
    size_t n = sizeof(buf);
    rd_kafka_conf_t *probe = rd_kafka_conf_new();
    rd_kafka_conf_get(probe, "builtin.features", buf, &n);
    rd_kafka_conf_destroy(probe);
    printf("#   librdkafka %s, features %s\n", rd_kafka_version_str(), buf);
    char *b[] = {"k1:9092", "k2:9092"};
    pl_strlist brokers = {b, 2};
    pl_kafka_auth_config auth = {{"agent", "s3cret", "SCRAM-SHA-512"}};
    pl_otlp_tls_config tls = {.ca_file = "/etc/ssl/certs/ca-certificates.crt"};
    pl_kafka_conn conn = {"kafka", &brokers, "proflink-test", &tls, &auth};
    pl_err err = {{0}};
    rd_kafka_conf_t *conf = pl_kafka_conf_new(&conn, &err);
    REQUIRE(conf);
    CHECK_EQ_STR(conf_get(conf, "bootstrap.servers", buf, sizeof(buf)), "k1:9092,k2:9092");
    CHECK_EQ_STR(conf_get(conf, "security.protocol", buf, sizeof(buf)), "sasl_ssl");
    CHECK_EQ_STR(conf_get(conf, "sasl.mechanisms", buf, sizeof(buf)), "SCRAM-SHA-512");
    CHECK_EQ_STR(conf_get(conf, "sasl.username", buf, sizeof(buf)), "agent");
    CHECK_EQ_STR(conf_get(conf, "sasl.password", buf, sizeof(buf)), "s3cret");
    CHECK_EQ_STR(conf_get(conf, "ssl.ca.location", buf, sizeof(buf)),
                 "/etc/ssl/certs/ca-certificates.crt");
    CHECK_EQ_STR(conf_get(conf, "enable.ssl.certificate.verification", buf, sizeof(buf)), "true");
    rd_kafka_conf_destroy(conf);

    /* SASL without TLS: PLAIN by default, over plaintext */
    auth.sasl.mechanism = NULL;
    tls.ca_file = NULL;
    conf = pl_kafka_conf_new(&conn, &err);
    REQUIRE(conf);
    CHECK_EQ_STR(conf_get(conf, "security.protocol", buf, sizeof(buf)), "sasl_plaintext");
    CHECK_EQ_STR(conf_get(conf, "sasl.mechanisms", buf, sizeof(buf)), "PLAIN");
    rd_kafka_conf_destroy(conf);

    /* TLS without verification, no SASL */
    conn.auth = NULL;
    tls.insecure_skip_verify = true;
    conf = pl_kafka_conf_new(&conn, &err);
    REQUIRE(conf);
    CHECK_EQ_STR(conf_get(conf, "security.protocol", buf, sizeof(buf)), "ssl");
    CHECK_EQ_STR(conf_get(conf, "enable.ssl.certificate.verification", buf, sizeof(buf)), "false");
    rd_kafka_conf_destroy(conf);

    /* a CA file that does not exist: the exporter does not start, and says why */
    uv_loop_t loop;
    uv_loop_init(&loop);
    kafka_exporter_cfg cfg;
    REQUIRE(pl_cfg_defaults(pl_exporter_kafka.config, &cfg) == 0);
    free(cfg.tls.ca_file);
    cfg.tls.ca_file = strdup("/nonexistent/proflink-ca.pem");
    pl_create_settings st = {.id = "kafka", .loop = &loop};
    void *x = NULL;
    pl_status rc = pl_exporter_kafka.create(&st, &cfg, &x, &err);
    if (rc == PL_OK)
        rc = pl_exporter_kafka.start(x, &err);
    CHECK(rc != PL_OK);
    CHECK(strstr(err.msg, "ssl.ca.location") != NULL);
    if (pl_test_case_failures)
        fprintf(stderr, "  error: %s\n", err.msg);
    if (x) {
        pl_exporter_kafka.shutdown(x);
        pl_exporter_kafka.destroy(x);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    pl_cfg_free(pl_exporter_kafka.config, &cfg);
}

/* ---- configuration ------------------------------------------------------ */

/* The errors loading `text` gives, one per line. */
static void config_errors(const char *text, char *out, size_t size)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load_string("t.yaml", text, strlen(text), pl_component_types, &errs);
    out[0] = 0;
    for (size_t i = 0, at = 0; i < errs.n && at < size; i++)
        at += (size_t)snprintf(out + at, size - at, "%s\n", errs.items[i].text);
    if (cfg)
        pl_config_free(cfg);
    pl_cfg_errors_free(&errs);
}

static void test_config_is_checked_with_clear_errors(void)
{
    char errs[2048];
    config_errors("receivers:\n"
                  "  kafka:\n"
                  "    initial_offset: oldest\n"
                  "    traces: { encoding: zipkin_proto }\n"
                  "    group_rebalance_strategies: [sticky-ish]\n"
                  "exporters:\n"
                  "  kafka:\n"
                  "    logs: { encoding: otlp_json }\n"
                  "    producer: { compression: brotli, required_acks: 2 }\n"
                  "    auth: { sasl: { username: u, password: p, mechanism: GSSAPI } }\n"
                  "service:\n"
                  "  pipelines:\n"
                  "    traces: { receivers: [kafka], exporters: [kafka] }\n",
                  errs, sizeof(errs));
    CHECK(strstr(errs, "t.yaml:3:5: 'initial_offset': must be latest or earliest, got \"oldest\""));
    CHECK(strstr(errs, "encoding must be otlp_proto or otlp_json, got \"zipkin_proto\""));
    CHECK(strstr(errs, "must be range, roundrobin or cooperative-sticky, got \"sticky-ish\""));
    CHECK(strstr(errs, "encoding must be otlp_proto (logs pass through as protobuf)"));
    CHECK(strstr(errs, "compression must be none, gzip, snappy, lz4 or zstd"));
    CHECK(strstr(errs, "'required_acks': must be between -1 and 1"));
    CHECK(strstr(errs, "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got \"GSSAPI\""));
    if (pl_test_case_failures)
        fprintf(stderr, "  errors:\n%s", errs);
    config_errors(
        "receivers:\n"
        "  kafka: { brokers: [a:9092], traces: { topics: [t1] } }\n"
        "exporters:\n"
        "  kafka: { brokers: [a:9092, b:9092], partition_traces_by_id: true,\n"
        "           auth: { sasl: { username: u, password: p, mechanism: SCRAM-SHA-512 } } }\n"
        "service:\n"
        "  pipelines:\n"
        "    traces: { receivers: [kafka], exporters: [kafka] }\n",
        errs, sizeof(errs));
    CHECK_EQ_STR(errs, "");
}

int main(void)
{
    kf_cluster c = {0};
    if (kf_start(&c, 3, topics, 4) != 0)
        return 1;
    printf("# mock cluster: %s\n", c.bootstrap);
    PL_RUN(test_partition_is_the_collectors_default_hasher);
    PL_RUN(test_config_is_checked_with_clear_errors);
    PL_RUN(test_tls_and_sasl_settings_reach_librdkafka);
#define RUN_C(fn)                                                                                  \
    do {                                                                                           \
        pl_test_case_failures = 0;                                                                 \
        pl_test_count++;                                                                           \
        fn(&c);                                                                                    \
        printf("%s %d %s\n", pl_test_case_failures ? "not ok" : "ok", pl_test_count, #fn);         \
        if (pl_test_case_failures)                                                                 \
            pl_test_failed_tests++;                                                                \
        fflush(stdout);                                                                            \
    } while (0)
    RUN_C(test_exporter_writes_one_record_per_trace_keyed_on_its_partition);
    RUN_C(test_exporter_splits_an_oversized_batch_into_records_that_fit);
    RUN_C(test_exporter_keys_profiles_by_their_links_trace);
    RUN_C(test_receiver_delivers_records_with_metadata_and_commits_after_accept);
    RUN_C(test_receiver_refusal_pauses_and_redelivers_in_order);
    RUN_C(test_samples_wait_for_lagging_spans_across_the_bus);
    RUN_C(test_total_broker_outage_loses_nothing); /* last: every broker goes down */
    kf_stop(&c);
    return pl_test_done();
}
