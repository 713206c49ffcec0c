/*
 * store_write.c: writing spans and profile samples into the embedded store.
 *
 * The writer resolves every string, function and stack of a batch to a
 * database id through in-memory caches (a cache miss costs one SELECT and
 * maybe one INSERT), pre-aggregates the batch's samples per
 * (service, bucket, type, span, stack) in a hash table, and then upserts one
 * row per key. Spans are INSERT OR IGNORE: a retried batch does not create
 * duplicates. pl_store_write_many takes all the batches of a transaction:
 * their spans are inserted in trace-id order, the `traces` table is
 * updated once per trace, and the sample rows of all their profiles are
 * aggregated and upserted in primary-key order, so the B-trees on random
 * ids are walked in order rather than at random.
 * Every statement is prepared once per connection (store_schema.c).
 *
 * The caches may hold ids created by the current transaction; a rollback
 * therefore clears them (pl_store_rollback), as does the stack garbage
 * collection of retention.
 *
 * Each sample also goes into the per-minute service roll-up
 * (`service_profiles`), so service-wide flame graphs read far fewer rows,
 * and into the per-(service, type, 10 s) totals (`service_totals`, from
 * the sorted aggregates: a few rows per transaction) that series read.
 */
#include "store/store_internal.h"
#include "store/store_terms.h"

#include "core/hash.h"
#include "core/log.h"
#include "core/value_json.h"
#include "proto/pprof.h"

#include <assert.h>
#include <math.h>

/* Text form of an attribute value for a TEXT column: strings as they are,
 * anything else as JSON. Uses `scratch`. */
static int bind_value_text(sqlite3_stmt *st, int i, const pl_value *v, pl_buf *scratch)
{
    if (v->type == PL_VALUE_STRING)
        return bind_text(st, i, v->u.str);
    pl_buf_reset(scratch);
    pl_value_json(scratch, v, &pl_vj_store);
    if (!pl_buf_ok(scratch))
        return sqlite3_bind_null(st, i);
    return sqlite3_bind_text(st, i, (const char *)scratch->data, (int)scratch->len,
                             SQLITE_TRANSIENT);
}

static bool value_as_int(const pl_value *v, int64_t *out)
{
    if (v->type == PL_VALUE_INT) {
        *out = v->u.i;
        return true;
    }
    if (v->type == PL_VALUE_DOUBLE && isfinite(v->u.d)) {
        *out = (int64_t)v->u.d;
        return true;
    }
    if (v->type == PL_VALUE_STRING && v->u.str.len > 0 && v->u.str.len < 24) {
        char tmp[24];
        memcpy(tmp, v->u.str.ptr, v->u.str.len);
        tmp[v->u.str.len] = 0;
        char *end;
        long long x = strtoll(tmp, &end, 10);
        if (*end == 0) {
            *out = x;
            return true;
        }
    }
    return false;
}

/* ---- string, function and stack ids ------------------------------------ */

static int string_id(pl_store *s, const char *text, size_t len, int64_t *id)
{
    uint64_t h = pl_hash_bytes(text, len);
    if (pl_store_str_map_get(&s->strings, text, len, h, id))
        return SQLITE_OK;
    sqlite3_stmt *sel = s->st[ST_SEL_STRING];
    sqlite3_bind_text(sel, 1, len ? text : "", (int)len, SQLITE_STATIC);
    int rc = sqlite3_step(sel);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(sel, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        sqlite3_reset(sel);
        sqlite3_stmt *ins = s->st[ST_INS_STRING];
        sqlite3_bind_text(ins, 1, len ? text : "", (int)len, SQLITE_STATIC);
        rc = step_reset(ins);
        if (rc == SQLITE_OK)
            *id = sqlite3_last_insert_rowid(s->db);
    }
    sqlite3_reset(sel);
    if (rc == SQLITE_OK) {
        if (s->strings.n >= CACHE_MAX_ENTRIES)
            pl_store_str_map_clear(&s->strings);
        pl_store_str_map_put(&s->strings, text, len, h, *id);
    }
    return rc;
}

/* The service id of (tenant, service name, SDK labels): without a tenant
 * or labels the name's string id, as always; else a row of `services`,
 * created on first use with an id below 0 (ids that no string has, so no
 * name sent without a tenant can reach another tenant's samples). `labels`
 * is the label set as a JSON object with sorted keys, or empty. Past
 * PL_STORE_MAX_LABEL_SETS sets of one (tenant, service), new sets fold into
 * {labels_overflow="true"}. */
#define OVERFLOW_LABELS "{\"labels_overflow\":\"true\"}"

static int service_id(pl_store *s, pl_bytes tenant, int64_t name_id, pl_bytes name, pl_bytes labels,
                      pl_buf *key, int64_t *id)
{
    if (!tenant.len && !labels.len) {
        *id = name_id;
        return SQLITE_OK;
    }
    pl_buf_reset(key);
    pl_buf_append(key, tenant.ptr, tenant.len > 256 ? 256 : tenant.len); /* receivers: 255 */
    pl_buf_append_byte(key, 0);
    for (int i = 0; i < 8; i++)
        pl_buf_append_byte(key, (uint8_t)((uint64_t)name_id >> (8 * i)));
    pl_buf_append(key, labels.ptr, labels.len);
    if (!pl_buf_ok(key))
        return SQLITE_NOMEM;
    uint64_t h = pl_hash_bytes(key->data, key->len);
    if (pl_store_str_map_get(&s->tenant_services, (const char *)key->data, key->len, h, id))
        return SQLITE_OK;
    sqlite3_stmt *sel = s->st[ST_SEL_TENANT_SERVICE];
    int rc = SQLITE_OK;
    for (int pass = 0; pass < 2; pass++) {
        bind_text_or_null(sel, 1, tenant);
        sqlite3_bind_int64(sel, 2, name_id);
        bind_text_or_null(sel, 3, labels);
        rc = sqlite3_step(sel);
        if (rc == SQLITE_ROW)
            *id = sqlite3_column_int64(sel, 0);
        sqlite3_reset(sel);
        if (rc == SQLITE_ROW) {
            rc = SQLITE_OK;
            break;
        }
        if (rc != SQLITE_DONE)
            break;
        rc = SQLITE_OK;
        if (labels.len && pass == 0 && !pl_bytes_eq_cstr(labels, OVERFLOW_LABELS)) {
            sqlite3_stmt *cnt = s->st[ST_COUNT_LABEL_SETS];
            bind_text_or_null(cnt, 1, tenant);
            sqlite3_bind_int64(cnt, 2, name_id);
            int64_t n = 0;
            rc = sqlite3_step(cnt);
            if (rc == SQLITE_ROW)
                n = sqlite3_column_int64(cnt, 0);
            sqlite3_reset(cnt);
            rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
            if (rc != SQLITE_OK)
                break;
            if (n >= PL_STORE_MAX_LABEL_SETS) {
                if (n == PL_STORE_MAX_LABEL_SETS) /* once: the marker set is made next */
                    pl_warn("sqlite",
                            "store %s: service %.*s%s%.*s has %d label sets: new ones are "
                            "stored as {labels_overflow=\"true\"}",
                            s->path, (int)(name.len > 200 ? 200 : name.len), (const char *)name.ptr,
                            tenant.len ? " of tenant " : "",
                            (int)(tenant.len > 200 ? 200 : tenant.len),
                            tenant.len ? (const char *)tenant.ptr : "", PL_STORE_MAX_LABEL_SETS);
                labels = PL_BYTES_LIT(OVERFLOW_LABELS);
                continue; /* look the marker set up */
            }
        }
        sqlite3_stmt *ins = s->st[ST_INS_TENANT_SERVICE];
        bind_text_or_null(ins, 1, tenant);
        sqlite3_bind_int64(ins, 2, name_id);
        bind_text_or_null(ins, 3, labels);
        rc = step_reset(ins);
        if (rc == SQLITE_OK)
            *id = sqlite3_last_insert_rowid(s->db);
        break;
    }
    if (rc == SQLITE_OK) {
        if (s->tenant_services.n >= CACHE_MAX_ENTRIES)
            pl_store_str_map_clear(&s->tenant_services);
        pl_store_str_map_put(&s->tenant_services, (const char *)key->data, key->len, h, *id);
    }
    return rc;
}

/* SDK labels of a sample: string attributes of the sample and of its
 * resource other than the service and the span link, sample first. */
#define MAX_LABELS 64

typedef struct label_set {
    pl_bytes key[MAX_LABELS], val[MAX_LABELS];
    uint32_t n;
} label_set;

/* Not labels: the service and the span link, and what the correlation
 * processor derives per span (its name and root's name, the profile id and
 * summaries), which the querier reads from the span itself; keeping them
 * would make a label set per span name. */
static bool link_key(pl_bytes key)
{
    return pl_bytes_eq_cstr(key, "service.name") || pl_bytes_eq_cstr(key, "span_id") ||
           pl_bytes_eq_cstr(key, "trace_id") || pl_bytes_eq_cstr(key, "profile_id") ||
           pl_bytes_eq_cstr(key, "span_name") || pl_bytes_eq_cstr(key, "root_span_name") ||
           pl_bytes_eq_cstr(key, "pyroscope.profile.id") ||
           (key.len > 8 && memcmp(key.ptr, "profile.", 8) == 0);
}

static void label_add(label_set *l, pl_bytes key, pl_bytes val)
{
    if (l->n < MAX_LABELS && key.len && val.len && !link_key(key)) {
        l->key[l->n] = key;
        l->val[l->n++] = val;
    }
}

static int cmp_bytes(pl_bytes a, pl_bytes b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    return c ? c : (a.len < b.len ? -1 : a.len > b.len);
}

/* The set as a JSON object, keys sorted, the first of a repeated key. */
static void labels_json(label_set *l, pl_buf *out)
{
    pl_buf_reset(out);
    for (uint32_t i = 1; i < l->n; i++) /* stable insertion sort */
        for (uint32_t j = i; j > 0 && cmp_bytes(l->key[j - 1], l->key[j]) > 0; j--) {
            pl_bytes k = l->key[j], v = l->val[j];
            l->key[j] = l->key[j - 1];
            l->val[j] = l->val[j - 1];
            l->key[j - 1] = k;
            l->val[j - 1] = v;
        }
    pl_buf_append_byte(out, '{');
    for (uint32_t i = 0; i < l->n; i++) {
        if (i && cmp_bytes(l->key[i], l->key[i - 1]) == 0)
            continue;
        if (out->len > 1)
            pl_buf_append_byte(out, ',');
        pl_buf_json_string(out, l->key[i].ptr, l->key[i].len);
        pl_buf_append_byte(out, ':');
        pl_buf_json_string(out, l->val[i].ptr, l->val[i].len);
    }
    pl_buf_append_byte(out, '}');
}

static int function_id(pl_store *s, int64_t name_id, int64_t file_id, int64_t *id)
{
    uint64_t key = ((uint64_t)name_id << 32) ^ (uint64_t)file_id;
    if (key == 0)
        key = 1ull << 63;
    if (pl_store_u64_map_get(&s->functions, key, id))
        return SQLITE_OK;
    sqlite3_stmt *sel = s->st[ST_SEL_FUNCTION];
    sqlite3_bind_int64(sel, 1, name_id);
    sqlite3_bind_int64(sel, 2, file_id);
    int rc = sqlite3_step(sel);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(sel, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        sqlite3_stmt *ins = s->st[ST_INS_FUNCTION];
        sqlite3_bind_int64(ins, 1, name_id);
        sqlite3_bind_int64(ins, 2, file_id);
        rc = step_reset(ins);
        if (rc == SQLITE_OK)
            *id = sqlite3_last_insert_rowid(s->db);
    }
    sqlite3_reset(sel);
    if (rc == SQLITE_OK) {
        if (s->functions.n >= CACHE_MAX_ENTRIES)
            pl_store_u64_map_clear(&s->functions);
        pl_store_u64_map_put(&s->functions, key, *id);
    }
    return rc;
}

static void put_varint(pl_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        tmp[n++] = byte | (v ? 0x80 : 0);
    } while (v);
    pl_buf_append(b, tmp, n);
}

/* Decodes varint frames; returns the count written (at most cap), -1 if bad. */
int64_t pl_store_get_varints(const uint8_t *p, size_t len, int64_t *out, size_t cap)
{
    size_t n = 0, i = 0;
    while (i < len) {
        uint64_t v = 0;
        int shift = 0;
        for (;;) {
            if (i >= len || shift > 63)
                return -1;
            uint8_t byte = p[i++];
            v |= (uint64_t)(byte & 0x7f) << shift;
            shift += 7;
            if (!(byte & 0x80))
                break;
        }
        if (n < cap)
            out[n] = (int64_t)v;
        n++;
    }
    return (int64_t)n;
}

/* Finds or creates the stack whose frames (varints) are in s->frames. */
static int stack_id(pl_store *s, int64_t *id)
{
    const uint8_t *frames = s->frames.data ? s->frames.data : (const uint8_t *)"";
    size_t len = s->frames.len;
    uint64_t h = pl_store_hash_bytes(frames, len, 0x5eed);
    /* The cache trusts the 64-bit hash; the table lookup below compares the
     * frames and probes the next hash on the (astronomically rare) collision. */
    if (pl_store_u64_map_get(&s->stacks, h ? h : 1, id))
        return SQLITE_OK;
    uint64_t probe = h;
    for (int attempt = 0; attempt < 8; attempt++, probe++) {
        sqlite3_stmt *sel = s->st[ST_SEL_STACK];
        sqlite3_bind_int64(sel, 1, (int64_t)probe);
        int rc = sqlite3_step(sel);
        if (rc == SQLITE_ROW) {
            const void *blob = sqlite3_column_blob(sel, 1);
            int blen = sqlite3_column_bytes(sel, 1);
            bool same = (size_t)blen == len && (len == 0 || memcmp(blob, frames, len) == 0);
            int64_t found = sqlite3_column_int64(sel, 0);
            sqlite3_reset(sel);
            if (!same)
                continue;
            *id = found;
        } else if (rc == SQLITE_DONE) {
            sqlite3_reset(sel);
            sqlite3_stmt *ins = s->st[ST_INS_STACK];
            sqlite3_bind_int64(ins, 1, (int64_t)probe);
            sqlite3_bind_blob(ins, 2, frames, (int)len, SQLITE_STATIC);
            rc = step_reset(ins);
            if (rc != SQLITE_OK)
                return rc;
            *id = sqlite3_last_insert_rowid(s->db);
        } else {
            sqlite3_reset(sel);
            return rc;
        }
        if (probe == h) {
            if (s->stacks.n >= CACHE_MAX_ENTRIES)
                pl_store_u64_map_clear(&s->stacks);
            pl_store_u64_map_put(&s->stacks, h ? h : 1, *id);
        }
        return SQLITE_OK;
    }
    return SQLITE_CONSTRAINT;
}

/* ---- writing spans ------------------------------------------------------ */

/* Aggregates of one batch keyed by client data (trace ids, span ids): dense
 * entries of `size` bytes in arrival order, the key at key_off, found
 * through a pl_htab (core/hash.h). */
typedef struct agg_map {
    pl_htab index; /* values: entry number + 1 */
    uint8_t *items;
    size_t n, cap;
    size_t size, key_off, key_len;
} agg_map;

typedef struct agg_key {
    const agg_map *m;
    const void *key;
} agg_key;

static bool agg_eq(const void *ctx, uint32_t val)
{
    const agg_key *k = ctx;
    const agg_map *m = k->m;
    return memcmp(m->items + (size_t)(val - 1) * m->size + m->key_off, k->key, m->key_len) == 0;
}

/* The entry for `key` (hashed to `hash`); a new one is zeroed with the key
 * copied in, and *created set. Valid until the next call; NULL on OOM. */
static void *agg_get(agg_map *m, const void *key, uint32_t hash, bool *created)
{
    agg_key k = {m, key};
    uint32_t *slot = pl_htab_slot(&m->index, hash, agg_eq, &k);
    if (!slot)
        return NULL;
    *created = *slot == 0;
    if (!*created)
        return m->items + (size_t)(*slot - 1) * m->size;
    if (m->n >= UINT32_MAX - 1 || pl_array_reserve((void **)&m->items, m->n, &m->cap, m->size, 64))
        return NULL;
    uint8_t *e = m->items + m->n * m->size;
    memset(e, 0, m->size);
    memcpy(e + m->key_off, key, m->key_len);
    *slot = (uint32_t)++m->n;
    pl_htab_added(&m->index, slot, hash);
    return e;
}

static void agg_free(agg_map *m)
{
    pl_htab_free(&m->index);
    free(m->items);
}

typedef struct trace_agg {
    uint8_t trace_id[16];
    uint64_t start, end;
    bool has_root;
    int64_t root_span_id;
    pl_bytes root_name, root_service;
    uint64_t root_start, root_end;
    int64_t spans, errors;
    int64_t first_row, last_row; /* the rowids its new spans took (trace_spans) */
    pl_bytes tenant;             /* of the first batch naming one */
} trace_agg;

typedef agg_map trace_aggs;
#define TRACE_AGGS                                                                                 \
    {                                                                                              \
        .size = sizeof(trace_agg), .key_off = offsetof(trace_agg, trace_id), .key_len = 16         \
    }

/* Per 10-second bucket of span start times (store_terms.h), the rowids a
 * transaction's new spans of that bucket took: `span_buckets` rows
 * (store_internal.h, PL_BUCKET_SPANS). A range ends where the next span
 * of its bucket is more than PL_BUCKET_GAP rows further on, so a reader of
 * the bucket reads at most that many rows of other buckets per range row:
 * a late span in a large write takes a range of its own, not the write's. */
typedef struct bucket_rows {
    int64_t bucket, first, last;
} bucket_rows;

typedef struct bucket_ranges {
    agg_map open; /* per bucket, its range still growing */
    bucket_rows *closed;
    size_t n_closed, cap_closed;
    size_t hit; /* the open range used last, + 1 */
} bucket_ranges;

#define BUCKET_RANGES                                                                              \
    {                                                                                              \
        .open = {                                                                                  \
            .size = sizeof(bucket_rows),                                                           \
            .key_off = offsetof(bucket_rows, bucket),                                              \
            .key_len = 8                                                                           \
        }                                                                                          \
    }

/* Adds a new span's row (rows come in increasing order within a write). */
static int bucket_ranges_add(bucket_ranges *r, int64_t bucket, int64_t row)
{
    bucket_rows *items = (bucket_rows *)(void *)r->open.items, *b = NULL;
    if (r->hit && items[r->hit - 1].bucket == bucket)
        b = &items[r->hit - 1];
    if (!b) {
        bool created;
        /* keyed hash: start times come from clients */
        b = agg_get(&r->open, &bucket, (uint32_t)pl_hash_u64((uint64_t)bucket), &created);
        if (!b)
            return SQLITE_NOMEM;
        r->hit = (size_t)(b - (bucket_rows *)(void *)r->open.items) + 1;
        if (created) {
            b->first = b->last = row;
            return SQLITE_OK;
        }
    }
    if (row > b->last && row - b->last > PL_BUCKET_GAP) {
        if (pl_array_reserve((void **)&r->closed, r->n_closed, &r->cap_closed, sizeof(*r->closed),
                             16))
            return SQLITE_NOMEM;
        r->closed[r->n_closed++] = *b;
        b->first = row;
    }
    if (row < b->first)
        b->first = row;
    if (row > b->last)
        b->last = row;
    return SQLITE_OK;
}

static int bucket_ranges_write(pl_store *s, const bucket_rows *v, size_t n)
{
    sqlite3_stmt *st = s->st[ST_UPSERT_SPAN_BUCKET];
    int rc = SQLITE_OK;
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        sqlite3_bind_int64(st, 1, v[i].bucket);
        sqlite3_bind_int64(st, 2, v[i].first);
        sqlite3_bind_int64(st, 3, v[i].last);
        rc = step_reset(st);
    }
    return rc;
}

static void bucket_ranges_free(bucket_ranges *r)
{
    agg_free(&r->open);
    free(r->closed);
}

static trace_agg *trace_aggs_get(trace_aggs *m, const uint8_t id[16])
{
    bool created;
    trace_agg *t = agg_get(m, id, (uint32_t)pl_hash_bytes(id, 16), &created);
    if (t && created) {
        t->start = UINT64_MAX;
        t->first_row = INT64_MAX;
    }
    return t;
}

/* Whether the span carries the correlation's profile summary (what a copy
 * of a stored span adds to it). */
static bool span_has_profile(const pl_span *sp)
{
    static const char *const keys[] = {"profile.samples", "profile.cpu_time_ns",
                                       "profile.cpu_time_total_ns", "profile.top_functions"};
    if (attr_string(&sp->attrs, "pyroscope.profile.id").len)
        return true;
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        if (pl_attrs_find(&sp->attrs, keys[k], strlen(keys[k])))
            return true;
    return false;
}

/* Fills s->ids_seen from both id tables, sized for twice what the writer
 * counts in them (an estimate after a rollback; the filter is rebuilt when
 * it fills up). */
static int build_ids_seen(pl_store *s)
{
    int64_t n = s->ids_old + s->ids_new;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT span_id FROM span_ids UNION ALL SELECT span_id FROM "
                                "span_ids_new",
                                -1, &st, NULL);
    pl_bloom_free(&s->ids_seen);
    s->ids_seen_built = false;
    if (rc != SQLITE_OK)
        return rc;
    s->ids_seen_cap = (uint64_t)n * 2 + 65536;
    if (pl_bloom_init(&s->ids_seen, s->ids_seen_cap) != 0) {
        sqlite3_finalize(st);
        return SQLITE_NOMEM;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        pl_bloom_add(&s->ids_seen, pl_hash_u64((uint64_t)sqlite3_column_int64(st, 0)));
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) {
        pl_bloom_free(&s->ids_seen);
        return rc;
    }
    s->ids_seen_built = true;
    return SQLITE_OK;
}

/* ---- multi-row inserts ----------------------------------------------------- */

/* Rows for a statement pair: `many` takes PL_STORE_MULTI_ROWS rows of `cols`
 * parameters in one step (`?` numbered in order), `one` a single row
 * (?1..?cols) for what is left at the end. Values are held until the rows
 * are written: a blob must stay valid until multi_row_finish(). */
typedef struct mcell {
    const void *blob; /* 16 bytes (a trace id); NULL with !is_int: NULL */
    int64_t i;
    bool is_int;
} mcell;

#define MULTI_ROW_MAX_COLS 10 /* the sample rows' */

typedef struct multi_row {
    sqlite3_stmt *many, *one;
    int cols, n;     /* cells held */
    int64_t changes; /* sqlite3_changes() summed */
    mcell cells[PL_STORE_MULTI_ROWS * MULTI_ROW_MAX_COLS];
} multi_row;

static void multi_row_init(multi_row *m, sqlite3_stmt *many, sqlite3_stmt *one, int cols)
{
    assert(cols > 0 && cols <= MULTI_ROW_MAX_COLS);
    m->many = many;
    m->one = one;
    m->cols = cols;
    m->n = 0;
    m->changes = 0;
}

static void mr_int(multi_row *m, int64_t v)
{
    m->cells[m->n++] = (mcell){NULL, v, true};
}

static void mr_blob16(multi_row *m, const void *p)
{
    m->cells[m->n++] = (mcell){p, 0, false};
}

static void mr_bind(sqlite3_stmt *st, int param, const mcell *c)
{
    if (c->is_int)
        sqlite3_bind_int64(st, param, c->i);
    else if (c->blob)
        sqlite3_bind_blob(st, param, c->blob, 16, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, param);
}

/* After a row's cells: writes the held rows once there are enough. */
static int multi_row_end(multi_row *m, sqlite3 *db)
{
    if (m->n < PL_STORE_MULTI_ROWS * m->cols)
        return SQLITE_OK;
    for (int i = 0; i < m->n; i++)
        mr_bind(m->many, i + 1, &m->cells[i]);
    m->n = 0;
    int rc = step_reset(m->many);
    if (rc == SQLITE_OK)
        m->changes += sqlite3_changes(db);
    return rc;
}

/* Writes the rows still held, one statement each. */
static int multi_row_finish(multi_row *m, sqlite3 *db)
{
    int rc = SQLITE_OK;
    for (int r = 0; r * m->cols < m->n && rc == SQLITE_OK; r++) {
        for (int c = 0; c < m->cols; c++)
            mr_bind(m->one, c + 1, &m->cells[r * m->cols + c]);
        rc = step_reset(m->one);
        if (rc == SQLITE_OK)
            m->changes += sqlite3_changes(db);
    }
    m->n = 0;
    return rc;
}

/* The rowid of the stored span with this id, 0 when none, -1 on error
 * (*rc); `pending`, when given: the ids this transaction wrote whose id
 * entries are not inserted yet (write_span_ids). */
static int64_t span_stored(pl_store *s, int64_t sid, const u64_map *pending, int *rc)
{
    if (!s->ids_seen_built || s->ids_seen.added > s->ids_seen_cap) {
        int r = build_ids_seen(s);
        if (r != SQLITE_OK) {
            *rc = r;
            return -1;
        }
    }
    if (!pl_bloom_maybe(&s->ids_seen, pl_hash_u64((uint64_t)sid)))
        return 0;
    int64_t row;
    if (pending && pl_store_u64_map_get(pending, (uint64_t)sid, &row))
        return row;
    sqlite3_stmt *st = s->st[ST_SPAN_EXISTS];
    sqlite3_bind_int64(st, 1, sid);
    int r = sqlite3_step(st);
    row = r == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_reset(st);
    if (r == SQLITE_ROW || r == SQLITE_DONE)
        return row;
    *rc = r;
    return -1;
}

/* Writes a span not stored yet (stored_row 0), or adds the profile summary
 * a copy carries to the stored one (its rowid). A new span's id and rowid
 * go to `ids` (write_span_ids). */
static int write_span(pl_store *s, const pl_span *sp, int64_t stored_row, pl_bytes service,
                      int64_t resource_id, pl_bytes tenant, trace_aggs *aggs,
                      bucket_ranges *buckets, u64_map *ids, pl_store_write_stats *stats)
{
    sqlite3_stmt *st = s->st[ST_INS_SPAN];
    bool root = sp->parent_span_id_len != 8 || all_zero(sp->parent_span_id, 8);
    int64_t sid = span_id_int(sp->span_id);
    sqlite3_bind_blob(st, 1, sp->trace_id, 16, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, sid);
    if (root)
        sqlite3_bind_null(st, 3);
    else
        sqlite3_bind_int64(st, 3, span_id_int(sp->parent_span_id));
    bind_text(st, 4, sp->name);
    bind_text(st, 5, service);
    sqlite3_bind_int(st, 6, sp->kind);
    sqlite3_bind_int64(st, 7, (int64_t)sp->start_time_unix_nano);
    uint64_t end = sp->end_time_unix_nano >= sp->start_time_unix_nano ? sp->end_time_unix_nano
                                                                      : sp->start_time_unix_nano;
    sqlite3_bind_int64(st, 8, (int64_t)end);
    sqlite3_bind_int(st, 9, sp->status.code);
    bind_text_or_null(st, 10, sp->status.message);
    pl_buf_reset(&s->json);
    pl_kvs_json(&s->json, sp->attrs.items, sp->attrs.n, &pl_vj_store);
    if (!pl_buf_ok(&s->json))
        return SQLITE_NOMEM;
    sqlite3_bind_text(st, 11, (const char *)s->json.data, (int)s->json.len, SQLITE_STATIC);

    pl_bytes profile_id = attr_string(&sp->attrs, "pyroscope.profile.id");
    bind_text_or_null(st, 12, profile_id);
    static const char *const int_keys[3] = {"profile.samples", "profile.cpu_time_ns",
                                            "profile.cpu_time_total_ns"};
    for (int k = 0; k < 3; k++) {
        pl_kv *kv = pl_attrs_find(&sp->attrs, int_keys[k], strlen(int_keys[k]));
        int64_t v;
        if (kv && value_as_int(&kv->value, &v))
            sqlite3_bind_int64(st, 13 + k, v);
        else
            sqlite3_bind_null(st, 13 + k);
    }
    pl_kv *top = pl_attrs_find(&sp->attrs, "profile.top_functions", 21);
    pl_buf scratch;
    pl_buf_init(&scratch);
    if (top)
        bind_value_text(st, 16, &top->value, &scratch);
    else
        sqlite3_bind_null(st, 16);
    bool has_profile = profile_id.len || top;
    for (int k = 0; k < 3; k++)
        has_profile = has_profile || pl_attrs_find(&sp->attrs, int_keys[k], strlen(int_keys[k]));
    if (resource_id)
        sqlite3_bind_int64(st, 17, resource_id);
    else
        sqlite3_bind_null(st, 17);
    pl_buf events;
    pl_buf_init(&events);
    if (sp->n_events) {
        pl_buf_append_byte(&events, '[');
        for (uint32_t e = 0; e < sp->n_events; e++) {
            const pl_span_event *ev = &sp->events[e];
            pl_buf_append_str(&events, e ? ",{\"name\":" : "{\"name\":");
            pl_buf_json_string(&events, ev->name.ptr, ev->name.len);
            pl_buf_printf(
                &events, ",\"time_unix_nano\":\"%" PRIu64 "\",\"attributes\":", ev->time_unix_nano);
            pl_kvs_json(&events, ev->attrs.items, ev->attrs.n, &pl_vj_store);
            pl_buf_append_byte(&events, '}');
        }
        pl_buf_append_byte(&events, ']');
    }
    if (sp->n_events && pl_buf_ok(&events))
        sqlite3_bind_text(st, 18, (const char *)events.data, (int)events.len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 18);
    bool duplicate = stored_row > 0;
    int rc = duplicate ? SQLITE_OK : step_reset(st);
    int64_t row = sqlite3_last_insert_rowid(s->db);
    if (rc == SQLITE_OK && !duplicate) {
        if (!pl_store_u64_map_put(ids, (uint64_t)sid, row))
            rc = SQLITE_NOMEM;
        pl_bloom_add(&s->ids_seen, pl_hash_u64((uint64_t)sid));
    }
    if (rc == SQLITE_OK && duplicate && has_profile) {
        /* the span is stored already (a pipeline without correlation wrote
         * it as it arrived): this copy adds the profile summary */
        sqlite3_stmt *up = s->st[ST_UPD_SPAN_PROFILE];
        sqlite3_bind_blob(up, 1, sp->trace_id, 16, SQLITE_STATIC);
        sqlite3_bind_int64(up, 2, stored_row);
        sqlite3_bind_text(up, 11, (const char *)s->json.data, (int)s->json.len, SQLITE_STATIC);
        bind_text_or_null(up, 12, profile_id);
        for (int k = 0; k < 3; k++) {
            pl_kv *kv = pl_attrs_find(&sp->attrs, int_keys[k], strlen(int_keys[k]));
            int64_t v;
            if (kv && value_as_int(&kv->value, &v))
                sqlite3_bind_int64(up, 13 + k, v);
            else
                sqlite3_bind_null(up, 13 + k);
        }
        if (top)
            bind_value_text(up, 16, &top->value, &scratch);
        else
            sqlite3_bind_null(up, 16);
        rc = step_reset(up);
    }
    pl_buf_free(&events);
    pl_buf_free(&scratch);
    if (rc != SQLITE_OK)
        return rc;
    if (duplicate) {
        stats->duplicate_spans++;
        return SQLITE_OK;
    }
    stats->spans++;
    if (bucket_ranges_add(buckets, pl_terms_bucket((int64_t)sp->start_time_unix_nano), row) !=
        SQLITE_OK)
        return SQLITE_NOMEM;
    trace_agg *t = trace_aggs_get(aggs, sp->trace_id);
    if (!t)
        return SQLITE_NOMEM;
    if (row < t->first_row)
        t->first_row = row;
    if (row > t->last_row)
        t->last_row = row;
    if (sp->start_time_unix_nano < t->start)
        t->start = sp->start_time_unix_nano;
    if (end > t->end)
        t->end = end;
    t->spans++;
    if (!t->tenant.len)
        t->tenant = tenant;
    if (sp->status.code == 2)
        t->errors++;
    if (root) {
        t->has_root = true;
        t->root_span_id = sid;
        t->root_name = sp->name;
        t->root_service = service;
        t->root_start = sp->start_time_unix_nano;
        t->root_end = end;
    }
    return SQLITE_OK;
}

/* The spans of a transaction, sorted by trace id before they are written. */
typedef struct span_ref {
    const pl_span *sp;
    uint32_t res; /* index into span_set.res */
    uint32_t seq; /* arrival order: ties keep it (a span's later copy after the first) */
} span_ref;

typedef struct span_res {
    pl_bytes service, tenant;
    int64_t resource_id;
    const pl_attrs *attrs; /* the resource's, for the search terms */
} span_res;

typedef struct span_set {
    span_ref *refs;
    size_t n, cap;
    span_res *res;
    size_t n_res, cap_res;
} span_set;

static void span_set_free(span_set *set)
{
    free(set->refs);
    free(set->res);
}

/* Adds the spans of one traces batch (resolving each resource once). */
static int collect_spans(pl_store *s, const pl_traces *traces, pl_bytes tenant, span_set *set,
                         pl_store_write_stats *stats)
{
    int rc = SQLITE_OK;
    for (uint32_t r = 0; r < traces->n_resources && rc == SQLITE_OK; r++) {
        const pl_resource_spans *rs = &traces->resources[r];
        pl_bytes service = attr_string(&rs->resource.attrs, "service.name");
        if (!service.len)
            service = PL_BYTES_LIT("unknown_service");
        /* the resource's attributes, once per resource (and stored once) */
        int64_t resource_id = 0;
        if (rs->resource.attrs.n) {
            pl_buf_reset(&s->json);
            pl_kvs_json(&s->json, rs->resource.attrs.items, rs->resource.attrs.n, &pl_vj_store);
            if (!pl_buf_ok(&s->json))
                return SQLITE_NOMEM;
            rc = string_id(s, (const char *)s->json.data, s->json.len, &resource_id);
            if (rc != SQLITE_OK)
                return rc;
        }
        if (set->n_res >= UINT32_MAX ||
            pl_array_reserve((void **)&set->res, set->n_res, &set->cap_res, sizeof(*set->res), 16))
            return SQLITE_NOMEM;
        uint32_t ri = (uint32_t)set->n_res++;
        set->res[ri] = (span_res){service, tenant, resource_id, &rs->resource.attrs};
        for (uint32_t sc = 0; sc < rs->n_scopes; sc++) {
            const pl_scope_spans *ss = &rs->scopes[sc];
            for (uint32_t i = 0; i < ss->n_spans; i++) {
                const pl_span *sp = &ss->spans[i];
                if (sp->trace_id_len != 16 || sp->span_id_len != 8 || all_zero(sp->trace_id, 16) ||
                    all_zero(sp->span_id, 8)) {
                    stats->invalid_spans++;
                    continue;
                }
                if (set->n >= UINT32_MAX || pl_array_reserve((void **)&set->refs, set->n, &set->cap,
                                                             sizeof(*set->refs), 256))
                    return SQLITE_NOMEM;
                set->refs[set->n] = (span_ref){sp, ri, (uint32_t)set->n};
                set->n++;
            }
        }
    }
    return rc;
}

static int cmp_span_ref(const void *a, const void *b)
{
    const span_ref *x = a, *y = b;
    int c = memcmp(x->sp->trace_id, y->sp->trace_id, 16);
    if (c)
        return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_id_entry(const void *a, const void *b)
{
    const struct u64_entry *x = a, *y = b;
    int64_t i = (int64_t)x->key, j = (int64_t)y->key;
    return i < j ? -1 : i > j;
}

/* Inserts a transaction's new span ids into span_ids_new in id order (the
 * spans were written in trace-id order): consecutive inserts reach the
 * same or the next leaf, half the time of inserting them as written. */
static int write_span_ids(pl_store *s, u64_map *ids)
{
    if (ids->n > 1)
        qsort(ids->entries, ids->n, sizeof(*ids->entries), cmp_id_entry);
    multi_row m;
    multi_row_init(&m, s->st[ST_INS_SPAN_ID_MANY], s->st[ST_INS_SPAN_ID], 2);
    int rc = SQLITE_OK;
    for (size_t i = 0; i < ids->n && rc == SQLITE_OK; i++) {
        mr_int(&m, (int64_t)ids->entries[i].key);
        mr_int(&m, ids->entries[i].val);
        rc = multi_row_end(&m, s->db);
    }
    if (rc == SQLITE_OK)
        rc = multi_row_finish(&m, s->db);
    s->ids_new += m.changes;
    pl_store_u64_map_clear(ids); /* sorted: its index no longer matches */
    return rc;
}

/* Writes the collected spans in trace-id order, their ids, then one
 * `traces` upsert per trace (also in trace-id order). */
static int flush_spans(pl_store *s, span_set *set, pl_store_write_stats *stats)
{
    if (set->n > 1)
        qsort(set->refs, set->n, sizeof(*set->refs), cmp_span_ref);
    trace_aggs aggs = TRACE_AGGS;
    bucket_ranges buckets = BUCKET_RANGES;
    u64_map ids = {0};
    int rc = SQLITE_OK;
    for (size_t i = 0; i < set->n && rc == SQLITE_OK; i++) {
        const span_res *r = &set->res[set->refs[i].res];
        const pl_span *sp = set->refs[i].sp;
        /* a copy of a stored span without a profile summary (the default
         * pipelines store every span as it arrives and again after the
         * correlation processor) is skipped whole: no attribute JSON, no
         * write, no search terms (the stored row, which such a copy leaves
         * unchanged, has them) */
        int64_t stored = span_stored(s, span_id_int(sp->span_id), &ids, &rc);
        if (stored < 0)
            break;
        if (stored && !span_has_profile(sp)) {
            stats->duplicate_spans++;
            continue;
        }
        rc = write_span(s, sp, stored, r->service, r->resource_id, r->tenant, &aggs, &buckets, &ids,
                        stats);
        if (rc == SQLITE_OK)
            rc = pl_store_terms_span(s, sp, r->service, r->resource_id, r->attrs, stored != 0);
    }
    if (rc == SQLITE_OK)
        rc = write_span_ids(s, &ids);
    pl_store_u64_map_clear(&ids);
    sqlite3_stmt *st = s->st[ST_UPSERT_TRACE];
    for (size_t i = 0; i < aggs.n && rc == SQLITE_OK; i++) {
        trace_agg *t = (trace_agg *)(void *)aggs.items + i;
        sqlite3_bind_blob(st, 1, t->trace_id, 16, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, (int64_t)t->start);
        sqlite3_bind_int64(st, 3, (int64_t)t->end);
        if (t->has_root) {
            sqlite3_bind_int64(st, 4, t->root_span_id);
            bind_text(st, 5, t->root_name);
            bind_text(st, 6, t->root_service);
            sqlite3_bind_int64(st, 7, (int64_t)t->root_start);
            sqlite3_bind_int64(st, 8, (int64_t)t->root_end);
        } else {
            for (int k = 4; k <= 8; k++)
                sqlite3_bind_null(st, k);
        }
        sqlite3_bind_int64(st, 9, t->spans);
        sqlite3_bind_int64(st, 10, t->errors);
        bind_text_or_null(st, 12, t->tenant);
        sqlite3_bind_int64(st, 11,
                           t->has_root ? (int64_t)(t->root_end - t->root_start)
                                       : (int64_t)(t->end - t->start));
        rc = step_reset(st);
        /* the trace's spans of this transaction were written one after
         * another (sorted by trace id above): one range row, no index entry
         * per span */
        if (rc == SQLITE_OK && t->spans) {
            sqlite3_stmt *ranges = s->st[ST_INS_TRACE_SPANS];
            sqlite3_bind_blob(ranges, 1, t->trace_id, 16, SQLITE_STATIC);
            sqlite3_bind_int64(ranges, 2, t->first_row);
            sqlite3_bind_int64(ranges, 3, t->last_row);
            rc = step_reset(ranges);
        }
    }
    agg_free(&aggs);
    if (rc == SQLITE_OK)
        rc = bucket_ranges_write(s, buckets.closed, buckets.n_closed);
    if (rc == SQLITE_OK)
        rc = bucket_ranges_write(s, (const bucket_rows *)(const void *)buckets.open.items,
                                 buckets.open.n);
    bucket_ranges_free(&buckets);
    return rc;
}

/* ---- writing profiles --------------------------------------------------- */

typedef struct sample_key {
    int64_t service_id, bucket, type_id, span_id, stack_id;
} sample_key;

typedef struct sample_agg {
    sample_key key;
    bool has_trace;
    uint8_t trace_id[16];
    int64_t value, cpu_ns, wall_ns, count;
} sample_agg;

typedef agg_map sample_aggs;
#define SAMPLE_AGGS                                                                                \
    {                                                                                              \
        .size = sizeof(sample_agg), .key_off = offsetof(sample_agg, key),                          \
        .key_len = sizeof(sample_key)                                                              \
    }

static uint64_t sample_key_hash(const sample_key *k)
{
    /* keyed: span ids and buckets come from clients */
    uint64_t h = pl_hash_u64((uint64_t)k->service_id * 31 + (uint64_t)k->bucket);
    h = pl_hash_u64(h ^ (uint64_t)k->type_id);
    h = pl_hash_u64(h ^ (uint64_t)k->span_id);
    return pl_hash_u64(h ^ (uint64_t)k->stack_id);
}

static sample_agg *sample_aggs_get(sample_aggs *m, const sample_key *k)
{
    bool created;
    return agg_get(m, k, (uint32_t)sample_key_hash(k), &created);
}

/* Per-batch translation of dictionary indices to database ids (0 = not yet). */
typedef struct dict_ids {
    const pl_dictionary *dict;
    int64_t *strings;
    int64_t *functions;
    int64_t *stacks;
} dict_ids;

static int dict_string_id(pl_store *s, dict_ids *d, int32_t idx, int64_t *id)
{
    if (idx < 0 || (uint32_t)idx >= d->dict->n_strings)
        idx = 0;
    if (d->dict->n_strings == 0)
        return string_id(s, "", 0, id);
    if (d->strings[idx]) {
        *id = d->strings[idx];
        return SQLITE_OK;
    }
    pl_bytes b = d->dict->strings[idx];
    int rc = string_id(s, (const char *)b.ptr, b.len, id);
    if (rc == SQLITE_OK)
        d->strings[idx] = *id;
    return rc;
}

static int dict_function_id(pl_store *s, dict_ids *d, int32_t idx, int64_t *id)
{
    if (idx < 0 || (uint32_t)idx >= d->dict->n_functions) {
        int64_t name, file;
        int rc = string_id(s, "<unknown>", 9, &name);
        if (rc == SQLITE_OK)
            rc = string_id(s, "", 0, &file);
        return rc == SQLITE_OK ? function_id(s, name, file, id) : rc;
    }
    if (d->functions[idx]) {
        *id = d->functions[idx];
        return SQLITE_OK;
    }
    const pl_function *f = &d->dict->functions[idx];
    pl_bytes name = pl_dict_string(d->dict, f->name_strindex);
    int64_t name_id, file_id;
    int rc;
    if (name.len)
        rc = dict_string_id(s, d, f->name_strindex, &name_id);
    else if (pl_dict_string(d->dict, f->system_name_strindex).len)
        rc = dict_string_id(s, d, f->system_name_strindex, &name_id);
    else
        rc = string_id(s, "<unknown>", 9, &name_id);
    if (rc == SQLITE_OK)
        rc = dict_string_id(s, d, f->filename_strindex, &file_id);
    if (rc == SQLITE_OK)
        rc = function_id(s, name_id, file_id, id);
    if (rc == SQLITE_OK)
        d->functions[idx] = *id;
    return rc;
}

static int dict_stack_id(pl_store *s, dict_ids *d, int32_t idx, int64_t *id)
{
    const pl_dictionary *dict = d->dict;
    if (idx < 0 || (uint32_t)idx >= dict->n_stacks) {
        *id = 0;
        return SQLITE_OK;
    }
    if (d->stacks[idx]) {
        *id = d->stacks[idx];
        return SQLITE_OK;
    }
    const pl_stack *stack = &dict->stacks[idx];
    /* Frames leaf first (locations leaf first, inlined lines callee first),
     * collected then written reversed: the store keeps root first. */
    size_t cap = 64, n = 0;
    int64_t local[64];
    int64_t *fns = local;
    int rc = SQLITE_OK;
    for (uint32_t i = 0; i < stack->n_location_indices && rc == SQLITE_OK; i++) {
        int32_t li = stack->location_indices[i];
        if (li < 0 || (uint32_t)li >= dict->n_locations)
            continue;
        const pl_location *loc = &dict->locations[li];
        uint32_t nl = loc->n_lines ? loc->n_lines : 1;
        for (uint32_t l = 0; l < nl && rc == SQLITE_OK; l++) {
            int64_t fid;
            if (loc->n_lines) {
                rc = dict_function_id(s, d, loc->lines[l].function_index, &fid);
            } else {
                /* Unsymbolized: the address, in the mapping's file. */
                char addr[32];
                int alen = snprintf(addr, sizeof(addr), "0x%" PRIx64, loc->address);
                int64_t name_id, file_id = 0;
                rc = string_id(s, addr, (size_t)alen, &name_id);
                int32_t mi = loc->mapping_index;
                int32_t fsi = (mi > 0 && (uint32_t)mi < dict->n_mappings)
                                  ? dict->mappings[mi].filename_strindex
                                  : 0;
                if (rc == SQLITE_OK)
                    rc = dict_string_id(s, d, fsi, &file_id);
                if (rc == SQLITE_OK)
                    rc = function_id(s, name_id, file_id, &fid);
            }
            if (rc != SQLITE_OK)
                break;
            if (n == cap) {
                size_t ncap = cap * 2;
                int64_t *grown = malloc(ncap * sizeof(int64_t));
                if (!grown) {
                    rc = SQLITE_NOMEM;
                    break;
                }
                memcpy(grown, fns, n * sizeof(int64_t));
                if (fns != local)
                    free(fns);
                fns = grown;
                cap = ncap;
            }
            fns[n++] = fid;
        }
    }
    if (rc == SQLITE_OK && n == 0) {
        *id = 0; /* no frames: nothing to draw, the caller skips the sample */
        if (fns != local)
            free(fns);
        return SQLITE_OK;
    }
    if (rc == SQLITE_OK) {
        pl_buf_reset(&s->frames);
        for (size_t i = n; i-- > 0;)
            put_varint(&s->frames, (uint64_t)fns[i]);
        rc = pl_buf_ok(&s->frames) ? stack_id(s, id) : SQLITE_NOMEM;
    }
    if (fns != local)
        free(fns);
    if (rc == SQLITE_OK)
        d->stacks[idx] = *id;
    return rc;
}

/* How many CPU nanoseconds one unit of a sample value is (0: not CPU time). */
static int64_t unit_ns(pl_bytes unit)
{
    if (pl_bytes_eq_cstr(unit, "nanoseconds") || pl_bytes_eq_cstr(unit, "ns"))
        return 1;
    if (pl_bytes_eq_cstr(unit, "microseconds") || pl_bytes_eq_cstr(unit, "us"))
        return 1000;
    if (pl_bytes_eq_cstr(unit, "milliseconds") || pl_bytes_eq_cstr(unit, "ms"))
        return 1000000;
    if (pl_bytes_eq_cstr(unit, "seconds") || pl_bytes_eq_cstr(unit, "s"))
        return 1000000000;
    return 0;
}

/* How many nanoseconds of `clock` ("cpu" or "wall") one unit of the
 * profile's values is: the value itself for a `cpu` / `wall` type in a time
 * unit, the period for a `samples` count whose period is that clock (Go's
 * samples:count with period cpu:nanoseconds, Node's with period
 * wall:microseconds). 0: the values are not that clock's time. */
static int64_t clock_multiplier(const pl_dictionary *dict, const pl_profile *p, const char *clock)
{
    pl_bytes type = pl_dict_string(dict, p->sample_type.type_strindex);
    pl_bytes unit = pl_dict_string(dict, p->sample_type.unit_strindex);
    if (pl_bytes_eq_cstr(type, clock))
        return unit_ns(unit);
    if (pl_bytes_eq_cstr(type, "samples") && p->has_period_type && p->period > 0) {
        pl_bytes ptype = pl_dict_string(dict, p->period_type.type_strindex);
        pl_bytes punit = pl_dict_string(dict, p->period_type.unit_strindex);
        int64_t f = unit_ns(punit), m;
        if (pl_bytes_eq_cstr(ptype, clock) && f && !__builtin_mul_overflow(p->period, f, &m))
            return m;
    }
    return 0;
}

typedef struct clock_mult {
    int64_t cpu, wall;
} clock_mult;

static int add_sample_value(sample_aggs *aggs, const sample_key *k, const uint8_t *trace_id,
                            int64_t value, clock_mult mult, int64_t count)
{
    sample_agg *a = sample_aggs_get(aggs, k);
    if (!a)
        return SQLITE_NOMEM;
    int64_t cpu = 0, wall = 0;
    if (mult.cpu && __builtin_mul_overflow(value, mult.cpu, &cpu))
        cpu = INT64_MAX;
    if (mult.wall && __builtin_mul_overflow(value, mult.wall, &wall))
        wall = INT64_MAX;
    if (__builtin_add_overflow(a->wall_ns, wall, &a->wall_ns))
        a->wall_ns = INT64_MAX;
    if (__builtin_add_overflow(a->value, value, &a->value))
        a->value = INT64_MAX;
    if (__builtin_add_overflow(a->cpu_ns, cpu, &a->cpu_ns))
        a->cpu_ns = INT64_MAX;
    a->count += count;
    if (trace_id && !a->has_trace) {
        a->has_trace = true;
        memcpy(a->trace_id, trace_id, 16);
    }
    return SQLITE_OK;
}

static int add_rollup(sample_aggs *rollup, const sample_key *k, uint64_t ts, int64_t value,
                      clock_mult mult)
{
    sample_key rk = *k;
    rk.span_id = 0;
    rk.bucket = (int64_t)(ts / ROLLUP_NS);
    return add_sample_value(rollup, &rk, NULL, value, mult, 1);
}

/* Records the profile name (as the Pyroscope exporter names it) and the
 * period of a stored sample type, for the Pyroscope querier's type ids. */
static int write_profile_type(pl_store *s, const pl_dictionary *dict, const pl_profile *p,
                              int64_t type_id)
{
    pl_bytes name = pl_pprof_profile_name(dict, p, NULL);
    pl_bytes ptype = p->has_period_type ? pl_dict_string(dict, p->period_type.type_strindex)
                                        : (pl_bytes){NULL, 0};
    pl_bytes punit = p->has_period_type ? pl_dict_string(dict, p->period_type.unit_strindex)
                                        : (pl_bytes){NULL, 0};
    sqlite3_stmt *st = s->st[ST_UPSERT_PROFILE_TYPE];
    sqlite3_bind_int64(st, 1, type_id);
    bind_text(st, 2, name);
    bind_text(st, 3, ptype);
    bind_text(st, 4, punit);
    return step_reset(st);
}

/* The sample rows of a transaction, aggregated over its profiles batches
 * (all keys are database ids, so batches with different dictionaries add
 * up), then upserted in key order. */
typedef struct profile_set {
    sample_aggs aggs;
    sample_aggs rollup; /* span 0, bucket = minute */
    u64_map services;   /* service id -> latest time */
} profile_set;

#define PROFILE_SET                                                                                \
    {                                                                                              \
        .aggs = SAMPLE_AGGS, .rollup = SAMPLE_AGGS                                                 \
    }

static void profile_set_free(profile_set *ps)
{
    pl_store_u64_map_clear(&ps->services);
    agg_free(&ps->aggs);
    agg_free(&ps->rollup);
}

static int collect_profiles(pl_store *s, const pl_batch *batch, profile_set *set,
                            pl_store_write_stats *stats, uint64_t *latest_ns)
{
    const pl_profiles *pr = &batch->data.profiles;
    const pl_dictionary *dict = &pr->dict;
    dict_ids d = {dict, NULL, NULL, NULL};
    d.strings = calloc(dict->n_strings + 1, sizeof(int64_t));
    d.functions = calloc(dict->n_functions + 1, sizeof(int64_t));
    d.stacks = calloc(dict->n_stacks + 1, sizeof(int64_t));
    sample_aggs *aggs = &set->aggs, *rollup = &set->rollup;
    u64_map *services = &set->services;
    int rc = (d.strings && d.functions && d.stacks) ? SQLITE_OK : SQLITE_NOMEM;
    uint64_t fallback_time = batch->received_unix_nano ? batch->received_unix_nano
                                                       : (uint64_t)time(NULL) * 1000000000ull;
    /* the X-Scope-OrgID the batch arrived with (receivers' metadata) */
    pl_bytes tenant = {0};
    pl_batch_metadata_get(batch, "tenant", &tenant);
    /* the last (name, labels) -> service id */
    int64_t memo_name = 0, memo_service = 0;
    pl_buf json, res_json, memo_json, key;
    pl_buf_init(&json);
    pl_buf_init(&res_json);
    pl_buf_init(&memo_json);
    pl_buf_init(&key);
    label_set *res_labels = malloc(2 * sizeof(label_set)), *labels = res_labels + 1;
    if (!res_labels)
        rc = SQLITE_NOMEM;

    for (uint32_t r = 0; r < pr->n_resources && rc == SQLITE_OK; r++) {
        const pl_resource_profiles *rp = &pr->resources[r];
        pl_bytes res_service = attr_string(&rp->resource.attrs, "service.name");
        res_labels->n = 0;
        for (uint32_t ai = 0; ai < rp->resource.attrs.n; ai++) {
            const pl_kv *kv = &rp->resource.attrs.items[ai];
            if (kv->value.type == PL_VALUE_STRING)
                label_add(res_labels, kv->key, kv->value.u.str);
        }
        pl_buf_reset(&res_json);
        if (res_labels->n)
            labels_json(res_labels, &res_json); /* sorts them: merged after the sample's */
        for (uint32_t sc = 0; sc < rp->n_scopes && rc == SQLITE_OK; sc++) {
            const pl_scope_profiles *sp = &rp->scopes[sc];
            for (uint32_t pi = 0; pi < sp->n_profiles && rc == SQLITE_OK; pi++) {
                const pl_profile *p = &sp->profiles[pi];
                pl_bytes type = pl_dict_string(dict, p->sample_type.type_strindex);
                pl_bytes unit = pl_dict_string(dict, p->sample_type.unit_strindex);
                char type_text[256];
                int tlen = snprintf(type_text, sizeof(type_text), "%.*s:%.*s",
                                    (int)(type.len > 120 ? 120 : type.len), (const char *)type.ptr,
                                    (int)(unit.len > 120 ? 120 : unit.len), (const char *)unit.ptr);
                int64_t type_id;
                rc = string_id(s, type_text, (size_t)tlen, &type_id);
                if (rc == SQLITE_OK)
                    rc = write_profile_type(s, dict, p, type_id);
                clock_mult mult = {clock_multiplier(dict, p, "cpu"),
                                   clock_multiplier(dict, p, "wall")};
                uint64_t ptime = p->time_unix_nano ? p->time_unix_nano : fallback_time;
                for (uint32_t si = 0; si < p->n_samples && rc == SQLITE_OK; si++) {
                    const pl_sample *smp = &p->samples[si];
                    sample_key k = {0};
                    k.type_id = type_id;
                    rc = dict_stack_id(s, &d, smp->stack_index, &k.stack_id);
                    if (rc != SQLITE_OK)
                        break;
                    if (k.stack_id == 0)
                        continue; /* no stack: nothing to draw */
                    /* Span link: the Link first, then the span_id attribute. */
                    uint8_t trace_id[16];
                    bool has_trace = false, has_span = false;
                    uint8_t span_bytes[8];
                    if (smp->link_index > 0 && (uint32_t)smp->link_index < dict->n_links) {
                        const pl_link *l = &dict->links[smp->link_index];
                        if (l->span_id_len == 8 && !all_zero(l->span_id, 8)) {
                            memcpy(span_bytes, l->span_id, 8);
                            has_span = true;
                        }
                        if (l->trace_id_len == 16 && !all_zero(l->trace_id, 16)) {
                            memcpy(trace_id, l->trace_id, 16);
                            has_trace = true;
                        }
                    }
                    pl_bytes service = res_service;
                    labels->n = 0;
                    for (uint32_t ai = 0; ai < smp->n_attribute_indices; ai++) {
                        int32_t idx = smp->attribute_indices[ai];
                        if (idx <= 0 || (uint32_t)idx >= dict->n_attributes)
                            continue;
                        const pl_kvu *kv = &dict->attributes[idx];
                        pl_bytes akey = pl_dict_string(dict, kv->key_strindex);
                        pl_bytes val = {NULL, 0};
                        if (kv->value.type == PL_VALUE_STRING)
                            val = kv->value.u.str;
                        else if (kv->value.type == PL_VALUE_STRINDEX)
                            val = pl_dict_string(dict, kv->value.u.strindex);
                        else
                            continue;
                        label_add(labels, akey, val);
                        if (pl_bytes_eq_cstr(akey, "service.name") && val.len) {
                            service = val;
                        } else if (!has_span && (pl_bytes_eq_cstr(akey, "span_id") ||
                                                 pl_bytes_eq_cstr(akey, "profile_id"))) {
                            if (val.len == 16 &&
                                pl_hex_decode((const char *)val.ptr, 16, span_bytes, 8) == 0 &&
                                !all_zero(span_bytes, 8))
                                has_span = true;
                        } else if (!has_trace && pl_bytes_eq_cstr(akey, "trace_id")) {
                            if (val.len == 32 &&
                                pl_hex_decode((const char *)val.ptr, 32, trace_id, 16) == 0 &&
                                !all_zero(trace_id, 16))
                                has_trace = true;
                        }
                    }
                    if (!service.len)
                        service = PL_BYTES_LIT("unknown_service");
                    int64_t name_id;
                    rc = string_id(s, (const char *)service.ptr, service.len, &name_id);
                    /* the sample's labels, then the resource's (the
                     * resource's alone: made once per resource) */
                    pl_buf *lj_buf = &res_json;
                    if (labels->n) {
                        for (uint32_t li = 0; li < res_labels->n; li++)
                            label_add(labels, res_labels->key[li], res_labels->val[li]);
                        labels_json(labels, &json);
                        lj_buf = &json;
                    }
                    if (rc == SQLITE_OK && !pl_buf_ok(lj_buf))
                        rc = SQLITE_NOMEM;
                    if (rc == SQLITE_OK &&
                        (name_id != memo_name || lj_buf->len != memo_json.len ||
                         (lj_buf->len && memcmp(lj_buf->data, memo_json.data, lj_buf->len) != 0))) {
                        pl_bytes lj = {lj_buf->data, (uint32_t)lj_buf->len};
                        rc = service_id(s, tenant, name_id, service, lj, &key, &memo_service);
                        memo_name = rc == SQLITE_OK ? name_id : 0;
                        pl_buf_reset(&memo_json);
                        pl_buf_append(&memo_json, lj_buf->data, lj_buf->len);
                        if (!pl_buf_ok(&memo_json))
                            rc = SQLITE_NOMEM;
                    }
                    if (rc != SQLITE_OK)
                        break;
                    k.service_id = memo_service;
                    k.span_id = has_span ? span_id_int(span_bytes) : 0;
                    const uint8_t *tid = has_trace ? trace_id : NULL;
                    uint64_t latest = 0;
                    if (smp->n_timestamps) {
                        bool per_ts = smp->n_values == smp->n_timestamps;
                        int64_t total = 0;
                        for (uint32_t v = 0; v < smp->n_values; v++)
                            total += smp->values[v];
                        for (uint32_t t = 0; t < smp->n_timestamps && rc == SQLITE_OK; t++) {
                            uint64_t ts = smp->timestamps_unix_nano[t];
                            if (!ts)
                                ts = ptime;
                            int64_t value = per_ts ? smp->values[t]
                                                   : (smp->n_values ? (t == 0 ? total : 0) : 1);
                            k.bucket = (int64_t)(ts / PL_STORE_BUCKET_NS);
                            rc = add_sample_value(aggs, &k, tid, value, mult, 1);
                            if (rc == SQLITE_OK)
                                rc = add_rollup(rollup, &k, ts, value, mult);
                            if (ts > latest)
                                latest = ts;
                        }
                        stats->samples += smp->n_timestamps;
                    } else {
                        int64_t total = 0;
                        for (uint32_t v = 0; v < smp->n_values; v++)
                            total += smp->values[v];
                        k.bucket = (int64_t)(ptime / PL_STORE_BUCKET_NS);
                        rc = add_sample_value(aggs, &k, tid, total, mult, 1);
                        if (rc == SQLITE_OK)
                            rc = add_rollup(rollup, &k, ptime, total, mult);
                        latest = ptime;
                        stats->samples++;
                    }
                    int64_t prev;
                    if (!pl_store_u64_map_get(services, (uint64_t)k.service_id, &prev) ||
                        (uint64_t)prev < latest)
                        pl_store_u64_map_put(services, (uint64_t)k.service_id, (int64_t)latest);
                    if (latest > *latest_ns)
                        *latest_ns = latest;
                }
            }
        }
    }
    free(d.strings);
    free(d.functions);
    free(d.stacks);
    free(res_labels);
    pl_buf_free(&json);
    pl_buf_free(&res_json);
    pl_buf_free(&memo_json);
    pl_buf_free(&key);
    return rc;
}

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

static int cmp_sample_agg(const void *a, const void *b)
{
    const sample_key *x = &((const sample_agg *)a)->key, *y = &((const sample_agg *)b)->key;
    int c = cmp_i64(x->service_id, y->service_id);
    if (!c)
        c = cmp_i64(x->bucket, y->bucket);
    if (!c)
        c = cmp_i64(x->type_id, y->type_id);
    if (!c)
        c = cmp_i64(x->span_id, y->span_id);
    if (!c)
        c = cmp_i64(x->stack_id, y->stack_id);
    return c;
}

static int cmp_span_key(const void *a, const void *b)
{
    const sample_key *x = a, *y = b;
    int c = cmp_i64(x->span_id, y->span_id);
    if (!c)
        c = cmp_i64(x->service_id, y->service_id);
    if (!c)
        c = cmp_i64(x->bucket, y->bucket);
    return c ? c : cmp_i64(x->type_id, y->type_id);
}

/* Upserts the collected rows in primary-key order (the maps' hash indexes
 * are stale afterwards: only profile_set_free may follow). */
static int flush_profiles(pl_store *s, profile_set *set, const span_set *txn_spans,
                          pl_store_write_stats *stats)
{
    sample_aggs *aggs = &set->aggs, *rollup = &set->rollup;
    u64_map *services = &set->services;
    int rc = SQLITE_OK;
    if (aggs->n > 1)
        qsort(aggs->items, aggs->n, sizeof(sample_agg), cmp_sample_agg);
    if (rollup->n > 1)
        qsort(rollup->items, rollup->n, sizeof(sample_agg), cmp_sample_agg);
    /* A sample linked to a stored span reaches its trace through the span
     * (every trace query joins samples to the trace's spans by span id), so
     * its row keeps no trace id and adds no entry to samples_by_trace, an
     * index on random ids (a fifth of the writer's time with two samples
     * per span). Samples of no span, or of a span not stored (yet), keep it:
     * queries find those by trace id. The spans this transaction wrote are
     * known stored; others are looked up once. */
    u64_map stored = {0}; /* span id -> 1 stored, 0 not */
    bool seeded = false;
    sample_key *span_keys = NULL; /* stack_id unused */
    size_t n_keys = 0, cap_keys = 0;
    /* rows in key order, PL_STORE_MULTI_ROWS per statement */
    multi_row m;
    multi_row_init(&m, s->st[ST_UPSERT_SAMPLE_MANY], s->st[ST_UPSERT_SAMPLE], 10);
    for (size_t i = 0; i < aggs->n && rc == SQLITE_OK; i++) {
        sample_agg *a = (sample_agg *)(void *)aggs->items + i;
        /* a span's rows' key (PL_SPAN_SAMPLES), once per run of rows that
         * differ only in the stack (the rows are in key order) */
        const sample_key *prev = i ? &((sample_agg *)(void *)aggs->items + i - 1)->key : NULL;
        if (a->key.span_id != 0 &&
            (!prev || prev->span_id != a->key.span_id || prev->service_id != a->key.service_id ||
             prev->bucket != a->key.bucket || prev->type_id != a->key.type_id)) {
            if (pl_array_reserve((void **)&span_keys, n_keys, &cap_keys, sizeof(*span_keys), 256)) {
                rc = SQLITE_NOMEM;
                break;
            }
            span_keys[n_keys++] = a->key;
        }
        if (a->has_trace && a->key.span_id != 0) {
            int64_t known;
            for (size_t j = 0; !seeded && j < txn_spans->n; j++)
                if (!pl_store_u64_map_put(&stored,
                                          (uint64_t)span_id_int(txn_spans->refs[j].sp->span_id), 1))
                    rc = SQLITE_NOMEM;
            seeded = true;
            if (rc != SQLITE_OK)
                break;
            if (!pl_store_u64_map_get(&stored, (uint64_t)a->key.span_id, &known)) {
                known = span_stored(s, a->key.span_id, NULL, &rc);
                if (known < 0)
                    break;
                if (!pl_store_u64_map_put(&stored, (uint64_t)a->key.span_id, known)) {
                    rc = SQLITE_NOMEM;
                    break;
                }
            }
            if (known)
                a->has_trace = false;
        }
        mr_int(&m, a->key.service_id);
        mr_int(&m, a->key.bucket);
        mr_int(&m, a->key.type_id);
        mr_int(&m, a->key.span_id);
        mr_int(&m, a->key.stack_id);
        mr_blob16(&m, a->has_trace ? a->trace_id : NULL);
        mr_int(&m, a->value);
        mr_int(&m, a->cpu_ns);
        mr_int(&m, a->count);
        mr_int(&m, a->wall_ns);
        rc = multi_row_end(&m, s->db);
        stats->sample_rows++;
    }
    if (rc == SQLITE_OK)
        rc = multi_row_finish(&m, s->db);
    pl_store_u64_map_clear(&stored);
    /* the keys in their table's order (span id first), as the span ids */
    if (n_keys > 1)
        qsort(span_keys, n_keys, sizeof(*span_keys), cmp_span_key);
    multi_row_init(&m, s->st[ST_INS_SAMPLE_SPAN_MANY], s->st[ST_INS_SAMPLE_SPAN], 4);
    for (size_t i = 0; i < n_keys && rc == SQLITE_OK; i++) {
        mr_int(&m, span_keys[i].span_id);
        mr_int(&m, span_keys[i].service_id);
        mr_int(&m, span_keys[i].bucket);
        mr_int(&m, span_keys[i].type_id);
        rc = multi_row_end(&m, s->db);
    }
    if (rc == SQLITE_OK)
        rc = multi_row_finish(&m, s->db);
    s->skeys_new += m.changes;
    free(span_keys);
    sqlite3_stmt *st;
    /* series totals: the rows are in (service, bucket, type) order */
    st = s->st[ST_UPSERT_TOTAL];
    for (size_t i = 0; i < aggs->n && rc == SQLITE_OK;) {
        const sample_key *k = &((sample_agg *)(void *)aggs->items + i)->key;
        int64_t sum = 0;
        size_t j = i;
        for (; j < aggs->n; j++) {
            const sample_agg *b = (sample_agg *)(void *)aggs->items + j;
            if (b->key.service_id != k->service_id || b->key.bucket != k->bucket ||
                b->key.type_id != k->type_id)
                break;
            if (__builtin_add_overflow(sum, b->value, &sum))
                sum = INT64_MAX;
        }
        sqlite3_bind_int64(st, 1, k->service_id);
        sqlite3_bind_int64(st, 2, k->type_id);
        sqlite3_bind_int64(st, 3, k->bucket);
        sqlite3_bind_int64(st, 4, sum);
        rc = step_reset(st);
        i = j;
    }
    st = s->st[ST_UPSERT_ROLLUP];
    for (size_t i = 0; i < rollup->n && rc == SQLITE_OK; i++) {
        sample_agg *a = (sample_agg *)(void *)rollup->items + i;
        sqlite3_bind_int64(st, 1, a->key.service_id);
        sqlite3_bind_int64(st, 2, a->key.bucket);
        sqlite3_bind_int64(st, 3, a->key.type_id);
        sqlite3_bind_int64(st, 4, a->key.stack_id);
        sqlite3_bind_int64(st, 5, a->value);
        sqlite3_bind_int64(st, 6, a->cpu_ns);
        sqlite3_bind_int64(st, 7, a->count);
        sqlite3_bind_int64(st, 8, a->wall_ns);
        rc = step_reset(st);
    }
    st = s->st[ST_UPSERT_SERVICE];
    for (size_t i = 0; i < services->n && rc == SQLITE_OK; i++) {
        sqlite3_bind_int64(st, 1, (int64_t)services->entries[i].key);
        sqlite3_bind_int64(st, 2, services->entries[i].val);
        rc = step_reset(st);
    }
    return rc;
}

/* Moves the ids of the spans written since the last merge into span_ids,
 * and their traces' span ranges into trace_spans: in key order, so each
 * page of the large tables is changed once per merge, not once per
 * transaction (store_internal.h, PL_SPAN_ROW, PL_TRACE_SPANS). */
static int merge_span_ids(pl_store *s)
{
    int rc = sqlite3_exec(s->db,
                          "INSERT OR REPLACE INTO span_ids(span_id, rid) "
                          "SELECT span_id, rid FROM span_ids_new ORDER BY span_id;"
                          "DELETE FROM span_ids_new;"
                          "INSERT OR IGNORE INTO trace_spans(trace_id, first, last) "
                          "SELECT trace_id, first, last FROM trace_spans_new ORDER BY trace_id, "
                          "first;"
                          "DELETE FROM trace_spans_new;",
                          NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        s->ids_old += s->ids_new;
        s->ids_new = 0;
    }
    return rc;
}

/* The same for the sample keys (PL_SPAN_SAMPLES). The large table's count
 * is an estimate (a key may be in both tables); it only paces sweeps. */
static int merge_sample_spans(pl_store *s)
{
    int rc =
        sqlite3_exec(s->db,
                     "INSERT OR IGNORE INTO sample_spans(span_id, service_id, bucket, type_id) "
                     "SELECT span_id, service_id, bucket, type_id FROM sample_spans_new "
                     "ORDER BY span_id, service_id, bucket, type_id;"
                     "DELETE FROM sample_spans_new;",
                     NULL, NULL, NULL);
    if (rc == SQLITE_OK) {
        s->skeys_old += s->skeys_new;
        s->skeys_new = 0;
    }
    return rc;
}

pl_status pl_store_write_many(pl_store *s, const pl_batch *const *batches, size_t n,
                              pl_store_write_stats *stats, pl_err *err)
{
    pl_store_write_stats local = {0};
    if (!stats)
        stats = &local;
    span_set spans = {0};
    profile_set profiles = PROFILE_SET;
    bool any_profiles = false;
    int rc = SQLITE_OK;
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        const pl_batch *batch = batches[i];
        if (batch->signal == PL_SIGNAL_TRACES) {
            pl_bytes tenant = {0};
            pl_batch_metadata_get(batch, "tenant", &tenant);
            rc = collect_spans(s, &batch->data.traces, tenant, &spans, stats);
        } else if (batch->signal == PL_SIGNAL_PROFILES) {
            uint64_t latest = 0;
            rc = collect_profiles(s, batch, &profiles, stats, &latest);
            any_profiles = true;
        }
    }
    if (rc == SQLITE_OK && spans.n)
        rc = flush_spans(s, &spans, stats);
    if (rc == SQLITE_OK && any_profiles)
        rc = flush_profiles(s, &profiles, &spans, stats);
    int64_t merge_at = s->ids_merge > 0 ? s->ids_merge : PL_SPAN_IDS_MERGE;
    if (rc == SQLITE_OK && s->ids_new >= merge_at)
        rc = merge_span_ids(s);
    if (rc == SQLITE_OK && s->skeys_new >= merge_at)
        rc = merge_sample_spans(s);
    span_set_free(&spans);
    profile_set_free(&profiles);
    if (rc != SQLITE_OK) {
        if (rc == SQLITE_NOMEM)
            return pl_errf(err, PL_ERR_NOMEM, "sqlite store %s: out of memory", s->path);
        return pl_store_fail(s, rc, err, "cannot write");
    }
    return PL_OK;
}

pl_status pl_store_write(pl_store *s, const pl_batch *batch, pl_store_write_stats *stats,
                         pl_err *err)
{
    return pl_store_write_many(s, &batch, 1, stats, err);
}
