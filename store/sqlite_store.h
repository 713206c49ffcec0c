/*
 * sqlite_store.h: the embedded store behind the `sqlite` exporter, the
 * `proflink query` command and the read-only HTTP JSON query API.
 *
 * One SQLite database (WAL mode) holds spans and profile samples:
 *
 *   spans     one row per span: ids, parent, name, service, kind, times,
 *             status, attributes and events (JSON text), the resource's
 *             attributes (JSON, stored once in `strings`) and the profile summary the
 *             correlation processor attached (profile id, samples, CPU time,
 *             hottest functions). Span ids are stored as INTEGER (the 8 bytes
 *             read big-endian as a signed 64-bit number): a small, fast key.
 *   traces    one row per trace, maintained as spans arrive: time envelope,
 *             root span, span and error counts. It makes "slowest recent
 *             traces" an index range scan instead of a GROUP BY over spans.
 *   samples   profile samples aggregated per (service, 10 s bucket, sample
 *             type, span, stack): value, CPU nanoseconds and sample count.
 *             Unlinked samples have span_id 0. The primary key doubles as the
 *             index for service flame graphs (service, time range).
 *   service_profiles
 *             the same samples rolled up per (service, minute, type, stack),
 *             without the span: service-wide flame graphs and top functions
 *             over a time range read this much smaller table (one minute
 *             resolution) instead of every per-span row.
 *   profile_types
 *             per stored sample type, the profile name and period type of
 *             its last profile: the Pyroscope querier's type ids.
 *   stacks, functions, strings
 *             stored once (deduplicated): a stack is the list of function ids,
 *             root first, varint-encoded, found by a 64-bit hash.
 *
 * Spans and samples may arrive in any order and from different batches;
 * queries join them by span id (and trace id when a sample knows it) at
 * query time, so nothing depends on which side was written first.
 *
 * A pl_store is one connection. It is not thread-safe: the exporter's writer
 * thread owns one, readers (CLI, query API) open their own. WAL lets readers
 * work while the writer commits.
 *
 * Query results are returned as structs whose memory lives in one arena per
 * result; each has a free function.
 */
#ifndef PL_SQLITE_STORE_H
#define PL_SQLITE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/model.h"
#include "core/status.h"

typedef struct pl_store pl_store;

/* Width of the time buckets samples are aggregated in. */
#define PL_STORE_BUCKET_NS 10000000000ull

typedef struct pl_store_options {
    bool read_only;           /* readers: never create or change the file */
    int busy_timeout_ms;      /* how long to wait for a lock; 0 = 5000 */
    int64_t cache_kib;        /* page cache; 0 = 128 MiB for a writer, 16 MiB read-only */
    uint64_t max_size;        /* the store's size limit (0 = none): the WAL between
                                 checkpoints stays under an eighth of it */
    bool checkpoint_thread;   /* a writer: WAL checkpoints on a thread of their own
                                 (store_checkpoint.c), not in the writer's commits */
    int64_t checkpoint_pages; /* WAL pages between checkpoints; 0 = 128 MiB of them
                                 (with max_size, at most an eighth of it) */
    int64_t span_ids_merge;   /* recent span ids moved to the large id table in one
                                 pass once this many; 0 = 262,144 (store_internal.h) */
} pl_store_options;

/* What a failure was, so callers can tell a transient lock from a broken file. */
typedef enum pl_store_error {
    PL_STORE_ERR_NONE = 0,
    PL_STORE_ERR_BUSY,    /* locked by another connection: retry later */
    PL_STORE_ERR_CORRUPT, /* not a database, malformed, or not a proflink store */
    PL_STORE_ERR_MISSING, /* (read-only) no database at that path yet */
    PL_STORE_ERR_IO,      /* disk full, permissions, other I/O */
    PL_STORE_ERR_OTHER,
} pl_store_error;

/* Opens (and, unless read_only, creates: parent directories, schema) the
 * store at `path`. On failure returns an error status with a message that
 * names the file and what to do, and sets *kind when kind is not NULL. */
pl_status pl_store_open(const char *path, const pl_store_options *options, pl_store **out,
                        pl_store_error *kind, pl_err *err);
void pl_store_close(pl_store *store);
/* The last failure's kind (after a write or query failed). */
pl_store_error pl_store_last_error(const pl_store *store);
const char *pl_store_path(const pl_store *store);

/* A writer opened with checkpoint_thread: passes its thread ran, the tails
 * of them the writer copied itself, and commits that waited for a pass
 * (the thread behind). Writer thread only. Zeros otherwise. */
typedef struct pl_store_checkpoint_stats {
    uint64_t passes, tails, waits;
} pl_store_checkpoint_stats;
void pl_store_checkpoint_counts(pl_store *store, pl_store_checkpoint_stats *out);

/* ---- writing ------------------------------------------------------------ */

typedef struct pl_store_write_stats {
    uint64_t spans;           /* spans inserted */
    uint64_t duplicate_spans; /* spans already present (ignored) */
    uint64_t invalid_spans;   /* spans without valid ids (skipped) */
    uint64_t samples;         /* profile samples (values) taken in */
    uint64_t sample_rows;     /* (span, stack, bucket) rows upserted */
} pl_store_write_stats;

/* Several batches may go into one transaction: begin, write..., commit.
 * On any error call pl_store_rollback (it also forgets the id caches, which
 * may hold ids the rolled-back transaction created). */
pl_status pl_store_begin(pl_store *store, pl_err *err);
/* Writes a traces or profiles batch (other signals are ignored). Borrowed. */
/* Writes n batches (traces and profiles) in the current transaction, as
 * pl_store_write on each would, but with the spans of all of them inserted
 * in trace-id order, one `traces` upsert per trace, and the sample rows of
 * all profiles aggregated and upserted in key order: inserts into the
 * indexes on random ids then walk each index once instead of jumping. */
pl_status pl_store_write_many(pl_store *store, const pl_batch *const *batches, size_t n,
                              pl_store_write_stats *stats, pl_err *err);
pl_status pl_store_write(pl_store *store, const pl_batch *batch, pl_store_write_stats *stats,
                         pl_err *err);
pl_status pl_store_commit(pl_store *store, pl_err *err);
void pl_store_rollback(pl_store *store);
/* begin + write + commit (rollback on error). */
pl_status pl_store_write_batch(pl_store *store, const pl_batch *batch, pl_store_write_stats *stats,
                               pl_err *err);

typedef struct pl_store_retention_stats {
    uint64_t traces_deleted;
    uint64_t spans_deleted;
    uint64_t sample_rows_deleted;
    uint64_t size_before; /* bytes in use (pages not on the free list) */
    uint64_t size_after;
} pl_store_retention_stats;

/* Deletes data older than now_ns - max_age_ns (0 = no age limit), then, while
 * the database uses more than max_size bytes (0 = no limit), the oldest
 * remaining data, and gives freed pages back to the file system. With
 * `one_slice` the size step deletes one slice of at most 5 % of the stored
 * time range and returns (the writer calls again after its next
 * transaction, so writes go on between slices instead of waiting for the
 * whole catch-up). */
pl_status pl_store_enforce_retention(pl_store *store, uint64_t now_ns, uint64_t max_age_ns,
                                     uint64_t max_size, bool one_slice,
                                     pl_store_retention_stats *stats, pl_err *err);
/* Bytes in use (page_count - freelist_count) * page_size; 0 on error. */
uint64_t pl_store_size(pl_store *store);

/* ---- querying ----------------------------------------------------------- */

/* What the time shown for a span or trace is: CPU time when a CPU profile
 * exists, else wall time (a `wall` profile, or samples x a wall period),
 * else a sample count (a count, not nanoseconds). Heap and allocation
 * profiles never count as time. */
typedef enum pl_time_kind {
    PL_TIME_NONE = 0, /* no samples */
    PL_TIME_CPU,      /* nanoseconds of CPU */
    PL_TIME_WALL,     /* nanoseconds of wall-clock time */
    PL_TIME_COUNT,    /* samples */
} pl_time_kind;

/* "cpu", "wall", "samples" or "" (none). */
const char *pl_time_kind_name(pl_time_kind kind);
/* "nanoseconds", "nanoseconds", "count" or "". */
const char *pl_time_kind_unit(pl_time_kind kind);
/* "35.0ms", "1.20s wall" style text for people: CPU as a duration, wall as
 * a duration followed by " wall", counts as "80 samples", none as "-". */
void pl_format_time(pl_time_kind kind, int64_t value, char *out, size_t cap);

typedef struct pl_trace_summary {
    uint8_t trace_id[16];
    const char *root_name;    /* "" when the root span is not stored */
    const char *root_service; /* "" when unknown */
    bool has_root;
    uint64_t start_ns;
    uint64_t duration_ns;   /* root span's duration, else the trace's time envelope */
    int64_t cpu_ns;         /* CPU time seen in profiles; -1 when no samples */
    pl_time_kind time_kind; /* what `time` is */
    int64_t time;           /* CPU ns, else wall ns, else samples (see pl_time_kind) */
    uint32_t span_count;
    uint32_t error_count;
    const char *tenant; /* X-Scope-OrgID it arrived with; "" when none */
} pl_trace_summary;

typedef struct pl_trace_list {
    pl_trace_summary *items;
    size_t n;
    pl_arena arena;
} pl_trace_list;

typedef struct pl_trace_query {
    const char *service;      /* NULL: any; else traces with a span of that service */
    uint64_t since_ns;        /* absolute: traces starting at or after; 0 = all */
    uint64_t min_duration_ns; /* 0 = all */
    uint32_t limit;           /* 0 = 20 */
    const char *root_name;    /* NULL: any; else the root span's name */
    uint64_t until_ns;        /* absolute: traces starting at or before; 0 = open */
    bool errors_only;         /* traces with an error span */
    int64_t min_time;         /* > 0: traces whose `time` (CPU, else wall ns) is at least this */
    bool by_time;             /* order by `time` (CPU, else wall), not duration */
    const char *tenant;       /* NULL: any; else traces of that tenant */
} pl_trace_query;

/* With min_time or by_time, the time of each candidate is computed: the
 * PL_STORE_TIME_CANDIDATES slowest traces matching the other filters are
 * ranked, not the whole window. */
#define PL_STORE_TIME_CANDIDATES 2000

/* Recent traces, slowest first (or by time). */
pl_status pl_store_query_traces(pl_store *store, const pl_trace_query *query, pl_trace_list *out,
                                pl_err *err);
void pl_trace_list_free(pl_trace_list *list);

typedef struct pl_function_stat {
    const char *name;
    const char *file;
    int64_t self;  /* value where the function is the leaf */
    int64_t total; /* value of stacks the function appears in (once per stack) */
} pl_function_stat;

typedef struct pl_span_row {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    bool has_parent;
    int depth; /* in the tree: 0 for roots and spans whose parent is missing */
    const char *name;
    const char *service;
    int kind;
    uint64_t start_ns;
    uint64_t end_ns;
    int status_code;
    const char *status_message;
    const char *attributes_json; /* "{}" when none */
    const char *profile_id;      /* the span id (16 hex) when samples are linked to it,
                                    else pyroscope.profile.id as sent, else "" */
    int64_t cpu_ns;              /* from stored samples; else profile.cpu_time_ns; -1 none */
    int64_t samples;             /* stored samples (count); else profile.samples; 0 none */
    pl_time_kind time_kind;      /* what `time` and the `top` values are */
    int64_t time;                /* CPU ns, else wall ns, else samples */
    pl_function_stat *top;       /* hottest functions by self time (CPU, else wall, else count) */
    size_t n_top;
    const char *top_functions_attr; /* profile.top_functions as sent, or "" */
    const char *resource_json;      /* resource attributes, "{}" when none */
    const char *events_json;        /* [{name, time_unix_nano, attributes}], "[]" when none */
} pl_span_row;

typedef struct pl_trace_detail {
    pl_trace_summary summary;
    pl_span_row *spans; /* depth-first, children by start time */
    size_t n;
    pl_arena arena;
} pl_trace_detail;

/* Spans of one trace as a tree, with CPU and hottest functions per span.
 * PL_ERR_NOT_FOUND when the store has no span of that trace. */
pl_status pl_store_query_trace(pl_store *store, const uint8_t trace_id[16], size_t top_n,
                               pl_trace_detail *out, pl_err *err);
void pl_trace_detail_free(pl_trace_detail *detail);

typedef enum pl_profile_scope {
    PL_PROFILE_SPAN = 0,
    PL_PROFILE_TRACE,
    PL_PROFILE_SERVICE,
} pl_profile_scope;

typedef struct pl_profile_query {
    pl_profile_scope scope;
    uint8_t span_id[8];
    uint8_t trace_id[16];
    const char *service; /* PL_PROFILE_SERVICE; NULL = every service */
    uint64_t since_ns;   /* PL_PROFILE_SERVICE: absolute time range; 0 = all */
    uint64_t until_ns;   /* 0 = now / open */
    const char *type;    /* NULL: CPU time if any, else wall time, else a sample count,
                            else (unless time_only) the first stored type;
                            "cpu" / "wall": that clock's time only;
                            otherwise a sample type "alloc_space" or "alloc_space:bytes" */
    bool time_only;      /* type NULL: never fall back to a heap/alloc type */
    bool descendants;    /* PL_PROFILE_SPAN: also the samples of every span below it */
    const char *tenant;  /* NULL: every tenant's samples; else only those that came with
                            this X-Scope-OrgID */
} pl_profile_query;

typedef struct pl_folded_stack {
    const char *frames; /* "root;child;leaf" */
    int64_t value;
    uint32_t leaf_function; /* index into pl_profile_result.functions */
} pl_folded_stack;

typedef struct pl_profile_result {
    const char *type; /* "cpu" (nanoseconds) or the stored "type:unit" */
    const char *unit; /* "nanoseconds", "bytes", "count", ... */
    int64_t total;
    pl_folded_stack *stacks; /* sorted by frames */
    size_t n_stacks;
    pl_function_stat *functions; /* by self value, descending */
    size_t n_functions;
    const char **types; /* what else `type` could ask for in this scope: "cpu", "wall",
                           then every stored "type:unit" */
    size_t n_types;
    pl_arena arena;
} pl_profile_result;

/* Folded stacks and per-function self/total for a span, a trace or a
 * service over a time range. An empty result is not an error. */
pl_status pl_store_query_profile(pl_store *store, const pl_profile_query *query,
                                 pl_profile_result *out, pl_err *err);
void pl_profile_result_free(pl_profile_result *result);

/* Spans with profiles, per service, over the most recent traces. */
typedef struct pl_link_stat {
    const char *service;
    uint64_t spans;  /* spans stored */
    uint64_t linked; /* of which have samples stored or a pyroscope.profile.id */
} pl_link_stat;

typedef struct pl_link_stats {
    pl_link_stat *items; /* by service name */
    size_t n;
    uint64_t traces; /* traces looked at */
    pl_arena arena;
} pl_link_stats;

/* Looks at the spans of the PL_STORE_LINK_TRACES most recent traces
 * starting at or after since_ns (a bounded, indexed read); tenant NULL:
 * every tenant's traces, else those that came with that X-Scope-OrgID. */
#define PL_STORE_LINK_TRACES 2000
pl_status pl_store_query_links(pl_store *store, uint64_t since_ns, const char *tenant,
                               pl_link_stats *out, pl_err *err);
void pl_link_stats_free(pl_link_stats *stats);

/* Service names seen, sorted; tenant NULL: every tenant's, else those of
 * the profiles and traces that came with that X-Scope-OrgID. */
pl_status pl_store_query_services(pl_store *store, const char *tenant, char ***names, size_t *n,
                                  pl_err *err);
void pl_store_free_names(char **names, size_t n);

/* ---- helpers shared by the CLI and the API ----------------------------- */

/* "1.234s", "12.3ms", "850us", "42ns". */
void pl_format_duration(uint64_t ns, char *out, size_t cap);
/* Renders folded stacks as a self-contained SVG flame graph (sqlite_svg.c). */
void pl_flamegraph_svg(const pl_profile_result *profile, const char *title, pl_buf *out);
/* The profile as a gzipped pprof Profile (one function per frame name;
 * time_ns stamps it); -1 on OOM (export_formats.c). */
int pl_flamegraph_pprof(const pl_profile_result *profile, uint64_t time_ns, pl_buf *out);
/* The profile in speedscope's file format (one "sampled" profile). */
int pl_flamegraph_speedscope(const pl_profile_result *profile, const char *name, pl_buf *out);
/* Renders folded stacks as nested JSON {name, value, children} (sqlite_svg.c). */
void pl_flamegraph_json_tree(const pl_profile_result *profile, pl_buf *out);

#endif
