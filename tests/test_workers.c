/*
 * test_workers.c: the receiver worker pool (pipeline/workers.h): functions
 * run on the worker threads, batches consumed on a worker cross to the
 * pipeline loop's thread and bring its status back, and the pipeline loop
 * waiting for a worker still consumes the batches that worker hands over
 * (no deadlock).
 */
#include <pthread.h>

#include "core/model.h"
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
    CHECK_EQ_UINT(pl_workers_count(), 0);
    CHECK(!pl_workers_on_worker());
    pl_workers *w = pl_workers_start(&loop, 3, &err);
    REQUIRE(w);
    CHECK_EQ_UINT(pl_workers_count(), 3);
    CHECK(pl_workers_loop(0) != &loop && pl_workers_loop(2) != NULL && pl_workers_loop(3) == NULL);

    pl_consumer consumer;
    pl_consumer_init_func(&consumer, count_consume, NULL);
    /* The main thread waits in pl_workers_run while the worker blocks in
     * pl_consumer_consume: the wait itself must consume the batches. */
    on_worker_ctx c = {.consumer = &consumer, .n = 5};
    pl_workers_run(1, consume_from_worker, &c);
    CHECK(c.was_worker);
    CHECK(!pthread_equal(c.thread, main_thread));
    CHECK_EQ_INT(consumed_on_main, 5);
    CHECK_EQ_INT(consumed_elsewhere, 0);
    CHECK_EQ_INT(c.last, PL_ERR_REFUSED);

    /* Every worker, one after the other, on distinct threads. */
    pthread_t seen[3];
    for (unsigned i = 0; i < 3; i++) {
        on_worker_ctx d = {.consumer = &consumer, .n = 1};
        pl_workers_run(i, consume_from_worker, &d);
        seen[i] = d.thread;
    }
    CHECK(!pthread_equal(seen[0], seen[1]) && !pthread_equal(seen[1], seen[2]));
    CHECK_EQ_INT(consumed_on_main, 8);

    pl_workers_stop(w);
    CHECK_EQ_UINT(pl_workers_count(), 0);
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

int main(void)
{
    PL_RUN(test_main_thread_direct);
    PL_RUN(test_pool);
    return pl_test_done();
}
