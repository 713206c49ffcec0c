/*
 * querier_select.c: the SQL behind each querier method.
 *
 * A Pyroscope series is a label set; in the store a (service, sample type)
 * pair is one, and a sample's span labels (span_name, span attributes,
 * service_namespace) come from the span it is linked to. So a selector is
 * split in two: matchers on service and profile-type labels are evaluated
 * here, in C, against the catalog (a few services and types) and become
 * `service_id IN (...)` and `type_id IN (...)`, which the samples' primary
 * key (service, bucket, type, span, stack) answers as index ranges;
 * matchers on span labels become SQL conditions on the joined span, with
 * every value a bound parameter (regular expressions go through the
 * `pl_qmatch` function, PCRE2 compiled once per request).
 *
 * Flame graphs of whole services (no span label, no span selector) read the
 * per-minute roll-up `service_profiles` instead of `samples`: the same
 * values, a fraction of the rows; series without span labels read the
 * totals per (service, type, 10 s bucket), `service_totals`, without stacks.
 *
 * A stack_trace_selector call site (function names from the root) is
 * checked in C, each function id and stack id once per request: merged
 * stacks as their rows arrive, series (which then read `samples`) through
 * the SQL function pl_qcallsite in their WHERE clause.
 */
#include "store/querier_internal.h"
#include "store/store_internal.h"

#include <math.h>

/* ---- the catalog -------------------------------------------------------- */

/* Steps st while *rc is SQLITE_OK: true with a row (*rc stays SQLITE_OK),
 * false at the end (*rc = SQLITE_DONE) or on an error (*rc says which). */
static bool next_row(int *rc, sqlite3_stmt *st)
{
    if (*rc != SQLITE_OK)
        return false;
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW)
        return true;
    *rc = r;
    return false;
}

static const char *arena_str(pl_arena *a, const unsigned char *s)
{
    const char *t = s ? (const char *)s : "";
    return pl_arena_memdup(a, t, strlen(t) + 1);
}

static int cmp_svc_at(const void *a, const void *b)
{
    int64_t x = ((const struct pl_qsvc_at *)a)->id, y = ((const struct pl_qsvc_at *)b)->id;
    return x < y ? -1 : x > y;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static struct pl_qservice *service_by_id(const pl_qctx *q, int64_t id)
{
    struct pl_qsvc_at key = {id, 0};
    const struct pl_qsvc_at *at =
        q->n_services ? bsearch(&key, q->by_id, q->n_services, sizeof(key), cmp_svc_at) : NULL;
    return at ? &q->services[at->at] : NULL;
}

/* The services' index by id, their SDK labels and the label names. SQLITE_DONE
 * when done. */
static int catalog_labels(pl_qctx *q, const char *tenant)
{
    q->by_id = calloc(q->n_services + 1, sizeof(*q->by_id));
    if (!q->by_id)
        return SQLITE_NOMEM;
    for (size_t i = 0; i < q->n_services; i++)
        q->by_id[i] = (struct pl_qsvc_at){q->services[i].id, i};
    if (q->n_services > 1)
        qsort(q->by_id, q->n_services, sizeof(*q->by_id), cmp_svc_at);
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(q->store->db,
                                "SELECT sv.id, j.key, j.value, count(*) OVER (PARTITION BY sv.id) "
                                "FROM services sv, json_each(sv.labels) j WHERE sv.tenant IS ?1 "
                                "AND sv.labels IS NOT NULL AND j.type = 'text' ORDER BY sv.id, "
                                "j.key",
                                -1, &st, NULL);
    if (rc == SQLITE_OK && tenant)
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    const char **names = NULL;
    size_t n_names = 0, cap = 0;
    while (next_row(&rc, st)) {
        struct pl_qservice *sv = service_by_id(q, sqlite3_column_int64(st, 0));
        if (!sv)
            continue;
        if (!sv->labels) {
            sv->labels =
                pl_arena_calloc(&q->arena, (size_t)sqlite3_column_int64(st, 3), sizeof(pl_qlabel));
            if (!sv->labels) {
                rc = SQLITE_NOMEM;
                break;
            }
        }
        pl_qlabel *l = &sv->labels[sv->n_labels++];
        l->name = arena_str(&q->arena, sqlite3_column_text(st, 1));
        l->value = arena_str(&q->arena, sqlite3_column_text(st, 2));
        if (!l->name || !l->value ||
            pl_array_reserve((void **)&names, n_names, &cap, sizeof(char *), 16)) {
            rc = SQLITE_NOMEM;
            break;
        }
        names[n_names++] = l->name;
    }
    sqlite3_finalize(st);
    if (n_names > 1) {
        qsort(names, n_names, sizeof(char *), cmp_name);
        size_t w = 1;
        for (size_t i = 1; i < n_names; i++)
            if (strcmp(names[i], names[w - 1]) != 0)
                names[w++] = names[i];
        n_names = w;
    }
    /* names starting with __ stay Pyroscope's own */
    size_t w = 0;
    for (size_t i = 0; i < n_names; i++)
        if (strncmp(names[i], "__", 2) != 0)
            names[w++] = names[i];
    q->sdk_labels = names;
    q->n_sdk_labels = w;
    return rc;
}

pl_status pl_qctx_init(pl_qctx *q, pl_store *store, const char *tenant, pl_err *err)
{
    memset(q, 0, sizeof(*q));
    q->store = store;
    q->err = err;
    pl_arena_init(&q->arena);
    sqlite3 *db = store->db;
    int64_t has_types = 0;
    int rc = pl_store_exec_int(db,
                               "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = "
                               "'profile_types'",
                               &has_types);
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    if (rc == SQLITE_OK && has_types)
        rc = sqlite3_prepare_v2(db,
                                "SELECT pt.type_id, st.value, pt.name, pt.period_type, "
                                "pt.period_unit FROM profile_types pt JOIN strings st ON st.id = "
                                "pt.type_id ORDER BY pt.type_id",
                                -1, &st, NULL);
    while (st && next_row(&rc, st)) {
        if (pl_array_reserve((void **)&q->types, q->n_types, &cap, sizeof(pl_qtype), 16)) {
            rc = SQLITE_NOMEM;
            break;
        }
        pl_qtype *t = &q->types[q->n_types++];
        t->type_id = sqlite3_column_int64(st, 0);
        char *tu = (char *)arena_str(&q->arena, sqlite3_column_text(st, 1));
        t->name = arena_str(&q->arena, sqlite3_column_text(st, 2));
        t->period_type = arena_str(&q->arena, sqlite3_column_text(st, 3));
        t->period_unit = arena_str(&q->arena, sqlite3_column_text(st, 4));
        if (!tu || !t->name || !t->period_type || !t->period_unit) {
            rc = SQLITE_NOMEM;
            break;
        }
        char *colon = strrchr(tu, ':'); /* stored as "type:unit" */
        if (colon)
            *colon = 0;
        t->sample_type = tu;
        t->sample_unit = colon ? colon + 1 : "";
        size_t n = strlen(t->name) + strlen(t->sample_type) + strlen(t->sample_unit) +
                   strlen(t->period_type) + strlen(t->period_unit) + 5;
        char *id = pl_arena_alloc(&q->arena, n);
        if (!id) {
            rc = SQLITE_NOMEM;
            break;
        }
        snprintf(id, n, "%s:%s:%s:%s:%s", t->name, t->sample_type, t->sample_unit, t->period_type,
                 t->period_unit);
        t->id = id;
    }
    sqlite3_finalize(st);
    st = NULL;
    cap = 0;
    if (rc == SQLITE_OK || rc == SQLITE_DONE)
        rc = sqlite3_prepare_v2(db,
                                "SELECT sv.id, st.value FROM services sv JOIN strings st ON st.id "
                                "= coalesce(sv.name_id, sv.id) WHERE sv.tenant IS ?1 ORDER BY "
                                "st.value, sv.id",
                                -1, &st, NULL);
    if (rc == SQLITE_OK && tenant)
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    while (next_row(&rc, st)) {
        if (pl_array_reserve((void **)&q->services, q->n_services, &cap, sizeof(struct pl_qservice),
                             16)) {
            rc = SQLITE_NOMEM;
            break;
        }
        struct pl_qservice *sv = &q->services[q->n_services++];
        memset(sv, 0, sizeof(*sv));
        sv->id = sqlite3_column_int64(st, 0);
        sv->name = arena_str(&q->arena, sqlite3_column_text(st, 1));
        if (!sv->name)
            rc = SQLITE_NOMEM;
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc == SQLITE_DONE)
        rc = catalog_labels(q, tenant);
    int64_t n_all = 0;
    if (rc == SQLITE_DONE) {
        rc = pl_store_exec_int(db, "SELECT count(*) FROM services", &n_all);
        q->every_service = (size_t)n_all == q->n_services;
        rc = rc == SQLITE_OK ? SQLITE_DONE : rc;
    }
    if (rc != SQLITE_DONE) {
        pl_qctx_free(q);
        if (rc == SQLITE_NOMEM)
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return pl_store_query_fail(store, rc, err);
    }
    return PL_OK;
}

void pl_qctx_free(pl_qctx *q)
{
    free(q->types);
    free(q->services);
    free(q->by_id);
    free(q->sdk_labels);
    q->by_id = NULL;
    q->sdk_labels = NULL;
    q->n_sdk_labels = 0;
    pl_arena_free(&q->arena);
    q->types = NULL;
    q->services = NULL;
    q->n_types = q->n_services = 0;
    q->store = NULL; /* freed: callers test it */
}

/* ---- labels ------------------------------------------------------------- */

typedef enum lkind {
    L_SERVICE,
    L_PROFILE_TYPE,
    L_NAME,
    L_TYPE,
    L_UNIT,
    L_PERIOD_TYPE,
    L_PERIOD_UNIT,
    L_NONE, /* another `__` name: no sample has it */
    L_SDK,  /* a label the SDK sent with the samples (services.labels) */
    L_SPAN_NAME,
    L_NAMESPACE,
    L_ATTR, /* a span attribute */
} lkind;

static const char *const base_labels[] = {"__name__",         "__period_type__", "__period_unit__",
                                          "__profile_type__", "__type__",        "__unit__",
                                          "service_name"};

static lkind base_kind(const char *name)
{
    static const struct {
        const char *name;
        lkind kind;
    } known[] = {
        {"service_name", L_SERVICE},
        {"__profile_type__", L_PROFILE_TYPE},
        {"__name__", L_NAME},
        {"__type__", L_TYPE},
        {"__unit__", L_UNIT},
        {"__period_type__", L_PERIOD_TYPE},
        {"__period_unit__", L_PERIOD_UNIT},
        {"span_name", L_SPAN_NAME},
        {"service_namespace", L_NAMESPACE},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(name, known[i].name) == 0)
            return known[i].kind;
    return strncmp(name, "__", 2) == 0 ? L_NONE : L_ATTR;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The kind of a label name: an SDK label when a service of the request's
 * tenant has it (so a span attribute of the same name is not selectable). */
static lkind label_kind(const pl_qctx *q, const char *name)
{
    lkind k = base_kind(name);
    if (k == L_ATTR && q->n_sdk_labels &&
        bsearch(&name, q->sdk_labels, q->n_sdk_labels, sizeof(char *), cmp_cstr))
        return L_SDK;
    return k;
}

static bool span_label(lkind k)
{
    return k >= L_SPAN_NAME;
}

/* A type's value of a type-level label. */
static const char *type_label(const pl_qtype *t, lkind k)
{
    switch (k) {
    case L_PROFILE_TYPE:
        return t->id;
    case L_NAME:
        return t->name;
    case L_TYPE:
        return t->sample_type;
    case L_UNIT:
        return t->sample_unit;
    case L_PERIOD_TYPE:
        return t->period_type;
    case L_PERIOD_UNIT:
        return t->period_unit;
    default:
        return "";
    }
}

/* A service's value of SDK label `name` ("" when it has none). */
static const char *sdk_label(const struct pl_qservice *sv, const char *name)
{
    for (size_t i = 0; i < sv->n_labels; i++)
        if (strcmp(sv->labels[i].name, name) == 0)
            return sv->labels[i].value;
    return "";
}

/* ---- filters: a selector resolved against the catalog ------------------- */

typedef struct bindv {
    bool text;
    int64_t i;
    const char *s;
} bindv;

typedef struct qsql {
    pl_buf sql;
    bindv *binds;
    size_t n, cap;
} qsql;

typedef struct qfilter {
    const pl_qctx *q;
    pl_qselector sel;
    int64_t *svc; /* NULL: every service */
    size_t n_svc;
    bool all_svc;
    int64_t *types;
    size_t n_types;
    bool all_types;
    bool span_matchers; /* some matcher reads the span */
    bool empty;         /* nothing can match */
    int64_t start_ms, end_ms;
    const int64_t *span_ids; /* span selector; NULL: none */
    size_t n_span_ids;
    const uint8_t *trace_ids; /* trace_id_selector, 16 bytes each; NULL: none */
    size_t n_trace_ids;
} qfilter;

static void bind_int(qsql *q, int64_t v)
{
    if (pl_array_reserve((void **)&q->binds, q->n, &q->cap, sizeof(bindv), 16) == 0)
        q->binds[q->n++] = (bindv){false, v, NULL};
    else
        q->sql.failed = true;
}

static void bind_text_v(qsql *q, const char *s)
{
    if (pl_array_reserve((void **)&q->binds, q->n, &q->cap, sizeof(bindv), 16) == 0)
        q->binds[q->n++] = (bindv){true, 0, s};
    else
        q->sql.failed = true;
}

static void qsql_free(qsql *q)
{
    pl_buf_free(&q->sql);
    free(q->binds);
}

static void filter_free(qfilter *f)
{
    pl_qselector_free(&f->sel);
    free(f->svc);
    free(f->types);
}

static void time_range(const pl_qrequest *r, int64_t *start_ms, int64_t *end_ms)
{
    int64_t now = (int64_t)(pl_time_now_ns() / 1000000ull);
    *end_ms = r->end_ms > 0 ? r->end_ms : now;
    *start_ms = r->start_ms > 0 ? r->start_ms : *end_ms - 3600 * 1000;
}

/* Resolves `selector` (and, when given, the profile type id) into f. */
static pl_status filter_build(pl_qctx *q, const pl_qrequest *r, const char *selector,
                              const char *profile_type, qfilter *f)
{
    memset(f, 0, sizeof(*f));
    f->q = q;
    time_range(r, &f->start_ms, &f->end_ms);
    pl_status st = pl_qselector_parse(selector ? selector : "", selector ? strlen(selector) : 0,
                                      &f->sel, q->err);
    if (st != PL_OK)
        return st;
    bool svc_matchers = false, type_matchers = profile_type != NULL;
    for (size_t i = 0; i < f->sel.n; i++) {
        const pl_qmatcher *m = &f->sel.items[i];
        lkind k = label_kind(q, m->name);
        if (k == L_SERVICE || k == L_SDK)
            svc_matchers = true;
        else if (k == L_NONE) {
            if (!pl_qmatcher_matches(m, "", 0))
                f->empty = true;
        } else if (span_label(k)) {
            if (strchr(m->name, '"') || strchr(m->name, '\\'))
                return pl_errf(q->err, PL_ERR_INVALID, "label name %s: no quotes or backslashes",
                               m->name);
            f->span_matchers = true;
        } else
            type_matchers = true;
    }
    /* without service matchers: every service, or the request's tenant's */
    f->all_svc = !svc_matchers && q->every_service;
    if (!f->all_svc) {
        f->svc = calloc(q->n_services + 1, sizeof(int64_t));
        if (!f->svc)
            return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
        for (size_t s = 0; s < q->n_services; s++) {
            bool ok = true;
            for (size_t i = 0; i < f->sel.n && ok; i++)
                switch (label_kind(q, f->sel.items[i].name)) {
                case L_SERVICE:
                    ok = pl_qmatcher_matches(&f->sel.items[i], q->services[s].name,
                                             strlen(q->services[s].name));
                    break;
                case L_SDK: {
                    const char *v = sdk_label(&q->services[s], f->sel.items[i].name);
                    ok = pl_qmatcher_matches(&f->sel.items[i], v, strlen(v));
                    break;
                }
                default:
                    break;
                }
            if (ok)
                f->svc[f->n_svc++] = q->services[s].id;
        }
        if (!f->n_svc)
            f->empty = true;
    }
    f->all_types = !type_matchers;
    if (type_matchers) {
        f->types = calloc(q->n_types + 1, sizeof(int64_t));
        if (!f->types)
            return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
        for (size_t t = 0; t < q->n_types; t++) {
            const pl_qtype *ty = &q->types[t];
            bool ok = !profile_type || strcmp(profile_type, ty->id) == 0;
            for (size_t i = 0; i < f->sel.n && ok; i++) {
                lkind k = label_kind(q, f->sel.items[i].name);
                if (k >= L_PROFILE_TYPE && k <= L_PERIOD_UNIT) {
                    const char *v = type_label(ty, k);
                    ok = pl_qmatcher_matches(&f->sel.items[i], v, strlen(v));
                }
            }
            if (ok)
                f->types[f->n_types++] = ty->type_id;
        }
        if (!f->n_types)
            f->empty = true;
    }
    return PL_OK;
}

static void in_list(qsql *q, const char *col, const int64_t *v, size_t n)
{
    pl_buf_printf(&q->sql, " AND %s IN (", col);
    for (size_t i = 0; i < n; i++) {
        pl_buf_append_str(&q->sql, i ? ",?" : "?");
        bind_int(q, v[i]);
    }
    pl_buf_append_byte(&q->sql, ')');
}

/* The SQL of a span label's value (sp: the joined span). */
static void label_expr(qsql *q, const char *name, pl_arena *a)
{
    switch (base_kind(name)) {
    case L_SPAN_NAME:
        pl_buf_append_str(&q->sql, "coalesce(sp.name,'')");
        return;
    case L_NAMESPACE:
        pl_buf_append_str(&q->sql, "coalesce((SELECT json_extract(value,'$.\"service.namespace\"')"
                                   " FROM strings WHERE id = sp.resource_id),'')");
        return;
    default: {
        size_t n = strlen(name) + 5;
        char *path = pl_arena_alloc(a, n);
        if (!path) {
            q->sql.failed = true;
            return;
        }
        snprintf(path, n, "$.\"%s\"", name);
        pl_buf_append_str(&q->sql, "coalesce(CAST(json_extract(sp.attributes,?) AS TEXT),'')");
        bind_text_v(q, path);
        return;
    }
    }
}

/* Which table a query reads. */
typedef struct source {
    const char *table, *bucket;
    int64_t width_ms;
} source;

static const source SAMPLES = {"samples", "bucket", (int64_t)(PL_STORE_BUCKET_NS / 1000000)};
static const source ROLLUP = {"service_profiles", "minute", (int64_t)(ROLLUP_NS / 1000000)};
static const source TOTALS = {"service_totals", "bucket", (int64_t)(PL_STORE_BUCKET_NS / 1000000)};

#define ANY INT64_MIN /* where_clause: no single service or type */

/* f's trace ids as SQL blob literals, comma-separated (decoded ids: only
 * hex digits). */
static void trace_id_list(qsql *q, const qfilter *f)
{
    for (size_t i = 0; i < f->n_trace_ids; i++) {
        char hex[33];
        pl_hex_encode(f->trace_ids + 16 * i, 16, hex);
        pl_buf_printf(&q->sql, "%sx'%.32s'", i ? "," : "", hex);
    }
}

/* One recursive step of the descendants' walk (span_ids_read()): the children
 * of the spans found so far (d), through range table T. */
#define CHILDREN_THROUGH(T)                                                                        \
    " UNION SELECT sp.span_id, sp.trace_id FROM d CROSS JOIN " PL_TRACE_SPANS_OF(                  \
        T, "sp") " WHERE r_.trace_id = d.tid AND sp.parent_span_id = d.id"

/* The spans of f's traces, as sp (PL_TRACE_SPANS with the id list). */
static void trace_spans(qsql *q, const qfilter *f)
{
    pl_buf_append_str(&q->sql, PL_TRACE_RANGES_A "IN (");
    trace_id_list(q, f);
    pl_buf_append_str(&q->sql, ")" PL_TRACE_RANGES_B "IN (");
    trace_id_list(q, f);
    pl_buf_append_str(&q->sql, ")" PL_TRACE_RANGES_END("sp"));
}

/* " FROM <src> s", and the span as sp when `join`. With f's span or trace
 * ids the sample rows are reached by key (store_internal.h,
 * PL_SPAN_SAMPLES): the keys of the given spans' rows and of the traces'
 * spans' rows, plus the rows that name the traces (samples_by_trace); the
 * keys may find more rows than the ids select, where_clause keeps those
 * that do. */
static bool by_keys(const source *src, const qfilter *f)
{
    return src == &SAMPLES && f && (f->n_span_ids || f->n_trace_ids);
}

static void from_clause(qsql *q, const source *src, bool join, const qfilter *f)
{
    if (by_keys(src, f)) {
        pl_buf_append_str(&q->sql, " FROM (WITH k_ids(id) AS (");
        if (f->n_span_ids) {
            pl_buf_append_str(&q->sql, "VALUES ");
            for (size_t i = 0; i < f->n_span_ids; i++) {
                pl_buf_append_str(&q->sql, i ? ",(?)" : "(?)");
                bind_int(q, f->span_ids[i]);
            }
        }
        if (f->n_trace_ids) {
            pl_buf_printf(&q->sql, "%sSELECT sp.span_id FROM ", f->n_span_ids ? " UNION ALL " : "");
            trace_spans(q, f);
        }
        pl_buf_append_str(&q->sql, ") SELECT span_id AS k_span, service_id AS k_svc, bucket AS "
                                   "k_bucket, type_id AS k_type FROM k_ids CROSS JOIN "
                                   "sample_spans_new ON span_id = k_ids.id UNION SELECT span_id, "
                                   "service_id, bucket, type_id FROM k_ids CROSS JOIN "
                                   "sample_spans ON span_id = k_ids.id");
        if (f->n_trace_ids) {
            pl_buf_append_str(&q->sql, " UNION SELECT span_id, service_id, bucket, type_id FROM "
                                       "samples WHERE trace_id IN (");
            trace_id_list(q, f);
            pl_buf_append_byte(&q->sql, ')');
        }
        pl_buf_append_str(&q->sql, ") s_k CROSS JOIN samples s ON s.service_id = s_k.k_svc AND "
                                   "s.bucket = s_k.k_bucket AND s.type_id = s_k.k_type AND "
                                   "s.span_id = s_k.k_span");
    } else {
        pl_buf_printf(&q->sql, " FROM %s s", src->table);
    }
    if (join)
        pl_buf_append_str(&q->sql, " " PL_SPAN_JOIN("LEFT", "sp", "s.span_id"));
}

/* " WHERE ..." for f over src; svc / type other than ANY narrow it to one
 * series (a tenant's service ids are below 0). */
static void where_clause(qsql *q, const qfilter *f, const source *src, int64_t svc, int64_t type,
                         pl_arena *a)
{
    int64_t b0 = f->start_ms / src->width_ms, b1 = f->end_ms / src->width_ms;
    /* rows reached by key (from_clause): the conditions below only filter
     * them ("+": an equal column of the key join would otherwise lose to
     * a range or list of the same column in the planner's choice) */
    const char *x = by_keys(src, f) ? "+" : "";
    pl_buf_printf(&q->sql, " WHERE %ss.%s BETWEEN ? AND ?", x, src->bucket);
    bind_int(q, b0);
    bind_int(q, b1);
    char svc_col[16], type_col[16], span_col[16];
    snprintf(svc_col, sizeof(svc_col), "%ss.service_id", x);
    snprintf(type_col, sizeof(type_col), "%ss.type_id", x);
    snprintf(span_col, sizeof(span_col), "%ss.span_id", x);
    if (svc != ANY)
        in_list(q, svc_col, &svc, 1);
    else if (!f->all_svc)
        in_list(q, svc_col, f->svc, f->n_svc);
    if (type != ANY)
        in_list(q, type_col, &type, 1);
    else if (!f->all_types)
        in_list(q, type_col, f->types, f->n_types);
    if (f->span_ids && !f->trace_ids) {
        pl_buf_append_str(&q->sql, " AND s.span_id != 0");
        in_list(q, span_col, f->span_ids, f->n_span_ids);
    } else if (f->trace_ids) {
        /* the samples linked to those traces: by their trace id, or by a
         * span of the trace (a link may name only the span) */
        pl_buf_printf(&q->sql, " AND (%ss.trace_id IN (", x);
        trace_id_list(q, f);
        pl_buf_printf(&q->sql, ") OR (s.span_id != 0 AND %ss.span_id IN (SELECT sp.span_id FROM ",
                      x);
        trace_spans(q, f);
        pl_buf_append_str(&q->sql, "))");
        if (f->n_span_ids) {
            pl_buf_append_str(&q->sql, " OR (s.span_id != 0");
            in_list(q, span_col, f->span_ids, f->n_span_ids);
            pl_buf_append_byte(&q->sql, ')');
        }
        pl_buf_append_byte(&q->sql, ')');
    }
    for (size_t i = 0; i < f->sel.n; i++) {
        const pl_qmatcher *m = &f->sel.items[i];
        if (!span_label(label_kind(f->q, m->name)))
            continue;
        pl_buf_append_str(&q->sql, " AND ");
        switch (m->op) {
        case PL_QOP_EQ:
        case PL_QOP_NE:
            label_expr(q, m->name, a);
            pl_buf_append_str(&q->sql, m->op == PL_QOP_EQ ? " = ?" : " != ?");
            bind_text_v(q, m->value);
            break;
        case PL_QOP_RE:
        case PL_QOP_NRE:
            pl_buf_printf(&q->sql, "%spl_qmatch(?,", m->op == PL_QOP_NRE ? "NOT " : "");
            bind_int(q, (int64_t)i);
            label_expr(q, m->name, a);
            pl_buf_append_byte(&q->sql, ')');
            break;
        }
    }
}

/* pl_qmatch(matcher index, value): the request's regular expressions. */
static void qmatch_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const pl_qselector *sel = sqlite3_user_data(ctx);
    int64_t i = sqlite3_value_int64(argv[0]);
    const char *v = (const char *)sqlite3_value_text(argv[1]);
    if (!sel || i < 0 || (size_t)i >= sel->n || !sel->items[i].re.code) {
        sqlite3_result_int(ctx, 0);
        return;
    }
    bool m = pl_pattern_exec(
        &sel->items[i].re,
        (pl_bytes){(const uint8_t *)(v ? v : ""), (uint32_t)(v ? sqlite3_value_bytes(argv[1]) : 0)},
        NULL, 0);
    sqlite3_result_int(ctx, m);
}

/* Prepares q with its bindings; registers pl_qmatch for f's selector. */
static int prepare(pl_qctx *c, qsql *q, const qfilter *f, sqlite3_stmt **st)
{
    *st = NULL;
    pl_buf_append_byte(&q->sql, 0);
    if (!pl_buf_ok(&q->sql))
        return SQLITE_NOMEM;
    sqlite3 *db = c->store->db;
    int rc = sqlite3_create_function(db, "pl_qmatch", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                     f ? (void *)&f->sel : NULL, qmatch_fn, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, (const char *)q->sql.data, -1, st, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < q->n; i++)
        rc = q->binds[i].text ? sqlite3_bind_text(*st, (int)i + 1, q->binds[i].s, -1, SQLITE_STATIC)
                              : sqlite3_bind_int64(*st, (int)i + 1, q->binds[i].i);
    return rc;
}

static void unprepare(pl_qctx *c, sqlite3_stmt *st)
{
    sqlite3_finalize(st);
    sqlite3_create_function(c->store->db, "pl_qmatch", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                            qmatch_fn, NULL, NULL);
}

static pl_status sql_fail(pl_qctx *c, int rc)
{
    if (rc == SQLITE_NOMEM)
        return pl_errf(c->err, PL_ERR_NOMEM, "out of memory");
    return pl_store_query_fail(c->store, rc, c->err);
}

/* ---- series discovery --------------------------------------------------- */

typedef struct pair {
    int64_t svc, type;
} pair;

static const char *service_name(const pl_qctx *q, int64_t id)
{
    const struct pl_qservice *sv = service_by_id(q, id);
    return sv ? sv->name : "";
}

static const pl_qtype *type_by_id(const pl_qctx *q, int64_t id)
{
    for (size_t i = 0; i < q->n_types; i++)
        if (q->types[i].type_id == id)
            return &q->types[i];
    return NULL;
}

/* The (service, type) pairs with data matching f, from the catalog and one
 * bounded lookup each. */
static pl_status series_pairs(pl_qctx *q, const qfilter *f, pair **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (f->empty)
        return PL_OK;
    size_t cap = 0;
    pl_status st = PL_OK;
    for (size_t s = 0; s < q->n_services && st == PL_OK; s++) {
        int64_t svc = q->services[s].id;
        if (!f->all_svc) {
            bool in = false;
            for (size_t i = 0; i < f->n_svc && !in; i++)
                in = f->svc[i] == svc;
            if (!in)
                continue;
        }
        /* one bounded lookup per (service, type): an index seek each */
        for (size_t t = 0; t < q->n_types && st == PL_OK; t++) {
            int64_t type = q->types[t].type_id;
            bool in = f->all_types;
            for (size_t i = 0; i < f->n_types && !in; i++)
                in = f->types[i] == type;
            if (!in)
                continue;
            qsql sql = {0};
            pl_buf_init(&sql.sql);
            bool join = f->span_matchers || f->span_ids;
            const source *src = join ? &SAMPLES : &ROLLUP;
            pl_buf_append_str(&sql.sql, "SELECT 1");
            from_clause(&sql, src, join, f);
            where_clause(&sql, f, src, svc, type, &q->arena);
            pl_buf_append_str(&sql.sql, " LIMIT 1");
            sqlite3_stmt *stmt;
            int rc = prepare(q, &sql, f, &stmt);
            bool found = next_row(&rc, stmt);
            if (found && pl_array_reserve((void **)out, *n, &cap, sizeof(pair), 16))
                rc = SQLITE_NOMEM;
            else if (found)
                (*out)[(*n)++] = (pair){svc, type};
            unprepare(q, stmt);
            qsql_free(&sql);
            if (!found && rc != SQLITE_DONE)
                st = sql_fail(q, rc);
            else if (found && rc != SQLITE_OK)
                st = sql_fail(q, rc);
        }
    }
    if (st != PL_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts and deduplicates strings in place; returns the new count. */
static size_t sort_unique(const char **v, size_t n)
{
    if (!n)
        return 0;
    qsort(v, n, sizeof(char *), cmp_str);
    size_t w = 1;
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i], v[w - 1]) != 0)
            v[w++] = v[i];
    return w;
}

typedef struct strvec {
    const char **v;
    size_t n, cap;
} strvec;

static int strvec_add(strvec *s, const char *x)
{
    if (pl_array_reserve((void **)&s->v, s->n, &s->cap, sizeof(char *), 32))
        return -1;
    s->v[s->n++] = x;
    return 0;
}

/* The selectors of a label request: its matchers, or {} when none. */
static size_t n_selectors(const pl_qrequest *r)
{
    return r->matchers.n ? r->matchers.n : 1;
}

static const char *selector_at(const pl_qrequest *r, size_t i)
{
    return r->matchers.n ? r->matchers.items[i] : "{}";
}

/* Results move into the context's arena. */
static pl_status strvec_finish(pl_qctx *q, strvec *s, const char ***out, size_t *n)
{
    s->n = sort_unique(s->v, s->n);
    *out = pl_arena_calloc(&q->arena, s->n + 1, sizeof(char *));
    if (!*out) {
        free(s->v);
        return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
    }
    if (s->n)
        memcpy(*out, s->v, s->n * sizeof(char *));
    *n = s->n;
    free(s->v);
    return PL_OK;
}

pl_status pl_q_profile_types(pl_qctx *q, const pl_qrequest *r, const pl_qtype ***out, size_t *n)
{
    qfilter f;
    pl_status st = filter_build(q, r, "{}", NULL, &f);
    pair *pairs = NULL;
    size_t np = 0;
    if (st == PL_OK)
        st = series_pairs(q, &f, &pairs, &np);
    filter_free(&f);
    if (st != PL_OK)
        return st;
    *out = pl_arena_calloc(&q->arena, q->n_types + 1, sizeof(pl_qtype *));
    *n = 0;
    if (!*out) {
        free(pairs);
        return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
    }
    for (size_t t = 0; t < q->n_types; t++)
        for (size_t i = 0; i < np; i++)
            if (pairs[i].type == q->types[t].type_id) {
                (*out)[(*n)++] = &q->types[t];
                break;
            }
    free(pairs);
    return PL_OK;
}

/* Span labels are read from the spans of at most this many sample rows (the
 * first of the range): label names and values are suggestions for the
 * query editor, and a label with few values must not cost a scan of every
 * sample of the range. */
#define SPAN_LABEL_ROWS 20000

/* Span label names (attribute keys, span_name, service_namespace) of the
 * spans linked to f's samples. */
static pl_status span_label_names(pl_qctx *q, const qfilter *f, strvec *names)
{
    qsql sql = {0};
    pl_buf_init(&sql.sql);
    pl_buf_append_str(&sql.sql,
                      "WITH x AS (SELECT DISTINCT a, r FROM (SELECT sp.attributes AS "
                      "a, sp.resource_id AS r FROM samples s " PL_SPAN_JOIN("", "sp", "s.span_id"));
    where_clause(&sql, f, &SAMPLES, ANY, ANY, &q->arena);
    pl_buf_printf(&sql.sql, " AND s.span_id != 0 LIMIT %d))", SPAN_LABEL_ROWS);
    pl_buf_append_str(&sql.sql, " SELECT DISTINCT j.key FROM x, "
                                "json_each(x.a) j UNION SELECT 'span_name' FROM x UNION SELECT "
                                "'service_namespace' FROM x JOIN strings st ON st.id = x.r WHERE "
                                "json_extract(st.value,'$.\"service.namespace\"') IS NOT NULL");
    sqlite3_stmt *stmt;
    int rc = prepare(q, &sql, f, &stmt);
    while (next_row(&rc, stmt)) {
        const char *k = arena_str(&q->arena, sqlite3_column_text(stmt, 0));
        if (!k || strvec_add(names, k))
            rc = SQLITE_NOMEM;
    }
    unprepare(q, stmt);
    qsql_free(&sql);
    return rc == SQLITE_DONE ? PL_OK : sql_fail(q, rc);
}

pl_status pl_q_label_names(pl_qctx *q, const pl_qrequest *r, const char ***out, size_t *n)
{
    strvec names = {0};
    pl_status st = PL_OK;
    for (size_t i = 0; i < n_selectors(r) && st == PL_OK; i++) {
        qfilter f;
        st = filter_build(q, r, selector_at(r, i), NULL, &f);
        pair *pairs = NULL;
        size_t np = 0;
        if (st == PL_OK)
            st = series_pairs(q, &f, &pairs, &np);
        if (st == PL_OK && np) {
            for (size_t k = 0; k < sizeof(base_labels) / sizeof(base_labels[0]); k++)
                if (strvec_add(&names, base_labels[k]))
                    st = pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
            for (size_t p = 0; p < np && st == PL_OK; p++) {
                const struct pl_qservice *sv = service_by_id(q, pairs[p].svc);
                for (size_t k = 0; sv && k < sv->n_labels && st == PL_OK; k++)
                    if (strncmp(sv->labels[k].name, "__", 2) != 0 &&
                        strvec_add(&names, sv->labels[k].name))
                        st = pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
            }
            if (st == PL_OK)
                st = span_label_names(q, &f, &names);
        }
        free(pairs);
        filter_free(&f);
    }
    if (st != PL_OK) {
        free(names.v);
        return st;
    }
    return strvec_finish(q, &names, out, n);
}

/* Distinct values of span label `name` over f's samples (bounded). */
static pl_status span_label_values(pl_qctx *q, const qfilter *f, const char *name, strvec *out)
{
    qsql sql = {0};
    pl_buf_init(&sql.sql);
    pl_buf_append_str(&sql.sql, "SELECT DISTINCT v FROM (SELECT ");
    label_expr(&sql, name, &q->arena);
    pl_buf_append_str(&sql.sql, " AS v");
    from_clause(&sql, &SAMPLES, true, f);
    where_clause(&sql, f, &SAMPLES, ANY, ANY, &q->arena);
    pl_buf_printf(&sql.sql, " AND s.span_id != 0 LIMIT %d) LIMIT 10000", SPAN_LABEL_ROWS);
    sqlite3_stmt *stmt;
    int rc = prepare(q, &sql, f, &stmt);
    while (next_row(&rc, stmt)) {
        const unsigned char *v = sqlite3_column_text(stmt, 0);
        if (!v || !*v)
            continue;
        const char *k = arena_str(&q->arena, v);
        if (!k || strvec_add(out, k))
            rc = SQLITE_NOMEM;
    }
    unprepare(q, stmt);
    qsql_free(&sql);
    return rc == SQLITE_DONE ? PL_OK : sql_fail(q, rc);
}

pl_status pl_q_label_values(pl_qctx *q, const pl_qrequest *r, const char ***out, size_t *n)
{
    if (!r->name || !*r->name)
        return pl_errf(q->err, PL_ERR_INVALID, "name: the label name is required");
    lkind k = label_kind(q, r->name);
    if (span_label(k) && (strchr(r->name, '"') || strchr(r->name, '\\')))
        return pl_errf(q->err, PL_ERR_INVALID, "name: no quotes or backslashes");
    strvec vals = {0};
    pl_status st = PL_OK;
    for (size_t i = 0; i < n_selectors(r) && st == PL_OK; i++) {
        qfilter f;
        st = filter_build(q, r, selector_at(r, i), NULL, &f);
        if (st == PL_OK && span_label(k) && !f.empty) {
            st = span_label_values(q, &f, r->name, &vals);
        } else if (st == PL_OK && k != L_NONE) {
            pair *pairs = NULL;
            size_t np = 0;
            st = series_pairs(q, &f, &pairs, &np);
            for (size_t p = 0; p < np && st == PL_OK; p++) {
                const struct pl_qservice *sv = service_by_id(q, pairs[p].svc);
                const char *v = k == L_SERVICE ? service_name(q, pairs[p].svc)
                                : k == L_SDK   ? (sv ? sdk_label(sv, r->name) : "")
                                               : type_label(type_by_id(q, pairs[p].type), k);
                if (*v && strvec_add(&vals, v))
                    st = pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
            }
            free(pairs);
        }
        filter_free(&f);
    }
    if (st != PL_OK) {
        free(vals.v);
        return st;
    }
    return strvec_finish(q, &vals, out, n);
}

/* ---- Series ------------------------------------------------------------- */

static bool wanted(const pl_qrequest *r, const char *name)
{
    if (!r->label_names.n)
        return true;
    for (size_t i = 0; i < r->label_names.n; i++)
        if (strcmp(r->label_names.items[i], name) == 0)
            return true;
    return false;
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(((const pl_qlabel *)a)->name, ((const pl_qlabel *)b)->name);
}

/* A label set as one string, to deduplicate series. */
static char *series_key(pl_arena *a, const pl_qlabel *l, size_t n)
{
    pl_buf b;
    pl_buf_init(&b);
    for (size_t i = 0; i < n; i++) {
        pl_buf_append_str(&b, l[i].name);
        pl_buf_append_byte(&b, 0x1f);
        pl_buf_append_str(&b, l[i].value);
        pl_buf_append_byte(&b, 0x1e);
    }
    pl_buf_append_byte(&b, 0);
    char *k = pl_buf_ok(&b) ? pl_arena_memdup(a, b.data, b.len) : NULL;
    pl_buf_free(&b);
    return k;
}

pl_status pl_q_series(pl_qctx *q, const pl_qrequest *r, pl_qseries **out, size_t *n)
{
    pl_qseries *ser = NULL;
    size_t ns = 0, cap = 0;
    strvec keys = {0};
    pl_status st = PL_OK;
    for (size_t i = 0; i < n_selectors(r) && st == PL_OK; i++) {
        qfilter f;
        st = filter_build(q, r, selector_at(r, i), NULL, &f);
        pair *pairs = NULL;
        size_t np = 0;
        if (st == PL_OK)
            st = series_pairs(q, &f, &pairs, &np);
        for (size_t p = 0; p < np && st == PL_OK; p++) {
            const pl_qtype *t = type_by_id(q, pairs[p].type);
            pl_qlabel all[7] = {
                {"__name__", t->name},
                {"__period_type__", t->period_type},
                {"__period_unit__", t->period_unit},
                {"__profile_type__", t->id},
                {"__type__", t->sample_type},
                {"__unit__", t->sample_unit},
                {"service_name", service_name(q, pairs[p].svc)},
            };
            const struct pl_qservice *sv = service_by_id(q, pairs[p].svc);
            size_t n_sdk = sv ? sv->n_labels : 0;
            pl_qlabel *ls = pl_arena_calloc(&q->arena, 7 + n_sdk, sizeof(pl_qlabel));
            if (!ls) {
                st = pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
                break;
            }
            size_t nl = 0;
            for (size_t k = 0; k < 7; k++)
                if (wanted(r, all[k].name))
                    ls[nl++] = all[k];
            for (size_t k = 0; k < n_sdk; k++)
                if (strncmp(sv->labels[k].name, "__", 2) != 0 && wanted(r, sv->labels[k].name))
                    ls[nl++] = sv->labels[k];
            qsort(ls, nl, sizeof(pl_qlabel), cmp_label);
            char *key = series_key(&q->arena, ls, nl);
            if (!key) {
                st = pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
                break;
            }
            bool dup = false;
            for (size_t k = 0; k < keys.n && !dup; k++)
                dup = strcmp(keys.v[k], key) == 0;
            if (dup)
                continue;
            if (strvec_add(&keys, key) ||
                pl_array_reserve((void **)&ser, ns, &cap, sizeof(pl_qseries), 16)) {
                st = pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
                break;
            }
            ser[ns++] = (pl_qseries){ls, nl, NULL, NULL, 0, 0};
        }
        free(pairs);
        filter_free(&f);
    }
    free(keys.v);
    if (st != PL_OK) {
        free(ser);
        return st;
    }
    *out = pl_arena_calloc(&q->arena, ns + 1, sizeof(pl_qseries));
    if (!*out) {
        free(ser);
        return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
    }
    if (ns)
        memcpy(*out, ser, ns * sizeof(pl_qseries));
    *n = ns;
    free(ser);
    return PL_OK;
}

/* ---- profile type of a request ------------------------------------------ */

static pl_status request_type(pl_qctx *q, const pl_qrequest *r, const pl_qtype **type)
{
    *type = NULL;
    if (!r->profile_type || !*r->profile_type)
        return pl_errf(q->err, PL_ERR_INVALID, "profile_typeID: required");
    char id[512];
    size_t len = strlen(r->profile_type);
    if (len >= sizeof(id))
        return pl_errf(q->err, PL_ERR_INVALID, "profile_typeID: too long");
    memcpy(id, r->profile_type, len + 1);
    int parts = 1;
    for (size_t i = 0; i < len; i++)
        parts += id[i] == ':';
    if (parts == 6 && len > 6 && strcmp(id + len - 6, ":delta") == 0)
        id[len - 6] = 0;
    else if (parts != 5)
        return pl_errf(q->err, PL_ERR_INVALID,
                       "profile_typeID %s: expected name:sample_type:sample_unit:period_type:"
                       "period_unit",
                       r->profile_type);
    for (size_t t = 0; t < q->n_types; t++)
        if (strcmp(q->types[t].id, id) == 0)
            *type = &q->types[t];
    return PL_OK; /* an unknown type: no data */
}

/* The span selector as span ids (and, with descendants, every span below).
 * On an error *out may hold the ids read so far: span_ids() frees them. */
static pl_status span_ids_read(pl_qctx *q, const pl_qrequest *r, int64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    /* a span's profile id is its span id (pyroscope.profile.id) */
    for (size_t i = 0; i < r->span_selector.n + r->profile_id_selector.n; i++) {
        uint8_t id[8];
        bool span = i < r->span_selector.n;
        const char *s =
            span ? r->span_selector.items[i] : r->profile_id_selector.items[i - r->span_selector.n];
        const char *what = span ? "span" : "profile";
        if (strlen(s) != 16)
            return pl_errf(q->err, PL_ERR_INVALID, "invalid %s id length: %.40s", what, s);
        if (pl_hex_decode(s, 16, id, 8) < 0)
            return pl_errf(q->err, PL_ERR_INVALID, "invalid %s id: %.40s", what, s);
        if (pl_array_reserve((void **)out, *n, &cap, sizeof(int64_t), 16))
            return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
        (*out)[(*n)++] = span_id_int(id);
    }
    if (!r->include_descendants || !*n)
        return PL_OK;
    qsql sql = {0};
    pl_buf_init(&sql.sql);
    /* the given spans by id (PL_SPAN_ROW), then their children, level by
     * level, through each of the two range tables (PL_TRACE_SPANS_OF) */
    pl_buf_append_str(&sql.sql, "WITH RECURSIVE ids(id) AS (VALUES ");
    for (size_t i = 0; i < *n; i++) {
        pl_buf_append_str(&sql.sql, i ? ",(?)" : "(?)");
        bind_int(&sql, (*out)[i]);
    }
    pl_buf_append_str(&sql.sql, "), d(id, tid) AS (SELECT sp.span_id, sp.trace_id FROM ids "
                                "CROSS JOIN spans sp ON sp.rowid = " PL_SPAN_ROW(
                                    "ids.id") " AND sp.span_id = ids.id");
    pl_buf_append_str(&sql.sql, CHILDREN_THROUGH("trace_spans") CHILDREN_THROUGH(
                                    "trace_spans_new") ") SELECT id FROM d LIMIT 10000");
    sqlite3_stmt *stmt;
    int rc = prepare(q, &sql, NULL, &stmt);
    size_t given = *n;
    while (next_row(&rc, stmt)) {
        int64_t id = sqlite3_column_int64(stmt, 0);
        bool dup = false;
        for (size_t i = 0; i < given && !dup; i++)
            dup = (*out)[i] == id;
        if (dup)
            continue;
        if (pl_array_reserve((void **)out, *n, &cap, sizeof(int64_t), 16)) {
            rc = SQLITE_NOMEM;
            break;
        }
        (*out)[(*n)++] = id;
    }
    unprepare(q, stmt);
    qsql_free(&sql);
    return rc == SQLITE_DONE ? PL_OK : sql_fail(q, rc);
}

/* span_ids_read(); on an error *out is NULL and *n 0. */
static pl_status span_ids(pl_qctx *q, const pl_qrequest *r, int64_t **out, size_t *n)
{
    pl_status st = span_ids_read(q, r, out, n);
    if (st != PL_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return st;
}

/* trace_id_selector as 16-byte ids (32 hex digits each). */
static pl_status trace_ids(pl_qctx *q, const pl_qrequest *r, uint8_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!r->trace_id_selector.n)
        return PL_OK;
    *out = malloc(16 * r->trace_id_selector.n);
    if (!*out)
        return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < r->trace_id_selector.n; i++) {
        const char *s = r->trace_id_selector.items[i];
        pl_status st = PL_OK;
        if (strlen(s) != 32)
            st = pl_errf(q->err, PL_ERR_INVALID, "invalid trace id length: %.40s", s);
        else if (pl_hex_decode(s, 32, *out + 16 * i, 16) < 0)
            st = pl_errf(q->err, PL_ERR_INVALID, "invalid trace id: %.40s", s);
        if (st != PL_OK) {
            free(*out);
            *out = NULL;
            return st;
        }
    }
    *n = r->trace_id_selector.n;
    return PL_OK;
}

/* ---- stack_trace_selector.call_site ------------------------------------ */

/* Selects the stacks whose first frames (from the root) are the call site's
 * function names. Names are compared, not function ids (one name may have
 * several ids, by file); each function id's answer and, for series, each
 * stack id's are cached for the request. */
typedef struct callsite {
    const char *const *names; /* root first */
    size_t n;                 /* 0: no filter */
    size_t *canon;            /* per position: the first position of that name */
    u64_map fn;               /* function id -> canonical position + 1, 0: none */
    u64_map stacks;           /* stack id -> 1: selected, 0: not */
    int64_t *fids;            /* a stack's first n frames */
    sqlite3_stmt *fn_st, *stack_st;
} callsite;

static pl_status callsite_init(pl_qctx *q, const pl_qrequest *r, callsite *c)
{
    memset(c, 0, sizeof(*c));
    c->names = r->call_site.items;
    c->n = r->call_site.n;
    if (!c->n)
        return PL_OK;
    c->canon = calloc(c->n, sizeof(size_t));
    c->fids = calloc(c->n, sizeof(int64_t));
    if (!c->canon || !c->fids)
        return pl_errf(q->err, PL_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < c->n; i++) {
        c->canon[i] = i;
        for (size_t j = 0; j < i; j++)
            if (strcmp(c->names[j], c->names[i]) == 0) {
                c->canon[i] = c->canon[j];
                break;
            }
    }
    return PL_OK;
}

static void callsite_free(callsite *c)
{
    free(c->canon);
    free(c->fids);
    sqlite3_finalize(c->fn_st);
    sqlite3_finalize(c->stack_st);
    pl_store_u64_map_clear(&c->fn);
    pl_store_u64_map_clear(&c->stacks);
}

/* The canonical call-site position of function fn's name + 1 (0: none). */
static int callsite_fn(pl_qctx *q, callsite *c, int64_t fn, int64_t *pos)
{
    if (pl_store_u64_map_get(&c->fn, (uint64_t)fn, pos))
        return SQLITE_OK;
    int rc = SQLITE_OK;
    if (!c->fn_st)
        rc = sqlite3_prepare_v2(q->store->db,
                                "SELECT st.value FROM functions f JOIN strings st ON st.id = "
                                "f.name_id WHERE f.id = ?1",
                                -1, &c->fn_st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(c->fn_st, 1, fn);
    rc = sqlite3_step(c->fn_st);
    const char *name = "<unknown>"; /* as the flame graph names it */
    size_t len = 9;
    if (rc == SQLITE_ROW) {
        name = (const char *)sqlite3_column_text(c->fn_st, 0);
        len = (size_t)sqlite3_column_bytes(c->fn_st, 0);
        if (!name)
            name = "", len = 0;
    }
    *pos = 0;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        for (size_t i = 0; i < c->n && !*pos; i++)
            if (strlen(c->names[i]) == len && memcmp(c->names[i], name, len) == 0)
                *pos = (int64_t)i + 1;
    sqlite3_reset(c->fn_st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return rc;
    return pl_store_u64_map_put(&c->fn, (uint64_t)fn, *pos) ? SQLITE_OK : SQLITE_NOMEM;
}

/* Whether the frames (function ids, root first, nf in all) start with the
 * call site. */
static int callsite_frames(pl_qctx *q, callsite *c, const int64_t *fids, size_t nf, bool *ok)
{
    *ok = nf >= c->n;
    for (size_t i = 0; i < c->n && *ok; i++) {
        int64_t pos;
        int rc = callsite_fn(q, c, fids[i], &pos);
        if (rc != SQLITE_OK)
            return rc;
        *ok = pos == (int64_t)c->canon[i] + 1;
    }
    return SQLITE_OK;
}

/* Whether stack `id` starts with the call site (its frames read once). */
static int callsite_stack(pl_qctx *q, callsite *c, int64_t id, bool *ok)
{
    int64_t v;
    if (pl_store_u64_map_get(&c->stacks, (uint64_t)id, &v)) {
        *ok = v != 0;
        return SQLITE_OK;
    }
    int rc = SQLITE_OK;
    if (!c->stack_st)
        rc = sqlite3_prepare_v2(q->store->db, "SELECT frames FROM stacks WHERE id = ?1", -1,
                                &c->stack_st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(c->stack_st, 1, id);
    rc = sqlite3_step(c->stack_st);
    *ok = false;
    if (rc == SQLITE_ROW) {
        const uint8_t *blob = sqlite3_column_blob(c->stack_st, 0);
        int64_t nf =
            pl_store_get_varints(blob, (size_t)sqlite3_column_bytes(c->stack_st, 0), c->fids, c->n);
        rc = nf < 0 ? SQLITE_OK : callsite_frames(q, c, c->fids, (size_t)nf, ok);
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(c->stack_st);
    if (rc != SQLITE_OK)
        return rc;
    return pl_store_u64_map_put(&c->stacks, (uint64_t)id, *ok) ? SQLITE_OK : SQLITE_NOMEM;
}

/* pl_qcallsite(stack id): 1 when the stack starts with the request's call
 * site (a filter in SQL, so rows are summed per step, not per stack). */
typedef struct callsite_sql {
    pl_qctx *q;
    callsite *c;
} callsite_sql;

static void callsite_fn_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    callsite_sql *a = sqlite3_user_data(ctx);
    bool ok = false;
    int rc = a ? callsite_stack(a->q, a->c, sqlite3_value_int64(argv[0]), &ok) : SQLITE_MISUSE;
    if (rc != SQLITE_OK)
        sqlite3_result_error_code(ctx, rc);
    else
        sqlite3_result_int(ctx, ok);
}

/* ---- merged stacks ------------------------------------------------------ */

/* Function id -> tree name index, loaded on first use. */
typedef struct fn_names {
    u64_map map;
    sqlite3_stmt *st;
} fn_names;

static int fn_name(pl_qctx *q, fn_names *fns, pl_qtree *tree, int64_t fn, int32_t *out)
{
    int64_t v;
    if (pl_store_u64_map_get(&fns->map, (uint64_t)fn, &v)) {
        *out = (int32_t)v;
        return SQLITE_OK;
    }
    int rc = SQLITE_OK;
    if (!fns->st)
        rc = sqlite3_prepare_v2(q->store->db,
                                "SELECT st.value FROM functions f JOIN strings st ON st.id = "
                                "f.name_id WHERE f.id = ?1",
                                -1, &fns->st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(fns->st, 1, fn);
    rc = sqlite3_step(fns->st);
    const char *name = "<unknown>";
    size_t len = 9;
    if (rc == SQLITE_ROW) {
        name = (const char *)sqlite3_column_text(fns->st, 0);
        len = (size_t)sqlite3_column_bytes(fns->st, 0);
        if (!name)
            name = "", len = 0;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    int32_t idx = rc == SQLITE_OK ? pl_qtree_name(tree, name, len) : -1;
    sqlite3_reset(fns->st);
    if (rc != SQLITE_OK)
        return rc;
    if (idx < 0 || !pl_store_u64_map_put(&fns->map, (uint64_t)fn, idx))
        return SQLITE_NOMEM;
    *out = idx;
    return SQLITE_OK;
}

/* Adds the rows of `stmt` (value, frames blob) that start with the call
 * site to the tree. */
static int add_stacks(pl_qctx *q, sqlite3_stmt *stmt, callsite *cs, pl_qtree *tree)
{
    fn_names fns = {0};
    int64_t local_f[512];
    int32_t local_n[512];
    int64_t *fids = local_f;
    int32_t *names = local_n;
    size_t cap = 512;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        int64_t value = sqlite3_column_int64(stmt, 0);
        const uint8_t *blob = sqlite3_column_blob(stmt, 1);
        size_t len = (size_t)sqlite3_column_bytes(stmt, 1);
        int64_t nf = pl_store_get_varints(blob, len, fids, cap);
        if (nf < 0 || value == 0)
            continue;
        if ((size_t)nf > cap) { /* a deep stack: room for all its frames */
            int64_t *f2 = malloc((size_t)nf * sizeof(int64_t));
            int32_t *n2 = malloc((size_t)nf * sizeof(int32_t));
            if (!f2 || !n2) {
                free(f2);
                free(n2);
                rc = SQLITE_NOMEM;
                break;
            }
            if (fids != local_f) {
                free(fids);
                free(names);
            }
            fids = f2;
            names = n2;
            cap = (size_t)nf;
            pl_store_get_varints(blob, len, fids, cap);
        }
        bool selected = true;
        rc = cs->n ? callsite_frames(q, cs, fids, (size_t)nf, &selected) : SQLITE_OK;
        if (rc != SQLITE_OK)
            break;
        if (!selected)
            continue;
        for (int64_t i = 0; i < nf && rc == SQLITE_OK; i++)
            rc = fn_name(q, &fns, tree, fids[i], &names[i]);
        if (rc != SQLITE_OK)
            break;
        if (pl_qtree_add(tree, names, (size_t)nf, value)) {
            rc = SQLITE_NOMEM;
            break;
        }
    }
    if (fids != local_f) {
        free(fids);
        free(names);
    }
    sqlite3_finalize(fns.st);
    pl_store_u64_map_clear(&fns.map);
    return rc;
}

pl_status pl_q_merge(pl_qctx *q, const pl_qrequest *r, bool spans, pl_qtree *tree,
                     const pl_qtype **type)
{
    pl_status st = request_type(q, r, type);
    if (st != PL_OK)
        return st;
    int64_t *ids = NULL;
    size_t n_ids = 0, n_tids = 0;
    uint8_t *tids = NULL;
    /* span, profile id and trace selectors: the samples of any of them */
    spans = spans || r->span_selector.n || r->profile_id_selector.n || r->trace_id_selector.n;
    if (spans && (st = span_ids(q, r, &ids, &n_ids)) != PL_OK)
        return st;
    if (spans && (st = trace_ids(q, r, &tids, &n_tids)) != PL_OK) {
        free(ids);
        return st;
    }
    qfilter f; /* the stored type's id: a request's `:delta` form names it too */
    st = filter_build(q, r, r->label_selector, *type ? (*type)->id : r->profile_type, &f);
    if (st != PL_OK || !*type || f.empty || (spans && !n_ids && !n_tids)) {
        filter_free(&f);
        free(ids);
        free(tids);
        return st;
    }
    if (spans) {
        f.span_ids = ids;
        f.n_span_ids = n_ids;
        f.trace_ids = tids;
        f.n_trace_ids = n_tids;
    }
    bool join = f.span_matchers || spans;
    const source *src = join ? &SAMPLES : &ROLLUP;
    qsql sql = {0};
    pl_buf_init(&sql.sql);
    pl_buf_append_str(&sql.sql, "SELECT x.v, k.frames FROM (SELECT s.stack_id AS id, "
                                "sum(s.value) AS v");
    from_clause(&sql, src, f.span_matchers, &f);
    where_clause(&sql, &f, src, ANY, ANY, &q->arena);
    pl_buf_append_str(&sql.sql, " GROUP BY s.stack_id) x JOIN stacks k ON k.id = x.id");
    sqlite3_stmt *stmt;
    callsite cs;
    int rc = prepare(q, &sql, &f, &stmt);
    st = callsite_init(q, r, &cs);
    if (rc == SQLITE_OK && st == PL_OK)
        rc = add_stacks(q, stmt, &cs, tree);
    callsite_free(&cs);
    unprepare(q, stmt);
    qsql_free(&sql);
    filter_free(&f);
    free(ids);
    free(tids);
    if (st != PL_OK)
        return st;
    return rc == SQLITE_DONE ? PL_OK : sql_fail(q, rc);
}

/* ---- SelectSeries ------------------------------------------------------- */

#define MAX_POINTS 11000 /* per series, as Prometheus */
#define MAX_SERIES 10000

typedef struct sacc {
    pl_qlabel *labels;
    size_t n_labels;
    double *values; /* per step */
    uint8_t *has;
    double sum;
} sacc;

static int by_sum_desc(const void *a, const void *b)
{
    double x = ((const sacc *)a)->sum, y = ((const sacc *)b)->sum;
    return x < y ? 1 : x > y ? -1 : 0;
}

pl_status pl_q_select_series(pl_qctx *q, const pl_qrequest *r, pl_qseries **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    const pl_qtype *type;
    pl_status st = request_type(q, r, &type);
    if (st != PL_OK)
        return st;
    double step_s = r->step > 0 && isfinite(r->step) ? r->step : 15;
    if (step_s > 1e9)
        step_s = 1e9; /* a step longer than any range: one point */
    int64_t step_ms = (int64_t)(step_s * 1000);
    if (step_ms < 1)
        step_ms = 1;
    qfilter f;
    st = filter_build(q, r, r->label_selector, type ? type->id : r->profile_type, &f);
    if (st != PL_OK || !type || f.empty) {
        filter_free(&f);
        return st;
    }
    if (f.end_ms < f.start_ms || (f.end_ms - f.start_ms) / step_ms + 1 > MAX_POINTS) {
        filter_free(&f);
        return pl_errf(q->err, PL_ERR_INVALID,
                       "step: more than %d points per series; use a larger step", MAX_POINTS);
    }
    size_t n_steps = (size_t)((f.end_ms - f.start_ms) / step_ms + 1);
    bool span_groups = false;
    for (size_t g = 0; g < r->group_by.n; g++) {
        lkind k = label_kind(q, r->group_by.items[g]);
        if (span_label(k)) {
            if (strchr(r->group_by.items[g], '"') || strchr(r->group_by.items[g], '\\')) {
                filter_free(&f);
                return pl_errf(q->err, PL_ERR_INVALID, "group_by: no quotes or backslashes");
            }
            span_groups = true;
        }
    }
    bool join = f.span_matchers || span_groups;
    callsite cs;
    st = callsite_init(q, r, &cs);
    if (st != PL_OK) {
        callsite_free(&cs);
        filter_free(&f);
        return st;
    }
    /* without span labels the totals per (service, type, 10 s), the same
     * buckets as the samples' (a bucket goes to the step its start falls
     * in); those have no stacks: a call site reads the samples, per stack */
    const source *src = join || cs.n ? &SAMPLES : &TOTALS;
    qsql sql = {0};
    pl_buf_init(&sql.sql);
    pl_buf_printf(&sql.sql, "SELECT s.%s, s.service_id, sum(s.value)", src->bucket);
    for (size_t g = 0; g < r->group_by.n; g++)
        if (span_label(label_kind(q, r->group_by.items[g]))) {
            pl_buf_append_byte(&sql.sql, ',');
            label_expr(&sql, r->group_by.items[g], &q->arena);
        }
    from_clause(&sql, src, join, &f);
    where_clause(&sql, &f, src, ANY, ANY, &q->arena);
    if (cs.n)
        pl_buf_append_str(&sql.sql, " AND pl_qcallsite(s.stack_id)");
    pl_buf_append_str(&sql.sql, " GROUP BY 1, 2");
    for (size_t g = 0, c = 4; g < r->group_by.n; g++)
        if (span_label(label_kind(q, r->group_by.items[g])))
            pl_buf_printf(&sql.sql, ", %zu", c++);
    callsite_sql csq = {q, &cs};
    int rc = sqlite3_create_function(q->store->db, "pl_qcallsite", 1, SQLITE_UTF8, &csq,
                                     callsite_fn_sql, NULL, NULL);
    sqlite3_stmt *stmt = NULL;
    if (rc == SQLITE_OK)
        rc = prepare(q, &sql, &f, &stmt);
    sacc *acc = NULL;
    size_t n_acc = 0, cap = 0;
    pl_intern index = {0};
    pl_buf key;
    pl_buf_init(&key);
    while (next_row(&rc, stmt)) {
        int64_t ts = sqlite3_column_int64(stmt, 0) * src->width_ms;
        if (ts < f.start_ms)
            ts = f.start_ms;
        size_t k = (size_t)((ts - f.start_ms) / step_ms);
        if (k >= n_steps)
            continue;
        const struct pl_qservice *sv = service_by_id(q, sqlite3_column_int64(stmt, 1));
        const char *svc = sv ? sv->name : "";
        double v = (double)sqlite3_column_int64(stmt, 2);
        pl_buf_reset(&key);
        for (size_t g = 0, c = 3; g < r->group_by.n; g++) {
            lkind lk = label_kind(q, r->group_by.items[g]);
            const char *lv = lk == L_SERVICE  ? svc
                             : lk == L_SDK    ? (sv ? sdk_label(sv, r->group_by.items[g]) : "")
                             : span_label(lk) ? (const char *)sqlite3_column_text(stmt, (int)c++)
                                              : type_label(type, lk);
            pl_buf_append_str(&key, lv ? lv : "");
            pl_buf_append_byte(&key, 0);
        }
        if (!pl_buf_ok(&key)) {
            rc = SQLITE_NOMEM;
            break;
        }
        uint64_t h = pl_hash_bytes(key.data, key.len);
        size_t slot;
        int32_t at = pl_intern_find(&index, key.data ? key.data : (const uint8_t *)"",
                                    (uint32_t)key.len, h, &slot);
        if (at < 0) {
            rc = SQLITE_NOMEM;
            break;
        }
        if (at == 0) {
            if (n_acc >= MAX_SERIES) {
                rc = SQLITE_TOOBIG;
                break;
            }
            if (pl_array_reserve((void **)&acc, n_acc, &cap, sizeof(sacc), 16) ||
                pl_intern_add(&index, slot, key.data ? key.data : (const uint8_t *)"",
                              (uint32_t)key.len, h, (int32_t)n_acc + 1)) {
                rc = SQLITE_NOMEM;
                break;
            }
            sacc *a = &acc[n_acc++];
            memset(a, 0, sizeof(*a));
            a->values = calloc(n_steps, sizeof(double));
            a->has = calloc(n_steps, 1);
            a->labels = pl_arena_calloc(&q->arena, r->group_by.n + 1, sizeof(pl_qlabel));
            if (!a->values || !a->has || !a->labels) {
                rc = SQLITE_NOMEM;
                break;
            }
            const char *p = (const char *)key.data;
            for (size_t g = 0; g < r->group_by.n; g++) {
                a->labels[g].name = r->group_by.items[g];
                a->labels[g].value = pl_arena_memdup(&q->arena, p, strlen(p) + 1);
                if (!a->labels[g].value)
                    rc = SQLITE_NOMEM;
                p += strlen(p) + 1;
            }
            a->n_labels = r->group_by.n;
            qsort(a->labels, a->n_labels, sizeof(pl_qlabel), cmp_label);
            at = (int32_t)n_acc;
        }
        sacc *a = &acc[at - 1];
        a->values[k] += v;
        a->has[k] = 1;
        a->sum += v;
    }
    unprepare(q, stmt);
    sqlite3_create_function(q->store->db, "pl_qcallsite", 1, SQLITE_UTF8, NULL, callsite_fn_sql,
                            NULL, NULL);
    callsite_free(&cs);
    qsql_free(&sql);
    pl_buf_free(&key);
    pl_intern_free(&index);
    filter_free(&f);
    if (rc == SQLITE_DONE) {
        if (n_acc)
            qsort(acc, n_acc, sizeof(sacc), by_sum_desc);
        size_t keep =
            r->has_limit && r->limit > 0 && (size_t)r->limit < n_acc ? (size_t)r->limit : n_acc;
        *out = pl_arena_calloc(&q->arena, keep + 1, sizeof(pl_qseries));
        for (size_t i = 0; *out && i < keep; i++) {
            pl_qseries *s = &(*out)[i];
            s->labels = acc[i].labels;
            s->n_labels = acc[i].n_labels;
            s->sum = acc[i].sum;
            size_t np = 0;
            for (size_t k = 0; k < n_steps; k++)
                np += acc[i].has[k];
            s->ts_ms = pl_arena_calloc(&q->arena, np + 1, sizeof(int64_t));
            s->values = pl_arena_calloc(&q->arena, np + 1, sizeof(double));
            if (!s->ts_ms || !s->values) {
                *out = NULL;
                break;
            }
            for (size_t k = 0; k < n_steps; k++)
                if (acc[i].has[k]) {
                    s->ts_ms[s->n_points] = f.start_ms + (int64_t)k * step_ms;
                    s->values[s->n_points++] = acc[i].values[k];
                }
        }
        *n = *out ? keep : 0;
        if (!*out)
            rc = SQLITE_NOMEM;
    }
    for (size_t i = 0; i < n_acc; i++) {
        free(acc[i].values);
        free(acc[i].has);
    }
    free(acc);
    if (rc == SQLITE_TOOBIG)
        return pl_errf(q->err, PL_ERR_INVALID,
                       "group_by: more than %d series; narrow the selector or set limit",
                       MAX_SERIES);
    return rc == SQLITE_DONE ? PL_OK : sql_fail(q, rc);
}

/* ---- GetProfileStats ---------------------------------------------------- */

pl_status pl_q_profile_stats(pl_qctx *q, bool *ingested, int64_t *oldest_ms, int64_t *newest_ms)
{
    *ingested = false;
    *oldest_ms = *newest_ms = 0;
    sqlite3_stmt *lo = NULL, *hi = NULL;
    sqlite3 *db = q->store->db;
    int rc = sqlite3_prepare_v2(db, "SELECT min(bucket) FROM samples WHERE service_id = ?1", -1,
                                &lo, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "SELECT max(bucket) FROM samples WHERE service_id = ?1", -1,
                                &hi, NULL);
    for (size_t i = 0; rc == SQLITE_OK && i < q->n_services; i++) {
        sqlite3_stmt *both[2] = {lo, hi};
        for (int k = 0; k < 2 && rc == SQLITE_OK; k++) {
            sqlite3_bind_int64(both[k], 1, q->services[i].id);
            rc = sqlite3_step(both[k]);
            if (rc == SQLITE_ROW && sqlite3_column_type(both[k], 0) != SQLITE_NULL) {
                int64_t ms = sqlite3_column_int64(both[k], 0) * SAMPLES.width_ms;
                if (k == 0 && (!*ingested || ms < *oldest_ms))
                    *oldest_ms = ms;
                if (k == 1 && (!*ingested || ms + SAMPLES.width_ms > *newest_ms))
                    *newest_ms = ms + SAMPLES.width_ms;
                if (k == 1)
                    *ingested = true;
            }
            rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
            sqlite3_reset(both[k]);
        }
    }
    sqlite3_finalize(lo);
    sqlite3_finalize(hi);
    return rc == SQLITE_OK ? PL_OK : sql_fail(q, rc);
}
