/*
 * consumer.c: pl_consumer_consume (see consumer.h).
 */
#include "consumer.h"

#include "pipeline/workers.h"

pl_status pl_consumer_consume(pl_consumer *next, pl_batch *batch)
{
    /* A receiver on a worker loop: the pipeline runs on its own loop only.
     * Hop before reading `next`: a reload rewires consumers there. */
    if (pl_workers_on_worker())
        return pl_workers_consume(next, batch);
    if (!next || !next->fn) {
        pl_batch_free(batch);
        return PL_OK;
    }
    return next->fn(next->arg, batch);
}
