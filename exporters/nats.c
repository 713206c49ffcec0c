/*
 * nats.c: the `nats` exporter: publishes each batch to NATS JetStream as
 * one Export*ServiceRequest per message (OTLP protobuf, or OTLP/JSON for
 * traces and profiles), with the keys of the NATS exporter proposed to the
 * OpenTelemetry Collector (endpoint, jetstream, per-signal subject and
 * marshaler, token / user / nkey_user_file, tls) plus the sending queue
 * and retries every proflink network exporter has.
 *
 * Flow:
 *
 *   export(batch) --(partitions: split by trace id)--> encode each part
 *        --> pl_queue_push (one queue transaction for the batch)
 *   queue slot --send--> job list --> publisher thread: js_PublishMsg,
 *        waiting up to jetstream.publish_timeout for the stream's ack
 *   publisher thread --done list + uv_async--> loop: pl_queue_send_done
 *
 * So a message counts as sent only when the stream acknowledged it, i.e.
 * stored it on its replicas; no acknowledgement (a node died, the stream
 * has no leader yet, no connection) is retryable, and the queue sends the
 * same payload again after its backoff. Each message carries a
 * Nats-Msg-Id given when the batch is queued (a random per-instance nonce
 * and a counter, kept in the queued payload, so retries, and with storage a
 * restart, send the same id), so a retry of a message the stream did store
 * (only its acknowledgement was lost) is dropped by JetStream's duplicate
 * window (2 minutes by default) instead of stored twice; the exporter
 * counts those answers (publish_duplicates). Two exports of identical
 * bytes get two ids: both are stored.
 *
 * Threads (net/nats_conn.h): the publishes block, so they run on
 * min(num_consumers, 8) threads this exporter owns. What crosses: a job
 * (subject, a pointer to the queued payload, which the queue keeps until
 * pl_queue_send_done, and the result) moves loop -> publisher through
 * `todo` and back through `done`, both under `lock`; the publisher touches
 * nothing else of the exporter but the connection (thread-safe) and
 * settings fixed at create. pl_queue_send_done and the counters run on the
 * loop only.
 *
 * Queued payload: [flags][partition + 1, 2 bytes big-endian][message id,
 * 16 bytes]([tenant length][tenant])[body], flags bit 0 = OTLP/JSON, bit 1 = a
 * tenant follows. The tenant (X-Scope-OrgID the batch arrived with) travels
 * as the message's X-Scope-OrgID header, and the receiver gives it back to
 * the batch, so tenants stay apart across the bus. The subject is rebuilt from it at send time, so
 * a stored payload goes to the partition it was made for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/log.h"
#include "exporters/lb_ring.h"
#include "exporters/lb_route.h"
#include "exporters/nats.h"
#include "exporters/queue.h"
#include "net/nats_conn.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

#include "exporters/nats.config.h"

#define MAX_PUBLISHERS 8
#define PAYLOAD_HEADER 19 /* flags, partition, message id */
#define FLAG_JSON      0x01u
#define FLAG_TENANT    0x02u /* [length][tenant] follows the header */
/* Over this many encoded bytes a batch is split in halves (NATS refuses
 * messages over the server's max_payload, 1 MiB by default). */
#define MAX_MESSAGE_BYTES ((size_t)1000 * 1000)

/* ---- partitions (pure: exposed for tests) -------------------------------- */

unsigned pl_nats_trace_partition(const uint8_t trace_id[16], unsigned n)
{
    return n ? (unsigned)(pl_lb_hash(trace_id, 16) % n) : 0;
}

size_t pl_nats_partitions(const pl_batch *b, unsigned n, int *dest)
{
    size_t count = pl_lb_route_keys(b, PL_LB_ROUTE_TRACE_ID, NULL);
    if (!dest || !count)
        return count;
    uint64_t *keys = malloc(count * sizeof(*keys));
    if (!keys)
        return 0;
    pl_lb_route_keys(b, PL_LB_ROUTE_TRACE_ID, keys);
    for (size_t i = 0; i < count; i++)
        dest[i] = n ? (int)(keys[i] % n) : 0;
    free(keys);
    return count;
}

/* ---- config ------------------------------------------------------------- */

/* The subject of a signal section: plain, or an OTTL string literal. */
static char *subject_text(const char *configured, pl_signal signal)
{
    if (!configured || !configured[0])
        return strdup(pl_nats_default_subject(signal));
    size_t n = strlen(configured);
    if (n >= 2 && configured[0] == '"' && configured[n - 1] == '"')
        return strndup(configured + 1, n - 2);
    return strdup(configured);
}

static int nats_exporter_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    nats_exporter_config *c = cfg_;
    int errors = pl_nats_validate_connection(ctx, c->endpoint, &c->token, &c->user, &c->nkey,
                                             &c->nkey_jwt, &c->nkey_user_file);
    const nats_exporter_signal_config *sig[PL_SIGNAL_COUNT] = {
        [PL_SIGNAL_TRACES] = &c->traces,
        [PL_SIGNAL_PROFILES] = &c->profiles,
        [PL_SIGNAL_LOGS] = &c->logs,
        [PL_SIGNAL_METRICS] = &c->metrics,
    };
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        char *subject = subject_text(sig[s]->subject, (pl_signal)s);
        errors += pl_cfg_check(ctx, subject && pl_nats_subject_valid(subject, false),
                               pl_signal_name((pl_signal)s),
                               "subject \"%s\" is not a NATS subject without wildcards "
                               "(proflink takes a plain subject or a quoted string literal, "
                               "not other OTTL expressions)",
                               sig[s]->subject ? sig[s]->subject : "");
        free(subject);
        bool json = false;
        bool ok = pl_nats_marshaler_parse(sig[s]->marshaler, &json) == 0;
        errors += pl_cfg_check(ctx, ok, pl_signal_name((pl_signal)s),
                               "marshaler must be otlp_proto or otlp_json");
        errors +=
            pl_cfg_check(ctx, !ok || !json || s == PL_SIGNAL_TRACES || s == PL_SIGNAL_PROFILES,
                         pl_signal_name((pl_signal)s),
                         "marshaler otlp_json is for traces and profiles: proflink passes "
                         "logs and metrics through as protobuf");
    }
    return errors;
}

#include "exporters/nats.config.inc"

/* ---- the exporter ------------------------------------------------------- */

typedef struct nats_exporter nats_exporter;

typedef struct nats_job {
    struct nats_job *next;
    pl_queue_send *send;
    char subject[256];
    const uint8_t *body; /* inside the queued payload */
    size_t len;
    bool json;
    bool duplicate;   /* the stream had stored it already */
    char tenant[256]; /* "" = none */
    char msg_id[33];  /* hex of the queued id */
    pl_send_result result;
} nats_job;

struct nats_exporter {
    pl_nats_client cl; /* first: id, loop, stats, connection, lock, wake-up */
    pl_queue *queue;
    char *subjects[PL_SIGNAL_COUNT];
    bool json[PL_SIGNAL_COUNT];
    unsigned partitions;
    int64_t publish_timeout_ms;
    pl_buf scratch;
    uint8_t nonce[8];  /* random per instance: message ids differ across runs */
    uint64_t next_seq; /* the loop's: next message id */

    /* connection settings, copied at create */

    /* the hand-off (see the header comment) */
    nats_job *todo, *todo_tail, *done;
    bool stop;
    uv_thread_t threads[MAX_PUBLISHERS];
    int n_threads;       /* publishers to start */
    int threads_started; /* publishers running */

    uint64_t *published, *duplicates, *publish_failures, *split;
};

/* Runs on a publisher thread: one message, waiting for the stream's ack. */
static void publish_one(nats_exporter *x, nats_job *job)
{
    natsMsg *msg = NULL;
    natsStatus s = natsMsg_Create(&msg, job->subject, NULL, (const char *)job->body, (int)job->len);
    if (s == NATS_OK)
        s = natsMsgHeader_Set(msg, "Content-Type",
                              job->json ? "application/json" : "application/x-protobuf");
    if (s == NATS_OK && job->tenant[0])
        s = natsMsgHeader_Set(msg, "X-Scope-OrgID", job->tenant);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = x->publish_timeout_ms;
    po.MsgId = job->msg_id;
    jsPubAck *ack = NULL;
    jsErrCode jerr = 0;
    if (s == NATS_OK)
        s = js_PublishMsg(&ack, x->cl.js, msg, &po, &jerr);
    if (s == NATS_OK) {
        job->duplicate = ack && ack->Duplicate;
        pl_send_result_set(&job->result, PL_SEND_OK, NULL);
    } else {
        natsStatus ignored;
        const char *text = nats_GetLastError(&ignored);
        bool permanent = s == NATS_MAX_PAYLOAD || jerr == JSStreamMessageExceedsMaximumErr;
        pl_send_result_set(&job->result, permanent ? PL_SEND_PERMANENT : PL_SEND_RETRYABLE,
                           "publish to %s: %s%s%s", job->subject, natsStatus_GetText(s),
                           text && text[0] ? ": " : "", text && text[0] ? text : "");
    }
    jsPubAck_Destroy(ack);
    natsMsg_Destroy(msg);
}

static void publisher_main(void *arg)
{
    nats_exporter *x = arg;
    uv_mutex_lock(&x->cl.lock);
    for (;;) {
        while (!x->todo && !x->stop)
            uv_cond_wait(&x->cl.wake, &x->cl.lock);
        if (x->stop)
            break;
        nats_job *job = x->todo;
        x->todo = job->next;
        if (!x->todo)
            x->todo_tail = NULL;
        uv_mutex_unlock(&x->cl.lock);
        publish_one(x, job);
        uv_mutex_lock(&x->cl.lock);
        job->next = x->done;
        x->done = job;
        uv_async_send(&x->cl.async);
    }
    uv_mutex_unlock(&x->cl.lock);
}

/* On the loop: hands finished publishes back to the queue. */
static void on_done(uv_async_t *a)
{
    nats_exporter *x = a->data;
    uv_mutex_lock(&x->cl.lock);
    nats_job *list = x->done;
    x->done = NULL;
    uv_mutex_unlock(&x->cl.lock);
    /* oldest first, as they finished */
    nats_job *rev = NULL;
    while (list) {
        nats_job *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        nats_job *n = rev->next;
        /* the counters have one writer: this loop */
        if (rev->result.outcome == PL_SEND_OK) {
            (*x->published)++;
            *x->duplicates += rev->duplicate;
        } else {
            (*x->publish_failures)++;
            pl_debug(x->cl.id, "%s", rev->result.message);
        }
        pl_queue_send_done(rev->send, &rev->result);
        free(rev);
        rev = n;
    }
}

/* pl_queue_sender.send: on the loop. */
static void nats_send(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                      pl_queue_send *send)
{
    nats_exporter *x = arg;
    pl_send_result r;
    if (len < PAYLOAD_HEADER || signal >= PL_SIGNAL_COUNT) {
        pl_send_result_set(&r, PL_SEND_PERMANENT, "malformed queued payload");
        pl_queue_send_done(send, &r);
        return;
    }
    nats_job *job = calloc(1, sizeof(*job));
    if (!job) {
        pl_send_result_set(&r, PL_SEND_RETRYABLE, "out of memory");
        pl_queue_send_done(send, &r);
        return;
    }
    unsigned part = ((unsigned)payload[1] << 8) | payload[2];
    if (part)
        snprintf(job->subject, sizeof(job->subject), "%s.%u", x->subjects[signal], part - 1);
    else
        snprintf(job->subject, sizeof(job->subject), "%s", x->subjects[signal]);
    job->send = send;
    job->json = payload[0] & FLAG_JSON;
    pl_hex_encode(payload + 3, 16, job->msg_id);
    job->msg_id[32] = 0;
    size_t at = PAYLOAD_HEADER;
    if (payload[0] & FLAG_TENANT) {
        size_t tl = len > at ? payload[at] : 0;
        if (tl == 0 || at + 1 + tl > len) {
            free(job);
            pl_send_result_set(&r, PL_SEND_PERMANENT, "malformed queued payload");
            pl_queue_send_done(send, &r);
            return;
        }
        memcpy(job->tenant, payload + at + 1, tl);
        job->tenant[tl] = 0;
        at += 1 + tl;
    }
    job->body = payload + at;
    job->len = len - at;
    uv_mutex_lock(&x->cl.lock);
    if (x->todo_tail)
        x->todo_tail->next = job;
    else
        x->todo = job;
    x->todo_tail = job;
    uv_cond_signal(&x->cl.wake);
    uv_mutex_unlock(&x->cl.lock);
}

/* The message body of a batch (or of a part of one). */
static bool encode_body(const nats_exporter *x, const pl_batch *b, pl_buf *out)
{
    bool json = x->json[b->signal];
    switch (b->signal) {
    case PL_SIGNAL_TRACES:
        return json ? pl_otlp_json_encode_traces(&b->data.traces, out)
                    : pl_otlp_encode_traces(&b->data.traces, out);
    case PL_SIGNAL_PROFILES:
        return json ? pl_otlp_json_encode_profiles(&b->data.profiles, out)
                    : pl_otlp_encode_profiles(&b->data.profiles, out);
    default:
        pl_buf_append(out, b->data.raw.ptr, b->data.raw.len);
        return true;
    }
}

/* The batch's tenant when it can travel as a header: 1 to 255 bytes, no
 * CR, LF or NUL. */
static pl_bytes batch_tenant(const pl_batch *b)
{
    pl_bytes t = {0};
    if (!pl_batch_metadata_get(b, "tenant", &t) || t.len == 0 || t.len > 255 ||
        memchr(t.ptr, '\r', t.len) || memchr(t.ptr, '\n', t.len) || memchr(t.ptr, 0, t.len))
        return (pl_bytes){0};
    return t;
}

/* Appends the queued payload's header (see the top of the file) with the
 * next message id; returns its length. On the loop only. */
static size_t write_head(nats_exporter *x, pl_buf *out, bool json, int part, pl_bytes tenant)
{
    unsigned p1 = part < 0 ? 0 : (unsigned)part + 1;
    uint8_t head[PAYLOAD_HEADER] = {
        (uint8_t)((json ? FLAG_JSON : 0) | (tenant.len ? FLAG_TENANT : 0)), (uint8_t)(p1 >> 8),
        (uint8_t)p1};
    memcpy(head + 3, x->nonce, 8);
    uint64_t seq = x->next_seq++;
    for (int i = 0; i < 8; i++)
        head[11 + i] = (uint8_t)(seq >> (56 - 8 * i));
    pl_buf_append(out, head, sizeof(head));
    if (!tenant.len)
        return PAYLOAD_HEADER;
    pl_buf_append_byte(out, (uint8_t)tenant.len);
    pl_buf_append(out, tenant.ptr, tenant.len);
    return PAYLOAD_HEADER + 1 + tenant.len;
}

/* Encodes `b` for partition `part` (-1: none) and pushes it; a body over
 * MAX_MESSAGE_BYTES with more than one item is split in halves. `tenant` is
 * the exported batch's (a part made by pl_lb_subset has no metadata). */
static pl_status push_part(nats_exporter *x, const pl_batch *b, int part, pl_bytes tenant)
{
    pl_buf *out = &x->scratch;
    pl_buf_reset(out);
    size_t head = write_head(x, out, x->json[b->signal], part, tenant);
    if (!encode_body(x, b, out) || !pl_buf_ok(out))
        return PL_ERR_NOMEM;
    size_t items = pl_batch_items(b);
    bool splittable = b->signal == PL_SIGNAL_TRACES || b->signal == PL_SIGNAL_PROFILES;
    if (out->len - head > MAX_MESSAGE_BYTES && splittable && items > 1) {
        int *dest = malloc(items * sizeof(*dest));
        if (!dest)
            return PL_ERR_NOMEM;
        for (size_t i = 0; i < items; i++)
            dest[i] = i < items / 2 ? 0 : 1;
        pl_status st = PL_OK;
        for (int half = 0; half < 2 && st == PL_OK; half++) {
            pl_batch *h = pl_lb_subset(b, dest, half);
            st = h ? push_part(x, h, part, tenant) : PL_ERR_NOMEM;
            pl_batch_free(h);
        }
        free(dest);
        (*x->split)++;
        return st;
    }
    pl_status st = pl_queue_push(x->queue, b->signal, out->data, out->len, items);
    if (out->cap > ((size_t)4 << 20))
        pl_buf_free(out);
    return st;
}

static pl_status split_and_push(nats_exporter *x, const pl_batch *batch)
{
    bool partitioned = x->partitions > 0 &&
                       (batch->signal == PL_SIGNAL_TRACES || batch->signal == PL_SIGNAL_PROFILES);
    pl_bytes tenant = batch_tenant(batch);
    if (!partitioned)
        return push_part(x, batch, -1, tenant);
    size_t n = pl_nats_partitions(batch, x->partitions, NULL);
    if (n == 0)
        return PL_OK; /* nothing to send */
    int *dest = malloc(n * sizeof(*dest));
    if (!dest || pl_nats_partitions(batch, x->partitions, dest) != n) {
        free(dest);
        return PL_ERR_NOMEM;
    }
    /* the partitions present, in order of first appearance */
    bool one = true;
    for (size_t i = 1; i < n && one; i++)
        one = dest[i] == dest[0];
    pl_status st = PL_OK;
    if (one) {
        st = push_part(x, batch, dest[0], tenant);
    } else {
        for (unsigned p = 0; p < x->partitions && st == PL_OK; p++) {
            bool present = false;
            for (size_t i = 0; i < n && !present; i++)
                present = dest[i] == (int)p;
            if (!present)
                continue;
            pl_batch *part = pl_lb_subset(batch, dest, (int)p);
            st = part ? push_part(x, part, (int)p, tenant) : PL_ERR_NOMEM;
            pl_batch_free(part);
        }
    }
    free(dest);
    return st;
}

static pl_status nats_export(void *self, const pl_batch *batch)
{
    nats_exporter *x = self;
    /* One transaction: with storage, every part of the batch commits
     * together (and a refusal rolls them all back). */
    pl_queue_tx_begin(x->queue, batch);
    pl_status st = split_and_push(x, batch);
    return pl_queue_tx_end(x->queue, batch, st);
}

/* pl_queue_sender.encode, which the queue calls from pl_queue_export only:
 * this exporter pushes its (partitioned, size-limited) payloads itself, so
 * this is the whole batch in one message, for the queue's contract. */
static pl_status nats_encode(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                             pl_err *err)
{
    nats_exporter *x = arg;
    write_head(x, out, x->json[batch->signal], -1, batch_tenant(batch));
    if (!encode_body(x, batch, out) || !pl_buf_ok(out))
        return pl_errf(err, PL_ERR_NOMEM, "out of memory encoding %s",
                       pl_signal_name(batch->signal));
    *items = pl_batch_items(batch);
    return PL_OK;
}

static void nats_destroy(void *self);

static pl_status nats_create(const pl_create_settings *settings, const void *config, void **out,
                             pl_err *err)
{
    const nats_exporter_config *c = config;
    nats_exporter *x = calloc(1, sizeof(*x));
    if (!x)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    pl_status init = pl_nats_client_init(&x->cl, settings, c->endpoint, c->jetstream.domain,
                                         &c->token, &c->user, &c->nkey_user_file, &c->tls, err);
    if (init == PL_ERR_INTERNAL) {
        free(x);
        return init;
    }
    bool ok = init == PL_OK;
    x->partitions = (unsigned)c->partitions;
    if (getrandom(x->nonce, sizeof(x->nonce), 0) != (ssize_t)sizeof(x->nonce)) {
        uint64_t t = pl_time_now_ns() ^ ((uint64_t)(uintptr_t)x << 16);
        memcpy(x->nonce, &t, sizeof(t));
    }
    x->publish_timeout_ms = c->jetstream.publish_timeout / 1000000;
    if (x->publish_timeout_ms <= 0)
        x->publish_timeout_ms = 1;
    const nats_exporter_signal_config *sig[PL_SIGNAL_COUNT] = {
        [PL_SIGNAL_TRACES] = &c->traces,
        [PL_SIGNAL_PROFILES] = &c->profiles,
        [PL_SIGNAL_LOGS] = &c->logs,
        [PL_SIGNAL_METRICS] = &c->metrics,
    };
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        x->subjects[s] = subject_text(sig[s]->subject, (pl_signal)s);
        ok = ok && x->subjects[s];
        if (pl_nats_marshaler_parse(sig[s]->marshaler, &x->json[s]) != 0)
            x->json[s] = false;
    }
    if (!ok) {
        nats_destroy(x);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    x->published = pl_stats_counter(x->cl.stats, "nats_messages_published",
                                    "messages the stream acknowledged");
    x->duplicates = pl_stats_counter(
        x->cl.stats, "nats_publish_duplicates",
        "acknowledged publishes the stream had stored already (a retry after a lost ack)");
    x->publish_failures = pl_stats_counter(x->cl.stats, "nats_publish_failures",
                                           "publishes without an acknowledgement (retried)");
    x->split = pl_stats_counter(x->cl.stats, "nats_oversize_splits",
                                "batches split in halves to stay under the message size");
    if (pl_nats_client_async(&x->cl, x, on_done, err) != PL_OK) {
        nats_destroy(x);
        return PL_ERR_INTERNAL;
    }
    pl_queue_sender sender = {nats_encode, nats_send, x, false, false};
    x->queue = pl_queue_new(settings, &c->sending_queue, &c->retry_on_failure, &sender, err);
    if (!x->queue) {
        nats_destroy(x);
        return PL_ERR_INTERNAL;
    }
    int consumers = (int)c->sending_queue.num_consumers;
    x->n_threads = consumers < 1 ? 1 : consumers > MAX_PUBLISHERS ? MAX_PUBLISHERS : consumers;
    *out = x;
    return PL_OK;
}

static pl_status nats_start(void *self, pl_err *err)
{
    nats_exporter *x = self;
    pl_status st =
        pl_nats_connect_js(x->cl.id, &x->cl.conn, x->publish_timeout_ms, &x->cl.nc, &x->cl.js, err);
    if (st != PL_OK)
        return st;
    for (int i = 0; i < x->n_threads; i++)
        if (uv_thread_create(&x->threads[x->threads_started], publisher_main, x) == 0)
            x->threads_started++;
    if (!x->threads_started)
        return pl_errf(err, PL_ERR_INTERNAL, "cannot start a publisher thread");
    for (int s2 = 0; s2 < PL_SIGNAL_COUNT; s2++)
        pl_debug(x->cl.id, "%s -> %s%s", pl_signal_name((pl_signal)s2), x->subjects[s2],
                 x->partitions && (s2 == PL_SIGNAL_TRACES || s2 == PL_SIGNAL_PROFILES)
                     ? ".<partition>"
                     : "");
    return pl_queue_start(x->queue, err);
}

static void nats_shutdown(void *self)
{
    nats_exporter *x = self;
    pl_queue_shutdown(x->queue);
}

static size_t nats_pending(void *self)
{
    nats_exporter *x = self;
    return pl_queue_pending(x->queue);
}

static struct pl_queue *nats_stored_queue(void *self)
{
    nats_exporter *x = self;
    return pl_queue_stored(x->queue);
}

static void nats_destroy(void *self)
{
    nats_exporter *x = self;
    if (!x)
        return;
    /* Closing the connection ends the publishes that wait for an ack; then
     * the threads stop and every job still out goes back to the queue as
     * retryable (stored payloads stay on disk; in-memory ones the queue
     * counts when destroyed). */
    if (x->cl.nc)
        natsConnection_Close(x->cl.nc);
    uv_mutex_lock(&x->cl.lock);
    x->stop = true;
    uv_cond_broadcast(&x->cl.wake);
    uv_mutex_unlock(&x->cl.lock);
    for (int i = 0; i < x->threads_started; i++)
        uv_thread_join(&x->threads[i]);
    nats_job *left = x->todo;
    x->todo = x->todo_tail = NULL;
    while (left) {
        nats_job *n = left->next;
        pl_send_result_set(&left->result, PL_SEND_RETRYABLE, "exporter stopped");
        left->next = x->done;
        x->done = left;
        left = n;
    }
    if (x->cl.async_ready)
        on_done(&x->cl.async);
    if (x->queue)
        pl_queue_destroy(x->queue);
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        free(x->subjects[s]);
    pl_buf_free(&x->scratch);
    pl_nats_client_release(&x->cl, x);
}

const pl_component_type pl_exporter_nats = {
    PL_COMPONENT_HEAD("nats", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &nats_exporter_section),
    .description = "publishes traces, profiles, logs and metrics to NATS JetStream (one OTLP "
                   "request per message, acknowledged by the stream), optionally partitioned "
                   "by trace id, with a sending queue and retries",
    PL_COMPONENT_LIFECYCLE(nats_create, nats_start, nats_shutdown, nats_destroy),
    .export = nats_export,
    .pending = nats_pending,
    .stored_queue = nats_stored_queue,
};
