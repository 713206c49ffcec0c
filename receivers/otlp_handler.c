/*
 * otlp_handler.c: answering one OTLP request, shared by every receiver that
 * takes OTLP: the `otlp` receiver on its gRPC and HTTP listeners, and the
 * `pyroscope` receiver, which (like a Pyroscope server) also takes OTLP
 * profiles on its own port. One implementation means one set of answers:
 * the same decoding, limits, status codes, gRPC framing and trailers and
 * compression wherever a client sends OTLP.
 *
 * See otlp.c's header for the rules the answers follow (they are the
 * OpenTelemetry Collector's). Zero-copy: the request body (or its
 * decompressed copy) is adopted by the batch, and decoded strings point
 * into it.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "core/model.h"
#include "net/compress.h"
#include "net/grpc.h"
#include "otlp_json.h"
#include "otlp_pb.h"
#include "receivers/otlp_handler.h"

typedef enum body_format { FORMAT_PROTOBUF, FORMAT_JSON } body_format;

/* What travels with the data: the tenant (X-Scope-OrgID), the caller's
 * authenticated identity ("auth.user": the authenticator's user name, else
 * the mutual-TLS client certificate's CN), and with include_metadata every
 * header but those named `proflink.*`. */
static void add_metadata(pl_batch *b, const pl_http_request *req, bool all)
{
    const char *who = req->auth_user ? req->auth_user : req->tls_peer;
    size_t n = who ? 1 : 0;
    for (size_t i = 0; i < req->n_headers; i++) {
        const pl_http_header *h = &req->headers[i];
        bool org = h->name_len == 13 && strncasecmp(h->name, "x-scope-orgid", 13) == 0;
        if (all || org)
            n += 1 + org;
    }
    if (n == 0)
        return;
    pl_kv *items = pl_batch_alloc(b, n * sizeof(*items));
    if (!items)
        return;
    uint32_t k = 0;
    for (size_t i = 0; i < req->n_headers; i++) {
        const pl_http_header *h = &req->headers[i];
        bool org = h->name_len == 13 && strncasecmp(h->name, "x-scope-orgid", 13) == 0;
        if (org) {
            items[k].key = PL_BYTES_LIT("tenant");
            items[k].value = pl_value_string(pl_batch_bytes(b, h->value, h->value_len));
            k++;
        }
        /* the pipeline's own keys (core/model.h PL_META_*) never come
         * from a client */
        if (all && !pl_meta_key_reserved(h->name, h->name_len)) {
            char lower[128];
            size_t len = h->name_len < sizeof(lower) ? h->name_len : sizeof(lower);
            for (size_t j = 0; j < len; j++) {
                char ch = h->name[j];
                lower[j] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
            }
            items[k].key = pl_batch_bytes(b, lower, len);
            items[k].value = pl_value_string(pl_batch_bytes(b, h->value, h->value_len));
            k++;
        }
    }
    if (who) {
        items[k].key = PL_BYTES_LIT("auth.user");
        items[k].value = pl_value_string(pl_batch_bytes(b, who, strlen(who)));
        k++;
    }
    b->metadata.items = items;
    b->metadata.n = k;
}

/* Decodes `data` (inside `owner`, which is taken in every case) into a new
 * batch of `signal`; *items gets what the counters count: spans or
 * samples, and for logs and metrics (passed through as bytes) the records
 * or data points counted while checking them. */
static pl_status decode_request(const pl_otlp_handler *h, pl_signal signal, body_format format,
                                uint8_t *owner, size_t owner_size, const uint8_t *data, size_t len,
                                pl_batch **out, size_t *items, pl_err *err)
{
    *out = NULL;
    *items = 0;
    size_t budget = h->max_decoded_memory ? h->max_decoded_memory : PL_OTLP_DECODE_BUDGET;
    if (format == FORMAT_JSON && (signal == PL_SIGNAL_LOGS || signal == PL_SIGNAL_METRICS)) {
        /* Pass-through signals travel as protobuf: transcode the JSON body
         * and keep only the result. */
        pl_buf pb;
        pl_buf_init(&pb);
        pl_status st = pl_otlp_json_transcode(signal, data, len, budget, &pb, err);
        free(owner);
        if (st != PL_OK) {
            pl_buf_free(&pb);
            return st;
        }
        owner_size = pb.len;
        owner = pl_buf_steal(&pb, &owner_size);
        if (!owner)
            owner = calloc(1, 1);
        if (!owner)
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        data = owner;
        len = owner_size;
        format = FORMAT_PROTOBUF;
    }
    pl_batch *b = pl_batch_new(signal);
    if (!b) {
        free(owner);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    if (pl_batch_adopt(b, owner, owner_size) != 0) {
        free(owner);
        pl_batch_free(b);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    pl_status st = PL_OK;
    if (signal == PL_SIGNAL_TRACES || signal == PL_SIGNAL_PROFILES) {
        st = format == FORMAT_JSON ? pl_otlp_json_decode_ex(b, data, len, budget, err)
                                   : pl_otlp_decode_ex(b, data, len, budget, err);
    } else {
        st = signal == PL_SIGNAL_LOGS ? pl_otlp_count_logs(data, len, items, err)
                                      : pl_otlp_count_metrics(data, len, items, err);
        b->data.raw = (pl_bytes){data, (uint32_t)len};
    }
    if (st != PL_OK) {
        /* A refused request may have grown the heap by up to the budget:
         * give that back rather than holding it until the next big one. */
        bool big = pl_batch_memory(b) > ((size_t)4 << 20);
        pl_batch_free(b);
        if (big)
            malloc_trim(0);
        return st;
    }
    if (signal == PL_SIGNAL_TRACES || signal == PL_SIGNAL_PROFILES)
        *items = pl_batch_items(b);
    *out = b;
    return PL_OK;
}

/* Hands the batch (of `items` spans, samples, records or data points) to
 * the pipeline and counts the outcome. */
static pl_status deliver(const pl_otlp_handler *r, pl_transport via, pl_signal signal, pl_batch *b,
                         size_t items, pl_err *err)
{
    bool empty =
        (signal == PL_SIGNAL_TRACES && b->data.traces.n_resources == 0) ||
        (signal == PL_SIGNAL_PROFILES && b->data.profiles.n_resources == 0) ||
        ((signal == PL_SIGNAL_LOGS || signal == PL_SIGNAL_METRICS) && b->data.raw.len == 0);
    if (empty) {
        /* like the Collector: nothing to hand on, success */
        pl_batch_free(b);
        return PL_OK;
    }
    b->received_unix_nano = pl_time_now_ns();
    pl_status st = pl_consumer_consume(r->next[signal], b);
    if (st == PL_OK) {
        pl_stats_add_via(r->stats, via, signal, PL_STAT_ACCEPTED, items);
        return PL_OK;
    }
    pl_stats_add_via(r->stats, via, signal, PL_STAT_REFUSED, items);
    switch (st) {
    case PL_ERR_REFUSED:
    case PL_ERR_NOMEM:
        if (r->pushback_until)
            __atomic_store_n(&r->pushback_until[signal], pl_time_mono_ns() + PL_OTLP_PUSHBACK_NS,
                             __ATOMIC_RELAXED);
        return pl_errf(err, st, "data refused, the pipeline is under pressure");
    case PL_ERR_THROTTLED:
        return pl_errf(err, st, "data refused, rate limited");
    default:
        return pl_errf(err, st, "data refused: %s", pl_status_name(st));
    }
}

bool pl_otlp_grpc_signal(const char *path, pl_signal *signal)
{
    static const struct {
        const char *path;
        pl_signal signal;
    } paths[] = {
        {"/opentelemetry.proto.collector.trace.v1.TraceService/Export", PL_SIGNAL_TRACES},
        {"/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
         PL_SIGNAL_PROFILES},
        {"/opentelemetry.proto.collector.logs.v1.LogsService/Export", PL_SIGNAL_LOGS},
        {"/opentelemetry.proto.collector.metrics.v1.MetricsService/Export", PL_SIGNAL_METRICS},
        /* spellings seen in the wild (Fluent Bit accepts them too) */
        {"/opentelemetry.proto.collector.traces.v1.TracesService/Export", PL_SIGNAL_TRACES},
        {"/opentelemetry.proto.collector.log.v1.LogService/Export", PL_SIGNAL_LOGS},
        {"/opentelemetry.proto.collector.metric.v1.MetricService/Export", PL_SIGNAL_METRICS},
    };
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (strcmp(path, paths[i].path) == 0) {
            *signal = paths[i].signal;
            return true;
        }
    }
    *signal = PL_SIGNAL_TRACES;
    return false;
}

/* While the memory_limiter says memory is short, refuse before spending
 * CPU and memory on decompressing and decoding: the pipeline would refuse
 * the batch anyway. Clients are told to retry. */
static bool memory_short(const pl_otlp_handler *r)
{
    if (pl_host_memory_state(r->host) == PL_MEMORY_OK)
        return false;
    if (r->refused_requests) /* from any worker thread */
        __atomic_fetch_add(r->refused_requests, 1, __ATOMIC_RELAXED);
    return true;
}

static const char memory_short_message[] = "memory limit reached, retry later";

/* Within PL_OTLP_PUSHBACK_NS of the pipeline's last refusal of `signal`. */
static bool pushing_back(const pl_otlp_handler *r, pl_signal signal)
{
    if (!r->pushback_until)
        return false;
    uint64_t until = __atomic_load_n(&r->pushback_until[signal], __ATOMIC_RELAXED);
    if (until == 0 || pl_time_mono_ns() >= until)
        return false;
    if (r->refused_requests)
        __atomic_fetch_add(r->refused_requests, 1, __ATOMIC_RELAXED);
    return true;
}

static const char pushback_message[] = "data refused, the pipeline is under pressure";

/* ---- gRPC --------------------------------------------------------------- */

size_t pl_otlp_grpc_body_limit(size_t max_msg)
{
    return max_msg + max_msg / 64 + 1024;
}

void pl_otlp_handle_grpc(const pl_otlp_handler *r, pl_http_request *req, pl_http_response *res)
{
    if (!pl_grpc_is_grpc(req)) {
        pl_grpc_respond_415(res);
        return;
    }
    pl_signal signal;
    bool known = pl_otlp_grpc_signal(req->path, &signal);
    if (!known || strcmp(req->method, "POST") != 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "unknown service or method %.200s", req->path);
        pl_grpc_respond_error(res, PL_GRPC_UNIMPLEMENTED, msg, -1);
        return;
    }
    if (!r->next[signal]) {
        char msg[200];
        snprintf(msg, sizeof(msg), "unknown service: no %s pipeline takes this receiver",
                 pl_signal_name(signal));
        pl_grpc_respond_error(res, PL_GRPC_UNIMPLEMENTED, msg, -1);
        return;
    }
    if (memory_short(r)) {
        pl_grpc_respond_error(res, PL_GRPC_UNAVAILABLE, memory_short_message,
                              (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000);
        return;
    }
    if (pushing_back(r, signal)) {
        pl_grpc_respond_error(res, PL_GRPC_UNAVAILABLE, pushback_message,
                              (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000);
        return;
    }
    pl_err err = {{0}};
    pl_grpc_message m;
    pl_status st = pl_grpc_read_message(req, r->max_recv_msg_size, &m, &err);
    pl_batch *b = NULL;
    size_t items = 0;
    if (st == PL_OK)
        st = decode_request(r, signal, FORMAT_PROTOBUF, m.owner, m.owner_size, m.data, m.len, &b,
                            &items, &err);
    if (st == PL_OK) {
        add_metadata(b, req, r->grpc_metadata);
        st = deliver(r, PL_TRANSPORT_GRPC, signal, b, items, &err);
    }
    if (st == PL_OK) {
        /* an empty Export*ServiceResponse (full success) */
        pl_grpc_respond(res, NULL, 0);
        return;
    }
    if (st == PL_ERR_INVALID || st == PL_ERR_TOO_LARGE)
        pl_debug(r->id, "%s: %s", req->peer, err.msg);
    int64_t retry = pl_status_retryable(st) ? (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000 : -1;
    pl_grpc_respond_error(res, pl_status_grpc(st), err.msg, retry);
}

/* ---- HTTP --------------------------------------------------------------- */

static bool media_type_is(const char *ct, size_t len, const char *want)
{
    size_t n = strlen(want);
    while (len && (*ct == ' ' || *ct == '\t')) {
        ct++;
        len--;
    }
    if (len < n || strncasecmp(ct, want, n) != 0)
        return false;
    const char *rest = ct + n;
    size_t left = len - n;
    while (left && (*rest == ' ' || *rest == '\t')) {
        rest++;
        left--;
    }
    return left == 0 || *rest == ';';
}

static void http_text(pl_http_response *res, int status, const char *text)
{
    static const pl_http_header h[] = {{"Content-Type", 12, "text/plain; charset=utf-8", 25}};
    pl_http_respond(res, status, h, 1, text, strlen(text));
}

static int grpc_code_for_http(int status)
{
    switch (status) {
    case 400:
        return PL_GRPC_INVALID_ARGUMENT;
    case 401:
        return PL_GRPC_UNAUTHENTICATED;
    case 403:
        return 7;
    case 404:
        return PL_GRPC_UNIMPLEMENTED;
    case 413:
        return PL_GRPC_RESOURCE_EXHAUSTED;
    case 415:
        return PL_GRPC_UNIMPLEMENTED;
    case 429:
        return PL_GRPC_RESOURCE_EXHAUSTED;
    case 502:
    case 503:
    case 504:
        return PL_GRPC_UNAVAILABLE;
    case 500:
        return PL_GRPC_INTERNAL;
    }
    return PL_GRPC_UNKNOWN;
}

/* An error answer: a google.rpc.Status encoded like the request. */
static void http_status_answer(pl_http_response *res, body_format format, int status,
                               const char *message, bool retry)
{
    pl_buf body;
    pl_buf_init(&body);
    int64_t delay = retry ? (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000 : -1;
    bool ok = format == FORMAT_JSON
                  ? pl_rpc_status_encode_json(&body, grpc_code_for_http(status), message, delay)
                  : pl_rpc_status_encode(&body, grpc_code_for_http(status), message, delay);
    if (!ok || !pl_buf_ok(&body)) {
        pl_buf_free(&body);
        static const char fallback[] =
            "{\"code\": 13, \"message\": \"failed to marshal error message\"}";
        static const pl_http_header h[] = {{"Content-Type", 12, "application/json", 16}};
        pl_http_respond(res, 500, h, 1, fallback, sizeof(fallback) - 1);
        return;
    }
    char after[16];
    snprintf(after, sizeof(after), "%d", PL_RETRY_AFTER_SECONDS);
    pl_http_header h[2] = {
        {"Content-Type", 12, format == FORMAT_JSON ? "application/json" : "application/x-protobuf",
         format == FORMAT_JSON ? 16u : 22u},
        {"Retry-After", 11, after, strlen(after)},
    };
    pl_http_respond(res, status, h, retry ? 2 : 1, body.data, body.len);
    pl_buf_free(&body);
}

void pl_otlp_handle_http(const pl_otlp_handler *r, int signal, pl_http_request *req,
                         pl_http_response *res)
{
    if (signal < 0 || signal >= PL_SIGNAL_COUNT || !r->next[signal]) {
        http_text(res, 404, "404 page not found\n");
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        http_text(res, 405, "405 method not allowed, supported: [POST]");
        return;
    }
    size_t ct_len = 0, ce_len = 0;
    const char *ct = pl_http_header_get(req, "content-type", &ct_len);
    const char *ce = pl_http_header_get(req, "content-encoding", &ce_len);
    body_format format;
    bool ct_known = true;
    if (ct && media_type_is(ct, ct_len, "application/x-protobuf"))
        format = FORMAT_PROTOBUF;
    else if (ct && media_type_is(ct, ct_len, "application/json"))
        format = FORMAT_JSON;
    else {
        format = FORMAT_JSON;
        ct_known = false;
    }
    pl_encoding enc;
    if (!pl_request_encoding(req, &enc)) {
        char msg[160];
        snprintf(msg, sizeof(msg), "unsupported Content-Encoding: %.*s",
                 (int)(ce_len > 64 ? 64 : ce_len), ce);
        /* 415: the status for an unsupported encoding (the
         * Collector says 400, which clients treat the same: no retry). */
        http_status_answer(res, format, 415, msg, false);
        return;
    }
    if (!ct_known) {
        http_text(res, 415,
                  "415 unsupported media type, supported: [application/json, "
                  "application/x-protobuf]");
        return;
    }
    pl_err err = {{0}};
    if (req->too_large) {
        snprintf(err.msg, sizeof(err.msg), "request body larger than %zu bytes",
                 r->max_request_body_size);
        http_status_answer(res, format, 413, err.msg, false);
        return;
    }
    if (memory_short(r)) {
        http_status_answer(res, format, 503, memory_short_message, true);
        return;
    }
    if (pushing_back(r, (pl_signal)signal)) {
        http_status_answer(res, format, 503, pushback_message, true);
        return;
    }
    uint8_t *owner;
    size_t owner_size;
    size_t limit = r->max_decompressed_size ? r->max_decompressed_size : r->max_request_body_size;
    pl_status st = pl_request_body(req, enc, limit, &owner, &owner_size, &err);
    if (st == PL_ERR_TOO_LARGE)
        snprintf(err.msg, sizeof(err.msg), "decompressed request body larger than %zu bytes",
                 limit);
    pl_batch *b = NULL;
    size_t items = 0;
    if (st == PL_OK)
        st = decode_request(r, (pl_signal)signal, format, owner, owner_size, owner, owner_size, &b,
                            &items, &err);
    if (st == PL_OK) {
        add_metadata(b, req, r->http_metadata);
        st = deliver(r, PL_TRANSPORT_HTTP, (pl_signal)signal, b, items, &err);
    }
    if (st == PL_OK) {
        pl_buf body;
        pl_buf_init(&body);
        bool ok = format == FORMAT_JSON
                      ? pl_otlp_encode_export_response_json(&body, (pl_signal)signal, 0, NULL)
                      : pl_otlp_encode_export_response(&body, 0, NULL);
        pl_http_header h = {"Content-Type", 12,
                            format == FORMAT_JSON ? "application/json" : "application/x-protobuf",
                            format == FORMAT_JSON ? 16u : 22u};
        if (ok && pl_buf_ok(&body))
            pl_http_respond(res, 200, &h, 1, body.data, body.len);
        else
            http_status_answer(res, format, 503, "out of memory", true);
        pl_buf_free(&body);
        return;
    }
    if (st == PL_ERR_INVALID || st == PL_ERR_TOO_LARGE)
        pl_debug(r->id, "%s %s: %s", req->peer, req->path, err.msg);
    int status = pl_status_http(st);
    http_status_answer(res, format, status, err.msg, status == 429 || status == 503);
}
