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
    /* odd sizes: with the .NET repairs and a given profile name */
    pl_pprof_meta meta = {.max_decoded_size = 4u << 20,
                          .repair_dotnet = size & 1,
                          .profile_name =
                              size & 1 ? PL_BYTES_LIT("process_cpu") : (pl_bytes){NULL, 0}};
    pl_batch *batch = pl_pprof_decode(data, size, &meta, &err);
    if (!batch)
        return 0;
    const pl_profiles *ps = &batch->data.profiles;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t s = 0; s < ps->resources[r].n_scopes; s++)
            for (uint32_t p = 0; p < ps->resources[r].scopes[s].n_profiles; p++) {
                bool special;
                pl_bytes name = pl_pprof_profile_name(
                    &ps->dict, &ps->resources[r].scopes[s].profiles[p], &special);
                if ((size & 1) && !pl_bytes_eq_cstr(name, "process_cpu"))
                    __builtin_trap(); /* the given name wins */
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
