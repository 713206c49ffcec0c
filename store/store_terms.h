/*
 * store_terms.h: the search-term index of the embedded store
 * (store_terms.c), table `span_terms`.
 *
 * For every 10-second bucket of span start times the table says which
 * search terms occur in it: one row (term, minute) per term and bucket
 * ("minute" names the bucket number column), where a term is a 64-bit hash
 * of a service, a span name, a (service, name) pair, a status code, a kind,
 * or an attribute key / key=value (span and resource attributes apart). A
 * numeric attribute also keeps its smallest and largest value per bucket
 * (lo, hi). Caps bound the rows: past PL_TERMS_VALUE_CAP distinct values of
 * one key in a bucket, or PL_TERMS_KEY_CAP keys, or PL_TERMS_NAME_CAP names,
 * the bucket gets an overflow row instead, and a search treats that bucket
 * as a candidate for every value. The index may only rule buckets out: a
 * bucket it cannot decide is a candidate.
 *
 * The writer keeps the (term, bucket) pairs it has inserted in memory and
 * inserts only new ones (INSERT OR IGNORE, so a forgotten pair costs a
 * lookup, not a wrong answer); the memory is dropped on rollback and after
 * retention. A store upgraded from schema 6 records the bucket range of the
 * spans written before the index existed (term 0): a search over that range
 * does not use the index.
 */
#ifndef PL_STORE_TERMS_H
#define PL_STORE_TERMS_H

#include "store/store_internal.h"
#include "store/traceql.h"

#define PL_TERMS_BUCKET_NS 10000000000ll
#define PL_TERMS_VALUE_CAP 64
#define PL_TERMS_KEY_CAP   256
#define PL_TERMS_NAME_CAP  2048

/* DDL (in the schema and in the 6 -> 7 upgrade). */
extern const char pl_store_terms_schema_sql[];

/* The 6 -> 7 upgrade (inside the upgrade transaction): creates the table
 * and records the bucket range of the spans already stored. */
int pl_store_terms_upgrade(sqlite3 *db);

/* Writer: the terms of one span (after it is written). `duplicate`: the
 * span was stored before (its attributes may just have been replaced): the
 * terms also go to the bucket of the stored copy's start time. */
int pl_store_terms_span(pl_store *s, const pl_span *sp, pl_bytes service, int64_t resource_id,
                        const pl_attrs *resource_attrs, bool duplicate);
/* Forgets what the writer inserted (rollback, retention); frees it. */
void pl_store_terms_forget(pl_store *s);
/* Retention: deletes the rows of buckets that end before `cutoff_ns`. */
int pl_store_terms_delete_before(pl_store *s, uint64_t cutoff_ns);

/* Search: the buckets (ascending) that may hold a span meeting `q`, among
 * those where spans of traces starting at or after start_ns can be.
 * PL_TERMS_SCAN: the index cannot answer (no index over part of the range)
 * or rules out fewer than half the buckets; *buckets is then NULL. */
enum { PL_TERMS_SCAN = 1, PL_TERMS_CANDIDATES = 2 };
int pl_store_terms_plan(pl_store *s, const pl_tql *q, uint64_t start_ns, int64_t **buckets,
                        size_t *n, int *rc);

/* floor(ns / PL_TERMS_BUCKET_NS) */
static inline int64_t pl_terms_bucket(int64_t ns)
{
    int64_t b = ns / PL_TERMS_BUCKET_NS;
    return (ns % PL_TERMS_BUCKET_NS < 0) ? b - 1 : b;
}

/* pl_terms_bucket in SQL, of an integer column or expression E. */
#define PL_BUCKET_OF(E)                                                                            \
    "(CASE WHEN (" E ") >= 0 THEN (" E ") / 10000000000 ELSE ((" E ") + 1) / 10000000000 - 1 END)"

#endif
