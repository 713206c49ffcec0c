/*
 * traceql.c: a recursive-descent parser for the TraceQL subset of
 * traceql.h, and its SQL (bound parameters only).
 */
#include "store/traceql.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    pl_tql *t;
    const char *p, *end;
    int depth;
} parser;

static int fail(parser *ps, const char *fmt, ...)
{
    if (!ps->t->error[0]) {
        va_list ap;
        va_start(ap, fmt);
        char msg[120];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        snprintf(ps->t->error, sizeof(ps->t->error), "%s", msg);
    }
    return -1;
}

/* Up to 20 bytes from `at` for a message ("%.*s"): input is not
 * NUL-terminated. */
static int snip(const parser *ps, const char *at)
{
    return ps->end - at < 20 ? (int)(ps->end - at) : 20;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && isspace((unsigned char)*ps->p))
        ps->p++;
}

static bool eat(parser *ps, const char *tok)
{
    skip_ws(ps);
    size_t n = strlen(tok);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, tok, n) == 0) {
        ps->p += n;
        return true;
    }
    return false;
}

static bool peek(parser *ps, const char *tok)
{
    skip_ws(ps);
    size_t n = strlen(tok);
    return (size_t)(ps->end - ps->p) >= n && memcmp(ps->p, tok, n) == 0;
}

/* Copies n bytes into the query's text store; NULL when full. */
static char *store_text(parser *ps, const char *s, size_t n)
{
    pl_tql *t = ps->t;
    if (t->text_len + n + 1 > t->text_cap)
        return NULL;
    char *out = t->text + t->text_len;
    memcpy(out, s, n);
    out[n] = 0;
    t->text_len += n + 1;
    return out;
}

/* A double-quoted string (TraceQL escapes: \" \\ \n \t \r); backquotes too. */
static int parse_string(parser *ps, char **out)
{
    skip_ws(ps);
    char q = *ps->p;
    ps->p++;
    pl_tql *t = ps->t;
    if (t->text_len + (size_t)(ps->end - ps->p) + 1 > t->text_cap)
        return fail(ps, "string too long");
    char *w = t->text + t->text_len, *start = w;
    while (ps->p < ps->end && *ps->p != q) {
        char ch = *ps->p++;
        if (ch == '\\' && q == '"') {
            if (ps->p >= ps->end)
                break;
            ch = *ps->p++;
            switch (ch) {
            case 'n':
                ch = '\n';
                break;
            case 't':
                ch = '\t';
                break;
            case 'r':
                ch = '\r';
                break;
            case '"':
            case '\\':
                break;
            default:
                return fail(ps, "unknown escape \\%c in a string", ch);
            }
        }
        if (ch == 0)
            return fail(ps, "NUL byte in a string");
        *w++ = ch;
    }
    if (ps->p >= ps->end)
        return fail(ps, "string without its closing quote");
    ps->p++;
    *w++ = 0;
    t->text_len += (size_t)(w - start);
    *out = start;
    return 0;
}

static bool attr_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' || c == '/' || c == ':' ||
           c == '@' || (unsigned char)c >= 0x80;
}

/* An attribute name after the scope: bare characters or a quoted name. */
static int parse_attr_name(parser *ps, char **out)
{
    if (ps->p < ps->end && *ps->p == '"') {
        if (parse_string(ps, out) < 0)
            return -1;
    } else {
        const char *s = ps->p;
        while (ps->p < ps->end && attr_char(*ps->p))
            ps->p++;
        if (ps->p == s)
            return fail(ps, "expected an attribute name after the scope");
        if (!(*out = store_text(ps, s, (size_t)(ps->p - s))))
            return fail(ps, "query too long");
    }
    if (!**out)
        return fail(ps, "empty attribute name");
    for (const char *c = *out; *c; c++)
        if (*c == '"' || *c == '\\')
            return fail(ps, "attribute names with quotes or backslashes are not supported");
    return 0;
}

static const struct {
    const char *name;
    pl_tql_field field;
} intrinsics[] = {
    {"name", PL_TQL_F_NAME},
    {"status", PL_TQL_F_STATUS},
    {"kind", PL_TQL_F_KIND},
    {"duration", PL_TQL_F_DURATION},
    {"statusMessage", PL_TQL_F_STATUS_MESSAGE},
    {"traceDuration", PL_TQL_F_TRACE_DURATION},
    {"rootName", PL_TQL_F_ROOT_NAME},
    {"rootServiceName", PL_TQL_F_ROOT_SERVICE},
    {"span:name", PL_TQL_F_NAME},
    {"span:status", PL_TQL_F_STATUS},
    {"span:kind", PL_TQL_F_KIND},
    {"span:duration", PL_TQL_F_DURATION},
    {"span:statusMessage", PL_TQL_F_STATUS_MESSAGE},
    {"trace:duration", PL_TQL_F_TRACE_DURATION},
    {"trace:rootName", PL_TQL_F_ROOT_NAME},
    {"trace:rootService", PL_TQL_F_ROOT_SERVICE},
};

static int parse_field(parser *ps, pl_tql_cond *c)
{
    skip_ws(ps);
    if (eat(ps, "resource.")) {
        c->field = PL_TQL_F_RESOURCE;
        return parse_attr_name(ps, &c->attr);
    }
    if (eat(ps, "span.")) {
        c->field = PL_TQL_F_SPAN;
        return parse_attr_name(ps, &c->attr);
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        c->field = PL_TQL_F_ANY;
        return parse_attr_name(ps, &c->attr);
    }
    if (peek(ps, "event.") || peek(ps, "link.") || peek(ps, "instrumentation.") ||
        peek(ps, "event:") || peek(ps, "link:") || peek(ps, "instrumentation:"))
        return fail(ps, "event, link and instrumentation fields are not supported");
    const char *s = ps->p;
    while (ps->p < ps->end && (isalnum((unsigned char)*ps->p) || *ps->p == '_' || *ps->p == ':'))
        ps->p++;
    size_t n = (size_t)(ps->p - s);
    for (size_t i = 0; i < sizeof(intrinsics) / sizeof(intrinsics[0]); i++)
        if (strlen(intrinsics[i].name) == n && memcmp(intrinsics[i].name, s, n) == 0) {
            c->field = intrinsics[i].field;
            return 0;
        }
    if (n == 0)
        return fail(ps, "expected a field (resource.x, span.x, .x or an intrinsic) at \"%.*s\"",
                    snip(ps, ps->p), ps->p);
    return fail(ps, "unsupported field \"%.*s\"", (int)(n > 40 ? 40 : n), s);
}

static int parse_op(parser *ps, pl_tql_op *op)
{
    static const struct {
        const char *tok;
        pl_tql_op op;
    } ops[] = {{"!=", PL_TQL_NE}, {"!~", PL_TQL_NRE}, {"=~", PL_TQL_RE}, {">=", PL_TQL_GE},
               {"<=", PL_TQL_LE}, {"=", PL_TQL_EQ},   {">", PL_TQL_GT},  {"<", PL_TQL_LT}};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        if (eat(ps, ops[i].tok)) {
            *op = ops[i].op;
            return 0;
        }
    return fail(ps, "expected an operator (= != > >= < <= =~ !~)");
}

static const char *const status_names[] = {"unset", "ok", "error"};
static const char *const kind_names[] = {"unspecified", "internal", "server",
                                         "client",      "producer", "consumer"};

static int keyword(const char *s, size_t n, const char *const *names, int count)
{
    for (int i = 0; i < count; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
            return i;
    return -1;
}

/* A number, optionally with a duration unit. */
static int parse_number(parser *ps, pl_tql_cond *c)
{
    const char *s = ps->p;
    if (ps->p < ps->end && (*ps->p == '-' || *ps->p == '+'))
        ps->p++;
    bool digits = false, dot = false;
    while (ps->p < ps->end && (isdigit((unsigned char)*ps->p) || (*ps->p == '.' && !dot))) {
        if (*ps->p == '.')
            dot = true;
        else
            digits = true;
        ps->p++;
    }
    if (!digits)
        return fail(ps, "expected a value at \"%.*s\"", snip(ps, s), s);
    char num[64];
    size_t n = (size_t)(ps->p - s);
    if (n >= sizeof(num))
        return fail(ps, "number too long");
    memcpy(num, s, n);
    num[n] = 0;
    /* a duration unit? (longest first: "ms" before "m") */
    static const struct {
        const char *unit;
        double ns;
    } units[] = {{"ns", 1},  {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"ms", 1e6},
                 {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
    const char *u = ps->p;
    size_t ul = 0;
    while (u + ul < ps->end && (isalpha((unsigned char)u[ul]) || (unsigned char)u[ul] >= 0x80))
        ul++;
    if (ul) {
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
            if (strlen(units[i].unit) == ul && memcmp(units[i].unit, u, ul) == 0) {
                double v = strtod(num, NULL) * units[i].ns;
                if (!isfinite(v) || fabs(v) > 9.2e18)
                    return fail(ps, "duration out of range");
                c->vtype = PL_TQL_V_DURATION;
                c->i = (int64_t)llround(v);
                c->d = v;
                ps->p += ul;
                return 0;
            }
        return fail(ps, "unknown unit \"%.*s\" (ns, us, ms, s, m, h)", (int)(ul > 10 ? 10 : ul), u);
    }
    errno = 0;
    if (dot) {
        c->vtype = PL_TQL_V_FLOAT;
        c->d = strtod(num, NULL);
        return 0;
    }
    char *end;
    long long v = strtoll(num, &end, 10);
    if (errno == ERANGE)
        return fail(ps, "integer out of range");
    c->vtype = PL_TQL_V_INT;
    c->i = v;
    c->d = (double)v;
    return 0;
}

static int parse_value(parser *ps, pl_tql_cond *c)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, "expected a value");
    if (*ps->p == '"' || *ps->p == '`') {
        c->vtype = PL_TQL_V_STRING;
        return parse_string(ps, &c->str);
    }
    if (isalpha((unsigned char)*ps->p)) {
        const char *s = ps->p;
        while (ps->p < ps->end && (isalnum((unsigned char)*ps->p) || *ps->p == '_'))
            ps->p++;
        size_t n = (size_t)(ps->p - s);
        int k;
        if (n == 4 && memcmp(s, "true", 4) == 0) {
            c->vtype = PL_TQL_V_BOOL;
            c->i = 1;
        } else if (n == 5 && memcmp(s, "false", 5) == 0) {
            c->vtype = PL_TQL_V_BOOL;
            c->i = 0;
        } else if ((k = keyword(s, n, status_names, 3)) >= 0) {
            c->vtype = PL_TQL_V_STATUS;
            c->i = k;
        } else if ((k = keyword(s, n, kind_names, 6)) >= 0) {
            c->vtype = PL_TQL_V_KIND;
            c->i = k;
        } else if (n == 3 && memcmp(s, "nil", 3) == 0) {
            return fail(ps, "nil is not supported");
        } else {
            return fail(ps, "unknown value \"%.*s\" (strings need double quotes)",
                        (int)(n > 40 ? 40 : n), s);
        }
        return 0;
    }
    return parse_number(ps, c);
}

/* Checks that the value fits the field and the operator. */
static int check_cond(parser *ps, const pl_tql_cond *c)
{
    bool re = c->op == PL_TQL_RE || c->op == PL_TQL_NRE;
    bool order =
        c->op == PL_TQL_GT || c->op == PL_TQL_GE || c->op == PL_TQL_LT || c->op == PL_TQL_LE;
    if (re && c->vtype != PL_TQL_V_STRING)
        return fail(ps, "=~ and !~ take a string (a regular expression)");
    if (order &&
        (c->vtype == PL_TQL_V_BOOL || c->vtype == PL_TQL_V_STATUS || c->vtype == PL_TQL_V_KIND))
        return fail(ps, "> >= < <= do not apply to true/false, status or kind");
    switch (c->field) {
    case PL_TQL_F_STATUS:
        if (c->vtype != PL_TQL_V_STATUS || re)
            return fail(ps, "status compares with = or != to error, ok or unset");
        return 0;
    case PL_TQL_F_KIND:
        if (c->vtype != PL_TQL_V_KIND || re)
            return fail(ps, "kind compares with = or != to server, client, internal, producer, "
                            "consumer or unspecified");
        return 0;
    case PL_TQL_F_DURATION:
    case PL_TQL_F_TRACE_DURATION:
        if (c->vtype != PL_TQL_V_DURATION)
            return fail(ps, "a duration needs a unit (e.g. 100ms, 1.5s)");
        return 0;
    case PL_TQL_F_NAME:
    case PL_TQL_F_STATUS_MESSAGE:
    case PL_TQL_F_ROOT_NAME:
    case PL_TQL_F_ROOT_SERVICE:
        if (c->vtype != PL_TQL_V_STRING)
            return fail(ps, "this field is a string: quote the value");
        return 0;
    default:
        if (c->vtype == PL_TQL_V_STATUS || c->vtype == PL_TQL_V_KIND)
            return fail(ps, "status and kind keywords compare with status and kind only");
        return 0;
    }
}

static int new_node(parser *ps, pl_tql_node_type type, int cond, int left, int right)
{
    pl_tql *t = ps->t;
    if (t->n_nodes >= PL_TQL_MAX_NODES)
        return fail(ps, "too many conditions (at most %d)", PL_TQL_MAX_CONDS);
    t->nodes[t->n_nodes] = (pl_tql_node){type, cond, left, right};
    return t->n_nodes++;
}

static int parse_or(parser *ps);

static int parse_primary(parser *ps)
{
    if (eat(ps, "(")) {
        if (++ps->depth > PL_TQL_MAX_DEPTH)
            return fail(ps, "parentheses nested deeper than %d", PL_TQL_MAX_DEPTH);
        int n = parse_or(ps);
        if (n < 0)
            return -1;
        if (!eat(ps, ")"))
            return fail(ps, "expected ) at \"%.*s\"", snip(ps, ps->p), ps->p);
        ps->depth--;
        return n;
    }
    pl_tql *t = ps->t;
    if (t->n_conds >= PL_TQL_MAX_CONDS)
        return fail(ps, "too many conditions (at most %d)", PL_TQL_MAX_CONDS);
    pl_tql_cond *c = &t->conds[t->n_conds];
    memset(c, 0, sizeof(*c));
    if (parse_field(ps, c) < 0 || parse_op(ps, &c->op) < 0 || parse_value(ps, c) < 0 ||
        check_cond(ps, c) < 0)
        return -1;
    return new_node(ps, PL_TQL_COND, t->n_conds++, -1, -1);
}

static int parse_and(parser *ps)
{
    int left = parse_primary(ps);
    while (left >= 0 && eat(ps, "&&")) {
        int right = parse_primary(ps);
        if (right < 0)
            return -1;
        left = new_node(ps, PL_TQL_AND, -1, left, right);
    }
    return left;
}

static int parse_or(parser *ps)
{
    int left = parse_and(ps);
    while (left >= 0 && eat(ps, "||")) {
        int right = parse_and(ps);
        if (right < 0)
            return -1;
        left = new_node(ps, PL_TQL_OR, -1, left, right);
    }
    return left;
}

int pl_tql_parse(pl_tql *t, const char *q, size_t len)
{
    memset(t, 0, sizeof(*t));
    t->root = -1;
    if (len > PL_TQL_MAX_LEN) {
        snprintf(t->error, sizeof(t->error), "query longer than %d bytes", PL_TQL_MAX_LEN);
        return -1;
    }
    t->text_cap = len + 1;
    if (!(t->text = malloc(t->text_cap))) {
        snprintf(t->error, sizeof(t->error), "out of memory");
        return -1;
    }
    parser ps = {t, q, q + len, 0};
    if (memchr(q, 0, len))
        return fail(&ps, "NUL byte in the query");
    if (!eat(&ps, "{"))
        return fail(&ps, "expected a spanset { ... }");
    if (!eat(&ps, "}")) {
        int root = parse_or(&ps);
        if (root < 0)
            return -1;
        if (!eat(&ps, "}")) {
            skip_ws(&ps);
            if (peek(&ps, "|"))
                return fail(&ps, "pipelines (|) are not supported: one spanset only");
            return fail(&ps, "expected } or && or || at \"%.*s\"", snip(&ps, ps.p), ps.p);
        }
        t->root = root;
    }
    skip_ws(&ps);
    if (ps.p < ps.end) {
        if (*ps.p == '|' && (ps.end - ps.p < 2 || ps.p[1] != '|'))
            return fail(&ps, "pipelines (| select, | count, metrics) are not supported: one "
                             "spanset only");
        return fail(&ps, "only one spanset { ... } is supported (found \"%.*s\" after it)",
                    snip(&ps, ps.p), ps.p);
    }
    return 0;
}

void pl_tql_free(pl_tql *t)
{
    free(t->text);
    t->text = NULL;
}

const char *pl_tql_field_text(const pl_tql_cond *c, char *buf, size_t cap)
{
    switch (c->field) {
    case PL_TQL_F_RESOURCE:
        snprintf(buf, cap, "resource.%s", c->attr);
        return buf;
    case PL_TQL_F_SPAN:
        snprintf(buf, cap, "span.%s", c->attr);
        return buf;
    case PL_TQL_F_ANY:
        snprintf(buf, cap, ".%s", c->attr);
        return buf;
    default:
        break;
    }
    for (size_t i = 0; i < sizeof(intrinsics) / sizeof(intrinsics[0]); i++)
        if (intrinsics[i].field == c->field) {
            snprintf(buf, cap, "%s", intrinsics[i].name);
            return buf;
        }
    snprintf(buf, cap, "?");
    return buf;
}

/* ---- SQL ------------------------------------------------------------------ */

typedef struct sqlgen {
    pl_buf *sql;
    int *next;
    pl_tql_bind *binds;
    int *n_binds;
} sqlgen;

static int bind(sqlgen *g, const pl_tql_cond *c, bool attr)
{
    int i = (*g->next)++;
    g->binds[(*g->n_binds)++] = (pl_tql_bind){i, c, attr};
    return i;
}

/* The SQL of a field's value. Attribute reads bind their JSON path. */
static void field_sql(sqlgen *g, const pl_tql_cond *c)
{
    pl_buf *b = g->sql;
    switch (c->field) {
    case PL_TQL_F_RESOURCE:
        if (strcmp(c->attr, "service.name") == 0) { /* a column (indexed) */
            pl_buf_append_str(b, "s.service");
            return;
        }
        pl_buf_printf(b, "json_extract((SELECT value FROM strings WHERE id = s.resource_id), ?%d)",
                      bind(g, c, true));
        return;
    case PL_TQL_F_SPAN:
        pl_buf_printf(b, "json_extract(s.attributes, ?%d)", bind(g, c, true));
        return;
    case PL_TQL_F_ANY: {
        int p = bind(g, c, true);
        pl_buf_printf(b,
                      "coalesce(json_extract(s.attributes, ?%d), json_extract((SELECT value FROM "
                      "strings WHERE id = s.resource_id), ?%d))",
                      p, p);
        return;
    }
    case PL_TQL_F_NAME:
        pl_buf_append_str(b, "s.name");
        return;
    case PL_TQL_F_STATUS:
        pl_buf_append_str(b, "s.status_code");
        return;
    case PL_TQL_F_KIND:
        pl_buf_append_str(b, "s.kind");
        return;
    case PL_TQL_F_DURATION:
        pl_buf_append_str(b, "(s.end_ns - s.start_ns)");
        return;
    case PL_TQL_F_STATUS_MESSAGE:
        pl_buf_append_str(b, "coalesce(s.status_message, '')");
        return;
    case PL_TQL_F_TRACE_DURATION:
        pl_buf_append_str(b, "(t.end_ns - t.start_ns)");
        return;
    case PL_TQL_F_ROOT_NAME:
        pl_buf_append_str(b, "t.root_name");
        return;
    case PL_TQL_F_ROOT_SERVICE:
        pl_buf_append_str(b, "t.root_service");
        return;
    }
}

static const char *op_sql(pl_tql_op op)
{
    switch (op) {
    case PL_TQL_EQ:
        return "=";
    case PL_TQL_NE:
        return "!=";
    case PL_TQL_GT:
        return ">";
    case PL_TQL_GE:
        return ">=";
    case PL_TQL_LT:
        return "<";
    case PL_TQL_LE:
        return "<=";
    default:
        return "=";
    }
}

static void cond_sql(sqlgen *g, const pl_tql_cond *c)
{
    pl_buf *b = g->sql;
    pl_buf_append_byte(b, '(');
    if (c->op == PL_TQL_RE || c->op == PL_TQL_NRE) {
        /* regexp(pattern, value): NULL (no value) never matches either way */
        pl_buf_printf(b, "%sregexp(?%d, ", c->op == PL_TQL_NRE ? "NOT " : "", bind(g, c, false));
        field_sql(g, c);
        pl_buf_append_str(b, "))");
        return;
    }
    bool attr =
        c->field == PL_TQL_F_RESOURCE || c->field == PL_TQL_F_SPAN || c->field == PL_TQL_F_ANY;
    bool numeric =
        c->vtype == PL_TQL_V_INT || c->vtype == PL_TQL_V_FLOAT || c->vtype == PL_TQL_V_DURATION;
    if (attr && numeric) {
        /* a number compares with numbers only (SQLite orders any text
         * above every number) */
        pl_buf_append_str(b, "typeof(");
        field_sql(g, c);
        pl_buf_append_str(b, ") IN ('integer','real') AND ");
    } else if (attr && c->vtype == PL_TQL_V_STRING) {
        pl_buf_append_str(b, "typeof(");
        field_sql(g, c);
        pl_buf_append_str(b, ") = 'text' AND ");
    } else if (attr && c->vtype == PL_TQL_V_BOOL) {
        /* json_extract gives 1/0 for true/false: tell them from numbers */
        int p = bind(g, c, true);
        if (c->field == PL_TQL_F_SPAN)
            pl_buf_printf(b, "json_type(s.attributes, ?%d", p);
        else if (c->field == PL_TQL_F_RESOURCE)
            pl_buf_printf(b, "json_type((SELECT value FROM strings WHERE id = s.resource_id), ?%d",
                          p);
        else
            pl_buf_printf(b,
                          "coalesce(json_type(s.attributes, ?%d), json_type((SELECT value FROM "
                          "strings WHERE id = s.resource_id), ?%d)",
                          p, p);
        pl_buf_append_str(b, ") IN ('true','false') AND ");
    }
    field_sql(g, c);
    pl_buf_printf(b, " %s ?%d)", op_sql(c->op), bind(g, c, false));
}

static void node_sql(sqlgen *g, const pl_tql *t, int n)
{
    const pl_tql_node *node = &t->nodes[n];
    if (node->type == PL_TQL_COND) {
        cond_sql(g, &t->conds[node->cond]);
        return;
    }
    pl_buf_append_byte(g->sql, '(');
    node_sql(g, t, node->left);
    pl_buf_append_str(g->sql, node->type == PL_TQL_AND ? " AND " : " OR ");
    node_sql(g, t, node->right);
    pl_buf_append_byte(g->sql, ')');
}

int pl_tql_sql(const pl_tql *t, pl_buf *sql, int *next_param, pl_tql_bind *binds, int *n_binds)
{
    *n_binds = 0;
    if (t->root < 0) {
        pl_buf_append_str(sql, "1");
        return 0;
    }
    sqlgen g = {sql, next_param, binds, n_binds};
    node_sql(&g, t, t->root);
    return pl_buf_ok(sql) ? 0 : -1;
}

/* The top-level conjuncts: the leaves reached from the root through ANDs. */
static void trace_conjuncts(sqlgen *g, const pl_tql *t, int n)
{
    const pl_tql_node *node = &t->nodes[n];
    if (node->type == PL_TQL_AND) {
        trace_conjuncts(g, t, node->left);
        trace_conjuncts(g, t, node->right);
        return;
    }
    if (node->type != PL_TQL_COND)
        return;
    const pl_tql_cond *c = &t->conds[node->cond];
    switch (c->field) {
    case PL_TQL_F_TRACE_DURATION:
    case PL_TQL_F_ROOT_NAME:
    case PL_TQL_F_ROOT_SERVICE:
        pl_buf_append_str(g->sql, " AND ");
        cond_sql(g, c);
        return;
    case PL_TQL_F_STATUS:
        if (c->op == PL_TQL_EQ && c->i == 2) /* an error span: the trace counted it */
            pl_buf_append_str(g->sql, " AND t.error_count > 0");
        return;
    default:
        return;
    }
}

int pl_tql_trace_sql(const pl_tql *t, pl_buf *sql, int *next_param, pl_tql_bind *binds,
                     int *n_binds)
{
    if (t->root < 0)
        return 0;
    sqlgen g = {sql, next_param, binds, n_binds};
    trace_conjuncts(&g, t, t->root);
    return pl_buf_ok(sql) ? 0 : -1;
}
