/*
 * store_links.c: how many stored spans have profiles, per service (the
 * "link ratio" the web view shows). Bounded: the spans of the most recent
 * traces, read through traces_by_start and the traces' span ranges.
 */
#include "store/store_internal.h"

/* the spans of the traces whose id meets C, as sp (PL_TRACE_SPANS) */
#define TRACE_SPANS(C) PL_TRACE_SPANS("sp", C)
/* the span sp has sample rows (PL_SPAN_SAMPLES) */
#define SPAN_HAS_SAMPLES "EXISTS (SELECT 1 FROM " PL_SPAN_SAMPLES("(sp.span_id)") ")"

pl_status pl_store_query_links(pl_store *s, uint64_t since_ns, const char *tenant,
                               pl_link_stats *out, pl_err *err)
{
    memset(out, 0, sizeof(*out));
    pl_arena_init(&out->arena);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "WITH t AS (SELECT trace_id FROM traces WHERE start_ns >= ?1 AND (?3 IS NULL OR tenant = "
        "?3) "
        "ORDER BY start_ns DESC "
        "LIMIT ?2) "
        "SELECT sp.service, count(*), sum(coalesce(sp.profile_id, '') != '' OR " SPAN_HAS_SAMPLES
        "), (SELECT count(*) FROM t) "
        "FROM " TRACE_SPANS(
            "IN (SELECT trace_id FROM t)") " "
                                           "GROUP BY sp.service ORDER BY sp.service",
        -1, &st, NULL);
    size_t cap = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (int64_t)since_ns);
        sqlite3_bind_int64(st, 2, PL_STORE_LINK_TRACES);
        if (tenant)
            sqlite3_bind_text(st, 3, tenant, -1, SQLITE_STATIC);
    }
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            pl_link_stat *grown = pl_arena_calloc(&out->arena, ncap, sizeof(pl_link_stat));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            if (out->n)
                memcpy(grown, out->items, out->n * sizeof(pl_link_stat));
            out->items = grown;
            cap = ncap;
        }
        pl_link_stat *l = &out->items[out->n++];
        const unsigned char *name = sqlite3_column_text(st, 0);
        l->service = pl_arena_memdup(&out->arena, name ? (const char *)name : "",
                                     (size_t)sqlite3_column_bytes(st, 0));
        if (!l->service)
            l->service = "";
        l->spans = (uint64_t)sqlite3_column_int64(st, 1);
        l->linked = (uint64_t)sqlite3_column_int64(st, 2);
        out->traces = (uint64_t)sqlite3_column_int64(st, 3);
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        pl_link_stats_free(out);
        return pl_store_query_fail(s, rc, err);
    }
    return PL_OK;
}

void pl_link_stats_free(pl_link_stats *stats)
{
    pl_arena_free(&stats->arena);
    stats->items = NULL;
    stats->n = 0;
}
