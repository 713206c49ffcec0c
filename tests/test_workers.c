/*
 * test_workers.c: the receiver worker pool (pipeline/workers.h): functions
 * run on the worker threads, batches consumed on a worker cross to the
 * pipeline loop's thread and bring its status back, and the pipeline loop
 * waiting for a worker still consumes the batches that worker hands over
 * (no deadlock); work submitted to the workers comes back to the pipeline
 * loop, and a sending queue that encodes on the workers keeps its order,
 * its bounds and its pending count, and survives being destroyed while
 * encodings run.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "core/model.h"
#include "core/stats.h"
#include "exporters/queue.h"
#include "pipeline/consumer.h"
#include "pipeline/workers.h"
#include "testlib.h"

static pthread_t main_thread;
static int consumed_on_main;
static int consumed_elsewhere;

static pl_status count_consume(void *arg, pl_batch *batch)
{
    (void)arg;
    if (pthread_equal(pthread_self(), main_thread))
        consumed_on_main++;
    else
        consumed_elsewhere++;
    pl_batch_free(batch);
    return PL_ERR_REFUSED; /* a status the worker must see */
}

typedef struct on_worker_ctx {
    pl_consumer *consumer;
    int n;
    pl_status last;
    bool was_worker;
    pthread_t thread;
} on_worker_ctx;

/* Runs on a worker: hands batches to the pipeline (blocking until the main
 * thread consumed them). */
static void consume_from_worker(void *arg)
{
    on_worker_ctx *c = arg;
    c->was_worker = pl_workers_on_worker();
    c->thread = pthread_self();
    for (int i = 0; i < c->n; i++)
        c->last = pl_consumer_consume(c->consumer, pl_batch_new(PL_SIGNAL_TRACES));
}

static void test_pool(void)
{
    uv_loop_t loop;
    REQUIRE(uv_loop_init(&loop) == 0);
    main_thread = pthread_self();
    consumed_on_main = consumed_elsewhere = 0;
    pl_err err = {{0}};
    CHECK_EQ_UINT(pl_host_workers_count(pl_workers_host(NULL)), 0);
    CHECK(!pl_workers_on_worker());
    pl_workers *w = pl_workers_start(&loop, 3, &err);
    REQUIRE(w);
    CHECK_EQ_UINT(pl_host_workers_count(pl_workers_host(w)), 3);
    CHECK(pl_workers_loop(w, 0) != &loop && pl_workers_loop(w, 2) != NULL &&
          pl_workers_loop(w, 3) == NULL);

    pl_consumer consumer;
    pl_consumer_init_func(&consumer, count_consume, NULL);
    /* The main thread waits in pl_workers_run while the worker blocks in
     * pl_consumer_consume: the wait itself must consume the batches. */
    on_worker_ctx c = {.consumer = &consumer, .n = 5};
    pl_workers_run(w, 1, consume_from_worker, &c);
    CHECK(c.was_worker);
    CHECK(!pthread_equal(c.thread, main_thread));
    CHECK_EQ_INT(consumed_on_main, 5);
    CHECK_EQ_INT(consumed_elsewhere, 0);
    CHECK_EQ_INT(c.last, PL_ERR_REFUSED);

    /* Every worker, one after the other, on distinct threads. */
    pthread_t seen[3];
    for (unsigned i = 0; i < 3; i++) {
        on_worker_ctx d = {.consumer = &consumer, .n = 1};
        pl_workers_run(w, i, consume_from_worker, &d);
        seen[i] = d.thread;
    }
    CHECK(!pthread_equal(seen[0], seen[1]) && !pthread_equal(seen[1], seen[2]));
    CHECK_EQ_INT(consumed_on_main, 8);

    pl_workers_stop(w);
    uv_run(&loop, UV_RUN_DEFAULT); /* the pool's async handle closes */
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* Consumption from the main thread does not hop. */
static void test_main_thread_direct(void)
{
    main_thread = pthread_self();
    pl_consumer consumer;
    pl_consumer_init_func(&consumer, count_consume, NULL);
    int before = consumed_on_main;
    CHECK_EQ_INT(pl_consumer_consume(&consumer, pl_batch_new(PL_SIGNAL_TRACES)), PL_ERR_REFUSED);
    CHECK_EQ_INT(consumed_on_main, before + 1);
    CHECK(pl_workers_default() >= 1);
}

/* ---- work submitted to the workers -------------------------------------- */

typedef struct work_ctx {
    int index;
    bool work_on_worker;
    bool done_on_main;
    int *done_order;
    int *n_done;
} work_ctx;

static void a_work(void *arg)
{
    work_ctx *c = arg;
    c->work_on_worker = pl_workers_on_worker() && !pthread_equal(pthread_self(), main_thread);
}

static void a_done(void *arg)
{
    work_ctx *c = arg;
    c->done_on_main = pthread_equal(pthread_self(), main_thread);
    c->done_order[(*c->n_done)++] = c->index;
}

static void keep_alive(uv_timer_t *t)
{
    (void)t;
}

static void test_submit(void)
{
    uv_loop_t loop;
    REQUIRE(uv_loop_init(&loop) == 0);
    main_thread = pthread_self();
    CHECK(!pl_host_submit(NULL, a_work, a_done, NULL)); /* no pool: the caller does it */
    pl_err err = {{0}};
    pl_workers *w = pl_workers_start(&loop, 2, &err);
    REQUIRE(w);
    uv_timer_t t; /* the pool's wake-up does not keep the loop running */
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, keep_alive, 5, 5);
    enum { N = 50 };
    work_ctx c[N];
    int order[N], n_done = 0;
    for (int i = 0; i < N; i++) {
        c[i] = (work_ctx){.index = i, .done_order = order, .n_done = &n_done};
        CHECK(pl_host_submit(pl_workers_host(w), a_work, a_done, &c[i]));
    }
    uint64_t end = pl_time_mono_ns() + 5000000000ull;
    while (n_done < N && pl_time_mono_ns() < end)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ_INT(n_done, N);
    bool all = true;
    for (int i = 0; i < N; i++)
        all &= c[i].work_on_worker && c[i].done_on_main;
    CHECK(all);
    /* submitted and not yet delivered at stop: done is still called */
    int late_done = 0;
    work_ctx late = {.index = 0, .done_order = order, .n_done = &late_done};
    CHECK(pl_host_submit(pl_workers_host(w), a_work, a_done, &late));
    pl_workers_stop(w);
    CHECK_EQ_INT(late_done, 1);
    CHECK(late.work_on_worker);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

/* ---- a sending queue that encodes on the workers ------------------------ */

typedef struct qfake {
    char sent[64][16];
    int n_sent;
    int encodes_on_worker, encodes_elsewhere;
    int slow_ms; /* the payload "b0" takes this long to encode */
} qfake;

static pl_status slow_encode(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                             pl_err *err)
{
    (void)err;
    qfake *f = arg;
    if (pl_workers_on_worker())
        __atomic_fetch_add(&f->encodes_on_worker, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&f->encodes_elsewhere, 1, __ATOMIC_RELAXED);
    if (batch->data.raw.len == 2 && memcmp(batch->data.raw.ptr, "b0", 2) == 0)
        usleep((useconds_t)f->slow_ms * 1000);
    pl_buf_append(out, batch->data.raw.ptr, batch->data.raw.len);
    *items = 1;
    return PL_OK;
}

static void ok_send(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                    pl_queue_send *send)
{
    (void)signal;
    qfake *f = arg;
    if (f->n_sent < 64)
        snprintf(f->sent[f->n_sent++], 16, "%.*s", (int)len, (const char *)payload);
    pl_send_result r;
    pl_send_result_set(&r, PL_SEND_OK, NULL);
    pl_queue_send_done(send, &r);
}

static pl_batch *named_batch(const char *name)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_LOGS);
    b->data.raw = pl_batch_bytes(b, name, strlen(name));
    return b;
}

static void test_queue_on_workers(void)
{
    uv_loop_t loop;
    REQUIRE(uv_loop_init(&loop) == 0);
    main_thread = pthread_self();
    pl_err err = {{0}};
    pl_workers *w = pl_workers_start(&loop, 2, &err);
    REQUIRE(w);
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    uv_timer_start(&t, keep_alive, 2, 2);
    pl_stats *stats = pl_stats_new("otlphttp/workers", PL_KIND_EXPORTER);
    pl_create_settings settings = {
        .id = "otlphttp/workers", .loop = &loop, .stats = stats, .host = pl_workers_host(w)};
    pl_sending_queue_config qc = {.enabled = true, .num_consumers = 1, .queue_size = 100};
    pl_retry_config rc = {.enabled = false};
    qfake f = {.slow_ms = 60};
    pl_queue_sender sender = {slow_encode, ok_send, &f, true, true};

    /* Order: b0 is slow on one worker while the others finish on the
     * other; the sends still come in export order. */
    pl_queue *q = pl_queue_new(&settings, &qc, &rc, &sender, &err);
    REQUIRE(q && pl_queue_start(q, &err) == PL_OK);
    enum { N = 12 };
    for (int i = 0; i < N; i++) {
        char name[8];
        snprintf(name, sizeof(name), "b%d", i);
        pl_batch *b = named_batch(name);
        CHECK_EQ_INT(pl_queue_export(q, b), PL_OK);
        pl_batch_free(b); /* the exporter's caller lets go at once */
    }
    CHECK_EQ_UINT(pl_queue_pending(q), N); /* what a shutdown waits for */
    uint64_t end = pl_time_mono_ns() + 5000000000ull;
    while ((f.n_sent < N || pl_queue_pending(q)) && pl_time_mono_ns() < end)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ_INT(f.n_sent, N);
    bool in_order = true;
    for (int i = 0; i < N && i < f.n_sent; i++) {
        char name[8];
        snprintf(name, sizeof(name), "b%d", i);
        in_order &= strcmp(f.sent[i], name) == 0;
    }
    CHECK(in_order);
    CHECK_EQ_INT(f.encodes_on_worker, N);
    CHECK_EQ_INT(f.encodes_elsewhere, 0);
    CHECK_EQ_UINT(pl_stats_get(stats, PL_SIGNAL_LOGS, PL_STAT_SENT), N);
    pl_queue_destroy(q);

    /* Bounds: batches in encoding count against queue_size. */
    qc.queue_size = 2;
    f = (qfake){.slow_ms = 200};
    q = pl_queue_new(&settings, &qc, &rc, &sender, &err);
    REQUIRE(q && pl_queue_start(q, &err) == PL_OK);
    pl_batch *b0 = named_batch("b0"), *b1 = named_batch("b1"), *b2 = named_batch("b2");
    CHECK_EQ_INT(pl_queue_export(q, b0), PL_OK);
    CHECK_EQ_INT(pl_queue_export(q, b1), PL_OK);
    CHECK_EQ_INT(pl_queue_export(q, b2), PL_ERR_REFUSED);
    pl_batch_free(b0);
    pl_batch_free(b1);
    pl_batch_free(b2);
    /* Destroyed while b0 is still being encoded: it waits for that
     * encoding, counts both as dropped, and nothing is sent or leaked. */
    usleep(20000);
    uint64_t dropped_before = pl_stats_get(stats, PL_SIGNAL_LOGS, PL_STAT_DROPPED);
    pl_queue_destroy(q);
    CHECK_EQ_UINT(pl_stats_get(stats, PL_SIGNAL_LOGS, PL_STAT_DROPPED) - dropped_before, 2);
    int sent_before = f.n_sent;
    for (int i = 0; i < 20; i++)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ_INT(f.n_sent, sent_before);

    pl_workers_stop(w);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    pl_stats_free(stats);
}

/* ---- the pipeline lock (pl_workers_drive) ------------------------------- */

typedef struct drive_ctx {
    uv_loop_t *loop;
    pl_consumer consumer;
    uv_timer_t idle;    /* a far timer: the loop sleeps long unless woken */
    uv_timer_t started; /* started from inside a consume on a worker */
    int inside;         /* consumes running now (must never exceed 1) */
    int max_inside;
    int consumed_on_worker, consumed_on_main;
    bool nested_hops; /* pl_workers_on_worker() inside a consume */
    uint64_t started_at, fired_at;
    int n_done;
    bool stop;
} drive_ctx;

static drive_ctx *drive;

static void on_started_timer(uv_timer_t *t)
{
    drive_ctx *d = t->data;
    __atomic_store_n(&d->fired_at, pl_time_mono_ns(), __ATOMIC_RELEASE);
}

static pl_status drive_consume(void *arg, pl_batch *batch)
{
    drive_ctx *d = arg;
    int now = __atomic_add_fetch(&d->inside, 1, __ATOMIC_SEQ_CST);
    if (now > d->max_inside)
        d->max_inside = now;
    if (pthread_equal(pthread_self(), main_thread))
        d->consumed_on_main++;
    else
        d->consumed_on_worker++;
    d->nested_hops |= pl_workers_on_worker();
    usleep(200);          /* long enough for two workers to overlap if unguarded */
    if (!d->started_at) { /* a timer started by pipeline code on a worker */
        d->started_at = pl_time_mono_ns();
        uv_timer_start(&d->started, on_started_timer, 1, 0);
    }
    __atomic_sub_fetch(&d->inside, 1, __ATOMIC_SEQ_CST);
    pl_batch_free(batch);
    return PL_ERR_THROTTLED;
}

static void drive_work(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        if (pl_consumer_consume(&drive->consumer, pl_batch_new(PL_SIGNAL_TRACES)) !=
            PL_ERR_THROTTLED)
            drive->stop = true; /* the status did not come back */
        /* the timer the first consume started fires while the workers
         * still run: nothing but the wake-up can end the loop's sleep */
        uint64_t until = pl_time_mono_ns() + 2000000000ull;
        while (!__atomic_load_n(&drive->fired_at, __ATOMIC_ACQUIRE) && pl_time_mono_ns() < until)
            usleep(1000);
    }
}

static void drive_done(void *arg)
{
    (void)arg;
    if (++drive->n_done == 2) {
        drive->stop = true;
        uv_close((uv_handle_t *)&drive->idle, NULL);
        uv_close((uv_handle_t *)&drive->started, NULL);
    }
}

static bool drive_running(void *arg)
{
    return !((drive_ctx *)arg)->stop;
}

static void test_drive_runs_pipeline_on_workers(void)
{
    uv_loop_t loop;
    REQUIRE(uv_loop_init(&loop) == 0);
    main_thread = pthread_self();
    pl_err err = {{0}};
    pl_workers *w = pl_workers_start(&loop, 2, &err);
    REQUIRE(w);
    drive_ctx d = {.loop = &loop};
    drive = &d;
    pl_consumer_init_func(&d.consumer, drive_consume, &d);
    uv_timer_init(&loop, &d.idle);
    uv_timer_start(&d.idle, keep_alive, 60000, 0);
    uv_timer_init(&loop, &d.started);
    d.started.data = &d;
    /* both workers consume at once while the loop is driven */
    CHECK(pl_host_submit(pl_workers_host(w), drive_work, drive_done, NULL));
    CHECK(pl_host_submit(pl_workers_host(w), drive_work, drive_done, NULL));
    uint64_t t0 = pl_time_mono_ns();
    pl_workers_drive(w, &loop, drive_running, &d);
    uint64_t took = pl_time_mono_ns() - t0;
    CHECK_EQ_INT(d.n_done, 2);
    CHECK_EQ_INT(d.consumed_on_worker + d.consumed_on_main, 40);
    CHECK(d.consumed_on_worker >= 39); /* at most one handed over before the drive */
    CHECK_EQ_INT(d.max_inside, 1);     /* the pipeline ran one call at a time */
    CHECK(!d.nested_hops);
    /* the sleeping loop was woken for the timer a worker started */
    CHECK(d.fired_at != 0);
    CHECK(d.fired_at - d.started_at < 1000000000ull);
    CHECK(took < 10000000000ull);
    pl_workers_stop(w);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
}

int main(void)
{
    PL_RUN(test_main_thread_direct);
    PL_RUN(test_pool);
    PL_RUN(test_submit);
    PL_RUN(test_drive_runs_pipeline_on_workers);
    PL_RUN(test_queue_on_workers);
    return pl_test_done();
}
