/*
 * workers.c: the worker loops and the hand-over of batches to the pipeline
 * loop (see workers.h).
 *
 * Two kinds of jobs cross threads, both under one mutex of the pool; each
 * waiting thread has a condition variable of its own (a worker's, the
 * pipeline loop's), so a finished job wakes only the thread waiting for it:
 *   - a worker's batch for the pipeline loop: queued, the pipeline loop woken
 *     by a uv_async, the worker waits until the job is marked done;
 *   - a function for a worker (start or close a listener there): queued for
 *     that worker, its uv_async woken, the pipeline loop waits, and consumes
 *     the workers' batches while it waits.
 * Jobs live on the waiting thread's stack: the waiter returns only after the
 * job is marked done, and nobody touches it afterwards.
 *
 * The pipeline lock (pl_workers_drive). Handing a batch over costs two
 * thread wake-ups per request (the pipeline loop's, then the waiting
 * worker's), which on a small machine made the default slower than one
 * loop. So while the pipeline loop is driven by pl_workers_drive, the
 * pipeline is a monitor instead: the pipeline loop holds `pipeline_mu`
 * whenever it runs (timers, I/O callbacks, its uv_asyncs) and lets go only
 * while it sleeps in poll(2) on the loop's backend descriptor (libuv's
 * documented way of embedding a loop) or waits in run_on. A worker takes
 * the lock and runs pl_consumer_consume itself, on its own thread: the
 * pipeline still runs one call at a time, in one place at a time, so every
 * guarantee of "one pipeline loop" holds (a sample and its span meet in one
 * index, counters have one writer at a time), without the hop. What the
 * call changed on the pipeline loop (a timer started, a descriptor to
 * watch, a handle closed) shows in uv_backend_timeout or the loop's watcher
 * queue; only then is the sleeping loop woken to look again.
 */
#include "pipeline/workers.h"

#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "net/http_server.h"

typedef struct job {
    struct job *next;
    /* a batch for the pipeline loop */
    pl_consumer *consumer;
    pl_batch *batch;
    pl_status status;
    /* or a function for a worker */
    void (*fn)(void *arg);
    void *arg;
    /* submitted work (heap job): then after(arg) on the pipeline loop */
    void (*after)(void *arg);
    bool done;
    uv_cond_t *waiter;  /* signalled when done: only the thread waiting for it */
    unsigned fn_worker; /* a batch's: the worker that handed it over */
} job;

typedef struct worker {
    pl_workers *pool;
    unsigned index;
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t wake;
    job *head, *tail; /* functions to run here */
    uv_cond_t cv;     /* this worker waits here for its batches */
    bool started;
} worker;

struct pl_workers {
    uv_loop_t *main_loop;
    uv_async_t main_wake;
    uv_mutex_t mu;
    uv_cond_t cv;             /* the pipeline loop waits here in run_on */
    job *head, *tail;         /* batches for the pipeline loop */
    job *fin_head, *fin_tail; /* submitted works done, their `after` to call */
    worker *workers;
    unsigned n;
    unsigned next_worker; /* round robin of pool_submit (pipeline loop) */
    /* pl_workers_drive: the pipeline lock, and whether it is in use (set
     * and cleared by the pipeline loop with the lock held; read by workers
     * with atomic loads) */
    uv_mutex_t pipeline_mu;
    bool direct;
    /* the timeout the pipeline loop sleeps with (pipeline_mu held) */
    int sleep_timeout;
    /* Pipeline loop: the worker whose batch is being consumed now, or -1. */
    int consuming_for;
    pl_host host; /* what components reach the pool through */
};

static const pl_host_workers pool_hooks;
/* the worker this thread is (NULL: not a worker of any pool) */
static _Thread_local worker *this_worker;

unsigned pl_workers_default(void)
{
    /* the CPUs this process may run on (taskset, a container's cpuset),
     * else the online ones */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

static unsigned pool_count(void *pool)
{
    return ((pl_workers *)pool)->n;
}

uv_loop_t *pl_workers_loop(pl_workers *p, unsigned i)
{
    return p && i < p->n ? &p->workers[i].loop : NULL;
}

bool pl_workers_on_worker(void)
{
    return pl_host_on_worker();
}

static void push(job **head, job **tail, job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static job *pop(job **head, job **tail)
{
    job *j = *head;
    if (j) {
        *head = j->next;
        if (!*head)
            *tail = NULL;
    }
    return j;
}

/* Pipeline loop: consumes one handed-over batch (mu held on entry and exit). */
static void consume_one_locked(pl_workers *p, job *j)
{
    uv_mutex_unlock(&p->mu);
    int outer = p->consuming_for;
    p->consuming_for = (int)j->fn_worker;
    pl_status st = pl_consumer_consume(j->consumer, j->batch);
    p->consuming_for = outer;
    uv_mutex_lock(&p->mu);
    j->status = st;
    j->done = true;
    uv_cond_signal(j->waiter);
}

/* Pipeline loop: calls the `after` of finished works (mu held on entry
 * and exit). */
static void finish_works_locked(pl_workers *p)
{
    job *j;
    while ((j = pop(&p->fin_head, &p->fin_tail))) {
        uv_mutex_unlock(&p->mu);
        j->after(j->arg);
        free(j);
        uv_mutex_lock(&p->mu);
    }
}

static void on_main_wake(uv_async_t *a)
{
    pl_workers *p = a->data;
    uv_mutex_lock(&p->mu);
    job *j;
    while ((j = pop(&p->head, &p->tail)))
        consume_one_locked(p, j);
    finish_works_locked(p);
    uv_mutex_unlock(&p->mu);
}

/* True when the pipeline loop must look at its loop again: a call on a
 * worker changed what it waits for. libuv 1.x keeps descriptors to add to
 * epoll in `watcher_queue` until the loop polls. */
static bool loop_changed(pl_workers *p)
{
    uv_loop_t *l = p->main_loop;
    bool watchers = l->watcher_queue[0] != (void *)&l->watcher_queue;
    return watchers || uv_backend_timeout(l) != p->sleep_timeout;
}

/* Direct mode: consumes on this worker under the pipeline lock. */
static pl_status consume_direct(pl_workers *p, pl_consumer *next, pl_batch *batch)
{
    uv_mutex_lock(&p->pipeline_mu);
    if (!__atomic_load_n(&p->direct, __ATOMIC_ACQUIRE)) { /* the drive ended meanwhile */
        uv_mutex_unlock(&p->pipeline_mu);
        return PL_ERR_REFUSED;
    }
    /* the loop's clock stood still while it slept: timers started now and
     * uv_now() must read the present */
    uv_update_time(p->main_loop);
    p->sleep_timeout = uv_backend_timeout(p->main_loop);
    int outer = p->consuming_for;
    p->consuming_for = (int)this_worker->index;
    pl_pipeline_set_borrowed(true);
    pl_status st = pl_consumer_consume(next, batch);
    pl_pipeline_set_borrowed(false);
    p->consuming_for = outer;
    bool wake = loop_changed(p);
    uv_mutex_unlock(&p->pipeline_mu);
    if (wake)
        uv_async_send(&p->main_wake);
    return st;
}

/* pl_host_workers.consume: from a worker, called by pl_consumer_consume. */
static pl_status pool_consume(void *pool, pl_consumer *next, pl_batch *batch)
{
    pl_workers *p = pool;
    if (__atomic_load_n(&p->direct, __ATOMIC_ACQUIRE))
        return consume_direct(p, next, batch);
    job j = {.consumer = next,
             .batch = batch,
             .waiter = &this_worker->cv,
             .fn_worker = this_worker->index};
    uv_mutex_lock(&p->mu);
    push(&p->head, &p->tail, &j);
    /* the pipeline loop may be waiting in run_on rather than in its loop */
    uv_cond_signal(&p->cv);
    uv_mutex_unlock(&p->mu);
    uv_async_send(&p->main_wake);
    uv_mutex_lock(&p->mu);
    while (!j.done)
        uv_cond_wait(j.waiter, &p->mu);
    uv_mutex_unlock(&p->mu);
    return j.status;
}

static void on_worker_wake(uv_async_t *a)
{
    worker *w = a->data;
    pl_workers *p = w->pool;
    uv_mutex_lock(&p->mu);
    job *j;
    bool finished = false;
    while ((j = pop(&w->head, &w->tail))) {
        uv_mutex_unlock(&p->mu);
        j->fn(j->arg);
        uv_mutex_lock(&p->mu);
        if (j->after) { /* submitted: the pipeline loop calls `after` */
            push(&p->fin_head, &p->fin_tail, j);
            finished = true;
            continue;
        }
        j->done = true;
        uv_cond_signal(j->waiter);
    }
    uv_mutex_unlock(&p->mu);
    if (finished)
        uv_async_send(&p->main_wake);
}

static bool pool_submit(void *pool, void (*work)(void *arg), void (*done)(void *arg), void *arg)
{
    pl_workers *p = pool;
    if (!p || p->n == 0 || pl_host_on_worker())
        return false;
    job *j = calloc(1, sizeof(*j));
    if (!j)
        return false;
    j->fn = work;
    j->after = done;
    j->arg = arg;
    unsigned i = p->consuming_for >= 0 && (unsigned)p->consuming_for < p->n
                     ? (unsigned)p->consuming_for
                     : p->next_worker++ % p->n;
    worker *w = &p->workers[i];
    uv_mutex_lock(&p->mu);
    push(&w->head, &w->tail, j);
    uv_mutex_unlock(&p->mu);
    uv_async_send(&w->wake);
    return true;
}

static void run_on(pl_workers *p, unsigned i, void (*fn)(void *), void *arg)
{
    worker *w = &p->workers[i];
    job j = {.fn = fn, .arg = arg, .waiter = &p->cv};
    /* the worker may be waiting for the pipeline lock to finish a request
     * before it runs fn */
    bool held = p->direct && !pl_pipeline_borrowed();
    if (held)
        uv_mutex_unlock(&p->pipeline_mu);
    uv_mutex_lock(&p->mu);
    push(&w->head, &w->tail, &j);
    uv_mutex_unlock(&p->mu);
    uv_async_send(&w->wake);
    uv_mutex_lock(&p->mu);
    while (!j.done) {
        job *b = pop(&p->head, &p->tail);
        if (b)
            consume_one_locked(p, b); /* the worker may be waiting for exactly this */
        else
            uv_cond_wait(&p->cv, &p->mu);
    }
    uv_mutex_unlock(&p->mu);
    if (held)
        uv_mutex_lock(&p->pipeline_mu);
}

void pl_workers_run(pl_workers *p, unsigned i, void (*fn)(void *arg), void *arg)
{
    if (p && i < p->n)
        run_on(p, i, fn, arg);
}

static void worker_main(void *arg)
{
    worker *w = arg;
    pl_host_enter_worker(&w->pool->host);
    this_worker = w;
    uv_run(&w->loop, UV_RUN_DEFAULT);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* On the worker: ends its loop (listeners were closed by their receivers). */
static void stop_worker(void *arg)
{
    worker *w = arg;
    uv_close((uv_handle_t *)&w->wake, NULL);
}

static void free_pool(uv_handle_t *h)
{
    free(h->data);
}

pl_workers *pl_workers_start(uv_loop_t *main_loop, unsigned n, pl_err *err)
{
    pl_workers *p = calloc(1, sizeof(*p));
    if (!p || !(p->workers = calloc(n, sizeof(worker)))) {
        free(p);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    p->main_loop = main_loop;
    uv_mutex_init(&p->mu);
    uv_mutex_init(&p->pipeline_mu);
    uv_cond_init(&p->cv);
    uv_async_init(main_loop, &p->main_wake, on_main_wake);
    p->main_wake.data = p;
    uv_unref((uv_handle_t *)&p->main_wake);
    p->consuming_for = -1;
    p->host = (pl_host){.workers = &pool_hooks, .pool = p};
    for (unsigned i = 0; i < n; i++) {
        worker *w = &p->workers[i];
        w->pool = p;
        w->index = i;
        if (uv_loop_init(&w->loop) != 0) {
            pl_errf(err, PL_ERR_INTERNAL, "cannot create worker loop %u", i);
            break;
        }
        uv_async_init(&w->loop, &w->wake, on_worker_wake);
        w->wake.data = w;
        uv_cond_init(&w->cv);
        if (uv_thread_create(&w->thread, worker_main, w) != 0) {
            uv_close((uv_handle_t *)&w->wake, NULL);
            uv_run(&w->loop, UV_RUN_DEFAULT);
            uv_loop_close(&w->loop);
            pl_errf(err, PL_ERR_INTERNAL, "cannot start worker thread %u", i);
            break;
        }
        w->started = true;
        p->n = i + 1;
    }
    if (p->n != n) {
        pl_workers_stop(p);
        return NULL;
    }
    return p;
}

void pl_workers_stop(pl_workers *p)
{
    if (!p)
        return;
    for (unsigned i = 0; i < p->n; i++) {
        worker *w = &p->workers[i];
        run_on(p, i, stop_worker, w);
        uv_thread_join(&w->thread);
        /* anything a component left open on this loop */
        uv_walk(&w->loop, close_walk, NULL);
        uv_run(&w->loop, UV_RUN_DEFAULT);
        if (uv_loop_close(&w->loop) != 0)
            pl_warn("workers", "worker %u loop still had handles at stop", i);
        uv_cond_destroy(&w->cv);
    }
    /* works that finished after the pipeline loop last looked: their
     * owners wait for `after` to free what the work used */
    uv_mutex_lock(&p->mu);
    finish_works_locked(p);
    uv_mutex_unlock(&p->mu);
    uv_cond_destroy(&p->cv);
    uv_mutex_destroy(&p->mu);
    uv_mutex_destroy(&p->pipeline_mu);
    free(p->workers);
    /* p goes with its async handle, once the pipeline loop runs again */
    uv_close((uv_handle_t *)&p->main_wake, free_pool);
}

void pl_workers_drive(pl_workers *p, uv_loop_t *loop, bool (*running)(void *arg), void *arg)
{
    if (!p || p->n == 0 || loop != p->main_loop) {
        uv_run(loop, UV_RUN_DEFAULT);
        return;
    }
    uv_mutex_lock(&p->pipeline_mu);
    __atomic_store_n(&p->direct, true, __ATOMIC_RELEASE);
    /* batches handed over before the drive began */
    uv_mutex_lock(&p->mu);
    job *j;
    while ((j = pop(&p->head, &p->tail)))
        consume_one_locked(p, j);
    uv_mutex_unlock(&p->mu);
    struct pollfd pfd = {.fd = uv_backend_fd(loop), .events = POLLIN};
    for (;;) {
        uv_run(loop, UV_RUN_NOWAIT);
        if (!uv_loop_alive(loop) || (running && !running(arg)))
            break;
        int timeout = uv_backend_timeout(loop);
        p->sleep_timeout = timeout; /* read by workers under the lock */
        if (timeout == 0)
            continue;
        uv_mutex_unlock(&p->pipeline_mu);
        int r = poll(&pfd, 1, timeout);
        (void)r; /* EINTR or a wake-up: the loop looks either way */
        uv_mutex_lock(&p->pipeline_mu);
    }
    __atomic_store_n(&p->direct, false, __ATOMIC_RELEASE);
    uv_mutex_unlock(&p->pipeline_mu);
}

/* ---- listeners on every worker ------------------------------------------ */

typedef struct listen_job {
    pl_workers *pool;
    unsigned worker;
    char endpoint[256];
    pl_http_server_options options;
    pl_http_handler handler;
    void *arg;
    pl_http_server *server; /* out */
    pl_err err;             /* out */
} listen_job;

static void listen_here(void *arg)
{
    listen_job *j = arg;
    j->server = pl_http_server_start(pl_workers_loop(j->pool, j->worker), j->endpoint, &j->options,
                                     j->handler, j->arg, &j->err);
}

static void close_here(void *arg)
{
    pl_http_server_close(arg);
}

static void pool_close(void *pool, pl_http_server **servers, unsigned count)
{
    for (unsigned i = 0; servers && i < count; i++)
        if (servers[i]) {
            pl_workers_run(pool, i, close_here, servers[i]);
            servers[i] = NULL;
        }
}

static pl_status pool_listen(void *pool, const char *endpoint,
                             const pl_http_server_options *options, pl_http_handler handler,
                             void *arg, pl_http_server **servers, pl_err *err)
{
    pl_workers *p = pool;
    unsigned n = p->n;
    /* SO_REUSEPORT would also let these sockets join a port another process
     * (of the same user) listens on, silently splitting its connections with
     * it. A plain bind first fails with "address already in use" in that
     * case, as a single loop's listener would; it is closed at once (libuv
     * closes the socket in uv_close), before the workers bind. */
    const char *colon = strrchr(endpoint, ':');
    if (!colon || strcmp(colon, ":0") != 0) {
        pl_http_server_options plain = {.name = options->name, .http1 = true};
        pl_http_server *probe =
            pl_http_server_start(p->main_loop, endpoint, &plain, handler, arg, err);
        if (!probe)
            return PL_ERR_INTERNAL;
        pl_http_server_close(probe);
    }
    listen_job *j = calloc(1, sizeof(*j));
    if (!j)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    snprintf(j->endpoint, sizeof(j->endpoint), "%s", endpoint);
    for (unsigned i = 0; i < n; i++) {
        j->pool = p;
        j->worker = i;
        j->options = *options;
        j->options.reuse_port = true;
        j->options.shares = n; /* the listener's totals hold across the workers */
        j->handler = handler;
        j->arg = arg;
        j->server = NULL;
        pl_workers_run(p, i, listen_here, j);
        if (!j->server) {
            *err = j->err;
            pool_close(p, servers, i);
            free(j);
            return PL_ERR_INTERNAL;
        }
        servers[i] = j->server;
        if (i == 0) { /* "host:0" -> "host:<bound port>" for the others */
            char *c = strrchr(j->endpoint, ':');
            if (c && strcmp(c, ":0") == 0)
                snprintf(c + 1, sizeof(j->endpoint) - (size_t)(c + 1 - j->endpoint), "%d",
                         pl_http_server_port(j->server));
        }
    }
    free(j);
    return PL_OK;
}

static const pl_host_workers pool_hooks = {
    .count = pool_count,
    .submit = pool_submit,
    .listen = pool_listen,
    .close = pool_close,
    .consume = pool_consume,
};

const pl_host *pl_workers_host(pl_workers *p)
{
    return p ? &p->host : NULL;
}
