/*
 * fuzz_otlp_json.c: the OTLP/JSON decoders. The first byte chooses traces
 * (0 mod 4), profiles (1), logs (2) or metrics (3). Whatever decodes must
 * encode to JSON that decodes again, and to protobuf that the protobuf
 * decoder accepts; logs and metrics go through the table-driven transcoder,
 * whose protobuf output the pass-through checks must accept.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "../tools/ref_enc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool profiles = data[0] & 1;
    bool pass_through = data[0] & 2;
    data++;
    size--;
    if (pass_through) {
        pl_buf out;
        pl_buf_init(&out);
        pl_err err;
        pl_signal sig = profiles ? PL_SIGNAL_METRICS : PL_SIGNAL_LOGS;
        if (pl_otlp_json_transcode(sig, data, size, (size_t)64 << 20, &out, &err) == PL_OK) {
            size_t n;
            if ((profiles ? pl_otlp_count_metrics(out.data, out.len, &n, &err)
                          : pl_otlp_count_logs(out.data, out.len, &n, &err)) != PL_OK)
                abort(); /* the transcoder wrote bad protobuf */
        }
        pl_buf_free(&out);
        return 0;
    }
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    pl_signal sig = profiles ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES;
    pl_batch *b = pl_batch_new(sig);
    pl_err err;
    pl_status st = profiles ? pl_otlp_json_decode_profiles(b, buf, size, &err)
                            : pl_otlp_json_decode_traces(b, buf, size, &err);
    if (st == PL_OK) {
        ref_check_encoders(b); /* table walkers == the hand-written encoders */
        pl_buf j, p;
        pl_buf_init(&j);
        pl_buf_init(&p);
        bool ok = profiles ? pl_otlp_json_encode_profiles(&b->data.profiles, &j)
                           : pl_otlp_json_encode_traces(&b->data.traces, &j);
        ok = ok && (profiles ? pl_otlp_encode_profiles(&b->data.profiles, &p)
                             : pl_otlp_encode_traces(&b->data.traces, &p));
        if (ok) {
            pl_batch *d = pl_batch_new(sig), *e = pl_batch_new(sig);
            if ((profiles ? pl_otlp_json_decode_profiles(d, j.data, j.len, &err)
                          : pl_otlp_json_decode_traces(d, j.data, j.len, &err)) != PL_OK)
                abort(); /* our JSON must decode */
            if ((profiles ? pl_otlp_decode_profiles(e, p.data, p.len, &err)
                          : pl_otlp_decode_traces(e, p.data, p.len, &err)) != PL_OK)
                abort(); /* and so must our protobuf */
            pl_batch_free(d);
            pl_batch_free(e);
        }
        pl_buf_free(&j);
        pl_buf_free(&p);
    }
    pl_batch_free(b);
    free(buf);
    return 0;
}
