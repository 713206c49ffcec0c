/*
 * pyroscope.c: the `pyroscope` receiver. proflink stands in for a Pyroscope
 * server, so every Pyroscope SDK (Go, Java, .NET, Python, Ruby, Node.js,
 * Rust) can send to it with its server address unchanged.
 *
 * Routes (one listener, HTTP/1.1 and h2c, default 127.0.0.1:4040):
 *   POST /ingest, /pyroscope/ingest      the legacy upload API
 *   POST /push.v1.PusherService/Push     the push API: Connect unary (proto or JSON),
 *                                        and gRPC (h2c) with the same answers
 *   POST /v1development/profiles         OTLP/HTTP profiles (protobuf or JSON)
 *   /opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export
 *                                        OTLP/gRPC profiles (h2c)
 *
 * A Pyroscope server takes OTLP profiles on its one port too, so an
 * OpenTelemetry profiler pointed at "the Pyroscope address" works. Those
 * requests are answered by receivers/otlp_handler.c, exactly as the `otlp`
 * receiver answers them (decoding, status codes, gRPC trailers,
 * compression); the limits are this receiver's: max_request_body_size on
 * the wire, max_decompressed_size after decompression (the gRPC message).
 * Any other gRPC call gets UNIMPLEMENTED.
 *
 * /ingest picks the body format as Pyroscope does (shared/spec/pyroscope.md
 * §1.2): pprof (raw or gzipped), multipart/form-data with a `profile` part
 * (and an optional `sample_type_config`: see apply_sample_type_config),
 * folded stacks ("groups", the
 * default), `lines`, JFR (format=jfr, raw or multipart with `jfr` and
 * `labels` parts: receivers/pyroscope_jfr.c). Multipart is recognised from
 * the Content-Type even when format=pprof is also given (upstream would
 * fail that request). The binary legacy formats (trie, tree) and
 * speedscope are answered 400
 * "unsupported format"; an unknown format name is 400 too (upstream would
 * read it as folded text and usually fail later).
 *
 * Everything becomes pprof and goes through proto/pprof_decode.c, which converts it
 * into the profiles model (one OTLP Profile per pprof sample type) and checks
 * every reference. The upload's name, `app{k=v,...}`, becomes resource
 * attributes: service.name = app (or the `service_name` label), the
 * `otel.scope.name` / `otel.scope.version` labels become the scope, labels
 * starting with `__` are dropped, every other label is kept as is.
 *
 * Answers: 200 with an empty body on success. Errors carry Pyroscope's JSON
 * shape {"code":"<connect code>","message":"..."}: bad input (a bad name,
 * corrupt gzip, truncated pprof, an index out of range, multipart without a
 * profile part, an unsupported format) is 400, over a size limit 413, a
 * pipeline that refuses (memory limit, full queue) 503 / 429. The Pyroscope
 * server answers some decode failures with 422; proflink uses 400 for every
 * malformed input so clients see one consistent "do not retry" answer (no
 * SDK retries either). A request that fails never affects other requests:
 * each one decodes into its own batch, freed on error.
 */
#include <ctype.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/component.h"
#include "core/log.h"
#include "net/compress.h"
#include "net/grpc.h"
#include "extensions/auth.h"
#include "net/http_server.h"
#include "proto/pprof.h"
#include "receivers/folded.h"
#include "receivers/multipart.h"
#include "receivers/otlp_handler.h"
#include "receivers/pyroscope_jfr.h"
#include "proto/pyroscope_push.h"

#include "receivers/pyroscope.config.h"

static int pyroscope_validate(void *cfgp, pl_cfg_ctx *ctx)
{
    pyroscope_cfg *cfg = cfgp;
    return pl_cfg_check(ctx, cfg->endpoint && strchr(cfg->endpoint, ':'), "endpoint",
                        "endpoint must be host:port");
}

#include "receivers/pyroscope.config.inc"

static void count(uint64_t *counter)
{
    __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

typedef struct pyroscope {
    char id[128];
    char *endpoint;
    uint64_t max_body, max_decompressed;
    size_t max_decoded_memory, max_decoded_objects; /* per request */
    unsigned max_connections;
    unsigned max_connections_per_client;
    uv_loop_t *loop;
    pl_stats *stats;
    pl_clock clock;
    pl_consumer *next;
    pl_http_server *server;
    /* with service.workers > 1: one server per worker loop (SO_REUSEPORT) */
    pl_http_server **worker_servers;
    unsigned n_workers;
    const pl_host *host; /* the worker pool (NULL: none) */
    /* bumped from the worker threads too: atomic adds (count()) */
    uint64_t *invalid_requests, *ingest_requests, *push_requests, *otlp_requests;
    pl_otlp_handler otlp; /* OTLP profiles on the same port */
    pl_listener_security sec;
} pyroscope;

/* ---- answers -------------------------------------------------------------- */

static const char *connect_code(int http)
{
    switch (http) {
    case 400:
        return "invalid_argument";
    case 401:
        return "unauthenticated";
    case 404:
        return "not_found";
    case 405:
        return "unimplemented";
    case 413:
        return "resource_exhausted";
    case 415:
        return "unimplemented";
    case 422:
        return "invalid_argument";
    case 429:
        return "resource_exhausted";
    case 503:
        return "unavailable";
    default:
        return http >= 500 ? "internal" : "unknown";
    }
}

static void respond_error(pyroscope *r, pl_http_response *res, int status, const char *message)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "code", json_object_new_string(connect_code(status)));
    json_object_object_add(o, "message", json_object_new_string(message));
    const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    pl_http_header h[2] = {{"Content-Type", 12, "application/json", 16}, {NULL, 0, NULL, 0}};
    size_t nh = 1;
    if (status == 503 || status == 429) {
        h[1] = (pl_http_header){"Retry-After", 11, "1", 1};
        nh = 2;
    }
    pl_http_respond(res, status, h, nh, text, strlen(text));
    json_object_put(o);
    if (status == 400 && r->invalid_requests)
        count(r->invalid_requests);
    if (status >= 400 && status != 503 && status != 429)
        pl_debug(r->id, "request refused with %d: %s", status, message);
}

static void respond_status(pyroscope *r, pl_http_response *res, pl_status st, const pl_err *err)
{
    respond_error(r, res, pl_status_http(st), err->msg[0] ? err->msg : pl_status_name(st));
}

/* ---- query strings -------------------------------------------------------- */

/* URL-decodes [s, s+len) into out (at most len bytes + NUL). */
static size_t url_decode(const char *s, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '+')
            out[n++] = ' ';
        else if (s[i] == '%' && i + 2 < len && pl_hex_digit(s[i + 1]) >= 0 &&
                 pl_hex_digit(s[i + 2]) >= 0) {
            out[n++] = (char)(pl_hex_digit(s[i + 1]) << 4 | pl_hex_digit(s[i + 2]));
            i += 2;
        } else
            out[n++] = s[i];
    }
    out[n] = '\0';
    return n;
}

/* The decoded value of query parameter `key` (malloc'd), or NULL. */
static char *query_get(const char *query, const char *key)
{
    size_t klen = strlen(key);
    const char *p = query;
    while (p && *p) {
        const char *amp = strchr(p, '&');
        size_t plen = amp ? (size_t)(amp - p) : strlen(p);
        const char *eq = memchr(p, '=', plen);
        size_t name_len = eq ? (size_t)(eq - p) : plen;
        if (name_len == klen && memcmp(p, key, klen) == 0) {
            const char *v = eq ? eq + 1 : p + plen;
            size_t vlen = eq ? plen - name_len - 1 : 0;
            char *out = malloc(vlen + 1);
            if (out)
                url_decode(v, vlen, out);
            return out;
        }
        p = amp ? amp + 1 : NULL;
    }
    return NULL;
}

/* ---- the upload name: app{k=v,...} ------------------------------------------ */

#define MAX_NAME_LABELS 64

typedef struct upload_name {
    char app[256];
    struct {
        char *key, *value;
    } labels[MAX_NAME_LABELS];
    size_t n_labels;
    char *storage; /* keys and values point in here */
} upload_name;

static bool app_char(int c)
{
    return isalnum(c) || c == '_' || c == '.' || c == '-' || c == '/';
}

static bool key_char(int c)
{
    return isalnum(c) || c == '_' || c == '.';
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    return s;
}

static pl_status parse_name(const char *name, upload_name *out, pl_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!name)
        return pl_errf(err, PL_ERR_INVALID, "missing \"name\" query parameter");
    out->storage = strdup(name);
    if (!out->storage)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    char *s = out->storage;
    char *brace = strchr(s, '{');
    if (brace)
        *brace = '\0';
    char *app = trim(s);
    if (!*app)
        return pl_errf(err, PL_ERR_INVALID, "invalid name \"%s\": empty application name", name);
    for (char *c = app; *c; c++)
        if (!app_char((unsigned char)*c))
            return pl_errf(err, PL_ERR_INVALID,
                           "invalid name \"%s\": character '%c' not allowed in the application "
                           "name",
                           name, *c);
    if (strlen(app) >= sizeof(out->app))
        return pl_errf(err, PL_ERR_INVALID, "invalid name: application name too long");
    strcpy(out->app, app);
    if (!brace)
        return PL_OK;
    char *p = brace + 1;
    char *close = strrchr(p, '}');
    if (!close)
        return pl_errf(err, PL_ERR_INVALID, "invalid name \"%s\": missing '}'", name);
    for (char *t = close + 1; *t; t++)
        if (*t != ' ' && *t != '\t')
            return pl_errf(err, PL_ERR_INVALID, "invalid name \"%s\": text after '}'", name);
    *close = '\0';
    while (*p) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        char *pair = trim(p);
        if (*pair) {
            char *eq = strchr(pair, '=');
            if (!eq)
                return pl_errf(err, PL_ERR_INVALID, "invalid name \"%s\": label \"%s\" has no '='",
                               name, pair);
            *eq = '\0';
            char *key = trim(pair), *value = trim(eq + 1);
            if (!*key)
                return pl_errf(err, PL_ERR_INVALID, "invalid name \"%s\": empty label name", name);
            for (char *c = key; *c; c++)
                if (!key_char((unsigned char)*c))
                    return pl_errf(err, PL_ERR_INVALID,
                                   "invalid name \"%s\": label name \"%s\" has '%c'", name, key,
                                   *c);
            if (strcmp(key, "__name__") == 0)
                return pl_errf(err, PL_ERR_INVALID,
                               "invalid name \"%s\": label __name__ is reserved", name);
            if (out->n_labels == MAX_NAME_LABELS)
                return pl_errf(err, PL_ERR_INVALID, "invalid name: more than %d labels",
                               MAX_NAME_LABELS);
            out->labels[out->n_labels].key = key;
            out->labels[out->n_labels].value = value;
            out->n_labels++;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return PL_OK;
}

static const char *name_label(const upload_name *n, const char *key)
{
    for (size_t i = 0; i < n->n_labels; i++)
        if (strcmp(n->labels[i].key, key) == 0)
            return n->labels[i].value;
    return NULL;
}

/* Resource attributes and scope from the name (views into `n`). */
typedef struct upload_meta {
    pl_kv attrs[MAX_NAME_LABELS + 2];
    pl_pprof_meta meta;
} upload_meta;

static void build_meta(const upload_name *n, const char *service, const char *spy, upload_meta *um)
{
    memset(um, 0, sizeof(*um));
    uint32_t k = 0;
    um->attrs[k].key = PL_BYTES_LIT("service.name");
    um->attrs[k++].value = pl_value_string(pl_bytes_from_cstr(service));
    for (size_t i = 0; i < n->n_labels; i++) {
        const char *key = n->labels[i].key, *value = n->labels[i].value;
        if (strncmp(key, "__", 2) == 0 || strcmp(key, "service_name") == 0)
            continue;
        if (strcmp(key, "otel.scope.name") == 0) {
            um->meta.scope_name = pl_bytes_from_cstr(value);
            continue;
        }
        if (strcmp(key, "otel.scope.version") == 0) {
            um->meta.scope_version = pl_bytes_from_cstr(value);
            continue;
        }
        um->attrs[k].key = pl_bytes_from_cstr(key);
        um->attrs[k++].value = pl_value_string(pl_bytes_from_cstr(value));
    }
    if (spy && *spy && k < MAX_NAME_LABELS + 2) {
        um->attrs[k].key = PL_BYTES_LIT("pyroscope.spy_name");
        um->attrs[k++].value = pl_value_string(pl_bytes_from_cstr(spy));
    }
    um->meta.resource_attrs = um->attrs;
    um->meta.n_resource_attrs = k;
}

/* ---- times ---------------------------------------------------------------- */

/* Parses from/until: digits (8 = YYYYMMDD, else the count picks s/ms/µs/ns),
 * "now", "now-<n>[s|m|h|d]". Returns 0 (ns since epoch) on anything else. */
static uint64_t parse_time(const char *s, uint64_t now)
{
    if (!s || !*s)
        return 0;
    if (strncmp(s, "now", 3) == 0) {
        const char *p = s + 3;
        if (!*p)
            return now;
        if (*p != '-')
            return 0;
        char *end;
        unsigned long long v = strtoull(p + 1, &end, 10);
        uint64_t mul = 1000000000ull;
        if (*end == 'm')
            mul *= 60;
        else if (*end == 'h')
            mul *= 3600;
        else if (*end == 'd')
            mul *= 86400;
        else if (*end != 's' && *end)
            return 0;
        return v * mul < now ? now - v * mul : 0;
    }
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    if (n > 19)
        return 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (n == 8) {
        struct tm tm = {0};
        tm.tm_year = (int)(v / 10000) - 1900;
        tm.tm_mon = (int)(v / 100 % 100) - 1;
        tm.tm_mday = (int)(v % 100);
        time_t t = timegm(&tm);
        return t > 0 ? (uint64_t)t * 1000000000ull : 0;
    }
    switch (n) {
    case 13:
        return v * 1000000ull;
    case 16:
        return v * 1000ull;
    case 19:
        return v;
    default:
        return v * 1000000000ull;
    }
}

/* ---- legacy profile types (by the app name's suffix) ----------------------- */

typedef struct legacy_type {
    const char *suffix, *name, *type, *unit, *period_type, *period_unit;
    bool scale_by_period; /* counts are samples: multiply by the period in ns */
} legacy_type;

/* What Pyroscope's legacy adapter (convertMetadata, pkg/ingester/pyroscope)
 * makes of each suffix: the series `__name__`, the sample type and unit,
 * and for CPU and wall a period of 1e9/sampleRate ns of period type
 * cpu/nanoseconds (counts scaled by it); the others have no period type. */
static const legacy_type legacy_types[] = {
    {"cpu", "process_cpu", "cpu", "nanoseconds", "cpu", "nanoseconds", true},
    {"itimer", "process_cpu", "cpu", "nanoseconds", "cpu", "nanoseconds", true},
    {"wall", "wall", "wall", "nanoseconds", "cpu", "nanoseconds", true},
    {"inuse_objects", "memory", "inuse_objects", "count", NULL, NULL, false},
    {"inuse_space", "memory", "inuse_space", "bytes", NULL, NULL, false},
    {"alloc_objects", "memory", "alloc_objects", "count", NULL, NULL, false},
    {"alloc_space", "memory", "alloc_space", "bytes", NULL, NULL, false},
    {"goroutines", "goroutine", "goroutines", "count", NULL, NULL, false},
    {"mutex_count", "mutex", "contentions", "count", NULL, NULL, false},
    {"mutex_duration", "mutex", "delay", "nanoseconds", NULL, NULL, false},
    {"block_count", "block", "contentions", "count", NULL, NULL, false},
    {"block_duration", "block", "delay", "nanoseconds", NULL, NULL, false},
    {"lock_count", "block", "contentions", "count", NULL, NULL, false},
    {"lock_duration", "block", "delay", "nanoseconds", NULL, NULL, false},
    {"alloc_in_new_tlab_objects", "memory", "alloc_in_new_tlab_objects", "count", NULL, NULL,
     false},
    {"alloc_in_new_tlab_bytes", "memory", "alloc_in_new_tlab_bytes", "bytes", NULL, NULL, false},
    {"alloc_outside_tlab_objects", "memory", "alloc_outside_tlab_objects", "count", NULL, NULL,
     false},
    {"alloc_outside_tlab_bytes", "memory", "alloc_outside_tlab_bytes", "bytes", NULL, NULL, false},
    {"live", "memory", "live", "count", NULL, NULL, false},
    {"exceptions", "exceptions", "samples", "count", NULL, NULL, false},
    {NULL, NULL, NULL, NULL, NULL, NULL, false},
};

/* ---- the pipeline ---------------------------------------------------------- */

/* Hands a decoded batch on and counts it. Takes the batch. On refusal the
 * message for the client is in `err`. */
static pl_status hand_on(pyroscope *r, pl_batch *batch, pl_err *err)
{
    size_t items = pl_batch_items(batch);
    batch->received_unix_nano = pl_clock_now(&r->clock);
    pl_status st = r->next ? pl_consumer_consume(r->next, batch) : (pl_batch_free(batch), PL_OK);
    if (st == PL_OK) {
        pl_stats_add(r->stats, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED, items);
        return PL_OK;
    }
    if (pl_status_retryable(st) || st == PL_ERR_NOMEM)
        pl_stats_add(r->stats, PL_SIGNAL_PROFILES, PL_STAT_REFUSED, items);
    else
        pl_stats_add(r->stats, PL_SIGNAL_PROFILES, PL_STAT_DROPPED, items);
    return pl_errf(err, st, "pipeline refused the data: %s", pl_status_name(st));
}

/* Hands a decoded batch on and answers. Takes the batch. */
static void deliver(pyroscope *r, pl_batch *batch, pl_http_response *res, const char *ok_type,
                    const char *ok_body)
{
    pl_err err = {{0}};
    pl_status st = hand_on(r, batch, &err);
    if (st == PL_OK) {
        pl_http_header h = {"Content-Type", 12, ok_type, ok_type ? strlen(ok_type) : 0};
        pl_http_respond(res, 200, ok_type ? &h : NULL, ok_type ? 1 : 0, ok_body,
                        ok_body ? strlen(ok_body) : 0);
        return;
    }
    respond_error(r, res, pl_status_http(st), err.msg);
}

/* The tenant (X-Scope-OrgID) and the caller's authenticated identity
 * travel with the data, named as the otlp receiver names them. */
static void add_tenant(pl_batch *batch, const pl_http_request *req)
{
    size_t len;
    const char *tenant = pl_http_header_get(req, "X-Scope-OrgID", &len);
    const char *who = req->auth_user ? req->auth_user : req->tls_peer;
    uint32_t n = (tenant && len) + (who != NULL);
    if (n == 0)
        return;
    pl_kv *kv = pl_batch_alloc(batch, n * sizeof(pl_kv));
    if (!kv)
        return;
    uint32_t k = 0;
    if (tenant && len) {
        kv[k].key = PL_BYTES_LIT("tenant");
        kv[k++].value = pl_value_string(pl_batch_bytes(batch, tenant, len));
    }
    if (who) {
        kv[k].key = PL_BYTES_LIT("auth.user");
        kv[k++].value = pl_value_string(pl_batch_bytes(batch, who, strlen(who)));
    }
    batch->metadata.items = kv;
    batch->metadata.n = k;
}

/* Reads a sample_type_config part. Pyroscope uses it only to name the
 * series (`display-name`, e.g. "mutex_count" for Go's contentions column)
 * and for its legacy storage metadata (units, aggregation); the pprof's own
 * sample types and units are what it stores and what profile type ids are
 * built from. So proflink keeps the sample types as they are and records a
 * display name as the profile attribute PL_PYROSCOPE_DISPLAY_NAME, which the
 * pyroscope exporter uses for the series name. A part that is not a JSON
 * object is refused. */
#define PL_PYROSCOPE_DISPLAY_NAME "pyroscope.sample_type.display_name"

static pl_status apply_sample_type_config(pl_batch *batch, pl_bytes json, pl_err *err)
{
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    json_object *cfg = json_tokener_parse_ex(tok, (const char *)json.ptr, (int)json.len);
    json_tokener_free(tok);
    if (!cfg || !json_object_is_type(cfg, json_type_object)) {
        json_object_put(cfg);
        return pl_errf(err, PL_ERR_INVALID, "multipart: sample_type_config is not a JSON object");
    }
    pl_profiles *ps = &batch->data.profiles;
    pl_status st = PL_OK;
    pl_resource_profiles *rp = ps->n_resources ? &ps->resources[ps->n_resources - 1] : NULL;
    /* The key is interned once: interning scans the dictionary, and a
     * client chooses both how many profiles and how many strings there are. */
    int32_t k = -2;
    uint32_t named = 0;
    for (uint32_t sc = 0; rp && sc < rp->n_scopes && st == PL_OK; sc++) {
        for (uint32_t i = 0; i < rp->scopes[sc].n_profiles && st == PL_OK; i++) {
            pl_profile *p = &rp->scopes[sc].profiles[i];
            pl_bytes type = pl_dict_string(&ps->dict, p->sample_type.type_strindex);
            char key[256];
            if (type.len >= sizeof(key))
                continue;
            memcpy(key, type.ptr, type.len);
            key[type.len] = '\0';
            json_object *entry, *v;
            if (!json_object_object_get_ex(cfg, key, &entry) ||
                !json_object_is_type(entry, json_type_object) ||
                !json_object_object_get_ex(entry, "display-name", &v) ||
                !json_object_is_type(v, json_type_string) || !json_object_get_string_len(v))
                continue;
            pl_bytes name = pl_batch_bytes(batch, json_object_get_string(v),
                                           (size_t)json_object_get_string_len(v));
            /* Adding an attribute scans the dictionary's attributes: real
             * profiles have a handful of sample types, so more named ones
             * than this is refused rather than paid for quadratically. */
            if (++named > 256) {
                st = pl_errf(err, PL_ERR_INVALID,
                             "multipart: sample_type_config names more than 256 sample types");
                break;
            }
            if (k == -2)
                k = pl_dict_intern_string(&batch->arena, &ps->dict,
                                          PL_BYTES_LIT(PL_PYROSCOPE_DISPLAY_NAME));
            int32_t a = k < 0 || !name.ptr ? -1
                                           : pl_dict_intern_attribute(&batch->arena, &ps->dict, k,
                                                                      pl_value_string(name), 0);
            int32_t *list =
                a < 0 ? NULL
                      : pl_batch_alloc(batch, (p->n_attribute_indices + 1) * sizeof(int32_t));
            if (!list) {
                st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
                break;
            }
            if (p->n_attribute_indices)
                memcpy(list, p->attribute_indices, p->n_attribute_indices * sizeof(int32_t));
            list[p->n_attribute_indices] = a;
            p->attribute_indices = list;
            p->n_attribute_indices++;
        }
    }
    json_object_put(cfg);
    return st;
}

/* Names the pprof just decoded as Pyroscope's /ingest does (one name for all
 * its columns, pl_pprof_ingest_name): from its sample types and their
 * display names in the upload's sample_type_config (a JSON object, or NULL:
 * Pyroscope's default display names). */
static pl_status name_upload(pl_pprof_builder *b, json_object *cfg, pl_err *err)
{
    enum { MAX_TYPES = 64 };
    pl_bytes types[MAX_TYPES], display[MAX_TYPES];
    uint32_t n = pl_pprof_builder_last_types(b, types, MAX_TYPES);
    if (n == 0)
        return PL_OK; /* an empty profile: nothing to name */
    if (n > MAX_TYPES)
        n = MAX_TYPES;
    for (uint32_t i = 0; cfg && i < n; i++) {
        char key[256];
        json_object *entry, *v;
        display[i] = (pl_bytes){NULL, 0};
        if (types[i].len >= sizeof(key))
            continue;
        memcpy(key, types[i].ptr, types[i].len);
        key[types[i].len] = '\0';
        if (json_object_object_get_ex(cfg, key, &entry) &&
            json_object_is_type(entry, json_type_object) &&
            json_object_object_get_ex(entry, "display-name", &v) &&
            json_object_is_type(v, json_type_string))
            display[i] = (pl_bytes){(const uint8_t *)json_object_get_string(v),
                                    (uint32_t)json_object_get_string_len(v)};
    }
    if (pl_pprof_builder_name_last(b, pl_pprof_ingest_name(types, cfg ? display : NULL, n)))
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    return PL_OK;
}

/* Pyroscope repairs old .NET profiler uploads (isDotnetspy): spyName
 * dotnetspy, or an unknown spy whose sample_type_config names `inuse-space`. */
static bool is_dotnet(const char *spy, json_object *cfg)
{
    if (spy && strcmp(spy, "dotnetspy") == 0)
        return true;
    json_object *unused;
    return (!spy || !*spy || strcmp(spy, "unknown") == 0) && cfg &&
           json_object_object_get_ex(cfg, "inuse-space", &unused);
}

/* ---- /ingest ---------------------------------------------------------------- */

typedef enum ingest_format {
    FMT_GROUPS,
    FMT_LINES,
    FMT_PPROF,
    FMT_MULTIPART,
    FMT_JFR,
    FMT_UNSUPPORTED,
    FMT_UNKNOWN,
} ingest_format;

static ingest_format pick_format(const char *format, const char *ctype, size_t ctype_len)
{
    bool multipart =
        ctype && ctype_len >= 19 && memmem(ctype, ctype_len, "multipart/form-data", 19) != NULL;
    bool trie = ctype && memmem(ctype, ctype_len, "binary/octet-stream+trie", 24);
    bool tree = ctype && memmem(ctype, ctype_len, "binary/octet-stream+tree", 24);
    if (format && (strcmp(format, "trie") == 0 || strcmp(format, "tree") == 0))
        return FMT_UNSUPPORTED;
    if (trie || tree)
        return FMT_UNSUPPORTED;
    if (format && strcmp(format, "lines") == 0)
        return FMT_LINES;
    if (format && strcmp(format, "jfr") == 0)
        return FMT_JFR; /* raw or multipart (jfr + labels parts) */
    if (format && strcmp(format, "speedscope") == 0)
        return FMT_UNSUPPORTED;
    if (multipart)
        return FMT_MULTIPART; /* also with format=pprof: be lenient */
    if (format && strcmp(format, "pprof") == 0)
        return FMT_PPROF;
    if (!format || !*format || strcmp(format, "groups") == 0 || strcmp(format, "folded") == 0 ||
        strcmp(format, "collapsed") == 0)
        return FMT_GROUPS;
    return FMT_UNKNOWN;
}

#define MAX_PARTS 16

static pl_status ingest_multipart(pl_pprof_builder *b, pl_batch *batch, const pl_http_request *req,
                                  const char *ctype, size_t ctype_len, const pl_pprof_meta *meta,
                                  const char *spy, pl_err *err)
{
    pl_bytes boundary;
    if (pl_multipart_boundary(ctype, ctype_len, &boundary))
        return pl_errf(err, PL_ERR_INVALID, "multipart: Content-Type has no boundary");
    pl_multipart_part parts[MAX_PARTS];
    size_t n = 0;
    pl_status st =
        pl_multipart_parse(boundary, req->body, req->body_len, parts, MAX_PARTS, &n, err);
    if (st != PL_OK)
        return st;
    const pl_multipart_part *prev = pl_multipart_find(parts, n, "prev_profile");
    if (prev && prev->data.len)
        return pl_errf(err, PL_ERR_INVALID,
                       "multipart: prev_profile is not supported (unsupported client version)");
    const pl_multipart_part *profile = pl_multipart_find(parts, n, "profile");
    if (!profile)
        return pl_errf(err, PL_ERR_INVALID, "multipart: no \"profile\" part");
    const pl_multipart_part *stc = pl_multipart_find(parts, n, "sample_type_config");
    json_object *cfg = NULL;
    if (stc && stc->data.len) {
        json_tokener *tok = json_tokener_new();
        if (!tok)
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        cfg = json_tokener_parse_ex(tok, (const char *)stc->data.ptr, (int)stc->data.len);
        json_tokener_free(tok);
        if (!cfg || !json_object_is_type(cfg, json_type_object)) {
            json_object_put(cfg);
            return pl_errf(err, PL_ERR_INVALID,
                           "multipart: sample_type_config is not a JSON object");
        }
    }
    pl_pprof_meta m = *meta;
    m.repair_dotnet = is_dotnet(spy, cfg);
    st = pl_pprof_builder_add(b, profile->data.ptr, profile->data.len, &m, err);
    if (st == PL_OK)
        st = name_upload(b, cfg, err);
    json_object_put(cfg);
    if (st != PL_OK)
        return st;
    if (stc && stc->data.len)
        st = apply_sample_type_config(batch, stc->data, err);
    return st;
}

static void handle_ingest(pyroscope *r, pl_http_request *req, pl_http_response *res)
{
    pl_err err = {{0}};
    count(r->ingest_requests);
    char *name = query_get(req->query, "name");
    char *from = query_get(req->query, "from");
    char *until = query_get(req->query, "until");
    char *format = query_get(req->query, "format");
    char *rate = query_get(req->query, "sampleRate");
    char *spy = query_get(req->query, "spyName");
    upload_name un;
    pl_batch *batch = NULL;
    pl_pprof_builder *b = NULL;
    pl_status st = parse_name(name, &un, &err);
    if (st != PL_OK)
        goto fail;

    size_t ctype_len = 0;
    const char *ctype = pl_http_header_get(req, "Content-Type", &ctype_len);
    ingest_format fmt = pick_format(format, ctype, ctype_len);
    if (fmt == FMT_UNSUPPORTED) {
        st = pl_errf(&err, PL_ERR_INVALID, "unsupported format \"%s\": send pprof or folded text",
                     format && *format ? format : "binary trie/tree");
        goto fail;
    }
    if (fmt == FMT_UNKNOWN) {
        st = pl_errf(&err, PL_ERR_INVALID, "unknown format \"%s\" (pprof, groups, folded or lines)",
                     format);
        goto fail;
    }
    bool legacy = fmt == FMT_GROUPS || fmt == FMT_LINES;

    uint64_t now = pl_clock_now(&r->clock);
    uint64_t t_from = parse_time(from, now), t_until = parse_time(until, now);
    if (!t_from)
        t_from = t_until ? t_until : now;
    if (!t_until || t_until < t_from)
        t_until = t_from;

    /* Service name and legacy type from the app name. */
    const char *service = name_label(&un, "service_name");
    const legacy_type *lt = NULL;
    char app[256];
    snprintf(app, sizeof(app), "%s", un.app);
    if (legacy) {
        const char *pid = name_label(&un, "profile_id");
        if (pid && *pid) {
            /* Legacy exemplar uploads: Pyroscope drops them silently. */
            pl_http_respond(res, 200, NULL, 0, NULL, 0);
            goto done;
        }
        char *dot = strrchr(app, '.');
        const char *suffix = dot ? dot + 1 : "cpu";
        for (const legacy_type *t = legacy_types; t->suffix; t++)
            if (strcmp(t->suffix, suffix) == 0)
                lt = t;
        if (!lt) {
            st = pl_errf(&err, PL_ERR_INVALID,
                         "invalid name \"%s\": unknown profile type suffix \"%s\"", un.app, suffix);
            goto fail;
        }
        if (dot)
            *dot = '\0';
    }
    if (!service || !*service)
        service = app;

    upload_meta um;
    build_meta(&un, service, spy, &um);
    um.meta.default_time_unix_nano = t_from;
    um.meta.default_duration_nano = t_until - t_from;
    um.meta.max_decoded_size = r->max_decompressed;

    batch = pl_batch_new(PL_SIGNAL_PROFILES);
    b = batch ? pl_pprof_builder_new(batch) : NULL;
    if (!b) {
        st = pl_errf(&err, PL_ERR_NOMEM, "out of memory");
        goto fail;
    }
    pl_pprof_builder_set_budget(b, r->max_decoded_memory, r->max_decoded_objects);

    if (fmt == FMT_PPROF) {
        if (req->body_len == 0) {
            st = pl_errf(&err, PL_ERR_INVALID, "empty body: expected a pprof profile");
            goto fail;
        }
        um.meta.repair_dotnet = is_dotnet(spy, NULL);
        st = pl_pprof_builder_add(b, req->body, req->body_len, &um.meta, &err);
        if (st == PL_OK)
            st = name_upload(b, NULL, &err);
    } else if (fmt == FMT_MULTIPART) {
        st = ingest_multipart(b, batch, req, ctype, ctype_len, &um.meta, spy, &err);
    } else if (fmt == FMT_JFR) {
        pl_jfr_upload up = {req->body,
                            req->body_len,
                            ctype,
                            ctype_len,
                            rate,
                            r->max_decompressed,
                            r->max_decoded_memory,
                            r->max_decoded_objects};
        uint32_t n_profiles = 0;
        st = pl_pyroscope_ingest_jfr(b, &up, &um.meta, &n_profiles, &err);
    } else {
        /* Folded text: counts are samples at sampleRate Hz. */
        long hz = rate ? strtol(rate, NULL, 10) : 100;
        if (hz <= 0)
            hz = 100;
        int64_t period = 1000000000 / hz;
        uint8_t *text = req->body;
        size_t text_len = req->body_len;
        uint8_t *unzipped = NULL;
        if (pl_is_gzip(text, text_len)) {
            st = pl_gunzip(text, text_len, r->max_decompressed, &unzipped, &text_len, &err);
            if (st != PL_OK)
                goto fail;
            text = unzipped;
        }
        pl_pprof_writer_options wo = {
            .sample_type = lt->type,
            .sample_unit = lt->unit,
            .period_type = lt->period_type,
            .period_unit = lt->period_unit,
            .period = lt->scale_by_period ? period : 0,
            .time_unix_nano = t_from,
            .duration_nano = t_until - t_from,
        };
        pl_pprof_writer *w = pl_pprof_writer_new(&wo);
        pl_buf pprof;
        pl_buf_init(&pprof);
        if (!w)
            st = pl_errf(&err, PL_ERR_NOMEM, "out of memory");
        else
            st = pl_folded_parse(text, text_len, fmt == FMT_LINES, lt->scale_by_period ? period : 1,
                                 w, &err);
        if (st == PL_OK && pl_pprof_writer_finish(w, &pprof))
            st = pl_errf(&err, PL_ERR_NOMEM, "out of memory");
        um.meta.profile_name = pl_bytes_from_cstr(lt->name);
        if (st == PL_OK)
            st = pl_pprof_builder_add(b, pprof.data, pprof.len, &um.meta, &err);
        pl_pprof_writer_free(w);
        pl_buf_free(&pprof);
        free(unzipped);
    }
    if (st != PL_OK) {
        /* Pyroscope answers an upload whose strings are not UTF-8 (or hold
         * NUL) with 422, as it does every pprof it cannot ingest */
        if (st == PL_ERR_INVALID && pl_pprof_builder_bad_strings(b)) {
            respond_error(r, res, 422, err.msg);
            goto done;
        }
        goto fail;
    }
    pl_pprof_builder_free(b);
    b = NULL;
    add_tenant(batch, req);
    deliver(r, batch, res, NULL, NULL);
    batch = NULL;
    goto done;
fail:
    respond_status(r, res, st, &err);
done:
    pl_pprof_builder_free(b);
    if (batch)
        pl_batch_free(batch);
    free(un.storage);
    free(name);
    free(from);
    free(until);
    free(format);
    free(rate);
    free(spy);
}

/* ---- /push.v1.PusherService/Push ------------------------------------------- */

static bool ctype_is(const char *ctype, size_t len, const char *want)
{
    size_t n = strlen(want);
    if (len < n || strncasecmp(ctype, want, n) != 0)
        return false;
    return len == n || ctype[n] == ';' || ctype[n] == ' ';
}

/* Decodes a PushRequest (protobuf or proto3 JSON) and hands it on: the
 * part the Connect and the gRPC forms share, so both give the same answer
 * for the same message. */
static pl_status push_message(pyroscope *r, const pl_http_request *req, const uint8_t *body,
                              size_t body_len, bool json, pl_err *err)
{
    pl_push_request pr;
    memset(&pr, 0, sizeof(pr));
    pl_batch *batch = NULL;
    pl_pprof_builder *b = NULL;
    pl_status st = json ? pl_push_decode_json(body, body_len, &pr, err)
                        : pl_push_decode_proto(body, body_len, &pr, err);
    if (st != PL_OK)
        goto done;
    size_t profiles = 0;
    for (uint32_t i = 0; i < pr.n_series; i++)
        profiles += pr.series[i].n_samples;
    if (!profiles) {
        st = pl_errf(err, PL_ERR_INVALID, "no profiles received");
        goto done;
    }
    batch = pl_batch_new(PL_SIGNAL_PROFILES);
    b = batch ? pl_pprof_builder_new(batch) : NULL;
    if (!b) {
        st = pl_errf(err, PL_ERR_NOMEM, "out of memory");
        goto done;
    }
    pl_pprof_builder_set_budget(b, r->max_decoded_memory, r->max_decoded_objects);
    uint64_t now = pl_clock_now(&r->clock);
    for (uint32_t i = 0; i < pr.n_series && st == PL_OK; i++) {
        const pl_push_series *s = &pr.series[i];
        pl_kv attrs[64];
        uint32_t k = 0;
        pl_pprof_meta meta = {0};
        attrs[k].key = PL_BYTES_LIT("service.name");
        attrs[k++].value = pl_value_string(PL_BYTES_LIT("unknown_service"));
        for (uint32_t l = 0; l < s->n_labels; l++) {
            pl_bytes key = s->labels[l].name, value = s->labels[l].value;
            if (pl_bytes_eq_cstr(key, "service_name")) {
                attrs[0].value = pl_value_string(value);
                continue;
            }
            if (pl_bytes_eq_cstr(key, "__name__")) {
                /* the push API stores a series under the client's name
                 * (Go SDK: block and mutex, both contentions/delay) */
                meta.profile_name = value;
                continue;
            }
            if (key.len == 0 || (key.len >= 2 && key.ptr[0] == '_' && key.ptr[1] == '_'))
                continue; /* __name__ and other internal labels */
            if (pl_bytes_eq_cstr(key, "otel.scope.name")) {
                meta.scope_name = value;
                continue;
            }
            if (pl_bytes_eq_cstr(key, "otel.scope.version")) {
                meta.scope_version = value;
                continue;
            }
            if (k == sizeof(attrs) / sizeof(attrs[0])) {
                st = pl_errf(err, PL_ERR_INVALID, "series %u: too many labels", i);
                break;
            }
            attrs[k].key = key;
            attrs[k++].value = pl_value_string(value);
        }
        meta.resource_attrs = attrs;
        meta.n_resource_attrs = k;
        meta.default_time_unix_nano = now;
        meta.max_decoded_size = r->max_decompressed;
        for (uint32_t j = 0; j < s->n_samples && st == PL_OK; j++) {
            pl_err inner = {{0}};
            st = pl_pprof_builder_add(b, s->samples[j].raw_profile.ptr,
                                      s->samples[j].raw_profile.len, &meta, &inner);
            /* a series without __name__ (Pyroscope would refuse it): named
             * as /ingest would name the pprof */
            if (st == PL_OK && !meta.profile_name.len)
                st = name_upload(b, NULL, &inner);
            if (st != PL_OK)
                pl_errf(err, st, "series %u sample %u: %s", i, j, inner.msg);
        }
    }
    if (st != PL_OK)
        goto done;
    pl_pprof_builder_free(b);
    b = NULL;
    add_tenant(batch, req);
    st = hand_on(r, batch, err);
    batch = NULL;
done:
    pl_pprof_builder_free(b);
    if (batch)
        pl_batch_free(batch);
    pl_push_request_free(&pr);
    return st;
}

/* The Connect form: the bare message, proto or JSON, maybe compressed with
 * Content-Encoding; errors as Connect's JSON. */
static void handle_push(pyroscope *r, pl_http_request *req, pl_http_response *res)
{
    pl_err err = {{0}};
    count(r->push_requests);
    size_t ctype_len = 0;
    const char *ctype = pl_http_header_get(req, "Content-Type", &ctype_len);
    bool json;
    if (ctype && (ctype_is(ctype, ctype_len, "application/proto") ||
                  ctype_is(ctype, ctype_len, "application/protobuf") ||
                  ctype_is(ctype, ctype_len, "application/x-protobuf")))
        json = false;
    else if (ctype && ctype_is(ctype, ctype_len, "application/json"))
        json = true;
    else {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "unsupported Content-Type \"%.*s\": use the Connect protocol with "
                 "application/proto or application/json, or gRPC",
                 (int)(ctype_len > 60 ? 60 : ctype_len), ctype ? ctype : "");
        respond_error(r, res, 415, msg);
        return;
    }
    pl_encoding e;
    if (!pl_request_encoding(req, &e)) {
        respond_error(r, res, 415, "unsupported Content-Encoding");
        return;
    }
    uint8_t *body = NULL;
    size_t body_len = 0;
    pl_status dst = pl_request_body(req, e, r->max_decompressed, &body, &body_len, &err);
    if (dst != PL_OK) {
        respond_status(r, res, dst, &err);
        return;
    }
    pl_status st = push_message(r, req, body, body_len, json, &err);
    if (st == PL_OK) {
        static const char *const types[2] = {"application/proto", "application/json"};
        pl_http_header h = {"Content-Type", 12, types[json], strlen(types[json])};
        pl_http_respond(res, 200, &h, 1, json ? "{}" : NULL, json ? 2 : 0);
    } else {
        respond_status(r, res, st, &err);
    }
    free(body);
}

/* The gRPC form (HTTP/2, application/grpc[+proto|+json]): one framed
 * message, compressed as grpc-encoding says, the outcome in trailers; an
 * empty PushResponse on success. Grafana Alloy and SDKs set up for gRPC
 * send this. The status codes are the Connect ones in gRPC form. */
static void handle_push_grpc(pyroscope *r, pl_http_request *req, pl_http_response *res)
{
    count(r->push_requests);
    if (strcmp(req->method, "POST") != 0) {
        pl_grpc_respond_error(res, PL_GRPC_UNIMPLEMENTED, "method not allowed", -1);
        return;
    }
    if (pl_host_memory_state(r->host) != PL_MEMORY_OK) {
        pl_grpc_respond_error(res, PL_GRPC_UNAVAILABLE, "memory limit reached, retry later",
                              (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000);
        return;
    }
    size_t ctype_len = 0;
    const char *ctype = pl_http_header_get(req, "Content-Type", &ctype_len);
    bool json = ctype && ctype_is(ctype, ctype_len, "application/grpc+json");
    pl_err err = {{0}};
    pl_grpc_message m = {0};
    pl_status st = pl_grpc_read_message(req, r->max_decompressed, &m, &err);
    if (st == PL_OK)
        st = push_message(r, req, m.data, m.len, json, &err);
    free(m.owner);
    if (st == PL_OK) {
        pl_grpc_respond(res, NULL, 0);
        return;
    }
    if (st == PL_ERR_INVALID || st == PL_ERR_TOO_LARGE) {
        if (r->invalid_requests && st == PL_ERR_INVALID)
            count(r->invalid_requests);
        pl_debug(r->id, "push over gRPC refused: %s", err.msg);
    }
    int64_t retry = pl_status_retryable(st) ? (int64_t)PL_RETRY_AFTER_SECONDS * 1000000000 : -1;
    pl_grpc_respond_error(res, pl_status_grpc(st), err.msg, retry);
}

/* ---- routing ----------------------------------------------------------------- */

static void on_request(void *arg, pl_http_request *req, pl_http_response *res)
{
    pyroscope *r = arg;
    bool ingest = strcmp(req->path, "/ingest") == 0 || strcmp(req->path, "/pyroscope/ingest") == 0;
    bool push = strcmp(req->path, "/push.v1.PusherService/Push") == 0;
    pl_signal grpc_signal;
    if (strcmp(req->path, "/v1development/profiles") == 0) {
        count(r->otlp_requests);
        pl_otlp_handle_http(&r->otlp, PL_SIGNAL_PROFILES, req, res);
        return;
    }
    if (pl_otlp_grpc_signal(req->path, &grpc_signal) ||
        (!ingest && !push && pl_grpc_is_grpc(req))) {
        count(r->otlp_requests);
        pl_otlp_handle_grpc(&r->otlp, req, res);
        return;
    }
    if (!ingest && !push) {
        respond_error(r, res, 404, "not found");
        return;
    }
    /* gRPC exists only over HTTP/2; an HTTP/1.1 request with a gRPC content
     * type gets the Connect form's 415 */
    if (push && req->http_version == 2 && pl_grpc_is_grpc(req)) {
        handle_push_grpc(r, req, res);
        return;
    }
    if (req->too_large) {
        /* the listener delivers oversized requests for the OTLP answers;
         * the body is gone and the connection or stream ends after this */
        respond_error(r, res, 413, "request body too large");
        return;
    }
    if (strcmp(req->method, "POST") != 0) {
        pl_http_header h[2] = {{"Allow", 5, "POST", 4},
                               {"Content-Type", 12, "application/json", 16}};
        const char *body = "{\"code\":\"unimplemented\",\"message\":\"method not allowed\"}";
        pl_http_respond(res, 405, h, 2, body, strlen(body));
        return;
    }
    if (pl_host_memory_state(r->host) != PL_MEMORY_OK) {
        respond_error(r, res, 503, "memory limit reached, retry later");
        return;
    }
    if (ingest)
        handle_ingest(r, req, res);
    else
        handle_push(r, req, res);
}

/* ---- lifecycle ---------------------------------------------------------------- */

static pl_status pyroscope_create(const pl_create_settings *settings, const void *config,
                                  void **out_self, pl_err *err)
{
    const pyroscope_cfg *cfg = config;
    pyroscope *r = calloc(1, sizeof(*r));
    if (!r)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    snprintf(r->id, sizeof(r->id), "%s", settings->id ? settings->id : "pyroscope");
    r->endpoint = strdup(cfg->endpoint ? cfg->endpoint : "127.0.0.1:4040");
    r->max_body = cfg->max_request_body_size;
    r->max_decompressed =
        cfg->max_decompressed_size ? cfg->max_decompressed_size : PL_PPROF_MAX_DECODED;
    r->max_connections = cfg->max_connections > 0 ? (unsigned)cfg->max_connections : 1024;
    r->max_connections_per_client =
        cfg->max_connections_per_client > 0 ? (unsigned)cfg->max_connections_per_client : 0;
    r->max_decoded_memory = cfg->max_decoded_memory ? (size_t)cfg->max_decoded_memory : 40u << 20;
    r->max_decoded_objects =
        cfg->max_decoded_objects > 0 ? (size_t)cfg->max_decoded_objects : 4000000;
    r->loop = settings->loop;
    r->stats = settings->stats;
    r->host = settings->host;
    /* pushes arrive over HTTP (also the gRPC-style push API): series at zero */
    pl_stats_add_via(r->stats, PL_TRANSPORT_HTTP, PL_SIGNAL_PROFILES, PL_STAT_ACCEPTED, 0);
    r->clock = settings->clock;
    r->next = settings->next[PL_SIGNAL_PROFILES];
    if (!r->endpoint) {
        free(r);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    r->invalid_requests =
        pl_stats_counter(r->stats, "invalid_requests", "requests answered 400 (bad input)");
    r->ingest_requests = pl_stats_counter(r->stats, "ingest_requests", "requests to /ingest");
    r->push_requests = pl_stats_counter(r->stats, "push_requests", "requests to the push API");
    r->otlp_requests =
        pl_stats_counter(r->stats, "otlp_requests", "OTLP profiles requests (HTTP, gRPC)");
    r->otlp = (pl_otlp_handler){
        .id = r->id,
        .stats = r->stats,
        .max_recv_msg_size = r->max_decompressed,
        .max_request_body_size = r->max_body,
        .max_decompressed_size = r->max_decompressed,
        .host = r->host,
        .refused_requests =
            r->stats ? pl_stats_counter(r->stats, "refused_requests",
                                        "OTLP requests refused before decoding because memory is "
                                        "short")
                     : NULL,
    };
    r->otlp.next[PL_SIGNAL_PROFILES] = r->next;
    pl_status st =
        pl_listener_security_init(&r->sec, r->host, &cfg->tls, &cfg->auth, &cfg->cors, err);
    if (st != PL_OK) {
        free(r->endpoint);
        free(r);
        return st;
    }
    *out_self = r;
    return PL_OK;
}

static pl_status pyroscope_start(void *self, pl_err *err)
{
    pyroscope *r = self;
    pl_http_server_options o = {
        .max_body_size = r->max_body,
        .max_connections = r->max_connections,
        .max_connections_per_client = r->max_connections_per_client,
        .http1 = true,
        .h2c = true,
        .name = r->id,
        /* OTLP answers a too large request in its own format (gRPC:
         * RESOURCE_EXHAUSTED); on_request answers the others 413 */
        .deliver_too_large = true,
    };
    pl_listener_security_apply(&r->sec, &o);
    unsigned workers = pl_host_workers_count(r->host);
    if (workers > 1) {
        r->worker_servers = calloc(workers, sizeof(*r->worker_servers));
        if (!r->worker_servers)
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        r->n_workers = workers;
        pl_status st =
            pl_host_listen(r->host, r->endpoint, &o, on_request, r, r->worker_servers, err);
        if (st != PL_OK) {
            free(r->worker_servers);
            r->worker_servers = NULL;
            r->n_workers = 0;
            return st;
        }
        pl_info(r->id,
                "listening on %s://%s, port %d (Pyroscope /ingest, push API, OTLP profiles; "
                "%u workers)",
                pl_listener_security_scheme(&r->sec), r->endpoint,
                pl_http_server_port(r->worker_servers[0]), workers);
        return PL_OK;
    }
    r->server = pl_http_server_start(r->loop, r->endpoint, &o, on_request, r, err);
    if (!r->server)
        return PL_ERR_INTERNAL;
    pl_info(r->id, "listening on %s://%s, port %d (Pyroscope /ingest, push API, OTLP profiles)",
            pl_listener_security_scheme(&r->sec), r->endpoint, pl_http_server_port(r->server));
    return PL_OK;
}

static void close_worker_servers(pyroscope *r)
{
    pl_host_close(r->host, r->worker_servers, r->n_workers);
    free(r->worker_servers);
    r->worker_servers = NULL;
    r->n_workers = 0;
}

static void pyroscope_shutdown(void *self)
{
    pyroscope *r = self;
    close_worker_servers(r);
    if (r->server) {
        pl_http_server_close(r->server);
        r->server = NULL;
    }
}

static void pyroscope_destroy(void *self)
{
    pyroscope *r = self;
    if (!r)
        return;
    close_worker_servers(r);
    if (r->server)
        pl_http_server_close(r->server);
    pl_listener_security_free(&r->sec);
    free(r->endpoint);
    free(r);
}

/* For tests: the port actually bound (endpoint with port 0). */
int pl_pyroscope_receiver_port(void *self);
int pl_pyroscope_receiver_port(void *self)
{
    pyroscope *r = self;
    if (r->worker_servers)
        return pl_http_server_port(r->worker_servers[0]);
    return r->server ? pl_http_server_port(r->server) : -1;
}

const pl_component_type pl_receiver_pyroscope = {
    PL_COMPONENT_HEAD("pyroscope", PL_KIND_RECEIVER, PL_SIGNAL_MASK(PL_SIGNAL_PROFILES),
                      &pyroscope_section),
    .description = "Pyroscope server API: /ingest (pprof, multipart, folded, lines), the push "
                   "API (push.v1.PusherService/Push), converted to OTLP profiles, and OTLP "
                   "profiles over HTTP and gRPC on the same port",
    PL_COMPONENT_LIFECYCLE(pyroscope_create, pyroscope_start, pyroscope_shutdown,
                           pyroscope_destroy),
};
