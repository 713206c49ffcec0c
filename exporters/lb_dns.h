/*
 * lb_dns.h: the `dns` resolver of the loadbalancing exporter: resolves one
 * hostname every `interval` with c-ares on the exporter's libuv loop (its
 * sockets watched by uv_poll handles, its timeouts driven by a uv_timer), and
 * reports the sorted set of addresses whenever it changes. A failed or timed
 * out lookup keeps the last known set (a DNS hiccup must not empty the ring).
 */
#ifndef PL_EXPORTERS_LB_DNS_H
#define PL_EXPORTERS_LB_DNS_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/status.h"

typedef struct pl_lb_dns pl_lb_dns;

/* `addrs` are numeric addresses ("10.0.0.7", "fd00::7"), sorted, unique;
 * borrowed for the call. */
typedef void (*pl_lb_dns_fn)(void *arg, const char *const *addrs, size_t n);

/* `server` ("127.0.0.1:5353", optional) replaces the system's resolvers.
 * The first lookup starts at once. NULL with err set on failure. */
pl_lb_dns *pl_lb_dns_start(uv_loop_t *loop, const char *hostname, const char *server,
                           int64_t interval_ns, int64_t timeout_ns, pl_lb_dns_fn fn, void *arg,
                           pl_err *err);
/* Stops and frees (once libuv has closed its handles: run the loop). */
void pl_lb_dns_stop(pl_lb_dns *dns);

/* Lookups done and failed so far (for counters and tests). */
uint64_t pl_lb_dns_lookups(const pl_lb_dns *dns);
uint64_t pl_lb_dns_failures(const pl_lb_dns *dns);

#endif
