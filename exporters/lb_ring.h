/*
 * lb_ring.h: the consistent-hashing ring of the loadbalancing exporter.
 *
 * Every member (an endpoint such as "10.0.0.7:4317") owns `vnodes` points on
 * a 64-bit circle, at the hashes of "<endpoint>#<i>". A key (a trace id, a
 * service name) belongs to the member owning the first point at or after the
 * key's hash, wrapping around. Adding or removing one member of N therefore
 * moves only the keys between that member's points and their predecessors:
 * about 1/N of them, and only to or from that member.
 *
 * The hash is fixed (FNV-1a, then a 64-bit avalanche finalizer), not keyed
 * with the process's random seed: every proflink of an agent tier must send
 * a trace to the same gateway, so the placement has to agree across
 * processes and restarts. The ring is a sorted array searched by bisection,
 * not a hash table, so chosen keys cannot degrade it.
 */
#ifndef PL_EXPORTERS_LB_RING_H
#define PL_EXPORTERS_LB_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PL_LB_DEFAULT_VNODES 150

typedef struct pl_lb_ring {
    uint64_t *points; /* sorted ascending */
    uint32_t *owners; /* member index of each point */
    size_t n_points;
    size_t n_members;
} pl_lb_ring;

/* Deterministic 64-bit hash of a routing key. */
uint64_t pl_lb_hash(const void *data, size_t len);

/* Builds the ring of `n` members (their endpoints; index i is member i).
 * Replaces what `ring` held. 0, or -1 on OOM (ring then empty). */
int pl_lb_ring_build(pl_lb_ring *ring, const char *const *members, size_t n, unsigned vnodes);
void pl_lb_ring_free(pl_lb_ring *ring);

/* The member owning `hash`; -1 when the ring is empty. */
int pl_lb_ring_owner(const pl_lb_ring *ring, uint64_t hash);

/* The first member, walking the ring clockwise from `hash`, for which
 * `usable(arg, member)` is true; the owner itself when none is (so data still
 * has a place to wait). -1 when the ring is empty. */
int pl_lb_ring_pick(const pl_lb_ring *ring, uint64_t hash, bool (*usable)(void *arg, int member),
                    void *arg);

#endif
