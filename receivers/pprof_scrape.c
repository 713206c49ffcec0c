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
 * The heap profile's alloc_* columns are cumulative since the process
 * started, as Go reports them; they are passed on as they are (no delta is
 * computed), and inuse_* are point-in-time values.
 *
 * Requests run on the event loop through the shared libcurl client
 * (net/http_client.h), so a slow target never blocks anything.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/component.h"
#include "core/log.h"
#include "net/http_client.h"
#include "proto/pprof.h"

typedef struct scrape_target_cfg {
    char *endpoint;
    pl_strmap labels;
} scrape_target_cfg;

typedef struct scrape_cfg {
    pl_cfg_list targets;
    int64_t interval;    /* ns */
    int64_t cpu_seconds; /* seconds=N of the CPU profile */
    pl_strlist profiles; /* cpu, heap, goroutine */
    int64_t timeout;     /* ns, for heap/goroutine; cpu gets cpu_seconds more */
    uint64_t max_profile_size;
} scrape_cfg;

static const pl_cfg_field target_fields[] = {
    {"endpoint", PL_CFG_STRING, NULL, offsetof(scrape_target_cfg, endpoint),
     "base URL of the service, e.g. http://127.0.0.1:6060 (/debug/pprof/... is appended)", NULL},
    {"labels", PL_CFG_STRMAP, NULL, offsetof(scrape_target_cfg, labels),
     "resource attributes for this target's profiles (e.g. service.name)", NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

static int target_validate(void *cfgp, pl_cfg_ctx *ctx)
{
    scrape_target_cfg *t = cfgp;
    if (!t->endpoint ||
        (strncmp(t->endpoint, "http://", 7) != 0 && strncmp(t->endpoint, "https://", 8) != 0)) {
        pl_cfg_errorf(ctx, "endpoint", "must be an http:// or https:// URL");
        return 1;
    }
    return 0;
}

static const pl_cfg_section target_section = {sizeof(scrape_target_cfg), target_fields,
                                              target_validate};

static const pl_cfg_field scrape_fields[] = {
    {"targets", PL_CFG_LIST, NULL, offsetof(scrape_cfg, targets),
     "services to scrape: list of {endpoint, labels}", &target_section},
    {"interval", PL_CFG_DURATION, "15s", offsetof(scrape_cfg, interval),
     "time between scrapes of a target", NULL},
    {"cpu_seconds", PL_CFG_INT, "10", offsetof(scrape_cfg, cpu_seconds),
     "length of each CPU profile (seconds=N)", NULL},
    {"profiles", PL_CFG_STRLIST, "[cpu, heap, goroutine]", offsetof(scrape_cfg, profiles),
     "profile types to pull: cpu, heap, goroutine, allocs, block, mutex", NULL},
    {"timeout", PL_CFG_DURATION, "30s", offsetof(scrape_cfg, timeout),
     "time limit of a request (the CPU profile gets cpu_seconds more)", NULL},
    {"max_profile_size", PL_CFG_SIZE, "32MiB", offsetof(scrape_cfg, max_profile_size),
     "largest profile accepted from a target", NULL},
    {NULL, 0, NULL, 0, NULL, NULL},
};

static const char *const known_profiles[] = {"cpu",   "heap",  "goroutine", "allocs",
                                             "block", "mutex", NULL};

static int scrape_validate(void *cfgp, pl_cfg_ctx *ctx)
{
    scrape_cfg *cfg = cfgp;
    int errors = 0;
    if (cfg->targets.n == 0) {
        pl_cfg_errorf(ctx, "targets", "at least one target is required");
        errors++;
    }
    if (cfg->interval < 1000000000LL) {
        pl_cfg_errorf(ctx, "interval", "must be at least 1s");
        errors++;
    }
    if (cfg->cpu_seconds < 1 || cfg->cpu_seconds > 3600) {
        pl_cfg_errorf(ctx, "cpu_seconds", "must be between 1 and 3600");
        errors++;
    }
    for (size_t i = 0; i < cfg->profiles.n; i++) {
        bool ok = false;
        for (size_t k = 0; known_profiles[k]; k++)
            ok |= strcmp(cfg->profiles.items[i], known_profiles[k]) == 0;
        if (!ok) {
            pl_cfg_errorf(ctx, "profiles", "unknown profile type \"%s\"", cfg->profiles.items[i]);
            errors++;
        }
    }
    return errors;
}

static const pl_cfg_section scrape_section = {sizeof(scrape_cfg), scrape_fields, scrape_validate};

/* ---- instance --------------------------------------------------------------- */

typedef struct scrape scrape;

typedef struct scrape_job {
    scrape *owner;
    char *url;
    const char *profile; /* "cpu", "heap", ... */
    size_t target;
    bool in_flight;
    uint64_t timeout_ms;
} scrape_job;

typedef struct scrape_target {
    pl_kv *attrs;
    uint32_t n_attrs;
    char **strings; /* keys and values the attrs point to */
    size_t n_strings;
} scrape_target;

struct scrape {
    char id[128];
    uv_loop_t *loop;
    pl_stats *stats;
    pl_consumer *next;
    pl_http_client *client;
    uv_timer_t timer;
    bool timer_init, stopping;
    uint64_t interval_ms;
    size_t max_profile_size;
    scrape_target *targets;
    size_t n_targets;
    scrape_job *jobs;
    size_t n_jobs;
    uint64_t *scrapes_ok, *scrapes_failed;
};

static void on_scraped(void *arg, const pl_http_client_result *res)
{
    scrape_job *job = arg;
    scrape *s = job->owner;
    job->in_flight = false;
    if (s->stopping || res->transport_error == PL_HTTP_CANCELLED)
        return;
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
    const scrape_target *t = &s->targets[job->target];
    pl_pprof_meta meta = {
        .resource_attrs = t->attrs,
        .n_resource_attrs = t->n_attrs,
        .scope_name = PL_BYTES_LIT("proflink/pprof_scrape"),
        .default_time_unix_nano = pl_time_now_ns(),
        .max_decoded_size = s->max_profile_size * 8,
    };
    pl_err err = {{0}};
    /* A target's answer is as untrusted as an upload: the same decoded
     * budget as the pyroscope receiver's defaults bounds what it expands to. */
    pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_pprof_builder *b = batch ? pl_pprof_builder_new(batch) : NULL;
    pl_status st = PL_ERR_NOMEM;
    if (b) {
        size_t budget = s->max_profile_size * 8 > (40u << 20) ? s->max_profile_size * 8 : 40u << 20;
        pl_pprof_builder_set_budget(b, budget, 4000000);
        st = pl_pprof_builder_add(b, res->body, res->body_len, &meta, &err);
    } else {
        pl_errf(&err, PL_ERR_NOMEM, "out of memory");
    }
    pl_pprof_builder_free(b);
    if (st != PL_OK) {
        pl_batch_free(batch);
        batch = NULL;
    }
    if (!batch) {
        (*s->scrapes_failed)++;
        pl_warn(s->id, "GET %s: not a valid pprof: %s", job->url, err.msg);
        return;
    }
    (*s->scrapes_ok)++;
    size_t items = pl_batch_items(batch);
    batch->received_unix_nano = pl_time_now_ns();
    st = pl_consumer_consume(s->next, batch);
    if (st == PL_OK)
        pl_stats_add(s->stats, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED, items);
    else {
        pl_stats_add(s->stats, PL_SIGNAL_PROFILES, PL_STAT_DROPPED, items);
        pl_warn(s->id, "profile from %s dropped: pipeline answered %s", job->url,
                pl_status_name(st));
    }
}

static void scrape_all(scrape *s)
{
    for (size_t i = 0; i < s->n_jobs; i++) {
        scrape_job *job = &s->jobs[i];
        if (job->in_flight)
            continue;
        pl_http_client_request req = {
            .method = "GET",
            .url = job->url,
            .timeout_ms = job->timeout_ms,
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
}

static void on_tick(uv_timer_t *t)
{
    scrape *s = t->data;
    if (!s->stopping)
        scrape_all(s);
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
    s->next = settings->next[PL_SIGNAL_PROFILES];
    s->interval_ms = cfg->interval > 0 ? (uint64_t)(cfg->interval / 1000000) : 15000;
    s->max_profile_size = cfg->max_profile_size ? cfg->max_profile_size : (32u << 20);
    static uint64_t dummy[2];
    s->scrapes_ok = s->stats ? pl_stats_counter(s->stats, "scrapes", "profiles pulled") : &dummy[0];
    s->scrapes_failed =
        s->stats ? pl_stats_counter(s->stats, "scrape_failures", "profile pulls that failed")
                 : &dummy[1];
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
        if (!t->attrs) {
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
        for (size_t p = 0; p < n_profiles; p++) {
            const char *prof = cfg->profiles.n ? cfg->profiles.items[p] : default_profiles[p];
            scrape_job *job = &s->jobs[s->n_jobs++];
            job->owner = s;
            job->target = i;
            for (size_t k = 0; known_profiles[k]; k++)
                if (strcmp(prof, known_profiles[k]) == 0)
                    job->profile = known_profiles[k];
            if (!job->profile) {
                scrape_destroy(s);
                return pl_errf(err, PL_ERR_INVALID, "unknown profile type \"%s\"", prof);
            }
            const char *base = tc->endpoint ? tc->endpoint : "";
            size_t blen = strlen(base);
            while (blen && base[blen - 1] == '/')
                blen--;
            char path[96];
            uint64_t timeout_ms = cfg->timeout > 0 ? (uint64_t)(cfg->timeout / 1000000) : 30000;
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
    /* The first scrape right away, then every interval. */
    uv_timer_start(&s->timer, on_tick, 0, s->interval_ms);
    pl_info(s->id, "scraping %zu target(s) every %llu ms", s->n_targets,
            (unsigned long long)s->interval_ms);
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
    if (s->client)
        pl_http_client_close(s->client);
    for (size_t i = 0; i < s->n_jobs; i++)
        free(s->jobs[i].url);
    free(s->jobs);
    for (size_t i = 0; s->targets && i < s->n_targets; i++) {
        for (size_t k = 0; k < s->targets[i].n_strings; k++)
            free(s->targets[i].strings[k]);
        free(s->targets[i].strings);
        free(s->targets[i].attrs);
    }
    free(s->targets);
    free(s);
}

const pl_component_type pl_receiver_pprof_scrape = {
    .type = "pprof_scrape",
    .kind = PL_KIND_RECEIVER,
    .signals = PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
    .description = "pulls pprof profiles (cpu, heap, goroutine, ...) from Go net/http/pprof "
                   "endpoints on an interval; target labels become resource attributes",
    .config = &scrape_section,
    .create = scrape_create,
    .start = scrape_start,
    .shutdown = scrape_shutdown,
    .destroy = scrape_destroy,
};
