/*
 * querier_internal.h: what the files of the Pyroscope querier share.
 * Private to store/; the public interface is querier.h.
 *
 *   querier.c           Connect unary transport, request decoding (protobuf
 *                       and protojson, one field table per request), the
 *                       response writer, the method table, /pyroscope/render
 *   querier_selector.c  Prometheus label selectors
 *   querier_flame.c     merged stacks as a tree, Pyroscope's `levels`
 *                       flame graph encoding with max_nodes
 *   querier_select.c    the SQL behind each method
 */
#ifndef PL_STORE_QUERIER_INTERNAL_H
#define PL_STORE_QUERIER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/intern.h"
#include "core/status.h"
#include "core/pattern.h"
#include "store/querier.h"

/* ---- label selectors (querier_selector.c) ------------------------------- */

/* Bounds on what a client may send. */
#define PL_QSEL_MAX_LEN      16384
#define PL_QSEL_MAX_MATCHERS 64

typedef enum pl_qop {
    PL_QOP_EQ = 0, /* =  */
    PL_QOP_NE,     /* != */
    PL_QOP_RE,     /* =~ (fully anchored) */
    PL_QOP_NRE,    /* !~ */
} pl_qop;

typedef struct pl_qmatcher {
    char *name;
    char *value;
    pl_qop op;
    pl_pattern re; /* PL_QOP_RE / PL_QOP_NRE: ^(?:value)$ */
} pl_qmatcher;

typedef struct pl_qselector {
    pl_qmatcher *items;
    size_t n;
} pl_qselector;

/* Parses `{name="v", name!="v", name=~"re", name!~"re"}` (also `{}` and
 * the empty string; names may be quoted: `{"http.route"="/a"}`). Values are
 * Go-style quoted strings ("..", '..' or `..`). PL_ERR_INVALID with a
 * message that says what and where. */
pl_status pl_qselector_parse(const char *text, size_t len, pl_qselector *out, pl_err *err);
void pl_qselector_free(pl_qselector *sel);
/* True when the label value `v` satisfies the matcher ("" for a missing
 * label, as in Prometheus). */
bool pl_qmatcher_matches(const pl_qmatcher *m, const char *v, size_t len);

/* ---- flame graphs (querier_flame.c) ------------------------------------- */

/* The default and the cap of max_nodes (Pyroscope's limits). */
#define PL_QFLAME_DEFAULT_NODES 8192
#define PL_QFLAME_MAX_NODES     (1 << 20)

typedef struct pl_qtree pl_qtree;

pl_qtree *pl_qtree_new(void);
void pl_qtree_free(pl_qtree *t);
/* The name index of a function name (> 0; 0 is "total"); -1 on OOM. */
int32_t pl_qtree_name(pl_qtree *t, const char *name, size_t len);
/* Adds `value` to the stack of name indices `names` (root first). -1 on OOM
 * or a bad index. */
int pl_qtree_add(pl_qtree *t, const int32_t *names, size_t n, int64_t value);
int64_t pl_qtree_total(const pl_qtree *t);

/* A flame graph in Pyroscope's encoding: levels[d] holds 4 values per node
 * [x_delta, total, self, name index]; names[0] is "total". */
typedef struct pl_qflame {
    const char **names; /* point into the tree: free the tree after this */
    size_t n_names;
    int64_t **levels;
    size_t *level_len; /* values per level (4 per node) */
    size_t n_levels;
    int64_t total, max_self;
} pl_qflame;

/* Builds the flame graph, keeping the max_nodes largest nodes (0: the
 * default; capped): children below the threshold become one `other` child
 * of their parent. Children are ordered by name. -1 on OOM. */
int pl_qtree_flamegraph(pl_qtree *t, int64_t max_nodes, pl_qflame *out);
void pl_qflame_free(pl_qflame *f);

/* Stacks of the tree (leaf first frame names) with their self value, for
 * pprof output: calls fn per node with self > 0. */
typedef void (*pl_qtree_stack_fn)(void *arg, const char *const *frames_leaf_first, size_t n,
                                  int64_t self);
int pl_qtree_stacks(const pl_qtree *t, pl_qtree_stack_fn fn, void *arg);

/* ---- requests and the SQL behind them (querier_select.c) ---------------- */

#define PL_QREQ_MAX_LIST 256 /* entries of one repeated field */
/* stack_trace_selector.call_site: frames (a stack may be deep) and the
 * length of one function name */
#define PL_QCALL_SITE_MAX      1024
#define PL_QCALL_SITE_NAME_MAX 8192

typedef struct pl_qlist {
    const char **items;
    size_t n;
} pl_qlist;

/* Every field any querier request has, decoded through its method's table. */
typedef struct pl_qrequest {
    const char *profile_type;   /* profile_typeID */
    const char *label_selector; /* label_selector */
    const char *name;           /* LabelValues */
    int64_t start_ms, end_ms;
    bool has_max_nodes;
    int64_t max_nodes;
    int64_t format;
    pl_qlist matchers, label_names, span_selector, profile_id_selector, trace_id_selector, group_by;
    double step; /* seconds */
    bool has_limit;
    int64_t limit;
    bool include_descendants; /* proflink: span profiles with the spans below */
    /* stack_trace_selector: call_site (function names, root first: only the
     * stacks that start with them; none: every stack), go_pgo */
    pl_qlist call_site;
    int64_t keep_locations; /* go_pgo: the leaf-most frames to keep (0: all) */
    bool aggregate_callees; /* go_pgo: about line numbers, which the store has not */
} pl_qrequest;

/* A method's result, written to protobuf or protojson by querier.c. */
typedef struct pl_qlabel {
    const char *name, *value;
} pl_qlabel;

typedef struct pl_qseries {
    pl_qlabel *labels;
    size_t n_labels;
    int64_t *ts_ms;
    double *values;
    size_t n_points;
    double sum;
} pl_qseries;

typedef struct pl_qtype {
    int64_t type_id;
    const char *id; /* name:type:unit:period_type:period_unit */
    const char *name, *sample_type, *sample_unit, *period_type, *period_unit;
} pl_qtype;

/* A query on the store: the connection and per-request scratch. */
typedef struct pl_qctx {
    pl_store *store;
    pl_arena arena;
    pl_err *err;
    pl_qtype *types;
    size_t n_types;
    struct pl_qservice {
        int64_t id;
        const char *name;
        pl_qlabel *labels; /* the SDK labels of its samples, sorted by name */
        size_t n_labels;
    } * services; /* the request's tenant's, by name */
    size_t n_services;
    bool every_service;      /* services holds every service of the store */
    const char **sdk_labels; /* the SDK label names of those services, sorted */
    size_t n_sdk_labels;
    struct pl_qsvc_at {
        int64_t id;
        size_t at;
    } * by_id; /* services' ids, sorted, with their index */
} pl_qctx;

/* Loads the catalog (profile types, and the services of `tenant`: those
 * without a tenant when NULL). */
pl_status pl_qctx_init(pl_qctx *q, pl_store *store, const char *tenant, pl_err *err);
void pl_qctx_free(pl_qctx *q);

/* Each returns PL_OK or an error status with err set (PL_ERR_INVALID for a
 * request the client must change). Results live in q->arena. */
pl_status pl_q_profile_types(pl_qctx *q, const pl_qrequest *r, const pl_qtype ***out, size_t *n);
pl_status pl_q_label_names(pl_qctx *q, const pl_qrequest *r, const char ***out, size_t *n);
pl_status pl_q_label_values(pl_qctx *q, const pl_qrequest *r, const char ***out, size_t *n);
/* Series: label sets (as pl_qseries without points). */
pl_status pl_q_series(pl_qctx *q, const pl_qrequest *r, pl_qseries **out, size_t *n);
/* Merged stacks into `tree` (by label selector, or by span selector when
 * span_selector is set); *type gets the profile type. */
pl_status pl_q_merge(pl_qctx *q, const pl_qrequest *r, bool spans, pl_qtree *tree,
                     const pl_qtype **type);
pl_status pl_q_select_series(pl_qctx *q, const pl_qrequest *r, pl_qseries **out, size_t *n);
pl_status pl_q_profile_stats(pl_qctx *q, bool *ingested, int64_t *oldest_ms, int64_t *newest_ms);

#endif
