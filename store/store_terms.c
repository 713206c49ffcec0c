/*
 * store_terms.c: the search-term index (store_terms.h): what the writer adds
 * per span, what retention deletes, and the candidate buckets of a TraceQL
 * expression.
 */
#include "store/store_terms.h"

#include "core/hash.h"

#include <math.h>

_Static_assert(PL_TERMS_BUCKET_NS == 10000000000ll, "PL_BUCKET_OF divides by the bucket width");

const char pl_store_terms_schema_sql[] =
    "CREATE TABLE IF NOT EXISTS span_terms(term INTEGER NOT NULL, minute INTEGER NOT NULL,"
    "  lo, hi, PRIMARY KEY(term, minute)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS span_terms_by_minute ON span_terms(minute);";

/* ---- terms ---------------------------------------------------------------- */

enum {
    T_ANY = 1, /* the bucket has indexed spans */
    T_SVC,
    T_NAME,
    T_PAIR, /* (service, name) */
    T_STATUS,
    T_KIND,
    T_SVC_OVF,  /* more services than the cap: not all have rows */
    T_NAME_OVF, /* more names / pairs than the cap */
    T_KEY,      /* attribute key present (per scope) */
    T_STR,      /* key = string */
    T_BOOL,     /* key = true/false */
    T_NUMV,     /* key = integral number (|v| < 2^53) */
    T_NUM,      /* key's numbers: lo, hi */
    T_VOVF,     /* key has values without a value row */
    T_KOVF,     /* more keys than the cap (per scope) */
    T_RES,      /* writer memory only: a resource's attributes are done */
};

#define SEED_TAG 0x9e3779b97f4a7c15ull

static uint64_t nonzero(uint64_t h)
{
    return h ? h : 1;
}

/* Up to 8 bytes, little-endian whatever the machine: terms are stored. */
static uint64_t load_le(const uint8_t *p, size_t n)
{
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
}

/* Unkeyed and stable (the terms are stored), 8 bytes a step: the writer
 * hashes every span's names and attributes. A collision only makes a
 * bucket a candidate it need not be. */
static uint64_t term_bytes(int tag, uint64_t seed, const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = pl_mix64(seed ^ ((uint64_t)tag * SEED_TAG) ^ (uint64_t)n);
    for (; n >= 8; s += 8, n -= 8) {
        h = (h ^ load_le(s, 8)) * 0x9fb21c651e98df25ull;
        h ^= h >> 29;
    }
    h = (h ^ load_le(s, n)) * 0x9fb21c651e98df25ull;
    return nonzero(pl_mix64(h));
}

static uint64_t term_int(int tag, uint64_t seed, int64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    return term_bytes(tag, seed, b, 8);
}

static uint64_t term_tag(int tag, uint64_t seed)
{
    return term_bytes(tag, seed, "", 0);
}

/* scope: 0 span attributes, 1 resource attributes */
static uint64_t key_term(int scope, const void *key, size_t len)
{
    return term_bytes(T_KEY, (uint64_t)scope + 1, key, len);
}

/* integral and exactly representable: the value rows of numbers */
static bool simple_double(double d, int64_t *out)
{
    if (!isfinite(d) || d != trunc(d) || fabs(d) >= 9007199254740992.0)
        return false;
    *out = (int64_t)d;
    return true;
}

static bool simple_int(int64_t i)
{
    return i > -9007199254740992ll && i < 9007199254740992ll;
}

/* ---- the writer's memory ---------------------------------------------------- */

typedef struct num {
    bool is_int;
    int64_t i;
    double d;
} num;

/* exact comparison of a double with an int64, as SQLite compares them */
static int cmp_double_int(double d, int64_t i)
{
    if (d < -9223372036854775808.0)
        return -1;
    if (d >= 9223372036854775808.0)
        return 1;
    int64_t t = (int64_t)d; /* trunc(d), exactly representable */
    if (t != i)
        return t < i ? -1 : 1;
    double frac = d - (double)t;
    return (frac > 0) - (frac < 0);
}

static int num_cmp(num a, num b)
{
    if (a.is_int && b.is_int)
        return (a.i > b.i) - (a.i < b.i);
    if (!a.is_int && !b.is_int)
        return (a.d > b.d) - (a.d < b.d);
    if (a.is_int)
        return -cmp_double_int(b.d, a.i);
    return cmp_double_int(a.d, b.i);
}

/* each purpose its own bit, so that entries whose keys collide cannot
 * stand in for one another */
enum { F_ROW = 1, F_VOVF = 2, F_NUM = 4, F_DONE = 8, F_VDONE = 16, F_HDONE = 32 };

typedef struct term_entry {
    uint64_t term;
    int64_t bucket;
    uint32_t count; /* values of a key; keys / names / services of a counter */
    uint8_t flags;
    num lo, hi;
} term_entry;

struct pl_store_terms {
    pl_htab index; /* entry number + 1 */
    term_entry *e;
    size_t n, cap;
    sqlite3_stmt *ins, *num, *stored;
    /* the bucket of the last span and what it has for sure: its T_ANY row,
     * status codes and kinds 0..15 (bits) */
    int64_t cur;
    bool have_cur;
    uint16_t status_seen, kind_seen;
    uint64_t any, name_ovf, svc_ovf, kovf[2]; /* constant terms */
};

#define TERMS_MAX_ENTRIES (1u << 17)

typedef struct entry_key {
    const struct pl_store_terms *t;
    uint64_t term;
    int64_t bucket;
} entry_key;

static bool entry_eq(const void *ctx, uint32_t val)
{
    const entry_key *k = ctx;
    const term_entry *e = &k->t->e[val - 1];
    return e->term == k->term && e->bucket == k->bucket;
}

void pl_store_terms_forget(pl_store *s)
{
    struct pl_store_terms *t = s->terms;
    if (!t)
        return;
    sqlite3_finalize(t->ins);
    sqlite3_finalize(t->num);
    sqlite3_finalize(t->stored);
    pl_htab_free(&t->index);
    free(t->e);
    free(t);
    s->terms = NULL;
}

/* The entry of (term, bucket) as an index (-1 on OOM). */
static long entry(struct pl_store_terms *t, uint64_t term, int64_t bucket)
{
    entry_key k = {t, term, bucket};
    uint32_t h = (uint32_t)pl_hash_u64(term ^ pl_hash_u64((uint64_t)bucket));
    uint32_t *slot = pl_htab_slot(&t->index, h, entry_eq, &k);
    if (!slot)
        return -1;
    if (*slot)
        return (long)*slot - 1;
    if (pl_array_reserve((void **)&t->e, t->n, &t->cap, sizeof(*t->e), 256))
        return -1;
    t->e[t->n] = (term_entry){.term = term, .bucket = bucket};
    *slot = (uint32_t)++t->n;
    pl_htab_added(&t->index, slot, h);
    return (long)t->n - 1;
}

static int insert_row(struct pl_store_terms *t, uint64_t term, int64_t bucket)
{
    sqlite3_bind_int64(t->ins, 1, (int64_t)term);
    sqlite3_bind_int64(t->ins, 2, bucket);
    return step_reset(t->ins);
}

/* The entry of (term, bucket) if there is one, else -1 (nothing added). */
static long entry_find(const struct pl_store_terms *t, uint64_t term, int64_t bucket)
{
    entry_key k = {t, term, bucket};
    uint32_t h = (uint32_t)pl_hash_u64(term ^ pl_hash_u64((uint64_t)bucket));
    uint32_t v = pl_htab_get(&t->index, h, entry_eq, &k);
    return v ? (long)v - 1 : -1;
}

/* Makes sure the row (term, bucket) exists. */
static int mark(struct pl_store_terms *t, uint64_t term, int64_t bucket)
{
    long i = entry(t, term, bucket);
    if (i < 0)
        return SQLITE_NOMEM;
    if (t->e[i].flags & F_ROW)
        return SQLITE_OK;
    int rc = insert_row(t, term, bucket);
    if (rc == SQLITE_OK)
        t->e[i].flags |= F_ROW;
    return rc;
}

/* A capped member (service, name, key): *ok = it has its row (else the
 * counter's overflow row is there). */
static int capped_at(struct pl_store_terms *t, uint64_t term, uint64_t counter, uint32_t cap,
                     int64_t bucket, bool *ok, long *at)
{
    long i = entry(t, term, bucket);
    if (i < 0)
        return SQLITE_NOMEM;
    *at = i;
    *ok = (t->e[i].flags & F_ROW) != 0;
    if (*ok)
        return SQLITE_OK;
    long c = entry(t, counter, bucket);
    if (c < 0)
        return SQLITE_NOMEM;
    if (t->e[c].flags & F_ROW)
        return SQLITE_OK; /* overflowed already */
    if (t->e[c].count >= cap)
        return mark(t, counter, bucket);
    int rc = insert_row(t, term, bucket);
    if (rc == SQLITE_OK) {
        t->e[c].count++;
        t->e[i].flags |= F_ROW; /* indexes are stable: no entry added since */
        *ok = true;
    }
    return rc;
}

static int capped(struct pl_store_terms *t, uint64_t term, uint64_t counter, uint32_t cap,
                  int64_t bucket, bool *ok)
{
    long at;
    return capped_at(t, term, counter, cap, bucket, ok, &at);
}

static int value_overflow(struct pl_store_terms *t, long ke, uint64_t kh, int64_t bucket)
{
    if (t->e[ke].flags & F_VOVF)
        return SQLITE_OK;
    int rc = mark(t, term_tag(T_VOVF, kh), bucket);
    if (rc == SQLITE_OK) {
        /* `mark` may have grown the entries: ke is an index, still valid */
        t->e[ke].flags |= F_VOVF;
    }
    return rc;
}

static int value_row(struct pl_store_terms *t, long ke, uint64_t kh, uint64_t term, int64_t bucket)
{
    if (t->e[ke].flags & F_VOVF)
        return SQLITE_OK;
    long v = entry(t, term, bucket);
    if (v < 0)
        return SQLITE_NOMEM;
    if (t->e[v].flags & F_ROW)
        return SQLITE_OK;
    if (t->e[ke].count >= PL_TERMS_VALUE_CAP)
        return value_overflow(t, ke, kh, bucket);
    int rc = insert_row(t, term, bucket);
    if (rc == SQLITE_OK) {
        t->e[v].flags |= F_ROW;
        t->e[ke].count++;
    }
    return rc;
}

static void bind_num(sqlite3_stmt *st, int i, num v)
{
    if (v.is_int)
        sqlite3_bind_int64(st, i, v.i);
    else
        sqlite3_bind_double(st, i, v.d);
}

/* Widens the key's number range to include v. */
static int num_range(struct pl_store_terms *t, long ke, uint64_t kh, num v, int64_t bucket)
{
    term_entry *e = &t->e[ke];
    if ((e->flags & F_NUM) && num_cmp(v, e->lo) >= 0 && num_cmp(v, e->hi) <= 0)
        return SQLITE_OK;
    num lo = v, hi = v;
    if (e->flags & F_NUM) {
        if (num_cmp(e->lo, lo) < 0)
            lo = e->lo;
        if (num_cmp(e->hi, hi) > 0)
            hi = e->hi;
    }
    sqlite3_bind_int64(t->num, 1, (int64_t)term_tag(T_NUM, kh));
    sqlite3_bind_int64(t->num, 2, bucket);
    bind_num(t->num, 3, lo);
    bind_num(t->num, 4, hi);
    int rc = step_reset(t->num);
    if (rc == SQLITE_OK) {
        e->lo = lo;
        e->hi = hi;
        e->flags |= F_NUM;
    }
    return rc;
}

static bool has_nul(pl_bytes b)
{
    return b.len && memchr(b.ptr, 0, b.len) != NULL;
}

/* One attribute, as the attributes' JSON stores it (core/value_json.c,
 * pl_vj_store) and json_extract reads it back. */
static int attr_terms_slow(struct pl_store_terms *t, int scope, const pl_kv *kv, uint64_t kh,
                           int64_t bucket);

/* Fast path: the same key and simple value again in this bucket. */
static int attr_terms(struct pl_store_terms *t, int scope, const pl_kv *kv, int64_t bucket)
{
    uint64_t kh = key_term(scope, kv->key.ptr, kv->key.len);
    const pl_value *v = &kv->value;
    uint64_t vt = 0;
    int64_t iv;
    if (v->type == PL_VALUE_STRING)
        vt = term_bytes(T_STR, kh, v->u.str.ptr, v->u.str.len);
    else if (v->type == PL_VALUE_BOOL)
        vt = term_int(T_BOOL, kh, v->u.b ? 1 : 0);
    else if (v->type == PL_VALUE_INT && simple_int(v->u.i))
        vt = term_int(T_NUMV, kh, v->u.i);
    else if (v->type == PL_VALUE_DOUBLE && simple_double(v->u.d, &iv))
        vt = term_int(T_NUMV, kh, iv);
    if (!vt)
        return attr_terms_slow(t, scope, kv, kh, bucket);
    /* a second entry for (value, bucket): F_DONE once this key = value
     * has been handled whole (key row, value row or overflow, range) */
    uint64_t done = vt ^ 0x5bd1e9955bd1e995ull;
    long d = entry_find(t, done, bucket);
    if (d >= 0 && (t->e[d].flags & F_VDONE))
        return SQLITE_OK;
    /* a string of a key whose values overflowed in this bucket adds
     * nothing: no entry for it either, or values that never repeat
     * (request ids) would fill the memory and empty it every few thousand
     * spans */
    long ke = entry_find(t, kh, bucket);
    if (ke >= 0 && v->type == PL_VALUE_STRING && (t->e[ke].flags & F_ROW) &&
        (t->e[ke].flags & F_VOVF))
        return SQLITE_OK;
    int rc = attr_terms_slow(t, scope, kv, kh, bucket);
    if (rc == SQLITE_OK && d < 0)
        d = entry(t, done, bucket);
    if (d < 0)
        return rc == SQLITE_OK ? SQLITE_NOMEM : rc;
    if (rc == SQLITE_OK)
        t->e[d].flags |= F_VDONE; /* d: an index, valid after growth */
    return rc;
}

static int attr_terms_slow(struct pl_store_terms *t, int scope, const pl_kv *kv, uint64_t kh,
                           int64_t bucket)
{
    bool ok;
    long ke;
    int rc = capped_at(t, kh, t->kovf[scope], PL_TERMS_KEY_CAP, bucket, &ok, &ke);
    if (rc != SQLITE_OK || !ok)
        return rc;
    const pl_value *v = &kv->value;
    int64_t iv;
    switch (v->type) {
    case PL_VALUE_EMPTY: /* null */
        return SQLITE_OK;
    case PL_VALUE_STRING:
        if (has_nul(v->u.str))
            return value_overflow(t, ke, kh, bucket);
        return value_row(t, ke, kh, term_bytes(T_STR, kh, v->u.str.ptr, v->u.str.len), bucket);
    case PL_VALUE_BOOL: /* json_extract: 1 / 0, json_type true / false */
        rc = value_row(t, ke, kh, term_int(T_BOOL, kh, v->u.b ? 1 : 0), bucket);
        if (rc == SQLITE_OK)
            rc = value_row(t, ke, kh, term_int(T_NUMV, kh, v->u.b ? 1 : 0), bucket);
        if (rc == SQLITE_OK)
            rc = num_range(t, ke, kh, (num){true, v->u.b ? 1 : 0, 0}, bucket);
        return rc;
    case PL_VALUE_INT:
        rc = simple_int(v->u.i) ? value_row(t, ke, kh, term_int(T_NUMV, kh, v->u.i), bucket)
                                : value_overflow(t, ke, kh, bucket);
        if (rc == SQLITE_OK)
            rc = num_range(t, ke, kh, (num){true, v->u.i, 0}, bucket);
        return rc;
    case PL_VALUE_DOUBLE:
        if (!isfinite(v->u.d)) /* stored as null */
            return SQLITE_OK;
        rc = simple_double(v->u.d, &iv) ? value_row(t, ke, kh, term_int(T_NUMV, kh, iv), bucket)
                                        : value_overflow(t, ke, kh, bucket);
        if (rc == SQLITE_OK)
            rc = num_range(t, ke, kh, (num){false, 0, v->u.d}, bucket);
        return rc;
    default: /* bytes (hex text), arrays, maps: JSON text */
        return value_overflow(t, ke, kh, bucket);
    }
}

static int terms_open(pl_store *s)
{
    if (s->terms && s->terms->n < TERMS_MAX_ENTRIES)
        return SQLITE_OK;
    pl_store_terms_forget(s);
    struct pl_store_terms *t = calloc(1, sizeof(*t));
    if (!t)
        return SQLITE_NOMEM;
    int rc =
        sqlite3_prepare_v3(s->db, "INSERT OR IGNORE INTO span_terms(term, minute) VALUES(?1, ?2)",
                           -1, SQLITE_PREPARE_PERSISTENT, &t->ins, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v3(s->db,
                                "INSERT INTO span_terms(term, minute, lo, hi) VALUES(?1,?2,?3,?4) "
                                "ON CONFLICT(term, minute) DO UPDATE SET lo = min(lo, excluded.lo),"
                                " hi = max(hi, excluded.hi)",
                                -1, SQLITE_PREPARE_PERSISTENT, &t->num, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v3(s->db,
                                "SELECT start_ns FROM spans WHERE rowid = " PL_SPAN_ROW(
                                    "?1") " AND span_id = ?1 AND trace_id = ?2",
                                -1, SQLITE_PREPARE_PERSISTENT, &t->stored, NULL);
    t->any = term_tag(T_ANY, 0);
    t->name_ovf = term_tag(T_NAME_OVF, 0);
    t->svc_ovf = term_tag(T_SVC_OVF, 0);
    t->kovf[0] = term_tag(T_KOVF, 1);
    t->kovf[1] = term_tag(T_KOVF, 2);
    s->terms = t;
    if (rc != SQLITE_OK)
        pl_store_terms_forget(s);
    return rc;
}

static int span_terms(struct pl_store_terms *t, const pl_span *sp, int64_t b, pl_bytes service,
                      int64_t resource_id, const pl_attrs *resource_attrs);

int pl_store_terms_span(pl_store *s, const pl_span *sp, pl_bytes service, int64_t resource_id,
                        const pl_attrs *resource_attrs, bool duplicate)
{
    int rc = terms_open(s);
    if (rc != SQLITE_OK)
        return rc;
    int64_t b = pl_terms_bucket((int64_t)sp->start_time_unix_nano);
    rc = span_terms(s->terms, sp, b, service, resource_id, resource_attrs);
    if (rc != SQLITE_OK || !duplicate)
        return rc;
    /* a copy of a stored span with other times: the stored one's bucket */
    sqlite3_stmt *st = s->terms->stored;
    sqlite3_bind_int64(st, 1, span_id_int(sp->span_id));
    sqlite3_bind_blob(st, 2, sp->trace_id, 16, SQLITE_STATIC);
    rc = sqlite3_step(st);
    int64_t stored = rc == SQLITE_ROW ? pl_terms_bucket(sqlite3_column_int64(st, 0)) : b;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return rc;
    return stored == b ? SQLITE_OK
                       : span_terms(s->terms, sp, stored, service, resource_id, resource_attrs);
}

static int span_terms(struct pl_store_terms *t, const pl_span *sp, int64_t b, pl_bytes service,
                      int64_t resource_id, const pl_attrs *resource_attrs)
{
    int rc = SQLITE_OK;
    if (!t->have_cur || t->cur != b) {
        rc = mark(t, t->any, b);
        t->have_cur = rc == SQLITE_OK;
        t->cur = b;
        t->status_seen = t->kind_seen = 0;
    }
    bool svc_ok = false, name_ok = false, ok;
    uint64_t svc = term_bytes(T_SVC, 0, service.ptr, service.len);
    uint64_t pair = term_bytes(T_PAIR, svc, sp->name.ptr, sp->name.len);
    uint64_t name_ovf = t->name_ovf;
    /* (service, name) seen whole in this bucket: its three rows are done */
    long hd = entry(t, pair ^ 0x2545f4914f6cdd1dull, b);
    if (hd < 0)
        return SQLITE_NOMEM;
    bool header_done = (t->e[hd].flags & F_HDONE) != 0;
    if (rc == SQLITE_OK && !header_done)
        rc = capped(t, svc, t->svc_ovf, PL_TERMS_NAME_CAP, b, &svc_ok);
    if (rc == SQLITE_OK && !header_done)
        rc = capped(t, term_bytes(T_NAME, 0, sp->name.ptr, sp->name.len), name_ovf,
                    PL_TERMS_NAME_CAP, b, &name_ok);
    if (rc == SQLITE_OK && !header_done && svc_ok && name_ok)
        rc = capped(t, pair, name_ovf, PL_TERMS_NAME_CAP, b, &ok);
    if (rc == SQLITE_OK && !header_done)
        t->e[hd].flags |= F_HDONE; /* hd: an index, valid after growth */
    bool small_status = sp->status.code >= 0 && sp->status.code < 16;
    bool small_kind = sp->kind >= 0 && sp->kind < 16;
    if (rc == SQLITE_OK && !(small_status && (t->status_seen >> sp->status.code & 1))) {
        rc = mark(t, term_int(T_STATUS, 0, sp->status.code), b);
        if (rc == SQLITE_OK && small_status)
            t->status_seen |= (uint16_t)(1u << sp->status.code);
    }
    if (rc == SQLITE_OK && !(small_kind && (t->kind_seen >> sp->kind & 1))) {
        rc = mark(t, term_int(T_KIND, 0, sp->kind), b);
        if (rc == SQLITE_OK && small_kind)
            t->kind_seen |= (uint16_t)(1u << sp->kind);
    }
    for (uint32_t i = 0; i < sp->attrs.n && rc == SQLITE_OK; i++)
        rc = attr_terms(t, 0, &sp->attrs.items[i], b);
    if (rc == SQLITE_OK && resource_id && resource_attrs && resource_attrs->n) {
        long r = entry(t, term_int(T_RES, 0, resource_id), b);
        if (r < 0)
            return SQLITE_NOMEM;
        if (!(t->e[r].flags & F_DONE)) {
            for (uint32_t i = 0; i < resource_attrs->n && rc == SQLITE_OK; i++)
                rc = attr_terms(t, 1, &resource_attrs->items[i], b);
            if (rc == SQLITE_OK)
                t->e[r].flags |= F_DONE; /* r: an index, valid after growth */
        }
    }
    return rc;
}

int pl_store_terms_delete_before(pl_store *s, uint64_t cutoff_ns)
{
    pl_store_terms_forget(s);
    int64_t cutoff = cutoff_ns > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)cutoff_ns;
    sqlite3_stmt *st = NULL;
    /* buckets before cutoff's hold spans of traces that started before it
     * (a trace starts at its first span), all deleted; negative buckets
     * (start times past 2^63) stay with the traces they belong to */
    int rc = sqlite3_prepare_v2(
        s->db, "DELETE FROM span_terms WHERE minute >= 0 AND minute < ?1 AND term != 0", -1, &st,
        NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, cutoff / PL_TERMS_BUCKET_NS);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* ---- upgrade ------------------------------------------------------------------ */

/* The services that have spans (in the stores this upgrade meets, a skip
 * scan of their index spans_by_service). */
#define SERVICES_CTE                                                                               \
    "WITH RECURSIVE svc(name) AS (SELECT min(service) FROM spans UNION ALL SELECT (SELECT "        \
    "min(service) FROM spans WHERE service > svc.name) FROM svc WHERE svc.name IS NOT NULL) "

int pl_store_terms_upgrade(sqlite3 *db)
{
    int rc = sqlite3_exec(db, pl_store_terms_schema_sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return rc;
    /* the spans stored so far have no terms: their bucket range is
     * searched without the index */
    return sqlite3_exec(
        db,
        "INSERT OR REPLACE INTO span_terms(term, minute, lo, hi) SELECT 0, 0, "
        "(" SERVICES_CTE "SELECT min((SELECT min(start_ns) FROM spans WHERE service = svc.name)) "
        "FROM svc WHERE name IS NOT NULL), "
        "(" SERVICES_CTE "SELECT max((SELECT max(start_ns) FROM spans WHERE service = svc.name)) "
        "FROM svc WHERE name IS NOT NULL) "
        "WHERE EXISTS (SELECT 1 FROM spans)",
        NULL, NULL, NULL);
}

/* ---- search ------------------------------------------------------------------- */

typedef struct bset {
    int64_t *v;
    size_t n, cap;
} bset;

typedef struct plan {
    pl_store *s;
    const pl_tql *q;
    int64_t lo_b; /* buckets >= lo_b and < 0 */
    sqlite3_stmt *rows, *nums[6];
    int rc;
} plan;

static void bset_free(bset *b)
{
    free(b->v);
    memset(b, 0, sizeof(*b));
}

static int cmp_i64p(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void bset_normalize(bset *b)
{
    if (b->n < 2)
        return;
    qsort(b->v, b->n, sizeof(int64_t), cmp_i64p);
    size_t o = 1;
    for (size_t i = 1; i < b->n; i++)
        if (b->v[i] != b->v[o - 1])
            b->v[o++] = b->v[i];
    b->n = o;
}

static bool bset_add(bset *b, int64_t x)
{
    return pl_array_reserve((void **)&b->v, b->n, &b->cap, sizeof(int64_t), 64) == 0 &&
           (b->v[b->n++] = x, true);
}

/* Adds the buckets of `term` (in the plan's range) to b (unsorted). With
 * num_op, only those whose number range may meet the condition. */
static void add_rows(plan *p, bset *b, uint64_t term, const pl_tql_cond *num_cond)
{
    if (p->rc != SQLITE_OK)
        return;
    sqlite3_stmt *st = p->rows;
    if (num_cond) {
        static const char *const range_sql[] = {
            [PL_TQL_EQ] = "lo <= ?4 AND hi >= ?4",
            [PL_TQL_NE] = "NOT (lo = ?4 AND hi = ?4)",
            [PL_TQL_GT] = "hi > ?4",
            [PL_TQL_GE] = "hi >= ?4",
            [PL_TQL_LT] = "lo < ?4",
            [PL_TQL_LE] = "lo <= ?4",
        };
        int op = num_cond->op;
        if (op < PL_TQL_EQ || op > PL_TQL_LE) {
            p->rc = SQLITE_MISUSE;
            return;
        }
        if (!p->nums[op - 1]) {
            char sql[200];
            snprintf(sql, sizeof(sql),
                     "SELECT minute FROM span_terms WHERE term = ?1 AND minute >= ?2 AND minute "
                     "<= ?3 AND %s",
                     range_sql[op]);
            p->rc = sqlite3_prepare_v2(p->s->db, sql, -1, &p->nums[op - 1], NULL);
            if (p->rc != SQLITE_OK)
                return;
        }
        st = p->nums[op - 1];
        if (num_cond->vtype == PL_TQL_V_FLOAT)
            sqlite3_bind_double(st, 4, num_cond->d);
        else
            sqlite3_bind_int64(st, 4, num_cond->i);
    }
    /* [lo_b, max] and the negative buckets below it */
    int64_t ranges[2][2] = {{p->lo_b > 0 ? p->lo_b : INT64_MIN, INT64_MAX}, {INT64_MIN, -1}};
    for (int r = 0; r < (p->lo_b > 0 ? 2 : 1) && p->rc == SQLITE_OK; r++) {
        sqlite3_bind_int64(st, 1, (int64_t)term);
        sqlite3_bind_int64(st, 2, ranges[r][0]);
        sqlite3_bind_int64(st, 3, ranges[r][1]);
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW)
            if (!bset_add(b, sqlite3_column_int64(st, 0))) {
                rc = SQLITE_NOMEM;
                break;
            }
        sqlite3_reset(st);
        if (rc != SQLITE_DONE)
            p->rc = rc;
    }
}

static bool is_service(const pl_tql_cond *c)
{
    return c->field == PL_TQL_F_RESOURCE && strcmp(c->attr, "service.name") == 0;
}

/* The buckets of one scope's attribute for condition c. */
static void attr_rows(plan *p, bset *b, int scope, const pl_tql_cond *c)
{
    uint64_t kh = key_term(scope, c->attr, strlen(c->attr));
    add_rows(p, b, term_tag(T_KOVF, (uint64_t)scope + 1), NULL);
    bool numeric =
        c->vtype == PL_TQL_V_INT || c->vtype == PL_TQL_V_FLOAT || c->vtype == PL_TQL_V_DURATION;
    bool order = c->op >= PL_TQL_EQ && c->op <= PL_TQL_LE;
    int64_t iv = c->i;
    if (numeric && c->op == PL_TQL_EQ &&
        (c->vtype == PL_TQL_V_FLOAT ? simple_double(c->d, &iv) : simple_int(c->i))) {
        /* an integral value: its value row (or the key's overflow) */
        add_rows(p, b, term_tag(T_VOVF, kh), NULL);
        add_rows(p, b, term_int(T_NUMV, kh, iv), NULL);
        return;
    }
    if (numeric && order) {
        /* typeof(value) IN ('integer','real') AND value op v */
        add_rows(p, b, term_tag(T_NUM, kh), c);
        return;
    }
    if (c->op == PL_TQL_EQ && (c->vtype == PL_TQL_V_STRING || c->vtype == PL_TQL_V_BOOL)) {
        add_rows(p, b, term_tag(T_VOVF, kh), NULL);
        if (c->vtype == PL_TQL_V_STRING)
            add_rows(p, b, term_bytes(T_STR, kh, c->str, strlen(c->str)), NULL);
        else
            add_rows(p, b, term_int(T_BOOL, kh, c->i ? 1 : 0), NULL);
        return;
    }
    /* !=, regular expressions, string order: the key must be there */
    add_rows(p, b, kh, NULL);
}

static void all_rows(plan *p, bset *b)
{
    add_rows(p, b, term_tag(T_ANY, 0), NULL);
}

static void leaf(plan *p, const pl_tql_cond *c, bset *b)
{
    switch (c->field) {
    case PL_TQL_F_NAME:
        if (c->op != PL_TQL_EQ || c->vtype != PL_TQL_V_STRING || !c->str)
            break; /* not a string equality (`= 5`): no term to look for */
        add_rows(p, b, term_tag(T_NAME_OVF, 0), NULL);
        add_rows(p, b, term_bytes(T_NAME, 0, c->str, strlen(c->str)), NULL);
        goto done;
    case PL_TQL_F_STATUS:
        if (c->op != PL_TQL_EQ)
            break;
        add_rows(p, b, term_int(T_STATUS, 0, c->i), NULL);
        goto done;
    case PL_TQL_F_KIND:
        if (c->op != PL_TQL_EQ)
            break;
        add_rows(p, b, term_int(T_KIND, 0, c->i), NULL);
        goto done;
    case PL_TQL_F_RESOURCE:
        if (is_service(c)) { /* the service column */
            if (c->op != PL_TQL_EQ || c->vtype != PL_TQL_V_STRING || !c->str)
                break; /* not a string equality (`= 5`): no term to look for */
            add_rows(p, b, term_tag(T_SVC_OVF, 0), NULL);
            add_rows(p, b, term_bytes(T_SVC, 0, c->str, strlen(c->str)), NULL);
            goto done;
        }
        attr_rows(p, b, 1, c);
        goto done;
    case PL_TQL_F_SPAN:
        attr_rows(p, b, 0, c);
        goto done;
    case PL_TQL_F_ANY: /* the span's value, else the resource's */
        attr_rows(p, b, 0, c);
        attr_rows(p, b, 1, c);
        goto done;
    default: /* durations, status message, trace fields: not indexed */
        break;
    }
    all_rows(p, b);
done:
    bset_normalize(b);
}

static void intersect(bset *a, const bset *b)
{
    size_t i = 0, j = 0, o = 0;
    while (i < a->n && j < b->n) {
        if (a->v[i] < b->v[j])
            i++;
        else if (a->v[i] > b->v[j])
            j++;
        else {
            a->v[o++] = a->v[i];
            i++;
            j++;
        }
    }
    a->n = o;
}

static void eval(plan *p, int n, bset *out);

/* The conjuncts under an AND node. */
static void conjuncts(const pl_tql *q, int n, int *list, int *k)
{
    const pl_tql_node *node = &q->nodes[n];
    if (node->type == PL_TQL_AND) {
        conjuncts(q, node->left, list, k);
        conjuncts(q, node->right, list, k);
    } else if (*k < PL_TQL_MAX_NODES) {
        list[(*k)++] = n;
    }
}

static void eval(plan *p, int n, bset *out)
{
    const pl_tql *q = p->q;
    const pl_tql_node *node = &q->nodes[n];
    if (p->rc != SQLITE_OK)
        return;
    if (node->type == PL_TQL_COND) {
        leaf(p, &q->conds[node->cond], out);
        return;
    }
    if (node->type == PL_TQL_OR) {
        bset r = {0};
        eval(p, node->left, out);
        eval(p, node->right, &r);
        for (size_t i = 0; i < r.n && p->rc == SQLITE_OK; i++)
            if (!bset_add(out, r.v[i]))
                p->rc = SQLITE_NOMEM;
        bset_free(&r);
        bset_normalize(out);
        return;
    }
    int list[PL_TQL_MAX_NODES], k = 0;
    conjuncts(q, n, list, &k);
    const pl_tql_cond *svc = NULL, *name = NULL;
    for (int i = 0; i < k && p->rc == SQLITE_OK; i++) {
        bset r = {0};
        eval(p, list[i], i ? &r : out);
        if (i)
            intersect(out, &r);
        bset_free(&r);
        const pl_tql_node *c = &q->nodes[list[i]];
        if (c->type == PL_TQL_COND && q->conds[c->cond].op == PL_TQL_EQ) {
            if (is_service(&q->conds[c->cond]) && q->conds[c->cond].vtype == PL_TQL_V_STRING &&
                q->conds[c->cond].str)
                svc = &q->conds[c->cond];
            else if (q->conds[c->cond].field == PL_TQL_F_NAME &&
                     q->conds[c->cond].vtype == PL_TQL_V_STRING && q->conds[c->cond].str)
                name = &q->conds[c->cond];
        }
    }
    if (svc && name && p->rc == SQLITE_OK) {
        /* one span has both: the (service, name) pair */
        bset r = {0};
        uint64_t sv = term_bytes(T_SVC, 0, svc->str, strlen(svc->str));
        add_rows(p, &r, term_tag(T_SVC_OVF, 0), NULL);
        add_rows(p, &r, term_tag(T_NAME_OVF, 0), NULL);
        add_rows(p, &r, term_bytes(T_PAIR, sv, name->str, strlen(name->str)), NULL);
        bset_normalize(&r);
        intersect(out, &r);
        bset_free(&r);
    }
}

int pl_store_terms_plan(pl_store *s, const pl_tql *q, uint64_t start_ns, int64_t **buckets,
                        size_t *n, int *rcp)
{
    *buckets = NULL;
    *n = 0;
    *rcp = SQLITE_OK;
    if (q->root < 0)
        return PL_TERMS_SCAN;
    int64_t has_table = 0, min_start = 0, has_traces = 0;
    int rc = pl_store_exec_int(
        s->db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'span_terms'",
        &has_table);
    if (rc == SQLITE_OK && has_table)
        rc = pl_store_exec_int(s->db, "SELECT count(*) FROM (SELECT 1 FROM traces LIMIT 1)",
                               &has_traces);
    if (rc == SQLITE_OK && has_traces)
        rc = pl_store_exec_int(s->db, "SELECT min(start_ns) FROM traces", &min_start);
    if (rc != SQLITE_OK || !has_table || !has_traces) {
        *rcp = rc;
        return PL_TERMS_SCAN;
    }
    /* a trace in range starts at or after both; its spans too, except
     * start times past 2^63 (stored negative) */
    int64_t lo = start_ns > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)start_ns;
    if (min_start > lo)
        lo = min_start;
    plan p = {.s = s, .q = q, .lo_b = pl_terms_bucket(lo)};
    sqlite3_stmt *cover = NULL;
    rc = sqlite3_prepare_v2(s->db, "SELECT lo, hi FROM span_terms WHERE term = 0 AND minute = 0",
                            -1, &cover, NULL);
    bool scan = false;
    if (rc == SQLITE_OK && (rc = sqlite3_step(cover)) == SQLITE_ROW) {
        /* spans from before the index: buckets lo..hi */
        int64_t ulo = sqlite3_column_int64(cover, 0), uhi = sqlite3_column_int64(cover, 1);
        if (sqlite3_column_type(cover, 0) != SQLITE_NULL &&
            (pl_terms_bucket(ulo) < 0 || pl_terms_bucket(uhi) >= p.lo_b))
            scan = true;
    }
    sqlite3_finalize(cover);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        *rcp = rc;
        return PL_TERMS_SCAN;
    }
    if (scan)
        return PL_TERMS_SCAN;
    p.rc = sqlite3_prepare_v2(s->db,
                              "SELECT minute FROM span_terms WHERE term = ?1 AND minute >= ?2 AND "
                              "minute <= ?3",
                              -1, &p.rows, NULL);
    bset all = {0}, c = {0};
    if (p.rc == SQLITE_OK)
        all_rows(&p, &all);
    bset_normalize(&all);
    if (p.rc == SQLITE_OK)
        eval(&p, q->root, &c);
    intersect(&c, &all); /* (every term row's bucket has its T_ANY row) */
    sqlite3_finalize(p.rows);
    for (int i = 0; i < 6; i++)
        sqlite3_finalize(p.nums[i]);
    int out = PL_TERMS_SCAN;
    if (p.rc != SQLITE_OK) {
        *rcp = p.rc;
    } else if (c.n * 2 <= all.n) {
        /* at most half the buckets: read those; more, and walking the
         * traces newest first finds matches as soon */
        *buckets = c.v;
        *n = c.n;
        c.v = NULL;
        out = PL_TERMS_CANDIDATES;
    }
    bset_free(&all);
    bset_free(&c);
    return out;
}
