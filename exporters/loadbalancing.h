/*
 * loadbalancing.h: routing helpers of the `loadbalancing` exporter
 * (exporters/loadbalancing.c), exposed for tests.
 */
#ifndef PL_EXPORTERS_LOADBALANCING_H
#define PL_EXPORTERS_LOADBALANCING_H

#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

typedef enum pl_lb_routing_key {
    PL_LB_ROUTE_TRACE_ID = 0,
    PL_LB_ROUTE_SERVICE,
} pl_lb_routing_key;

/* "traceID" or "service" (NULL/empty: traceID). 0, or -1; `out` may be NULL. */
int pl_lb_routing_key_parse(const char *text, pl_lb_routing_key *out);

/* Writes the routing hash of every span (traces) or sample (profiles), in
 * batch order, to `out` (may be NULL to count); returns how many. */
size_t pl_lb_route_keys(const pl_batch *b, pl_lb_routing_key key, uint64_t *out);

/* A copy of `b` with only the items whose dest[] (batch order, as
 * pl_lb_route_keys counts them) equals `member`. NULL on OOM. */
pl_batch *pl_lb_subset(const pl_batch *b, const int *dest, int member);

#endif
