/*
 * lb_route.c: routing a batch by trace id or service (see lb_route.h),
 * shared by the loadbalancing and nats exporters.
 */
#include "exporters/lb_route.h"

#include <stdlib.h>
#include <string.h>

#include "exporters/lb_ring.h"

int pl_lb_routing_key_parse(const char *text, pl_lb_routing_key *out)
{
    pl_lb_routing_key k;
    if (!text || !text[0] || strcmp(text, "traceID") == 0 || strcmp(text, "traceid") == 0)
        k = PL_LB_ROUTE_TRACE_ID;
    else if (strcmp(text, "service") == 0)
        k = PL_LB_ROUTE_SERVICE;
    else
        return -1;
    if (out)
        *out = k;
    return 0;
}

/* ---- routing (pure: exposed for tests) ---------------------------------- */

static pl_bytes resource_service(const pl_resource *r, bool has)
{
    if (!has)
        return (pl_bytes){0};
    pl_kv *kv = pl_attrs_find(&r->attrs, "service.name", 12);
    if (kv && kv->value.type == PL_VALUE_STRING)
        return kv->value.u.str;
    return (pl_bytes){0};
}

static bool nonzero(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return true;
    return false;
}

/* Keys of service names and trace ids live in different spaces ("s:" prefix)
 * so that a service can never collide with a trace id on purpose. */
uint64_t pl_lb_service_hash(pl_bytes s)
{
    uint8_t buf[258];
    size_t n = s.len < 256 ? s.len : 256;
    buf[0] = 's';
    buf[1] = ':';
    if (n)
        memcpy(buf + 2, s.ptr, n);
    uint64_t h = pl_lb_hash(buf, n + 2);
    if (s.len > 256) /* long names: hash the rest too */
        h ^= pl_lb_hash(s.ptr + 256, s.len - 256);
    return h;
}

size_t pl_lb_route_keys(const pl_batch *b, pl_lb_routing_key key, uint64_t *out)
{
    size_t k = 0;
    if (b->signal == PL_SIGNAL_TRACES) {
        const pl_traces *t = &b->data.traces;
        for (uint32_t r = 0; r < t->n_resources; r++) {
            const pl_resource_spans *rs = &t->resources[r];
            uint64_t svc = pl_lb_service_hash(resource_service(&rs->resource, rs->has_resource));
            for (uint32_t s = 0; s < rs->n_scopes; s++)
                for (uint32_t i = 0; i < rs->scopes[s].n_spans; i++) {
                    const pl_span *sp = &rs->scopes[s].spans[i];
                    if (out)
                        out[k] = key == PL_LB_ROUTE_TRACE_ID && sp->trace_id_len == 16 &&
                                         nonzero(sp->trace_id, 16)
                                     ? pl_lb_hash(sp->trace_id, 16)
                                     : svc;
                    k++;
                }
        }
    } else if (b->signal == PL_SIGNAL_PROFILES) {
        const pl_profiles *p = &b->data.profiles;
        for (uint32_t r = 0; r < p->n_resources; r++) {
            const pl_resource_profiles *rp = &p->resources[r];
            uint64_t svc = pl_lb_service_hash(resource_service(&rp->resource, rp->has_resource));
            for (uint32_t s = 0; s < rp->n_scopes; s++)
                for (uint32_t j = 0; j < rp->scopes[s].n_profiles; j++) {
                    const pl_profile *pr = &rp->scopes[s].profiles[j];
                    for (uint32_t i = 0; i < pr->n_samples; i++) {
                        const pl_sample *sa = &pr->samples[i];
                        uint64_t h = svc;
                        if (key == PL_LB_ROUTE_TRACE_ID && sa->link_index > 0 &&
                            (uint32_t)sa->link_index < p->dict.n_links) {
                            const pl_link *l = &p->dict.links[sa->link_index];
                            if (l->trace_id_len == 16 && nonzero(l->trace_id, 16))
                                h = pl_lb_hash(l->trace_id, 16);
                        }
                        if (out)
                            out[k] = h;
                        k++;
                    }
                }
        }
    }
    return k;
}

/* Keeps, in a clone, only the items whose dest[] is `member`. Empty
 * scopes, resources and profiles are dropped. */
/* Compacts `items` (spans or samples, `size` bytes each) to those routed to
 * `member`, keeping their order; *k walks `dest` along. Returns how many. */
static uint32_t keep_routed(void *items, uint32_t n, size_t size, const int *dest, size_t *k,
                            int member)
{
    uint8_t *p = items;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < n; i++, (*k)++) {
        if (dest[*k] != member)
            continue;
        if (kept != i)
            memcpy(p + (size_t)kept * size, p + (size_t)i * size, size);
        kept++;
    }
    return kept;
}

pl_batch *pl_lb_subset(const pl_batch *b, const int *dest, int member)
{
    pl_batch *c = pl_batch_clone(b);
    if (!c)
        return NULL;
    size_t k = 0;
    if (c->signal == PL_SIGNAL_TRACES) {
        pl_traces *t = &c->data.traces;
        uint32_t nr = 0;
        for (uint32_t r = 0; r < t->n_resources; r++) {
            pl_resource_spans *rs = &t->resources[r];
            uint32_t ns = 0;
            for (uint32_t s = 0; s < rs->n_scopes; s++) {
                pl_scope_spans *ss = &rs->scopes[s];
                ss->n_spans =
                    keep_routed(ss->spans, ss->n_spans, sizeof(*ss->spans), dest, &k, member);
                if (ss->n_spans)
                    rs->scopes[ns++] = *ss;
            }
            rs->n_scopes = ns;
            if (ns)
                t->resources[nr++] = *rs;
        }
        t->n_resources = nr;
    } else if (c->signal == PL_SIGNAL_PROFILES) {
        pl_profiles *p = &c->data.profiles;
        uint32_t nr = 0;
        for (uint32_t r = 0; r < p->n_resources; r++) {
            pl_resource_profiles *rp = &p->resources[r];
            uint32_t ns = 0;
            for (uint32_t s = 0; s < rp->n_scopes; s++) {
                pl_scope_profiles *sp = &rp->scopes[s];
                uint32_t np = 0;
                for (uint32_t j = 0; j < sp->n_profiles; j++) {
                    pl_profile *pr = &sp->profiles[j];
                    pr->n_samples = keep_routed(pr->samples, pr->n_samples, sizeof(*pr->samples),
                                                dest, &k, member);
                    if (pr->n_samples)
                        sp->profiles[np++] = *pr;
                }
                sp->n_profiles = np;
                if (np)
                    rp->scopes[ns++] = *sp;
            }
            rp->n_scopes = ns;
            if (ns)
                p->resources[nr++] = *rp;
        }
        p->n_resources = nr;
    }
    return c;
}
