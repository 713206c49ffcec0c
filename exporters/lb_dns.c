/*
 * lb_dns.c: periodic DNS resolution with c-ares on a libuv loop (see
 * lb_dns.h).
 *
 * c-ares tells us which sockets it wants watched (ARES_OPT_SOCK_STATE_CB);
 * each gets a uv_poll handle that calls ares_process_fd when it is ready. A
 * 50 ms timer runs ares_process_fd with no socket while a lookup is in
 * flight, which is how c-ares notices its own timeouts and retries.
 */
#include "exporters/lb_dns.h"

#include <arpa/inet.h>
#include <ares.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

typedef struct watch {
    uv_poll_t poll;
    ares_socket_t fd;
    pl_lb_dns *dns;
    struct watch *next;
} watch;

struct pl_lb_dns {
    uv_loop_t *loop;
    ares_channel channel;
    char *hostname;
    uv_timer_t interval_timer;
    uv_timer_t process_timer;
    uint64_t interval_ms;
    watch *watches;
    bool in_flight;
    bool stopping;
    int open_handles;
    char **last; /* last reported set */
    size_t n_last;
    bool reported;
    pl_lb_dns_fn fn;
    void *arg;
    uint64_t lookups, failures;
};

static void maybe_free(pl_lb_dns *d)
{
    if (!d->stopping || d->open_handles > 0 || d->in_flight)
        return;
    for (size_t i = 0; i < d->n_last; i++)
        free(d->last[i]);
    free(d->last);
    free(d->hostname);
    free(d);
}

static void on_handle_closed(uv_handle_t *h)
{
    pl_lb_dns *d = h->data;
    if (h->type == UV_POLL)
        free(((watch *)((char *)h - offsetof(watch, poll))));
    d->open_handles--;
    maybe_free(d);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    watch *w = (watch *)((char *)p - offsetof(watch, poll));
    ares_socket_t rfd = ARES_SOCKET_BAD, wfd = ARES_SOCKET_BAD;
    if (status < 0 || (events & UV_READABLE))
        rfd = w->fd;
    if (status < 0 || (events & UV_WRITABLE))
        wfd = w->fd;
    ares_process_fd(w->dns->channel, rfd, wfd);
}

static void on_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
    pl_lb_dns *d = data;
    watch **pp = &d->watches;
    while (*pp && (*pp)->fd != fd)
        pp = &(*pp)->next;
    watch *w = *pp;
    if (!readable && !writable) {
        if (w) {
            *pp = w->next;
            uv_poll_stop(&w->poll);
            uv_close((uv_handle_t *)&w->poll, on_handle_closed);
        }
        return;
    }
    if (!w) {
        w = calloc(1, sizeof(*w));
        if (!w)
            return; /* the lookup then times out and is retried next interval */
        if (uv_poll_init_socket(d->loop, &w->poll, fd) != 0) {
            free(w);
            return;
        }
        w->poll.data = d;
        w->fd = fd;
        w->dns = d;
        w->next = d->watches;
        d->watches = w;
        d->open_handles++;
    }
    uv_poll_start(&w->poll, (readable ? UV_READABLE : 0) | (writable ? UV_WRITABLE : 0), on_poll);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void on_result(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
    (void)timeouts;
    pl_lb_dns *d = arg;
    d->in_flight = false;
    uv_timer_stop(&d->process_timer);
    d->lookups++;
    if (status == ARES_EDESTRUCTION) {
        maybe_free(d);
        return;
    }
    if (status != ARES_SUCCESS || !res) {
        d->failures++;
        pl_warn("loadbalancing", "resolving %s: %s (keeping %zu known members)", d->hostname,
                ares_strerror(status), d->n_last);
        if (res)
            ares_freeaddrinfo(res);
        return;
    }
    size_t n = 0, cap = 0;
    char **addrs = NULL;
    for (struct ares_addrinfo_node *a = res->nodes; a; a = a->ai_next) {
        char text[INET6_ADDRSTRLEN + 2];
        const void *src = a->ai_family == AF_INET
                              ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                              : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
        if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
            !inet_ntop(a->ai_family, src, text, sizeof(text)))
            continue;
        bool dup = false;
        for (size_t i = 0; i < n && !dup; i++)
            dup = strcmp(addrs[i], text) == 0;
        if (dup)
            continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 8;
            char **g = realloc(addrs, c * sizeof(*g));
            if (!g)
                break;
            addrs = g;
            cap = c;
        }
        if (!(addrs[n] = strdup(text)))
            break;
        n++;
    }
    ares_freeaddrinfo(res);
    qsort(addrs, n, sizeof(*addrs), cmp_str);
    bool same = d->reported && n == d->n_last;
    for (size_t i = 0; same && i < n; i++)
        same = strcmp(addrs[i], d->last[i]) == 0;
    if (same) {
        for (size_t i = 0; i < n; i++)
            free(addrs[i]);
        free(addrs);
        return;
    }
    for (size_t i = 0; i < d->n_last; i++)
        free(d->last[i]);
    free(d->last);
    d->last = addrs;
    d->n_last = n;
    d->reported = true;
    d->fn(d->arg, (const char *const *)addrs, n);
}

static void on_process(uv_timer_t *t)
{
    pl_lb_dns *d = t->data;
    ares_process_fd(d->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
}

static void on_interval(uv_timer_t *t)
{
    pl_lb_dns *d = t->data;
    if (d->in_flight || d->stopping)
        return;
    d->in_flight = true;
    uv_timer_start(&d->process_timer, on_process, 50, 50);
    struct ares_addrinfo_hints hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    ares_getaddrinfo(d->channel, d->hostname, NULL, &hints, on_result, d);
}

pl_lb_dns *pl_lb_dns_start(uv_loop_t *loop, const char *hostname, const char *server,
                           int64_t interval_ns, int64_t timeout_ns, pl_lb_dns_fn fn, void *arg,
                           pl_err *err)
{
    static bool lib_ready;
    if (!lib_ready) {
        if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS) {
            pl_errf(err, PL_ERR_INTERNAL, "c-ares: library initialization failed");
            return NULL;
        }
        lib_ready = true;
    }
    pl_lb_dns *d = calloc(1, sizeof(*d));
    if (!d || !(d->hostname = strdup(hostname))) {
        free(d);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    d->loop = loop;
    d->fn = fn;
    d->arg = arg;
    d->interval_ms = interval_ns > 0 ? (uint64_t)(interval_ns / 1000000) : 5000;
    if (d->interval_ms == 0)
        d->interval_ms = 1;
    struct ares_options opts = {0};
    opts.sock_state_cb = on_sock_state;
    opts.sock_state_cb_data = d;
    opts.timeout = timeout_ns > 0 ? (int)(timeout_ns / 1000000) : 1000;
    if (opts.timeout <= 0)
        opts.timeout = 1;
    opts.tries = 2;
    int rc = ares_init_options(&d->channel, &opts,
                               ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
    if (rc != ARES_SUCCESS) {
        free(d->hostname);
        free(d);
        pl_errf(err, PL_ERR_INTERNAL, "c-ares: %s", ares_strerror(rc));
        return NULL;
    }
    if (server && server[0]) {
        rc = ares_set_servers_ports_csv(d->channel, server);
        if (rc != ARES_SUCCESS) {
            ares_destroy(d->channel);
            free(d->hostname);
            free(d);
            pl_errf(err, PL_ERR_INVALID, "resolver.dns.server \"%s\": %s", server,
                    ares_strerror(rc));
            return NULL;
        }
    }
    uv_timer_init(loop, &d->interval_timer);
    uv_timer_init(loop, &d->process_timer);
    d->interval_timer.data = d;
    d->process_timer.data = d;
    d->open_handles = 2;
    uv_timer_start(&d->interval_timer, on_interval, 0, d->interval_ms);
    return d;
}

void pl_lb_dns_stop(pl_lb_dns *d)
{
    if (!d)
        return;
    d->stopping = true;
    /* Ends a lookup in flight (its callback sees ARES_EDESTRUCTION) and
     * reports every socket closed, which closes the poll handles. */
    ares_destroy(d->channel);
    d->in_flight = false;
    while (d->watches) { /* in case c-ares did not report a socket closed */
        watch *w = d->watches;
        d->watches = w->next;
        uv_poll_stop(&w->poll);
        uv_close((uv_handle_t *)&w->poll, on_handle_closed);
    }
    uv_close((uv_handle_t *)&d->interval_timer, on_handle_closed);
    uv_close((uv_handle_t *)&d->process_timer, on_handle_closed);
}

uint64_t pl_lb_dns_lookups(const pl_lb_dns *d)
{
    return d->lookups;
}

uint64_t pl_lb_dns_failures(const pl_lb_dns *d)
{
    return d->failures;
}
