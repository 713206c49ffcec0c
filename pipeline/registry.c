/*
 * registry.c: the one list of built-in component types. Adding a component
 * means adding its descriptor here, and nowhere else.
 */
#include <string.h>

#include "core/component.h"
#include "pipeline/registry.h"

/* receivers */
extern const pl_component_type pl_receiver_otlp;
extern const pl_component_type pl_receiver_pyroscope;
extern const pl_component_type pl_receiver_pprof_scrape;
extern const pl_component_type pl_receiver_nats;
extern const pl_component_type pl_receiver_kafka;
/* processors */
extern const pl_component_type pl_processor_batch;
extern const pl_component_type pl_processor_memory_limiter;
extern const pl_component_type pl_processor_attributes;
extern const pl_component_type pl_processor_resource;
extern const pl_component_type pl_processor_resourcedetection;
extern const pl_component_type pl_processor_redaction;
extern const pl_component_type pl_processor_correlation;
/* exporters */
extern const pl_component_type pl_exporter_file;
extern const pl_component_type pl_exporter_nop;
extern const pl_component_type pl_exporter_debug;
extern const pl_component_type pl_exporter_pyroscope;
extern const pl_component_type pl_exporter_sqlite;
extern const pl_component_type pl_exporter_otlp;
extern const pl_component_type pl_exporter_otlphttp;
extern const pl_component_type pl_exporter_loadbalancing;
extern const pl_component_type pl_exporter_nats;
extern const pl_component_type pl_exporter_kafka;
/* extensions */
extern const pl_component_type pl_extension_health_check;
extern const pl_component_type pl_extension_pprof;
extern const pl_component_type pl_extension_zpages;
extern const pl_component_type pl_extension_bearertokenauth;
extern const pl_component_type pl_extension_basicauth;
extern const pl_component_type pl_extension_file_storage;

const pl_component_type *const pl_component_types[] = {
    &pl_receiver_otlp,
    &pl_receiver_pyroscope,
    &pl_receiver_pprof_scrape,
    &pl_receiver_nats,
    &pl_receiver_kafka,
    &pl_processor_correlation,
    &pl_processor_batch,
    &pl_processor_memory_limiter,
    &pl_processor_attributes,
    &pl_processor_resource,
    &pl_processor_resourcedetection,
    &pl_processor_redaction,
    &pl_exporter_debug,
    &pl_exporter_pyroscope,
    &pl_exporter_file,
    &pl_exporter_nop,
    &pl_exporter_sqlite,
    &pl_exporter_otlp,
    &pl_exporter_otlphttp,
    &pl_exporter_loadbalancing,
    &pl_exporter_nats,
    &pl_exporter_kafka,
    &pl_extension_health_check,
    &pl_extension_pprof,
    &pl_extension_zpages,
    &pl_extension_bearertokenauth,
    &pl_extension_basicauth,
    &pl_extension_file_storage,
    NULL,
};

const pl_component_type *pl_component_type_find(pl_kind kind, const char *type, size_t len)
{
    for (size_t i = 0; pl_component_types[i]; i++) {
        const pl_component_type *t = pl_component_types[i];
        if (t->kind == kind && strlen(t->type) == len && memcmp(t->type, type, len) == 0)
            return t;
    }
    return NULL;
}
