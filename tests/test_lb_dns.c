/*
 * test_lb_dns.c: the loadbalancing exporter's DNS resolver
 * (exporters/lb_dns.c) against a fake DNS server on loopback UDP, run on
 * the same libuv loop: the first answer is reported sorted and without
 * duplicates, an unchanged answer is not reported again, a changed one is,
 * and a failed (SERVFAIL) or unanswered lookup keeps the last set. Also
 * what a bad `server` setting says, and stopping with a lookup in flight.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "exporters/lb_dns.h"
#include "loop_fixture.h"
#include "testlib.h"

#define HOST "members.lb.proflink.test"

/* ---- the fake DNS server ------------------------------------------------- */

typedef enum { ANSWER, SERVFAIL, SILENT } fake_mode;

typedef struct fake_dns {
    uv_udp_t udp;
    int port;
    fake_mode mode;
    const char *addrs[8]; /* numeric, v4 and v6 mixed; answered by type */
    size_t n_addrs;
    unsigned queries;       /* for HOST */
    unsigned other_queries; /* other names (search domains): NXDOMAIN */
} fake_dns;

static void fake_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    static char space[2048]; /* one datagram at a time, read at once */
    *buf = uv_buf_init(space, sizeof(space));
}

static void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* The question's end (past QTYPE and QCLASS) and its name in dotted form;
 * 0 when the query does not parse. */
static size_t parse_question(const uint8_t *q, size_t len, char *name, size_t cap, unsigned *qtype)
{
    size_t at = 12, out = 0;
    while (at < len && q[at]) {
        size_t l = q[at++];
        if (l > 63 || at + l > len || out + l + 2 > cap)
            return 0;
        if (out)
            name[out++] = '.';
        memcpy(name + out, q + at, l);
        out += l;
        at += l;
    }
    name[out] = 0;
    if (at + 5 > len)
        return 0;
    *qtype = (unsigned)(q[at + 1] << 8 | q[at + 2]);
    return at + 5;
}

static void fake_recv(uv_udp_t *udp, ssize_t n, const uv_buf_t *buf, const struct sockaddr *from,
                      unsigned flags)
{
    (void)flags;
    fake_dns *f = udp->data;
    if (n < 12 || !from)
        return;
    const uint8_t *q = (const uint8_t *)buf->base;
    char name[256];
    unsigned qtype = 0;
    size_t qend = parse_question(q, (size_t)n, name, sizeof(name), &qtype);
    if (!qend)
        return;
    bool ours = strcasecmp(name, HOST) == 0;
    if (ours)
        f->queries++;
    else
        f->other_queries++;
    if (ours && f->mode == SILENT)
        return;
    uint8_t r[1024];
    memcpy(r, q, qend); /* the id, then the question as asked */
    unsigned rcode = !ours ? 3 : f->mode == SERVFAIL ? 2 : 0;
    put16(r + 2, 0x8180 | rcode); /* response, recursion desired and available */
    put16(r + 4, 1);
    put16(r + 8, 0);
    put16(r + 10, 0);
    size_t at = qend;
    unsigned answers = 0;
    for (size_t i = 0; ours && rcode == 0 && i < f->n_addrs; i++) {
        uint8_t raw[16];
        bool v6 = strchr(f->addrs[i], ':') != NULL;
        if ((v6 ? 28u : 1u) != qtype || inet_pton(v6 ? AF_INET6 : AF_INET, f->addrs[i], raw) != 1)
            continue;
        size_t rdlen = v6 ? 16 : 4;
        put16(r + at, 0xC00C); /* the name: a pointer to the question's */
        put16(r + at + 2, qtype);
        put16(r + at + 4, 1); /* IN */
        memcpy(r + at + 6, "\0\0\0\x3c", 4);
        put16(r + at + 10, (unsigned)rdlen);
        memcpy(r + at + 12, raw, rdlen);
        at += 12 + rdlen;
        answers++;
    }
    put16(r + 6, answers);
    uv_buf_t out = uv_buf_init((char *)r, (unsigned)at);
    uv_udp_try_send(udp, &out, 1, from);
}

static bool fake_start(fake_dns *f, uv_loop_t *loop)
{
    memset(f, 0, sizeof(*f));
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    if (uv_udp_init(loop, &f->udp) != 0)
        return false;
    f->udp.data = f;
    if (uv_udp_bind(&f->udp, (const struct sockaddr *)&a, 0) != 0)
        return false;
    int len = sizeof(a);
    uv_udp_getsockname(&f->udp, (struct sockaddr *)&a, &len);
    f->port = ntohs(a.sin_port);
    return uv_udp_recv_start(&f->udp, fake_alloc, fake_recv) == 0;
}

static void fake_set(fake_dns *f, fake_mode mode, const char *const *addrs, size_t n)
{
    f->mode = mode;
    f->n_addrs = n;
    for (size_t i = 0; i < n; i++)
        f->addrs[i] = addrs[i];
}

/* ---- what the resolver reports ------------------------------------------- */

typedef struct seen {
    unsigned reports;
    char addrs[8][64];
    size_t n;
    pl_lb_dns *dns;
    uint64_t want_lookups, want_failures; /* for the waits */
    unsigned want_reports;
} seen;

static void on_addrs(void *arg, const char *const *addrs, size_t n)
{
    seen *s = arg;
    s->reports++;
    s->n = n < 8 ? n : 8;
    for (size_t i = 0; i < s->n; i++)
        snprintf(s->addrs[i], sizeof(s->addrs[i]), "%s", addrs[i]);
}

static bool reports_reached(void *arg)
{
    seen *s = arg;
    return s->reports >= s->want_reports;
}

static bool lookups_reached(void *arg)
{
    seen *s = arg;
    return pl_lb_dns_lookups(s->dns) >= s->want_lookups;
}

static bool failures_reached(void *arg)
{
    seen *s = arg;
    return pl_lb_dns_failures(s->dns) >= s->want_failures;
}

static void check_set(const seen *s, const char *const *want, size_t n)
{
    CHECK_EQ_UINT(s->n, n);
    for (size_t i = 0; i < n && i < s->n; i++)
        CHECK_EQ_STR(s->addrs[i], want[i]);
}

/* A resolver of HOST asking `f` (started on `loop`), every 20 ms, with
 * `timeout_ms` per lookup, reporting into `s`; false when it did not start. */
static bool resolver_start(uv_loop_t *loop, fake_dns *f, seen *s, int64_t timeout_ms)
{
    char server[64];
    snprintf(server, sizeof(server), "127.0.0.1:%d", f->port);
    pl_err err = {{0}};
    s->dns = pl_lb_dns_start(loop, HOST, server, 20 * 1000000LL, timeout_ms * 1000000LL, on_addrs,
                             s, &err);
    if (!s->dns)
        fprintf(stderr, "  pl_lb_dns_start: %s\n", err.msg);
    return s->dns != NULL;
}

static void close_all(uv_loop_t *loop, fake_dns *f)
{
    uv_close((uv_handle_t *)&f->udp, NULL);
    uv_run(loop, UV_RUN_DEFAULT); /* returns once every handle has closed */
    CHECK_EQ_INT(uv_loop_close(loop), 0);
}

/* ---- tests --------------------------------------------------------------- */

static void test_resolves_and_tracks_changes(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake_dns f;
    REQUIRE(fake_start(&f, &loop));
    const char *first[] = {"10.0.0.2", "fd00::7", "10.0.0.1", "10.0.0.2"};
    fake_set(&f, ANSWER, first, 4);
    seen s = {0};
    /* a short interval so a few lookups happen quickly; the timeout is long
     * enough for a loaded machine */
    REQUIRE(resolver_start(&loop, &f, &s, 2000));

    /* the first lookup starts at once: sorted, unique, v4 and v6 */
    s.want_reports = 1;
    CHECK(loop_run_until(&loop, reports_reached, &s, 20000));
    const char *want1[] = {"10.0.0.1", "10.0.0.2", "fd00::7"};
    check_set(&s, want1, 3);
    CHECK(f.queries >= 2); /* A and AAAA */

    /* the same answer again: not reported again */
    s.want_lookups = pl_lb_dns_lookups(s.dns) + 3;
    CHECK(loop_run_until(&loop, lookups_reached, &s, 20000));
    CHECK_EQ_UINT(s.reports, 1);
    CHECK_EQ_UINT(pl_lb_dns_failures(s.dns), 0);

    /* a member leaves, another joins */
    const char *second[] = {"10.0.0.3", "10.0.0.1"};
    fake_set(&f, ANSWER, second, 2);
    s.want_reports = 2;
    CHECK(loop_run_until(&loop, reports_reached, &s, 20000));
    const char *want2[] = {"10.0.0.1", "10.0.0.3"};
    check_set(&s, want2, 2);

    /* the server fails: counted, the last set stays (nothing reported) */
    fake_set(&f, SERVFAIL, NULL, 0);
    s.want_failures = 2;
    CHECK(loop_run_until(&loop, failures_reached, &s, 20000));
    CHECK_EQ_UINT(s.reports, 2);
    check_set(&s, want2, 2);

    /* back: an answer equal to the kept set is still not reported */
    fake_set(&f, ANSWER, second, 2);
    s.want_lookups = pl_lb_dns_lookups(s.dns) + 2;
    CHECK(loop_run_until(&loop, lookups_reached, &s, 20000));
    CHECK_EQ_UINT(s.reports, 2);

    pl_lb_dns_stop(s.dns);
    close_all(&loop, &f);
}

/* No answer at all: the lookup times out, is counted as failed, and the
 * set found before stays. */
static void test_timeout_keeps_members(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    fake_dns f;
    REQUIRE(fake_start(&f, &loop));
    const char *one[] = {"192.0.2.10"};
    fake_set(&f, ANSWER, one, 1);
    seen s = {0};
    REQUIRE(resolver_start(&loop, &f, &s, 100));
    s.want_reports = 1;
    CHECK(loop_run_until(&loop, reports_reached, &s, 20000));
    fake_set(&f, SILENT, NULL, 0);
    unsigned before = f.queries;
    s.want_failures = 1;
    CHECK(loop_run_until(&loop, failures_reached, &s, 20000));
    CHECK(f.queries > before); /* it did ask, and got nothing */
    CHECK_EQ_UINT(s.reports, 1);
    check_set(&s, one, 1);
    /* stopped with a lookup (probably) in flight: everything is released */
    pl_lb_dns_stop(s.dns);
    close_all(&loop, &f);
}

static void test_bad_server(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    seen s = {0};
    pl_err err = {{0}};
    pl_lb_dns *d = pl_lb_dns_start(&loop, HOST, "not an address", 1000000000LL, 1000000000LL,
                                   on_addrs, &s, &err);
    CHECK(d == NULL);
    CHECK(strstr(err.msg, "resolver.dns.server \"not an address\"") != NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&loop), 0);
    CHECK_EQ_UINT(s.reports, 0);
}

int main(void)
{
    PL_RUN(test_resolves_and_tracks_changes);
    PL_RUN(test_timeout_keeps_members);
    PL_RUN(test_bad_server);
    return pl_test_done();
}
