/*
 * telemetry.h: proflink's own observability endpoint.
 *
 *   GET /metrics  Prometheus text format: for every component (pl_stats_list)
 *                 proflink_<kind>_<stat>_items_total{component="id",signal="s"}
 *                 plus each component's extra counters and gauges, and the
 *                 process's RSS, CPU seconds and uptime, the version and
 *                 the number of configuration reloads by result.
 *   GET /health   200 {"status":"ok"} when every pipeline runs, 503 with the
 *                 state ("starting", "reloading", "draining") otherwise.
 */
#ifndef PL_PIPELINE_TELEMETRY_H
#define PL_PIPELINE_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/status.h"

typedef struct pl_telemetry pl_telemetry;

/* What the service tells the endpoint on each request. */
typedef struct pl_telemetry_info {
    const char *state;       /* "running" means healthy */
    uint64_t reloads_ok;     /* reloads that switched to a new configuration */
    uint64_t reloads_failed; /* reloads refused (bad file) or rolled back */
} pl_telemetry_info;

typedef void (*pl_telemetry_info_fn)(void *arg, pl_telemetry_info *out);

pl_telemetry *pl_telemetry_start(uv_loop_t *loop, const char *address, pl_telemetry_info_fn info,
                                 void *arg, pl_err *err);
/* The same over TLS when `tls` is set (borrowed during the call). */
struct pl_tls_server_config;
pl_telemetry *pl_telemetry_start_tls(uv_loop_t *loop, const char *address,
                                     const struct pl_tls_server_config *tls,
                                     pl_telemetry_info_fn info, void *arg, pl_err *err);
/* The bound port (for address ":0" in tests); -1 if unknown. */
int pl_telemetry_port(const pl_telemetry *t);
void pl_telemetry_stop(pl_telemetry *t);

/* The /metrics body as a malloc'd NUL-terminated string (NULL on OOM). */
char *pl_telemetry_render_metrics(size_t *len);

#endif
