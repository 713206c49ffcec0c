/*
 * config.c: collector.yaml -> pl_config (see config.h).
 *
 * The walk is written so that one pass finds as many problems as possible:
 * a bad component definition does not hide the pipeline errors after it,
 * and a reference to an undefined component is reported at the exact list
 * item that names it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/decode.h"
#include "config/sources.h"
#include "core/log.h"

/* ---- service section table ---------------------------------------------- */

static int logs_validate(void *cfg, pl_cfg_ctx *ctx)
{
    pl_service_logs_cfg *logs = cfg;
    int errors = 0;
    if (logs->level && pl_log_level_parse(logs->level) < 0) {
        pl_cfg_errorf(ctx, "level", "unknown log level '%s' (debug, info, warn, error, off)",
                      logs->level);
        errors++;
    }
    if (logs->encoding && pl_log_encoding_parse(logs->encoding) < 0) {
        pl_cfg_errorf(ctx, "encoding", "unknown encoding '%s' (console or json)", logs->encoding);
        errors++;
    }
    return errors;
}

/* metrics.readers is the Collector's newer way to say where its metrics are
 * served: readers: [{pull: {exporter: {prometheus: {host: 0.0.0.0, port:
 * 8888}}}}] (the reader_cfg ... prometheus_cfg structs of the schema). */
static int metrics_validate(void *cfg, pl_cfg_ctx *ctx)
{
    pl_service_metrics_cfg *m = cfg;
    int errors = 0;
    static const char *const levels[] = {"none", "basic", "normal", "detailed", NULL};
    bool known = !m->level;
    for (size_t i = 0; levels[i] && !known; i++)
        known = strcmp(m->level, levels[i]) == 0;
    if (!known) {
        pl_cfg_errorf(ctx, "level", "must be none, basic, normal or detailed");
        errors++;
    }
    if (m->readers.n > 1) {
        pl_cfg_errorf(ctx, "readers",
                      "one pull reader is supported (proflink serves one "
                      "/metrics endpoint)");
        errors++;
    }
    return errors;
}

#include "config/config.config.inc"

/* The Collector's other names for types proflink has: the current exporter
 * names otlp_grpc and otlp_http (otlp and otlphttp are their older names,
 * still accepted by the Collector as aliases). */
static const struct {
    pl_kind kind;
    const char *alias, *type;
} type_aliases[] = {
    {PL_KIND_EXPORTER, "otlp_grpc", "otlp"},
    {PL_KIND_EXPORTER, "otlp_http", "otlphttp"},
};

static const pl_component_type *find_exact(const pl_component_type *const *registry, pl_kind kind,
                                           const char *type, size_t len);

const pl_component_type *pl_config_find_type(const pl_component_type *const *registry, pl_kind kind,
                                             const char *type, size_t len)
{
    const pl_component_type *t = find_exact(registry, kind, type, len);
    for (size_t i = 0; !t && i < sizeof(type_aliases) / sizeof(type_aliases[0]); i++)
        if (type_aliases[i].kind == kind && strlen(type_aliases[i].alias) == len &&
            memcmp(type_aliases[i].alias, type, len) == 0)
            t = find_exact(registry, kind, type_aliases[i].type, strlen(type_aliases[i].type));
    return t;
}

static const pl_component_type *find_exact(const pl_component_type *const *registry, pl_kind kind,
                                           const char *type, size_t len)
{
    for (size_t i = 0; registry && registry[i]; i++) {
        const pl_component_type *t = registry[i];
        if (t->kind == kind && strlen(t->type) == len && memcmp(t->type, type, len) == 0)
            return t;
    }
    return NULL;
}

/* ---- loading ------------------------------------------------------------ */

static const char *const signal_names[PL_SIGNAL_COUNT] = {"traces", "profiles", "logs", "metrics"};

static int signal_parse(const char *s, size_t len, pl_signal *out)
{
    for (int i = 0; i < PL_SIGNAL_COUNT; i++) {
        if (strlen(signal_names[i]) == len && memcmp(signal_names[i], s, len) == 0) {
            *out = (pl_signal)i;
            return 0;
        }
    }
    return -1;
}

static void signals_text(unsigned mask, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < PL_SIGNAL_COUNT; i++)
        if (mask & PL_SIGNAL_MASK(i))
            len +=
                (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", signal_names[i]);
    if (!len)
        snprintf(buf, size, "none");
}

static const char *kind_section_name(pl_kind kind)
{
    switch (kind) {
    case PL_KIND_RECEIVER:
        return "receivers";
    case PL_KIND_PROCESSOR:
        return "processors";
    case PL_KIND_EXPORTER:
        return "exporters";
    case PL_KIND_EXTENSION:
        return "extensions";
    }
    return "?";
}

typedef struct loader {
    pl_config *cfg;
    pl_cfg_errors *errs;
    size_t n_errors_before;
} loader;

/* Checks "type" or "type/name"; returns the length of the type part or -1. */
static int split_id(const char *id)
{
    const char *slash = strchr(id, '/');
    if (!slash)
        return *id ? (int)strlen(id) : -1;
    if (slash == id || slash[1] == '\0')
        return -1;
    return (int)(slash - id);
}

static void known_types(const pl_component_type *const *registry, pl_kind kind, char *buf,
                        size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; registry && registry[i]; i++)
        if (registry[i]->kind == kind && len < size - 1)
            len +=
                (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", registry[i]->type);
    for (size_t i = 0; i < sizeof(type_aliases) / sizeof(type_aliases[0]); i++)
        if (type_aliases[i].kind == kind && len < size - 1 &&
            find_exact(registry, kind, type_aliases[i].type, strlen(type_aliases[i].type)))
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "",
                                    type_aliases[i].alias);
    if (!len)
        snprintf(buf, size, "none registered");
}

/* Well-known Collector component types proflink does not have: what each
 * is, and what to use instead (shown by validate after "unknown ... type").
 * Kind PL_KIND_EXTENSION + 1 stands for "any kind" (connectors appear in
 * pipelines as receivers and exporters). */
#define ANY_KIND ((pl_kind)(PL_KIND_EXTENSION + 1))
static const struct {
    pl_kind kind;
    const char *type, *hint;
} type_hints[] = {
    {PL_KIND_EXPORTER, "logging",
     "the Collector's old name of the debug exporter: write 'debug' (verbosity: basic, normal or "
     "detailed)"},
    {PL_KIND_EXPORTER, "prometheus",
     "a contrib exporter proflink does not have; proflink's own metrics are served on "
     "service.telemetry.metrics; send metrics on with otlp or otlphttp"},
    {PL_KIND_EXPORTER, "prometheusremotewrite",
     "a contrib exporter proflink does not have; use otlphttp to a backend that takes OTLP "
     "(Mimir, Prometheus 3 /api/v1/otlp)"},
    {PL_KIND_EXPORTER, "loki",
     "a contrib exporter (removed upstream) proflink does not have; Loki 3 takes OTLP: use "
     "otlphttp"},
    {PL_KIND_EXPORTER, "zipkin", "a contrib exporter proflink does not have; use otlp or otlphttp"},
    {PL_KIND_EXPORTER, "jaeger",
     "removed from the Collector; Jaeger takes OTLP: use otlp or otlphttp"},
    {PL_KIND_EXPORTER, "kafka", "a contrib exporter this build of proflink does not have"},
    {PL_KIND_EXPORTER, "elasticsearch",
     "a contrib exporter proflink does not have; use otlphttp to a backend that takes OTLP"},
    {PL_KIND_EXPORTER, "clickhouse",
     "a contrib exporter proflink does not have; proflink keeps profiles and traces in its "
     "own store (exporter 'sqlite')"},
    {PL_KIND_EXPORTER, "awsxray", "a contrib exporter proflink does not have; use otlp"},
    {PL_KIND_EXPORTER, "datadog", "a contrib exporter proflink does not have; use otlp"},
    {PL_KIND_EXPORTER, "googlecloud", "a contrib exporter proflink does not have; use otlp"},
    {PL_KIND_EXPORTER, "splunk_hec", "a contrib exporter proflink does not have; use otlphttp"},
    {PL_KIND_RECEIVER, "jaeger",
     "a contrib receiver proflink does not have; Jaeger clients can send OTLP to the otlp "
     "receiver"},
    {PL_KIND_RECEIVER, "zipkin",
     "a contrib receiver proflink does not have; send OTLP to the otlp receiver"},
    {PL_KIND_RECEIVER, "prometheus",
     "a contrib receiver proflink does not have; for profiles, pprof_scrape scrapes "
     "/debug/pprof endpoints"},
    {PL_KIND_RECEIVER, "hostmetrics", "a contrib receiver proflink does not have"},
    {PL_KIND_RECEIVER, "filelog", "a contrib receiver proflink does not have"},
    {PL_KIND_RECEIVER, "kafka", "a contrib receiver this build of proflink does not have"},
    {PL_KIND_RECEIVER, "profiling",
     "the eBPF profiler's receiver (opentelemetry-ebpf-profiler) proflink does not embed; run "
     "the profiler as an agent that sends OTLP profiles to the otlp receiver"},
    {PL_KIND_PROCESSOR, "filter",
     "a contrib processor proflink does not have; redaction removes attributes, attributes "
     "deletes them"},
    {PL_KIND_PROCESSOR, "transform",
     "a contrib processor (OTTL) proflink does not have; attributes and resource cover insert, "
     "update, upsert, delete, hash, extract and convert"},
    {PL_KIND_PROCESSOR, "k8sattributes",
     "a contrib processor proflink does not have; set resource attributes with the resource "
     "processor"},
    {PL_KIND_PROCESSOR, "tail_sampling", "a contrib processor proflink does not have"},
    {PL_KIND_PROCESSOR, "probabilistic_sampler", "a contrib processor proflink does not have"},
    {PL_KIND_PROCESSOR, "span", "a contrib processor proflink does not have"},
    {PL_KIND_PROCESSOR, "groupbytrace",
     "a contrib processor proflink does not have; the correlation processor waits for the spans "
     "a profile names"},
    {PL_KIND_PROCESSOR, "spanmetrics",
     "replaced in the Collector by the spanmetrics connector; proflink runs no connectors"},
    {PL_KIND_EXTENSION, "oauth2client",
     "a contrib extension proflink does not have; bearertokenauth sends a fixed or file-held "
     "token"},
    {PL_KIND_EXTENSION, "headers_setter",
     "a contrib extension proflink does not have; the exporters' 'headers' sets fixed headers"},
    {PL_KIND_EXTENSION, "memory_ballast",
     "removed from the Collector; use the memory_limiter processor"},
    {PL_KIND_EXTENSION, "oidc", "a contrib extension proflink does not have"},
    {ANY_KIND, "spanmetrics", "a connector; proflink runs no connectors"},
    {ANY_KIND, "servicegraph", "a connector; proflink runs no connectors"},
    {ANY_KIND, "forward",
     "a connector; proflink runs no connectors: list the receivers in each pipeline instead"},
    {ANY_KIND, "count", "a connector; proflink runs no connectors"},
    {ANY_KIND, "routing", "a connector; proflink runs no connectors"},
    {ANY_KIND, "failover", "a connector; proflink runs no connectors"},
    {ANY_KIND, "roundrobin",
     "a connector; proflink runs no connectors (the loadbalancing exporter spreads by trace "
     "id)"},
};

static const char *type_hint(pl_kind kind, const char *type, size_t len)
{
    for (size_t i = 0; i < sizeof(type_hints) / sizeof(type_hints[0]); i++)
        if ((type_hints[i].kind == kind || type_hints[i].kind == ANY_KIND) &&
            strlen(type_hints[i].type) == len && memcmp(type_hints[i].type, type, len) == 0)
            return type_hints[i].hint;
    return NULL;
}

static void load_components(loader *l, pl_kind kind, const pl_cfg_node *map)
{
    if (!map || map->kind == PL_NODE_NULL)
        return;
    if (map->kind != PL_NODE_MAP) {
        pl_cfg_errors_at(l->errs, map, "'%s' must be a map of component ids to settings",
                         kind_section_name(kind));
        return;
    }
    pl_config *cfg = l->cfg;
    pl_config_component *grown =
        realloc(cfg->components, (cfg->n_components + map->n + 1) * sizeof(*cfg->components));
    if (!grown) {
        pl_cfg_errors_at(l->errs, map, "out of memory");
        return;
    }
    cfg->components = grown;
    for (size_t i = 0; i < map->n; i++) {
        const pl_cfg_node *idkey = map->keys[i];
        const pl_cfg_node *body = map->items[i];
        int type_len = split_id(idkey->value);
        if (type_len < 0) {
            pl_cfg_errors_at(l->errs, idkey, "bad component id '%s' (write type or type/name)",
                             idkey->value);
            continue;
        }
        const pl_component_type *type =
            pl_config_find_type(cfg->registry, kind, idkey->value, (size_t)type_len);
        if (!type) {
            char known[400];
            known_types(cfg->registry, kind, known, sizeof(known));
            const char *hint = type_hint(kind, idkey->value, (size_t)type_len);
            if (hint)
                pl_cfg_errors_at(l->errs, idkey, "unknown %s type '%.*s': %s (known: %s)",
                                 pl_kind_name(kind), type_len, idkey->value, hint, known);
            else
                pl_cfg_errors_at(l->errs, idkey, "unknown %s type '%.*s' (known: %s)",
                                 pl_kind_name(kind), type_len, idkey->value, known);
            continue;
        }
        pl_config_component *c = &cfg->components[cfg->n_components];
        memset(c, 0, sizeof(*c));
        c->id = strdup(idkey->value);
        c->kind = kind;
        c->type = type;
        c->key = idkey;
        if (!c->id) {
            pl_cfg_errors_at(l->errs, idkey, "out of memory");
            continue;
        }
        if (type->config) {
            c->cfg = calloc(1, type->config->size ? type->config->size : 1);
            if (!c->cfg) {
                free(c->id);
                pl_cfg_errors_at(l->errs, idkey, "out of memory");
                continue;
            }
            pl_cfg_decode(type->config, body, idkey, c->cfg, l->errs);
        } else if (body && body->kind == PL_NODE_MAP && body->n > 0) {
            pl_cfg_errors_at(l->errs, body->keys[0], "unknown key '%s' (%s %s takes no settings)",
                             body->keys[0]->value, pl_kind_name(kind), type->type);
        } else if (body && body->kind != PL_NODE_MAP && body->kind != PL_NODE_NULL) {
            pl_cfg_errors_at(l->errs, body, "expected a map of settings, got %s",
                             pl_cfg_node_kind_name(body));
        }
        cfg->n_components++;
    }
}

static long find_component(const pl_config *cfg, pl_kind kind, const char *id)
{
    for (size_t i = 0; i < cfg->n_components; i++)
        if (cfg->components[i].kind == kind && strcmp(cfg->components[i].id, id) == 0)
            return (long)i;
    return -1;
}

/* The defined id of `kind` closest to a misspelt one; NULL if none is near. */
static const char *closest_id(const pl_config *cfg, pl_kind kind, const char *id)
{
    const char *close = NULL;
    int best = 3;
    for (size_t i = 0; i < cfg->n_components; i++) {
        if (cfg->components[i].kind != kind)
            continue;
        int dist = pl_cfg_edit_distance(id, cfg->components[i].id);
        if (dist < best) {
            best = dist;
            close = cfg->components[i].id;
        }
    }
    return close;
}

/* Is `id` defined under the kind's section, even if its type was unknown?
 * Avoids a second, misleading "not defined" error for the same mistake. */
static bool defined_in_file(const pl_cfg_node *root, pl_kind kind, const char *id)
{
    return pl_cfg_node_key(pl_cfg_node_get(root, kind_section_name(kind)), id) != NULL;
}

/* Reads one list (receivers/processors/exporters) of a pipeline. */
static void load_pipeline_list(loader *l, pl_config_pipeline *p, pl_kind kind,
                               const pl_cfg_node *list, size_t **out, size_t *n_out,
                               size_t *n_connectors)
{
    *out = NULL;
    *n_out = 0;
    if (!list || list->kind == PL_NODE_NULL)
        return;
    if (list->kind != PL_NODE_SEQ) {
        pl_cfg_errors_at(l->errs, list, "expected a list of %s ids, got %s", pl_kind_name(kind),
                         pl_cfg_node_kind_name(list));
        return;
    }
    *out = calloc(list->n ? list->n : 1, sizeof(size_t));
    if (!*out)
        return;
    const pl_config *cfg = l->cfg;
    for (size_t i = 0; i < list->n; i++) {
        const pl_cfg_node *item = list->items[i];
        if (item->kind != PL_NODE_SCALAR) {
            pl_cfg_errors_at(l->errs, item, "expected a %s id, got %s", pl_kind_name(kind),
                             pl_cfg_node_kind_name(item));
            continue;
        }
        long idx = find_component(cfg, kind, item->value);
        if (idx < 0) {
            /* a connector's id: 'connectors' itself is the one error */
            bool connector =
                (kind == PL_KIND_RECEIVER || kind == PL_KIND_EXPORTER) &&
                pl_cfg_node_key(pl_cfg_node_get(cfg->doc->root, "connectors"), item->value);
            if (connector)
                (*n_connectors)++;
            else if (!defined_in_file(cfg->doc->root, kind, item->value)) {
                const char *close = closest_id(cfg, kind, item->value);
                if (close)
                    pl_cfg_errors_at(
                        l->errs, item, "%s '%s' is not defined under '%s' (did you mean '%s'?)",
                        pl_kind_name(kind), item->value, kind_section_name(kind), close);
                else
                    pl_cfg_errors_at(l->errs, item, "%s '%s' is not defined under '%s'",
                                     pl_kind_name(kind), item->value, kind_section_name(kind));
            }
            continue;
        }
        bool repeated = false;
        for (size_t j = 0; j < *n_out; j++)
            if ((*out)[j] == (size_t)idx)
                repeated = true;
        if (repeated) {
            pl_cfg_errors_at(l->errs, item, "%s '%s' is listed twice in pipeline '%s'",
                             pl_kind_name(kind), item->value, p->name);
            continue;
        }
        pl_config_component *c = &l->cfg->components[idx];
        if (!(c->type->signals & PL_SIGNAL_MASK(p->signal))) {
            char handles[64];
            signals_text(c->type->signals, handles, sizeof(handles));
            pl_cfg_errors_at(
                l->errs, item, "%s '%s' does not support %s (pipeline '%s'); it handles: %s",
                pl_kind_name(kind), item->value, signal_names[p->signal], p->name, handles);
            continue;
        }
        if (c->type->signals_passed & PL_SIGNAL_MASK(p->signal))
            pl_cfg_warn_at(l->errs, item,
                           "%s '%s' hands %s on unchanged: proflink does not apply it to %s yet "
                           "(pipeline '%s')",
                           pl_kind_name(kind), item->value, signal_names[p->signal],
                           signal_names[p->signal], p->name);
        if (c->type->signals_coarse & PL_SIGNAL_MASK(p->signal))
            pl_cfg_warn_at(l->errs, item,
                           "%s '%s' handles %s more coarsely than the Collector (pipeline '%s'; "
                           "see `proflink components %s`)",
                           pl_kind_name(kind), item->value, signal_names[p->signal], p->name,
                           c->type->type);
        c->signals |= PL_SIGNAL_MASK(p->signal);
        c->n_pipelines++;
        (*out)[(*n_out)++] = (size_t)idx;
    }
}

static void load_pipelines(loader *l, const pl_cfg_node *service_key, const pl_cfg_node *service)
{
    const pl_cfg_node *pkey = pl_cfg_node_key(service, "pipelines");
    const pl_cfg_node *pipes = pl_cfg_node_get(service, "pipelines");
    if (!pipes || pipes->kind == PL_NODE_NULL || (pipes->kind == PL_NODE_MAP && pipes->n == 0)) {
        const pl_cfg_node *at = pkey ? pkey : service_key;
        if (at)
            pl_cfg_errors_at(l->errs, at, "service.pipelines: at least one pipeline is required");
        else
            pl_cfg_errors_add(l->errs, l->cfg->doc->file, 1, 1,
                              "service.pipelines: at least one pipeline is required");
        return;
    }
    if (pipes->kind != PL_NODE_MAP) {
        pl_cfg_errors_at(l->errs, pipes, "service.pipelines must be a map, got %s",
                         pl_cfg_node_kind_name(pipes));
        return;
    }
    pl_config *cfg = l->cfg;
    cfg->pipelines = calloc(pipes->n, sizeof(*cfg->pipelines));
    if (!cfg->pipelines)
        return;
    for (size_t i = 0; i < pipes->n; i++) {
        const pl_cfg_node *key = pipes->keys[i];
        const pl_cfg_node *body = pipes->items[i];
        const char *slash = strchr(key->value, '/');
        size_t sig_len = slash ? (size_t)(slash - key->value) : strlen(key->value);
        pl_signal signal;
        if (signal_parse(key->value, sig_len, &signal) < 0 || (slash && slash[1] == '\0')) {
            pl_cfg_errors_at(l->errs, key,
                             "bad pipeline name '%s' (write traces, profiles, logs or metrics, "
                             "optionally followed by /name)",
                             key->value);
            continue;
        }
        pl_config_pipeline *p = &cfg->pipelines[cfg->n_pipelines];
        p->name = strdup(key->value);
        p->signal = signal;
        p->key = key;
        if (!p->name)
            continue;
        cfg->n_pipelines++;
        if (body && body->kind != PL_NODE_MAP && body->kind != PL_NODE_NULL) {
            pl_cfg_errors_at(l->errs, body, "pipeline '%s' must be a map, got %s", p->name,
                             pl_cfg_node_kind_name(body));
            continue;
        }
        for (size_t k = 0; body && body->kind == PL_NODE_MAP && k < body->n; k++) {
            const char *name = body->keys[k]->value;
            if (strcmp(name, "receivers") && strcmp(name, "processors") &&
                strcmp(name, "exporters"))
                pl_cfg_errors_at(l->errs, body->keys[k],
                                 "unknown key '%s' (known keys: receivers, processors, "
                                 "exporters)",
                                 name);
        }
        const pl_cfg_node *recv = pl_cfg_node_get(body, "receivers");
        const pl_cfg_node *procs = pl_cfg_node_get(body, "processors");
        const pl_cfg_node *exps = pl_cfg_node_get(body, "exporters");
        size_t n_connectors = 0;
        load_pipeline_list(l, p, PL_KIND_RECEIVER, recv, &p->receivers, &p->n_receivers,
                           &n_connectors);
        load_pipeline_list(l, p, PL_KIND_PROCESSOR, procs, &p->processors, &p->n_processors,
                           &n_connectors);
        load_pipeline_list(l, p, PL_KIND_EXPORTER, exps, &p->exporters, &p->n_exporters,
                           &n_connectors);
        if (n_connectors)
            continue; /* its ends are connectors: 'connectors' is the error */
        if (!recv || recv->kind == PL_NODE_NULL || (recv->kind == PL_NODE_SEQ && recv->n == 0))
            pl_cfg_errors_at(l->errs, key, "pipeline '%s' has no receivers", p->name);
        if (!exps || exps->kind == PL_NODE_NULL || (exps->kind == PL_NODE_SEQ && exps->n == 0))
            pl_cfg_errors_at(l->errs, key, "pipeline '%s' has no exporters", p->name);
    }
}

static void load_service(loader *l, const pl_cfg_node *service_key, const pl_cfg_node *service)
{
    pl_config *cfg = l->cfg;
    static const char *const skip[] = {"pipelines", NULL};
    if (service && service->kind != PL_NODE_MAP && service->kind != PL_NODE_NULL) {
        pl_cfg_errors_at(l->errs, service, "'service' must be a map, got %s",
                         pl_cfg_node_kind_name(service));
        service = NULL;
    }
    pl_cfg_decode_skipping(&pl_service_section, service, service_key, &cfg->service, l->errs, skip);
    const pl_cfg_node *metrics_node =
        pl_cfg_node_get(pl_cfg_node_get(service, "telemetry"), "metrics");
    cfg->metrics_address_set = pl_cfg_node_get(metrics_node, "address") != NULL;
    const pl_service_metrics_cfg *mc = &cfg->service.telemetry.metrics;
    if (mc->readers.n == 1) {
        const reader_cfg *r = mc->readers.items;
        const prometheus_cfg *p = &r->pull.exporter.prometheus;
        if (cfg->metrics_address_set) {
            pl_cfg_errors_at(l->errs, pl_cfg_node_key(metrics_node, "readers"),
                             "'readers': give either address or readers, not both");
        } else if (p->host) {
            char addr[300];
            bool v6 = strchr(p->host, ':') != NULL;
            snprintf(addr, sizeof(addr), "%s%s%s:%lld", v6 ? "[" : "", p->host, v6 ? "]" : "",
                     (long long)p->port);
            char why[300];
            if (pl_cfg_address_parse(addr, NULL, 0, NULL, why, sizeof(why)) < 0)
                pl_cfg_errors_at(l->errs, pl_cfg_node_get(metrics_node, "readers"), "'readers': %s",
                                 why);
            cfg->metrics_address = strdup(addr);
            cfg->metrics_address_set = true;
        }
    }
    int level = cfg->service.telemetry.logs.level
                    ? pl_log_level_parse(cfg->service.telemetry.logs.level)
                    : PL_LOG_INFO;
    cfg->log_level = level < 0 ? PL_LOG_INFO : level;
    int encoding = cfg->service.telemetry.logs.encoding
                       ? pl_log_encoding_parse(cfg->service.telemetry.logs.encoding)
                       : PL_LOG_CONSOLE;
    cfg->log_encoding = encoding < 0 ? PL_LOG_CONSOLE : encoding;

    load_pipelines(l, service_key, service);

    /* service.extensions: each must be defined; positions come from the nodes */
    const pl_cfg_node *ext = pl_cfg_node_get(service, "extensions");
    for (size_t i = 0; ext && ext->kind == PL_NODE_SEQ && i < ext->n; i++) {
        const pl_cfg_node *item = ext->items[i];
        if (item->kind != PL_NODE_SCALAR)
            continue;
        long idx = find_component(cfg, PL_KIND_EXTENSION, item->value);
        if (idx < 0) {
            if (!defined_in_file(cfg->doc->root, PL_KIND_EXTENSION, item->value))
                pl_cfg_errors_at(l->errs, item, "extension '%s' is not defined under 'extensions'",
                                 item->value);
            continue;
        }
        cfg->components[idx].n_pipelines++;
    }
}

/* `n_before`: errs->n before the document was read, so that value errors
 * found while reading (a bad ${...}) refuse the config too. */
/* ---- sending_queue.storage naming a file_storage extension ---------------- */

static const pl_cfg_field *field_named(const pl_cfg_section *s, const char *key, pl_cfg_type type)
{
    for (size_t i = 0; s && s->fields && s->fields[i].key; i++)
        if (s->fields[i].type == type && strcmp(s->fields[i].key, key) == 0)
            return &s->fields[i];
    return NULL;
}

/* The directory of the file_storage extension `id`; NULL if there is none. */
static const char *storage_directory(const pl_config *cfg, const char *id)
{
    long i = find_component(cfg, PL_KIND_EXTENSION, id);
    if (i < 0)
        return NULL;
    const pl_config_component *c = &cfg->components[i];
    if (strcmp(c->type->type, "file_storage") != 0 || !c->cfg)
        return NULL;
    const pl_cfg_field *f = field_named(c->type->config, "directory", PL_CFG_STRING);
    return f ? *(char *const *)((const char *)c->cfg + f->offset) : NULL;
}

/* A `storage` value that is a component id (file_storage or
 * file_storage/<name>, as Collector configs write it) becomes the directory
 * of that configured extension; one that names none is an error at its
 * position. Any other value stays a path. Walks the exporter's tables, so
 * nested sending_queues (loadbalancing's protocol.otlp) are found too. */
static void resolve_storage(loader *l, const pl_cfg_section *section, void *cfg,
                            const pl_cfg_node *map, const pl_cfg_node *at, int depth)
{
    for (size_t i = 0; section && cfg && depth < 8 && section->fields && section->fields[i].key;
         i++) {
        const pl_cfg_field *f = &section->fields[i];
        if (f->type != PL_CFG_SECTION || !f->section)
            continue;
        void *sub = (char *)cfg + f->offset;
        const pl_cfg_node *node = pl_cfg_node_get(map, f->key);
        const pl_cfg_node *pos = node && node->kind != PL_NODE_NULL ? node : at;
        const pl_cfg_field *sf = strcmp(f->key, "sending_queue") == 0
                                     ? field_named(f->section, "storage", PL_CFG_STRING)
                                     : NULL;
        if (!sf) {
            resolve_storage(l, f->section, sub, node, pos, depth + 1);
            continue;
        }
        char **slot = (char **)((char *)sub + sf->offset);
        const char *v = *slot;
        if (!v || (strcmp(v, "file_storage") != 0 && strncmp(v, "file_storage/", 13) != 0))
            continue;
        const pl_cfg_node *vpos = pl_cfg_node_get(node, "storage");
        const char *dir = storage_directory(l->cfg, v);
        if (!dir) {
            if (!defined_in_file(l->cfg->doc->root, PL_KIND_EXTENSION, v))
                pl_cfg_errors_at(l->errs, vpos ? vpos : pos,
                                 "sending_queue.storage '%s' names no configured file_storage "
                                 "extension (define it under extensions:, or give a path)",
                                 v);
            continue;
        }
        size_t n = strlen(dir);
        char *path = malloc(n + 2);
        if (!path) {
            pl_cfg_errors_at(l->errs, vpos ? vpos : pos, "out of memory");
            continue;
        }
        /* a trailing '/': always a directory to the queue */
        memcpy(path, dir, n);
        path[n] = '/';
        path[n + 1] = '\0';
        if (n && dir[n - 1] == '/')
            path[n] = '\0';
        free(*slot);
        *slot = path;
    }
}

static void resolve_storages(loader *l)
{
    const pl_cfg_node *root = l->cfg->doc->root;
    for (size_t i = 0; i < l->cfg->n_components; i++) {
        pl_config_component *c = &l->cfg->components[i];
        if (c->kind != PL_KIND_EXPORTER || !c->cfg || !c->type->config)
            continue;
        const pl_cfg_node *body = pl_cfg_node_get(pl_cfg_node_get(root, "exporters"), c->id);
        resolve_storage(l, c->type->config, c->cfg, body, body ? body : c->key, 0);
    }
}

static pl_config *load_doc(pl_cfg_doc *doc, const char *path,
                           const pl_component_type *const *registry, size_t n_before,
                           pl_cfg_errors *errs)
{
    pl_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg) {
        pl_cfg_doc_free(doc);
        return NULL;
    }
    cfg->doc = doc;
    cfg->path = strdup(path);
    cfg->registry = registry;
    loader l = {.cfg = cfg, .errs = errs, .n_errors_before = n_before};
    const pl_cfg_node *root = doc->root;
    if (!root) {
        pl_cfg_errors_add(errs, doc->file, 1, 1,
                          "the configuration is empty (service.pipelines is required)");
        pl_config_free(cfg);
        return NULL;
    }
    if (root->kind != PL_NODE_MAP) {
        pl_cfg_errors_at(errs, root, "the configuration must be a map, got %s",
                         pl_cfg_node_kind_name(root));
        pl_config_free(cfg);
        return NULL;
    }
    static const struct {
        const char *name;
        pl_kind kind;
    } sections[] = {{"extensions", PL_KIND_EXTENSION},
                    {"receivers", PL_KIND_RECEIVER},
                    {"processors", PL_KIND_PROCESSOR},
                    {"exporters", PL_KIND_EXPORTER}};
    for (size_t i = 0; i < root->n; i++) {
        const char *k = root->keys[i]->value;
        bool known = strcmp(k, "service") == 0;
        for (size_t s = 0; s < 4; s++)
            known |= strcmp(k, sections[s].name) == 0;
        if (strcmp(k, "connectors") == 0)
            pl_cfg_errors_at(errs, root->keys[i],
                             "'connectors' are not supported: proflink runs no connectors "
                             "(spanmetrics, servicegraph, forward, routing ...); give each "
                             "pipeline its own receivers and exporters instead");
        else if (!known)
            pl_cfg_errors_at(errs, root->keys[i],
                             "unknown key '%s' (known keys: receivers, processors, exporters, "
                             "extensions, service)",
                             k);
    }
    for (size_t s = 0; s < 4; s++)
        load_components(&l, sections[s].kind, pl_cfg_node_get(root, sections[s].name));
    load_service(&l, pl_cfg_node_key(root, "service"), pl_cfg_node_get(root, "service"));
    resolve_storages(&l);

    for (size_t i = 0; i < cfg->n_components; i++) {
        pl_config_component *c = &cfg->components[i];
        if (c->n_pipelines == 0 && c->kind != PL_KIND_EXTENSION)
            pl_debug("config", "%s '%s' is defined but not used in any pipeline",
                     pl_kind_name(c->kind), c->id);
    }
    if (errs->n > l.n_errors_before || !cfg->path) {
        pl_cfg_errors_sort(errs);
        pl_config_free(cfg);
        return NULL;
    }
    return cfg;
}

static char **copy_strings(char *const *v, size_t n)
{
    char **out = calloc(n + 1, sizeof(*out));
    for (size_t i = 0; out && i < n; i++) {
        out[i] = strdup(v[i]);
        if (!out[i]) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return NULL;
        }
    }
    return out;
}

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

pl_config *pl_config_load(const pl_cfg_sources *src, const pl_component_type *const *registry,
                          pl_cfg_errors *errs)
{
    size_t n_before = errs->n;
    pl_cfg_doc *doc = pl_cfg_sources_load(src, errs);
    if (!doc) {
        pl_cfg_errors_sort(errs);
        return NULL;
    }
    /* the name shown in logs: the first source, and how many more */
    char name[600];
    size_t more = src->n_configs + src->n_sets - 1;
    if (more)
        snprintf(name, sizeof(name), "%.500s (+%zu more source%s)", src->configs[0], more,
                 more == 1 ? "" : "s");
    else
        snprintf(name, sizeof(name), "%s", src->n_configs ? src->configs[0] : src->sets[0]);
    pl_config *cfg = load_doc(doc, name, registry, n_before, errs);
    if (!cfg)
        return NULL;
    cfg->sources.configs = copy_strings(src->configs, src->n_configs);
    cfg->sources.sets = copy_strings(src->sets, src->n_sets);
    if (!cfg->sources.configs || !cfg->sources.sets) {
        pl_config_free(cfg);
        pl_cfg_errors_add(errs, name, 0, 0, "out of memory");
        return NULL;
    }
    cfg->sources.n_configs = src->n_configs;
    cfg->sources.n_sets = src->n_sets;
    return cfg;
}

pl_config *pl_config_reload(const pl_config *running, pl_cfg_errors *errs)
{
    if (running->sources.n_configs + running->sources.n_sets > 0)
        return pl_config_load(&running->sources, running->registry, errs);
    return pl_config_load_file(running->path, running->registry, errs);
}

pl_config *pl_config_load_string(const char *name, const char *text, size_t len,
                                 const pl_component_type *const *registry, pl_cfg_errors *errs)
{
    size_t n_before = errs->n;
    pl_cfg_doc *doc = pl_cfg_doc_parse(name, text, len, errs);
    if (!doc || pl_cfg_doc_split_paths(doc) < 0) {
        pl_cfg_doc_free(doc);
        pl_cfg_errors_sort(errs);
        return NULL;
    }
    return load_doc(doc, name, registry, n_before, errs);
}

pl_config *pl_config_load_file(const char *path, const pl_component_type *const *registry,
                               pl_cfg_errors *errs)
{
    char *configs[] = {(char *)path};
    pl_cfg_sources src = {.configs = configs, .n_configs = 1};
    return pl_config_load(&src, registry, errs);
}

void pl_config_free(pl_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n_components; i++) {
        pl_config_component *c = &cfg->components[i];
        if (c->cfg && c->type->config)
            pl_cfg_free(c->type->config, c->cfg);
        free(c->cfg);
        free(c->id);
    }
    free(cfg->components);
    for (size_t i = 0; i < cfg->n_pipelines; i++) {
        pl_config_pipeline *p = &cfg->pipelines[i];
        free(p->name);
        free(p->receivers);
        free(p->processors);
        free(p->exporters);
    }
    free(cfg->pipelines);
    pl_cfg_free(&pl_service_section, &cfg->service);
    pl_cfg_doc_free(cfg->doc);
    free(cfg->metrics_address);
    free_strings(cfg->sources.configs, cfg->sources.n_configs);
    free_strings(cfg->sources.sets, cfg->sources.n_sets);
    free(cfg->path);
    free(cfg);
}

const char *pl_config_metrics_address(const pl_config *cfg)
{
    const pl_service_metrics_cfg *m = &cfg->service.telemetry.metrics;
    if (m->level && strcmp(m->level, "none") == 0)
        return NULL;
    const char *a = cfg->metrics_address ? cfg->metrics_address : m->address;
    if (!a || !*a || strcmp(a, "none") == 0)
        return NULL;
    return a;
}

const pl_tls_server_config *pl_config_metrics_tls(const pl_config *cfg)
{
    const pl_tls_server_config *t = &cfg->service.telemetry.metrics.tls;
    return pl_tls_server_config_enabled(t) ? t : NULL;
}

/* ---- addresses ---------------------------------------------------------- */

typedef struct addr_seen {
    char host[64];
    int port;
    const pl_cfg_node *at;
} addr_seen;

typedef struct addr_check {
    pl_cfg_errors *errs;
    int n_errors;
    addr_seen seen[64];
    size_t n_seen;
} addr_check;

/* Binding port 0 of the host tells whether it is an address of this
 * machine without taking any port. */
static void check_one(addr_check *ac, const char *key, const char *value, const pl_cfg_node *at)
{
    char host[64], why[200];
    int port;
    if (!value || pl_cfg_address_parse(value, host, sizeof(host), &port, why, sizeof(why)) < 0 ||
        port < 0)
        return; /* syntax errors were reported when the file was read */
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t len;
    int family;
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        len = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
        len = sizeof(struct sockaddr_in6);
    } else {
        return;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        if (bind(fd, (struct sockaddr *)&ss, len) != 0 && errno == EADDRNOTAVAIL) {
            pl_cfg_errors_at(ac->errs, at, "'%s': %s is not an address of this machine", key, host);
            ac->n_errors++;
        }
        close(fd);
    }
    if (port == 0)
        return;
    for (size_t i = 0; i < ac->n_seen; i++) {
        addr_seen *s = &ac->seen[i];
        bool any = strcmp(s->host, "0.0.0.0") == 0 || strcmp(host, "0.0.0.0") == 0;
        if (s->port == port && (any || strcmp(s->host, host) == 0)) {
            pl_cfg_errors_at(ac->errs, at, "'%s': %s is also used at %s:%d:%d", key, value,
                             s->at ? s->at->file : "?", s->at ? s->at->line : 0,
                             s->at ? s->at->col : 0);
            ac->n_errors++;
            return;
        }
    }
    if (ac->n_seen < sizeof(ac->seen) / sizeof(ac->seen[0])) {
        addr_seen *s = &ac->seen[ac->n_seen++];
        snprintf(s->host, sizeof(s->host), "%s", host);
        s->port = port;
        s->at = at;
    }
}

/* Walks a decoded struct with its table, next to the YAML that filled it
 * (`map` may be NULL where defaults apply; `at` is then the position). */
static void check_section(addr_check *ac, const pl_cfg_section *section, const void *cfg,
                          const pl_cfg_node *map, const pl_cfg_node *at, int depth)
{
    if (!section || !cfg || depth > 16)
        return;
    for (size_t i = 0; section->fields && section->fields[i].key; i++) {
        const pl_cfg_field *f = &section->fields[i];
        const void *slot = (const char *)cfg + f->offset;
        const pl_cfg_node *value = pl_cfg_node_get(map, f->key);
        const pl_cfg_node *pos = value && value->kind != PL_NODE_NULL ? value : at;
        if (f->type == PL_CFG_ADDRESS) {
            check_one(ac, f->key, *(char *const *)slot, pos);
        } else if (f->type == PL_CFG_SECTION) {
            check_section(ac, f->section, slot, value, pos, depth + 1);
        } else if (f->type == PL_CFG_LIST && f->section) {
            const pl_cfg_list *l = slot;
            for (size_t k = 0; k < l->n; k++) {
                const pl_cfg_node *item =
                    value && value->kind == PL_NODE_SEQ && k < value->n ? value->items[k] : NULL;
                check_section(ac, f->section, (const char *)l->items + k * f->section->size, item,
                              item ? item : pos, depth + 1);
            }
        }
    }
}

int pl_config_check_addresses(const pl_config *cfg, pl_cfg_errors *errs)
{
    addr_check ac = {.errs = errs};
    const pl_cfg_node *root = cfg->doc ? cfg->doc->root : NULL;
    for (size_t i = 0; i < cfg->n_components; i++) {
        const pl_config_component *c = &cfg->components[i];
        if (!c->type->config || c->n_pipelines == 0)
            continue; /* an unused component never listens */
        const pl_cfg_node *body =
            pl_cfg_node_get(pl_cfg_node_get(root, kind_section_name(c->kind)), c->id);
        check_section(&ac, c->type->config, c->cfg, body, body ? body : c->key, 0);
    }
    const pl_cfg_node *service = pl_cfg_node_get(root, "service");
    check_section(&ac, &pl_service_section, &cfg->service, service,
                  service ? pl_cfg_node_key(root, "service") : NULL, 0);
    if (cfg->metrics_address) /* from metrics.readers */
        check_one(&ac, "readers", cfg->metrics_address,
                  pl_cfg_node_get(pl_cfg_node_get(pl_cfg_node_get(service, "telemetry"), "metrics"),
                                  "readers"));
    if (ac.n_errors)
        pl_cfg_errors_sort(errs);
    return ac.n_errors;
}
