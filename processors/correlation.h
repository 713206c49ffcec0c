/*
 * correlation.h: the correlation processor's config and its hooks for tests
 * and benchmarks.
 *
 * The processor itself is the descriptor pl_processor_correlation (register
 * it, create it, drive it through consume/shutdown like any component). The
 * functions below let a test play out an arrival order exactly: inject a
 * clock through pl_create_settings.clock, then call pl_correlation_tick()
 * instead of waiting for the sweep timer (which only exists when the create
 * settings carry a loop).
 */
#ifndef PL_CORRELATION_H
#define PL_CORRELATION_H

#include <stddef.h>
#include <stdint.h>

#include "core/component.h"

typedef struct pl_correlation_config {
    int64_t window;              /* ns each side waits for its partner */
    int64_t span_window;         /* ns; 0 = window */
    int64_t sample_window;       /* ns; 0 = window */
    int64_t max_clock_skew;      /* ns added on both sides of a span's [start, end] */
    int64_t clock_skew_warning;  /* ns; senders' clocks this far from proflink's are
                                    logged (rate-limited) and corrected for (0: never) */
    int64_t max_spans;           /* spans held at once */
    int64_t max_pending_samples; /* samples waiting for their span at once */
    uint64_t max_bytes;          /* held batches + index, bytes */
    pl_strlist span_attributes;  /* span attributes copied onto linked samples */
    int64_t top_functions;       /* N hottest self functions in the span summary */
    bool early_release;          /* release spans once their service's profiles cover them */
    int64_t max_window;          /* ns; longest a span waits for its service's profiles
                                    (0: spans wait span_window, no cadence learning) */
    int64_t warmup;              /* ns; a service with no span-linked profiles after this
                                    long is not held any more */
    int64_t late_window;         /* ns a departed span's summary is kept (0: none kept) */
    int64_t late_max_spans;      /* summaries kept at once */
    uint64_t late_max_bytes;     /* their memory */
    char *storage;               /* directory held span batches spill to beyond max_bytes
                                    (NULL: they leave early) */
    uint64_t max_spill_bytes;    /* disk the spill files may take; beyond, early release */
    char *hold_compression;      /* "zstd": held span batches kept encoded and compressed in
                                    memory (needs late_window); "none": decoded. NULL: zstd */
    int64_t bus_lag_wait;        /* ns; longest a sample batch from a bus partition whose
                                    spans lag waits for them (0: no such hold) */
    uint64_t bus_lag_max_bytes;  /* sample batches held for lag at once, bytes */
    /* Attribute names (NULL = the default shown in the config table). */
    char *trace_id_attribute;        /* on samples: trace_id */
    char *span_id_attribute;         /* on samples: span_id */
    char *span_name_attribute;       /* on samples: span_name */
    char *root_span_name_attribute;  /* on samples: root_span_name */
    char *service_name_attribute;    /* on samples: service.name */
    char *profile_id_attribute;      /* on spans: pyroscope.profile.id */
    char *profile_samples_attribute; /* on spans: profile.samples */
    char *cpu_time_attribute;        /* on spans: profile.cpu_time_ns */
    char *cpu_time_total_attribute;  /* on spans: profile.cpu_time_total_ns */
    char *wall_time_attribute;       /* on spans: profile.wall_time_ns */
    char *top_functions_attribute;   /* on spans: profile.top_functions */
} pl_correlation_config;

extern const pl_component_type pl_processor_correlation;
extern const pl_cfg_section pl_correlation_config_section;

/* Fills cfg with the documented defaults (no YAML needed); strings NULL. */
void pl_correlation_config_defaults(pl_correlation_config *cfg);

/* Releases every held batch whose window has closed at the clock's now, and
 * expires old markers. The sweep timer calls this; tests call it directly. */
void pl_correlation_tick(void *self);

/* A service's learned upload cadence (see docs/correlation.md). */
typedef struct pl_correlation_cadence {
    bool known;             /* the service exists */
    bool linked;            /* one of its profile streams carries span ids */
    uint64_t interval;      /* learned time between uploads, ns (0: not yet) */
    uint64_t delay;         /* learned arrival delay after the covered end, ns */
    uint64_t covered_until; /* data time its span-linked profiles cover */
    uint64_t hold;          /* how long its spans are held now, ns (0: not held) */
} pl_correlation_cadence;
void pl_correlation_get_cadence(void *self, const char *service, pl_correlation_cadence *out);

/* What the processor holds right now. */
typedef struct pl_correlation_usage {
    size_t held_spans;      /* spans in held trace batches */
    size_t indexed_spans;   /* of which in the span table (none while no profiles come) */
    size_t pending_samples; /* samples waiting for their span */
    size_t held_span_batches;
    size_t held_sample_batches;
    size_t held_bytes;        /* pl_batch_memory of held batches */
    size_t held_sample_bytes; /* of which held sample batches */
    size_t index_bytes;       /* the span and sample tables and side structures */
    size_t span_table_slots;  /* capacity of the span table */
    size_t markers;           /* placeholders and "gone" markers kept for late partners */
    size_t late_spans;        /* summaries of departed spans kept for late samples */
    size_t late_bytes;        /* their memory */
    size_t name_bytes;        /* service and function names held */
    size_t services;          /* distinct service names known */
    size_t spilled_spans;     /* held spans whose batch is on disk */
    size_t spill_bytes;       /* bytes of the spill files */
    size_t packed_spans;      /* held spans whose batch is kept compressed in memory */
    size_t packed_bytes;      /* the compressed bytes of those batches */
} pl_correlation_usage;
void pl_correlation_get_usage(void *self, pl_correlation_usage *out);

/* Counters (also exported through pl_stats_counter, same names). */
typedef struct pl_correlation_counters {
    uint64_t linked_samples, unlinked_samples, late_samples, released_early_samples;
    uint64_t linked_spans, unlinked_spans, late_spans, released_early_spans;
    uint64_t spans_released_on_coverage;
    uint64_t late_linked_samples; /* late samples enriched from a departed span's summary */
    uint64_t spans_not_held;      /* spans of services without span-linked profiles */
    uint64_t refused_items;       /* released items the next consumer refused */
    uint64_t spilled_batches;     /* held span batches written to storage */
    uint64_t spilled_bytes;       /* their encoded bytes */
    uint64_t spill_failures;      /* spills or read-backs that failed */

    /* Samples read from a bus (correlation_bus.c): */
    uint64_t bus_lag_held_samples; /* held beyond sample_window: their partition's spans lagged */
    uint64_t bus_lag_caught_up_samples; /* of those, let go once their spans came or the partition
                                           caught up */
    uint64_t bus_lag_bound_samples;     /* let go at bus_lag_wait or another bound, or not held
                                           longer for want of room (bus_lag_max_bytes) */
} pl_correlation_counters;
void pl_correlation_get_counters(void *self, pl_correlation_counters *out);

#endif
