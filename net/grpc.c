/*
 * grpc.c: unary gRPC request reading and answering (see grpc.h).
 *
 * Answers to errors are Trailers-Only (one HEADERS frame with END_STREAM),
 * which every gRPC client accepts and which costs the least. Successful
 * answers are never compressed: responses are a few bytes.
 */
#include "grpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "net/compress.h"
#include "otlp_pb.h"

bool pl_grpc_is_grpc(const pl_http_request *req)
{
    size_t len;
    const char *ct = pl_http_header_get(req, "content-type", &len);
    return ct && len >= 16 && strncasecmp(ct, "application/grpc", 16) == 0 &&
           (len == 16 || ct[16] == '+' || ct[16] == ';');
}

void pl_grpc_respond_415(pl_http_response *res)
{
    static const pl_http_header h[] = {{"content-type", 12, "text/plain", 10}};
    static const char body[] = "415 unsupported media type, want application/grpc\n";
    pl_http_respond(res, 415, h, 1, body, sizeof(body) - 1);
}

int pl_grpc_parse_prefix(const uint8_t *p, size_t avail, bool *compressed, uint32_t *len)
{
    if (avail < 5)
        return -1;
    *compressed = p[0] != 0;
    *len = ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 8) | p[4];
    return 0;
}

pl_status pl_grpc_read_message(pl_http_request *req, size_t max_msg_size, pl_grpc_message *out,
                               pl_err *err)
{
    memset(out, 0, sizeof(*out));
    if (req->too_large)
        return pl_errf(err, PL_ERR_TOO_LARGE, "grpc: received message larger than max (%zu bytes)",
                       max_msg_size);
    size_t enc_len;
    const char *enc_name = pl_http_header_get(req, "grpc-encoding", &enc_len);
    pl_encoding enc = PL_ENCODING_IDENTITY;
    if (enc_name && !pl_encoding_parse(enc_name, enc_len, &enc))
        return pl_errf(err, PL_ERR_UNSUPPORTED,
                       "grpc: Decompressor is not installed for grpc-encoding \"%.*s\"",
                       (int)(enc_len > 64 ? 64 : enc_len), enc_name);
    bool compressed;
    uint32_t len;
    if (pl_grpc_parse_prefix(req->body, req->body_len, &compressed, &len) != 0)
        return pl_errf(err, PL_ERR_INVALID,
                       "grpc: request body of %zu bytes has no complete message prefix",
                       req->body_len);
    if (req->body[0] > 1)
        return pl_errf(err, PL_ERR_INVALID, "grpc: bad compressed flag %u", req->body[0]);
    if ((size_t)len != req->body_len - 5) {
        if ((size_t)len < req->body_len - 5)
            return pl_errf(err, PL_ERR_INVALID,
                           "grpc: more than one request message in a unary call");
        return pl_errf(err, PL_ERR_INVALID, "grpc: message prefix says %u bytes but %zu arrived",
                       len, req->body_len - 5);
    }
    if (compressed && !enc_name)
        return pl_errf(err, PL_ERR_INVALID,
                       "grpc: compressed flag set with no grpc-encoding header");
    if (!compressed || enc == PL_ENCODING_IDENTITY) {
        if (compressed)
            return pl_errf(err, PL_ERR_INVALID,
                           "grpc: compressed flag set with grpc-encoding identity");
        if (len > max_msg_size)
            return pl_errf(err, PL_ERR_TOO_LARGE,
                           "grpc: received message larger than max (%u vs. %zu)", len,
                           max_msg_size);
        out->owner_size = req->body_len;
        out->owner = pl_http_request_take_body(req);
        out->data = out->owner + 5;
        out->len = len;
        return PL_OK;
    }
    uint8_t *plain;
    size_t plain_len;
    pl_err derr = {{0}};
    pl_status st = pl_decompress(enc, req->body + 5, len, max_msg_size, &plain, &plain_len, &derr);
    if (st == PL_ERR_TOO_LARGE)
        return pl_errf(err, st, "grpc: received message after decompression larger than max %zu",
                       max_msg_size);
    if (st != PL_OK)
        return pl_errf(err, st, "grpc: failed to decompress the message: %s", derr.msg);
    out->owner = plain;
    out->owner_size = plain_len;
    out->data = plain;
    out->len = plain_len;
    return PL_OK;
}

static const pl_http_header grpc_headers[] = {
    {"content-type", 12, "application/grpc", 16},
    {"grpc-accept-encoding", 20, "identity,gzip,zstd,deflate", 26},
};

void pl_grpc_respond(pl_http_response *res, const void *msg, size_t len)
{
    uint8_t *framed = malloc(len + 5);
    if (!framed) {
        pl_grpc_respond_error(res, PL_GRPC_UNAVAILABLE, "out of memory", -1);
        return;
    }
    framed[0] = 0;
    framed[1] = (uint8_t)(len >> 24);
    framed[2] = (uint8_t)(len >> 16);
    framed[3] = (uint8_t)(len >> 8);
    framed[4] = (uint8_t)len;
    if (len)
        memcpy(framed + 5, msg, len);
    static const pl_http_header ok[] = {{"grpc-status", 11, "0", 1}};
    pl_http_respond_with_trailers(res, 200, grpc_headers, 2, framed, len + 5, ok, 1);
    free(framed);
}

void pl_grpc_percent_encode(const char *in, pl_buf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            pl_buf_append_byte(out, *p);
        } else {
            pl_buf_append_byte(out, '%');
            pl_buf_append_byte(out, (uint8_t)hex[*p >> 4]);
            pl_buf_append_byte(out, (uint8_t)hex[*p & 15]);
        }
    }
}

void pl_grpc_respond_error(pl_http_response *res, int code, const char *message,
                           int64_t retry_delay_ns)
{
    if (!message)
        message = "";
    char code_text[12];
    snprintf(code_text, sizeof(code_text), "%d", code);
    pl_buf msg, details, status;
    pl_buf_init(&msg);
    pl_buf_init(&details);
    pl_buf_init(&status);
    pl_grpc_percent_encode(message, &msg);
    pl_http_header trailers[3];
    size_t n = 0;
    trailers[n++] = (pl_http_header){"grpc-status", 11, code_text, strlen(code_text)};
    if (msg.len && pl_buf_ok(&msg))
        trailers[n++] = (pl_http_header){"grpc-message", 12, (const char *)msg.data, msg.len};
    if (retry_delay_ns >= 0 && pl_rpc_status_encode(&status, code, message, retry_delay_ns) &&
        pl_buf_ok(&status)) {
        pl_base64_encode(status.data, status.len, &details, false);
        if (pl_buf_ok(&details))
            trailers[n++] = (pl_http_header){"grpc-status-details-bin", 23,
                                             (const char *)details.data, details.len};
    }
    pl_http_respond_with_trailers(res, 200, grpc_headers, 1, NULL, 0, trailers, n);
    pl_buf_free(&msg);
    pl_buf_free(&details);
    pl_buf_free(&status);
}
