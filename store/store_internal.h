/*
 * store_internal.h: what the files of the embedded store share (the
 * connection struct, its prepared statements and id caches, small helpers).
 * Private to store/; the public interface is sqlite_store.h.
 *
 *   store_schema.c     open, schema and upgrades, caches, transactions, errors
 *   store_write.c      spans and samples in
 *   store_retention.c  age and size limits
 *   store_query.c      traces, trace trees, profiles, services out
 *   store_checkpoint.c the writer's WAL checkpoints on a thread of their own
 */
#ifndef PL_STORE_INTERNAL_H
#define PL_STORE_INTERNAL_H

#include "store/sqlite_store.h"
#include "core/hash.h"
#include "core/intern.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PL_STORE_APP_ID         0x706c6b31 /* "plk1" */
#define PL_STORE_SCHEMA_VERSION 13

/* The spans of a trace are found through its span ranges: one row per
 * trace and transaction that wrote spans of it, holding the rowid range
 * those spans took (store_write.c writes a trace's spans one after
 * another), not an index entry per span. As for span ids (below), the
 * ranges of the transactions since the last merge are in
 * `trace_spans_new`, older ones in `trace_spans` (a range is in one of
 * them). PL_TRACE_SPANS(S, C) is the FROM clause that reads the spans of
 * the traces whose id meets C ("= ?1", "IN (...)", or, in a correlated
 * subquery, "= t.trace_id"), the spans as S and the ranges as r_;
 * PL_TRACE_SPANS_OF(T, S) the same through one range table T, for a join
 * (a FROM subquery cannot name a table beside it). Each row is checked
 * against the range's trace id as well, so a range can never show a span
 * of another trace. NOT INDEXED: the spans are read by rowid only,
 * whatever else the query asks of them (SQLite would otherwise build an
 * automatic index on spans.trace_id, for every trace). */
#define PL_TRACE_SPANS_OF(T, S)                                                                    \
    T " r_ CROSS JOIN spans " S " NOT INDEXED ON " S ".rowid BETWEEN r_.first AND r_.last AND " S  \
      ".trace_id = r_.trace_id"
/* the ranges subquery around a condition built at run time (the querier):
 * PL_TRACE_RANGES_A C PL_TRACE_RANGES_B C PL_TRACE_RANGES_END(S) */
#define PL_TRACE_RANGES_A "(SELECT trace_id, first, last FROM trace_spans WHERE trace_id "
#define PL_TRACE_RANGES_B                                                                          \
    " UNION ALL SELECT trace_id, first, last FROM trace_spans_new WHERE trace_id "
#define PL_TRACE_RANGES_END(S) ") " PL_TRACE_SPANS_OF("", S)
#define PL_TRACE_SPANS(S, C)   PL_TRACE_RANGES_A C PL_TRACE_RANGES_B C PL_TRACE_RANGES_END(S)

/* The spans whose start times fall in a 10-second bucket (store_terms.h,
 * pl_terms_bucket), without an index on spans: per transaction and bucket,
 * `span_buckets` holds the lowest and highest rowid the transaction's new
 * spans of that bucket took. PL_BUCKET_SPANS(S) is a FROM clause: the
 * ranges as b_, each joined to the spans S it covers; the query names the
 * buckets (b_.bucket = ...) and checks each span's own start time and
 * service, since a range also covers the transaction's spans of other
 * buckets. Ranges of transactions may overlap after retention deleted the
 * newest rows (SQLite then reuses their rowids), so a span can be read
 * twice: its readers collect distinct traces. */
/* a range ends where the next span of its bucket is more rows on */
#define PL_BUCKET_GAP 64
#define PL_BUCKET_SPANS(S)                                                                         \
    "span_buckets b_ CROSS JOIN spans " S " NOT INDEXED ON " S ".rowid BETWEEN b_.first AND "      \
    "b_.last"

/* A span is found by its id through two tables, not an index on spans:
 * `span_ids_new` holds the ids of the spans written since the last merge,
 * `span_ids` all older ones (span id -> spans rowid, both keyed by the id).
 * An index on random ids is rewritten almost whole by every transaction
 * that inserts into it and again by every retention slice that deletes
 * from it; the small table takes each transaction's ids, and the large one
 * takes them in one sorted pass every PL_SPAN_IDS_MERGE spans
 * (store_write.c). Spans deleted by retention leave their entries behind
 * until a sweep (store_retention.c), so a reader always checks the row it
 * reaches: PL_SPAN_ROW(E) is the rowid to look at for span id E (an SQL
 * expression, used twice), and the query adds `span_id = E`. */
#define PL_SPAN_ROW(E)                                                                             \
    "coalesce((SELECT rid FROM span_ids_new WHERE span_id = " E "), (SELECT rid FROM span_ids "    \
    "WHERE span_id = " E "))"
/* The same as joins, for a query that looks up a span per row of another
 * table (half the time of the subqueries): "<KIND> JOIN spans S" on the
 * span with id E, S_n and S_o the two id tables. */
#define PL_SPAN_JOIN(KIND, S, E)                                                                   \
    "LEFT JOIN span_ids_new " S "_n ON " S "_n.span_id = " E " LEFT JOIN span_ids " S "_o ON " S   \
    "_o.span_id = " E " " KIND " JOIN spans " S " ON " S ".rowid = coalesce(" S "_n.rid, " S       \
    "_o.rid) AND " S ".span_id = " E
/* rows per multi-row INSERT (the ST_*_MANY statements): one statement
 * step for many rows (store_write.c, multi_row) */
#define PL_STORE_MULTI_ROWS 32
#define PL_SPAN_IDS_MERGE   262144 /* pl_store_options.span_ids_merge */

/* A span's samples are found the same way: `sample_spans_new` and
 * `sample_spans` hold, per span id, the (service, bucket, type) of its
 * sample rows, the first four columns of the samples primary key, where
 * an index on samples.span_id (random ids again) would take one entry per
 * row. The writer adds the keys of each transaction to the small table and
 * merges it into the large one with the span ids; keys of rows retention
 * deleted stay until a sweep, and the join to `samples` finds nothing for
 * them. PL_SPAN_SAMPLES(IN) is a FROM clause: the sample rows `s` of the
 * spans whose ids are in IN (a parenthesized list or subquery, used twice;
 * it may name columns of an outer query); the key columns are k_span,
 * k_svc, k_bucket, k_type, so samples' own column names stay unambiguous. */
#define PL_SPAN_SAMPLES(IN)                                                                        \
    "(SELECT span_id AS k_span, service_id AS k_svc, bucket AS k_bucket, type_id AS k_type "       \
    "FROM sample_spans_new WHERE span_id IN " IN " UNION SELECT span_id, service_id, bucket, "     \
    "type_id FROM sample_spans WHERE span_id IN " IN ") CROSS JOIN samples s ON s.service_id = "   \
    "k_svc AND s.bucket = k_bucket AND s.type_id = k_type AND s.span_id = k_span"

/* ---- small hash maps (store_schema.c) ---------------------------------- */

/* FNV-1a with a final avalanche. Unkeyed and stable across processes: the
 * stack hash is persisted in `stacks.hash`. */
uint64_t pl_store_hash_bytes(const void *data, size_t len, uint64_t seed);

/* uint64 key -> int64 value: a pl_htab (keyed hashing with pl_hash_u64:
 * the keys are span ids and other client-chosen values) over dense
 * entries, in insertion order. */
typedef struct u64_map {
    pl_htab index; /* values: entry number + 1 */
    struct u64_entry {
        uint64_t key;
        int64_t val;
    } * entries;
    size_t cap, n;
} u64_map;

void pl_store_u64_map_clear(u64_map *m);
bool pl_store_u64_map_get(const u64_map *m, uint64_t key, int64_t *val);
bool pl_store_u64_map_put(u64_map *m, uint64_t key, int64_t val);

/* string -> id; keys copied (core/intern.h: the interner's ids are
 * positions in `ids` + 1, since a store id is an int64 rowid). */
typedef struct str_map {
    pl_intern index;
    int64_t *ids;
    size_t cap, n;
} str_map;

void pl_store_str_map_clear(str_map *m);
bool pl_store_str_map_get(const str_map *m, const char *s, size_t len, uint64_t h, int64_t *id);
bool pl_store_str_map_put(str_map *m, const char *s, size_t len, uint64_t h, int64_t id);

/* The writer's page cache (KiB), how many bytes of WAL pages trigger a
 * checkpoint, and the page size of a new store (store_schema.c). */
#define PL_STORE_WRITER_CACHE_KIB     131072
#define PL_STORE_WAL_CHECKPOINT_BYTES (128ll << 20)
#define PL_STORE_PAGE_SIZE            16384

/* Width of the per-minute service roll-up buckets (service_profiles). */
#define ROLLUP_NS 60000000000ull

/* Caches are bounded: past this many entries they are simply emptied. */
#define CACHE_MAX_ENTRIES (1u << 20)

/* Distinct SDK label sets kept per (tenant, service); more fold into the
 * set {labels_overflow="true"} (store_write.c). */
#define PL_STORE_MAX_LABEL_SETS 1000

/* ---- the connection ----------------------------------------------------- */

enum {
    ST_INS_SPAN,
    ST_UPSERT_TRACE,
    ST_SEL_STRING,
    ST_INS_STRING,
    ST_SEL_FUNCTION,
    ST_INS_FUNCTION,
    ST_SEL_STACK,
    ST_INS_STACK,
    ST_UPSERT_SAMPLE,
    ST_UPSERT_SERVICE,
    ST_UPSERT_ROLLUP,
    ST_UPD_SPAN_PROFILE,
    ST_UPSERT_PROFILE_TYPE,
    ST_SEL_TENANT_SERVICE,
    ST_INS_TENANT_SERVICE,
    ST_COUNT_LABEL_SETS,
    ST_UPSERT_TOTAL,
    ST_SPAN_EXISTS,
    ST_INS_TRACE_SPANS,
    ST_INS_SPAN_ID,
    ST_INS_SPAN_ID_MANY, /* PL_STORE_MULTI_ROWS rows at once */
    ST_INS_SAMPLE_SPAN,
    ST_INS_SAMPLE_SPAN_MANY,
    ST_UPSERT_SAMPLE_MANY,
    ST_UPSERT_SPAN_BUCKET,
    ST_COUNT
};

struct pl_store {
    sqlite3 *db;
    char *path;
    bool read_only;
    bool in_tx;
    pl_store_error last_error;
    sqlite3_stmt *st[ST_COUNT];
    str_map strings;
    u64_map functions;       /* (name_id << 32 | file_id) -> id */
    u64_map stacks;          /* hash -> id */
    str_map tenant_services; /* tenant 0 name id (8 bytes) labels -> service id */
    pl_buf json;             /* scratch for span attributes */
    pl_buf frames;           /* scratch for stack frames */
    uint64_t last_stack_gc_ns;
    struct pl_store_terms *terms; /* the writer's search-term memory (store_terms.c) */
    /* the span id tables (PL_SPAN_ROW): rows in span_ids_new and span_ids,
     * entries of deleted spans not swept yet (the writer's counts) */
    int64_t ids_new, ids_old, ids_stale;
    /* above the highest rowid retention deleted since the last sweep (the
     * sweep's bound; 0 after it) */
    int64_t ids_dead_hi;
    int64_t ids_merge; /* merge when ids_new reaches it; 0: PL_SPAN_IDS_MERGE */
    /* the sample key tables (PL_SPAN_SAMPLES): rows in sample_spans_new and
     * sample_spans; sample rows deleted since the last sweep (at least as
     * many as the keys they left) */
    int64_t skeys_new, skeys_old, skeys_stale;
    /* every id the two tables may hold (an id it says absent is not
     * stored); built from them when `ids_seen_built` is false: at the
     * first look-up, after a sweep or a rollback, when outgrown */
    pl_bloom ids_seen;
    uint64_t ids_seen_cap;
    bool ids_seen_built;
    struct pl_store_ckpt *ckpt; /* the checkpoint thread, or NULL (store_checkpoint.c) */
};

/* Starts the checkpoint thread and takes over the writer's checkpoints from
 * SQLite (a round every `threshold_frames` WAL frames); an SQLite result
 * code. Stopped (after a pass in progress) before the writer's connection
 * closes. */
typedef struct pl_store_ckpt pl_store_ckpt;
int pl_store_ckpt_start(pl_store *s, int64_t threshold_frames);
void pl_store_ckpt_stop(pl_store *s);

/* Empties the id caches (after a rollback or a stack collection). */
void pl_store_clear_caches(pl_store *s);
/* Records the failure of `what` and formats the error. */
pl_status pl_store_fail(pl_store *s, int rc, pl_err *err, const char *what);
pl_status pl_store_query_fail(pl_store *s, int rc, pl_err *err);
/* First column of the first row of `sql` into *out (0 when no row). */
int pl_store_exec_int(sqlite3 *db, const char *sql, int64_t *out);
/* Decodes varint frames; returns the count written (at most cap), -1 if bad. */
int64_t pl_store_get_varints(const uint8_t *p, size_t len, int64_t *out, size_t cap);

/* ---- helpers ------------------------------------------------------------ */

static inline int64_t span_id_int(const uint8_t id[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | id[i];
    return (int64_t)v;
}

static inline void span_id_bytes(int64_t v, uint8_t out[8])
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)(u & 0xff);
        u >>= 8;
    }
}

static inline bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Runs a statement that returns no rows (or ignores them) and resets it. */
static inline int step_reset(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return (rc == SQLITE_DONE || rc == SQLITE_ROW) ? SQLITE_OK : rc;
}

static inline int bind_text(sqlite3_stmt *st, int i, pl_bytes b)
{
    return sqlite3_bind_text(st, i, b.len ? (const char *)b.ptr : "", (int)b.len, SQLITE_STATIC);
}

/* Text, or NULL when empty. */
static inline int bind_text_or_null(sqlite3_stmt *st, int i, pl_bytes b)
{
    return b.len ? bind_text(st, i, b) : sqlite3_bind_null(st, i);
}

static inline pl_bytes attr_string(const pl_attrs *attrs, const char *key)
{
    pl_kv *kv = pl_attrs_find(attrs, key, strlen(key));
    if (kv && kv->value.type == PL_VALUE_STRING)
        return kv->value.u.str;
    return (pl_bytes){NULL, 0};
}

#endif
