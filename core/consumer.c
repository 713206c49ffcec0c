/*
 * consumer.c: pl_consumer_consume (component.h, consumer.h).
 */
#include "consumer.h"

pl_status pl_consumer_consume(pl_consumer *next, pl_batch *batch)
{
    /* A receiver on a worker loop: the pipeline runs on its own loop only,
     * so the worker's host hands the batch over. Hop before reading `next`:
     * a reload rewires consumers there. */
    const pl_host *worker = pl_host_worker();
    if (worker)
        return worker->workers->consume(worker->pool, next, batch);
    if (!next || !next->fn) {
        pl_batch_free(batch);
        return PL_OK;
    }
    return next->fn(next->arg, batch);
}
