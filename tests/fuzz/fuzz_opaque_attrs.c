/*
 * fuzz_opaque_attrs.c: the walker that rewrites log record and metric data
 * point attributes inside opaque OTLP requests (processors/opaque_attrs.c).
 *
 * The first input byte chooses logs (even) or metrics (odd), whether
 * resources are included and whether log bodies are shortened by a byte; the rest is the request.
 * Every list gets one attribute put and its first one dropped. When the input counts as a request,
 * the output must count the same number of records / points.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "processors/opaque_attrs.h"
#include "proto/otlp_pb.h"

static bool touch(void *arg, pl_batch *tmp, pl_attrs *attrs, pl_bytes service)
{
    (void)arg;
    (void)service;
    if (attrs->n)
        attrs->items[0] = attrs->items[--attrs->n];
    return pl_attrs_put(&tmp->arena, attrs, pl_bytes_from_cstr("fuzz"), pl_value_int(1)) != NULL;
}

static bool body(void *arg, pl_batch *tmp, pl_value *v)
{
    (void)arg;
    (void)tmp;
    if (v->type == PL_VALUE_STRING && v->u.str.len)
        v->u.str.len--;
    return true;
}

static size_t count(pl_signal signal, pl_bytes raw, bool *ok)
{
    size_t n = 0;
    pl_status st = signal == PL_SIGNAL_LOGS ? pl_otlp_count_logs(raw.ptr, raw.len, &n, NULL)
                                            : pl_otlp_count_metrics(raw.ptr, raw.len, &n, NULL);
    *ok = st == PL_OK;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pl_signal signal = data[0] & 1 ? PL_SIGNAL_METRICS : PL_SIGNAL_LOGS;
    bool resources = data[0] & 2;
    pl_batch *b = pl_batch_new(signal);
    if (!b)
        return 0;
    b->data.raw = (pl_bytes){data + 1, size - 1};
    bool in_ok, out_ok;
    size_t before = count(signal, b->data.raw, &in_ok);
    if (pl_opaque_rewrite(b, resources, touch, data[0] & 4 ? body : NULL, NULL) && in_ok) {
        size_t after = count(signal, b->data.raw, &out_ok);
        if (!out_ok || after != before)
            abort();
    }
    pl_batch_free(b);
    return 0;
}
