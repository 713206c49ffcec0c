/*
 * querier_selector.c: Prometheus label selectors, as Grafana and Pyroscope
 * write them: `{service_name="shop", span_name=~"GET .*", env!="dev"}`.
 *
 * The grammar is the metric selector's: braces around comma-separated
 * matchers, a trailing comma allowed, white space anywhere. A label name is
 * an identifier ([A-Za-z_][A-Za-z0-9_]*, dots allowed since span attributes
 * such as http.route are labels here) or a quoted string (Prometheus 3's
 * UTF-8 names). Values are Go string literals: "..." and '...' with
 * escapes, `...` raw. Regular expressions are fully anchored, as in
 * Prometheus (`^(?:re)$`), and compiled with PCRE2 once per request.
 *
 * Everything comes from a client: lengths and counts are bounded, and every
 * error names its byte offset.
 */
#include "store/querier_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *p, *start, *end;
    pl_err *err;
} parser;

static pl_status fail(parser *ps, const char *what)
{
    return pl_errf(ps->err, PL_ERR_INVALID, "label selector: %s at offset %zu", what,
                   (size_t)(ps->p - ps->start));
}

static void skip_space(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool ident_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool ident_char(char c)
{
    return ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void put_utf8(pl_buf *b, uint32_t cp)
{
    if (cp < 0x80) {
        pl_buf_append_byte(b, (uint8_t)cp);
    } else if (cp < 0x800) {
        pl_buf_append_byte(b, (uint8_t)(0xc0 | (cp >> 6)));
        pl_buf_append_byte(b, (uint8_t)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        pl_buf_append_byte(b, (uint8_t)(0xe0 | (cp >> 12)));
        pl_buf_append_byte(b, (uint8_t)(0x80 | ((cp >> 6) & 0x3f)));
        pl_buf_append_byte(b, (uint8_t)(0x80 | (cp & 0x3f)));
    } else {
        pl_buf_append_byte(b, (uint8_t)(0xf0 | (cp >> 18)));
        pl_buf_append_byte(b, (uint8_t)(0x80 | ((cp >> 12) & 0x3f)));
        pl_buf_append_byte(b, (uint8_t)(0x80 | ((cp >> 6) & 0x3f)));
        pl_buf_append_byte(b, (uint8_t)(0x80 | (cp & 0x3f)));
    }
}

/* One escape after a backslash (ps->p at the character after it). */
static pl_status read_escape(parser *ps, char quote, pl_buf *out)
{
    if (ps->p >= ps->end)
        return fail(ps, "unterminated escape");
    char c = *ps->p++;
    switch (c) {
    case 'n':
        pl_buf_append_byte(out, '\n');
        return PL_OK;
    case 't':
        pl_buf_append_byte(out, '\t');
        return PL_OK;
    case 'r':
        pl_buf_append_byte(out, '\r');
        return PL_OK;
    case 'a':
        pl_buf_append_byte(out, '\a');
        return PL_OK;
    case 'b':
        pl_buf_append_byte(out, '\b');
        return PL_OK;
    case 'f':
        pl_buf_append_byte(out, '\f');
        return PL_OK;
    case 'v':
        pl_buf_append_byte(out, '\v');
        return PL_OK;
    case '\\':
        pl_buf_append_byte(out, '\\');
        return PL_OK;
    case 'x':
    case 'u':
    case 'U': {
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int i = 0; i < digits; i++) {
            int h = ps->p < ps->end ? hexval(*ps->p) : -1;
            if (h < 0)
                return fail(ps, "bad hexadecimal escape");
            cp = cp * 16 + (uint32_t)h;
            ps->p++;
        }
        if (c == 'x')
            pl_buf_append_byte(out, (uint8_t)cp);
        else if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return fail(ps, "escape is not a Unicode code point");
        else
            put_utf8(out, cp);
        return PL_OK;
    }
    default:
        if (c == quote) {
            pl_buf_append_byte(out, (uint8_t)c);
            return PL_OK;
        }
        return fail(ps, "unknown escape");
    }
}

/* A quoted string into a malloc'd NUL-terminated copy. */
static pl_status read_string(parser *ps, char **out)
{
    char quote = *ps->p++;
    pl_buf b;
    pl_buf_init(&b);
    pl_status st = PL_OK;
    for (;;) {
        if (ps->p >= ps->end) {
            st = fail(ps, "unterminated string");
            break;
        }
        char c = *ps->p;
        if (c == quote) {
            ps->p++;
            break;
        }
        if (c == '\n' && quote != '`') {
            st = fail(ps, "newline in string");
            break;
        }
        ps->p++;
        if (c == '\\' && quote != '`') {
            if ((st = read_escape(ps, quote, &b)) != PL_OK)
                break;
            continue;
        }
        pl_buf_append_byte(&b, (uint8_t)c);
    }
    pl_buf_append_byte(&b, 0);
    if (st == PL_OK && !pl_buf_ok(&b))
        st = pl_errf(ps->err, PL_ERR_NOMEM, "label selector: out of memory");
    if (st != PL_OK) {
        pl_buf_free(&b);
        return st;
    }
    if (strlen((const char *)b.data) != b.len - 1) {
        pl_buf_free(&b);
        return fail(ps, "NUL byte in string");
    }
    *out = (char *)pl_buf_steal(&b, NULL);
    return *out ? PL_OK : pl_errf(ps->err, PL_ERR_NOMEM, "label selector: out of memory");
}

static pl_status read_name(parser *ps, char **out)
{
    if (ps->p < ps->end && (*ps->p == '"' || *ps->p == '\''))
        return read_string(ps, out);
    if (ps->p >= ps->end || !ident_start(*ps->p))
        return fail(ps, "expected a label name");
    const char *s = ps->p;
    while (ps->p < ps->end && ident_char(*ps->p))
        ps->p++;
    *out = strndup(s, (size_t)(ps->p - s));
    return *out ? PL_OK : pl_errf(ps->err, PL_ERR_NOMEM, "label selector: out of memory");
}

static pl_status read_op(parser *ps, pl_qop *op)
{
    if (ps->end - ps->p >= 2 && ps->p[0] == '=' && ps->p[1] == '~') {
        *op = PL_QOP_RE;
        ps->p += 2;
    } else if (ps->end - ps->p >= 2 && ps->p[0] == '!' && ps->p[1] == '=') {
        *op = PL_QOP_NE;
        ps->p += 2;
    } else if (ps->end - ps->p >= 2 && ps->p[0] == '!' && ps->p[1] == '~') {
        *op = PL_QOP_NRE;
        ps->p += 2;
    } else if (ps->p < ps->end && ps->p[0] == '=') {
        *op = PL_QOP_EQ;
        ps->p += 1;
    } else {
        return fail(ps, "expected =, !=, =~ or !~");
    }
    return PL_OK;
}

static pl_status compile_matcher(parser *ps, pl_qmatcher *m)
{
    if (m->op != PL_QOP_RE && m->op != PL_QOP_NRE)
        return PL_OK;
    size_t n = strlen(m->value) + 8;
    char *src = malloc(n);
    if (!src)
        return pl_errf(ps->err, PL_ERR_NOMEM, "label selector: out of memory");
    snprintf(src, n, "^(?:%s)$", m->value);
    char why[200];
    int rc = pl_pattern_compile(&m->re, src, why, sizeof(why));
    free(src);
    if (rc < 0)
        return pl_errf(ps->err, PL_ERR_INVALID,
                       "label selector: invalid regular expression for %s: %s", m->name, why);
    return PL_OK;
}

void pl_qselector_free(pl_qselector *sel)
{
    for (size_t i = 0; i < sel->n; i++) {
        free(sel->items[i].name);
        free(sel->items[i].value);
        if (sel->items[i].re.code)
            pl_pattern_free(&sel->items[i].re);
    }
    free(sel->items);
    sel->items = NULL;
    sel->n = 0;
}

pl_status pl_qselector_parse(const char *text, size_t len, pl_qselector *out, pl_err *err)
{
    memset(out, 0, sizeof(*out));
    parser ps = {text, text, text + len, err};
    if (len > PL_QSEL_MAX_LEN)
        return pl_errf(err, PL_ERR_INVALID, "label selector: longer than %d bytes",
                       PL_QSEL_MAX_LEN);
    skip_space(&ps);
    if (ps.p == ps.end)
        return PL_OK; /* "" is {} */
    if (*ps.p != '{')
        return fail(&ps, "expected {");
    ps.p++;
    pl_status st = PL_OK;
    for (;;) {
        skip_space(&ps);
        if (ps.p < ps.end && *ps.p == '}') {
            ps.p++;
            break;
        }
        if (out->n == PL_QSEL_MAX_MATCHERS) {
            st = fail(&ps, "too many matchers");
            break;
        }
        pl_qmatcher *grown = realloc(out->items, (out->n + 1) * sizeof(*grown));
        if (!grown) {
            st = pl_errf(err, PL_ERR_NOMEM, "label selector: out of memory");
            break;
        }
        out->items = grown;
        pl_qmatcher *m = &out->items[out->n];
        memset(m, 0, sizeof(*m));
        out->n++;
        if ((st = read_name(&ps, &m->name)) != PL_OK)
            break;
        if (!*m->name) {
            st = fail(&ps, "empty label name");
            break;
        }
        skip_space(&ps);
        if ((st = read_op(&ps, &m->op)) != PL_OK)
            break;
        skip_space(&ps);
        if (ps.p >= ps.end || (*ps.p != '"' && *ps.p != '\'' && *ps.p != '`')) {
            st = fail(&ps, "expected a quoted value");
            break;
        }
        if ((st = read_string(&ps, &m->value)) != PL_OK)
            break;
        if ((st = compile_matcher(&ps, m)) != PL_OK)
            break;
        skip_space(&ps);
        if (ps.p < ps.end && *ps.p == ',') {
            ps.p++;
            continue;
        }
        if (ps.p < ps.end && *ps.p == '}') {
            ps.p++;
            break;
        }
        st = fail(&ps, "expected , or }");
        break;
    }
    if (st == PL_OK) {
        skip_space(&ps);
        if (ps.p != ps.end)
            st = fail(&ps, "unexpected text after }");
    }
    if (st != PL_OK)
        pl_qselector_free(out);
    return st;
}

bool pl_qmatcher_matches(const pl_qmatcher *m, const char *v, size_t len)
{
    switch (m->op) {
    case PL_QOP_EQ:
        return strlen(m->value) == len && memcmp(m->value, v, len) == 0;
    case PL_QOP_NE:
        return !(strlen(m->value) == len && memcmp(m->value, v, len) == 0);
    case PL_QOP_RE:
        return pl_pattern_exec(&m->re, (pl_bytes){(const uint8_t *)v, (uint32_t)len}, NULL, 0);
    case PL_QOP_NRE:
        return !pl_pattern_exec(&m->re, (pl_bytes){(const uint8_t *)v, (uint32_t)len}, NULL, 0);
    }
    return false;
}
