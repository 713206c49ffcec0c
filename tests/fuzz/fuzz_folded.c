/*
 * fuzz_folded.c: the folded-stacks / lines text parser, then the pprof it
 * produces must decode.
 */
#include <stddef.h>
#include <stdint.h>

#include "proto/pprof.h"
#include "receivers/folded.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pl_pprof_writer_options o = {"cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, 1, 1};
    pl_pprof_writer *w = pl_pprof_writer_new(&o);
    if (!w)
        return 0;
    pl_err err;
    if (pl_folded_parse(data + 1, size - 1, data[0] & 1, (data[0] & 2) ? 10000000 : 1, w, &err) ==
        PL_OK) {
        pl_buf out;
        pl_buf_init(&out);
        if (pl_pprof_writer_finish(w, &out) == 0) {
            pl_batch *b = pl_pprof_decode(out.data, out.len, NULL, &err);
            if (!b)
                __builtin_trap(); /* our own pprof must decode */
            pl_batch_free(b);
        }
        pl_buf_free(&out);
    }
    pl_pprof_writer_free(w);
    return 0;
}
