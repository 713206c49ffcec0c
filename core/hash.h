/* core/hash: keyed hashing and one open-addressing table for the whole tree.
 *
 * Every table keyed by data a client chooses (ids, names, stacks) hashes with
 * a per-process random seed, drawn once from getrandom(2) at the first use,
 * so a client cannot precompute keys that collide. Bytes go through
 * SipHash-1-3 (a keyed PRF, 128-bit key); 64-bit integers through a keyed
 * finalizer that is cheaper and good enough once the seed is secret (the
 * hot path of the correlation index hashes 8-byte span ids).
 *
 * pl_htab is an open-addressing set of uint32 values (positions in a
 * caller's own array, never 0) with the 32-bit hash kept beside each value,
 * so growing never needs the keys. Equality is the caller's: it owns the
 * entries, the table only finds them. The arrays come from malloc, or from
 * an arena for a table that lives and dies with one batch.
 */
#ifndef PL_CORE_HASH_H
#define PL_CORE_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The process's hashing key (initialised on first use; thread-safe). */
typedef struct pl_hash_key {
    uint64_t k0, k1;
} pl_hash_key;
const pl_hash_key *pl_hash_key_get(void);

/* Tests and benchmarks: a fixed key, for reproducible layouts. Call before
 * any table is built. */
void pl_hash_key_set(uint64_t k0, uint64_t k1);

/* Unkeyed 64-bit avalanche (splitmix64's finalizer). Only for values no
 * client chooses (pointers, internal counters). */
static inline uint64_t pl_mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

extern uint64_t pl_hash_k0_, pl_hash_k1_;
void pl_hash_init_(void);

/* Keyed hash of a 64-bit integer chosen by a client. */
static inline uint64_t pl_hash_u64(uint64_t x)
{
    if (__builtin_expect(pl_hash_k0_ == 0 && pl_hash_k1_ == 0, 0))
        pl_hash_init_();
    return pl_mix64((x ^ pl_hash_k0_) * 0x9e3779b97f4a7c15ULL + pl_hash_k1_);
}

/* Keyed hash of bytes (SipHash-1-3 under the process key). */
uint64_t pl_hash_bytes(const void *data, size_t len);

/* Same, continuing from a previous hash (for composite keys). */
uint64_t pl_hash_bytes_with(uint64_t prev, const void *data, size_t len);

/* ---- pl_htab ----------------------------------------------------------- */

struct pl_arena;

typedef struct pl_htab {
    uint32_t *vals;   /* 0 = empty */
    uint32_t *hashes; /* low 32 bits of the hash of vals[i] */
    uint32_t cap;     /* power of two, or 0 */
    uint32_t n;
    /* Set before the first insert to take the arrays from an arena (outgrown
     * ones are left to it; freed with it); NULL: malloc. */
    struct pl_arena *arena;
} pl_htab;

typedef bool (*pl_htab_eq)(const void *ctx, uint32_t val);

void pl_htab_free(pl_htab *h);
void pl_htab_clear(pl_htab *h);

/* Makes room for `extra` more values; -1 on OOM or overflow. */
int pl_htab_reserve(pl_htab *h, uint32_t extra);

/* Finds the value whose hash is `hash` and for which eq(ctx, val) holds.
 * Returns it, or 0 when absent. */
uint32_t pl_htab_get(const pl_htab *h, uint32_t hash, pl_htab_eq eq, const void *ctx);

/* Finds the value or the empty slot where it would go (growing first when
 * needed). Returns the slot, NULL on OOM. When *slot is 0 the caller may
 * store a value there and must then call pl_htab_added(h, slot, hash). */
uint32_t *pl_htab_slot(pl_htab *h, uint32_t hash, pl_htab_eq eq, const void *ctx);
void pl_htab_added(pl_htab *h, uint32_t *slot, uint32_t hash);

/* ---- pl_bloom ---------------------------------------------------------- */

/* A set that answers "certainly absent" or "perhaps present", from keyed
 * hashes (pl_hash_u64, pl_hash_bytes): a blocked Bloom filter, every
 * key's bits in one 64-byte block (one cache line per look-up), about 12
 * bits per key it was sized for (under 1 % false "perhaps" at that many
 * keys, rising past it). Sized from `expected` keys, at most
 * PL_BLOOM_MAX_BYTES: beyond that it answers "perhaps" more often, never
 * wrongly "absent". No removal: rebuild it. */
#define PL_BLOOM_MAX_BYTES (32u << 20)

typedef struct pl_bloom {
    uint64_t *blocks;  /* 8 words per block */
    uint64_t n_blocks; /* a power of two, or 0 */
    uint64_t added;
} pl_bloom;

/* 0, or -1 on OOM (the filter is then empty and answers "perhaps"). */
int pl_bloom_init(pl_bloom *b, uint64_t expected);
void pl_bloom_free(pl_bloom *b);
void pl_bloom_add(pl_bloom *b, uint64_t hash);
/* false: never added. An unallocated filter says true. */
bool pl_bloom_maybe(const pl_bloom *b, uint64_t hash);

#endif
