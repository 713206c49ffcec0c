/*
 * fuzz_otlp_pb.c: the OTLP protobuf decoders. The first byte chooses the
 * decoder (even: traces, odd: profiles, with bit 1 choosing the pass-through
 * logs/metrics counters or the response/status decoders instead); the rest
 * is the request. Whatever decodes must encode again, and re-decoding that
 * encoding must succeed and give the same bytes once more (canonical form is
 * a fixed point), and both encoders must write what the hand-written ones
 * they replaced write (tests/tools/ref_*_enc.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/otlp_pb.h"
#include "../tools/ref_enc.h"

static void check_round_trip(bool profiles, const pl_batch *b)
{
    pl_buf e1, e2;
    pl_buf_init(&e1);
    pl_buf_init(&e2);
    ref_check_encoders(b); /* table walkers == the hand-written encoders */
    bool ok = profiles ? pl_otlp_encode_profiles(&b->data.profiles, &e1)
                       : pl_otlp_encode_traces(&b->data.traces, &e1);
    if (ok) {
        pl_batch *d = pl_batch_new(profiles ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES);
        pl_err err;
        pl_status st = profiles ? pl_otlp_decode_profiles(d, e1.data, e1.len, &err)
                                : pl_otlp_decode_traces(d, e1.data, e1.len, &err);
        if (st != PL_OK)
            abort(); /* our own output must decode */
        if (profiles ? !pl_otlp_encode_profiles(&d->data.profiles, &e2)
                     : !pl_otlp_encode_traces(&d->data.traces, &e2))
            abort();
        if (e1.len != e2.len || (e1.len && memcmp(e1.data, e2.data, e1.len) != 0))
            abort(); /* encode(decode(encode(x))) == encode(x) */
        pl_batch_free(d);
    }
    pl_buf_free(&e1);
    pl_buf_free(&e2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    /* A private copy, so that reads past the end are caught by ASan. */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    pl_err err;
    if (mode & 2) {
        size_t n;
        int32_t code;
        int64_t rejected, delay;
        pl_bytes msg;
        switch ((mode >> 2) & 3) {
        case 0:
            (void)pl_otlp_count_logs(buf, size, &n, &err);
            break;
        case 1:
            (void)pl_otlp_count_metrics(buf, size, &n, &err);
            break;
        case 2:
            (void)pl_otlp_decode_export_response(buf, size, &rejected, &msg, &err);
            break;
        default:
            (void)pl_rpc_status_decode(buf, size, &code, &msg, &delay, &err);
            break;
        }
        free(buf);
        return 0;
    }
    bool profiles = mode & 1;
    pl_batch *b = pl_batch_new(profiles ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES);
    if (b) {
        pl_status st = profiles ? pl_otlp_decode_profiles(b, buf, size, &err)
                                : pl_otlp_decode_traces(b, buf, size, &err);
        if (st == PL_OK) {
            (void)pl_batch_items(b);
            check_round_trip(profiles, b);
            pl_batch *c = pl_batch_clone(b);
            if (c) {
                check_round_trip(profiles, c);
                pl_batch_free(c);
            }
        }
        pl_batch_free(b);
    }
    free(buf);
    return 0;
}
