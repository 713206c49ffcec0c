/*
 * test_pyroscope_receiver.c: the `pyroscope` receiver over real HTTP.
 *
 * The receiver listens on a loopback port 0 with its event loop running in a
 * second thread; the test thread sends requests with libcurl and checks the
 * answers and the batches that reach a capture consumer. Covers every
 * /ingest body format, the push API in protobuf and JSON, bad input
 * (each answered 400 with Pyroscope's JSON error, the server unaffected),
 * and OTLP profiles on the same port: OTLP/HTTP (protobuf, JSON, gzip) and
 * OTLP/gRPC over h2c (libcurl with HTTP/2 prior knowledge), each batch
 * checked to arrive intact by encoding it back.
 */
#include "net/compress.h"
#include "otlp_json.h"
#include "otlp_pb.h"
#include "pipeline/consumer.h"
#include "pprof_fixture.h"
#include "proto/pprof.h"
#include "pyroscope_receiver_fixture.h"
#include "receivers/multipart.h"
#include "proto/pyroscope_push.h"
#include "testlib.h"

/* ---- tests ------------------------------------------------------------------ */

static void test_ingest_pprof_gzipped(void)
{
    pl_buf p, z;
    pl_buf_init(&p);
    pl_buf_init(&z);
    build_profile(&p, NULL);
    pl_gzip(p.data, p.len, &z);
    response r = {0};
    post("/ingest?name=checkout%7Benv%3Dprod%2Cotel.scope.name%3Dcom.grafana.pyroscope%2Fnodejs%7D"
         "&from=1700000000&until=1700000010&format=pprof&spyName=nodespy&sampleRate=100",
         "application/octet-stream", z.data, z.len, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_UINT(r.body.len, 0);
    pl_batch *b = take_captured();
    REQUIRE(b);
    REQUIRE(b->data.profiles.n_resources == 1);
    const pl_value *svc = resource_attr(b, 0, "service.name");
    REQUIRE(svc);
    CHECK_BYTES_STR(svc->u.str, "checkout");
    CHECK_BYTES_STR(resource_attr(b, 0, "env")->u.str, "prod");
    CHECK(resource_attr(b, 0, "otel.scope.name") == NULL);
    CHECK_BYTES_STR(b->data.profiles.resources[0].scopes[0].scope.name,
                    "com.grafana.pyroscope/nodejs");
    CHECK_BYTES_STR(resource_attr(b, 0, "pyroscope.spy_name")->u.str, "nodespy");
    CHECK_EQ_INT(column_total(b, "cpu"), 50000000);
    CHECK_EQ_INT(column_total(b, "samples"), 5);
    pl_bytes tenant;
    CHECK(pl_batch_metadata_get(b, "tenant", &tenant));
    pl_batch_free(b);

    /* the alias path and a raw (not gzipped) body */
    post("/pyroscope/ingest?name=checkout&format=pprof", "application/octet-stream", p.data, p.len,
         &r);
    CHECK_EQ_INT(r.status, 200);
    b = take_captured();
    REQUIRE(b);
    CHECK_EQ_INT(column_total(b, "cpu"), 50000000);
    pl_batch_free(b);
    pl_buf_free(&p);
    pl_buf_free(&z);
    pl_buf_free(&r.body);
}

static void test_ingest_multipart(void)
{
    pl_buf p, z, body;
    pl_buf_init(&p);
    pl_buf_init(&z);
    pl_buf_init(&body);
    build_profile(&p, NULL);
    pl_gzip(p.data, p.len, &z);
    const char *bd = "b0undary42";
    pl_buf_printf(&body,
                  "--%s\r\nContent-Disposition: form-data; name=\"profile\"; "
                  "filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                  bd);
    pl_buf_append(&body, z.data, z.len);
    pl_buf_printf(&body,
                  "\r\n--%s\r\nContent-Disposition: form-data; name=\"sample_type_config\"; "
                  "filename=\"sample_type_config.json\"\r\n\r\n"
                  "{\"samples\":{\"units\":\"samples\",\"display-name\":\"cpu_samples\"}}"
                  "\r\n--%s--\r\n",
                  bd, bd);
    response r = {0};
    /* What pyroscope-go sends: ns timestamps, no format. */
    post("/ingest?name=goapp%7Bservice_name%3Dbilling%7D&from=1700000000000000000"
         "&until=1700000010000000000&spyName=gospy&sampleRate=100&units=samples"
         "&aggregationType=sum",
         "multipart/form-data; boundary=b0undary42", body.data, body.len, &r);
    CHECK_EQ_INT(r.status, 200);
    pl_batch *b = take_captured();
    REQUIRE(b);
    CHECK_BYTES_STR(resource_attr(b, 0, "service.name")->u.str, "billing");
    /* sample types are kept as the pprof has them (display-name only
     * matters to Pyroscope's series naming) */
    CHECK_EQ_INT(column_total(b, "samples"), 5);
    CHECK_EQ_INT(column_total(b, "cpu_samples"), 0);
    /* the display name is kept as a profile attribute; the series name
     * (`cpu_samples` contains cpu) is given to every column */
    {
        const pl_profiles *ps = &b->data.profiles;
        const pl_profile *count = &ps->resources[0].scopes[0].profiles[0];
        const pl_profile *cpu = &ps->resources[0].scopes[0].profiles[1];
        const pl_value *dn = profile_attr(ps, count, "pyroscope.sample_type.display_name");
        REQUIRE(dn);
        CHECK_BYTES_STR(dn->u.str, "cpu_samples");
        CHECK(profile_attr(ps, cpu, "pyroscope.sample_type.display_name") == NULL);
        CHECK_BYTES_STR(profile_attr(ps, count, PL_PPROF_NAME_ATTRIBUTE)->u.str, "process_cpu");
        CHECK_BYTES_STR(profile_attr(ps, cpu, PL_PPROF_NAME_ATTRIBUTE)->u.str, "process_cpu");
    }
    CHECK_EQ_INT(column_total(b, "cpu"), 50000000);
    pl_batch_free(b);

    /* multipart without a profile part */
    pl_buf_reset(&body);
    pl_buf_printf(&body,
                  "--%s\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nxx\r\n--%s--\r\n",
                  bd, bd);
    post("/ingest?name=goapp", "multipart/form-data; boundary=b0undary42", body.data, body.len, &r);
    expect_error(&r, 400, "no \\\"profile\\\" part");
    CHECK(take_captured() == NULL);
    pl_buf_free(&p);
    pl_buf_free(&z);
    pl_buf_free(&body);
    pl_buf_free(&r.body);
}

static void test_ingest_folded_and_lines(void)
{
    const char *folded = "main;handler;work 3\nmain;idle 1\r\n\nmain;handler;work 2\n";
    response r = {0};
    post("/ingest?name=pyapp.cpu%7Bregion%3Deu%7D&from=1700000000&until=1700000010"
         "&sampleRate=100&spyName=pyspy",
         "text/plain", folded, strlen(folded), &r);
    CHECK_EQ_INT(r.status, 200);
    pl_batch *b = take_captured();
    REQUIRE(b);
    CHECK_BYTES_STR(resource_attr(b, 0, "service.name")->u.str, "pyapp");
    CHECK_EQ_INT(column_total(b, "cpu"), 6 * 10000000);
    const pl_profile *p = &b->data.profiles.resources[0].scopes[0].profiles[0];
    CHECK_EQ_UINT(p->time_unix_nano, 1700000000000000000ull);
    CHECK_EQ_UINT(p->duration_nano, 10000000000ull);
    CHECK_EQ_INT(p->period, 10000000);
    /* leaf first: "work" */
    const pl_dictionary *d = &b->data.profiles.dict;
    const pl_stack *st = &d->stacks[p->samples[0].stack_index];
    REQUIRE(st->n_location_indices == 3);
    const pl_location *leaf = &d->locations[st->location_indices[0]];
    CHECK_BYTES_STR(pl_dict_string(d, d->functions[leaf->lines[0].function_index].name_strindex),
                    "work");
    pl_batch_free(b);

    const char *lines = "a;b\na;b\na;c\n";
    post("/ingest?name=app.alloc_objects&format=lines", "text/plain", lines, strlen(lines), &r);
    CHECK_EQ_INT(r.status, 200);
    b = take_captured();
    REQUIRE(b);
    CHECK_EQ_INT(column_total(b, "alloc_objects"), 3);
    pl_batch_free(b);

    /* a folded line without a count */
    post("/ingest?name=app.cpu", "text/plain", "a;b;c\n", 6, &r);
    expect_error(&r, 400, "line 1");
    /* an unknown legacy type suffix */
    post("/ingest?name=app.bogus", "text/plain", "a 1\n", 4, &r);
    expect_error(&r, 400, "bogus");
    /* legacy upload carrying profile_id: dropped silently */
    post("/ingest?name=app.cpu%7Bprofile_id%3Dabc%7D", "text/plain", "a 1\n", 4, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(take_captured() == NULL);
    pl_buf_free(&r.body);
}

static void test_ingest_bad_input(void)
{
    pl_buf p, z;
    pl_buf_init(&p);
    pl_buf_init(&z);
    build_profile(&p, NULL);
    pl_gzip(p.data, p.len, &z);
    response r = {0};
    /* corrupt gzip */
    z.data[z.len / 2] ^= 0x55;
    post("/ingest?name=app&format=pprof", "application/octet-stream", z.data, z.len, &r);
    expect_error(&r, 400, "gzip");
    /* truncated pprof */
    post("/ingest?name=app&format=pprof", "application/octet-stream", p.data, p.len - 3, &r);
    CHECK_EQ_INT(r.status, 400);
    /* index out of range */
    pl_buf_reset(&p);
    build_profile(&p, &(breakage){.bad_string = true});
    post("/ingest?name=app&format=pprof", "application/octet-stream", p.data, p.len, &r);
    expect_error(&r, 400, "out of range");
    /* unsupported and unknown formats */
    post("/ingest?name=app&format=trie", "binary/octet-stream+trie", "x", 1, &r);
    expect_error(&r, 400, "unsupported format");
    post("/ingest?name=app&format=speedscope", "application/json", "{}", 2, &r);
    expect_error(&r, 400, "unsupported format");
    /* a JFR body that is not one (tests/test_jfr.c has the real ones) */
    post("/ingest?name=app&format=jfr", "application/octet-stream", "x", 1, &r);
    expect_error(&r, 400, "JFR");
    post("/ingest?name=app&format=weird", "text/plain", "x 1", 3, &r);
    expect_error(&r, 400, "unknown format");
    /* bad names */
    post("/ingest?format=pprof", "application/octet-stream", "x", 1, &r);
    expect_error(&r, 400, "name");
    post("/ingest?name=app%7B__name__%3Dx%7D&format=pprof", "application/octet-stream", "", 0, &r);
    expect_error(&r, 400, "reserved");
    post("/ingest?name=ap%20p%21&format=pprof", "application/octet-stream", "", 0, &r);
    expect_error(&r, 400, "not allowed");
    post("/ingest?name=app%7Bk%3Dv&format=pprof", "application/octet-stream", "", 0, &r);
    expect_error(&r, 400, "missing '}'");
    /* too large: the server's limit (1 MiB in this test) */
    size_t big = 2 << 20;
    char *huge = calloc(1, big);
    use_expect = true;
    post("/ingest?name=app&format=pprof", "application/octet-stream", huge, big, &r);
    use_expect = false;
    CHECK_EQ_INT(r.status, 413);
    free(huge);
    /* a gzip bomb: small on the wire, over max_decompressed_size inflated */
    {
        size_t n = 30u << 20;
        uint8_t *zeros = calloc(1, n);
        pl_buf bomb;
        pl_buf_init(&bomb);
        pl_gzip(zeros, n, &bomb);
        free(zeros);
        CHECK(bomb.len < (1u << 20));
        post("/ingest?name=app&format=pprof", "application/octet-stream", bomb.data, bomb.len, &r);
        expect_error(&r, 413, "decompressed size");
        pl_buf_free(&bomb);
    }
    /* wrong method, unknown path */
    get("/ingest", &r);
    CHECK_EQ_INT(r.status, 405);
    get("/nope", &r);
    CHECK_EQ_INT(r.status, 404);
    CHECK(take_captured() == NULL);
    /* and the server still works */
    pl_buf_reset(&p);
    build_profile(&p, NULL);
    post("/ingest?name=app&format=pprof", "application/octet-stream", p.data, p.len, &r);
    CHECK_EQ_INT(r.status, 200);
    pl_batch_free(take_captured());
    pl_buf_free(&p);
    pl_buf_free(&z);
    pl_buf_free(&r.body);
}

static void test_push_proto_and_json(void)
{
    pl_buf p, z;
    pl_buf_init(&p);
    pl_buf_init(&z);
    build_profile(&p, NULL);
    pl_gzip(p.data, p.len, &z);
    pl_push_label labels1[] = {{PL_BYTES_LIT("__name__"), PL_BYTES_LIT("process_cpu")},
                               {PL_BYTES_LIT("service_name"), PL_BYTES_LIT("cart")},
                               {PL_BYTES_LIT("host.name"), PL_BYTES_LIT("h1")}};
    pl_push_label labels2[] = {{PL_BYTES_LIT("service_name"), PL_BYTES_LIT("auth")}};
    pl_push_sample samples1[] = {{{z.data, (uint32_t)z.len}, PL_BYTES_LIT("734FD599")},
                                 {{p.data, (uint32_t)p.len}, {NULL, 0}}};
    pl_push_sample samples2[] = {{{z.data, (uint32_t)z.len}, {NULL, 0}}};
    pl_push_series series[] = {{labels1, 3, samples1, 2}, {labels2, 1, samples2, 1}};
    pl_push_request req = {series, 2, {0}};
    pl_buf enc;
    pl_buf_init(&enc);
    REQUIRE(pl_push_encode_proto(&req, &enc));

    /* decoding our own encoding gives the same request back */
    pl_push_request back = {0};
    pl_err err = {{0}};
    CHECK(pl_push_decode_proto(enc.data, enc.len, &back, &err) == PL_OK);
    CHECK_EQ_UINT(back.n_series, 2);
    CHECK_EQ_UINT(back.series[0].n_samples, 2);
    CHECK_BYTES_STR(back.series[0].samples[0].id, "734FD599");
    CHECK_EQ_UINT(back.series[0].samples[1].raw_profile.len, p.len);
    pl_push_request_free(&back);

    response r = {0};
    post("/push.v1.PusherService/Push", "application/proto", enc.data, enc.len, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.content_type, "application/proto") != NULL);
    CHECK_EQ_UINT(r.body.len, 0);
    pl_batch *b = take_captured();
    REQUIRE(b);
    REQUIRE(b->data.profiles.n_resources == 3);
    CHECK_BYTES_STR(resource_attr(b, 0, "service.name")->u.str, "cart");
    CHECK_BYTES_STR(resource_attr(b, 0, "host.name")->u.str, "h1");
    CHECK(resource_attr(b, 0, "__name__") == NULL);
    CHECK_BYTES_STR(resource_attr(b, 2, "service.name")->u.str, "auth");
    CHECK_EQ_INT(column_total(b, "cpu"), 3 * 50000000);
    pl_batch_free(b);

    /* gzip over the whole body (Content-Encoding) */
    pl_buf gz;
    pl_buf_init(&gz);
    pl_gzip(enc.data, enc.len, &gz);
    {
        CURL *c = curl_easy_init();
        char url[256];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d/push.v1.PusherService/Push", port);
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/proto");
        h = curl_slist_append(h, "Content-Encoding: gzip");
        h = curl_slist_append(h, "Connect-Protocol-Version: 1");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, gz.data);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)gz.len);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        pl_buf sink;
        pl_buf_init(&sink);
        response rr = {0};
        rr.body = sink;
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &rr);
        long status = 0;
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        CHECK_EQ_INT(status, 200);
        pl_buf_free(&rr.body);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        pl_batch_free(take_captured());
    }
    pl_buf_free(&gz);

    /* JSON: rawProfile in base64 */
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    pl_buf json;
    pl_buf_init(&json);
    pl_buf_append_str(&json, "{\"series\":[{\"labels\":[{\"name\":\"service_name\",\"value\":"
                             "\"jsonsvc\"}],\"samples\":[{\"ID\":\"x\",\"rawProfile\":\"");
    for (size_t i = 0; i < z.len; i += 3) {
        uint32_t v = (uint32_t)z.data[i] << 16;
        if (i + 1 < z.len)
            v |= (uint32_t)z.data[i + 1] << 8;
        if (i + 2 < z.len)
            v |= z.data[i + 2];
        pl_buf_append_byte(&json, (uint8_t)b64[v >> 18 & 63]);
        pl_buf_append_byte(&json, (uint8_t)b64[v >> 12 & 63]);
        pl_buf_append_byte(&json, i + 1 < z.len ? (uint8_t)b64[v >> 6 & 63] : '=');
        pl_buf_append_byte(&json, i + 2 < z.len ? (uint8_t)b64[v & 63] : '=');
    }
    pl_buf_append_str(&json, "\"}]}]}");
    post("/push.v1.PusherService/Push", "application/json", json.data, json.len, &r);
    CHECK_EQ_INT(r.status, 200);
    CHECK_EQ_STR((const char *)r.body.data, "{}");
    b = take_captured();
    REQUIRE(b);
    CHECK_BYTES_STR(resource_attr(b, 0, "service.name")->u.str, "jsonsvc");
    CHECK_EQ_INT(column_total(b, "cpu"), 50000000);
    pl_batch_free(b);

    /* errors */
    post("/push.v1.PusherService/Push", "application/proto", "", 0, &r);
    expect_error(&r, 400, "no profiles received");
    post("/push.v1.PusherService/Push", "application/json", "{\"series\":", 10, &r);
    expect_error(&r, 400, "invalid JSON");
    /* gRPC needs HTTP/2 (tests/interop/pyroscope_grpc_push.test.mjs) */
    post("/push.v1.PusherService/Push", "application/grpc", "", 0, &r);
    CHECK_EQ_INT(r.status, 415);
    /* a corrupt raw profile names its series and sample */
    samples2[0].raw_profile.len -= 5;
    pl_buf_reset(&enc);
    pl_push_encode_proto(&req, &enc);
    post("/push.v1.PusherService/Push", "application/proto", enc.data, enc.len, &r);
    expect_error(&r, 400, "series 1 sample 0");
    CHECK(take_captured() == NULL);

    pl_buf_free(&json);
    pl_buf_free(&enc);
    pl_buf_free(&p);
    pl_buf_free(&z);
    pl_buf_free(&r.body);
}

/* Multipart parsing details, without HTTP. */
static void test_multipart_parser(void)
{
    pl_bytes bd;
    const char *ct = "multipart/form-data; boundary=\"abc\"";
    REQUIRE(pl_multipart_boundary(ct, strlen(ct), &bd) == 0);
    CHECK_BYTES_STR(bd, "abc");
    ct = "multipart/form-data;boundary=xyz; charset=utf-8";
    REQUIRE(pl_multipart_boundary(ct, strlen(ct), &bd) == 0);
    CHECK_BYTES_STR(bd, "xyz");
    CHECK(pl_multipart_boundary("multipart/form-data", 19, &bd) == -1);

    const char *body = "preamble\r\n--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"
                       "hello\r\n--xyz\nContent-Disposition: form-data; name=b; filename=\"f.txt\""
                       "\n\n\r\n--xyz--\r\nepilogue";
    pl_multipart_part parts[4];
    size_t n = 0;
    pl_err err = {{0}};
    REQUIRE(pl_multipart_parse(bd, (const uint8_t *)body, strlen(body), parts, 4, &n, &err) ==
            PL_OK);
    REQUIRE(n == 2);
    CHECK_BYTES_STR(parts[0].name, "a");
    CHECK_BYTES_STR(parts[0].data, "hello");
    CHECK_BYTES_STR(parts[1].name, "b");
    CHECK_BYTES_STR(parts[1].filename, "f.txt");
    CHECK_EQ_UINT(parts[1].data.len, 0);
    /* no closing boundary */
    const char *bad = "--xyz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nhello";
    CHECK(pl_multipart_parse(bd, (const uint8_t *)bad, strlen(bad), parts, 4, &n, &err) ==
          PL_ERR_INVALID);
    CHECK(pl_multipart_parse(bd, (const uint8_t *)"nothing", 7, parts, 4, &n, &err) ==
          PL_ERR_INVALID);
}

/* ---- OTLP profiles on the Pyroscope port ------------------------------------ */

typedef struct otlp_answer {
    long status;
    int grpc_status; /* -1: no grpc-status header or trailer */
    char grpc_message[256];
    char content_type[128];
    pl_buf body;
} otlp_answer;

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    otlp_answer *a = arg;
    size_t len = size * n;
    if (len > 12 && strncasecmp(p, "grpc-status:", 12) == 0)
        a->grpc_status = atoi(p + 12);
    else if (len > 13 && strncasecmp(p, "grpc-message:", 13) == 0) {
        size_t m = len - 13;
        while (m && (p[13 + m - 1] == '\r' || p[13 + m - 1] == '\n'))
            m--;
        snprintf(a->grpc_message, sizeof(a->grpc_message), "%.*s", (int)m, p + 13);
    }
    return len;
}

static size_t on_otlp_body(char *p, size_t size, size_t n, void *arg)
{
    pl_buf_append(&((otlp_answer *)arg)->body, p, size * n);
    return size * n;
}

/* POSTs `body` to the receiver's port; h2: HTTP/2 with prior knowledge
 * (what gRPC clients speak to a cleartext endpoint). */
static void otlp_post(const char *path, const char *content_type, const char *extra_header,
                      const void *body, size_t len, bool h2, otlp_answer *a)
{
    pl_buf_free(&a->body);
    memset(a, 0, sizeof(*a));
    pl_buf_init(&a->body);
    a->grpc_status = -1;
    CURL *c = curl_easy_init();
    char url[512], ct[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
    struct curl_slist *h = curl_slist_append(NULL, ct);
    h = curl_slist_append(h, "X-Scope-OrgID: tenant-otlp");
    h = curl_slist_append(h, "Expect:");
    if (h2)
        h = curl_slist_append(h, "TE: trailers");
    if (extra_header)
        h = curl_slist_append(h, extra_header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_otlp_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (h2)
        curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a->status);
        char *t = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &t);
        if (t)
            snprintf(a->content_type, sizeof(a->content_type), "%s", t);
    } else {
        fprintf(stderr, "  curl %s: %s\n", path, curl_easy_strerror(rc));
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

/* An OTLP ExportProfilesServiceRequest, protobuf: the pprof fixture sent
 * through /ingest, as captured, encoded as OTLP. */
static bool otlp_request(pl_buf *pb, pl_buf *json)
{
    pl_buf p;
    pl_buf_init(&p);
    build_profile(&p, NULL);
    response r = {0};
    post("/ingest?name=checkout%7Benv%3Dprod%7D&format=pprof", "application/octet-stream", p.data,
         p.len, &r);
    pl_buf_free(&p);
    pl_buf_free(&r.body);
    pl_batch *b = take_captured();
    if (!b || r.status != 200)
        return false;
    bool ok = pl_otlp_encode_profiles(&b->data.profiles, pb) &&
              (!json || pl_otlp_json_encode_profiles(&b->data.profiles, json));
    pl_batch_free(b);
    return ok && pb->len > 100;
}

/* The captured batch carries exactly the profiles of `want` (protobuf),
 * and the tenant from X-Scope-OrgID as the otlp receiver names it. */
static void check_intact(const pl_buf *want)
{
    pl_batch *b = take_captured();
    REQUIRE(b);
    CHECK_EQ_INT(b->signal, PL_SIGNAL_PROFILES);
    pl_buf got;
    pl_buf_init(&got);
    CHECK(pl_otlp_encode_profiles(&b->data.profiles, &got));
    CHECK_EQ_BYTES(got.data, got.len, want->data, want->len);
    CHECK_BYTES_STR(resource_attr(b, 0, "service.name")->u.str, "checkout");
    CHECK_EQ_INT(column_total(b, "cpu"), 50000000);
    pl_bytes tenant = {0};
    CHECK(pl_batch_metadata_get(b, "tenant", &tenant));
    CHECK_BYTES_STR(tenant, "tenant-otlp");
    pl_buf_free(&got);
    pl_batch_free(b);
}

static void test_otlp_http(void)
{
    pl_buf pb, json, z;
    pl_buf_init(&pb);
    pl_buf_init(&json);
    pl_buf_init(&z);
    REQUIRE(otlp_request(&pb, &json));
    otlp_answer a = {0};
    pl_buf_init(&a.body);
    const char *path = "/v1development/profiles";

    otlp_post(path, "application/x-protobuf", NULL, pb.data, pb.len, false, &a);
    CHECK_EQ_INT(a.status, 200);
    CHECK(strcmp(a.content_type, "application/x-protobuf") == 0);
    CHECK_EQ_BYTES(a.body.data, a.body.len, "\x0a\x00", 2); /* empty partial_success */
    check_intact(&pb);

    otlp_post(path, "application/json", NULL, json.data, json.len, false, &a);
    CHECK_EQ_INT(a.status, 200);
    CHECK(strcmp(a.content_type, "application/json") == 0);
    CHECK_EQ_BYTES(a.body.data, a.body.len, "{\"partialSuccess\":{}}", 21);
    check_intact(&pb);

    pl_err err = {{0}};
    REQUIRE(pl_compress(PL_ENCODING_GZIP, pb.data, pb.len, 0, &z, &err) == PL_OK);
    otlp_post(path, "application/x-protobuf", "Content-Encoding: gzip", z.data, z.len, false, &a);
    CHECK_EQ_INT(a.status, 200);
    check_intact(&pb);

    /* the same over HTTP/2 (the listener is h2c too) */
    otlp_post(path, "application/x-protobuf", NULL, pb.data, pb.len, true, &a);
    CHECK_EQ_INT(a.status, 200);
    check_intact(&pb);

    /* the otlp receiver's errors: a google.rpc.Status like the request */
    otlp_post(path, "application/x-protobuf", NULL, pb.data, pb.len - 3, false, &a);
    CHECK_EQ_INT(a.status, 400);
    CHECK(strcmp(a.content_type, "application/x-protobuf") == 0);
    CHECK(a.body.len > 2 && a.body.data[0] == 0x08 && a.body.data[1] == 3); /* INVALID_ARGUMENT */
    otlp_post(path, "application/json", NULL, "{\"resourceProfiles\":", 20, false, &a);
    CHECK_EQ_INT(a.status, 400);
    CHECK(strcmp(a.content_type, "application/json") == 0);
    otlp_post(path, "text/plain", NULL, pb.data, pb.len, false, &a);
    CHECK_EQ_INT(a.status, 415);
    otlp_post(path, "application/x-protobuf", "Content-Encoding: br", z.data, z.len, false, &a);
    CHECK_EQ_INT(a.status, 415);
    otlp_post("/v1/traces", "application/x-protobuf", NULL, pb.data, pb.len, false, &a);
    CHECK_EQ_INT(a.status, 404);
    CHECK(take_captured() == NULL);
    /* over max_request_body_size (1 MiB here): 413 in OTLP's format */
    size_t big = 2 << 20;
    uint8_t *huge = calloc(1, big);
    otlp_post(path, "application/x-protobuf", NULL, huge, big, false, &a);
    CHECK(a.status == 413 || a.status == 0); /* 0: the refusal raced the upload */
    /* over max_decompressed_size (256 KiB here) once inflated: 413 */
    pl_buf bomb;
    pl_buf_init(&bomb);
    REQUIRE(pl_compress(PL_ENCODING_GZIP, huge, 300u << 10, 0, &bomb, &err) == PL_OK);
    otlp_post(path, "application/x-protobuf", "Content-Encoding: gzip", bomb.data, bomb.len, false,
              &a);
    CHECK_EQ_INT(a.status, 413);
    CHECK(a.body.len > 2 && a.body.data[0] == 0x08 && a.body.data[1] == 8); /* RESOURCE_EXHAUSTED */
    pl_buf_free(&bomb);
    free(huge);
    /* /ingest still works after all that */
    response r = {0};
    pl_buf p;
    pl_buf_init(&p);
    build_profile(&p, NULL);
    post("/ingest?name=checkout&format=pprof", "application/octet-stream", p.data, p.len, &r);
    CHECK_EQ_INT(r.status, 200);
    pl_batch_free(take_captured());
    pl_buf_free(&p);
    pl_buf_free(&r.body);
    pl_buf_free(&a.body);
    pl_buf_free(&pb);
    pl_buf_free(&json);
    pl_buf_free(&z);
}

static void grpc_post(const char *path, const char *encoding, const uint8_t *msg, size_t len,
                      bool compressed, otlp_answer *a)
{
    pl_buf framed;
    pl_buf_init(&framed);
    uint8_t prefix[5] = {compressed, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                         (uint8_t)(len >> 8), (uint8_t)len};
    pl_buf_append(&framed, prefix, 5);
    pl_buf_append(&framed, msg, len);
    char enc[64];
    snprintf(enc, sizeof(enc), "grpc-encoding: %s", encoding ? encoding : "");
    otlp_post(path, "application/grpc", encoding ? enc : NULL, framed.data, framed.len, true, a);
    pl_buf_free(&framed);
}

static void test_otlp_grpc(void)
{
    const char *profiles =
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export";
    pl_buf pb, z;
    pl_buf_init(&pb);
    pl_buf_init(&z);
    REQUIRE(otlp_request(&pb, NULL));
    otlp_answer a = {0};
    pl_buf_init(&a.body);

    grpc_post(profiles, NULL, pb.data, pb.len, false, &a);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(a.grpc_status, 0);
    CHECK(strncmp(a.content_type, "application/grpc", 16) == 0);
    CHECK_EQ_BYTES(a.body.data, a.body.len, "\0\0\0\0\0", 5); /* one empty response */
    check_intact(&pb);

    pl_err err = {{0}};
    REQUIRE(pl_compress(PL_ENCODING_GZIP, pb.data, pb.len, 0, &z, &err) == PL_OK);
    grpc_post(profiles, "gzip", z.data, z.len, true, &a);
    CHECK_EQ_INT(a.grpc_status, 0);
    check_intact(&pb);

    /* the otlp receiver's gRPC errors */
    grpc_post(profiles, NULL, pb.data, pb.len - 3, false, &a);
    CHECK_EQ_INT(a.grpc_status, 3); /* INVALID_ARGUMENT */
    CHECK(a.grpc_message[0] != 0);
    grpc_post(profiles, "snappy", z.data, z.len, true, &a);
    CHECK_EQ_INT(a.grpc_status, 12); /* UNIMPLEMENTED */
    grpc_post("/opentelemetry.proto.collector.trace.v1.TraceService/Export", NULL, pb.data, pb.len,
              false, &a);
    CHECK_EQ_INT(a.grpc_status, 12); /* no traces here */
    grpc_post("/no.Such/Method", NULL, pb.data, pb.len, false, &a);
    CHECK_EQ_INT(a.grpc_status, 12);
    CHECK(take_captured() == NULL);
    /* a message over max_decompressed_size (256 KiB here), plain and
     * gzipped: RESOURCE_EXHAUSTED, not retryable */
    size_t big = 300u << 10;
    uint8_t *huge = calloc(1, big);
    grpc_post(profiles, NULL, huge, big, false, &a);
    CHECK_EQ_INT(a.grpc_status, 8);
    pl_buf_reset(&z);
    REQUIRE(pl_compress(PL_ENCODING_GZIP, huge, big, 0, &z, &err) == PL_OK);
    grpc_post(profiles, "gzip", z.data, z.len, true, &a);
    CHECK_EQ_INT(a.grpc_status, 8);
    free(huge);
    /* back-pressure from the pipeline: UNAVAILABLE */
    refuse_next = true;
    grpc_post(profiles, NULL, pb.data, pb.len, false, &a);
    refuse_next = false;
    CHECK_EQ_INT(a.grpc_status, 14);
    CHECK(take_captured() == NULL);
    /* and the connection-per-call keeps working afterwards */
    grpc_post(profiles, NULL, pb.data, pb.len, false, &a);
    CHECK_EQ_INT(a.grpc_status, 0);
    check_intact(&pb);
    pl_buf_free(&a.body);
    pl_buf_free(&pb);
    pl_buf_free(&z);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    PL_RUN(test_multipart_parser);
    if (start_receiver()) {
        fprintf(stderr, "cannot start the receiver\n");
        return 1;
    }
    PL_RUN(test_ingest_pprof_gzipped);
    PL_RUN(test_ingest_multipart);
    PL_RUN(test_ingest_folded_and_lines);
    PL_RUN(test_ingest_bad_input);
    PL_RUN(test_push_proto_and_json);
    PL_RUN(test_otlp_http);
    PL_RUN(test_otlp_grpc);
    stop_receiver();
    curl_global_cleanup();
    return pl_test_done();
}
