/*
 * queue_wal.c: the write-ahead log in front of a pipeline (see queue_wal.h).
 *
 * Entries are numbered per log (seq, the row's primary key, continuing after
 * the largest left by an earlier run). A batch's tag is the log's index in
 * `wals` in the top byte and seq below it, so the hooks the batches call
 * (core/model.c) find their entry without a pointer. Each log keeps its open
 * entries in an array ordered by seq (they are appended in order and mostly
 * finish in order, so the finished prefix is dropped as it forms and lookups
 * are a binary search over what is still open).
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

#include "core/log.h"
#include "pipeline/consumer.h"
#include "proto/otlp_pb.h"

typedef struct wentry {
    uint64_t seq;
    uint32_t refs;
    uint32_t lost; /* holders refused downstream (not recovered): keep the row for the
                      next start */
    bool deleted;  /* the row is gone (committed with the queue, or dropped) */
    bool done;     /* no holder left */
} wentry;

struct pl_queue_wal {
    pl_consumer consumer;
    pl_consumer *next;
    int index; /* in wals[] */
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
};

#define MAX_WALS 255
static pl_queue_wal *wals[MAX_WALS + 1]; /* index 0 unused */

#define TAG(w, seq)  ((uint64_t)(w)->index << 56 | (seq))
#define TAG_WAL(tag) (wals[(tag) >> 56])
#define TAG_SEQ(tag) ((tag) & ((1ull << 56) - 1))

static wentry *find(pl_queue_wal *w, uint64_t seq)
{
    size_t lo = w->head, hi = w->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->e[mid].seq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < w->n && w->e[lo].seq == seq ? &w->e[lo] : NULL;
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

static void delete_row(pl_queue_wal *w, wentry *x)
{
    sqlite3_bind_int64(w->st_delete, 1, (sqlite3_int64)x->seq);
    int rc = sqlite3_step(w->st_delete);
    sqlite3_reset(w->st_delete);
    if (rc != SQLITE_DONE)
        pl_warn("wal", "%s: cannot delete entry %" PRIu64 ": %s", w->path, x->seq,
                sqlite3_errmsg(w->db));
    x->deleted = true;
}

static void finish(pl_queue_wal *w, wentry *x)
{
    x->done = true;
    if (x->lost)
        pl_warn("wal",
                "pipeline %s: data refused downstream after it was answered; kept in %s and "
                "sent again at the next start",
                w->pipeline, w->path);
    else if (!x->deleted)
        delete_row(w, x); /* dropped on purpose (a filter), or settled elsewhere */
    while (w->head < w->n && w->e[w->head].done)
        w->head++;
}

static void hook_retain(uint64_t tag)
{
    pl_queue_wal *w = TAG_WAL(tag);
    wentry *x = w ? find(w, TAG_SEQ(tag)) : NULL;
    if (x)
        x->refs++;
}

static void hook_release(uint64_t tag, bool settled, bool refused)
{
    (void)settled;
    pl_queue_wal *w = TAG_WAL(tag);
    wentry *x = w ? find(w, TAG_SEQ(tag)) : NULL;
    if (!x || x->done)
        return;
    if (refused)
        x->lost++;
    if (x->refs && --x->refs == 0)
        finish(w, x);
}

/* A holder that kept its data when copies of it were refused has passed it
 * on after all: those refusals are made good. */
static void hook_recovered(uint64_t tag, uint32_t refusals)
{
    pl_queue_wal *w = TAG_WAL(tag);
    wentry *x = w ? find(w, TAG_SEQ(tag)) : NULL;
    if (x && !x->done)
        x->lost = x->lost > refusals ? x->lost - refusals : 0;
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

/* ---- the consumer ---------------------------------------------------------- */

static pl_status wal_consume(void *arg, pl_batch *batch)
{
    pl_queue_wal *w = arg;
    if (batch->wal)
        return pl_consumer_consume(w->next, batch); /* replayed: logged already */
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
    sqlite3_bind_int64(st, 1, (sqlite3_int64)seq);
    sqlite3_bind_text(st, 2, w->pipeline, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 3, (int)batch->signal);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)batch->received_unix_nano);
    sqlite3_bind_blob(st, 5, w->enc.data ? (const void *)w->enc.data : "", (int)w->enc.len,
                      SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    char restore[40];
    snprintf(restore, sizeof(restore), "PRAGMA synchronous=%d", w->synchronous);
    sqlite3_exec(w->db, restore, NULL, NULL, NULL);
    if (rc != SQLITE_DONE) {
        pl_error("wal", "%s: cannot log a batch: %s", w->path, sqlite3_errmsg(w->db));
        pl_batch_free(batch);
        return PL_ERR_REFUSED;
    }
    w->next_seq++;
    wentry *x = append(w, seq);
    if (!x || pl_batch_wal_add(batch, TAG(w, seq))) {
        /* Untracked: the row stays and is replayed at the next start. */
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
        }
    }
    return result;
}

/* ---- queue side ------------------------------------------------------------ */

static bool last_holder_here(sqlite3 *db, uint64_t tag, pl_queue_wal **wo, wentry **xo)
{
    pl_queue_wal *w = TAG_WAL(tag);
    if (!w || w->db != db)
        return false;
    wentry *x = find(w, TAG_SEQ(tag));
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
        if (!last_holder_here(db, batch->wal->seq[i], &w, &x))
            continue;
        sqlite3_bind_int64(w->st_delete, 1, (sqlite3_int64)x->seq);
        sqlite3_step(w->st_delete);
        sqlite3_reset(w->st_delete);
    }
}

void pl_queue_wal_tx_done(sqlite3 *db, const pl_batch *batch, bool committed)
{
    if (!batch->wal || !committed)
        return;
    for (uint32_t i = 0; i < batch->wal->n; i++) {
        pl_queue_wal *w;
        wentry *x;
        if (last_holder_here(db, batch->wal->seq[i], &w, &x))
            x->deleted = true;
    }
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
    int index = 0;
    for (int i = 1; i <= MAX_WALS && !index; i++)
        if (!wals[i])
            index = i;
    if (!index) {
        pl_errf(err, PL_ERR_INTERNAL, "too many write-ahead logs");
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
    w->index = index;
    pl_buf_init(&w->enc);
    pl_consumer_init_func(&w->consumer, wal_consume, w);
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
    sqlite3_stmt *max = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "SELECT coalesce(max(seq), 0) FROM pl_wal", -1, &max, NULL);
    if (rc == SQLITE_OK && sqlite3_step(max) == SQLITE_ROW)
        w->next_seq = (uint64_t)sqlite3_column_int64(max, 0) + 1;
    sqlite3_finalize(max);
    sqlite3_stmt *sync = NULL;
    w->synchronous = 1;
    if (rc == SQLITE_OK &&
        sqlite3_prepare_v2(db, "PRAGMA synchronous", -1, &sync, NULL) == SQLITE_OK &&
        sqlite3_step(sync) == SQLITE_ROW)
        w->synchronous = sqlite3_column_int(sync, 0);
    sqlite3_finalize(sync);
    if (rc != SQLITE_OK) {
        pl_errf(err, PL_ERR_INTERNAL, "write-ahead log in %s: %s", w->path,
                msg ? msg : sqlite3_errmsg(db));
        sqlite3_free(msg);
        pl_queue_wal_close(w);
        return NULL;
    }
    wals[index] = w;
    pl_wal_hooks_current = &hooks;
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
        sqlite3_bind_int64(w->st_row, 1, (sqlite3_int64)seqs[i]);
        if (sqlite3_step(w->st_row) != SQLITE_ROW) {
            sqlite3_reset(w->st_row);
            continue;
        }
        pl_signal signal = (pl_signal)sqlite3_column_int(w->st_row, 0);
        uint64_t received = (uint64_t)sqlite3_column_int64(w->st_row, 1);
        size_t len = (size_t)sqlite3_column_bytes(w->st_row, 2);
        uint8_t *data = malloc(len ? len : 1);
        if (data && len)
            memcpy(data, sqlite3_column_blob(w->st_row, 2), len);
        sqlite3_reset(w->st_row);
        if (!data)
            break;
        wentry *x = append(w, seqs[i]);
        if (!x) {
            free(data);
            break;
        }
        pl_err err = {{0}};
        pl_batch *b = NULL;
        if (signal == w->signal)
            b = decode_row(signal, data, len, received, &err); /* takes data */
        else
            free(data);
        if (!b) {
            pl_warn("wal", "%s: entry %" PRIu64 " cannot be read back (%s); deleting it", w->path,
                    seqs[i], err.msg[0] ? err.msg : "wrong signal");
            x->refs = 1;
            hook_release(TAG(w, seqs[i]), false, false);
            continue;
        }
        if (pl_batch_wal_add(b, TAG(w, seqs[i]))) {
            x->lost++;
            pl_batch_free(b);
            continue;
        }
        pl_status st = pl_consumer_consume(w->next, b);
        if (st != PL_OK) {
            x = find(w, seqs[i]);
            if (x && !x->done)
                x->lost++; /* keep it for the next start */
        }
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
    if (w->index && wals[w->index] == w)
        wals[w->index] = NULL;
    sqlite3_finalize(w->st_insert);
    sqlite3_finalize(w->st_delete);
    sqlite3_finalize(w->st_seqs);
    sqlite3_finalize(w->st_row);
    sqlite3_finalize(w->st_count);
    pl_buf_free(&w->enc);
    free(w->e);
    free(w->pipeline);
    free(w->path);
    free(w);
}
