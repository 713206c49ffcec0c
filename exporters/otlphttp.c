/*
 * otlphttp.c: the `otlphttp` exporter: OTLP/HTTP with protobuf bodies, one
 * POST per batch to endpoint + /v1/traces, /v1development/profiles,
 * /v1/logs or /v1/metrics (or the per-signal *_endpoint URLs as given).
 *
 * `encoding: json` sends traces and profiles as OTLP/JSON
 * (application/json, proto/otlp_json.h), compressed as configured. Logs
 * and metrics are passed through as the protobuf request they arrived as
 * (proflink does not decode them), so they stay application/x-protobuf
 * whatever the encoding: every OTLP/HTTP server accepts both.
 *
 * Answers, as the OTLP specification and the Collector's exporter treat
 * them:
 *   2xx                 OK; a partial_success in the body is logged and its
 *                       rejected items counted as failed, never retried
 *   429, 502, 503, 504  retryable, after Retry-After (seconds or HTTP-date)
 *                       when the server sent one, else after the backoff
 *   anything else       permanent (400 above all: the data will never fit)
 *   no answer           retryable (refused, reset, timed out)
 */
#include <stdio.h>
#include <stdlib.h>
#include <json-c/json.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "exporters/otlp_common.h"
#include "proto/otlp_pb.h"

static const char *const signal_paths[PL_SIGNAL_COUNT] = {
    [PL_SIGNAL_TRACES] = "/v1/traces",
    [PL_SIGNAL_PROFILES] = "/v1development/profiles",
    [PL_SIGNAL_LOGS] = "/v1/logs",
    [PL_SIGNAL_METRICS] = "/v1/metrics",
};

static bool is_http_url(const char *s)
{
    return s && (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0);
}

static int otlphttp_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    pl_otlp_exporter_config *cfg = cfg_;
    int errors = 0;
    const char *keys[] = {"traces_endpoint", "profiles_endpoint", "logs_endpoint",
                          "metrics_endpoint"};
    const char *vals[] = {cfg->traces_endpoint, cfg->profiles_endpoint, cfg->logs_endpoint,
                          cfg->metrics_endpoint};
    bool any = cfg->endpoint && cfg->endpoint[0];
    errors += pl_cfg_check(ctx, !any || is_http_url(cfg->endpoint), "endpoint",
                           "must be an http:// or https:// URL, got \"%s\"", cfg->endpoint);
    for (int i = 0; i < 4; i++) {
        if (vals[i] && vals[i][0]) {
            any = true;
            errors += pl_cfg_check(ctx, is_http_url(vals[i]), keys[i],
                                   "must be an http:// or https:// URL");
        }
    }
    errors += pl_cfg_check(ctx, any, "endpoint", "is required (e.g. http://localhost:4318)");
    pl_encoding enc;
    errors += pl_cfg_check(ctx, pl_otlp_compression_parse(cfg->compression, &enc) == 0,
                           "compression", "must be gzip, zstd or none");
    if (cfg->encoding && cfg->encoding[0] && strcmp(cfg->encoding, "proto") != 0 &&
        strcmp(cfg->encoding, "json") != 0) {
        pl_cfg_errorf(ctx, "encoding", "must be proto or json, got \"%s\"", cfg->encoding);
        errors++;
    }
    return errors;
}

#include "exporters/otlphttp.config.inc"

static bool is_json_response(const pl_http_client_result *res)
{
    size_t len = 0;
    const char *ct = pl_http_result_find(res, "content-type", &len);
    return ct && len >= 16 && strncasecmp(ct, "application/json", 16) == 0;
}

/* partialSuccess of a JSON Export*ServiceResponse: {"partialSuccess":
 * {"rejectedSpans": "2", "errorMessage": "..."}} (rejectedProfiles,
 * rejectedLogRecords, rejectedDataPoints for the other signals; the count
 * may be a string or a number). Anything that does not parse is ignored:
 * the answer was a 2xx. */
static void json_partial_success(const pl_http_client_result *res, pl_send_result *r)
{
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return;
    json_object *root = json_tokener_parse_ex(tok, (const char *)res->body, (int)res->body_len);
    json_tokener_free(tok);
    json_object *ps = NULL, *v = NULL;
    if (root && (json_object_object_get_ex(root, "partialSuccess", &ps) ||
                 json_object_object_get_ex(root, "partial_success", &ps))) {
        static const char *const keys[] = {
            "rejectedSpans",  "rejectedProfiles",  "rejectedLogRecords",   "rejectedDataPoints",
            "rejected_spans", "rejected_profiles", "rejected_log_records", "rejected_data_points"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            if (json_object_object_get_ex(ps, keys[i], &v)) {
                int64_t n = json_object_get_int64(v); /* parses strings too */
                r->rejected_items = n > 0 ? (uint64_t)n : 0;
                break;
            }
        }
        if (json_object_object_get_ex(ps, "errorMessage", &v) ||
            json_object_object_get_ex(ps, "error_message", &v)) {
            const char *m = json_object_get_string(v);
            if (m && m[0])
                snprintf(r->message, sizeof(r->message), "%s", m);
        }
    }
    json_object_put(root);
}

/* The message of a google.rpc.Status error body (protobuf or JSON), or the
 * start of a text one. */
static void error_body_text(const pl_http_client_result *res, char *out, size_t size)
{
    out[0] = 0;
    if (!res->body_len)
        return;
    if (pl_otlp_is_protobuf_response(res)) {
        pl_bytes msg = {0};
        int32_t code = 0;
        if (pl_rpc_status_decode(res->body, res->body_len, &code, &msg, NULL, NULL) == PL_OK &&
            msg.len) {
            snprintf(out, size, "%.*s", (int)msg.len, (const char *)msg.ptr);
            return;
        }
    } else if (is_json_response(res)) {
        /* a JSON google.rpc.Status, as a server answers a JSON request */
        json_tokener *tok = json_tokener_new();
        json_object *o =
            tok ? json_tokener_parse_ex(tok, (const char *)res->body, (int)res->body_len) : NULL;
        json_object *m = NULL;
        bool found = o && json_object_object_get_ex(o, "message", &m) &&
                     json_object_is_type(m, json_type_string);
        if (found)
            snprintf(out, size, "%s", json_object_get_string(m));
        json_object_put(o);
        if (tok)
            json_tokener_free(tok);
        if (found)
            return;
    }
    size_t n = res->body_len < 200 ? res->body_len : 200;
    size_t j = 0;
    for (size_t i = 0; i < n && j + 1 < size; i++) {
        unsigned char c = res->body[i];
        out[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : ' ';
    }
    out[j] = 0;
}

void pl_otlphttp_classify(pl_otlp_exporter *x, pl_signal signal, const pl_http_client_result *res,
                          pl_send_result *r)
{
    if (res->transport_error) {
        pl_send_result_set(r, PL_SEND_RETRYABLE, "POST %s: %s", x->urls[signal],
                           res->error ? res->error : "transport error");
        return;
    }
    int status = res->status;
    if (status >= 200 && status < 300) {
        pl_send_result_set(r, PL_SEND_OK, NULL);
        if (res->body_len && is_json_response(res)) {
            json_partial_success(res, r);
        } else if (res->body_len && pl_otlp_is_protobuf_response(res)) {
            int64_t rejected = 0;
            pl_bytes msg = {0};
            if (pl_otlp_decode_export_response(res->body, res->body_len, &rejected, &msg, NULL) ==
                PL_OK) {
                r->rejected_items = rejected > 0 ? (uint64_t)rejected : 0;
                if (msg.len)
                    snprintf(r->message, sizeof(r->message), "%.*s", (int)msg.len,
                             (const char *)msg.ptr);
            }
        }
        return;
    }
    char text[220];
    error_body_text(res, text, sizeof(text));
    if (status == 429 || status == 502 || status == 503 || status == 504) {
        pl_send_result_set(r, PL_SEND_RETRYABLE, "HTTP %d from %s%s%s", status, x->urls[signal],
                           text[0] ? ": " : "", text);
        size_t len = 0;
        const char *ra = pl_http_result_find(res, "retry-after", &len);
        if (ra) {
            int64_t delay = pl_http_parse_retry_after(ra, len, pl_time_now_ns());
            if (delay > 0)
                r->retry_after_ns = delay;
        }
        return;
    }
    pl_send_result_set(r, PL_SEND_PERMANENT, "HTTP %d from %s (not retryable)%s%s", status,
                       x->urls[signal], text[0] ? ": " : "", text);
}

static char *join_url(const char *base, const char *path)
{
    size_t n = strlen(base);
    while (n && base[n - 1] == '/')
        n--;
    char *url = malloc(n + strlen(path) + 1);
    if (url) {
        memcpy(url, base, n);
        strcpy(url + n, path);
    }
    return url;
}

static pl_status otlphttp_create(const pl_create_settings *settings, const void *config, void **out,
                                 pl_err *err)
{
    const pl_otlp_exporter_config *cfg = config;
    /* Content-Type is set per request from the payload (proto or JSON). */
    pl_otlp_exporter *x = NULL;
    pl_status st =
        pl_otlp_exporter_create(settings, cfg, false, NULL, pl_otlphttp_classify, &x, err);
    if (st != PL_OK)
        return st;
    x->json = cfg->encoding && strcmp(cfg->encoding, "json") == 0;
    const char *overrides[PL_SIGNAL_COUNT] = {cfg->traces_endpoint, cfg->profiles_endpoint,
                                              cfg->logs_endpoint, cfg->metrics_endpoint};
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        if (overrides[s] && overrides[s][0])
            x->urls[s] = strdup(overrides[s]);
        else if (cfg->endpoint && cfg->endpoint[0])
            x->urls[s] = join_url(cfg->endpoint, signal_paths[s]);
        if ((overrides[s] && overrides[s][0]) || (cfg->endpoint && cfg->endpoint[0])) {
            if (!x->urls[s]) {
                pl_otlp_exporter_destroy(x);
                return pl_errf(err, PL_ERR_NOMEM, "out of memory");
            }
        }
    }
    *out = x;
    return PL_OK;
}

const pl_component_type pl_exporter_otlphttp = {
    PL_COMPONENT_HEAD("otlphttp", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &otlphttp_section),
    .description = "sends traces, profiles, logs and metrics over OTLP/HTTP (protobuf, or JSON "
                   "for traces and profiles), with a sending queue, retries and optional "
                   "persistence",
    PL_COMPONENT_LIFECYCLE(otlphttp_create, pl_otlp_exporter_start, pl_otlp_exporter_shutdown,
                           pl_otlp_exporter_destroy),
    .export = pl_otlp_exporter_export,
    .pending = pl_otlp_exporter_pending,
    .stored_queue = pl_otlp_exporter_stored_queue,
};
