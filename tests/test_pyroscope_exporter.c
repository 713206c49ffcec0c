/*
 * test_pyroscope_exporter.c: what the `pyroscope` exporter puts in a push
 * request: one series per (profile, service), series labels, the CPU special
 * case (and every column of a multi-column pprof kept), span links as pprof
 * labels, correlation attributes (span_name) as labels, service.name never
 * as a label. `api: ingest`: the legacy POST /ingest requests against a
 * scripted backend on loopback (query string, headers, the pprof body,
 * retry of 503 and no retry of 400).
 */
#include <unistd.h>

#include "config/decode.h"
#include "config/node.h"
#include "core/stats.h"
#include "net/compress.h"
#include "net/http_server.h"
#include "pprof_fixture.h"
#include "proto/pprof.h"
#include "proto/pyroscope_push.h"
#include "testlib.h"

pl_status pl_pyroscope_exporter_encode(const pl_batch *batch, pl_buf *out, pl_err *err);

static pl_bytes series_label(const pl_push_series *s, const char *name)
{
    for (uint32_t i = 0; i < s->n_labels; i++)
        if (pl_bytes_eq_cstr(s->labels[i].name, name))
            return s->labels[i].value;
    return (pl_bytes){NULL, 0};
}

/* Sum of values per (label key=value) in a pushed pprof; also checks that
 * some sample has the label. */
static int64_t total_with_label(const pl_batch *b, const char *key, const char *value)
{
    const pl_dictionary *d = &b->data.profiles.dict;
    const pl_profile *p = &b->data.profiles.resources[0].scopes[0].profiles[0];
    int64_t sum = 0;
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const pl_sample *s = &p->samples[i];
        bool match = false;
        if (strcmp(key, "span_id") == 0 && s->link_index > 0) {
            char hex[17];
            pl_hex_encode(d->links[s->link_index].span_id, 8, hex);
            match = strcmp(hex, value) == 0;
        }
        for (uint32_t k = 0; k < s->n_attribute_indices; k++) {
            const pl_kvu *a = &d->attributes[s->attribute_indices[k]];
            if (pl_bytes_eq_cstr(pl_dict_string(d, a->key_strindex), key) &&
                a->value.type == PL_VALUE_STRING && pl_bytes_eq_cstr(a->value.u.str, value))
                match = true;
        }
        if (match)
            sum += s->values[0];
    }
    return sum;
}

static void test_push_request_from_pprof(void)
{
    pl_buf p;
    pl_buf_init(&p);
    build_profile(&p, NULL);
    pl_kv attrs[] = {
        {.key = PL_BYTES_LIT("service.name"), .value = pl_value_string(PL_BYTES_LIT("checkout"))},
        {.key = PL_BYTES_LIT("env"), .value = pl_value_string(PL_BYTES_LIT("prod"))},
        {.key = PL_BYTES_LIT("host.cores"), .value = pl_value_int(8)},
        {.key = PL_BYTES_LIT("pyroscope.spy_name"),
         .value = pl_value_string(PL_BYTES_LIT("gospy"))},
    };
    pl_pprof_meta meta = {.resource_attrs = attrs, .n_resource_attrs = 4};
    pl_err err = {{0}};
    pl_batch *batch = pl_pprof_decode(p.data, p.len, &meta, &err);
    REQUIRE(batch);

    /* What a correlation processor does: sample B belongs to another
     * service, sample A gets a span_name attribute. */
    pl_dictionary *d = &batch->data.profiles.dict;
    pl_profile *profiles = batch->data.profiles.resources[0].scopes[0].profiles;
    int32_t k_svc = pl_dict_intern_string(&batch->arena, d, PL_BYTES_LIT("service.name"));
    int32_t k_name = pl_dict_intern_string(&batch->arena, d, PL_BYTES_LIT("span_name"));
    int32_t a_svc = pl_dict_intern_attribute(&batch->arena, d, k_svc,
                                             pl_value_string(PL_BYTES_LIT("billing")), 0);
    int32_t a_name = pl_dict_intern_attribute(&batch->arena, d, k_name,
                                              pl_value_string(PL_BYTES_LIT("GET /cart")), 0);
    /* the correlation processor also writes span_id as an attribute */
    int32_t k_span = pl_dict_intern_string(&batch->arena, d, PL_BYTES_LIT("span_id"));
    int32_t a_span = pl_dict_intern_attribute(&batch->arena, d, k_span,
                                              pl_value_string(PL_BYTES_LIT("00f067aa0ba902b7")), 0);
    for (int col = 0; col < 2; col++) {
        pl_sample *sa = &profiles[col].samples[0], *sb = &profiles[col].samples[1];
        int32_t *la = pl_batch_alloc(batch, (sa->n_attribute_indices + 2) * sizeof(int32_t));
        memcpy(la, sa->attribute_indices, sa->n_attribute_indices * sizeof(int32_t));
        la[sa->n_attribute_indices] = a_name;
        la[sa->n_attribute_indices + 1] = a_span;
        sa->attribute_indices = la;
        sa->n_attribute_indices += 2;
        int32_t *lb = pl_batch_alloc(batch, (sb->n_attribute_indices + 1) * sizeof(int32_t));
        memcpy(lb, sb->attribute_indices, sb->n_attribute_indices * sizeof(int32_t));
        lb[sb->n_attribute_indices] = a_svc;
        sb->attribute_indices = lb;
        sb->n_attribute_indices++;
    }

    pl_buf out;
    pl_buf_init(&out);
    REQUIRE(pl_pyroscope_exporter_encode(batch, &out, &err) == PL_OK);
    pl_push_request req = {0};
    REQUIRE(pl_push_decode_proto(out.data, out.len, &req, &err) == PL_OK);
    /* Both columns reach Pyroscope, each split into two services: the count
     * column unconverted (its cpu sibling carries the CPU time), then the
     * cpu column. */
    REQUIRE(req.n_series == 4);
    for (int c = 0; c < 2; c++) {
        const pl_push_series *sc = &req.series[c];
        CHECK_BYTES_STR(series_label(sc, "__name__"), "process_cpu");
        REQUIRE(sc->n_samples == 1);
        pl_batch *bc = pl_pprof_decode(sc->samples[0].raw_profile.ptr,
                                       sc->samples[0].raw_profile.len, NULL, &err);
        REQUIRE(bc);
        const pl_dictionary *dc = &bc->data.profiles.dict;
        const pl_profile *pc = &bc->data.profiles.resources[0].scopes[0].profiles[0];
        CHECK_EQ_UINT(bc->data.profiles.resources[0].scopes[0].n_profiles, 1);
        CHECK_BYTES_STR(pl_dict_string(dc, pc->sample_type.type_strindex), "samples");
        CHECK_BYTES_STR(pl_dict_string(dc, pc->sample_type.unit_strindex), "count");
        CHECK_BYTES_STR(pl_dict_string(dc, pc->period_type.type_strindex), "cpu");
        CHECK_BYTES_STR(pl_dict_string(dc, pc->period_type.unit_strindex), "nanoseconds");
        CHECK_EQ_INT(pc->n_samples, 1);
        CHECK_EQ_INT(pc->samples[0].values[0], c == 0 ? 3 : 2);
        pl_batch_free(bc);
    }
    CHECK_BYTES_STR(series_label(&req.series[0], "service_name"), "checkout");
    CHECK_BYTES_STR(series_label(&req.series[1], "service_name"), "billing");
    const pl_push_series *s0 = &req.series[2], *s1 = &req.series[3];
    CHECK_BYTES_STR(series_label(s0, "__name__"), "process_cpu");
    CHECK_BYTES_STR(series_label(s0, "service_name"), "checkout");
    CHECK_BYTES_STR(series_label(s1, "service_name"), "billing");
    CHECK_BYTES_STR(series_label(s0, "__delta__"), "false");
    CHECK_BYTES_STR(series_label(s0, "env"), "prod");
    CHECK_BYTES_STR(series_label(s0, "host.cores"), "8");
    CHECK_BYTES_STR(series_label(s0, "pyroscope_spy"), "gospy");
    CHECK(series_label(s0, "service.name").len == 0);
    REQUIRE(s0->n_samples == 1 && s1->n_samples == 1);
    CHECK(pl_is_gzip(s0->samples[0].raw_profile.ptr, s0->samples[0].raw_profile.len));

    pl_batch *b0 =
        pl_pprof_decode(s0->samples[0].raw_profile.ptr, s0->samples[0].raw_profile.len, NULL, &err);
    pl_batch *b1 =
        pl_pprof_decode(s1->samples[0].raw_profile.ptr, s1->samples[0].raw_profile.len, NULL, &err);
    REQUIRE(b0 && b1);
    const pl_profile *p0 = &b0->data.profiles.resources[0].scopes[0].profiles[0];
    CHECK_EQ_UINT(b0->data.profiles.resources[0].scopes[0].n_profiles, 1);
    CHECK_EQ_UINT(p0->n_samples, 1);
    CHECK_EQ_INT(p0->samples[0].values[0], 30000000);
    CHECK_EQ_INT(total_with_label(b0, "span_id", "00f067aa0ba902b7"), 30000000);
    CHECK_EQ_INT(total_with_label(b0, "span_name", "GET /cart"), 30000000);
    CHECK_EQ_INT(total_with_label(b0, "thread", "t1"), 30000000);
    CHECK_EQ_INT(b0->data.profiles.dict.links[p0->samples[0].link_index].trace_id_len, 16);
    /* span_id appears once: as the link, not again from the attribute */
    CHECK_EQ_INT(total_with_label(b0, "span_id", "00f067aa0ba902b7"), 30000000);
    for (uint32_t k = 0; k < p0->samples[0].n_attribute_indices; k++) {
        const pl_kvu *a = &b0->data.profiles.dict.attributes[p0->samples[0].attribute_indices[k]];
        CHECK(
            !pl_bytes_eq_cstr(pl_dict_string(&b0->data.profiles.dict, a->key_strindex), "span_id"));
    }
    const pl_profile *p1 = &b1->data.profiles.resources[0].scopes[0].profiles[0];
    CHECK_EQ_INT(p1->samples[0].values[0], 20000000);
    CHECK_EQ_INT(total_with_label(b1, "span_id", "00f067aa0ba902b7"), 20000000);
    CHECK_EQ_INT(total_with_label(b1, "service.name", "billing"), 0); /* not a label */
    CHECK_EQ_INT(b1->data.profiles.dict.links[p1->samples[0].link_index].trace_id_len, 0);

    pl_batch_free(b0);
    pl_batch_free(b1);
    pl_push_request_free(&req);
    pl_buf_free(&out);
    pl_batch_free(batch);
    pl_buf_free(&p);
}

/* Finishes a pprof writer (and frees it) and decodes what it wrote; NULL
 * when either fails. */
static pl_batch *finish_and_decode(pl_pprof_writer *w)
{
    pl_buf p;
    pl_buf_init(&p);
    int rc = pl_pprof_writer_finish(w, &p);
    pl_pprof_writer_free(w);
    pl_err err = {{0}};
    pl_batch *batch = rc == 0 ? pl_pprof_decode(p.data, p.len, NULL, &err) : NULL;
    pl_buf_free(&p);
    return batch;
}

/* A pprof of one stack (leaf under main) with one sample of `value`. */
static pl_batch *one_stack(const pl_pprof_writer_options *o, const char *leaf, int64_t value)
{
    pl_pprof_writer *w = pl_pprof_writer_new(o);
    pl_bytes frames[] = {pl_bytes_from_cstr(leaf), PL_BYTES_LIT("main")};
    pl_pprof_writer_add(w, frames, 2, value);
    return finish_and_decode(w);
}

/* A count-only CPU profile (no cpu column) is sent converted to nanoseconds. */
static void test_cpu_special_case_alone(void)
{
    pl_pprof_writer_options o = {"samples", "count", "cpu", "nanoseconds", 10000000, 1, 1};
    pl_batch *batch = one_stack(&o, "leaf", 7);
    REQUIRE(batch);
    pl_err err = {{0}};
    pl_buf out;
    pl_buf_init(&out);
    REQUIRE(pl_pyroscope_exporter_encode(batch, &out, &err) == PL_OK);
    pl_push_request req = {0};
    REQUIRE(pl_push_decode_proto(out.data, out.len, &req, &err) == PL_OK);
    REQUIRE(req.n_series == 1);
    CHECK_BYTES_STR(series_label(&req.series[0], "__name__"), "process_cpu");
    CHECK_BYTES_STR(series_label(&req.series[0], "service_name"), "unknown_service");
    pl_batch *back = pl_pprof_decode(req.series[0].samples[0].raw_profile.ptr,
                                     req.series[0].samples[0].raw_profile.len, NULL, &err);
    REQUIRE(back);
    const pl_profile *bp = &back->data.profiles.resources[0].scopes[0].profiles[0];
    CHECK_BYTES_STR(pl_dict_string(&back->data.profiles.dict, bp->sample_type.type_strindex),
                    "cpu");
    CHECK_EQ_INT(bp->samples[0].values[0], 70000000);
    pl_batch_free(back);
    pl_push_request_free(&req);
    pl_buf_free(&out);
    pl_batch_free(batch);
}

/* Go's mutex profile: contentions/count, named by the SDK's display name. */
static void test_display_name_names_series(void)
{
    pl_pprof_writer_options o = {"contentions", "count", "contentions", "count", 1, 1, 1};
    pl_batch *batch = one_stack(&o, "sync.(*Mutex).Lock", 3);
    REQUIRE(batch);
    pl_err err = {{0}};
    pl_buf out;
    pl_buf_init(&out);
    pl_push_request req = {0};
    /* without a display name or a given name: Pyroscope's OTLP guess */
    REQUIRE(pl_pyroscope_exporter_encode(batch, &out, &err) == PL_OK);
    REQUIRE(pl_push_decode_proto(out.data, out.len, &req, &err) == PL_OK);
    CHECK_BYTES_STR(series_label(&req.series[0], "__name__"), "process_cpu");
    pl_push_request_free(&req);
    /* with the one pyroscope-go sends */
    pl_dictionary *d = &batch->data.profiles.dict;
    int32_t k =
        pl_dict_intern_string(&batch->arena, d, PL_BYTES_LIT("pyroscope.sample_type.display_name"));
    int32_t *attr = pl_batch_alloc(batch, sizeof(int32_t));
    attr[0] = pl_dict_intern_attribute(&batch->arena, d, k,
                                       pl_value_string(PL_BYTES_LIT("mutex_count")), 0);
    pl_profile *prof = &batch->data.profiles.resources[0].scopes[0].profiles[0];
    prof->attribute_indices = attr;
    prof->n_attribute_indices = 1;
    pl_buf_reset(&out);
    REQUIRE(pl_pyroscope_exporter_encode(batch, &out, &err) == PL_OK);
    REQUIRE(pl_push_decode_proto(out.data, out.len, &req, &err) == PL_OK);
    CHECK_BYTES_STR(series_label(&req.series[0], "__name__"), "mutex");
    pl_push_request_free(&req);
    pl_buf_free(&out);
    pl_batch_free(batch);
}

/* 40,000 samples go out as three pprofs (Pyroscope's 16,000 limit). */
static void test_large_profile_split(void)
{
    pl_pprof_writer_options o = {"cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, 1, 1};
    pl_pprof_writer *w = pl_pprof_writer_new(&o);
    static char names[40000][12];
    for (int i = 0; i < 40000; i++) {
        snprintf(names[i], sizeof(names[i]), "f%d", i % 500);
        pl_bytes frames[] = {pl_bytes_from_cstr(names[i]), PL_BYTES_LIT("main")};
        pl_pprof_writer_add(w, frames, 2, 10);
    }
    pl_batch *batch = finish_and_decode(w);
    REQUIRE(batch);
    pl_err err = {{0}};
    pl_buf out;
    pl_buf_init(&out);
    REQUIRE(pl_pyroscope_exporter_encode(batch, &out, &err) == PL_OK);
    pl_push_request req = {0};
    REQUIRE(pl_push_decode_proto(out.data, out.len, &req, &err) == PL_OK);
    CHECK_EQ_UINT(req.n_series, 3);
    size_t total = 0;
    int64_t sum = 0;
    for (uint32_t i = 0; i < req.n_series; i++) {
        pl_batch *part = pl_pprof_decode(req.series[i].samples[0].raw_profile.ptr,
                                         req.series[i].samples[0].raw_profile.len, NULL, &err);
        REQUIRE(part);
        const pl_profile *pp = &part->data.profiles.resources[0].scopes[0].profiles[0];
        CHECK(pp->n_samples <= 16000);
        total += pp->n_samples;
        for (uint32_t k = 0; k < pp->n_samples; k++)
            sum += pp->samples[k].values[0];
        pl_batch_free(part);
    }
    CHECK_EQ_UINT(total, 40000);
    CHECK_EQ_INT(sum, 400000);
    pl_push_request_free(&req);
    pl_buf_free(&out);
    pl_batch_free(batch);
}

/* ---- api: ingest against a scripted backend ------------------------------- */

extern const pl_component_type pl_exporter_pyroscope;

typedef struct ingest_backend {
    pl_http_server *server;
    int answers[4]; /* HTTP status per request (the last one repeats) */
    size_t n_answers;
    size_t requests;
    char path[8][64];
    char query[8][512];
    char auth[8][64];
    char tenant[8][32];
    char content_type[8][64];
    pl_buf bodies[8];
} ingest_backend;

static void ingest_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    ingest_backend *b = arg;
    size_t i = b->requests++;
    if (i < 8) {
        size_t len;
        const char *v;
        snprintf(b->path[i], sizeof(b->path[i]), "%s", req->path);
        snprintf(b->query[i], sizeof(b->query[i]), "%s", req->query);
        if ((v = pl_http_header_get(req, "authorization", &len)))
            snprintf(b->auth[i], sizeof(b->auth[i]), "%.*s", (int)len, v);
        if ((v = pl_http_header_get(req, "x-scope-orgid", &len)))
            snprintf(b->tenant[i], sizeof(b->tenant[i]), "%.*s", (int)len, v);
        if ((v = pl_http_header_get(req, "content-type", &len)))
            snprintf(b->content_type[i], sizeof(b->content_type[i]), "%.*s", (int)len, v);
        pl_buf_init(&b->bodies[i]);
        pl_buf_append(&b->bodies[i], req->body, req->body_len);
    }
    int status = b->n_answers ? b->answers[i < b->n_answers ? i : b->n_answers - 1] : 200;
    static const pl_http_header json[] = {{"Content-Type", 12, "application/json", 16}};
    const char *body = status == 200 ? "" : "{\"code\":\"unavailable\",\"message\":\"scripted\"}";
    pl_http_respond(res, status, json, 1, body, strlen(body));
}

typedef struct ingest_env {
    uv_loop_t loop;
    pl_stats *stats;
    ingest_backend be;
    void *exporter;
    void *cfg;
} ingest_env;

static bool ingest_env_start(ingest_env *e, const int *answers, size_t n_answers)
{
    memset(e, 0, sizeof(*e));
    uv_loop_init(&e->loop);
    memcpy(e->be.answers, answers, n_answers * sizeof(int));
    e->be.n_answers = n_answers;
    pl_http_server_options opt = {0};
    opt.max_body_size = 16 << 20;
    opt.http1 = true;
    opt.name = "fake-pyroscope";
    pl_err err = {{0}};
    e->be.server =
        pl_http_server_start(&e->loop, "127.0.0.1:0", &opt, ingest_handler, &e->be, &err);
    if (!e->be.server)
        return false;
    char yaml[512];
    snprintf(yaml, sizeof(yaml),
             "endpoint: http://127.0.0.1:%d/\n"
             "api: ingest\n"
             "tenant_id: team-a\n"
             "basic_auth: {username: u, password: p}\n"
             "retry_on_failure: {initial_interval: 20ms, max_interval: 50ms}\n",
             pl_http_server_port(e->be.server));
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("test", yaml, strlen(yaml), &errs);
    e->cfg = calloc(1, pl_exporter_pyroscope.config->size);
    int n_err =
        doc ? pl_cfg_decode(pl_exporter_pyroscope.config, doc->root, NULL, e->cfg, &errs) : 1;
    if (n_err)
        pl_cfg_errors_print(&errs, stderr);
    pl_cfg_doc_free(doc);
    pl_cfg_errors_free(&errs);
    if (n_err)
        return false;
    e->stats = pl_stats_new("pyroscope", PL_KIND_EXPORTER);
    pl_create_settings st = {.id = "pyroscope", .loop = &e->loop, .stats = e->stats};
    if (pl_exporter_pyroscope.create(&st, e->cfg, &e->exporter, &err) != PL_OK ||
        pl_exporter_pyroscope.start(e->exporter, &err) != PL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        return false;
    }
    return true;
}

static void ingest_env_run(ingest_env *e, uint64_t timeout_ms)
{
    uint64_t end = pl_time_mono_ns() / 1000000 + timeout_ms;
    while (pl_exporter_pyroscope.pending(e->exporter) && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e->loop, UV_RUN_ONCE);
    uint64_t settle = pl_time_mono_ns() / 1000000 + 100;
    while (pl_time_mono_ns() / 1000000 < settle) {
        uv_run(&e->loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
}

static void ingest_env_finish(ingest_env *e)
{
    if (e->exporter) {
        pl_exporter_pyroscope.shutdown(e->exporter);
        pl_exporter_pyroscope.destroy(e->exporter);
    }
    if (e->be.server)
        pl_http_server_close(e->be.server);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&e->loop), 0);
    for (size_t i = 0; i < e->be.requests && i < 8; i++)
        pl_buf_free(&e->be.bodies[i]);
    if (e->cfg) {
        pl_cfg_free(pl_exporter_pyroscope.config, e->cfg);
        free(e->cfg);
    }
    if (e->stats)
        pl_stats_free(e->stats);
}

static pl_batch *checkout_profiles(void)
{
    pl_buf p;
    pl_buf_init(&p);
    build_profile(&p, NULL);
    pl_kv attrs[] = {
        {.key = PL_BYTES_LIT("service.name"), .value = pl_value_string(PL_BYTES_LIT("checkout"))},
        {.key = PL_BYTES_LIT("env"), .value = pl_value_string(PL_BYTES_LIT("prod"))},
        {.key = PL_BYTES_LIT("bad key"), .value = pl_value_string(PL_BYTES_LIT("x"))},
        {.key = PL_BYTES_LIT("team"), .value = pl_value_string(PL_BYTES_LIT("a,b"))},
    };
    pl_pprof_meta meta = {.resource_attrs = attrs, .n_resource_attrs = 4};
    pl_err err = {{0}};
    pl_batch *batch = pl_pprof_decode(p.data, p.len, &meta, &err);
    pl_buf_free(&p);
    return batch;
}

static void test_ingest_api_query_body_and_retry(void)
{
    ingest_env e;
    int answers[] = {503, 200};
    REQUIRE(ingest_env_start(&e, answers, 2));
    pl_batch *batch = checkout_profiles();
    REQUIRE(batch);
    const pl_profile *prof = &batch->data.profiles.resources[0].scopes[0].profiles[0];
    uint64_t t = prof->time_unix_nano;
    uint64_t from = t / 1000000000ULL,
             until = (t + prof->duration_nano + 999999999ULL) / 1000000000ULL;
    CHECK_EQ_INT(pl_exporter_pyroscope.export(e.exporter, batch), PL_OK);
    ingest_env_run(&e, 3000);
    /* The fixture's two columns are two series with the same name; the
     * first request is refused once with 503 and resent, so three requests,
     * and the two answered 200 hold one column each. */
    REQUIRE(e.be.requests == 3);
    char want[512];
    snprintf(want, sizeof(want),
             "name=checkout%%7Benv%%3Dprod%%7D&from=%llu&until=%llu&format=pprof&spyName=proflink",
             (unsigned long long)from, (unsigned long long)until);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_STR(e.be.path[i], "/ingest");
        CHECK_EQ_STR(e.be.query[i], want);
        CHECK_EQ_STR(e.be.auth[i], "Basic dTpw"); /* base64("u:p") */
        CHECK_EQ_STR(e.be.tenant[i], "team-a");
        CHECK_EQ_STR(e.be.content_type[i], "application/octet-stream");
    }
    CHECK(from > 0 && until >= from);
    /* each body is the gzipped pprof of its series */
    int64_t cpu_total = -1, count_total = -1;
    for (int i = 1; i < 3; i++) {
        CHECK(pl_is_gzip(e.be.bodies[i].data, e.be.bodies[i].len));
        pl_err err = {{0}};
        pl_batch *back = pl_pprof_decode(e.be.bodies[i].data, e.be.bodies[i].len, NULL, &err);
        REQUIRE(back);
        const pl_profile *bp = &back->data.profiles.resources[0].scopes[0].profiles[0];
        CHECK_EQ_UINT(back->data.profiles.resources[0].scopes[0].n_profiles, 1);
        CHECK_EQ_UINT(bp->n_samples, 2);
        int64_t sum = bp->samples[0].values[0] + bp->samples[1].values[0];
        if (pl_bytes_eq_cstr(
                pl_dict_string(&back->data.profiles.dict, bp->sample_type.type_strindex), "cpu"))
            cpu_total = sum;
        else
            count_total = sum;
        pl_batch_free(back);
    }
    CHECK_EQ_INT(cpu_total, 50000000);
    CHECK_EQ_INT(count_total, 5);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_PROFILES, PL_STAT_SENT), pl_batch_items(batch));
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_PROFILES, PL_STAT_FAILED), 0);
    pl_batch_free(batch);
    ingest_env_finish(&e);
}

static void test_ingest_api_400_is_not_retried(void)
{
    ingest_env e;
    int answers[] = {400};
    REQUIRE(ingest_env_start(&e, answers, 1));
    pl_batch *batch = checkout_profiles();
    REQUIRE(batch);
    CHECK_EQ_INT(pl_exporter_pyroscope.export(e.exporter, batch), PL_OK);
    ingest_env_run(&e, 3000);
    /* one request per column (series), each refused once and never resent */
    CHECK_EQ_UINT(e.be.requests, 2);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_PROFILES, PL_STAT_SENT), 0);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_PROFILES, PL_STAT_FAILED), pl_batch_items(batch));
    pl_batch_free(batch);
    ingest_env_finish(&e);
}

static void test_api_setting_is_checked(void)
{
    const char *yaml = "endpoint: http://x:4040\napi: grpc\n";
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("test", yaml, strlen(yaml), &errs);
    REQUIRE(doc);
    void *cfg = calloc(1, pl_exporter_pyroscope.config->size);
    CHECK(pl_cfg_decode(pl_exporter_pyroscope.config, doc->root, NULL, cfg, &errs) > 0);
    pl_cfg_free(pl_exporter_pyroscope.config, cfg);
    free(cfg);
    pl_cfg_doc_free(doc);
    pl_cfg_errors_free(&errs);
}

int main(void)
{
    PL_RUN(test_push_request_from_pprof);
    PL_RUN(test_cpu_special_case_alone);
    PL_RUN(test_display_name_names_series);
    PL_RUN(test_large_profile_split);
    PL_RUN(test_ingest_api_query_body_and_retry);
    PL_RUN(test_ingest_api_400_is_not_retried);
    PL_RUN(test_api_setting_is_checked);
    return pl_test_done();
}
