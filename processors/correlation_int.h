/*
 * correlation_int.h: the correlation processor's private header: the state
 * shared by its files (correlation.c, correlation_index.c, correlation_enrich.c,
 * correlation_release.c) and the functions one file calls in another.
 */
#ifndef PL_CORRELATION_INT_H
#define PL_CORRELATION_INT_H

#include "correlation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/stats.h"
#include "core/consumer.h"

#define COMPONENT          "correlation"
#define MAX_ANCESTRY       64          /* parent walks stop here (guards against cycles) */
#define MAX_TOP_CANDIDATES 64          /* distinct leaf functions tracked per span (< 256) */
#define MAX_FN_NAMES       (1u << 17)  /* distinct function names remembered */
#define MAX_FN_BYTES       (16u << 20) /* their bytes; beyond, new names count as "[other]" */
#define MAX_FN_NAME_LEN    1024        /* longer function names count as "[other]" */
#define MAX_SAME_ID        16 /* entries sharing one span id in a table (client-chosen ids) */
/* Profiles count as present for both windows plus this (SDKs upload every 10-60 s). */
#define PROFILES_HORIZON_NS (60ull * 1000000000ull)

/* ---- data structures -------------------------------------------------------------------- */

enum entry_state {
    ENTRY_HELD = 1,        /* span inside a held batch */
    ENTRY_PLACEHOLDER = 2, /* parent not seen yet: collects descendants' totals */
    ENTRY_GONE = 3,        /* span released: remembered to count late samples */
    ENTRY_SPILLED = 4,     /* span of a held batch spilled to disk (held = its record): its
                              summary is in the late store, its stats still accumulate */
};

typedef struct span_entry {
    uint64_t key; /* span id bytes; 0 = empty slot */
    union {
        pl_span *span;     /* HELD: the span inside its held batch */
        uint64_t late_ref; /* SPILLED: its own summary in the late store, 0 = none
                              (see pl_corr_late_ref_summary, corr_ref_exact) */
    };
    uint32_t held;      /* HELD: held batch record */
    uint32_t stats;     /* side statistics, 0 = none yet */
    uint32_t expiry_ms; /* PLACEHOLDER / GONE: expiry, ms since the processor's base time */
    uint16_t service;   /* HELD: service id (0 = unknown) */
    uint8_t state;
    bool alone; /* no other entry had its key when it came, nor came since, and
                   (SPILLED) its summary is the newest with its key (see
                   pl_corr_not_alone); false when unsure */
} span_entry;

struct profile_info;

typedef struct pending_entry {
    uint64_t key;
    pl_sample *sample; /* WAITING */
    struct profile_info *pinfo;
    uint32_t held;
    uint32_t expiry_ms : 31; /* gone markers: expiry, ms since the base time */
    uint32_t state : 1;      /* 0: a sample waiting for its span; 1: a gone marker (a sample
                                that left unlinked, kept to count its span arriving late) */
} pending_entry;

typedef struct span_table {
    span_entry *slots;
    uint32_t mask; /* capacity - 1 */
    uint32_t count;
} span_table;

typedef struct pending_table {
    pending_entry *slots;
    uint32_t mask;
    uint32_t count;
} pending_table;

/* A leaf function's weight in one span; the name lives in the processor's
 * function-name pool (fn_name), shared by every span. */
typedef struct __attribute__((packed, aligned(4))) top_fn {
    uint32_t fn;
    uint64_t weight;
} top_fn; /* 12 bytes: every span with samples has two inline */

typedef struct fn_name {
    char *name;
    uint32_t len;
    uint64_t hash;
} fn_name;

/* One per span with samples (and per placeholder): 112 bytes, packed. */
typedef struct span_stats {
    uint8_t trace_id[16]; /* placeholders: the trace they belong to */
    uint32_t linked;      /* sample entries linked to this span itself */
    bool has_trace;
    uint8_t n_fns, cap_fns; /* at most MAX_TOP_CANDIDATES */
    uint64_t samples;       /* self */
    uint64_t samples_total;
    uint64_t cpu_self, cpu_total;
    uint64_t wall_self, wall_total;
    uint64_t top_weight; /* sum of the weights behind the functions */
    top_fn fn_inline[2]; /* the first functions (most spans have one or two) */
    union {
        top_fn *fns;        /* all of them once there are more (cap_fns > 2) */
        uint32_t next_free; /* on the free list */
    };
} span_stats;
_Static_assert(sizeof(span_stats) == 112, "span_stats is counted per span with samples");

typedef struct cover {
    uint16_t service;
    uint64_t max_end; /* latest span end of that service in the batch */
} cover;

typedef struct pending_ref {
    uint64_t key;
    pl_sample *sample;
} pending_ref;

enum side { SIDE_SPANS = 0, SIDE_SAMPLES = 1 };

typedef struct held_batch {
    pl_batch *batch; /* NULL when the record is free */
    pl_consumer *next;
    uint64_t deadline;
    uint64_t arrived; /* host time it came */
    uint64_t seq;     /* arrival order */
    uint32_t epoch;   /* spans: cadence_epoch its deadline was computed in */
    size_t bytes;
    uint32_t prev, next_held; /* FIFO of the side, by arrival (0 = none) */
    uint32_t items;           /* spans held / samples still waiting */
    uint8_t side;
    bool indexed;  /* spans: in the span table (see profiles_present) */
    cover *covers; /* spans: per service, the latest end */
    uint32_t n_covers;
    pending_ref *refs; /* samples: every sample that waited */
    uint32_t n_refs;
    uint32_t next_free;
    bool spilled;    /* spans: batch is NULL, its spans are in spill file spill_seq,
                        or packed (below) */
    uint8_t *packed; /* spilled in memory (hold_compression): the batch encoded and
                        compressed; NULL: on disk */
    size_t packed_len;
    uint32_t n_spilled;      /* spilled: its entries in state ENTRY_SPILLED */
    uint64_t spill_seq;      /* file <storage>/<id>-<token>-<seq>.spill */
    size_t spill_bytes;      /* its size on disk */
    struct pl_wal_tags *wal; /* the spilled batch's write-ahead entries, until read back */
    uint64_t *parents;       /* spilled: parent span id of each indexed span, by the
                                position its entry keeps in expiry_ms (0: none) */
    uint32_t n_parents;
    uint64_t bus;             /* samples: the bus partition it came from (key, 0: none) */
    uint64_t window_deadline; /* samples held for lag: the deadline its window gave */
    bool lag_held;            /* samples: held longer while its partition's spans lag */
} held_batch;

/* One profile stream of a service: its profiles of one sample type. A
 * stream proves coverage only once it has carried span ids: heap, alloc or
 * goroutine profiles carry none, and must not release spans whose CPU or
 * wall samples are still on their way. */
typedef struct stream {
    uint64_t type;          /* keyed hash of the sample type's "type/unit" */
    uint64_t covered_until; /* data time up to which its uploads have come */
    uint64_t last_arrival;  /* host time of its last upload */
    uint64_t interval;      /* learned time between uploads, ns (0 until two came) */
    uint64_t delay;         /* learned arrival delay after the covered end, ns */
    uint32_t uploads;
    bool links; /* has carried span ids */
} stream;

#define MAX_STREAMS 8 /* sample types tracked per service */

typedef struct service {
    char *name;
    uint32_t len;
    uint64_t hash;
    uint64_t covered_until; /* min over its span-linked streams (0: none) */
    uint64_t first_span_ns; /* host time its first span came (0: none yet) */
    stream *streams;        /* allocated at its first profile */
    uint8_t n_streams;
    uint16_t profiled_as; /* the profiles' service.name that carried samples of its spans,
                             when it differs (an SDK app name other than service.name) */
} service;

/* A label for a sample: key and value (strings point at the span's batch or
 * at the late store until they are written into the sample's dictionary). */
typedef struct label {
    pl_bytes key;
    pl_value value;
    uint32_t slot; /* which key: 0 span name, 1 root name, 2 service, 3 + k span_attributes[k] */
} label;

/* One span_attributes value of a departed span (see correlation_late.c);
 * packed: 9 bytes. */
typedef struct __attribute__((packed)) late_val {
    uint8_t type; /* pl_value_type; 0 = not found */
    union {
        uint32_t str; /* string id in its generation */
        int64_t i;
        double d;
        bool b;
    } u;
} late_val;

#define LATE_MAX_STRINGS ((1u << 23) - 1) /* string ids per generation (23 bits) */

/* The summary of a span that left, kept for late samples: 48 bytes (a
 * million of them are normal). Its n_span_attr_keys values are at
 * (index in its generation) x n_span_attr_keys in the generation's vals. */
typedef struct late_span {
    uint64_t key; /* span id */
    uint64_t start, end;
    uint8_t trace_id[16];
    uint64_t service : 16;
    uint64_t has_trace : 1;
    uint64_t name : 23; /* string ids in its generation (0: none) */
    uint64_t root : 24;
} late_span;
_Static_assert(sizeof(late_span) == 48, "late_span is kept per departed span");

/* What a sample is linked to: a held span, or a departed span's summary. */
typedef struct link_target {
    span_entry *entry;
    const late_span *late;
    const void *id;          /* the enrichment cache's key: the pl_span or the summary */
    const uint8_t *trace_id; /* 16 bytes, NULL when unknown */
    uint8_t span_id[8];
} link_target;

/* Per profile, in the profiles batch's arena: what a sample of it is worth. */
typedef struct profile_info {
    pl_batch *batch;
    pl_profile *profile;
    uint64_t t_start, t_end; /* profile window, 0/0 when unknown */
    uint16_t service;
    bool counts_samples; /* sum of values = samples */
    bool counts_entries; /* one sample per entry (no samples/count profile) */
    int64_t cpu_mult;    /* value x cpu_mult = CPU ns */
    int64_t wall_mult;   /* value x wall_mult = wall ns */
    uint8_t top_kind;    /* 0 none, 1 cpu, 2 wall, 3 samples: this profile feeds top functions */
} profile_info;

/* Adds strings and attributes to one profiles dictionary, deduplicating with
 * hash sets (the dictionary helpers in model.c scan linearly, too slow for
 * thousands of additions per request). */
/* What the labels of a summary are made of (pl_corr_late_labels_key): summaries
 * with equal keys get equal labels while the late store is unchanged. */
typedef struct late_labels_key {
    const void *gen;      /* its generation (string ids are per generation) */
    uint64_t ids;         /* name, root name and service ids */
    const late_val *vals; /* its span_attributes values, n_vals of them */
    uint32_t n_vals;
} late_labels_key;

typedef struct dict_writer {
    pl_dictionary *dict;
    pl_batch *batch;
    uint32_t *fn_ids; /* function index -> fn pool id (0: not looked up yet) */
    uint32_t n_fn_ids;
    uint8_t *link_uses; /* link index -> samples of the batch naming it (0, 1, 2: more) */
    uint32_t n_link_uses;
    int32_t key_idx[3 + 64]; /* label keys' string indices + 1 (see label.slot) */
    /* Hints keyed by where the bytes live: a sample of a new span interns
     * the same service, root and attribute strings again and again, and
     * hashing them each time cost more than the span lookup. A hint is only
     * a guess (checked against the entry's bytes before use), so a reused
     * address can never yield a wrong index. */
    struct {
        const uint8_t *ptr;
        int32_t idx; /* index + 1, 0 = empty */
    } str_hint[64], attr_hint[64];
    /* Likewise for a span label's whole attribute: keyed by the source
     * bytes' address and the key, checked against the attribute's value. */
    struct {
        const uint8_t *ptr;
        int32_t key;
        int32_t idx; /* attribute index + 1, 0 = empty */
    } label_hint[64];
    /* The attribute lists written for summaries, by what their labels are
     * made of: spans of one endpoint share name, root and attribute
     * values, so the spans of a batch have few distinct lists. */
    struct {
        uint64_t hash;
        late_labels_key key;
        int32_t *idx; /* in the batch arena; NULL = empty */
        uint32_t n;
    } label_sets[64];
} dict_writer;

typedef struct contrib {
    uint64_t samples, cpu, wall, top;
} contrib;

/* What linking needs per (dictionary, span) pair during one batch: the
 * attribute indices describing the span (built once, reused for every
 * sample of that span), the sample link completed with the trace id, and the
 * contributions to hand up to the ancestors when the batch is done. */
typedef struct enrich_slot {
    const pl_dictionary *dict;
    const void *span; /* the pl_span, or the late summary (late) */
    bool late;
    int32_t *idx; /* span_name, root_span_name, service.name, span_attributes */
    uint32_t n;
    int32_t ids[2]; /* trace_id, span_id: built for the first sample without a link */
    uint32_t n_ids;
    bool ids_built;
    int32_t link;      /* link_table index carrying the span's trace and span ids (0: none) */
    int32_t *with_ids; /* ids then idx: the whole list of a sample without attributes or link */
    contrib roll;      /* not yet rolled up to the ancestors */
} enrich_slot;

typedef struct correlation {
    pl_correlation_config cfg;
    pl_bytes names[11]; /* attribute names, see NAME_* */
    pl_bytes *span_attr_keys;
    size_t n_span_attr_keys;
    char *id;
    uv_loop_t *loop;
    pl_stats *stats;
    pl_stats *own_stats; /* when created without settings->stats */
    pl_clock clock;
    const pl_host *host; /* its memory state */
    unsigned signals;
    uint64_t base_ns;
    uint64_t span_window, sample_window, skew;

    span_table spans;
    pending_table pending;
    span_stats *stats_arr;
    uint32_t n_stats, cap_stats, free_stats;

    held_batch *held;
    uint32_t n_held, cap_held, free_held;
    uint32_t head[2], tail[2];
    uint64_t seq;
    size_t held_spans, pending_samples, held_bytes;
    size_t indexed_spans;      /* held spans present in the span table */
    size_t unindexed_batches;  /* held span batches not indexed yet */
    uint64_t last_profiles_ns; /* when the last profiles batch came (0: never) */
    uint64_t last_sweep_ns;
    size_t held_batches[2];
    size_t markers, pending_markers;
    uint32_t sweep_pos, pending_sweep_pos;

    service *services;
    uint32_t n_services, cap_services;
    pl_htab service_index;  /* name -> services index */
    size_t name_bytes;      /* service names and their streams (fn names: fn_bytes) */
    uint64_t max_hold;      /* the longest a span can be held (max of windows) */
    uint32_t cadence_epoch; /* bumped when a service's learned cadence changes */

    /* Released batches the next consumer refused, in order, retried. */
    struct retry_item *retry;
    uint32_t n_retry, cap_retry;
    size_t retry_bytes;
    pl_status retry_status;
    uint64_t retry_at;
    uint64_t retry_ns;       /* between attempts: a second; shorter while draining */
    size_t drops_unlogged;   /* items dropped since the last log line */
    uint64_t drop_logged_ns; /* when that line was written (0: never) */
    char drop_why[128];      /* the latest reason */

    /* Senders' clocks against proflink's (correlation.c, corr_clock_*). */
    int64_t skew_min;           /* this period: min of wall - latest data time */
    bool skew_any, skew_known;  /* this period saw data; an estimate exists */
    int64_t skew_est;           /* the estimate (last period, or the first so far) */
    uint64_t skew_period_start; /* monotonic */
    uint64_t skew_warned_ns;    /* monotonic, 0: never */
    int64_t skew_warned_est;    /* the skew then */
    int64_t *g_clock_skew;

    struct late_store *late;

    /* Spilling held span batches to `storage` (correlation_spill.c). */
    char *spill_dir;    /* NULL: no storage, batches over max_bytes leave early */
    char *spill_prefix; /* the processor id, made file-name safe */
    size_t spill_disk;  /* bytes of the spill files of held batches */
    size_t spilled_spans;
    /* hold_compression: indexed held span batches are spilled in memory,
     * compressed, instead of kept decoded (correlation_spill.c). */
    bool pack;
    size_t packed_spans, packed_bytes; /* spans and bytes of packed batches */
    size_t packed_entries;             /* of spilled_spans, those packed */
    void *zcctx, *zdctx;               /* ZSTD_CCtx / ZSTD_DCtx, reused */
    char **leftovers; /* spill files found at start, replayed at the first traces batch */
    uint32_t n_leftovers;
    uint64_t *c_spilled_batches, *c_spilled_bytes, *c_spill_failures;

    fn_name *fn_names; /* function-name pool, index 0 unused */
    uint32_t n_fn_names, cap_fn_names;
    uint32_t *fn_index; /* open addressing: pool id, 0 = empty */
    uint32_t fn_index_mask;
    size_t fn_bytes; /* names in the pool, and spans' function lists beyond the inline two */

    dict_writer writer;
    enrich_slot *cache;
    uint32_t cache_mask, cache_count;
    uint32_t *cache_used; /* the cache's filled slots, in filling order (cache_count of them) */

    uint32_t *release_queue; /* sample batches whose last waiting sample linked */
    uint32_t n_release, cap_release;
    pl_span **adopted; /* scratch: spans that took over a placeholder */
    uint32_t n_adopted, cap_adopted;

    bool started, timer_open, shut_down;
    uv_timer_t timer;

    /* Bus partitions (correlation_bus.c): the sample batches held while
     * their partition's spans lag. */
    uint64_t bus_cur;     /* partition of the batch being consumed (0: none) */
    bool bus_cur_lagging; /* its spans lag, as that batch said */
    size_t bus_held_bytes;
    uint32_t bus_held_batches;
    uint64_t *c_bus_held, *c_bus_caught_up, *c_bus_bound;
    int64_t *g_bus_held_bytes;

    uint64_t *c_linked_samples, *c_unlinked_samples, *c_late_samples, *c_early_samples;
    uint64_t *c_linked_spans, *c_unlinked_spans, *c_late_spans, *c_early_spans;
    uint64_t *c_covered_spans;
    uint64_t *c_late_linked, *c_not_held, *c_refused;
    int64_t *g_held_spans, *g_pending_samples, *g_held_bytes;
} correlation;

enum {
    NAME_TRACE_ID,
    NAME_SPAN_ID,
    NAME_SPAN_NAME,
    NAME_ROOT_SPAN_NAME,
    NAME_SERVICE_NAME,
    NAME_PROFILE_ID,
    NAME_SAMPLES,
    NAME_CPU,
    NAME_CPU_TOTAL,
    NAME_WALL,
    NAME_TOP,
};

/* ---- small helpers ---------------------------------------------------------------------- */

/* Home slot hash of a span id: keyed (core/hash.h), so a client cannot pick
 * ids that pile into one probe chain. */
static inline uint64_t id_hash(uint64_t key)
{
    return pl_hash_u64(key);
}

static inline uint64_t id_key(const uint8_t *id8)
{
    uint64_t k;
    memcpy(&k, id8, 8);
    return k;
}

static inline bool span_id_valid(const uint8_t *id, uint8_t len)
{
    return len == 8 && id_key(id) != 0;
}

static inline bool trace_id_valid(const uint8_t *id, uint8_t len)
{
    if (len != 16)
        return false;
    for (int i = 0; i < 16; i++)
        if (id[i])
            return true;
    return false;
}

/* Holds, windows, markers and timers run on the monotonic clock: a step of
 * the wall clock neither freezes nor rushes them. The wall clock is read
 * only to compare with data times (senders' clocks): wall_ns. */
static inline uint64_t now_ns(correlation *self)
{
    return pl_clock_mono(&self->clock);
}

static inline uint64_t wall_ns(correlation *self)
{
    return pl_clock_now(&self->clock);
}

/* Milliseconds since the processor's base time, for marker expiry. */
static inline uint32_t to_ms(correlation *self, uint64_t ns)
{
    if (ns <= self->base_ns)
        return 0;
    uint64_t ms = (ns - self->base_ns) / 1000000u;
    return ms > 0x7fffffffu ? 0x7fffffffu : (uint32_t)ms;
}

static inline uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

enum release_reason { RELEASE_WINDOW, RELEASE_EARLY, RELEASE_COVERED, RELEASE_FLUSH };

#define DRAIN_RETRY_NS (50000000ull) /* between attempts while the service drains */

/* Starts loading the home slot of a span id: indexing and releasing walk a
 * batch's spans in order, and their slots are scattered over a table far
 * larger than the caches, so fetching a few spans ahead hides most misses. */
#define PREFETCH_AHEAD 8
static inline void corr_span_table_prefetch(const span_table *t, const pl_span *sp)
{
    if (sp->span_id_len == 8)
        __builtin_prefetch(&t->slots[(uint32_t)id_hash(id_key(sp->span_id)) & t->mask]);
}

/* First slot at or after `from` (in probe order from the key's home) holding
 * key; UINT32_MAX if none. Pass from = UINT32_MAX to start at home. */
static inline uint32_t span_table_next(const span_table *t, uint64_t key, uint32_t from)
{
    uint32_t i = from == UINT32_MAX ? (uint32_t)id_hash(key) & t->mask : from;
    while (t->slots[i].key) {
        if (t->slots[i].key == key)
            return i;
        i = (i + 1) & t->mask;
    }
    return UINT32_MAX;
}

#define SPAN_EACH(t, key, i)                                                                       \
    for (uint32_t i = span_table_next((t), (key), UINT32_MAX); i != UINT32_MAX;                    \
         i = span_table_next((t), (key), (i + 1) & (t)->mask))

/* A spilled entry whose own summary is exactly what a sample of its span id
 * would find: it is the only entry with its id and its summary the newest
 * with it (`alone`), so a sample that matches the summary links to it with
 * no further probing, and one that does not goes on to the other summaries.
 * Other spilled entries are matched by walking every entry with the id
 * (pl_corr_match_sample). */
static inline bool corr_ref_exact(const span_entry *e)
{
    return e->state == ENTRY_SPILLED && e->alone && e->late_ref;
}

/* Loading ahead for the samples of one profile (correlation_warm.c): a
 * pipeline of WARM_STAGES stages, a group of WARM_GROUP samples apart. */
enum { WARM_GROUP = 16, WARM_STAGES = 5, WARM_RING = 128 };
_Static_assert(WARM_RING >= WARM_GROUP * (WARM_STAGES + 1), "the ring holds the groups in flight");
typedef struct warm_state {
    uint64_t key, pkey;   /* span id and its parent's (0: none) */
    uint32_t home, phome; /* their home slots (UINT32_MAX: none) */
} warm_state;
typedef struct corr_warm {
    const pl_dictionary *dict;
    const pl_sample *samples;
    uint32_t n; /* 0: nothing to warm */
    warm_state ring[WARM_RING];
} corr_warm;
void pl_corr_warm_start(const correlation *self, corr_warm *w, const pl_dictionary *dict,
                        const pl_sample *samples, uint32_t n);
void pl_corr_warm_next(const correlation *self, corr_warm *w, uint32_t si);

/* correlation.c */
span_entry *pl_corr_entry_of_span(correlation *self, const pl_span *sp);
void pl_corr_link_waiting_batch(correlation *self, pl_batch *b);
/* correlation_cadence.c */
pl_bytes pl_corr_resource_service(const pl_resource *r);
pl_bytes pl_corr_service_name(correlation *self, uint16_t id);
uint16_t pl_corr_service_id(correlation *self, pl_bytes name);
size_t pl_corr_service_bytes(const correlation *self);
void pl_corr_services_free(correlation *self);
void pl_corr_service_saw_span(correlation *self, uint16_t svc, uint64_t now);
void pl_corr_clock_saw(correlation *self, uint64_t latest, uint64_t wall);
void pl_corr_clock_tick(correlation *self, uint64_t now);
uint64_t pl_corr_sender_now(const correlation *self, uint64_t wall);
bool pl_corr_stream_upload(correlation *self, uint16_t svc, pl_bytes type, pl_bytes unit,
                           bool links, uint64_t covered, uint64_t duration, uint64_t now,
                           uint64_t sender_now);
uint64_t pl_corr_service_hold(correlation *self, uint16_t svc, uint64_t now);
void pl_corr_service_linked(correlation *self, uint16_t span_svc, uint16_t profile_svc);
bool pl_corr_service_covers(correlation *self, uint16_t svc, uint64_t end, uint64_t now);
/* correlation_late.c */
int pl_corr_late_init(correlation *self);
void pl_corr_late_free(correlation *self);
void pl_corr_late_room_for(correlation *self, size_t spilled);
void pl_corr_late_retire(correlation *self, uint64_t key, const uint8_t *trace);
size_t pl_corr_late_count(const correlation *self);
size_t pl_corr_late_bytes(const correlation *self);
void pl_corr_late_expire(correlation *self, uint64_t now);
const late_span *pl_corr_late_find(correlation *self, uint64_t key, const uint8_t *trace,
                                   bool has_time, uint64_t lo, uint64_t hi);
uint64_t pl_corr_late_add(correlation *self, span_entry *e, uint64_t now, bool *only);
const late_span *pl_corr_late_ref_summary(const correlation *self, const span_entry *e);
const late_span *pl_corr_late_ref_match(correlation *self, const span_entry *e,
                                        const uint8_t *trace, bool has_time, uint64_t lo,
                                        uint64_t hi);
void pl_corr_late_ref_prefetch(const correlation *self, uint64_t ref, bool vals);
size_t pl_corr_late_labels(correlation *self, const late_span *s, label *items, size_t max);
uint64_t pl_corr_late_labels_key(const correlation *self, const late_span *s, late_labels_key *k);
bool pl_corr_late_labels_key_eq(const late_labels_key *a, const late_labels_key *b);
pl_bytes pl_corr_late_root_name(correlation *self, const late_span *s);
bool pl_corr_late_attr(correlation *self, const late_span *s, size_t k, pl_value *out);
/* correlation_enrich.c */
bool pl_corr_sample_ids(const pl_dictionary *dict, const pl_sample *s, uint64_t *key,
                        uint8_t trace[16], bool *has_trace);
bool pl_corr_sample_time(const profile_info *pi, const pl_sample *s, uint64_t *lo, uint64_t *hi);
span_entry *pl_corr_match_sample(correlation *self, uint64_t key, const uint8_t *trace,
                                 bool has_time, uint64_t lo, uint64_t hi, span_entry **spilled,
                                 const late_span **summary);
void pl_corr_cache_clear(correlation *self);
void pl_corr_link_sample(correlation *self, span_entry *e, pl_sample *s, profile_info *pi);
void pl_corr_link_session_end(correlation *self);
void pl_corr_link_late(correlation *self, const late_span *ls, pl_sample *s, profile_info *pi);
void pl_corr_writer_reset(dict_writer *w);
/* correlation_index.c */
bool pl_corr_span_time_matches(correlation *self, const pl_span *sp, uint64_t lo, uint64_t hi);
const uint8_t *pl_corr_span_trace(const pl_span *sp);
int pl_corr_pending_table_init(pending_table *t, uint32_t cap);
int pl_corr_pending_table_insert(pending_table *t, const pending_entry *e, uint32_t *same);
int pl_corr_pending_table_resize(pending_table *t, uint64_t cap);
int pl_corr_span_table_init(span_table *t, uint32_t cap);
int pl_corr_span_table_insert(span_table *t, const span_entry *e, uint32_t *same);
int pl_corr_span_table_resize(span_table *t, uint64_t cap);
span_entry *pl_corr_find_span(correlation *self, uint64_t key, const uint8_t *trace, bool held,
                              bool want_placeholder);
span_stats *pl_corr_entry_stats(correlation *self, span_entry *e);
void pl_corr_stats_free(correlation *self);
top_fn *pl_corr_stats_fns(span_stats *s);
uint32_t pl_corr_fn_pool_id(correlation *self, pl_bytes name);
uint32_t pl_corr_held_alloc(correlation *self);
uint32_t pl_corr_pending_table_next(const pending_table *t, uint64_t key, uint32_t from);
void pl_corr_held_link(correlation *self, uint32_t i);
void pl_corr_held_unlink_and_free(correlation *self, uint32_t i);
void pl_corr_pending_table_delete(pending_table *t, uint32_t hole);
void pl_corr_roll_up(correlation *self, span_entry *e, contrib c, const uint8_t *trace);
void pl_corr_roll_up_from(correlation *self, span_entry *e, contrib c, const uint8_t *trace,
                          int depth);
void pl_corr_span_table_delete(span_table *t, uint32_t hole);
void pl_corr_stats_add_function(correlation *self, span_stats *s, uint32_t fn, uint64_t weight);
void pl_corr_stats_release(correlation *self, uint32_t i);
/* correlation_spill.c */
int pl_corr_spill_init(correlation *self, pl_err *err);
void pl_corr_spill_free(correlation *self);
bool pl_corr_spill(correlation *self, uint32_t hi);
bool pl_corr_pack(correlation *self, uint32_t hi);
bool pl_corr_pack_unindexed(correlation *self, uint32_t hi);
bool pl_corr_unpack(correlation *self, uint32_t hi);
void pl_corr_pack_indexed(correlation *self);
pl_batch *pl_corr_spill_load(correlation *self, uint32_t hi);
void pl_corr_spill_remove(correlation *self, uint64_t seq, size_t bytes);
void pl_corr_spill_drop(correlation *self, uint32_t hi);
void pl_corr_spill_replay(correlation *self, pl_consumer *next);
span_entry *pl_corr_spilled_entry(correlation *self, const late_span *ls);
void pl_corr_not_alone(correlation *self, uint64_t key);
bool pl_corr_spilled_in_trace(const correlation *self, const span_entry *e, const uint8_t *trace);
void pl_corr_spilled_keep_trace(const correlation *self, const span_entry *e, span_stats *st);
const uint64_t *pl_corr_spilled_parent(const correlation *self, const span_entry *e);
uint64_t pl_corr_entry_parent(const correlation *self, const span_entry *e);
uint64_t pl_corr_spilled_deadline(correlation *self, uint64_t key);
void pl_corr_link_spilled(correlation *self, span_entry *e, const late_span *ls, pl_sample *s,
                          profile_info *pi);
/* correlation_bus.c */
int pl_corr_bus_init(correlation *self);
void pl_corr_bus_note(correlation *self, const pl_batch *b);
void pl_corr_bus_hold(correlation *self, uint32_t hi);
void pl_corr_bus_progress(correlation *self);
void pl_corr_bus_unhold(correlation *self, held_batch *h, bool caught_up);
/* correlation_release.c */
bool pl_corr_retry(correlation *self, uint64_t now, pl_signal sig, pl_status *refusal);
void pl_corr_flush(correlation *self);
size_t pl_corr_waiting_items(const correlation *self);
void pl_corr_retry_free(correlation *self);
bool pl_corr_batch_covered(correlation *self, const held_batch *h);
size_t pl_corr_index_bytes(const correlation *self);
void pl_corr_enforce_bounds(correlation *self);
void pl_corr_flush_release_queue(correlation *self);
void pl_corr_on_timer(uv_timer_t *t);
void pl_corr_queue_release(correlation *self, uint32_t hi);
void pl_corr_compact_samples(correlation *self, uint32_t hi);
void pl_corr_release(correlation *self, uint32_t hi, int reason);
void pl_corr_release_all(correlation *self, int reason);
void pl_corr_release_covered(correlation *self);
void pl_corr_update_gauges(correlation *self);

#endif
