/*
 * service.h: the running collector: config + graph + signals + telemetry.
 *
 * States: STARTING (building and starting the graph), RUNNING, RELOADING
 * (only after a reload whose new components failed to start: everything
 * drains, then the previous configuration starts again), DRAINING (SIGTERM
 * or SIGINT: receivers stop, processors flush, exporters drain until nothing
 * is pending or service.shutdown_timeout passes), STOPPED. The health
 * endpoint answers 200 only in RUNNING.
 *
 * Reload reads the configuration's sources again and validates them before
 * touching anything; errors are logged and the running pipelines stay as
 * they are. A valid configuration is swapped in at once (pl_graph_swap):
 * unchanged components are kept with their state and counters, the replaced
 * and removed ones stop and drain in the background (a second reload waits
 * for that), the new ones start. If a new one fails to start, everything
 * stops and the previous configuration is started again from scratch.
 */
#ifndef PL_PIPELINE_SERVICE_H
#define PL_PIPELINE_SERVICE_H

#include <stdbool.h>
#include <uv.h>

#include "config/config.h"
#include "pipeline/graph.h"

typedef enum pl_service_state {
    PL_SERVICE_STARTING = 0,
    PL_SERVICE_RUNNING,
    PL_SERVICE_RELOADING,
    PL_SERVICE_DRAINING,
    PL_SERVICE_STOPPED,
} pl_service_state;

typedef struct pl_service pl_service;

/* Takes ownership of `config`. Builds and starts the graph and the
 * telemetry endpoint. NULL with err set on failure (config freed). When
 * `handle_signals` is true, SIGTERM/SIGINT drain and stop, SIGHUP reloads
 * from config->sources. */
pl_service *pl_service_start(uv_loop_t *loop, pl_config *config, bool handle_signals, pl_err *err);
/* pl_service_start with the host its graphs hand every component (the
 * worker pool, pl_workers_host); pl_service_start gives them none. */
pl_service *pl_service_start_host(uv_loop_t *loop, const pl_host *host, pl_config *config,
                                  bool handle_signals, pl_err *err);
/* Reloads from the config's sources (what SIGHUP does). Returns 0 when the
 * new configuration runs (or the reload was queued behind one still
 * draining), -1 when it has errors or could not be created (logged; the
 * running graph is kept) or failed to start (the previous configuration
 * starts again). */
int pl_service_reload(pl_service *service);
/* Begins the drain; the loop ends once everything is stopped. */
void pl_service_stop(pl_service *service);
pl_service_state pl_service_get_state(const pl_service *service);
const pl_config *pl_service_config(const pl_service *service);
pl_graph *pl_service_graph(const pl_service *service);
/* How many reloads completed (new graph running). */
unsigned pl_service_reloads(const pl_service *service);
/* Frees a STOPPED service (after the loop returned). Returns its exit code:
 * 0 after a clean drain, 1 after a failure. */
int pl_service_free(pl_service *service);

/* The whole `proflink --config F` run: load, start, loop, exit code. */
int pl_service_main(const pl_cfg_sources *sources);

#endif
