/*
 * sqlite.c: the `sqlite` exporter, proflink's embedded store: spans and
 * profile samples go into one SQLite file that `proflink query` and the
 * read-only JSON API (sqlite_api.c) read. It is the default exporter: with
 * no backend at all a user can still ask which spans were slow and why.
 *
 * Threading. SQLite calls block (disk, fsync at checkpoints, a lock held by
 * another process), so they never run on the event loop. The export hook
 * deep-copies the borrowed batch (pl_batch_clone) into a bounded queue and
 * returns; one writer thread with its own connection takes everything
 * queued, writes it in ONE transaction (group commit: the busier the
 * receivers, the bigger the transactions), and reports counts back to the
 * loop through a uv_async handle. Retention (age, then size) runs on the
 * same thread between transactions. The WAL's checkpoints (and their
 * fsyncs) run on a second thread with a connection of its own
 * (store_checkpoint.c), so the writer does not wait for them.
 *
 * SQLite connections and their threads: the writer's connection belongs to
 * the writer thread (opened, used and closed there), the checkpoint
 * connection to the checkpoint thread the writer starts and stops; the query API's
 * read-only connections to the API thread (sqlite_api.c); nothing else
 * touches any of them. The copies are freed on the writer thread and carry no
 * write-ahead tags (see sqlite_export).
 *
 * Failures. A store that cannot be opened or written (corrupt file, locked by
 * another process, disk full) does not stop the pipeline, and loses nothing
 * it accepted: a transaction that fails is rolled back and its batches go
 * back to the head of the queue, to be written again every second (the
 * queue is bounded by queue_size, so is what waits). While the store cannot
 * write, or a failed transaction waits, the export hook refuses at once with
 * REFUSED (503 / UNAVAILABLE with Retry-After: clients retry), and the
 * component is marked degraded for /health; a full queue refuses likewise.
 * Only a transaction that fails MAX_ATTEMPTS times for a reason of its own
 * (not the disk, the file or a lock), or what is still unwritable when the
 * exporter is destroyed, is given up: counted as `failed` and logged.
 * The failure is logged once per message and minute; recovery once.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config/decode.h"
#include "core/component.h"
#include "core/log.h"
#include "extensions/auth.h"
#include "store/sqlite_api.h"
#include "store/sqlite_store.h"

#include "store/sqlite.config.h"

#include "store/sqlite.config.inc"

/* ---- the exporter ------------------------------------------------------- */

typedef struct job {
    struct job *next;
    pl_batch *batch; /* a clone the writer owns */
    size_t items;
    size_t bytes;
} job;

typedef enum store_state {
    STATE_OK = 0, /* writable (or not tried yet) */
    STATE_BUSY,   /* locked by someone else */
    STATE_BROKEN, /* corrupt, unreadable, or I/O errors */
} store_state;

#define RETRY_INTERVAL_NS 1000000000ull
/* size retention deletes at most this long while batches wait */
#define SLICE_BUDGET_NS           250000000ull
#define MAX_ATTEMPTS              10 /* of a transaction failing for a reason of its own */
#define MAX_ITEMS_PER_TRANSACTION 200000

typedef struct sqlite_exporter {
    char *id;
    char *path;
    char *api_endpoint;
    pl_listener_security api_sec; /* the API's TLS settings (a copy) */
    uint64_t retention_ns;
    uint64_t max_size;
    int busy_timeout_ms;
    uint64_t queue_size;
    uint64_t retention_interval_ns;
    uv_loop_t *loop;
    pl_stats *stats;
    pl_clock clock;

    uv_mutex_t mu;
    uv_cond_t cv;
    uv_thread_t thread;
    bool thread_started;
    bool stopping;
    job *head, *tail;
    size_t queued_items, queued_bytes, inflight_items;
    store_state state;
    bool stalled;                /* a failed transaction waits at the head of the queue */
    char last_logged_error[512]; /* writer thread only */
    uint64_t last_logged_ns;
    bool failure_announced;
    bool degraded; /* writer thread only: /health was told the store cannot write */
    /* results waiting to be folded into the stats (loop thread) */
    uint64_t done_sent[PL_SIGNAL_COUNT], done_failed[PL_SIGNAL_COUNT];
    uint64_t done_write_errors, done_deleted_spans, done_deleted_samples;
    int64_t db_size;

    uv_async_t async;
    bool async_open;
    pl_sqlite_api *api;
    pl_store_live live; /* written by the writer thread, read by the API thread */

    uint64_t *c_write_errors;
    uint64_t *c_deleted_spans;
    uint64_t *c_deleted_samples;
    uint64_t *c_transactions;
    int64_t *g_db_size;
    int64_t *g_queue_bytes;
    uint64_t done_transactions;
} sqlite_exporter;

/* Moves results the writer left into the stats. Loop thread. */
static void fold_results(sqlite_exporter *x)
{
    uv_mutex_lock(&x->mu);
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        if (x->done_sent[s])
            pl_stats_add(x->stats, (pl_signal)s, PL_STAT_SENT, x->done_sent[s]);
        if (x->done_failed[s])
            pl_stats_add(x->stats, (pl_signal)s, PL_STAT_FAILED, x->done_failed[s]);
        x->done_sent[s] = x->done_failed[s] = 0;
    }
    *x->c_write_errors += x->done_write_errors;
    *x->c_deleted_spans += x->done_deleted_spans;
    *x->c_deleted_samples += x->done_deleted_samples;
    *x->c_transactions += x->done_transactions;
    x->done_write_errors = x->done_deleted_spans = x->done_deleted_samples = 0;
    x->done_transactions = 0;
    *x->g_db_size = x->db_size;
    *x->g_queue_bytes = (int64_t)x->queued_bytes;
    uv_mutex_unlock(&x->mu);
}

static void on_async(uv_async_t *handle)
{
    fold_results(handle->data);
}

/* Writer side: remember the outcome and wake the loop (under x->mu). */
static void notify_locked(sqlite_exporter *x)
{
    if (x->async_open)
        uv_async_send(&x->async);
}

static store_state state_for(pl_store_error kind)
{
    return kind == PL_STORE_ERR_BUSY ? STATE_BUSY : STATE_BROKEN;
}

/* Records a failure; logs it when the state changes or the message does. */
static void writer_failed(sqlite_exporter *x, store_state st, const char *msg)
{
    uv_mutex_lock(&x->mu);
    x->state = st;
    x->done_write_errors++;
    uv_mutex_unlock(&x->mu);
    /* Writer thread only from here. A store that opens but fails every
     * write would otherwise log once per retry: the same message is
     * repeated at most once a minute. */
    uint64_t now = pl_time_mono_ns();
    bool same = strcmp(x->last_logged_error, msg) == 0;
    if (!same || now - x->last_logged_ns >= 60000000000ull) {
        pl_error(x->id, "%s; kept and retried every second, new data refused meanwhile", msg);
        snprintf(x->last_logged_error, sizeof(x->last_logged_error), "%s", msg);
        x->last_logged_ns = now;
        x->failure_announced = true;
    } else {
        pl_debug(x->id, "%s", msg);
    }
    if (!x->degraded || !same) {
        pl_stats_set_degraded(x->stats, msg);
        x->degraded = true;
    }
}

static void writer_recovered(sqlite_exporter *x)
{
    uv_mutex_lock(&x->mu);
    bool was_failed = x->state != STATE_OK;
    x->state = STATE_OK;
    uv_mutex_unlock(&x->mu);
    if (was_failed && x->failure_announced) /* one "again" per logged failure */
        pl_info(x->id, "store %s is writable again", x->path);
    if (x->degraded && !x->stalled) { /* a kept transaction decides when written */
        pl_stats_set_degraded(x->stats, NULL);
        x->degraded = false;
    }
    x->failure_announced = false;
}

/* Opens the store if needed, or checks a lock went away. true when usable. */
static bool writer_ensure_store(sqlite_exporter *x, pl_store **store, uint64_t *last_try,
                                bool force)
{
    uv_mutex_lock(&x->mu);
    store_state st = x->state;
    uv_mutex_unlock(&x->mu);
    if (*store && st == STATE_OK)
        return true;
    uint64_t now = pl_time_mono_ns();
    if (!force && *last_try && now - *last_try < RETRY_INTERVAL_NS)
        return false;
    *last_try = now;
    pl_err err = {{0}};
    if (!*store) {
        pl_store_options opt = {.busy_timeout_ms = x->busy_timeout_ms,
                                .max_size = x->max_size,
                                .checkpoint_thread = true};
        pl_store_error kind;
        if (pl_store_open(x->path, &opt, store, &kind, &err) != PL_OK) {
            writer_failed(x, state_for(kind), err.msg);
            return false;
        }
    }
    if (st == STATE_BUSY) { /* probe: can we take the write lock now? */
        if (pl_store_begin(*store, &err) != PL_OK) {
            writer_failed(x, state_for(pl_store_last_error(*store)), err.msg);
            return false;
        }
        pl_store_rollback(*store);
    }
    writer_recovered(x);
    return true;
}

static void count_jobs(sqlite_exporter *x, job *jobs, bool ok)
{
    uv_mutex_lock(&x->mu);
    for (job *j = jobs; j; j = j->next) {
        if (ok)
            x->done_sent[j->batch->signal] += j->items;
        else
            x->done_failed[j->batch->signal] += j->items;
    }
    uv_mutex_unlock(&x->mu);
}

/* Writes jobs in one transaction. OK, or the failure: *own is true when it
 * is the batches' own (not the disk, the file, a lock or memory). */
static pl_status write_jobs(sqlite_exporter *x, pl_store **store, uint64_t *last_try, job *jobs,
                            bool force, bool *own)
{
    *own = false;
    if (!writer_ensure_store(x, store, last_try, force))
        return PL_ERR_REFUSED;
    pl_err err = {{0}};
    pl_status st = pl_store_begin(*store, &err);
    pl_store_write_stats ws = {0};
    /* all the jobs' batches at once: spans and sample rows go in in key
     * order over the whole transaction (pl_store_write_many) */
    size_t n = 0;
    for (job *j = jobs; j; j = j->next)
        n++;
    const pl_batch **batches = st == PL_OK ? malloc(n * sizeof(*batches)) : NULL;
    if (st == PL_OK && !batches)
        st = pl_errf(&err, PL_ERR_NOMEM, "sqlite store: out of memory");
    if (st == PL_OK) {
        n = 0;
        for (job *j = jobs; j; j = j->next)
            batches[n++] = j->batch;
        st = pl_store_write_many(*store, batches, n, &ws, &err);
    }
    free(batches);
    if (st == PL_OK)
        st = pl_store_commit(*store, &err);
    if (st != PL_OK) {
        pl_store_error kind = pl_store_last_error(*store);
        pl_store_rollback(*store);
        writer_failed(x, st == PL_ERR_NOMEM ? STATE_OK : state_for(kind), err.msg);
        if (kind == PL_STORE_ERR_CORRUPT || kind == PL_STORE_ERR_IO) {
            pl_store_close(*store); /* reopen from scratch on the next try */
            *store = NULL;
        }
        *own = st != PL_ERR_NOMEM && kind == PL_STORE_ERR_OTHER;
        return st;
    }
    count_jobs(x, jobs, true);
    __atomic_add_fetch(&x->live.spans, ws.spans, __ATOMIC_RELAXED);
    __atomic_add_fetch(&x->live.samples, ws.samples, __ATOMIC_RELAXED);
    uv_mutex_lock(&x->mu);
    x->done_transactions++;
    uv_mutex_unlock(&x->mu);
    return PL_OK;
}

/* A failed transaction's jobs go back to the head of the queue (under mu). */
static void requeue_locked(sqlite_exporter *x, job *jobs, size_t items, size_t bytes)
{
    job *last = jobs;
    while (last->next)
        last = last->next;
    last->next = x->head;
    x->head = jobs;
    if (!x->tail)
        x->tail = last;
    x->queued_items += items;
    x->queued_bytes += bytes;
    x->stalled = true;
}

static void run_retention(sqlite_exporter *x, pl_store *store, bool size_only)
{
    pl_store_retention_stats rs;
    pl_err err = {{0}};
    uint64_t now = pl_clock_now(&x->clock);
    /* size: one slice at a time (the writer loop slices on between its
     * transactions), so writes go on */
    pl_status st = pl_store_enforce_retention(store, now, size_only ? 0 : x->retention_ns,
                                              x->max_size, true, &rs, &err);
    if (st != PL_OK) {
        pl_warn(x->id, "%s", err.msg);
        return;
    }
    if (rs.spans_deleted || rs.sample_rows_deleted)
        pl_debug(x->id,
                 "retention: deleted %" PRIu64 " spans, %" PRIu64 " sample rows; %" PRIu64
                 " -> %" PRIu64 " bytes",
                 rs.spans_deleted, rs.sample_rows_deleted, rs.size_before, rs.size_after);
    uv_mutex_lock(&x->mu);
    x->done_deleted_spans += rs.spans_deleted;
    x->done_deleted_samples += rs.sample_rows_deleted;
    x->db_size = (int64_t)rs.size_after;
    uv_mutex_unlock(&x->mu);
}

static void free_jobs(job *jobs)
{
    while (jobs) {
        job *next = jobs->next;
        pl_batch_free(jobs->batch);
        free(jobs);
        jobs = next;
    }
}

static void writer_main(void *arg)
{
    sqlite_exporter *x = arg;
    /* named for top -H, perf and /proc/PID/task/TID/comm (15 bytes max) */
    pthread_setname_np(pthread_self(), "pl-sqlite");
    pl_store *store = NULL;
    uint64_t last_try = 0;
    uint64_t last_retention = 0;
    /* Open at once so a broken store is reported at start-up, not at the
     * first batch. */
    if (writer_ensure_store(x, &store, &last_try, true))
        run_retention(x, store, false);
    last_retention = pl_time_mono_ns();

    uint64_t retry_due = 0; /* a stalled transaction is tried again from then */
    unsigned attempts = 0;  /* of the stalled transaction, failing for its own reasons */
    uv_mutex_lock(&x->mu);
    for (;;) {
        for (;;) {
            uint64_t now = pl_time_mono_ns();
            bool stalled = x->stalled && now < retry_due;
            if (x->stopping || (x->head && !stalled))
                break;
            uint64_t wait = x->retention_interval_ns;
            if (x->state != STATE_OK || x->stalled)
                wait = x->stalled && retry_due > now ? retry_due - now : RETRY_INTERVAL_NS;
            uint64_t due = last_retention + x->retention_interval_ns;
            if (!x->head && x->state == STATE_OK && now >= due)
                break;
            if (x->state == STATE_OK && due > now && due - now < wait)
                wait = due - now;
            if (uv_cond_timedwait(&x->cv, &x->mu, wait) != 0 && !x->stalled)
                break; /* timed out: retention or a retry is due */
        }
        if (x->stopping && !x->head)
            break;
        /* Take up to MAX_ITEMS_PER_TRANSACTION items as one transaction. */
        job *jobs = x->head, *last = NULL;
        size_t items = 0, bytes = 0;
        for (job *j = x->head; j; j = j->next) {
            if (last && items + j->items > MAX_ITEMS_PER_TRANSACTION)
                break;
            items += j->items;
            bytes += j->bytes;
            last = j;
        }
        if (last) {
            x->head = last->next;
            if (!x->head)
                x->tail = NULL;
            last->next = NULL;
        } else {
            jobs = NULL;
        }
        x->queued_items -= items;
        x->queued_bytes -= bytes;
        x->inflight_items = items;
        bool stopping = x->stopping;
        uv_mutex_unlock(&x->mu);

        if (jobs) {
            bool own = false;
            pl_status st = write_jobs(x, &store, &last_try, jobs, stopping, &own);
            attempts = st == PL_OK ? 0 : attempts + own;
            if (st != PL_OK && !stopping && attempts < MAX_ATTEMPTS) {
                uv_mutex_lock(&x->mu);
                requeue_locked(x, jobs, items, bytes);
                uv_mutex_unlock(&x->mu);
                retry_due = pl_time_mono_ns() + RETRY_INTERVAL_NS;
                jobs = NULL;
            } else {
                if (st != PL_OK) {
                    count_jobs(x, jobs, false);
                    pl_error(x->id, "%zu items given up after %s: counted as failed", items,
                             stopping ? "a last attempt at exit" : "repeated failures");
                    attempts = 0;
                }
                uv_mutex_lock(&x->mu);
                x->stalled = false;
                uv_mutex_unlock(&x->mu);
                if (st == PL_OK && x->degraded) {
                    pl_stats_set_degraded(x->stats, NULL);
                    x->degraded = false;
                }
            }
            free_jobs(jobs);
        } else {
            /* idle: retry a failed store so exports are accepted again */
            writer_ensure_store(x, &store, &last_try, false);
        }
        uint64_t now = pl_time_mono_ns();
        if (store && x->state == STATE_OK) {
            if (now - last_retention >= x->retention_interval_ns) {
                run_retention(x, store, false);
                last_retention = now;
            } else if (x->max_size) {
                /* Over the limit: slices of the oldest data, for at most
                 * SLICE_BUDGET_NS while batches wait, then a transaction
                 * of theirs (a long catch-up must not stall writes). */
                uint64_t t0 = pl_time_mono_ns();
                for (int slice = 0; slice < 64; slice++) {
                    uint64_t size = pl_store_size(store);
                    uv_mutex_lock(&x->mu);
                    x->db_size = (int64_t)size;
                    bool waiting = x->head != NULL;
                    uv_mutex_unlock(&x->mu);
                    if (size <= x->max_size ||
                        (slice > 0 && waiting && pl_time_mono_ns() - t0 > SLICE_BUDGET_NS))
                        break;
                    run_retention(x, store, true);
                }
            }
        }
        uv_mutex_lock(&x->mu);
        x->inflight_items = 0;
        notify_locked(x);
    }
    uv_mutex_unlock(&x->mu);
    pl_store_close(store);
}

static pl_status sqlite_create(const pl_create_settings *settings, const void *config,
                               void **out_self, pl_err *err)
{
    sqlite_cfg defaults;
    const sqlite_cfg *c = config;
    bool own_defaults = false;
    if (!c) {
        memset(&defaults, 0, sizeof(defaults));
        if (pl_cfg_defaults(&sqlite_section, &defaults) != 0)
            return pl_errf(err, PL_ERR_INTERNAL, "sqlite: bad defaults");
        c = &defaults;
        own_defaults = true;
    }
    sqlite_exporter *x = calloc(1, sizeof(*x));
    if (!x)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    x->id = strdup(settings->id ? settings->id : "sqlite");
    x->path = strdup(c->path && *c->path ? c->path : "./data/proflink.db");
    const char *ep = c->api.endpoint;
    if (ep && *ep && strcmp(ep, "none") != 0)
        x->api_endpoint = strdup(ep);
    x->retention_ns = c->retention > 0 ? (uint64_t)c->retention : 0;
    x->max_size = c->max_size;
    x->busy_timeout_ms = c->busy_timeout > 0 ? (int)(c->busy_timeout / 1000000) : 5000;
    if (x->busy_timeout_ms <= 0)
        x->busy_timeout_ms = 1;
    x->queue_size = c->queue_size ? c->queue_size : 64u << 20;
    x->retention_interval_ns =
        c->retention_interval > 0 ? (uint64_t)c->retention_interval : 60000000000ull;
    pl_status sec_st = pl_listener_security_init(&x->api_sec, settings->host, &c->api.tls,
                                                 &c->api.auth, NULL, err);
    if (own_defaults)
        pl_cfg_free(&sqlite_section, &defaults);
    if (sec_st != PL_OK) {
        free(x->id);
        free(x->path);
        free(x->api_endpoint);
        free(x);
        return sec_st;
    }
    x->loop = settings->loop;
    x->stats = settings->stats;
    x->clock = settings->clock;
    if (!x->id || !x->path || (ep && *ep && strcmp(ep, "none") != 0 && !x->api_endpoint) ||
        uv_mutex_init(&x->mu) != 0) {
        free(x->id);
        free(x->path);
        free(x->api_endpoint);
        pl_listener_security_free(&x->api_sec);
        free(x);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    if (uv_cond_init(&x->cv) != 0) {
        uv_mutex_destroy(&x->mu);
        free(x->id);
        free(x->path);
        free(x->api_endpoint);
        pl_listener_security_free(&x->api_sec);
        free(x);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    x->c_write_errors =
        pl_stats_counter(x->stats, "write_errors", "Transactions or store openings that failed.");
    x->c_deleted_spans =
        pl_stats_counter(x->stats, "retention_deleted_spans", "Spans deleted by retention.");
    x->c_deleted_samples = pl_stats_counter(x->stats, "retention_deleted_sample_rows",
                                            "Aggregated sample rows deleted by retention.");
    x->c_transactions = pl_stats_counter(x->stats, "transactions", "Write transactions committed.");
    x->g_db_size = pl_stats_gauge(x->stats, "db_size_bytes", "Bytes the database uses.");
    x->g_queue_bytes =
        pl_stats_gauge(x->stats, "queue_bytes", "Memory of batches waiting for the writer.");
    *out_self = x;
    return PL_OK;
}

static pl_status sqlite_start(void *self, pl_err *err)
{
    sqlite_exporter *x = self;
    if (uv_async_init(x->loop, &x->async, on_async) != 0)
        return pl_errf(err, PL_ERR_INTERNAL, "%s: cannot create an async handle", x->id);
    x->async.data = x;
    x->async_open = true;
    if (uv_thread_create(&x->thread, writer_main, x) != 0) {
        x->async_open = false;
        uv_close((uv_handle_t *)&x->async, NULL);
        return pl_errf(err, PL_ERR_INTERNAL, "%s: cannot start the writer thread", x->id);
    }
    x->thread_started = true;
    if (x->api_endpoint) {
        pl_err aerr = {{0}};
        x->api = pl_sqlite_api_start_secure(x->api_endpoint, x->path, &x->live, &x->api_sec, &aerr);
        if (!x->api) /* the store works without it: say so, keep going */
            pl_error(x->id, "query API disabled: %s", aerr.msg);
        else
            pl_info(x->id, "store %s; web view and query API on %s://%s/", x->path,
                    pl_listener_security_scheme(&x->api_sec), x->api_endpoint);
    } else {
        pl_info(x->id, "store %s (query API disabled)", x->path);
    }
    return PL_OK;
}

static pl_status sqlite_export(void *self, const pl_batch *batch)
{
    sqlite_exporter *x = self;
    if (batch->signal != PL_SIGNAL_TRACES && batch->signal != PL_SIGNAL_PROFILES)
        return PL_OK; /* logs and metrics are not stored */
    size_t items = pl_batch_items(batch);
    uv_mutex_lock(&x->mu);
    store_state st = x->state;
    bool running = x->thread_started && !x->stopping;
    size_t queued = x->queued_bytes;
    bool stalled = x->stalled;
    uv_mutex_unlock(&x->mu);
    /* Nothing is taken that cannot be written soon: a store that cannot
     * write, or a transaction waiting to be written again, refuses (503 /
     * UNAVAILABLE with Retry-After), and the client keeps the data. */
    size_t bytes = pl_batch_memory(batch);
    if (!running || st != STATE_OK || stalled || (queued + bytes > x->queue_size && queued > 0)) {
        pl_stats_add(x->stats, batch->signal, PL_STAT_REFUSED, items);
        return PL_ERR_REFUSED;
    }
    job *j = calloc(1, sizeof(*j));
    pl_batch *copy = j ? pl_batch_clone(batch) : NULL;
    if (!copy) {
        free(j);
        pl_stats_add(x->stats, batch->signal, PL_STAT_REFUSED, items);
        return PL_ERR_NOMEM;
    }
    /* The copy does not hold the batch's write-ahead entries
     * (exporters/queue_wal.h): the persistent queue beside the store settles
     * them, so a batch it delivered is not replayed after a crash just
     * because the store had not committed its copy yet. */
    pl_batch_wal_handoff(copy);
    j->batch = copy;
    j->items = items;
    j->bytes = bytes;
    uv_mutex_lock(&x->mu);
    if (x->tail)
        x->tail->next = j;
    else
        x->head = j;
    x->tail = j;
    x->queued_items += items;
    x->queued_bytes += bytes;
    uv_cond_signal(&x->cv);
    uv_mutex_unlock(&x->mu);
    return PL_OK;
}

static void sqlite_shutdown(void *self)
{
    sqlite_exporter *x = self;
    if (x->api) {
        pl_sqlite_api_close(x->api);
        x->api = NULL;
    }
    uv_mutex_lock(&x->mu);
    bool was_open = x->async_open;
    x->async_open = false;
    uv_mutex_unlock(&x->mu);
    if (was_open)
        uv_close((uv_handle_t *)&x->async, NULL);
}

static size_t sqlite_pending(void *self)
{
    sqlite_exporter *x = self;
    fold_results(x);
    uv_mutex_lock(&x->mu);
    size_t n = x->queued_items + x->inflight_items;
    uv_mutex_unlock(&x->mu);
    return n;
}

static void sqlite_destroy(void *self)
{
    sqlite_exporter *x = self;
    if (x->api) { /* destroyed without shutdown */
        pl_sqlite_api_close(x->api);
        x->api = NULL;
    }
    if (x->thread_started) {
        uv_mutex_lock(&x->mu);
        x->stopping = true;
        x->async_open = false;
        uv_cond_signal(&x->cv);
        uv_mutex_unlock(&x->mu);
        uv_thread_join(&x->thread); /* drains what is queued first */
    }
    free_jobs(x->head);
    uv_cond_destroy(&x->cv);
    uv_mutex_destroy(&x->mu);
    free(x->id);
    free(x->path);
    free(x->api_endpoint);
    pl_listener_security_free(&x->api_sec);
    free(x);
}

const pl_component_type pl_exporter_sqlite = {
    PL_COMPONENT_HEAD("sqlite", PL_KIND_EXPORTER, PL_SIGNALS_TRACES_PROFILES, &sqlite_section),
    .description = "Embedded SQLite store of spans and profile samples, read by `proflink "
                   "query` and a read-only JSON API.",
    PL_COMPONENT_LIFECYCLE(sqlite_create, sqlite_start, sqlite_shutdown, sqlite_destroy),
    .export = sqlite_export,
    .pending = sqlite_pending,
};
