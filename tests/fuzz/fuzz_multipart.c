/*
 * fuzz_multipart.c: the multipart/form-data parser. The first byte picks
 * the boundary length; the rest is the body.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "receivers/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t blen = (data[0] % 16) + 1;
    if (size < 1 + blen)
        return 0;
    pl_bytes boundary = {data + 1, (uint32_t)blen};
    pl_multipart_part parts[8];
    size_t n = 0;
    pl_err err;
    if (pl_multipart_parse(boundary, data + 1 + blen, size - 1 - blen, parts, 8, &n, &err) ==
        PL_OK) {
        const uint8_t *lo = data + 1 + blen, *hi = data + size;
        for (size_t i = 0; i < n; i++)
            if (parts[i].data.len &&
                (parts[i].data.ptr < lo || parts[i].data.ptr + parts[i].data.len > hi))
                __builtin_trap(); /* views must stay inside the body */
    }
    /* Content-Type parsing too */
    pl_bytes b;
    pl_multipart_boundary((const char *)data, size, &b);
    return 0;
}
