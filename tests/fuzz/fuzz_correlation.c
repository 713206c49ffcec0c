/*
 * fuzz_correlation.c: the correlation processor on whatever the OTLP
 * decoders accept.
 *
 * Input: one mode byte, a 2-byte big-endian length, an OTLP traces request
 * of that length, then an OTLP profiles request. Both are decoded as the
 * receivers would (a request that does not decode is left out). With mode
 * bit 0 set, a second traces batch is synthesised from the profiles
 * dictionary's links (one span per link, each the child of the previous
 * one, at the profile's time), so that linking, roll-ups, placeholders and
 * label building are reached without the fuzzer having to guess 8-byte ids.
 * Mode bit 1 picks the arrival order (samples first or spans first), bit 2
 * leaves the profiles flowing before the spans come (so they are indexed at
 * once), bits 3-4 move the clock past windows between steps, bit 5 keeps
 * held span batches decoded (hold_compression: none; else they are packed
 * with zstd, the default). Every profiles
 * batch that comes out must still pass the codec's index check and encode;
 * every traces batch must encode.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/component.h"
#include "pipeline/consumer.h"
#include "processors/correlation.h"
#include "proto/otlp_pb.h"

static uint64_t fuzz_now;
static uint64_t fuzz_clock(void *arg)
{
    (void)arg;
    return fuzz_now;
}

static pl_status check_out(void *arg, pl_batch *b)
{
    (void)arg;
    pl_buf out;
    pl_buf_init(&out);
    if (b->signal == PL_SIGNAL_PROFILES) {
        pl_err err;
        if (pl_otlp_validate_profiles(&b->data.profiles, &err) != PL_OK)
            abort(); /* the processor broke a dictionary index */
        if (!pl_otlp_encode_profiles(&b->data.profiles, &out))
            abort();
    } else if (b->signal == PL_SIGNAL_TRACES) {
        if (!pl_otlp_encode_traces(&b->data.traces, &out))
            abort();
    }
    pl_buf_free(&out);
    pl_batch_free(b);
    return PL_OK;
}

/* Spans for the links of a profiles batch. */
static pl_batch *spans_for_links(const pl_batch *pb)
{
    const pl_dictionary *d = &pb->data.profiles.dict;
    uint32_t n = d->n_links > 64 ? 64 : d->n_links;
    if (n <= 1)
        return NULL;
    uint64_t t = 0;
    if (pb->data.profiles.n_resources && pb->data.profiles.resources[0].n_scopes &&
        pb->data.profiles.resources[0].scopes[0].n_profiles)
        t = pb->data.profiles.resources[0].scopes[0].profiles[0].time_unix_nano;
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    if (!b)
        return NULL;
    pl_traces *tr = &b->data.traces;
    tr->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    if (!tr->resources)
        goto fail;
    tr->n_resources = 1;
    pl_resource_spans *rs = tr->resources;
    if (pb->data.profiles.n_resources) { /* the same service (a copy: batches part ways) */
        const pl_kv *svc =
            pl_attrs_find(&pb->data.profiles.resources[0].resource.attrs, "service.name", 12);
        if (svc && svc->value.type == PL_VALUE_STRING)
            pl_attrs_put(
                &b->arena, &rs->resource.attrs, PL_BYTES_LIT("service.name"),
                pl_value_string(pl_batch_bytes(b, svc->value.u.str.ptr, svc->value.u.str.len)));
    }
    rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    if (!rs->scopes)
        goto fail;
    rs->n_scopes = 1;
    rs->scopes->spans = pl_batch_alloc(b, n * sizeof(pl_span));
    if (!rs->scopes->spans)
        goto fail;
    rs->scopes->n_spans = n - 1;
    for (uint32_t i = 1; i < n; i++) {
        pl_span *sp = &rs->scopes->spans[i - 1];
        const pl_link *l = &d->links[i];
        memcpy(sp->trace_id, l->trace_id, 16);
        sp->trace_id_len = l->trace_id_len == 16 ? 16 : 0;
        memcpy(sp->span_id, l->span_id, 8);
        sp->span_id_len = l->span_id_len == 8 ? 8 : 0;
        if (i > 1 && d->links[i - 1].span_id_len == 8) {
            memcpy(sp->parent_span_id, d->links[i - 1].span_id, 8);
            sp->parent_span_id_len = 8;
        }
        sp->start_time_unix_nano = t ? t - 1 : 0;
        sp->end_time_unix_nano = t + 1000;
        sp->name = PL_BYTES_LIT("op");
    }
    return b;
fail:
    pl_batch_free(b);
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    uint8_t mode = data[0];
    size_t tlen = ((size_t)data[1] << 8) | data[2];
    data += 3;
    size -= 3;
    if (tlen > size)
        tlen = size;

    pl_err err;
    pl_batch *traces = pl_batch_new(PL_SIGNAL_TRACES);
    pl_batch *profiles = pl_batch_new(PL_SIGNAL_PROFILES);
    if (!traces || !profiles)
        abort();
    if (pl_otlp_decode_traces(traces, data, tlen, &err) != PL_OK) {
        pl_batch_free(traces);
        traces = NULL;
    }
    if (pl_otlp_decode_profiles(profiles, data + tlen, size - tlen, &err) != PL_OK) {
        pl_batch_free(profiles);
        profiles = NULL;
    }
    pl_batch *linked = (mode & 1) && profiles ? spans_for_links(profiles) : NULL;

    pl_correlation_config cfg;
    pl_correlation_config_defaults(&cfg);
    char *route[] = {"http.route", "service.name"};
    cfg.span_attributes = (pl_strlist){route, 2};
    cfg.top_functions = 3;
    cfg.max_spans = 50; /* small bounds: early releases happen */
    cfg.max_pending_samples = 100;
    cfg.hold_compression = (mode & 32) ? "none" : "zstd";
    fuzz_now = 1700000000000000000ull;
    pl_create_settings st;
    memset(&st, 0, sizeof(st));
    st.id = "correlation";
    st.clock = (pl_clock){fuzz_clock, NULL};
    st.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    void *self = NULL;
    if (pl_processor_correlation.create(&st, &cfg, &self, &err) != PL_OK)
        abort();
    pl_consumer next;
    pl_consumer_init_func(&next, check_out, NULL);

    if (mode & 4) { /* profiles are flowing before anything else */
        pl_batch *empty = pl_batch_new(PL_SIGNAL_PROFILES);
        if (empty)
            pl_processor_correlation.consume(self, empty, &next);
    }
    pl_batch *order[3];
    if (mode & 2) {
        order[0] = profiles;
        order[1] = traces;
        order[2] = linked;
    } else {
        order[0] = traces;
        order[1] = linked;
        order[2] = profiles;
    }
    uint64_t step = (uint64_t)((mode >> 3) & 3) * 20000000000ull; /* 0, 20, 40, 60 s */
    for (int i = 0; i < 3; i++) {
        if (!order[i])
            continue;
        pl_processor_correlation.consume(self, order[i], &next);
        fuzz_now += step;
        pl_correlation_tick(self);
    }
    fuzz_now += 100000000000ull;
    pl_correlation_tick(self);
    pl_processor_correlation.shutdown(self);
    pl_processor_correlation.destroy(self);
    return 0;
}
