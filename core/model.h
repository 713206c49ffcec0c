/*
 * model.h: proflink's in-memory form of telemetry: traces and profiles
 * decoded from OTLP (or converted from pprof), and opaque logs/metrics.
 *
 * The structs mirror the OTLP messages field for field (see the .proto files in proto/),
 * so that decode -> encode gives back the same bytes for canonical input.
 * Everything a batch points to lives in that batch's arena or in its input
 * buffer (strings are views into the request body when they can be), and is
 * released with pl_batch_free().
 *
 * Ownership rules (they hold everywhere in proflink):
 *   - A batch has exactly one owner. Whoever holds a pl_batch * either passes
 *     it on (pl_consumer_consume, a processor's consume hook: both TAKE it,
 *     whatever they return) or frees it.
 *   - A processor that has taken a batch may mutate it in place: add, change
 *     or remove attributes, samples, spans. New memory comes from the batch's
 *     own arena (pl_batch_alloc and the helpers below), never from malloc.
 *   - Exporters BORROW a batch (const): they encode or copy what they need
 *     before their export hook returns, and never keep pointers into it,
 *     except through pl_batch_ref (the batch is then read-only for all).
 *   - A receiver feeding several pipelines gives each its own copy
 *     (pl_batch_clone); the pipeline machinery does that for it.
 */
#ifndef PL_MODEL_H
#define PL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

/* Signals. The numeric value indexes per-signal arrays. */
typedef enum pl_signal {
    PL_SIGNAL_TRACES = 0,
    PL_SIGNAL_PROFILES = 1,
    PL_SIGNAL_LOGS = 2,
    PL_SIGNAL_METRICS = 3,
} pl_signal;
#define PL_SIGNAL_COUNT   4
#define PL_SIGNAL_MASK(s) (1u << (s))
#define PL_SIGNALS_ALL    0xfu
/* The two signals proflink decodes (logs and metrics pass through as bytes). */
#define PL_SIGNALS_TRACES_PROFILES                                                                 \
    (PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES))
const char *pl_signal_name(pl_signal s); /* "traces", "profiles", "logs", "metrics" */
int pl_signal_from_name(const char *name, size_t len, pl_signal *out); /* 0 or -1 */

/* A byte string (UTF-8 text or raw bytes); NOT NUL-terminated. */
typedef struct pl_bytes {
    const uint8_t *ptr;
    uint32_t len;
} pl_bytes;

#define PL_BYTES_LIT(s) ((pl_bytes){(const uint8_t *)(s), (uint32_t)(sizeof(s) - 1)})
pl_bytes pl_bytes_from_cstr(const char *s);
bool pl_bytes_eq(pl_bytes a, pl_bytes b);
bool pl_bytes_eq_cstr(pl_bytes a, const char *s);

/* ---- common.v1 ---------------------------------------------------------- */

typedef enum pl_value_type {
    PL_VALUE_EMPTY = 0, /* AnyValue with no member set */
    PL_VALUE_STRING,
    PL_VALUE_BOOL,
    PL_VALUE_INT,
    PL_VALUE_DOUBLE,
    PL_VALUE_ARRAY,
    PL_VALUE_KVLIST,
    PL_VALUE_BYTES,
    PL_VALUE_STRINDEX, /* string_value_strindex: profiles only */
} pl_value_type;

typedef struct pl_kv pl_kv;
typedef struct pl_value pl_value;

struct pl_value {
    pl_value_type type;
    union {
        pl_bytes str; /* STRING and BYTES */
        bool b;
        int64_t i;
        double d;
        struct {
            pl_value *items;
            uint32_t n;
        } array;
        struct {
            pl_kv *items;
            uint32_t n;
        } kvlist;
        int32_t strindex;
    } u;
};

struct pl_kv {
    pl_bytes key;
    int32_t key_strindex; /* profiles only; 0 when `key` is used */
    pl_value value;
};

/* A growable attribute list. `cap` > `n` leaves room to append in place. */
typedef struct pl_attrs {
    pl_kv *items;
    uint32_t n;
    uint32_t cap;
} pl_attrs;

typedef struct pl_entity_ref {
    pl_bytes schema_url;
    pl_bytes type;
    pl_bytes *id_keys;
    uint32_t n_id_keys;
    pl_bytes *description_keys;
    uint32_t n_description_keys;
} pl_entity_ref;

typedef struct pl_resource {
    pl_attrs attrs;
    uint32_t dropped_attributes_count;
    pl_entity_ref *entity_refs;
    uint32_t n_entity_refs;
} pl_resource;

typedef struct pl_scope {
    pl_bytes name;
    pl_bytes version;
    pl_attrs attrs;
    uint32_t dropped_attributes_count;
} pl_scope;

/* ---- trace.v1 ----------------------------------------------------------- */

/* Ids keep their wire length (0 or 16 / 8; other lengths are rejected by the
 * decoders) so that an absent id and an all-zero id stay distinct. */
typedef struct pl_span_event {
    uint64_t time_unix_nano;
    pl_bytes name;
    pl_attrs attrs;
    uint32_t dropped_attributes_count;
} pl_span_event;

typedef struct pl_span_link {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t trace_id_len;
    uint8_t span_id_len;
    pl_bytes trace_state;
    pl_attrs attrs;
    uint32_t dropped_attributes_count;
    uint32_t flags;
} pl_span_link;

/* Fields ordered so the 4-byte ones pair up without padding: a span held
 * by the correlation processor costs its size for minutes (168 bytes on
 * 64-bit systems). */
typedef struct pl_span {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    uint8_t trace_id_len;
    uint8_t span_id_len;
    uint8_t parent_span_id_len;
    bool has_status; /* the status sub-message was present on the wire */
    uint32_t flags;
    pl_bytes trace_state;
    pl_bytes name;
    int32_t kind;
    uint32_t dropped_attributes_count;
    uint64_t start_time_unix_nano;
    uint64_t end_time_unix_nano;
    pl_attrs attrs;
    pl_span_event *events;
    uint32_t n_events;
    uint32_t dropped_events_count;
    pl_span_link *links;
    uint32_t n_links;
    uint32_t dropped_links_count;
    struct {
        pl_bytes message;
        int32_t code;
    } status;
} pl_span;

typedef struct pl_scope_spans {
    bool has_scope;
    pl_scope scope;
    pl_span *spans;
    uint32_t n_spans;
    pl_bytes schema_url;
} pl_scope_spans;

typedef struct pl_resource_spans {
    bool has_resource;
    pl_resource resource;
    pl_scope_spans *scopes;
    uint32_t n_scopes;
    pl_bytes schema_url;
} pl_resource_spans;

typedef struct pl_traces {
    pl_resource_spans *resources;
    uint32_t n_resources;
} pl_traces;

/* ---- profiles.v1development (main-branch field layout) ------------------ */

typedef struct pl_vtype {
    int32_t type_strindex;
    int32_t unit_strindex;
} pl_vtype;

typedef struct pl_sample {
    int32_t stack_index;
    int32_t link_index; /* 0 = no link */
    int32_t *attribute_indices;
    uint32_t n_attribute_indices;
    int64_t *values;
    uint32_t n_values;
    uint64_t *timestamps_unix_nano;
    uint32_t n_timestamps;
} pl_sample;

typedef struct pl_profile {
    bool has_sample_type;
    pl_vtype sample_type;
    pl_sample *samples;
    uint32_t n_samples;
    uint64_t time_unix_nano;
    uint64_t duration_nano;
    bool has_period_type;
    pl_vtype period_type;
    int64_t period;
    uint8_t profile_id[16];
    uint8_t profile_id_len;
    uint32_t dropped_attributes_count;
    pl_bytes original_payload_format;
    pl_bytes original_payload;
    int32_t *attribute_indices;
    uint32_t n_attribute_indices;
} pl_profile;

typedef struct pl_scope_profiles {
    bool has_scope;
    pl_scope scope;
    pl_profile *profiles;
    uint32_t n_profiles;
    pl_bytes schema_url;
} pl_scope_profiles;

typedef struct pl_resource_profiles {
    bool has_resource;
    pl_resource resource;
    pl_scope_profiles *scopes;
    uint32_t n_scopes;
    pl_bytes schema_url;
} pl_resource_profiles;

typedef struct pl_mapping {
    uint64_t memory_start;
    uint64_t memory_limit;
    uint64_t file_offset;
    int32_t filename_strindex;
    int32_t *attribute_indices;
    uint32_t n_attribute_indices;
} pl_mapping;

typedef struct pl_line {
    int32_t function_index;
    int64_t line;
    int64_t column;
} pl_line;

typedef struct pl_location {
    int32_t mapping_index;
    uint64_t address;
    pl_line *lines;
    uint32_t n_lines;
    int32_t *attribute_indices;
    uint32_t n_attribute_indices;
} pl_location;

typedef struct pl_function {
    int32_t name_strindex;
    int32_t system_name_strindex;
    int32_t filename_strindex;
    int64_t start_line;
} pl_function;

typedef struct pl_link {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t trace_id_len;
    uint8_t span_id_len;
} pl_link;

typedef struct pl_kvu { /* KeyValueAndUnit */
    int32_t key_strindex;
    pl_value value;
    int32_t unit_strindex;
} pl_kvu;

typedef struct pl_stack {
    int32_t *location_indices; /* leaf first */
    uint32_t n_location_indices;
} pl_stack;

/* One dictionary per request. Each table has n entries and room for cap;
 * entry 0 is the zero value. Only the builder (core/dict.h, pl_dict_*)
 * writes the tables, inside the batch arena; everyone else reads them
 * through a const pl_dictionary *. */
typedef struct pl_dictionary {
    pl_mapping *mappings;
    uint32_t n_mappings, cap_mappings;
    pl_location *locations;
    uint32_t n_locations, cap_locations;
    pl_function *functions;
    uint32_t n_functions, cap_functions;
    pl_link *links;
    uint32_t n_links, cap_links;
    pl_bytes *strings;
    uint32_t n_strings, cap_strings;
    pl_kvu *attributes;
    uint32_t n_attributes, cap_attributes;
    pl_stack *stacks;
    uint32_t n_stacks, cap_stacks;
    /* The builder's deduplicating indexes of the tables, in the batch arena
     * (private to core/dict.c). A copy of the struct into another arena must
     * not keep it: zero it, as pl_batch_clone does. */
    struct pl_dict_index *index;
} pl_dictionary;

typedef struct pl_profiles {
    pl_resource_profiles *resources;
    uint32_t n_resources;
    bool has_dictionary;
    pl_dictionary dict;
} pl_profiles;

/* ---- batches ------------------------------------------------------------ */

/* Request metadata a receiver may attach (include_metadata; tenant). */
typedef struct pl_metadata {
    pl_kv *items; /* string values */
    uint32_t n;
} pl_metadata;

/* Bus progress: a receiver reading spans and profiles from a partitioned bus
 * (receivers/kafka.c) names, on every traces and profiles batch, the
 * partition it came from, and how many span records of that partition are
 * still to be handed on as the receiver knows now (after this batch, for a
 * traces batch): a decimal count, or "unknown" before the first fetch. The
 * spans and samples of a trace share a partition number, so a processor
 * that joins them (processors/correlation*) can hold samples while their
 * partition's spans lag, and let them go once the spans caught up. A
 * receiver never takes these keys from the data it reads. */
#define PL_META_BUS_PARTITION "proflink.bus.partition"
#define PL_META_BUS_SPANS_LAG "proflink.bus.spans_lag"
/* Every key of the pipeline's own starts with this prefix. A receiver never
 * takes such a key from a client (HTTP headers, include_metadata) or from
 * the data it reads (bus record headers): pl_meta_key_reserved, compared
 * without case as HTTP header names are. */
#define PL_META_RESERVED_PREFIX "proflink."
static inline bool pl_meta_key_reserved(const char *key, size_t len)
{
    static const char prefix[] = PL_META_RESERVED_PREFIX;
    if (len < sizeof(prefix) - 1)
        return false;
    for (size_t i = 0; i < sizeof(prefix) - 1; i++) {
        char c = key[i];
        if ((c >= 'A' && c <= 'Z' ? (char)(c + 32) : c) != prefix[i])
            return false;
    }
    return true;
}

typedef struct pl_batch {
    pl_signal signal;
    pl_arena arena;
    union {
        pl_traces traces;     /* PL_SIGNAL_TRACES */
        pl_profiles profiles; /* PL_SIGNAL_PROFILES */
        pl_bytes raw;         /* LOGS / METRICS: the encoded Export request */
    } data;
    pl_metadata metadata;
    uint64_t received_unix_nano;
    struct pl_batch_buffer *buffers; /* adopted malloc'd buffers */
    size_t buffer_bytes;
    struct pl_wal_tags *wal; /* write-ahead entries this batch carries; NULL = none */
    unsigned refs;           /* holders besides the owner (pl_batch_ref) */
} pl_batch;

/* Allocates an empty batch (its own arena). NULL on OOM. */
pl_batch *pl_batch_new(pl_signal signal);
void pl_batch_free(pl_batch *batch);
void *pl_batch_alloc(pl_batch *batch, size_t size); /* zeroed, from the arena */
/* Registers a malloc'd buffer (e.g. a request body that decoded strings point
 * into) to be freed with the batch. -1 on OOM (the buffer is then NOT taken). */
int pl_batch_adopt(pl_batch *batch, void *buffer, size_t size);
/* Copies bytes into the batch arena (for strings a processor creates). */
pl_bytes pl_batch_bytes(pl_batch *batch, const void *src, size_t len);
/* Deep copy into a new arena; NULL on OOM. */
pl_batch *pl_batch_clone(const pl_batch *batch);
/* Another holder of a batch nobody changes any more: an exporter that
 * encodes it after its export hook returned (exporters/queue.c, on a
 * worker thread). Every holder calls pl_batch_free; the last one frees it.
 * An earlier call releases that holder's write-ahead references only. The
 * count is atomic, the batch itself is then read-only for everyone. */
pl_batch *pl_batch_ref(const pl_batch *batch);

/* The deep copy's parts, for code that assembles a batch from pieces of
 * others (the batch processor): each takes a struct holding a shallow copy
 * and replaces every pointer in it with a copy in c->arena. `remap`, when
 * set, maps string-table indices (key_strindex, string_value_strindex) to
 * another dictionary. 0, or -1 on OOM (also recorded in c->oom; the arrays
 * not copied are left empty). */
typedef struct pl_copier {
    pl_arena *arena;
    int32_t (*remap)(void *ctx, int32_t strindex);
    void *remap_ctx;
    bool oom;
} pl_copier;
int pl_copy_bytes(pl_copier *c, pl_bytes *b);
/* A copy of n elements in c->arena (NULL for none; on OOM NULL, c->oom and
 * *fail set). */
void *pl_copy_array(pl_copier *c, const void *src, size_t n, size_t elem, int *fail);
int pl_copy_value(pl_copier *c, pl_value *v);
int pl_copy_attrs(pl_copier *c, pl_attrs *a);
int pl_copy_resource(pl_copier *c, pl_resource *r);
int pl_copy_scope(pl_copier *c, pl_scope *s);
int pl_copy_span(pl_copier *c, pl_span *sp);
/* Spans, profile samples, or 1 for an opaque logs/metrics request. */
size_t pl_batch_items(const pl_batch *batch);
/* Approximate memory the batch holds (arena + owned buffers). */
size_t pl_batch_memory(const pl_batch *batch);
/* ---- write-ahead tags (exporters/queue_wal.c) ----------------------------
 *
 * A batch accepted into a pipeline whose data must survive a crash carries
 * the write-ahead log entries its items came from. Every batch object that
 * carries an entry holds a reference on it; a processor that builds new
 * batches from old ones makes the new ones inherit the tags. The entry is
 * deleted when the last holder is settled: committed by the persistent
 * queue (in the queue's own transaction) or dropped on purpose. A holder
 * refused downstream marks the entry to be kept for replay at the next
 * start.
 *
 * Each tag names its log (`owner`, whose hooks are called), so two
 * pipelines, two graphs or two tests keep their logs apart without any
 * process-wide table. Threads: a batch may be freed on any thread (the
 * sqlite store frees its copies on its writer thread); the hooks are called
 * on that thread and must hand the work to the thread that owns the log's
 * database connection (queue_wal.c does, through a uv_async). */
struct pl_wal_hooks;
typedef struct pl_wal_owner {
    const struct pl_wal_hooks *hooks;
} pl_wal_owner;

typedef struct pl_wal_hooks {
    void (*retain)(pl_wal_owner *owner, uint64_t seq);
    void (*release)(pl_wal_owner *owner, uint64_t seq, bool settled, bool refused);
    void (*recovered)(pl_wal_owner *owner, uint64_t seq, uint32_t refusals);
} pl_wal_hooks;

typedef struct pl_wal_tag {
    pl_wal_owner *owner;
    uint64_t seq;
} pl_wal_tag;

typedef struct pl_wal_tags {
    uint32_t n, cap;
    bool settled; /* this holder's data is committed or handed on */
    bool refused; /* refused downstream: keep the entries for replay */
    pl_wal_tag *tag;
} pl_wal_tags;

/* Adds a reference on entry `seq` of `owner`'s log, held by `b`. -1 on OOM. */
int pl_batch_wal_add(pl_batch *b, pl_wal_owner *owner, uint64_t seq);
/* `dst` takes references on every tag of `src` (no-op when src has none). */
int pl_batch_wal_inherit(pl_batch *dst, const pl_batch *src);
/* Releases b's references now, as handed on (the data lives in batches that
 * inherited the tags) or as refused (kept for replay). */
void pl_batch_wal_handoff(pl_batch *b);
void pl_batch_wal_refused(pl_batch *b);
/* Copies of b were refused downstream `refusals` times (each released as
 * refused, so its entries were marked for replay) and b itself was kept and
 * has now gone on: those refusals no longer keep the entries (else they
 * would be replayed at the next start as well). Call before handing b on. */
void pl_batch_wal_recovered(pl_batch *b, uint32_t refusals);

/* Metadata lookup; returns false when absent. */
bool pl_batch_metadata_get(const pl_batch *batch, const char *key, pl_bytes *out);

/* ---- helpers for processors -------------------------------------------- */

/* Finds an attribute by key; NULL if absent. */
pl_kv *pl_attrs_find(const pl_attrs *attrs, const char *key, size_t key_len);
/* Inserts or replaces key=value; memory from arena. Returns the entry or NULL on OOM. */
pl_kv *pl_attrs_put(pl_arena *arena, pl_attrs *attrs, pl_bytes key, pl_value value);
/* Removes an attribute; returns true if one was removed. */
bool pl_attrs_remove(pl_attrs *attrs, const char *key, size_t key_len);
pl_value pl_value_string(pl_bytes s);
pl_value pl_value_int(int64_t i);
pl_value pl_value_double(double d);
pl_value pl_value_bool(bool b);
/* Deep equality of two values (same type and content). */
bool pl_value_eq(const pl_value *a, const pl_value *b);

/* Hex helpers for ids. out must hold 2*len+1 chars. */
void pl_hex_encode(const uint8_t *bytes, size_t len, char *out);
/* Decodes exactly 2*len hex chars (either case); -1 on a bad char or length. */
int pl_hex_decode(const char *hex, size_t hex_len, uint8_t *out, size_t len);
/* Value of one hex digit (either case), or -1. */
int pl_hex_digit(int c);

/* The dictionary builder (pl_dict_*). */
#include "dict.h"

#endif
