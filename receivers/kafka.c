/*
 * kafka.c: the `kafka` receiver, in the OpenTelemetry Collector's shape:
 * a member of a consumer group (group_id) that reads OTLP records (one
 * Export*ServiceRequest each, protobuf or OTLP/JSON) from a topic list per
 * signal and hands each record to its pipeline as one batch, with the
 * record's kafka.topic, kafka.partition, kafka.offset and every header as
 * request metadata.
 *
 * Bus progress. Traces and profiles batches also carry the partition they
 * came from and how many span records of that partition number (on the
 * traces topics this member reads) are still to be handed on, as the client
 * knows from its fetches and end-of-partition events (PL_META_BUS_PARTITION,
 * PL_META_BUS_SPANS_LAG, core/model.h): correlation holds the samples of a
 * partition whose spans lag (processors/correlation_bus.c). Record headers
 * never set these keys.
 *
 * At least once. With message_marking.after (the default here) a record's
 * offset is stored for commit only once the pipeline accepted the batch,
 * i.e. once pl_consumer_consume returned PL_OK, which with a persistent
 * sending queue or the write-ahead log behind the pipeline means it is on
 * disk. Offsets are committed in order per partition (librdkafka commits the
 * stored offsets every autocommit.interval, and on a rebalance or a clean
 * shutdown), so a crash re-delivers what was accepted since the last
 * commit and loses nothing.
 *
 * Back-pressure. When the pipeline refuses a record (PL_ERR_REFUSED: a full
 * queue, the memory limiter) its partition is paused and the record kept
 * as the partition's next one: after error_backoff (growing while the
 * refusals go on) the partition seeks back to it and resumes. Records of
 * the partition already fetched are dropped meanwhile (they come again
 * after the seek), other partitions go on. Nothing is dropped and the loop
 * does not spin. A record that fails for good (it does not decode, or the
 * pipeline rejects it as invalid) is logged and counted; with
 * message_marking.on_error it is marked and skipped, else it is retried like
 * a refusal.
 *
 * Threads: records, rebalances and commit results are taken from
 * librdkafka's consumer queue on the loop (net/kafka.h's waker); no
 * proflink code runs on librdkafka's threads.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strlist.h"
#include "net/retry.h"
#include "net/tls.h"
#include "net/kafka.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

#include "receivers/kafka.config.h"

#define SERVE_BATCH 256 /* records per loop wake-up, so the loop stays responsive */

static int kafka_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    kafka_receiver_cfg *c = cfg_;
    int errors = 0;
    const kafka_topics_cfg *sig[] = {&c->traces, &c->profiles, &c->logs, &c->metrics};
    for (int i = 0; i < 4; i++) {
        const char *e = sig[i]->encoding ? sig[i]->encoding : "";
        errors += pl_cfg_check(ctx, strcmp(e, "otlp_proto") == 0 || strcmp(e, "otlp_json") == 0,
                               pl_signal_name((pl_signal)i),
                               "encoding must be otlp_proto or otlp_json, got \"%s\"", e);
    }
    const char *o = c->initial_offset ? c->initial_offset : "";
    errors += pl_cfg_check(ctx, strcmp(o, "latest") == 0 || strcmp(o, "earliest") == 0,
                           "initial_offset", "must be latest or earliest, got \"%s\"", o);
    for (size_t i = 0; i < c->group_rebalance_strategies.n; i++) {
        const char *s = c->group_rebalance_strategies.items[i];
        errors += pl_cfg_check(ctx,
                               strcmp(s, "range") == 0 || strcmp(s, "roundrobin") == 0 ||
                                   strcmp(s, "cooperative-sticky") == 0,
                               "group_rebalance_strategies",
                               "must be range, roundrobin or cooperative-sticky, got \"%s\"", s);
    }
    return errors;
}

#include "receivers/kafka.config.inc"

/* What the receiver knows of one assigned partition. */
typedef struct part {
    char *topic;
    int32_t partition;
    pl_signal signal;
    int64_t next_offset;  /* after the last record handed on; -1: none yet */
    int64_t store_offset; /* to store for commit at the end of this wake-up; -1: none */
    int64_t blocked_at;   /* a refused record's offset, the next to deliver; -1: none */
    int64_t eof_offset;   /* where the client last reached the partition's end; -1: not yet */
    bool paused;          /* paused until resume_at_ns, then seek to blocked_at */
    uint64_t resume_at_ns;
    int64_t backoff_ns;
} part;

typedef struct kafka_receiver {
    char *id;
    uv_loop_t *loop;
    pl_stats *stats;
    pl_consumer *next[PL_SIGNAL_COUNT];
    rd_kafka_conf_t *conf; /* until start */
    rd_kafka_t *rk;
    rd_kafka_queue_t *queue;
    pl_kafka_waker *waker;
    pl_strlist topics[PL_SIGNAL_COUNT];
    bool json[PL_SIGNAL_COUNT];
    bool mark_after, mark_on_error;
    bool autocommit;
    bool extract_headers;
    pl_strlist headers;
    int64_t backoff_initial, backoff_max;
    double backoff_multiplier;
    bool closing;
    part *parts;
    size_t n_parts;
    uint64_t last_lag_ns;
    uint64_t *received, *refusals, *decode_errors, *commits, *commit_failures, *rebalances;
    int64_t *lag, *paused_gauge, *assigned_gauge;
} kafka_receiver;

/* ---- partitions --------------------------------------------------------- */

static part *find_part(kafka_receiver *r, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < r->n_parts; i++)
        if (r->parts[i].partition == partition && strcmp(r->parts[i].topic, topic) == 0)
            return &r->parts[i];
    return NULL;
}

static int signal_of_topic(const kafka_receiver *r, const char *topic)
{
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        for (size_t i = 0; i < r->topics[s].n; i++)
            if (strcmp(r->topics[s].items[i], topic) == 0)
                return s;
    return -1;
}

static void clear_parts(kafka_receiver *r)
{
    for (size_t i = 0; i < r->n_parts; i++)
        free(r->parts[i].topic);
    free(r->parts);
    r->parts = NULL;
    r->n_parts = 0;
}

static void set_parts(kafka_receiver *r, const rd_kafka_topic_partition_list_t *list)
{
    clear_parts(r);
    r->parts = calloc(list->cnt ? (size_t)list->cnt : 1, sizeof(*r->parts));
    if (!r->parts)
        return;
    for (int i = 0; i < list->cnt; i++) {
        part *p = &r->parts[r->n_parts];
        int s = signal_of_topic(r, list->elems[i].topic);
        p->topic = strdup(list->elems[i].topic);
        if (!p->topic || s < 0) {
            free(p->topic);
            continue;
        }
        p->partition = list->elems[i].partition;
        p->signal = (pl_signal)s;
        p->next_offset = p->store_offset = p->blocked_at = p->eof_offset = -1;
        r->n_parts++;
    }
    *r->assigned_gauge = (int64_t)r->n_parts;
    *r->paused_gauge = 0;
}

/* Stores the offsets marked during this wake-up for commit. */
static void flush_stores(kafka_receiver *r)
{
    rd_kafka_topic_partition_list_t *list = NULL;
    for (size_t i = 0; i < r->n_parts; i++) {
        part *p = &r->parts[i];
        if (p->store_offset < 0)
            continue;
        if (!list)
            list = rd_kafka_topic_partition_list_new(4);
        if (list)
            rd_kafka_topic_partition_list_add(list, p->topic, p->partition)->offset =
                p->store_offset;
        p->store_offset = -1;
    }
    if (!list)
        return;
    rd_kafka_resp_err_t e = rd_kafka_offsets_store(r->rk, list);
    if (e && e != RD_KAFKA_RESP_ERR__STATE) /* __STATE: revoked meanwhile */
        pl_warn(r->id, "storing offsets: %s", rd_kafka_err2str(e));
    if (!r->autocommit) /* commit what was just stored (asynchronously) */
        rd_kafka_commit(r->rk, NULL, 1);
    rd_kafka_topic_partition_list_destroy(list);
}

static void pause_part(kafka_receiver *r, part *p, int64_t offset)
{
    p->backoff_ns = p->blocked_at == offset && p->backoff_ns
                        ? (int64_t)((double)p->backoff_ns * r->backoff_multiplier)
                        : r->backoff_initial;
    if (r->backoff_max > 0 && p->backoff_ns > r->backoff_max)
        p->backoff_ns = r->backoff_max;
    p->blocked_at = offset;
    p->resume_at_ns = pl_time_mono_ns() + (uint64_t)p->backoff_ns;
    if (p->paused)
        return;
    p->paused = true;
    (*r->paused_gauge)++;
    rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
    if (!list)
        return;
    rd_kafka_topic_partition_list_add(list, p->topic, p->partition);
    rd_kafka_pause_partitions(r->rk, list);
    rd_kafka_topic_partition_list_destroy(list);
}

/* Paused partitions whose backoff is over seek back to their refused
 * record and resume. */
static void resume_due(kafka_receiver *r)
{
    uint64_t now = pl_time_mono_ns();
    for (size_t i = 0; i < r->n_parts; i++) {
        part *p = &r->parts[i];
        if (!p->paused || now < p->resume_at_ns)
            continue;
        rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
        if (!list)
            return;
        rd_kafka_topic_partition_list_add(list, p->topic, p->partition)->offset = p->blocked_at;
        rd_kafka_error_t *err =
            rd_kafka_seek_partitions(r->rk, list, 0); /* asynchronous: the loop does not wait */
        if (err) {
            pl_warn(r->id, "seeking %s[%d] to %" PRId64 ": %s", p->topic, p->partition,
                    p->blocked_at, rd_kafka_error_string(err));
            rd_kafka_error_destroy(err);
        }
        rd_kafka_resume_partitions(r->rk, list);
        rd_kafka_topic_partition_list_destroy(list);
        p->paused = false;
        (*r->paused_gauge)--;
    }
}

/* ---- records ------------------------------------------------------------ */

static pl_bytes dup_bytes(pl_batch *b, const void *p, size_t n)
{
    return pl_batch_bytes(b, p, n);
}

/* Span records of partition number `num` (of the traces topics this member
 * reads) still to be handed on, as the client knows now: `cur`, when set,
 * is the partition of the record being handed on, `cur_next` the position
 * after it. -1: not known yet (nothing fetched); -2: no traces partition
 * of that number is ours (its spans go to another member: nothing to wait
 * for). */
static int64_t spans_lag(kafka_receiver *r, int32_t num, const part *cur, int64_t cur_next)
{
    int64_t lag = -2;
    for (size_t i = 0; i < r->n_parts; i++) {
        const part *p = &r->parts[i];
        if (p->signal != PL_SIGNAL_TRACES || p->partition != num)
            continue;
        int64_t pos = p == cur                         ? cur_next
                      : p->blocked_at >= 0             ? p->blocked_at
                      : p->next_offset > p->eof_offset ? p->next_offset
                                                       : p->eof_offset;
        int64_t lo = -1, hi = -1;
        if (pos < 0 ||
            rd_kafka_get_watermark_offsets(r->rk, p->topic, p->partition, &lo, &hi) != 0 || hi < 0)
            return -1;
        lag = (lag < 0 ? 0 : lag) + (hi > pos ? hi - pos : 0);
    }
    return lag;
}

/* kafka.topic, kafka.partition, kafka.offset, the bus progress keys
 * (core/model.h; for traces and profiles, when this member reads the
 * partition's spans) and every header. */
static void add_metadata(kafka_receiver *r, const part *p, pl_batch *b, const rd_kafka_message_t *m)
{
    rd_kafka_headers_t *hdrs = NULL;
    size_t nh = 0;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs)
        nh = rd_kafka_header_cnt(hdrs);
    pl_kv *items = pl_batch_alloc(b, (5 + nh) * sizeof(*items));
    if (!items)
        return;
    char num[32];
    const char *topic = rd_kafka_topic_name(m->rkt);
    uint32_t k = 0;
    items[k].key = PL_BYTES_LIT("kafka.topic");
    items[k++].value = pl_value_string(dup_bytes(b, topic, strlen(topic)));
    snprintf(num, sizeof(num), "%" PRId32, m->partition);
    items[k].key = PL_BYTES_LIT("kafka.partition");
    items[k++].value = pl_value_string(dup_bytes(b, num, strlen(num)));
    snprintf(num, sizeof(num), "%" PRId64, m->offset);
    items[k].key = PL_BYTES_LIT("kafka.offset");
    items[k++].value = pl_value_string(dup_bytes(b, num, strlen(num)));
    int64_t lag = b->signal == PL_SIGNAL_TRACES || b->signal == PL_SIGNAL_PROFILES
                      ? spans_lag(r, m->partition, p, m->offset + 1)
                      : -2;
    if (lag >= -1) {
        char name[300];
        snprintf(name, sizeof(name), "%s/%" PRId32, r->id, m->partition);
        items[k].key = PL_BYTES_LIT(PL_META_BUS_PARTITION);
        items[k++].value = pl_value_string(dup_bytes(b, name, strlen(name)));
        if (lag >= 0)
            snprintf(num, sizeof(num), "%" PRId64, lag);
        else
            snprintf(num, sizeof(num), "unknown");
        items[k].key = PL_BYTES_LIT(PL_META_BUS_SPANS_LAG);
        items[k++].value = pl_value_string(dup_bytes(b, num, strlen(num)));
    }
    for (size_t i = 0; i < nh; i++) {
        const char *name;
        const void *v;
        size_t vl;
        if (rd_kafka_header_get_all(hdrs, i, &name, &v, &vl) != RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        if (pl_meta_key_reserved(name, strlen(name)))
            continue; /* set by the receiver only, never by the data */
        items[k].key = dup_bytes(b, name, strlen(name));
        items[k++].value = pl_value_string(v ? dup_bytes(b, v, vl) : (pl_bytes){0});
    }
    b->metadata.items = items;
    b->metadata.n = k;
    if (!r->extract_headers || !hdrs ||
        (b->signal != PL_SIGNAL_TRACES && b->signal != PL_SIGNAL_PROFILES))
        return;
    /* header_extraction: kafka.header.<name> on every resource */
    for (size_t h = 0; h < r->headers.n; h++) {
        const char *name = r->headers.items[h];
        const void *v;
        size_t vl;
        if (rd_kafka_header_get_last(hdrs, name, &v, &vl) != RD_KAFKA_RESP_ERR_NO_ERROR)
            continue;
        char key[300];
        int kl = snprintf(key, sizeof(key), "kafka.header.%s", name);
        if (kl < 0 || (size_t)kl >= sizeof(key))
            continue;
        pl_bytes kb = dup_bytes(b, key, (size_t)kl);
        pl_value val = pl_value_string(v ? dup_bytes(b, v, vl) : (pl_bytes){0});
        uint32_t n = b->signal == PL_SIGNAL_TRACES ? b->data.traces.n_resources
                                                   : b->data.profiles.n_resources;
        for (uint32_t i = 0; i < n; i++) {
            bool *has = b->signal == PL_SIGNAL_TRACES ? &b->data.traces.resources[i].has_resource
                                                      : &b->data.profiles.resources[i].has_resource;
            pl_resource *res = b->signal == PL_SIGNAL_TRACES
                                   ? &b->data.traces.resources[i].resource
                                   : &b->data.profiles.resources[i].resource;
            *has = true;
            pl_attrs_put(&b->arena, &res->attrs, kb, val);
        }
    }
}

/* The record's value as a batch (the value copied: the batch outlives the
 * message). *items: what the counters count. */
static pl_status decode_record(kafka_receiver *r, pl_signal signal, const rd_kafka_message_t *m,
                               pl_batch **out, size_t *items, pl_err *err)
{
    *out = NULL;
    const uint8_t *data = m->payload;
    size_t len = m->len;
    uint8_t *copy = NULL;
    size_t copy_len = len;
    if (r->json[signal] && (signal == PL_SIGNAL_LOGS || signal == PL_SIGNAL_METRICS)) {
        pl_buf pb;
        pl_buf_init(&pb);
        pl_status st = pl_otlp_json_transcode(signal, data, len, PL_OTLP_DECODE_BUDGET, &pb, err);
        if (st != PL_OK) {
            pl_buf_free(&pb);
            return st;
        }
        copy = pl_buf_steal(&pb, &copy_len);
    } else {
        copy = malloc(len ? len : 1);
        if (copy && len)
            memcpy(copy, data, len);
    }
    if (!copy)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    pl_batch *b = pl_batch_new(signal);
    if (!b || pl_batch_adopt(b, copy, copy_len ? copy_len : 1) != 0) {
        free(copy);
        pl_batch_free(b);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    pl_status st;
    if (signal == PL_SIGNAL_TRACES || signal == PL_SIGNAL_PROFILES) {
        st = r->json[signal] ? pl_otlp_json_decode_ex(b, copy, copy_len, PL_OTLP_DECODE_BUDGET, err)
                             : pl_otlp_decode_ex(b, copy, copy_len, PL_OTLP_DECODE_BUDGET, err);
        *items = st == PL_OK ? pl_batch_items(b) : 0;
    } else {
        st = signal == PL_SIGNAL_LOGS ? pl_otlp_count_logs(copy, copy_len, items, err)
                                      : pl_otlp_count_metrics(copy, copy_len, items, err);
        b->data.raw = (pl_bytes){copy, (uint32_t)copy_len};
    }
    if (st != PL_OK) {
        pl_batch_free(b);
        return st;
    }
    *out = b;
    return PL_OK;
}

/* Marks `offset` of `p` done: the committed position moves past it. */
static void mark(part *p, int64_t offset)
{
    p->store_offset = offset + 1;
}

/* One record: decode, hand on, and mark or pause. */
static void handle_record(kafka_receiver *r, const rd_kafka_message_t *m)
{
    const char *topic = rd_kafka_topic_name(m->rkt);
    part *p = find_part(r, topic, m->partition);
    if (!p)
        return; /* not (or no longer) ours */
    if (p->paused)
        return; /* fetched before the pause: it comes again after the seek */
    if (p->blocked_at >= 0 && m->offset != p->blocked_at) {
        int64_t lo = -1, hi = -1;
        rd_kafka_get_watermark_offsets(r->rk, topic, m->partition, &lo, &hi);
        /* only skip ahead when the awaited record is gone (retention) */
        if (m->offset < p->blocked_at || lo <= p->blocked_at)
            return;
    }
    (*r->received)++;
    pl_signal signal = p->signal;
    if (!r->mark_after)
        mark(p, m->offset);
    pl_err err = {{0}};
    pl_batch *b = NULL;
    size_t items = 0;
    pl_status st = decode_record(r, signal, m, &b, &items, &err);
    if (st == PL_OK) {
        add_metadata(r, p, b, m);
        b->received_unix_nano = pl_time_now_ns();
        bool empty = (signal == PL_SIGNAL_TRACES && b->data.traces.n_resources == 0) ||
                     (signal == PL_SIGNAL_PROFILES && b->data.profiles.n_resources == 0);
        if (empty) {
            pl_batch_free(b);
        } else {
            st = pl_consumer_consume(r->next[signal], b);
            pl_stats_add_via(r->stats, PL_TRANSPORT_NONE, signal,
                             st == PL_OK ? PL_STAT_ACCEPTED : PL_STAT_REFUSED, items);
        }
    } else {
        (*r->decode_errors)++;
        pl_warn(r->id, "%s[%d] offset %" PRId64 ": %s", topic, m->partition, m->offset,
                err.msg[0] ? err.msg : pl_status_name(st));
    }
    bool retry_later = st == PL_ERR_REFUSED || st == PL_ERR_NOMEM || st == PL_ERR_THROTTLED;
    if (st == PL_OK || (!retry_later && r->mark_on_error)) {
        p->next_offset = m->offset + 1;
        p->blocked_at = -1;
        p->backoff_ns = 0;
        mark(p, m->offset);
        return;
    }
    (*r->refusals)++;
    pause_part(r, p, m->offset);
}

/* ---- librdkafka callbacks (served on the loop) -------------------------- */

static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t e,
                         rd_kafka_topic_partition_list_t *list, void *opaque)
{
    kafka_receiver *r = opaque;
    bool cooperative = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    (*r->rebalances)++;
    if (e == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        if (cooperative) {
            rd_kafka_error_t *err = rd_kafka_incremental_assign(rk, list);
            if (err)
                rd_kafka_error_destroy(err);
            rd_kafka_topic_partition_list_t *all = NULL;
            if (rd_kafka_assignment(rk, &all) == RD_KAFKA_RESP_ERR_NO_ERROR && all) {
                set_parts(r, all);
                rd_kafka_topic_partition_list_destroy(all);
            }
        } else {
            rd_kafka_assign(rk, list);
            set_parts(r, list);
        }
        /* a partition paused by back-pressure before a rebalance starts
         * afresh from its committed offset */
        rd_kafka_resume_partitions(rk, list);
        pl_info(r->id, "assigned %d partitions", list->cnt);
        return;
    }
    /* revoked (or lost): what was accepted is stored before it goes */
    flush_stores(r);
    if (cooperative) {
        rd_kafka_error_t *err = rd_kafka_incremental_unassign(rk, list);
        if (err)
            rd_kafka_error_destroy(err);
        rd_kafka_topic_partition_list_t *all = NULL;
        if (rd_kafka_assignment(rk, &all) == RD_KAFKA_RESP_ERR_NO_ERROR && all) {
            set_parts(r, all);
            rd_kafka_topic_partition_list_destroy(all);
        }
    } else {
        rd_kafka_assign(rk, NULL);
        clear_parts(r);
        *r->assigned_gauge = 0;
        *r->paused_gauge = 0;
    }
}

static void on_commit(rd_kafka_t *rk, rd_kafka_resp_err_t e,
                      rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
    kafka_receiver *r = opaque;
    if (e == RD_KAFKA_RESP_ERR__NO_OFFSET)
        return; /* nothing new to commit */
    if (e) {
        (*r->commit_failures)++;
        pl_warn(r->id, "committing offsets: %s", rd_kafka_err2str(e));
        return;
    }
    (*r->commits)++;
}

static void on_error(rd_kafka_t *rk, int e, const char *reason, void *opaque)
{
    kafka_receiver *r = opaque;
    if (e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || e == RD_KAFKA_RESP_ERR__TRANSPORT)
        pl_debug(r->id, "%s", reason);
    else
        pl_warn(r->id, "%s", reason);
}

/* Lag: records behind the partitions' high watermarks, from what the
 * client already knows (no broker round trip). */
static void update_lag(kafka_receiver *r)
{
    uint64_t now = pl_time_mono_ns();
    if (now - r->last_lag_ns < 1000000000ull)
        return;
    r->last_lag_ns = now;
    int64_t lag = 0;
    for (size_t i = 0; i < r->n_parts; i++) {
        int64_t lo = -1, hi = -1;
        part *p = &r->parts[i];
        if (p->next_offset < 0 ||
            rd_kafka_get_watermark_offsets(r->rk, p->topic, p->partition, &lo, &hi) != 0 || hi < 0)
            continue;
        if (hi > p->next_offset)
            lag += hi - p->next_offset;
    }
    *r->lag = lag;
}

static void serve(void *arg)
{
    kafka_receiver *r = arg;
    if (!r->rk)
        return;
    resume_due(r);
    int n = 0;
    for (; n < SERVE_BATCH; n++) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(r->rk, 0);
        if (!m)
            break;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            part *p = m->rkt ? find_part(r, rd_kafka_topic_name(m->rkt), m->partition) : NULL;
            if (p)
                p->eof_offset = m->offset; /* caught up: spans_lag knows it */
        } else if (m->err) {
            pl_warn(r->id, "%s", rd_kafka_message_errstr(m));
        } else if (!r->closing) {
            handle_record(r, m);
        }
        rd_kafka_message_destroy(m);
    }
    flush_stores(r);
    update_lag(r);
    if (n == SERVE_BATCH)
        pl_kafka_waker_again(r->waker);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void kafka_destroy(void *self);

static pl_status set_int(rd_kafka_conf_t *conf, const char *key, int64_t v, pl_err *err)
{
    char text[32];
    snprintf(text, sizeof(text), "%lld", (long long)v);
    return pl_kafka_conf_set(conf, key, text, err);
}

static pl_status kafka_create(const pl_create_settings *settings, const void *config, void **out,
                              pl_err *err)
{
    const kafka_receiver_cfg *c = config;
    kafka_receiver *r = calloc(1, sizeof(*r));
    if (!r)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    r->id = strdup(settings->id ? settings->id : "kafka");
    r->loop = settings->loop;
    r->stats = settings->stats;
    r->mark_after = c->message_marking.after;
    r->mark_on_error = c->message_marking.on_error;
    r->autocommit = c->autocommit.enable;
    r->extract_headers = c->header_extraction.extract_headers;
    r->backoff_initial = c->error_backoff.initial_interval;
    r->backoff_max = c->error_backoff.max_interval;
    r->backoff_multiplier = c->error_backoff.multiplier;
    const kafka_topics_cfg *sig[] = {&c->traces, &c->profiles, &c->logs, &c->metrics};
    bool ok = r->id && pl_strlist_copy(&r->headers, &c->header_extraction.headers) == 0;
    for (int s = 0; s < PL_SIGNAL_COUNT && ok; s++) {
        r->next[s] = settings->next[s];
        r->json[s] = sig[s]->encoding && strcmp(sig[s]->encoding, "otlp_json") == 0;
        if (r->next[s])
            ok = pl_strlist_copy(&r->topics[s], &sig[s]->topics) == 0;
    }
    if (!ok) {
        kafka_destroy(r);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    r->received = pl_stats_counter(r->stats, "kafka_records_received", "records read from Kafka");
    r->refusals = pl_stats_counter(r->stats, "kafka_records_retried",
                                   "records the pipeline refused (partition paused, retried)");
    r->decode_errors = pl_stats_counter(r->stats, "kafka_records_undecodable",
                                        "records whose value is not a valid OTLP request");
    r->commits = pl_stats_counter(r->stats, "kafka_commits", "offset commits acknowledged");
    r->commit_failures =
        pl_stats_counter(r->stats, "kafka_commit_failures", "offset commits that failed");
    r->rebalances =
        pl_stats_counter(r->stats, "kafka_rebalances", "partition assignments and revocations");
    r->lag = pl_stats_gauge(r->stats, "kafka_lag", "records behind the assigned partitions' ends");
    r->paused_gauge =
        pl_stats_gauge(r->stats, "kafka_partitions_paused", "partitions paused by back-pressure");
    r->assigned_gauge =
        pl_stats_gauge(r->stats, "kafka_partitions_assigned", "partitions this member reads");
    pl_kafka_conn conn = {r->id, &c->brokers, c->client_id, &c->tls, &c->auth};
    r->conf = pl_kafka_conf_new(&conn, err);
    pl_status st = r->conf ? PL_OK : PL_ERR_INVALID;
    pl_buf strategies;
    pl_buf_init(&strategies);
    for (size_t i = 0; i < c->group_rebalance_strategies.n; i++) {
        if (i)
            pl_buf_append_byte(&strategies, ',');
        pl_buf_append_str(&strategies, c->group_rebalance_strategies.items[i]);
    }
    pl_buf_append_byte(&strategies, 0);
    if (st == PL_OK)
        st = pl_kafka_conf_set(r->conf, "group.id", c->group_id, err);
    if (st == PL_OK && c->group_rebalance_strategies.n)
        st = pl_kafka_conf_set(r->conf, "partition.assignment.strategy",
                               (const char *)strategies.data, err);
    pl_buf_free(&strategies);
    if (st == PL_OK)
        st = pl_kafka_conf_set(r->conf, "auto.offset.reset", c->initial_offset, err);
    if (st == PL_OK)
        st = pl_kafka_conf_set(r->conf, "enable.auto.offset.store", "false", err);
    if (st == PL_OK) /* tells when a partition's spans are caught up (spans_lag) */
        st = pl_kafka_conf_set(r->conf, "enable.partition.eof", "true", err);
    if (st == PL_OK)
        st = pl_kafka_conf_set(r->conf, "enable.auto.commit",
                               c->autocommit.enable ? "true" : "false", err);
    if (st == PL_OK)
        st = set_int(r->conf, "auto.commit.interval.ms", c->autocommit.interval / 1000000, err);
    if (st == PL_OK)
        st = set_int(r->conf, "session.timeout.ms", c->session_timeout / 1000000, err);
    if (st == PL_OK)
        st = set_int(r->conf, "heartbeat.interval.ms", c->heartbeat_interval / 1000000, err);
    if (st == PL_OK)
        st = set_int(r->conf, "fetch.max.bytes", c->max_fetch_size, err);
    if (st != PL_OK) {
        kafka_destroy(r);
        return st;
    }
    rd_kafka_conf_set_opaque(r->conf, r);
    rd_kafka_conf_set_rebalance_cb(r->conf, on_rebalance);
    rd_kafka_conf_set_offset_commit_cb(r->conf, on_commit);
    rd_kafka_conf_set_error_cb(r->conf, on_error);
    *out = r;
    return PL_OK;
}

static pl_status kafka_start(void *self, pl_err *err)
{
    kafka_receiver *r = self;
    rd_kafka_topic_partition_list_t *topics = rd_kafka_topic_partition_list_new(4);
    if (!topics)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        for (size_t i = 0; r->next[s] && i < r->topics[s].n; i++)
            rd_kafka_topic_partition_list_add(topics, r->topics[s].items[i], RD_KAFKA_PARTITION_UA);
    if (topics->cnt == 0) {
        rd_kafka_topic_partition_list_destroy(topics);
        return pl_errf(err, PL_ERR_INVALID, "%s: no pipeline takes a signal it reads", r->id);
    }
    char why[512];
    r->rk = rd_kafka_new(RD_KAFKA_CONSUMER, r->conf, why, sizeof(why));
    if (!r->rk) {
        rd_kafka_topic_partition_list_destroy(topics);
        return pl_errf(err, PL_ERR_INVALID, "kafka consumer: %s", why);
    }
    r->conf = NULL;
    rd_kafka_poll_set_consumer(r->rk);
    r->queue = rd_kafka_queue_get_consumer(r->rk);
    rd_kafka_resp_err_t e = rd_kafka_subscribe(r->rk, topics);
    rd_kafka_topic_partition_list_destroy(topics);
    if (e)
        return pl_errf(err, PL_ERR_INVALID, "kafka subscribe: %s", rd_kafka_err2str(e));
    r->waker = pl_kafka_waker_new(r->loop, r->queue, 100, serve, r, err);
    return r->waker ? PL_OK : PL_ERR_INTERNAL;
}

static void kafka_shutdown(void *self)
{
    kafka_receiver *r = self;
    /* Records fetched from now on are left for the next owner of their
     * partition (not marked); what was accepted is stored. */
    r->closing = true;
    if (r->rk)
        flush_stores(r);
}

static void kafka_destroy(void *self)
{
    kafka_receiver *r = self;
    if (!r)
        return;
    pl_kafka_waker_close(r->waker);
    if (r->rk) {
        r->closing = true;
        /* commits the stored offsets and leaves the group (blocking: the
         * brokers answer within a round trip, or the session times out) */
        rd_kafka_consumer_close(r->rk);
        if (r->queue)
            rd_kafka_queue_destroy(r->queue);
        rd_kafka_destroy(r->rk);
    }
    if (r->conf)
        rd_kafka_conf_destroy(r->conf);
    clear_parts(r);
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        pl_strlist_free(&r->topics[s]);
    pl_strlist_free(&r->headers);
    free(r->id);
    free(r);
}

const pl_component_type pl_receiver_kafka = {
    PL_COMPONENT_HEAD("kafka", PL_KIND_RECEIVER, PL_SIGNALS_ALL, &kafka_section),
    .description = "reads OTLP records (the Collector's format) from Kafka topics as a member of "
                   "a consumer group; commits a record only after the pipeline accepted it",
    PL_COMPONENT_LIFECYCLE(kafka_create, kafka_start, kafka_shutdown, kafka_destroy),
};
