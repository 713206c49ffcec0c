/*
 * kafka.c: the `kafka` exporter, in the OpenTelemetry Collector's shape:
 * writes every batch to a Kafka topic per signal (otlp_spans,
 * otlp_profiles, otlp_logs, otlp_metrics), through librdkafka.
 *
 * Records. A record's value is one Export*ServiceRequest (TracesData /
 * ProfilesData are the same bytes), protobuf or OTLP/JSON, as the
 * Collector's exporter writes it, with no content-type header; headers come
 * only from include_metadata_keys (the batch's request metadata) and
 * record_headers. Without partition_traces_by_id a batch is one record
 * without a key. With it, the batch is split per trace: one record per
 * trace id, keyed by the 32-hex id; the same goes for profiles, split by
 * the trace id of each sample's link (samples without one travel in a
 * record without a key). Keyed records go to the partition the Collector's
 * default hasher picks (FNV-1a read as sarama does: net/kafka.h), so a
 * proflink and a Collector agent put a trace on the same partition, and
 * with as many partitions on otlp_profiles as on otlp_spans a trace's
 * samples sit on the partition number of its spans (docs/deployment.md:
 * the bus).
 *
 * Oversized batches. A record whose value would pass
 * producer.max_message_bytes is split in two halves (spans or samples, in
 * order) until every part fits, instead of failing the batch as the
 * Collector does; a single span or sample that cannot fit alone is dropped,
 * counted as failed and logged. Logs and metrics pass through as the
 * request they came in as and cannot be split: an oversized one is refused
 * (PL_ERR_TOO_LARGE).
 *
 * Queue. The exporter sits on the sending queue (exporters/queue.h) like the
 * OTLP exporters: encode() turns a batch into a payload holding all its
 * records (keys, values, metadata headers), send() produces them and calls
 * pl_queue_send_done once librdkafka reported every one delivered (or one
 * failed: a retry then sends the whole payload again, so records delivered
 * before the failure are written twice: at least once). The payload is
 * self-contained, so a persistent queue replays it after a restart.
 *
 *   payload  := 'K' 1 u16 n_headers header* u32 n_records record*
 *   header   := u16 key_len key u32 value_len value
 *   record   := u16 key_len key u32 value_len value      (little endian)
 *
 * Threads: delivery reports are served on the loop (net/kafka.h's waker),
 * never on librdkafka's threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strlist.h"
#include "exporters/otlp_common.h"
#include "exporters/queue.h"
#include "net/kafka.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

#include "exporters/kafka.config.h"

/* Room a record's key, headers and framing take besides its value, kept
 * free under max_message_bytes (librdkafka counts them against
 * message.max.bytes). */
#define RECORD_OVERHEAD 512

static const char *const codecs[] = {"none", "gzip", "snappy", "lz4", "zstd", NULL};

static bool one_of(const char *s, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (s && strcmp(s, list[i]) == 0)
            return true;
    return false;
}

static int kafka_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    kafka_exporter_cfg *c = cfg_;
    static const char *const both[] = {"otlp_proto", "otlp_json", NULL};
    static const char *const proto_only[] = {"otlp_proto", NULL};
    int errors = 0;
    errors += pl_cfg_check(ctx, one_of(c->traces.encoding, both), "traces",
                           "encoding must be otlp_proto or otlp_json");
    errors += pl_cfg_check(ctx, one_of(c->profiles.encoding, both), "profiles",
                           "encoding must be otlp_proto or otlp_json");
    errors += pl_cfg_check(ctx, one_of(c->logs.encoding, proto_only), "logs",
                           "encoding must be otlp_proto (logs pass through as protobuf)");
    errors += pl_cfg_check(ctx, one_of(c->metrics.encoding, proto_only), "metrics",
                           "encoding must be otlp_proto (metrics pass through as protobuf)");
    errors += pl_cfg_check(ctx, one_of(c->producer.compression, codecs), "producer",
                           "compression must be none, gzip, snappy, lz4 or zstd");
    const kafka_signal_cfg *sig[] = {&c->traces, &c->profiles, &c->logs, &c->metrics};
    for (int i = 0; i < 4; i++)
        errors += pl_cfg_check(ctx, sig[i]->topic && sig[i]->topic[0], pl_signal_name((pl_signal)i),
                               "topic must not be empty");
    return errors;
}

#include "exporters/kafka.config.inc"

typedef struct kafka_exporter {
    char *id;
    pl_stats *stats;
    uv_loop_t *loop;
    rd_kafka_conf_t *conf; /* until start hands it to rd_kafka_new */
    rd_kafka_t *rk;
    rd_kafka_queue_t *main_queue;
    rd_kafka_topic_t *topics[PL_SIGNAL_COUNT];
    char *topic_names[PL_SIGNAL_COUNT];
    pl_kafka_waker *waker;
    pl_queue *queue;
    bool json[PL_SIGNAL_COUNT];
    bool by_trace;
    size_t max_value; /* max_message_bytes less RECORD_OVERHEAD */
    pl_strlist meta_keys;
    pl_strmap record_headers;
    size_t in_flight; /* records produced, not yet reported */
    uint64_t *records_sent, *records_failed, *split_records, *dropped_oversize;
} kafka_exporter;

/* ---- encoding ----------------------------------------------------------- */

static void put_u16(pl_buf *b, size_t v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    pl_buf_append(b, x, 2);
}

static void put_u32(pl_buf *b, size_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    pl_buf_append(b, x, 4);
}

/* One span or sample, where it sits in the batch and the trace it belongs to. */
typedef struct item_ref {
    uint8_t trace_id[16]; /* all zero: no trace (record without a key) */
    uint32_t r, s, p, i;  /* resource, scope, profile (profiles only), item */
    uint32_t order;
} item_ref;

static int ref_cmp(const void *a_, const void *b_)
{
    const item_ref *a = a_, *b = b_;
    int c = memcmp(a->trace_id, b->trace_id, 16);
    if (c)
        return c;
    return a->order < b->order ? -1 : a->order > b->order;
}

static bool nonzero16(const uint8_t *b)
{
    for (int i = 0; i < 16; i++)
        if (b[i])
            return true;
    return false;
}

/* Every item of the batch, in batch order; trace ids filled when
 * `by_trace`. NULL with *n = 0 for an empty batch or out of memory (*oom). */
static item_ref *collect_refs(const pl_batch *b, bool by_trace, size_t *n, bool *oom)
{
    size_t total = pl_batch_items(b), k = 0;
    *n = 0;
    *oom = false;
    if (!total)
        return NULL;
    item_ref *refs = calloc(total, sizeof(*refs));
    if (!refs) {
        *oom = true;
        return NULL;
    }
    if (b->signal == PL_SIGNAL_TRACES) {
        const pl_traces *t = &b->data.traces;
        for (uint32_t r = 0; r < t->n_resources; r++)
            for (uint32_t s = 0; s < t->resources[r].n_scopes; s++)
                for (uint32_t i = 0; i < t->resources[r].scopes[s].n_spans && k < total; i++) {
                    const pl_span *sp = &t->resources[r].scopes[s].spans[i];
                    item_ref *ref = &refs[k];
                    *ref = (item_ref){.r = r, .s = s, .i = i, .order = (uint32_t)k};
                    if (by_trace && sp->trace_id_len == 16)
                        memcpy(ref->trace_id, sp->trace_id, 16);
                    k++;
                }
    } else {
        const pl_profiles *pf = &b->data.profiles;
        for (uint32_t r = 0; r < pf->n_resources; r++)
            for (uint32_t s = 0; s < pf->resources[r].n_scopes; s++)
                for (uint32_t p = 0; p < pf->resources[r].scopes[s].n_profiles; p++) {
                    const pl_profile *pr = &pf->resources[r].scopes[s].profiles[p];
                    for (uint32_t i = 0; i < pr->n_samples && k < total; i++) {
                        item_ref *ref = &refs[k];
                        *ref = (item_ref){.r = r, .s = s, .p = p, .i = i, .order = (uint32_t)k};
                        int32_t li = pr->samples[i].link_index;
                        if (by_trace && li > 0 && (uint32_t)li < pf->dict.n_links &&
                            pf->dict.links[li].trace_id_len == 16)
                            memcpy(ref->trace_id, pf->dict.links[li].trace_id, 16);
                        k++;
                    }
                }
    }
    if (by_trace)
        qsort(refs, k, sizeof(*refs), ref_cmp);
    *n = k;
    return refs;
}

/* Encodes the spans `refs[0..n)` (in batch order) as one request: a view
 * of the batch whose resources and scopes hold only those spans. */
static bool encode_traces_part(const pl_traces *t, const item_ref *refs, size_t n, bool json,
                               pl_buf *out)
{
    pl_resource_spans *res = calloc(n, sizeof(*res));
    pl_scope_spans *sc = calloc(n, sizeof(*sc));
    pl_span *sp = calloc(n, sizeof(*sp));
    bool ok = res && sc && sp;
    uint32_t nr = 0, ns = 0;
    for (size_t k = 0; ok && k < n; k++) {
        const item_ref *f = &refs[k];
        const pl_resource_spans *src_r = &t->resources[f->r];
        if (nr == 0 || refs[k - 1].r != f->r) {
            res[nr] = *src_r;
            res[nr].scopes = &sc[ns];
            res[nr].n_scopes = 0;
            nr++;
        }
        if (k == 0 || refs[k - 1].r != f->r || refs[k - 1].s != f->s) {
            sc[ns] = src_r->scopes[f->s];
            sc[ns].spans = &sp[k];
            sc[ns].n_spans = 0;
            ns++;
            res[nr - 1].n_scopes++;
        }
        sp[k] = src_r->scopes[f->s].spans[f->i];
        sc[ns - 1].n_spans++;
    }
    if (ok) {
        pl_traces view = {res, nr};
        ok = json ? pl_otlp_json_encode_traces(&view, out) : pl_otlp_encode_traces(&view, out);
    }
    free(res);
    free(sc);
    free(sp);
    return ok;
}

/* The same for samples; every part carries the whole dictionary. */
static bool encode_profiles_part(const pl_profiles *pf, const item_ref *refs, size_t n, bool json,
                                 pl_buf *out)
{
    pl_resource_profiles *res = calloc(n, sizeof(*res));
    pl_scope_profiles *sc = calloc(n, sizeof(*sc));
    pl_profile *pr = calloc(n, sizeof(*pr));
    pl_sample *sa = calloc(n, sizeof(*sa));
    bool ok = res && sc && pr && sa;
    uint32_t nr = 0, ns = 0, np = 0;
    for (size_t k = 0; ok && k < n; k++) {
        const item_ref *f = &refs[k], *prev = k ? &refs[k - 1] : NULL;
        const pl_resource_profiles *src_r = &pf->resources[f->r];
        bool new_r = !prev || prev->r != f->r;
        bool new_s = new_r || prev->s != f->s;
        bool new_p = new_s || prev->p != f->p;
        if (new_r) {
            res[nr] = *src_r;
            res[nr].scopes = &sc[ns];
            res[nr].n_scopes = 0;
            nr++;
        }
        if (new_s) {
            sc[ns] = src_r->scopes[f->s];
            sc[ns].profiles = &pr[np];
            sc[ns].n_profiles = 0;
            ns++;
            res[nr - 1].n_scopes++;
        }
        if (new_p) {
            pr[np] = src_r->scopes[f->s].profiles[f->p];
            pr[np].samples = &sa[k];
            pr[np].n_samples = 0;
            np++;
            sc[ns - 1].n_profiles++;
        }
        sa[k] = src_r->scopes[f->s].profiles[f->p].samples[f->i];
        pr[np - 1].n_samples++;
    }
    if (ok) {
        pl_profiles view = {res, nr, pf->has_dictionary, pf->dict};
        ok = json ? pl_otlp_json_encode_profiles(&view, out) : pl_otlp_encode_profiles(&view, out);
    }
    free(res);
    free(sc);
    free(pr);
    free(sa);
    return ok;
}

typedef struct encoder {
    kafka_exporter *x;
    const pl_batch *batch;
    bool json;
    pl_buf *out;
    pl_buf value; /* scratch */
    uint32_t records;
    uint64_t splits, dropped;
} encoder;

static void put_record(encoder *e, const char *key, size_t key_len, const uint8_t *v, size_t len)
{
    put_u16(e->out, key_len);
    pl_buf_append(e->out, key, key_len);
    put_u32(e->out, len);
    pl_buf_append(e->out, v, len);
    e->records++;
}

/* Writes refs[0..n) as one record, or as several when it would be too
 * large. false on out of memory. */
static bool emit_part(encoder *e, const item_ref *refs, size_t n, const char *key, size_t key_len)
{
    pl_buf_reset(&e->value);
    bool ok = e->batch->signal == PL_SIGNAL_TRACES
                  ? encode_traces_part(&e->batch->data.traces, refs, n, e->json, &e->value)
                  : encode_profiles_part(&e->batch->data.profiles, refs, n, e->json, &e->value);
    if (!ok || !pl_buf_ok(&e->value))
        return false;
    if (e->value.len + key_len <= e->x->max_value) {
        put_record(e, key, key_len, e->value.data, e->value.len);
        return true;
    }
    if (n == 1) {
        e->dropped++;
        pl_warn(e->x->id,
                "a %s item encodes to %zu bytes, over producer.max_message_bytes: dropped",
                pl_signal_name(e->batch->signal), e->value.len);
        return true;
    }
    e->splits++;
    return emit_part(e, refs, n / 2, key, key_len) &&
           emit_part(e, refs + n / 2, n - n / 2, key, key_len);
}

static pl_status kafka_encode(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                              pl_err *err)
{
    kafka_exporter *x = arg; /* read-only here: may run on a worker */
    pl_buf_append_byte(out, 'K');
    pl_buf_append_byte(out, 1);
    /* headers from the request metadata */
    size_t at = out->len, nh = 0;
    put_u16(out, 0);
    for (size_t i = 0; i < x->meta_keys.n && nh < 0xffff; i++) {
        pl_bytes v;
        const char *k = x->meta_keys.items[i];
        if (!pl_batch_metadata_get(batch, k, &v))
            continue;
        put_u16(out, strlen(k));
        pl_buf_append_str(out, k);
        put_u32(out, v.len);
        pl_buf_append(out, v.ptr, v.len);
        nh++;
    }
    if (pl_buf_ok(out)) {
        out->data[at] = (uint8_t)nh;
        out->data[at + 1] = (uint8_t)(nh >> 8);
    }
    size_t count_at = out->len;
    put_u32(out, 0);
    encoder e = {x, batch, x->json[batch->signal], out, {0}, 0, 0, 0};
    pl_buf_init(&e.value);
    bool ok = true;
    if (batch->signal == PL_SIGNAL_LOGS || batch->signal == PL_SIGNAL_METRICS) {
        if (batch->data.raw.len > x->max_value) {
            return pl_errf(err, PL_ERR_TOO_LARGE,
                           "a %s request of %u bytes is over producer.max_message_bytes",
                           pl_signal_name(batch->signal), batch->data.raw.len);
        }
        put_record(&e, NULL, 0, batch->data.raw.ptr, batch->data.raw.len);
    } else {
        size_t n = 0;
        bool oom = false;
        item_ref *refs = collect_refs(batch, x->by_trace, &n, &oom);
        ok = !oom;
        for (size_t a = 0; ok && a < n;) {
            size_t b = a + 1;
            while (b < n && memcmp(refs[b].trace_id, refs[a].trace_id, 16) == 0)
                b++;
            char key[33];
            size_t key_len = 0;
            if (x->by_trace && nonzero16(refs[a].trace_id)) {
                pl_hex_encode(refs[a].trace_id, 16, key);
                key_len = 32;
            }
            ok = emit_part(&e, refs + a, b - a, key, key_len);
            a = b;
        }
        free(refs);
    }
    pl_buf_free(&e.value);
    if (!ok || !pl_buf_ok(out))
        return pl_errf(err, PL_ERR_NOMEM, "out of memory encoding %s",
                       pl_signal_name(batch->signal));
    for (int i = 0; i < 4; i++)
        out->data[count_at + i] = (uint8_t)(e.records >> (8 * i));
    if (e.splits)
        __atomic_add_fetch(x->split_records, e.splits, __ATOMIC_RELAXED);
    if (e.dropped) {
        __atomic_add_fetch(x->dropped_oversize, e.dropped, __ATOMIC_RELAXED);
        pl_stats_add(x->stats, batch->signal, PL_STAT_FAILED, e.dropped);
    }
    size_t all = pl_batch_items(batch);
    *items = all > e.dropped ? all - e.dropped : 0;
    return PL_OK;
}

/* ---- sending ------------------------------------------------------------ */

typedef struct kafka_send {
    kafka_exporter *x;
    pl_queue_send *send;
    size_t outstanding;
    bool all_produced;
    pl_send_result result;
} kafka_send;

/* What a failed record means for the payload: a record that can never be
 * written (too large, invalid, not authorized) is permanent, the rest
 * (broker down, timed out, leader moving, queue full) retryable. */
static pl_send_outcome classify(rd_kafka_resp_err_t e)
{
    switch (e) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
        return PL_SEND_PERMANENT;
    default:
        return PL_SEND_RETRYABLE;
    }
}

static void note_failure(kafka_send *s, rd_kafka_resp_err_t e, const char *what)
{
    pl_send_outcome o = classify(e);
    /* retryable wins: the payload is tried again as a whole */
    if (s->result.outcome == PL_SEND_OK || o == PL_SEND_RETRYABLE)
        pl_send_result_set(&s->result, o, "%s record: %s", what, rd_kafka_err2str(e));
}

/* Client-level errors (served on the loop): a broker that cannot be reached
 * is normal while it restarts, and the records' own reports say what failed. */
static void on_client_error(rd_kafka_t *rk, int e, const char *reason, void *opaque)
{
    kafka_exporter *x = opaque;
    if (e == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN || e == RD_KAFKA_RESP_ERR__TRANSPORT)
        pl_debug(x->id, "%s", reason);
    else
        pl_warn(x->id, "%s", reason);
}

static void maybe_finish(kafka_send *s)
{
    if (!s->all_produced || s->outstanding)
        return;
    pl_queue_send *send = s->send;
    pl_send_result r = s->result;
    free(s);
    pl_queue_send_done(send, &r);
}

/* Delivery report, served on the loop by rd_kafka_poll. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    kafka_exporter *x = opaque;
    kafka_send *s = m->_private;
    x->in_flight--;
    if (m->err) {
        (*x->records_failed)++;
        note_failure(s, m->err, "writing a");
    } else {
        (*x->records_sent)++;
    }
    s->outstanding--;
    maybe_finish(s);
}

static uint32_t get_u16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Reads [u16 len][bytes] or [u32 len][bytes] at *at; false past the end. */
static bool take(const uint8_t *p, size_t len, size_t *at, int width, const uint8_t **out,
                 size_t *out_len)
{
    if (len - *at < (size_t)width)
        return false;
    size_t n = width == 2 ? get_u16(p + *at) : get_u32(p + *at);
    *at += (size_t)width;
    if (len - *at < n)
        return false;
    *out = p + *at;
    *out_len = n;
    *at += n;
    return true;
}

/* The payload's metadata headers plus record_headers, as librdkafka
 * headers; NULL when there are none. *ok false on a malformed payload. */
static rd_kafka_headers_t *payload_headers(kafka_exporter *x, const uint8_t *p, size_t len,
                                           size_t *at, bool *ok)
{
    *ok = false;
    if (len < 4 || p[0] != 'K' || p[1] != 1)
        return NULL;
    uint32_t nh = get_u16(p + 2);
    *at = 4;
    rd_kafka_headers_t *h = NULL;
    if (nh + x->record_headers.n)
        h = rd_kafka_headers_new(nh + x->record_headers.n);
    for (uint32_t i = 0; i < nh; i++) {
        const uint8_t *k, *v;
        size_t kl, vl;
        if (!take(p, len, at, 2, &k, &kl) || !take(p, len, at, 4, &v, &vl)) {
            if (h)
                rd_kafka_headers_destroy(h);
            return NULL;
        }
        rd_kafka_header_add(h, (const char *)k, (ssize_t)kl, v, (ssize_t)vl);
    }
    for (size_t i = 0; i < x->record_headers.n; i++) {
        const char *v = x->record_headers.values[i] ? x->record_headers.values[i] : "";
        rd_kafka_header_add(h, x->record_headers.keys[i], -1, v, (ssize_t)strlen(v));
    }
    *ok = true;
    return h;
}

static void kafka_send_payload(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                               pl_queue_send *send)
{
    kafka_exporter *x = arg;
    pl_send_result bad;
    size_t at = 0;
    bool ok = false;
    rd_kafka_headers_t *headers = payload_headers(x, payload, len, &at, &ok);
    if (!ok || len - at < 4 || !x->rk || !x->topics[signal]) {
        if (headers)
            rd_kafka_headers_destroy(headers);
        pl_send_result_set(&bad, PL_SEND_PERMANENT, "%s", ok ? "not started" : "malformed payload");
        pl_queue_send_done(send, &bad);
        return;
    }
    uint32_t n = get_u32(payload + at);
    at += 4;
    kafka_send *s = calloc(1, sizeof(*s));
    if (!s) {
        if (headers)
            rd_kafka_headers_destroy(headers);
        pl_send_result_set(&bad, PL_SEND_RETRYABLE, "out of memory");
        pl_queue_send_done(send, &bad);
        return;
    }
    s->x = x;
    s->send = send;
    pl_send_result_set(&s->result, PL_SEND_OK, NULL);
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *k, *v;
        size_t kl, vl;
        if (!take(payload, len, &at, 2, &k, &kl) || !take(payload, len, &at, 4, &v, &vl)) {
            pl_send_result_set(&s->result, PL_SEND_PERMANENT, "malformed payload");
            break;
        }
        /* librdkafka owns the headers it is given: each record a copy */
        rd_kafka_headers_t *hc = headers ? rd_kafka_headers_copy(headers) : NULL;
        /* flags 0: no copy, the payload stays until pl_queue_send_done */
        rd_kafka_resp_err_t e =
            rd_kafka_producev(x->rk, RD_KAFKA_V_RKT(x->topics[signal]),
                              RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA), RD_KAFKA_V_MSGFLAGS(0),
                              RD_KAFKA_V_VALUE((void *)v, vl), RD_KAFKA_V_KEY(kl ? k : NULL, kl),
                              RD_KAFKA_V_HEADERS(hc), RD_KAFKA_V_OPAQUE(s), RD_KAFKA_V_END);
        if (e) {
            if (hc)
                rd_kafka_headers_destroy(hc);
            (*x->records_failed)++;
            note_failure(s, e, "producing a");
            break;
        }
        s->outstanding++;
        x->in_flight++;
    }
    if (headers)
        rd_kafka_headers_destroy(headers);
    s->all_produced = true;
    maybe_finish(s);
}

/* ---- lifecycle ---------------------------------------------------------- */

static void serve(void *arg)
{
    kafka_exporter *x = arg;
    for (int i = 0; i < 64 && rd_kafka_poll(x->rk, 0) > 0; i++)
        ;
}

static void kafka_destroy(void *self);

static pl_status set_int(rd_kafka_conf_t *conf, const char *key, int64_t v, pl_err *err)
{
    char text[32];
    snprintf(text, sizeof(text), "%lld", (long long)v);
    return pl_kafka_conf_set(conf, key, text, err);
}

static bool copy_map(pl_strmap *dst, const pl_strmap *src)
{
    dst->n = 0;
    if (!src->n)
        return true;
    dst->keys = calloc(src->n, sizeof(char *));
    dst->values = calloc(src->n, sizeof(char *));
    if (!dst->keys || !dst->values)
        return false;
    for (size_t i = 0; i < src->n; i++, dst->n++) {
        dst->keys[i] = strdup(src->keys[i]);
        dst->values[i] = strdup(src->values[i] ? src->values[i] : "");
        if (!dst->keys[i] || !dst->values[i]) {
            dst->n++;
            return false;
        }
    }
    return true;
}

static pl_status kafka_create(const pl_create_settings *settings, const void *config, void **out,
                              pl_err *err)
{
    const kafka_exporter_cfg *c = config;
    kafka_exporter *x = calloc(1, sizeof(*x));
    if (!x)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    x->id = strdup(settings->id ? settings->id : "kafka");
    x->stats = settings->stats;
    x->loop = settings->loop;
    x->by_trace = c->partition_traces_by_id;
    x->max_value = (size_t)c->producer.max_message_bytes > RECORD_OVERHEAD
                       ? (size_t)c->producer.max_message_bytes - RECORD_OVERHEAD
                       : 1;
    const kafka_signal_cfg *sig[] = {&c->traces, &c->profiles, &c->logs, &c->metrics};
    bool ok = x->id != NULL;
    for (int i = 0; i < PL_SIGNAL_COUNT && ok; i++) {
        x->json[i] = sig[i]->encoding && strcmp(sig[i]->encoding, "otlp_json") == 0;
        ok = (x->topic_names[i] = strdup(sig[i]->topic)) != NULL;
    }
    ok = ok && pl_strlist_copy(&x->meta_keys, &c->include_metadata_keys) == 0 &&
         copy_map(&x->record_headers, &c->record_headers);
    if (!ok) {
        kafka_destroy(x);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    x->records_sent = pl_stats_counter(x->stats, "kafka_records_sent", "records written to Kafka");
    x->records_failed = pl_stats_counter(x->stats, "kafka_records_failed",
                                         "records Kafka did not take (the batch is retried)");
    x->split_records = pl_stats_counter(x->stats, "kafka_oversize_splits",
                                        "times a record over max_message_bytes was split in two");
    x->dropped_oversize = pl_stats_counter(x->stats, "kafka_oversize_dropped",
                                           "spans or samples too large for a record on their own");
    pl_kafka_conn conn = {x->id, &c->brokers, c->client_id, &c->tls, &c->auth};
    x->conf = pl_kafka_conf_new(&conn, err);
    pl_status st = x->conf ? PL_OK : PL_ERR_INVALID;
    if (st == PL_OK)
        st = set_int(x->conf, "acks", c->producer.required_acks, err);
    if (st == PL_OK)
        st = pl_kafka_conf_set(x->conf, "compression.codec", c->producer.compression, err);
    if (st == PL_OK)
        st = set_int(x->conf, "message.max.bytes", c->producer.max_message_bytes, err);
    if (st == PL_OK)
        st = set_int(x->conf, "linger.ms", c->producer.linger / 1000000, err);
    if (st == PL_OK && c->producer.flush_max_messages > 0)
        st = set_int(x->conf, "batch.num.messages", c->producer.flush_max_messages, err);
    if (st == PL_OK)
        st = set_int(x->conf, "message.timeout.ms",
                     c->timeout / 1000000 > 0 ? c->timeout / 1000000 : 1, err);
    if (st != PL_OK) {
        kafka_destroy(x);
        return st;
    }
    rd_kafka_conf_set_opaque(x->conf, x);
    rd_kafka_conf_set_dr_msg_cb(x->conf, on_delivery);
    rd_kafka_conf_set_error_cb(x->conf, on_client_error);
    pl_queue_sender sender = {kafka_encode, kafka_send_payload, x, false, true};
    x->queue = pl_queue_new(settings, &c->sending_queue, &c->retry_on_failure, &sender, err);
    if (!x->queue) {
        kafka_destroy(x);
        return PL_ERR_INTERNAL;
    }
    *out = x;
    return PL_OK;
}

static pl_status kafka_start(void *self, pl_err *err)
{
    kafka_exporter *x = self;
    char why[512];
    x->rk = rd_kafka_new(RD_KAFKA_PRODUCER, x->conf, why, sizeof(why));
    if (!x->rk)
        return pl_errf(err, PL_ERR_INVALID, "kafka producer: %s", why);
    x->conf = NULL; /* rd_kafka_new took it */
    for (int i = 0; i < PL_SIGNAL_COUNT; i++) {
        /* a copy of the default topic settings: message.timeout.ms and
         * acks are topic settings, set above on the client's conf (a fresh
         * topic conf would silently use librdkafka's 300 s and acks=all) */
        rd_kafka_topic_conf_t *tc = rd_kafka_default_topic_conf_dup(x->rk);
        if (!tc)
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        rd_kafka_topic_conf_set_partitioner_cb(tc, pl_kafka_partitioner);
        x->topics[i] = rd_kafka_topic_new(x->rk, x->topic_names[i], tc);
        if (!x->topics[i])
            return pl_errf(err, PL_ERR_INVALID, "kafka topic %s: %s", x->topic_names[i],
                           rd_kafka_err2str(rd_kafka_last_error()));
    }
    x->main_queue = rd_kafka_queue_get_main(x->rk);
    x->waker = pl_kafka_waker_new(x->loop, x->main_queue, 100, serve, x, err);
    if (!x->waker)
        return PL_ERR_INTERNAL;
    return pl_queue_start(x->queue, err);
}

static pl_status kafka_export(void *self, const pl_batch *batch)
{
    kafka_exporter *x = self;
    return pl_queue_export(x->queue, batch);
}

static void kafka_shutdown(void *self)
{
    kafka_exporter *x = self;
    pl_queue_shutdown(x->queue);
}

static size_t kafka_pending(void *self)
{
    kafka_exporter *x = self;
    return pl_queue_pending(x->queue);
}

static struct pl_queue *kafka_stored_queue(void *self)
{
    kafka_exporter *x = self;
    return pl_queue_stored(x->queue);
}

static void kafka_destroy(void *self)
{
    kafka_exporter *x = self;
    if (!x)
        return;
    pl_kafka_waker_close(x->waker);
    if (x->rk) {
        /* Records still waiting are purged; their reports (served here)
         * finish the queue's sends before the queue goes. */
        rd_kafka_purge(x->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        for (int i = 0; i < 100 && x->in_flight; i++)
            rd_kafka_poll(x->rk, 50);
    }
    if (x->queue)
        pl_queue_destroy(x->queue);
    if (x->main_queue)
        rd_kafka_queue_destroy(x->main_queue);
    for (int i = 0; i < PL_SIGNAL_COUNT; i++)
        if (x->topics[i])
            rd_kafka_topic_destroy(x->topics[i]);
    if (x->rk)
        rd_kafka_destroy(x->rk);
    if (x->conf)
        rd_kafka_conf_destroy(x->conf);
    for (int i = 0; i < PL_SIGNAL_COUNT; i++)
        free(x->topic_names[i]);
    pl_strlist_free(&x->meta_keys);
    for (size_t i = 0; i < x->record_headers.n; i++) {
        free(x->record_headers.keys[i]);
        free(x->record_headers.values[i]);
    }
    free(x->record_headers.keys);
    free(x->record_headers.values);
    free(x->id);
    free(x);
}

const pl_component_type pl_exporter_kafka = {
    PL_COMPONENT_HEAD("kafka", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &kafka_section),
    .description = "writes traces, profiles, logs and metrics to Kafka topics as OTLP records "
                   "(the Collector's format), one record per trace with partition_traces_by_id",
    PL_COMPONENT_LIFECYCLE(kafka_create, kafka_start, kafka_shutdown, kafka_destroy),
    .export = kafka_export,
    .pending = kafka_pending,
    .stored_queue = kafka_stored_queue,
};
