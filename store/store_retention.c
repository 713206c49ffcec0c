/*
 * store_retention.c: deleting old data by age and by size, and collecting
 * stacks no sample uses any more. Runs on the exporter's writer thread.
 */
#include "store/store_internal.h"

#include "store/store_terms.h"

uint64_t pl_store_size(pl_store *s)
{
    int64_t pages = 0, free_pages = 0, page_size = 0;
    if (pl_store_exec_int(s->db, "PRAGMA page_count", &pages) != SQLITE_OK ||
        pl_store_exec_int(s->db, "PRAGMA freelist_count", &free_pages) != SQLITE_OK ||
        pl_store_exec_int(s->db, "PRAGMA page_size", &page_size) != SQLITE_OK)
        return 0;
    return (uint64_t)(pages - free_pages) * (uint64_t)page_size;
}

static int exec_bind1(sqlite3 *db, const char *sql, int64_t a, int64_t b, bool two,
                      uint64_t *changes)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, a);
    if (two)
        sqlite3_bind_int64(st, 2, b);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        if (changes)
            *changes += (uint64_t)sqlite3_changes(db);
        return SQLITE_OK;
    }
    return rc;
}

/* One rowid range of a trace's spans (trace_spans). */
typedef struct span_range {
    int64_t first, last;
    uint8_t trace_id[16];
    int trace_id_len;
} span_range;

static int cmp_range(const void *a, const void *b)
{
    const span_range *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* Deletes the spans of the traces that started before `cutoff`: their
 * ranges (one per trace and transaction, far fewer than spans) are
 * collected and deleted in rowid order, so the table is walked once from
 * its old end and no set of every span's rowid is built in memory. The
 * deleted spans' id entries are left to the sweep (sweep_span_ids), which
 * takes the entries below the highest rowid deleted (ids_dead_hi). */
static int delete_spans_before(pl_store *s, uint64_t cutoff, uint64_t *deleted)
{
    sqlite3_stmt *sel = NULL, *del = NULL;
    span_range *v = NULL;
    size_t n = 0, cap = 0;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT r.first, r.last, r.trace_id FROM traces t CROSS JOIN "
                                "trace_spans r ON r.trace_id = t.trace_id WHERE t.start_ns < ?1 "
                                "UNION ALL SELECT r.first, r.last, r.trace_id FROM traces t "
                                "CROSS JOIN trace_spans_new r ON r.trace_id = t.trace_id WHERE "
                                "t.start_ns < ?1",
                                -1, &sel, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "DELETE FROM spans WHERE rowid BETWEEN ?1 AND ?2 AND trace_id = ?3",
                                -1, &del, NULL);
    if (rc == SQLITE_OK)
        sqlite3_bind_int64(sel, 1, (int64_t)cutoff);
    while (rc == SQLITE_OK) {
        int step = sqlite3_step(sel);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = step;
            break;
        }
        if (pl_array_reserve((void **)&v, n, &cap, sizeof(*v), 256)) {
            rc = SQLITE_NOMEM;
            break;
        }
        span_range *r = &v[n++];
        r->first = sqlite3_column_int64(sel, 0);
        r->last = sqlite3_column_int64(sel, 1);
        int len = sqlite3_column_bytes(sel, 2);
        r->trace_id_len = len < 16 ? len : 16;
        if (r->trace_id_len)
            memcpy(r->trace_id, sqlite3_column_blob(sel, 2), (size_t)r->trace_id_len);
    }
    sqlite3_finalize(sel);
    if (n > 1)
        qsort(v, n, sizeof(*v), cmp_range);
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        sqlite3_bind_int64(del, 1, v[i].first);
        sqlite3_bind_int64(del, 2, v[i].last);
        sqlite3_bind_blob(del, 3, v[i].trace_id, v[i].trace_id_len, SQLITE_STATIC);
        rc = sqlite3_step(del);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
        if (rc == SQLITE_OK) {
            int changes = sqlite3_changes(s->db);
            *deleted += (uint64_t)changes;
            s->ids_stale += changes;
            if (changes && v[i].last >= s->ids_dead_hi)
                s->ids_dead_hi = v[i].last + 1;
        }
        sqlite3_reset(del);
    }
    sqlite3_finalize(del);
    free(v);
    return rc;
}

/* Deletes the id entries the deleted spans left (store_internal.h,
 * PL_SPAN_ROW) once they are a fifth of all: one pass over each id table,
 * taking every entry below the highest rowid retention deleted (or the
 * lowest stored, if higher), then entering again the spans still stored
 * below that rowid: those a cutoff left between deleted ones (spans are
 * written in trace-id order within a transaction, so a cutoff by trace
 * start splits the last transaction it reaches) or a trace kept below
 * newer ones. An entry of a span of the same id stored above stays.
 *
 * The writer's filter of stored ids keeps the swept ids: they only make
 * look-ups it cannot answer a little more frequent until it is rebuilt
 * (when it fills up). */
static int sweep_span_ids(pl_store *s)
{
    if (!s->ids_stale || s->ids_stale * 5 < s->ids_old + s->ids_new)
        return SQLITE_OK;
    int64_t lo = 0;
    int rc = pl_store_exec_int(s->db, "SELECT coalesce(min(rowid), 9223372036854775807) FROM spans",
                               &lo);
    int64_t hi = s->ids_dead_hi > lo ? s->ids_dead_hi : lo;
    static const char *const tables[2] = {"span_ids", "span_ids_new"};
    for (int t = 0; t < 2 && rc == SQLITE_OK; t++) {
        char *sql = sqlite3_mprintf("DELETE FROM %s WHERE rid < ?1", tables[t]);
        uint64_t changes = 0;
        rc = sql ? exec_bind1(s->db, sql, hi, 0, false, &changes) : SQLITE_NOMEM;
        sqlite3_free(sql);
        int64_t *count = t == 0 ? &s->ids_old : &s->ids_new;
        *count = *count > (int64_t)changes ? *count - (int64_t)changes : 0;
    }
    uint64_t kept = 0;
    if (rc == SQLITE_OK && hi > lo)
        rc = exec_bind1(s->db,
                        "INSERT OR IGNORE INTO span_ids_new(span_id, rid) SELECT span_id, rowid "
                        "FROM spans WHERE rowid >= ?1 AND rowid < ?2 AND NOT EXISTS (SELECT 1 "
                        "FROM span_ids o WHERE o.span_id = spans.span_id) ORDER BY span_id",
                        lo, hi, true, &kept);
    if (rc == SQLITE_OK) {
        s->ids_new += (int64_t)kept;
        s->ids_stale = 0;
        s->ids_dead_hi = 0;
    }
    return rc;
}

/* Per service, the lowest ("min") or highest ("max") sample bucket as b: a
 * look-up at each end of the service's part of the samples primary key. */
#define BUCKETS_BY_SERVICE(F)                                                                      \
    "(SELECT (SELECT " F "(bucket) FROM samples WHERE service_id = v.id) AS b FROM services v)"

/* Deletes the sample keys (PL_SPAN_SAMPLES) below the lowest bucket any
 * sample row is in once the rows deleted since the last sweep are a fifth
 * of the keys (they overcount the keys they left: rows of no span, several
 * stacks per key): one pass over each key table. */
static int sweep_sample_spans(pl_store *s)
{
    if (!s->skeys_stale || s->skeys_stale * 5 < s->skeys_old + s->skeys_new)
        return SQLITE_OK;
    int64_t lo = 0;
    int rc = pl_store_exec_int(
        s->db, "SELECT coalesce(min(b), 9223372036854775807) FROM " BUCKETS_BY_SERVICE("min"), &lo);
    static const char *const tables[2] = {"sample_spans", "sample_spans_new"};
    for (int t = 0; t < 2 && rc == SQLITE_OK; t++) {
        char *sql = sqlite3_mprintf("DELETE FROM %s WHERE bucket < ?1", tables[t]);
        uint64_t changes = 0;
        rc = sql ? exec_bind1(s->db, sql, lo, 0, false, &changes) : SQLITE_NOMEM;
        sqlite3_free(sql);
        int64_t *count = t == 0 ? &s->skeys_old : &s->skeys_new;
        *count = *count > (int64_t)changes ? *count - (int64_t)changes : 0;
    }
    if (rc == SQLITE_OK)
        s->skeys_stale = 0;
    return rc;
}

/* Deletes traces/spans that started before `cutoff` and sample buckets
 * before it, in the current transaction. */
static int delete_before(pl_store *s, uint64_t cutoff, pl_store_retention_stats *stats)
{
    int rc = delete_spans_before(s, cutoff, &stats->spans_deleted);
    if (rc == SQLITE_OK)
        rc = sweep_span_ids(s);
    static const char *const ranges[2] = {"trace_spans", "trace_spans_new"};
    for (int t = 0; t < 2 && rc == SQLITE_OK; t++) {
        char *sql = sqlite3_mprintf("DELETE FROM %s WHERE trace_id IN "
                                    "(SELECT trace_id FROM traces WHERE start_ns < ?1)",
                                    ranges[t]);
        rc = sql ? exec_bind1(s->db, sql, (int64_t)cutoff, 0, false, NULL) : SQLITE_NOMEM;
        sqlite3_free(sql);
    }
    if (rc == SQLITE_OK)
        rc = exec_bind1(s->db, "DELETE FROM traces WHERE start_ns < ?1", (int64_t)cutoff, 0, false,
                        &stats->traces_deleted);
    if (rc == SQLITE_OK)
        rc = pl_store_terms_delete_before(s, cutoff);
    /* the rowid ranges of buckets that end before the cutoff: their spans
     * started before it, so their traces did (negative buckets, start times
     * past 2^63, stay as in the term index) */
    if (rc == SQLITE_OK)
        rc = exec_bind1(s->db, "DELETE FROM span_buckets WHERE bucket >= 0 AND bucket < ?1",
                        pl_terms_bucket(cutoff > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)cutoff),
                        0, false, NULL);
    sqlite3_stmt *svc = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "SELECT id FROM services", -1, &svc, NULL);
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    while (rc == SQLITE_OK) {
        int step = sqlite3_step(svc);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = step;
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *grown = realloc(ids, cap * sizeof(int64_t));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            ids = grown;
        }
        ids[n++] = sqlite3_column_int64(svc, 0);
    }
    sqlite3_finalize(svc);
    /* Per service, so each delete is a range of the samples primary key. */
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++)
        rc = exec_bind1(s->db, "DELETE FROM service_profiles WHERE service_id = ?1 AND minute < ?2",
                        ids[i], (int64_t)(cutoff / ROLLUP_NS), true, NULL);
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++)
        rc = exec_bind1(s->db, "DELETE FROM service_totals WHERE service_id = ?1 AND bucket < ?2",
                        ids[i], (int64_t)(cutoff / PL_STORE_BUCKET_NS), true, NULL);
    uint64_t rows_before = stats->sample_rows_deleted;
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++)
        rc = exec_bind1(s->db, "DELETE FROM samples WHERE service_id = ?1 AND bucket < ?2", ids[i],
                        (int64_t)(cutoff / PL_STORE_BUCKET_NS), true, &stats->sample_rows_deleted);
    free(ids);
    s->skeys_stale += (int64_t)(stats->sample_rows_deleted - rows_before);
    if (rc == SQLITE_OK)
        rc = sweep_sample_spans(s);
    return rc;
}

/* Oldest and newest data times (spans and samples), and the end of the
 * oldest sample bucket (0 without samples); false when empty. */
static bool data_time_range(pl_store *s, uint64_t *oldest, uint64_t *newest,
                            uint64_t *oldest_bucket_end)
{
    *oldest_bucket_end = 0;
    int64_t t_min = 0, t_max = 0, b_min = 0, b_max = 0, n_traces = 0, n_samples = 0;
    pl_store_exec_int(s->db, "SELECT count(*) FROM (SELECT 1 FROM traces LIMIT 1)", &n_traces);
    pl_store_exec_int(s->db, "SELECT count(*) FROM (SELECT 1 FROM samples LIMIT 1)", &n_samples);
    if (!n_traces && !n_samples)
        return false;
    uint64_t lo = UINT64_MAX, hi = 0;
    if (n_traces) {
        pl_store_exec_int(s->db, "SELECT min(start_ns) FROM traces", &t_min);
        pl_store_exec_int(s->db, "SELECT max(start_ns) FROM traces", &t_max);
        lo = (uint64_t)t_min;
        hi = (uint64_t)t_max;
    }
    if (n_samples) {
        pl_store_exec_int(s->db, "SELECT min(b) FROM " BUCKETS_BY_SERVICE("min"), &b_min);
        pl_store_exec_int(s->db, "SELECT max(b) FROM " BUCKETS_BY_SERVICE("max"), &b_max);
        if ((uint64_t)b_min * PL_STORE_BUCKET_NS < lo)
            lo = (uint64_t)b_min * PL_STORE_BUCKET_NS;
        if ((uint64_t)(b_max + 1) * PL_STORE_BUCKET_NS > hi)
            hi = (uint64_t)(b_max + 1) * PL_STORE_BUCKET_NS;
        *oldest_bucket_end = (uint64_t)(b_min + 1) * PL_STORE_BUCKET_NS;
    }
    *oldest = lo;
    *newest = hi;
    return true;
}

/* Stacks no sample row uses any more; ids may be cached, so clear caches. */
static int collect_stacks(pl_store *s)
{
    int rc = sqlite3_exec(s->db,
                          "DELETE FROM stacks WHERE id NOT IN (SELECT stack_id FROM samples UNION "
                          "SELECT stack_id FROM service_profiles)",
                          NULL, NULL, NULL);
    pl_store_u64_map_clear(&s->stacks);
    return rc;
}

pl_status pl_store_enforce_retention(pl_store *s, uint64_t now_ns, uint64_t max_age_ns,
                                     uint64_t max_size, bool one_slice,
                                     pl_store_retention_stats *stats, pl_err *err)
{
    pl_store_retention_stats local = {0};
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof(*stats));
    stats->size_before = pl_store_size(s);
    int rc = SQLITE_OK;
    pl_status failed = PL_OK;
    bool deleted_samples = false;
    bool size_pass = false; /* deleted for size (not only for age) */
    if (max_age_ns && now_ns > max_age_ns) {
        rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc == SQLITE_OK) {
            rc = delete_before(s, now_ns - max_age_ns, stats);
            if (rc == SQLITE_OK && stats->sample_rows_deleted &&
                now_ns - s->last_stack_gc_ns > 3600ull * 1000000000ull) {
                rc = collect_stacks(s);
                s->last_stack_gc_ns = now_ns;
            }
            if (rc == SQLITE_OK)
                rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
            if (rc != SQLITE_OK) {
                failed = pl_store_fail(s, rc, err, "retention failed");
                pl_store_rollback(s);
            }
        } else {
            failed = pl_store_fail(s, rc, err, "retention failed");
        }
        deleted_samples = stats->sample_rows_deleted > 0 || stats->spans_deleted > 0;
    }
    /* Size: drop the oldest slice of the time range until under the limit.
     * The slice grows with the overshoot; a few passes converge. */
    for (int pass = 0; rc == SQLITE_OK && max_size && pass < (one_slice ? 1 : 16); pass++) {
        uint64_t used = pl_store_size(s);
        if (used <= max_size)
            break;
        uint64_t oldest, newest, bucket_end;
        if (!data_time_range(s, &oldest, &newest, &bucket_end))
            break;
        double over = (double)(used - max_size * 9 / 10) / (double)used;
        if (over < 0.05)
            over = 0.05;
        if (one_slice && over > 0.05)
            over = 0.05;
        uint64_t span = newest > oldest ? newest - oldest : 1;
        uint64_t cutoff = oldest + (uint64_t)((double)span * over) + 1;
        /* Sample rows go by whole 10 s buckets: a cutoff inside the oldest
         * one deletes none of them, and with the oldest time still that
         * bucket's start every later slice would end at the same place
         * (a store holding a minute or two grew past its limit). */
        if (cutoff < bucket_end)
            cutoff = bucket_end;
        if (pass >= 12) /* keep converging even when the range is degenerate */
            cutoff = newest + 1;
        rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            failed = pl_store_fail(s, rc, err, "retention failed");
            break;
        }
        rc = delete_before(s, cutoff, stats);
        /* The stack collection reads every sample row: at most hourly, as
         * for age (a store at its size limit runs this pass every few
         * seconds under load). */
        if (rc == SQLITE_OK && now_ns - s->last_stack_gc_ns > 3600ull * 1000000000ull) {
            rc = collect_stacks(s);
            s->last_stack_gc_ns = now_ns;
        }
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
            failed = pl_store_fail(s, rc, err, "retention failed");
            pl_store_rollback(s);
        }
        deleted_samples = true;
        size_pass = true;
    }
    if (rc == SQLITE_OK && deleted_samples) {
        /* Give free pages back (a store made with incremental vacuum; in
         * one made without, new rows reuse them and the pragma does
         * nothing) and keep the WAL small. Best effort: a reader
         * holding an old snapshot only delays the truncation. A store held
         * at its size limit keeps a tenth of the limit as free pages: new
         * rows fill them at once, and moving pages to shrink the file only
         * to grow it again seconds later cost more than the deletes. */
        int64_t free_pages = 0, page_size = 0;
        pl_store_exec_int(s->db, "PRAGMA freelist_count", &free_pages);
        pl_store_exec_int(s->db, "PRAGMA page_size", &page_size);
        int64_t keep = size_pass && page_size > 0 ? (int64_t)(max_size / 10) / page_size : 0;
        if (free_pages > keep) {
            char sql[64];
            snprintf(sql, sizeof(sql), "PRAGMA incremental_vacuum(%" PRId64 ")", free_pages - keep);
            sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        }
        sqlite3_exec(
            s->db, size_pass ? "PRAGMA wal_checkpoint(PASSIVE)" : "PRAGMA wal_checkpoint(TRUNCATE)",
            NULL, NULL, NULL);
    }
    stats->size_after = pl_store_size(s);
    return failed;
}
