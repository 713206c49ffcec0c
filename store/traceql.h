/*
 * traceql.h: the part of TraceQL that Grafana's Tempo search UI writes, and
 * its translation to SQL over the store's tables.
 *
 *   query      = "{" [ or ] "}"
 *   or         = and { "||" and }
 *   and        = primary { "&&" primary }
 *   primary    = "(" or ")" | field op value
 *   field      = "resource." name | "span." name | "." name | intrinsic
 *   intrinsic  = name | status | kind | duration | statusMessage | traceDuration
 *                | rootName | rootServiceName   (also span:name, trace:duration, ...)
 *   op         = "=" | "!=" | ">" | ">=" | "<" | "<=" | "=~" | "!~"
 *   value      = "string" | int | float | true | false | 100ms (ns us µs ms s m h)
 *                | error | ok | unset (status) | server | client | ... (kind)
 *
 * A trace matches when one of its spans meets the whole expression (one
 * spanset); resource fields read that span's resource, traceDuration and
 * root* the trace's. Everything else (pipelines `|`, `>>`, select(),
 * several spansets, metrics) is refused with a message saying what is not
 * supported. Input is bounded: PL_TQL_MAX_LEN bytes, PL_TQL_MAX_DEPTH
 * nested parentheses, PL_TQL_MAX_CONDS comparisons.
 *
 * The SQL never contains client text: every name and value is a bound
 * parameter; only fixed fragments chosen by the parser are written.
 */
#ifndef PL_TRACEQL_H
#define PL_TRACEQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

#define PL_TQL_MAX_LEN   4096
#define PL_TQL_MAX_DEPTH 16
#define PL_TQL_MAX_CONDS 64
#define PL_TQL_MAX_NODES (2 * PL_TQL_MAX_CONDS)
#define PL_TQL_MAX_BINDS (3 * PL_TQL_MAX_CONDS)

typedef enum pl_tql_field {
    PL_TQL_F_RESOURCE = 1, /* resource.<attr> */
    PL_TQL_F_SPAN,         /* span.<attr> */
    PL_TQL_F_ANY,          /* .<attr>: the span's, else its resource's */
    PL_TQL_F_NAME,
    PL_TQL_F_STATUS,
    PL_TQL_F_KIND,
    PL_TQL_F_DURATION,
    PL_TQL_F_STATUS_MESSAGE,
    PL_TQL_F_TRACE_DURATION,
    PL_TQL_F_ROOT_NAME,
    PL_TQL_F_ROOT_SERVICE,
} pl_tql_field;

typedef enum pl_tql_op {
    PL_TQL_EQ = 1,
    PL_TQL_NE,
    PL_TQL_GT,
    PL_TQL_GE,
    PL_TQL_LT,
    PL_TQL_LE,
    PL_TQL_RE,  /* =~ (fully anchored) */
    PL_TQL_NRE, /* !~ */
} pl_tql_op;

typedef enum pl_tql_vtype {
    PL_TQL_V_STRING = 1,
    PL_TQL_V_INT,
    PL_TQL_V_FLOAT,
    PL_TQL_V_BOOL,
    PL_TQL_V_DURATION, /* nanoseconds in i */
    PL_TQL_V_STATUS,   /* i: 0 unset, 1 ok, 2 error (OTLP codes) */
    PL_TQL_V_KIND,     /* i: OTLP span kind 0..5 */
} pl_tql_vtype;

typedef struct pl_tql_cond {
    pl_tql_field field;
    pl_tql_op op;
    pl_tql_vtype vtype;
    char *attr; /* attribute name for RESOURCE / SPAN / ANY (NUL-terminated) */
    char *str;  /* STRING value (unescaped, NUL-terminated) */
    int64_t i;
    double d;
} pl_tql_cond;

typedef enum pl_tql_node_type { PL_TQL_COND = 1, PL_TQL_AND, PL_TQL_OR } pl_tql_node_type;

typedef struct pl_tql_node {
    pl_tql_node_type type;
    int cond;        /* PL_TQL_COND: index into conds */
    int left, right; /* AND / OR: node indexes */
} pl_tql_node;

typedef struct pl_tql {
    pl_tql_cond conds[PL_TQL_MAX_CONDS];
    int n_conds;
    pl_tql_node nodes[PL_TQL_MAX_NODES];
    int n_nodes;
    int root;   /* -1: "{}" (every span) */
    char *text; /* names and strings point into this copy */
    size_t text_cap, text_len;
    char error[160];
} pl_tql;

/* Parses `q` (len bytes, not necessarily NUL-terminated). 0 on success;
 * -1 with t->error set. Free with pl_tql_free either way. */
int pl_tql_parse(pl_tql *t, const char *q, size_t len);
void pl_tql_free(pl_tql *t);

/* Appends the SQL condition of the expression over `spans s` joined with
 * `traces t` ("1" for "{}"). Parameters are numbered from *next_param on
 * (?NNN) and described in binds[] (at most PL_TQL_MAX_BINDS entries):
 * what each parameter is, for pl_tql_bind. */
typedef struct pl_tql_bind {
    int index; /* ?index */
    const pl_tql_cond *cond;
    bool attr; /* the attribute's JSON path ("$.\"name\"") instead of the value */
} pl_tql_bind;
int pl_tql_sql(const pl_tql *t, pl_buf *sql, int *next_param, pl_tql_bind *binds, int *n_binds);

/* Appends " AND <cond>" over `traces t` alone for each top-level conjunct
 * that a trace's own row decides or rules out (traceDuration, rootName,
 * rootServiceName; status = error needs t.error_count > 0), so a search
 * skips traces without reading their spans. Same parameters as pl_tql_sql
 * (numbered on from *next_param, described in binds[] after *n_binds). */
int pl_tql_trace_sql(const pl_tql *t, pl_buf *sql, int *next_param, pl_tql_bind *binds,
                     int *n_binds);

/* Field name as written ("resource.service.name", "duration"), into buf. */
const char *pl_tql_field_text(const pl_tql_cond *c, char *buf, size_t cap);

#endif
