/*
 * consumer.c: pl_consumer_consume (see consumer.h).
 */
#include "consumer.h"

pl_status pl_consumer_consume(pl_consumer *next, pl_batch *batch)
{
    if (!next || !next->fn) {
        pl_batch_free(batch);
        return PL_OK;
    }
    return next->fn(next->arg, batch);
}
