/*
 * test_loadbalancing.c: the loadbalancing exporter's hash ring (spread,
 * how many keys a membership change moves and where, fail-over order) and
 * its routing (keys of spans and samples, splitting a batch per member).
 */
#include "exporters/lb_ring.h"
#include "exporters/loadbalancing.h"
#include "profile_fixture.h"
#include "testlib.h"

#define KEYS 100000

static uint64_t key_hash(uint64_t i)
{
    uint8_t id[16] = {0};
    memcpy(id, &i, sizeof(i));
    id[15] = 0x5a;
    return pl_lb_hash(id, 16);
}

static void test_hash_is_fixed(void)
{
    /* Placement must agree across processes: the hash is not seeded. */
    CHECK_EQ_UINT(pl_lb_hash("", 0), pl_lb_hash("", 0));
    CHECK(pl_lb_hash("a", 1) != pl_lb_hash("b", 1));
    /* FNV-1a 64 of "a" is af63dc4c8601ec8c; the finalizer is fixed too. */
    uint64_t h = 0xaf63dc4c8601ec8cull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    CHECK_EQ_UINT(pl_lb_hash("a", 1), h);
}

static void test_spread(void)
{
    const char *m[] = {"127.0.0.2:4317", "127.0.0.3:4317", "127.0.0.4:4317"};
    pl_lb_ring r = {0};
    REQUIRE(pl_lb_ring_build(&r, m, 3, 150) == 0);
    CHECK_EQ_UINT(r.n_points, 450);
    size_t count[3] = {0};
    for (uint64_t i = 0; i < KEYS; i++) {
        int o = pl_lb_ring_owner(&r, key_hash(i));
        REQUIRE(o >= 0 && o < 3);
        count[o]++;
    }
    for (int i = 0; i < 3; i++) {
        double share = (double)count[i] / KEYS;
        if (share < 0.25 || share > 0.42)
            PL_FAIL_("member %d has %.3f of the keys", i, share);
    }
    /* The same members in another order own the same keys (the endpoint,
     * not the position in the list, places a member). */
    const char *m2[] = {"127.0.0.4:4317", "127.0.0.2:4317", "127.0.0.3:4317"};
    pl_lb_ring r2 = {0};
    REQUIRE(pl_lb_ring_build(&r2, m2, 3, 150) == 0);
    for (uint64_t i = 0; i < 1000; i++)
        CHECK(strcmp(m[pl_lb_ring_owner(&r, key_hash(i))],
                     m2[pl_lb_ring_owner(&r2, key_hash(i))]) == 0);
    pl_lb_ring_free(&r);
    pl_lb_ring_free(&r2);
    pl_lb_ring empty = {0};
    CHECK_EQ_INT(pl_lb_ring_owner(&empty, 1), -1);
}

/* Adding a member moves about 1/N of the keys, all of them to the new
 * member; removing one moves only that member's keys. */
static void test_membership_change_moves_one_nth(void)
{
    const char *three[] = {"10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317"};
    const char *four[] = {"10.0.0.1:4317", "10.0.0.2:4317", "10.0.0.3:4317", "10.0.0.4:4317"};
    pl_lb_ring a = {0}, b = {0};
    REQUIRE(pl_lb_ring_build(&a, three, 3, 150) == 0);
    REQUIRE(pl_lb_ring_build(&b, four, 4, 150) == 0);
    size_t moved = 0, moved_elsewhere = 0;
    for (uint64_t i = 0; i < KEYS; i++) {
        const char *before = three[pl_lb_ring_owner(&a, key_hash(i))];
        const char *after = four[pl_lb_ring_owner(&b, key_hash(i))];
        if (strcmp(before, after) != 0) {
            moved++;
            if (strcmp(after, "10.0.0.4:4317") != 0)
                moved_elsewhere++;
        }
    }
    double share = (double)moved / KEYS;
    if (share < 0.18 || share > 0.32)
        PL_FAIL_("adding a 4th member moved %.3f of the keys (expected about 0.25)", share);
    CHECK_EQ_UINT(moved_elsewhere, 0);

    /* remove 10.0.0.2 from the four */
    const char *less[] = {"10.0.0.1:4317", "10.0.0.3:4317", "10.0.0.4:4317"};
    pl_lb_ring c = {0};
    REQUIRE(pl_lb_ring_build(&c, less, 3, 150) == 0);
    size_t moved2 = 0, wrong = 0;
    for (uint64_t i = 0; i < KEYS; i++) {
        const char *before = four[pl_lb_ring_owner(&b, key_hash(i))];
        const char *after = less[pl_lb_ring_owner(&c, key_hash(i))];
        if (strcmp(before, after) != 0) {
            moved2++;
            if (strcmp(before, "10.0.0.2:4317") != 0)
                wrong++;
        }
    }
    share = (double)moved2 / KEYS;
    if (share < 0.18 || share > 0.32)
        PL_FAIL_("removing one of 4 members moved %.3f of the keys", share);
    CHECK_EQ_UINT(wrong, 0);
    pl_lb_ring_free(&a);
    pl_lb_ring_free(&b);
    pl_lb_ring_free(&c);
}

static int down_member = -1;
static bool up(void *arg, int m)
{
    (void)arg;
    return m != down_member;
}
static bool none_up(void *arg, int m)
{
    (void)arg;
    (void)m;
    return false;
}

/* With a member down, its keys go to the member the ring would give them if
 * it were removed, so the fail-over target of a key does not depend on which
 * process (or which payload) asks; other keys stay. */
static void test_pick_skips_down_member(void)
{
    const char *m[] = {"a:1", "b:1", "c:1", "d:1"};
    const char *without_b[] = {"a:1", "c:1", "d:1"};
    pl_lb_ring r = {0}, r3 = {0};
    REQUIRE(pl_lb_ring_build(&r, m, 4, 100) == 0);
    REQUIRE(pl_lb_ring_build(&r3, without_b, 3, 100) == 0);
    down_member = 1;
    size_t mismatch = 0, stayed_wrong = 0, b_keys = 0;
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t h = key_hash(i);
        int owner = pl_lb_ring_owner(&r, h);
        int pick = pl_lb_ring_pick(&r, h, up, NULL);
        CHECK(pick != 1);
        if (owner != 1 && pick != owner)
            stayed_wrong++;
        if (owner == 1) {
            b_keys++;
            if (strcmp(m[pick], without_b[pl_lb_ring_owner(&r3, h)]) != 0)
                mismatch++;
        }
    }
    CHECK(b_keys > 2000);
    CHECK_EQ_UINT(stayed_wrong, 0);
    CHECK_EQ_UINT(mismatch, 0);
    /* nobody usable: the owner keeps the key (its queue holds the data) */
    CHECK_EQ_INT(pl_lb_ring_pick(&r, key_hash(7), none_up, NULL),
                 pl_lb_ring_owner(&r, key_hash(7)));
    pl_lb_ring_free(&r);
    pl_lb_ring_free(&r3);
}

/* ---- routing of batches -------------------------------------------------- */

static pl_attrs service_attrs(pl_batch *b, const char *service)
{
    pl_attrs a = {0};
    pl_attrs_put(&b->arena, &a, PL_BYTES_LIT("service.name"),
                 pl_value_string(pl_batch_bytes(b, service, strlen(service))));
    return a;
}

/* Two resources (services "api", "db"), 4 spans each, trace ids t % 3. */
static pl_batch *make_traces(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = 2;
    t->resources = pl_batch_alloc(b, 2 * sizeof(pl_resource_spans));
    for (int r = 0; r < 2; r++) {
        pl_resource_spans *rs = &t->resources[r];
        rs->has_resource = true;
        rs->resource.attrs = service_attrs(b, r ? "db" : "api");
        rs->n_scopes = 1;
        rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
        rs->scopes[0].n_spans = 4;
        rs->scopes[0].spans = pl_batch_alloc(b, 4 * sizeof(pl_span));
        for (int i = 0; i < 4; i++) {
            pl_span *s = &rs->scopes[0].spans[i];
            s->trace_id_len = 16;
            s->trace_id[0] = (uint8_t)(1 + (r * 4 + i) % 3);
            s->span_id_len = 8;
            s->span_id[0] = (uint8_t)(r * 4 + i + 1);
        }
    }
    return b;
}

static void test_span_keys(void)
{
    pl_batch *b = make_traces();
    uint64_t k[8];
    REQUIRE(pl_lb_route_keys(b, PL_LB_ROUTE_TRACE_ID, NULL) == 8);
    pl_lb_route_keys(b, PL_LB_ROUTE_TRACE_ID, k);
    /* same trace id, same key, across resources */
    CHECK_EQ_UINT(k[0], k[3]); /* spans 0 and 3: trace 1 */
    CHECK_EQ_UINT(k[0], k[6]); /* resource 2, span 2: index 6 -> trace 1 */
    CHECK(k[0] != k[1]);
    pl_lb_route_keys(b, PL_LB_ROUTE_SERVICE, k);
    CHECK_EQ_UINT(k[0], k[3]);
    CHECK(k[3] != k[4]);
    CHECK_EQ_UINT(k[4], k[7]);
    pl_batch_free(b);
}

static void test_subset(void)
{
    pl_batch *b = make_traces();
    int dest[8] = {0, 1, 0, 0, 1, 1, 1, 1}; /* resource "db" only in member 1 */
    pl_batch *a = pl_lb_subset(b, dest, 0);
    pl_batch *c = pl_lb_subset(b, dest, 1);
    REQUIRE(a && c);
    CHECK_EQ_UINT(pl_batch_items(a), 3);
    CHECK_EQ_UINT(a->data.traces.n_resources, 1); /* empty resource dropped */
    CHECK_EQ_UINT(a->data.traces.resources[0].scopes[0].spans[2].span_id[0], 4);
    CHECK_EQ_UINT(pl_batch_items(c), 5);
    CHECK_EQ_UINT(c->data.traces.n_resources, 2);
    CHECK_EQ_UINT(c->data.traces.resources[0].scopes[0].spans[0].span_id[0], 2);
    CHECK_EQ_UINT(pl_batch_items(b), 8); /* the input is untouched */
    pl_batch_free(a);
    pl_batch_free(c);
    pl_batch_free(b);
}

/* One profile of 4 samples: two linked to trace A, one to trace B, one
 * without a link (routed by service). */
static void test_sample_keys_follow_links(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *p = &b->data.profiles;
    p->has_dictionary = true;
    REQUIRE(pl_dict_ensure_zero_entries(&b->arena, &p->dict) == 0);
    pl_link la = {.trace_id_len = 16, .span_id_len = 8}, lb = la;
    la.trace_id[0] = 0xaa;
    lb.trace_id[0] = 0xbb;
    int32_t ia = pl_dict_intern_link(&b->arena, &p->dict, &la);
    int32_t ib = pl_dict_intern_link(&b->arena, &p->dict, &lb);
    REQUIRE(ia > 0 && ib > 0);
    pl_profile *pr = add_single_profile(b, 4);
    p->resources[0].has_resource = true;
    p->resources[0].resource.attrs = service_attrs(b, "api");
    pr->samples[0].link_index = ia;
    pr->samples[1].link_index = ib;
    pr->samples[2].link_index = ia;
    pr->samples[3].link_index = 0;
    uint64_t k[4];
    REQUIRE(pl_lb_route_keys(b, PL_LB_ROUTE_TRACE_ID, k) == 4);
    uint8_t tid[16] = {0xaa};
    CHECK_EQ_UINT(k[0], pl_lb_hash(tid, 16)); /* the span's trace id: same key as its spans */
    CHECK_EQ_UINT(k[0], k[2]);
    CHECK(k[0] != k[1]);
    uint64_t ks[4];
    pl_lb_route_keys(b, PL_LB_ROUTE_SERVICE, ks);
    CHECK_EQ_UINT(k[3], ks[3]); /* unlinked: by service */
    CHECK_EQ_UINT(ks[0], ks[3]);
    int dest[4] = {0, 1, 0, 1};
    pl_batch *s0 = pl_lb_subset(b, dest, 0);
    REQUIRE(s0);
    CHECK_EQ_UINT(pl_batch_items(s0), 2);
    CHECK_EQ_INT(s0->data.profiles.resources[0].scopes[0].profiles[0].samples[1].link_index, ia);
    CHECK_EQ_UINT(s0->data.profiles.dict.n_links, p->dict.n_links); /* dictionary kept whole */
    pl_batch_free(s0);
    pl_batch_free(b);
}

static void test_routing_key_parse(void)
{
    pl_lb_routing_key k;
    CHECK_EQ_INT(pl_lb_routing_key_parse("traceID", &k), 0);
    CHECK_EQ_INT(k, PL_LB_ROUTE_TRACE_ID);
    CHECK_EQ_INT(pl_lb_routing_key_parse("service", &k), 0);
    CHECK_EQ_INT(k, PL_LB_ROUTE_SERVICE);
    CHECK_EQ_INT(pl_lb_routing_key_parse("resource", &k), -1);
}

int main(void)
{
    PL_RUN(test_hash_is_fixed);
    PL_RUN(test_spread);
    PL_RUN(test_membership_change_moves_one_nth);
    PL_RUN(test_pick_skips_down_member);
    PL_RUN(test_span_keys);
    PL_RUN(test_subset);
    PL_RUN(test_sample_keys_follow_links);
    PL_RUN(test_routing_key_parse);
    return pl_test_done();
}
