/*
 * nats.c: the `nats` receiver: consumes OTLP requests (one
 * Export*ServiceRequest per message, protobuf or OTLP/JSON) from NATS
 * JetStream through durable pull consumers, with the keys of the NATS
 * receiver proposed to the OpenTelemetry Collector (endpoint, jetstream
 * {domain, ack_wait, max_deliver}, per-signal subject, stream, durable,
 * encoding; token / user / nkey_user_file; tls).
 *
 * Delivery: at least once. A message is acknowledged only after the
 * pipeline accepted it (pl_consumer_consume returned PL_OK: the exporters'
 * queues took it, a persistent queue committed it); a refusal
 * (back-pressure, memory limiter) is a nak with `nak_delay`, and that
 * consumer pauses as long before it fetches again, so a refusing pipeline
 * is not spun on; a message that does not decode is terminated (the server
 * never redelivers it) and counted. A crash or kill -9 leaves the messages
 * it had not acknowledged to the server, which delivers them again after
 * ack_wait: at most fetch_batch messages per consumer (those fetched and
 * not yet acknowledged, plus acks lost with the connection) arrive twice.
 * The stream must exist; the durable consumer is created (explicit acks,
 * ack_wait, max_deliver, filtered on its subject) or bound if it exists.
 *
 * Partitions: with `partitions: [0, 2]`, traces and profiles are consumed
 * from <subject>.0 and <subject>.2 with the durables <durable>_0 and
 * <durable>_2, one consumer per partition (nats-server 2.9 filters a
 * consumer on one subject). Gateways that split the partitions among them
 * each get whole traces with the samples that link to them
 * (exporters/nats.h); docs/deployment.md has the deployment.
 *
 * Threads (net/nats_conn.h): each consumer has a fetch thread that creates
 * or binds its consumer, then pulls up to fetch_batch messages at a time
 * (natsSubscription_Fetch, waiting up to a second) and appends them to the
 * receiver's inbox under `lock`, then wakes the loop with a uv_async. The
 * loop decodes, hands the batch to the pipeline and acks, naks or
 * terminates each message, then tells the consumer's thread (under the
 * same lock, with `wake`) that its messages are done; the thread fetches
 * again only then (and after a nak's pause), which bounds what is held to
 * fetch_batch messages per consumer. The loop owns the messages once they
 * are in the inbox; the threads touch nothing of the pipeline.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "net/nats_conn.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

#include "receivers/nats.config.h"

#define FETCH_WAIT_MS 1000

static const nats_receiver_signal_config *signal_config(const nats_receiver_config *c, pl_signal s)
{
    switch (s) {
    case PL_SIGNAL_TRACES:
        return &c->traces;
    case PL_SIGNAL_PROFILES:
        return &c->profiles;
    case PL_SIGNAL_LOGS:
        return &c->logs;
    default:
        return &c->metrics;
    }
}

static bool parse_partition(const char *text, unsigned *out)
{
    if (!text || !text[0] || strlen(text) > 4)
        return false;
    unsigned v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (unsigned)(*p - '0');
    }
    if (v >= 1024)
        return false;
    *out = v;
    return true;
}

static int nats_receiver_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    nats_receiver_config *c = cfg_;
    int errors = pl_nats_validate_connection(ctx, c->endpoint, &c->token, &c->user, &c->nkey,
                                             &c->nkey_jwt, &c->nkey_user_file);
    bool partitioned = c->partitions.n > 0;
    for (size_t i = 0; i < c->partitions.n; i++) {
        unsigned p;
        errors +=
            pl_cfg_check(ctx, parse_partition(c->partitions.items[i], &p), "partitions",
                         "\"%s\" is not a partition number (0 to 1023)", c->partitions.items[i]);
    }
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        const nats_receiver_signal_config *sc = signal_config(c, (pl_signal)s);
        const char *subject =
            sc->subject && sc->subject[0] ? sc->subject : pl_nats_default_subject(s);
        bool split = partitioned && (s == PL_SIGNAL_TRACES || s == PL_SIGNAL_PROFILES);
        errors +=
            pl_cfg_check(ctx, pl_nats_subject_valid(subject, !split), pl_signal_name((pl_signal)s),
                         "subject \"%s\" is not a NATS subject%s", subject,
                         split ? " without wildcards (partitions are appended to it)" : "");
        errors += pl_cfg_check(ctx, !sc->stream || !sc->stream[0] || pl_nats_name_valid(sc->stream),
                               pl_signal_name((pl_signal)s), "stream \"%s\" is not a stream name",
                               sc->stream);
        errors += pl_cfg_check(
            ctx, !sc->durable || !sc->durable[0] || pl_nats_name_valid(sc->durable),
            pl_signal_name((pl_signal)s), "durable \"%s\" is not a consumer name", sc->durable);
        bool json;
        errors +=
            pl_cfg_check(ctx, pl_nats_marshaler_parse(sc->encoding, &json) == 0,
                         pl_signal_name((pl_signal)s), "encoding must be otlp_proto or otlp_json");
    }
    return errors;
}

#include "receivers/nats.config.inc"

/* ---- the receiver ------------------------------------------------------- */

typedef struct nats_receiver nats_receiver;

typedef struct nats_consumer {
    nats_receiver *r;
    pl_signal signal;
    bool json;
    char *subject, *stream, *durable;
    natsSubscription *sub; /* its fetch thread's */
    uv_thread_t thread;
    bool thread_started;
    bool warned;        /* its thread's: subscribing failed once */
    uint64_t pending;   /* the loop's: messages after the last one settled */
    int partition;      /* -1: not partitioned */
    int64_t spans_left; /* the loop's, traces: pending after the last one settled (-1: none yet) */
    /* under r->cl.lock */
    int in_flight;           /* fetched, not yet settled by the loop */
    bool idle;               /* its last fetch found nothing: caught up */
    uint64_t pause_until_ms; /* after a nak: no fetch before (uv_hrtime ms) */
} nats_consumer;

typedef struct inbox_msg {
    struct inbox_msg *next;
    natsMsg *msg;
    nats_consumer *consumer;
} inbox_msg;

struct nats_receiver {
    pl_nats_client cl; /* first: id, loop, stats, connection, lock, wake-up */
    pl_consumer *next[PL_SIGNAL_COUNT];
    int64_t ack_wait_ns, max_deliver, nak_delay_ns;
    int fetch_batch;
    nats_consumer *consumers;
    size_t n_consumers;

    inbox_msg *inbox, *inbox_tail;
    bool stop;

    uint64_t *received, *acks, *naks, *terms, *redeliveries;
    int64_t *lag;
};

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* Waits on `wake` up to `ms` (or until woken). Called with r->cl.lock held. */
static void timed_wait(nats_receiver *r, uint64_t ms)
{
    uv_cond_timedwait(&r->cl.wake, &r->cl.lock, ms * 1000000);
}

/* On the fetch thread: creates or binds the durable pull consumer. */
static bool subscribe(nats_consumer *c)
{
    nats_receiver *r = c->r;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = c->stream;
    so.Config.Durable = c->durable;
    so.Config.AckPolicy = js_AckExplicit;
    so.Config.AckWait = r->ack_wait_ns;
    so.Config.MaxDeliver = r->max_deliver;
    so.Config.FilterSubject = c->subject;
    so.Config.DeliverPolicy = js_DeliverAll;
    jsErrCode jerr = 0;
    /* An existing durable takes the configured ack_wait and max_deliver
     * (libnats refuses to bind one whose settings differ); a missing one is
     * created by the subscribe below. */
    jsConsumerInfo *ci = NULL;
    if (js_UpdateConsumer(&ci, r->cl.js, c->stream, &so.Config, NULL, &jerr) == NATS_OK)
        pl_debug(r->cl.id, "consumer %s updated to the configured settings", c->durable);
    jsConsumerInfo_Destroy(ci);
    jerr = 0;
    natsStatus s = js_PullSubscribe(&c->sub, r->cl.js, c->subject, c->durable, NULL, &so, &jerr);
    if (s == NATS_OK) {
        pl_info(r->cl.id, "consuming %s from stream %s (durable %s)", c->subject, c->stream,
                c->durable);
        return true;
    }
    natsStatus ignored;
    const char *text = nats_GetLastError(&ignored);
    /* once as a warning, then quietly: the stream may be created later */
    pl_log(c->warned ? PL_LOG_DEBUG : PL_LOG_WARN, r->cl.id,
           "cannot consume %s from stream %s yet: %s%s%s (retrying every second)", c->subject,
           c->stream, natsStatus_GetText(s), text && text[0] ? ": " : "", text ? text : "");
    c->warned = true;
    c->sub = NULL;
    return false;
}

static void fetch_main(void *arg)
{
    nats_consumer *c = arg;
    nats_receiver *r = c->r;
    uv_mutex_lock(&r->cl.lock);
    for (;;) {
        for (;;) {
            uint64_t now = now_ms();
            if (r->stop || (c->in_flight == 0 && now >= c->pause_until_ms))
                break;
            if (c->in_flight > 0)
                uv_cond_wait(&r->cl.wake, &r->cl.lock);
            else
                timed_wait(r, c->pause_until_ms - now);
        }
        if (r->stop)
            break;
        uv_mutex_unlock(&r->cl.lock);
        if (!c->sub && !subscribe(c)) {
            uv_mutex_lock(&r->cl.lock);
            if (!r->stop)
                timed_wait(r, 1000);
            continue;
        }
        natsMsgList list = {0};
        jsErrCode jerr = 0;
        natsStatus s = natsSubscription_Fetch(&list, c->sub, r->fetch_batch, FETCH_WAIT_MS, &jerr);
        if (list.Count == 0 && s != NATS_OK && s != NATS_TIMEOUT &&
            natsConnection_Status(r->cl.nc) == NATS_CONN_STATUS_CONNECTED) {
            /* Connected, yet the pull failed: the server answered with an
             * error (409 Consumer Deleted when the consumer or its stream
             * was deleted). Bind again, which creates the consumer if it
             * is gone and is harmless if it is not. */
            natsStatus ignored;
            const char *text = nats_GetLastError(&ignored);
            pl_warn(r->cl.id, "pulling %s failed (%s%s%s); binding its consumer %s again",
                    c->subject, natsStatus_GetText(s), text && text[0] ? ": " : "",
                    text ? text : "", c->durable);
            natsSubscription_Destroy(c->sub);
            c->sub = NULL;
        }
        uv_mutex_lock(&r->cl.lock);
        c->idle = list.Count == 0 && s == NATS_TIMEOUT && c->in_flight == 0;
        if (list.Count > 0) {
            for (int i = 0; i < list.Count; i++) {
                inbox_msg *m = calloc(1, sizeof(*m));
                if (!m) /* not acked: the server delivers it again after ack_wait */
                    continue;
                m->msg = list.Msgs[i];
                m->consumer = c;
                list.Msgs[i] = NULL;
                if (r->inbox_tail)
                    r->inbox_tail->next = m;
                else
                    r->inbox = m;
                r->inbox_tail = m;
                c->in_flight++;
            }
            uv_async_send(&r->cl.async);
        } else if (s != NATS_OK && s != NATS_TIMEOUT && !r->stop) {
            /* no connection or no leader yet: wait a little, quietly */
            timed_wait(r, 200);
        }
        uv_mutex_unlock(&r->cl.lock);
        natsMsgList_Destroy(&list); /* only what was not taken */
        uv_mutex_lock(&r->cl.lock);
    }
    uv_mutex_unlock(&r->cl.lock);
}

/* Decodes one message body into a batch (the body is copied: the batch
 * adopts it and decoded strings point into it). */
static pl_status decode(const nats_consumer *c, const uint8_t *data, size_t len, pl_batch **out,
                        size_t *items, pl_err *err)
{
    pl_signal signal = c->signal;
    uint8_t *owner = malloc(len ? len : 1);
    if (!owner)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    if (len)
        memcpy(owner, data, len);
    size_t owner_size = len;
    bool json = c->json;
    if (json && (signal == PL_SIGNAL_LOGS || signal == PL_SIGNAL_METRICS)) {
        pl_buf pb;
        pl_buf_init(&pb);
        pl_status st = pl_otlp_json_transcode(signal, owner, len, PL_OTLP_DECODE_BUDGET, &pb, err);
        free(owner);
        if (st != PL_OK) {
            pl_buf_free(&pb);
            return st;
        }
        owner_size = pb.len;
        owner = pl_buf_steal(&pb, &owner_size);
        if (!owner && !(owner = calloc(1, 1)))
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        len = owner_size;
        json = false;
    }
    pl_batch *b = pl_batch_new(signal);
    if (!b || pl_batch_adopt(b, owner, owner_size) != 0) {
        free(owner);
        pl_batch_free(b);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    pl_status st;
    if (signal == PL_SIGNAL_TRACES || signal == PL_SIGNAL_PROFILES) {
        st = json ? pl_otlp_json_decode_ex(b, owner, len, PL_OTLP_DECODE_BUDGET, err)
                  : pl_otlp_decode_ex(b, owner, len, PL_OTLP_DECODE_BUDGET, err);
        *items = pl_batch_items(b);
    } else {
        st = signal == PL_SIGNAL_LOGS ? pl_otlp_count_logs(owner, len, items, err)
                                      : pl_otlp_count_metrics(owner, len, items, err);
        b->data.raw = (pl_bytes){owner, (uint32_t)len};
    }
    if (st != PL_OK) {
        pl_batch_free(b);
        return st;
    }
    *out = b;
    return PL_OK;
}

static bool batch_empty(const pl_batch *b)
{
    switch (b->signal) {
    case PL_SIGNAL_TRACES:
        return b->data.traces.n_resources == 0;
    case PL_SIGNAL_PROFILES:
        return b->data.profiles.n_resources == 0;
    default:
        return b->data.raw.len == 0;
    }
}

/* Span messages of c's partition (the traces consumer of the same
 * partition) still to be handed on: what the server said was pending after
 * the last one settled, plus those fetched and not settled yet; 0 once its
 * last fetch found nothing. -1: not known yet; -2: no traces consumer of
 * that partition here. `self_pending`: for a traces message, the server's
 * count after it. */
static int64_t spans_lag(nats_receiver *r, const nats_consumer *c, int64_t self_pending)
{
    const nats_consumer *t = NULL;
    for (size_t i = 0; i < r->n_consumers && !t; i++)
        if (r->consumers[i].signal == PL_SIGNAL_TRACES && r->consumers[i].partition == c->partition)
            t = &r->consumers[i];
    if (!t)
        return -2;
    uv_mutex_lock(&r->cl.lock);
    int in_flight = t->in_flight - (t == c); /* besides the message being settled */
    bool idle = t->idle;
    uv_mutex_unlock(&r->cl.lock);
    if (t == c)
        return self_pending >= 0 ? self_pending + in_flight : -1;
    if (idle && in_flight == 0)
        return 0;
    return t->spans_left >= 0 ? t->spans_left + in_flight : -1;
}

/* The tenant a `nats` exporter sent (its X-Scope-OrgID header) becomes the
 * batch's, as the otlp receiver does with the HTTP header; traces and
 * profiles also get the bus progress keys (core/model.h) when this receiver
 * reads the spans of their partition. */
static void add_metadata(nats_receiver *r, const nats_consumer *c, pl_batch *b, natsMsg *msg,
                         int64_t self_pending)
{
    pl_kv *kv = pl_batch_alloc(b, 3 * sizeof(*kv));
    if (!kv)
        return;
    uint32_t n = 0;
    const char *tenant = NULL;
    if (natsMsgHeader_Get(msg, "X-Scope-OrgID", &tenant) == NATS_OK && tenant && tenant[0]) {
        kv[n].key = PL_BYTES_LIT("tenant");
        kv[n++].value = pl_value_string(pl_batch_bytes(b, tenant, strlen(tenant)));
    }
    int64_t lag = c->signal == PL_SIGNAL_TRACES || c->signal == PL_SIGNAL_PROFILES
                      ? spans_lag(r, c, self_pending)
                      : -2;
    if (lag >= -1) {
        char text[300];
        if (c->partition >= 0)
            snprintf(text, sizeof(text), "%s/%d", r->cl.id, c->partition);
        else
            snprintf(text, sizeof(text), "%s/all", r->cl.id);
        kv[n].key = PL_BYTES_LIT(PL_META_BUS_PARTITION);
        kv[n++].value = pl_value_string(pl_batch_bytes(b, text, strlen(text)));
        if (lag >= 0)
            snprintf(text, sizeof(text), "%lld", (long long)lag);
        else
            snprintf(text, sizeof(text), "unknown");
        kv[n].key = PL_BYTES_LIT(PL_META_BUS_SPANS_LAG);
        kv[n++].value = pl_value_string(pl_batch_bytes(b, text, strlen(text)));
    }
    b->metadata.items = kv;
    b->metadata.n = n;
}

/* On the loop: one message into the pipeline, then ack, nak or term. */
static void settle(nats_receiver *r, nats_consumer *c, natsMsg *msg)
{
    (*r->received)++;
    jsMsgMetaData *meta = NULL;
    int64_t self_pending = -1;
    if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
        self_pending = (int64_t)meta->NumPending;
        if (c->signal == PL_SIGNAL_TRACES)
            c->spans_left = self_pending;
        if (meta->NumDelivered > 1)
            (*r->redeliveries)++;
        /* lag: what the stream holds for these consumers beyond this */
        c->pending = meta->NumPending;
        uint64_t sum = 0;
        for (size_t i = 0; i < r->n_consumers; i++)
            sum += r->consumers[i].pending;
        *r->lag = (int64_t)sum;
    }
    jsMsgMetaData_Destroy(meta);
    pl_err err = {0};
    pl_batch *b = NULL;
    size_t items = 0;
    const uint8_t *data = (const uint8_t *)natsMsg_GetData(msg);
    size_t len = (size_t)natsMsg_GetDataLength(msg);
    pl_status st = decode(c, data, len, &b, &items, &err);
    if (st == PL_ERR_NOMEM) {
        natsMsg_NakWithDelay(msg, r->nak_delay_ns / 1000000, NULL);
        (*r->naks)++;
        return;
    }
    if (st != PL_OK) {
        pl_warn(r->cl.id, "message on %s does not decode as %s %s, terminated: %s",
                natsMsg_GetSubject(msg), c->json ? "otlp_json" : "otlp_proto",
                pl_signal_name(c->signal), err.msg);
        natsMsg_Term(msg, NULL);
        (*r->terms)++;
        return;
    }
    if (batch_empty(b)) {
        pl_batch_free(b);
        natsMsg_Ack(msg, NULL);
        (*r->acks)++;
        return;
    }
    b->received_unix_nano = pl_time_now_ns();
    add_metadata(r, c, b, msg, self_pending);
    st = pl_consumer_consume(r->next[c->signal], b);
    if (st == PL_OK) {
        pl_stats_add(r->cl.stats, c->signal, PL_STAT_ACCEPTED, items);
        natsMsg_Ack(msg, NULL);
        (*r->acks)++;
        return;
    }
    pl_stats_add(r->cl.stats, c->signal, PL_STAT_REFUSED, items);
    natsMsg_NakWithDelay(msg, r->nak_delay_ns / 1000000, NULL);
    (*r->naks)++;
    uv_mutex_lock(&r->cl.lock);
    c->pause_until_ms = now_ms() + (uint64_t)(r->nak_delay_ns / 1000000);
    uv_mutex_unlock(&r->cl.lock);
}

static void on_inbox(uv_async_t *a)
{
    nats_receiver *r = a->data;
    uv_mutex_lock(&r->cl.lock);
    inbox_msg *list = r->inbox;
    r->inbox = r->inbox_tail = NULL;
    uv_mutex_unlock(&r->cl.lock);
    while (list) {
        inbox_msg *m = list;
        list = m->next;
        /* After shutdown nothing enters the pipeline: a message left
         * unacknowledged is delivered again after ack_wait. */
        if (!r->stop)
            settle(r, m->consumer, m->msg);
        natsMsg_Destroy(m->msg);
        uv_mutex_lock(&r->cl.lock);
        m->consumer->in_flight--;
        uv_cond_broadcast(&r->cl.wake);
        uv_mutex_unlock(&r->cl.lock);
        free(m);
    }
}

static void nats_receiver_destroy(void *self);

static pl_status add_consumer(nats_receiver *r, const nats_receiver_signal_config *sc, pl_signal s,
                              int partition)
{
    nats_consumer *c = &r->consumers[r->n_consumers];
    c->r = r;
    c->signal = s;
    c->partition = partition;
    c->spans_left = -1;
    pl_nats_marshaler_parse(sc->encoding, &c->json);
    const char *subject = sc->subject && sc->subject[0] ? sc->subject : pl_nats_default_subject(s);
    char def_durable[64];
    snprintf(def_durable, sizeof(def_durable), "proflink_%s", pl_signal_name((pl_signal)s));
    const char *durable = sc->durable && sc->durable[0] ? sc->durable : def_durable;
    size_t ns = strlen(subject) + 8, nd = strlen(durable) + 8;
    c->subject = malloc(ns);
    c->durable = malloc(nd);
    c->stream = strdup(sc->stream);
    if (!c->subject || !c->durable || !c->stream) {
        free(c->subject);
        free(c->durable);
        free(c->stream);
        return PL_ERR_NOMEM;
    }
    if (partition >= 0) {
        snprintf(c->subject, ns, "%s.%d", subject, partition);
        snprintf(c->durable, nd, "%s_%d", durable, partition);
    } else {
        snprintf(c->subject, ns, "%s", subject);
        snprintf(c->durable, nd, "%s", durable);
    }
    r->n_consumers++;
    return PL_OK;
}

static pl_status nats_receiver_create(const pl_create_settings *settings, const void *config,
                                      void **out, pl_err *err)
{
    const nats_receiver_config *c = config;
    nats_receiver *r = calloc(1, sizeof(*r));
    if (!r)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    pl_status init = pl_nats_client_init(&r->cl, settings, c->endpoint, c->jetstream.domain,
                                         &c->token, &c->user, &c->nkey_user_file, &c->tls, err);
    if (init == PL_ERR_INTERNAL) {
        free(r);
        return init;
    }
    bool ok = init == PL_OK;
    memcpy(r->next, settings->next, sizeof(r->next));
    r->ack_wait_ns = c->jetstream.ack_wait;
    r->max_deliver = c->jetstream.max_deliver;
    r->nak_delay_ns = c->nak_delay;
    r->fetch_batch = (int)c->fetch_batch;
    size_t n_parts = c->partitions.n;
    r->consumers = calloc(PL_SIGNAL_COUNT * (n_parts ? n_parts : 1), sizeof(*r->consumers));
    if (!ok || !r->consumers) {
        nats_receiver_destroy(r);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    pl_status st = PL_OK;
    for (int s = 0; s < PL_SIGNAL_COUNT && st == PL_OK; s++) {
        if (!r->next[s])
            continue; /* no pipeline takes this signal */
        const nats_receiver_signal_config *sc = signal_config(c, (pl_signal)s);
        if (!sc->stream || !sc->stream[0]) {
            st = pl_errf(err, PL_ERR_INVALID,
                         "%s::stream is required: the stream that holds the %s subject (it "
                         "must exist)",
                         pl_signal_name((pl_signal)s), pl_signal_name((pl_signal)s));
            break;
        }
        bool split = n_parts > 0 && (s == PL_SIGNAL_TRACES || s == PL_SIGNAL_PROFILES);
        if (!split) {
            st = add_consumer(r, sc, (pl_signal)s, -1);
            continue;
        }
        for (size_t i = 0; i < n_parts && st == PL_OK; i++) {
            unsigned p = 0;
            parse_partition(c->partitions.items[i], &p);
            st = add_consumer(r, sc, (pl_signal)s, (int)p);
        }
    }
    if (st != PL_OK) {
        nats_receiver_destroy(r);
        return st == PL_ERR_NOMEM ? pl_errf(err, st, "out of memory") : st;
    }
    r->received = pl_stats_counter(r->cl.stats, "nats_messages_received", "messages fetched");
    r->acks = pl_stats_counter(r->cl.stats, "nats_acks",
                               "messages acknowledged after the pipeline "
                               "accepted them");
    r->naks = pl_stats_counter(r->cl.stats, "nats_naks",
                               "messages the pipeline refused, to be redelivered after nak_delay");
    r->terms = pl_stats_counter(r->cl.stats, "nats_terms",
                                "messages that did not decode, terminated (never redelivered)");
    r->redeliveries = pl_stats_counter(r->cl.stats, "nats_redeliveries",
                                       "messages delivered more than once (after a nak, an "
                                       "ack_wait expiry or a restart)");
    r->lag = pl_stats_gauge(r->cl.stats, "nats_lag",
                            "messages the streams hold for this receiver's consumers that they "
                            "have not delivered yet (as of the last message settled)");
    if (pl_nats_client_async(&r->cl, r, on_inbox, err) != PL_OK) {
        nats_receiver_destroy(r);
        return PL_ERR_INTERNAL;
    }
    *out = r;
    return PL_OK;
}

static pl_status nats_receiver_start(void *self, pl_err *err)
{
    nats_receiver *r = self;
    if (!r->n_consumers)
        return PL_OK;
    pl_status st = pl_nats_connect_js(r->cl.id, &r->cl.conn, 0, &r->cl.nc, &r->cl.js, err);
    if (st != PL_OK)
        return st;
    for (size_t i = 0; i < r->n_consumers; i++) {
        nats_consumer *c = &r->consumers[i];
        if (uv_thread_create(&c->thread, fetch_main, c) != 0)
            return pl_errf(err, PL_ERR_INTERNAL, "cannot start a fetch thread");
        c->thread_started = true;
    }
    return PL_OK;
}

static void nats_receiver_shutdown(void *self)
{
    nats_receiver *r = self;
    /* The threads stop fetching; messages already in the inbox are still
     * settled when the loop gets to them. */
    uv_mutex_lock(&r->cl.lock);
    r->stop = true;
    uv_cond_broadcast(&r->cl.wake);
    uv_mutex_unlock(&r->cl.lock);
}

static void nats_receiver_destroy(void *self)
{
    nats_receiver *r = self;
    if (!r)
        return;
    nats_receiver_shutdown(r);
    /* Closing the connection ends a fetch in progress at once. */
    if (r->cl.nc)
        natsConnection_Close(r->cl.nc);
    for (size_t i = 0; i < r->n_consumers; i++) {
        nats_consumer *c = &r->consumers[i];
        if (c->thread_started)
            uv_thread_join(&c->thread);
        natsSubscription_Destroy(c->sub);
        free(c->subject);
        free(c->durable);
        free(c->stream);
    }
    /* Not settled: not acknowledged either, so the server delivers them
     * again after ack_wait. */
    for (inbox_msg *m = r->inbox, *n; m; m = n) {
        n = m->next;
        natsMsg_Destroy(m->msg);
        free(m);
    }
    free(r->consumers);
    pl_nats_client_release(&r->cl, r);
}

const pl_component_type pl_receiver_nats = {
    PL_COMPONENT_HEAD("nats", PL_KIND_RECEIVER, PL_SIGNALS_ALL, &nats_receiver_section),
    .description = "consumes OTLP traces, profiles, logs and metrics from NATS JetStream "
                   "through durable pull consumers, acknowledging each message after the "
                   "pipeline accepted it",
    PL_COMPONENT_LIFECYCLE(nats_receiver_create, nats_receiver_start, nats_receiver_shutdown,
                           nats_receiver_destroy),
};
