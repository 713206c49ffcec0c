/*
 * nats.h: the subject partitioning of the `nats` exporter
 * (exporters/nats.c), exposed for tests.
 *
 * With `partitions: N`, a span goes to <subject>.<p> with
 * p = pl_lb_hash(trace id) mod N, the fixed hash the loadbalancing exporter
 * places traces with (exporters/lb_ring.h): every agent computes the same
 * partition for a trace, across processes and restarts. A profile sample
 * goes where its link's trace id goes, so a trace's spans and the samples
 * that name it share a partition number on both signals' subjects; a
 * gateway consuming partition p of both (receivers/nats.c, `partitions`)
 * sees them together. Spans without a trace id and samples without a link
 * are placed by their resource's service.name (a separate key space, as in
 * the loadbalancing exporter).
 */
#ifndef PL_EXPORTERS_NATS_H
#define PL_EXPORTERS_NATS_H

#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

/* The partition of a 16-byte trace id among `n` (n >= 1). */
unsigned pl_nats_trace_partition(const uint8_t trace_id[16], unsigned n);

/* The partition of every span (traces) or sample (profiles) of `b`, in batch
 * order, into `dest` (may be NULL to count); returns how many items. */
size_t pl_nats_partitions(const pl_batch *b, unsigned n, int *dest);

#endif
