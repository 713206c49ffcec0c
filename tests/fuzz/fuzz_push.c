/*
 * fuzz_push.c: the push API request decoders (protobuf and JSON, picked by
 * the first byte), and a re-encode of what decodes.
 */
#include <stddef.h>
#include <stdint.h>

#include "proto/pyroscope_push.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pl_push_request req = {0};
    pl_err err;
    pl_status st = (data[0] & 1) ? pl_push_decode_json(data + 1, size - 1, &req, &err)
                                 : pl_push_decode_proto(data + 1, size - 1, &req, &err);
    if (st == PL_OK) {
        pl_buf out;
        pl_buf_init(&out);
        pl_push_encode_proto(&req, &out);
        pl_push_request back = {0};
        if (pl_push_decode_proto(out.data, out.len, &back, &err) != PL_OK)
            __builtin_trap();
        pl_push_request_free(&back);
        pl_buf_free(&out);
    }
    pl_push_request_free(&req);
    return 0;
}
