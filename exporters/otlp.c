/*
 * otlp.c: the `otlp` exporter: OTLP over gRPC, i.e. one unary Export call
 * per batch on an HTTP/2 stream (h2c with prior knowledge for cleartext,
 * ALPN h2 over TLS), the message behind gRPC's 5-byte prefix, and the
 * outcome in the grpc-status trailer.
 *
 * The endpoint is host:port (TLS unless tls.insecure is set) or a URL whose
 * scheme decides (http:// cleartext, https:// TLS), as in the Collector.
 *
 * Classification follows the OTLP specification's table:
 *   OK                         accepted; partial_success logged and counted
 *   CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE,
 *   DATA_LOSS                  retryable
 *   RESOURCE_EXHAUSTED         retryable only when the status details carry
 *                              a google.rpc.RetryInfo (throttling); without
 *                              it (e.g. message too large) permanent
 *   everything else            permanent
 * A RetryInfo delay (from grpc-status-details-bin) is honoured for any
 * retryable code. When a response has no grpc-status (a proxy answering,
 * say), the HTTP status is mapped as gRPC's "HTTP to gRPC status" document
 * says. No answer at all (refused, reset, timeout) is UNAVAILABLE.
 * One exception is handled before the table, in otlp_common.c: UNIMPLEMENTED
 * because the server cannot decode the message's compression (its
 * grpc-accept-encoding lacks it) re-sends the payload with gzip or identity
 * and keeps that coding, instead of dropping the data.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "exporters/otlp_common.h"
#include "proto/otlp_pb.h"

static const char *const grpc_paths[PL_SIGNAL_COUNT] = {
    [PL_SIGNAL_TRACES] = "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    [PL_SIGNAL_PROFILES] =
        "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export",
    [PL_SIGNAL_LOGS] = "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
    [PL_SIGNAL_METRICS] = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
};

static const char *const grpc_code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

static const char *grpc_code_name(int code)
{
    return code >= 0 && code <= 16 ? grpc_code_names[code] : "UNKNOWN_CODE";
}

/* As the Collector checks it: the endpoint, without an http:// or https://
 * scheme, must be host:port with a numeric port (gRPC has no default port:
 * `example.com` alone would silently mean 443). NULL or the problem. */
static const char *endpoint_port_problem(const char *ep)
{
    if (strncmp(ep, "http://", 7) == 0)
        ep += 7;
    else if (strncmp(ep, "https://", 8) == 0)
        ep += 8;
    size_t len = strlen(ep);
    while (len && ep[len - 1] == '/')
        len--;
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (ep[i] == ':')
            colon = ep + i;
    if (ep[0] == '[') { /* [v6]:port */
        const char *close = memchr(ep, ']', len);
        if (!close || close + 1 != colon)
            return "missing port: write host:port, e.g. tempo:4317 or [::1]:4317";
    } else if (colon && memchr(ep, ':', (size_t)(colon - ep))) {
        return "an IPv6 address needs brackets: [::1]:4317";
    }
    if (!colon)
        return "missing port: write host:port, e.g. tempo:4317 (gRPC has no default port)";
    size_t digits = len - (size_t)(colon + 1 - ep);
    if (colon == ep)
        return "missing host: write host:port, e.g. tempo:4317";
    if (digits == 0 || digits > 5)
        return "invalid port: write host:port with a port from 1 to 65535";
    long port = 0;
    for (const char *d = colon + 1; d < ep + len; d++) {
        if (*d < '0' || *d > '9')
            return "invalid port: write host:port with a port from 1 to 65535";
        port = port * 10 + (*d - '0');
    }
    if (port < 1 || port > 65535)
        return "invalid port: write host:port with a port from 1 to 65535";
    return NULL;
}

static int otlp_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    pl_otlp_exporter_config *cfg = cfg_;
    int errors = 0;
    if (!cfg->endpoint || !cfg->endpoint[0]) {
        pl_cfg_errorf(ctx, "endpoint", "is required (e.g. tempo:4317)");
        errors++;
    } else if (strstr(cfg->endpoint, "://") && strncmp(cfg->endpoint, "http://", 7) != 0 &&
               strncmp(cfg->endpoint, "https://", 8) != 0) {
        pl_cfg_errorf(ctx, "endpoint", "must be host:port or an http:// or https:// URL");
        errors++;
    } else {
        const char *problem = endpoint_port_problem(cfg->endpoint);
        if (problem) {
            pl_cfg_errorf(ctx, "endpoint", "'%s': %s", cfg->endpoint, problem);
            errors++;
        }
    }
    pl_encoding enc;
    errors += pl_cfg_check(ctx, pl_otlp_compression_parse(cfg->compression, &enc) == 0,
                           "compression", "must be gzip, zstd or none");
    return errors;
}

/* pl_otlp_grpc_fields is also the `protocol.otlp` table of the
 * loadbalancing exporter. */
#include "exporters/otlp.config.inc"

/* Reads the response message behind its 5-byte prefix into a partial
 * success (decompressing if the server compressed it). */
static void read_partial_success(const pl_http_client_result *res, pl_send_result *r)
{
    if (res->body_len < 5 || res->body_truncated)
        return;
    uint32_t len = (uint32_t)res->body[1] << 24 | (uint32_t)res->body[2] << 16 |
                   (uint32_t)res->body[3] << 8 | res->body[4];
    if (len > res->body_len - 5)
        return;
    const uint8_t *msg = res->body + 5;
    uint8_t *inflated = NULL;
    size_t msg_len = len;
    if (res->body[0] == 1) {
        size_t enc_len = 0;
        const char *enc_name = pl_http_result_find(res, "grpc-encoding", &enc_len);
        pl_encoding enc;
        if (!enc_name || !pl_encoding_parse(enc_name, enc_len, &enc))
            return;
        if (pl_decompress(enc, msg, len, 64 * 1024, &inflated, &msg_len, NULL) != PL_OK)
            return;
        msg = inflated;
    }
    int64_t rejected = 0;
    pl_bytes text = {0};
    if (pl_otlp_decode_export_response(msg, msg_len, &rejected, &text, NULL) == PL_OK) {
        r->rejected_items = rejected > 0 ? (uint64_t)rejected : 0;
        if (text.len)
            snprintf(r->message, sizeof(r->message), "%.*s", (int)text.len, (const char *)text.ptr);
    }
    free(inflated);
}

void pl_otlp_grpc_classify(pl_otlp_exporter *x, pl_signal signal, const pl_http_client_result *res,
                           pl_send_result *r)
{
    if (res->transport_error) {
        pl_send_result_set(r, PL_SEND_RETRYABLE, "UNAVAILABLE: %s: %s", x->urls[signal],
                           res->error ? res->error : "transport error");
        return;
    }
    size_t len = 0;
    const char *status_text = pl_http_result_find(res, "grpc-status", &len);
    int code;
    if (status_text && len > 0 && len < 4) {
        code = 0;
        for (size_t i = 0; i < len; i++)
            code = (status_text[i] >= '0' && status_text[i] <= '9')
                       ? code * 10 + (status_text[i] - '0')
                       : 2;
    } else if (res->status == 200) {
        code = 2; /* UNKNOWN: a 200 without grpc-status */
    } else {
        code = pl_grpc_code_from_http(res->status);
    }
    if (code == 0) {
        pl_send_result_set(r, PL_SEND_OK, NULL);
        read_partial_success(res, r);
        return;
    }
    char message[200] = "";
    const char *m = pl_http_result_find(res, "grpc-message", &len);
    if (m)
        pl_grpc_message_decode(m, len, message, sizeof(message));
    int64_t retry_delay = -1;
    const char *details = pl_http_result_find(res, "grpc-status-details-bin", &len);
    if (details) {
        size_t bin_len = 0;
        uint8_t *bin = pl_otlp_base64_decode(details, len, &bin_len);
        if (bin) {
            pl_bytes dmsg = {0};
            int32_t dcode = 0;
            if (pl_rpc_status_decode(bin, bin_len, &dcode, &dmsg, &retry_delay, NULL) != PL_OK)
                retry_delay = -1;
            else if (!message[0] && dmsg.len)
                snprintf(message, sizeof(message), "%.*s", (int)dmsg.len, (const char *)dmsg.ptr);
            free(bin);
        }
    }
    bool retryable = pl_grpc_code_retryable(code, retry_delay >= 0);
    pl_send_result_set(r, retryable ? PL_SEND_RETRYABLE : PL_SEND_PERMANENT,
                       "%s (%d)%s from %s (HTTP %d)%s%s", grpc_code_name(code), code,
                       retryable ? "" : ", not retryable,", x->urls[signal], res->status,
                       message[0] ? ": " : "", message);
    if (retryable && retry_delay > 0)
        r->retry_after_ns = retry_delay;
}

static pl_status otlp_create(const pl_create_settings *settings, const void *config, void **out,
                             pl_err *err)
{
    const pl_otlp_exporter_config *cfg = config;
    pl_encoding enc;
    if (pl_otlp_compression_parse(cfg->compression, &enc) != 0)
        return pl_errf(err, PL_ERR_INVALID, "compression: unknown value \"%s\"", cfg->compression);
    if (!cfg->endpoint || !cfg->endpoint[0])
        return pl_errf(err, PL_ERR_INVALID, "endpoint is required");
    char timeout[32] = "";
    uint64_t timeout_ms = cfg->timeout > 0 ? (uint64_t)cfg->timeout / 1000000 : 0;
    if (timeout_ms > 0 && timeout_ms <= 99999999)
        snprintf(timeout, sizeof(timeout), "%llum", (unsigned long long)timeout_ms);
    const char *headers[16];
    size_t n = 0;
    headers[n++] = "Content-Type";
    headers[n++] = "application/grpc";
    headers[n++] = "TE";
    headers[n++] = "trailers";
    headers[n++] = "grpc-accept-encoding";
    headers[n++] = "identity,gzip,deflate,zstd";
    if (timeout[0]) {
        headers[n++] = "grpc-timeout";
        headers[n++] = timeout;
    }
    headers[n++] = NULL;
    headers[n++] = NULL;

    pl_otlp_exporter *x = NULL;
    pl_status st =
        pl_otlp_exporter_create(settings, cfg, true, headers, pl_otlp_grpc_classify, &x, err);
    if (st != PL_OK)
        return st;
    const char *ep = cfg->endpoint;
    const char *scheme = cfg->tls.insecure ? "http://" : "https://";
    if (strncmp(ep, "http://", 7) == 0 || strncmp(ep, "https://", 8) == 0)
        scheme = "";
    size_t ep_len = strlen(ep);
    while (ep_len && ep[ep_len - 1] == '/')
        ep_len--;
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        size_t size = strlen(scheme) + ep_len + strlen(grpc_paths[s]) + 1;
        x->urls[s] = malloc(size);
        if (!x->urls[s]) {
            pl_otlp_exporter_destroy(x);
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
        snprintf(x->urls[s], size, "%s%.*s%s", scheme, (int)ep_len, ep, grpc_paths[s]);
    }
    *out = x;
    return PL_OK;
}

const pl_component_type pl_exporter_otlp = {
    PL_COMPONENT_HEAD("otlp", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &otlp_section),
    .description = "sends traces, profiles, logs and metrics over OTLP/gRPC, with a sending "
                   "queue, retries and optional persistence",
    PL_COMPONENT_LIFECYCLE(otlp_create, pl_otlp_exporter_start, pl_otlp_exporter_shutdown,
                           pl_otlp_exporter_destroy),
    .export = pl_otlp_exporter_export,
    .pending = pl_otlp_exporter_pending,
    .stored_queue = pl_otlp_exporter_stored_queue,
};
