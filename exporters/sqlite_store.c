/*
 * sqlite_store.c: schema, writes, retention and queries of the embedded
 * store (see sqlite_store.h for the data model).
 *
 * Writing. The writer resolves every string, function and stack of a batch
 * to a database id through in-memory caches (a cache miss costs one SELECT
 * and maybe one INSERT), pre-aggregates the batch's samples per
 * (service, bucket, type, span, stack) in a hash table, and then upserts one
 * row per key. Spans are INSERT OR IGNORE: a retried batch does not create
 * duplicates. The `traces` table is updated once per trace per batch.
 * Every statement is prepared once per connection.
 *
 * The caches may hold ids created by the current transaction; a rollback
 * therefore clears them (pl_store_rollback), as does the stack garbage
 * collection of retention.
 *
 * Each sample also goes into the per-minute service roll-up
 * (`service_profiles`), so service-wide flame graphs read far fewer rows.
 *
 * Querying. Queries run a handful of indexed SQL statements and do the rest
 * (choosing the sample type, summing rows, decoding stacks, building folded
 * stacks and per-function totals) in C, where it is cheap: stacks and
 * functions are decoded once per distinct id.
 *
 * Versions. The file carries application_id "plk1" and the schema version in
 * user_version. A writer upgrades an older store in place (2: the trace
 * duration column and its index; 3: span events and resource attributes);
 * a reader asks for the upgrade rather than guess.
 */
#include "sqlite_store.h"

#include "core/hash.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define PL_STORE_APP_ID         0x706c6b31 /* "plk1" */
#define PL_STORE_SCHEMA_VERSION 3

/* ---- small hash maps ---------------------------------------------------- */

/* The stack hash is stored in the database (stacks.hash, UNIQUE), so it
 * must be the same in every process: unkeyed FNV-1a plus an avalanche. Only
 * stack_id uses it, and it compares the frames on the table path. The
 * in-memory maps below hash under the per-process key instead. */
static uint64_t stored_hash_bytes(const void *data, size_t len, uint64_t seed)
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

/* Keys of the in-memory maps derive from client data (names, trace ids,
 * frames): keyed per process (core/hash.h). */
static uint64_t mix64(uint64_t x)
{
    return pl_hash_u64(x);
}

/* uint64 key (never 0) -> int64 value, open addressing. */
typedef struct u64_map {
    uint64_t *keys;
    int64_t *vals;
    size_t cap, n;
} u64_map;

static void u64_map_clear(u64_map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

static bool u64_map_get(const u64_map *m, uint64_t key, int64_t *val)
{
    if (!m->cap)
        return false;
    size_t mask = m->cap - 1;
    for (size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == 0)
            return false;
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return true;
        }
    }
}

static bool u64_map_put(u64_map *m, uint64_t key, int64_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *keys = calloc(cap, sizeof(uint64_t));
        int64_t *vals = calloc(cap, sizeof(int64_t));
        if (!keys || !vals) {
            free(keys);
            free(vals);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->keys[i])
                continue;
            size_t j = mix64(m->keys[i]) & (cap - 1);
            while (keys[j])
                j = (j + 1) & (cap - 1);
            keys[j] = m->keys[i];
            vals[j] = m->vals[i];
        }
        free(m->keys);
        free(m->vals);
        m->keys = keys;
        m->vals = vals;
        m->cap = cap;
    }
    size_t mask = m->cap - 1;
    size_t i = mix64(key) & mask;
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & mask;
    if (!m->keys[i])
        m->n++;
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}

/* string -> id; keys copied (malloc). */
typedef struct str_entry {
    uint64_t hash;
    int64_t id;
    char *key;
    uint32_t len;
} str_entry;

typedef struct str_map {
    str_entry *slots;
    size_t cap, n;
} str_map;

static void str_map_clear(str_map *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->slots[i].key);
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

static bool str_map_get(const str_map *m, const char *s, size_t len, uint64_t h, int64_t *id)
{
    if (!m->cap)
        return false;
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const str_entry *e = &m->slots[i];
        if (!e->key)
            return false;
        if (e->hash == h && e->len == len && memcmp(e->key, s, len) == 0) {
            *id = e->id;
            return true;
        }
    }
}

static bool str_map_put(str_map *m, const char *s, size_t len, uint64_t h, int64_t id)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        str_entry *slots = calloc(cap, sizeof(str_entry));
        if (!slots)
            return false;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].key)
                continue;
            size_t j = m->slots[i].hash & (cap - 1);
            while (slots[j].key)
                j = (j + 1) & (cap - 1);
            slots[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return false;
    if (len)
        memcpy(copy, s, len);
    copy[len] = 0;
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    while (m->slots[i].key)
        i = (i + 1) & mask;
    m->slots[i] = (str_entry){h, id, copy, (uint32_t)len};
    m->n++;
    return true;
}

/* Caches are bounded: past this many entries they are simply emptied. */
#define CACHE_MAX_ENTRIES (1u << 20)

/* ---- the store ---------------------------------------------------------- */

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
    ST_COUNT
};

static const char *const write_sql[ST_COUNT] = {
    [ST_INS_SPAN] =
        "INSERT OR IGNORE INTO spans(trace_id, span_id, parent_span_id, name, service, "
        "kind, start_ns, end_ns, status_code, status_message, attributes, profile_id, "
        "profile_samples, cpu_time_ns, cpu_time_total_ns, top_functions, resource_id, "
        "events) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18)",
    [ST_UPSERT_TRACE] =
        "INSERT INTO traces(trace_id, start_ns, end_ns, root_span_id, root_name, root_service, "
        "root_start_ns, root_end_ns, span_count, error_count, duration_ns) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11) "
        "ON CONFLICT(trace_id) DO UPDATE SET start_ns = min(start_ns, excluded.start_ns), "
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
    [ST_SEL_STRING] = "SELECT id FROM strings WHERE value = ?1",
    [ST_INS_STRING] = "INSERT INTO strings(value) VALUES(?1)",
    [ST_SEL_FUNCTION] = "SELECT id FROM functions WHERE name_id = ?1 AND file_id = ?2",
    [ST_INS_FUNCTION] = "INSERT INTO functions(name_id, file_id) VALUES(?1, ?2)",
    [ST_SEL_STACK] = "SELECT id, frames FROM stacks WHERE hash = ?1",
    [ST_INS_STACK] = "INSERT INTO stacks(hash, frames) VALUES(?1, ?2)",
    [ST_UPSERT_SAMPLE] =
        "INSERT INTO samples(service_id, bucket, type_id, span_id, stack_id, trace_id, value, "
        "cpu_ns, count) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9) "
        "ON CONFLICT(service_id, bucket, type_id, span_id, stack_id) DO UPDATE SET "
        "value = value + excluded.value, cpu_ns = cpu_ns + excluded.cpu_ns, "
        "count = count + excluded.count, trace_id = coalesce(trace_id, excluded.trace_id)",
    [ST_UPSERT_ROLLUP] =
        "INSERT INTO service_profiles(service_id, minute, type_id, stack_id, value, cpu_ns, count) "
        "VALUES(?1,?2,?3,?4,?5,?6,?7) ON CONFLICT(service_id, minute, type_id, stack_id) DO UPDATE "
        "SET value = value + excluded.value, cpu_ns = cpu_ns + excluded.cpu_ns, "
        "count = count + excluded.count",
    [ST_UPSERT_SERVICE] = "INSERT INTO services(id, last_seen_ns) VALUES(?1, ?2) "
                          "ON CONFLICT(id) DO UPDATE SET last_seen_ns = "
                          "max(last_seen_ns, excluded.last_seen_ns)",
};

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS strings(id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);"
    "CREATE TABLE IF NOT EXISTS functions(id INTEGER PRIMARY KEY, name_id INTEGER NOT NULL,"
    "  file_id INTEGER NOT NULL, UNIQUE(name_id, file_id));"
    /* frames: function ids, root first, unsigned LEB128 varints */
    "CREATE TABLE IF NOT EXISTS stacks(id INTEGER PRIMARY KEY, hash INTEGER NOT NULL UNIQUE,"
    "  frames BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS services(id INTEGER PRIMARY KEY, last_seen_ns INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS spans(trace_id BLOB NOT NULL, span_id INTEGER NOT NULL,"
    "  parent_span_id INTEGER, name TEXT NOT NULL, service TEXT NOT NULL, kind INTEGER NOT NULL,"
    "  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, status_code INTEGER NOT NULL,"
    "  status_message TEXT, attributes TEXT NOT NULL, profile_id TEXT, profile_samples INTEGER,"
    "  cpu_time_ns INTEGER, cpu_time_total_ns INTEGER, top_functions TEXT,"
    /* resource attributes as JSON, stored once in `strings`; span events as
     * a JSON array [{name, time_unix_nano, attributes}] or NULL */
    "  resource_id INTEGER, events TEXT);"
    "CREATE UNIQUE INDEX IF NOT EXISTS spans_by_span_id ON spans(span_id);"
    "CREATE INDEX IF NOT EXISTS spans_by_trace ON spans(trace_id);"
    "CREATE INDEX IF NOT EXISTS spans_by_service ON spans(service, start_ns);"
    "CREATE TABLE IF NOT EXISTS traces(trace_id BLOB PRIMARY KEY, start_ns INTEGER NOT NULL,"
    "  end_ns INTEGER NOT NULL, root_span_id INTEGER, root_name TEXT, root_service TEXT,"
    "  root_start_ns INTEGER, root_end_ns INTEGER, span_count INTEGER NOT NULL,"
    "  error_count INTEGER NOT NULL, duration_ns INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS traces_by_start ON traces(start_ns);"
    "CREATE INDEX IF NOT EXISTS traces_by_duration ON traces(duration_ns);"
    "CREATE TABLE IF NOT EXISTS samples(service_id INTEGER NOT NULL, bucket INTEGER NOT NULL,"
    "  type_id INTEGER NOT NULL, span_id INTEGER NOT NULL, stack_id INTEGER NOT NULL,"
    "  trace_id BLOB, value INTEGER NOT NULL, cpu_ns INTEGER NOT NULL, count INTEGER NOT NULL,"
    "  PRIMARY KEY(service_id, bucket, type_id, span_id, stack_id)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS samples_by_span ON samples(span_id) WHERE span_id != 0;"
    "CREATE INDEX IF NOT EXISTS samples_by_trace ON samples(trace_id) WHERE trace_id IS NOT NULL;"
    /* per-minute roll-up of samples by service and stack (no span): what
     * service-wide flame graphs read, a fraction of the rows of `samples` */
    "CREATE TABLE IF NOT EXISTS service_profiles(service_id INTEGER NOT NULL,"
    "  minute INTEGER NOT NULL, type_id INTEGER NOT NULL, stack_id INTEGER NOT NULL,"
    "  value INTEGER NOT NULL, cpu_ns INTEGER NOT NULL, count INTEGER NOT NULL,"
    "  PRIMARY KEY(service_id, minute, type_id, stack_id)) WITHOUT ROWID;";

struct pl_store {
    sqlite3 *db;
    char *path;
    bool read_only;
    bool in_tx;
    pl_store_error last_error;
    sqlite3_stmt *st[ST_COUNT];
    str_map strings;
    u64_map functions; /* (name_id << 32 | file_id) -> id */
    u64_map stacks;    /* hash -> id */
    pl_buf json;       /* scratch for span attributes */
    pl_buf frames;     /* scratch for stack frames */
    uint64_t last_stack_gc_ns;
};

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
static pl_status store_fail(pl_store *s, int rc, pl_err *err, const char *what)
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

static int exec_int(sqlite3 *db, const char *sql, int64_t *out)
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
        st = store_fail(s, rc, err, "cannot open");
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, options->busy_timeout_ms > 0 ? options->busy_timeout_ms : 5000);

    int64_t app_id = 0, version = 0, n_tables = 0;
    rc = exec_int(s->db, "PRAGMA application_id", &app_id);
    if (rc == SQLITE_OK)
        rc = exec_int(s->db, "PRAGMA user_version", &version);
    if (rc == SQLITE_OK)
        rc = exec_int(s->db, "SELECT count(*) FROM sqlite_master", &n_tables);
    if (rc != SQLITE_OK) {
        st = store_fail(s, rc, err, "cannot read the database header");
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
            /* A new file: page reuse plus incremental vacuum lets size-based
             * retention give space back without a full VACUUM. Must be set
             * before the first table exists. */
            rc = sqlite3_exec(s->db, "PRAGMA auto_vacuum = INCREMENTAL", NULL, NULL, NULL);
            if (rc != SQLITE_OK) {
                st = store_fail(s, rc, err, "cannot configure");
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
            if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, schema_sql, NULL, NULL, NULL);
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
        st = store_fail(s, rc, err, "cannot set up the schema");
        goto fail;
    }
    char cache[64];
    snprintf(cache, sizeof(cache), "PRAGMA cache_size = -%" PRId64,
             options->cache_kib > 0 ? options->cache_kib : 16384);
    sqlite3_exec(s->db, cache, NULL, NULL, NULL);
    if (!s->read_only) {
        for (int i = 0; i < ST_COUNT; i++) {
            rc = sqlite3_prepare_v3(s->db, write_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->st[i],
                                    NULL);
            if (rc != SQLITE_OK) {
                st = store_fail(s, rc, err, "cannot prepare statements");
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

static void clear_caches(pl_store *s)
{
    str_map_clear(&s->strings);
    u64_map_clear(&s->functions);
    u64_map_clear(&s->stacks);
}

void pl_store_close(pl_store *s)
{
    if (!s)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(s->st[i]);
    if (s->db) {
        if (s->in_tx)
            sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close_v2(s->db);
    }
    clear_caches(s);
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
        return store_fail(s, rc, err, "cannot begin a write");
    s->in_tx = true;
    return PL_OK;
}

pl_status pl_store_commit(pl_store *s, pl_err *err)
{
    int rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return store_fail(s, rc, err, "cannot commit");
    s->in_tx = false;
    s->last_error = PL_STORE_ERR_NONE;
    return PL_OK;
}

void pl_store_rollback(pl_store *s)
{
    if (s->in_tx || !sqlite3_get_autocommit(s->db))
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    s->in_tx = false;
    clear_caches(s);
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

/* ---- helpers ------------------------------------------------------------ */

static int64_t span_id_int(const uint8_t id[8])
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | id[i];
    return (int64_t)v;
}

static void span_id_bytes(int64_t v, uint8_t out[8])
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)(u & 0xff);
        u >>= 8;
    }
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* Runs a statement that returns no rows (or ignores them) and resets it. */
static int step_reset(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return (rc == SQLITE_DONE || rc == SQLITE_ROW) ? SQLITE_OK : rc;
}

static int bind_text(sqlite3_stmt *st, int i, pl_bytes b)
{
    return sqlite3_bind_text(st, i, b.len ? (const char *)b.ptr : "", (int)b.len, SQLITE_STATIC);
}

static pl_bytes attr_string(const pl_attrs *attrs, const char *key)
{
    pl_kv *kv = pl_attrs_find(attrs, key, strlen(key));
    if (kv && kv->value.type == PL_VALUE_STRING)
        return kv->value.u.str;
    return (pl_bytes){NULL, 0};
}

static void json_value(pl_buf *b, const pl_value *v, int depth);

static void json_kvs(pl_buf *b, const pl_kv *items, uint32_t n, int depth)
{
    pl_buf_append_byte(b, '{');
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            pl_buf_append_byte(b, ',');
        pl_buf_json_string(b, items[i].key.ptr, items[i].key.len);
        pl_buf_append_byte(b, ':');
        json_value(b, &items[i].value, depth + 1);
    }
    pl_buf_append_byte(b, '}');
}

static void json_value(pl_buf *b, const pl_value *v, int depth)
{
    if (depth > 16) { /* hostile nesting: stop rather than recurse forever */
        pl_buf_append_str(b, "null");
        return;
    }
    switch (v->type) {
    case PL_VALUE_STRING:
        pl_buf_json_string(b, v->u.str.ptr, v->u.str.len);
        break;
    case PL_VALUE_BOOL:
        pl_buf_append_str(b, v->u.b ? "true" : "false");
        break;
    case PL_VALUE_INT:
        pl_buf_printf(b, "%" PRId64, v->u.i);
        break;
    case PL_VALUE_DOUBLE:
        if (isfinite(v->u.d))
            pl_buf_printf(b, "%.17g", v->u.d);
        else
            pl_buf_append_str(b, "null");
        break;
    case PL_VALUE_ARRAY:
        pl_buf_append_byte(b, '[');
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            if (i)
                pl_buf_append_byte(b, ',');
            json_value(b, &v->u.array.items[i], depth + 1);
        }
        pl_buf_append_byte(b, ']');
        break;
    case PL_VALUE_KVLIST:
        json_kvs(b, v->u.kvlist.items, v->u.kvlist.n, depth);
        break;
    case PL_VALUE_BYTES: {
        pl_buf_append_byte(b, '"');
        for (uint32_t i = 0; i < v->u.str.len; i++)
            pl_buf_printf(b, "%02x", v->u.str.ptr[i]);
        pl_buf_append_byte(b, '"');
        break;
    }
    default:
        pl_buf_append_str(b, "null");
        break;
    }
}

/* Text form of an attribute value for a TEXT column: strings as they are,
 * anything else as JSON. Uses `scratch`. */
static int bind_value_text(sqlite3_stmt *st, int i, const pl_value *v, pl_buf *scratch)
{
    if (v->type == PL_VALUE_STRING)
        return bind_text(st, i, v->u.str);
    pl_buf_reset(scratch);
    json_value(scratch, v, 0);
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
    if (str_map_get(&s->strings, text, len, h, id))
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
            str_map_clear(&s->strings);
        str_map_put(&s->strings, text, len, h, *id);
    }
    return rc;
}

static int function_id(pl_store *s, int64_t name_id, int64_t file_id, int64_t *id)
{
    uint64_t key = ((uint64_t)name_id << 32) ^ (uint64_t)file_id;
    if (key == 0)
        key = 1ull << 63;
    if (u64_map_get(&s->functions, key, id))
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
            u64_map_clear(&s->functions);
        u64_map_put(&s->functions, key, *id);
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
static int64_t get_varints(const uint8_t *p, size_t len, int64_t *out, size_t cap)
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
    uint64_t h = stored_hash_bytes(frames, len, 0x5eed);
    /* The cache trusts the 64-bit hash; the table lookup below compares the
     * frames and probes the next hash on the (astronomically rare) collision. */
    if (u64_map_get(&s->stacks, h ? h : 1, id))
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
                u64_map_clear(&s->stacks);
            u64_map_put(&s->stacks, h ? h : 1, *id);
        }
        return SQLITE_OK;
    }
    return SQLITE_CONSTRAINT;
}

/* ---- writing spans ------------------------------------------------------ */

typedef struct trace_agg {
    uint8_t trace_id[16];
    bool used;
    uint64_t start, end;
    bool has_root;
    int64_t root_span_id;
    pl_bytes root_name, root_service;
    uint64_t root_start, root_end;
    int64_t spans, errors;
} trace_agg;

typedef struct trace_aggs {
    trace_agg *slots;
    size_t cap, n;
} trace_aggs;

static trace_agg *trace_aggs_get(trace_aggs *m, const uint8_t id[16])
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        trace_agg *slots = calloc(cap, sizeof(trace_agg));
        if (!slots)
            return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].used)
                continue;
            size_t j = pl_hash_bytes(m->slots[i].trace_id, 16) & (cap - 1);
            while (slots[j].used)
                j = (j + 1) & (cap - 1);
            slots[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    size_t mask = m->cap - 1;
    size_t i = pl_hash_bytes(id, 16) & mask;
    while (m->slots[i].used && memcmp(m->slots[i].trace_id, id, 16) != 0)
        i = (i + 1) & mask;
    trace_agg *t = &m->slots[i];
    if (!t->used) {
        memset(t, 0, sizeof(*t));
        t->used = true;
        memcpy(t->trace_id, id, 16);
        t->start = UINT64_MAX;
        m->n++;
    }
    return t;
}

static int write_span(pl_store *s, const pl_span *sp, pl_bytes service, int64_t resource_id,
                      trace_aggs *aggs, pl_store_write_stats *stats)
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
    if (sp->status.message.len)
        bind_text(st, 10, sp->status.message);
    else
        sqlite3_bind_null(st, 10);
    pl_buf_reset(&s->json);
    json_kvs(&s->json, sp->attrs.items, sp->attrs.n, 0);
    if (!pl_buf_ok(&s->json))
        return SQLITE_NOMEM;
    sqlite3_bind_text(st, 11, (const char *)s->json.data, (int)s->json.len, SQLITE_STATIC);

    pl_bytes profile_id = attr_string(&sp->attrs, "pyroscope.profile.id");
    if (profile_id.len)
        bind_text(st, 12, profile_id);
    else
        sqlite3_bind_null(st, 12);
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
            json_kvs(&events, ev->attrs.items, ev->attrs.n, 0);
            pl_buf_append_byte(&events, '}');
        }
        pl_buf_append_byte(&events, ']');
    }
    if (sp->n_events && pl_buf_ok(&events))
        sqlite3_bind_text(st, 18, (const char *)events.data, (int)events.len, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 18);
    int rc = step_reset(st);
    pl_buf_free(&events);
    pl_buf_free(&scratch);
    if (rc != SQLITE_OK)
        return rc;
    if (sqlite3_changes(s->db) == 0) {
        stats->duplicate_spans++;
        return SQLITE_OK;
    }
    stats->spans++;
    trace_agg *t = trace_aggs_get(aggs, sp->trace_id);
    if (!t)
        return SQLITE_NOMEM;
    if (sp->start_time_unix_nano < t->start)
        t->start = sp->start_time_unix_nano;
    if (end > t->end)
        t->end = end;
    t->spans++;
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

static int write_traces(pl_store *s, const pl_traces *traces, pl_store_write_stats *stats)
{
    trace_aggs aggs = {0};
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
            json_kvs(&s->json, rs->resource.attrs.items, rs->resource.attrs.n, 0);
            if (!pl_buf_ok(&s->json))
                rc = SQLITE_NOMEM;
            else
                rc = string_id(s, (const char *)s->json.data, s->json.len, &resource_id);
        }
        for (uint32_t sc = 0; sc < rs->n_scopes && rc == SQLITE_OK; sc++) {
            const pl_scope_spans *ss = &rs->scopes[sc];
            for (uint32_t i = 0; i < ss->n_spans && rc == SQLITE_OK; i++) {
                const pl_span *sp = &ss->spans[i];
                if (sp->trace_id_len != 16 || sp->span_id_len != 8 || all_zero(sp->trace_id, 16) ||
                    all_zero(sp->span_id, 8)) {
                    stats->invalid_spans++;
                    continue;
                }
                rc = write_span(s, sp, service, resource_id, &aggs, stats);
            }
        }
    }
    sqlite3_stmt *st = s->st[ST_UPSERT_TRACE];
    for (size_t i = 0; i < aggs.cap && rc == SQLITE_OK; i++) {
        trace_agg *t = &aggs.slots[i];
        if (!t->used)
            continue;
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
        sqlite3_bind_int64(st, 11,
                           t->has_root ? (int64_t)(t->root_end - t->root_start)
                                       : (int64_t)(t->end - t->start));
        rc = step_reset(st);
    }
    free(aggs.slots);
    return rc;
}

/* ---- writing profiles --------------------------------------------------- */

typedef struct sample_key {
    int64_t service_id, bucket, type_id, span_id, stack_id;
} sample_key;

typedef struct sample_agg {
    sample_key key;
    bool used;
    bool has_trace;
    uint8_t trace_id[16];
    int64_t value, cpu_ns, count;
} sample_agg;

typedef struct sample_aggs {
    sample_agg *slots;
    size_t cap, n;
} sample_aggs;

static uint64_t sample_key_hash(const sample_key *k)
{
    uint64_t h = mix64((uint64_t)k->service_id * 31 + (uint64_t)k->bucket);
    h = mix64(h ^ (uint64_t)k->type_id);
    h = mix64(h ^ (uint64_t)k->span_id);
    return mix64(h ^ (uint64_t)k->stack_id);
}

static sample_agg *sample_aggs_get(sample_aggs *m, const sample_key *k)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        sample_agg *slots = calloc(cap, sizeof(sample_agg));
        if (!slots)
            return NULL;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slots[i].used)
                continue;
            size_t j = sample_key_hash(&m->slots[i].key) & (cap - 1);
            while (slots[j].used)
                j = (j + 1) & (cap - 1);
            slots[j] = m->slots[i];
        }
        free(m->slots);
        m->slots = slots;
        m->cap = cap;
    }
    size_t mask = m->cap - 1;
    size_t i = sample_key_hash(k) & mask;
    while (m->slots[i].used && memcmp(&m->slots[i].key, k, sizeof(*k)) != 0)
        i = (i + 1) & mask;
    sample_agg *a = &m->slots[i];
    if (!a->used) {
        memset(a, 0, sizeof(*a));
        a->used = true;
        a->key = *k;
        m->n++;
    }
    return a;
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

static int64_t cpu_multiplier(const pl_dictionary *dict, const pl_profile *p)
{
    pl_bytes type = pl_dict_string(dict, p->sample_type.type_strindex);
    pl_bytes unit = pl_dict_string(dict, p->sample_type.unit_strindex);
    if (pl_bytes_eq_cstr(type, "cpu"))
        return unit_ns(unit);
    if (pl_bytes_eq_cstr(type, "samples") && p->has_period_type && p->period > 0) {
        pl_bytes ptype = pl_dict_string(dict, p->period_type.type_strindex);
        pl_bytes punit = pl_dict_string(dict, p->period_type.unit_strindex);
        int64_t f = unit_ns(punit), m;
        if (pl_bytes_eq_cstr(ptype, "cpu") && f && !__builtin_mul_overflow(p->period, f, &m))
            return m;
    }
    return 0;
}

static int add_sample_value(sample_aggs *aggs, const sample_key *k, const uint8_t *trace_id,
                            int64_t value, int64_t mult, int64_t count)
{
    sample_agg *a = sample_aggs_get(aggs, k);
    if (!a)
        return SQLITE_NOMEM;
    int64_t cpu = 0;
    if (mult && __builtin_mul_overflow(value, mult, &cpu))
        cpu = INT64_MAX;
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

#define ROLLUP_NS 60000000000ull

static int add_rollup(sample_aggs *rollup, const sample_key *k, uint64_t ts, int64_t value,
                      int64_t mult)
{
    sample_key rk = *k;
    rk.span_id = 0;
    rk.bucket = (int64_t)(ts / ROLLUP_NS);
    return add_sample_value(rollup, &rk, NULL, value, mult, 1);
}

static int write_profiles(pl_store *s, const pl_batch *batch, pl_store_write_stats *stats,
                          uint64_t *latest_ns)
{
    const pl_profiles *pr = &batch->data.profiles;
    const pl_dictionary *dict = &pr->dict;
    dict_ids d = {dict, NULL, NULL, NULL};
    d.strings = calloc(dict->n_strings + 1, sizeof(int64_t));
    d.functions = calloc(dict->n_functions + 1, sizeof(int64_t));
    d.stacks = calloc(dict->n_stacks + 1, sizeof(int64_t));
    sample_aggs aggs = {0};
    sample_aggs rollup = {0}; /* span 0, bucket = minute */
    u64_map services = {0};   /* service id -> latest time */
    int rc = (d.strings && d.functions && d.stacks) ? SQLITE_OK : SQLITE_NOMEM;
    uint64_t fallback_time = batch->received_unix_nano ? batch->received_unix_nano
                                                       : (uint64_t)time(NULL) * 1000000000ull;

    for (uint32_t r = 0; r < pr->n_resources && rc == SQLITE_OK; r++) {
        const pl_resource_profiles *rp = &pr->resources[r];
        pl_bytes res_service = attr_string(&rp->resource.attrs, "service.name");
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
                int64_t mult = cpu_multiplier(dict, p);
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
                    for (uint32_t ai = 0; ai < smp->n_attribute_indices; ai++) {
                        int32_t idx = smp->attribute_indices[ai];
                        if (idx <= 0 || (uint32_t)idx >= dict->n_attributes)
                            continue;
                        const pl_kvu *kv = &dict->attributes[idx];
                        pl_bytes key = pl_dict_string(dict, kv->key_strindex);
                        pl_bytes val = {NULL, 0};
                        if (kv->value.type == PL_VALUE_STRING)
                            val = kv->value.u.str;
                        else if (kv->value.type == PL_VALUE_STRINDEX)
                            val = pl_dict_string(dict, kv->value.u.strindex);
                        else
                            continue;
                        if (pl_bytes_eq_cstr(key, "service.name") && val.len) {
                            service = val;
                        } else if (!has_span && (pl_bytes_eq_cstr(key, "span_id") ||
                                                 pl_bytes_eq_cstr(key, "profile_id"))) {
                            if (val.len == 16 &&
                                pl_hex_decode((const char *)val.ptr, 16, span_bytes, 8) == 0 &&
                                !all_zero(span_bytes, 8))
                                has_span = true;
                        } else if (!has_trace && pl_bytes_eq_cstr(key, "trace_id")) {
                            if (val.len == 32 &&
                                pl_hex_decode((const char *)val.ptr, 32, trace_id, 16) == 0 &&
                                !all_zero(trace_id, 16))
                                has_trace = true;
                        }
                    }
                    if (!service.len)
                        service = PL_BYTES_LIT("unknown_service");
                    rc = string_id(s, (const char *)service.ptr, service.len, &k.service_id);
                    if (rc != SQLITE_OK)
                        break;
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
                            rc = add_sample_value(&aggs, &k, tid, value, mult, 1);
                            if (rc == SQLITE_OK)
                                rc = add_rollup(&rollup, &k, ts, value, mult);
                            if (ts > latest)
                                latest = ts;
                        }
                        stats->samples += smp->n_timestamps;
                    } else {
                        int64_t total = 0;
                        for (uint32_t v = 0; v < smp->n_values; v++)
                            total += smp->values[v];
                        k.bucket = (int64_t)(ptime / PL_STORE_BUCKET_NS);
                        rc = add_sample_value(&aggs, &k, tid, total, mult, 1);
                        if (rc == SQLITE_OK)
                            rc = add_rollup(&rollup, &k, ptime, total, mult);
                        latest = ptime;
                        stats->samples++;
                    }
                    int64_t prev;
                    if (!u64_map_get(&services, (uint64_t)k.service_id, &prev) ||
                        (uint64_t)prev < latest)
                        u64_map_put(&services, (uint64_t)k.service_id, (int64_t)latest);
                    if (latest > *latest_ns)
                        *latest_ns = latest;
                }
            }
        }
    }
    sqlite3_stmt *st = s->st[ST_UPSERT_SAMPLE];
    for (size_t i = 0; i < aggs.cap && rc == SQLITE_OK; i++) {
        sample_agg *a = &aggs.slots[i];
        if (!a->used)
            continue;
        sqlite3_bind_int64(st, 1, a->key.service_id);
        sqlite3_bind_int64(st, 2, a->key.bucket);
        sqlite3_bind_int64(st, 3, a->key.type_id);
        sqlite3_bind_int64(st, 4, a->key.span_id);
        sqlite3_bind_int64(st, 5, a->key.stack_id);
        if (a->has_trace)
            sqlite3_bind_blob(st, 6, a->trace_id, 16, SQLITE_STATIC);
        else
            sqlite3_bind_null(st, 6);
        sqlite3_bind_int64(st, 7, a->value);
        sqlite3_bind_int64(st, 8, a->cpu_ns);
        sqlite3_bind_int64(st, 9, a->count);
        rc = step_reset(st);
        stats->sample_rows++;
    }
    st = s->st[ST_UPSERT_ROLLUP];
    for (size_t i = 0; i < rollup.cap && rc == SQLITE_OK; i++) {
        sample_agg *a = &rollup.slots[i];
        if (!a->used)
            continue;
        sqlite3_bind_int64(st, 1, a->key.service_id);
        sqlite3_bind_int64(st, 2, a->key.bucket);
        sqlite3_bind_int64(st, 3, a->key.type_id);
        sqlite3_bind_int64(st, 4, a->key.stack_id);
        sqlite3_bind_int64(st, 5, a->value);
        sqlite3_bind_int64(st, 6, a->cpu_ns);
        sqlite3_bind_int64(st, 7, a->count);
        rc = step_reset(st);
    }
    st = s->st[ST_UPSERT_SERVICE];
    for (size_t i = 0; i < services.cap && rc == SQLITE_OK; i++) {
        if (!services.keys[i])
            continue;
        sqlite3_bind_int64(st, 1, (int64_t)services.keys[i]);
        sqlite3_bind_int64(st, 2, services.vals[i]);
        rc = step_reset(st);
    }
    u64_map_clear(&services);
    free(aggs.slots);
    free(rollup.slots);
    free(d.strings);
    free(d.functions);
    free(d.stacks);
    return rc;
}

pl_status pl_store_write(pl_store *s, const pl_batch *batch, pl_store_write_stats *stats,
                         pl_err *err)
{
    pl_store_write_stats local = {0};
    if (!stats)
        stats = &local;
    int rc = SQLITE_OK;
    if (batch->signal == PL_SIGNAL_TRACES) {
        rc = write_traces(s, &batch->data.traces, stats);
    } else if (batch->signal == PL_SIGNAL_PROFILES) {
        uint64_t latest = 0;
        rc = write_profiles(s, batch, stats, &latest);
    }
    if (rc != SQLITE_OK) {
        if (rc == SQLITE_NOMEM)
            return pl_errf(err, PL_ERR_NOMEM, "sqlite store %s: out of memory", s->path);
        return store_fail(s, rc, err, "cannot write");
    }
    return PL_OK;
}

/* ---- retention ---------------------------------------------------------- */

uint64_t pl_store_size(pl_store *s)
{
    int64_t pages = 0, free_pages = 0, page_size = 0;
    if (exec_int(s->db, "PRAGMA page_count", &pages) != SQLITE_OK ||
        exec_int(s->db, "PRAGMA freelist_count", &free_pages) != SQLITE_OK ||
        exec_int(s->db, "PRAGMA page_size", &page_size) != SQLITE_OK)
        return 0;
    return (uint64_t)(pages - free_pages) * (uint64_t)page_size;
}

static int exec_bind1(sqlite3 *db, const char *sql, int64_t a, int64_t b, bool two,
                      uint64_t *changes)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, a);
    if (two)
        sqlite3_bind_int64(st, 2, b);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        if (changes)
            *changes += (uint64_t)sqlite3_changes(db);
        return SQLITE_OK;
    }
    return rc;
}

/* Deletes traces/spans that started before `cutoff` and sample buckets
 * before it, in the current transaction. */
static int delete_before(pl_store *s, uint64_t cutoff, pl_store_retention_stats *stats)
{
    int rc = exec_bind1(s->db,
                        "DELETE FROM spans WHERE trace_id IN "
                        "(SELECT trace_id FROM traces WHERE start_ns < ?1)",
                        (int64_t)cutoff, 0, false, &stats->spans_deleted);
    if (rc == SQLITE_OK)
        rc = exec_bind1(s->db, "DELETE FROM traces WHERE start_ns < ?1", (int64_t)cutoff, 0, false,
                        &stats->traces_deleted);
    sqlite3_stmt *svc = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "SELECT id FROM services", -1, &svc, NULL);
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    while (rc == SQLITE_OK) {
        int step = sqlite3_step(svc);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = step;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *grown = realloc(ids, cap * sizeof(int64_t));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            ids = grown;
        }
        ids[n++] = sqlite3_column_int64(svc, 0);
    }
    sqlite3_finalize(svc);
    /* Per service, so each delete is a range of the samples primary key. */
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++)
        rc = exec_bind1(s->db, "DELETE FROM service_profiles WHERE service_id = ?1 AND minute < ?2",
                        ids[i], (int64_t)(cutoff / ROLLUP_NS), true, NULL);
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++)
        rc = exec_bind1(s->db, "DELETE FROM samples WHERE service_id = ?1 AND bucket < ?2", ids[i],
                        (int64_t)(cutoff / PL_STORE_BUCKET_NS), true, &stats->sample_rows_deleted);
    free(ids);
    return rc;
}

/* Oldest and newest data times (spans and samples); false when empty. */
static bool data_time_range(pl_store *s, uint64_t *oldest, uint64_t *newest)
{
    int64_t t_min = 0, t_max = 0, b_min = 0, b_max = 0, n_traces = 0, n_samples = 0;
    exec_int(s->db, "SELECT count(*) FROM (SELECT 1 FROM traces LIMIT 1)", &n_traces);
    exec_int(s->db, "SELECT count(*) FROM (SELECT 1 FROM samples LIMIT 1)", &n_samples);
    if (!n_traces && !n_samples)
        return false;
    uint64_t lo = UINT64_MAX, hi = 0;
    if (n_traces) {
        exec_int(s->db, "SELECT min(start_ns) FROM traces", &t_min);
        exec_int(s->db, "SELECT max(start_ns) FROM traces", &t_max);
        lo = (uint64_t)t_min;
        hi = (uint64_t)t_max;
    }
    if (n_samples) {
        exec_int(s->db,
                 "SELECT min(b) FROM (SELECT (SELECT min(bucket) FROM samples "
                 "WHERE service_id = v.id) AS b FROM services v)",
                 &b_min);
        exec_int(s->db,
                 "SELECT max(b) FROM (SELECT (SELECT max(bucket) FROM samples "
                 "WHERE service_id = v.id) AS b FROM services v)",
                 &b_max);
        if ((uint64_t)b_min * PL_STORE_BUCKET_NS < lo)
            lo = (uint64_t)b_min * PL_STORE_BUCKET_NS;
        if ((uint64_t)(b_max + 1) * PL_STORE_BUCKET_NS > hi)
            hi = (uint64_t)(b_max + 1) * PL_STORE_BUCKET_NS;
    }
    *oldest = lo;
    *newest = hi;
    return true;
}

/* Stacks no sample row uses any more; ids may be cached, so clear caches. */
static int collect_stacks(pl_store *s)
{
    int rc = sqlite3_exec(s->db,
                          "DELETE FROM stacks WHERE id NOT IN (SELECT stack_id FROM samples UNION "
                          "SELECT stack_id FROM service_profiles)",
                          NULL, NULL, NULL);
    u64_map_clear(&s->stacks);
    return rc;
}

pl_status pl_store_enforce_retention(pl_store *s, uint64_t now_ns, uint64_t max_age_ns,
                                     uint64_t max_size, pl_store_retention_stats *stats,
                                     pl_err *err)
{
    pl_store_retention_stats local = {0};
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof(*stats));
    stats->size_before = pl_store_size(s);
    int rc = SQLITE_OK;
    pl_status failed = PL_OK;
    bool deleted_samples = false;
    if (max_age_ns && now_ns > max_age_ns) {
        rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            rc = delete_before(s, now_ns - max_age_ns, stats);
            if (rc == SQLITE_OK && stats->sample_rows_deleted &&
                now_ns - s->last_stack_gc_ns > 3600ull * 1000000000ull) {
                rc = collect_stacks(s);
                s->last_stack_gc_ns = now_ns;
            }
            if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
            if (rc != SQLITE_OK) {
                failed = store_fail(s, rc, err, "retention failed");
                pl_store_rollback(s);
            }
        } else {
            failed = store_fail(s, rc, err, "retention failed");
        }
        deleted_samples = stats->sample_rows_deleted > 0 || stats->spans_deleted > 0;
    }
    /* Size: drop the oldest slice of the time range until under the limit.
     * The slice grows with the overshoot; a few passes converge. */
    for (int pass = 0; rc == SQLITE_OK && max_size && pass < 16; pass++) {
        uint64_t used = pl_store_size(s);
        if (used <= max_size)
            break;
        uint64_t oldest, newest;
        if (!data_time_range(s, &oldest, &newest))
            break;
        double over = (double)(used - max_size * 9 / 10) / (double)used;
        if (over < 0.05)
            over = 0.05;
        uint64_t span = newest > oldest ? newest - oldest : 1;
        uint64_t cutoff = oldest + (uint64_t)((double)span * over) + 1;
        if (pass >= 12) /* keep converging even when the range is degenerate */
            cutoff = newest + 1;
        rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            failed = store_fail(s, rc, err, "retention failed");
            break;
        }
        rc = delete_before(s, cutoff, stats);
        if (rc == SQLITE_OK)
            rc = collect_stacks(s);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            failed = store_fail(s, rc, err, "retention failed");
            pl_store_rollback(s);
        }
        deleted_samples = true;
    }
    if (rc == SQLITE_OK && deleted_samples) {
        /* Give free pages back and keep the WAL small. Best effort: a reader
         * holding an old snapshot only delays the truncation. */
        sqlite3_exec(s->db, "PRAGMA incremental_vacuum", NULL, NULL, NULL);
        sqlite3_exec(s->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    }
    stats->size_after = pl_store_size(s);
    return failed;
}

/* ---- querying ----------------------------------------------------------- */

static pl_status query_fail(pl_store *s, int rc, pl_err *err)
{
    if (rc == SQLITE_NOMEM)
        return pl_errf(err, PL_ERR_NOMEM, "sqlite store %s: out of memory", s->path);
    return store_fail(s, rc, err, "query failed");
}

static const char *arena_text(pl_arena *a, const unsigned char *text, int len)
{
    if (!text)
        return "";
    char *out = pl_arena_memdup(a, text, (size_t)len);
    return out ? out : "";
}

static const char *column_text(pl_arena *a, sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return arena_text(a, t, sqlite3_column_bytes(st, col));
}

/* CPU time of a trace: per sample type, the sum over samples of its spans
 * plus samples that name the trace but no stored span; the largest type
 * wins (a pprof CPU profile carries the same samples as samples:count and
 * cpu:nanoseconds; adding both would double them). -1: no samples. */
static const char trace_cpu_sql[] =
    "SELECT max(c) FROM (SELECT sum(cpu_ns) AS c FROM ("
    " SELECT type_id, cpu_ns FROM samples WHERE span_id IN "
    "  (SELECT span_id FROM spans WHERE trace_id = ?1) AND span_id != 0"
    " UNION ALL"
    " SELECT type_id, cpu_ns FROM samples WHERE trace_id = ?1 AND (span_id = 0 OR span_id NOT IN"
    "  (SELECT span_id FROM spans WHERE trace_id = ?1))"
    ") GROUP BY type_id)";

static int trace_cpu(sqlite3_stmt *st, const uint8_t trace_id[16], int64_t *cpu)
{
    sqlite3_bind_blob(st, 1, trace_id, 16, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *cpu = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        *cpu = -1;
        rc = SQLITE_OK;
    }
    sqlite3_reset(st);
    return rc;
}

static void read_summary(pl_arena *a, sqlite3_stmt *st, pl_trace_summary *t)
{
    /* columns: trace_id, start, end, root_span_id, root_name, root_service,
     * root_start, root_end, span_count, error_count, dur */
    const void *id = sqlite3_column_blob(st, 0);
    if (id && sqlite3_column_bytes(st, 0) == 16)
        memcpy(t->trace_id, id, 16);
    t->start_ns = (uint64_t)sqlite3_column_int64(st, 1);
    t->has_root = sqlite3_column_type(st, 3) != SQLITE_NULL;
    t->root_name = column_text(a, st, 4);
    t->root_service = column_text(a, st, 5);
    t->span_count = (uint32_t)sqlite3_column_int64(st, 8);
    t->error_count = (uint32_t)sqlite3_column_int64(st, 9);
    int64_t dur = sqlite3_column_int64(st, 10);
    t->duration_ns = dur > 0 ? (uint64_t)dur : 0;
    t->cpu_ns = -1;
}

#define SUMMARY_COLUMNS                                                                            \
    "trace_id, start_ns, end_ns, root_span_id, root_name, root_service, root_start_ns, "           \
    "root_end_ns, span_count, error_count, duration_ns"

pl_status pl_store_query_traces(pl_store *s, const pl_trace_query *q, pl_trace_list *out,
                                pl_err *err)
{
    memset(out, 0, sizeof(*out));
    pl_arena_init(&out->arena);
    uint32_t limit = q->limit ? q->limit : 20;
    /* Two plans. Few traces in the window: read them by start time and sort.
     * Many: walk the duration index from the slowest down and stop after
     * `limit` matches, which touches about limit / (share of traces in the
     * window) rows instead of the whole window. */
    int64_t in_window = 0;
    {
        sqlite3_stmt *cnt = NULL;
        int crc = sqlite3_prepare_v2(s->db,
                                     "SELECT count(*) FROM (SELECT 1 FROM traces WHERE start_ns >= "
                                     "?1 LIMIT 20000)",
                                     -1, &cnt, NULL);
        if (crc == SQLITE_OK) {
            sqlite3_bind_int64(cnt, 1, (int64_t)q->since_ns);
            if (sqlite3_step(cnt) == SQLITE_ROW)
                in_window = sqlite3_column_int64(cnt, 0);
        }
        sqlite3_finalize(cnt);
    }
    bool by_duration = in_window >= 20000 || in_window > (int64_t)limit * 200;
    char sql[1024];
    if (by_duration)
        snprintf(sql, sizeof(sql),
                 "SELECT " SUMMARY_COLUMNS " FROM traces INDEXED BY traces_by_duration "
                 "WHERE duration_ns >= ?2 AND start_ns >= ?1 %s "
                 "ORDER BY duration_ns DESC LIMIT ?4",
                 q->service ? "AND EXISTS (SELECT 1 FROM spans INDEXED BY spans_by_trace WHERE "
                              "spans.trace_id = "
                              "traces.trace_id AND spans.service = ?3)"
                            : "");
    else
        snprintf(sql, sizeof(sql),
                 "SELECT " SUMMARY_COLUMNS " FROM traces WHERE start_ns >= ?1 AND duration_ns >= "
                 "?2 %s ORDER BY duration_ns DESC, start_ns DESC LIMIT ?4",
                 q->service ? "AND trace_id IN (SELECT trace_id FROM spans WHERE service = ?3 AND "
                              "start_ns >= ?1)"
                            : "");
    sqlite3_stmt *st = NULL, *cpu = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, trace_cpu_sql, -1, &cpu, NULL);
    if (rc != SQLITE_OK)
        goto done;
    sqlite3_bind_int64(st, 1, (int64_t)q->since_ns);
    sqlite3_bind_int64(st, 2, (int64_t)q->min_duration_ns);
    if (q->service)
        sqlite3_bind_text(st, 3, q->service, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, limit);
    out->items = pl_arena_calloc(&out->arena, limit, sizeof(pl_trace_summary));
    if (!out->items) {
        rc = SQLITE_NOMEM;
        goto done;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && out->n < limit)
        read_summary(&out->arena, st, &out->items[out->n++]);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        rc = SQLITE_OK;
    for (size_t i = 0; i < out->n && rc == SQLITE_OK; i++)
        rc = trace_cpu(cpu, out->items[i].trace_id, &out->items[i].cpu_ns);
done:
    sqlite3_finalize(st);
    sqlite3_finalize(cpu);
    if (rc != SQLITE_OK) {
        pl_trace_list_free(out);
        return query_fail(s, rc, err);
    }
    return PL_OK;
}

void pl_trace_list_free(pl_trace_list *list)
{
    pl_arena_free(&list->arena);
    list->items = NULL;
    list->n = 0;
}

/* ---- decoding stacks for queries ---------------------------------------- */

typedef struct fn_info {
    const char *name;
    const char *file;
} fn_info;

typedef struct stack_info {
    uint32_t *fns; /* indices into decoder.fns, root first */
    uint32_t n;
    const char *folded; /* built on demand */
} stack_info;

typedef struct decoder {
    pl_store *s;
    pl_arena *arena;
    sqlite3_stmt *sel_fn, *sel_stack;
    u64_map fn_index; /* function id -> index + 1 */
    fn_info *fns;
    size_t n_fns, cap_fns;
    u64_map stack_index; /* stack id -> index + 1 */
    stack_info *stacks;
    size_t n_stacks, cap_stacks;
} decoder;

static int decoder_init(decoder *d, pl_store *s, pl_arena *arena)
{
    memset(d, 0, sizeof(*d));
    d->s = s;
    d->arena = arena;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT n.value, f2.value FROM functions f "
                                "JOIN strings n ON n.id = f.name_id "
                                "JOIN strings f2 ON f2.id = f.file_id WHERE f.id = ?1",
                                -1, &d->sel_fn, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "SELECT frames FROM stacks WHERE id = ?1", -1, &d->sel_stack,
                                NULL);
    return rc;
}

static void decoder_free(decoder *d)
{
    sqlite3_finalize(d->sel_fn);
    sqlite3_finalize(d->sel_stack);
    u64_map_clear(&d->fn_index);
    u64_map_clear(&d->stack_index);
    free(d->fns);
    free(d->stacks);
}

static int decode_function(decoder *d, int64_t fid, uint32_t *index)
{
    int64_t v;
    if (u64_map_get(&d->fn_index, (uint64_t)fid, &v)) {
        *index = (uint32_t)(v - 1);
        return SQLITE_OK;
    }
    fn_info info = {"<unknown>", ""};
    sqlite3_bind_int64(d->sel_fn, 1, fid);
    int rc = sqlite3_step(d->sel_fn);
    if (rc == SQLITE_ROW) {
        info.name = column_text(d->arena, d->sel_fn, 0);
        info.file = column_text(d->arena, d->sel_fn, 1);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(d->sel_fn);
    if (rc != SQLITE_OK)
        return rc;
    if (d->n_fns == d->cap_fns) {
        size_t cap = d->cap_fns ? d->cap_fns * 2 : 256;
        fn_info *grown = realloc(d->fns, cap * sizeof(fn_info));
        if (!grown)
            return SQLITE_NOMEM;
        d->fns = grown;
        d->cap_fns = cap;
    }
    d->fns[d->n_fns] = info;
    *index = (uint32_t)d->n_fns++;
    return u64_map_put(&d->fn_index, (uint64_t)fid, (int64_t)*index + 1) ? SQLITE_OK : SQLITE_NOMEM;
}

static int decode_stack(decoder *d, int64_t stack_id, stack_info **out)
{
    int64_t v;
    if (u64_map_get(&d->stack_index, (uint64_t)stack_id, &v)) {
        *out = &d->stacks[v - 1];
        return SQLITE_OK;
    }
    sqlite3_bind_int64(d->sel_stack, 1, stack_id);
    int rc = sqlite3_step(d->sel_stack);
    int64_t local[256];
    int64_t *ids = local;
    int64_t n = 0;
    if (rc == SQLITE_ROW) {
        const uint8_t *blob = sqlite3_column_blob(d->sel_stack, 0);
        size_t len = (size_t)sqlite3_column_bytes(d->sel_stack, 0);
        n = get_varints(blob, len, local, 256);
        if (n > 256) {
            ids = malloc((size_t)n * sizeof(int64_t));
            if (ids)
                get_varints(blob, len, ids, (size_t)n);
            else
                rc = SQLITE_NOMEM;
        }
        if (n < 0)
            n = 0; /* damaged frames: show an empty stack rather than fail */
        if (rc == SQLITE_ROW)
            rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(d->sel_stack);
    stack_info info = {NULL, 0, NULL};
    if (rc == SQLITE_OK && n > 0) {
        info.fns = pl_arena_alloc(d->arena, (size_t)n * sizeof(uint32_t));
        if (!info.fns)
            rc = SQLITE_NOMEM;
        for (int64_t i = 0; i < n && rc == SQLITE_OK; i++)
            rc = decode_function(d, ids[i], &info.fns[i]);
        info.n = (uint32_t)n;
    }
    if (ids != local)
        free(ids);
    if (rc != SQLITE_OK)
        return rc;
    if (d->n_stacks == d->cap_stacks) {
        size_t cap = d->cap_stacks ? d->cap_stacks * 2 : 256;
        stack_info *grown = realloc(d->stacks, cap * sizeof(stack_info));
        if (!grown)
            return SQLITE_NOMEM;
        d->stacks = grown;
        d->cap_stacks = cap;
    }
    d->stacks[d->n_stacks] = info;
    if (!u64_map_put(&d->stack_index, (uint64_t)stack_id, (int64_t)d->n_stacks + 1))
        return SQLITE_NOMEM;
    *out = &d->stacks[d->n_stacks++];
    return SQLITE_OK;
}

/* "root;child;leaf", with ';' and newlines in names replaced so the folded
 * format stays parseable. */
static const char *folded_frames(decoder *d, stack_info *si)
{
    if (si->folded)
        return si->folded;
    size_t len = 0;
    for (uint32_t i = 0; i < si->n; i++)
        len += strlen(d->fns[si->fns[i]].name) + 1;
    char *out = pl_arena_alloc(d->arena, len + 1);
    if (!out)
        return "";
    char *p = out;
    for (uint32_t i = 0; i < si->n; i++) {
        if (i)
            *p++ = ';';
        for (const char *c = d->fns[si->fns[i]].name; *c; c++)
            *p++ = (*c == ';') ? ':' : (*c == '\n' || *c == '\r') ? ' ' : *c;
    }
    *p = 0;
    si->folded = out;
    return out;
}

/* Rows of (span, type, stack) aggregates. */
typedef struct prow {
    int64_t span_id, type_id, stack_id, value, cpu, count;
} prow;

typedef struct prows {
    prow *v;
    size_t n, cap;
} prows;

/* Columns: [span_id,] type_id, stack_id, value, cpu, count. Without a span
 * column, rows of the same (type, stack) are summed here: a hash table in C
 * is much cheaper than SQLite's GROUP BY sorter on large time ranges. */
static int fetch_rows(sqlite3_stmt *st, bool with_span, prows *out)
{
    int rc;
    u64_map index = {0};
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int c = 0;
        prow row;
        row.span_id = with_span ? sqlite3_column_int64(st, c++) : 0;
        row.type_id = sqlite3_column_int64(st, c++);
        row.stack_id = sqlite3_column_int64(st, c++);
        row.value = sqlite3_column_int64(st, c++);
        row.cpu = sqlite3_column_int64(st, c++);
        row.count = sqlite3_column_int64(st, c++);
        if (!with_span) {
            uint64_t key = ((uint64_t)row.type_id << 40) ^ (uint64_t)row.stack_id;
            int64_t at;
            if (key && u64_map_get(&index, key, &at)) {
                prow *r = &out->v[at];
                r->value += row.value;
                r->cpu += row.cpu;
                r->count += row.count;
                continue;
            }
            if (key && !u64_map_put(&index, key, (int64_t)out->n)) {
                rc = SQLITE_NOMEM;
                break;
            }
        }
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 256;
            prow *grown = realloc(out->v, cap * sizeof(prow));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            out->v = grown;
            out->cap = cap;
        }
        out->v[out->n++] = row;
    }
    u64_map_clear(&index);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int string_by_id(pl_store *s, int64_t id, pl_arena *a, const char **out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM strings WHERE id = ?1", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? column_text(a, st, 0) : "";
    sqlite3_finalize(st);
    return (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
}

typedef struct type_choice {
    bool found;
    bool cpu; /* use the cpu column */
    int64_t type_id;
    const char *name; /* "cpu" or the stored "type:unit" */
} type_choice;

/* Picks the sample type to show among rows[0..n): `want` NULL or "cpu":
 * the type with the most CPU time, else (want NULL) the first stored type;
 * otherwise the type named `want` ("alloc_space" or "alloc_space:bytes"). */
static int choose_type(pl_store *s, pl_arena *a, const prow *rows, size_t n, const char *want,
                       type_choice *out)
{
    memset(out, 0, sizeof(*out));
    int64_t types[32], cpu[32];
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        size_t t = 0;
        while (t < nt && types[t] != rows[i].type_id)
            t++;
        if (t == nt) {
            if (nt == 32)
                continue;
            types[nt] = rows[i].type_id;
            cpu[nt++] = 0;
        }
        cpu[t] += rows[i].cpu;
    }
    if (!nt)
        return SQLITE_OK;
    bool want_cpu = !want || !*want || strcmp(want, "cpu") == 0;
    if (want_cpu) {
        size_t best = nt;
        for (size_t t = 0; t < nt; t++)
            if (cpu[t] > 0 && (best == nt || cpu[t] > cpu[best]))
                best = t;
        if (best < nt) {
            *out = (type_choice){true, true, types[best], "cpu:nanoseconds"};
            return SQLITE_OK;
        }
        if (want && *want)
            return SQLITE_OK;
        size_t first = 0;
        for (size_t t = 1; t < nt; t++)
            if (types[t] < types[first])
                first = t;
        out->found = true;
        out->type_id = types[first];
        return string_by_id(s, types[first], a, &out->name);
    }
    size_t wlen = strlen(want);
    for (size_t t = 0; t < nt; t++) {
        const char *name;
        int rc = string_by_id(s, types[t], a, &name);
        if (rc != SQLITE_OK)
            return rc;
        if (strcmp(name, want) == 0 || (strncmp(name, want, wlen) == 0 && name[wlen] == ':')) {
            *out = (type_choice){true, false, types[t], name};
            return SQLITE_OK;
        }
    }
    return SQLITE_OK;
}

static int cmp_fn_self(const void *a, const void *b)
{
    const pl_function_stat *x = a, *y = b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_folded(const void *a, const void *b)
{
    const pl_folded_stack *x = a, *y = b;
    return strcmp(x->frames, y->frames);
}

/* Per-function self and total over the rows of the chosen type. Results
 * (sorted by self) go to *out in the arena; stacks too when `stacks` set. */
static int summarize(decoder *d, const prow *rows, size_t n, const type_choice *tc,
                     pl_function_stat **out_fns, size_t *out_n_fns, pl_folded_stack **stacks,
                     size_t *n_stacks, int64_t *total)
{
    *out_fns = NULL;
    *out_n_fns = 0;
    *total = 0;
    if (stacks) {
        *stacks = NULL;
        *n_stacks = 0;
    }
    if (!tc->found)
        return SQLITE_OK;
    /* Merge rows of the same stack (a trace query may return two). */
    u64_map by_stack = {0};
    int64_t *values = calloc(n ? n : 1, sizeof(int64_t));
    int64_t *stack_ids = calloc(n ? n : 1, sizeof(int64_t));
    size_t ns = 0;
    int rc = (values && stack_ids) ? SQLITE_OK : SQLITE_NOMEM;
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        if (rows[i].type_id != tc->type_id)
            continue;
        int64_t v = tc->cpu ? rows[i].cpu : rows[i].value;
        if (v == 0)
            continue;
        int64_t idx;
        if (u64_map_get(&by_stack, (uint64_t)rows[i].stack_id, &idx)) {
            values[idx - 1] += v;
        } else {
            stack_ids[ns] = rows[i].stack_id;
            values[ns++] = v;
            if (!u64_map_put(&by_stack, (uint64_t)rows[i].stack_id, (int64_t)ns))
                rc = SQLITE_NOMEM;
        }
    }
    u64_map_clear(&by_stack);
    /* indices, not pointers: decoding more stacks may move d->stacks */
    size_t *infos = calloc(ns ? ns : 1, sizeof(size_t));
    if (!infos)
        rc = SQLITE_NOMEM;
    for (size_t i = 0; i < ns && rc == SQLITE_OK; i++) {
        stack_info *si = NULL;
        rc = decode_stack(d, stack_ids[i], &si);
        if (rc == SQLITE_OK)
            infos[i] = (size_t)(si - d->stacks);
    }
    int64_t *self = NULL, *tot = NULL;
    uint32_t *seen = NULL;
    if (rc == SQLITE_OK) {
        size_t nf = d->n_fns ? d->n_fns : 1;
        self = calloc(nf, sizeof(int64_t));
        tot = calloc(nf, sizeof(int64_t));
        seen = calloc(nf, sizeof(uint32_t));
        if (!self || !tot || !seen)
            rc = SQLITE_NOMEM;
    }
    if (rc == SQLITE_OK && stacks && ns) {
        *stacks = pl_arena_calloc(d->arena, ns, sizeof(pl_folded_stack));
        if (!*stacks)
            rc = SQLITE_NOMEM;
    }
    for (size_t i = 0; i < ns && rc == SQLITE_OK; i++) {
        stack_info *si = &d->stacks[infos[i]];
        *total += values[i];
        if (si->n) {
            self[si->fns[si->n - 1]] += values[i];
            for (uint32_t f = 0; f < si->n; f++) {
                uint32_t fi = si->fns[f];
                if (seen[fi] == i + 1)
                    continue; /* recursion: count a function once per stack */
                seen[fi] = (uint32_t)(i + 1);
                tot[fi] += values[i];
            }
        }
        if (stacks) {
            pl_folded_stack *fs = &(*stacks)[(*n_stacks)++];
            fs->frames = folded_frames(d, si);
            fs->value = values[i];
            fs->leaf_function = si->n ? si->fns[si->n - 1] : 0;
        }
    }
    if (rc == SQLITE_OK) {
        size_t count = 0;
        for (size_t f = 0; f < d->n_fns; f++)
            if (tot[f])
                count++;
        if (count) {
            *out_fns = pl_arena_calloc(d->arena, count, sizeof(pl_function_stat));
            if (!*out_fns)
                rc = SQLITE_NOMEM;
        }
        for (size_t f = 0; f < d->n_fns && rc == SQLITE_OK; f++) {
            if (!tot[f])
                continue;
            (*out_fns)[(*out_n_fns)++] =
                (pl_function_stat){d->fns[f].name, d->fns[f].file, self[f], tot[f]};
        }
        if (*out_n_fns)
            qsort(*out_fns, *out_n_fns, sizeof(pl_function_stat), cmp_fn_self);
        if (stacks && *n_stacks)
            qsort(*stacks, *n_stacks, sizeof(pl_folded_stack), cmp_folded);
    }
    free(self);
    free(tot);
    free(seen);
    free(infos);
    free(values);
    free(stack_ids);
    return rc;
}

/* ---- one trace ---------------------------------------------------------- */

static int cmp_prow_span(const void *a, const void *b)
{
    const prow *x = a, *y = b;
    return x->span_id < y->span_id ? -1 : x->span_id > y->span_id;
}

pl_status pl_store_query_trace(pl_store *s, const uint8_t trace_id[16], size_t top_n,
                               pl_trace_detail *out, pl_err *err)
{
    memset(out, 0, sizeof(*out));
    pl_arena_init(&out->arena);
    pl_arena *a = &out->arena;
    sqlite3_stmt *sum = NULL, *spans = NULL, *samples = NULL, *cpu = NULL;
    prows rows = {0};
    decoder dec;
    bool dec_ok = false;
    u64_map index = {0};
    pl_span_row *tmp = NULL;
    size_t n = 0, cap = 0;
    int rc = sqlite3_prepare_v2(s->db, "SELECT " SUMMARY_COLUMNS " FROM traces WHERE trace_id = ?1",
                                -1, &sum, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(
            s->db,
            "SELECT span_id, parent_span_id, name, service, kind, start_ns, end_ns, status_code, "
            "status_message, attributes, profile_id, profile_samples, cpu_time_ns, top_functions, "
            "(SELECT value FROM strings WHERE id = resource_id), events "
            "FROM spans WHERE trace_id = ?1 ORDER BY start_ns, span_id",
            -1, &spans, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "SELECT span_id, type_id, stack_id, sum(value), sum(cpu_ns), "
                                "sum(count) FROM samples WHERE span_id IN (SELECT span_id FROM "
                                "spans WHERE trace_id = ?1) AND span_id != 0 "
                                "GROUP BY span_id, type_id, stack_id",
                                -1, &samples, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, trace_cpu_sql, -1, &cpu, NULL);
    if (rc == SQLITE_OK) {
        rc = decoder_init(&dec, s, a);
        dec_ok = true;
    }
    if (rc != SQLITE_OK)
        goto done;

    sqlite3_bind_blob(sum, 1, trace_id, 16, SQLITE_STATIC);
    rc = sqlite3_step(sum);
    if (rc == SQLITE_ROW)
        read_summary(a, sum, &out->summary);
    else
        memcpy(out->summary.trace_id, trace_id, 16);
    rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
    if (rc == SQLITE_OK)
        rc = trace_cpu(cpu, trace_id, &out->summary.cpu_ns);

    sqlite3_bind_blob(spans, 1, trace_id, 16, SQLITE_STATIC);
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(spans);
        if (rc != SQLITE_ROW)
            break;
        rc = SQLITE_OK;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            pl_span_row *grown = realloc(tmp, cap * sizeof(pl_span_row));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            tmp = grown;
        }
        pl_span_row *r = &tmp[n++];
        memset(r, 0, sizeof(*r));
        memcpy(r->trace_id, trace_id, 16);
        span_id_bytes(sqlite3_column_int64(spans, 0), r->span_id);
        r->has_parent = sqlite3_column_type(spans, 1) != SQLITE_NULL;
        if (r->has_parent)
            span_id_bytes(sqlite3_column_int64(spans, 1), r->parent_span_id);
        r->name = column_text(a, spans, 2);
        r->service = column_text(a, spans, 3);
        r->kind = sqlite3_column_int(spans, 4);
        r->start_ns = (uint64_t)sqlite3_column_int64(spans, 5);
        r->end_ns = (uint64_t)sqlite3_column_int64(spans, 6);
        r->status_code = sqlite3_column_int(spans, 7);
        r->status_message = column_text(a, spans, 8);
        r->attributes_json = column_text(a, spans, 9);
        if (!*r->attributes_json)
            r->attributes_json = "{}";
        r->profile_id = column_text(a, spans, 10);
        r->samples =
            sqlite3_column_type(spans, 11) == SQLITE_NULL ? 0 : sqlite3_column_int64(spans, 11);
        r->cpu_ns =
            sqlite3_column_type(spans, 12) == SQLITE_NULL ? -1 : sqlite3_column_int64(spans, 12);
        r->top_functions_attr = column_text(a, spans, 13);
        r->resource_json = column_text(a, spans, 14);
        if (!*r->resource_json)
            r->resource_json = "{}";
        r->events_json = column_text(a, spans, 15);
        if (!*r->events_json)
            r->events_json = "[]";
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    if (rc != SQLITE_OK)
        goto done;
    if (n == 0) {
        sqlite3_finalize(sum);
        sqlite3_finalize(spans);
        sqlite3_finalize(samples);
        sqlite3_finalize(cpu);
        decoder_free(&dec);
        free(tmp);
        pl_trace_detail_free(out);
        char hex[33];
        pl_hex_encode(trace_id, 16, hex);
        return pl_errf(err, PL_ERR_NOT_FOUND, "trace %s: not in the store", hex);
    }

    /* Per span: CPU and hottest functions from the stored samples. */
    sqlite3_bind_blob(samples, 1, trace_id, 16, SQLITE_STATIC);
    rc = fetch_rows(samples, true, &rows);
    if (rc != SQLITE_OK)
        goto done;
    if (rows.n)
        qsort(rows.v, rows.n, sizeof(prow), cmp_prow_span);
    for (size_t i = 0; i < n; i++)
        if (!u64_map_put(&index, (uint64_t)span_id_int(tmp[i].span_id), (int64_t)i + 1)) {
            rc = SQLITE_NOMEM;
            goto done;
        }
    for (size_t i = 0; i < rows.n && rc == SQLITE_OK;) {
        size_t j = i;
        while (j < rows.n && rows.v[j].span_id == rows.v[i].span_id)
            j++;
        int64_t idx;
        if (u64_map_get(&index, (uint64_t)rows.v[i].span_id, &idx)) {
            pl_span_row *r = &tmp[idx - 1];
            type_choice tc;
            rc = choose_type(s, a, rows.v + i, j - i, NULL, &tc);
            pl_function_stat *fns = NULL;
            size_t nf = 0;
            int64_t total = 0, count = 0;
            if (rc == SQLITE_OK)
                rc = summarize(&dec, rows.v + i, j - i, &tc, &fns, &nf, NULL, NULL, &total);
            for (size_t k = i; k < j; k++)
                if (rows.v[k].type_id == tc.type_id)
                    count += rows.v[k].count;
            if (tc.cpu) {
                r->cpu_ns = total;
            } else if (r->cpu_ns < 0) {
                r->cpu_ns = 0; /* samples, but none of them CPU time */
            }
            r->samples = count;
            /* self values of the chosen type, hottest first */
            size_t hot = 0; /* sorted by self: keep those that ran code themselves */
            while (hot < nf && hot < top_n && fns[hot].self > 0)
                hot++;
            r->top = fns;
            r->n_top = hot;
        }
        i = j;
    }
    if (rc != SQLITE_OK)
        goto done;

    /* Depth-first order: roots (and orphans) by start time, children by
     * start time. Iterative, with a visited mark so cycles cannot loop. */
    {
        int32_t *parent = malloc(n * sizeof(int32_t));
        int32_t *first_child = malloc(n * sizeof(int32_t));
        int32_t *next_sibling = malloc(n * sizeof(int32_t));
        int32_t *last_child = malloc(n * sizeof(int32_t));
        uint8_t *visited = calloc(n, 1);
        int32_t *stack = malloc(n * sizeof(int32_t));
        int *depth = malloc(n * sizeof(int));
        out->spans = pl_arena_calloc(a, n, sizeof(pl_span_row));
        if (!parent || !first_child || !next_sibling || !last_child || !visited || !stack ||
            !depth || !out->spans) {
            rc = SQLITE_NOMEM;
        } else {
            for (size_t i = 0; i < n; i++) {
                parent[i] = -1;
                first_child[i] = last_child[i] = next_sibling[i] = -1;
                int64_t p;
                if (tmp[i].has_parent &&
                    u64_map_get(&index, (uint64_t)span_id_int(tmp[i].parent_span_id), &p) &&
                    (size_t)(p - 1) != i)
                    parent[i] = (int32_t)(p - 1);
            }
            for (size_t i = 0; i < n; i++) { /* tmp is in start order: keep it */
                int32_t p = parent[i];
                if (p < 0)
                    continue;
                if (last_child[p] < 0)
                    first_child[p] = (int32_t)i;
                else
                    next_sibling[last_child[p]] = (int32_t)i;
                last_child[p] = (int32_t)i;
            }
            for (int pass = 0; pass < 2; pass++) {
                for (size_t r = 0; r < n; r++) {
                    /* pass 0: real roots; pass 1: whatever a cycle hid */
                    if (visited[r] || (pass == 0 && parent[r] >= 0))
                        continue;
                    size_t top = 0;
                    stack[top] = (int32_t)r;
                    depth[top++] = 0;
                    while (top) {
                        top--;
                        int32_t i = stack[top];
                        int dp = depth[top];
                        if (visited[i])
                            continue;
                        visited[i] = 1;
                        tmp[i].depth = dp;
                        out->spans[out->n++] = tmp[i];
                        /* push children reversed so the earliest comes out first */
                        size_t base = top, cnt = 0;
                        for (int32_t c = first_child[i]; c >= 0; c = next_sibling[c])
                            if (!visited[c] && top < n) {
                                stack[top] = c;
                                depth[top++] = dp + 1;
                                cnt++;
                            }
                        for (size_t x = 0; x < cnt / 2; x++) {
                            int32_t t = stack[base + x];
                            stack[base + x] = stack[base + cnt - 1 - x];
                            stack[base + cnt - 1 - x] = t;
                        }
                    }
                }
            }
        }
        free(parent);
        free(first_child);
        free(next_sibling);
        free(last_child);
        free(visited);
        free(stack);
        free(depth);
    }
    if (rc == SQLITE_OK && out->summary.span_count == 0) {
        /* no traces row (should not happen): derive the envelope */
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t i = 0; i < n; i++) {
            lo = tmp[i].start_ns < lo ? tmp[i].start_ns : lo;
            hi = tmp[i].end_ns > hi ? tmp[i].end_ns : hi;
        }
        out->summary.start_ns = lo;
        out->summary.duration_ns = hi - lo;
        out->summary.span_count = (uint32_t)n;
        out->summary.root_name = "";
        out->summary.root_service = "";
    }
done:
    sqlite3_finalize(sum);
    sqlite3_finalize(spans);
    sqlite3_finalize(samples);
    sqlite3_finalize(cpu);
    if (dec_ok)
        decoder_free(&dec);
    u64_map_clear(&index);
    free(rows.v);
    free(tmp);
    if (rc != SQLITE_OK) {
        pl_trace_detail_free(out);
        return query_fail(s, rc, err);
    }
    return PL_OK;
}

void pl_trace_detail_free(pl_trace_detail *detail)
{
    pl_arena_free(&detail->arena);
    detail->spans = NULL;
    detail->n = 0;
}

/* ---- profiles ----------------------------------------------------------- */

pl_status pl_store_query_profile(pl_store *s, const pl_profile_query *q, pl_profile_result *out,
                                 pl_err *err)
{
    memset(out, 0, sizeof(*out));
    pl_arena_init(&out->arena);
    out->type = "cpu";
    out->unit = "nanoseconds";
    sqlite3_stmt *st = NULL;
    prows rows = {0};
    decoder dec;
    bool dec_ok = false;
    int rc;
    int64_t service_id = 0;
    if (q->scope == PL_PROFILE_SERVICE && q->service) {
        sqlite3_stmt *sel = NULL;
        rc = sqlite3_prepare_v2(s->db, "SELECT id FROM strings WHERE value = ?1", -1, &sel, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(sel, 1, q->service, -1, SQLITE_STATIC);
            rc = sqlite3_step(sel);
            if (rc == SQLITE_ROW)
                service_id = sqlite3_column_int64(sel, 0);
            rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
        }
        sqlite3_finalize(sel);
        if (rc != SQLITE_OK)
            goto done;
        if (!service_id)
            goto done; /* unknown service: empty profile */
    }
    const char *sql;
    switch (q->scope) {
    case PL_PROFILE_SPAN:
        sql = "SELECT type_id, stack_id, value, cpu_ns, count FROM samples "
              "WHERE span_id = ?1 AND span_id != 0";
        break;
    case PL_PROFILE_TRACE:
        sql =
            "SELECT type_id, stack_id, value, cpu_ns, count FROM samples WHERE span_id IN"
            " (SELECT span_id FROM spans WHERE trace_id = ?1) AND span_id != 0"
            " UNION ALL"
            " SELECT type_id, stack_id, value, cpu_ns, count FROM samples WHERE trace_id = ?1"
            " AND (span_id = 0 OR span_id NOT IN (SELECT span_id FROM spans WHERE trace_id = ?1))";
        break;
    default:
        sql = q->service ? "SELECT type_id, stack_id, value, cpu_ns, count FROM service_profiles "
                           "WHERE service_id = ?1 AND minute >= ?2 AND minute <= ?3"
                         : "SELECT type_id, stack_id, value, cpu_ns, count FROM service_profiles "
                           "WHERE minute >= ?2 AND minute <= ?3";
        break;
    }
    rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto done;
    if (q->scope == PL_PROFILE_SPAN) {
        sqlite3_bind_int64(st, 1, span_id_int(q->span_id));
    } else if (q->scope == PL_PROFILE_TRACE) {
        sqlite3_bind_blob(st, 1, q->trace_id, 16, SQLITE_STATIC);
    } else {
        if (q->service)
            sqlite3_bind_int64(st, 1, service_id);
        sqlite3_bind_int64(st, 2, (int64_t)(q->since_ns / ROLLUP_NS));
        sqlite3_bind_int64(st, 3, q->until_ns ? (int64_t)(q->until_ns / ROLLUP_NS) : INT64_MAX);
    }
    rc = fetch_rows(st, false, &rows);
    if (rc != SQLITE_OK)
        goto done;
    type_choice tc;
    rc = choose_type(s, &out->arena, rows.v, rows.n, q->type, &tc);
    if (rc != SQLITE_OK)
        goto done;
    if (tc.found) {
        if (!tc.cpu) {
            const char *colon = strchr(tc.name, ':');
            if (colon) {
                out->type = pl_arena_memdup(&out->arena, tc.name, (size_t)(colon - tc.name));
                out->unit = colon + 1;
            } else {
                out->type = tc.name;
                out->unit = "";
            }
            if (!out->type)
                out->type = "";
        }
    } else if (q->type && *q->type && strcmp(q->type, "cpu") != 0) {
        out->type = pl_arena_memdup(&out->arena, q->type, strlen(q->type));
        out->unit = "";
    }
    rc = decoder_init(&dec, s, &out->arena);
    dec_ok = true;
    if (rc == SQLITE_OK)
        rc = summarize(&dec, rows.v, rows.n, &tc, &out->functions, &out->n_functions, &out->stacks,
                       &out->n_stacks, &out->total);
done:
    sqlite3_finalize(st);
    if (dec_ok)
        decoder_free(&dec);
    free(rows.v);
    if (rc != SQLITE_OK) {
        pl_profile_result_free(out);
        return query_fail(s, rc, err);
    }
    return PL_OK;
}

void pl_profile_result_free(pl_profile_result *r)
{
    pl_arena_free(&r->arena);
    r->stacks = NULL;
    r->functions = NULL;
    r->n_stacks = r->n_functions = 0;
}

pl_status pl_store_query_services(pl_store *s, char ***names, size_t *n, pl_err *err)
{
    *names = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT DISTINCT name FROM (SELECT s.value AS name FROM services v "
                                "JOIN strings s ON s.id = v.id UNION SELECT DISTINCT root_service "
                                "FROM traces WHERE root_service IS NOT NULL) ORDER BY name",
                                -1, &st, NULL);
    size_t cap = 0;
    while (rc == SQLITE_OK) {
        int step = sqlite3_step(st);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = step;
            break;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(*names, cap * sizeof(char *));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            *names = grown;
        }
        const char *t = (const char *)sqlite3_column_text(st, 0);
        (*names)[*n] = strdup(t ? t : "");
        if (!(*names)[*n]) {
            rc = SQLITE_NOMEM;
            break;
        }
        (*n)++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        pl_store_free_names(*names, *n);
        *names = NULL;
        *n = 0;
        return query_fail(s, rc, err);
    }
    return PL_OK;
}

void pl_store_free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void format_scaled(double v, const char *unit, char *out, size_t cap)
{
    if (v < 10)
        snprintf(out, cap, "%.2f%s", v, unit);
    else if (v < 100)
        snprintf(out, cap, "%.1f%s", v, unit);
    else
        snprintf(out, cap, "%.0f%s", v, unit);
}

void pl_format_duration(uint64_t ns, char *out, size_t cap)
{
    if (ns >= 1000000000ull)
        format_scaled((double)ns / 1e9, "s", out, cap);
    else if (ns >= 1000000ull)
        format_scaled((double)ns / 1e6, "ms", out, cap);
    else if (ns >= 1000ull)
        format_scaled((double)ns / 1e3, "us", out, cap);
    else
        snprintf(out, cap, "%" PRIu64 "ns", ns);
}
