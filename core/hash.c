/* core/hash: see hash.h. */
#include "core/hash.h"

#include "core/arena.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

uint64_t pl_hash_k0_, pl_hash_k1_;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void key_init(void)
{
    if (pl_hash_k0_ || pl_hash_k1_)
        return; /* set by pl_hash_key_set */
    uint64_t k[2] = {0, 0};
    if (getrandom(k, sizeof(k), 0) != (ssize_t)sizeof(k)) {
        /* No entropy source: fall back to time and pid, still per process. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        k[0] = pl_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20));
        k[1] = pl_mix64((uint64_t)getpid() ^ (uintptr_t)&ts);
    }
    if (!k[0] && !k[1])
        k[0] = 1;
    pl_hash_k1_ = k[1];
    __atomic_store_n(&pl_hash_k0_, k[0], __ATOMIC_RELEASE);
}

void pl_hash_init_(void)
{
    pthread_once(&key_once, key_init);
}

const pl_hash_key *pl_hash_key_get(void)
{
    static pl_hash_key key;
    pl_hash_init_();
    key.k0 = pl_hash_k0_;
    key.k1 = pl_hash_k1_;
    return &key;
}

void pl_hash_key_set(uint64_t k0, uint64_t k1)
{
    pl_hash_k0_ = k0;
    pl_hash_k1_ = k1 | (k0 ? 0 : 1);
}

/* ---- SipHash-1-3 (Aumasson and Bernstein), keyed by the process key ---- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static uint64_t siphash13(uint64_t k0, uint64_t k1, const uint8_t *p, size_t len)
{
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    uint64_t b = (uint64_t)len << 56;
    while (len >= 8) {
        uint64_t m;
        memcpy(&m, p, 8);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
        p += 8;
        len -= 8;
    }
    uint64_t t = 0;
    if (len)
        memcpy(&t, p, len); /* little-endian hosts: the tail in its low bytes */
    b |= t;
    v3 ^= b;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t pl_hash_bytes(const void *data, size_t len)
{
    if (__builtin_expect(pl_hash_k0_ == 0 && pl_hash_k1_ == 0, 0))
        pl_hash_init_();
    return siphash13(pl_hash_k0_, pl_hash_k1_, data, len);
}

uint64_t pl_hash_bytes_with(uint64_t prev, const void *data, size_t len)
{
    if (__builtin_expect(pl_hash_k0_ == 0 && pl_hash_k1_ == 0, 0))
        pl_hash_init_();
    return siphash13(pl_hash_k0_ ^ prev, pl_hash_k1_ + prev, data, len);
}

/* ---- pl_htab ----------------------------------------------------------- */

void pl_htab_free(pl_htab *h)
{
    struct pl_arena *arena = h->arena;
    if (!arena) {
        free(h->vals);
        free(h->hashes);
    }
    memset(h, 0, sizeof(*h));
    h->arena = arena;
}

void pl_htab_clear(pl_htab *h)
{
    if (h->cap)
        memset(h->vals, 0, h->cap * sizeof(uint32_t));
    h->n = 0;
}

static int htab_resize(pl_htab *h, uint32_t cap)
{
    uint32_t *vals, *hashes;
    if (h->arena) {
        vals = pl_arena_calloc(h->arena, cap, sizeof(uint32_t));
        hashes = pl_arena_alloc(h->arena, cap * sizeof(uint32_t));
        if (!vals || !hashes)
            return -1;
    } else {
        vals = calloc(cap, sizeof(uint32_t));
        hashes = malloc(cap * sizeof(uint32_t));
        if (!vals || !hashes) {
            free(vals);
            free(hashes);
            return -1;
        }
    }
    for (uint32_t i = 0; i < h->cap; i++) {
        if (!h->vals[i])
            continue;
        uint32_t j = h->hashes[i] & (cap - 1);
        while (vals[j])
            j = (j + 1) & (cap - 1);
        vals[j] = h->vals[i];
        hashes[j] = h->hashes[i];
    }
    if (!h->arena) {
        free(h->vals);
        free(h->hashes);
    }
    h->vals = vals;
    h->hashes = hashes;
    h->cap = cap;
    return 0;
}

int pl_htab_reserve(pl_htab *h, uint32_t extra)
{
    uint64_t need = ((uint64_t)h->n + extra) * 2;
    if (need <= h->cap)
        return 0;
    if (need > (1u << 31))
        return -1;
    uint32_t cap = h->cap ? h->cap : 16;
    while (cap < need)
        cap *= 2;
    return htab_resize(h, cap);
}

uint32_t pl_htab_get(const pl_htab *h, uint32_t hash, pl_htab_eq eq, const void *ctx)
{
    if (!h->cap)
        return 0;
    uint32_t j = hash & (h->cap - 1);
    while (h->vals[j]) {
        if (h->hashes[j] == hash && eq(ctx, h->vals[j]))
            return h->vals[j];
        j = (j + 1) & (h->cap - 1);
    }
    return 0;
}

uint32_t *pl_htab_slot(pl_htab *h, uint32_t hash, pl_htab_eq eq, const void *ctx)
{
    if (pl_htab_reserve(h, 1))
        return NULL;
    uint32_t j = hash & (h->cap - 1);
    while (h->vals[j]) {
        if (h->hashes[j] == hash && eq(ctx, h->vals[j]))
            break;
        j = (j + 1) & (h->cap - 1);
    }
    return &h->vals[j];
}

void pl_htab_added(pl_htab *h, uint32_t *slot, uint32_t hash)
{
    h->hashes[slot - h->vals] = hash;
    h->n++;
}

/* ---- pl_bloom ---------------------------------------------------------- */

#define BLOOM_BITS_PER_KEY 12
#define BLOOM_PROBES       5

int pl_bloom_init(pl_bloom *b, uint64_t expected)
{
    memset(b, 0, sizeof(*b));
    uint64_t want = expected < 4096 ? 4096 : expected;
    uint64_t bytes = 64;
    while (bytes < PL_BLOOM_MAX_BYTES && bytes * 8 < want * BLOOM_BITS_PER_KEY)
        bytes *= 2;
    b->blocks = calloc(bytes / 8, sizeof(uint64_t));
    if (!b->blocks)
        return -1;
    b->n_blocks = bytes / 64;
    return 0;
}

void pl_bloom_free(pl_bloom *b)
{
    free(b->blocks);
    memset(b, 0, sizeof(*b));
}

/* The block from the top 19 bits (PL_BLOOM_MAX_BYTES / 64 blocks at
 * most), the probes from the low 45 bits: 9 bits, one of the block's 512,
 * per probe. */
void pl_bloom_add(pl_bloom *b, uint64_t hash)
{
    if (!b->n_blocks)
        return;
    uint64_t *blk = b->blocks + 8 * ((hash >> 45) & (b->n_blocks - 1));
    for (int i = 0; i < BLOOM_PROBES; i++) {
        unsigned bit = (unsigned)(hash >> (9 * i)) & 511u;
        blk[bit >> 6] |= 1ull << (bit & 63);
    }
    b->added++;
}

bool pl_bloom_maybe(const pl_bloom *b, uint64_t hash)
{
    if (!b->n_blocks)
        return true;
    const uint64_t *blk = b->blocks + 8 * ((hash >> 45) & (b->n_blocks - 1));
    for (int i = 0; i < BLOOM_PROBES; i++) {
        unsigned bit = (unsigned)(hash >> (9 * i)) & 511u;
        if (!(blk[bit >> 6] >> (bit & 63) & 1))
            return false;
    }
    return true;
}
