/*
 * fuzz_http_request.c: bytes from a client through the whole request path of
 * the shared HTTP server, without sockets (pl_http_server_feed): preface
 * sniffing, HTTP/1.1 parsing (keep-alive, pipelining, chunked bodies,
 * Expect, limits) or HTTP/2 (nghttp2 session, streams, trailers), then what
 * the OTLP receiver does with a body: Content-Encoding, decompression with a
 * limit, and the OTLP protobuf decoders.
 *
 * The first two bytes choose the limits, the protocols and how the input is
 * split into reads, so one corpus covers split points and limit edges; bit
 * 0x10 of the first also turns on CORS (preflights, origin matching) and an
 * authenticator (checked at the headers and at dispatch).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "net/compress.h"
#include "net/http_cors.h"
#include "net/http_server.h"
#include "otlp_pb.h"

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    (void)arg;
    size_t total = strlen(req->method) + strlen(req->path) + strlen(req->query);
    for (size_t i = 0; i < req->n_headers; i++)
        total += req->headers[i].name_len + req->headers[i].value_len;
    size_t ce_len = 0;
    const char *ce = pl_http_header_get(req, "content-encoding", &ce_len);
    pl_encoding enc = PL_ENCODING_IDENTITY;
    int status = 200;
    if (req->too_large) {
        status = 413;
    } else if (ce && !pl_encoding_parse(ce, ce_len, &enc)) {
        status = 415;
    } else {
        uint8_t *plain = NULL;
        size_t plain_len = 0;
        pl_err err;
        pl_status st = pl_decompress(enc, req->body ? req->body : (const uint8_t *)"",
                                     req->body_len, 1 << 20, &plain, &plain_len, &err);
        if (st == PL_OK) {
            pl_signal signal =
                strstr(req->path, "profiles") ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES;
            pl_batch *b = pl_batch_new(signal);
            if (b) {
                st = signal == PL_SIGNAL_TRACES
                         ? pl_otlp_decode_traces(b, plain, plain_len, &err)
                         : pl_otlp_decode_profiles(b, plain, plain_len, &err);
                pl_batch_free(b);
            }
            free(plain);
        }
        status = pl_status_http(st);
    }
    static const pl_http_header h[] = {{"Content-Type", 12, "text/plain", 10}};
    static const pl_http_header t[] = {{"grpc-status", 11, "0", 1}};
    if (req->http_version == 2 && (total & 1))
        pl_http_respond_with_trailers(res, status, h, 1, (total & 2) ? NULL : "x",
                                      (total & 2) ? 0 : 1, t, 1);
    else
        pl_http_respond(res, status, h, 1, "ok", 2);
}

static bool check_token(void *arg, const pl_http_request *req, char *user, size_t cap)
{
    (void)arg;
    size_t len = 0;
    const char *v = pl_http_header_get(req, "authorization", &len);
    if (!v || len != 8 || memcmp(v, "Bearer t", 8) != 0)
        return false;
    snprintf(user, cap, "fuzz");
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *origins[] = {"https://*.example.com", "http://a*b*c"};
    static char *allowed[] = {"x-*", "*"};
    static const pl_http_cors_config cors = {{origins, 2}, {allowed, 1}, 60};
    static const pl_http_auth auth = {"fuzz", "Bearer", check_token, NULL};
    if (size < 2)
        return 0;
    pl_http_server_options opt;
    memset(&opt, 0, sizeof(opt));
    opt.max_body_size = 16 + (size_t)data[0] * 64;
    opt.max_header_size = 128 + (size_t)(data[0] & 0x0f) * 256;
    opt.http1 = true;
    opt.h2c = data[1] & 1;
    opt.deliver_too_large = (data[1] & 2) != 0;
    opt.max_concurrent_streams = 4;
    if (data[0] & 0x10) {
        opt.cors = &cors;
        opt.auth = &auth;
    }
    size_t chunk = data[1] >> 2; /* 0 = everything in one read */
    pl_buf out;
    pl_buf_init(&out);
    pl_http_server_feed(&opt, handler, NULL, data + 2, size - 2, chunk, &out);
    pl_buf_free(&out);
    return 0;
}
