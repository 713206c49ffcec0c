/*
 * config.h: the whole collector.yaml, loaded and checked.
 *
 * The file has the OpenTelemetry Collector's shape: `receivers`,
 * `processors`, `exporters` and `extensions` maps keyed by `type` or
 * `type/name`, and `service` with `pipelines` (keyed by a signal, optionally
 * `signal/name`), `extensions` and `telemetry`. Loading does every check
 * that needs no network: YAML syntax, unknown keys and wrong types (through
 * each component's config table), unknown component types, references to
 * undefined components, pipelines without receivers or exporters, and
 * components used with a signal they do not handle. All problems are
 * collected with their file:line:col; a config with any error is not
 * returned, so the graph builder only ever sees a valid one.
 *
 * Every component id maps to exactly one pl_config_component, however many
 * pipelines name it: that is what makes a processor listed in a traces and a
 * profiles pipeline one shared instance.
 */
#ifndef PL_CONFIG_CONFIG_H
#define PL_CONFIG_CONFIG_H

#include <stdint.h>

#include "config/node.h"
#include "config/sources.h"
#include "core/component.h"
#include "net/tls.h"

typedef struct pl_config_component {
    char *id; /* "otlphttp/tempo" */
    pl_kind kind;
    const pl_component_type *type;
    void *cfg;              /* decoded with type->config (NULL if none) */
    unsigned signals;       /* union of the signals of the pipelines using it */
    int n_pipelines;        /* how many pipelines reference it */
    const pl_cfg_node *key; /* where it was defined */
} pl_config_component;

typedef struct pl_config_pipeline {
    char *name; /* "traces", "profiles/pyroscope" */
    pl_signal signal;
    size_t *receivers; /* indices into pl_config.components */
    size_t n_receivers;
    size_t *processors; /* in order */
    size_t n_processors;
    size_t *exporters;
    size_t n_exporters;
    const pl_cfg_node *key;
} pl_config_pipeline;

/* service.telemetry and friends, decoded with pl_service_section: the
 * structs (pl_service_cfg ...) are generated from config.config.yaml, with
 * the telemetry reader's own structs (reader_cfg ...), which only config.c
 * uses. */
#include "config/config.config.h"

extern const pl_cfg_section pl_service_section;

typedef struct pl_config {
    char *path;
    pl_config_component *components;
    size_t n_components;
    pl_config_pipeline *pipelines;
    size_t n_pipelines;
    pl_service_cfg service;
    int log_level;                            /* parsed service.telemetry.logs.level */
    int log_encoding;                         /* parsed service.telemetry.logs.encoding */
    bool metrics_address_set;                 /* the file chose the address explicitly */
    char *metrics_address;                    /* from metrics.readers (malloc'd), else NULL */
    pl_cfg_doc *doc;                          /* kept for positions (and print-config) */
    pl_cfg_sources sources;                   /* what it was read from, read again on reload */
    const pl_component_type *const *registry; /* the types it was checked against */
} pl_config;

/* Loads and checks a configuration. `registry` is the NULL-terminated list
 * of component types to accept (the caller's: config/ knows no components
 * itself; tests pass a list with their own types). NULL when there is
 * any error (each one added to errs, sorted by source and position);
 * warnings (unset variables, ignored keys) are in errs->warnings either way. */
pl_config *pl_config_load(const pl_cfg_sources *sources, const pl_component_type *const *registry,
                          pl_cfg_errors *errs);
pl_config *pl_config_load_file(const char *path, const pl_component_type *const *registry,
                               pl_cfg_errors *errs);
pl_config *pl_config_load_string(const char *name, const char *text, size_t len,
                                 const pl_component_type *const *registry, pl_cfg_errors *errs);
/* Reads the sources of `running` again (SIGHUP). */
pl_config *pl_config_reload(const pl_config *running, pl_cfg_errors *errs);
void pl_config_free(pl_config *config);

/* The metrics address to serve, or NULL when disabled. */
const char *pl_config_metrics_address(const pl_config *config);
/* The telemetry endpoint's TLS settings; NULL when it is served in clear. */
const pl_tls_server_config *pl_config_metrics_tls(const pl_config *cfg);

/* The type of `registry` with that kind and name, or one of the names the
 * Collector also accepts for it (otlp_grpc, otlp_http); NULL if none. */
const pl_component_type *pl_config_find_type(const pl_component_type *const *registry, pl_kind kind,
                                             const char *type, size_t len);

/* Checks what needs the machine: every listening address (PL_CFG_ADDRESS
 * fields and service.telemetry.metrics.address) must name a host that
 * resolves to an address of this machine. Returns the number of errors
 * added to errs (at the value's position). */
int pl_config_check_addresses(const pl_config *config, pl_cfg_errors *errs);

#endif
