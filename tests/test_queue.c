/*
 * test_queue.c: the sending queue with an injected sender: ordering and
 * concurrency, retries and backoff, Retry-After, permanent errors, partial
 * success, bounds and back-pressure, and the persistent mode, including a
 * child process killed with SIGKILL right after its data was acknowledged.
 */
#include <glob.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/stats.h"
#include "exporters/queue.h"
#include "sqlite_damage_fixture.h"
#include "testlib.h"

/* ---- a scripted fake backend ------------------------------------------- */

typedef struct fake_send {
    pl_queue_send *send;
    pl_signal signal;
    uint8_t *payload;
    size_t len;
} fake_send;

typedef struct fake {
    uv_loop_t *loop;
    uv_timer_t tick;
    bool hold; /* never answer */
    /* answer for attempt `n` (0-based, over all sends) */
    void (*policy)(struct fake *f, size_t attempt, const fake_send *s, pl_send_result *r);
    fake_send pending[64];
    size_t n_pending;
    size_t attempts;
    size_t max_in_flight;
    uint64_t attempt_ms[64];
    char delivered[64][32]; /* payloads answered OK, in order */
    pl_signal delivered_signal[64];
    size_t n_delivered;
    int64_t retry_after_ns;
} fake;

static void fake_send_fn(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                         pl_queue_send *send)
{
    fake *f = arg;
    if (f->attempts < 64)
        f->attempt_ms[f->attempts] = pl_time_mono_ns() / 1000000;
    REQUIRE(f->n_pending < 64);
    fake_send *s = &f->pending[f->n_pending++];
    s->send = send;
    s->signal = signal;
    s->payload = (uint8_t *)payload;
    s->len = len;
    if (f->n_pending > f->max_in_flight)
        f->max_in_flight = f->n_pending;
}

static pl_status fake_encode(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                             pl_err *err)
{
    pl_buf_append(out, batch->data.raw.ptr, batch->data.raw.len);
    *items = batch->data.raw.len;
    return PL_OK;
}

static void on_tick(uv_timer_t *t)
{
    fake *f = t->data;
    if (f->hold)
        return;
    /* Answer everything pending (answers may start new sends). */
    fake_send batch[64];
    size_t n = f->n_pending;
    memcpy(batch, f->pending, n * sizeof(fake_send));
    f->n_pending = 0;
    for (size_t i = 0; i < n; i++) {
        pl_send_result r;
        pl_send_result_set(&r, PL_SEND_OK, NULL);
        if (f->policy)
            f->policy(f, f->attempts, &batch[i], &r);
        f->attempts++;
        if (r.outcome == PL_SEND_OK && f->n_delivered < 64) {
            f->delivered_signal[f->n_delivered] = batch[i].signal;
            snprintf(f->delivered[f->n_delivered++], 32, "%.*s", (int)batch[i].len,
                     (const char *)batch[i].payload);
        }
        pl_queue_send_done(batch[i].send, &r);
    }
}

static void fake_init(fake *f, uv_loop_t *loop)
{
    memset(f, 0, sizeof(*f));
    f->loop = loop;
    uv_timer_init(loop, &f->tick);
    f->tick.data = f;
    uv_timer_start(&f->tick, on_tick, 1, 1);
}

static void fake_close(fake *f)
{
    uv_close((uv_handle_t *)&f->tick, NULL);
}

static pl_sending_queue_config qcfg_default(void)
{
    pl_sending_queue_config c = {0};
    c.enabled = true;
    c.num_consumers = 2;
    c.queue_size = 100;
    c.max_bytes = 1 << 20;
    return c;
}

static pl_retry_config rcfg_fast(void)
{
    pl_retry_config r = {0};
    r.enabled = true;
    r.initial_interval = 5 * 1000000LL;
    r.max_interval = 20 * 1000000LL;
    r.max_elapsed_time = 2000 * 1000000LL;
    r.multiplier = 1.5;
    r.randomization_factor = 0.5;
    return r;
}

typedef struct env {
    uv_loop_t loop;
    pl_stats *stats;
    pl_create_settings settings;
    fake f;
    pl_queue *q;
    bool payload_compressed;
} env;

static pl_queue *env_open(env *e, const pl_sending_queue_config *qc, const pl_retry_config *rc)
{
    pl_queue_sender sender = {fake_encode, fake_send_fn, &e->f, e->payload_compressed};
    pl_err err = {{0}};
    pl_queue *q = pl_queue_new(&e->settings, qc, rc, &sender, &err);
    if (!q)
        fprintf(stderr, "  pl_queue_new: %s\n", err.msg);
    else if (pl_queue_start(q, &err) != PL_OK)
        fprintf(stderr, "  pl_queue_start: %s\n", err.msg);
    return q;
}

static void env_init(env *e, const char *id)
{
    memset(e, 0, sizeof(*e));
    uv_loop_init(&e->loop);
    e->stats = pl_stats_new(id, PL_KIND_EXPORTER);
    e->settings.id = id;
    e->settings.loop = &e->loop;
    e->settings.stats = e->stats;
    fake_init(&e->f, &e->loop);
}

/* env_init, then a queue with `qc` and the fast retry settings, started. */
static pl_queue *env_start(env *e, const char *id, const pl_sending_queue_config *qc)
{
    env_init(e, id);
    pl_retry_config rc = rcfg_fast();
    e->q = env_open(e, qc, &rc);
    return e->q;
}

static void env_finish(env *e)
{
    if (e->q)
        pl_queue_destroy(e->q);
    e->q = NULL;
    /* answer orphaned sends so their tokens are freed */
    for (size_t i = 0; i < e->f.n_pending; i++) {
        pl_send_result r;
        pl_send_result_set(&r, PL_SEND_RETRYABLE, "cancelled");
        pl_queue_send_done(e->f.pending[i].send, &r);
    }
    e->f.n_pending = 0;
    fake_close(&e->f);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    CHECK_EQ_INT(uv_loop_close(&e->loop), 0);
    pl_stats_free(e->stats);
}

/* Runs the loop until cond(e) or timeout_ms; returns cond's last value. */
static bool run_until(env *e, bool (*cond)(env *), uint64_t timeout_ms)
{
    uint64_t end = pl_time_mono_ns() / 1000000 + timeout_ms;
    while (!cond(e) && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e->loop, UV_RUN_ONCE);
    return cond(e);
}

static bool queue_empty(env *e)
{
    pl_queue_info info;
    pl_queue_get_info(e->q, &info);
    return info.batches == 0;
}

static pl_status push_str(pl_queue *q, const char *s)
{
    return pl_queue_push(q, PL_SIGNAL_TRACES, (const uint8_t *)s, strlen(s), strlen(s));
}

/* ---- tests -------------------------------------------------------------- */

static void test_sends_everything_in_order_with_bounded_concurrency(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    REQUIRE(env_start(&e, "otlp/order", &qc));
    const char *payloads[] = {"one", "two", "three", "four", "five"};
    for (int i = 0; i < 5; i++)
        CHECK_EQ_INT(push_str(e.q, payloads[i]), PL_OK);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 5);
    for (int i = 0; i < 5 && i < (int)e.f.n_delivered; i++)
        CHECK_EQ_STR(e.f.delivered[i], payloads[i]);
    CHECK_EQ_UINT(e.f.max_in_flight, 2);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 3 + 3 + 5 + 4 + 4);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    env_finish(&e);
}

static void fail_first_two(fake *f, size_t attempt, const fake_send *s, pl_send_result *r)
{
    if (attempt < 2)
        pl_send_result_set(r, PL_SEND_RETRYABLE, "HTTP 503");
}

static void test_retryable_failures_are_retried_until_accepted_once(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.num_consumers = 1;
    REQUIRE(env_start(&e, "otlp/retry", &qc));
    e.f.policy = fail_first_two;
    CHECK_EQ_INT(push_str(e.q, "payload"), PL_OK);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.attempts, 3);
    CHECK_EQ_UINT(e.f.n_delivered, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 7);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    CHECK_EQ_UINT(*pl_stats_counter(e.stats, "send_retries", ""), 2);
    /* backoff: the second attempt waited at least initial*(1-f) = 2.5 ms */
    CHECK(e.f.attempt_ms[1] - e.f.attempt_ms[0] >= 2);
    env_finish(&e);
}

static void always_permanent(fake *f, size_t attempt, const fake_send *s, pl_send_result *r)
{
    pl_send_result_set(r, PL_SEND_PERMANENT, "HTTP 400: bad request");
}

static void test_permanent_errors_are_not_retried_and_counted_failed(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    REQUIRE(env_start(&e, "otlp/permanent", &qc));
    e.f.policy = always_permanent;
    CHECK_EQ_INT(push_str(e.q, "bad"), PL_OK);
    CHECK(run_until(&e, queue_empty, 2000));
    /* give a retry, if one were (wrongly) scheduled, time to happen */
    uint64_t end = pl_time_mono_ns() + 50000000;
    while (pl_time_mono_ns() < end)
        uv_run(&e.loop, UV_RUN_NOWAIT);
    CHECK_EQ_UINT(e.f.attempts, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 3);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 0);
    env_finish(&e);
}

static void always_retryable(fake *f, size_t attempt, const fake_send *s, pl_send_result *r)
{
    pl_send_result_set(r, PL_SEND_RETRYABLE, "connection refused");
    r->retry_after_ns = f->retry_after_ns;
}

static void test_gives_up_after_max_elapsed_time(void)
{
    env e;
    env_init(&e, "otlp/elapsed");
    pl_sending_queue_config qc = qcfg_default();
    pl_retry_config rc = rcfg_fast();
    rc.max_elapsed_time = 60 * 1000000LL;
    e.q = env_open(&e, &qc, &rc);
    REQUIRE(e.q);
    e.f.policy = always_retryable;
    CHECK_EQ_INT(push_str(e.q, "doomed"), PL_OK);
    uint64_t t0 = pl_time_mono_ns();
    CHECK(run_until(&e, queue_empty, 3000));
    uint64_t took_ms = (pl_time_mono_ns() - t0) / 1000000;
    CHECK(e.f.attempts >= 3);
    CHECK(took_ms <= 200);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 6);
    env_finish(&e);
}

static void test_retry_after_from_the_server_is_honoured(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    REQUIRE(env_start(&e, "otlp/retry-after", &qc));
    e.f.policy = fail_first_two;
    /* fail_first_two gives no delay; wrap: first failure asks for 150 ms */
    e.f.policy = always_retryable;
    e.f.retry_after_ns = 150 * 1000000LL;
    CHECK_EQ_INT(push_str(e.q, "x"), PL_OK);
    uint64_t end = pl_time_mono_ns() / 1000000 + 400;
    while (e.f.attempts < 2 && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e.loop, UV_RUN_ONCE);
    REQUIRE(e.f.attempts >= 2);
    CHECK(e.f.attempt_ms[1] - e.f.attempt_ms[0] >= 149);
    env_finish(&e);
}

static void test_retry_disabled_fails_at_once(void)
{
    env e;
    env_init(&e, "otlp/noretry");
    pl_sending_queue_config qc = qcfg_default();
    pl_retry_config rc = rcfg_fast();
    rc.enabled = false;
    e.q = env_open(&e, &qc, &rc);
    REQUIRE(e.q);
    e.f.policy = always_retryable;
    CHECK_EQ_INT(push_str(e.q, "abc"), PL_OK);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.attempts, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 3);
    env_finish(&e);
}

static void reject_three(fake *f, size_t attempt, const fake_send *s, pl_send_result *r)
{
    pl_send_result_set(r, PL_SEND_OK, "3 spans had bad ids");
    r->rejected_items = 3;
}

static void test_partial_success_counts_rejected_as_failed_without_retry(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    REQUIRE(env_start(&e, "otlp/partial", &qc));
    e.f.policy = reject_three;
    CHECK_EQ_INT(push_str(e.q, "0123456789"), PL_OK);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.attempts, 1);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 7);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 3);
    env_finish(&e);
}

static void test_full_queue_refuses_new_data(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.num_consumers = 1;
    qc.queue_size = 3;
    REQUIRE(env_start(&e, "otlp/full", &qc));
    e.f.hold = true; /* a backend that never answers */
    CHECK_EQ_INT(push_str(e.q, "a"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "b"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "c"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "dd"), PL_ERR_REFUSED);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_REFUSED), 2);
    CHECK_EQ_INT(*pl_stats_gauge(e.stats, "queue_batches", ""), 3);
    /* otelcol_exporter_queue_size / _capacity, in the default sizer's unit */
    CHECK_EQ_INT(*pl_stats_gauge(e.stats, "queue_used", ""), 3);
    CHECK_EQ_INT(*pl_stats_gauge(e.stats, "queue_capacity", ""), 3);
    /* once the backend answers, room comes back */
    e.f.hold = false;
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_INT(push_str(e.q, "dd"), PL_OK);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 4);
    env_finish(&e);
}

static void test_byte_and_item_bounds_refuse(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.max_bytes = 10;
    qc.max_items = 8;
    REQUIRE(env_start(&e, "otlp/bytes", &qc));
    e.f.hold = true;
    CHECK_EQ_INT(push_str(e.q, "12345678901234"), PL_OK); /* over the bound, but alone: accepted */
    CHECK_EQ_INT(push_str(e.q, "1"), PL_ERR_REFUSED);
    e.f.hold = false;
    CHECK(run_until(&e, queue_empty, 2000));
    e.f.hold = true;
    CHECK_EQ_INT(push_str(e.q, "12345"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "1234"), PL_ERR_REFUSED); /* 9 items > 8 */
    CHECK_EQ_INT(push_str(e.q, "123"), PL_OK);
    e.f.hold = false;
    CHECK(run_until(&e, queue_empty, 2000));
    env_finish(&e);
}

static void test_disabled_queue_holds_only_what_is_in_flight(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.enabled = false;
    qc.num_consumers = 1;
    REQUIRE(env_start(&e, "otlp/noqueue", &qc));
    e.f.hold = true;
    CHECK_EQ_INT(push_str(e.q, "a"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "b"), PL_ERR_REFUSED);
    env_finish(&e);
}

static void test_export_encodes_the_batch(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    REQUIRE(env_start(&e, "otlp/export", &qc));
    pl_batch *b = pl_batch_new(PL_SIGNAL_LOGS);
    REQUIRE(b);
    b->data.raw = PL_BYTES_LIT("log-request");
    CHECK_EQ_INT(pl_queue_export(e.q, b), PL_OK);
    pl_batch_free(b); /* the queue keeps its own encoded copy */
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 1);
    CHECK_EQ_STR(e.f.delivered[0], "log-request");
    CHECK_EQ_INT(e.f.delivered_signal[0], PL_SIGNAL_LOGS);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_LOGS, PL_STAT_SENT), 11);
    env_finish(&e);
}

/* ---- persistence -------------------------------------------------------- */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/pl_test_queue_XXXXXX");
    if (!mkdtemp(tmpdir))
        abort();
}

static void test_storage_deletes_rows_once_accepted(void)
{
    env e;
    env_init(&e, "otlphttp/stored");
    pl_sending_queue_config qc = qcfg_default();
    char path[300];
    snprintf(path, sizeof(path), "%s/ack/", tmpdir);
    qc.storage = path;
    pl_retry_config rc = rcfg_fast();
    e.q = env_open(&e, &qc, &rc);
    REQUIRE(e.q);
    e.f.hold = true;
    CHECK_EQ_INT(push_str(e.q, "alpha"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "beta"), PL_OK);
    pl_queue_info info;
    pl_queue_get_info(e.q, &info);
    CHECK_EQ_UINT(info.stored, 2); /* committed before the push returned */
    e.f.hold = false;
    CHECK(run_until(&e, queue_empty, 2000));
    pl_queue_get_info(e.q, &info);
    CHECK_EQ_UINT(info.stored, 0);
    char *file = pl_queue_storage_file(path, "otlphttp/stored");
    CHECK(file && strstr(file, "/ack/otlphttp_stored.queue.db"));
    CHECK(file && access(file, F_OK) == 0);
    free(file);
    env_finish(&e);
}

/* The child acknowledges (pushes) three batches to a backend that never
 * answers, then dies by SIGKILL. A new queue on the same storage must send
 * all three, with their exact bytes, and then hold nothing. */
static void test_kill_9_after_ack_loses_nothing(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/kill.db", tmpdir);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        env e;
        env_init(&e, "otlp/kill");
        pl_sending_queue_config qc = qcfg_default();
        qc.storage = path;
        pl_retry_config rc = rcfg_fast();
        e.q = env_open(&e, &qc, &rc);
        if (!e.q)
            _exit(3);
        e.f.hold = true;
        const char *p[] = {"span-batch-1", "span-batch-2", "span-batch-3"};
        for (int i = 0; i < 3; i++)
            if (push_str(e.q, p[i]) != PL_OK)
                _exit(4);
        for (int i = 0; i < 5; i++) /* a few sends go out and hang */
            uv_run(&e.loop, UV_RUN_NOWAIT);
        raise(SIGKILL);
        _exit(5);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.storage = path;
    qc.num_consumers = 1;
    REQUIRE(env_start(&e, "otlp/kill", &qc));
    pl_queue_info info;
    pl_queue_get_info(e.q, &info);
    CHECK_EQ_UINT(info.batches, 3);
    CHECK_EQ_UINT(info.items, 36);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 3);
    CHECK_EQ_STR(e.f.delivered[0], "span-batch-1");
    CHECK_EQ_STR(e.f.delivered[1], "span-batch-2");
    CHECK_EQ_STR(e.f.delivered[2], "span-batch-3");
    pl_queue_get_info(e.q, &info);
    CHECK_EQ_UINT(info.stored, 0);
    env_finish(&e);
}

/* An exporter whose payloads are compressed already: stored as they are,
 * read back byte for byte. */
static void test_storage_keeps_precompressed_payloads_as_they_are(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/raw.db", tmpdir);
    env e;
    env_init(&e, "otlp/raw");
    e.payload_compressed = true;
    pl_sending_queue_config qc = qcfg_default();
    qc.storage = path;
    pl_retry_config rc = rcfg_fast();
    e.q = env_open(&e, &qc, &rc);
    REQUIRE(e.q);
    e.f.hold = true;
    CHECK_EQ_INT(push_str(e.q, "\x1f\x8b-not-really-gzip"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, ""), PL_OK);
    env_finish(&e);

    env_init(&e, "otlp/raw");
    e.payload_compressed = false; /* the setting changed: rows say how they were stored */
    e.q = env_open(&e, &qc, &rc);
    REQUIRE(e.q);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 2);
    CHECK_EQ_STR(e.f.delivered[0], "\x1f\x8b-not-really-gzip");
    CHECK_EQ_STR(e.f.delivered[1], "");
    env_finish(&e);
}

/* queue_size counts in units of the sizer, as in the Collector: with
 * `sizer: items` it bounds the items held, and the queue's size and
 * capacity are reported in items. */
static void test_queue_size_counts_in_units_of_the_sizer(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.num_consumers = 1;
    qc.sizer = "items";
    qc.queue_size = 10;
    qc.max_items = 10; /* what the config's validate hook makes of it */
    REQUIRE(env_start(&e, "otlp/items", &qc));
    e.f.hold = true;
    CHECK_EQ_INT(push_str(e.q, "abcd"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "efg"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "hijk"), PL_ERR_REFUSED); /* 11 items > 10 */
    CHECK_EQ_INT(push_str(e.q, "hij"), PL_OK);
    CHECK_EQ_INT(*pl_stats_gauge(e.stats, "queue_batches", ""), 3);
    CHECK_EQ_INT(*pl_stats_gauge(e.stats, "queue_used", ""), 10);
    CHECK_EQ_INT(*pl_stats_gauge(e.stats, "queue_capacity", ""), 10);
    e.f.hold = false;
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_INT(*pl_stats_gauge(e.stats, "queue_used", ""), 0);
    env_finish(&e);
}

static void test_two_queues_cannot_share_a_storage_file(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/shared.db", tmpdir);
    env e;
    env_init(&e, "otlp/a");
    /* the files in use are the host's: a host of its own per pipeline */
    pl_host host = {.claims = pl_claims_new()}, other_host = {.claims = pl_claims_new()};
    REQUIRE(host.claims && other_host.claims);
    e.settings.host = &host;
    pl_sending_queue_config qc = qcfg_default();
    qc.storage = path;
    pl_retry_config rc = rcfg_fast();
    e.q = env_open(&e, &qc, &rc);
    REQUIRE(e.q);
    char holder[64];
    char file[320];
    snprintf(file, sizeof(file), "%s", path);
    CHECK(!pl_host_claim(&host, file, "otlp/c", holder, sizeof(holder)));
    CHECK_EQ_STR(holder, "otlp/a");
    /* another host (another pipeline in this process) keeps its own list */
    CHECK(pl_host_claim(&other_host, file, "otlp/c", holder, sizeof(holder)));
    pl_host_unclaim(&other_host, file, "otlp/c");
    pl_create_settings other = e.settings;
    other.id = "otlp/b";
    pl_queue_sender sender = {fake_encode, fake_send_fn, &e.f, false};
    pl_err err = {{0}};
    pl_queue *q2 = pl_queue_new(&other, &qc, &rc, &sender, &err);
    CHECK(q2 == NULL);
    CHECK(strstr(err.msg, "already used by otlp/a") != NULL);
    if (q2)
        pl_queue_destroy(q2);
    /* a directory gives each exporter its own file */
    snprintf(path, sizeof(path), "%s/shared-dir/", tmpdir);
    qc.storage = path;
    pl_queue *qa = pl_queue_new(&e.settings, &qc, &rc, &sender, &err);
    pl_queue *qb = pl_queue_new(&other, &qc, &rc, &sender, &err);
    CHECK(qa != NULL && qb != NULL);
    if (qa)
        pl_queue_destroy(qa);
    if (qb)
        pl_queue_destroy(qb);
    /* a destroyed queue gives its file back */
    pl_queue_destroy(e.q);
    e.q = NULL;
    CHECK(pl_host_claim(&host, file, "otlp/c", holder, sizeof(holder)));
    pl_host_unclaim(&host, file, "otlp/c");
    env_finish(&e);
    pl_claims_free(host.claims);
    pl_claims_free(other_host.claims);
}

static void test_storage_shutdown_keeps_unsent_data_for_next_start(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/drain.db", tmpdir);
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.storage = path;
    qc.num_consumers = 1;
    env_start(&e, "otlp/drain", &qc);
    REQUIRE(e.q);
    e.f.policy = always_retryable; /* backend down */
    CHECK_EQ_INT(push_str(e.q, "first"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "second"), PL_OK);
    uint64_t end = pl_time_mono_ns() / 1000000 + 1000;
    while (e.f.attempts < 2 && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e.loop, UV_RUN_ONCE);
    pl_queue_shutdown(e.q);
    CHECK_EQ_INT(push_str(e.q, "late"), PL_ERR_REFUSED);
    end = pl_time_mono_ns() / 1000000 + 1000;
    while (pl_queue_pending(e.q) && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e.loop, UV_RUN_ONCE);
    CHECK_EQ_UINT(pl_queue_pending(e.q), 0);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_FAILED), 0);
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_DROPPED), 0);
    env_finish(&e);

    env_start(&e, "otlp/drain", &qc);
    REQUIRE(e.q);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 2);
    CHECK_EQ_STR(e.f.delivered[0], "first");
    CHECK_EQ_STR(e.f.delivered[1], "second");
    env_finish(&e);
}

static size_t files_set_aside(const char *path)
{
    char pattern[400];
    snprintf(pattern, sizeof(pattern), "%s.corrupt-*", path);
    glob_t g;
    size_t n = 0;
    if (glob(pattern, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++)
            n += !strstr(g.gl_pathv[i] + strlen(path), "-wal") &&
                 !strstr(g.gl_pathv[i] + strlen(path), "-shm");
        globfree(&g);
    }
    return n;
}

/* A storage file that fails its check at start is set aside, a fresh one is
 * used, and the rows that can still be read are sent from it: damaged pages
 * elsewhere in the file lose nothing the queue's table still holds. */
static void test_damaged_storage_is_set_aside_and_salvaged(void)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/damaged.db", tmpdir);
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.storage = path;
    qc.num_consumers = 1;
    env_start(&e, "otlp/damaged", &qc);
    REQUIRE(e.q);
    e.f.policy = always_retryable; /* backend down: the rows stay */
    CHECK_EQ_INT(push_str(e.q, "first"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "second"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "third"), PL_OK);
    pl_queue_shutdown(e.q);
    uint64_t end = pl_time_mono_ns() / 1000000 + 1000;
    while (pl_queue_pending(e.q) && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e.loop, UV_RUN_ONCE);
    env_finish(&e);

    /* other pages of the file, after the queue's, get garbage */
    REQUIRE(damage_sqlite_tail(path));

    env_start(&e, "otlp/damaged", &qc);
    REQUIRE(e.q); /* starts */
    CHECK_EQ_UINT(files_set_aside(path), 1);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 3);
    if (e.f.n_delivered == 3) {
        CHECK_EQ_STR(e.f.delivered[0], "first");
        CHECK_EQ_STR(e.f.delivered[2], "third");
    }
    env_finish(&e);

    /* not a database at all: set aside, a fresh queue works */
    char *file = pl_queue_storage_file(path, "otlp/damaged");
    REQUIRE(file);
    FILE *f = fopen(file, "wb");
    REQUIRE(f);
    for (int i = 0; i < 100; i++)
        fputs("this is no database\n", f);
    fclose(f);
    env_start(&e, "otlp/damaged", &qc);
    REQUIRE(e.q);
    CHECK_EQ_UINT(files_set_aside(file), 2);
    CHECK_EQ_INT(push_str(e.q, "after"), PL_OK);
    CHECK(run_until(&e, queue_empty, 2000));
    CHECK_EQ_UINT(e.f.n_delivered, 1);
    env_finish(&e);
    free(file);
}

static void test_memory_queue_drains_after_shutdown(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    REQUIRE(env_start(&e, "otlp/memdrain", &qc));
    e.f.policy = fail_first_two;
    CHECK_EQ_INT(push_str(e.q, "a"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "b"), PL_OK);
    pl_queue_shutdown(e.q);
    CHECK_EQ_UINT(pl_queue_pending(e.q), 2);
    uint64_t end = pl_time_mono_ns() / 1000000 + 2000;
    while (pl_queue_pending(e.q) && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e.loop, UV_RUN_ONCE);
    CHECK_EQ_UINT(pl_queue_pending(e.q), 0);
    CHECK_EQ_UINT(e.f.n_delivered, 2);
    env_finish(&e);
}

static void test_destroy_counts_unsent_memory_batches_as_dropped(void)
{
    env e;
    pl_sending_queue_config qc = qcfg_default();
    qc.num_consumers = 1;
    REQUIRE(env_start(&e, "otlp/drop", &qc));
    e.f.hold = true;
    CHECK_EQ_INT(push_str(e.q, "inflight"), PL_OK);
    CHECK_EQ_INT(push_str(e.q, "queued"), PL_OK);
    pl_queue_destroy(e.q);
    e.q = NULL;
    CHECK_EQ_UINT(pl_stats_get(e.stats, PL_SIGNAL_TRACES, PL_STAT_DROPPED), 6);
    env_finish(&e); /* completes the orphaned in-flight send (ASan checks the frees) */
}

static void test_backoff_grows_and_is_capped(void)
{
    env e;
    env_init(&e, "otlp/backoff");
    pl_sending_queue_config qc = qcfg_default();
    qc.num_consumers = 1;
    pl_retry_config rc = rcfg_fast();
    rc.initial_interval = 10 * 1000000LL;
    rc.max_interval = 40 * 1000000LL;
    rc.randomization_factor = 0;
    rc.multiplier = 2;
    e.q = env_open(&e, &qc, &rc);
    REQUIRE(e.q);
    e.f.policy = always_retryable;
    CHECK_EQ_INT(push_str(e.q, "x"), PL_OK);
    uint64_t end = pl_time_mono_ns() / 1000000 + 2000;
    while (e.f.attempts < 6 && pl_time_mono_ns() / 1000000 < end)
        uv_run(&e.loop, UV_RUN_ONCE);
    REQUIRE(e.f.attempts >= 6);
    /* waits: 10, 20, 40, 40, 40 ms (+ up to a tick of the fake backend) */
    uint64_t expect[] = {10, 20, 40, 40, 40};
    for (int i = 0; i < 5; i++) {
        uint64_t gap = e.f.attempt_ms[i + 1] - e.f.attempt_ms[i];
        CHECK(gap >= expect[i] - 1 && gap <= expect[i] + 15);
    }
    env_finish(&e);
}

int main(void)
{
    make_tmpdir();
    PL_RUN(test_sends_everything_in_order_with_bounded_concurrency);
    PL_RUN(test_retryable_failures_are_retried_until_accepted_once);
    PL_RUN(test_permanent_errors_are_not_retried_and_counted_failed);
    PL_RUN(test_gives_up_after_max_elapsed_time);
    PL_RUN(test_retry_after_from_the_server_is_honoured);
    PL_RUN(test_retry_disabled_fails_at_once);
    PL_RUN(test_partial_success_counts_rejected_as_failed_without_retry);
    PL_RUN(test_full_queue_refuses_new_data);
    PL_RUN(test_byte_and_item_bounds_refuse);
    PL_RUN(test_disabled_queue_holds_only_what_is_in_flight);
    PL_RUN(test_export_encodes_the_batch);
    PL_RUN(test_backoff_grows_and_is_capped);
    PL_RUN(test_storage_deletes_rows_once_accepted);
    PL_RUN(test_kill_9_after_ack_loses_nothing);
    PL_RUN(test_storage_shutdown_keeps_unsent_data_for_next_start);
    PL_RUN(test_storage_keeps_precompressed_payloads_as_they_are);
    PL_RUN(test_queue_size_counts_in_units_of_the_sizer);
    PL_RUN(test_two_queues_cannot_share_a_storage_file);
    PL_RUN(test_damaged_storage_is_set_aside_and_salvaged);
    PL_RUN(test_memory_queue_drains_after_shutdown);
    PL_RUN(test_destroy_counts_unsent_memory_batches_as_dropped);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return pl_test_done();
}
