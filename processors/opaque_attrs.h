/*
 * opaque_attrs.h: rewriting the attribute lists inside opaque OTLP logs and
 * metrics requests (protobuf bytes) while keeping every other byte.
 */
#ifndef PL_PROCESSORS_OPAQUE_ATTRS_H
#define PL_PROCESSORS_OPAQUE_ATTRS_H

#include <stdbool.h>

#include "core/model.h"

/* Called once per log record / data point with its attributes decoded into
 * `attrs` (strings in `tmp`'s arena; new strings go there too). `service`
 * is the service.name of the enclosing resource (empty when absent). false
 * stops the walk (out of memory). */
typedef bool (*pl_opaque_attrs_fn)(void *arg, pl_batch *tmp, pl_attrs *attrs, pl_bytes service);

/* Walks a PL_SIGNAL_LOGS (LogRecord.attributes) or PL_SIGNAL_METRICS (the
 * attributes of every Number/Histogram/ExponentialHistogram/Summary data
 * point; with `resources`, also each ResourceLogs' / ResourceMetrics'
 * Resource present) batch; each list goes through `fn` and is written back in place of
 * the old one. The batch then points at the new request (held by its
 * arena). false when the bytes do not parse or on OOM: the batch is left
 * as it was. */
bool pl_opaque_rewrite_attrs(pl_batch *batch, bool resources, pl_opaque_attrs_fn fn, void *arg);

/* Called with each log record's body (present) decoded; false stops the
 * walk. */
typedef bool (*pl_opaque_body_fn)(void *arg, pl_batch *tmp, pl_value *body);

/* pl_opaque_rewrite_attrs, and on logs each record's body goes through
 * `body` (NULL: kept as it came). */
bool pl_opaque_rewrite(pl_batch *batch, bool resources, pl_opaque_attrs_fn fn,
                       pl_opaque_body_fn body, void *arg);

#endif
