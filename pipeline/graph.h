/*
 * graph.h: the running pipelines built from a checked pl_config.
 *
 * One instance per component id, however many pipelines name it. The wiring
 * is a chain of pl_consumers:
 *
 *   receiver --next[signal]--> fan-out over the pipelines of that signal
 *     (each pipeline but the last gets a clone of the batch)
 *     --> processor 1 (type->consume(self, batch, next)) --> processor 2 ...
 *     --> exporters fan-out (each export() borrows; worst status wins;
 *         then the batch is freed)
 *
 * A processor shared by a traces and a profiles pipeline is one object; the
 * `next` it receives tells it which pipeline a batch came through.
 *
 * Counters: receivers count what they accept and refuse themselves (they
 * also see requests that never become a batch). For processors and
 * exporters the graph counts, per signal, the items handed to the hook as
 * accepted (PL_OK) or refused (any other status), unless the component
 * counted accepted/refused itself during that call, so a component may
 * keep its own finer accounting without being counted twice. Components
 * count dropped items, and exporters their sent / failed items.
 *
 * Lifecycle: start runs extensions, exporters, processors, receivers (so
 * nothing is received before it can be delivered); shutdown calls the
 * shutdown hooks in the reverse order (receivers stop taking data,
 * processors flush into still-running exporters, exporters start
 * draining); pending sums the exporters' in-flight items; destroy frees.
 */
#ifndef PL_PIPELINE_GRAPH_H
#define PL_PIPELINE_GRAPH_H

#include <uv.h>

#include "config/config.h"
#include "core/component.h"

typedef struct pl_graph pl_graph;

/* Creates every used component (create hooks; nothing listens yet). NULL
 * with err set ("exporter sqlite: cannot open ...") on failure; anything
 * created is destroyed again. The config must outlive the graph. */
pl_graph *pl_graph_build(const pl_config *config, uv_loop_t *loop, pl_err *err);
/* pl_graph_build with the host every component gets in its create settings
 * (the worker pool: pl_workers_host); pl_graph_build gives them none. A
 * reload's graph keeps the host of the graph it replaces. */
pl_graph *pl_graph_build_host(const pl_config *config, uv_loop_t *loop, const pl_host *host,
                              pl_err *err);
/* What a swap did, for the log. */
typedef struct pl_graph_swap_info {
    size_t kept, replaced, added, removed;
    bool old_touched; /* false: `old` runs on exactly as before */
} pl_graph_swap_info;

/* A reload that keeps what did not change. Builds the graph of `next` from
 * the running `old`: instances whose settings, signals and pipelines are
 * unchanged MOVE to the new graph as they are (started, with the data they
 * hold and their counters); the others are created new (sharing the
 * counters of the instance with the same id they replace). Then the
 * instances left in `old` (replaced or removed) are shut down: `old` keeps
 * them until they have drained; destroy it after that.
 *
 * Returns the new graph, whose new instances still need pl_graph_start.
 * NULL with err set when a new instance could not be created: `old` is then
 * untouched and still running (info->old_touched false). A non-NULL return
 * with err->msg set means wiring failed after the commit: shut both down
 * and start again from scratch. `next` must outlive the new graph, and
 * old's config must outlive `old`. */
pl_graph *pl_graph_swap(pl_graph *old, const pl_config *next, pl_err *err,
                        pl_graph_swap_info *info);
/* Starts in order extensions, exporters, processors, receivers (those not
 * started yet). On failure
 * the started ones are shut down again and err says which one failed. */
pl_status pl_graph_start(pl_graph *graph, pl_err *err);
/* Calls shutdown hooks: receivers, processors, exporters, extensions. */
void pl_graph_shutdown(pl_graph *graph);
/* Items the exporters still hold (0 when all are drained). */
size_t pl_graph_pending(pl_graph *graph);
/* Calls destroy hooks (receivers first) and frees the graph. Call after
 * shutdown and after the loop has run so closed handles are released. */
void pl_graph_destroy(pl_graph *graph);

/* For tests and diagnostics. */
size_t pl_graph_instance_count(const pl_graph *graph);
/* The instance (`self`) created for component `id` of `kind`; NULL if none. */
void *pl_graph_instance(const pl_graph *graph, pl_kind kind, const char *id);
/* The consumer a receiver got for `signal` (what it calls with its batches). */
pl_consumer *pl_graph_receiver_next(const pl_graph *graph, const char *id, pl_signal signal);
/* The counters of component `id`. */
pl_stats *pl_graph_stats(const pl_graph *graph, pl_kind kind, const char *id);

#endif
