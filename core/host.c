/*
 * host.c: the host's services to components (component.h): the worker
 * pool's hooks, clocks, the memory-pressure state, the claimed files, and
 * whether this thread runs the pipeline under the pipeline lock.
 */
#include "component.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the memory state of components created without a host (unit tests) */
static volatile int memory_state = PL_MEMORY_OK;
/* a worker running the pipeline under the pipeline lock (one flag per
 * thread, set and cleared around each call) */
static _Thread_local bool pipeline_borrowed;
/* the host of the worker pool this thread works for (NULL: not a worker) */
static _Thread_local const pl_host *worker_host;

unsigned pl_host_workers_count(const pl_host *host)
{
    return host && host->workers ? host->workers->count(host->pool) : 0;
}

bool pl_host_submit(const pl_host *host, void (*work)(void *arg), void (*done)(void *arg),
                    void *arg)
{
    return host && host->workers && host->workers->submit(host->pool, work, done, arg);
}

pl_status pl_host_listen(const pl_host *host, const char *endpoint,
                         const struct pl_http_server_options *options, pl_host_http_handler handler,
                         void *arg, struct pl_http_server **servers, pl_err *err)
{
    if (!host || !host->workers)
        return pl_errf(err, PL_ERR_INTERNAL, "no worker pool to listen on");
    return host->workers->listen(host->pool, endpoint, options, handler, arg, servers, err);
}

void pl_host_close(const pl_host *host, struct pl_http_server **servers, unsigned count)
{
    if (host && host->workers)
        host->workers->close(host->pool, servers, count);
}

void pl_host_enter_worker(const pl_host *host)
{
    worker_host = host;
}

const pl_host *pl_host_worker(void)
{
    return worker_host && !pipeline_borrowed ? worker_host : NULL;
}

bool pl_host_on_worker(void)
{
    return pl_host_worker() != NULL;
}

bool pl_pipeline_borrowed(void)
{
    return pipeline_borrowed;
}

void pl_pipeline_set_borrowed(bool on)
{
    pipeline_borrowed = on;
}

/* ---- claims ------------------------------------------------------------ */

typedef struct claim {
    struct claim *next;
    char *name, *owner;
} claim;

struct pl_claims {
    pthread_mutex_t mu;
    claim *head;
};

pl_claims *pl_claims_new(void)
{
    pl_claims *c = calloc(1, sizeof(*c));
    if (c)
        pthread_mutex_init(&c->mu, NULL);
    return c;
}

void pl_claims_free(pl_claims *claims)
{
    if (!claims)
        return;
    for (claim *k = claims->head, *next; k; k = next) {
        next = k->next;
        free(k->name);
        free(k->owner);
        free(k);
    }
    pthread_mutex_destroy(&claims->mu);
    free(claims);
}

bool pl_host_claim(const pl_host *host, const char *name, const char *owner, char *holder,
                   size_t holder_size)
{
    if (holder_size)
        holder[0] = '\0';
    pl_claims *c = host ? host->claims : NULL;
    if (!c)
        return true;
    pthread_mutex_lock(&c->mu);
    for (claim *k = c->head; k; k = k->next) {
        if (strcmp(k->name, name) == 0) {
            if (holder_size)
                snprintf(holder, holder_size, "%s", k->owner);
            pthread_mutex_unlock(&c->mu);
            return false;
        }
    }
    claim *k = calloc(1, sizeof(*k));
    bool ok = k && (k->name = strdup(name)) && (k->owner = strdup(owner));
    if (ok) {
        k->next = c->head;
        c->head = k;
    } else if (k) {
        free(k->name);
        free(k);
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

void pl_host_unclaim(const pl_host *host, const char *name, const char *owner)
{
    pl_claims *c = host ? host->claims : NULL;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    for (claim **p = &c->head; *p; p = &(*p)->next) {
        claim *k = *p;
        if (strcmp(k->name, name) == 0 && strcmp(k->owner, owner) == 0) {
            *p = k->next;
            free(k->name);
            free(k->owner);
            free(k);
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

uint64_t pl_time_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pl_time_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pl_clock_now(const pl_clock *clock)
{
    if (clock && clock->now)
        return clock->now(clock->arg);
    return pl_time_now_ns();
}

uint64_t pl_clock_mono(const pl_clock *clock)
{
    if (clock && clock->mono)
        return clock->mono(clock->arg);
    if (clock && clock->now)
        return clock->now(clock->arg);
    return pl_time_mono_ns();
}

pl_memory_state pl_memory_state_get(void)
{
    return (pl_memory_state)memory_state;
}

void pl_memory_state_set(pl_memory_state state)
{
    memory_state = state;
}

pl_memory_state pl_host_memory_state(const pl_host *host)
{
    return (pl_memory_state)(host && host->memory ? *host->memory : memory_state);
}

void pl_host_set_memory_state(const pl_host *host, pl_memory_state state)
{
    if (host && host->memory)
        *host->memory = state;
    else
        memory_state = state;
}

const char *pl_kind_name(pl_kind kind)
{
    switch (kind) {
    case PL_KIND_RECEIVER:
        return "receiver";
    case PL_KIND_PROCESSOR:
        return "processor";
    case PL_KIND_EXPORTER:
        return "exporter";
    case PL_KIND_EXTENSION:
        return "extension";
    }
    return "unknown";
}
