/*
 * lb_ring.c: consistent hashing with virtual nodes (see lb_ring.h).
 */
#include "exporters/lb_ring.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t pl_lb_hash(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    /* FNV alone places similar strings ("host#1", "host#2") close together;
     * the finalizer spreads them over the circle. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

typedef struct point {
    uint64_t hash;
    uint32_t owner;
} point;

static int cmp_point(const void *a, const void *b)
{
    const point *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    /* equal hashes (astronomically rare): a fixed order keeps every process's
     * ring the same */
    return x->owner < y->owner ? -1 : x->owner > y->owner;
}

void pl_lb_ring_free(pl_lb_ring *ring)
{
    free(ring->points);
    free(ring->owners);
    memset(ring, 0, sizeof(*ring));
}

int pl_lb_ring_build(pl_lb_ring *ring, const char *const *members, size_t n, unsigned vnodes)
{
    pl_lb_ring_free(ring);
    if (n == 0)
        return 0;
    if (vnodes == 0)
        vnodes = PL_LB_DEFAULT_VNODES;
    size_t total = n * vnodes;
    point *pts = malloc(total * sizeof(*pts));
    ring->points = malloc(total * sizeof(*ring->points));
    ring->owners = malloc(total * sizeof(*ring->owners));
    if (!pts || !ring->points || !ring->owners) {
        free(pts);
        pl_lb_ring_free(ring);
        return -1;
    }
    size_t k = 0;
    for (size_t m = 0; m < n; m++) {
        char buf[320];
        for (unsigned i = 0; i < vnodes; i++) {
            int len = snprintf(buf, sizeof(buf), "%s#%u", members[m], i);
            if (len < 0 || (size_t)len >= sizeof(buf))
                len = (int)sizeof(buf) - 1;
            pts[k].hash = pl_lb_hash(buf, (size_t)len);
            pts[k].owner = (uint32_t)m;
            k++;
        }
    }
    qsort(pts, total, sizeof(*pts), cmp_point);
    for (size_t i = 0; i < total; i++) {
        ring->points[i] = pts[i].hash;
        ring->owners[i] = pts[i].owner;
    }
    free(pts);
    ring->n_points = total;
    ring->n_members = n;
    return 0;
}

/* Index of the first point >= hash (wrapping to 0). */
static size_t find(const pl_lb_ring *ring, uint64_t hash)
{
    size_t lo = 0, hi = ring->n_points;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ring->points[mid] < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == ring->n_points ? 0 : lo;
}

int pl_lb_ring_owner(const pl_lb_ring *ring, uint64_t hash)
{
    if (!ring->n_points)
        return -1;
    return (int)ring->owners[find(ring, hash)];
}

int pl_lb_ring_pick(const pl_lb_ring *ring, uint64_t hash, bool (*usable)(void *arg, int member),
                    void *arg)
{
    if (!ring->n_points)
        return -1;
    size_t at = find(ring, hash);
    int owner = (int)ring->owners[at];
    if (!usable || usable(arg, owner))
        return owner;
    /* Walk on; each member is asked once (a small bitmap: members are few). */
    size_t words = (ring->n_members + 63) / 64;
    uint64_t stack_seen[4] = {0};
    uint64_t *seen = words <= 4 ? stack_seen : calloc(words, sizeof(uint64_t));
    if (!seen)
        return owner;
    seen[owner / 64] |= 1ull << (owner % 64);
    size_t asked = 1;
    int pick = owner;
    for (size_t i = 1; i < ring->n_points && asked < ring->n_members; i++) {
        int m = (int)ring->owners[(at + i) % ring->n_points];
        if (seen[m / 64] & (1ull << (m % 64)))
            continue;
        seen[m / 64] |= 1ull << (m % 64);
        asked++;
        if (usable(arg, m)) {
            pick = m;
            break;
        }
    }
    if (seen != stack_seen)
        free(seen);
    return pick;
}
