/*
 * store_query.c: the queries of the embedded store (recent traces, one
 * trace's span tree, profiles of a span, trace or service, services).
 *
 * Queries run a handful of indexed SQL statements and do the rest (choosing
 * the sample type, summing rows, decoding stacks, building folded stacks and
 * per-function totals) in C, where it is cheap: stacks and functions are
 * decoded once per distinct id.
 */
#include "store/store_internal.h"
#include "store/store_terms.h"

/* the spans of the trace(s) whose id meets C, as sp (PL_TRACE_SPANS) */
#define TRACE_SPANS(C) PL_TRACE_SPANS("sp", C)

pl_status pl_store_query_fail(pl_store *s, int rc, pl_err *err)
{
    if (rc == SQLITE_NOMEM)
        return pl_errf(err, PL_ERR_NOMEM, "sqlite store %s: out of memory", s->path);
    return pl_store_fail(s, rc, err, "query failed");
}

/* One read transaction around a query: a consistent snapshot, and one
 * shared lock instead of one per statement (decoding 100,000 stacks is
 * 100,000 lookups). Returns whether it began one (not when the caller is
 * inside a transaction already). */
static bool read_begin(pl_store *s)
{
    return sqlite3_get_autocommit(s->db) &&
           sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
}

static void read_end(pl_store *s, bool began)
{
    if (began)
        sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
}

/* A query's result lives in its arena: freeing it forgets every pointer. */
static void result_free(pl_arena *arena, void *result, size_t size)
{
    pl_arena_free(arena);
    memset(result, 0, size);
}

/* Ends a read; on failure frees the partial result and reports. */
static pl_status read_done(pl_store *s, bool began, int rc, pl_arena *arena, void *result,
                           size_t size, pl_err *err)
{
    read_end(s, began);
    if (rc == SQLITE_OK)
        return PL_OK;
    result_free(arena, result, size);
    return pl_store_query_fail(s, rc, err);
}

static const char *arena_text(pl_arena *a, const unsigned char *text, int len)
{
    if (!text)
        return "";
    char *out = pl_arena_memdup(a, text, (size_t)len);
    return out ? out : "";
}

static const char *column_text(pl_arena *a, sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    return arena_text(a, t, sqlite3_column_bytes(st, col));
}

/* The span ids of the trace bound to ?1 (through its span ranges). */
#define SPAN_IDS_OF_TRACE "SELECT sp.span_id FROM " TRACE_SPANS("= ?1")
/* The sample rows `s` of those spans (PL_SPAN_SAMPLES). */
#define SAMPLES_OF_TRACE_SPANS PL_SPAN_SAMPLES("(" SPAN_IDS_OF_TRACE ")")

/* CPU time, wall time and sample count of a trace: per sample type, the sum
 * over samples of its spans plus samples that name the trace but no stored
 * span; the largest type wins (a pprof CPU profile carries the same samples
 * as samples:count and cpu:nanoseconds; adding both would double them).
 * Counts only come from types counted in "count" (never bytes of a heap
 * profile). */
static const char trace_cpu_sql[] =
    "SELECT max(c), max(w), max(CASE WHEN (SELECT value FROM strings WHERE id = type_id) "
    "LIKE '%:count' THEN v END) FROM (SELECT type_id, sum(cpu_ns) AS c, sum(wall_ns) AS w, "
    "sum(value) AS v FROM ("
    " SELECT type_id, cpu_ns, wall_ns, value FROM " SAMPLES_OF_TRACE_SPANS " UNION ALL"
    " SELECT type_id, cpu_ns, wall_ns, value FROM samples WHERE trace_id = ?1 AND (span_id = 0 "
    "  OR span_id NOT IN (" SPAN_IDS_OF_TRACE "))"
    ") GROUP BY type_id)";

/* Fills cpu_ns (-1: no samples) and the time shown (CPU, else wall, else count). */
static int trace_cpu(sqlite3_stmt *st, const uint8_t trace_id[16], pl_trace_summary *t)
{
    sqlite3_bind_blob(st, 1, trace_id, 16, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    t->cpu_ns = -1;
    t->time_kind = PL_TIME_NONE;
    t->time = 0;
    if (rc == SQLITE_ROW) {
        if (sqlite3_column_type(st, 0) != SQLITE_NULL)
            t->cpu_ns = sqlite3_column_int64(st, 0);
        int64_t wall = sqlite3_column_int64(st, 1), count = sqlite3_column_int64(st, 2);
        if (t->cpu_ns > 0) {
            t->time_kind = PL_TIME_CPU;
            t->time = t->cpu_ns;
        } else if (wall > 0) {
            t->time_kind = PL_TIME_WALL;
            t->time = wall;
        } else if (count > 0) {
            t->time_kind = PL_TIME_COUNT;
            t->time = count;
        }
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(st);
    return rc;
}

static void read_summary(pl_arena *a, sqlite3_stmt *st, pl_trace_summary *t)
{
    /* columns: trace_id, start, end, root_span_id, root_name, root_service,
     * root_start, root_end, span_count, error_count, dur */
    const void *id = sqlite3_column_blob(st, 0);
    if (id && sqlite3_column_bytes(st, 0) == 16)
        memcpy(t->trace_id, id, 16);
    t->start_ns = (uint64_t)sqlite3_column_int64(st, 1);
    t->has_root = sqlite3_column_type(st, 3) != SQLITE_NULL;
    t->root_name = column_text(a, st, 4);
    t->root_service = column_text(a, st, 5);
    t->span_count = (uint32_t)sqlite3_column_int64(st, 8);
    t->error_count = (uint32_t)sqlite3_column_int64(st, 9);
    int64_t dur = sqlite3_column_int64(st, 10);
    t->duration_ns = dur > 0 ? (uint64_t)dur : 0;
    t->tenant = column_text(a, st, 11);
    t->cpu_ns = -1;
}

#define SUMMARY_COLUMNS                                                                            \
    "trace_id, start_ns, end_ns, root_span_id, root_name, root_service, root_start_ns, "           \
    "root_end_ns, span_count, error_count, duration_ns, tenant"

/* Sort key of a trace by time: CPU or wall nanoseconds; counts and none last. */
static int64_t time_key(const pl_trace_summary *t)
{
    return (t->time_kind == PL_TIME_CPU || t->time_kind == PL_TIME_WALL) ? t->time : -1;
}

static int cmp_by_time(const void *a, const void *b)
{
    int64_t x = time_key(a), y = time_key(b);
    if (x != y)
        return x > y ? -1 : 1;
    const pl_trace_summary *p = a, *q = b;
    return p->duration_ns > q->duration_ns ? -1 : p->duration_ns < q->duration_ns;
}

pl_status pl_store_query_traces(pl_store *s, const pl_trace_query *q, pl_trace_list *out,
                                pl_err *err)
{
    bool began = read_begin(s);
    memset(out, 0, sizeof(*out));
    pl_arena_init(&out->arena);
    uint32_t limit = q->limit ? q->limit : 20;
    bool ranked = q->by_time || q->min_time > 0;
    uint32_t fetch =
        ranked ? (limit > PL_STORE_TIME_CANDIDATES ? limit : PL_STORE_TIME_CANDIDATES) : limit;
    /* Two plans. Few traces in the window: read them by start time and sort.
     * Many: walk the duration index from the slowest down and stop after
     * `limit` matches, which touches about limit / (share of traces in the
     * window) rows instead of the whole window. */
    int64_t in_window = 0;
    {
        sqlite3_stmt *cnt = NULL;
        int crc = sqlite3_prepare_v2(s->db,
                                     "SELECT count(*) FROM (SELECT 1 FROM traces WHERE start_ns >= "
                                     "?1 AND start_ns <= ?2 LIMIT 20000)",
                                     -1, &cnt, NULL);
        if (crc == SQLITE_OK) {
            sqlite3_bind_int64(cnt, 1, (int64_t)q->since_ns);
            sqlite3_bind_int64(cnt, 2, q->until_ns ? (int64_t)q->until_ns : INT64_MAX);
            if (sqlite3_step(cnt) == SQLITE_ROW)
                in_window = sqlite3_column_int64(cnt, 0);
        }
        sqlite3_finalize(cnt);
    }
    bool by_duration = in_window >= 20000 || in_window > (int64_t)fetch * 200;
    char extra[256];
    snprintf(extra, sizeof(extra), "%s%s%s%s", q->root_name ? " AND root_name = ?5" : "",
             q->until_ns ? " AND start_ns <= ?6" : "", q->errors_only ? " AND error_count > 0" : "",
             q->tenant ? " AND tenant = ?7" : "");
    char sql[1536];
    if (by_duration)
        snprintf(sql, sizeof(sql),
                 "SELECT " SUMMARY_COLUMNS " FROM traces INDEXED BY traces_by_duration "
                 "WHERE duration_ns >= ?2 AND start_ns >= ?1 %s %s "
                 "ORDER BY duration_ns DESC LIMIT ?4",
                 q->service ? "AND EXISTS (SELECT 1 FROM " TRACE_SPANS(
                                  "= traces.trace_id") " WHERE sp.service = ?3)"
                            : "",
                 extra);
    else
        snprintf(sql, sizeof(sql),
                 "SELECT " SUMMARY_COLUMNS " FROM traces WHERE start_ns >= ?1 AND duration_ns >= "
                 "?2 %s %s ORDER BY duration_ns DESC, start_ns DESC LIMIT ?4",
                 q->service ? "AND trace_id IN (SELECT s.trace_id FROM " PL_BUCKET_SPANS(
                                  "s") " WHERE b_.bucket >= ?8 AND s.service = ?3 AND "
                                       "s.start_ns >= ?1)"
                            : "",
                 extra);
    sqlite3_stmt *st = NULL, *cpu = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, trace_cpu_sql, -1, &cpu, NULL);
    if (rc != SQLITE_OK)
        goto done;
    sqlite3_bind_int64(st, 1, (int64_t)q->since_ns);
    sqlite3_bind_int64(st, 2, (int64_t)q->min_duration_ns);
    if (q->service)
        sqlite3_bind_text(st, 3, q->service, -1, SQLITE_STATIC);
    if (q->service && !by_duration) /* the buckets from since's on */
        sqlite3_bind_int64(st, 8, pl_terms_bucket((int64_t)q->since_ns));
    sqlite3_bind_int64(st, 4, fetch);
    if (q->root_name)
        sqlite3_bind_text(st, 5, q->root_name, -1, SQLITE_STATIC);
    if (q->until_ns)
        sqlite3_bind_int64(st, 6, (int64_t)q->until_ns);
    if (q->tenant)
        sqlite3_bind_text(st, 7, q->tenant, -1, SQLITE_STATIC);
    out->items = pl_arena_calloc(&out->arena, fetch, sizeof(pl_trace_summary));
    if (!out->items) {
        rc = SQLITE_NOMEM;
        goto done;
    }
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && out->n < fetch)
        read_summary(&out->arena, st, &out->items[out->n++]);
    if (rc == SQLITE_DONE || rc == SQLITE_ROW)
        rc = SQLITE_OK;
    for (size_t i = 0; i < out->n && rc == SQLITE_OK; i++)
        rc = trace_cpu(cpu, out->items[i].trace_id, &out->items[i]);
    if (rc == SQLITE_OK && ranked) {
        size_t kept = 0;
        for (size_t i = 0; i < out->n; i++)
            if (q->min_time <= 0 || time_key(&out->items[i]) >= q->min_time)
                out->items[kept++] = out->items[i];
        out->n = kept;
        if (q->by_time && out->n > 1)
            qsort(out->items, out->n, sizeof(pl_trace_summary), cmp_by_time);
        if (out->n > limit)
            out->n = limit;
    }
done:
    sqlite3_finalize(st);
    sqlite3_finalize(cpu);
    return read_done(s, began, rc, &out->arena, out, sizeof(*out), err);
}

void pl_trace_list_free(pl_trace_list *list)
{
    result_free(&list->arena, list, sizeof(*list));
}

/* ---- decoding stacks for queries ---------------------------------------- */

typedef struct fn_info {
    const char *name;
    const char *file;
} fn_info;

typedef struct stack_info {
    uint32_t *fns; /* indices into decoder.fns, root first */
    uint32_t n;
    const char *folded; /* built on demand */
} stack_info;

typedef struct decoder {
    pl_store *s;
    pl_arena *arena;
    sqlite3_stmt *sel_fn, *sel_stack;
    u64_map fn_index; /* function id -> index + 1 */
    fn_info *fns;
    size_t n_fns, cap_fns;
    u64_map stack_index; /* stack id -> index + 1 */
    stack_info *stacks;
    size_t n_stacks, cap_stacks;
} decoder;

static int decoder_init(decoder *d, pl_store *s, pl_arena *arena)
{
    memset(d, 0, sizeof(*d));
    d->s = s;
    d->arena = arena;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT n.value, f2.value FROM functions f "
                                "JOIN strings n ON n.id = f.name_id "
                                "JOIN strings f2 ON f2.id = f.file_id WHERE f.id = ?1",
                                -1, &d->sel_fn, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, "SELECT frames FROM stacks WHERE id = ?1", -1, &d->sel_stack,
                                NULL);
    return rc;
}

static void decoder_free(decoder *d)
{
    sqlite3_finalize(d->sel_fn);
    sqlite3_finalize(d->sel_stack);
    pl_store_u64_map_clear(&d->fn_index);
    pl_store_u64_map_clear(&d->stack_index);
    free(d->fns);
    free(d->stacks);
}

static int decode_function(decoder *d, int64_t fid, uint32_t *index)
{
    int64_t v;
    if (pl_store_u64_map_get(&d->fn_index, (uint64_t)fid, &v)) {
        *index = (uint32_t)(v - 1);
        return SQLITE_OK;
    }
    fn_info info = {"<unknown>", ""};
    sqlite3_bind_int64(d->sel_fn, 1, fid);
    int rc = sqlite3_step(d->sel_fn);
    if (rc == SQLITE_ROW) {
        info.name = column_text(d->arena, d->sel_fn, 0);
        info.file = column_text(d->arena, d->sel_fn, 1);
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(d->sel_fn);
    if (rc != SQLITE_OK)
        return rc;
    if (pl_array_reserve((void **)&d->fns, d->n_fns, &d->cap_fns, sizeof(fn_info), 256))
        return SQLITE_NOMEM;
    d->fns[d->n_fns] = info;
    *index = (uint32_t)d->n_fns++;
    return pl_store_u64_map_put(&d->fn_index, (uint64_t)fid, (int64_t)*index + 1) ? SQLITE_OK
                                                                                  : SQLITE_NOMEM;
}

static int decode_stack(decoder *d, int64_t stack_id, stack_info **out)
{
    int64_t v;
    if (pl_store_u64_map_get(&d->stack_index, (uint64_t)stack_id, &v)) {
        *out = &d->stacks[v - 1];
        return SQLITE_OK;
    }
    sqlite3_bind_int64(d->sel_stack, 1, stack_id);
    int rc = sqlite3_step(d->sel_stack);
    int64_t local[256];
    int64_t *ids = local;
    int64_t n = 0;
    if (rc == SQLITE_ROW) {
        const uint8_t *blob = sqlite3_column_blob(d->sel_stack, 0);
        size_t len = (size_t)sqlite3_column_bytes(d->sel_stack, 0);
        n = pl_store_get_varints(blob, len, local, 256);
        if (n > 256) {
            ids = malloc((size_t)n * sizeof(int64_t));
            if (ids)
                pl_store_get_varints(blob, len, ids, (size_t)n);
            else
                rc = SQLITE_NOMEM;
        }
        if (n < 0)
            n = 0; /* damaged frames: show an empty stack rather than fail */
        if (rc == SQLITE_ROW)
            rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_reset(d->sel_stack);
    stack_info info = {NULL, 0, NULL};
    if (rc == SQLITE_OK && n > 0) {
        info.fns = pl_arena_alloc(d->arena, (size_t)n * sizeof(uint32_t));
        if (!info.fns)
            rc = SQLITE_NOMEM;
        for (int64_t i = 0; i < n && rc == SQLITE_OK; i++)
            rc = decode_function(d, ids[i], &info.fns[i]);
        info.n = (uint32_t)n;
    }
    if (ids != local)
        free(ids);
    if (rc != SQLITE_OK)
        return rc;
    if (pl_array_reserve((void **)&d->stacks, d->n_stacks, &d->cap_stacks, sizeof(stack_info), 256))
        return SQLITE_NOMEM;
    d->stacks[d->n_stacks] = info;
    if (!pl_store_u64_map_put(&d->stack_index, (uint64_t)stack_id, (int64_t)d->n_stacks + 1))
        return SQLITE_NOMEM;
    *out = &d->stacks[d->n_stacks++];
    return SQLITE_OK;
}

/* "root;child;leaf", with ';' and newlines in names replaced so the folded
 * format stays parseable. */
static const char *folded_frames(decoder *d, stack_info *si)
{
    if (si->folded)
        return si->folded;
    size_t len = 0;
    for (uint32_t i = 0; i < si->n; i++)
        len += strlen(d->fns[si->fns[i]].name) + 1;
    char *out = pl_arena_alloc(d->arena, len + 1);
    if (!out)
        return "";
    char *p = out;
    for (uint32_t i = 0; i < si->n; i++) {
        if (i)
            *p++ = ';';
        for (const char *c = d->fns[si->fns[i]].name; *c; c++)
            *p++ = (*c == ';') ? ':' : (*c == '\n' || *c == '\r') ? ' ' : *c;
    }
    *p = 0;
    si->folded = out;
    return out;
}

/* Rows of (span, type, stack) aggregates. */
typedef struct prow {
    int64_t span_id, type_id, stack_id, value, cpu, count, wall;
} prow;

typedef struct prows {
    prow *v;
    size_t n, cap;
} prows;

/* Columns: [span_id,] type_id, stack_id, value, cpu, count, wall. Without a span
 * column, rows of the same (type, stack) are summed here: a hash table in C
 * is much cheaper than SQLite's GROUP BY sorter on large time ranges. */
static int fetch_rows(sqlite3_stmt *st, bool with_span, prows *out)
{
    int rc;
    u64_map index = {0};
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int c = 0;
        prow row;
        row.span_id = with_span ? sqlite3_column_int64(st, c++) : 0;
        row.type_id = sqlite3_column_int64(st, c++);
        row.stack_id = sqlite3_column_int64(st, c++);
        row.value = sqlite3_column_int64(st, c++);
        row.cpu = sqlite3_column_int64(st, c++);
        row.count = sqlite3_column_int64(st, c++);
        row.wall = sqlite3_column_int64(st, c++);
        if (!with_span) {
            uint64_t key = ((uint64_t)row.type_id << 40) ^ (uint64_t)row.stack_id;
            int64_t at;
            if (key && pl_store_u64_map_get(&index, key, &at)) {
                prow *r = &out->v[at];
                r->value += row.value;
                r->cpu += row.cpu;
                r->count += row.count;
                r->wall += row.wall;
                continue;
            }
            if (key && !pl_store_u64_map_put(&index, key, (int64_t)out->n)) {
                rc = SQLITE_NOMEM;
                break;
            }
        }
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 256;
            prow *grown = realloc(out->v, cap * sizeof(prow));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            out->v = grown;
            out->cap = cap;
        }
        out->v[out->n++] = row;
    }
    pl_store_u64_map_clear(&index);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int string_by_id(pl_store *s, int64_t id, pl_arena *a, const char **out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM strings WHERE id = ?1", -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = sqlite3_step(st);
    *out = rc == SQLITE_ROW ? column_text(a, st, 0) : "";
    sqlite3_finalize(st);
    return (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
}

/* Which column of the rows a choice sums. */
enum { COL_VALUE = 0, COL_CPU, COL_WALL };

typedef struct type_choice {
    bool found;
    int col; /* COL_CPU / COL_WALL: that clock's nanoseconds; COL_VALUE: the type's values */
    pl_time_kind kind; /* what the values are as time: CPU, wall, count, or none (heap...) */
    int64_t type_id;
    const char *name; /* "cpu:nanoseconds", "wall:nanoseconds" or the stored "type:unit" */
} type_choice;

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

#define MAX_TYPES 32

/* Picks the sample type to show among rows[0..n).
 *   want NULL/"": the type with the most CPU time, else the most wall time,
 *     else the counted type ("...:count") with the most samples, else
 *     (unless time_only) the first stored type;
 *   "cpu" / "wall": the type with the most of that clock's time;
 *   otherwise the type named `want` ("alloc_space" or "alloc_space:bytes").
 * `types` (when not NULL) receives what else could be asked for. */
static int choose_type(pl_store *s, pl_arena *a, const prow *rows, size_t n, const char *want,
                       bool time_only, type_choice *out, const char ***types, size_t *n_types)
{
    memset(out, 0, sizeof(*out));
    int64_t ids[MAX_TYPES], cpu[MAX_TYPES], wall[MAX_TYPES], val[MAX_TYPES];
    const char *names[MAX_TYPES];
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        size_t t = 0;
        while (t < nt && ids[t] != rows[i].type_id)
            t++;
        if (t == nt) {
            if (nt == MAX_TYPES)
                continue;
            ids[nt] = rows[i].type_id;
            cpu[nt] = wall[nt] = val[nt] = 0;
            nt++;
        }
        cpu[t] += rows[i].cpu;
        wall[t] += rows[i].wall;
        val[t] += rows[i].value;
    }
    if (types) {
        *types = NULL;
        *n_types = 0;
    }
    if (!nt)
        return SQLITE_OK;
    /* stored order (string ids grow as types first arrive) */
    for (size_t x = 1; x < nt; x++)
        for (size_t y = x; y > 0 && ids[y] < ids[y - 1]; y--) {
            int64_t *cols[] = {ids, cpu, wall, val};
            for (int c = 0; c < 4; c++) {
                int64_t tmp = cols[c][y];
                cols[c][y] = cols[c][y - 1];
                cols[c][y - 1] = tmp;
            }
        }
    for (size_t t = 0; t < nt; t++) {
        int rc = string_by_id(s, ids[t], a, &names[t]);
        if (rc != SQLITE_OK)
            return rc;
    }
    size_t best_cpu = nt, best_wall = nt, best_count = nt;
    for (size_t t = 0; t < nt; t++) {
        if (cpu[t] > 0 && (best_cpu == nt || cpu[t] > cpu[best_cpu]))
            best_cpu = t;
        if (wall[t] > 0 && (best_wall == nt || wall[t] > wall[best_wall]))
            best_wall = t;
        if (val[t] > 0 && ends_with(names[t], ":count") &&
            (best_count == nt || val[t] > val[best_count]))
            best_count = t;
    }
    if (types) {
        *types = pl_arena_calloc(a, nt + 2, sizeof(char *));
        if (!*types)
            return SQLITE_NOMEM;
        if (best_cpu < nt)
            (*types)[(*n_types)++] = "cpu";
        if (best_wall < nt)
            (*types)[(*n_types)++] = "wall";
        for (size_t t = 0; t < nt; t++)
            (*types)[(*n_types)++] = names[t];
    }
    bool any = !want || !*want;
    if ((any || strcmp(want, "cpu") == 0) && best_cpu < nt) {
        *out = (type_choice){true, COL_CPU, PL_TIME_CPU, ids[best_cpu], "cpu:nanoseconds"};
        return SQLITE_OK;
    }
    if ((any || strcmp(want, "wall") == 0) && best_wall < nt) {
        *out = (type_choice){true, COL_WALL, PL_TIME_WALL, ids[best_wall], "wall:nanoseconds"};
        return SQLITE_OK;
    }
    if (any && best_count < nt) {
        *out = (type_choice){true, COL_VALUE, PL_TIME_COUNT, ids[best_count], names[best_count]};
        return SQLITE_OK;
    }
    if (any) {
        if (!time_only)
            *out = (type_choice){true, COL_VALUE, PL_TIME_NONE, ids[0], names[0]};
        return SQLITE_OK;
    }
    size_t wlen = strlen(want);
    for (size_t t = 0; t < nt; t++) {
        const char *name = names[t];
        if (strcmp(name, want) == 0 || (strncmp(name, want, wlen) == 0 && name[wlen] == ':')) {
            bool counted = ends_with(name, ":count");
            *out = (type_choice){true, COL_VALUE, counted ? PL_TIME_COUNT : PL_TIME_NONE, ids[t],
                                 name};
            return SQLITE_OK;
        }
    }
    return SQLITE_OK;
}

static int cmp_fn_self(const void *a, const void *b)
{
    const pl_function_stat *x = a, *y = b;
    if (x->self != y->self)
        return x->self > y->self ? -1 : 1;
    if (x->total != y->total)
        return x->total > y->total ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_folded(const void *a, const void *b)
{
    const pl_folded_stack *x = a, *y = b;
    return strcmp(x->frames, y->frames);
}

/* Per-function self and total over the rows of the chosen type. Results
 * (sorted by self) go to *out in the arena; stacks too when `stacks` set. */
static int summarize(decoder *d, const prow *rows, size_t n, const type_choice *tc,
                     pl_function_stat **out_fns, size_t *out_n_fns, pl_folded_stack **stacks,
                     size_t *n_stacks, int64_t *total)
{
    *out_fns = NULL;
    *out_n_fns = 0;
    *total = 0;
    if (stacks) {
        *stacks = NULL;
        *n_stacks = 0;
    }
    if (!tc->found)
        return SQLITE_OK;
    /* Merge rows of the same stack (a trace query may return two). */
    u64_map by_stack = {0};
    int64_t *values = calloc(n ? n : 1, sizeof(int64_t));
    int64_t *stack_ids = calloc(n ? n : 1, sizeof(int64_t));
    size_t ns = 0;
    int rc = (values && stack_ids) ? SQLITE_OK : SQLITE_NOMEM;
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        if (rows[i].type_id != tc->type_id)
            continue;
        int64_t v = tc->col == COL_CPU    ? rows[i].cpu
                    : tc->col == COL_WALL ? rows[i].wall
                                          : rows[i].value;
        if (v == 0)
            continue;
        int64_t idx;
        if (pl_store_u64_map_get(&by_stack, (uint64_t)rows[i].stack_id, &idx)) {
            values[idx - 1] += v;
        } else {
            stack_ids[ns] = rows[i].stack_id;
            values[ns++] = v;
            if (!pl_store_u64_map_put(&by_stack, (uint64_t)rows[i].stack_id, (int64_t)ns))
                rc = SQLITE_NOMEM;
        }
    }
    pl_store_u64_map_clear(&by_stack);
    /* indices, not pointers: decoding more stacks may move d->stacks */
    size_t *infos = calloc(ns ? ns : 1, sizeof(size_t));
    if (!infos)
        rc = SQLITE_NOMEM;
    for (size_t i = 0; i < ns && rc == SQLITE_OK; i++) {
        stack_info *si = NULL;
        rc = decode_stack(d, stack_ids[i], &si);
        if (rc == SQLITE_OK)
            infos[i] = (size_t)(si - d->stacks);
    }
    int64_t *self = NULL, *tot = NULL;
    uint32_t *seen = NULL;
    if (rc == SQLITE_OK) {
        size_t nf = d->n_fns ? d->n_fns : 1;
        self = calloc(nf, sizeof(int64_t));
        tot = calloc(nf, sizeof(int64_t));
        seen = calloc(nf, sizeof(uint32_t));
        if (!self || !tot || !seen)
            rc = SQLITE_NOMEM;
    }
    if (rc == SQLITE_OK && stacks && ns) {
        *stacks = pl_arena_calloc(d->arena, ns, sizeof(pl_folded_stack));
        if (!*stacks)
            rc = SQLITE_NOMEM;
    }
    for (size_t i = 0; i < ns && rc == SQLITE_OK; i++) {
        stack_info *si = &d->stacks[infos[i]];
        *total += values[i];
        if (si->n) {
            self[si->fns[si->n - 1]] += values[i];
            for (uint32_t f = 0; f < si->n; f++) {
                uint32_t fi = si->fns[f];
                if (seen[fi] == i + 1)
                    continue; /* recursion: count a function once per stack */
                seen[fi] = (uint32_t)(i + 1);
                tot[fi] += values[i];
            }
        }
        if (stacks) {
            pl_folded_stack *fs = &(*stacks)[(*n_stacks)++];
            fs->frames = folded_frames(d, si);
            fs->value = values[i];
            fs->leaf_function = si->n ? si->fns[si->n - 1] : 0;
        }
    }
    if (rc == SQLITE_OK) {
        size_t count = 0;
        for (size_t f = 0; f < d->n_fns; f++)
            if (tot[f])
                count++;
        if (count) {
            *out_fns = pl_arena_calloc(d->arena, count, sizeof(pl_function_stat));
            if (!*out_fns)
                rc = SQLITE_NOMEM;
        }
        for (size_t f = 0; f < d->n_fns && rc == SQLITE_OK; f++) {
            if (!tot[f])
                continue;
            (*out_fns)[(*out_n_fns)++] =
                (pl_function_stat){d->fns[f].name, d->fns[f].file, self[f], tot[f]};
        }
        if (*out_n_fns)
            qsort(*out_fns, *out_n_fns, sizeof(pl_function_stat), cmp_fn_self);
        if (stacks && *n_stacks)
            qsort(*stacks, *n_stacks, sizeof(pl_folded_stack), cmp_folded);
    }
    free(self);
    free(tot);
    free(seen);
    free(infos);
    free(values);
    free(stack_ids);
    return rc;
}

/* ---- one trace ---------------------------------------------------------- */

static int cmp_prow_span(const void *a, const void *b)
{
    const prow *x = a, *y = b;
    return x->span_id < y->span_id ? -1 : x->span_id > y->span_id;
}

pl_status pl_store_query_trace(pl_store *s, const uint8_t trace_id[16], size_t top_n,
                               pl_trace_detail *out, pl_err *err)
{
    bool began = read_begin(s);
    memset(out, 0, sizeof(*out));
    pl_arena_init(&out->arena);
    pl_arena *a = &out->arena;
    sqlite3_stmt *sum = NULL, *spans = NULL, *samples = NULL, *cpu = NULL;
    prows rows = {0};
    decoder dec;
    bool dec_ok = false;
    u64_map index = {0};
    pl_span_row *tmp = NULL;
    size_t n = 0, cap = 0;
    int rc = sqlite3_prepare_v2(s->db, "SELECT " SUMMARY_COLUMNS " FROM traces WHERE trace_id = ?1",
                                -1, &sum, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(
            s->db,
            "SELECT span_id, parent_span_id, name, service, kind, start_ns, end_ns, status_code, "
            "status_message, attributes, profile_id, profile_samples, cpu_time_ns, top_functions, "
            "(SELECT value FROM strings WHERE id = resource_id), events "
            "FROM " TRACE_SPANS("= ?1") " ORDER BY sp.start_ns, sp.span_id",
            -1, &spans, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db,
                                "SELECT span_id, type_id, stack_id, sum(value), sum(cpu_ns), "
                                "sum(count), sum(wall_ns) FROM " SAMPLES_OF_TRACE_SPANS
                                " GROUP BY span_id, type_id, stack_id",
                                -1, &samples, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(s->db, trace_cpu_sql, -1, &cpu, NULL);
    if (rc == SQLITE_OK) {
        rc = decoder_init(&dec, s, a);
        dec_ok = true;
    }
    if (rc != SQLITE_OK)
        goto done;

    sqlite3_bind_blob(sum, 1, trace_id, 16, SQLITE_STATIC);
    rc = sqlite3_step(sum);
    if (rc == SQLITE_ROW)
        read_summary(a, sum, &out->summary);
    else
        memcpy(out->summary.trace_id, trace_id, 16);
    rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
    if (rc == SQLITE_OK)
        rc = trace_cpu(cpu, trace_id, &out->summary);

    sqlite3_bind_blob(spans, 1, trace_id, 16, SQLITE_STATIC);
    while (rc == SQLITE_OK) {
        rc = sqlite3_step(spans);
        if (rc != SQLITE_ROW)
            break;
        rc = SQLITE_OK;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            pl_span_row *grown = realloc(tmp, cap * sizeof(pl_span_row));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            tmp = grown;
        }
        pl_span_row *r = &tmp[n++];
        memset(r, 0, sizeof(*r));
        memcpy(r->trace_id, trace_id, 16);
        span_id_bytes(sqlite3_column_int64(spans, 0), r->span_id);
        r->has_parent = sqlite3_column_type(spans, 1) != SQLITE_NULL;
        if (r->has_parent)
            span_id_bytes(sqlite3_column_int64(spans, 1), r->parent_span_id);
        r->name = column_text(a, spans, 2);
        r->service = column_text(a, spans, 3);
        r->kind = sqlite3_column_int(spans, 4);
        r->start_ns = (uint64_t)sqlite3_column_int64(spans, 5);
        r->end_ns = (uint64_t)sqlite3_column_int64(spans, 6);
        r->status_code = sqlite3_column_int(spans, 7);
        r->status_message = column_text(a, spans, 8);
        r->attributes_json = column_text(a, spans, 9);
        if (!*r->attributes_json)
            r->attributes_json = "{}";
        r->profile_id = column_text(a, spans, 10);
        r->samples =
            sqlite3_column_type(spans, 11) == SQLITE_NULL ? 0 : sqlite3_column_int64(spans, 11);
        r->cpu_ns =
            sqlite3_column_type(spans, 12) == SQLITE_NULL ? -1 : sqlite3_column_int64(spans, 12);
        if (r->cpu_ns > 0) { /* the correlation processor's summary, until samples say more */
            r->time_kind = PL_TIME_CPU;
            r->time = r->cpu_ns;
        }
        r->top_functions_attr = column_text(a, spans, 13);
        r->resource_json = column_text(a, spans, 14);
        if (!*r->resource_json)
            r->resource_json = "{}";
        r->events_json = column_text(a, spans, 15);
        if (!*r->events_json)
            r->events_json = "[]";
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    if (rc != SQLITE_OK)
        goto done;
    if (n == 0) {
        sqlite3_finalize(sum);
        sqlite3_finalize(spans);
        sqlite3_finalize(samples);
        sqlite3_finalize(cpu);
        decoder_free(&dec);
        free(tmp);
        pl_trace_detail_free(out);
        read_end(s, began);
        char hex[33];
        pl_hex_encode(trace_id, 16, hex);
        return pl_errf(err, PL_ERR_NOT_FOUND, "trace %s: not in the store", hex);
    }

    /* Per span: CPU and hottest functions from the stored samples. */
    sqlite3_bind_blob(samples, 1, trace_id, 16, SQLITE_STATIC);
    rc = fetch_rows(samples, true, &rows);
    if (rc != SQLITE_OK)
        goto done;
    if (rows.n)
        qsort(rows.v, rows.n, sizeof(prow), cmp_prow_span);
    for (size_t i = 0; i < n; i++)
        if (!pl_store_u64_map_put(&index, (uint64_t)span_id_int(tmp[i].span_id), (int64_t)i + 1)) {
            rc = SQLITE_NOMEM;
            goto done;
        }
    for (size_t i = 0; i < rows.n && rc == SQLITE_OK;) {
        size_t j = i;
        while (j < rows.n && rows.v[j].span_id == rows.v[i].span_id)
            j++;
        int64_t idx;
        if (pl_store_u64_map_get(&index, (uint64_t)rows.v[i].span_id, &idx)) {
            pl_span_row *r = &tmp[idx - 1];
            type_choice tc;
            rc = choose_type(s, a, rows.v + i, j - i, NULL, true, &tc, NULL, NULL);
            pl_function_stat *fns = NULL;
            size_t nf = 0;
            int64_t total = 0, count = 0;
            if (rc == SQLITE_OK)
                rc = summarize(&dec, rows.v + i, j - i, &tc, &fns, &nf, NULL, NULL, &total);
            for (size_t k = i; k < j; k++)
                if (rows.v[k].type_id == tc.type_id)
                    count += rows.v[k].count;
            if (tc.col == COL_CPU) {
                r->cpu_ns = total;
            } else if (r->cpu_ns < 0) {
                r->cpu_ns = 0; /* samples, but none of them CPU time */
            }
            /* samples stored (maybe after the span): their time wins over
             * the correlation processor's summary */
            if (tc.found && tc.kind != PL_TIME_NONE) {
                r->time_kind = tc.kind;
                r->time = total;
            }
            r->samples = count;
            /* self values of the chosen type, hottest first */
            size_t hot = 0; /* sorted by self: keep those that ran code themselves */
            while (hot < nf && hot < top_n && fns[hot].self > 0)
                hot++;
            r->top = fns;
            r->n_top = hot;
        }
        i = j;
    }
    if (rc != SQLITE_OK)
        goto done;
    /* A span with linked samples is named by its own id as its profile id
     * (pyroscope.profile.id): Grafana's "Profiles for this span" asks for
     * exactly that span's samples by it. */
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        if (tmp[i].samples <= 0)
            continue;
        char *hex = pl_arena_alloc(a, 17);
        if (!hex) {
            rc = SQLITE_NOMEM;
            break;
        }
        pl_hex_encode(tmp[i].span_id, 8, hex);
        tmp[i].profile_id = hex;
    }
    if (rc != SQLITE_OK)
        goto done;

    /* Depth-first order: roots (and orphans) by start time, children by
     * start time. Iterative, with a visited mark so cycles cannot loop. */
    {
        int32_t *parent = malloc(n * sizeof(int32_t));
        int32_t *first_child = malloc(n * sizeof(int32_t));
        int32_t *next_sibling = malloc(n * sizeof(int32_t));
        int32_t *last_child = malloc(n * sizeof(int32_t));
        uint8_t *visited = calloc(n, 1);
        int32_t *stack = malloc(n * sizeof(int32_t));
        int *depth = malloc(n * sizeof(int));
        out->spans = pl_arena_calloc(a, n, sizeof(pl_span_row));
        if (!parent || !first_child || !next_sibling || !last_child || !visited || !stack ||
            !depth || !out->spans) {
            rc = SQLITE_NOMEM;
        } else {
            for (size_t i = 0; i < n; i++) {
                parent[i] = -1;
                first_child[i] = last_child[i] = next_sibling[i] = -1;
                int64_t p;
                if (tmp[i].has_parent &&
                    pl_store_u64_map_get(&index, (uint64_t)span_id_int(tmp[i].parent_span_id),
                                         &p) &&
                    (size_t)(p - 1) != i)
                    parent[i] = (int32_t)(p - 1);
            }
            for (size_t i = 0; i < n; i++) { /* tmp is in start order: keep it */
                int32_t p = parent[i];
                if (p < 0)
                    continue;
                if (last_child[p] < 0)
                    first_child[p] = (int32_t)i;
                else
                    next_sibling[last_child[p]] = (int32_t)i;
                last_child[p] = (int32_t)i;
            }
            for (int pass = 0; pass < 2; pass++) {
                for (size_t r = 0; r < n; r++) {
                    /* pass 0: real roots; pass 1: whatever a cycle hid */
                    if (visited[r] || (pass == 0 && parent[r] >= 0))
                        continue;
                    size_t top = 0;
                    stack[top] = (int32_t)r;
                    depth[top++] = 0;
                    while (top) {
                        top--;
                        int32_t i = stack[top];
                        int dp = depth[top];
                        if (visited[i])
                            continue;
                        visited[i] = 1;
                        tmp[i].depth = dp;
                        out->spans[out->n++] = tmp[i];
                        /* push children reversed so the earliest comes out first */
                        size_t base = top, cnt = 0;
                        for (int32_t c = first_child[i]; c >= 0; c = next_sibling[c])
                            if (!visited[c] && top < n) {
                                stack[top] = c;
                                depth[top++] = dp + 1;
                                cnt++;
                            }
                        for (size_t x = 0; x < cnt / 2; x++) {
                            int32_t t = stack[base + x];
                            stack[base + x] = stack[base + cnt - 1 - x];
                            stack[base + cnt - 1 - x] = t;
                        }
                    }
                }
            }
        }
        free(parent);
        free(first_child);
        free(next_sibling);
        free(last_child);
        free(visited);
        free(stack);
        free(depth);
    }
    if (rc == SQLITE_OK && out->summary.span_count == 0) {
        /* no traces row (should not happen): derive the envelope */
        uint64_t lo = UINT64_MAX, hi = 0;
        for (size_t i = 0; i < n; i++) {
            lo = tmp[i].start_ns < lo ? tmp[i].start_ns : lo;
            hi = tmp[i].end_ns > hi ? tmp[i].end_ns : hi;
        }
        out->summary.start_ns = lo;
        out->summary.duration_ns = hi - lo;
        out->summary.span_count = (uint32_t)n;
        out->summary.root_name = "";
        out->summary.root_service = "";
    }
done:
    sqlite3_finalize(sum);
    sqlite3_finalize(spans);
    sqlite3_finalize(samples);
    sqlite3_finalize(cpu);
    if (dec_ok)
        decoder_free(&dec);
    pl_store_u64_map_clear(&index);
    free(rows.v);
    free(tmp);
    return read_done(s, began, rc, &out->arena, out, sizeof(*out), err);
}

void pl_trace_detail_free(pl_trace_detail *detail)
{
    result_free(&detail->arena, detail, sizeof(*detail));
}

/* ---- profiles ----------------------------------------------------------- */

/* The ids of a span and every span below it in its trace, as a JSON array
 * for json_each(): the tree is walked in C over the trace's (span, parent)
 * pairs, which one indexed query reads. */
static int span_subtree_json(pl_store *s, int64_t root, pl_buf *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT sp.span_id, sp.parent_span_id FROM " TRACE_SPANS(
            "= (SELECT trace_id FROM spans WHERE rowid = " PL_SPAN_ROW("?1") " AND span_id = ?1)"),
        -1, &st, NULL);
    int64_t *ids = NULL, *parents = NULL;
    size_t n = 0, cap = 0;
    sqlite3_bind_int64(st, 1, root);
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        rc = SQLITE_OK;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            int64_t *a = realloc(ids, cap * sizeof(int64_t));
            if (a)
                ids = a;
            int64_t *b = realloc(parents, cap * sizeof(int64_t));
            if (b)
                parents = b;
            if (!a || !b) {
                rc = SQLITE_NOMEM;
                break;
            }
        }
        ids[n] = sqlite3_column_int64(st, 0);
        parents[n++] = sqlite3_column_type(st, 1) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, 1);
    }
    if (rc == SQLITE_DONE)
        rc = SQLITE_OK;
    sqlite3_finalize(st);
    /* children lists through a map id -> index, then a breadth-first walk;
     * `done` marks spans already taken, so a cycle cannot loop */
    u64_map index = {0};
    int32_t *first = NULL, *next = NULL, *queue = NULL;
    uint8_t *done = NULL;
    if (rc == SQLITE_OK) {
        first = malloc((n + 1) * sizeof(int32_t));
        next = malloc((n + 1) * sizeof(int32_t));
        queue = malloc((n + 1) * sizeof(int32_t));
        done = calloc(n + 1, 1);
        if (!first || !next || !queue || !done)
            rc = SQLITE_NOMEM;
    }
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        first[i] = next[i] = -1;
        if (ids[i] && !pl_store_u64_map_put(&index, (uint64_t)ids[i], (int64_t)i + 1))
            rc = SQLITE_NOMEM;
    }
    for (size_t i = 0; i < n && rc == SQLITE_OK; i++) {
        int64_t p;
        if (parents[i] && pl_store_u64_map_get(&index, (uint64_t)parents[i], &p) &&
            (size_t)(p - 1) != i) {
            next[i] = first[p - 1];
            first[p - 1] = (int32_t)i;
        }
    }
    pl_buf_append_byte(out, '[');
    pl_buf_printf(out, "%" PRId64, root);
    int64_t at;
    if (rc == SQLITE_OK && pl_store_u64_map_get(&index, (uint64_t)root, &at)) {
        size_t head = 0, tail = 0;
        queue[tail++] = (int32_t)(at - 1);
        done[at - 1] = 1;
        while (head < tail) {
            int32_t cur = queue[head++];
            for (int32_t c = first[cur]; c >= 0; c = next[c]) {
                if (done[c])
                    continue;
                done[c] = 1;
                queue[tail++] = c;
                pl_buf_printf(out, ",%" PRId64, ids[c]);
            }
        }
    }
    pl_buf_append_byte(out, ']');
    if (rc == SQLITE_OK && !pl_buf_ok(out))
        rc = SQLITE_NOMEM;
    pl_store_u64_map_clear(&index);
    free(first);
    free(next);
    free(done);
    free(queue);
    free(ids);
    free(parents);
    return rc;
}

pl_status pl_store_query_profile(pl_store *s, const pl_profile_query *q, pl_profile_result *out,
                                 pl_err *err)
{
    bool began = read_begin(s);
    memset(out, 0, sizeof(*out));
    pl_arena_init(&out->arena);
    out->type = "cpu";
    out->unit = "nanoseconds";
    sqlite3_stmt *st = NULL;
    pl_buf subtree;
    pl_buf_init(&subtree);
    prows rows = {0};
    decoder dec;
    bool dec_ok = false;
    int rc;
    int64_t service_id = 0;
    if (q->scope == PL_PROFILE_SERVICE && q->service) {
        sqlite3_stmt *sel = NULL;
        rc = sqlite3_prepare_v2(s->db, "SELECT id FROM strings WHERE value = ?1", -1, &sel, NULL);
        if (rc == SQLITE_OK) {
            sqlite3_bind_text(sel, 1, q->service, -1, SQLITE_STATIC);
            rc = sqlite3_step(sel);
            if (rc == SQLITE_ROW)
                service_id = sqlite3_column_int64(sel, 0);
            rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? SQLITE_OK : rc;
        }
        sqlite3_finalize(sel);
        if (rc != SQLITE_OK)
            goto done;
        if (!service_id)
            goto done; /* unknown service: empty profile */
    }
    if (q->scope == PL_PROFILE_SPAN && q->descendants) {
        rc = span_subtree_json(s, span_id_int(q->span_id), &subtree);
        if (rc != SQLITE_OK)
            goto done;
    }
    /* a tenant sees the samples that came with its X-Scope-OrgID: those of
     * its own services rows (store_write.c) */
#define TENANT_ONLY    " AND (?9 IS NULL OR service_id IN (SELECT id FROM services WHERE tenant = ?9))"
#define SAMPLE_COLUMNS "SELECT type_id, stack_id, value, cpu_ns, count, wall_ns"
    const char *sql;
    switch (q->scope) {
    case PL_PROFILE_SPAN:
        if (q->descendants) {
            sql = SAMPLE_COLUMNS " FROM " PL_SPAN_SAMPLES(
                "(SELECT value FROM json_each(?1))") " WHERE 1" TENANT_ONLY;
            break;
        }
        sql = SAMPLE_COLUMNS " FROM " PL_SPAN_SAMPLES("(?1)") " WHERE 1" TENANT_ONLY;
        break;
    case PL_PROFILE_TRACE:
        sql = SAMPLE_COLUMNS " FROM " SAMPLES_OF_TRACE_SPANS " WHERE 1" TENANT_ONLY
                             " UNION ALL " SAMPLE_COLUMNS
                             " FROM samples WHERE trace_id = ?1 AND (span_id = 0 "
                             "OR span_id NOT IN (" SPAN_IDS_OF_TRACE "))" TENANT_ONLY;
        break;
    default:
        sql = q->service
                  ? "SELECT type_id, stack_id, value, cpu_ns, count, wall_ns FROM service_profiles "
                    "WHERE service_id IN (SELECT id FROM services WHERE coalesce(name_id, id) = ?1 "
                    "AND (?9 IS NULL OR tenant = ?9)) AND minute >= ?2 AND minute <= ?3"
                  : "SELECT type_id, stack_id, value, cpu_ns, count, wall_ns FROM service_profiles "
                    "WHERE minute >= ?2 AND minute <= ?3" TENANT_ONLY;
        break;
    }
#undef TENANT_ONLY
#undef SAMPLE_COLUMNS
    rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        goto done;
    if (q->scope == PL_PROFILE_SPAN && q->descendants) {
        sqlite3_bind_text(st, 1, (const char *)subtree.data, (int)subtree.len, SQLITE_STATIC);
    } else if (q->scope == PL_PROFILE_SPAN) {
        sqlite3_bind_int64(st, 1, span_id_int(q->span_id));
    } else if (q->scope == PL_PROFILE_TRACE) {
        sqlite3_bind_blob(st, 1, q->trace_id, 16, SQLITE_STATIC);
    } else {
        if (q->service)
            sqlite3_bind_int64(st, 1, service_id);
        sqlite3_bind_int64(st, 2, (int64_t)(q->since_ns / ROLLUP_NS));
        sqlite3_bind_int64(st, 3, q->until_ns ? (int64_t)(q->until_ns / ROLLUP_NS) : INT64_MAX);
    }
    if (q->tenant)
        sqlite3_bind_text(st, 9, q->tenant, -1, SQLITE_STATIC);
    rc = fetch_rows(st, false, &rows);
    if (rc != SQLITE_OK)
        goto done;
    type_choice tc;
    rc = choose_type(s, &out->arena, rows.v, rows.n, q->type, q->time_only, &tc, &out->types,
                     &out->n_types);
    if (rc != SQLITE_OK)
        goto done;
    if (tc.found) {
        {
            const char *colon = strchr(tc.name, ':');
            if (colon) {
                out->type = pl_arena_memdup(&out->arena, tc.name, (size_t)(colon - tc.name));
                out->unit = colon + 1;
            } else {
                out->type = tc.name;
                out->unit = "";
            }
            if (!out->type)
                out->type = "";
        }
    } else if (q->type && *q->type && strcmp(q->type, "cpu") != 0) {
        out->type = pl_arena_memdup(&out->arena, q->type, strlen(q->type));
        out->unit = "";
    }
    rc = decoder_init(&dec, s, &out->arena);
    dec_ok = true;
    if (rc == SQLITE_OK)
        rc = summarize(&dec, rows.v, rows.n, &tc, &out->functions, &out->n_functions, &out->stacks,
                       &out->n_stacks, &out->total);
done:
    sqlite3_finalize(st);
    if (dec_ok)
        decoder_free(&dec);
    free(rows.v);
    pl_buf_free(&subtree);
    return read_done(s, began, rc, &out->arena, out, sizeof(*out), err);
}

void pl_profile_result_free(pl_profile_result *r)
{
    result_free(&r->arena, r, sizeof(*r));
}

pl_status pl_store_query_services(pl_store *s, const char *tenant, char ***names, size_t *n,
                                  pl_err *err)
{
    *names = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT DISTINCT name FROM (SELECT s.value AS name FROM services v "
        "JOIN strings s ON s.id = coalesce(v.name_id, v.id) WHERE ?1 IS NULL OR v.tenant = ?1 "
        "UNION SELECT DISTINCT root_service FROM traces WHERE root_service IS NOT NULL AND "
        "(?1 IS NULL OR tenant = ?1)) ORDER BY name",
        -1, &st, NULL);
    if (rc == SQLITE_OK && tenant)
        sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
    size_t cap = 0;
    while (rc == SQLITE_OK) {
        int step = sqlite3_step(st);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW) {
            rc = step;
            break;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **grown = realloc(*names, cap * sizeof(char *));
            if (!grown) {
                rc = SQLITE_NOMEM;
                break;
            }
            *names = grown;
        }
        const char *t = (const char *)sqlite3_column_text(st, 0);
        (*names)[*n] = strdup(t ? t : "");
        if (!(*names)[*n]) {
            rc = SQLITE_NOMEM;
            break;
        }
        (*n)++;
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_OK) {
        pl_store_free_names(*names, *n);
        *names = NULL;
        *n = 0;
        return pl_store_query_fail(s, rc, err);
    }
    return PL_OK;
}

void pl_store_free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void format_scaled(double v, const char *unit, char *out, size_t cap)
{
    if (v < 10)
        snprintf(out, cap, "%.2f%s", v, unit);
    else if (v < 100)
        snprintf(out, cap, "%.1f%s", v, unit);
    else
        snprintf(out, cap, "%.0f%s", v, unit);
}

void pl_format_duration(uint64_t ns, char *out, size_t cap)
{
    if (ns >= 1000000000ull)
        format_scaled((double)ns / 1e9, "s", out, cap);
    else if (ns >= 1000000ull)
        format_scaled((double)ns / 1e6, "ms", out, cap);
    else if (ns >= 1000ull)
        format_scaled((double)ns / 1e3, "us", out, cap);
    else
        snprintf(out, cap, "%" PRIu64 "ns", ns);
}

const char *pl_time_kind_name(pl_time_kind kind)
{
    switch (kind) {
    case PL_TIME_CPU:
        return "cpu";
    case PL_TIME_WALL:
        return "wall";
    case PL_TIME_COUNT:
        return "samples";
    default:
        return "";
    }
}

const char *pl_time_kind_unit(pl_time_kind kind)
{
    switch (kind) {
    case PL_TIME_CPU:
    case PL_TIME_WALL:
        return "nanoseconds";
    case PL_TIME_COUNT:
        return "count";
    default:
        return "";
    }
}

void pl_format_time(pl_time_kind kind, int64_t value, char *out, size_t cap)
{
    char d[24];
    switch (kind) {
    case PL_TIME_CPU:
        pl_format_duration(value > 0 ? (uint64_t)value : 0, out, cap);
        break;
    case PL_TIME_WALL:
        pl_format_duration(value > 0 ? (uint64_t)value : 0, d, sizeof(d));
        snprintf(out, cap, "%s wall", d);
        break;
    case PL_TIME_COUNT:
        snprintf(out, cap, "%" PRId64 " samples", value);
        break;
    default:
        snprintf(out, cap, "-");
        break;
    }
}
