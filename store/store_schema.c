/*
 * store_schema.c: opening the embedded store (schema, versions, prepared
 * statements), its id caches, transactions and error reporting.
 *
 * Versions. The file carries application_id "plk1" and the schema version in
 * user_version. A writer upgrades an older store in place (2: the trace
 * duration column and its index; 3: span events and resource attributes;
 * 4: wall time per sample row, `wall_ns`; 5: the tenant of each trace; 6: the
 * `profile_types` table, created with the schema; 7: the tenant and
 * SDK labels of a service, `services.name_id`, `tenant`, `labels`, and
 * the `service_totals` roll-up, filled from `samples` on the upgrade; 8:
 * the search-term index `span_terms`, store_terms.h; 9: a trace's spans by
 * rowid ranges, `trace_spans`; 10: span ids in `span_ids` and
 * `span_ids_new` instead of an index on spans; 11: the sample key tables
 * `sample_spans` and `sample_spans_new` instead of an index on
 * samples.span_id; 12: `trace_spans_new`, created with the schema; 13:
 * `span_buckets` instead of the index `spans_by_service`); a
 * reader asks for the upgrade rather than guess.
 */
#include "store/store_internal.h"
#include "store/store_terms.h"

#include "core/hash.h"
#include "core/sqlite_file.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

/* ---- small hash maps ---------------------------------------------------- */

/* The stack hash is stored in the database (stacks.hash, UNIQUE), so it is
 * the same in every process: unkeyed. Only stack_id uses it. The in-memory
 * maps hash client-chosen names, trace ids and keys under the per-process
 * key (core/hash.h) instead. */
uint64_t pl_store_hash_bytes(const void *data, size_t len, uint64_t seed)
{
    /* FNV-1a, then a final avalanche (splitmix64) so low bits are usable. */
    const uint8_t *p = data;
    uint64_t h = 1469598103934665603ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

/* uint64 key -> int64 value (pl_htab). */
void pl_store_u64_map_clear(u64_map *m)
{
    pl_htab_free(&m->index);
    free(m->entries);
    memset(m, 0, sizeof(*m));
}

typedef struct u64_key {
    const u64_map *m;
    uint64_t key;
} u64_key;

static bool u64_eq(const void *ctx, uint32_t val)
{
    const u64_key *k = ctx;
    return k->m->entries[val - 1].key == k->key;
}

bool pl_store_u64_map_get(const u64_map *m, uint64_t key, int64_t *val)
{
    u64_key k = {m, key};
    uint32_t at = pl_htab_get(&m->index, (uint32_t)pl_hash_u64(key), u64_eq, &k);
    if (at)
        *val = m->entries[at - 1].val;
    return at != 0;
}

bool pl_store_u64_map_put(u64_map *m, uint64_t key, int64_t val)
{
    uint32_t h = (uint32_t)pl_hash_u64(key);
    u64_key k = {m, key};
    uint32_t *slot = pl_htab_slot(&m->index, h, u64_eq, &k);
    if (!slot)
        return false;
    if (*slot) {
        m->entries[*slot - 1].val = val;
        return true;
    }
    if (m->n >= UINT32_MAX - 1 ||
        pl_array_reserve((void **)&m->entries, m->n, &m->cap, sizeof(*m->entries), 1024))
        return false;
    m->entries[m->n++] = (struct u64_entry){key, val};
    *slot = (uint32_t)m->n;
    pl_htab_added(&m->index, slot, h);
    return true;
}

/* string -> id (core/intern.h). */
void pl_store_str_map_clear(str_map *m)
{
    pl_intern_free(&m->index);
    free(m->ids);
    memset(m, 0, sizeof(*m));
}

bool pl_store_str_map_get(const str_map *m, const char *s, size_t len, uint64_t h, int64_t *id)
{
    int32_t at = len <= UINT32_MAX ? pl_intern_get(&m->index, s, (uint32_t)len, h) : 0;
    if (at > 0)
        *id = m->ids[at - 1];
    return at > 0;
}

bool pl_store_str_map_put(str_map *m, const char *s, size_t len, uint64_t h, int64_t id)
{
    size_t slot;
    if (len > UINT32_MAX || m->n >= INT32_MAX)
        return false;
    int32_t at = pl_intern_find(&m->index, s, (uint32_t)len, h, &slot);
    if (at < 0)
        return false;
    if (at > 0) {
        m->ids[at - 1] = id;
        return true;
    }
    if (pl_array_reserve((void **)&m->ids, m->n, &m->cap, sizeof(*m->ids), 1024))
        return false;
    if (pl_intern_add(&m->index, slot, s, (uint32_t)len, h, (int32_t)m->n + 1))
        return false;
    m->ids[m->n++] = id;
    return true;
}

/* Caches are bounded: past this many entries they are simply emptied. */
#define CACHE_MAX_ENTRIES (1u << 20)

/* ---- the store ---------------------------------------------------------- */

/* PL_STORE_MULTI_ROWS (32) rows of X, for a multi-row VALUES */
#define ROWS4(X)  X "," X "," X "," X
#define ROWS32(X) ROWS4(ROWS4(X)) "," ROWS4(ROWS4(X))
#define SAMPLE_UPSERT(VALUES)                                                                      \
    "INSERT INTO samples(service_id, bucket, type_id, span_id, stack_id, trace_id, value, "        \
    "cpu_ns, count, wall_ns) VALUES" VALUES                                                        \
    " ON CONFLICT(service_id, bucket, type_id, span_id, stack_id) DO UPDATE SET "                  \
    "value = value + excluded.value, cpu_ns = cpu_ns + excluded.cpu_ns, "                          \
    "wall_ns = wall_ns + excluded.wall_ns, "                                                       \
    "count = count + excluded.count, trace_id = coalesce(trace_id, excluded.trace_id)"

static const char *const write_sql[ST_COUNT] = {
    [ST_INS_SPAN] =
        "INSERT INTO spans(trace_id, span_id, parent_span_id, name, service, "
        "kind, start_ns, end_ns, status_code, status_message, attributes, profile_id, "
        "profile_samples, cpu_time_ns, cpu_time_total_ns, top_functions, resource_id, "
        "events) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)",
    [ST_UPSERT_TRACE] =
        "INSERT INTO traces(trace_id, start_ns, end_ns, root_span_id, root_name, root_service, "
        "root_start_ns, root_end_ns, span_count, error_count, duration_ns, tenant) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12) "
        "ON CONFLICT(trace_id) DO UPDATE SET start_ns = min(start_ns, excluded.start_ns), "
        "tenant = coalesce(tenant, excluded.tenant), "
        "end_ns = max(end_ns, excluded.end_ns), "
        "root_span_id = coalesce(excluded.root_span_id, root_span_id), "
        "root_name = coalesce(excluded.root_name, root_name), "
        "root_service = coalesce(excluded.root_service, root_service), "
        "root_start_ns = coalesce(excluded.root_start_ns, root_start_ns), "
        "root_end_ns = coalesce(excluded.root_end_ns, root_end_ns), "
        "span_count = span_count + excluded.span_count, "
        "error_count = error_count + excluded.error_count, "
        /* the root span's duration once it is known, else the envelope
         * (unqualified names are the row's values before this update) */
        "duration_ns = CASE WHEN excluded.root_span_id IS NOT NULL THEN excluded.duration_ns "
        "WHEN root_span_id IS NOT NULL THEN duration_ns "
        "ELSE max(end_ns, excluded.end_ns) - min(start_ns, excluded.start_ns) END",
    /* a span stored before (straight from a receiver) comes again with
     * the correlation processor's profile summary: keep the summary */
    [ST_UPD_SPAN_PROFILE] =
        "UPDATE spans SET attributes = ?11, profile_id = coalesce(?12, profile_id), "
        "profile_samples = coalesce(?13, profile_samples), "
        "cpu_time_ns = coalesce(?14, cpu_time_ns), "
        "cpu_time_total_ns = coalesce(?15, cpu_time_total_ns), "
        "top_functions = coalesce(?16, top_functions) WHERE rowid = ?2 AND trace_id = ?1",
    [ST_SEL_STRING] = "SELECT id FROM strings WHERE value = ?1",
    [ST_INS_STRING] = "INSERT INTO strings(value) VALUES(?1)",
    [ST_SEL_FUNCTION] = "SELECT id FROM functions WHERE name_id = ?1 AND file_id = ?2",
    [ST_INS_FUNCTION] = "INSERT INTO functions(name_id, file_id) VALUES(?1, ?2)",
    [ST_SEL_STACK] = "SELECT id, frames FROM stacks WHERE hash = ?1",
    [ST_INS_STACK] = "INSERT INTO stacks(hash, frames) VALUES(?1, ?2)",
    [ST_UPSERT_SAMPLE] = SAMPLE_UPSERT("(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)"),
    [ST_UPSERT_SAMPLE_MANY] = SAMPLE_UPSERT(ROWS32("(?,?,?,?,?,?,?,?,?,?)")),
    [ST_UPSERT_ROLLUP] =
        "INSERT INTO service_profiles(service_id, minute, type_id, stack_id, value, cpu_ns, count, "
        "wall_ns) VALUES(?1,?2,?3,?4,?5,?6,?7,?8) ON CONFLICT(service_id, minute, type_id, "
        "stack_id) "
        "DO UPDATE SET value = value + excluded.value, cpu_ns = cpu_ns + excluded.cpu_ns, "
        "wall_ns = wall_ns + excluded.wall_ns, "
        "count = count + excluded.count",
    /* what a Pyroscope server would name the type (store/querier.c) */
    [ST_UPSERT_PROFILE_TYPE] =
        "INSERT INTO profile_types(type_id, name, period_type, period_unit) VALUES(?1,?2,?3,?4) "
        "ON CONFLICT(type_id) DO UPDATE SET name = excluded.name, "
        "period_type = excluded.period_type, period_unit = excluded.period_unit",
    [ST_UPSERT_SERVICE] = "INSERT INTO services(id, last_seen_ns) VALUES(?1, ?2) "
                          "ON CONFLICT(id) DO UPDATE SET last_seen_ns = "
                          "max(last_seen_ns, excluded.last_seen_ns)",
    /* a service of a tenant or with SDK labels: ids below 0, never a
     * string id (store_write.c) */
    [ST_SEL_TENANT_SERVICE] =
        "SELECT id FROM services WHERE name_id = ?2 AND tenant IS ?1 AND labels IS ?3",
    [ST_INS_TENANT_SERVICE] =
        "INSERT INTO services(id, last_seen_ns, name_id, tenant, labels) "
        "SELECT min(coalesce(min(id), 0), 0) - 1, 0, ?2, ?1, ?3 FROM services",
    [ST_UPSERT_TOTAL] = "INSERT INTO service_totals(service_id, type_id, bucket, value) "
                        "VALUES(?1,?2,?3,?4) ON CONFLICT(service_id, type_id, bucket) DO UPDATE "
                        "SET value = value + excluded.value",
    [ST_SPAN_EXISTS] =
        "SELECT rowid FROM spans WHERE rowid = " PL_SPAN_ROW("?1") " AND span_id = ?1",
    [ST_INS_SPAN_ID] = "INSERT OR REPLACE INTO span_ids_new(span_id, rid) VALUES(?1, ?2)",
    [ST_INS_SPAN_ID_MANY] =
        "INSERT OR REPLACE INTO span_ids_new(span_id, rid) VALUES " ROWS32("(?,?)"),
    [ST_INS_SAMPLE_SPAN] = "INSERT OR IGNORE INTO sample_spans_new(span_id, service_id, bucket, "
                           "type_id) VALUES(?1, ?2, ?3, ?4)",
    [ST_INS_SAMPLE_SPAN_MANY] = "INSERT OR IGNORE INTO sample_spans_new(span_id, service_id, "
                                "bucket, type_id) VALUES " ROWS32("(?,?,?,?)"),
    [ST_INS_TRACE_SPANS] = "INSERT OR IGNORE INTO trace_spans_new(trace_id, first, last) "
                           "VALUES(?1,?2,?3)",
    [ST_UPSERT_SPAN_BUCKET] = "INSERT INTO span_buckets(bucket, first, last) VALUES(?1,?2,?3) "
                              "ON CONFLICT(bucket, first) DO UPDATE SET last = max(last, "
                              "excluded.last)",
    [ST_COUNT_LABEL_SETS] = "SELECT count(*) FROM services WHERE name_id = ?2 AND tenant IS ?1 "
                            "AND labels IS NOT NULL",
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS strings(id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);"
    "CREATE TABLE IF NOT EXISTS functions(id INTEGER PRIMARY KEY, name_id INTEGER NOT NULL,"
    "  file_id INTEGER NOT NULL, UNIQUE(name_id, file_id));"
    /* frames: function ids, root first, unsigned LEB128 varints */
    "CREATE TABLE IF NOT EXISTS stacks(id INTEGER PRIMARY KEY, hash INTEGER NOT NULL UNIQUE,"
    "  frames BLOB NOT NULL);"
    /* a service without a tenant or labels: id = the string id of its
     * name (name_id NULL); with a tenant (the X-Scope-OrgID its samples
     * came with) or SDK labels (a JSON object, keys sorted): an id below 0,
     * its name's string id in name_id */
    "CREATE TABLE IF NOT EXISTS services(id INTEGER PRIMARY KEY, last_seen_ns INTEGER NOT NULL,"
    "  name_id INTEGER, tenant TEXT, labels TEXT);"
    "CREATE INDEX IF NOT EXISTS services_by_name ON services(name_id, tenant, labels)"
    "  WHERE name_id IS NOT NULL;"
    "CREATE TABLE IF NOT EXISTS spans(trace_id BLOB NOT NULL, span_id INTEGER NOT NULL,"
    "  parent_span_id INTEGER, name TEXT NOT NULL, service TEXT NOT NULL, kind INTEGER NOT NULL,"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, status_code INTEGER NOT NULL,"
    "  status_message TEXT, attributes TEXT NOT NULL, profile_id TEXT, profile_samples INTEGER,"
    "  cpu_time_ns INTEGER, cpu_time_total_ns INTEGER, top_functions TEXT,"
    /* resource attributes as JSON, stored once in `strings`; span events as
     * a JSON array [{name, time_unix_nano, attributes}] or NULL */
    "  resource_id INTEGER, events TEXT);"
    /* span id -> spans rowid (store_internal.h, PL_SPAN_ROW) */
    "CREATE TABLE IF NOT EXISTS span_ids(span_id INTEGER PRIMARY KEY, rid INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS span_ids_new(span_id INTEGER PRIMARY KEY, rid INTEGER NOT NULL);"
    /* a trace's spans: per transaction that wrote some, their rowids
     * (store_internal.h, PL_TRACE_SPANS); the ranges since the last merge
     * in trace_spans_new */
    "CREATE TABLE IF NOT EXISTS trace_spans(trace_id BLOB NOT NULL, first INTEGER NOT NULL,"
    "  last INTEGER NOT NULL, PRIMARY KEY(trace_id, first)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS trace_spans_new(trace_id BLOB NOT NULL, first INTEGER NOT NULL,"
    "  last INTEGER NOT NULL, PRIMARY KEY(trace_id, first)) WITHOUT ROWID;"
    /* a bucket's spans (store_internal.h, PL_BUCKET_SPANS) */
    "CREATE TABLE IF NOT EXISTS span_buckets(bucket INTEGER NOT NULL, first INTEGER NOT NULL,"
    "  last INTEGER NOT NULL, PRIMARY KEY(bucket, first)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS traces(trace_id BLOB PRIMARY KEY, start_ns INTEGER NOT NULL,"
    "  end_ns INTEGER NOT NULL, root_span_id INTEGER, root_name TEXT, root_service TEXT,"
    "  root_start_ns INTEGER, root_end_ns INTEGER, span_count INTEGER NOT NULL,"
    /* tenant: the X-Scope-OrgID the trace's first stored spans came with */
    "  error_count INTEGER NOT NULL, duration_ns INTEGER NOT NULL DEFAULT 0, tenant TEXT)"
    "  WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS traces_by_start ON traces(start_ns);"
    "CREATE INDEX IF NOT EXISTS traces_by_duration ON traces(duration_ns);"
    "CREATE TABLE IF NOT EXISTS samples(service_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    "  type_id INTEGER NOT NULL, span_id INTEGER NOT NULL, stack_id INTEGER NOT NULL,"
    "  trace_id BLOB, value INTEGER NOT NULL, cpu_ns INTEGER NOT NULL, count INTEGER NOT NULL,"
    /* wall_ns: wall-clock time of the samples (a `wall` type in time units,
     * or samples x period when the period is wall time); cpu_ns the same
     * for CPU time. Queries show CPU, else wall, else counts. */
    "  wall_ns INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY(service_id, bucket, type_id, span_id, stack_id)) WITHOUT ROWID;"
    /* span id -> the first four key columns of its sample rows
     * (store_internal.h, PL_SPAN_SAMPLES) */
    "CREATE TABLE IF NOT EXISTS sample_spans(span_id INTEGER NOT NULL, service_id INTEGER NOT NULL,"
    "  bucket INTEGER NOT NULL, type_id INTEGER NOT NULL,"
    "  PRIMARY KEY(span_id, service_id, bucket, type_id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS sample_spans_new(span_id INTEGER NOT NULL,"
    "  service_id INTEGER NOT NULL, bucket INTEGER NOT NULL, type_id INTEGER NOT NULL,"
    "  PRIMARY KEY(span_id, service_id, bucket, type_id)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS samples_by_trace ON samples(trace_id) WHERE trace_id IS NOT NULL;"
    /* per-minute roll-up of samples by service and stack (no span): what
     * service-wide flame graphs read, a fraction of the rows of `samples` */
    "CREATE TABLE IF NOT EXISTS service_profiles(service_id INTEGER NOT NULL,"
    "  minute INTEGER NOT NULL, type_id INTEGER NOT NULL, stack_id INTEGER NOT NULL,"
    "  value INTEGER NOT NULL, cpu_ns INTEGER NOT NULL, count INTEGER NOT NULL,"
    "  wall_ns INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY(service_id, minute, type_id, stack_id)) WITHOUT ROWID;"
    /* per (service, type, 10 s bucket): the sum of the sample values, no
     * stacks, written from the writer's aggregates; what series without
     * span labels read */
    "CREATE TABLE IF NOT EXISTS service_totals(service_id INTEGER NOT NULL,"
    "  type_id INTEGER NOT NULL, bucket INTEGER NOT NULL, value INTEGER NOT NULL,"
    "  PRIMARY KEY(service_id, type_id, bucket)) WITHOUT ROWID;"
    /* per stored "type:unit" (type_id): the profile name and period of the
     * last profile of that type, from which the Pyroscope querier builds
     * its profile type ids (name:type:unit:period_type:period_unit) */
    "CREATE TABLE IF NOT EXISTS profile_types(type_id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    "  period_type TEXT NOT NULL, period_unit TEXT NOT NULL);";

/* The 12 -> 13 upgrade: the stored spans' bucket ranges, split where the
 * next span of a bucket is more than PL_BUCKET_GAP rows on, as the writer
 * splits them; then the index they replace goes. */
_Static_assert(PL_BUCKET_GAP == 64, "span_buckets_upgrade_sql splits at 64 rows");
/* clang-format off */
static const char span_buckets_upgrade_sql[] =
    "DELETE FROM span_buckets;"
    "WITH r AS (SELECT " PL_BUCKET_OF("start_ns") " AS b, rowid AS id, "
    "rowid - lag(rowid) OVER (PARTITION BY " PL_BUCKET_OF("start_ns") " ORDER BY rowid) > 64 "
    "AS brk FROM spans), "
    "g AS (SELECT b, id, sum(coalesce(brk, 1)) OVER (PARTITION BY b ORDER BY id ROWS UNBOUNDED "
    "PRECEDING) AS run FROM r) "
    "INSERT INTO span_buckets(bucket, first, last) SELECT b, min(id), max(id) FROM g "
    "GROUP BY b, run;"
    "DROP INDEX IF EXISTS spans_by_service;";
/* clang-format on */

static pl_store_error classify(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
        return PL_STORE_ERR_NONE;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return PL_STORE_ERR_BUSY;
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
    case SQLITE_FORMAT:
        return PL_STORE_ERR_CORRUPT;
    case SQLITE_CANTOPEN:
        return PL_STORE_ERR_MISSING;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
        return PL_STORE_ERR_IO;
    default:
        return PL_STORE_ERR_OTHER;
    }
}

static const char *hint_for(pl_store_error kind)
{
    switch (kind) {
    case PL_STORE_ERR_BUSY:
        return " (the database is locked by another process; proflink keeps retrying)";
    case PL_STORE_ERR_CORRUPT:
        return " (the file is corrupt or not a proflink store: move it away or set another "
               "`path`)";
    case PL_STORE_ERR_IO:
        return " (check free disk space and permissions)";
    default:
        return "";
    }
}

/* Records the failure of `what` and formats the error. */
pl_status pl_store_fail(pl_store *s, int rc, pl_err *err, const char *what)
{
    pl_store_error kind = classify(rc);
    if (kind == PL_STORE_ERR_NONE)
        kind = PL_STORE_ERR_OTHER;
    s->last_error = kind;
    const char *msg = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT)
        msg = sqlite3_errstr(rc);
    return pl_errf(err, kind == PL_STORE_ERR_BUSY ? PL_ERR_REFUSED : PL_ERR_INTERNAL,
                   "sqlite store %s: %s: %s%s", s->path, what, msg, hint_for(kind));
}

pl_store_error pl_store_last_error(const pl_store *store)
{
    return store->last_error;
}

const char *pl_store_path(const pl_store *store)
{
    return store->path;
}

static int mkdir_parents(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    char *slash = strrchr(copy, '/');
    if (!slash || slash == copy) {
        free(copy);
        return 0;
    }
    *slash = 0;
    for (char *p = copy + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
            free(copy);
            return -1;
        }
        *p = '/';
    }
    int rc = mkdir(copy, 0755);
    int ok = rc == 0 || errno == EEXIST;
    free(copy);
    return ok ? 0 : -1;
}

int pl_store_exec_int(sqlite3 *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        if (out)
            *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        if (out)
            *out = 0;
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc;
}

pl_status pl_store_open(const char *path, const pl_store_options *options, pl_store **out,
                        pl_store_error *kind_out, pl_err *err)
{
    pl_store_options defaults = {0};
    if (!options)
        options = &defaults;
    *out = NULL;
    if (kind_out)
        *kind_out = PL_STORE_ERR_NONE;
    pl_store *s = calloc(1, sizeof(*s));
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return pl_errf(err, PL_ERR_NOMEM, "sqlite store: out of memory");
    }
    s->read_only = options->read_only;
    pl_buf_init(&s->json);
    pl_buf_init(&s->frames);

    pl_status st = PL_OK;
    int rc;
    if (!s->read_only && mkdir_parents(path) != 0) {
        s->last_error = PL_STORE_ERR_IO;
        st = pl_errf(err, PL_ERR_INTERNAL, "sqlite store %s: cannot create its directory: %s", path,
                     strerror(errno));
        goto fail;
    }
    int flags = s->read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    if (!s->read_only && path[0] && path[0] != ':') {
        /* A damaged store is set aside and a fresh one made, rather than
         * running on (or refusing) a file nothing can read. Its rows are not
         * copied: the store is a cache of what was sent, and may be large. */
        pl_sqlite_file_check(path, "sqlite", NULL, 0);
        /* Client data: the database is created 0600 (SQLite gives its -wal
         * and -shm files the same mode). */
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            close(fd);
    }
    rc = sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        if (s->read_only && (rc & 0xff) == SQLITE_CANTOPEN) {
            s->last_error = PL_STORE_ERR_MISSING;
            st = pl_errf(err, PL_ERR_NOT_FOUND,
                         "no proflink store at %s (run proflink with the sqlite exporter, or "
                         "pass --db PATH)",
                         path);
            goto fail;
        }
        st = pl_store_fail(s, rc, err, "cannot open");
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, options->busy_timeout_ms > 0 ? options->busy_timeout_ms : 5000);

    int64_t app_id = 0, version = 0, n_tables = 0;
    rc = pl_store_exec_int(s->db, "PRAGMA application_id", &app_id);
    if (rc == SQLITE_OK)
        rc = pl_store_exec_int(s->db, "PRAGMA user_version", &version);
    if (rc == SQLITE_OK)
        rc = pl_store_exec_int(s->db, "SELECT count(*) FROM sqlite_master", &n_tables);
    if (rc != SQLITE_OK) {
        st = pl_store_fail(s, rc, err, "cannot read the database header");
        goto fail;
    }
    if ((app_id != 0 && app_id != PL_STORE_APP_ID) || (app_id == 0 && n_tables > 0)) {
        s->last_error = PL_STORE_ERR_CORRUPT;
        st = pl_errf(err, PL_ERR_INTERNAL,
                     "sqlite store %s: this SQLite database is not a proflink store "
                     "(application_id %" PRId64 "): set another `path`",
                     path, app_id);
        goto fail;
    }
    if (version > PL_STORE_SCHEMA_VERSION) {
        s->last_error = PL_STORE_ERR_CORRUPT;
        st = pl_errf(err, PL_ERR_INTERNAL,
                     "sqlite store %s: schema version %" PRId64
                     " is newer than this proflink understands (%d)",
                     path, version, PL_STORE_SCHEMA_VERSION);
        goto fail;
    }
    if (s->read_only) {
        if (app_id == 0) {
            s->last_error = PL_STORE_ERR_MISSING;
            st = pl_errf(err, PL_ERR_NOT_FOUND, "the store at %s is empty (no data written yet)",
                         path);
            goto fail;
        }
        if (version < PL_STORE_SCHEMA_VERSION) {
            s->last_error = PL_STORE_ERR_CORRUPT;
            st = pl_errf(err, PL_ERR_INTERNAL,
                         "the store at %s was written by an older proflink (schema %" PRId64
                         "); start proflink on it once to upgrade it",
                         path, version);
            goto fail;
        }
        /* readers map the file: no read() per page for large scans */
        rc = sqlite3_exec(s->db, "PRAGMA query_only = 1; PRAGMA mmap_size = 268435456", NULL, NULL,
                          NULL);
    } else {
        if (app_id == 0) {
            /* A new file: 16 KiB pages (fewer, fuller B-tree levels: the
             * random-id index inserts of the write path touch and dirty
             * fewer pages per row than with 4 KiB; docs/PERFORMANCE.md,
             * "16 KiB pages"), and no auto-vacuum: pages retention frees
             * go to the free list and new rows reuse them, so the file
             * stays at its high-water mark (at most about max_size) rather
             * than shrinking. Auto-vacuum's pointer map, updated whenever
             * a B-tree page is allocated or its cells move, cost the write
             * path 7-8 % (docs/PERFORMANCE.md, "No auto-vacuum"). Both
             * must be set before the first table exists, the page size
             * first. A store made with other settings keeps them (one
             * made with incremental vacuum still gives pages back). */
            char page[48];
            snprintf(page, sizeof(page), "PRAGMA page_size = %d", PL_STORE_PAGE_SIZE);
            rc = sqlite3_exec(s->db, page, NULL, NULL, NULL);
            if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, "PRAGMA auto_vacuum = NONE", NULL, NULL, NULL);
            if (rc != SQLITE_OK) {
                st = pl_store_fail(s, rc, err, "cannot configure");
                goto fail;
            }
        }
        sqlite3_stmt *wal = NULL;
        rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &wal, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(wal);
            rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
        }
        sqlite3_finalize(wal);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(s->db,
                              "PRAGMA synchronous = NORMAL; PRAGMA journal_size_limit = 67108864;"
                              "PRAGMA temp_store = MEMORY",
                              NULL, NULL, NULL);
        if (rc == SQLITE_OK && (app_id == 0 || version < PL_STORE_SCHEMA_VERSION)) {
            char *ddl = NULL;
            rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && version == 1) /* v1 -> v2 */
                rc = sqlite3_exec(
                    s->db,
                    "ALTER TABLE traces ADD COLUMN duration_ns INTEGER NOT NULL DEFAULT 0;"
                    "UPDATE traces SET duration_ns = CASE WHEN root_span_id IS NOT NULL THEN "
                    "root_end_ns - root_start_ns ELSE end_ns - start_ns END;",
                    NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && version <= 2) /* v2 -> v3 */
                rc = sqlite3_exec(s->db,
                                  "ALTER TABLE spans ADD COLUMN resource_id INTEGER;"
                                  "ALTER TABLE spans ADD COLUMN events TEXT;",
                                  NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && version <= 3) /* v3 -> v4 */
                rc = sqlite3_exec(
                    s->db,
                    "ALTER TABLE samples ADD COLUMN wall_ns INTEGER NOT NULL DEFAULT 0;"
                    "ALTER TABLE service_profiles ADD COLUMN wall_ns INTEGER NOT NULL DEFAULT 0;",
                    NULL, NULL, NULL);
            int64_t has_tenant = 0;
            if (rc == SQLITE_OK && app_id != 0 && version <= 4) /* v4 -> v5 */
                rc = pl_store_exec_int(
                    s->db,
                    "SELECT count(*) FROM pragma_table_info('traces') WHERE name = "
                    "'tenant'",
                    &has_tenant);
            if (rc == SQLITE_OK && app_id != 0 && version <= 4 && !has_tenant)
                rc = sqlite3_exec(s->db, "ALTER TABLE traces ADD COLUMN tenant TEXT;", NULL, NULL,
                                  NULL);
            int64_t svc_cols = 0;
            if (rc == SQLITE_OK && app_id != 0) /* v6 -> v7 */
                rc = pl_store_exec_int(s->db,
                                       "SELECT count(*) FROM pragma_table_info('services') "
                                       "WHERE name = 'labels'",
                                       &svc_cols);
            if (rc == SQLITE_OK && app_id != 0 && !svc_cols)
                rc = sqlite3_exec(s->db,
                                  "ALTER TABLE services ADD COLUMN name_id INTEGER;"
                                  "ALTER TABLE services ADD COLUMN tenant TEXT;"
                                  "ALTER TABLE services ADD COLUMN labels TEXT;",
                                  NULL, NULL, NULL);
            int64_t has_totals = 0;
            if (rc == SQLITE_OK && app_id != 0)
                rc = pl_store_exec_int(s->db,
                                       "SELECT count(*) FROM sqlite_master WHERE name = "
                                       "'service_totals'",
                                       &has_totals);
            if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, schema_sql, NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && !has_totals) /* v6 -> v7: one scan */
                rc = sqlite3_exec(s->db,
                                  "INSERT INTO service_totals(service_id, type_id, bucket, value) "
                                  "SELECT service_id, type_id, bucket, sum(value) FROM samples "
                                  "GROUP BY service_id, bucket, type_id",
                                  NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && version <= 7) /* v7 -> v8 */
                rc = pl_store_terms_upgrade(s->db);
            if (rc == SQLITE_OK && app_id != 0 && version <= 8) /* v8 -> v9: one scan */
                rc = sqlite3_exec(s->db,
                                  "DELETE FROM trace_spans; DELETE FROM trace_spans_new;"
                                  "INSERT INTO trace_spans(trace_id, first, last) "
                                  "SELECT trace_id, rowid, rowid FROM spans;"
                                  "DROP INDEX IF EXISTS spans_by_trace;",
                                  NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && version <= 9) /* v9 -> v10: one scan */
                rc = sqlite3_exec(s->db,
                                  "INSERT OR REPLACE INTO span_ids(span_id, rid) "
                                  "SELECT span_id, rowid FROM spans ORDER BY span_id;"
                                  "DROP INDEX IF EXISTS spans_by_span_id;",
                                  NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && version <= 10) /* v10 -> v11: one scan */
                rc = sqlite3_exec(s->db,
                                  "INSERT OR IGNORE INTO sample_spans(span_id, service_id, bucket, "
                                  "type_id) SELECT span_id, service_id, bucket, type_id FROM "
                                  "samples WHERE span_id != 0 ORDER BY 1, 2, 3, 4;"
                                  "DROP INDEX IF EXISTS samples_by_span;",
                                  NULL, NULL, NULL);
            if (rc == SQLITE_OK && app_id != 0 && version <= 12) /* v12 -> v13: one sort */
                rc = sqlite3_exec(s->db, span_buckets_upgrade_sql, NULL, NULL, NULL);
            if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, pl_store_terms_schema_sql, NULL, NULL, NULL);
            if (rc == SQLITE_OK) {
                ddl = sqlite3_mprintf("PRAGMA application_id = %d; PRAGMA user_version = %d",
                                      PL_STORE_APP_ID, PL_STORE_SCHEMA_VERSION);
                rc = ddl ? sqlite3_exec(s->db, ddl, NULL, NULL, NULL) : SQLITE_NOMEM;
                sqlite3_free(ddl);
            }
            if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
            if (rc != SQLITE_OK) {
                int keep = rc;
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
                rc = keep;
            }
        }
    }
    if (rc != SQLITE_OK) {
        st = pl_store_fail(s, rc, err, "cannot set up the schema");
        goto fail;
    }
    /* The writer's page cache holds the right-hand (newest) parts of the
     * tables and the indexes on random ids (span, trace) whose inserts land
     * anywhere: with 16 MiB a store of a few hundred MB re-reads and
     * re-writes (spills) index pages for every few spans. The cache only
     * grows as pages are touched, so a small store stays small. Readers
     * map the file instead. */
    char cache[64];
    snprintf(cache, sizeof(cache), "PRAGMA cache_size = -%" PRId64,
             options->cache_kib > 0 ? options->cache_kib
                                    : (s->read_only ? 16384 : PL_STORE_WRITER_CACHE_KIB));
    sqlite3_exec(s->db, cache, NULL, NULL, NULL);
    /* Checkpoints copy each page changed since the last one once: with
     * random-id indexes the same pages change in every transaction, so a
     * checkpoint every 1,000 pages (the default) copied them again and
     * again. journal_size_limit still truncates the WAL afterwards. */
    if (!s->read_only) {
        /* 128 MiB of pages; with a size limit, at most an eighth of it
         * waits in the WAL (at least the default 1,000 pages) */
        int64_t page_size = 0;
        pl_store_exec_int(s->db, "PRAGMA page_size", &page_size);
        int64_t pages = PL_STORE_WAL_CHECKPOINT_BYTES / (page_size > 0 ? page_size : 4096);
        if (options->checkpoint_pages > 0)
            pages = options->checkpoint_pages;
        else if (options->max_size && page_size > 0) {
            int64_t cap = (int64_t)(options->max_size / 8 / (uint64_t)page_size);
            if (cap < pages)
                pages = cap < 1000 ? 1000 : cap;
        }
        char sql[64];
        snprintf(sql, sizeof(sql), "PRAGMA wal_autocheckpoint = %" PRId64, pages);
        sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        /* the same rounds on a thread of their own; should it not start,
         * SQLite's own checkpoints (set just above) stay */
        if (options->checkpoint_thread && path[0] && path[0] != ':')
            pl_store_ckpt_start(s, pages);
    }
    s->ids_merge = options->span_ids_merge;
    if (!s->read_only) {
        rc = pl_store_exec_int(s->db, "SELECT count(*) FROM span_ids_new", &s->ids_new);
        if (rc == SQLITE_OK)
            rc = pl_store_exec_int(s->db, "SELECT count(*) FROM span_ids", &s->ids_old);
        if (rc == SQLITE_OK)
            rc = pl_store_exec_int(s->db, "SELECT count(*) FROM sample_spans_new", &s->skeys_new);
        if (rc == SQLITE_OK)
            rc = pl_store_exec_int(s->db, "SELECT count(*) FROM sample_spans", &s->skeys_old);
        if (rc != SQLITE_OK) {
            st = pl_store_fail(s, rc, err, "cannot count span ids");
            goto fail;
        }
        for (int i = 0; i < ST_COUNT; i++) {
            rc = sqlite3_prepare_v3(s->db, write_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i],
                                    NULL);
            if (rc != SQLITE_OK) {
                st = pl_store_fail(s, rc, err, "cannot prepare statements");
                goto fail;
            }
        }
    }
    *out = s;
    return PL_OK;
fail:
    if (kind_out)
        *kind_out = s->last_error ? s->last_error : PL_STORE_ERR_OTHER;
    pl_store_close(s);
    return st ? st : PL_ERR_INTERNAL;
}

void pl_store_clear_caches(pl_store *s)
{
    pl_store_str_map_clear(&s->strings);
    pl_store_u64_map_clear(&s->functions);
    pl_store_u64_map_clear(&s->stacks);
    pl_store_str_map_clear(&s->tenant_services);
    pl_store_terms_forget(s);
    pl_bloom_free(&s->ids_seen); /* a rollback may have brought ids back */
    s->ids_seen_built = false;
}

void pl_store_close(pl_store *s)
{
    if (!s)
        return;
    if (s->ckpt)
        pl_store_ckpt_stop(s);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    if (s->db) {
        if (s->in_tx)
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close_v2(s->db);
    }
    pl_store_clear_caches(s);
    pl_buf_free(&s->json);
    pl_buf_free(&s->frames);
    free(s->path);
    free(s);
}

/* ---- transactions ------------------------------------------------------- */

pl_status pl_store_begin(pl_store *s, pl_err *err)
{
    if (s->read_only)
        return pl_errf(err, PL_ERR_INTERNAL, "sqlite store %s: opened read-only", s->path);
    int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return pl_store_fail(s, rc, err, "cannot begin a write");
    s->in_tx = true;
    return PL_OK;
}

pl_status pl_store_commit(pl_store *s, pl_err *err)
{
    int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return pl_store_fail(s, rc, err, "cannot commit");
    s->in_tx = false;
    s->last_error = PL_STORE_ERR_NONE;
    return PL_OK;
}

void pl_store_rollback(pl_store *s)
{
    if (s->in_tx || !sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_tx = false;
    pl_store_clear_caches(s);
}

pl_status pl_store_write_batch(pl_store *s, const pl_batch *batch, pl_store_write_stats *stats,
                               pl_err *err)
{
    pl_status st = pl_store_begin(s, err);
    if (st != PL_OK)
        return st;
    st = pl_store_write(s, batch, stats, err);
    if (st == PL_OK)
        st = pl_store_commit(s, err);
    if (st != PL_OK)
        pl_store_rollback(s);
    return st;
}
