/*
 * fuzz_grpc_frame.c: a gRPC request body (5-byte prefix, compressed flag,
 * grpc-encoding) through pl_grpc_read_message and on into the OTLP decoders,
 * as the otlp receiver does. The first byte picks the grpc-encoding header
 * (absent, identity, gzip, zstd, deflate, unknown), the size limit and the
 * signal.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/model.h"
#include "net/grpc.h"
#include "otlp_pb.h"
#include "../grpc_request_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const char *const encodings[] = {NULL, "identity", "gzip", "zstd", "deflate", "snappy"};
    const char *enc = encodings[(data[0] & 7) % 6];
    pl_http_header headers[2];
    pl_http_request req =
        grpc_request(headers, "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                     data + 1, size - 1, enc);
    if (!req.body)
        return 0;
    req.too_large = (data[0] & 0x80) && (data[0] & 0x40);
    size_t max = (data[0] & 0x40) ? 256 : (1 << 20);
    pl_grpc_message m;
    pl_err err;
    if (pl_grpc_read_message(&req, max, &m, &err) == PL_OK) {
        pl_signal signal = (data[0] & 0x08) ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES;
        pl_batch *b = pl_batch_new(signal);
        if (b && pl_batch_adopt(b, m.owner, m.owner_size) == 0) {
            if (signal == PL_SIGNAL_TRACES)
                pl_otlp_decode_traces(b, m.data, m.len, &err);
            else
                pl_otlp_decode_profiles(b, m.data, m.len, &err);
        } else {
            free(m.owner);
        }
        if (b)
            pl_batch_free(b);
    }
    free(req.body);
    return 0;
}
