/*
 * pprof.h: google/pprof `Profile` <-> proflink's profiles model (OTLP shape).
 *
 * Decoding (what the Pyroscope receiver and pprof_scrape use):
 *
 *   A pprof Profile has many value columns (`sample_type` is repeated); an
 *   OTLP Profile has exactly one. Like the Collector's pprof translator and
 *   like Pyroscope itself (which stores one series per sample type, e.g.
 *   process_cpu:samples:count and process_cpu:cpu:nanoseconds), the decoder
 *   makes ONE OTLP Profile PER pprof sample_type column, in pprof order, so no
 *   value column is lost. The profiles of one pprof share everything else:
 *   their samples point at the same stacks, attributes and links, and each
 *   sample holds the single value of its column. The column pprof calls the
 *   default (default_sample_type, or the last one when unset) is marked with
 *   the profile attribute `pprof.default_sample_type = true`.
 *
 *   pprof refers by id (location_id, function_id, mapping_id, sparse, any
 *   order); OTLP by index into one dictionary per request. Each id table gets
 *   an id -> position map (a direct array when ids are dense, as every real
 *   profiler writes them, else a hash), and every reference is checked:
 *   an unknown id, a string index out of range, a value count that does not
 *   match the sample types, all give PL_ERR_INVALID with a message naming
 *   the element ("sample 12: location id 99 not found").
 *
 *   Sample labels become sample attributes: string labels as strings,
 *   numeric labels as ints with their unit. The span-link labels do not:
 *   `span_id` or `profile_id` (16 hex chars) becomes the sample's Link span
 *   id, and `trace_id` (32 hex chars) its trace id; a malformed value stays an
 *   ordinary attribute. A Link with a span id and no trace id has
 *   trace_id_len 0 (the trace is not known, which is not the same as zero).
 *
 *   The string table must be UTF-8 without NUL bytes, as Pyroscope requires:
 *   anything else is refused (PL_ERR_INVALID, pl_pprof_builder_bad_strings)
 *   before the data can be handed on and refused later by a backend.
 *
 *   Strings are views into the (decompressed) input, which the builder adopts
 *   into the batch; all other memory comes from the batch arena, in arrays
 *   sized per profile (no allocation per sample). Several pprofs can be
 *   decoded into one batch (the push API carries many): a builder keeps hash
 *   indexes of the batch dictionary's strings, stacks, attributes and links
 *   so they are shared, not repeated.
 *
 * Encoding (what the pyroscope exporter uses): one OTLP Profile (optionally a
 * subset of its samples, e.g. one service's) becomes one pprof Profile with a
 * single value column, following Pyroscope's own OTLP -> pprof conversion
 * (shared/spec/pprof.md §6): rebuilt string table, ids = 1-based positions of
 * the entries actually used, sample attributes as labels, the Link as
 * `span_id`/`trace_id` labels, and the CPU special case (samples:count with
 * period cpu:nanoseconds becomes cpu:nanoseconds with values x period).
 */
#ifndef PL_PPROF_H
#define PL_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/model.h"
#include "core/status.h"

/* Largest pprof accepted after decompression (Pyroscope's default max
 * profile size is 4 MiB; scrapes of big heaps can be larger). */
#define PL_PPROF_MAX_DECODED (64u << 20)

/* What the caller knows about the profile besides its bytes. */
typedef struct pl_pprof_meta {
    const pl_kv *resource_attrs; /* copied by value (keys/values must outlive the batch) */
    uint32_t n_resource_attrs;
    pl_bytes scope_name;
    pl_bytes scope_version;
    /* Used when the pprof has no time_nanos / duration_nanos (0 = unknown). */
    uint64_t default_time_unix_nano;
    uint64_t default_duration_nano;
    size_t max_decoded_size; /* 0 = PL_PPROF_MAX_DECODED */
    /* Pyroscope's profile name (`__name__`) for every column of this pprof,
     * when the API it came through says it (a push series' label, a JFR
     * event kind, a scraped profile's kind): kept as the profile attribute
     * PL_PPROF_NAME_ATTRIBUTE. Empty: none (see pl_pprof_builder_name_last). */
    pl_bytes profile_name;
    /* Pyroscope's repairs of old .NET profiler uploads (its /ingest does
     * them for spyName=dotnetspy): function ids that are all 0 are set to
     * the location ids (when there are as many functions as locations), and
     * '-' in sample type names becomes '_'. */
    bool repair_dotnet;
} pl_pprof_meta;

/* The profile attribute that carries a profile's Pyroscope name. It travels
 * with the profile (OTLP keeps profile attributes between proflink tiers),
 * so the pyroscope exporter and the store name the data as the Pyroscope
 * server it was meant for would have: see pl_pprof_profile_name. */
#define PL_PPROF_NAME_ATTRIBUTE "pyroscope.profile.name"

typedef struct pl_pprof_builder pl_pprof_builder;

/* Starts decoding pprofs into `batch` (a PL_SIGNAL_PROFILES batch, usually
 * empty). The batch stays owned by the caller. NULL on OOM. */
pl_pprof_builder *pl_pprof_builder_new(pl_batch *batch);

/* Decodes one pprof (gzip-compressed or raw protobuf, told apart by the gzip
 * magic) and appends one ResourceProfiles with one ScopeProfiles holding one
 * Profile per sample type. `data` is only read; what the batch needs is
 * copied (the decompressed form is adopted by the batch). On error nothing
 * is appended to the resource list, but the dictionary may hold unused
 * entries: callers drop the whole batch on error. */
pl_status pl_pprof_builder_add(pl_pprof_builder *b, const uint8_t *data, size_t len,
                               const pl_pprof_meta *meta, pl_err *err);

/* A budget for everything this builder decodes (one request: every sample of
 * a push request, every part of an upload). max_bytes covers the
 * decompressed pprofs the batch adopts plus what is decoded into its arena;
 * max_objects counts strings, mappings, functions, locations and samples
 * times sample types. A pprof that would go over is refused with
 * PL_ERR_TOO_LARGE before the memory is spent (the counts are checked before
 * the tables are allocated; gunzip stops at the bytes left). 0 = no limit. */
void pl_pprof_builder_set_budget(pl_pprof_builder *b, size_t max_bytes, size_t max_objects);

/* Names every profile of the pprof added last (its columns) with `name`,
 * Pyroscope's `__name__` (PL_PPROF_NAME_ATTRIBUTE; copied into the batch),
 * for names known only after decoding (/ingest: pl_pprof_ingest_name).
 * -1 on OOM or when nothing was added. */
int pl_pprof_builder_name_last(pl_pprof_builder *b, pl_bytes name);

/* The sample types of the pprof added last, in pprof order (views into the
 * batch): at most `max` into `out`; returns how many it has. */
uint32_t pl_pprof_builder_last_types(pl_pprof_builder *b, pl_bytes *out, uint32_t max);

/* True when the last refusal was for the string table itself (a NUL byte or
 * invalid UTF-8): Pyroscope answers those 422 on /ingest. */
bool pl_pprof_builder_bad_strings(const pl_pprof_builder *b);

/* Pyroscope's /ingest rule for naming a pprof upload (one name for all its
 * columns), from its sample types in order and each one's display name
 * (sample_type_config's `display-name`, or Pyroscope's defaults when the
 * upload has no config: NULL display): any type `wall` -> wall; else the
 * first type whose display name (or type) contains `cpu` -> process_cpu,
 * `alloc_`/`inuse_` or is `space`/`objects` -> memory, `mutex_` -> mutex,
 * `block_` -> block, `goroutines` -> goroutines; else the last one's
 * display name. */
pl_bytes pl_pprof_ingest_name(const pl_bytes *types, const pl_bytes *display, uint32_t n);

/* Samples (pprof samples, not multiplied by columns) decoded so far. */
size_t pl_pprof_builder_samples(const pl_pprof_builder *b);

void pl_pprof_builder_free(pl_pprof_builder *b);

/* Convenience: a new batch holding one decoded pprof. NULL + err on error. */
pl_batch *pl_pprof_decode(const uint8_t *data, size_t len, const pl_pprof_meta *meta, pl_err *err);

/* Gunzips `data` into a malloc'd buffer of at most `limit` bytes.
 * PL_ERR_INVALID for a corrupt stream, PL_ERR_TOO_LARGE past the limit. */
pl_status pl_gunzip(const uint8_t *data, size_t len, size_t limit, uint8_t **out, size_t *out_len,
                    pl_err *err);
/* Gzips `data` (level 1, like the Go runtime) into `out` (appended). -1 on failure. */
int pl_gzip(const uint8_t *data, size_t len, pl_buf *out);

static inline bool pl_is_gzip(const uint8_t *data, size_t len)
{
    return len >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

/* ---- encoding ----------------------------------------------------------- */

typedef struct pl_pprof_encode_options {
    /* Encode only these sample indices of the profile (NULL: all). */
    const uint32_t *sample_indices;
    uint32_t n_sample_indices;
    /* Apply the CPU special case (samples:count, period cpu:nanoseconds ->
     * cpu:nanoseconds, values x period). */
    bool cpu_to_nanoseconds;
    /* Sample attribute key not written as a label (Pyroscope: service.name). */
    const char *skip_attribute;
    /* time_nanos when the profile has none (0: leave 0). */
    uint64_t default_time_unix_nano;
} pl_pprof_encode_options;

/* Encodes `profile` (whose indices point into `dict`) as an uncompressed
 * pprof Profile, appended to `out`. PL_ERR_INVALID when the profile refers
 * outside the dictionary. */
pl_status pl_pprof_encode(const pl_dictionary *dict, const pl_profile *profile,
                          const pl_pprof_encode_options *options, pl_buf *out, pl_err *err);

/* The Pyroscope profile name (`__name__`) of a profile. A profile that came
 * through a Pyroscope API carries the name that API gave it
 * (PL_PPROF_NAME_ATTRIBUTE): that name, *cpu_special false (Pyroscope
 * stores such uploads as they are). Any other profile is named by
 * Pyroscope's OTLP ingest (pkg/ingester/otlp/convert.go): samples:count
 * with a cpu:nanoseconds period is "process_cpu" (*cpu_special set: sent as
 * cpu:nanoseconds, values x period), events:nanoseconds (or off_cpu) with no
 * period "off_cpu", anything else "process_cpu" (upstream's guess). */
pl_bytes pl_pprof_profile_name(const pl_dictionary *dict, const pl_profile *profile,
                               bool *cpu_special);

/* ---- building a pprof from named stacks (legacy text formats) ----------- */

/* Pyroscope converts its legacy upload formats (folded stacks, lines) to
 * pprof before ingesting them; proflink does the same and then decodes that
 * pprof like any other, so one code path checks and converts everything.
 * Each distinct frame name becomes one function and one location. */
typedef struct pl_pprof_writer pl_pprof_writer;

typedef struct pl_pprof_writer_options {
    const char *sample_type, *sample_unit; /* e.g. "cpu", "nanoseconds" */
    const char *period_type, *period_unit; /* NULL: no period type */
    int64_t period;
    uint64_t time_unix_nano, duration_nano;
} pl_pprof_writer_options;

pl_pprof_writer *pl_pprof_writer_new(const pl_pprof_writer_options *options);
/* Adds a sample; `frames` (leaf first) are borrowed until finish. -1 on OOM. */
int pl_pprof_writer_add(pl_pprof_writer *w, const pl_bytes *frames, size_t n, int64_t value);
size_t pl_pprof_writer_samples(const pl_pprof_writer *w);
/* Appends the uncompressed pprof to `out`. -1 on OOM. */
int pl_pprof_writer_finish(pl_pprof_writer *w, pl_buf *out);
void pl_pprof_writer_free(pl_pprof_writer *w);

#endif
