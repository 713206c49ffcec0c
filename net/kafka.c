/*
 * kafka.c: librdkafka client settings from the Collector's keys, the
 * sarama-compatible partitioner, and the bridge from librdkafka's queues to
 * the loop (see kafka.h).
 */
#include "net/kafka.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/log.h"

static int kafka_sasl_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    pl_kafka_sasl_config *c = cfg_;
    const char *m = c->mechanism ? c->mechanism : "";
    bool known = strcmp(m, "PLAIN") == 0 || strcmp(m, "SCRAM-SHA-256") == 0 ||
                 strcmp(m, "SCRAM-SHA-512") == 0;
    int errors = pl_cfg_check(ctx, known, "mechanism",
                              "must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, got \"%s\"", m);
    errors += pl_cfg_check(ctx, !(c->password && c->password[0]) || (c->username && c->username[0]),
                           "username", "is required with a password");
    return errors;
}

#include "net/kafka.config.inc"

pl_status pl_kafka_conf_set(rd_kafka_conf_t *conf, const char *key, const char *value, pl_err *err)
{
    char why[256];
    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) != RD_KAFKA_CONF_OK)
        return pl_errf(err, PL_ERR_INVALID, "kafka client setting %s: %s", key, why);
    return PL_OK;
}

/* librdkafka's levels are syslog's. Called on librdkafka's threads. */
static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    /* connection failures come at LOG_ERR (3) while a broker restarts: warn */
    pl_log_level l = level <= 2   ? PL_LOG_ERROR
                     : level <= 4 ? PL_LOG_WARN
                     : level <= 6 ? PL_LOG_INFO
                                  : PL_LOG_DEBUG;
    if (pl_log_enabled(l))
        pl_log(l, rd_kafka_name(rk), "%s: %s", fac, buf);
}

static bool set(const char *s)
{
    return s && s[0];
}

rd_kafka_conf_t *pl_kafka_conf_new(const pl_kafka_conn *c, pl_err *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    pl_buf brokers;
    pl_buf_init(&brokers);
    for (size_t i = 0; i < c->brokers->n; i++) {
        if (i)
            pl_buf_append_byte(&brokers, ',');
        pl_buf_append_str(&brokers, c->brokers->items[i]);
    }
    pl_buf_append_byte(&brokers, 0);
    pl_status st = pl_buf_ok(&brokers) ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
    if (st == PL_OK)
        st = pl_kafka_conf_set(conf, "bootstrap.servers", (const char *)brokers.data, err);
    pl_buf_free(&brokers);
    if (st == PL_OK && set(c->client_id))
        st = pl_kafka_conf_set(conf, "client.id", c->client_id, err);
    bool tls = set(c->tls->ca_file) || set(c->tls->cert_file) || c->tls->insecure_skip_verify;
    bool sasl = c->auth && set(c->auth->sasl.username);
    if (st == PL_OK)
        st = pl_kafka_conf_set(
            conf, "security.protocol",
            tls ? (sasl ? "sasl_ssl" : "ssl") : (sasl ? "sasl_plaintext" : "plaintext"), err);
    if (st == PL_OK && set(c->tls->ca_file))
        st = pl_kafka_conf_set(conf, "ssl.ca.location", c->tls->ca_file, err);
    if (st == PL_OK && set(c->tls->cert_file))
        st = pl_kafka_conf_set(conf, "ssl.certificate.location", c->tls->cert_file, err);
    if (st == PL_OK && set(c->tls->key_file))
        st = pl_kafka_conf_set(conf, "ssl.key.location", c->tls->key_file, err);
    if (st == PL_OK && tls && c->tls->insecure_skip_verify)
        st = pl_kafka_conf_set(conf, "enable.ssl.certificate.verification", "false", err);
    if (st == PL_OK && sasl && !tls &&
        (!set(c->auth->sasl.mechanism) || strcmp(c->auth->sasl.mechanism, "PLAIN") == 0))
        pl_warn(c->id ? c->id : "kafka", "SASL PLAIN without tls: the password travels in clear");
    if (st == PL_OK && sasl) {
        const pl_kafka_sasl_config *s = &c->auth->sasl;
        st = pl_kafka_conf_set(conf, "sasl.mechanisms", set(s->mechanism) ? s->mechanism : "PLAIN",
                               err);
        if (st == PL_OK)
            st = pl_kafka_conf_set(conf, "sasl.username", s->username, err);
        if (st == PL_OK)
            st = pl_kafka_conf_set(conf, "sasl.password", s->password ? s->password : "", err);
    }
    if (st != PL_OK) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_log_cb(conf, on_log);
    return conf;
}

/* ---- partitioning ------------------------------------------------------- */

uint32_t pl_kafka_fnv1a32(const void *key, size_t len)
{
    const uint8_t *p = key;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

int32_t pl_kafka_sarama_partition(const void *key, size_t len, int32_t partitions)
{
    if (partitions <= 0)
        return 0;
    int32_t p = (int32_t)pl_kafka_fnv1a32(key, len) % partitions; /* C, like Go: truncated */
    return p < 0 ? -p : p;
}

int32_t pl_kafka_partitioner(const rd_kafka_topic_t *rkt, const void *key, size_t keylen,
                             int32_t partitions, void *topic_opaque, void *msg_opaque)
{
    if (!key || keylen == 0)
        return rd_kafka_msg_partitioner_random(rkt, key, keylen, partitions, topic_opaque,
                                               msg_opaque);
    return pl_kafka_sarama_partition(key, keylen, partitions);
}

/* ---- the loop bridge ---------------------------------------------------- */

struct pl_kafka_waker {
    rd_kafka_queue_t *queue;
    pl_kafka_serve_fn serve;
    void *arg;
    uint64_t interval_ms;
    int fds[2];
    uv_poll_t poll;
    uv_timer_t timer;
    int open_handles;
};

static void drain_pipe(int fd)
{
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    pl_kafka_waker *w = h->data;
    drain_pipe(w->fds[0]);
    w->serve(w->arg);
}

static void on_tick(uv_timer_t *t)
{
    pl_kafka_waker *w = t->data;
    w->serve(w->arg);
}

static void on_closed(uv_handle_t *h)
{
    pl_kafka_waker *w = h->data;
    if (--w->open_handles == 0) {
        close(w->fds[0]);
        close(w->fds[1]);
        free(w);
    }
}

pl_kafka_waker *pl_kafka_waker_new(uv_loop_t *loop, rd_kafka_queue_t *queue, uint64_t interval_ms,
                                   pl_kafka_serve_fn serve, void *arg, pl_err *err)
{
    pl_kafka_waker *w = calloc(1, sizeof(*w));
    if (!w) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (pipe2(w->fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        pl_errf(err, PL_ERR_INTERNAL, "pipe: %s", strerror(errno));
        free(w);
        return NULL;
    }
    w->queue = queue;
    w->serve = serve;
    w->arg = arg;
    w->interval_ms = interval_ms;
    uv_timer_init(loop, &w->timer);
    w->timer.data = w;
    w->poll.data = w;
    int rc = uv_poll_init(loop, &w->poll, w->fds[0]);
    if (rc != 0) {
        pl_errf(err, PL_ERR_INTERNAL, "uv_poll_init: %s", uv_strerror(rc));
        w->open_handles = 1; /* the timer's close frees the rest */
        uv_close((uv_handle_t *)&w->timer, on_closed);
        return NULL;
    }
    w->open_handles = 2;
    uv_poll_start(&w->poll, UV_READABLE, on_readable);
    uv_timer_start(&w->timer, on_tick, interval_ms, interval_ms);
    rd_kafka_queue_io_event_enable(queue, w->fds[1], "1", 1);
    return w;
}

void pl_kafka_waker_again(pl_kafka_waker *w)
{
    uv_timer_start(&w->timer, on_tick, 0, w->interval_ms);
}

void pl_kafka_waker_close(pl_kafka_waker *w)
{
    if (!w)
        return;
    rd_kafka_queue_io_event_enable(w->queue, -1, NULL, 0);
    uv_poll_stop(&w->poll);
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->poll, on_closed);
    uv_close((uv_handle_t *)&w->timer, on_closed);
}
