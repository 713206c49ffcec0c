/*
 * pyroscope_receiver_fixture.h: the `pyroscope` receiver under test, over
 * real HTTP. It listens on a loopback port 0 with its event loop in a second
 * thread; the test thread sends requests with libcurl (post, get) and takes
 * the batches a capture consumer got (take_captured). Header-only: included
 * by test_pyroscope_receiver.c and test_pyroscope_shapes.c.
 */
#ifndef PL_TEST_PYROSCOPE_RECEIVER_FIXTURE_H
#define PL_TEST_PYROSCOPE_RECEIVER_FIXTURE_H

#include <curl/curl.h>
#include <pthread.h>
#include <uv.h>

#include "config/decode.h"
#include "pipeline/consumer.h"
#include "testlib.h"

extern const pl_component_type pl_receiver_pyroscope;
int pl_pyroscope_receiver_port(void *self);

/* ---- the receiver under test -------------------------------------------- */

static uv_loop_t loop;
static uv_async_t stop_async;
static pthread_t loop_thread;
static void *receiver;
static int port;
static pthread_mutex_t captured_lock = PTHREAD_MUTEX_INITIALIZER;
static pl_batch *captured[64];
static int n_captured;

static bool refuse_next; /* answer the next batch PL_ERR_REFUSED */

static pl_status capture(void *arg, pl_batch *batch)
{
    if (refuse_next) {
        pl_batch_free(batch);
        return PL_ERR_REFUSED;
    }
    pthread_mutex_lock(&captured_lock);
    if (n_captured < 64)
        captured[n_captured++] = batch;
    else
        pl_batch_free(batch);
    pthread_mutex_unlock(&captured_lock);
    return PL_OK;
}

static pl_batch *take_captured(void)
{
    pthread_mutex_lock(&captured_lock);
    pl_batch *b = n_captured ? captured[--n_captured] : NULL;
    for (int i = 0; i < n_captured; i++)
        pl_batch_free(captured[i]);
    n_captured = 0;
    pthread_mutex_unlock(&captured_lock);
    return b;
}

static void on_stop(uv_async_t *a)
{
    const pl_component_type *t = &pl_receiver_pyroscope;
    t->shutdown(receiver);
    uv_close((uv_handle_t *)a, NULL);
}

static void *run_loop(void *arg)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    return NULL;
}

static pl_consumer consumer;

static int start_receiver(void)
{
    uv_loop_init(&loop);
    uv_async_init(&loop, &stop_async, on_stop);
    pl_consumer_init_func(&consumer, capture, NULL);
    const pl_component_type *t = &pl_receiver_pyroscope;
    char cfg[512] = {0};
    if (pl_cfg_defaults(t->config, cfg))
        return -1;
    /* endpoint is the first field: a malloc'd string */
    char **endpoint = (char **)cfg;
    free(*endpoint);
    *endpoint = strdup("127.0.0.1:0");
    uint64_t *max_body = (uint64_t *)(cfg + sizeof(char *));
    *max_body = 1 << 20; /* 1 MiB, to test the limit */
    uint64_t *max_decompressed = max_body + 1;
    *max_decompressed = 256u << 10; /* 256 KiB: the OTLP/gRPC message limit */
    pl_create_settings s = {0};
    s.id = "pyroscope";
    s.loop = &loop;
    s.next[PL_SIGNAL_PROFILES] = &consumer;
    pl_err err = {{0}};
    if (t->create(&s, cfg, &receiver, &err) != PL_OK || t->start(receiver, &err) != PL_OK) {
        fprintf(stderr, "start: %s\n", err.msg);
        return -1;
    }
    pl_cfg_free(t->config, cfg);
    port = pl_pyroscope_receiver_port(receiver);
    pthread_create(&loop_thread, NULL, run_loop, NULL);
    return 0;
}

static void stop_receiver(void)
{
    uv_async_send(&stop_async);
    pthread_join(loop_thread, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    pl_receiver_pyroscope.destroy(receiver);
    uv_loop_close(&loop);
    pl_batch_free(take_captured());
}

/* ---- HTTP client ---------------------------------------------------------- */

typedef struct response {
    long status;
    pl_buf body;
    char content_type[128];
} response;

/* With Expect: 100-continue (curl's default for large bodies) a server can
 * refuse an oversized body before it is sent; without it the refusal may
 * race with the upload and reach curl as a reset connection. */
static bool use_expect;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    pl_buf_append(&((response *)arg)->body, p, size * n);
    return size * n;
}

static void post(const char *path_and_query, const char *content_type, const void *body, size_t len,
                 response *out)
{
    pl_buf_free(&out->body);
    memset(out, 0, sizeof(*out));
    pl_buf_init(&out->body);
    CURL *c = curl_easy_init();
    char url[1024];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path_and_query);
    struct curl_slist *h = NULL;
    char ct[256];
    if (content_type) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", content_type);
        h = curl_slist_append(h, ct);
    }
    h = curl_slist_append(h, "X-Scope-OrgID: tenant-a");
    if (!use_expect)
        h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    if (curl_easy_perform(c) == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
        char *t = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &t);
        if (t)
            snprintf(out->content_type, sizeof(out->content_type), "%s", t);
    }
    pl_buf_append_byte(&out->body, 0);
    out->body.len--;
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

__attribute__((unused)) static void get(const char *path, response *out)
{
    pl_buf_free(&out->body);
    memset(out, 0, sizeof(*out));
    pl_buf_init(&out->body);
    CURL *c = curl_easy_init();
    char url[512];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_cleanup(c);
}

/* ---- helpers on captured batches ------------------------------------------ */

static const pl_value *resource_attr(const pl_batch *b, uint32_t r, const char *key)
{
    const pl_kv *kv =
        pl_attrs_find(&b->data.profiles.resources[r].resource.attrs, key, strlen(key));
    return kv ? &kv->value : NULL;
}

static int64_t column_total(const pl_batch *b, const char *type)
{
    const pl_profiles *ps = &b->data.profiles;
    int64_t sum = 0;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t s = 0; s < ps->resources[r].n_scopes; s++)
            for (uint32_t p = 0; p < ps->resources[r].scopes[s].n_profiles; p++) {
                const pl_profile *pr = &ps->resources[r].scopes[s].profiles[p];
                if (!pl_bytes_eq_cstr(pl_dict_string(&ps->dict, pr->sample_type.type_strindex),
                                      type))
                    continue;
                for (uint32_t i = 0; i < pr->n_samples; i++)
                    sum += pr->samples[i].values[0];
            }
    return sum;
}

static void expect_error(const response *r, int status, const char *needle)
{
    CHECK_EQ_INT(r->status, status);
    CHECK(strstr(r->content_type, "application/json") != NULL);
    if (!strstr((const char *)r->body.data, needle) ||
        !strstr((const char *)r->body.data, "\"code\"")) {
        fprintf(stderr, "  body %s lacks %s\n", (const char *)r->body.data, needle);
        CHECK(0);
    }
}

/* A profile's attribute `key`, or NULL. */
__attribute__((unused)) static const pl_value *profile_attr(const pl_profiles *ps,
                                                            const pl_profile *p, const char *key)
{
    for (uint32_t i = 0; i < p->n_attribute_indices; i++) {
        const pl_kvu *a = &ps->dict.attributes[p->attribute_indices[i]];
        if (pl_bytes_eq_cstr(pl_dict_string(&ps->dict, a->key_strindex), key))
            return &a->value;
    }
    return NULL;
}

#endif
