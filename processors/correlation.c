/*
 * correlation.c: the correlation processor. One instance sits in a traces
 * pipeline and a profiles pipeline and joins the two signals: profile samples
 * that carry a span id (OTLP Link, or the `span_id` / `profile_id` labels of
 * Pyroscope SDKs) are linked to the span with that id, inside time windows.
 *
 * Join rule. A sample is linked to a span when its span id equals the span's
 * id, both trace ids agree when both are known, and (when both sides have
 * times) the sample's time overlaps the span's [start - skew, end + skew]. A
 * sample's time is [min, max] of its timestamps_unix_nano, or, when it has
 * none, [time_unix_nano - duration_nano, time_unix_nano + duration_nano]:
 * pprof's time_nanos is the collection start, but the Node.js SDK stamps the
 * end. Bounds are inclusive, so a timestamp exactly at end + skew links.
 *
 * Batches are the unit of holding. A traces batch is indexed (span id ->
 * entry in the span table) and held until its window closes, until profiles
 * of its services covering its spans' end (+ skew) have been seen, or until a
 * bound or memory pressure pushes it out. Then its spans get their profile
 * summary and the batch goes to the `next` it came with. A profiles batch is
 * linked at once against the held spans; samples whose span is not yet known
 * wait in their batch (in the pending table); the batch goes on as soon as
 * none waits any more, or when its window closes. Linked samples are
 * enriched the moment they link, so a sample never needs its span's batch
 * after that. Nothing is ever dropped: whatever leaves early leaves with what
 * it has.
 *
 * While no profiles come (none within both windows plus a minute), traces
 * batches are held without being indexed: a pipeline with no profiler pays a
 * counter per span. The next profiles batch indexes them, oldest first.
 *
 * Linking works in sessions (one incoming batch): the labels of a (request,
 * span) pair are built once and reused for every sample of that span, and
 * the totals for the ancestors are handed up once per pair when the session
 * ends. Until then nothing is inserted in the span table, so entry pointers
 * stay valid. A sample keeps (or gets) the span's ids in its Link, completed
 * with the trace id; it gets trace_id / span_id attributes only when it has
 * no link, because the pprof encoder writes labels from both.
 *
 * The span table is an open-addressing multimap (linear probing, backward
 * shift deletion) of 32-byte entries keyed by the 8-byte span id; the key 0
 * marks an empty slot, which is safe because an all-zero span id is invalid
 * and never indexed. Duplicate span ids (in different traces) are simply
 * several entries with the same key. An entry points at its span inside the
 * held batch instead of copying trace id, times and name, which keeps the
 * index near 64 bytes per held span at the 0.5 maximum load. The statistics
 * of spans that had samples live in a side array, allocated only for them.
 *
 * Besides held spans, the span table keeps two kinds of markers, which expire
 * after a window and are swept incrementally: a placeholder for a parent span
 * not seen yet (it collects its descendants' totals, handed over when the
 * parent arrives: long requests end, and so are exported, after their
 * children), and a "gone" marker for a released span, so that a sample
 * arriving after its span left is counted as a late partner. The pending
 * table keeps "gone" markers for released unlinked samples likewise.
 *
 * Local roots and ancestors: a linked sample counts toward its span's self
 * totals and toward the total of every known ancestor in the same trace. The
 * local root (reported on samples) is the topmost known ancestor of the same
 * service. Samples stamped only with the local root's id (Pyroscope Go and
 * .NET) therefore land on that root, as they should.
 *
 * Profile values. OTLP profiles carry one sample type per profile, so a pprof
 * with several sample types arrives as several profiles holding the same
 * samples. To count each hit once, the statistics of a scope come from one
 * profile per quantity: sample counts from the samples/count profile (or one
 * per sample entry of the time profile when there is none), CPU time from the
 * cpu/nanoseconds profile (or samples/count x period when the period type is
 * cpu/nanoseconds and no cpu/nanoseconds profile exists), wall time likewise
 * from wall/nanoseconds. The hottest functions are the leaf functions weighted
 * by CPU time, else wall time, else sample count. Other profiles (heap, ...)
 * are linked and enriched but add nothing to the summary.
 */
#include "correlation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/stats.h"
#include "pipeline/consumer.h"

#define COMPONENT          "correlation"
#define MAX_ANCESTRY       64         /* parent walks stop here (guards against cycles) */
#define MAX_TOP_CANDIDATES 64         /* distinct leaf functions tracked per span */
#define MAX_FN_NAMES       (1u << 17) /* distinct function names remembered */
/* Profiles count as present for both windows plus this (SDKs upload every 10-60 s). */
#define PROFILES_HORIZON_NS (60ull * 1000000000ull)

/* ---- config ----------------------------------------------------------------------------- */

#define CFG_OFF(f) offsetof(pl_correlation_config, f)

static int correlation_validate(void *p, pl_cfg_ctx *ctx)
{
    pl_correlation_config *c = p;
    int errors = 0;
    if (c->window <= 0) {
        pl_cfg_errorf(ctx, "window", "window must be positive");
        errors++;
    }
    if (c->span_window < 0 || c->sample_window < 0) {
        pl_cfg_errorf(ctx, c->span_window < 0 ? "span_window" : "sample_window",
                      "a window cannot be negative");
        errors++;
    }
    if (c->max_clock_skew < 0) {
        pl_cfg_errorf(ctx, "max_clock_skew", "max_clock_skew cannot be negative");
        errors++;
    }
    if (c->max_spans <= 0 || c->max_spans > (int64_t)1 << 30) {
        pl_cfg_errorf(ctx, "max_spans", "max_spans must be between 1 and 2^30");
        errors++;
    }
    if (c->max_pending_samples <= 0 || c->max_pending_samples > (int64_t)1 << 30) {
        pl_cfg_errorf(ctx, "max_pending_samples", "max_pending_samples must be between 1 and 2^30");
        errors++;
    }
    if (c->max_bytes == 0) {
        pl_cfg_errorf(ctx, "max_bytes", "max_bytes must be positive");
        errors++;
    }
    if (c->top_functions < 0 || c->top_functions > MAX_TOP_CANDIDATES) {
        pl_cfg_errorf(ctx, "top_functions", "top_functions must be between 0 and %d",
                      MAX_TOP_CANDIDATES);
        errors++;
    }
    return errors;
}

static const pl_cfg_field correlation_fields[] = {
    {"window", PL_CFG_DURATION, "30s", CFG_OFF(window),
     "how long each side waits for its partner before flowing on", NULL},
    {"span_window", PL_CFG_DURATION, "0s", CFG_OFF(span_window),
     "how long spans wait for samples (0: window)", NULL},
    {"sample_window", PL_CFG_DURATION, "0s", CFG_OFF(sample_window),
     "how long samples wait for their span (0: window)", NULL},
    {"max_clock_skew", PL_CFG_DURATION, "1s", CFG_OFF(max_clock_skew),
     "slack added to both ends of a span when matching sample times", NULL},
    {"max_spans", PL_CFG_INT, "1000000", CFG_OFF(max_spans),
     "spans held at once; the oldest batches leave early beyond it", NULL},
    {"max_pending_samples", PL_CFG_INT, "1000000", CFG_OFF(max_pending_samples),
     "samples waiting for their span at once; the oldest batches leave early beyond it", NULL},
    {"max_bytes", PL_CFG_SIZE, "256MiB", CFG_OFF(max_bytes),
     "memory of held batches plus the index; the oldest batches leave early beyond it", NULL},
    {"span_attributes", PL_CFG_STRLIST, NULL, CFG_OFF(span_attributes),
     "span attributes copied onto linked samples (searched on the span, then its ancestors)", NULL},
    {"top_functions", PL_CFG_INT, "5", CFG_OFF(top_functions),
     "how many hottest self functions the span summary lists (0: none)", NULL},
    {"early_release", PL_CFG_BOOL, "true", CFG_OFF(early_release),
     "release spans before the window closes once profiles of their service cover their end", NULL},
    {"trace_id_attribute", PL_CFG_STRING, "trace_id", CFG_OFF(trace_id_attribute),
     "sample attribute receiving the span's trace id (32 hex)", NULL},
    {"span_id_attribute", PL_CFG_STRING, "span_id", CFG_OFF(span_id_attribute),
     "sample attribute receiving the span id (16 hex)", NULL},
    {"span_name_attribute", PL_CFG_STRING, "span_name", CFG_OFF(span_name_attribute),
     "sample attribute receiving the span's own name", NULL},
    {"root_span_name_attribute", PL_CFG_STRING, "root_span_name", CFG_OFF(root_span_name_attribute),
     "sample attribute receiving the local root span's name", NULL},
    {"service_name_attribute", PL_CFG_STRING, "service.name", CFG_OFF(service_name_attribute),
     "sample attribute receiving the span's service.name", NULL},
    {"profile_id_attribute", PL_CFG_STRING, "pyroscope.profile.id", CFG_OFF(profile_id_attribute),
     "span attribute set to the span id (hex) on spans that had samples (Grafana's link)", NULL},
    {"profile_samples_attribute", PL_CFG_STRING, "profile.samples",
     CFG_OFF(profile_samples_attribute), "span attribute: samples linked to the span itself", NULL},
    {"cpu_time_attribute", PL_CFG_STRING, "profile.cpu_time_ns", CFG_OFF(cpu_time_attribute),
     "span attribute: CPU time of the span's own samples, ns", NULL},
    {"cpu_time_total_attribute", PL_CFG_STRING, "profile.cpu_time_total_ns",
     CFG_OFF(cpu_time_total_attribute),
     "span attribute: CPU time of the span and its known descendants, ns", NULL},
    {"wall_time_attribute", PL_CFG_STRING, "profile.wall_time_ns", CFG_OFF(wall_time_attribute),
     "span attribute: wall time of the span's own samples, ns (only with wall profiles)", NULL},
    {"top_functions_attribute", PL_CFG_STRING, "profile.top_functions",
     CFG_OFF(top_functions_attribute),
     "span attribute: array of \"function (share%)\" for the hottest self functions", NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

const pl_cfg_section pl_correlation_config_section = {
    sizeof(pl_correlation_config),
    correlation_fields,
    correlation_validate,
};

void pl_correlation_config_defaults(pl_correlation_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->window = 30 * 1000000000LL;
    cfg->max_clock_skew = 1000000000LL;
    cfg->max_spans = 1000000;
    cfg->max_pending_samples = 1000000;
    cfg->max_bytes = 256ull << 20;
    cfg->top_functions = 5;
    cfg->early_release = true;
}

/* ---- data structures -------------------------------------------------------------------- */

enum entry_state {
    ENTRY_HELD = 1,        /* span inside a held batch */
    ENTRY_PLACEHOLDER = 2, /* parent not seen yet: collects descendants' totals */
    ENTRY_GONE = 3,        /* span released: remembered to count late samples */
};

typedef struct span_entry {
    uint64_t key;       /* span id bytes; 0 = empty slot */
    pl_span *span;      /* HELD: the span inside its held batch */
    uint32_t held;      /* HELD: held batch record */
    uint32_t stats;     /* side statistics, 0 = none yet */
    uint32_t expiry_ms; /* PLACEHOLDER / GONE: expiry, ms since the processor's base time */
    uint16_t service;   /* HELD: service id (0 = unknown) */
    uint8_t state;
    uint8_t unused;
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
typedef struct top_fn {
    uint32_t fn;
    uint64_t weight;
} top_fn;

typedef struct fn_name {
    char *name;
    uint32_t len;
    uint64_t hash;
} fn_name;

typedef struct span_stats {
    uint8_t trace_id[16]; /* placeholders: the trace they belong to */
    bool has_trace;
    uint32_t linked;  /* sample entries linked to this span itself */
    uint64_t samples; /* self */
    uint64_t samples_total;
    uint64_t cpu_self, cpu_total;
    uint64_t wall_self, wall_total;
    uint64_t top_weight; /* sum of the weights behind the functions */
    top_fn fn_inline[2]; /* the first functions (most spans have one or two) */
    top_fn *fns;         /* all of them once there are more (cap_fns > 2) */
    uint32_t n_fns, cap_fns;
    uint32_t next_free;
} span_stats;

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
    uint64_t seq; /* arrival order */
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
} held_batch;

typedef struct service {
    char *name;
    uint32_t len;
    uint64_t hash;
    uint64_t covered_until; /* latest profile end seen from this service */
} service;

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
typedef struct dict_writer {
    pl_dictionary *dict;
    pl_batch *batch;
    int32_t *strs; /* index + 1, 0 = empty */
    uint32_t str_mask, str_count;
    int32_t *attrs;
    uint32_t attr_mask, attr_count;
    uint32_t *fn_ids; /* function index -> fn pool id (0: not looked up yet) */
    uint32_t n_fn_ids;
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
    const pl_span *span;
    int32_t *idx; /* span_name, root_span_name, service.name, span_attributes */
    uint32_t n;
    int32_t ids[2]; /* trace_id, span_id: built for the first sample without a link */
    uint32_t n_ids;
    bool ids_built;
    int32_t link; /* link_table index carrying the span's trace and span ids (0: none) */
    contrib roll; /* not yet rolled up to the ancestors */
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

    fn_name *fn_names; /* function-name pool, index 0 unused */
    uint32_t n_fn_names, cap_fn_names;
    uint32_t *fn_index; /* open addressing: pool id, 0 = empty */
    uint32_t fn_index_mask;
    size_t fn_bytes; /* names in the pool, and spans' function lists beyond the inline two */

    dict_writer writer;
    enrich_slot *cache;
    uint32_t cache_mask, cache_count;

    uint32_t *release_queue; /* sample batches whose last waiting sample linked */
    uint32_t n_release, cap_release;
    pl_span **adopted; /* scratch: spans that took over a placeholder */
    uint32_t n_adopted, cap_adopted;

    bool started, timer_open, shut_down;
    uv_timer_t timer;

    uint64_t *c_linked_samples, *c_unlinked_samples, *c_late_samples, *c_early_samples;
    uint64_t *c_linked_spans, *c_unlinked_spans, *c_late_spans, *c_early_spans;
    uint64_t *c_covered_spans;
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

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Eight bytes at a time: names and hex ids are 16-40 bytes long. */
static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 29;
        b += 8;
        n -= 8;
    }
    uint64_t w = 0;
    if (n)
        memcpy(&w, b, n);
    return mix64((h ^ w) * 0xc4ceb9fe1a85ec53ULL);
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

static bool trace_id_valid(const uint8_t *id, uint8_t len)
{
    if (len != 16)
        return false;
    for (int i = 0; i < 16; i++)
        if (id[i])
            return true;
    return false;
}

static uint64_t now_ns(correlation *self)
{
    return pl_clock_now(&self->clock);
}

/* Milliseconds since the processor's base time, for marker expiry. */
static uint32_t to_ms(correlation *self, uint64_t ns)
{
    if (ns <= self->base_ns)
        return 0;
    uint64_t ms = (ns - self->base_ns) / 1000000u;
    return ms > 0x7fffffffu ? 0x7fffffffu : (uint32_t)ms;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- the span table --------------------------------------------------------------------- */

static int span_table_init(span_table *t, uint32_t cap)
{
    t->slots = calloc(cap, sizeof(span_entry));
    if (!t->slots)
        return -1;
    t->mask = cap - 1;
    t->count = 0;
    return 0;
}

static void span_table_put_raw(span_table *t, const span_entry *e)
{
    uint32_t i = (uint32_t)mix64(e->key) & t->mask;
    while (t->slots[i].key)
        i = (i + 1) & t->mask;
    t->slots[i] = *e;
    t->count++;
}

/* Rebuilds the table with `cap` slots (a power of two that holds count). */
static int span_table_resize(span_table *t, uint64_t cap)
{
    span_table bigger;
    if (cap > (1u << 31) || cap < 1024 || span_table_init(&bigger, (uint32_t)cap))
        return -1;
    for (uint32_t i = 0; i <= t->mask; i++) {
        uint32_t ahead = (i + 16) & t->mask;
        if (t->slots[ahead].key)
            __builtin_prefetch(&bigger.slots[(uint32_t)mix64(t->slots[ahead].key) & bigger.mask],
                               1);
        if (t->slots[i].key)
            span_table_put_raw(&bigger, &t->slots[i]);
    }
    free(t->slots);
    *t = bigger;
    return 0;
}

static int span_table_grow(span_table *t)
{
    return span_table_resize(t, ((uint64_t)t->mask + 1) * 2);
}

/* Starts loading the home slot of a span id: indexing and releasing walk a
 * batch's spans in order, and their slots are scattered over a table far
 * larger than the caches, so fetching a few spans ahead hides most misses. */
#define PREFETCH_AHEAD 8
static inline void span_table_prefetch(const span_table *t, const pl_span *sp)
{
    if (sp->span_id_len == 8)
        __builtin_prefetch(&t->slots[(uint32_t)mix64(id_key(sp->span_id)) & t->mask]);
}

/* Keeps the load at or under one half. -1 on OOM. */
static int span_table_insert(span_table *t, const span_entry *e)
{
    if ((t->count + 1) * 2 > t->mask + 1 && span_table_grow(t))
        return -1;
    span_table_put_raw(t, e);
    return 0;
}

/* First slot at or after `from` (in probe order from the key's home) holding
 * key; UINT32_MAX if none. Pass from = UINT32_MAX to start at home. */
static inline uint32_t span_table_next(const span_table *t, uint64_t key, uint32_t from)
{
    uint32_t i = from == UINT32_MAX ? (uint32_t)mix64(key) & t->mask : from;
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

/* Backward-shift deletion: entries after the hole move back, never past it. */
static void span_table_delete(span_table *t, uint32_t hole)
{
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & t->mask;
        if (!t->slots[i].key)
            break;
        uint32_t home = (uint32_t)mix64(t->slots[i].key) & t->mask;
        /* Can the entry at i move to the hole? Only if its home is not in (hole, i]. */
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        t->slots[hole] = t->slots[i];
        hole = i;
    }
    memset(&t->slots[hole], 0, sizeof(span_entry));
    t->count--;
}

/* ---- the pending table (same scheme) ---------------------------------------------------- */

static int pending_table_init(pending_table *t, uint32_t cap)
{
    t->slots = calloc(cap, sizeof(pending_entry));
    if (!t->slots)
        return -1;
    t->mask = cap - 1;
    t->count = 0;
    return 0;
}

static void pending_table_put_raw(pending_table *t, const pending_entry *e)
{
    uint32_t i = (uint32_t)mix64(e->key) & t->mask;
    while (t->slots[i].key)
        i = (i + 1) & t->mask;
    t->slots[i] = *e;
    t->count++;
}

static int pending_table_resize(pending_table *t, uint64_t cap)
{
    pending_table bigger;
    if (cap > (1u << 31) || cap < 1024 || pending_table_init(&bigger, (uint32_t)cap))
        return -1;
    for (uint32_t i = 0; i <= t->mask; i++)
        if (t->slots[i].key)
            pending_table_put_raw(&bigger, &t->slots[i]);
    free(t->slots);
    *t = bigger;
    return 0;
}

static int pending_table_insert(pending_table *t, const pending_entry *e)
{
    if ((t->count + 1) * 2 > t->mask + 1 && pending_table_resize(t, ((uint64_t)t->mask + 1) * 2))
        return -1;
    pending_table_put_raw(t, e);
    return 0;
}

static inline uint32_t pending_table_next(const pending_table *t, uint64_t key, uint32_t from)
{
    uint32_t i = from == UINT32_MAX ? (uint32_t)mix64(key) & t->mask : from;
    while (t->slots[i].key) {
        if (t->slots[i].key == key)
            return i;
        i = (i + 1) & t->mask;
    }
    return UINT32_MAX;
}

static void pending_table_delete(pending_table *t, uint32_t hole)
{
    uint32_t i = hole;
    for (;;) {
        i = (i + 1) & t->mask;
        if (!t->slots[i].key)
            break;
        uint32_t home = (uint32_t)mix64(t->slots[i].key) & t->mask;
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (stays)
            continue;
        t->slots[hole] = t->slots[i];
        hole = i;
    }
    memset(&t->slots[hole], 0, sizeof(pending_entry));
    t->count--;
}

/* ---- span statistics -------------------------------------------------------------------- */

static uint32_t stats_alloc(correlation *self)
{
    if (self->free_stats) {
        uint32_t i = self->free_stats;
        self->free_stats = self->stats_arr[i].next_free;
        memset(&self->stats_arr[i], 0, sizeof(span_stats));
        return i;
    }
    if (self->n_stats == self->cap_stats) {
        uint32_t cap = self->cap_stats ? self->cap_stats * 2 : 256;
        span_stats *a = realloc(self->stats_arr, (size_t)cap * sizeof(span_stats));
        if (!a)
            return 0;
        self->stats_arr = a;
        self->cap_stats = cap;
    }
    if (self->n_stats == 0)
        self->n_stats = 1; /* index 0 means "none" */
    uint32_t i = self->n_stats++;
    memset(&self->stats_arr[i], 0, sizeof(span_stats));
    return i;
}

static void stats_release(correlation *self, uint32_t i)
{
    if (!i)
        return;
    span_stats *s = &self->stats_arr[i];
    if (s->cap_fns > 2) {
        free(s->fns);
        self->fn_bytes -= s->cap_fns * sizeof(top_fn);
    }
    memset(s, 0, sizeof(*s));
    s->next_free = self->free_stats;
    self->free_stats = i;
}

static span_stats *entry_stats(correlation *self, span_entry *e)
{
    if (!e->stats)
        e->stats = stats_alloc(self);
    return e->stats ? &self->stats_arr[e->stats] : NULL;
}

/* Adds a name to the function-name pool and its index. */
static uint32_t fn_pool_add(correlation *self, pl_bytes name, uint64_t h)
{
    if (self->n_fn_names >= self->cap_fn_names) {
        uint32_t cap = self->cap_fn_names ? self->cap_fn_names * 2 : 256;
        fn_name *a = realloc(self->fn_names, cap * sizeof(fn_name));
        if (!a)
            return 0;
        self->fn_names = a;
        self->cap_fn_names = cap;
    }
    if ((self->n_fn_names + 1) * 2 > self->fn_index_mask + 1) {
        uint32_t cap = (self->fn_index_mask + 1) * 2;
        uint32_t *idx = calloc(cap, sizeof(uint32_t));
        if (!idx)
            return 0;
        for (uint32_t k = 1; k < self->n_fn_names; k++) {
            uint32_t j = (uint32_t)self->fn_names[k].hash & (cap - 1);
            while (idx[j])
                j = (j + 1) & (cap - 1);
            idx[j] = k;
        }
        free(self->fn_index);
        self->fn_index = idx;
        self->fn_index_mask = cap - 1;
    }
    char *copy = malloc(name.len + 1);
    if (!copy)
        return 0;
    if (name.len)
        memcpy(copy, name.ptr, name.len);
    copy[name.len] = 0;
    uint32_t id = self->n_fn_names++;
    self->fn_names[id] = (fn_name){copy, name.len, h};
    self->fn_bytes += name.len + 1;
    uint32_t j = (uint32_t)h & self->fn_index_mask;
    while (self->fn_index[j])
        j = (j + 1) & self->fn_index_mask;
    self->fn_index[j] = id;
    return id;
}

/* Pool id of a function name, interned once for the processor's life.
 * Beyond MAX_FN_NAMES distinct names everything new shares id 1, "[other]".
 * 0 on OOM. */
static uint32_t fn_pool_id(correlation *self, pl_bytes name)
{
    if (!self->fn_index) {
        self->fn_index = calloc(1024, sizeof(uint32_t));
        if (!self->fn_index)
            return 0;
        self->fn_index_mask = 1023;
        self->n_fn_names = 1; /* id 0 means none */
        pl_bytes other = PL_BYTES_LIT("[other]");
        if (fn_pool_add(self, other, hash_bytes(other.ptr, other.len)) != 1)
            return 0;
    }
    uint64_t h = hash_bytes(name.ptr, name.len);
    uint32_t i = (uint32_t)h & self->fn_index_mask;
    while (self->fn_index[i]) {
        const fn_name *f = &self->fn_names[self->fn_index[i]];
        if (f->hash == h && f->len == name.len && memcmp(f->name, name.ptr, name.len) == 0)
            return self->fn_index[i];
        i = (i + 1) & self->fn_index_mask;
    }
    if (self->n_fn_names >= MAX_FN_NAMES)
        return 1;
    return fn_pool_add(self, name, h);
}

static top_fn *stats_fns(span_stats *s)
{
    return s->cap_fns > 2 ? s->fns : s->fn_inline;
}

static void stats_add_function(correlation *self, span_stats *s, uint32_t fn, uint64_t weight)
{
    if (!weight || !fn)
        return;
    s->top_weight += weight;
    top_fn *fns = stats_fns(s);
    for (uint32_t i = 0; i < s->n_fns; i++) {
        if (fns[i].fn == fn) {
            fns[i].weight += weight;
            return;
        }
    }
    if (s->n_fns >= MAX_TOP_CANDIDATES)
        return; /* counted in top_weight (so shares stay honest), not listed */
    if (s->n_fns >= 2 && s->n_fns >= s->cap_fns) {
        uint32_t cap = s->cap_fns > 2 ? s->cap_fns * 2 : 8;
        top_fn *f = malloc(cap * sizeof(top_fn));
        if (!f)
            return;
        memcpy(f, fns, s->n_fns * sizeof(top_fn));
        if (s->cap_fns > 2) {
            free(s->fns);
            self->fn_bytes -= s->cap_fns * sizeof(top_fn);
        }
        self->fn_bytes += cap * sizeof(top_fn);
        s->fns = f;
        s->cap_fns = cap;
        fns = f;
    }
    fns[s->n_fns++] = (top_fn){fn, weight};
}

/* ---- held batches ----------------------------------------------------------------------- */

static uint32_t held_alloc(correlation *self)
{
    if (self->free_held) {
        uint32_t i = self->free_held;
        self->free_held = self->held[i].next_free;
        memset(&self->held[i], 0, sizeof(held_batch));
        return i;
    }
    if (self->n_held == self->cap_held) {
        uint32_t cap = self->cap_held ? self->cap_held * 2 : 64;
        held_batch *a = realloc(self->held, (size_t)cap * sizeof(held_batch));
        if (!a)
            return 0;
        self->held = a;
        self->cap_held = cap;
    }
    if (self->n_held == 0)
        self->n_held = 1;
    uint32_t i = self->n_held++;
    memset(&self->held[i], 0, sizeof(held_batch));
    return i;
}

static void held_link(correlation *self, uint32_t i)
{
    held_batch *h = &self->held[i];
    int s = h->side;
    h->prev = self->tail[s];
    h->next_held = 0;
    if (self->tail[s])
        self->held[self->tail[s]].next_held = i;
    else
        self->head[s] = i;
    self->tail[s] = i;
    self->held_batches[s]++;
}

static void held_unlink_and_free(correlation *self, uint32_t i)
{
    held_batch *h = &self->held[i];
    int s = h->side;
    if (h->prev)
        self->held[h->prev].next_held = h->next_held;
    else
        self->head[s] = h->next_held;
    if (h->next_held)
        self->held[h->next_held].prev = h->prev;
    else
        self->tail[s] = h->prev;
    self->held_batches[s]--;
    free(h->covers);
    free(h->refs);
    memset(h, 0, sizeof(*h));
    h->next_free = self->free_held;
    self->free_held = i;
}

/* ---- services --------------------------------------------------------------------------- */

static pl_bytes resource_service(const pl_resource *r)
{
    pl_kv *kv = pl_attrs_find(&r->attrs, "service.name", 12);
    if (kv && kv->value.type == PL_VALUE_STRING)
        return kv->value.u.str;
    return (pl_bytes){NULL, 0};
}

/* Service id for a name (0 = none / too many). */
static uint16_t service_id(correlation *self, pl_bytes name)
{
    if (!name.len)
        return 0;
    uint64_t h = hash_bytes(name.ptr, name.len);
    for (uint32_t i = 1; i < self->n_services; i++) {
        service *s = &self->services[i];
        if (s->hash == h && s->len == name.len && memcmp(s->name, name.ptr, name.len) == 0)
            return (uint16_t)i;
    }
    if (self->n_services >= 0xffff)
        return 0;
    if (self->n_services == self->cap_services) {
        uint32_t cap = self->cap_services ? self->cap_services * 2 : 16;
        service *a = realloc(self->services, cap * sizeof(service));
        if (!a)
            return 0;
        self->services = a;
        self->cap_services = cap;
    }
    if (self->n_services == 0) {
        memset(&self->services[0], 0, sizeof(service));
        self->n_services = 1;
    }
    char *copy = malloc(name.len + 1);
    if (!copy)
        return 0;
    memcpy(copy, name.ptr, name.len);
    copy[name.len] = 0;
    self->services[self->n_services] = (service){copy, name.len, h, 0};
    return (uint16_t)self->n_services++;
}

static pl_bytes service_name(correlation *self, uint16_t id)
{
    if (!id || id >= self->n_services)
        return (pl_bytes){NULL, 0};
    return (pl_bytes){(const uint8_t *)self->services[id].name, self->services[id].len};
}

/* ---- span-side helpers ------------------------------------------------------------------ */

static bool span_has_times(const pl_span *sp)
{
    return sp->start_time_unix_nano || sp->end_time_unix_nano;
}

/* Does [lo, hi] (a sample's time) overlap the span widened by the skew? */
static bool span_time_matches(correlation *self, const pl_span *sp, uint64_t lo, uint64_t hi)
{
    if (!span_has_times(sp))
        return true;
    uint64_t start = sp->start_time_unix_nano ? sp->start_time_unix_nano : sp->end_time_unix_nano;
    uint64_t end = sp->end_time_unix_nano > start ? sp->end_time_unix_nano : start;
    uint64_t a = start > self->skew ? start - self->skew : 0;
    uint64_t b = sat_add(end, self->skew);
    return lo <= b && hi >= a;
}

/* Finds the entry of `key` in `trace` (HELD, or a PLACEHOLDER when
 * want_placeholder). trace may be NULL (unknown). */
static span_entry *find_span(correlation *self, uint64_t key, const uint8_t *trace, bool held,
                             bool want_placeholder)
{
    SPAN_EACH(&self->spans, key, i)
    {
        span_entry *e = &self->spans.slots[i];
        if (held && e->state == ENTRY_HELD) {
            const pl_span *sp = e->span;
            if (!trace || !trace_id_valid(sp->trace_id, sp->trace_id_len) ||
                memcmp(sp->trace_id, trace, 16) == 0)
                return e;
        } else if (want_placeholder && e->state == ENTRY_PLACEHOLDER) {
            span_stats *s = e->stats ? &self->stats_arr[e->stats] : NULL;
            if (!trace || !s || !s->has_trace || memcmp(s->trace_id, trace, 16) == 0)
                return e;
        }
    }
    return NULL;
}

static const uint8_t *span_trace(const pl_span *sp)
{
    return trace_id_valid(sp->trace_id, sp->trace_id_len) ? sp->trace_id : NULL;
}

/* Adds c to the totals of every known ancestor of `e`; parks it in a
 * placeholder for the first ancestor not seen yet. */
static void roll_up(correlation *self, span_entry *e, contrib c)
{
    const pl_span *sp = e->span;
    for (int depth = 0; sp && depth < MAX_ANCESTRY; depth++) {
        if (!span_id_valid(sp->parent_span_id, sp->parent_span_id_len))
            return;
        uint64_t pkey = id_key(sp->parent_span_id);
        const uint8_t *trace = span_trace(sp);
        span_entry *p = find_span(self, pkey, trace, true, true);
        if (!p) {
            /* A gone parent already left: nothing to add to. */
            SPAN_EACH(&self->spans, pkey, i)
            {
                if (self->spans.slots[i].state == ENTRY_GONE)
                    return;
            }
            if (self->markers >= (size_t)self->cfg.max_spans)
                return;
            span_entry ph = {0};
            ph.key = pkey;
            ph.state = ENTRY_PLACEHOLDER;
            ph.expiry_ms = to_ms(self, now_ns(self) + self->span_window);
            ph.stats = stats_alloc(self);
            if (!ph.stats)
                return;
            span_stats *s = &self->stats_arr[ph.stats];
            if (trace) {
                memcpy(s->trace_id, trace, 16);
                s->has_trace = true;
            }
            s->samples_total = c.samples;
            s->cpu_total = c.cpu;
            s->wall_total = c.wall;
            if (span_table_insert(&self->spans, &ph)) {
                stats_release(self, ph.stats);
                return;
            }
            self->markers++;
            return;
        }
        span_stats *s = entry_stats(self, p);
        if (!s)
            return;
        s->samples_total += c.samples;
        s->cpu_total += c.cpu;
        s->wall_total += c.wall;
        if (p->state != ENTRY_HELD)
            return;
        sp = p->span;
    }
}

/* ---- sample-side helpers ---------------------------------------------------------------- */

static pl_bytes value_text(const pl_dictionary *dict, const pl_value *v)
{
    if (v->type == PL_VALUE_STRING)
        return v->u.str;
    if (v->type == PL_VALUE_STRINDEX)
        return pl_dict_string(dict, v->u.strindex);
    return (pl_bytes){NULL, 0};
}

/* The span id (and trace id, when known) a sample points to. */
static bool sample_ids(const pl_dictionary *dict, const pl_sample *s, uint64_t *key,
                       uint8_t trace[16], bool *has_trace)
{
    *has_trace = false;
    *key = 0;
    if (s->link_index > 0 && (uint32_t)s->link_index < dict->n_links) {
        const pl_link *l = &dict->links[s->link_index];
        if (span_id_valid(l->span_id, l->span_id_len)) {
            *key = id_key(l->span_id);
            if (trace_id_valid(l->trace_id, l->trace_id_len)) {
                memcpy(trace, l->trace_id, 16);
                *has_trace = true;
            }
        }
    }
    if (*key && *has_trace)
        return true;
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        if (ai <= 0 || (uint32_t)ai >= dict->n_attributes)
            continue;
        const pl_kvu *a = &dict->attributes[ai];
        pl_bytes k = pl_dict_string(dict, a->key_strindex);
        if (k.len != 7 && k.len != 8 && k.len != 10)
            continue;
        pl_bytes v = value_text(dict, &a->value);
        if (!*key && v.len == 16 &&
            (pl_bytes_eq_cstr(k, "span_id") || pl_bytes_eq_cstr(k, "profile_id"))) {
            uint8_t id[8];
            if (pl_hex_decode((const char *)v.ptr, 16, id, 8) == 0 && id_key(id))
                *key = id_key(id);
        } else if (!*has_trace && v.len == 32 && pl_bytes_eq_cstr(k, "trace_id")) {
            if (pl_hex_decode((const char *)v.ptr, 32, trace, 16) == 0 && trace_id_valid(trace, 16))
                *has_trace = true;
        }
    }
    return *key != 0;
}

/* A sample's time range; false when it has none. */
static bool sample_time(const profile_info *pi, const pl_sample *s, uint64_t *lo, uint64_t *hi)
{
    if (s->n_timestamps) {
        uint64_t a = UINT64_MAX, b = 0;
        for (uint32_t i = 0; i < s->n_timestamps; i++) {
            uint64_t t = s->timestamps_unix_nano[i];
            if (t < a)
                a = t;
            if (t > b)
                b = t;
        }
        *lo = a;
        *hi = b;
        return true;
    }
    if (pi->t_start) {
        *lo = pi->t_start;
        *hi = pi->t_end;
        return true;
    }
    return false;
}

static contrib sample_contrib(const profile_info *pi, const pl_sample *s)
{
    contrib c = {0, 0, 0, 0};
    uint64_t v = 0;
    if (s->n_values) {
        for (uint32_t i = 0; i < s->n_values; i++)
            if (s->values[i] > 0)
                v += (uint64_t)s->values[i];
    } else {
        v = s->n_timestamps; /* timestamps only: each counts as 1 */
    }
    if (pi->counts_samples)
        c.samples = v;
    else if (pi->counts_entries)
        c.samples = s->n_timestamps ? s->n_timestamps : 1;
    if (pi->cpu_mult)
        c.cpu = v * (uint64_t)pi->cpu_mult;
    if (pi->wall_mult)
        c.wall = v * (uint64_t)pi->wall_mult;
    switch (pi->top_kind) {
    case 1:
        c.top = c.cpu;
        break;
    case 2:
        c.top = c.wall;
        break;
    case 3:
        c.top = c.samples ? c.samples : v;
        break;
    }
    return c;
}

/* The leaf (self) function of a sample's stack: its function_table index,
 * 0 when unknown. */
static int32_t leaf_function(const pl_dictionary *dict, const pl_sample *s)
{
    int32_t none = 0;
    if (s->stack_index <= 0 || (uint32_t)s->stack_index >= dict->n_stacks)
        return none;
    const pl_stack *st = &dict->stacks[s->stack_index];
    if (!st->n_location_indices)
        return none;
    int32_t li = st->location_indices[0];
    if (li < 0 || (uint32_t)li >= dict->n_locations)
        return none;
    const pl_location *loc = &dict->locations[li];
    if (!loc->n_lines)
        return none;
    int32_t fi = loc->lines[0].function_index; /* callee first: the innermost frame */
    if (fi <= 0 || (uint32_t)fi >= dict->n_functions)
        return none;
    return fi;
}

/* ---- dictionary writer ------------------------------------------------------------------ */

static void writer_reset(dict_writer *w)
{
    free(w->strs);
    free(w->attrs);
    free(w->fn_ids);
    memset(w, 0, sizeof(*w));
}

static uint64_t attr_hash(int32_t key, const pl_value *v)
{
    uint64_t h = mix64((uint64_t)(uint32_t)key * 31 + (uint64_t)v->type);
    switch (v->type) {
    case PL_VALUE_STRING:
    case PL_VALUE_BYTES:
        h ^= hash_bytes(v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_INT:
        h ^= mix64((uint64_t)v->u.i);
        break;
    case PL_VALUE_BOOL:
        h ^= v->u.b;
        break;
    case PL_VALUE_STRINDEX:
        h ^= mix64((uint64_t)(uint32_t)v->u.strindex);
        break;
    default:
        break;
    }
    return h;
}

static void writer_str_put(dict_writer *w, int32_t idx)
{
    pl_bytes s = w->dict->strings[idx];
    uint32_t i = (uint32_t)hash_bytes(s.ptr, s.len) & w->str_mask;
    while (w->strs[i]) {
        if (pl_bytes_eq(w->dict->strings[w->strs[i] - 1], s))
            return; /* keep the first of duplicates */
        i = (i + 1) & w->str_mask;
    }
    w->strs[i] = idx + 1;
    w->str_count++;
}

static void writer_attr_put(dict_writer *w, int32_t idx)
{
    const pl_kvu *a = &w->dict->attributes[idx];
    uint32_t i = (uint32_t)attr_hash(a->key_strindex, &a->value) & w->attr_mask;
    while (w->attrs[i])
        i = (i + 1) & w->attr_mask;
    w->attrs[i] = idx + 1;
    w->attr_count++;
}

static int writer_rehash(dict_writer *w, bool strings)
{
    uint32_t n = strings ? w->dict->n_strings : w->dict->n_attributes;
    uint32_t cap = 64;
    while (cap < n * 2 + 64)
        cap *= 2;
    int32_t *slots = calloc(cap, sizeof(int32_t));
    if (!slots)
        return -1;
    if (strings) {
        free(w->strs);
        w->strs = slots;
        w->str_mask = cap - 1;
        w->str_count = 0;
        for (uint32_t i = 0; i < n; i++)
            writer_str_put(w, (int32_t)i);
    } else {
        free(w->attrs);
        w->attrs = slots;
        w->attr_mask = cap - 1;
        w->attr_count = 0;
        for (uint32_t i = 1; i < n; i++)
            writer_attr_put(w, (int32_t)i);
    }
    return 0;
}

static int writer_bind(dict_writer *w, pl_batch *batch)
{
    pl_dictionary *dict = &batch->data.profiles.dict;
    if (w->dict == dict && w->batch == batch)
        return 0;
    writer_reset(w);
    if (pl_dict_ensure_zero_entries(&batch->arena, dict))
        return -1;
    batch->data.profiles.has_dictionary = true;
    w->dict = dict;
    w->batch = batch;
    if (writer_rehash(w, true) || writer_rehash(w, false)) {
        writer_reset(w);
        return -1;
    }
    return 0;
}

/* Appends one element to a dictionary table living in the batch arena. */
static void *table_push(pl_arena *arena, void **items, uint32_t *n, uint32_t *cap, size_t elem)
{
    if (*n >= *cap || !*items) {
        uint32_t c = *cap < *n ? *n : *cap;
        if (c >= (1u << 30))
            return NULL;
        c = c < 8 ? 16 : c * 2;
        void *p = pl_arena_grow(arena, *items, *n, c, elem);
        if (!p)
            return NULL;
        *items = p;
        *cap = c;
    }
    return (char *)*items + (size_t)(*n)++ * elem;
}

/* Index of string s (copied into the batch when new); -1 on OOM. */
static int32_t writer_string(dict_writer *w, pl_bytes s)
{
    pl_dictionary *d = w->dict;
    uint32_t i = (uint32_t)hash_bytes(s.ptr, s.len) & w->str_mask;
    while (w->strs[i]) {
        if (pl_bytes_eq(d->strings[w->strs[i] - 1], s))
            return w->strs[i] - 1;
        i = (i + 1) & w->str_mask;
    }
    if (d->n_strings >= INT32_MAX - 1)
        return -1;
    pl_bytes copy = pl_batch_bytes(w->batch, s.ptr, s.len);
    if (s.len && !copy.ptr)
        return -1;
    pl_bytes *slot = table_push(&w->batch->arena, (void **)&d->strings, &d->n_strings,
                                &d->cap_strings, sizeof(pl_bytes));
    if (!slot)
        return -1;
    *slot = copy;
    int32_t idx = (int32_t)(d->n_strings - 1);
    w->strs[i] = idx + 1;
    if (++w->str_count * 2 > w->str_mask + 1 && writer_rehash(w, true))
        return -1;
    return idx;
}

/* Index of attribute key=value (value bytes must already live in the batch). */
static int32_t writer_attribute(dict_writer *w, int32_t key, pl_value value)
{
    pl_dictionary *d = w->dict;
    uint32_t i = (uint32_t)attr_hash(key, &value) & w->attr_mask;
    while (w->attrs[i]) {
        const pl_kvu *a = &d->attributes[w->attrs[i] - 1];
        if (a->key_strindex == key && a->unit_strindex == 0 && pl_value_eq(&a->value, &value))
            return w->attrs[i] - 1;
        i = (i + 1) & w->attr_mask;
    }
    if (d->n_attributes >= INT32_MAX - 1)
        return -1;
    pl_kvu *slot = table_push(&w->batch->arena, (void **)&d->attributes, &d->n_attributes,
                              &d->cap_attributes, sizeof(pl_kvu));
    if (!slot)
        return -1;
    slot->key_strindex = key;
    slot->value = value;
    slot->unit_strindex = 0;
    int32_t idx = (int32_t)(d->n_attributes - 1);
    w->attrs[i] = idx + 1;
    if (++w->attr_count * 2 > w->attr_mask + 1 && writer_rehash(w, false))
        return -1;
    return idx;
}

/* ---- enrichment of samples -------------------------------------------------------------- */

static void cache_clear(correlation *self)
{
    if (self->cache_count) {
        memset(self->cache, 0, ((size_t)self->cache_mask + 1) * sizeof(enrich_slot));
        self->cache_count = 0;
    }
}

static enrich_slot *cache_slot(correlation *self, const pl_dictionary *dict, const pl_span *span)
{
    if (!self->cache || (self->cache_count + 1) * 2 > self->cache_mask + 1) {
        uint32_t cap = self->cache ? (self->cache_mask + 1) * 2 : 256;
        enrich_slot *old = self->cache;
        uint32_t old_cap = self->cache ? self->cache_mask + 1 : 0;
        enrich_slot *n = calloc(cap, sizeof(enrich_slot));
        if (!n)
            return NULL;
        self->cache = n;
        self->cache_mask = cap - 1;
        self->cache_count = 0;
        for (uint32_t i = 0; i < old_cap; i++) {
            if (!old[i].span)
                continue;
            uint32_t j =
                (uint32_t)mix64((uintptr_t)old[i].span ^ (uintptr_t)old[i].dict) & self->cache_mask;
            while (self->cache[j].span)
                j = (j + 1) & self->cache_mask;
            self->cache[j] = old[i];
            self->cache_count++;
        }
        free(old);
    }
    uint32_t j = (uint32_t)mix64((uintptr_t)span ^ (uintptr_t)dict) & self->cache_mask;
    while (self->cache[j].span) {
        if (self->cache[j].span == span && self->cache[j].dict == dict)
            return &self->cache[j];
        j = (j + 1) & self->cache_mask;
    }
    return &self->cache[j];
}

typedef struct label {
    pl_bytes key;
    pl_value value; /* strings still point at the span's batch */
} label;

/* Appends a link to the dictionary (no dedupe: one per span and batch). */
static int32_t writer_link(dict_writer *w, const pl_link *l)
{
    pl_dictionary *d = w->dict;
    if (d->n_links >= INT32_MAX - 1)
        return -1;
    pl_link *slot = table_push(&w->batch->arena, (void **)&d->links, &d->n_links, &d->cap_links,
                               sizeof(pl_link));
    if (!slot)
        return -1;
    *slot = *l;
    return (int32_t)(d->n_links - 1);
}

/* Fills `slot` for span entry `e` in the dictionary of `batch`. */
static int build_span_labels(correlation *self, span_entry *e, pl_batch *batch, enrich_slot *slot)
{
    dict_writer *w = &self->writer;
    if (writer_bind(w, batch))
        return -1;
    const pl_span *sp = e->span;
    int32_t tmp[3 + 64];
    uint32_t n = 0;
    size_t max_n = 3 + (self->n_span_attr_keys < 64 ? self->n_span_attr_keys : 64);
    label items[3 + 64];
    size_t n_items = 0;

    items[n_items++] = (label){self->names[NAME_SPAN_NAME], pl_value_string(sp->name)};
    /* The chain up to the local root, walked once for the root's name and
     * for the span_attributes lookups. */
    const pl_span *chain[MAX_ANCESTRY];
    int n_chain = 0;
    span_entry *root = e;
    chain[n_chain++] = e->span;
    while (n_chain < MAX_ANCESTRY) {
        const pl_span *rsp = root->span;
        if (!span_id_valid(rsp->parent_span_id, rsp->parent_span_id_len))
            break;
        span_entry *p = find_span(self, id_key(rsp->parent_span_id), span_trace(rsp), true, false);
        if (!p || p->service != e->service)
            break;
        root = p;
        chain[n_chain++] = p->span;
    }
    items[n_items++] = (label){self->names[NAME_ROOT_SPAN_NAME], pl_value_string(root->span->name)};
    pl_bytes svc = service_name(self, e->service);
    if (svc.len)
        items[n_items++] = (label){self->names[NAME_SERVICE_NAME], pl_value_string(svc)};
    for (size_t k = 0; k < self->n_span_attr_keys && n_items < max_n; k++) {
        pl_bytes key = self->span_attr_keys[k];
        /* The span first, then its ancestors up to the local root: http.route
         * usually sits on the server span, not on the span the sample hit. */
        for (int depth = 0; depth < n_chain; depth++) {
            pl_kv *kv = pl_attrs_find(&chain[depth]->attrs, (const char *)key.ptr, key.len);
            if (kv && (kv->value.type == PL_VALUE_STRING || kv->value.type == PL_VALUE_INT ||
                       kv->value.type == PL_VALUE_DOUBLE || kv->value.type == PL_VALUE_BOOL)) {
                items[n_items++] = (label){key, kv->value};
                break;
            }
        }
    }
    for (size_t k = 0; k < n_items; k++) {
        int32_t ks = writer_string(w, items[k].key);
        if (ks < 0)
            return -1;
        pl_value v = items[k].value;
        if (v.type == PL_VALUE_STRING) {
            /* The string table holds the batch's own copy; the value shares it. */
            int32_t vs = writer_string(w, v.u.str);
            if (vs < 0)
                return -1;
            v.u.str = w->dict->strings[vs];
        }
        int32_t ai = writer_attribute(w, ks, v);
        if (ai < 0)
            return -1;
        tmp[n++] = ai;
    }
    (void)max_n;
    slot->idx = pl_batch_alloc(batch, n * sizeof(int32_t));
    if (!slot->idx)
        return -1;
    memcpy(slot->idx, tmp, n * sizeof(int32_t));
    slot->n = n;
    slot->n_ids = 0;
    slot->ids_built = false;
    slot->link = 0;
    slot->dict = w->dict;
    slot->span = sp;
    self->cache_count++;
    return 0;
}

/* The trace_id / span_id attributes of a slot's span (hex). */
static int build_id_labels(correlation *self, const pl_span *sp, pl_batch *batch, enrich_slot *slot)
{
    dict_writer *w = &self->writer;
    if (writer_bind(w, batch))
        return -1;
    char hex[33];
    slot->n_ids = 0;
    for (int k = 0; k < 2; k++) {
        bool trace = k == 0;
        if (trace && !trace_id_valid(sp->trace_id, sp->trace_id_len))
            continue;
        pl_hex_encode(trace ? sp->trace_id : sp->span_id, trace ? 16 : 8, hex);
        int32_t ks = writer_string(w, self->names[trace ? NAME_TRACE_ID : NAME_SPAN_ID]);
        int32_t vs = ks < 0 ? -1 : writer_string(w, (pl_bytes){(uint8_t *)hex, trace ? 32u : 16u});
        if (vs < 0)
            return -1;
        int32_t ai = writer_attribute(w, ks, pl_value_string(w->dict->strings[vs]));
        if (ai < 0)
            return -1;
        slot->ids[slot->n_ids++] = ai;
    }
    slot->ids_built = true;
    return 0;
}

/* Points the sample at its span: completes its link with the span's trace
 * id, and gives it the span's labels (its own attributes with the same keys
 * are replaced, so keys stay unique within a sample). A sample with a link
 * gets no trace_id / span_id attributes: the link carries them, and the
 * pprof encoder writes labels from both (they would appear twice). */
static enrich_slot *enrich_sample(correlation *self, span_entry *e, pl_sample *s, pl_batch *batch)
{
    pl_dictionary *dict = &batch->data.profiles.dict;
    enrich_slot *slot = cache_slot(self, dict, e->span);
    if (!slot)
        return NULL;
    if (!slot->span && build_span_labels(self, e, batch, slot)) {
        memset(slot, 0, sizeof(*slot));
        return NULL;
    }
    bool has_link =
        s->link_index > 0 && (uint32_t)s->link_index < dict->n_links &&
        span_id_valid(dict->links[s->link_index].span_id, dict->links[s->link_index].span_id_len);
    if (has_link) {
        const pl_link *l = &dict->links[s->link_index];
        const pl_span *sp = e->span;
        if (!trace_id_valid(l->trace_id, l->trace_id_len) &&
            trace_id_valid(sp->trace_id, sp->trace_id_len)) {
            if (!slot->link) {
                pl_link full;
                memset(&full, 0, sizeof(full));
                memcpy(full.trace_id, sp->trace_id, 16);
                full.trace_id_len = 16;
                memcpy(full.span_id, sp->span_id, 8);
                full.span_id_len = 8;
                int32_t li = writer_link(&self->writer, &full);
                slot->link = li > 0 ? li : 0;
            }
            if (slot->link)
                s->link_index = slot->link;
        }
    }
    if (!has_link && !slot->ids_built && build_id_labels(self, e->span, batch, slot))
        slot->n_ids = 0;
    uint32_t n_ids = has_link ? 0 : slot->n_ids;
    uint32_t n_add = n_ids + slot->n;
    int32_t *idx = pl_batch_alloc(batch, (s->n_attribute_indices + n_add) * sizeof(int32_t));
    if (!idx)
        return slot;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        bool replaced = false;
        if (ai > 0 && (uint32_t)ai < dict->n_attributes) {
            int32_t key = dict->attributes[ai].key_strindex;
            for (uint32_t j = 0; j < n_add && !replaced; j++) {
                int32_t mine = j < n_ids ? slot->ids[j] : slot->idx[j - n_ids];
                mine = dict->attributes[mine].key_strindex;
                replaced = key == mine ||
                           pl_bytes_eq(pl_dict_string(dict, key), pl_dict_string(dict, mine));
            }
        }
        if (!replaced)
            idx[n++] = ai;
    }
    memcpy(idx + n, slot->ids, n_ids * sizeof(int32_t));
    memcpy(idx + n + n_ids, slot->idx, slot->n * sizeof(int32_t));
    s->attribute_indices = idx;
    s->n_attribute_indices = n + n_add;
    return slot;
}

/* Pool id of the leaf function of a sample (through the writer's
 * per-dictionary cache). */
static uint32_t sample_function(correlation *self, pl_batch *batch, const pl_sample *s)
{
    dict_writer *w = &self->writer;
    const pl_dictionary *dict = &batch->data.profiles.dict;
    int32_t fi = leaf_function(dict, s);
    if (writer_bind(w, batch))
        return 0;
    if (!w->fn_ids) {
        w->n_fn_ids = dict->n_functions;
        w->fn_ids = calloc(w->n_fn_ids ? w->n_fn_ids : 1, sizeof(uint32_t));
        if (!w->fn_ids)
            return 0;
    }
    if (fi <= 0 || (uint32_t)fi >= w->n_fn_ids)
        return fn_pool_id(self, PL_BYTES_LIT("[unknown]"));
    if (!w->fn_ids[fi]) {
        pl_bytes name = pl_dict_string(dict, dict->functions[fi].name_strindex);
        w->fn_ids[fi] = fn_pool_id(self, name.len ? name : PL_BYTES_LIT("[unknown]"));
    }
    return w->fn_ids[fi];
}

/* Links sample s (of profile pi) to the held span entry e. The ancestors'
 * totals are updated when the linking session ends (link_session_end): until
 * then no marker is added, so entries do not move. */
static void link_sample(correlation *self, span_entry *e, pl_sample *s, profile_info *pi)
{
    enrich_slot *slot = enrich_sample(self, e, s, pi->batch);
    contrib c = sample_contrib(pi, s);
    uint32_t fn = c.top && self->cfg.top_functions > 0 ? sample_function(self, pi->batch, s) : 0;
    span_stats *st = entry_stats(self, e);
    if (st) {
        st->linked++;
        st->samples += c.samples;
        st->samples_total += c.samples;
        st->cpu_self += c.cpu;
        st->cpu_total += c.cpu;
        st->wall_self += c.wall;
        st->wall_total += c.wall;
        if (fn)
            stats_add_function(self, st, fn, c.top);
    }
    if (slot) {
        slot->roll.samples += c.samples;
        slot->roll.cpu += c.cpu;
        slot->roll.wall += c.wall;
    }
    (*self->c_linked_samples)++;
}

static span_entry *entry_of_span(correlation *self, const pl_span *sp);

/* Hands the contributions gathered during a linking session up to the
 * ancestors, and forgets the session's caches. */
static void link_session_end(correlation *self)
{
    if (self->cache_count) {
        for (uint32_t i = 0; i <= self->cache_mask; i++) {
            enrich_slot *slot = &self->cache[i];
            if (!slot->span || !(slot->roll.samples || slot->roll.cpu || slot->roll.wall))
                continue;
            span_entry *e = entry_of_span(self, slot->span);
            if (e)
                roll_up(self, e, slot->roll);
        }
    }
    cache_clear(self);
    writer_reset(&self->writer);
}

/* Tries to link a sample to a held span. */
static span_entry *match_sample(correlation *self, uint64_t key, const uint8_t *trace,
                                bool has_time, uint64_t lo, uint64_t hi)
{
    SPAN_EACH(&self->spans, key, i)
    {
        span_entry *e = &self->spans.slots[i];
        if (e->state != ENTRY_HELD)
            continue;
        const pl_span *sp = e->span;
        if (trace && trace_id_valid(sp->trace_id, sp->trace_id_len) &&
            memcmp(sp->trace_id, trace, 16) != 0)
            continue;
        if (has_time && !span_time_matches(self, sp, lo, hi))
            continue;
        return e;
    }
    return NULL;
}

/* ---- releasing -------------------------------------------------------------------------- */

static void update_gauges(correlation *self)
{
    *self->g_held_spans = (int64_t)self->held_spans;
    *self->g_pending_samples = (int64_t)self->pending_samples;
    *self->g_held_bytes = (int64_t)self->held_bytes;
}

/* Heaviest first; ties by pool id (first seen first), so output is stable. */
static int cmp_fn_weight(const void *a, const void *b)
{
    const top_fn *x = a, *y = b;
    if (x->weight != y->weight)
        return x->weight < y->weight ? 1 : -1;
    return x->fn < y->fn ? -1 : x->fn > y->fn;
}

static void put_int(pl_batch *b, pl_span *sp, pl_bytes key, uint64_t v)
{
    pl_bytes k = pl_batch_bytes(b, key.ptr, key.len);
    if (k.ptr)
        pl_attrs_put(&b->arena, &sp->attrs, k, pl_value_int((int64_t)v));
}

/* Writes the profile summary on a span. */
static void enrich_span(correlation *self, pl_batch *b, pl_span *sp, span_stats *s)
{
    if (s->linked) {
        char hex[17];
        pl_hex_encode(sp->span_id, 8, hex);
        pl_bytes k =
            pl_batch_bytes(b, self->names[NAME_PROFILE_ID].ptr, self->names[NAME_PROFILE_ID].len);
        pl_bytes v = pl_batch_bytes(b, hex, 16);
        if (k.ptr && v.ptr)
            pl_attrs_put(&b->arena, &sp->attrs, k, pl_value_string(v));
        put_int(b, sp, self->names[NAME_SAMPLES], s->samples);
        put_int(b, sp, self->names[NAME_CPU], s->cpu_self);
        if (s->wall_self)
            put_int(b, sp, self->names[NAME_WALL], s->wall_self);
        uint32_t n_top = s->n_fns < (uint32_t)self->cfg.top_functions
                             ? s->n_fns
                             : (uint32_t)self->cfg.top_functions;
        if (n_top && s->top_weight) {
            top_fn *fns = stats_fns(s);
            qsort(fns, s->n_fns, sizeof(top_fn), cmp_fn_weight);
            pl_value *items = pl_batch_alloc(b, n_top * sizeof(pl_value));
            pl_bytes k2 = pl_batch_bytes(b, self->names[NAME_TOP].ptr, self->names[NAME_TOP].len);
            if (items && k2.ptr) {
                for (uint32_t i = 0; i < n_top; i++) {
                    char buf[64];
                    double share = 100.0 * (double)fns[i].weight / (double)s->top_weight;
                    int m = snprintf(buf, sizeof(buf), " (%.1f%%)", share);
                    const fn_name *fname = &self->fn_names[fns[i].fn];
                    size_t len = fname->len + (size_t)m;
                    char *text = pl_batch_alloc(b, len + 1);
                    if (!text)
                        return;
                    memcpy(text, fname->name, fname->len);
                    memcpy(text + fname->len, buf, (size_t)m);
                    items[i] = pl_value_string((pl_bytes){(const uint8_t *)text, (uint32_t)len});
                }
                pl_value arr;
                memset(&arr, 0, sizeof(arr));
                arr.type = PL_VALUE_ARRAY;
                arr.u.array.items = items;
                arr.u.array.n = n_top;
                pl_attrs_put(&b->arena, &sp->attrs, k2, arr);
            }
        }
    }
    if (s->linked || s->cpu_total)
        put_int(b, sp, self->names[NAME_CPU_TOTAL], s->cpu_total);
}

enum release_reason { RELEASE_WINDOW, RELEASE_EARLY, RELEASE_COVERED, RELEASE_FLUSH };

static void release_span_batch(correlation *self, uint32_t hi, int reason)
{
    held_batch *h = &self->held[hi];
    pl_batch *b = h->batch;
    pl_consumer *next = h->next;
    uint32_t linked = 0;
    if (h->indexed) {
        uint32_t expiry = to_ms(self, now_ns(self) + self->sample_window);
        pl_traces *t = &b->data.traces;
        for (uint32_t r = 0; r < t->n_resources; r++) {
            pl_resource_spans *rs = &t->resources[r];
            for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
                pl_scope_spans *ss = &rs->scopes[sc];
                for (uint32_t k = 0; k < ss->n_spans; k++) {
                    pl_span *sp = &ss->spans[k];
                    if (k + PREFETCH_AHEAD < ss->n_spans)
                        span_table_prefetch(&self->spans, &ss->spans[k + PREFETCH_AHEAD]);
                    if (!span_id_valid(sp->span_id, sp->span_id_len))
                        continue;
                    uint64_t key = id_key(sp->span_id);
                    uint32_t slot = UINT32_MAX;
                    SPAN_EACH(&self->spans, key, i)
                    {
                        if (self->spans.slots[i].span == sp) {
                            slot = i;
                            break;
                        }
                    }
                    if (slot == UINT32_MAX)
                        continue; /* not indexed (out of memory at insert) */
                    span_entry *e = &self->spans.slots[slot];
                    if (e->stats) {
                        span_stats *st = &self->stats_arr[e->stats];
                        linked += st->linked > 0;
                        enrich_span(self, b, sp, st);
                        stats_release(self, e->stats);
                        e->stats = 0;
                    }
                    self->indexed_spans--;
                    if (reason != RELEASE_FLUSH && self->markers < (size_t)self->cfg.max_spans) {
                        /* Remember it for a sample window, to count late samples. */
                        e->span = NULL;
                        e->held = 0;
                        e->state = ENTRY_GONE;
                        e->expiry_ms = expiry;
                        self->markers++;
                    } else {
                        span_table_delete(&self->spans, slot);
                    }
                }
            }
        }
    } else {
        self->unindexed_batches--;
    }
    *self->c_linked_spans += linked;
    *self->c_unlinked_spans += h->items - linked;
    if (reason == RELEASE_EARLY)
        *self->c_early_spans += h->items;
    else if (reason == RELEASE_COVERED)
        *self->c_covered_spans += h->items;
    self->held_spans -= h->items;
    self->held_bytes -= h->bytes;
    held_unlink_and_free(self, hi);
    update_gauges(self);
    pl_consumer_consume(next, b);
}

static void release_sample_batch(correlation *self, uint32_t hi, int reason)
{
    held_batch *h = &self->held[hi];
    pl_batch *b = h->batch;
    pl_consumer *next = h->next;
    uint32_t expiry = to_ms(self, now_ns(self) + self->span_window);
    for (uint32_t r = 0; r < h->n_refs; r++) {
        pending_ref *ref = &h->refs[r];
        uint32_t i = pending_table_next(&self->pending, ref->key, UINT32_MAX);
        while (i != UINT32_MAX) {
            pending_entry *pe = &self->pending.slots[i];
            if (pe->state == 0 && pe->sample == ref->sample)
                break;
            i = pending_table_next(&self->pending, ref->key, (i + 1) & self->pending.mask);
        }
        if (i == UINT32_MAX)
            continue; /* linked meanwhile */
        pending_entry *pe = &self->pending.slots[i];
        (*self->c_unlinked_samples)++;
        if (reason == RELEASE_EARLY)
            (*self->c_early_samples)++;
        self->pending_samples--;
        if (reason != RELEASE_FLUSH &&
            self->pending_markers < (size_t)self->cfg.max_pending_samples) {
            pe->sample = NULL;
            pe->pinfo = NULL;
            pe->held = 0;
            pe->state = 1;
            pe->expiry_ms = expiry & 0x7fffffff;
            self->pending_markers++;
        } else {
            pending_table_delete(&self->pending, i);
        }
    }
    self->held_bytes -= h->bytes;
    held_unlink_and_free(self, hi);
    update_gauges(self);
    pl_consumer_consume(next, b);
}

static void release(correlation *self, uint32_t hi, int reason)
{
    if (self->held[hi].side == SIDE_SPANS)
        release_span_batch(self, hi, reason);
    else
        release_sample_batch(self, hi, reason);
}

static void release_all(correlation *self, int reason)
{
    for (int side = 0; side < 2; side++)
        while (self->head[side])
            release(self, self->head[side], reason);
}

static size_t index_bytes(const correlation *self)
{
    return ((size_t)self->spans.mask + 1) * sizeof(span_entry) +
           ((size_t)self->pending.mask + 1) * sizeof(pending_entry) +
           (size_t)self->cap_stats * sizeof(span_stats) +
           (size_t)self->cap_held * sizeof(held_batch) +
           (size_t)self->cap_fn_names * sizeof(fn_name) +
           ((size_t)self->fn_index_mask + 1) * sizeof(uint32_t) + self->fn_bytes;
}

/* Pushes the oldest batches out while a bound is exceeded. */
static void enforce_bounds(correlation *self)
{
    if (pl_memory_state_get() == PL_MEMORY_HARD) {
        release_all(self, RELEASE_EARLY);
        return;
    }
    while (self->head[SIDE_SPANS] && self->held_spans > (size_t)self->cfg.max_spans)
        release(self, self->head[SIDE_SPANS], RELEASE_EARLY);
    while (self->head[SIDE_SAMPLES] &&
           self->pending_samples > (size_t)self->cfg.max_pending_samples)
        release(self, self->head[SIDE_SAMPLES], RELEASE_EARLY);
    while ((self->head[0] || self->head[1]) &&
           self->held_bytes + index_bytes(self) > self->cfg.max_bytes) {
        uint32_t a = self->head[SIDE_SPANS], b = self->head[SIDE_SAMPLES];
        uint32_t oldest = !a ? b : !b ? a : self->held[a].seq < self->held[b].seq ? a : b;
        release(self, oldest, RELEASE_EARLY);
    }
}

static bool batch_covered(correlation *self, const held_batch *h)
{
    for (uint32_t i = 0; i < h->n_covers; i++) {
        const cover *c = &h->covers[i];
        if (!c->service || c->service >= self->n_services)
            return false;
        if (self->services[c->service].covered_until < sat_add(c->max_end, self->skew))
            return false;
    }
    return h->n_covers > 0;
}

static void release_covered(correlation *self)
{
    if (!self->cfg.early_release)
        return;
    uint32_t i = self->head[SIDE_SPANS];
    while (i) {
        uint32_t next = self->held[i].next_held;
        if (batch_covered(self, &self->held[i]))
            release(self, i, RELEASE_COVERED);
        i = next;
    }
}

static void flush_release_queue(correlation *self)
{
    for (uint32_t k = 0; k < self->n_release; k++) {
        uint32_t hi = self->release_queue[k];
        if (self->held[hi].batch && self->held[hi].side == SIDE_SAMPLES &&
            self->held[hi].items == 0)
            release(self, hi, RELEASE_WINDOW);
    }
    self->n_release = 0;
}

static void queue_release(correlation *self, uint32_t hi)
{
    if (self->n_release == self->cap_release) {
        uint32_t cap = self->cap_release ? self->cap_release * 2 : 16;
        uint32_t *q = realloc(self->release_queue, cap * sizeof(uint32_t));
        if (!q)
            return; /* it will leave when its window closes */
        self->release_queue = q;
        self->cap_release = cap;
    }
    self->release_queue[self->n_release++] = hi;
}

/* ---- expiry of markers ------------------------------------------------------------------ */

/* How many slots of a table of `cap` to visit now: the whole table once per
 * (shortest) window, spread over the ticks by elapsed time, so a marker
 * outlives its expiry by at most about one window. */
static uint32_t sweep_budget(correlation *self, uint32_t cap, uint64_t now)
{
    uint64_t w = self->span_window < self->sample_window ? self->span_window : self->sample_window;
    uint64_t elapsed = now > self->last_sweep_ns ? now - self->last_sweep_ns : 0;
    if (!w || elapsed >= w)
        return cap;
    uint64_t b = (uint64_t)cap * elapsed / w + 64;
    return b > cap ? cap : (uint32_t)b;
}

static void sweep_markers(correlation *self, uint64_t now)
{
    uint32_t now_ms = to_ms(self, now);
    span_table *t = &self->spans;
    uint32_t cap = t->mask + 1;
    uint32_t budget = self->markers ? sweep_budget(self, cap, now) : 0;
    uint32_t i = self->sweep_pos & t->mask;
    /* Only slots moved past count against the budget: a deletion may pull
     * the next entry into slot i, which is then looked at again. */
    for (uint32_t n = 0; n < budget;) {
        span_entry *e = &t->slots[i];
        if (e->key && e->state != ENTRY_HELD && e->expiry_ms <= now_ms) {
            stats_release(self, e->stats);
            span_table_delete(t, i);
            self->markers--;
            continue;
        }
        i = (i + 1) & t->mask;
        n++;
    }
    self->sweep_pos = i;

    pending_table *p = &self->pending;
    cap = p->mask + 1;
    budget = self->pending_markers ? sweep_budget(self, cap, now) : 0;
    i = self->pending_sweep_pos & p->mask;
    for (uint32_t n = 0; n < budget;) {
        pending_entry *e = &p->slots[i];
        if (e->key && e->state == 1 && e->expiry_ms <= now_ms) {
            pending_table_delete(p, i);
            self->pending_markers--;
            continue;
        }
        i = (i + 1) & p->mask;
        n++;
    }
    self->pending_sweep_pos = i;
    self->last_sweep_ns = now;
}

/* After a burst the tables would keep their size: halve them (down to 1024
 * slots) while they are less than an eighth full, so that memory follows
 * what is held. Only between linking sessions: entries move. */
static void shrink_tables(correlation *self)
{
    uint64_t cap = (uint64_t)self->spans.mask + 1;
    if (cap > 1024 && (uint64_t)self->spans.count * 8 < cap) {
        uint64_t want = cap;
        while (want > 1024 && (uint64_t)self->spans.count * 8 < want)
            want /= 2;
        span_table_resize(&self->spans, want); /* on failure the old table stays */
        self->sweep_pos = 0;
    }
    cap = (uint64_t)self->pending.mask + 1;
    if (cap > 1024 && (uint64_t)self->pending.count * 8 < cap) {
        uint64_t want = cap;
        while (want > 1024 && (uint64_t)self->pending.count * 8 < want)
            want /= 2;
        pending_table_resize(&self->pending, want);
        self->pending_sweep_pos = 0;
    }
}

void pl_correlation_tick(void *p)
{
    correlation *self = p;
    uint64_t now = now_ns(self);
    for (int side = 0; side < 2; side++)
        while (self->head[side] && self->held[self->head[side]].deadline <= now)
            release(self, self->head[side], RELEASE_WINDOW);
    sweep_markers(self, now);
    shrink_tables(self);
    enforce_bounds(self);
    update_gauges(self);
}

static void on_timer(uv_timer_t *t)
{
    pl_correlation_tick(t->data);
}

/* ---- consuming traces ------------------------------------------------------------------- */

static bool add_cover(held_batch *h, uint16_t service, uint64_t end)
{
    for (uint32_t i = 0; i < h->n_covers; i++) {
        if (h->covers[i].service == service) {
            if (end > h->covers[i].max_end)
                h->covers[i].max_end = end;
            return true;
        }
    }
    cover *c = realloc(h->covers, (h->n_covers + 1) * sizeof(cover));
    if (!c)
        return false;
    h->covers = c;
    h->covers[h->n_covers++] = (cover){service, end};
    return true;
}

static span_entry *entry_of_span(correlation *self, const pl_span *sp)
{
    SPAN_EACH(&self->spans, id_key(sp->span_id), i)
    {
        if (self->spans.slots[i].span == sp)
            return &self->spans.slots[i];
    }
    return NULL;
}

static void remember_adopted(correlation *self, pl_span *sp)
{
    if (self->n_adopted == self->cap_adopted) {
        uint32_t cap = self->cap_adopted ? self->cap_adopted * 2 : 16;
        pl_span **a = realloc(self->adopted, cap * sizeof(pl_span *));
        if (!a)
            return; /* its descendants' totals stay with it, not its ancestors */
        self->adopted = a;
        self->cap_adopted = cap;
    }
    self->adopted[self->n_adopted++] = sp;
}

/* Links the samples waiting for span `sp` (just indexed). */
static void link_waiting_samples(correlation *self, pl_span *sp)
{
    pending_table *t = &self->pending;
    uint64_t key = id_key(sp->span_id);
    const uint8_t *strace = span_trace(sp);
    uint32_t i = pending_table_next(t, key, UINT32_MAX);
    bool counted_late = false;
    while (i != UINT32_MAX) {
        pending_entry *pe = &t->slots[i];
        if (pe->state == 1) {
            /* Samples of this span id left unlinked before it came. */
            if (!counted_late) {
                (*self->c_late_spans)++;
                counted_late = true;
            }
            pending_table_delete(t, i);
            self->pending_markers--;
            i = pending_table_next(t, key, i);
            continue;
        }
        uint8_t trace[16];
        bool has_trace;
        uint64_t k2, lo = 0, hi = 0;
        pl_dictionary *dict = &pe->pinfo->batch->data.profiles.dict;
        sample_ids(dict, pe->sample, &k2, trace, &has_trace);
        bool has_time = sample_time(pe->pinfo, pe->sample, &lo, &hi);
        bool ok = (!has_trace || !strace || memcmp(trace, strace, 16) == 0) &&
                  (!has_time || span_time_matches(self, sp, lo, hi));
        span_entry *e = ok ? entry_of_span(self, sp) : NULL;
        if (!e) {
            i = pending_table_next(t, key, (i + 1) & t->mask);
            continue;
        }
        uint32_t hidx = pe->held;
        link_sample(self, e, pe->sample, pe->pinfo);
        pending_table_delete(t, i);
        self->pending_samples--;
        if (--self->held[hidx].items == 0)
            queue_release(self, hidx);
        i = pending_table_next(t, key, i);
    }
}

/* Indexes the spans of held batch `hi` (span id -> entry), hands the totals
 * of adopted placeholders up, and links the samples waiting for them. */
static void index_span_batch(correlation *self, uint32_t hi)
{
    held_batch *h = &self->held[hi];
    pl_traces *t = &h->batch->data.traces;
    self->n_adopted = 0;
    bool cover_ok = true;
    h->indexed = true;
    self->unindexed_batches--;
    for (uint32_t r = 0; r < t->n_resources; r++) {
        pl_resource_spans *rs = &t->resources[r];
        uint16_t svc = service_id(self, resource_service(&rs->resource));
        for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
            pl_scope_spans *ss = &rs->scopes[sc];
            for (uint32_t k = 0; k < ss->n_spans; k++) {
                pl_span *sp = &ss->spans[k];
                if (k + PREFETCH_AHEAD < ss->n_spans)
                    span_table_prefetch(&self->spans, &ss->spans[k + PREFETCH_AHEAD]);
                if (!span_id_valid(sp->span_id, sp->span_id_len))
                    continue;
                uint64_t key = id_key(sp->span_id);
                span_entry *ph =
                    self->markers ? find_span(self, key, span_trace(sp), false, true) : NULL;
                if (ph) {
                    /* A placeholder with descendants' totals: the span takes them. */
                    ph->state = ENTRY_HELD;
                    ph->span = sp;
                    ph->held = hi;
                    ph->service = svc;
                    ph->expiry_ms = 0;
                    self->markers--;
                    remember_adopted(self, sp);
                } else {
                    span_entry e = {0};
                    e.key = key;
                    e.span = sp;
                    e.held = hi;
                    e.service = svc;
                    e.state = ENTRY_HELD;
                    if (span_table_insert(&self->spans, &e))
                        continue; /* out of memory: this span stays unlinked */
                }
                self->indexed_spans++;
                uint64_t end =
                    sp->end_time_unix_nano ? sp->end_time_unix_nano : sp->start_time_unix_nano;
                if (cover_ok && !add_cover(h, svc, end))
                    cover_ok = false;
            }
        }
    }
    if (!cover_ok)
        h->n_covers = 0; /* cannot prove coverage: wait for the window */

    /* Second pass, now that every span of the batch is indexed (parents
     * included): hand adopted totals up, then link waiting samples. Entries
     * are found again by span each time: a placeholder insert may move them. */
    for (uint32_t a = 0; a < self->n_adopted; a++) {
        pl_span *sp = self->adopted[a];
        span_entry *e = entry_of_span(self, sp);
        if (!e || !e->stats)
            continue;
        span_stats *st = &self->stats_arr[e->stats];
        contrib c = {st->samples_total, st->cpu_total, st->wall_total, 0};
        if (c.samples || c.cpu || c.wall)
            roll_up(self, e, c);
    }
    self->n_adopted = 0;
    if (self->pending.count) {
        cache_clear(self);
        for (uint32_t r = 0; r < t->n_resources; r++) {
            pl_resource_spans *rs = &t->resources[r];
            for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
                pl_scope_spans *ss = &rs->scopes[sc];
                for (uint32_t k = 0; k < ss->n_spans; k++) {
                    pl_span *sp = &ss->spans[k];
                    if (span_id_valid(sp->span_id, sp->span_id_len))
                        link_waiting_samples(self, sp);
                }
            }
        }
        link_session_end(self);
    }
}

static uint32_t count_spans(const pl_batch *batch)
{
    const pl_traces *t = &batch->data.traces;
    uint32_t n = 0;
    for (uint32_t r = 0; r < t->n_resources; r++)
        for (uint32_t sc = 0; sc < t->resources[r].n_scopes; sc++) {
            const pl_scope_spans *ss = &t->resources[r].scopes[sc];
            for (uint32_t k = 0; k < ss->n_spans; k++)
                n += span_id_valid(ss->spans[k].span_id, ss->spans[k].span_id_len);
        }
    return n;
}

/* Have profiles come lately? Until they do, span batches are held without
 * being indexed: a pipeline with no profiler pays almost nothing per span.
 * The horizon covers both windows plus the slowest SDK upload period. */
static bool profiles_present(correlation *self, uint64_t now)
{
    return self->last_profiles_ns &&
           now <= sat_add(self->last_profiles_ns,
                          self->span_window + self->sample_window + PROFILES_HORIZON_NS);
}

static pl_status consume_traces(correlation *self, pl_batch *batch, pl_consumer *next)
{
    uint32_t n_spans = count_spans(batch);
    if (n_spans == 0)
        return pl_consumer_consume(next, batch);
    uint32_t hi = held_alloc(self);
    if (!hi)
        return pl_consumer_consume(next, batch);
    held_batch *h = &self->held[hi];
    h->batch = batch;
    h->next = next;
    h->side = SIDE_SPANS;
    h->seq = ++self->seq;
    uint64_t now = now_ns(self);
    h->deadline = sat_add(now, self->span_window);
    h->items = n_spans;
    self->held_spans += n_spans;
    h->bytes = pl_batch_memory(batch);
    self->held_bytes += h->bytes;
    self->unindexed_batches++;
    held_link(self, hi);
    if (profiles_present(self, now)) {
        index_span_batch(self, hi);
        flush_release_queue(self);
        if (self->cfg.early_release && self->held[hi].batch == batch &&
            batch_covered(self, &self->held[hi]))
            release(self, hi, RELEASE_COVERED);
    }
    enforce_bounds(self);
    update_gauges(self);
    return PL_OK;
}

/* ---- consuming profiles ----------------------------------------------------------------- */

static bool vt_is(const pl_dictionary *d, pl_vtype vt, const char *type, const char *unit)
{
    return pl_bytes_eq_cstr(pl_dict_string(d, vt.type_strindex), type) &&
           pl_bytes_eq_cstr(pl_dict_string(d, vt.unit_strindex), unit);
}

/* Decides what each profile of a scope contributes (see the header comment). */
static void classify_scope(pl_batch *batch, pl_scope_profiles *sp, profile_info *infos)
{
    const pl_dictionary *d = &batch->data.profiles.dict;
    int cpu = -1, wall = -1, count = -1;
    for (uint32_t i = 0; i < sp->n_profiles; i++) {
        pl_profile *p = &sp->profiles[i];
        if (!p->has_sample_type)
            continue;
        if (cpu < 0 && vt_is(d, p->sample_type, "cpu", "nanoseconds"))
            cpu = (int)i;
        else if (wall < 0 && vt_is(d, p->sample_type, "wall", "nanoseconds"))
            wall = (int)i;
        else if (count < 0 && vt_is(d, p->sample_type, "samples", "count"))
            count = (int)i;
    }
    int cpu_src = cpu, wall_src = wall;
    if (count >= 0) {
        profile_info *ci = &infos[count];
        pl_profile *p = &sp->profiles[count];
        ci->counts_samples = true;
        if (p->has_period_type && p->period > 0) {
            if (cpu < 0 && vt_is(d, p->period_type, "cpu", "nanoseconds")) {
                ci->cpu_mult = p->period;
                cpu_src = count;
            } else if (wall < 0 && vt_is(d, p->period_type, "wall", "nanoseconds")) {
                ci->wall_mult = p->period;
                wall_src = count;
            }
        }
    }
    if (cpu >= 0)
        infos[cpu].cpu_mult = 1;
    if (wall >= 0)
        infos[wall].wall_mult = 1;
    if (count < 0) {
        int primary = cpu >= 0 ? cpu : wall;
        if (primary >= 0)
            infos[primary].counts_entries = true;
    }
    if (cpu_src >= 0)
        infos[cpu_src].top_kind = 1;
    else if (wall_src >= 0)
        infos[wall_src].top_kind = 2;
    else if (count >= 0)
        infos[count].top_kind = 3;
}

typedef struct waiting {
    uint64_t key;
    pl_sample *sample;
    profile_info *pinfo;
} waiting;

static pl_status consume_profiles(correlation *self, pl_batch *batch, pl_consumer *next)
{
    pl_profiles *ps = &batch->data.profiles;
    pl_dictionary *dict = &ps->dict;
    waiting *wait = NULL;
    size_t n_wait = 0, cap_wait = 0;
    bool coverage_moved = false;
    self->last_profiles_ns = now_ns(self);
    if (self->unindexed_batches) {
        /* Profiles are back: index the spans held meanwhile, oldest first. */
        for (uint32_t i = self->head[SIDE_SPANS]; i; i = self->held[i].next_held)
            if (!self->held[i].indexed)
                index_span_batch(self, i);
        flush_release_queue(self);
    }
    cache_clear(self);

    for (uint32_t r = 0; r < ps->n_resources; r++) {
        pl_resource_profiles *rp = &ps->resources[r];
        uint16_t svc = service_id(self, resource_service(&rp->resource));
        for (uint32_t sc = 0; sc < rp->n_scopes; sc++) {
            pl_scope_profiles *sp = &rp->scopes[sc];
            if (!sp->n_profiles)
                continue;
            profile_info *infos = pl_batch_alloc(batch, sp->n_profiles * sizeof(profile_info));
            if (!infos)
                continue;
            classify_scope(batch, sp, infos);
            for (uint32_t pi = 0; pi < sp->n_profiles; pi++) {
                pl_profile *p = &sp->profiles[pi];
                profile_info *info = &infos[pi];
                info->batch = batch;
                info->profile = p;
                info->service = svc;
                /* pprof says time_nanos is the collection start, but the
                 * Node.js SDK (@datadog/pprof) stamps the end: a sample
                 * with only this window may lie up to one duration either
                 * side of time_unix_nano. For early release the profile
                 * proves coverage only up to time_unix_nano (or its latest
                 * sample timestamp): spans then wait at most one profile
                 * longer, never lose samples. */
                info->t_start = p->time_unix_nano > p->duration_nano
                                    ? p->time_unix_nano - p->duration_nano
                                    : (p->time_unix_nano ? 1 : 0);
                info->t_end = sat_add(p->time_unix_nano, p->duration_nano);
                uint64_t covered = p->time_unix_nano;
                for (uint32_t si = 0; si < p->n_samples; si++) {
                    pl_sample *s = &p->samples[si];
                    if (si + PREFETCH_AHEAD < p->n_samples && self->spans.count) {
                        /* The span of a sample a few ahead (links only: cheap to read). */
                        int32_t li = p->samples[si + PREFETCH_AHEAD].link_index;
                        if (li > 0 && (uint32_t)li < dict->n_links &&
                            dict->links[li].span_id_len == 8)
                            __builtin_prefetch(
                                &self->spans
                                     .slots[(uint32_t)mix64(id_key(dict->links[li].span_id)) &
                                            self->spans.mask]);
                    }
                    for (uint32_t ti = 0; ti < s->n_timestamps; ti++)
                        if (s->timestamps_unix_nano[ti] > covered)
                            covered = s->timestamps_unix_nano[ti];
                    uint64_t key, lo = 0, hi = 0;
                    uint8_t trace[16];
                    bool has_trace;
                    if (!sample_ids(dict, s, &key, trace, &has_trace))
                        continue;
                    bool has_time = sample_time(info, s, &lo, &hi);
                    span_entry *e =
                        self->spans.count
                            ? match_sample(self, key, has_trace ? trace : NULL, has_time, lo, hi)
                            : NULL;
                    if (e) {
                        link_sample(self, e, s, info);
                        continue;
                    }
                    bool gone = false;
                    if (self->markers) {
                        SPAN_EACH(&self->spans, key, i)
                        {
                            if (self->spans.slots[i].state == ENTRY_GONE) {
                                gone = true;
                                break;
                            }
                        }
                    }
                    if (gone) {
                        /* Its span already left: flows on unenriched. */
                        (*self->c_late_samples)++;
                        (*self->c_unlinked_samples)++;
                        continue;
                    }
                    if (n_wait == cap_wait) {
                        size_t cap = cap_wait ? cap_wait * 2 : 64;
                        waiting *w2 = realloc(wait, cap * sizeof(waiting));
                        if (!w2) {
                            (*self->c_unlinked_samples)++;
                            continue;
                        }
                        wait = w2;
                        cap_wait = cap;
                    }
                    wait[n_wait++] = (waiting){key, s, info};
                }
                if (svc && covered > self->services[svc].covered_until) {
                    self->services[svc].covered_until = covered;
                    coverage_moved = true;
                }
            }
        }
    }
    link_session_end(self);

    uint32_t hi = n_wait ? held_alloc(self) : 0;
    if (hi) {
        held_batch *h = &self->held[hi];
        h->batch = batch;
        h->next = next;
        h->side = SIDE_SAMPLES;
        h->seq = ++self->seq;
        h->deadline = sat_add(now_ns(self), self->sample_window);
        h->refs = malloc(n_wait * sizeof(pending_ref));
        for (size_t i = 0; h->refs && i < n_wait; i++) {
            pending_entry pe = {0};
            pe.key = wait[i].key;
            pe.sample = wait[i].sample;
            pe.pinfo = wait[i].pinfo;
            pe.held = hi;
            if (pending_table_insert(&self->pending, &pe)) {
                (*self->c_unlinked_samples)++;
                continue;
            }
            h->refs[h->n_refs++] = (pending_ref){wait[i].key, wait[i].sample};
        }
        if (!h->refs)
            *self->c_unlinked_samples += n_wait;
        h->items = h->n_refs;
        self->pending_samples += h->n_refs;
        h->bytes = pl_batch_memory(batch);
        self->held_bytes += h->bytes;
        held_link(self, hi);
        if (h->items == 0) {
            /* Nothing could be held after all (out of memory): flow on. */
            release(self, hi, RELEASE_WINDOW);
            free(wait);
            if (coverage_moved)
                release_covered(self);
            update_gauges(self);
            return PL_OK;
        }
    } else if (n_wait) {
        *self->c_unlinked_samples += n_wait; /* no room to hold it */
    }
    free(wait);
    if (!hi) {
        if (coverage_moved)
            release_covered(self);
        update_gauges(self);
        return pl_consumer_consume(next, batch);
    }
    if (coverage_moved)
        release_covered(self);
    enforce_bounds(self);
    update_gauges(self);
    return PL_OK;
}

/* ---- the component ---------------------------------------------------------------------- */

static pl_status correlation_consume(void *p, pl_batch *batch, pl_consumer *next)
{
    correlation *self = p;
    pl_signal sig = batch->signal;
    pl_stats_add(self->stats, sig, PL_STAT_ACCEPTED, pl_batch_items(batch));
    unsigned both = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    /* With only one of the two signals there is nothing to join. */
    if (self->shut_down || (self->signals & both) != both ||
        (sig != PL_SIGNAL_TRACES && sig != PL_SIGNAL_PROFILES))
        return pl_consumer_consume(next, batch);
    if (pl_memory_state_get() == PL_MEMORY_HARD)
        release_all(self, RELEASE_EARLY);
    if (sig == PL_SIGNAL_TRACES)
        return consume_traces(self, batch, next);
    return consume_profiles(self, batch, next);
}

static pl_bytes name_or(const char *configured, const char *dflt)
{
    return pl_bytes_from_cstr(configured && *configured ? configured : dflt);
}

static void correlation_free(correlation *self)
{
    for (uint32_t i = 1; i < self->n_stats; i++) {
        if (self->stats_arr[i].cap_fns > 2)
            free(self->stats_arr[i].fns);
    }
    for (uint32_t i = 1; i < self->n_fn_names; i++)
        free(self->fn_names[i].name);
    free(self->fn_names);
    free(self->fn_index);
    for (uint32_t i = 1; i < self->n_held; i++) {
        free(self->held[i].covers);
        free(self->held[i].refs);
    }
    for (uint32_t i = 1; i < self->n_services; i++)
        free(self->services[i].name);
    writer_reset(&self->writer);
    free(self->services);
    free(self->stats_arr);
    free(self->held);
    free(self->spans.slots);
    free(self->pending.slots);
    free(self->cache);
    free(self->release_queue);
    free(self->adopted);
    for (size_t i = 0; i < self->n_span_attr_keys; i++)
        free((void *)self->span_attr_keys[i].ptr);
    free(self->span_attr_keys);
    for (size_t i = 0; i < sizeof(self->names) / sizeof(self->names[0]); i++)
        free((void *)self->names[i].ptr);
    free(self->id);
    if (self->own_stats)
        pl_stats_free(self->own_stats);
    free(self);
}

static pl_status correlation_create(const pl_create_settings *settings, const void *config,
                                    void **out_self, pl_err *err)
{
    const pl_correlation_config *cfg = config;
    correlation *self = calloc(1, sizeof(*self));
    if (!self)
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    self->cfg = *cfg;
    /* Strings and lists stay with the caller's config: copy what we keep. */
    self->cfg.span_attributes = (pl_strlist){NULL, 0};
    const char *const defaults[] = {"trace_id",
                                    "span_id",
                                    "span_name",
                                    "root_span_name",
                                    "service.name",
                                    "pyroscope.profile.id",
                                    "profile.samples",
                                    "profile.cpu_time_ns",
                                    "profile.cpu_time_total_ns",
                                    "profile.wall_time_ns",
                                    "profile.top_functions"};
    const char *const configured[] = {
        cfg->trace_id_attribute,        cfg->span_id_attribute,      cfg->span_name_attribute,
        cfg->root_span_name_attribute,  cfg->service_name_attribute, cfg->profile_id_attribute,
        cfg->profile_samples_attribute, cfg->cpu_time_attribute,     cfg->cpu_time_total_attribute,
        cfg->wall_time_attribute,       cfg->top_functions_attribute};
    for (int i = 0; i < 11; i++) {
        pl_bytes b = name_or(configured[i], defaults[i]);
        char *copy = strndup((const char *)b.ptr, b.len);
        if (!copy) {
            correlation_free(self);
            return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
        }
        self->names[i] = (pl_bytes){(const uint8_t *)copy, b.len};
    }
    self->cfg.trace_id_attribute = self->cfg.span_id_attribute = NULL;
    self->cfg.span_name_attribute = self->cfg.root_span_name_attribute = NULL;
    self->cfg.service_name_attribute = self->cfg.profile_id_attribute = NULL;
    self->cfg.profile_samples_attribute = self->cfg.cpu_time_attribute = NULL;
    self->cfg.cpu_time_total_attribute = self->cfg.wall_time_attribute = NULL;
    self->cfg.top_functions_attribute = NULL;
    if (cfg->span_attributes.n) {
        self->span_attr_keys = calloc(cfg->span_attributes.n, sizeof(pl_bytes));
        if (!self->span_attr_keys) {
            correlation_free(self);
            return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
        }
        for (size_t i = 0; i < cfg->span_attributes.n; i++) {
            char *copy = strdup(cfg->span_attributes.items[i]);
            if (!copy) {
                correlation_free(self);
                return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
            }
            self->span_attr_keys[self->n_span_attr_keys++] =
                (pl_bytes){(const uint8_t *)copy, (uint32_t)strlen(copy)};
        }
    }
    if (self->cfg.window <= 0)
        self->cfg.window = 30 * 1000000000LL;
    if (self->cfg.max_spans <= 0)
        self->cfg.max_spans = 1000000;
    if (self->cfg.max_pending_samples <= 0)
        self->cfg.max_pending_samples = 1000000;
    if (!self->cfg.max_bytes)
        self->cfg.max_bytes = 256ull << 20;
    if (self->cfg.top_functions < 0)
        self->cfg.top_functions = 0;
    if (self->cfg.top_functions > MAX_TOP_CANDIDATES)
        self->cfg.top_functions = MAX_TOP_CANDIDATES;
    self->span_window =
        (uint64_t)(self->cfg.span_window > 0 ? self->cfg.span_window : self->cfg.window);
    self->sample_window =
        (uint64_t)(self->cfg.sample_window > 0 ? self->cfg.sample_window : self->cfg.window);
    self->skew = (uint64_t)(self->cfg.max_clock_skew > 0 ? self->cfg.max_clock_skew : 0);

    self->id = strdup(settings && settings->id ? settings->id : "correlation");
    self->loop = settings ? settings->loop : NULL;
    self->clock = settings ? settings->clock : (pl_clock){NULL, NULL};
    self->signals = settings && settings->signals ? settings->signals : PL_SIGNALS_ALL;
    self->stats = settings ? settings->stats : NULL;
    if (!self->stats) {
        self->own_stats = pl_stats_new(self->id ? self->id : "correlation", PL_KIND_PROCESSOR);
        self->stats = self->own_stats;
    }
    self->base_ns = pl_clock_now(&self->clock);
    self->last_sweep_ns = self->base_ns;
    if (!self->id || !self->stats || span_table_init(&self->spans, 1024) ||
        pending_table_init(&self->pending, 1024)) {
        correlation_free(self);
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    }
    pl_stats *st = self->stats;
    self->c_linked_samples =
        pl_stats_counter(st, "linked_samples", "profile samples linked to a span");
    self->c_unlinked_samples = pl_stats_counter(
        st, "unlinked_samples", "samples with a span id that left without finding their span");
    self->c_late_samples = pl_stats_counter(
        st, "late_samples", "samples that arrived after their span had been released");
    self->c_early_samples = pl_stats_counter(
        st, "released_early_samples", "waiting samples pushed out by a bound or memory pressure");
    self->c_linked_spans = pl_stats_counter(st, "linked_spans", "spans released with samples");
    self->c_unlinked_spans =
        pl_stats_counter(st, "unlinked_spans", "spans released without samples of their own");
    self->c_late_spans = pl_stats_counter(
        st, "late_spans", "spans that arrived after their samples had been released");
    self->c_early_spans = pl_stats_counter(st, "released_early_spans",
                                           "spans pushed out by a bound or memory pressure");
    self->c_covered_spans =
        pl_stats_counter(st, "spans_released_on_coverage",
                         "spans released once their service's profiles covered them");
    self->g_held_spans = pl_stats_gauge(st, "held_spans", "spans held waiting for samples");
    self->g_pending_samples =
        pl_stats_gauge(st, "pending_samples", "samples waiting for their span");
    self->g_held_bytes = pl_stats_gauge(st, "held_bytes", "memory of held batches");
    if (!self->c_linked_samples || !self->c_unlinked_samples || !self->c_late_samples ||
        !self->c_early_samples || !self->c_linked_spans || !self->c_unlinked_spans ||
        !self->c_late_spans || !self->c_early_spans || !self->c_covered_spans ||
        !self->g_held_spans || !self->g_pending_samples || !self->g_held_bytes) {
        correlation_free(self);
        return pl_errf(err, PL_ERR_NOMEM, "correlation: out of memory");
    }
    *out_self = self;
    return PL_OK;
}

static pl_status correlation_start(void *p, pl_err *err)
{
    correlation *self = p;
    self->started = true;
    if (!self->loop)
        return PL_OK; /* tests drive time with pl_correlation_tick */
    uint64_t w = self->span_window < self->sample_window ? self->span_window : self->sample_window;
    uint64_t interval_ms = w / 10 / 1000000u;
    if (interval_ms < 10)
        interval_ms = 10;
    if (interval_ms > 1000)
        interval_ms = 1000;
    if (uv_timer_init(self->loop, &self->timer))
        return pl_errf(err, PL_ERR_INTERNAL, "correlation: cannot create its sweep timer");
    self->timer.data = self;
    self->timer_open = true;
    uv_timer_start(&self->timer, on_timer, interval_ms, interval_ms);
    return PL_OK;
}

static void correlation_shutdown(void *p)
{
    correlation *self = p;
    if (self->shut_down)
        return;
    self->shut_down = true;
    if (self->timer_open) {
        uv_timer_stop(&self->timer);
        uv_close((uv_handle_t *)&self->timer, NULL);
        self->timer_open = false;
    }
    /* Everything held flows on with what it has (reload and stop alike). */
    release_all(self, RELEASE_FLUSH);
    update_gauges(self);
}

static void correlation_destroy(void *p)
{
    correlation *self = p;
    if (!self)
        return;
    size_t dropped = 0;
    for (int side = 0; side < 2; side++) {
        while (self->head[side]) {
            uint32_t hi = self->head[side];
            dropped += self->held[hi].items;
            pl_batch_free(self->held[hi].batch);
            held_unlink_and_free(self, hi);
        }
    }
    if (dropped)
        pl_warn(COMPONENT, "%s: destroyed without shutdown, %zu held items dropped", self->id,
                dropped);
    correlation_free(self);
}

void pl_correlation_get_usage(void *p, pl_correlation_usage *out)
{
    correlation *self = p;
    out->held_spans = self->held_spans;
    out->indexed_spans = self->indexed_spans;
    out->pending_samples = self->pending_samples;
    out->held_span_batches = self->held_batches[SIDE_SPANS];
    out->held_sample_batches = self->held_batches[SIDE_SAMPLES];
    out->held_bytes = self->held_bytes;
    out->index_bytes = index_bytes(self);
    out->span_table_slots = (size_t)self->spans.mask + 1;
    out->markers = self->markers + self->pending_markers;
}

void pl_correlation_get_counters(void *p, pl_correlation_counters *out)
{
    correlation *self = p;
    out->linked_samples = *self->c_linked_samples;
    out->unlinked_samples = *self->c_unlinked_samples;
    out->late_samples = *self->c_late_samples;
    out->released_early_samples = *self->c_early_samples;
    out->linked_spans = *self->c_linked_spans;
    out->unlinked_spans = *self->c_unlinked_spans;
    out->late_spans = *self->c_late_spans;
    out->released_early_spans = *self->c_early_spans;
    out->spans_released_on_coverage = *self->c_covered_spans;
}

const pl_component_type pl_processor_correlation = {
    .type = "correlation",
    .kind = PL_KIND_PROCESSOR,
    .signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
    .description = "joins profile samples to spans by span id within time windows, and enriches "
                   "both",
    .config = &pl_correlation_config_section,
    .create = correlation_create,
    .start = correlation_start,
    .consume = correlation_consume,
    .shutdown = correlation_shutdown,
    .destroy = correlation_destroy,
};
