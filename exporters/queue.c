/*
 * queue.c: the sending queue (see queue.h for the design).
 *
 * Data structures:
 *   - a FIFO (singly linked, head/tail) of entries waiting for a slot;
 *   - num_consumers slots, each idle, sending one entry, or waiting (a
 *     uv_timer_t) to send it again;
 *   - totals of batches, items and bytes over every unfinished entry, checked
 *     against the bounds on each export and published as gauges.
 * An entry owns its payload. An entry reloaded from storage has no payload
 * until a slot takes it (reading every row at start would need memory for
 * the whole backlog at once).
 *
 * A send's completion token (pl_queue_send) is a separate allocation so
 * that the queue can be freed while an HTTP request is still out: the token
 * is then orphaned and only frees itself and its entry when it completes.
 */
#include "exporters/queue.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "config/decode.h"
#include "core/log.h"
#include "core/sqlite_file.h"
#include "exporters/queue_wal.h"

/* ---- config tables ------------------------------------------------------ */

static const char *const sizers[] = {"requests", "items", "bytes", NULL};

static bool sizer_known(const char *s)
{
    for (size_t i = 0; s && sizers[i]; i++)
        if (strcmp(s, sizers[i]) == 0)
            return true;
    return !s;
}

/* The Collector's sizer: queue_size counts requests (proflink's batches),
 * items or bytes; the latter two become the max_items / max_bytes bound
 * (a batch holds at least one item or byte, so queue_size also bounds the
 * batches). `batch:` present turns on batching in the exporter. */
static int sending_queue_validate(void *cfg, pl_cfg_ctx *ctx)
{
    pl_sending_queue_config *c = cfg;
    int errors = 0;
    if (!sizer_known(c->sizer)) {
        pl_cfg_errorf(ctx, "sizer", "must be requests, items or bytes, not '%s'", c->sizer);
        errors++;
    } else if (c->sizer && strcmp(c->sizer, "items") == 0) {
        c->max_items = c->queue_size;
    } else if (c->sizer && strcmp(c->sizer, "bytes") == 0) {
        c->max_bytes = (uint64_t)c->queue_size;
    }
    c->batch_enabled = pl_cfg_node_key(ctx->map, "batch") != NULL;
    if (c->batch_enabled) {
        const char *bs = c->batch.sizer ? c->batch.sizer : c->sizer;
        if (!sizer_known(c->batch.sizer)) {
            pl_cfg_errorf(ctx, "batch", "sizer must be requests, items or bytes, not '%s'",
                          c->batch.sizer);
            errors++;
        } else if (bs && strcmp(bs, "items") != 0 && sizer_known(bs)) {
            pl_cfg_warnf(ctx, "batch",
                         "proflink batches by items: min_size and max_size count spans, "
                         "samples, log records or data points (sizer '%s' is not applied)",
                         bs);
        }
        if (c->batch.max_size > 0 && c->batch.max_size < c->batch.min_size) {
            pl_cfg_errorf(ctx, "batch", "max_size must be 0 or at least min_size");
            errors++;
        }
    }
    return errors;
}

#include "exporters/queue.config.inc"

static const pl_sending_queue_config *queue_config_in(const pl_cfg_section *section,
                                                      const void *cfg, int depth)
{
    /* the section's own sending_queue first, then nested ones */
    for (size_t i = 0; section && cfg && section->fields[i].key; i++)
        if (section->fields[i].type == PL_CFG_SECTION &&
            section->fields[i].section == &pl_sending_queue_section)
            return (const void *)((const char *)cfg + section->fields[i].offset);
    for (size_t i = 0; section && cfg && depth < 4 && section->fields[i].key; i++) {
        const pl_cfg_field *f = &section->fields[i];
        if (f->type != PL_CFG_SECTION || !f->section)
            continue;
        const void *sub = (const char *)cfg + f->offset;
        const pl_sending_queue_config *q = queue_config_in(f->section, sub, depth + 1);
        if (q)
            return q;
    }
    return NULL;
}

const pl_sending_queue_config *pl_queue_config_of(const pl_cfg_section *section, const void *cfg)
{
    return queue_config_in(section, cfg, 0);
}

/* ---- types -------------------------------------------------------------- */

typedef struct qentry {
    struct qentry *next;
    pl_signal signal;
    uint64_t items;
    size_t len;          /* payload size (uncompressed) */
    uint8_t *payload;    /* NULL: only in storage, read when a slot takes it */
    int64_t row_id;      /* storage row; 0 when not persisted */
    uint64_t first_send; /* monotonic ns of the first attempt; 0 before it */
    unsigned failures;
} qentry;

typedef enum slot_state { SLOT_IDLE, SLOT_SENDING, SLOT_WAITING } slot_state;

typedef struct slot {
    pl_queue *queue;
    slot_state state;
    qentry *entry;
    pl_queue_send *send;
    uv_timer_t timer;
} slot;

struct pl_queue_send {
    pl_queue *queue; /* NULL once the queue is gone (orphaned) */
    slot *slot;
    qentry *entry;
    uint64_t started_ns; /* for the send duration histogram */
};

struct pl_queue {
    const pl_host *host; /* the worker pool that encodes (NULL: none) */
    char *id;
    uv_loop_t *loop;
    pl_stats *stats;
    bool cannot_store;            /* /health says degraded until a batch is stored again */
    pl_sending_queue_config qcfg; /* storage pointer not kept */
    pl_retry_config rcfg;
    pl_queue_sender sender;

    qentry *head, *tail;
    size_t batches; /* unfinished: queued + in slots */
    uint64_t items;
    uint64_t bytes;
    size_t max_batches;

    slot *slots;
    size_t n_slots;
    size_t in_flight;
    bool started, draining;
    int pumping;
    bool pump_again;
    int open_handles;
    uint64_t last_full_warning;
    uint64_t rng;
    pl_buf encoded;

    /* The storage connection belongs to the pipeline loop (opened in create,
     * used by export, the sends' completions and the delete check, closed in
     * destroy); the write-ahead log shares it on the same thread. Nothing
     * else touches it: with storage the queue never encodes on a worker. */
    sqlite3 *db;
    char *db_path;
    bool in_tx;                  /* inside pl_queue_tx_begin / end */
    pl_log_limit storage_errors; /* repeated write errors (a full disk), loop thread */
    sqlite3_stmt *st_insert, *st_delete, *st_payload, *st_count;
    int64_t *deletes; /* rows sent, to delete at the end of this loop iteration */
    size_t n_deletes, cap_deletes;
    uv_check_t delete_check;
    bool storage_registered;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;

    /* batches being encoded on the workers, in the order they were
     * admitted (see queue.h); counted in batches and items */
    struct enc_job *enc_head, *enc_tail;

    int64_t *g_batches, *g_items, *g_bytes;
    /* what queue_size counts (the sizer), and what is held in that unit:
     * the Collector's otelcol_exporter_queue_size */
    enum { SIZE_REQUESTS, SIZE_ITEMS, SIZE_BYTES } size_unit;
    int64_t *g_size;
    pl_histogram *h_send;
    uint64_t *c_retries, *c_send_errors, *c_stored;
};

static void pump(pl_queue *q);
static void on_retry_timer(uv_timer_t *timer);

void pl_send_result_set(pl_send_result *result, pl_send_outcome outcome, const char *fmt, ...)
{
    memset(result, 0, sizeof(*result));
    result->outcome = outcome;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(result->message, sizeof(result->message), fmt, ap);
        va_end(ap);
    }
}

static void update_gauges(pl_queue *q)
{
    *q->g_batches = (int64_t)q->batches;
    *q->g_items = (int64_t)q->items;
    *q->g_bytes = (int64_t)q->bytes;
    *q->g_size = q->size_unit == SIZE_ITEMS   ? *q->g_items
                 : q->size_unit == SIZE_BYTES ? *q->g_bytes
                                              : *q->g_batches;
}

static double random_unit(pl_queue *q) /* [0, 1) */
{
    /* xorshift64*: jitter only needs to spread retries, not be secret. */
    q->rng ^= q->rng >> 12;
    q->rng ^= q->rng << 25;
    q->rng ^= q->rng >> 27;
    return (double)((q->rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
}

/* The wait before retry number `failures` (1 = first retry), as the
 * Collector's exponential backoff computes it. */
static int64_t backoff_ns(pl_queue *q, unsigned failures)
{
    double interval = (double)q->rcfg.initial_interval;
    for (unsigned i = 1; i < failures && interval < (double)q->rcfg.max_interval; i++)
        interval *= q->rcfg.multiplier;
    if (interval > (double)q->rcfg.max_interval)
        interval = (double)q->rcfg.max_interval;
    double delta = q->rcfg.randomization_factor * interval;
    double low = interval - delta;
    double wait = low + random_unit(q) * (2 * delta);
    return wait < 0 ? 0 : (int64_t)wait;
}

static const char *duration_text(int64_t ns, char *buf, size_t size)
{
    if (ns >= 1000000000LL)
        snprintf(buf, size, "%.1fs", (double)ns / 1e9);
    else
        snprintf(buf, size, "%lldms", (long long)(ns / 1000000));
    return buf;
}

/* ---- storage ------------------------------------------------------------ */

static int mkdir_parents(const char *path, bool include_last)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    size_t len = strlen(copy);
    for (size_t i = 1; i <= len; i++) {
        if (copy[i] == '/' || (include_last && copy[i] == 0)) {
            char saved = copy[i];
            copy[i] = 0;
            if (mkdir(copy, 0755) != 0 && errno != EEXIST) {
                free(copy);
                return -1;
            }
            copy[i] = saved;
        }
    }
    free(copy);
    return 0;
}

/* `storage` names a directory (one database per exporter inside) when it ends
 * in '/', is an existing directory, or does not exist yet and its last
 * component has no extension (`./data/queue`, as in the Collector's
 * file_storage directory); otherwise it is the database file itself
 * (`./data/tempo.db`). */
static bool storage_is_dir(const char *storage)
{
    size_t len = strlen(storage);
    struct stat st;
    if (storage[len - 1] == '/')
        return true;
    if (stat(storage, &st) == 0)
        return S_ISDIR(st.st_mode);
    const char *base = strrchr(storage, '/');
    base = base ? base + 1 : storage;
    return strchr(base, '.') == NULL;
}

char *pl_queue_storage_file(const char *storage, const char *id)
{
    if (!storage || !storage[0])
        return NULL;
    size_t len = strlen(storage);
    bool is_dir = storage_is_dir(storage);
    if (!is_dir)
        return strdup(storage);
    size_t id_len = strlen(id ? id : "queue");
    char *out = malloc(len + id_len + 16);
    if (!out)
        return NULL;
    size_t n = (size_t)sprintf(out, "%s%s", storage, storage[len - 1] == '/' ? "" : "/");
    for (const char *p = id ? id : "queue"; *p; p++)
        out[n++] = (*p == '/' || *p == '\\') ? '_' : *p;
    strcpy(out + n, ".queue.db");
    return out;
}

/* The database is opened with locking_mode=EXCLUSIVE (one lock for the
 * connection's life instead of lock calls on every transaction), so two
 * queues must never share a file: the host's claims refuse a second one with
 * a clear message instead of letting it block on the lock. (The lock also
 * keeps a second proflink process away.) */
static pl_status storage_open(pl_queue *q, const char *storage, pl_err *err)
{
    q->db_path = pl_queue_storage_file(storage, q->id);
    if (!q->db_path)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    char holder[256];
    if (!pl_host_claim(q->host, q->db_path, q->id, holder, sizeof(holder))) {
        if (!holder[0])
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return pl_errf(err, PL_ERR_INVALID,
                       "sending_queue.storage: %s is already used by %s; give each exporter "
                       "its own file, or a directory",
                       q->db_path, holder);
    }
    q->storage_registered = true;
    mkdir_parents(q->db_path, false);
    /* A damaged file is set aside (never a refusal to start that holds the
     * answered data hostage); what can be read of it is copied below. */
    char aside[4200];
    bool moved = pl_sqlite_file_check(q->db_path, q->id, aside, sizeof(aside));
    /* The queue holds client data: created 0600 (SQLite gives its -wal and
     * -shm files the database file's mode). */
    int fd = open(q->db_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    int rc = sqlite3_open_v2(
        q->db_path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        pl_errf(err, PL_ERR_INTERNAL, "sending_queue.storage: cannot open %s: %s", q->db_path,
                q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc));
        return PL_ERR_INTERNAL;
    }
    /* 16 KiB pages: a compressed batch of a few KiB then fits in one page
     * rather than a chain of overflow pages, which roughly halves the WAL
     * frames written per INSERT and DELETE. No index on `exporter`: one
     * table scan at start costs less than maintaining an index on every
     * insert and delete (several exporters share a file only when storage
     * names a file rather than a directory). */
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "PRAGMA busy_timeout=5000;"
             "PRAGMA locking_mode=EXCLUSIVE;"
             "PRAGMA page_size=16384;"
             "PRAGMA journal_mode=WAL;"
             "PRAGMA synchronous=%s;"
             "CREATE TABLE IF NOT EXISTS pl_queue("
             " id INTEGER PRIMARY KEY AUTOINCREMENT,"
             " exporter TEXT NOT NULL,"
             " signal INTEGER NOT NULL,"
             " items INTEGER NOT NULL,"
             " raw_size INTEGER NOT NULL,"
             " created_unix_nano INTEGER NOT NULL,"
             " payload BLOB NOT NULL,"
             " stored_as INTEGER NOT NULL DEFAULT 0);",
             q->qcfg.fsync ? "FULL" : "NORMAL");
    char *msg = NULL;
    rc = sqlite3_exec(q->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        pl_errf(err, PL_ERR_INTERNAL, "sending_queue.storage: %s: %s", q->db_path,
                msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return PL_ERR_INTERNAL;
    }
    if (moved) {
        /* the queue's rows and the write-ahead log's (queue_wal.c): both
         * were answered; they are sent or replayed from the fresh file */
        static const char *const tables[] = {"pl_queue", "pl_wal", NULL};
        pl_sqlite_file_salvage(q->db, aside, tables, q->id);
    }
    struct {
        sqlite3_stmt **st;
        const char *sql;
    } stmts[] = {
        {&q->st_insert, "INSERT INTO pl_queue(exporter, signal, items, raw_size, created_unix_nano,"
                        " payload, stored_as) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)"},
        {&q->st_delete, "DELETE FROM pl_queue WHERE id = ?1"},
        {&q->st_payload, "SELECT payload, stored_as FROM pl_queue WHERE id = ?1"},
        {&q->st_count, "SELECT count(*) FROM pl_queue WHERE exporter = ?1"},
    };
    for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++) {
        rc = sqlite3_prepare_v2(q->db, stmts[i].sql, -1, stmts[i].st, NULL);
        if (rc != SQLITE_OK)
            return pl_errf(err, PL_ERR_INTERNAL, "sending_queue.storage: %s: %s", q->db_path,
                           sqlite3_errmsg(q->db));
    }
    q->cctx = ZSTD_createCCtx();
    q->dctx = ZSTD_createDCtx();
    if (!q->cctx || !q->dctx)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    return PL_OK;
}

/* How a row's payload column holds the payload. */
enum { STORED_ZSTD = 0, STORED_RAW = 1 };

/* INSERT + COMMIT (autocommit) of one payload; returns the row id or 0. */
static int64_t storage_insert(pl_queue *q, pl_signal signal, const uint8_t *payload, size_t len,
                              uint64_t items)
{
    /* Payloads the exporter compressed already are stored as they are
     * (STORED_RAW); the others are compressed with zstd (STORED_ZSTD). */
    uint8_t *packed = NULL;
    const void *blob = payload;
    size_t blob_len = len;
    int stored_as = STORED_RAW;
    if (!q->sender.payload_compressed) {
        size_t bound = ZSTD_compressBound(len);
        packed = malloc(bound ? bound : 1);
        if (!packed) {
            pl_error(q->id, "sending_queue: out of memory compressing a batch");
            return 0;
        }
        blob_len = ZSTD_compressCCtx(q->cctx, packed, bound, payload, len, 1);
        if (ZSTD_isError(blob_len)) {
            pl_error(q->id, "sending_queue: zstd: %s", ZSTD_getErrorName(blob_len));
            free(packed);
            return 0;
        }
        blob = packed;
        stored_as = STORED_ZSTD;
    }
    sqlite3_stmt *st = q->st_insert;
    sqlite3_bind_text(st, 1, q->id, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, (int)signal);
    sqlite3_bind_int64(st, 3, (sqlite3_int64)items);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)len);
    sqlite3_bind_int64(st, 5, (sqlite3_int64)pl_time_now_ns());
    sqlite3_bind_blob(st, 6, blob, (int)blob_len, SQLITE_STATIC);
    sqlite3_bind_int(st, 7, stored_as);
    int rc = sqlite3_step(st);
    char why[300] = "";
    if (rc != SQLITE_DONE) { /* the error now: the reset below may replace it */
        snprintf(why, sizeof(why), "sending_queue: cannot store a batch in %s: %s", q->db_path,
                 sqlite3_errmsg(q->db));
        pl_log_limited(&q->storage_errors, PL_LOG_ERROR, q->id, "%s", why);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    free(packed);
    if (rc != SQLITE_DONE) {
        pl_stats_set_degraded(q->stats, why);
        q->cannot_store = true;
        return 0;
    }
    if (q->cannot_store) {
        pl_stats_set_degraded(q->stats, NULL);
        q->cannot_store = false;
    }
    (*q->c_stored)++;
    return (int64_t)sqlite3_last_insert_rowid(q->db);
}

/* Deletes of sent rows are collected and committed together once per loop
 * iteration (a uv_check handle runs right after the poll phase that
 * delivered the answers): one commit instead of one per row. Until then a
 * row is like a request still in flight: a crash makes it be sent again,
 * never lost. */
static void storage_flush_deletes(pl_queue *q)
{
    if (!q->n_deletes)
        return;
    uv_check_stop(&q->delete_check);
    bool tx = sqlite3_exec(q->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_stmt *st = q->st_delete;
    for (size_t i = 0; i < q->n_deletes; i++) {
        sqlite3_bind_int64(st, 1, q->deletes[i]);
        int rc = sqlite3_step(st);
        if (rc != SQLITE_DONE)
            pl_log_limited(&q->storage_errors, PL_LOG_ERROR, q->id,
                           "sending_queue: cannot delete row %lld from %s: %s (it will be sent "
                           "again after a restart)",
                           (long long)q->deletes[i], q->db_path, sqlite3_errmsg(q->db));
        sqlite3_reset(st);
    }
    if (tx && sqlite3_exec(q->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        pl_log_limited(&q->storage_errors, PL_LOG_ERROR, q->id,
                       "sending_queue: cannot commit deletes in %s: %s", q->db_path,
                       sqlite3_errmsg(q->db));
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
    }
    q->n_deletes = 0;
}

static void on_delete_check(uv_check_t *check)
{
    storage_flush_deletes(check->data);
}

static void storage_delete(pl_queue *q, int64_t row_id)
{
    if (q->n_deletes == q->cap_deletes) {
        size_t cap = q->cap_deletes ? q->cap_deletes * 2 : 64;
        int64_t *d = realloc(q->deletes, cap * sizeof(*d));
        if (!d) {
            storage_flush_deletes(q);
            if (q->n_deletes == q->cap_deletes)
                return; /* cannot happen: flushing emptied it */
        } else {
            q->deletes = d;
            q->cap_deletes = cap;
        }
    }
    q->deletes[q->n_deletes++] = row_id;
    if (!uv_is_active((uv_handle_t *)&q->delete_check))
        uv_check_start(&q->delete_check, on_delete_check);
}

/* Reads and decompresses the payload of a reloaded entry. */
static int storage_load_payload(pl_queue *q, qentry *e)
{
    sqlite3_stmt *st = q->st_payload;
    sqlite3_bind_int64(st, 1, e->row_id);
    int ok = -1;
    if (sqlite3_step(st) == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(st, 0);
        size_t blob_len = (size_t)sqlite3_column_bytes(st, 0);
        int stored_as = sqlite3_column_int(st, 1);
        /* The row's raw_size is only believed when the blob agrees with it:
         * a damaged row must not make the queue allocate what it claims. */
        bool plausible = false;
        if (stored_as == STORED_RAW)
            plausible = blob_len == e->len;
        else if (stored_as == STORED_ZSTD && blob)
            plausible = ZSTD_getFrameContentSize(blob, blob_len) == (unsigned long long)e->len;
        uint8_t *out = plausible ? malloc(e->len ? e->len : 1) : NULL;
        if (out && (blob || !blob_len) && stored_as == STORED_RAW && blob_len == e->len) {
            if (blob_len)
                memcpy(out, blob, blob_len);
            e->payload = out;
            out = NULL;
            ok = 0;
        } else if (out && blob && stored_as == STORED_ZSTD) {
            size_t n = ZSTD_decompressDCtx(q->dctx, out, e->len, blob, blob_len);
            if (!ZSTD_isError(n) && n == e->len) {
                e->payload = out;
                out = NULL;
                ok = 0;
            }
        }
        free(out);
    }
    sqlite3_reset(st);
    return ok;
}

static size_t storage_count(const pl_queue *q)
{
    if (!q->db)
        return 0;
    sqlite3_stmt *st = q->st_count;
    sqlite3_bind_text(st, 1, q->id, -1, SQLITE_STATIC);
    size_t n = 0;
    if (sqlite3_step(st) == SQLITE_ROW)
        n = (size_t)sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return n;
}

/* ---- entries ------------------------------------------------------------ */

static void fifo_push_back(pl_queue *q, qentry *e)
{
    e->next = NULL;
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
}

static void fifo_push_front(pl_queue *q, qentry *e)
{
    e->next = q->head;
    q->head = e;
    if (!q->tail)
        q->tail = e;
}

static qentry *fifo_pop(pl_queue *q)
{
    qentry *e = q->head;
    if (e) {
        q->head = e->next;
        if (!q->head)
            q->tail = NULL;
        e->next = NULL;
    }
    return e;
}

static void entry_free(qentry *e)
{
    if (e) {
        free(e->payload);
        free(e);
    }
}

/* The entry is done with (sent, or given up on): forget it everywhere. */
static void entry_finish(pl_queue *q, qentry *e)
{
    if (e->row_id && q->db)
        storage_delete(q, e->row_id);
    q->batches--;
    q->items -= e->items;
    q->bytes -= e->len;
    update_gauges(q);
    entry_free(e);
}

static void entry_fail(pl_queue *q, qentry *e, const char *why)
{
    pl_stats_add(q->stats, e->signal, PL_STAT_FAILED, e->items);
    pl_error(q->id, "dropping %llu %s after %u attempt(s): %s", (unsigned long long)e->items,
             pl_signal_name(e->signal), e->failures + 1, why);
    entry_finish(q, e);
}

/* ---- sending ------------------------------------------------------------ */

static void slot_send(slot *s)
{
    pl_queue *q = s->queue;
    qentry *e = s->entry;
    if (!e->payload && storage_load_payload(q, e) != 0) {
        s->entry = NULL;
        s->state = SLOT_IDLE;
        pl_stats_add(q->stats, e->signal, PL_STAT_FAILED, e->items);
        pl_error(q->id, "dropping %llu %s: stored row %lld is unreadable or corrupt",
                 (unsigned long long)e->items, pl_signal_name(e->signal), (long long)e->row_id);
        entry_finish(q, e);
        return;
    }
    pl_queue_send *send = calloc(1, sizeof(*send));
    if (!send) {
        /* Try again later rather than lose the entry. */
        s->state = SLOT_WAITING;
        uv_timer_start(&s->timer, on_retry_timer, 100, 0);
        return;
    }
    if (!e->first_send)
        e->first_send = pl_time_mono_ns();
    send->queue = q;
    send->slot = s;
    send->entry = e;
    send->started_ns = pl_time_mono_ns();
    s->send = send;
    s->state = SLOT_SENDING;
    q->in_flight++;
    q->sender.send(q->sender.arg, e->signal, e->payload, e->len, send);
}

static void pump(pl_queue *q)
{
    if (!q->started)
        return;
    if (q->pumping) {
        q->pump_again = true;
        return;
    }
    q->pumping = 1;
    do {
        q->pump_again = false;
        for (size_t i = 0; i < q->n_slots && q->head; i++) {
            slot *s = &q->slots[i];
            if (s->state != SLOT_IDLE)
                continue;
            if (q->draining && q->db)
                break; /* storage mode: what is not in flight waits on disk */
            s->entry = fifo_pop(q);
            slot_send(s);
        }
    } while (q->pump_again);
    q->pumping = 0;
}

static void on_retry_timer(uv_timer_t *timer)
{
    slot *s = timer->data;
    pl_queue *q = s->queue;
    if (s->state != SLOT_WAITING || !s->entry)
        return;
    if (q->draining && q->db) {
        /* Stored: leave it for the next start instead of retrying now. */
        fifo_push_front(q, s->entry);
        s->entry = NULL;
        s->state = SLOT_IDLE;
        return;
    }
    slot_send(s);
    pump(q);
}

void pl_queue_send_done(pl_queue_send *send, const pl_send_result *result)
{
    pl_queue *q = send->queue;
    if (!q) { /* the queue was destroyed while this was out */
        entry_free(send->entry);
        free(send);
        return;
    }
    slot *s = send->slot;
    qentry *e = send->entry;
    pl_histogram_observe_ns(q->h_send, pl_time_mono_ns() - send->started_ns);
    free(send);
    s->send = NULL;
    q->in_flight--;
    char d1[32], d2[32];

    switch (result->outcome) {
    case PL_SEND_OK: {
        uint64_t rejected = result->rejected_items < e->items ? result->rejected_items : e->items;
        pl_stats_add(q->stats, e->signal, PL_STAT_SENT, e->items - rejected);
        if (rejected) {
            pl_stats_add(q->stats, e->signal, PL_STAT_FAILED, rejected);
            pl_warn(q->id, "partial success: the backend rejected %llu of %llu %s: %s",
                    (unsigned long long)rejected, (unsigned long long)e->items,
                    pl_signal_name(e->signal), result->message[0] ? result->message : "no reason");
        } else if (result->message[0]) {
            pl_warn(q->id, "the backend accepted %llu %s with a warning: %s",
                    (unsigned long long)e->items, pl_signal_name(e->signal), result->message);
        }
        s->entry = NULL;
        s->state = SLOT_IDLE;
        entry_finish(q, e);
        break;
    }
    case PL_SEND_PERMANENT:
        s->entry = NULL;
        s->state = SLOT_IDLE;
        entry_fail(q, e, result->message[0] ? result->message : "permanent error");
        break;
    case PL_SEND_RETRYABLE:
    default: {
        (*q->c_send_errors)++;
        e->failures++;
        if (q->draining && q->db) {
            /* Shutting down with storage: keep it on disk, do not wait. */
            s->entry = NULL;
            s->state = SLOT_IDLE;
            fifo_push_front(q, e);
            break;
        }
        if (!q->rcfg.enabled) {
            s->entry = NULL;
            s->state = SLOT_IDLE;
            char why[400];
            snprintf(why, sizeof(why), "%s (retry_on_failure disabled)", result->message);
            e->failures--;
            entry_fail(q, e, why);
            break;
        }
        int64_t wait = backoff_ns(q, e->failures);
        if (result->retry_after_ns > wait)
            wait = result->retry_after_ns;
        int64_t elapsed = (int64_t)(pl_time_mono_ns() - e->first_send);
        if (q->rcfg.max_elapsed_time > 0 && elapsed + wait > q->rcfg.max_elapsed_time) {
            s->entry = NULL;
            s->state = SLOT_IDLE;
            char why[400];
            snprintf(why, sizeof(why), "still failing after %s (max_elapsed_time): %s",
                     duration_text(elapsed, d1, sizeof(d1)), result->message);
            e->failures--;
            entry_fail(q, e, why);
            break;
        }
        (*q->c_retries)++;
        pl_debug(q->id, "%s failed (%s), retry %u in %s", pl_signal_name(e->signal),
                 result->message, e->failures, duration_text(wait, d2, sizeof(d2)));
        if (e->failures == 1)
            pl_warn(q->id, "sending %llu %s failed, will retry: %s", (unsigned long long)e->items,
                    pl_signal_name(e->signal), result->message);
        s->state = SLOT_WAITING;
        uv_timer_start(&s->timer, on_retry_timer, (uint64_t)(wait / 1000000), 0);
        break;
    }
    }
    pump(q);
}

/* ---- public API --------------------------------------------------------- */

pl_queue *pl_queue_new(const pl_create_settings *settings, const pl_sending_queue_config *qcfg,
                       const pl_retry_config *rcfg, const pl_queue_sender *sender, pl_err *err)
{
    pl_queue *q = calloc(1, sizeof(*q));
    if (!q) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    q->id = strdup(settings->id ? settings->id : "exporter");
    q->loop = settings->loop;
    q->stats = settings->stats;
    q->host = settings->host;
    q->qcfg = *qcfg;
    q->qcfg.storage = NULL;
    q->rcfg = *rcfg;
    q->sender = *sender;
    q->rng = pl_time_mono_ns() ^ (uint64_t)(uintptr_t)q ^ 0x9e3779b97f4a7c15ULL;
    if (!q->rng)
        q->rng = 1;
    pl_buf_init(&q->encoded);
    q->n_slots = qcfg->num_consumers > 0 ? (size_t)qcfg->num_consumers : 1;
    if (q->n_slots > 1024)
        q->n_slots = 1024;
    q->max_batches =
        qcfg->enabled ? (size_t)(qcfg->queue_size > 0 ? qcfg->queue_size : 1) : q->n_slots;
    q->slots = calloc(q->n_slots, sizeof(slot));
    if (!q->id || !q->slots) {
        free(q->id);
        free(q->slots);
        free(q);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < q->n_slots; i++) {
        slot *s = &q->slots[i];
        s->queue = q;
        uv_timer_init(q->loop, &s->timer);
        s->timer.data = s;
        q->open_handles++;
    }
    uv_check_init(q->loop, &q->delete_check);
    q->delete_check.data = q;
    q->open_handles++;
    q->g_batches = pl_stats_gauge(q->stats, "queue_batches", "batches held by the sending queue");
    q->g_items = pl_stats_gauge(q->stats, "queue_items", "items held by the sending queue");
    /* the Collector's otelcol_exporter_queue_size and _capacity: what is
     * held and queue_size, both in units of the sizer */
    q->size_unit = qcfg->sizer && strcmp(qcfg->sizer, "items") == 0   ? SIZE_ITEMS
                   : qcfg->sizer && strcmp(qcfg->sizer, "bytes") == 0 ? SIZE_BYTES
                                                                      : SIZE_REQUESTS;
    q->g_size =
        pl_stats_gauge(q->stats, "queue_used", "held by the sending queue, in units of its sizer");
    *pl_stats_gauge(q->stats, "queue_capacity",
                    "capacity of the sending queue (queue_size), in units of its sizer") =
        q->qcfg.queue_size;
    q->h_send = pl_stats_histogram(q->stats, "send_duration_seconds",
                                   "Time from a send's start to its outcome (any outcome).");
    q->g_bytes = pl_stats_gauge(q->stats, "queue_bytes", "encoded bytes held by the sending queue");
    q->c_retries = pl_stats_counter(q->stats, "send_retries", "sends retried after a failure");
    q->c_send_errors =
        pl_stats_counter(q->stats, "send_errors", "send attempts that failed (retryable)");
    q->c_stored = pl_stats_counter(q->stats, "queue_stored", "batches written to the storage");
    if (qcfg->storage && qcfg->storage[0] && storage_open(q, qcfg->storage, err) != PL_OK) {
        pl_queue_destroy(q);
        return NULL;
    }
    return q;
}

pl_status pl_queue_start(pl_queue *q, pl_err *err)
{
    if (q->db) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(q->db,
                               "SELECT id, signal, items, raw_size FROM pl_queue"
                               " WHERE exporter = ?1 ORDER BY id",
                               -1, &st, NULL) != SQLITE_OK)
            return pl_errf(err, PL_ERR_INTERNAL, "sending_queue.storage: %s: %s", q->db_path,
                           sqlite3_errmsg(q->db));
        sqlite3_bind_text(st, 1, q->id, -1, SQLITE_STATIC);
        size_t n = 0;
        uint64_t items = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            int64_t signal = sqlite3_column_int64(st, 1);
            int64_t raw = sqlite3_column_int64(st, 3);
            int64_t row_id = sqlite3_column_int64(st, 0);
            if (signal < 0 || signal >= PL_SIGNAL_COUNT || raw < 0 || raw > INT32_MAX) {
                pl_error(q->id, "sending_queue: skipping invalid stored row %lld",
                         (long long)row_id);
                continue;
            }
            qentry *e = calloc(1, sizeof(*e));
            if (!e) {
                sqlite3_finalize(st);
                return pl_errf(err, PL_ERR_NOMEM, "out of memory");
            }
            e->row_id = row_id;
            e->signal = (pl_signal)signal;
            e->items = (uint64_t)sqlite3_column_int64(st, 2);
            e->len = (size_t)raw;
            fifo_push_back(q, e);
            q->batches++;
            q->items += e->items;
            q->bytes += e->len;
            n++;
            items += e->items;
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
            return pl_errf(err, PL_ERR_INTERNAL, "sending_queue.storage: %s: %s", q->db_path,
                           sqlite3_errmsg(q->db));
        if (n)
            pl_info(q->id, "resuming %zu stored batches (%llu items) from %s", n,
                    (unsigned long long)items, q->db_path);
        update_gauges(q);
    }
    q->started = true;
    pump(q);
    return PL_OK;
}

static bool queue_has_room(pl_queue *q, size_t len, uint64_t items)
{
    if (q->batches >= q->max_batches)
        return false;
    if (q->batches == 0)
        return true; /* one oversized batch is let through rather than never */
    if (q->qcfg.max_items > 0 && q->items + items > (uint64_t)q->qcfg.max_items)
        return false;
    if (q->qcfg.max_bytes > 0 && q->bytes + len > q->qcfg.max_bytes)
        return false;
    return true;
}

static pl_status refuse(pl_queue *q, pl_signal signal, uint64_t items, const char *why)
{
    pl_stats_add(q->stats, signal, PL_STAT_REFUSED, items);
    uint64_t now = pl_time_mono_ns();
    if (now - q->last_full_warning > 10000000000ULL || !q->last_full_warning) {
        q->last_full_warning = now;
        pl_warn(q->id, "refusing %s: %s (%zu batches, %llu items, %llu bytes held)",
                pl_signal_name(signal), why, q->batches, (unsigned long long)q->items,
                (unsigned long long)q->bytes);
    }
    return PL_ERR_REFUSED;
}

/* Puts an admitted, encoded payload (taken) at the end of the memory FIFO. */
static pl_status add_entry(pl_queue *q, pl_signal signal, uint8_t *payload, size_t len,
                           uint64_t items)
{
    qentry *e = calloc(1, sizeof(*e));
    if (!e) {
        free(payload);
        return PL_ERR_NOMEM;
    }
    e->signal = signal;
    e->items = items;
    e->len = len;
    e->payload = payload;
    fifo_push_back(q, e);
    q->batches++;
    q->items += items;
    q->bytes += len;
    return PL_OK;
}

/* ---- encoding on the workers (see queue.h) -------------------------------
 *
 * A job is shared by the loop and one worker. The worker reads only the job
 * (the sender was copied into it) and the batch it holds a reference on, and
 * writes only the job's results. `state` and `orphan`, under enc_mu, are
 * what both sides look at: a queue destroyed while its batches are encoded
 * marks them orphaned (a queued one is then skipped: the exporter that
 * `sender.arg` points to is about to go) and waits for one that is running,
 * so the worker never touches a freed exporter. Everything else in a job is
 * the loop's. */

enum { ENC_QUEUED, ENC_RUNNING, ENC_FINISHED };

typedef struct enc_job {
    struct enc_job *next;
    pl_queue *q; /* NULL once the queue is gone: the done callback frees the job */
    pl_queue_sender sender;
    pl_batch *batch; /* a reference (pl_batch_ref) */
    pl_signal signal;
    uint64_t admitted; /* items counted at admission */
    uint64_t items;    /* encode()'s count */
    pl_buf out;
    pl_status st;
    pl_err err;
    int state;   /* under enc_mu */
    bool orphan; /* under enc_mu */
    bool done;   /* loop: encoded, waiting for the ones admitted before it */
} enc_job;

static pthread_mutex_t enc_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t enc_cv = PTHREAD_COND_INITIALIZER;

static void enc_job_free(enc_job *j)
{
    pl_batch_free(j->batch);
    pl_buf_free(&j->out);
    free(j);
}

/* On a worker (or on the loop when no worker took it). */
static void encode_work(void *arg)
{
    enc_job *j = arg;
    pthread_mutex_lock(&enc_mu);
    bool skip = j->orphan;
    if (!skip)
        j->state = ENC_RUNNING;
    pthread_mutex_unlock(&enc_mu);
    if (!skip) {
        j->st = j->sender.encode(j->sender.arg, j->batch, &j->out, &j->items, &j->err);
        if (j->st == PL_OK && !pl_buf_ok(&j->out))
            j->st = PL_ERR_NOMEM;
    }
    pthread_mutex_lock(&enc_mu);
    j->state = ENC_FINISHED;
    pthread_cond_broadcast(&enc_cv);
    pthread_mutex_unlock(&enc_mu);
}

/* Loop: moves the encoded jobs at the head of the line into the FIFO. */
static void flush_encoded(pl_queue *q)
{
    enc_job *j;
    while ((j = q->enc_head) && j->done) {
        q->enc_head = j->next;
        if (!q->enc_head)
            q->enc_tail = NULL;
        q->batches--;
        q->items -= j->admitted;
        size_t len = 0;
        uint8_t *payload = j->st == PL_OK ? pl_buf_steal(&j->out, &len) : NULL;
        if (j->st == PL_OK && !payload)
            payload = malloc(1); /* an empty payload */
        pl_status st = j->st;
        if (st == PL_OK)
            st = payload ? add_entry(q, j->signal, payload, len, j->items) : PL_ERR_NOMEM;
        if (st != PL_OK) {
            pl_stats_add(q->stats, j->signal, PL_STAT_FAILED, j->admitted);
            pl_error(q->id, "dropping %llu %s: cannot encode: %s", (unsigned long long)j->admitted,
                     pl_signal_name(j->signal), j->err.msg[0] ? j->err.msg : pl_status_name(st));
        }
        enc_job_free(j);
    }
    update_gauges(q);
    pump(q);
}

/* Loop: a worker finished a job. */
static void encode_done(void *arg)
{
    enc_job *j = arg;
    if (!j->q) {
        enc_job_free(j);
        return;
    }
    j->done = true;
    flush_encoded(j->q);
}

/* Admits `batch` and has it encoded on a worker; false when this queue
 * encodes on the loop instead (storage, no workers, or a sender that must). */
static bool export_on_worker(pl_queue *q, const pl_batch *batch, pl_status *st)
{
    if (q->db || !q->sender.encode_anywhere || pl_host_workers_count(q->host) < 2)
        return false;
    uint64_t items = pl_batch_items(batch);
    if (!queue_has_room(q, 0, items)) {
        *st = refuse(q, batch->signal, items, "sending queue is full");
        return true;
    }
    enc_job *j = calloc(1, sizeof(*j));
    if (!j)
        return false;
    j->q = q;
    j->sender = q->sender;
    j->batch = pl_batch_ref(batch);
    j->signal = batch->signal;
    j->admitted = items;
    pl_buf_init(&j->out);
    if (q->enc_tail)
        q->enc_tail->next = j;
    else
        q->enc_head = j;
    q->enc_tail = j;
    q->batches++;
    q->items += items;
    update_gauges(q);
    if (!pl_host_submit(q->host, encode_work, encode_done, j)) {
        encode_work(j); /* no memory for the hand-off: here, in its turn */
        encode_done(j);
    }
    *st = PL_OK;
    return true;
}

/* Destroy: no job may be running for this queue once it returns. */
static void orphan_encodings(pl_queue *q)
{
    size_t n = 0;
    uint64_t items = 0;
    pthread_mutex_lock(&enc_mu);
    for (enc_job *j = q->enc_head, *next; j; j = next) {
        next = j->next;
        j->orphan = true;
        while (j->state == ENC_RUNNING)
            pthread_cond_wait(&enc_cv, &enc_mu);
        n++;
        items += j->admitted;
        pl_stats_add(q->stats, j->signal, PL_STAT_DROPPED, j->admitted);
        if (j->done) {
            enc_job_free(j); /* encoded, waiting behind an earlier one */
        } else {
            j->q = NULL; /* its done callback frees it */
            j->next = NULL;
        }
    }
    pthread_mutex_unlock(&enc_mu);
    q->enc_head = q->enc_tail = NULL;
    if (n)
        pl_error(q->id, "dropped %zu batches (%llu items) still being encoded at shutdown", n,
                 (unsigned long long)items);
}

/* Takes `payload` (malloc'd) in every case. */
static pl_status enqueue(pl_queue *q, pl_signal signal, uint8_t *payload, size_t len,
                         uint64_t items)
{
    if (q->draining) {
        free(payload);
        return refuse(q, signal, items, "shutting down");
    }
    if (!queue_has_room(q, len, items)) {
        free(payload);
        return refuse(q, signal, items, "sending queue is full");
    }
    qentry *e = calloc(1, sizeof(*e));
    if (!e) {
        free(payload);
        return PL_ERR_NOMEM;
    }
    e->signal = signal;
    e->items = items;
    e->len = len;
    e->payload = payload;
    if (q->db) {
        e->row_id = storage_insert(q, signal, payload, len, items);
        if (!e->row_id) {
            entry_free(e);
            return refuse(q, signal, items, "cannot write to the queue storage");
        }
    }
    fifo_push_back(q, e);
    q->batches++;
    q->items += items;
    q->bytes += len;
    update_gauges(q);
    pump(q);
    return PL_OK;
}

/* A batch that carries write-ahead log entries (queue_wal.h) is stored in
 * one transaction with the deletion of the log rows it completes. */
void pl_queue_tx_begin(pl_queue *q, const pl_batch *batch)
{
    if (!q->db || !batch->wal || q->in_tx)
        return;
    q->in_tx = sqlite3_exec(q->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
}

pl_status pl_queue_tx_end(pl_queue *q, const pl_batch *batch, pl_status st)
{
    if (!q->in_tx)
        return st;
    q->in_tx = false;
    if (st != PL_OK) {
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
        return st;
    }
    pl_queue_wal_tx_delete(q->db, batch);
    bool committed = sqlite3_exec(q->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK;
    if (!committed) {
        /* The batch is queued in memory and will be sent; its log entries
         * stay and are replayed at the next start (at least once). */
        pl_log_limited(&q->storage_errors, PL_LOG_ERROR, q->id,
                       "sending_queue: cannot commit to %s: %s", q->db_path, sqlite3_errmsg(q->db));
        sqlite3_exec(q->db, "ROLLBACK", NULL, NULL, NULL);
    }
    pl_queue_wal_tx_done(q->db, batch, committed);
    return st;
}

pl_queue *pl_queue_stored(pl_queue *queue)
{
    return queue && queue->db ? queue : NULL;
}

sqlite3 *pl_queue_sqlite(pl_queue *q, const char **path)
{
    if (path)
        *path = q->db_path;
    return q->db;
}

uv_loop_t *pl_queue_loop(pl_queue *q)
{
    return q->loop;
}

pl_status pl_queue_export(pl_queue *q, const pl_batch *batch)
{
    uint64_t items = 0;
    pl_err err = {{0}};
    if (q->draining)
        return refuse(q, batch->signal, pl_batch_items(batch), "shutting down");
    if (q->batches >= q->max_batches) /* cheap early answer, before encoding */
        return refuse(q, batch->signal, pl_batch_items(batch), "sending queue is full");
    pl_status st;
    if (export_on_worker(q, batch, &st))
        return st;
    pl_buf_reset(&q->encoded);
    st = q->sender.encode(q->sender.arg, batch, &q->encoded, &items, &err);
    if (st == PL_OK && !pl_buf_ok(&q->encoded))
        st = PL_ERR_NOMEM;
    if (st != PL_OK) {
        pl_error(q->id, "cannot encode %s: %s", pl_signal_name(batch->signal),
                 err.msg[0] ? err.msg : pl_status_name(st));
        return st;
    }
    size_t len;
    uint8_t *payload = pl_buf_steal(&q->encoded, &len);
    if (!payload) {
        payload = malloc(1);
        len = 0;
        if (!payload)
            return PL_ERR_NOMEM;
    }
    pl_queue_tx_begin(q, batch);
    st = enqueue(q, batch->signal, payload, len, items);
    return pl_queue_tx_end(q, batch, st);
}

pl_status pl_queue_push(pl_queue *q, pl_signal signal, const uint8_t *payload, size_t len,
                        uint64_t items)
{
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return PL_ERR_NOMEM;
    if (len)
        memcpy(copy, payload, len);
    return enqueue(q, signal, copy, len, items);
}

void pl_queue_shutdown(pl_queue *q)
{
    if (q->draining)
        return;
    q->draining = true;
    if (q->db) {
        /* Waiting slots give their entries back to the (stored) FIFO. */
        for (size_t i = 0; i < q->n_slots; i++) {
            slot *s = &q->slots[i];
            if (s->state == SLOT_WAITING) {
                uv_timer_stop(&s->timer);
                fifo_push_front(q, s->entry);
                s->entry = NULL;
                s->state = SLOT_IDLE;
            }
        }
        if (q->batches)
            pl_info(q->id, "%zu batches stay in %s for the next start", q->batches, q->db_path);
    }
}

size_t pl_queue_pending(const pl_queue *q)
{
    return q->db ? q->in_flight : q->batches;
}

void pl_queue_get_info(const pl_queue *q, pl_queue_info *info)
{
    info->batches = q->batches;
    info->items = q->items;
    info->bytes = q->bytes;
    info->in_flight = q->in_flight;
    if (q->db)
        storage_flush_deletes((pl_queue *)q);
    info->stored = storage_count(q);
}

static void on_slot_closed(uv_handle_t *handle)
{
    pl_queue *q = handle->type == UV_CHECK ? handle->data : ((slot *)handle->data)->queue;
    if (--q->open_handles == 0) {
        free(q->slots);
        free(q);
    }
}

void pl_queue_destroy(pl_queue *q)
{
    if (!q)
        return;
    orphan_encodings(q);
    size_t lost_batches = 0;
    uint64_t lost_items = 0;
    for (size_t i = 0; i < q->n_slots; i++) {
        slot *s = &q->slots[i];
        if (s->state == SLOT_SENDING && s->send) {
            s->send->queue = NULL; /* orphaned: frees itself and its entry when done */
            s->send = NULL;
            s->entry = NULL;
        } else if (s->entry) {
            uv_timer_stop(&s->timer);
            fifo_push_front(q, s->entry);
            s->entry = NULL;
        }
        s->state = SLOT_IDLE;
    }
    qentry *e;
    while ((e = fifo_pop(q))) {
        if (!e->row_id) {
            lost_batches++;
            lost_items += e->items;
            pl_stats_add(q->stats, e->signal, PL_STAT_DROPPED, e->items);
        }
        entry_free(e);
    }
    if (lost_batches)
        pl_error(q->id, "dropped %zu unsent batches (%llu items) at shutdown", lost_batches,
                 (unsigned long long)lost_items);
    if (q->db)
        storage_flush_deletes(q);
    free(q->deletes);
    sqlite3_finalize(q->st_insert);
    sqlite3_finalize(q->st_delete);
    sqlite3_finalize(q->st_payload);
    sqlite3_finalize(q->st_count);
    if (q->db)
        sqlite3_close(q->db);
    ZSTD_freeCCtx(q->cctx);
    ZSTD_freeDCtx(q->dctx);
    if (q->storage_registered)
        pl_host_unclaim(q->host, q->db_path, q->id);
    free(q->db_path);
    free(q->id);
    pl_buf_free(&q->encoded);
    if (q->open_handles == 0) {
        free(q->slots);
        free(q);
        return;
    }
    for (size_t i = 0; i < q->n_slots; i++)
        uv_close((uv_handle_t *)&q->slots[i].timer, on_slot_closed);
    uv_close((uv_handle_t *)&q->delete_check, on_slot_closed);
}
