/*
 * loadbalancing.h: the `loadbalancing` exporter's routing helpers, which
 * live in exporters/lb_route.h (shared with the nats exporter); this name
 * stays for its tests.
 */
#ifndef PL_EXPORTERS_LOADBALANCING_H
#define PL_EXPORTERS_LOADBALANCING_H

#include "exporters/lb_route.h"

#endif
