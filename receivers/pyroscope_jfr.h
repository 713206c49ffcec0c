/*
 * pyroscope_jfr.h: /ingest?format=jfr for the pyroscope receiver: what the
 * Pyroscope Java agent uploads (shared/spec/jfr.md).
 *
 * The body is the JFR recording itself (raw or gzipped), or
 * multipart/form-data with a `jfr` part (the recording, raw or gzipped) and
 * an optional `labels` part (a LabelsSnapshot protobuf, raw or gzipped).
 * proto/jfr.c turns the recording into one pprof per kind of event, which
 * then goes through the same pprof decoder as every other upload, so the
 * context labels (`span_id`, `profile_id`) link samples to spans the same
 * way. The recording's async-profiler mode (jdk.ActiveSetting `event`)
 * becomes the resource attribute `javaspy_event`, as Pyroscope labels it.
 */
#ifndef PL_PYROSCOPE_JFR_H
#define PL_PYROSCOPE_JFR_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "proto/pprof.h"

typedef struct pl_jfr_upload {
    const uint8_t *body;
    size_t body_len;
    const char *content_type; /* may be NULL */
    size_t content_type_len;
    const char *sample_rate; /* the sampleRate query parameter, may be NULL */
    size_t max_decompressed; /* each part after gunzip; the recording's size */
    size_t max_memory;       /* the JFR decoder's memory budget (the request's) */
    size_t max_objects;      /* and its object budget */
} pl_jfr_upload;

/* Decodes the upload and adds its profiles to the builder, with `meta` for
 * the resource. PL_ERR_INVALID for a malformed body, PL_ERR_TOO_LARGE past
 * the size limit or the decoder's budget (then the builder's own budget
 * covers the pprofs it decodes). *profiles gets the number of pprofs added. */
pl_status pl_pyroscope_ingest_jfr(pl_pprof_builder *b, const pl_jfr_upload *up,
                                  const pl_pprof_meta *meta, uint32_t *profiles, pl_err *err);

#endif
