/*
 * test_correlation_wal.c: the write-ahead log (exporters/queue_wal.c) in
 * front of the correlation processor, whose next consumer is a persistent
 * sending queue. A released batch whose copy the queue refuses is kept and
 * offered again; once a later copy is stored, the log entry must be gone,
 * so the next start does not send the batch a second time. Also: a batch
 * dropped after a non-retryable refusal keeps its entry (replayed).
 */
#include <glob.h>
#include <unistd.h>

#include "correlation_fixture.h"
#include "config/decode.h"
#include "exporters/queue.h"
#include "exporters/queue_wal.h"
#include "sqlite_damage_fixture.h"

extern const pl_component_type pl_exporter_sqlite;

static char dir[64];

/* The queue's backend: never answers (the rows stay stored, which is all
 * this test looks at); sends are finished before the queue goes. */
typedef struct backend {
    pl_queue_send *sends[16];
    int n;
} backend;

static void send_fn(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                    pl_queue_send *send)
{
    (void)signal, (void)payload, (void)len;
    backend *be = arg;
    REQUIRE(be->n < 16);
    be->sends[be->n++] = send;
}

static pl_status encode_fn(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                           pl_err *err)
{
    (void)arg, (void)err;
    pl_buf_append(out, "spans", 5);
    *items = pl_batch_items(batch);
    return PL_OK;
}

/* Between the correlation processor and the queue, as the exporter stage
 * of the pipeline graph: refuse the first `refuse` batches with `status`
 * (marking their entries refused, as the graph does), store the rest. */
typedef struct stage {
    pl_queue *q;
    int refuse, calls;
    pl_status status;
    void *store;         /* a sqlite store exporter beside the queue, or NULL */
    struct freer *freer; /* keeps a copy (with its tags) freed on another thread */
} stage;

/* An exporter that keeps copies of the batches and frees them on a thread
 * of its own, as any exporter with its own writer could: the copies carry
 * the write-ahead tags, so their release happens off the loop. */
typedef struct freer {
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    pl_batch *items[256];
    int n;
    bool hold; /* keep them until released by the test */
    bool stop;
    int pushed, freed;
} freer;

static void freer_main(void *arg)
{
    freer *f = arg;
    uv_mutex_lock(&f->mu);
    for (;;) {
        while (!f->stop && (f->hold || !f->n))
            uv_cond_wait(&f->cv, &f->mu);
        if (!f->n && f->stop)
            break;
        pl_batch *b = f->items[--f->n];
        uv_mutex_unlock(&f->mu);
        pl_batch_free(b);
        uv_mutex_lock(&f->mu);
        f->freed++;
        uv_cond_broadcast(&f->cv);
    }
    uv_mutex_unlock(&f->mu);
}

static void freer_push(freer *f, const pl_batch *b)
{
    pl_batch *copy = pl_batch_clone(b);
    REQUIRE(copy);
    uv_mutex_lock(&f->mu);
    REQUIRE(f->n < 256);
    f->items[f->n++] = copy;
    f->pushed++;
    uv_cond_broadcast(&f->cv);
    uv_mutex_unlock(&f->mu);
}

/* Lets the thread free what it holds and waits until it has. */
static void freer_flush(freer *f)
{
    uv_mutex_lock(&f->mu);
    f->hold = false;
    uv_cond_broadcast(&f->cv);
    while (f->freed < f->pushed) /* freed, not only taken */
        uv_cond_wait(&f->cv, &f->mu);
    uv_mutex_unlock(&f->mu);
}

static pl_status stage_fn(void *arg, pl_batch *b)
{
    stage *s = arg;
    pl_status st = s->status;
    if (s->calls++ >= s->refuse) {
        pl_queue_tx_begin(s->q, b);
        st = pl_queue_tx_end(s->q, b, pl_queue_export(s->q, b));
        if (s->store && pl_exporter_sqlite.export(s->store, b) != PL_OK)
            st = PL_ERR_REFUSED;
        if (s->freer)
            freer_push(s->freer, b);
    }
    pl_batch_wal_refused(b);
    pl_batch_free(b);
    return st;
}

/* The log's next consumer: the correlation processor. */
typedef struct front {
    void *corr;
    pl_consumer *next;
} front;

static pl_status front_fn(void *arg, pl_batch *b)
{
    front *f = arg;
    return pl_processor_correlation.consume(f->corr, b, f->next);
}

typedef struct env {
    uv_loop_t loop;
    pl_stats *qstats;
    pl_create_settings settings;
    backend be;
    pl_queue *q;
    pl_queue_wal *wal;
    fixture fx;
    stage st;
    front fr;
    pl_consumer to_stage, to_front;
} env;

/* Each test has its own storage directory under dir. */
static char sub[128];

static void env_open(env *e, const char *name, int refuse, pl_status status)
{
    memset(e, 0, sizeof(*e));
    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    uv_loop_init(&e->loop);
    e->qstats = pl_stats_new("otlp/wal", PL_KIND_EXPORTER);
    e->settings.id = "otlp/wal";
    e->settings.loop = &e->loop;
    e->settings.stats = e->qstats;
    pl_sending_queue_config qc = {0};
    qc.enabled = true;
    qc.num_consumers = 1;
    qc.queue_size = 100;
    qc.max_bytes = 1 << 20;
    qc.storage = sub;
    pl_retry_config rc = {0};
    pl_queue_sender sender = {encode_fn, send_fn, &e->be, false};
    pl_err err = {{0}};
    e->q = pl_queue_new(&e->settings, &qc, &rc, &sender, &err);
    REQUIRE(e->q);
    REQUIRE(pl_queue_start(e->q, &err) == PL_OK);
    pl_correlation_config cfg = test_config();
    REQUIRE(fx_init(&e->fx, &cfg) == 0);
    e->st = (stage){e->q, refuse, 0, status};
    pl_consumer_init_func(&e->to_stage, stage_fn, &e->st);
    e->fr = (front){e->fx.self, &e->to_stage};
    pl_consumer_init_func(&e->to_front, front_fn, &e->fr);
    e->wal = pl_queue_wal_open(e->q, "traces", PL_SIGNAL_TRACES, &e->to_front, &err);
    REQUIRE(e->wal);
}

static void env_close_files(env *e, bool remove_files);

static void env_close(env *e)
{
    env_close_files(e, true);
}

static void env_close_files(env *e, bool remove_files)
{
    pl_queue_wal_close(e->wal);
    fx_done(&e->fx);
    pl_queue_shutdown(e->q);
    for (int i = 0; i < e->be.n; i++) {
        pl_send_result r;
        pl_send_result_set(&r, PL_SEND_RETRYABLE, "test over");
        pl_queue_send_done(e->be.sends[i], &r);
    }
    pl_queue_destroy(e->q);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    uv_loop_close(&e->loop);
    pl_stats_free(e->qstats);
    if (!remove_files)
        return;
    char *file = pl_queue_storage_file(sub, "otlp/wal");
    const char *ext[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; file && i < 4; i++) {
        char p[600];
        snprintf(p, sizeof(p), "%s%s", file, ext[i]);
        unlink(p);
    }
    free(file);
    rmdir(sub);
}

static size_t stored(env *e)
{
    pl_queue_info info;
    pl_queue_get_info(e->q, &info);
    return info.stored;
}

/* A traces batch through the log: two spans, held by the processor. */
static void send_spans(env *e)
{
    span_spec sp[] = {{1, 0x10, 0, BASE, BASE + S(1), "GET /", NULL},
                      {1, 0x11, 0x10, BASE, BASE + S(1), "db", NULL}};
    CHECK_EQ_INT(pl_consumer_consume(pl_queue_wal_consumer(e->wal), mk_traces("svc", sp, 2)),
                 PL_OK);
    CHECK_EQ_UINT(pl_queue_wal_rows(e->wal), 1); /* answered: logged */
}

/* Refused twice (the queue full), stored at the third offer: the log entry
 * goes, and a restart replays nothing. */
static void test_retry_success_settles_the_entry(void)
{
    env e;
    env_open(&e, "retry", 2, PL_ERR_REFUSED);
    send_spans(&e);
    advance(&e.fx, S(31)); /* past the window: released, refused, kept */
    CHECK_EQ_INT(e.st.calls, 1);
    CHECK_EQ_UINT(stored(&e), 0);
    advance(&e.fx, S(2)); /* offered again: refused again */
    CHECK_EQ_INT(e.st.calls, 2);
    advance(&e.fx, S(2)); /* and stored */
    CHECK_EQ_INT(e.st.calls, 3);
    CHECK_EQ_UINT(stored(&e), 1);
    CHECK(counters(&e.fx).refused_items >= 2);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 0); /* no second copy at the next start */
    CHECK_EQ_UINT(pl_queue_wal_replay(e.wal), 0);
    env_close(&e);
}

/* A non-retryable refusal drops the batch: its entry stays for the next
 * start (the data was answered, and is now only in the log). */
static void test_dropped_batch_keeps_the_entry(void)
{
    env e;
    env_open(&e, "drop", 1, PL_ERR_INVALID);
    send_spans(&e);
    advance(&e.fx, S(31));
    CHECK_EQ_INT(e.st.calls, 1);
    advance(&e.fx, S(2));
    CHECK_EQ_INT(e.st.calls, 1); /* not offered again */
    CHECK_EQ_UINT(stored(&e), 0);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 1);
    env_close(&e);
}

/* After shutdown a kept batch is offered again from the drain (the
 * processor's pending hook) until taken: stored, no entry left. */
static void test_shutdown_retry_settles_the_entry(void)
{
    env e;
    env_open(&e, "shutdown", 1, PL_ERR_REFUSED);
    send_spans(&e);
    advance(&e.fx, S(31));
    CHECK_EQ_INT(e.st.calls, 1);
    pl_processor_correlation.shutdown(e.fx.self);
    CHECK(pl_processor_correlation.pending(e.fx.self) > 0); /* waits: not due yet */
    fake_now += S(1);
    CHECK_EQ_UINT(pl_processor_correlation.pending(e.fx.self), 0);
    CHECK_EQ_INT(e.st.calls, 2);
    CHECK_EQ_UINT(stored(&e), 1);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 0);
    env_close(&e);
}

/* ---- the sqlite store beside the persistent queue -------------------------- */

/* The store deep-copies each batch (with its write-ahead tags) and frees the
 * copy on its writer thread. That release must not touch the log's
 * connection there: it is handed to the loop, which owns the connection. */
typedef struct store_env {
    pl_stats *stats;
    void *cfg;
    void *self;
} store_env;

static void store_open(store_env *s, uv_loop_t *loop, const char *path)
{
    memset(s, 0, sizeof(*s));
    const pl_cfg_section *sec = pl_exporter_sqlite.config;
    s->cfg = calloc(1, sec->size);
    REQUIRE(s->cfg && pl_cfg_defaults(sec, s->cfg) == 0);
    for (const pl_cfg_field *f = sec->fields; f->key; f++) {
        char *slot = (char *)s->cfg + f->offset;
        if (strcmp(f->key, "path") == 0) {
            free(*(char **)slot);
            *(char **)slot = strdup(path);
        } else if (strcmp(f->key, "api") == 0) {
            for (const pl_cfg_field *g = f->section->fields; g->key; g++)
                if (strcmp(g->key, "endpoint") == 0) {
                    char **ep = (char **)(slot + g->offset);
                    free(*ep);
                    *ep = strdup("");
                }
        }
    }
    s->stats = pl_stats_new("sqlite", PL_KIND_EXPORTER);
    pl_create_settings set = {0};
    set.id = "sqlite";
    set.loop = loop;
    set.stats = s->stats;
    set.signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES);
    pl_err err = {{0}};
    REQUIRE(pl_exporter_sqlite.create(&set, s->cfg, &s->self, &err) == PL_OK);
    REQUIRE(pl_exporter_sqlite.start(s->self, &err) == PL_OK);
}

/* Waits for the writer to finish everything queued, without running the
 * loop (pending() folds the writer's results itself). */
static void store_wait(store_env *s)
{
    for (int i = 0; i < 10000 && pl_exporter_sqlite.pending(s->self); i++)
        uv_sleep(1);
    CHECK_EQ_UINT(pl_exporter_sqlite.pending(s->self), 0);
}

static void store_close(store_env *s, uv_loop_t *loop)
{
    pl_exporter_sqlite.shutdown(s->self);
    uv_run(loop, UV_RUN_NOWAIT);
    pl_exporter_sqlite.destroy(s->self);
    pl_cfg_free(pl_exporter_sqlite.config, s->cfg);
    free(s->cfg);
    pl_stats_free(s->stats);
}

static bool queue_file_ok(env *e)
{
    sqlite3 *db = pl_queue_sqlite(e->q, NULL);
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW &&
              strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
    sqlite3_finalize(st);
    return ok;
}

/* The store first, the persistent queue second: the store's copy holds no
 * write-ahead entry, so the queue's commit deletes it at once; a crash
 * afterwards replays nothing the queue has (exactly once). */
static void test_store_beside_the_queue_leaves_no_entry(void)
{
    env e;
    env_open(&e, "store", 0, PL_OK);
    store_env s;
    char path[200];
    snprintf(path, sizeof(path), "%s/store.db", sub);
    store_open(&s, &e.loop, path);
    e.st.store = s.self;
    send_spans(&e);
    advance(&e.fx, S(31)); /* released: copied by the store, stored in the queue */
    CHECK_EQ_INT(e.st.calls, 1);
    CHECK_EQ_UINT(stored(&e), 1);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 0);
    store_wait(&s);
    CHECK_EQ_UINT(pl_exporter_sqlite.pending(s.self), 0);
    CHECK(queue_file_ok(&e));
    pl_queue_wal_close(e.wal);
    e.wal = NULL;
    store_close(&s, &e.loop);
    env_close(&e);
}

/* A copy freed on another thread: its release must not touch the log's
 * connection there; it is handed to the loop, which owns the connection. */
static void test_copy_freed_off_the_loop_is_released_on_the_loop(void)
{
    env e;
    env_open(&e, "thread", 0, PL_OK);
    freer f = {0};
    uv_mutex_init(&f.mu);
    uv_cond_init(&f.cv);
    f.hold = true;
    REQUIRE(uv_thread_create(&f.thread, freer_main, &f) == 0);
    e.st.freer = &f;

    send_spans(&e);
    advance(&e.fx, S(31)); /* stored in the queue; the copy still holds the entry */
    CHECK_EQ_UINT(stored(&e), 1);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 1);
    freer_flush(&f); /* freed on the thread */
    CHECK_EQ_INT(f.freed, 1);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 1); /* not applied there */
    uv_run(&e.loop, UV_RUN_NOWAIT);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 0); /* applied on the loop */

    /* Many, freed while the loop keeps logging new batches on the same
     * connection (ThreadSanitizer sees any second thread on it). */
    for (uint8_t t = 2; t < 80; t++) {
        span_spec sp[] = {{t, 0x100u + t, 0, BASE, BASE + S(1), "GET /", NULL}};
        CHECK_EQ_INT(pl_consumer_consume(pl_queue_wal_consumer(e.wal), mk_traces("svc", sp, 1)),
                     PL_OK);
        advance(&e.fx, S(31));
        uv_run(&e.loop, UV_RUN_NOWAIT);
    }
    freer_flush(&f);
    uv_run(&e.loop, UV_RUN_NOWAIT);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 0); /* every entry settled once, on the loop */
    CHECK(queue_file_ok(&e));

    /* A copy still held when the log closes: freed later on the thread,
     * ignored there, and the log object outlives it. */
    uv_mutex_lock(&f.mu);
    f.hold = true;
    uv_mutex_unlock(&f.mu);
    span_spec late[] = {{90, 0x900, 0, BASE, BASE + S(1), "late", NULL}};
    CHECK_EQ_INT(pl_consumer_consume(pl_queue_wal_consumer(e.wal), mk_traces("svc", late, 1)),
                 PL_OK);
    advance(&e.fx, S(31));
    pl_queue_wal_close(e.wal);
    e.wal = NULL;
    uv_mutex_lock(&f.mu);
    f.stop = true;
    f.hold = false;
    uv_cond_broadcast(&f.cv);
    uv_mutex_unlock(&f.mu);
    uv_thread_join(&f.thread);
    uv_cond_destroy(&f.cv);
    uv_mutex_destroy(&f.mu);
    env_close(&e);
}

/* A full disk (here: the file's page limit) refuses the batch, with the
 * SQLite error read before anything else ran on the connection, and the same
 * error is logged once, not once per request. */
static void test_full_disk_refuses_with_the_true_error_once(void)
{
    env e;
    env_open(&e, "full", 0, PL_OK);
    sqlite3 *db = pl_queue_sqlite(e.q, NULL);
    sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    sqlite3_stmt *st = NULL;
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &st, NULL) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    int pages = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    char sql[64];
    snprintf(sql, sizeof(sql), "PRAGMA max_page_count = %d", pages);
    REQUIRE(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);

    char logfile[200];
    snprintf(logfile, sizeof(logfile), "%s/full.log", dir);
    fflush(stderr);
    int saved = dup(2);
    FILE *lf = fopen(logfile, "w");
    REQUIRE(lf && saved >= 0);
    dup2(fileno(lf), 2);
    int refused = 0;
    for (uint8_t t = 1; t <= 5; t++) {
        /* one row bigger than a page: needs a new page */
        span_spec sp[400];
        for (int i = 0; i < 400; i++)
            sp[i] = (span_spec){t,           0x1000u * t + (uint64_t)i,
                                0,           BASE,
                                BASE + S(1), "a span name long enough to fill the page quickly",
                                NULL};
        refused += pl_consumer_consume(pl_queue_wal_consumer(e.wal), mk_traces("svc", sp, 400)) ==
                   PL_ERR_REFUSED;
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(lf);
    CHECK_EQ_INT(refused, 5);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 0);
    char text[4096] = "";
    lf = fopen(logfile, "r");
    REQUIRE(lf);
    size_t n = fread(text, 1, sizeof(text) - 1, lf);
    text[n] = 0;
    fclose(lf);
    unlink(logfile);
    CHECK(strstr(text, "cannot log a batch") != NULL);
    CHECK(strstr(text, "database or disk is full") != NULL);
    CHECK(strstr(text, "not an error") == NULL);
    const char *first = strstr(text, "cannot log a batch");
    CHECK(first && !strstr(first + 1, "cannot log a batch")); /* once: rate-limited */
    env_close(&e);
}

/* A consumer that drops what it gets (a filter), with the file read-only
 * while the first drop settles: that entry's DELETE fails. */
typedef struct dropper {
    sqlite3 *db;
    int calls;
} dropper;

static pl_status drop_fn(void *arg, pl_batch *b)
{
    dropper *d = arg;
    if (d->calls++ == 0)
        sqlite3_exec(d->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
    pl_batch_free(b); /* settles the entry: its row is deleted */
    if (d->calls == 1)
        sqlite3_exec(d->db, "PRAGMA query_only = 0", NULL, NULL, NULL);
    return PL_OK;
}

/* An entry whose DELETE fails is deleted later, not left for the next start
 * to send again. */
static void test_failed_delete_is_retried(void)
{
    env e;
    env_open(&e, "retry-delete", 0, PL_OK);
    dropper d = {pl_queue_sqlite(e.q, NULL), 0};
    pl_consumer drop;
    pl_consumer_init_func(&drop, drop_fn, &d);
    pl_err err = {{0}};
    pl_queue_wal *w = pl_queue_wal_open(e.q, "dropped", PL_SIGNAL_TRACES, &drop, &err);
    REQUIRE(w);
    span_spec sp[] = {{1, 0x10, 0, BASE, BASE + S(1), "GET /", NULL}};
    CHECK_EQ_INT(pl_consumer_consume(pl_queue_wal_consumer(w), mk_traces("svc", sp, 1)), PL_OK);
    CHECK_EQ_UINT(pl_queue_wal_rows(w), 1); /* the DELETE failed: kept, remembered */
    uv_sleep(1100);
    uv_update_time(&e.loop);
    span_spec sp2[] = {{2, 0x20, 0, BASE, BASE + S(1), "GET /", NULL}};
    CHECK_EQ_INT(pl_consumer_consume(pl_queue_wal_consumer(w), mk_traces("svc", sp2, 1)), PL_OK);
    CHECK_EQ_UINT(pl_queue_wal_rows(w), 0); /* retried with the next batch */
    CHECK_EQ_INT(d.calls, 2);
    pl_queue_wal_close(w);
    env_close(&e);
}

/* Keeps what it is given (its log entries stay open) until released. */
typedef struct holder {
    pl_batch *kept[4];
    int n;
} holder;

static pl_status hold_fn(void *arg, pl_batch *b)
{
    holder *h = arg;
    if (h->n < 4) {
        h->kept[h->n++] = b;
        return PL_OK;
    }
    pl_batch_free(b);
    return PL_OK;
}

/* One exporter with storage in two pipelines: both pipelines' logs live in
 * the one file and number their entries in one sequence, so neither
 * refuses a batch because the other used its number. */
static void test_two_pipelines_share_a_file(void)
{
    env e;
    env_open(&e, "two-pipelines", 0, PL_OK);
    holder h = {{0}, 0};
    pl_consumer hold;
    pl_consumer_init_func(&hold, hold_fn, &h);
    pl_err err = {{0}};
    pl_queue_wal *w2 = pl_queue_wal_open(e.q, "profiles", PL_SIGNAL_TRACES, &hold, &err);
    REQUIRE(w2);
    for (int i = 0; i < 3; i++) {
        span_spec a[] = {
            {(uint64_t)(10 + i), (uint64_t)(0x100 + i), 0, BASE, BASE + S(1), "GET /", NULL}};
        CHECK_EQ_INT(pl_consumer_consume(pl_queue_wal_consumer(w2), mk_traces("svc", a, 1)), PL_OK);
        span_spec b[] = {
            {(uint64_t)(20 + i), (uint64_t)(0x200 + i), 0, BASE, BASE + S(1), "GET /", NULL}};
        CHECK_EQ_INT(pl_consumer_consume(pl_queue_wal_consumer(e.wal), mk_traces("svc", b, 1)),
                     PL_OK);
    }
    CHECK_EQ_UINT(pl_queue_wal_rows(w2), 3); /* held: every entry logged and kept */
    for (int i = 0; i < h.n; i++)
        pl_batch_free(h.kept[i]);
    CHECK_EQ_UINT(pl_queue_wal_rows(w2), 0);
    pl_queue_wal_close(w2);
    env_close(&e);
}

/* A queue file damaged while it held an answered batch's log entry: set
 * aside at the next start, and the entry, still readable, is copied into
 * the fresh file and replayed. */
static void test_damaged_file_entries_are_replayed(void)
{
    env e;
    env_open(&e, "salvage", 1000, PL_ERR_REFUSED); /* the queue never takes it */
    send_spans(&e);                                /* logged; held by correlation */
    pl_queue_wal_close(e.wal);                     /* as a crash: the entry stays */
    e.wal = NULL;
    env_close_files(&e, false);

    char *file = pl_queue_storage_file(sub, "otlp/wal");
    REQUIRE(file);
    REQUIRE(damage_sqlite_tail(file));

    env_open(&e, "salvage", 0, PL_OK);
    CHECK_EQ_UINT(stored(&e), 0);
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 1);
    CHECK_EQ_UINT(pl_queue_wal_replay(e.wal), 1);
    advance(&e.fx, S(31));
    CHECK_EQ_UINT(stored(&e), 1); /* the replayed batch reached the queue */
    CHECK_EQ_UINT(pl_queue_wal_rows(e.wal), 0);
    char pattern[700];
    snprintf(pattern, sizeof(pattern), "%s.corrupt-*", file);
    glob_t g;
    CHECK(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc >= 1);
    env_close(&e);
    for (size_t i = 0; i < g.gl_pathc; i++)
        unlink(g.gl_pathv[i]);
    globfree(&g);
    rmdir(sub);
    free(file);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/pl-corr-wal-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    PL_RUN(test_retry_success_settles_the_entry);
    PL_RUN(test_dropped_batch_keeps_the_entry);
    PL_RUN(test_shutdown_retry_settles_the_entry);
    PL_RUN(test_full_disk_refuses_with_the_true_error_once);
    PL_RUN(test_failed_delete_is_retried);
    PL_RUN(test_two_pipelines_share_a_file);
    PL_RUN(test_damaged_file_entries_are_replayed);
    PL_RUN(test_store_beside_the_queue_leaves_no_entry);
    PL_RUN(test_copy_freed_off_the_loop_is_released_on_the_loop);
    rmdir(dir);
    return pl_test_done();
}
