/*
 * consumer.h: the concrete shape of pl_consumer (opaque to components,
 * which only call pl_consumer_consume, component.h).
 *
 * A consumer is a function and its argument. The graph builder chains them:
 * fan-out to pipelines, a processor with its `next`, the exporters of a
 * pipeline. Tests build one around a capture function with
 * pl_consumer_init_func.
 */
#ifndef PL_CORE_CONSUMER_H
#define PL_CORE_CONSUMER_H

#include "component.h"

struct pl_consumer {
    /* Takes `batch` whatever it returns. */
    pl_status (*fn)(void *arg, pl_batch *batch);
    void *arg;
};

static inline void pl_consumer_init_func(pl_consumer *c, pl_status (*fn)(void *, pl_batch *),
                                         void *arg)
{
    c->fn = fn;
    c->arg = arg;
}

#endif
