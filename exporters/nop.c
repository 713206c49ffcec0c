/*
 * nop.c: the `nop` exporter: accepts every batch and discards it.
 *
 * For benchmarks (what a receiver or processor costs, without an exporter's
 * cost on top) and for pipelines that only feed a shared processor. It
 * counts what it discards as sent, so the telemetry endpoint still shows
 * the flow.
 */
#include <stdlib.h>

#include "core/component.h"

typedef struct nop_exporter {
    pl_stats *stats;
} nop_exporter;

#include "exporters/nop.config.inc"

static pl_status nop_create(const pl_create_settings *settings, const void *config, void **out_self,
                            pl_err *err)
{
    nop_exporter *e = calloc(1, sizeof(*e));
    if (!e)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    e->stats = settings->stats;
    *out_self = e;
    return PL_OK;
}

static pl_status nop_export(void *self, const pl_batch *batch)
{
    nop_exporter *e = self;
    pl_stats_add(e->stats, batch->signal, PL_STAT_SENT, pl_batch_items(batch));
    return PL_OK;
}

static void nop_destroy(void *self)
{
    free(self);
}

const pl_component_type pl_exporter_nop = {
    PL_COMPONENT_HEAD("nop", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &nop_section),
    .description = "discards everything it receives (benchmarks, processor-only pipelines)",
    .create = nop_create,
    .export = nop_export,
    .destroy = nop_destroy,
};
