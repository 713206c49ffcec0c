/*
 * component.h: what a receiver, processor, exporter or extension is.
 *
 * A component is a descriptor: one const pl_component_type with its type name,
 * the signals it handles, its config table and its hooks. The registry
 * (pipeline/registry.c) is one list of descriptors. `proflink components`
 * prints the config tables, and the config loader validates with the same
 * tables, so the documentation cannot drift from the code.
 *
 * Config tables (in the spirit of nginx directives / Fluent Bit config maps):
 * each pl_cfg_field names a YAML key, its type, its default (as YAML text),
 * the offset of the C field that receives the value, and a one-line
 * description. Components do not write them by hand: they are generated from
 * the component's <stem>.config.yaml by config/gen_cfg_tables.py (see
 * docs/DESIGN.md). The loader fills a zeroed struct of pl_cfg_section.size
 * bytes:
 *
 *   type             C field type           YAML
 *   PL_CFG_STRING    char * (malloc'd)      scalar
 *   PL_CFG_INT       int64_t                integer
 *   PL_CFG_BOOL      bool                   true/false
 *   PL_CFG_DOUBLE    double                 number
 *   PL_CFG_DURATION  int64_t nanoseconds    500ms, 30s, 5m, 1h, or bare seconds
 *   PL_CFG_SIZE      uint64_t bytes         512KiB, 4MiB, 1GB, or bare bytes
 *   PL_CFG_STRLIST   pl_strlist             [a, b] or a block sequence
 *   PL_CFG_STRMAP    pl_strmap              { k: v } (e.g. headers)
 *   PL_CFG_SECTION   a nested struct        mapping, described by .section
 *   PL_CFG_LIST      pl_cfg_list            sequence of mappings, each a .section
 *   PL_CFG_IGNORED   (none)                 anything; a Collector key with no effect here
 *   PL_CFG_ADDRESS   char * (malloc'd)      host:port to listen on: an IP, localhost or
 *                                           empty host, port 0-65535; "" or none: off
 *
 * After filling a section the loader checks each field's rule (minimum,
 * maximum, required), then calls section->validate (if any) for the rules
 * that relate options; both report with pl_cfg_errorf so errors carry
 * file:line:col. The structs the tables fill are generated from the same
 * YAML (<stem>.config.h).
 */
#ifndef PL_COMPONENT_H
#define PL_COMPONENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "model.h"
#include "status.h"

/* ---- config tables ------------------------------------------------------ */

typedef enum pl_cfg_type {
    PL_CFG_STRING,
    PL_CFG_INT,
    PL_CFG_BOOL,
    PL_CFG_DOUBLE,
    PL_CFG_DURATION,
    PL_CFG_SIZE,
    PL_CFG_STRLIST,
    PL_CFG_STRMAP,
    PL_CFG_SECTION,
    PL_CFG_LIST,
    PL_CFG_IGNORED, /* any value, accepted for compatibility with Collector
                     * configs and ignored with a warning; no C field */
    PL_CFG_ADDRESS, /* a listening host:port, checked when loaded */
} pl_cfg_type;

typedef struct pl_strlist {
    char **items;
    size_t n;
} pl_strlist;

typedef struct pl_strmap {
    char **keys;
    char **values;
    size_t n;
} pl_strmap;

typedef struct pl_cfg_list {
    void *items; /* n structs of section->size bytes each */
    size_t n;
} pl_cfg_list;

typedef struct pl_cfg_ctx pl_cfg_ctx; /* opaque: the loader's position info */
/* The first member of every pl_cfg_ctx: where pl_cfg_errorf, pl_cfg_warnf
 * and pl_cfg_check (core/cfg.c) hand their formatted message, for the
 * loader (config/decode.c) to place at the key's position. */
typedef struct pl_cfg_reporter {
    void (*report)(pl_cfg_ctx *ctx, bool warning, const char *key, const char *msg);
} pl_cfg_reporter;
typedef struct pl_cfg_section pl_cfg_section;

/* A check of one option on its own (the schema's minimum, maximum,
 * required), run by the loader before the section's validate hook: the
 * limits are YAML text in the option's type ("0", "1s", "1MiB"), parsed like
 * a value. */
typedef struct pl_cfg_rule {
    const char *minimum;           /* value >= minimum */
    const char *exclusive_minimum; /* value > exclusive_minimum */
    const char *maximum;           /* value <= maximum */
    bool required;                 /* a string non-empty, a list or map with an item */
    const char *message;           /* the error when any of them fails */
} pl_cfg_rule;

typedef struct pl_cfg_field {
    const char *key;
    pl_cfg_type type;
    const char *default_value; /* YAML text; NULL = zero / empty */
    size_t offset;
    const char *description;
    const pl_cfg_section *section; /* for PL_CFG_SECTION and PL_CFG_LIST */
    const pl_cfg_rule *rule;       /* NULL: no check of its own */
} pl_cfg_field;

struct pl_cfg_section {
    size_t size;
    const pl_cfg_field *fields; /* terminated by an entry with key == NULL */
    /* Optional semantic check after the fields are filled; returns the number
     * of errors it reported with pl_cfg_errorf. */
    int (*validate)(void *cfg, pl_cfg_ctx *ctx);
};

/* Reports an error at the position of `key` inside the section being
 * validated (or at the section itself when key is NULL or absent). */
void pl_cfg_errorf(pl_cfg_ctx *ctx, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A warning (the config is accepted) at `key` of the section, like
 * pl_cfg_errorf: for a setting proflink reads differently from the
 * Collector, which must never be a silent difference. */
void pl_cfg_warnf(pl_cfg_ctx *ctx, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The usual shape of a validate hook, one line per rule:
 *     errors += pl_cfg_check(ctx, c->n >= 0, "n", "must not be negative");
 * Reports like pl_cfg_errorf when `ok` is false; returns 1 then, else 0. */
int pl_cfg_check(pl_cfg_ctx *ctx, bool ok, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Parsers shared by the loader and components (core/cfg.c); 0 or -1. */
int pl_parse_duration(const char *text, int64_t *out_ns);
int pl_parse_size(const char *text, uint64_t *out_bytes);

/* ---- consumers and statistics ------------------------------------------ */

/* The rest of a pipeline after a given point. Opaque; owned by the graph
 * and valid until the graph is torn down (after every component's shutdown).
 * pl_consumer_consume TAKES the batch whatever it returns. */
typedef struct pl_consumer pl_consumer;
pl_status pl_consumer_consume(pl_consumer *next, pl_batch *batch);

/* Per-component counters, exposed on the Prometheus endpoint under the
 * OpenTelemetry Collector's names, e.g. otelcol_receiver_accepted_spans
 * {receiver="<id>",transport="grpc"} (pipeline/telemetry_metrics.c). */
typedef enum pl_stat {
    PL_STAT_ACCEPTED = 0, /* items taken in (receivers, processors) */
    PL_STAT_REFUSED,      /* items refused with a retryable answer */
    PL_STAT_DROPPED,      /* items dropped (should stay 0; always logged) */
    PL_STAT_SENT,         /* items exported successfully */
    PL_STAT_FAILED,       /* items an exporter gave up on */
    PL_STAT_COUNT
} pl_stat;

/* How a receiver got the data (the Collector's `transport` label). */
typedef enum pl_transport {
    PL_TRANSPORT_NONE = 0,
    PL_TRANSPORT_GRPC,
    PL_TRANSPORT_HTTP,
    PL_TRANSPORT_COUNT
} pl_transport;

typedef struct pl_stats pl_stats;
void pl_stats_add(pl_stats *stats, pl_signal signal, pl_stat stat, uint64_t n);
/* pl_stats_add for a receiver, also counted under its transport. */
void pl_stats_add_via(pl_stats *stats, pl_transport transport, pl_signal signal, pl_stat stat,
                      uint64_t n);
/* A latency histogram (seconds, fixed buckets), e.g. "send_duration_seconds";
 * NULL-safe to observe. Stays valid for the stats' life. */
typedef struct pl_histogram pl_histogram;
pl_histogram *pl_stats_histogram(pl_stats *stats, const char *name, const char *help);
void pl_histogram_observe_ns(pl_histogram *h, uint64_t ns);
uint64_t pl_stats_get(const pl_stats *stats, pl_signal signal, pl_stat stat);
/* A component-specific counter or gauge, e.g. "linked_samples"; the returned
 * pointer stays valid for the component's life. `help` is one line. Never
 * NULL: without stats (a component created by a unit test) or memory, the
 * pointer is a sink shared by all, written and never read. */
uint64_t *pl_stats_counter(pl_stats *stats, const char *name, const char *help);
int64_t *pl_stats_gauge(pl_stats *stats, const char *name, const char *help);
/* Marks the component degraded for /health with a one-line reason (disk
 * full, store broken), or healthy again with NULL. Any thread; cheap enough
 * for state changes, not for every batch. */
void pl_stats_set_degraded(pl_stats *stats, const char *reason);

/* ---- the host: services every component may use ------------------------- */

/* The worker pool (`service.workers`, pipeline/workers.c) as components
 * reach it: through the host of their create settings. Each hook takes the
 * pool as its first argument. */
struct pl_http_server;
struct pl_http_server_options;
struct pl_http_request;
struct pl_http_response;
typedef void (*pl_host_http_handler)(void *arg, struct pl_http_request *req,
                                     struct pl_http_response *res);
typedef struct pl_host_workers {
    unsigned (*count)(void *pool);
    /* work(arg) on a worker, then done(arg) on the pipeline loop; false: the
     * caller does the work itself */
    bool (*submit)(void *pool, void (*work)(void *arg), void (*done)(void *arg), void *arg);
    /* listens on `endpoint` on every worker loop: servers[i] is worker i's */
    pl_status (*listen)(void *pool, const char *endpoint,
                        const struct pl_http_server_options *options, pl_host_http_handler handler,
                        void *arg, struct pl_http_server **servers, pl_err *err);
    void (*close)(void *pool, struct pl_http_server **servers, unsigned count);
    /* from a worker thread: consumes `batch` on the pipeline loop */
    pl_status (*consume)(void *pool, pl_consumer *next, pl_batch *batch);
} pl_host_workers;

/* What the process running the pipeline lends its components. The graph
 * hands one to every component in its create settings; NULL (a component
 * built by a unit test) is a host without a worker pool. */
struct pl_auth_registry;
typedef struct pl_host {
    const pl_host_workers *workers; /* NULL: no pool */
    void *pool;
    /* the running authentication extensions (extensions/auth.h); NULL:
     * those of components created without a host */
    struct pl_auth_registry *auth;
    /* memory pressure (pl_memory_state), set by the memory_limiter; NULL:
     * the cell of components created without a host */
    volatile int *memory;
    /* files one component at a time may hold (pl_host_claim); NULL: no
     * check */
    struct pl_claims *claims;
} pl_host;

/* Files (or other names) that one component at a time may use, such as a
 * sending queue's storage file, which it opens with an exclusive lock. A
 * host keeps one list for the components it runs, so two pipelines in one
 * process keep two. Safe from any thread. */
typedef struct pl_claims pl_claims;
pl_claims *pl_claims_new(void); /* NULL when out of memory */
void pl_claims_free(pl_claims *claims);
/* Claims `name` for `owner`: true, or false when another owner holds it
 * (its name copied to holder[holder_size]) or on OOM (holder ""). A host
 * without claims (NULL, or a unit test's) grants every claim. */
bool pl_host_claim(const pl_host *host, const char *name, const char *owner, char *holder,
                   size_t holder_size);
/* Gives back what pl_host_claim granted `owner`. */
void pl_host_unclaim(const pl_host *host, const char *name, const char *owner);

/* The pool's workers; 0 without a pool (everything on the pipeline loop). */
unsigned pl_host_workers_count(const pl_host *host);
/* pl_host_workers.submit; false without a pool. */
bool pl_host_submit(const pl_host *host, void (*work)(void *arg), void (*done)(void *arg),
                    void *arg);
/* pl_host_workers.listen; servers holds pl_host_workers_count() entries. */
pl_status pl_host_listen(const pl_host *host, const char *endpoint,
                         const struct pl_http_server_options *options, pl_host_http_handler handler,
                         void *arg, struct pl_http_server **servers, pl_err *err);
/* Closes servers[0..count) on their workers and sets them to NULL. */
void pl_host_close(const pl_host *host, struct pl_http_server **servers, unsigned count);

/* A worker thread's host, set once by the thread when it starts
 * (pipeline/workers.c): pl_consumer_consume hands batches over through it.
 * pl_host_worker answers NULL on any other thread, and on a worker that
 * runs the pipeline in the loop's stead (pl_pipeline_borrowed). */
void pl_host_enter_worker(const pl_host *host);
const pl_host *pl_host_worker(void);
bool pl_host_on_worker(void); /* pl_host_worker() != NULL */

/* True on a worker thread that runs the pipeline in the pipeline loop's
 * stead, holding the pipeline lock (pipeline/workers.c, "the pipeline
 * lock"). Code that keeps state for the loop's thread alone (the
 * write-ahead log) treats such a thread as the loop's: the lock orders its
 * calls with the loop's own. pl_pipeline_set_borrowed is for workers.c. */
bool pl_pipeline_borrowed(void);
void pl_pipeline_set_borrowed(bool on);

typedef struct pl_clock {
    uint64_t (*now)(void *arg); /* Unix time in ns */
    void *arg;
    uint64_t (*mono)(void *arg); /* monotonic ns, for holds and timers (NULL: see below) */
} pl_clock;
uint64_t pl_clock_now(const pl_clock *clock); /* real time if clock or now is NULL */
/* Monotonic time for holds and timers: mono when set, else now when set
 * (a test injecting one clock drives both), else CLOCK_MONOTONIC. */
uint64_t pl_clock_mono(const pl_clock *clock);
uint64_t pl_time_now_ns(void);  /* CLOCK_REALTIME */
uint64_t pl_time_mono_ns(void); /* CLOCK_MONOTONIC */

/* Memory pressure, set by the memory_limiter processor, read by anything
 * that holds data (correlation, batch) or accepts it: the host's
 * (pl_host_memory_state). pl_memory_state_get and _set are the cell of
 * components created without a host (unit tests). */
typedef enum pl_memory_state {
    PL_MEMORY_OK = 0,
    PL_MEMORY_SOFT = 1, /* refuse new data */
    PL_MEMORY_HARD = 2, /* also release held data early */
} pl_memory_state;
pl_memory_state pl_memory_state_get(void);
void pl_memory_state_set(pl_memory_state state);
pl_memory_state pl_host_memory_state(const pl_host *host);
void pl_host_set_memory_state(const pl_host *host, pl_memory_state state);

/* ---- the component descriptor ------------------------------------------ */

typedef enum pl_kind {
    PL_KIND_RECEIVER = 0,
    PL_KIND_PROCESSOR,
    PL_KIND_EXPORTER,
    PL_KIND_EXTENSION,
} pl_kind;
const char *pl_kind_name(pl_kind kind); /* "receiver", ... */

typedef struct pl_create_settings {
    const char *id;      /* "otlp", "otlphttp/tempo": for logs and metrics */
    uv_loop_t *loop;     /* the one event loop; hooks run on it */
    pl_stats *stats;     /* this component's counters */
    pl_clock clock;      /* real time unless a test injects one */
    const pl_host *host; /* the worker pool and other host services; may be NULL */
    /* Receivers only: where each signal goes (NULL: no pipeline takes it). */
    pl_consumer *next[PL_SIGNAL_COUNT];
    /* Signals this instance is used with (union over its pipelines). */
    unsigned signals;
} pl_create_settings;

typedef struct pl_component_type {
    const char *type; /* the config key before any '/' */
    pl_kind kind;
    unsigned signals; /* PL_SIGNAL_MASK(...) | ... */
    const char *description;
    const pl_cfg_section *config;

    /* Builds an instance from a validated config (borrowed: copy what you
     * keep). Nothing may listen or connect yet. */
    pl_status (*create)(const pl_create_settings *settings, const void *config, void **out_self,
                        pl_err *err);
    /* Starts listening / connecting / timers. NULL = nothing to start. */
    pl_status (*start)(void *self, pl_err *err);
    /* Processors: takes `batch`; passes it (or what it becomes) to `next`
     * now or later, or frees it. `next` depends on the pipeline the batch
     * came through, which matters for instances shared between pipelines:
     * keep the pointer with held data. */
    pl_status (*consume)(void *self, pl_batch *batch, pl_consumer *next);
    /* Exporters: borrows `batch`; encode or copy before returning. Returning
     * PL_ERR_REFUSED makes receivers answer with a retryable status. */
    pl_status (*export)(void *self, const pl_batch *batch);
    /* Stop taking new work: receivers close listeners and connections,
     * processors hand everything they hold to its `next`, exporters start
     * draining their queues. Must not block. */
    void (*shutdown)(void *self);
    /* Items still in flight (exporters' queues); the host waits for 0 or the
     * drain deadline after shutdown. NULL = always 0. */
    size_t (*pending)(void *self);
    /* Releases everything; called once handles are closed and the loop ran. */
    void (*destroy)(void *self);
    /* Exporters whose sending queue keeps its batches on disk: that queue
     * (exporters/queue.h, pl_queue_stored), for the write-ahead log the
     * graph puts at the entry of a pipeline whose processors hold data.
     * NULL hook or NULL answer: no persistent queue. */
    struct pl_queue *(*stored_queue)(void *self);
    /* Signals of `signals` that pipelines may give it (as the Collector
     * does) but that it hands on unchanged; validate warns about each use. */
    unsigned signals_passed;
    /* Signals it handles more coarsely than the Collector (its description
     * says how); validate warns about each use. */
    unsigned signals_coarse;
} pl_component_type;

/* The fields every descriptor below fills in the same way, so that each
 * component's table says only what differs: its name, kind, signals and
 * config section, then the four lifecycle hooks most components have. */
#define PL_COMPONENT_HEAD(type_, kind_, signals_, config_)                                         \
    .type = (type_), .kind = (kind_), .signals = (signals_), .config = (config_)
#define PL_COMPONENT_LIFECYCLE(create_, start_, shutdown_, destroy_)                               \
    .create = (create_), .start = (start_), .shutdown = (shutdown_), .destroy = (destroy_)

#endif
