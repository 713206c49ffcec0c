/*
 * lb_route.h: routing a batch by a key (exporters/lb_route.c): the hash of
 * each span's trace id or service, and the part of a batch one destination
 * gets. The loadbalancing exporter routes to its ring members with it, the
 * nats exporter to its subjects.
 */
#ifndef PL_EXPORTERS_LB_ROUTE_H
#define PL_EXPORTERS_LB_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

typedef enum pl_lb_routing_key {
    PL_LB_ROUTE_TRACE_ID = 0,
    PL_LB_ROUTE_SERVICE,
} pl_lb_routing_key;

/* "traceID" or "service" (NULL/empty: traceID). 0, or -1; `out` may be NULL. */
int pl_lb_routing_key_parse(const char *text, pl_lb_routing_key *out);

/* The routing hash of a service name; also of any bytes that carry no key
 * (opaque log and metric payloads go whole to one destination). */
uint64_t pl_lb_service_hash(pl_bytes s);

/* Writes the routing hash of every span (traces) or sample (profiles), in
 * batch order, to `out` (may be NULL to count); returns how many. */
size_t pl_lb_route_keys(const pl_batch *b, pl_lb_routing_key key, uint64_t *out);

/* A copy of `b` with only the items whose dest[] (batch order, as
 * pl_lb_route_keys counts them) equals `member`. NULL on OOM. */
pl_batch *pl_lb_subset(const pl_batch *b, const int *dest, int member);

#endif
