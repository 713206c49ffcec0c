/*
 * fuzz_jfr.c: the JFR reader (proto/jfr.c) and the LabelsSnapshot decoder.
 * The first byte picks the layout: even, the rest is a JFR body; odd, the
 * next two bytes give the length of a labels part that comes before the
 * body. Every pprof the reader makes must decode with proto/pprof_decode.c (the
 * encoder never writes a profile the decoder refuses).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/jfr.h"
#include "proto/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pl_err err;
    pl_jfr_labels *labels = NULL;
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        if (len < 2)
            return 0;
        size_t n = (size_t)body[0] << 8 | body[1];
        body += 2;
        len -= 2;
        if (n > len)
            n = len;
        labels = pl_jfr_labels_decode(body, n, &err);
        body += n;
        len -= n;
    }
    pl_jfr_options o = {
        .sample_rate = 100, .labels = labels, .max_memory = 16u << 20, .max_objects = 200000};
    pl_jfr_result r;
    pl_status st = pl_jfr_to_pprof(body, len, &o, &r, &err);
    if (st != PL_OK && st != PL_ERR_INVALID && st != PL_ERR_TOO_LARGE)
        __builtin_trap();
    for (uint32_t i = 0; st == PL_OK && i < r.n_profiles; i++) {
        pl_batch *b =
            pl_pprof_decode(r.profiles[i].pprof.data, r.profiles[i].pprof.len, NULL, &err);
        if (!b)
            __builtin_trap();
        pl_batch_free(b);
    }
    pl_jfr_result_free(&r);
    pl_jfr_labels_free(labels);
    return 0;
}
