/*
 * queue_wal.c: the write-ahead log in front of a pipeline (see queue_wal.h).
 *
 * Entries are numbered per log (seq, the row's primary key, continuing after
 * the largest left by an earlier run). A batch's tag names the log (its
 * pl_wal_owner, the first member of pl_queue_wal) and the seq. Each log
 * keeps its open entries in an array ordered by seq (they are appended in
 * order and mostly finish in order, so the finished prefix is dropped as it
 * forms and lookups are a binary search over what is still open).
 *
 * Threads. The log's SQLite connection is the persistent queue's, owned by
 * the pipeline loop (the thread that opened the log). Batches carrying its
 * tags may be freed elsewhere: the sqlite store frees its copies on its
 * writer thread, after writing them. A hook called off the loop thread
 * does not touch the entries or the connection: it appends the operation
 * to `pending` (under `mu`) and wakes the loop with `async`, whose callback
 * applies the operations in order. On the loop thread they are applied at
 * once. The object itself lives until the log is closed AND no batch holds
 * a tag of it any more (`holders`, under `mu`), so a batch freed on another
 * thread after the close finds a live object that ignores it.
 *
 * The rows hold the batch in its OTLP protobuf form (logs and metrics: the
 * request as received) with the request metadata beside it, so a replayed
 * batch is the batch that was answered.
 */
#include "exporters/queue_wal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/log.h"
#include "core/consumer.h"
#include "proto/otlp_pb.h"

typedef struct wentry {
    uint64_t seq;
    uint32_t refs;
    uint32_t lost;   /* holders refused downstream (not recovered): keep the row */
    bool kept;       /* refused after its answer, no holder left: the row waits to be
                        sent again (resend_tick, else the next start) */
    bool deleted;    /* the row is gone (committed with the queue, or dropped) */
    bool done;       /* no holder left */
    bool tx_deleted; /* deleted inside the queue's open transaction */
} wentry;

typedef enum wal_op { OP_RETAIN, OP_RELEASE, OP_RECOVERED } wal_op;

typedef struct pending_op {
    uint64_t seq;
    uint32_t refusals;
    uint8_t op; /* wal_op */
    bool settled, refused;
} pending_op;

struct pl_queue_wal {
    pl_wal_owner owner; /* first: tags point here */
    pl_consumer consumer;
    pl_consumer *next;
    uv_loop_t *loop;
    uv_thread_t loop_thread; /* owns db and everything below but mu's fields */
    sqlite3 *db;
    char *path;
    char *pipeline;
    pl_signal signal;
    sqlite3_stmt *st_insert, *st_delete, *st_seqs, *st_row, *st_count;
    int synchronous; /* the queue's own setting, restored after each entry */
    uint64_t next_seq;
    wentry *e;
    size_t head, n, cap; /* open entries are e[head..n) */
    pl_buf enc;
    /* rows whose DELETE failed (disk full, I/O): retried, at most once a
     * second, until they go; else a restart would send them again */
    uint64_t *undeleted;
    size_t n_undeleted, cap_undeleted;
    uint64_t last_retry_ms;
    pl_log_limit write_errors;
    /* entries kept after a refusal downstream, sent again once a second
     * while the process runs (the log's rows are the promise; a refusal
     * only delays them) */
    size_t n_kept;
    uv_timer_t resend;
    bool resend_open, resend_active;
    int handles_open; /* async and resend, until their close callbacks */
    pl_log_limit kept_log;

    /* hand-off from other threads */
    uv_mutex_t mu;
    uv_async_t async;
    pending_op *pending; /* under mu */
    size_t n_pending, cap_pending;
    size_t holders;    /* tags held by batches (under mu) */
    bool closed;       /* under mu: no more hand-offs, statements finalized */
    bool async_closed; /* under mu */
    bool async_open;
};

/* The first open entry numbered `seq` or later. */
static size_t lower_bound(const pl_queue_wal *w, uint64_t seq)
{
    size_t lo = w->head, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->e[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static wentry *find(pl_queue_wal *w, uint64_t seq)
{
    size_t i = lower_bound(w, seq);
    return i < w->n && w->e[i].seq == seq ? &w->e[i] : NULL;
}

static wentry *append(pl_queue_wal *w, uint64_t seq)
{
    if (w->head > 0 && w->head == w->n)
        w->head = w->n = 0;
    if (w->n == w->cap) {
        if (w->head > w->cap / 2) {
            memmove(w->e, w->e + w->head, (w->n - w->head) * sizeof(wentry));
            w->n -= w->head;
            w->head = 0;
        } else {
            size_t cap = w->cap ? w->cap * 2 : 64;
            wentry *e = realloc(w->e, cap * sizeof(wentry));
            if (!e)
                return NULL;
            w->e = e;
            w->cap = cap;
        }
    }
    wentry *x = &w->e[w->n++];
    memset(x, 0, sizeof(*x));
    x->seq = seq;
    return x;
}

static bool delete_seq(pl_queue_wal *w, uint64_t seq)
{
    sqlite3_bind_int64(w->st_delete, 1, (sqlite3_int64)seq);
    int rc = sqlite3_step(w->st_delete);
    /* the error text now: a later statement (even a reset) replaces it */
    const char *msg = rc == SQLITE_DONE ? NULL : sqlite3_errmsg(w->db);
    if (msg)
        pl_log_limited(&w->write_errors, PL_LOG_WARN, "wal",
                       "%s: cannot delete entry %" PRIu64 ": %s; retried later", w->path, seq, msg);
    sqlite3_reset(w->st_delete);
    return rc == SQLITE_DONE;
}

static void remember_undeleted(pl_queue_wal *w, uint64_t seq)
{
    if (w->n_undeleted == w->cap_undeleted) {
        size_t cap = w->cap_undeleted ? w->cap_undeleted * 2 : 16;
        uint64_t *u = realloc(w->undeleted, cap * sizeof(uint64_t));
        if (!u)
            return; /* the row stays: replayed at the next start (at least once) */
        w->undeleted = u;
        w->cap_undeleted = cap;
    }
    w->undeleted[w->n_undeleted++] = seq;
}

/* Deletes the rows whose deletion failed before; `force` ignores the
 * once-a-second pace (close). */
static void retry_undeleted(pl_queue_wal *w, bool force)
{
    if (!w->n_undeleted)
        return;
    uint64_t now = uv_now(w->loop);
    if (!force && now - w->last_retry_ms < 1000)
        return;
    w->last_retry_ms = now;
    size_t kept = 0;
    for (size_t i = 0; i < w->n_undeleted; i++)
        if (!delete_seq(w, w->undeleted[i]))
            w->undeleted[kept++] = w->undeleted[i];
    if (kept < w->n_undeleted && !kept)
        pl_info("wal", "%s: entries whose deletion failed are deleted now", w->path);
    w->n_undeleted = kept;
}

static void delete_row(pl_queue_wal *w, wentry *x)
{
    if (!delete_seq(w, x->seq))
        remember_undeleted(w, x->seq);
    x->deleted = true;
}

static void resend_start(pl_queue_wal *w);

static void finish(pl_queue_wal *w, wentry *x)
{
    if (x->lost && !x->deleted) {
        /* not done: the row is sent again (resend_tick), and the entry
         * stays open, so later entries keep their places behind it */
        if (!x->kept) {
            x->kept = true;
            w->n_kept++;
        }
        pl_log_limited(&w->kept_log, PL_LOG_WARN, "wal",
                       "pipeline %s: data refused downstream after it was answered; kept in %s "
                       "and sent again in a second (and at the next start)",
                       w->pipeline, w->path);
        resend_start(w);
        return;
    }
    x->done = true;
    if (!x->deleted)
        delete_row(w, x); /* dropped on purpose (a filter), or settled elsewhere */
    while (w->head < w->n && w->e[w->head].done)
        w->head++;
}

/* The operations, on the loop thread (the statements are open). */
static void apply_retain(pl_queue_wal *w, uint64_t seq)
{
    wentry *x = find(w, seq);
    if (x)
        x->refs++;
}

static void apply_release(pl_queue_wal *w, uint64_t seq, bool refused)
{
    wentry *x = find(w, seq);
    if (!x || x->done || x->kept)
        return;
    if (refused)
        x->lost++;
    if (x->refs && --x->refs == 0)
        finish(w, x);
}

/* A holder that kept its data when copies of it were refused has passed it
 * on after all: those refusals are made good. */
static void apply_recovered(pl_queue_wal *w, uint64_t seq, uint32_t refusals)
{
    wentry *x = find(w, seq);
    if (x && !x->done && !x->kept)
        x->lost = x->lost > refusals ? x->lost - refusals : 0;
}

static void apply(pl_queue_wal *w, const pending_op *op)
{
    switch ((wal_op)op->op) {
    case OP_RETAIN:
        apply_retain(w, op->seq);
        break;
    case OP_RELEASE:
        apply_release(w, op->seq, op->refused);
        break;
    case OP_RECOVERED:
        apply_recovered(w, op->seq, op->refusals);
        break;
    }
}

static void wal_free(pl_queue_wal *w)
{
    uv_mutex_destroy(&w->mu);
    free(w->pending);
    free(w->undeleted);
    free(w->e);
    free(w->pipeline);
    free(w->path);
    free(w);
}

/* The largest entry number in the file (0 when none): the logs of every
 * pipeline that shares the file number their entries in one sequence. */
static uint64_t max_seq(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    uint64_t top = 0;
    if (sqlite3_prepare_v2(db, "SELECT coalesce(max(seq), 0) FROM pl_wal", -1, &st, NULL) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        top = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return top;
}

/* The loop's thread, or a worker running the pipeline under the pipeline
 * lock in its stead (ordered with the loop's calls by that lock). */
static bool on_loop_thread(const pl_queue_wal *w)
{
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &w->loop_thread) || pl_pipeline_borrowed();
}

/* Applies the operations other threads left (loop thread). */
static void drain_pending(pl_queue_wal *w)
{
    for (;;) {
        uv_mutex_lock(&w->mu);
        pending_op *ops = w->pending;
        size_t n = w->n_pending;
        w->pending = NULL;
        w->n_pending = w->cap_pending = 0;
        uv_mutex_unlock(&w->mu);
        if (!n) {
            free(ops);
            return;
        }
        size_t released = 0;
        for (size_t i = 0; i < n; i++) {
            apply(w, &ops[i]);
            released += ops[i].op == OP_RELEASE;
        }
        free(ops);
        uv_mutex_lock(&w->mu);
        w->holders -= released < w->holders ? released : w->holders;
        uv_mutex_unlock(&w->mu);
    }
}

static void on_async(uv_async_t *handle)
{
    drain_pending(handle->data);
}

static void on_async_closed(uv_handle_t *handle)
{
    pl_queue_wal *w = handle->data;
    if (--w->handles_open > 0)
        return; /* the other handle's callback finishes */
    uv_mutex_lock(&w->mu);
    w->async_closed = true;
    bool gone = w->holders == 0;
    uv_mutex_unlock(&w->mu);
    if (gone)
        wal_free(w);
}

/* Every hook comes here. On the loop thread the operation is applied at
 * once; elsewhere it is queued for the loop. After the close it is only
 * counted. `delta` is the change of `holders`. */
static void submit(pl_queue_wal *w, const pending_op *op, int delta)
{
    bool here = on_loop_thread(w);
    uv_mutex_lock(&w->mu);
    if (delta > 0)
        w->holders++;
    if (!w->closed && !here) {
        if (w->n_pending == w->cap_pending) {
            size_t cap = w->cap_pending ? w->cap_pending * 2 : 64;
            pending_op *p = realloc(w->pending, cap * sizeof(pending_op));
            if (p) {
                w->pending = p;
                w->cap_pending = cap;
            }
        }
        if (w->n_pending < w->cap_pending)
            w->pending[w->n_pending++] = *op;
        /* else: no memory; the entry then stays (replayed at the next start) */
        uv_async_send(&w->async); /* open while !closed */
    }
    bool closed = w->closed;
    bool gone = false;
    if (delta < 0 && w->holders > 0 && (here || closed)) {
        /* queued operations keep their holder until applied, below */
        w->holders--;
        gone = closed && w->async_closed && w->holders == 0;
    }
    uv_mutex_unlock(&w->mu);
    if (gone) {
        wal_free(w);
        return;
    }
    if (here && !closed)
        apply(w, op);
}

static void hook_retain(pl_wal_owner *o, uint64_t seq)
{
    pending_op op = {.seq = seq, .op = OP_RETAIN};
    submit((pl_queue_wal *)o, &op, +1);
}

static void hook_release(pl_wal_owner *o, uint64_t seq, bool settled, bool refused)
{
    pending_op op = {.seq = seq, .op = OP_RELEASE, .settled = settled, .refused = refused};
    submit((pl_queue_wal *)o, &op, -1);
}

static void hook_recovered(pl_wal_owner *o, uint64_t seq, uint32_t refusals)
{
    pending_op op = {.seq = seq, .op = OP_RECOVERED, .refusals = refusals};
    submit((pl_queue_wal *)o, &op, 0);
}

static const pl_wal_hooks hooks = {hook_retain, hook_release, hook_recovered};

/* ---- rows ---------------------------------------------------------------- */

static void put_u32(pl_buf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    pl_buf_append(b, x, 4);
}

static bool get_u32(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
    if (end - *p < 4)
        return false;
    const uint8_t *x = *p;
    *v = (uint32_t)x[0] << 24 | (uint32_t)x[1] << 16 | (uint32_t)x[2] << 8 | x[3];
    *p += 4;
    return true;
}

/* Row layout of `data`: u32 metadata count, then per item u32 key length,
 * key, u32 value length, value; then the payload to the end. */
static bool encode_row(pl_buf *out, const pl_batch *b)
{
    pl_buf_reset(out);
    put_u32(out, b->metadata.n);
    for (uint32_t i = 0; i < b->metadata.n; i++) {
        const pl_kv *kv = &b->metadata.items[i];
        pl_bytes v = kv->value.type == PL_VALUE_STRING ? kv->value.u.str : (pl_bytes){NULL, 0};
        put_u32(out, kv->key.len);
        pl_buf_append(out, kv->key.ptr, kv->key.len);
        put_u32(out, v.len);
        pl_buf_append(out, v.ptr, v.len);
    }
    bool ok;
    switch (b->signal) {
    case PL_SIGNAL_TRACES:
        ok = pl_otlp_encode_traces(&b->data.traces, out);
        break;
    case PL_SIGNAL_PROFILES:
        ok = pl_otlp_encode_profiles(&b->data.profiles, out);
        break;
    default:
        pl_buf_append(out, b->data.raw.ptr, b->data.raw.len);
        ok = true;
        break;
    }
    return ok && pl_buf_ok(out);
}

/* Takes `data` (malloc'd) in every case. */
static pl_batch *decode_row(pl_signal signal, uint8_t *data, size_t len, uint64_t received,
                            pl_err *err)
{
    pl_batch *b = pl_batch_new(signal);
    if (!b || pl_batch_adopt(b, data, len)) {
        free(data);
        pl_batch_free(b);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    b->received_unix_nano = received;
    const uint8_t *p = data, *end = data + len;
    uint32_t n;
    if (!get_u32(&p, end, &n) || n > (uint32_t)(end - p) / 8)
        goto bad;
    if (n) {
        b->metadata.items = pl_batch_alloc(b, n * sizeof(pl_kv));
        if (!b->metadata.items)
            goto bad;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t kl, vl;
        if (!get_u32(&p, end, &kl) || kl > (size_t)(end - p))
            goto bad;
        pl_bytes k = {p, kl};
        p += kl;
        if (!get_u32(&p, end, &vl) || vl > (size_t)(end - p))
            goto bad;
        pl_bytes v = {p, vl};
        p += vl;
        b->metadata.items[i].key = k;
        b->metadata.items[i].value = pl_value_string(v);
        b->metadata.n = i + 1;
    }
    pl_status st = PL_OK;
    if (signal == PL_SIGNAL_TRACES)
        st = pl_otlp_decode_traces(b, p, (size_t)(end - p), err);
    else if (signal == PL_SIGNAL_PROFILES)
        st = pl_otlp_decode_profiles(b, p, (size_t)(end - p), err);
    else
        b->data.raw = (pl_bytes){p, (uint32_t)(end - p)};
    if (st == PL_OK)
        return b;
    pl_batch_free(b);
    return NULL;
bad:
    pl_batch_free(b);
    pl_errf(err, PL_ERR_INVALID, "corrupt metadata");
    return NULL;
}

/* Entry `seq`'s row read back as a batch. NULL with *why PL_OK when the row
 * is gone, PL_ERR_NOMEM when memory ran out (the row stays), anything else
 * when it cannot be read (`err` says why). */
static pl_batch *load_row(pl_queue_wal *w, uint64_t seq, pl_status *why, pl_err *err)
{
    *why = PL_OK;
    sqlite3_bind_int64(w->st_row, 1, (sqlite3_int64)seq);
    if (sqlite3_step(w->st_row) != SQLITE_ROW) {
        sqlite3_reset(w->st_row);
        return NULL;
    }
    pl_signal signal = (pl_signal)sqlite3_column_int(w->st_row, 0);
    uint64_t received = (uint64_t)sqlite3_column_int64(w->st_row, 1);
    size_t len = (size_t)sqlite3_column_bytes(w->st_row, 2);
    uint8_t *data = malloc(len ? len : 1);
    if (data && len)
        memcpy(data, sqlite3_column_blob(w->st_row, 2), len);
    sqlite3_reset(w->st_row);
    if (!data) {
        *why = pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (signal != w->signal) {
        free(data);
        *why = pl_errf(err, PL_ERR_INVALID, "wrong signal");
        return NULL;
    }
    pl_batch *b = decode_row(signal, data, len, received, err); /* takes data */
    if (!b)
        *why = strstr(err->msg, "out of memory") ? PL_ERR_NOMEM : PL_ERR_INVALID;
    return b;
}

/* Kept entries sent again through the pipeline, oldest first, once a
 * second while any is kept (loop thread: a timer of the pipeline's loop).
 * An entry refused again is kept again (finish); a tick stops at the first
 * refusal, since the pipeline then takes nothing more for now. */
enum { RESEND_PER_TICK = 256 };

static void resend_tick(uv_timer_t *t)
{
    pl_queue_wal *w = t->data;
    size_t sent = 0;
    uint64_t from = 0;
    while (w->n_kept && sent < RESEND_PER_TICK) {
        size_t i = lower_bound(w, from);
        while (i < w->n && !w->e[i].kept)
            i++;
        if (i >= w->n)
            break;
        wentry *x = &w->e[i];
        uint64_t seq = x->seq;
        from = seq + 1;
        pl_err err = {{0}};
        pl_status why = PL_OK;
        pl_batch *b = load_row(w, seq, &why, &err);
        if (!b && why == PL_ERR_NOMEM)
            break;
        x->kept = false;
        x->lost = 0;
        w->n_kept--;
        if (!b || pl_batch_wal_add(b, &w->owner, seq)) {
            if (b) { /* no memory for the tag: kept for the next tick */
                pl_batch_free(b);
                x->kept = true;
                x->lost = 1;
                w->n_kept++;
                break;
            }
            if (why != PL_OK)
                pl_warn("wal", "%s: entry %" PRIu64 " cannot be read back (%s); deleting it",
                        w->path, seq, err.msg);
            else
                x->deleted = true; /* gone already */
            x->refs = 1;
            apply_release(w, seq, false);
            continue;
        }
        sent++;
        if (pl_consumer_consume(w->next, b) != PL_OK)
            break; /* refused again, and kept again (finish) */
    }
    if (!w->n_kept && w->resend_active) {
        uv_timer_stop(&w->resend);
        w->resend_active = false;
    }
}

static void resend_start(pl_queue_wal *w)
{
    if (w->resend_open && !w->resend_active && w->st_row) {
        uv_timer_start(&w->resend, resend_tick, 1000, 1000);
        w->resend_active = true;
    }
}

/* ---- the consumer ---------------------------------------------------------- */

static pl_status wal_consume(void *arg, pl_batch *batch)
{
    pl_queue_wal *w = arg;
    if (batch->wal)
        return pl_consumer_consume(w->next, batch); /* replayed: logged already */
    retry_undeleted(w, false);
    if (!encode_row(&w->enc, batch)) {
        pl_batch_free(batch);
        return PL_ERR_NOMEM;
    }
    uint64_t seq = w->next_seq;
    if (seq >= (1ull << 56)) {
        pl_batch_free(batch);
        return PL_ERR_INTERNAL;
    }
    /* FULL: the commit waits for the disk, so the answer that follows is a
     * promise that survives a power loss too (the queue's own commits follow
     * its fsync setting). */
    sqlite3_exec(w->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    sqlite3_stmt *st = w->st_insert;
    sqlite3_bind_text(st, 2, w->pipeline, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, (int)batch->signal);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)batch->received_unix_nano);
    sqlite3_bind_blob(st, 5, w->enc.data ? (const void *)w->enc.data : "", (int)w->enc.len,
                      SQLITE_STATIC);
    sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
    int rc = sqlite3_step(st);
    if (rc == SQLITE_CONSTRAINT &&
        sqlite3_extended_errcode(w->db) == SQLITE_CONSTRAINT_PRIMARYKEY) {
        /* Another pipeline's log in the same file (one exporter with
         * storage in several pipelines) numbered past this one: continue
         * after the file's largest. Each log's numbers still rise. */
        sqlite3_reset(st);
        uint64_t top = max_seq(w->db);
        seq = w->next_seq = top >= w->next_seq ? top + 1 : w->next_seq;
        sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
        rc = sqlite3_step(st);
    }
    /* The error text before anything else runs on the connection: the
     * reset and the PRAGMA below would replace it ("not an error"). */
    char why[256] = "";
    if (rc != SQLITE_DONE)
        snprintf(why, sizeof(why), "%s (SQLite code %d)", sqlite3_errmsg(w->db),
                 sqlite3_extended_errcode(w->db));
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    char restore[40];
    snprintf(restore, sizeof(restore), "PRAGMA synchronous=%d", w->synchronous);
    sqlite3_exec(w->db, restore, NULL, NULL, NULL);
    if (rc != SQLITE_DONE) {
        pl_log_limited(&w->write_errors, PL_LOG_ERROR, "wal",
                       "%s: cannot log a batch, refused (the sender retries): %s", w->path, why);
        pl_batch_free(batch);
        return PL_ERR_REFUSED;
    }
    w->next_seq++;
    wentry *x = append(w, seq);
    if (!x || pl_batch_wal_add(batch, &w->owner, seq)) {
        /* Untracked: refused, so the row must go (the sender sends again). */
        if (x)
            x->done = x->deleted = true;
        if (!delete_seq(w, seq))
            remember_undeleted(w, seq);
        pl_batch_free(batch);
        return PL_ERR_NOMEM;
    }
    pl_status result = pl_consumer_consume(w->next, batch);
    if (result != PL_OK) {
        /* The sender hears the refusal and sends again: the row must not
         * be replayed as well. */
        x = find(w, seq);
        if (x && !x->deleted) {
            delete_row(w, x);
            x->lost = 0;
            if (x->kept) { /* its last holder went already */
                x->kept = false;
                w->n_kept--;
                finish(w, x);
            }
        }
    }
    return result;
}

/* ---- queue side ------------------------------------------------------------ */

/* Whether `t` is an entry of a log in `db` whose last holder is the batch
 * being stored (loop thread: the queue calls this inside its transaction). */
static bool last_holder_here(sqlite3 *db, const pl_wal_tag *t, pl_queue_wal **wo, wentry **xo)
{
    if (t->owner->hooks != &hooks)
        return false;
    pl_queue_wal *w = (pl_queue_wal *)t->owner;
    uv_mutex_lock(&w->mu);
    bool closed = w->closed;
    uv_mutex_unlock(&w->mu);
    if (closed || w->db != db)
        return false;
    drain_pending(w); /* releases from other threads count first */
    wentry *x = find(w, t->seq);
    if (!x || x->done || x->deleted || x->lost || x->refs != 1)
        return false;
    *wo = w;
    *xo = x;
    return true;
}

void pl_queue_wal_tx_delete(sqlite3 *db, const pl_batch *batch)
{
    if (!batch->wal)
        return;
    for (uint32_t i = 0; i < batch->wal->n; i++) {
        pl_queue_wal *w;
        wentry *x;
        if (!last_holder_here(db, &batch->wal->tag[i], &w, &x))
            continue;
        /* A failed DELETE (disk full) leaves the row: it is deleted again
         * when the entry finishes, never forgotten. */
        sqlite3_bind_int64(w->st_delete, 1, (sqlite3_int64)x->seq);
        x->tx_deleted = sqlite3_step(w->st_delete) == SQLITE_DONE;
        sqlite3_reset(w->st_delete);
    }
}

void pl_queue_wal_tx_done(sqlite3 *db, const pl_batch *batch, bool committed)
{
    if (!batch->wal)
        return;
    for (uint32_t i = 0; i < batch->wal->n; i++) {
        pl_queue_wal *w;
        wentry *x;
        if (last_holder_here(db, &batch->wal->tag[i], &w, &x)) {
            x->deleted = committed && x->tx_deleted;
            x->tx_deleted = false;
        }
    }
    /* Settled either way: a failed COMMIT (disk full) leaves the batch in
     * the queue's memory, where it is sent; keeping its entry as well would
     * send it a second time after every restart. The entry is deleted when
     * its last holder is through (retried while the disk refuses). */
    batch->wal->settled = true;
}

/* ---- lifecycle ------------------------------------------------------------- */

pl_queue_wal *pl_queue_wal_open(pl_queue *queue, const char *pipeline, pl_signal signal,
                                pl_consumer *next, pl_err *err)
{
    const char *path = NULL;
    sqlite3 *db = pl_queue_sqlite(queue, &path);
    if (!db) {
        pl_errf(err, PL_ERR_INVALID, "the sending queue has no storage");
        return NULL;
    }
    pl_queue_wal *w = calloc(1, sizeof(*w));
    if (!w || !(w->pipeline = strdup(pipeline)) || !(w->path = strdup(path ? path : "?"))) {
        if (w)
            free(w->pipeline);
        free(w);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    w->db = db;
    w->signal = signal;
    w->next = next;
    w->owner.hooks = &hooks;
    w->loop = pl_queue_loop(queue);
    w->loop_thread = uv_thread_self();
    w->write_errors.interval_ns = PL_LOG_LIMIT_DEFAULT_NS;
    pl_buf_init(&w->enc);
    pl_consumer_init_func(&w->consumer, wal_consume, w);
    if (uv_mutex_init(&w->mu) != 0) {
        free(w->pipeline);
        free(w->path);
        free(w);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    w->async.data = w;
    w->async_open = uv_async_init(w->loop, &w->async, on_async) == 0;
    w->resend.data = w;
    w->resend_open = uv_timer_init(w->loop, &w->resend) == 0;
    w->handles_open = w->async_open + w->resend_open;
    w->kept_log.interval_ns = PL_LOG_LIMIT_DEFAULT_NS;
    char *msg = NULL;
    int rc = sqlite3_exec(db,
                          "CREATE TABLE IF NOT EXISTS pl_wal("
                          " seq INTEGER PRIMARY KEY,"
                          " pipeline TEXT NOT NULL,"
                          " signal INTEGER NOT NULL,"
                          " received_unix_nano INTEGER NOT NULL,"
                          " data BLOB NOT NULL)",
                          NULL, NULL, &msg);
    struct {
        sqlite3_stmt **st;
        const char *sql;
    } stmts[] = {
        {&w->st_insert, "INSERT INTO pl_wal(seq, pipeline, signal, received_unix_nano, data)"
                        " VALUES(?1, ?2, ?3, ?4, ?5)"},
        {&w->st_delete, "DELETE FROM pl_wal WHERE seq = ?1"},
        {&w->st_seqs, "SELECT seq FROM pl_wal WHERE pipeline = ?1 ORDER BY seq"},
        {&w->st_row, "SELECT signal, received_unix_nano, data FROM pl_wal WHERE seq = ?1"},
        {&w->st_count, "SELECT count(*) FROM pl_wal WHERE pipeline = ?1"},
    };
    for (size_t i = 0; rc == SQLITE_OK && i < sizeof(stmts) / sizeof(stmts[0]); i++)
        rc = sqlite3_prepare_v2(db, stmts[i].sql, -1, stmts[i].st, NULL);
    if (rc == SQLITE_OK)
        w->next_seq = max_seq(db) + 1;
    sqlite3_stmt *sync = NULL;
    w->synchronous = 1;
    if (rc == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA synchronous", -1, &sync, NULL) == SQLITE_OK &&
        sqlite3_step(sync) == SQLITE_ROW)
        w->synchronous = sqlite3_column_int(sync, 0);
    sqlite3_finalize(sync);
    if (rc == SQLITE_OK && !w->async_open)
        rc = SQLITE_NOMEM;
    if (rc != SQLITE_OK) {
        pl_errf(err, PL_ERR_INTERNAL, "write-ahead log in %s: %s", w->path,
                msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        pl_queue_wal_close(w);
        return NULL;
    }
    return w;
}

bool pl_queue_wal_on(const pl_queue_wal *w, pl_queue *queue, const char *pipeline)
{
    return w && w->db == pl_queue_sqlite(queue, NULL) && strcmp(w->pipeline, pipeline) == 0;
}

void pl_queue_wal_retarget(pl_queue_wal *w, pl_consumer *next)
{
    w->next = next;
}

pl_consumer *pl_queue_wal_consumer(pl_queue_wal *w)
{
    return &w->consumer;
}

size_t pl_queue_wal_rows(pl_queue_wal *w)
{
    size_t n = 0;
    sqlite3_bind_text(w->st_count, 1, w->pipeline, -1, SQLITE_STATIC);
    if (sqlite3_step(w->st_count) == SQLITE_ROW)
        n = (size_t)sqlite3_column_int64(w->st_count, 0);
    sqlite3_reset(w->st_count);
    return n;
}

size_t pl_queue_wal_replay(pl_queue_wal *w)
{
    /* The seqs first: consuming writes to the same database. */
    uint64_t *seqs = NULL;
    size_t n = 0, cap = 0;
    sqlite3_bind_text(w->st_seqs, 1, w->pipeline, -1, SQLITE_STATIC);
    while (sqlite3_step(w->st_seqs) == SQLITE_ROW) {
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            uint64_t *s = realloc(seqs, c * sizeof(uint64_t));
            if (!s)
                break;
            seqs = s;
            cap = c;
        }
        seqs[n++] = (uint64_t)sqlite3_column_int64(w->st_seqs, 0);
    }
    sqlite3_reset(w->st_seqs);
    size_t replayed = 0;
    for (size_t i = 0; i < n; i++) {
        pl_err err = {{0}};
        pl_status why = PL_OK;
        pl_batch *b = load_row(w, seqs[i], &why, &err);
        if (!b && why == PL_OK)
            continue; /* gone meanwhile */
        if (!b && why == PL_ERR_NOMEM)
            break; /* the rest stays for the next start */
        wentry *x = append(w, seqs[i]);
        if (!x) {
            pl_batch_free(b);
            break;
        }
        if (!b) {
            pl_warn("wal", "%s: entry %" PRIu64 " cannot be read back (%s); deleting it", w->path,
                    seqs[i], err.msg);
            x->refs = 1;
            apply_release(w, seqs[i], false);
            continue;
        }
        if (pl_batch_wal_add(b, &w->owner, seqs[i])) {
            x->lost++;
            pl_batch_free(b);
            x->refs = 1; /* kept: sent again by resend_tick */
            apply_release(w, seqs[i], false);
            continue;
        }
        pl_consumer_consume(w->next, b); /* a refusal keeps the entry (finish) */
        replayed++;
    }
    free(seqs);
    if (replayed)
        pl_info("wal", "pipeline %s: %zu answered batches replayed from %s", w->pipeline, replayed,
                w->path);
    return replayed;
}

void pl_queue_wal_close(pl_queue_wal *w)
{
    if (!w)
        return;
    /* What other threads released so far still counts; later releases are
     * ignored (their entries stay for the next start). */
    if (w->async_open)
        drain_pending(w);
    uv_mutex_lock(&w->mu);
    w->closed = true;
    uv_mutex_unlock(&w->mu);
    if (w->async_open)
        drain_pending(w); /* queued between the drain and the close */
    if (w->st_delete)
        retry_undeleted(w, true);
    if (w->n_undeleted)
        pl_warn("wal",
                "%s: %zu entries could not be deleted; they are sent again at the next start",
                w->path, w->n_undeleted);
    sqlite3_finalize(w->st_insert);
    sqlite3_finalize(w->st_delete);
    sqlite3_finalize(w->st_seqs);
    sqlite3_finalize(w->st_row);
    sqlite3_finalize(w->st_count);
    w->st_insert = w->st_delete = w->st_seqs = w->st_row = w->st_count = NULL;
    w->db = NULL;
    pl_buf_free(&w->enc);
    if (w->resend_open) {
        uv_timer_stop(&w->resend); /* kept entries stay for the next start */
        uv_close((uv_handle_t *)&w->resend, on_async_closed);
    }
    if (w->async_open)
        uv_close((uv_handle_t *)&w->async, on_async_closed);
    if (w->async_open || w->resend_open)
        return; /* the last close callback frees w when no tag is left */
    uv_mutex_lock(&w->mu);
    w->async_closed = true;
    bool gone = w->holders == 0;
    uv_mutex_unlock(&w->mu);
    if (gone)
        wal_free(w);
}
