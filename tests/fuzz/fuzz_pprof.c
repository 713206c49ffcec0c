/*
 * fuzz_pprof.c: the pprof decoder on arbitrary bytes (raw or gzipped), and
 * the encoder on whatever decodes: decode -> encode -> decode must succeed.
 */
#include <stddef.h>
#include <stdint.h>

#include "proto/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pl_err err;
    pl_pprof_meta meta = {.max_decoded_size = 4u << 20};
    pl_batch *batch = pl_pprof_decode(data, size, &meta, &err);
    if (!batch)
        return 0;
    const pl_profiles *ps = &batch->data.profiles;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t s = 0; s < ps->resources[r].n_scopes; s++)
            for (uint32_t p = 0; p < ps->resources[r].scopes[s].n_profiles; p++) {
                pl_buf out;
                pl_buf_init(&out);
                if (pl_pprof_encode(&ps->dict, &ps->resources[r].scopes[s].profiles[p], NULL, &out,
                                    &err) == PL_OK) {
                    pl_batch *again = pl_pprof_decode(out.data, out.len, NULL, &err);
                    if (!again)
                        __builtin_trap(); /* our own output must decode */
                    pl_batch_free(again);
                }
                pl_buf_free(&out);
            }
    pl_batch_free(batch);
    return 0;
}
