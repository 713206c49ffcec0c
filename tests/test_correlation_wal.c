/*
 * test_correlation_wal.c: the write-ahead log (exporters/queue_wal.c) in
 * front of the correlation processor, whose next consumer is a persistent
 * sending queue. A released batch whose copy the queue refuses is kept and
 * offered again; once a later copy is stored, the log entry must be gone,
 * so the next start does not send the batch a second time. Also: a batch
 * dropped after a non-retryable refusal keeps its entry (replayed).
 */
#include <unistd.h>

#include "correlation_fixture.h"
#include "exporters/queue.h"
#include "exporters/queue_wal.h"

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
} stage;

static pl_status stage_fn(void *arg, pl_batch *b)
{
    stage *s = arg;
    pl_status st = s->status;
    if (s->calls++ >= s->refuse) {
        pl_queue_tx_begin(s->q, b);
        st = pl_queue_tx_end(s->q, b, pl_queue_export(s->q, b));
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

static void env_close(env *e)
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

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/pl-corr-wal-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    PL_RUN(test_retry_success_settles_the_entry);
    PL_RUN(test_dropped_batch_keeps_the_entry);
    PL_RUN(test_shutdown_retry_settles_the_entry);
    rmdir(dir);
    return pl_test_done();
}
