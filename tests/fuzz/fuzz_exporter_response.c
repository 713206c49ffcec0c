/*
 * fuzz_exporter_response.c: a backend's answer as the otlphttp and otlp
 * (gRPC) exporters read it: status, Retry-After, grpc-status, grpc-message
 * (percent-encoded), grpc-status-details-bin (base64 google.rpc.Status with
 * RetryInfo), Content-Type and a body (partial_success or a Status, gRPC
 * framed and possibly compressed). A hostile or broken backend must never
 * crash the exporter.
 *
 * Input layout: byte 0 picks the exporter, the header set and the status;
 * then five fields separated by 0xFF bytes: retry-after, grpc-status,
 * grpc-message, grpc-status-details-bin, body. The grpc-message bytes are
 * also sent as grpc-accept-encoding, for the compression fallback check.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exporters/otlp_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    const uint8_t *p = data + 1, *end = data + size;
    const uint8_t *field[5] = {0};
    size_t len[5] = {0};
    for (int i = 0; i < 5; i++) {
        const uint8_t *sep = i < 4 ? memchr(p, 0xFF, (size_t)(end - p)) : NULL;
        field[i] = p;
        len[i] = (size_t)((sep ? sep : end) - p);
        p = sep ? sep + 1 : end;
    }
    static const int statuses[] = {200, 400, 429, 503, 502, 504, 500, 404};
    static const char *const types[] = {"application/x-protobuf", "application/grpc",
                                        "application/json", "text/plain"};
    pl_http_header headers[6], trailers[6];
    size_t nh = 0, nt = 0;
    headers[nh++] = (pl_http_header){"Content-Type", 12, types[(mode >> 3) & 3],
                                     strlen(types[(mode >> 3) & 3])};
    headers[nh++] = (pl_http_header){"Retry-After", 11, (const char *)field[0], len[0]};
    pl_http_header *status_dst = (mode & 0x20) ? headers : trailers; /* Trailers-Only or not */
    size_t *status_n = (mode & 0x20) ? &nh : &nt;
    status_dst[(*status_n)++] = (pl_http_header){"grpc-status", 11, (const char *)field[1], len[1]};
    status_dst[(*status_n)++] =
        (pl_http_header){"grpc-message", 12, (const char *)field[2], len[2]};
    trailers[nt++] =
        (pl_http_header){"grpc-status-details-bin", 23, (const char *)field[3], len[3]};
    if (mode & 0x40)
        trailers[nt++] = (pl_http_header){"grpc-encoding", 13, "gzip", 4};
    headers[nh++] = (pl_http_header){"grpc-accept-encoding", 20, (const char *)field[2], len[2]};

    pl_http_client_result res;
    memset(&res, 0, sizeof(res));
    res.transport_error = (mode & 0x80) && (mode & 0x40) && (mode & 0x20) ? 7 : 0;
    res.error = res.transport_error ? "connection refused" : NULL;
    res.status = statuses[mode & 7];
    res.headers = headers;
    res.n_headers = nh;
    res.trailers = trailers;
    res.n_trailers = nt;
    res.body = field[4];
    res.body_len = len[4];

    pl_otlp_exporter x;
    memset(&x, 0, sizeof(x));
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        x.urls[s] = (char *)"http://backend/v1/traces";
    pl_send_result out;
    if (mode & 0x80)
        pl_otlp_grpc_classify(&x, PL_SIGNAL_TRACES, &res, &out);
    else
        pl_otlphttp_classify(&x, PL_SIGNAL_TRACES, &res, &out);
    /* invariants: a valid outcome, a terminated message */
    if (out.outcome > PL_SEND_PERMANENT || !memchr(out.message, 0, sizeof(out.message)))
        abort();
    if (out.retry_after_ns < 0)
        abort();

    for (int c = PL_ENCODING_IDENTITY; c <= PL_ENCODING_ZSTD; c++) {
        pl_encoding fallback = PL_ENCODING_ZSTD;
        if (pl_otlp_grpc_coding_refused(&res, (pl_encoding)c, &fallback) &&
            (fallback == (pl_encoding)c || c == PL_ENCODING_IDENTITY ||
             (fallback != PL_ENCODING_GZIP && fallback != PL_ENCODING_IDENTITY)))
            abort(); /* never "fall back" to the refused coding or away from identity */
    }

    /* the helpers on their own */
    size_t n = 0;
    uint8_t *bin = pl_otlp_base64_decode((const char *)field[3], len[3], &n);
    free(bin);
    char text[64];
    pl_grpc_message_decode((const char *)field[2], len[2], text, sizeof(text));
    pl_http_parse_retry_after((const char *)field[0], len[0], 1700000000000000000ULL);
    return 0;
}
