/*
 * telemetry_thread.c: the telemetry endpoint on its own thread and loop (see
 * telemetry_thread.h).
 *
 * The thread owns everything it runs: the loop is created, run and closed
 * there. The starting thread waits on a semaphore until the listener is
 * bound, so a bad address is still reported by the caller's start-up path,
 * and a uv_async is the only way in afterwards (the stop request).
 */
#include "pipeline/telemetry_thread.h"

#include <stdlib.h>
#include <string.h>

struct pl_telemetry_thread {
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t stop;
    uv_sem_t ready;
    char *address;
    const struct pl_tls_server_config *tls; /* read while starting only */
    pl_telemetry_info_fn info;
    void *arg;
    pl_telemetry *telemetry; /* touched on the telemetry thread only */
    int port;                /* written before `ready` is posted */
    pl_err err;
};

static void on_stop(uv_async_t *async)
{
    pl_telemetry_thread *t = async->data;
    pl_telemetry_stop(t->telemetry);
    t->telemetry = NULL;
    uv_close((uv_handle_t *)&t->stop, NULL);
}

static void thread_main(void *arg)
{
    pl_telemetry_thread *t = arg;
    if (uv_loop_init(&t->loop) != 0) {
        pl_errf(&t->err, PL_ERR_INTERNAL, "cannot create the telemetry loop");
        uv_sem_post(&t->ready);
        return;
    }
    uv_async_init(&t->loop, &t->stop, on_stop);
    t->stop.data = t;
    t->telemetry = pl_telemetry_start_tls(&t->loop, t->address, t->tls, t->info, t->arg, &t->err);
    if (!t->telemetry) {
        uv_close((uv_handle_t *)&t->stop, NULL);
        uv_run(&t->loop, UV_RUN_DEFAULT);
        uv_loop_close(&t->loop);
        uv_sem_post(&t->ready);
        return;
    }
    t->port = pl_telemetry_port(t->telemetry);
    uv_sem_post(&t->ready);
    uv_run(&t->loop, UV_RUN_DEFAULT); /* until on_stop closed every handle */
    uv_loop_close(&t->loop);
}

pl_telemetry_thread *pl_telemetry_thread_start(const char *address, pl_telemetry_info_fn info,
                                               void *arg, pl_err *err)
{
    return pl_telemetry_thread_start_tls(address, NULL, info, arg, err);
}

pl_telemetry_thread *pl_telemetry_thread_start_tls(const char *address,
                                                   const struct pl_tls_server_config *tls,
                                                   pl_telemetry_info_fn info, void *arg,
                                                   pl_err *err)
{
    pl_telemetry_thread *t = calloc(1, sizeof(*t));
    if (!t || !(t->address = strdup(address))) {
        free(t);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->info = info;
    t->arg = arg;
    t->tls = tls;
    t->port = -1;
    if (uv_sem_init(&t->ready, 0) != 0) {
        free(t->address);
        free(t);
        pl_errf(err, PL_ERR_INTERNAL, "cannot create a semaphore");
        return NULL;
    }
    if (uv_thread_create(&t->thread, thread_main, t) != 0) {
        uv_sem_destroy(&t->ready);
        free(t->address);
        free(t);
        pl_errf(err, PL_ERR_INTERNAL, "cannot start the telemetry thread");
        return NULL;
    }
    uv_sem_wait(&t->ready);
    if (!t->telemetry) { /* failed: the thread has finished */
        uv_thread_join(&t->thread);
        if (err)
            *err = t->err;
        uv_sem_destroy(&t->ready);
        free(t->address);
        free(t);
        return NULL;
    }
    return t;
}

int pl_telemetry_thread_port(const pl_telemetry_thread *t)
{
    return t ? t->port : -1;
}

void pl_telemetry_thread_stop(pl_telemetry_thread *t)
{
    if (!t)
        return;
    uv_async_send(&t->stop);
    uv_thread_join(&t->thread);
    uv_sem_destroy(&t->ready);
    free(t->address);
    free(t);
}
