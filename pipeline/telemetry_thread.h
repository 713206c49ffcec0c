/*
 * telemetry_thread.h: runs the telemetry endpoint (telemetry.h) on a thread
 * of its own, with its own libuv loop, so that /health and /metrics answer
 * while the pipeline's loops are busy with a heavy request.
 *
 * What crosses the thread boundary:
 *   - the component counters: the renderer walks the pl_stats list under the
 *     stats lock (core/stats.h) and reads every value with an atomic load;
 *   - the service state: the `info` callback runs on the telemetry thread and
 *     must read only atomically published values (pipeline/service.c).
 * Nothing else is shared: the HTTP server, its connections and buffers live
 * on the telemetry loop only.
 */
#ifndef PL_PIPELINE_TELEMETRY_THREAD_H
#define PL_PIPELINE_TELEMETRY_THREAD_H

#include "pipeline/telemetry.h"

typedef struct pl_telemetry_thread pl_telemetry_thread;

/* Starts the thread and binds `address` there; returns once the listener is
 * bound (or failed: NULL with err set). `info` is called on that thread. */
pl_telemetry_thread *pl_telemetry_thread_start(const char *address, pl_telemetry_info_fn info,
                                               void *arg, pl_err *err);
/* The same over TLS when `tls` is set (borrowed until this returns). */
pl_telemetry_thread *pl_telemetry_thread_start_tls(const char *address,
                                                   const struct pl_tls_server_config *tls,
                                                   pl_telemetry_info_fn info, void *arg,
                                                   pl_err *err);
/* The bound port; -1 if unknown. */
int pl_telemetry_thread_port(const pl_telemetry_thread *t);
/* Closes the endpoint, joins the thread and frees it. */
void pl_telemetry_thread_stop(pl_telemetry_thread *t);

#endif
