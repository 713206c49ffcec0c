/*
 * pprof_scrape.c: the `pprof_scrape` receiver. Pulls profiles from services
 * that expose Go's net/http/pprof handlers, so an unmodified Go service can
 * be profiled without an SDK:
 *
 *   GET <endpoint>/debug/pprof/profile?seconds=N   CPU profile over N seconds
 *   GET <endpoint>/debug/pprof/heap                heap (alloc_* and inuse_*)
 *   GET <endpoint>/debug/pprof/goroutine           goroutine stacks
 *
 * Every `interval`, each target is asked for each configured profile type,
 * unless the previous request for that (target, type) is still running (a
 * CPU profile takes N seconds: requests never pile up). The answer, a
 * gzipped pprof, goes through the same decoder as the Pyroscope receiver's
 * (proto/pprof_decode.c), so it becomes one OTLP Profile per sample type. A
 * target's `labels` become resource attributes; service.name defaults to the
 * target's host:port when the labels do not name it (service_name is read
 * as service.name).
 *
 * Cumulative profiles become deltas, as Grafana Alloy's pyroscope.scrape
 * sends them (receivers/pprof_delta.h): Go's allocs profile and the heap's
 * alloc_* columns, block and mutex count since the process started, so each
 * scrape passes on only what was added since the previous one of the same
 * (target, profile type); the first scrape primes. inuse_* are gauges and
 * pass as they are, from heap or allocs alike (when both are scraped, heap
 * sends only inuse_* and allocs only alloc_*, so nothing is counted twice).
 * Each profile is named (`__name__`) as Alloy names it: process_cpu,
 * memory, goroutines, block, mutex. `delta: false` forwards the cumulative
 * counts instead.
 *
 * Each target may have its own interval and timeout, extra headers, basic
 * or bearer authentication, and TLS settings for https:// endpoints.
 * Requests run on the event loop through the shared libcurl client
 * (net/http_client.h), so a slow target never blocks anything; one timer
 * fires at the next request due.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/component.h"
#include "core/log.h"
#include "net/grpc.h"
#include "net/http_auth.h"
#include "net/http_client.h"
#include "proto/pprof.h"
#include "receivers/pprof_delta.h"

#include "receivers/pprof_scrape.config.h"

static int target_validate(void *cfgp, pl_cfg_ctx *ctx)
{
    scrape_target_cfg *t = cfgp;
    int errors = 0;
    if (!t->endpoint ||
        (strncmp(t->endpoint, "http://", 7) != 0 && strncmp(t->endpoint, "https://", 8) != 0)) {
        pl_cfg_errorf(ctx, "endpoint", "must be an http:// or https:// URL");
        errors++;
    }
    errors += pl_cfg_check(ctx, !(t->interval && t->interval < 1000000000LL), "interval",
                           "must be at least 1s");
    errors += pl_http_credentials_check(ctx, "bearer_token", t->bearer_token, &t->basic_auth);
    return errors;
}

static const char *const known_profiles[] = {"cpu",   "heap",  "goroutine", "allocs",
                                             "block", "mutex", NULL};

static int scrape_validate(void *cfgp, pl_cfg_ctx *ctx)
{
    scrape_cfg *cfg = cfgp;
    int errors = 0;
    for (size_t i = 0; i < cfg->profiles.n; i++) {
        bool ok = false;
        for (size_t k = 0; known_profiles[k]; k++)
            ok |= strcmp(cfg->profiles.items[i], known_profiles[k]) == 0;
        errors += pl_cfg_check(ctx, ok, "profiles", "unknown profile type \"%s\"",
                               cfg->profiles.items[i]);
    }
    return errors;
}

#include "receivers/pprof_scrape.config.inc"

/* ---- instance --------------------------------------------------------------- */

typedef struct scrape scrape;

typedef struct scrape_job {
    scrape *owner;
    char *url;
    const char *profile; /* "cpu", "heap", ... */
    size_t target;
    bool in_flight;
    uint64_t timeout_ms, interval_ms;
    uint64_t next_due_ms;  /* loop time of the next request */
    pl_pprof_delta *delta; /* cumulative profiles: the previous scrape */
} scrape_job;

typedef struct scrape_target {
    pl_kv *attrs;
    uint32_t n_attrs;
    char **strings; /* keys and values the attrs point to, header lines, TLS paths */
    size_t n_strings;
    const char **headers; /* "Name: value" */
    size_t n_headers;
    pl_http_tls tls;
    bool has_tls;
} scrape_target;

struct scrape {
    const pl_host *host; /* the worker pool that decodes (NULL: none) */
    char id[128];
    uv_loop_t *loop;
    pl_stats *stats;
    pl_consumer *next;
    pl_http_client *client;
    uv_timer_t timer;
    bool timer_init, stopping;
    size_t max_profile_size;
    scrape_target *targets;
    size_t n_targets;
    scrape_job *jobs;
    size_t n_jobs;
    uint64_t *scrapes_ok, *scrapes_failed, *primed;
    struct decode_job *decoding; /* profiles being decoded on the workers */
};

static void reschedule(scrape *s);

/* ---- decoding on the workers ----------------------------------------------
 * With service.workers > 1 the pprof of a scrape is decompressed, decoded and
 * converted on a worker (pipeline/workers.h); the delta of a cumulative
 * profile and the hand-off to the pipeline stay on the loop, in order per
 * job (a job's next scrape waits until its previous one is done). A worker
 * reads the copy of the body, the target's attributes and the size limits,
 * which do not change while the receiver lives; destroy marks the jobs still
 * out as orphaned and waits for one that is running (decode_mu), so a
 * worker never reads a freed target. */

typedef struct decode_job {
    struct decode_job *next;
    scrape *s;
    scrape_job *job;
    uint8_t *body;           /* a copy, freed with the job */
    const uint8_t *borrowed; /* or the client's buffer, when decoded in on_scraped */
    size_t len;
    uint64_t now;
    pl_batch *batch; /* the result, or NULL with err set */
    pl_err err;
    int state;   /* 0 queued, 1 running, 2 finished; under decode_mu */
    bool orphan; /* under decode_mu: the receiver is gone */
} decode_job;

static pthread_mutex_t decode_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t decode_cv = PTHREAD_COND_INITIALIZER;

static void decode_job_free(decode_job *d)
{
    pl_batch_free(d->batch);
    free(d->body);
    free(d);
}

/* On a worker, or on the loop without workers. */
/* The `__name__` Grafana Alloy's pyroscope.scrape gives each Go profile
 * (what a Pyroscope server then stores it under). */
static const char *scrape_profile_name(const char *profile)
{
    static const char *const names[][2] = {{"cpu", "process_cpu"}, {"heap", "memory"},
                                           {"allocs", "memory"},   {"goroutine", "goroutines"},
                                           {"block", "block"},     {"mutex", "mutex"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(profile, names[i][0]) == 0)
            return names[i][1];
    return profile;
}

static void decode_work(void *arg)
{
    decode_job *d = arg;
    pthread_mutex_lock(&decode_mu);
    bool skip = d->orphan;
    d->state = skip ? 2 : 1;
    pthread_mutex_unlock(&decode_mu);
    if (skip)
        return;
    scrape *s = d->s;
    const scrape_target *t = &s->targets[d->job->target];
    pl_pprof_meta meta = {
        .resource_attrs = t->attrs,
        .n_resource_attrs = t->n_attrs,
        .scope_name = PL_BYTES_LIT("proflink/pprof_scrape"),
        .default_time_unix_nano = d->now,
        .max_decoded_size = s->max_profile_size * 8,
        .profile_name = pl_bytes_from_cstr(scrape_profile_name(d->job->profile)),
    };
    /* A target's answer is as untrusted as an upload: the same decoded
     * budget as the pyroscope receiver's defaults bounds what it expands to. */
    pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_pprof_builder *b = batch ? pl_pprof_builder_new(batch) : NULL;
    pl_status st = PL_ERR_NOMEM;
    if (b) {
        size_t budget = s->max_profile_size * 8 > (40u << 20) ? s->max_profile_size * 8 : 40u << 20;
        pl_pprof_builder_set_budget(b, budget, 4000000);
        st = pl_pprof_builder_add(b, d->body, d->len, &meta, &d->err);
    } else {
        pl_errf(&d->err, PL_ERR_NOMEM, "out of memory");
    }
    pl_pprof_builder_free(b);
    if (st != PL_OK) {
        pl_batch_free(batch);
        batch = NULL;
    }
    d->batch = batch;
    pthread_mutex_lock(&decode_mu);
    d->state = 2;
    pthread_cond_broadcast(&decode_cv);
    pthread_mutex_unlock(&decode_mu);
}

/* On the loop: the delta, then the pipeline. */
static void decode_done(void *arg)
{
    decode_job *d = arg;
    if (d->orphan) { /* set on this thread, by destroy */
        decode_job_free(d);
        return;
    }
    scrape *s = d->s;
    scrape_job *job = d->job;
    for (decode_job **p = &s->decoding; *p; p = &(*p)->next)
        if (*p == d) {
            *p = d->next;
            break;
        }
    job->in_flight = false;
    pl_batch *batch = d->batch;
    d->batch = NULL;
    uint64_t now = d->now;
    pl_err err = d->err;
    decode_job_free(d);
    if (s->stopping) {
        pl_batch_free(batch);
        return;
    }
    reschedule(s);
    if (!batch) {
        (*s->scrapes_failed)++;
        pl_warn(s->id, "GET %s: not a valid pprof: %s", job->url, err.msg);
        return;
    }
    (*s->scrapes_ok)++;
    pl_status st;
    if (job->delta) {
        bool empty = false;
        st = pl_pprof_delta_apply(job->delta, batch, now, &empty, &err);
        if (st != PL_OK) {
            pl_warn(s->id, "GET %s: %s", job->url, err.msg);
            pl_batch_free(batch);
            return;
        }
        if (empty) {
            /* the first scrape, a restarted target, or nothing new */
            (*s->primed)++;
            pl_batch_free(batch);
            return;
        }
    }
    size_t items = pl_batch_items(batch);
    batch->received_unix_nano = now;
    st = pl_consumer_consume(s->next, batch);
    if (st == PL_OK)
        pl_stats_add(s->stats, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED, items);
    else {
        pl_stats_add(s->stats, PL_SIGNAL_PROFILES, PL_STAT_DROPPED, items);
        pl_warn(s->id, "profile from %s dropped: pipeline answered %s", job->url,
                pl_status_name(st));
    }
}

static void on_scraped(void *arg, const pl_http_client_result *res)
{
    scrape_job *job = arg;
    scrape *s = job->owner;
    job->in_flight = false;
    if (s->stopping || res->transport_error == PL_HTTP_CANCELLED)
        return;
    reschedule(s);
    if (res->transport_error || res->status != 200 || res->body_truncated) {
        (*s->scrapes_failed)++;
        pl_warn(s->id, "GET %s: %s", job->url,
                res->transport_error  ? (res->error ? res->error : "transport error")
                : res->body_truncated ? "profile larger than max_profile_size"
                                      : "unexpected HTTP status");
        if (!res->transport_error && res->status != 200)
            pl_warn(s->id, "GET %s: HTTP %d", job->url, res->status);
        return;
    }
    /* With workers the body is copied (the client's buffer goes when this
     * returns); without, it is decoded here, from the client's buffer. */
    bool on_workers = pl_host_workers_count(s->host) > 1;
    decode_job *d = calloc(1, sizeof(*d));
    uint8_t *copy = d && on_workers ? malloc(res->body_len ? res->body_len : 1) : NULL;
    if (!d || (on_workers && !copy)) {
        free(d);
        (*s->scrapes_failed)++;
        pl_warn(s->id, "GET %s: out of memory", job->url);
        return;
    }
    if (copy)
        memcpy(copy, res->body, res->body_len);
    d->s = s;
    d->job = job;
    d->body = copy;
    d->borrowed = copy ? NULL : res->body;
    d->len = res->body_len;
    d->now = pl_time_now_ns();
    /* the next scrape of this job waits for this one's delta */
    job->in_flight = true;
    d->next = s->decoding;
    s->decoding = d;
    if (!copy || !pl_host_submit(s->host, decode_work, decode_done, d)) {
        if (!d->body)
            d->body = (uint8_t *)d->borrowed; /* read only, and only during this call */
        decode_work(d);
        if (d->borrowed)
            d->body = NULL;
        decode_done(d);
    }
}

static void scrape_due(scrape *s)
{
    uint64_t now = uv_now(s->loop);
    for (size_t i = 0; i < s->n_jobs; i++) {
        scrape_job *job = &s->jobs[i];
        if (job->in_flight || now < job->next_due_ms)
            continue;
        job->next_due_ms = now + job->interval_ms;
        const scrape_target *t = &s->targets[job->target];
        pl_http_client_request req = {
            .method = "GET",
            .url = job->url,
            .headers = t->headers,
            .n_headers = t->n_headers,
            .timeout_ms = job->timeout_ms,
            .tls = t->has_tls ? &t->tls : NULL,
            .max_response_body = s->max_profile_size + 1,
        };
        pl_err err = {{0}};
        if (pl_http_client_send(s->client, &req, on_scraped, job, &err) == PL_OK)
            job->in_flight = true;
        else {
            (*s->scrapes_failed)++;
            pl_warn(s->id, "GET %s: %s", job->url, err.msg);
        }
    }
    reschedule(s);
}

static void on_tick(uv_timer_t *t)
{
    scrape *s = t->data;
    if (!s->stopping)
        scrape_due(s);
}

/* The timer fires when the next idle job is due (a job still running is
 * looked at again when it finishes). */
static void reschedule(scrape *s)
{
    if (!s->timer_init || s->stopping)
        return;
    uint64_t now = uv_now(s->loop), next = UINT64_MAX;
    for (size_t i = 0; i < s->n_jobs; i++)
        if (!s->jobs[i].in_flight && s->jobs[i].next_due_ms < next)
            next = s->jobs[i].next_due_ms;
    if (next == UINT64_MAX)
        uv_timer_stop(&s->timer);
    else
        uv_timer_start(&s->timer, on_tick, next > now ? next - now : 0, 0);
}

static void scrape_destroy(void *self);

static char *keep_string(scrape_target *t, const char *s)
{
    char **grown = realloc(t->strings, (t->n_strings + 1) * sizeof(char *));
    if (!grown)
        return NULL;
    t->strings = grown;
    char *copy = strdup(s);
    if (copy)
        t->strings[t->n_strings++] = copy;
    return copy;
}

/* Header lines and TLS settings of a target; -1 on OOM. */
static int target_http(scrape_target *t, const scrape_target_cfg *tc)
{
    size_t n = tc->headers.n + 1;
    t->headers = calloc(n, sizeof(char *));
    if (!t->headers)
        return -1;
    /* The configured headers, then Authorization when credentials are set. */
    char *authorization;
    if (pl_http_authorization(tc->bearer_token, &tc->basic_auth, &authorization))
        return -1;
    size_t n_lines = tc->headers.n + (authorization != NULL);
    pl_buf line;
    pl_buf_init(&line);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n_lines; i++) {
        bool own = i < tc->headers.n;
        const char *v = own ? tc->headers.values[i] : authorization;
        pl_buf_reset(&line);
        pl_buf_printf(&line, "%s: %s", own ? tc->headers.keys[i] : "Authorization", v ? v : "");
        pl_buf_append_byte(&line, 0);
        const char *h = pl_buf_ok(&line) ? keep_string(t, (const char *)line.data) : NULL;
        if (h)
            t->headers[t->n_headers++] = h;
        else
            rc = -1;
    }
    pl_buf_free(&line);
    free(authorization);
    if (rc)
        return -1;
    const scrape_tls_cfg *tls = &tc->tls;
    if ((tls->ca_file && *tls->ca_file) || (tls->cert_file && *tls->cert_file) ||
        (tls->key_file && *tls->key_file) || tls->insecure_skip_verify) {
        t->has_tls = true;
        t->tls.insecure_skip_verify = tls->insecure_skip_verify;
        if ((tls->ca_file && !(t->tls.ca_file = keep_string(t, tls->ca_file))) ||
            (tls->cert_file && !(t->tls.cert_file = keep_string(t, tls->cert_file))) ||
            (tls->key_file && !(t->tls.key_file = keep_string(t, tls->key_file))))
            return -1;
    }
    return 0;
}

static pl_status scrape_create(const pl_create_settings *settings, const void *config, void **out,
                               pl_err *err)
{
    const scrape_cfg *cfg = config;
    scrape *s = calloc(1, sizeof(*s));
    if (!s)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    snprintf(s->id, sizeof(s->id), "%s", settings->id ? settings->id : "pprof_scrape");
    s->loop = settings->loop;
    s->stats = settings->stats;
    s->host = settings->host;
    /* scrapes are HTTP requests: the series carry transport="http" */
    pl_stats_add_via(s->stats, PL_TRANSPORT_HTTP, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED, 0);
    s->next = settings->next[PL_SIGNAL_PROFILES];
    uint64_t interval_ms = cfg->interval > 0 ? (uint64_t)(cfg->interval / 1000000) : 15000;
    s->max_profile_size = cfg->max_profile_size ? cfg->max_profile_size : (32u << 20);
    s->scrapes_ok = pl_stats_counter(s->stats, "scrapes", "profiles pulled");
    s->scrapes_failed = pl_stats_counter(s->stats, "scrape_failures", "profile pulls that failed");
    s->primed = pl_stats_counter(s->stats, "scrapes_without_delta",
                                 "cumulative profiles pulled that gave nothing to send "
                                 "(the first of a target, a restart, or no change)");
    const scrape_target_cfg *targets = cfg->targets.items;
    s->n_targets = cfg->targets.n;
    s->targets = calloc(s->n_targets ? s->n_targets : 1, sizeof(scrape_target));
    size_t n_profiles = cfg->profiles.n;
    const char *const default_profiles[] = {"cpu", "heap", "goroutine"};
    if (n_profiles == 0)
        n_profiles = 3;
    s->jobs = calloc(s->n_targets * n_profiles + 1, sizeof(scrape_job));
    if (!s->targets || !s->jobs) {
        scrape_destroy(s);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->n_targets; i++) {
        const scrape_target_cfg *tc = &targets[i];
        scrape_target *t = &s->targets[i];
        t->attrs = calloc(tc->labels.n + 1, sizeof(pl_kv));
        if (!t->attrs || target_http(t, tc)) {
            scrape_destroy(s);
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
        bool has_service = false;
        for (size_t k = 0; k < tc->labels.n; k++) {
            const char *key = tc->labels.keys[k];
            if (strcmp(key, "service_name") == 0)
                key = "service.name";
            has_service |= strcmp(key, "service.name") == 0;
            char *kc = keep_string(t, key);
            char *vc = keep_string(t, tc->labels.values[k] ? tc->labels.values[k] : "");
            if (!kc || !vc) {
                scrape_destroy(s);
                return pl_errf(err, PL_ERR_NOMEM, "out of memory");
            }
            t->attrs[t->n_attrs].key = pl_bytes_from_cstr(kc);
            t->attrs[t->n_attrs++].value = pl_value_string(pl_bytes_from_cstr(vc));
        }
        if (!has_service) {
            /* host:port of the endpoint */
            const char *h = strstr(tc->endpoint ? tc->endpoint : "", "://");
            h = h ? h + 3 : (tc->endpoint ? tc->endpoint : "");
            char host[256];
            snprintf(host, sizeof(host), "%s", h);
            host[strcspn(host, "/")] = '\0';
            char *vc = keep_string(t, host);
            if (!vc) {
                scrape_destroy(s);
                return pl_errf(err, PL_ERR_NOMEM, "out of memory");
            }
            t->attrs[t->n_attrs].key = PL_BYTES_LIT("service.name");
            t->attrs[t->n_attrs++].value = pl_value_string(pl_bytes_from_cstr(vc));
        }
        uint64_t timeout_base = tc->timeout > 0    ? (uint64_t)(tc->timeout / 1000000)
                                : cfg->timeout > 0 ? (uint64_t)(cfg->timeout / 1000000)
                                                   : 30000;
        for (size_t p = 0; p < n_profiles; p++) {
            const char *prof = cfg->profiles.n ? cfg->profiles.items[p] : default_profiles[p];
            scrape_job *job = &s->jobs[s->n_jobs++];
            job->owner = s;
            job->target = i;
            job->interval_ms = tc->interval > 0 ? (uint64_t)(tc->interval / 1000000) : interval_ms;
            for (size_t k = 0; known_profiles[k]; k++)
                if (strcmp(prof, known_profiles[k]) == 0)
                    job->profile = known_profiles[k];
            if (!job->profile) {
                scrape_destroy(s);
                return pl_errf(err, PL_ERR_INVALID, "unknown profile type \"%s\"", prof);
            }
            if (cfg->delta && strcmp(prof, "cpu") != 0 && strcmp(prof, "goroutine") != 0) {
                bool with_allocs = false, with_heap = false;
                for (size_t q = 0; q < cfg->profiles.n; q++) {
                    with_allocs |= strcmp(cfg->profiles.items[q], "allocs") == 0;
                    with_heap |= strcmp(cfg->profiles.items[q], "heap") == 0;
                }
                /* heap and allocs carry the same columns: with both, heap
                 * sends only inuse_* and allocs only alloc_*, so nothing is
                 * counted twice; either alone sends both (inuse_* as the
                 * gauges they are, alloc_* as deltas) */
                pl_delta_mode mode =
                    strcmp(prof, "heap") == 0     ? (with_allocs ? PL_DELTA_INUSE : PL_DELTA_HEAP)
                    : strcmp(prof, "allocs") == 0 ? (with_heap ? PL_DELTA_ALLOCS : PL_DELTA_HEAP)
                                                  : PL_DELTA_ALL;
                job->delta = pl_pprof_delta_new(mode);
                if (!job->delta) {
                    scrape_destroy(s);
                    return pl_errf(err, PL_ERR_NOMEM, "out of memory");
                }
            }
            const char *base = tc->endpoint ? tc->endpoint : "";
            size_t blen = strlen(base);
            while (blen && base[blen - 1] == '/')
                blen--;
            char path[96];
            uint64_t timeout_ms = timeout_base;
            if (strcmp(prof, "cpu") == 0) {
                snprintf(path, sizeof(path), "/debug/pprof/profile?seconds=%lld",
                         (long long)(cfg->cpu_seconds > 0 ? cfg->cpu_seconds : 10));
                timeout_ms += (uint64_t)(cfg->cpu_seconds > 0 ? cfg->cpu_seconds : 10) * 1000;
            } else
                snprintf(path, sizeof(path), "/debug/pprof/%s", prof);
            job->timeout_ms = timeout_ms;
            job->url = malloc(blen + strlen(path) + 1);
            if (!job->url) {
                scrape_destroy(s);
                return pl_errf(err, PL_ERR_NOMEM, "out of memory");
            }
            memcpy(job->url, base, blen);
            strcpy(job->url + blen, path);
        }
    }
    s->client = pl_http_client_new(s->loop, err);
    if (!s->client) {
        scrape_destroy(s);
        return PL_ERR_INTERNAL;
    }
    *out = s;
    return PL_OK;
}

static pl_status scrape_start(void *self, pl_err *err)
{
    scrape *s = self;
    if (uv_timer_init(s->loop, &s->timer))
        return pl_errf(err, PL_ERR_INTERNAL, "timer init failed");
    s->timer_init = true;
    s->timer.data = s;
    /* The first scrape of every job right away, then each on its interval. */
    uint64_t now = uv_now(s->loop);
    for (size_t i = 0; i < s->n_jobs; i++)
        s->jobs[i].next_due_ms = now;
    uv_timer_start(&s->timer, on_tick, 0, 0);
    pl_info(s->id, "scraping %zu target(s), %zu profile(s)", s->n_targets, s->n_jobs);
    return PL_OK;
}

static void scrape_shutdown(void *self)
{
    scrape *s = self;
    s->stopping = true;
    if (s->timer_init) {
        uv_timer_stop(&s->timer);
        uv_close((uv_handle_t *)&s->timer, NULL);
        s->timer_init = false;
    }
    if (s->client) {
        pl_http_client_close(s->client);
        s->client = NULL;
    }
}

static void scrape_destroy(void *self)
{
    scrape *s = self;
    if (!s)
        return;
    /* decodings still out: the done callbacks free them; wait for a
     * running one, which reads the targets freed below */
    pthread_mutex_lock(&decode_mu);
    for (decode_job *d = s->decoding; d; d = d->next) {
        d->orphan = true;
        while (d->state == 1)
            pthread_cond_wait(&decode_cv, &decode_mu);
    }
    pthread_mutex_unlock(&decode_mu);
    s->decoding = NULL;
    if (s->client)
        pl_http_client_close(s->client);
    for (size_t i = 0; i < s->n_jobs; i++) {
        free(s->jobs[i].url);
        pl_pprof_delta_free(s->jobs[i].delta);
    }
    free(s->jobs);
    for (size_t i = 0; s->targets && i < s->n_targets; i++) {
        for (size_t k = 0; k < s->targets[i].n_strings; k++)
            free(s->targets[i].strings[k]);
        free(s->targets[i].strings);
        free(s->targets[i].headers);
        free(s->targets[i].attrs);
    }
    free(s->targets);
    free(s);
}

const pl_component_type pl_receiver_pprof_scrape = {
    PL_COMPONENT_HEAD("pprof_scrape", PL_KIND_RECEIVER, PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
                      &scrape_section),
    .description = "pulls pprof profiles (cpu, heap, goroutine, ...) from Go net/http/pprof "
                   "endpoints on an interval; target labels become resource attributes",
    PL_COMPONENT_LIFECYCLE(scrape_create, scrape_start, scrape_shutdown, scrape_destroy),
};
