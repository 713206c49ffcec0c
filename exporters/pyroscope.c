/*
 * pyroscope.c: the `pyroscope` exporter. Profiles go to a Pyroscope server
 * (or Grafana Cloud Profiles) through its push API:
 *
 *   POST <endpoint>/push.v1.PusherService/Push       (Connect unary)
 *   Content-Type: application/proto, Connect-Protocol-Version: 1
 *   body: PushRequest { series: [{labels, samples: [{raw_profile: gzipped pprof}]}] }
 *
 * Conversion, following Pyroscope's own OTLP -> pprof rules
 * (shared/spec/pprof.md §6, pyroscope.md §3.1 and §7):
 *   - one pprof per (OTLP Profile, service name): samples whose attribute
 *     `service.name` differs from the resource's are split off;
 *   - series labels: __name__ (the profile name, pl_pprof_profile_name: the
 *     one the receiving Pyroscope API gave it, else Pyroscope's OTLP rule),
 *     service_name, __delta__=false (as Pyroscope sets for /ingest and
 *     OTLP: the values are per interval already), then the resource's string/int attributes with
 * their keys as they are (at most 30 labels in all, Pyroscope's default limit); the resource
 * attribute `pyroscope.spy_name` (set by the receiver) becomes `pyroscope_spy`;
 *   - every sample attribute becomes a pprof label, in particular `span_id`
 *     and `span_name` written by the correlation processor; the sample's
 *     Link becomes `span_id` / `trace_id` labels, so Grafana's "profiles for
 *     this span" finds it;
 *   - a profile of more than 16,000 samples (Pyroscope's default limit) is
 *     sent as several pprofs of at most that many;
 *   - the CPU special case: an OTLP profile (one no Pyroscope API named) of
 *     samples:count with a cpu:nanoseconds period is sent as cpu:nanoseconds
 *     (values x period), as Pyroscope's OTLP ingest does; profiles that came
 *     through a Pyroscope API are sent with their sample types and units as
 *     they came (a py-spy samples:count stays samples:count, a Node.js
 *     microsecond profile stays in microseconds). A pprof with both columns
 *     (Go's CPU profile) that reached proflink unnamed arrives as two
 *     OTLP profiles, and every column reaches Pyroscope as it was: the count
 *     one is then sent unconverted, as samples:count, so Pyroscope keeps
 *     both process_cpu:samples:count:cpu:nanoseconds and
 *     process_cpu:cpu:nanoseconds:cpu:nanoseconds, like an upload of that
 *     pprof to it directly. Every other column (heap's four, mutex's two) is
 *     its own OTLP profile already and goes as its own series.
 *
 * Sending sits on the shared sending queue (exporters/queue.h: retries with
 * backoff, optional persistence) and the libcurl-on-libuv client
 * (net/http_client.h). The queued payload is the encoded PushRequest, so a
 * persisted queue replays exactly what would have been sent. Answers: 2xx
 * OK; 429 and 5xx retryable (Retry-After honoured); anything else permanent,
 * logged with the Connect error message. Authentication: basic auth or a
 * bearer token, and the tenant header X-Scope-OrgID.
 *
 * `api: ingest` uses the legacy HTTP API instead (pyroscope.md §1), for
 * servers without the push API (older Pyroscope, some proxies):
 *
 *   POST <endpoint>/ingest?name=<service_name>{k=v,...}&from=<s>&until=<s>
 *        &format=pprof&spyName=<spy>          body: the gzipped pprof
 *
 * one request per series (the same series the push request would hold),
 * each its own queue entry so that a retry resends only that one. The
 * labels go into the `name` parameter's {} part, which can hold only keys
 * of [A-Za-z0-9_.] and values without , } { =, so other labels are left
 * out; labels starting with __ are the server's, and profile_id is left
 * out because the server drops uploads carrying it (legacy exemplars).
 * spyName is the resource's pyroscope.spy_name when the profile came from
 * a Pyroscope SDK (the server turns it into pyroscope_spy), else proflink.
 * A queued ingest payload is [u32 query length][query][gzipped pprof].
 */
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "extensions/auth.h"
#include "exporters/otlp_common.h"
#include "exporters/queue.h"
#include "net/http_auth.h"
#include "net/http_client.h"
#include "proto/pprof.h"
#include "proto/pyroscope_push.h"

#define PUSH_PATH         "/push.v1.PusherService/Push"
#define MAX_SERIES_LABELS 30
#define MAX_PPROF_SAMPLES 16000 /* Pyroscope's default max samples per profile */

#include "exporters/pyroscope.config.h"

static bool is_http_url(const char *s)
{
    return s && (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0);
}

static int pyroscope_exp_validate(void *cfgp, pl_cfg_ctx *ctx)
{
    pyroscope_exp_cfg *cfg = cfgp;
    int errors = 0;
    errors += pl_cfg_check(ctx, is_http_url(cfg->endpoint), "endpoint",
                           "is required: the Pyroscope URL, e.g. http://pyroscope:4040");
    if (cfg->api && cfg->api[0] && strcmp(cfg->api, "push") != 0 &&
        strcmp(cfg->api, "ingest") != 0) {
        pl_cfg_errorf(ctx, "api", "must be push or ingest, got \"%s\"", cfg->api);
        errors++;
    }
    errors += pl_http_credentials_check(ctx, "bearer_token", cfg->bearer_token, &cfg->basic_auth);
    return errors;
}

#include "exporters/pyroscope.config.inc"

typedef struct pyroscope_exp {
    char *id;
    char *url; /* push: endpoint + PUSH_PATH; ingest: endpoint + /ingest */
    bool ingest;
    char **headers; /* "Name: value" lines */
    size_t n_headers;
    uint64_t timeout_ms;
    pl_http_tls tls;
    pl_http_client *client;
    pl_queue *queue;
    pl_stats *stats;
    pl_clock clock;
    bool fixed_tenant;   /* tenant_id set: batches' tenants are not sent */
    char *auth_id;       /* auth extension (client side), looked up per request */
    const pl_host *host; /* where auth_id is looked up */
} pyroscope_exp;

/* A payload may start with the batch's tenant: TENANT_MARK, 'T', length,
 * bytes. 0xFF can start neither a PushRequest (wire type 7 does not exist)
 * nor an /ingest payload (a 4-byte query length below 2^24), so payloads
 * queued before tenants were carried still read the same. */
#define TENANT_MARK 0xFFu

static bool tenant_ok(pl_bytes t)
{
    if (t.len == 0 || t.len > 255)
        return false;
    for (uint32_t i = 0; i < t.len; i++)
        if (t.ptr[i] < 0x20 || t.ptr[i] == 0x7f)
            return false;
    return true;
}

/* ---- conversion: a batch -> PushRequest ------------------------------------ */

static pl_bytes label_text(const pl_dictionary *d, const pl_value *v, char *num, size_t size)
{
    switch (v->type) {
    case PL_VALUE_STRING:
        return v->u.str;
    case PL_VALUE_STRINDEX:
        return pl_dict_string(d, v->u.strindex);
    case PL_VALUE_INT: {
        int n = snprintf(num, size, "%" PRId64, v->u.i);
        return (pl_bytes){(const uint8_t *)num, (uint32_t)n};
    }
    case PL_VALUE_BOOL:
        return v->u.b ? PL_BYTES_LIT("true") : PL_BYTES_LIT("false");
    default:
        return (pl_bytes){NULL, 0};
    }
}

/* The sample attribute service.name, if the sample has one. */
static bool sample_service(const pl_dictionary *d, const pl_sample *s, pl_bytes *out)
{
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        if (ai <= 0 || (uint32_t)ai >= d->n_attributes)
            continue;
        const pl_kvu *a = &d->attributes[ai];
        if (!pl_bytes_eq_cstr(pl_dict_string(d, a->key_strindex), "service.name"))
            continue;
        pl_bytes v = a->value.type == PL_VALUE_STRING     ? a->value.u.str
                     : a->value.type == PL_VALUE_STRINDEX ? pl_dict_string(d, a->value.u.strindex)
                                                          : (pl_bytes){NULL, 0};
        if (v.len) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* True when `p` is a samples:count CPU column whose pprof also had the
 * cpu:nanoseconds column (a sibling in the same scope with the same time):
 * converting it too would give Pyroscope the same CPU time twice under one
 * type and lose the count type. */
static bool cpu_count_has_sibling(const pl_dictionary *d, const pl_scope_profiles *sc,
                                  const pl_profile *p)
{
    for (uint32_t i = 0; i < sc->n_profiles; i++) {
        const pl_profile *q = &sc->profiles[i];
        if (q == p || q->time_unix_nano != p->time_unix_nano || q->n_samples != p->n_samples)
            continue;
        if (pl_bytes_eq_cstr(pl_dict_string(d, q->sample_type.type_strindex), "cpu") &&
            pl_bytes_eq_cstr(pl_dict_string(d, q->sample_type.unit_strindex), "nanoseconds"))
            return true;
    }
    return false;
}

/* What /ingest needs of a series besides its labels and pprof. */
typedef struct series_meta {
    uint64_t time_unix_nano, duration_nano;
    uint32_t samples;
} series_meta;

typedef struct encode_state {
    pl_arena arena; /* series, labels, payloads of this request */
    pl_push_series *series;
    series_meta *meta; /* parallel to series */
    uint32_t n_series, cap_series;
    uint64_t samples;
} encode_state;

static pl_push_series *new_series(encode_state *es)
{
    if (es->n_series == es->cap_series) {
        uint32_t cap = es->cap_series ? es->cap_series * 2 : 8;
        pl_push_series *s =
            pl_arena_grow(&es->arena, es->series, es->n_series, cap, sizeof(pl_push_series));
        series_meta *m =
            s ? pl_arena_grow(&es->arena, es->meta, es->n_series, cap, sizeof(series_meta)) : NULL;
        if (!m)
            return NULL;
        es->series = s;
        es->meta = m;
        es->cap_series = cap;
    }
    es->meta[es->n_series] = (series_meta){0, 0, 0};
    pl_push_series *s = &es->series[es->n_series++];
    memset(s, 0, sizeof(*s));
    return s;
}

static pl_bytes arena_bytes(pl_arena *a, const void *p, size_t n)
{
    char *c = pl_arena_memdup(a, p, n);
    return (pl_bytes){(const uint8_t *)c, c ? (uint32_t)n : 0};
}

/* The series name from a display name the Go SDK gave the sample type in
 * its sample_type_config, for profiles from a proflink that did not name
 * them yet (PL_PPROF_NAME_ATTRIBUTE, which wins), by Pyroscope's /ingest
 * rules: "mutex_count" -> mutex, "block_duration" -> block, ... Returns
 * false when the profile has none or it says nothing. */
static bool display_name_series(const pl_dictionary *d, const pl_profile *p, pl_bytes *out)
{
    for (uint32_t i = 0; i < p->n_attribute_indices; i++) {
        int32_t ai = p->attribute_indices[i];
        if (ai <= 0 || (uint32_t)ai >= d->n_attributes)
            continue;
        const pl_kvu *a = &d->attributes[ai];
        if (pl_bytes_eq_cstr(pl_dict_string(d, a->key_strindex), PL_PPROF_NAME_ATTRIBUTE))
            return false; /* named by the API it came through */
        if (!pl_bytes_eq_cstr(pl_dict_string(d, a->key_strindex),
                              "pyroscope.sample_type.display_name") ||
            a->value.type != PL_VALUE_STRING)
            continue;
        pl_bytes v = a->value.u.str;
        static const struct {
            const char *needle, *name;
        } rules[] = {{"mutex_", "mutex"},  {"block_", "block"},  {"goroutine", "goroutines"},
                     {"alloc_", "memory"}, {"inuse_", "memory"}, {"cpu", "process_cpu"}};
        for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++)
            if (v.len && memmem(v.ptr, v.len, rules[r].needle, strlen(rules[r].needle))) {
                *out = pl_bytes_from_cstr(rules[r].name);
                return true;
            }
    }
    return false;
}

/* One series for (profile, service): labels + one gzipped pprof. */
static pl_status add_series(encode_state *es, const pl_dictionary *d,
                            const pl_resource_profiles *rp, const pl_profile *p, bool keep_count,
                            pl_bytes service, const uint32_t *indices, uint32_t n_indices,
                            pl_err *err)
{
    bool cpu_special = false;
    pl_bytes name = pl_pprof_profile_name(d, p, &cpu_special);
    if (keep_count)
        cpu_special = false;
    display_name_series(d, p, &name);
    pl_pprof_encode_options o = {
        .sample_indices = indices,
        .n_sample_indices = n_indices,
        .cpu_to_nanoseconds = cpu_special,
        .skip_attribute = "service.name",
        .default_time_unix_nano = pl_time_now_ns(),
    };
    pl_buf raw, gz;
    pl_buf_init(&raw);
    pl_buf_init(&gz);
    pl_status st = pl_pprof_encode(d, p, &o, &raw, err);
    if (st == PL_OK && pl_gzip(raw.data, raw.len, &gz))
        st = pl_errf(err, PL_ERR_NOMEM, "gzip failed");
    pl_push_series *s = st == PL_OK ? new_series(es) : NULL;
    pl_push_label *labels =
        s ? pl_arena_calloc(&es->arena, MAX_SERIES_LABELS, sizeof(pl_push_label)) : NULL;
    pl_push_sample *smp = labels ? pl_arena_calloc(&es->arena, 1, sizeof(pl_push_sample)) : NULL;
    if (st == PL_OK && !smp)
        st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
    if (st != PL_OK) {
        pl_buf_free(&raw);
        pl_buf_free(&gz);
        return st;
    }
    smp->raw_profile = arena_bytes(&es->arena, gz.data, gz.len);
    pl_buf_free(&raw);
    pl_buf_free(&gz);
    if (!smp->raw_profile.ptr)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    s->samples = smp;
    s->n_samples = 1;
    s->labels = labels;
    uint32_t k = 0;
    labels[k++] = (pl_push_label){PL_BYTES_LIT("__name__"), name};
    labels[k++] = (pl_push_label){PL_BYTES_LIT("service_name"), service};
    /* The data is what the application uploaded (already per-interval):
     * Pyroscope must not compute deltas from it, as for /ingest and OTLP. */
    labels[k++] = (pl_push_label){PL_BYTES_LIT("__delta__"), PL_BYTES_LIT("false")};
    const pl_attrs *attrs = &rp->resource.attrs;
    for (uint32_t i = 0; i < attrs->n && k < MAX_SERIES_LABELS; i++) {
        const pl_kv *kv = &attrs->items[i];
        if (pl_bytes_eq_cstr(kv->key, "service.name") || kv->key.len == 0 ||
            (kv->key.len >= 2 && kv->key.ptr[0] == '_' && kv->key.ptr[1] == '_'))
            continue;
        char num[32];
        pl_bytes v = label_text(d, &kv->value, num, sizeof(num));
        /* Pyroscope refuses the whole request for one over-long label
         * (names over 1024 bytes, values over 2048): leave such ones out. */
        if (!v.len || v.len > 2048 || kv->key.len > 1024)
            continue;
        pl_bytes key = pl_bytes_eq_cstr(kv->key, "pyroscope.spy_name")
                           ? PL_BYTES_LIT("pyroscope_spy")
                           : kv->key;
        bool dup = false;
        for (uint32_t j = 0; j < k && !dup; j++)
            dup = pl_bytes_eq(labels[j].name, key);
        if (dup)
            continue;
        labels[k].name = key;
        labels[k].value = v.ptr == (const uint8_t *)num ? arena_bytes(&es->arena, num, v.len) : v;
        k++;
    }
    s->n_labels = k;
    es->meta[es->n_series - 1] = (series_meta){p->time_unix_nano, p->duration_nano, n_indices};
    es->samples += n_indices;
    return PL_OK;
}

static pl_status encode_batch(encode_state *es, const pl_batch *batch, pl_err *err)
{
    const pl_profiles *ps = &batch->data.profiles;
    const pl_dictionary *d = &ps->dict;
    pl_status st = PL_OK;
    uint32_t *indices = NULL;
    size_t cap = 0;
    for (uint32_t r = 0; r < ps->n_resources && st == PL_OK; r++) {
        const pl_resource_profiles *rp = &ps->resources[r];
        const pl_kv *svc = pl_attrs_find(&rp->resource.attrs, "service.name", 12);
        char num[32];
        pl_bytes resource_service =
            svc ? label_text(d, &svc->value, num, sizeof(num)) : (pl_bytes){NULL, 0};
        if (resource_service.ptr == (const uint8_t *)num)
            resource_service = arena_bytes(&es->arena, num, resource_service.len);
        if (!resource_service.len)
            resource_service = PL_BYTES_LIT("unknown_service");
        for (uint32_t s = 0; s < rp->n_scopes && st == PL_OK; s++) {
            const pl_scope_profiles *sc = &rp->scopes[s];
            for (uint32_t pi = 0; pi < sc->n_profiles && st == PL_OK; pi++) {
                const pl_profile *p = &sc->profiles[pi];
                if (p->n_samples == 0)
                    continue;
                bool special = false;
                pl_pprof_profile_name(d, p, &special);
                bool keep_count = special && cpu_count_has_sibling(d, sc, p);
                if (cap < p->n_samples) {
                    free(indices);
                    cap = p->n_samples;
                    indices = malloc(cap * sizeof(uint32_t));
                    if (!indices) {
                        st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
                        break;
                    }
                }
                /* Split by service: repeatedly take the first sample not
                 * yet sent and every later one of the same service. */
                uint8_t *taken = calloc(p->n_samples, 1);
                if (!taken) {
                    st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
                    break;
                }
                for (uint32_t first = 0; first < p->n_samples && st == PL_OK; first++) {
                    if (taken[first])
                        continue;
                    pl_bytes service = resource_service;
                    sample_service(d, &p->samples[first], &service);
                    uint32_t n = 0;
                    for (uint32_t i = first; i < p->n_samples; i++) {
                        if (taken[i])
                            continue;
                        pl_bytes si = resource_service;
                        sample_service(d, &p->samples[i], &si);
                        if (!pl_bytes_eq(si, service))
                            continue;
                        taken[i] = 1;
                        indices[n++] = i;
                    }
                    /* Pyroscope refuses profiles of more than 16,000
                     * samples by default: send bigger ones in parts. */
                    for (uint32_t off = 0; off < n && st == PL_OK; off += MAX_PPROF_SAMPLES)
                        st = add_series(es, d, rp, p, keep_count, service, indices + off,
                                        n - off < MAX_PPROF_SAMPLES ? n - off : MAX_PPROF_SAMPLES,
                                        err);
                }
                free(taken);
            }
        }
    }
    free(indices);
    return st;
}

static pl_status pyroscope_encode(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                                  pl_err *err)
{
    if (batch->signal != PL_SIGNAL_PROFILES)
        return pl_errf(err, PL_ERR_UNSUPPORTED, "pyroscope exporter takes profiles only");
    pyroscope_exp *x = arg;
    pl_bytes tenant = {0};
    if (x && !x->fixed_tenant && pl_batch_metadata_get(batch, "tenant", &tenant) &&
        tenant_ok(tenant)) {
        uint8_t head[3] = {TENANT_MARK, 'T', (uint8_t)tenant.len};
        pl_buf_append(out, head, 3);
        pl_buf_append(out, tenant.ptr, tenant.len);
    }
    encode_state es;
    memset(&es, 0, sizeof(es));
    pl_arena_init(&es.arena);
    pl_status st = encode_batch(&es, batch, err);
    if (st == PL_OK) {
        pl_push_request req = {es.series, es.n_series, {0}};
        if (!pl_push_encode_proto(&req, out))
            st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    *items = pl_batch_items(batch);
    pl_arena_free(&es.arena);
    return st;
}

/* Exposed for tests: the PushRequest protobuf for a batch. */
pl_status pl_pyroscope_exporter_encode(const pl_batch *batch, pl_buf *out, pl_err *err);
pl_status pl_pyroscope_exporter_encode(const pl_batch *batch, pl_buf *out, pl_err *err)
{
    uint64_t items;
    return pyroscope_encode(NULL, batch, out, &items, err);
}

/* ---- the legacy /ingest API ------------------------------------------------- */

static bool ingest_key_ok(pl_bytes k)
{
    if (!k.len || k.len > 1024)
        return false;
    for (uint32_t i = 0; i < k.len; i++) {
        uint8_t c = k.ptr[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.'))
            return false;
    }
    return true;
}

/* A value runs to the next , or } and is trimmed by the server. */
static bool ingest_value_ok(pl_bytes v)
{
    if (!v.len || v.ptr[0] == ' ' || v.ptr[v.len - 1] == ' ')
        return false;
    for (uint32_t i = 0; i < v.len; i++)
        if (v.ptr[i] == ',' || v.ptr[i] == '}' || v.ptr[i] == '{' || v.ptr[i] == '=' ||
            v.ptr[i] < 0x20)
            return false;
    return true;
}

static void append_urlenc(pl_buf *b, const uint8_t *p, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            pl_buf_append_byte(b, c);
        } else {
            pl_buf_append_byte(b, '%');
            pl_buf_append_byte(b, (uint8_t)hex[c >> 4]);
            pl_buf_append_byte(b, (uint8_t)hex[c & 15]);
        }
    }
}

static pl_bytes series_label(const pl_push_series *s, const char *name)
{
    for (uint32_t i = 0; i < s->n_labels; i++)
        if (pl_bytes_eq_cstr(s->labels[i].name, name))
            return s->labels[i].value;
    return (pl_bytes){NULL, 0};
}

/* The query string of one series' /ingest request (without the '?'). */
static void ingest_query(pl_buf *q, const pl_push_series *s, const series_meta *m, uint64_t now_ns)
{
    pl_buf name;
    pl_buf_init(&name);
    /* The application name allows [A-Za-z0-9_.-/] only; the exact service
     * name then goes along as the service_name label. */
    pl_bytes service = series_label(s, "service_name");
    bool exact = service.len > 0;
    for (uint32_t i = 0; i < service.len; i++) {
        uint8_t c = service.ptr[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-' || c == '/';
        exact &= ok;
        pl_buf_append_byte(&name, ok ? c : '_');
    }
    if (!service.len)
        pl_buf_append_str(&name, "unknown_service");
    pl_buf_append_byte(&name, '{');
    bool first = true;
    if (!exact && ingest_value_ok(service)) {
        pl_buf_append_str(&name, "service_name=");
        pl_buf_append(&name, service.ptr, service.len);
        first = false;
    }
    for (uint32_t i = 0; i < s->n_labels; i++) {
        const pl_push_label *l = &s->labels[i];
        if ((l->name.len >= 2 && l->name.ptr[0] == '_' && l->name.ptr[1] == '_') ||
            pl_bytes_eq_cstr(l->name, "service_name") ||
            pl_bytes_eq_cstr(l->name, "pyroscope_spy") || pl_bytes_eq_cstr(l->name, "profile_id") ||
            !ingest_key_ok(l->name) || !ingest_value_ok(l->value))
            continue;
        if (!first)
            pl_buf_append_byte(&name, ',');
        first = false;
        pl_buf_append(&name, l->name.ptr, l->name.len);
        pl_buf_append_byte(&name, '=');
        pl_buf_append(&name, l->value.ptr, l->value.len);
    }
    pl_buf_append_byte(&name, '}');
    uint64_t t = m->time_unix_nano ? m->time_unix_nano : now_ns;
    uint64_t from = t / 1000000000ULL;
    uint64_t until = (t + m->duration_nano + 999999999ULL) / 1000000000ULL;
    if (until < from)
        until = from;
    pl_buf_append_str(q, "name=");
    append_urlenc(q, name.data, name.len);
    pl_buf_printf(q, "&from=%" PRIu64 "&until=%" PRIu64 "&format=pprof&spyName=", from, until);
    pl_bytes spy = series_label(s, "pyroscope_spy");
    if (spy.len)
        append_urlenc(q, spy.ptr, spy.len);
    else
        pl_buf_append_str(q, "proflink");
    pl_buf_free(&name);
}

/* api: ingest: one queue entry per series, [u32 query length][query][pprof]. */
static pl_status ingest_export(pyroscope_exp *x, const pl_batch *batch)
{
    if (batch->signal != PL_SIGNAL_PROFILES)
        return PL_ERR_UNSUPPORTED;
    encode_state es;
    memset(&es, 0, sizeof(es));
    pl_arena_init(&es.arena);
    pl_err err = {{0}};
    pl_status st = encode_batch(&es, batch, &err);
    if (st != PL_OK) {
        pl_error(x->id, "cannot encode profiles: %s", err.msg[0] ? err.msg : pl_status_name(st));
        pl_arena_free(&es.arena);
        return st;
    }
    uint64_t total = pl_batch_items(batch), given = 0, now = pl_time_now_ns();
    pl_buf payload;
    pl_buf_init(&payload);
    pl_queue_tx_begin(x->queue, batch); /* one commit for every series */
    for (uint32_t i = 0; i < es.n_series; i++) {
        pl_buf_reset(&payload);
        uint8_t len4[4] = {0};
        pl_buf_append(&payload, len4, 4);
        ingest_query(&payload, &es.series[i], &es.meta[i], now);
        size_t qlen = payload.len - 4;
        const pl_bytes raw = es.series[i].samples[0].raw_profile;
        pl_buf_append(&payload, raw.ptr, raw.len);
        if (!pl_buf_ok(&payload)) {
            st = PL_ERR_NOMEM;
        } else {
            payload.data[0] = (uint8_t)(qlen >> 24);
            payload.data[1] = (uint8_t)(qlen >> 16);
            payload.data[2] = (uint8_t)(qlen >> 8);
            payload.data[3] = (uint8_t)qlen;
            /* the last entry also carries the items no series holds (empty
             * or skipped profiles) so that sent + failed adds up */
            uint64_t items = es.meta[i].samples;
            if (i + 1 == es.n_series && total > given + items)
                items = total - given;
            st = pl_queue_push(x->queue, PL_SIGNAL_PROFILES, payload.data, payload.len, items);
            if (st == PL_OK)
                given += items;
        }
        if (st != PL_OK && i > 0) {
            /* Earlier series are queued already: refusing the batch would
             * make the sender resend them (counted twice by Pyroscope), so
             * the rest is dropped and counted instead. */
            pl_warn(x->id,
                    "dropping %" PRIu64 " of %" PRIu64
                    " profile samples: the sending queue filled up midway through a batch",
                    total - given, total);
            pl_stats_add(x->stats, PL_SIGNAL_PROFILES, PL_STAT_DROPPED, total - given);
            st = PL_OK;
            break;
        }
        if (st != PL_OK)
            break;
    }
    st = pl_queue_tx_end(x->queue, batch, st);
    pl_buf_free(&payload);
    pl_arena_free(&es.arena);
    return st;
}

/* ---- sending ---------------------------------------------------------------- */

typedef struct send_ctx {
    pyroscope_exp *x;
    pl_queue_send *send;
} send_ctx;

/* The "message" of a Connect JSON error body, or the start of the body. */
static void error_text(const pl_http_client_result *res, char *out, size_t size)
{
    out[0] = 0;
    if (!res->body_len)
        return;
    json_tokener *tok = json_tokener_new();
    json_object *o =
        tok ? json_tokener_parse_ex(tok, (const char *)res->body, (int)res->body_len) : NULL;
    json_object *m;
    if (o && json_object_object_get_ex(o, "message", &m) &&
        json_object_is_type(m, json_type_string)) {
        snprintf(out, size, "%s", json_object_get_string(m));
    } else {
        size_t n = res->body_len < 200 ? res->body_len : 200, j = 0;
        for (size_t i = 0; i < n && j + 1 < size; i++) {
            unsigned char c = res->body[i];
            out[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : ' ';
        }
        out[j] = 0;
    }
    json_object_put(o);
    if (tok)
        json_tokener_free(tok);
}

static void on_response(void *arg, const pl_http_client_result *res)
{
    send_ctx *ctx = arg;
    pyroscope_exp *x = ctx->x;
    pl_send_result r;
    if (res->transport_error) {
        pl_send_result_set(&r, PL_SEND_RETRYABLE, "POST %s: %s", x->url,
                           res->error ? res->error : "transport error");
    } else if (res->status >= 200 && res->status < 300) {
        pl_send_result_set(&r, PL_SEND_OK, NULL);
    } else {
        char text[220];
        error_text(res, text, sizeof(text));
        if (res->status == 429 || res->status >= 500) {
            pl_send_result_set(&r, PL_SEND_RETRYABLE, "HTTP %d from %s%s%s", res->status, x->url,
                               text[0] ? ": " : "", text);
            size_t len = 0;
            const char *ra = pl_http_result_find(res, "retry-after", &len);
            if (ra) {
                int64_t delay = pl_http_parse_retry_after(ra, len, pl_time_now_ns());
                if (delay > 0)
                    r.retry_after_ns = delay;
            }
        } else {
            pl_send_result_set(&r, PL_SEND_PERMANENT, "HTTP %d from %s (not retryable)%s%s",
                               res->status, x->url, text[0] ? ": " : "", text);
        }
    }
    pl_queue_send *send = ctx->send;
    free(ctx);
    pl_queue_send_done(send, &r);
}

static void pyroscope_send(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                           pl_queue_send *send)
{
    pyroscope_exp *x = arg;
    pl_send_result r;
    pl_err err = {{0}};
    send_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        pl_send_result_set(&r, PL_SEND_RETRYABLE, "out of memory");
        pl_queue_send_done(send, &r);
        return;
    }
    ctx->x = x;
    ctx->send = send;
    const char *url = x->url;
    char *ingest_url = NULL;
    /* per-request headers: the fixed ones, the tenant, the authenticator's */
    const char *headers[64];
    size_t nh = 0;
    char tenant_line[300];
    char *auth_line = NULL;
    for (size_t i = 0; i < x->n_headers && nh < 62; i++)
        headers[nh++] = x->headers[i];
    if (len >= 3 && payload[0] == TENANT_MARK && payload[1] == 'T') {
        size_t tl = payload[2];
        if (tl == 0 || len < 3 + tl) {
            free(ctx);
            pl_send_result_set(&r, PL_SEND_PERMANENT, "malformed queued payload");
            pl_queue_send_done(send, &r);
            return;
        }
        snprintf(tenant_line, sizeof(tenant_line), "X-Scope-OrgID: %.*s", (int)tl,
                 (const char *)payload + 3);
        headers[nh++] = tenant_line;
        payload += 3 + tl;
        len -= 3 + tl;
    }
    if (x->auth_id) {
        auth_line = pl_auth_client_header_for(x->host, x->auth_id);
        if (auth_line)
            headers[nh++] = auth_line;
    }
    if (x->ingest) {
        size_t qlen = len >= 4 ? (size_t)payload[0] << 24 | (size_t)payload[1] << 16 |
                                     (size_t)payload[2] << 8 | payload[3]
                               : 0;
        size_t ulen = strlen(x->url);
        bool bad = len < 4 || qlen > len - 4 || memchr(payload + 4, 0, qlen);
        if (!bad)
            ingest_url = malloc(ulen + qlen + 2);
        if (!ingest_url) {
            free(ctx);
            free(auth_line);
            pl_send_result_set(&r, bad ? PL_SEND_PERMANENT : PL_SEND_RETRYABLE, "%s",
                               bad ? "malformed queued payload" : "out of memory");
            pl_queue_send_done(send, &r);
            return;
        }
        memcpy(ingest_url, x->url, ulen);
        ingest_url[ulen] = '?';
        memcpy(ingest_url + ulen + 1, payload + 4, qlen);
        ingest_url[ulen + 1 + qlen] = 0;
        url = ingest_url;
        payload += 4 + qlen;
        len -= 4 + qlen;
    }
    pl_http_client_request req = {
        .method = "POST",
        .url = url,
        .headers = headers,
        .n_headers = nh,
        .body = payload,
        .body_len = len,
        .version = PL_HTTP_VERSION_1_1,
        .timeout_ms = x->timeout_ms,
        .tls = &x->tls,
    };
    pl_status st = pl_http_client_send(x->client, &req, on_response, ctx, &err);
    free(ingest_url); /* curl copies the URL and the headers */
    free(auth_line);
    if (st == PL_OK)
        return;
    free(ctx);
    pl_send_result_set(&r, st == PL_ERR_INVALID ? PL_SEND_PERMANENT : PL_SEND_RETRYABLE, "%s",
                       err.msg[0] ? err.msg : pl_status_name(st));
    pl_queue_send_done(send, &r);
}

/* ---- lifecycle ----------------------------------------------------------------- */

static int add_header(pyroscope_exp *x, const char *name, const char *value)
{
    char **h = realloc(x->headers, (x->n_headers + 1) * sizeof(*h));
    if (!h)
        return -1;
    x->headers = h;
    size_t n = strlen(name) + strlen(value) + 3;
    char *line = malloc(n);
    if (!line)
        return -1;
    snprintf(line, n, "%s: %s", name, value);
    x->headers[x->n_headers++] = line;
    return 0;
}

static void pyroscope_exp_destroy(void *self);

static pl_status pyroscope_exp_create(const pl_create_settings *settings, const void *config,
                                      void **out, pl_err *err)
{
    const pyroscope_exp_cfg *cfg = config;
    if (!is_http_url(cfg->endpoint))
        return pl_errf(err, PL_ERR_INVALID, "endpoint must be an http:// or https:// URL");
    pyroscope_exp *x = calloc(1, sizeof(*x));
    if (!x)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    x->id = strdup(settings->id ? settings->id : "pyroscope");
    x->stats = settings->stats;
    x->clock = settings->clock;
    x->host = settings->host;
    size_t n = strlen(cfg->endpoint);
    while (n && cfg->endpoint[n - 1] == '/')
        n--;
    x->ingest = cfg->api && strcmp(cfg->api, "ingest") == 0;
    const char *path = x->ingest ? "/ingest" : PUSH_PATH;
    x->url = malloc(n + strlen(path) + 1);
    if (x->url) {
        memcpy(x->url, cfg->endpoint, n);
        strcpy(x->url + n, path);
    }
    x->timeout_ms = cfg->timeout > 0 ? (uint64_t)(cfg->timeout / 1000000) : 0;
    x->tls.insecure_skip_verify = cfg->tls.insecure_skip_verify;
    x->tls.ca_file = cfg->tls.ca_file && *cfg->tls.ca_file ? strdup(cfg->tls.ca_file) : NULL;
    x->tls.cert_file =
        cfg->tls.cert_file && *cfg->tls.cert_file ? strdup(cfg->tls.cert_file) : NULL;
    x->tls.key_file = cfg->tls.key_file && *cfg->tls.key_file ? strdup(cfg->tls.key_file) : NULL;
    int fail = !x->id || !x->url;
    if (x->ingest) {
        fail |= add_header(x, "Content-Type", "application/octet-stream");
    } else {
        fail |= add_header(x, "Content-Type", "application/proto");
        fail |= add_header(x, "Connect-Protocol-Version", "1");
    }
    if (cfg->tenant_id && *cfg->tenant_id) {
        fail |= add_header(x, "X-Scope-OrgID", cfg->tenant_id);
        x->fixed_tenant = true;
    }
    if (pl_auth_client_resolve(x->host, &cfg->auth, &x->auth_id, err) != PL_OK) {
        pyroscope_exp_destroy(x);
        return PL_ERR_INVALID;
    }
    char *authorization;
    if (pl_http_authorization(cfg->bearer_token, &cfg->basic_auth, &authorization))
        fail = 1;
    else if (authorization)
        fail |= add_header(x, "Authorization", authorization);
    free(authorization);
    for (size_t i = 0; i < cfg->headers.n; i++)
        fail |= add_header(x, cfg->headers.keys[i],
                           cfg->headers.values[i] ? cfg->headers.values[i] : "");
    if (fail) {
        pyroscope_exp_destroy(x);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    x->client = pl_http_client_new(settings->loop, err);
    if (!x->client) {
        pyroscope_exp_destroy(x);
        return PL_ERR_INTERNAL;
    }
    /* ingest payloads (gzipped pprof) are compressed already */
    /* pyroscope_encode reads only fixed_tenant: it may run on a worker */
    pl_queue_sender sender = {pyroscope_encode, pyroscope_send, x, x->ingest, true};
    x->queue = pl_queue_new(settings, &cfg->sending_queue, &cfg->retry_on_failure, &sender, err);
    if (!x->queue) {
        pyroscope_exp_destroy(x);
        return PL_ERR_INTERNAL;
    }
    *out = x;
    return PL_OK;
}

static pl_status pyroscope_exp_start(void *self, pl_err *err)
{
    pyroscope_exp *x = self;
    pl_debug(x->id, "profiles -> %s", x->url);
    return pl_queue_start(x->queue, err);
}

static pl_status pyroscope_exp_export(void *self, const pl_batch *batch)
{
    pyroscope_exp *x = self;
    if (x->ingest)
        return ingest_export(x, batch);
    return pl_queue_export(x->queue, batch);
}

static void pyroscope_exp_shutdown(void *self)
{
    pyroscope_exp *x = self;
    pl_queue_shutdown(x->queue);
}

static size_t pyroscope_exp_pending(void *self)
{
    pyroscope_exp *x = self;
    return pl_queue_pending(x->queue);
}

static struct pl_queue *pyroscope_exp_stored_queue(void *self)
{
    pyroscope_exp *x = self;
    return pl_queue_stored(x->queue);
}

static void pyroscope_exp_destroy(void *self)
{
    pyroscope_exp *x = self;
    if (!x)
        return;
    if (x->client)
        pl_http_client_close(x->client);
    if (x->queue)
        pl_queue_destroy(x->queue);
    for (size_t i = 0; i < x->n_headers; i++)
        free(x->headers[i]);
    free(x->headers);
    free((char *)x->tls.ca_file);
    free((char *)x->tls.cert_file);
    free((char *)x->tls.key_file);
    free(x->auth_id);
    free(x->url);
    free(x->id);
    free(x);
}

const pl_component_type pl_exporter_pyroscope = {
    PL_COMPONENT_HEAD("pyroscope", PL_KIND_EXPORTER, PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
                      &pyroscope_exp_section),
    .description = "sends profiles to Pyroscope through its push API or the legacy /ingest "
                   "(gzipped pprof, series labels, span_id/trace_id sample labels), with a "
                   "sending queue and retries",
    PL_COMPONENT_LIFECYCLE(pyroscope_exp_create, pyroscope_exp_start, pyroscope_exp_shutdown,
                           pyroscope_exp_destroy),
    .export = pyroscope_exp_export,
    .pending = pyroscope_exp_pending,
    .stored_queue = pyroscope_exp_stored_queue,
};
