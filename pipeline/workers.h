/*
 * workers.h: `service.workers` receiver loops.
 *
 * With more than one worker, receivers that support it (otlp) listen on
 * every worker's libuv loop (SO_REUSEPORT: the kernel spreads connections),
 * and a request's reading, TLS, decompression and decoding, and its answer,
 * run on that worker. The decoded batch then crosses to the pipeline loop:
 * pl_consumer_consume, called on a worker, hands the batch to the pipeline
 * loop and waits for its pl_status, so every processor and exporter still
 * runs on the one pipeline thread (a sample and its span always meet, batch
 * sizes and timeouts keep their meaning) and the client's answer still says
 * what the pipeline did with the data. While one worker waits, the others
 * keep reading and decoding.
 *
 * Exporters use the same threads for their encoding and compression
 * (pl_host_submit), so forwarding scales with the workers too.
 *
 * Components reach the pool only through the host in their create settings
 * (core/component.h, pl_workers_host); its size is fixed at start.
 */
#ifndef PL_PIPELINE_WORKERS_H
#define PL_PIPELINE_WORKERS_H

#include <stdbool.h>
#include <uv.h>

#include "core/component.h"

typedef struct pl_workers pl_workers;

/* Starts `n` worker threads, each running a loop. `main_loop` is the
 * pipeline's.
 * NULL with err set on failure. */
pl_workers *pl_workers_start(uv_loop_t *main_loop, unsigned n, pl_err *err);
/* Runs the pipeline loop `loop` (the pool's main loop) until it has nothing
 * left to do or running(arg) answers false after a turn, with the
 * pipeline lock (workers.c): while it runs, workers consume on their own
 * thread under the lock instead of handing batches over. With no pool it
 * is uv_run(loop, UV_RUN_DEFAULT). */
void pl_workers_drive(pl_workers *p, uv_loop_t *loop, bool (*running)(void *arg), void *arg);
/* Stops the threads (receivers must have closed their listeners). */
void pl_workers_stop(pl_workers *w);

/* What components reach the pool through (their create settings' host):
 * its count, pl_host_submit, pl_host_listen, pl_host_close, and the
 * hand-over of batches by pl_consumer_consume on a worker. NULL for NULL. */
const pl_host *pl_workers_host(pl_workers *p);

/* Worker i's loop; NULL past the last. */
uv_loop_t *pl_workers_loop(pl_workers *p, unsigned i);
/* Runs fn(arg) on worker i's thread and returns when it has run. Called on
 * the pipeline loop; batches that workers hand over meanwhile are consumed
 * while waiting, so a worker blocked on the pipeline cannot deadlock it. */
void pl_workers_run(pl_workers *p, unsigned i, void (*fn)(void *arg), void *arg);
/* True on a worker thread (pl_host_on_worker). */
bool pl_workers_on_worker(void);

/* The hooks behind the host (pl_host_workers):
 *
 * submit runs work(arg) on a worker thread and then done(arg) on the
 * pipeline loop, without waiting: for CPU work the pipeline loop should not
 * do itself (exporters encode and compress there, exporters/queue.c). The
 * worker is the one whose batch the pipeline loop is consuming at the call
 * (its caches hold that batch), else the next in turn. Jobs given to one
 * worker run in the order given; `done` calls come in the order the works
 * finish. false when there is no pool or no memory (the caller then does
 * the work itself). At pl_workers_stop every work given still runs and its
 * done is called on the stopping thread.
 *
 * listen listens on `endpoint` on every worker loop (SO_REUSEPORT; "host:0"
 * binds the first and the others join its port): servers[i] is worker i's
 * server. On failure the ones started are closed and err says why. close
 * closes servers[0..count) on their workers and sets them to NULL.
 *
 * consume, from a worker, consumes `batch` on the pipeline loop and
 * returns its status. */

/* The number of online CPUs (at least 1): the default of service.workers. */
unsigned pl_workers_default(void);

#endif
