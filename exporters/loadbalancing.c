/*
 * loadbalancing.c: the `loadbalancing` exporter, in the OpenTelemetry
 * Collector's shape. It spreads traces and profiles over a set of OTLP/gRPC
 * backends (usually a tier of proflink gateways) so that everything of one
 * trace reaches the same backend:
 *
 *   routing_key: traceID   spans by their trace id; samples by the trace id
 *                          of their link (the edge's correlation adds the link
 *                          from the span id label), else by service.name
 *   routing_key: service   both by the resource's service.name
 *
 * Members come from `resolver.static.hostnames` or from `resolver.dns`
 * (c-ares, re-resolved every interval: exporters/lb_dns.h). Placement is a
 * consistent-hashing ring with virtual nodes (exporters/lb_ring.h), so a
 * membership change moves about 1/N of the keys.
 *
 * Every member is a full `otlp` exporter built from `protocol.otlp` with the
 * member's endpoint: its own sending queue (persistent when
 * sending_queue.storage names a directory: one file per member), retries,
 * HTTP/2 connection and counters (component "<id>/<endpoint>" on /metrics).
 *
 * A batch is split per member: all spans or samples for one member in one
 * copy of the batch, filtered (only copied when it has more than one
 * member). The answer is the worst of the members' answers, so a full queue
 * still pushes back on the sender.
 *
 * Failover. A member whose send fails with a retryable error (no connection,
 * UNAVAILABLE, timeout) is marked down for a while (1 s, doubling up to 30 s
 * while it keeps failing). The failed payload is decoded again and re-split
 * over the ring without it: each key goes to the next usable member
 * clockwise, the same member new data of that key goes to while the owner is
 * down, so a trace stays together. Only once the other members' queues took
 * it (committed, with storage) is the payload finished for the failed
 * member: nothing acknowledged is lost. When no other member is usable the
 * payload stays with its member and is retried as usual. A member that left
 * the ring (DNS) keeps sending what it holds; what fails moves the same way;
 * it is freed once empty.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/decode.h"
#include "core/log.h"
#include "core/stats.h"
#include "exporters/lb_dns.h"
#include "exporters/lb_ring.h"
#include "exporters/lb_route.h"
#include "exporters/otlp_common.h"
#include "net/compress.h"
#include "proto/otlp_pb.h"

extern const pl_component_type pl_exporter_otlp;

#define DOWN_MIN_NS   (1000000000ull)
#define DOWN_MAX_NS   (30000000000ull)
#define REAP_EVERY_MS 500
#define MAX_MEMBERS   1024

/* ---- configuration ------------------------------------------------------ */

#include "exporters/loadbalancing.config.h"

static int otlp_protocol_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    pl_otlp_exporter_config *cfg = cfg_;
    pl_encoding enc;
    int errors = 0;
    if (cfg->endpoint && cfg->endpoint[0]) {
        pl_cfg_errorf(ctx, "endpoint", "is set per member by the resolver; remove it");
        errors++;
    }
    errors += pl_cfg_check(ctx, pl_otlp_compression_parse(cfg->compression, &enc) == 0,
                           "compression", "must be gzip, zstd or none");
    return errors;
}

static const pl_cfg_section otlp_protocol_section = {sizeof(pl_otlp_exporter_config),
                                                     pl_otlp_grpc_fields, otlp_protocol_validate};

static int resolver_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    lb_resolver_cfg *r = cfg_;
    bool has_static = r->static_.hostnames.n > 0;
    bool has_dns = r->dns.hostname && r->dns.hostname[0];
    if (pl_cfg_node_key(ctx->map, "k8s") || pl_cfg_node_key(ctx->map, "aws_cloud_map"))
        return 0; /* refused by its own message */
    if (has_static == has_dns) {
        pl_cfg_errorf(ctx, NULL, "needs exactly one of static.hostnames (a list) or dns.hostname");
        return 1;
    }
    if (r->static_.hostnames.n > MAX_MEMBERS) {
        pl_cfg_errorf(ctx, "static", "at most %d hostnames", MAX_MEMBERS);
        return 1;
    }
    for (size_t i = 0; i < r->static_.hostnames.n; i++) {
        const char *h = r->static_.hostnames.items[i];
        if (!h || !h[0] || strchr(h, '/') || strlen(h) > 255) {
            pl_cfg_errorf(ctx, "static", "hostname %zu: expected host or host:port", i + 1);
            return 1;
        }
    }
    if (has_dns && (!r->dns.port || atoi(r->dns.port) <= 0 || atoi(r->dns.port) > 65535)) {
        pl_cfg_errorf(ctx, "dns", "port must be 1..65535");
        return 1;
    }
    return 0;
}

static int lb_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    lb_cfg *cfg = cfg_;
    int errors = 0;
    errors += pl_cfg_check(ctx, pl_lb_routing_key_parse(cfg->routing_key, NULL) == 0, "routing_key",
                           "must be traceID or service");
    /* only batch is read from the top-level sending_queue */
    const pl_cfg_node *q = pl_cfg_node_get(ctx->map, "sending_queue");
    for (size_t i = 0; q && q->kind == PL_NODE_MAP && i < q->n; i++)
        if (strcmp(q->keys[i]->value, "batch") != 0 && strcmp(q->keys[i]->value, "sizer") != 0)
            pl_cfg_warn_at(ctx->errs, q->keys[i],
                           "'%s': ignored here; each member's queue is set under "
                           "protocol.otlp.sending_queue",
                           q->keys[i]->value);
    return errors;
}

#include "exporters/loadbalancing.config.inc"

/* ---- the exporter ------------------------------------------------------- */

typedef struct lb lb;

typedef struct lb_member {
    lb *owner;
    char *endpoint; /* host:port */
    char *id;       /* "<lb id>/<endpoint>" */
    pl_stats *stats;
    pl_otlp_exporter *x;
    bool in_ring;
    bool started;
    uint64_t down_until_ns; /* 0 = up */
    uint64_t down_for_ns;   /* current backoff */
    uint64_t *rerouted;     /* items this member handed to others */
    uint64_t *fail_overs;   /* payloads handed on */
    int64_t *down_gauge;
} lb_member;

struct lb {
    char *id;
    uv_loop_t *loop;
    pl_stats *stats;
    pl_clock clock;
    const pl_host *host; /* handed to every member: their queues encode on its workers */
    pl_lb_routing_key key;
    unsigned vnodes;
    pl_otlp_exporter_config proto; /* copied: members are created later (DNS) */
    char *dns_port;
    lb_member **members; /* every live member, in the ring or leaving */
    size_t n_members;
    lb_member **ring_members; /* ring index -> member */
    pl_lb_ring ring;
    pl_lb_dns *dns;
    lb_dns_cfg dns_cfg;
    uv_timer_t reap_timer;
    bool started, stopping;
    bool timer_ready;
    int64_t *members_gauge;
    uint64_t *membership_changes;
    uint64_t *rerouted_total;
};

static uint64_t now_ns(const lb *l)
{
    (void)l;
    return pl_time_mono_ns();
}

/* ---- owned copies of the settings members are created from (DNS members
 * come and go long after the config was loaded) ---- */

static char *dup_opt(const char *s)
{
    return s ? strdup(s) : NULL;
}

static void free_proto(pl_otlp_exporter_config *c)
{
    pl_cfg_free(&otlp_protocol_section, c);
    memset(c, 0, sizeof(*c));
}

static char *dup_or_fail(const char *s, bool *ok)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

/* Deep copy of a filled config struct, driven by its table, so that every
 * setting the otlp exporter has (now or later) reaches the members. `dst`
 * holds a byte copy of `src`; every owned pointer is replaced by a copy (or
 * NULL when out of memory, which clears *ok), so pl_cfg_free can free dst. */
static void copy_fields(const pl_cfg_field *fields, void *dst, const void *src, bool *ok)
{
    for (size_t i = 0; fields && fields[i].key; i++) {
        const pl_cfg_field *f = &fields[i];
        char *d = (char *)dst + f->offset;
        const char *s = (const char *)src + f->offset;
        switch (f->type) {
        case PL_CFG_STRING:
            *(char **)d = dup_or_fail(*(char *const *)s, ok);
            break;
        case PL_CFG_STRLIST: {
            const pl_strlist *sl = (const pl_strlist *)s;
            pl_strlist *dl = (pl_strlist *)d;
            dl->items = sl->n ? calloc(sl->n, sizeof(char *)) : NULL;
            dl->n = dl->items ? sl->n : 0;
            if (sl->n && !dl->items)
                *ok = false;
            for (size_t k = 0; k < dl->n; k++)
                dl->items[k] = dup_or_fail(sl->items[k], ok);
            break;
        }
        case PL_CFG_STRMAP: {
            const pl_strmap *sm = (const pl_strmap *)s;
            pl_strmap *dm = (pl_strmap *)d;
            dm->keys = sm->n ? calloc(sm->n, sizeof(char *)) : NULL;
            dm->values = sm->n ? calloc(sm->n, sizeof(char *)) : NULL;
            dm->n = dm->keys && dm->values ? sm->n : 0;
            if (sm->n && !dm->n) {
                free(dm->keys);
                free(dm->values);
                dm->keys = dm->values = NULL;
                *ok = false;
            }
            for (size_t k = 0; k < dm->n; k++) {
                dm->keys[k] = dup_or_fail(sm->keys[k], ok);
                dm->values[k] = dup_or_fail(sm->values[k], ok);
            }
            break;
        }
        case PL_CFG_SECTION:
            if (f->section)
                copy_fields(f->section->fields, d, s, ok);
            break;
        case PL_CFG_LIST: {
            const pl_cfg_list *sl = (const pl_cfg_list *)s;
            pl_cfg_list *dl = (pl_cfg_list *)d;
            size_t size = f->section ? f->section->size : 0;
            dl->items = sl->n && size ? malloc(sl->n * size) : NULL;
            dl->n = dl->items ? sl->n : 0;
            if (sl->n && !dl->items)
                *ok = false;
            for (size_t k = 0; k < dl->n; k++) {
                memcpy((char *)dl->items + k * size, (const char *)sl->items + k * size, size);
                copy_fields(f->section->fields, (char *)dl->items + k * size,
                            (const char *)sl->items + k * size, ok);
            }
            break;
        }
        default: /* plain values: the byte copy holds them */
            break;
        }
    }
}

/* What every member is created from; storage always names a directory (one
 * queue file per member). -1 on OOM. */
static int copy_proto(pl_otlp_exporter_config *dst, const pl_otlp_exporter_config *src)
{
    memcpy(dst, src, sizeof(*dst));
    bool ok = true;
    copy_fields(pl_otlp_grpc_fields, dst, src, &ok);
    free(dst->endpoint); /* set per member */
    dst->endpoint = NULL;
    char *st = dst->sending_queue.storage;
    if (ok && st && st[0] && st[strlen(st) - 1] != '/') {
        size_t n = strlen(st);
        char *dir = malloc(n + 2);
        if (dir)
            snprintf(dir, n + 2, "%s/", st);
        else
            ok = false;
        free(st);
        dst->sending_queue.storage = dir;
    }
    if (!ok)
        free_proto(dst);
    return ok ? 0 : -1;
}

static bool member_usable(void *arg, int idx)
{
    lb *l = arg;
    lb_member *m = l->ring_members[idx];
    return !m->down_until_ns || m->down_until_ns <= now_ns(l);
}

typedef struct usable_except {
    lb *l;
    lb_member *except;
} usable_except;

static bool member_usable_except(void *arg, int idx)
{
    usable_except *u = arg;
    lb_member *m = u->l->ring_members[idx];
    if (u->except) /* moving failed data: only to members not failing lately, so that a
                    * backlog does not hop between dead members at every half-open try */
        return m != u->except && m->down_for_ns == 0;
    return member_usable(u->l, idx);
}

static void free_member(lb_member *m)
{
    if (!m)
        return;
    if (m->x)
        pl_otlp_exporter_destroy(m->x);
    pl_stats_free(m->stats);
    free(m->endpoint);
    free(m->id);
    free(m);
}

static void member_observe(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                           pl_send_result *result);

static lb_member *new_member(lb *l, const char *endpoint, pl_err *err)
{
    lb_member *m = calloc(1, sizeof(*m));
    if (!m) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    m->owner = l;
    m->endpoint = strdup(endpoint);
    size_t n = strlen(l->id) + strlen(endpoint) + 2;
    m->id = malloc(n);
    if (!m->endpoint || !m->id) {
        free_member(m);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    snprintf(m->id, n, "%s/%s", l->id, endpoint);
    m->stats = pl_stats_new(m->id, PL_KIND_EXPORTER);
    m->rerouted = pl_stats_counter(m->stats, "rerouted_items",
                                   "items this member failed to send and handed to the next "
                                   "member of the ring");
    m->fail_overs = pl_stats_counter(m->stats, "failovers",
                                     "payloads this member failed to send and handed on");
    m->down_gauge = pl_stats_gauge(m->stats, "member_down",
                                   "1 while the member is skipped after a failed send");
    pl_otlp_exporter_config cfg = l->proto;
    cfg.endpoint = (char *)endpoint;
    pl_create_settings s = {.id = m->id,
                            .loop = l->loop,
                            .stats = m->stats,
                            .clock = l->clock,
                            .host = l->host,
                            .signals = PL_SIGNAL_MASK(PL_SIGNAL_TRACES) |
                                       PL_SIGNAL_MASK(PL_SIGNAL_PROFILES)};
    void *x = NULL;
    if (pl_exporter_otlp.create(&s, &cfg, &x, err) != PL_OK) {
        free_member(m);
        return NULL;
    }
    m->x = x;
    m->x->observe = member_observe;
    m->x->observe_arg = m;
    return m;
}

static lb_member *find_member(lb *l, const char *endpoint)
{
    for (size_t i = 0; i < l->n_members; i++)
        if (strcmp(l->members[i]->endpoint, endpoint) == 0)
            return l->members[i];
    return NULL;
}

/* Rebuilds the ring from the members marked in_ring. */
static int rebuild_ring(lb *l)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n_members; i++)
        n += l->members[i]->in_ring;
    lb_member **rm = calloc(n ? n : 1, sizeof(*rm));
    const char **names = calloc(n ? n : 1, sizeof(*names));
    if (!rm || !names) {
        free(rm);
        free(names);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < l->n_members; i++)
        if (l->members[i]->in_ring) {
            rm[k] = l->members[i];
            names[k++] = l->members[i]->endpoint;
        }
    pl_lb_ring next = {0};
    if (pl_lb_ring_build(&next, names, n, l->vnodes) != 0) {
        free(rm);
        free(names);
        return -1;
    }
    free(names);
    pl_lb_ring_free(&l->ring);
    l->ring = next;
    free(l->ring_members);
    l->ring_members = rm;
    *l->members_gauge = (int64_t)n;
    return 0;
}

/* Makes `endpoints` the ring's members: new ones are created and started,
 * missing ones leave the ring and are freed once their queue is empty. */
static int set_members(lb *l, const char *const *endpoints, size_t n, pl_err *err)
{
    if (n > MAX_MEMBERS)
        n = MAX_MEMBERS;
    lb_member **grown = realloc(l->members, (l->n_members + n + 1) * sizeof(*grown));
    if (!grown)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory"), -1;
    l->members = grown;
    for (size_t i = 0; i < l->n_members; i++)
        l->members[i]->in_ring = false;
    for (size_t i = 0; i < n; i++) {
        lb_member *m = find_member(l, endpoints[i]);
        if (!m) {
            m = new_member(l, endpoints[i], err);
            if (!m)
                return -1;
            l->members[l->n_members++] = m;
            if (l->started) {
                if (pl_otlp_exporter_start(m->x, err) != PL_OK) {
                    pl_warn(l->id, "member %s: %s", m->endpoint, err->msg);
                } else {
                    m->started = true;
                }
            }
        }
        m->in_ring = true;
    }
    return rebuild_ring(l);
}

/* Exports `b` over the ring. `except` (may be NULL) is skipped: the member
 * the data just failed on. */
static pl_status route(lb *l, const pl_batch *b, lb_member *except, uint64_t *moved)
{
    if (!l->ring.n_points)
        return PL_ERR_REFUSED; /* no member yet (DNS not answered): retry later */
    size_t n = pl_lb_route_keys(b, l->key, NULL);
    usable_except ue = {l, except};
    if (n == 0) {
        /* nothing to key on: an empty request, or logs and metrics (opaque
         * in proflink), which go whole to the owner of their bytes' hash */
        bool opaque = b->signal == PL_SIGNAL_LOGS || b->signal == PL_SIGNAL_METRICS;
        int m = pl_lb_ring_pick(&l->ring, pl_lb_service_hash(opaque ? b->data.raw : (pl_bytes){0}),
                                member_usable_except, &ue);
        if (m < 0 || l->ring_members[m] == except)
            return PL_ERR_REFUSED;
        return pl_otlp_exporter_export(l->ring_members[m]->x, b);
    }
    uint64_t *keys = malloc(n * sizeof(*keys));
    int *dest = malloc(n * sizeof(*dest));
    if (!keys || !dest) {
        free(keys);
        free(dest);
        return PL_ERR_NOMEM;
    }
    pl_lb_route_keys(b, l->key, keys);
    int first = -1;
    bool single = true;
    for (size_t i = 0; i < n; i++) {
        dest[i] = pl_lb_ring_pick(&l->ring, keys[i], member_usable_except, &ue);
        if (first < 0)
            first = dest[i];
        else if (dest[i] != first)
            single = false;
    }
    free(keys);
    pl_status result = PL_OK;
    size_t n_ring = l->ring.n_members;
    for (size_t m = 0; m < n_ring; m++) {
        bool used = false;
        for (size_t i = 0; i < n && !used; i++)
            used = dest[i] == (int)m;
        if (!used)
            continue;
        lb_member *mem = l->ring_members[m];
        pl_status st;
        if (mem == except) {
            st = PL_ERR_REFUSED; /* no other member is usable */
        } else if (single) {
            st = pl_otlp_exporter_export(mem->x, b);
        } else {
            pl_batch *sub = pl_lb_subset(b, dest, (int)m);
            st = sub ? pl_otlp_exporter_export(mem->x, sub) : PL_ERR_NOMEM;
            pl_batch_free(sub);
        }
        if (st == PL_OK && moved) {
            uint64_t items = 0;
            for (size_t i = 0; i < n; i++)
                items += dest[i] == (int)m;
            *moved += items;
        }
        if (st != PL_OK && (result == PL_OK || st == PL_ERR_REFUSED))
            result = st;
    }
    free(dest);
    return result;
}

/* Decodes a queued member payload ([coding][5-byte gRPC prefix][message])
 * back into a batch; the decompressed buffer is adopted by the batch. */
static pl_batch *decode_payload(pl_signal signal, const uint8_t *payload, size_t len)
{
    if (len < 6 || (signal != PL_SIGNAL_TRACES && signal != PL_SIGNAL_PROFILES))
        return NULL;
    pl_encoding coding = (pl_encoding)(payload[0] & ~PL_OTLP_PAYLOAD_JSON);
    const uint8_t *msg = payload + 6;
    size_t msg_len = len - 6;
    uint8_t *plain = NULL;
    if (payload[1]) {
        size_t plain_len = 0;
        /* our own queue's payload; the cap guards against a damaged stored row */
        if (pl_decompress(coding, msg, msg_len, (size_t)256 << 20, &plain, &plain_len, NULL) !=
            PL_OK)
            return NULL;
        msg = plain;
        msg_len = plain_len;
    } else {
        plain = malloc(msg_len ? msg_len : 1);
        if (!plain)
            return NULL;
        memcpy(plain, msg, msg_len);
        msg = plain;
    }
    pl_batch *b = pl_batch_new(signal);
    if (!b || pl_batch_adopt(b, plain, msg_len) != 0) {
        free(plain);
        pl_batch_free(b);
        return NULL;
    }
    pl_status st = signal == PL_SIGNAL_TRACES ? pl_otlp_decode_traces(b, msg, msg_len, NULL)
                                              : pl_otlp_decode_profiles(b, msg, msg_len, NULL);
    if (st != PL_OK) {
        pl_batch_free(b);
        return NULL;
    }
    return b;
}

static void mark_down(lb_member *m)
{
    lb *l = m->owner;
    m->down_for_ns = m->down_for_ns ? m->down_for_ns * 2 : DOWN_MIN_NS;
    if (m->down_for_ns > DOWN_MAX_NS)
        m->down_for_ns = DOWN_MAX_NS;
    if (!m->down_until_ns)
        pl_warn(l->id, "member %s is failing; its keys go to the next members of the ring",
                m->endpoint);
    m->down_until_ns = now_ns(l) + m->down_for_ns;
    *m->down_gauge = 1;
}

static void member_observe(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                           pl_send_result *result)
{
    lb_member *m = arg;
    lb *l = m->owner;
    if (result->outcome == PL_SEND_OK) {
        if (m->down_until_ns)
            pl_info(l->id, "member %s is back", m->endpoint);
        m->down_until_ns = 0;
        m->down_for_ns = 0;
        *m->down_gauge = 0;
        return;
    }
    if (result->outcome != PL_SEND_RETRYABLE)
        return;
    if (m->in_ring)
        mark_down(m);
    if (l->stopping)
        return; /* the other members are draining too: keep it for the next start */
    pl_batch *b = decode_payload(signal, payload, len);
    if (!b)
        return; /* cannot re-split it: the member's queue retries it */
    uint64_t moved = 0;
    pl_status st = route(l, b, m, &moved);
    pl_batch_free(b);
    if (st != PL_OK) {
        pl_debug(l->id, "member %s failed; no other member took its data (%s)", m->endpoint,
                 pl_status_name(st));
        return;
    }
    *m->rerouted += moved;
    *l->rerouted_total += moved;
    (*m->fail_overs)++;
    pl_info(l->id, "moved %llu %s of a failed send to %s to the next members of the ring (%.160s)",
            (unsigned long long)moved, signal == PL_SIGNAL_TRACES ? "spans" : "samples",
            m->endpoint, result->message);
    /* done for this member's queue: the others' queues hold the data now */
    pl_send_result_set(result, PL_SEND_OK, NULL);
}

/* Frees members that left the ring once their queue is empty. */
static void on_reap(uv_timer_t *t)
{
    lb *l = t->data;
    size_t k = 0;
    for (size_t i = 0; i < l->n_members; i++) {
        lb_member *m = l->members[i];
        if (!m->in_ring && pl_otlp_exporter_pending(m->x) == 0) {
            pl_info(l->id, "member %s left and is drained", m->endpoint);
            pl_otlp_exporter_shutdown(m->x);
            free_member(m);
            continue;
        }
        l->members[k++] = m;
    }
    l->n_members = k;
}

static void on_dns(void *arg, const char *const *addrs, size_t n)
{
    lb *l = arg;
    char **eps = calloc(n ? n : 1, sizeof(*eps));
    if (!eps)
        return;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t sz = strlen(addrs[i]) + strlen(l->dns_port) + 4;
        eps[k] = malloc(sz);
        if (!eps[k])
            continue;
        if (strchr(addrs[i], ':'))
            snprintf(eps[k], sz, "[%s]:%s", addrs[i], l->dns_port);
        else
            snprintf(eps[k], sz, "%s:%s", addrs[i], l->dns_port);
        k++;
    }
    pl_err err = {{0}};
    if (set_members(l, (const char *const *)eps, k, &err) != 0)
        pl_warn(l->id, "applying resolved members: %s", err.msg);
    else
        pl_info(l->id, "%s resolved to %zu member(s)", l->dns_cfg.hostname, k);
    (*l->membership_changes)++;
    for (size_t i = 0; i < k; i++)
        free(eps[i]);
    free(eps);
}

static void lb_destroy(void *self);

static pl_status lb_create(const pl_create_settings *settings, const void *config, void **out,
                           pl_err *err)
{
    const lb_cfg *cfg = config;
    lb *l = calloc(1, sizeof(*l));
    if (!l)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    l->id = strdup(settings->id ? settings->id : "loadbalancing");
    l->loop = settings->loop;
    l->stats = settings->stats;
    l->clock = settings->clock;
    l->host = settings->host;
    l->vnodes = cfg->virtual_nodes > 0 ? (unsigned)cfg->virtual_nodes : PL_LB_DEFAULT_VNODES;
    if (pl_lb_routing_key_parse(cfg->routing_key, &l->key) != 0) {
        lb_destroy(l);
        return pl_errf(err, PL_ERR_INVALID, "routing_key: unknown value \"%s\"", cfg->routing_key);
    }
    l->members_gauge = pl_stats_gauge(l->stats, "members", "members in the hash ring");
    l->membership_changes =
        pl_stats_counter(l->stats, "resolutions_changed", "times the resolver changed the members");
    l->rerouted_total = pl_stats_counter(l->stats, "rerouted_items",
                                         "items moved from a failing member to the next one");
    uv_timer_init(l->loop, &l->reap_timer);
    l->reap_timer.data = l;
    l->timer_ready = true;
    l->dns_cfg.interval = cfg->resolver.dns.interval;
    l->dns_cfg.timeout = cfg->resolver.dns.timeout;
    l->dns_cfg.hostname = dup_opt(cfg->resolver.dns.hostname);
    l->dns_cfg.server = dup_opt(cfg->resolver.dns.server);
    l->dns_port = strdup(cfg->resolver.dns.port ? cfg->resolver.dns.port : "4317");
    if (!l->id || !l->dns_port || copy_proto(&l->proto, &cfg->protocol.otlp) != 0 ||
        (cfg->resolver.dns.hostname && !l->dns_cfg.hostname) ||
        (cfg->resolver.dns.server && !l->dns_cfg.server)) {
        lb_destroy(l);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    const pl_strlist *hosts = &cfg->resolver.static_.hostnames;
    if (hosts->n) {
        char **eps = calloc(hosts->n, sizeof(*eps));
        if (!eps) {
            lb_destroy(l);
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < hosts->n; i++) {
            const char *h = hosts->items[i];
            const char *colon = strrchr(h, ':');
            bool has_port = colon && (h[0] != '[' || colon > strchr(h, ']'));
            size_t sz = strlen(h) + 8;
            eps[i] = malloc(sz);
            if (eps[i])
                snprintf(eps[i], sz, has_port ? "%s" : "%s:4317", h);
        }
        int rc = 0;
        for (size_t i = 0; i < hosts->n; i++)
            if (!eps[i])
                rc = -1;
        if (rc == 0)
            rc = set_members(l, (const char *const *)eps, hosts->n, err);
        for (size_t i = 0; i < hosts->n; i++)
            free(eps[i]);
        free(eps);
        if (rc != 0) {
            lb_destroy(l);
            return err->msg[0] ? PL_ERR_INVALID : pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
    }
    *out = l;
    return PL_OK;
}

static pl_status lb_start(void *self, pl_err *err)
{
    lb *l = self;
    l->started = true;
    for (size_t i = 0; i < l->n_members; i++) {
        lb_member *m = l->members[i];
        if (pl_otlp_exporter_start(m->x, err) != PL_OK)
            return pl_errf(err, PL_ERR_INTERNAL, "member %s: %s", m->endpoint, err->msg);
        m->started = true;
    }
    if (l->dns_cfg.hostname && l->dns_cfg.hostname[0]) {
        l->dns = pl_lb_dns_start(l->loop, l->dns_cfg.hostname, l->dns_cfg.server,
                                 l->dns_cfg.interval, l->dns_cfg.timeout, on_dns, l, err);
        if (!l->dns)
            return PL_ERR_INTERNAL;
    }
    uv_timer_start(&l->reap_timer, on_reap, REAP_EVERY_MS, REAP_EVERY_MS);
    return PL_OK;
}

static pl_status lb_export(void *self, const pl_batch *batch)
{
    lb *l = self;
    return route(l, batch, NULL, NULL);
}

static void lb_shutdown(void *self)
{
    lb *l = self;
    l->stopping = true;
    if (l->dns) {
        pl_lb_dns_stop(l->dns);
        l->dns = NULL;
    }
    uv_timer_stop(&l->reap_timer);
    for (size_t i = 0; i < l->n_members; i++)
        pl_otlp_exporter_shutdown(l->members[i]->x);
}

static size_t lb_pending(void *self)
{
    lb *l = self;
    size_t n = 0;
    for (size_t i = 0; i < l->n_members; i++)
        n += pl_otlp_exporter_pending(l->members[i]->x);
    return n;
}

static void on_reap_closed(uv_handle_t *h)
{
    lb *l = h->data;
    free(l);
}

static void lb_destroy(void *self)
{
    lb *l = self;
    if (!l)
        return;
    if (l->dns)
        pl_lb_dns_stop(l->dns);
    for (size_t i = 0; i < l->n_members; i++)
        free_member(l->members[i]);
    free(l->members);
    free(l->ring_members);
    pl_lb_ring_free(&l->ring);
    free(l->id);
    free_proto(&l->proto);
    free(l->dns_cfg.hostname);
    free(l->dns_cfg.server);
    free(l->dns_port);
    if (l->timer_ready) {
        uv_close((uv_handle_t *)&l->reap_timer, on_reap_closed);
        return;
    }
    free(l);
}

const pl_component_type pl_exporter_loadbalancing = {
    PL_COMPONENT_HEAD("loadbalancing", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &lb_section),
    .description = "spreads traces and profiles over OTLP/gRPC members (static list or DNS) by "
                   "trace id or service on a consistent-hashing ring; each member has its own "
                   "queue, and a failing member's data moves to the next member; a logs or "
                   "metrics request goes whole to one member, by a hash of its bytes (not split "
                   "by trace id or service as in the Collector)",
    .signals_coarse = PL_SIGNAL_MASK(PL_SIGNAL_LOGS) | PL_SIGNAL_MASK(PL_SIGNAL_METRICS),
    PL_COMPONENT_LIFECYCLE(lb_create, lb_start, lb_shutdown, lb_destroy),
    .export = lb_export,
    .pending = lb_pending,
};
