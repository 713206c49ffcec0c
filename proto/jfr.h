/*
 * jfr.h: JDK Flight Recorder recordings (what the Pyroscope Java agent
 * uploads to /ingest?format=jfr) -> pprof profiles, the way Pyroscope's own
 * JFR ingestion turns them into series (shared/spec/jfr.md).
 *
 * A body is one or more JFR chunks back to back. Each chunk has a header
 * (magic "FLR\0", version 2.x, sizes and offsets, ticks per second, whether
 * integers are LEB128-compressed), a metadata event that declares every type
 * with its fields in order, checkpoint events holding the constant pools
 * (stack traces, methods, classes, symbols, thread states, ...), and the
 * events themselves. The reader is driven by the metadata alone: every value
 * of every type can be read or skipped from its declaration, so event types
 * and pool types it does not use are skipped, and one reader handles the
 * JDK's own recordings and async-profiler's.
 *
 * Events and the profiles they become (one pprof per kind that occurs):
 *
 *   jdk.ExecutionSample (thread state not SLEEPING)  process_cpu  cpu/nanoseconds
 *     and also `wall` when the recording's jdk.ActiveSetting `event` is wall
 *   jdk.NativeMethodSample, profiler.WallClockSample  wall       wall/nanoseconds
 *   jdk.ObjectAllocationInNewTLAB    memory  alloc_in_new_tlab_objects, _bytes (tlabSize)
 *   jdk.ObjectAllocationOutsideTLAB  memory  alloc_outside_tlab_objects, _bytes
 *   jdk.ObjectAllocationSample       memory  alloc_sample_objects, _bytes (weight)
 *   jdk.JavaMonitorEnter             mutex   contentions/count, delay/nanoseconds
 *   jdk.ThreadPark                   block   contentions/count, delay/nanoseconds
 *   profiler.LiveObject, jdk.OldObjectSample  memory  live/count (period objects/count)
 *   profiler.Malloc                  memory  malloc_objects/count, malloc_bytes/bytes (size;
 *                                    no period type, as Pyroscope makes it)
 *
 * CPU and wall samples are worth one sampling period each (1e9 / sampleRate
 * ns); durations are converted from ticks with the chunk's ticks per second.
 * Frames are `package.Class.method` (the class's internal name with '/'
 * turned into '.') with the frame's line number, innermost first. Samples
 * with the same stack, async-profiler context id and span are summed;
 * the context's labels (from the upload's LabelsSnapshot part) become pprof
 * string labels, so a `span_id` / `profile_id` label links the samples to
 * their span like any pprof upload's. async-profiler 3.x also writes the
 * OpenTelemetry span into its events (`spanId`, `spanName`: read wherever
 * the recording's metadata declares them): a non-zero spanId becomes the
 * label `span_id` (16 lower-case hex digits, what Pyroscope stores its
 * `profile_id` as), a non-zero spanName the label `span_name` (its text
 * from the LabelsSnapshot strings, left out when empty or unknown).
 *
 * Untrusted input: every length, count, offset and reference is checked
 * (PL_ERR_INVALID, with what and where); every table keyed by file data is a
 * keyed-hash table (core/hash.h); the decoder's memory and its object count
 * (pool entries, events, samples) have a per-call budget, PL_ERR_TOO_LARGE
 * past it.
 */
#ifndef PL_JFR_H
#define PL_JFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"

/* The labels part of an upload (LabelsSnapshot, proto/jfr/labels.proto). */
typedef struct pl_jfr_labels pl_jfr_labels;

/* Decodes a LabelsSnapshot (raw protobuf; gunzip first). `data` must outlive
 * the result (strings are views into it). NULL + err on error. */
pl_jfr_labels *pl_jfr_labels_decode(const uint8_t *data, size_t len, pl_err *err);
void pl_jfr_labels_free(pl_jfr_labels *labels);
/* Contexts held (for tests). */
size_t pl_jfr_labels_contexts(const pl_jfr_labels *labels);

#define PL_JFR_DEFAULT_MAX_MEMORY  (256u << 20)
#define PL_JFR_DEFAULT_MAX_OBJECTS (8u << 20)

typedef struct pl_jfr_options {
    int64_t sample_rate;         /* Hz (sampleRate); <= 0: 100 */
    uint64_t time_unix_nano;     /* the profiles' time; 0: the first chunk's start */
    uint64_t duration_nano;      /* 0: the chunks' duration */
    const pl_jfr_labels *labels; /* NULL: no context labels */
    size_t max_memory;           /* decoder memory budget; 0: PL_JFR_DEFAULT_MAX_MEMORY */
    size_t max_objects;          /* pool entries + events + samples; 0: default */
} pl_jfr_options;

/* What the events became. */
typedef enum pl_jfr_kind {
    PL_JFR_CPU,
    PL_JFR_WALL,
    PL_JFR_ALLOC_IN_NEW_TLAB,
    PL_JFR_ALLOC_OUTSIDE_TLAB,
    PL_JFR_ALLOC_SAMPLE,
    PL_JFR_LOCK,
    PL_JFR_PARK,
    PL_JFR_LIVE,
    PL_JFR_MALLOC,
    PL_JFR_KINDS
} pl_jfr_kind;

typedef struct pl_jfr_profile {
    pl_jfr_kind kind;
    const char *name; /* Pyroscope's __name__: process_cpu, wall, memory, mutex, block */
    pl_buf pprof;     /* uncompressed pprof Profile */
    uint64_t events;  /* events that went into it */
    uint32_t samples; /* pprof samples (distinct stack + context) */
} pl_jfr_profile;

typedef struct pl_jfr_result {
    pl_jfr_profile profiles[PL_JFR_KINDS]; /* the kinds that occurred, in kind order */
    uint32_t n_profiles;
    uint32_t chunks;
    uint64_t events;                       /* events in the body, of every type */
    uint64_t events_by_kind[PL_JFR_KINDS]; /* events read per kind (a wall ExecutionSample counts
                                              under CPU) */
    uint64_t skipped_no_stack;             /* events of a used type without a stack trace */
    char event_setting[32]; /* jdk.ActiveSetting `event` (async-profiler's mode), "" if none */
} pl_jfr_result;

/* Decodes `data` (a JFR body: raw chunks, already gunzipped) into one pprof
 * per kind of event found. PL_ERR_INVALID for malformed or truncated input,
 * PL_ERR_TOO_LARGE past the budget. Free the result with pl_jfr_result_free
 * whatever the status. */
pl_status pl_jfr_to_pprof(const uint8_t *data, size_t len, const pl_jfr_options *options,
                          pl_jfr_result *out, pl_err *err);
void pl_jfr_result_free(pl_jfr_result *result);

static inline bool pl_is_jfr(const uint8_t *data, size_t len)
{
    return len >= 4 && data[0] == 'F' && data[1] == 'L' && data[2] == 'R' && data[3] == 0;
}

#endif
