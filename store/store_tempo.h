/*
 * store_tempo.h: the store's reads behind the Tempo data source
 * (store_tempo.c), answered directly as Tempo's JSON.
 */
#ifndef PL_STORE_TEMPO_H
#define PL_STORE_TEMPO_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"
#include "store/sqlite_store.h"
#include "store/traceql.h"

/* Tags and tag values come from this many most recent spans. */
#define PL_TEMPO_TAG_SPANS "10000"

typedef struct pl_tempo_search {
    uint64_t start_ns, end_ns; /* traces starting in [start, end]; end 0 = open */
    uint32_t limit;            /* traces */
    uint32_t spss;             /* spans per span set */
    const char *tenant;        /* NULL: any */
    bool scan_only;            /* without the term index (tests compare) */
} pl_tempo_search;

/* Traces (newest first) with a span that meets `q`, as tempopb.SearchResponse
 * JSON. PL_ERR_INVALID for a bad regular expression. */
pl_status pl_store_tempo_search(pl_store *s, const pl_tql *q, const pl_tempo_search *opt,
                                pl_buf *out, pl_err *err);
/* {"scopes":[resource, span, intrinsic]} */
pl_status pl_store_tempo_tags(pl_store *s, const char *tenant, uint32_t limit, pl_buf *out,
                              pl_err *err);
/* {"tagValues":[{"type","value"}]} of one tag ("resource.service.name",
 * "span.http.method", ".x", "name", "status", ...); PL_ERR_INVALID for an
 * unknown one. v1: {"tagValues":["value",...]} (Tempo's v1 answer). */
pl_status pl_store_tempo_tag_values(pl_store *s, const char *tag, const char *tenant,
                                    uint32_t limit, bool v1, pl_buf *out, pl_err *err);
/* Tempo v1: {"tagNames":[...]}, resource and span attribute names. */
pl_status pl_store_tempo_tag_names(pl_store *s, const char *tenant, uint32_t limit, pl_buf *out,
                                   pl_err *err);

#endif
