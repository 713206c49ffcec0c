/*
 * otlp_common.c: the parts of the otlp and otlphttp exporters that do not
 * depend on the transport (see otlp_common.h): configuration, encoding
 * batches into Export*Request payloads, turning a payload into a request
 * (compression, gRPC framing) and handing answers back to the queue.
 */
#include "exporters/otlp_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

int pl_otlp_compression_parse(const char *text, pl_encoding *out)
{
    if (!text || !text[0] || strcasecmp(text, "gzip") == 0)
        *out = PL_ENCODING_GZIP;
    else if (strcasecmp(text, "zstd") == 0)
        *out = PL_ENCODING_ZSTD;
    else if (strcasecmp(text, "none") == 0 || strcasecmp(text, "identity") == 0)
        *out = PL_ENCODING_IDENTITY;
    else
        return -1;
    return 0;
}

bool pl_otlp_is_protobuf_response(const pl_http_client_result *res)
{
    size_t len = 0;
    const char *ct = pl_http_result_find(res, "content-type", &len);
    if (!ct || len == 0)
        return true;
    return (len >= 22 && strncasecmp(ct, "application/x-protobuf", 22) == 0) ||
           (len >= 20 && strncasecmp(ct, "application/protobuf", 20) == 0) ||
           (len >= 16 && strncasecmp(ct, "application/grpc", 16) == 0);
}

/* ---- send --------------------------------------------------------------- */

/* A payload in the queue is the request body ready for the wire, behind
 * one byte naming its coding (a pl_encoding):
 *     otlphttp: [coding][body, compressed with the coding]
 *     otlp:     [coding][5-byte gRPC prefix][message, compressed]
 * With tenant_header set, a batch's tenant rides along: the first byte has
 * PL_OTLP_PAYLOAD_TENANT and [length][tenant] sits before the body, so a
 * retried or stored payload still goes out under its own tenant.
 * so it is compressed once, at export, whatever the number of attempts, and
 * a payload stored by an earlier run is still sent with the coding it was
 * made with even if the configuration changed since. */

typedef struct send_ctx {
    pl_otlp_exporter *x;
    pl_queue_send *send;
    const uint8_t *payload; /* as queued (for x->observe) */
    size_t payload_len;
    pl_signal signal;
    pl_encoding coding;  /* of the body being sent */
    bool recoded;        /* gRPC: already re-sent with a fallback coding */
    const uint8_t *body; /* payload + 1: the queue's, or `own`'s */
    size_t body_len;
    pl_buf own; /* a payload recoded for a server that refused its coding */
    char coding_header[48];
    char *tenant_line;     /* "<tenant_header>: <tenant>" */
    char *auth_line;       /* from the authenticator, per request */
    const char *headers[]; /* exporter's headers + content type + tenant + auth + coding */
} send_ctx;

static void free_ctx(send_ctx *ctx)
{
    free(ctx->tenant_line);
    free(ctx->auth_line);
    pl_buf_free(&ctx->own);
    free(ctx);
}

/* ---- gRPC compression fallback ------------------------------------------
 * A gRPC server that cannot decode a request's grpc-encoding answers
 * UNIMPLEMENTED and lists what it accepts in grpc-accept-encoding (gRPC's
 * compression document). Data is not at fault, so instead of dropping it as
 * permanent the exporter re-sends that payload with gzip (which every OTLP
 * server must support) or identity when gzip is not listed either, and keeps
 * using that coding from then on (x->compression, x->refused_codings),
 * counted in compression_downgrades and logged once per coding. */

static bool list_has(const char *list, size_t len, const char *name)
{
    size_t nlen = strlen(name);
    size_t i = 0;
    while (i < len) {
        while (i < len && (list[i] == ' ' || list[i] == ','))
            i++;
        size_t start = i;
        while (i < len && list[i] != ',')
            i++;
        size_t end = i;
        while (end > start && list[end - 1] == ' ')
            end--;
        if (end - start == nlen && strncasecmp(list + start, name, nlen) == 0)
            return true;
    }
    return false;
}

/* True when `res` says the server cannot decode `coding`; *fallback is then
 * the coding to use instead. */
bool pl_otlp_grpc_coding_refused(const pl_http_client_result *res, pl_encoding coding,
                                 pl_encoding *fallback)
{
    if (res->transport_error || coding == PL_ENCODING_IDENTITY)
        return false;
    size_t len = 0;
    const char *status = pl_http_result_find(res, "grpc-status", &len);
    if (!status || len != 2 || strncmp(status, "12", 2) != 0) /* UNIMPLEMENTED */
        return false;
    const char *name = pl_encoding_name(coding);
    const char *accept = pl_http_result_find(res, "grpc-accept-encoding", &len);
    if (accept) {
        if (list_has(accept, len, name))
            return false; /* the coding is fine: the method itself is unimplemented */
        *fallback = coding != PL_ENCODING_GZIP && list_has(accept, len, "gzip")
                        ? PL_ENCODING_GZIP
                        : PL_ENCODING_IDENTITY;
        return true;
    }
    /* No list: only when the message names the coding (grpc-go: "grpc:
     * Decompressor is not installed for grpc-encoding \"zstd\""). */
    char message[200] = "";
    const char *m = pl_http_result_find(res, "grpc-message", &len);
    if (!m)
        return false;
    pl_grpc_message_decode(m, len, message, sizeof(message));
    if (!strstr(message, name))
        return false;
    *fallback = coding != PL_ENCODING_GZIP ? PL_ENCODING_GZIP : PL_ENCODING_IDENTITY;
    return true;
}

/* [coding][flag][length][message] with `from` -> the same with `to`. */
static pl_status grpc_recode(const uint8_t *body, size_t len, pl_encoding from, pl_encoding to,
                             pl_buf *out, pl_err *err)
{
    uint8_t *plain = NULL;
    size_t plain_len = 0;
    const uint8_t *msg = body + 5;
    size_t msg_len = len - 5;
    if (body[0]) {
        pl_status st = pl_decompress(from, msg, msg_len, SIZE_MAX / 2, &plain, &plain_len, err);
        if (st != PL_OK)
            return st;
        msg = plain;
        msg_len = plain_len;
    }
    pl_buf_reset(out);
    pl_buf_append_byte(out, (uint8_t)to);
    uint8_t prefix[5] = {to != PL_ENCODING_IDENTITY, 0, 0, 0, 0};
    pl_buf_append(out, prefix, 5);
    size_t at = out->len;
    pl_status st = PL_OK;
    if (to == PL_ENCODING_IDENTITY)
        pl_buf_append(out, msg, msg_len);
    else
        st = pl_compress(to, msg, msg_len, 0, out, err);
    free(plain);
    if (st != PL_OK)
        return st;
    if (!pl_buf_ok(out))
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    size_t n = out->len - at;
    if (n > UINT32_MAX)
        return pl_errf(err, PL_ERR_TOO_LARGE, "message of %zu bytes is too large for gRPC", n);
    out->data[2] = (uint8_t)(n >> 24);
    out->data[3] = (uint8_t)(n >> 16);
    out->data[4] = (uint8_t)(n >> 8);
    out->data[5] = (uint8_t)n;
    return PL_OK;
}

static void note_refused(pl_otlp_exporter *x, pl_encoding coding, pl_encoding fallback)
{
    unsigned bit = 1u << coding;
    if (!(x->refused_codings & bit)) {
        x->refused_codings |= bit;
        pl_warn(x->id,
                "the server does not accept %s-compressed messages (UNIMPLEMENTED); "
                "sending %s from now on",
                pl_encoding_name(coding), pl_encoding_name(fallback));
    }
    /* atomic: encodings on worker threads read it (a payload encoded with
     * the old coding meanwhile is recoded when sent, see otlp_send) */
    if (x->compression == coding || (x->refused_codings & (1u << x->compression)))
        __atomic_store_n(&x->compression, fallback, __ATOMIC_RELAXED);
    if (x->downgrades)
        (*x->downgrades)++;
}

static pl_status start_request(send_ctx *ctx, pl_err *err);

/* Hands a result to the queue, letting x->observe see it first. */
static void finish_send(pl_otlp_exporter *x, pl_queue_send *send, pl_signal signal,
                        const uint8_t *payload, size_t len, pl_send_result *result)
{
    if (x->observe)
        x->observe(x->observe_arg, signal, payload, len, result);
    pl_queue_send_done(send, result);
}

static void on_response(void *arg, const pl_http_client_result *res)
{
    send_ctx *ctx = arg;
    pl_otlp_exporter *x = ctx->x;
    pl_send_result result;
    x->classify(x, ctx->signal, res, &result);
    pl_encoding fallback;
    if (x->grpc && result.outcome != PL_SEND_OK && !ctx->recoded &&
        pl_otlp_grpc_coding_refused(res, ctx->coding, &fallback)) {
        note_refused(x, ctx->coding, fallback);
        pl_err err = {{0}};
        pl_status st =
            grpc_recode(ctx->body, ctx->body_len, ctx->coding, fallback, &ctx->own, &err);
        if (st == PL_OK) {
            ctx->recoded = true;
            ctx->coding = fallback;
            ctx->body = ctx->own.data + 1;
            ctx->body_len = ctx->own.len - 1;
            st = start_request(ctx, &err);
            if (st == PL_OK)
                return;
        }
        pl_send_result_set(&result, PL_SEND_RETRYABLE, "re-sending with %s: %s",
                           pl_encoding_name(fallback), err.msg[0] ? err.msg : pl_status_name(st));
    }
    pl_queue_send *send = ctx->send;
    const uint8_t *payload = ctx->payload;
    size_t payload_len = ctx->payload_len;
    pl_signal signal = ctx->signal;
    free_ctx(ctx);
    finish_send(x, send, signal, payload, payload_len, &result);
}

static pl_status start_request(send_ctx *ctx, pl_err *err)
{
    pl_otlp_exporter *x = ctx->x;
    size_t n =
        x->n_headers + (x->grpc ? 0 : 1) + (ctx->tenant_line != NULL) + (ctx->auth_line != NULL);
    if (ctx->coding != PL_ENCODING_IDENTITY) {
        snprintf(ctx->coding_header, sizeof(ctx->coding_header), "%s: %s",
                 x->grpc ? "grpc-encoding" : "Content-Encoding", pl_encoding_name(ctx->coding));
        ctx->headers[n++] = ctx->coding_header;
    }
    pl_http_client_request req = {
        .method = "POST",
        .url = x->urls[ctx->signal],
        .headers = ctx->headers,
        .n_headers = n,
        .body = ctx->body,
        .body_len = ctx->body_len,
        .version = x->grpc ? PL_HTTP_VERSION_2 : PL_HTTP_VERSION_1_1,
        .timeout_ms = x->timeout_ms,
        .tls = &x->tls,
    };
    return pl_http_client_send(x->client, &req, on_response, ctx, err);
}

static void otlp_send(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                      pl_queue_send *send)
{
    pl_otlp_exporter *x = arg;
    pl_send_result result;
    pl_err err = {{0}};
    if (!x->urls[signal]) {
        pl_send_result_set(&result, PL_SEND_PERMANENT, "no endpoint for %s",
                           pl_signal_name(signal));
        pl_queue_send_done(send, &result);
        return;
    }
    bool json = len && !x->grpc && (payload[0] & PL_OTLP_PAYLOAD_JSON);
    pl_encoding coding =
        len ? (pl_encoding)(payload[0] & ~(PL_OTLP_PAYLOAD_JSON | PL_OTLP_PAYLOAD_TENANT)) : 0;
    const char *tenant = NULL;
    size_t tenant_len = 0, skip = 1;
    if (len >= 2 && (payload[0] & PL_OTLP_PAYLOAD_TENANT)) {
        tenant_len = payload[1];
        tenant = (const char *)payload + 2;
        skip = 2 + tenant_len;
    }
    if (len < skip + (x->grpc ? 5u : 0u) || coding > PL_ENCODING_ZSTD ||
        (tenant && tenant_len == 0)) {
        pl_send_result_set(&result, PL_SEND_PERMANENT, "malformed queued payload");
        pl_queue_send_done(send, &result);
        return;
    }
    send_ctx *ctx = calloc(1, sizeof(*ctx) + (x->n_headers + 4) * sizeof(const char *));
    if (!ctx) {
        pl_send_result_set(&result, PL_SEND_RETRYABLE, "out of memory");
        pl_queue_send_done(send, &result);
        return;
    }
    ctx->x = x;
    ctx->send = send;
    ctx->payload = payload;
    ctx->payload_len = len;
    ctx->signal = signal;
    ctx->coding = coding;
    ctx->body = payload + skip;
    ctx->body_len = len - skip;
    pl_buf_init(&ctx->own);
    /* Queued (or stored) before the server refused its coding: recode now
     * rather than be refused again. */
    if (x->grpc && (x->refused_codings & (1u << coding))) {
        pl_encoding to = x->compression;
        if (x->refused_codings & (1u << to))
            to = PL_ENCODING_IDENTITY;
        pl_status st = grpc_recode(ctx->body, ctx->body_len, coding, to, &ctx->own, &err);
        if (st != PL_OK) {
            free_ctx(ctx);
            pl_send_result_set(&result, PL_SEND_PERMANENT, "re-coding a queued payload: %s",
                               err.msg);
            pl_queue_send_done(send, &result);
            return;
        }
        ctx->coding = to;
        ctx->recoded = true;
        ctx->body = ctx->own.data + 1;
        ctx->body_len = ctx->own.len - 1;
    }
    size_t n = 0;
    for (size_t i = 0; i < x->n_headers; i++)
        ctx->headers[n++] = x->headers[i];
    if (!x->grpc) /* per payload: a stored one keeps the body type it was made with */
        ctx->headers[n++] =
            json ? "Content-Type: application/json" : "Content-Type: application/x-protobuf";
    if (tenant && x->tenant_header) {
        size_t tl = strlen(x->tenant_header) + tenant_len + 3;
        ctx->tenant_line = malloc(tl);
        if (ctx->tenant_line) {
            snprintf(ctx->tenant_line, tl, "%s: %.*s", x->tenant_header, (int)tenant_len, tenant);
            ctx->headers[n++] = ctx->tenant_line;
        }
    }
    if (x->auth_id) {
        ctx->auth_line = pl_auth_client_header_for(x->host, x->auth_id);
        if (ctx->auth_line)
            ctx->headers[n++] = ctx->auth_line;
    }
    pl_status st = start_request(ctx, &err);
    if (st == PL_OK)
        return;
    free_ctx(ctx);
    pl_send_result_set(&result,
                       st == PL_ERR_INVALID || st == PL_ERR_UNSUPPORTED ? PL_SEND_PERMANENT
                                                                        : PL_SEND_RETRYABLE,
                       "%s", err.msg[0] ? err.msg : pl_status_name(st));
    finish_send(x, send, signal, payload, len, &result);
}

static bool encode_message(const pl_batch *batch, bool json, pl_buf *out)
{
    switch (batch->signal) {
    case PL_SIGNAL_TRACES:
        return json ? pl_otlp_json_encode_traces(&batch->data.traces, out)
                    : pl_otlp_encode_traces(&batch->data.traces, out);
    case PL_SIGNAL_PROFILES:
        return json ? pl_otlp_json_encode_profiles(&batch->data.profiles, out)
                    : pl_otlp_encode_profiles(&batch->data.profiles, out);
    default: /* logs and metrics pass through as the request they came in */
        pl_buf_append(out, batch->data.raw.ptr, batch->data.raw.len);
        return true;
    }
}

static pl_status otlp_encode(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                             pl_err *err)
{
    pl_otlp_exporter *x = arg;
    /* May run on a worker thread (exporters/queue.h): reads settings fixed
     * at create and the coding once, atomically. The loop reuses the
     * exporter's scratch buffer; a worker has one for the call. */
    pl_encoding coding = __atomic_load_n(&x->compression, __ATOMIC_RELAXED);
    pl_buf local;
    pl_buf_init(&local);
    pl_buf *scratch = pl_host_on_worker() ? &local : &x->scratch;
    /* JSON only where proflink has the model to encode: logs and metrics
     * pass through as the protobuf request they came in as. */
    bool json = x->json && !x->grpc &&
                (batch->signal == PL_SIGNAL_TRACES || batch->signal == PL_SIGNAL_PROFILES);
    pl_bytes tenant = {0};
    bool with_tenant = x->tenant_header && pl_batch_metadata_get(batch, "tenant", &tenant) &&
                       tenant.len > 0 && tenant.len <= 255 &&
                       !memchr(tenant.ptr, '\r', tenant.len) &&
                       !memchr(tenant.ptr, '\n', tenant.len) && !memchr(tenant.ptr, 0, tenant.len);
    pl_buf_append_byte(out, (uint8_t)((unsigned)coding | (json ? PL_OTLP_PAYLOAD_JSON : 0) |
                                      (with_tenant ? PL_OTLP_PAYLOAD_TENANT : 0)));
    if (with_tenant) {
        pl_buf_append_byte(out, (uint8_t)tenant.len);
        pl_buf_append(out, tenant.ptr, tenant.len);
    }
    size_t prefix_at = out->len;
    if (x->grpc) {
        uint8_t prefix[5] = {coding != PL_ENCODING_IDENTITY, 0, 0, 0, 0};
        pl_buf_append(out, prefix, 5);
    }
    size_t message_at = out->len;
    bool ok;
    if (coding == PL_ENCODING_IDENTITY) {
        ok = encode_message(batch, json, out);
    } else {
        pl_buf_reset(scratch);
        ok = encode_message(batch, json, scratch) && pl_buf_ok(scratch);
        pl_status st = PL_OK;
        if (ok)
            st = pl_compress(coding, scratch->data, scratch->len, 0, out, err);
        if (scratch == &local || scratch->cap > (4u << 20)) /* no huge buffer kept around */
            pl_buf_free(scratch);
        if (st != PL_OK)
            return st;
    }
    if (!ok || !pl_buf_ok(out))
        return pl_errf(err, PL_ERR_NOMEM, "out of memory encoding %s",
                       pl_signal_name(batch->signal));
    if (x->grpc) {
        size_t n = out->len - message_at;
        if (n > UINT32_MAX)
            return pl_errf(err, PL_ERR_TOO_LARGE, "message of %zu bytes is too large for gRPC", n);
        out->data[prefix_at + 1] = (uint8_t)(n >> 24);
        out->data[prefix_at + 2] = (uint8_t)(n >> 16);
        out->data[prefix_at + 3] = (uint8_t)(n >> 8);
        out->data[prefix_at + 4] = (uint8_t)n;
    }
    *items = pl_batch_items(batch);
    return PL_OK;
}

/* ---- lifecycle ---------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s && s[0] ? strdup(s) : NULL;
}

static pl_status add_header(pl_otlp_exporter *x, const char *name, const char *value)
{
    char **h = realloc(x->headers, (x->n_headers + 1) * sizeof(*h));
    if (!h)
        return PL_ERR_NOMEM;
    x->headers = h;
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = malloc(n);
    if (!line)
        return PL_ERR_NOMEM;
    snprintf(line, n, "%s: %s", name, value);
    x->headers[x->n_headers++] = line;
    return PL_OK;
}

pl_status pl_otlp_exporter_create(const pl_create_settings *settings,
                                  const pl_otlp_exporter_config *cfg, bool grpc,
                                  const char *const *extra_headers, pl_otlp_classify_fn classify,
                                  pl_otlp_exporter **out, pl_err *err)
{
    pl_otlp_exporter *x = calloc(1, sizeof(*x));
    if (!x)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    x->grpc = grpc;
    x->id = strdup(settings->id ? settings->id : (grpc ? "otlp" : "otlphttp"));
    x->loop = settings->loop;
    x->stats = settings->stats;
    x->host = settings->host;
    if (grpc && x->stats)
        x->downgrades = pl_stats_counter(x->stats, "compression_downgrades",
                                         "payloads re-sent with another coding because the "
                                         "server refused the configured compression");
    x->classify = classify;
    x->timeout_ms = cfg->timeout > 0 ? (uint64_t)(cfg->timeout / 1000000) : 0;
    if (cfg->timeout > 0 && x->timeout_ms == 0)
        x->timeout_ms = 1;
    if (pl_otlp_compression_parse(cfg->compression, &x->compression) != 0) {
        pl_otlp_exporter_destroy(x);
        return pl_errf(err, PL_ERR_INVALID, "compression: unknown value \"%s\"", cfg->compression);
    }
    x->tls.insecure_skip_verify = cfg->tls.insecure_skip_verify;
    x->tls.ca_file = dup_or_null(cfg->tls.ca_file);
    x->tls.cert_file = dup_or_null(cfg->tls.cert_file);
    x->tls.key_file = dup_or_null(cfg->tls.key_file);
    x->tenant_header = dup_or_null(cfg->tenant_header);
    if (pl_auth_client_resolve(x->host, &cfg->auth, &x->auth_id, err) != PL_OK) {
        pl_otlp_exporter_destroy(x);
        return PL_ERR_INVALID;
    }
    pl_status st = PL_OK;
    for (size_t i = 0; extra_headers && extra_headers[i] && st == PL_OK; i += 2)
        st = add_header(x, extra_headers[i], extra_headers[i + 1]);
    for (size_t i = 0; i < cfg->headers.n && st == PL_OK; i++)
        st = add_header(x, cfg->headers.keys[i],
                        cfg->headers.values[i] ? cfg->headers.values[i] : "");
    if (st != PL_OK || !x->id) {
        pl_otlp_exporter_destroy(x);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    x->client = pl_http_client_new(settings->loop, err);
    if (!x->client) {
        pl_otlp_exporter_destroy(x);
        return PL_ERR_INTERNAL;
    }
    pl_queue_sender sender = {otlp_encode, otlp_send, x, x->compression != PL_ENCODING_IDENTITY,
                              true};
    x->queue = pl_queue_new(settings, &cfg->sending_queue, &cfg->retry_on_failure, &sender, err);
    if (!x->queue) {
        pl_otlp_exporter_destroy(x);
        return PL_ERR_INTERNAL;
    }
    *out = x;
    return PL_OK;
}

pl_status pl_otlp_exporter_start(void *self, pl_err *err)
{
    pl_otlp_exporter *x = self;
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        if (x->urls[s])
            pl_debug(x->id, "%s -> %s", pl_signal_name((pl_signal)s), x->urls[s]);
    return pl_queue_start(x->queue, err);
}

pl_status pl_otlp_exporter_export(void *self, const pl_batch *batch)
{
    pl_otlp_exporter *x = self;
    return pl_queue_export(x->queue, batch);
}

void pl_otlp_exporter_shutdown(void *self)
{
    pl_otlp_exporter *x = self;
    pl_queue_shutdown(x->queue);
}

size_t pl_otlp_exporter_pending(void *self)
{
    pl_otlp_exporter *x = self;
    return pl_queue_pending(x->queue);
}

struct pl_queue *pl_otlp_exporter_stored_queue(void *self)
{
    pl_otlp_exporter *x = self;
    return pl_queue_stored(x->queue);
}

void pl_otlp_exporter_destroy(void *self)
{
    pl_otlp_exporter *x = self;
    if (!x)
        return;
    /* Cancel requests first: their answers go back to the queue, which keeps
     * stored entries on disk and counts in-memory ones when destroyed. */
    if (x->client)
        pl_http_client_close(x->client);
    if (x->queue)
        pl_queue_destroy(x->queue);
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        free(x->urls[s]);
    for (size_t i = 0; i < x->n_headers; i++)
        free(x->headers[i]);
    free(x->headers);
    pl_buf_free(&x->scratch);
    free((char *)x->tls.ca_file);
    free((char *)x->tls.cert_file);
    free((char *)x->tls.key_file);
    free(x->tenant_header);
    free(x->auth_id);
    free(x->id);
    free(x);
}

/* ---- gRPC helpers ------------------------------------------------------- */

bool pl_grpc_code_retryable(int code, bool has_retry_info)
{
    switch (code) {
    case 1:  /* CANCELLED */
    case 4:  /* DEADLINE_EXCEEDED */
    case 10: /* ABORTED */
    case 11: /* OUT_OF_RANGE */
    case 14: /* UNAVAILABLE */
    case 15: /* DATA_LOSS */
        return true;
    case 8: /* RESOURCE_EXHAUSTED: throttling only when the server says when to come back */
        return has_retry_info;
    default:
        return false;
    }
}

int pl_grpc_code_from_http(int http_status)
{
    switch (http_status) {
    case 400:
        return 13;
    case 401:
        return 16;
    case 403:
        return 7;
    case 404:
        return 12;
    case 429:
    case 502:
    case 503:
    case 504:
        return 14;
    case 431:
        return 13;
    default:
        return 2;
    }
}

uint8_t *pl_otlp_base64_decode(const char *in, size_t len, size_t *out_len)
{
    while (len && (in[len - 1] == '=' || in[len - 1] == ' '))
        len--;
    if (len % 4 == 1)
        return NULL;
    uint8_t *out = malloc(len * 3 / 4 + 3);
    if (!out)
        return NULL;
    size_t bad;
    if (!pl_otlp_base64_decode_into(in, len, out, out_len, &bad)) {
        free(out);
        return NULL;
    }
    return out;
}

void pl_grpc_message_decode(const char *in, size_t len, char *out, size_t out_size)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < out_size; i++) {
        if (in[i] == '%' && i + 2 < len && pl_hex_digit(in[i + 1]) >= 0 &&
            pl_hex_digit(in[i + 2]) >= 0) {
            out[n++] = (char)(pl_hex_digit(in[i + 1]) * 16 + pl_hex_digit(in[i + 2]));
            i += 2;
        } else {
            out[n++] = in[i];
        }
    }
    out[n] = 0;
}
