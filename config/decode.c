/*
 * decode.c: config tables -> C structs (see decode.h). The duration and
 * size parsers and the reporting functions of validate hooks are core's
 * (core/cfg.c); this file hands them the position to report at.
 *
 * Defaults are written in the tables as YAML text so they read like the
 * config file. Scalar defaults are converted directly; list and map
 * defaults ("[http.route]") go through the YAML parser. A default that does
 * not parse is a bug in a table, reported as such.
 */
#include "decode.h"
#include "core/log.h"

#include <errno.h>
#include <math.h>
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *skip_spaces(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* ---- errors from validate hooks ----------------------------------------- */

/* pl_cfg_errorf, pl_cfg_warnf and pl_cfg_check (core/cfg.c) land here: the
 * message goes to the error list at the key's position. */
static void cfg_report(pl_cfg_ctx *ctx, bool warning, const char *key, const char *msg)
{
    const pl_cfg_node *at = key ? pl_cfg_node_key(ctx->map, key) : NULL;
    if (!at)
        at = ctx->map ? ctx->map : ctx->where;
    if (warning) {
        if (key)
            pl_cfg_warn_at(ctx->errs, at, "'%s': %s", key, msg);
        else
            pl_cfg_warn_at(ctx->errs, at, "%s", msg);
        return;
    }
    if (key)
        pl_cfg_errors_at(ctx->errs, at, "'%s': %s", key, msg);
    else
        pl_cfg_errors_at(ctx->errs, at, "%s", msg);
    ctx->n_errors++;
}

/* ---- listening addresses ------------------------------------------------ */

int pl_cfg_address_parse(const char *addr, char *host, size_t host_size, int *port, char *why,
                         size_t why_size)
{
    if (host && host_size)
        host[0] = '\0';
    if (port)
        *port = -1;
    if (!*addr || strcmp(addr, "none") == 0)
        return 0;
    const char *h = addr, *colon;
    size_t hlen;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':') {
            snprintf(why, why_size, "'%s': expected [ipv6]:port", addr);
            return -1;
        }
        h = addr + 1;
        hlen = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon) {
            snprintf(why, why_size, "'%s': expected host:port", addr);
            return -1;
        }
        hlen = (size_t)(colon - addr);
    }
    const char *p = colon + 1;
    long value = 0;
    bool digits = *p != '\0';
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || value > 65535) {
            digits = false;
            break;
        }
        value = value * 10 + (*p - '0');
    }
    if (!digits || value > 65535) {
        snprintf(why, why_size, "'%s': port must be a number from 0 to 65535", addr);
        return -1;
    }
    char name[256];
    if (hlen >= sizeof(name)) {
        snprintf(why, why_size, "'%s': host too long", addr);
        return -1;
    }
    memcpy(name, h, hlen);
    name[hlen] = '\0';
    /* the listener binds IP addresses (and localhost) without a resolver */
    unsigned char buf[sizeof(struct in6_addr)];
    if (hlen && strcmp(name, "localhost") != 0 && inet_pton(AF_INET, name, buf) != 1 &&
        inet_pton(AF_INET6, name, buf) != 1) {
        snprintf(why, why_size,
                 "'%s': cannot listen on host '%s': write an IP address of this machine, "
                 "localhost, or nothing before the colon for every interface",
                 addr, name);
        return -1;
    }
    if (host && host_size)
        snprintf(host, host_size, "%s",
                 hlen == 0                        ? "0.0.0.0"
                 : strcmp(name, "localhost") == 0 ? "127.0.0.1"
                                                  : name);
    if (port)
        *port = (int)value;
    return 0;
}

/* ---- the decoder -------------------------------------------------------- */

const char *pl_cfg_type_name(pl_cfg_type type)
{
    switch (type) {
    case PL_CFG_STRING:
        return "string";
    case PL_CFG_INT:
        return "int";
    case PL_CFG_BOOL:
        return "bool";
    case PL_CFG_DOUBLE:
        return "number";
    case PL_CFG_DURATION:
        return "duration";
    case PL_CFG_SIZE:
        return "size";
    case PL_CFG_STRLIST:
        return "list of strings";
    case PL_CFG_STRMAP:
        return "map of strings";
    case PL_CFG_SECTION:
        return "section";
    case PL_CFG_LIST:
        return "list of sections";
    case PL_CFG_IGNORED:
        return "any (ignored)";
    case PL_CFG_ADDRESS:
        return "host:port";
    }
    return "?";
}

typedef struct decoder {
    pl_cfg_errors *errs;
    int n_errors;
} decoder;

static void dec_error(decoder *d, const pl_cfg_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void dec_error(decoder *d, const pl_cfg_node *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (at)
        pl_cfg_errors_addv(d->errs, at->file, at->line, at->col, fmt, ap);
    else
        pl_cfg_errors_addv(d->errs, "<defaults>", 0, 0, fmt, ap);
    va_end(ap);
    d->n_errors++;
}

static const char *describe_node(const pl_cfg_node *node, char *buf, size_t size)
{
    if (node->kind == PL_NODE_SCALAR) {
        snprintf(buf, size, "'%.60s'", node->value);
        return buf;
    }
    return node->kind == PL_NODE_MAP ? "a map" : node->kind == PL_NODE_SEQ ? "a list" : "null";
}

static int decode_section(decoder *d, const pl_cfg_section *section, const pl_cfg_node *node,
                          const pl_cfg_node *where, void *out, const char *const *skip);

static int parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on"};
    static const char *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static void free_strlist(pl_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

static void free_strmap(pl_strmap *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->keys[i]);
        free(m->values[i]);
    }
    free(m->keys);
    free(m->values);
    m->keys = m->values = NULL;
    m->n = 0;
}

static void free_list(const pl_cfg_section *section, pl_cfg_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        pl_cfg_free(section, (char *)l->items + i * section->size);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* Releases what a field holds, before overwriting it. */
static void clear_field(const pl_cfg_field *f, void *base)
{
    void *slot = (char *)base + f->offset;
    switch (f->type) {
    case PL_CFG_STRING:
    case PL_CFG_ADDRESS:
        free(*(char **)slot);
        *(char **)slot = NULL;
        break;
    case PL_CFG_STRLIST:
        free_strlist(slot);
        break;
    case PL_CFG_STRMAP:
        free_strmap(slot);
        break;
    case PL_CFG_LIST:
        free_list(f->section, slot);
        break;
    case PL_CFG_SECTION:
        if (f->section)
            pl_cfg_free(f->section, slot);
        break;
    default:
        break;
    }
}

/* Sets one field from a YAML node (never NULL, never a null node). */
static void set_field(decoder *d, const pl_cfg_field *f, const pl_cfg_node *key,
                      const pl_cfg_node *node, void *base)
{
    void *slot = (char *)base + f->offset;
    char shown[80];
    bool scalar_type = f->type <= PL_CFG_SIZE || f->type == PL_CFG_ADDRESS;
    if (scalar_type && node->kind != PL_NODE_SCALAR) {
        dec_error(d, node, "'%s': expected %s %s, got %s", f->key,
                  f->type == PL_CFG_INT ? "an" : "a", pl_cfg_type_name(f->type),
                  describe_node(node, shown, sizeof(shown)));
        return;
    }
    const char *v = node->value;
    if (f->type == PL_CFG_ADDRESS) {
        char why[200];
        if (pl_cfg_address_parse(v, NULL, 0, NULL, why, sizeof(why)) < 0) {
            dec_error(d, node, "'%s': %s", f->key, why);
            return;
        }
    }
    switch (f->type) {
    case PL_CFG_ADDRESS: /* stored as a string */
    case PL_CFG_STRING: {
        char *copy = strdup(v);
        if (!copy) {
            dec_error(d, node, "out of memory");
            return;
        }
        clear_field(f, base);
        *(char **)slot = copy;
        return;
    }
    case PL_CFG_INT: {
        /* decimal unless written 0x.. (a leading zero is not octal) */
        const char *digits = skip_spaces(v);
        int base = 10;
        if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
            base = 16;
        char *end;
        errno = 0;
        long long x = strtoll(digits, &end, base);
        if (errno || end == digits || *skip_spaces(end) != '\0') {
            dec_error(d, node, "'%s': expected an integer, got %s", f->key,
                      describe_node(node, shown, sizeof(shown)));
            return;
        }
        *(int64_t *)slot = x;
        return;
    }
    case PL_CFG_BOOL:
        if (parse_bool(v, (bool *)slot) < 0)
            dec_error(d, node, "'%s': expected true or false, got %s", f->key,
                      describe_node(node, shown, sizeof(shown)));
        return;
    case PL_CFG_DOUBLE: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (errno || end == v || *skip_spaces(end) != '\0' || !isfinite(x)) {
            dec_error(d, node, "'%s': expected a number, got %s", f->key,
                      describe_node(node, shown, sizeof(shown)));
            return;
        }
        *(double *)slot = x;
        return;
    }
    case PL_CFG_DURATION:
        if (pl_parse_duration(v, (int64_t *)slot) < 0)
            dec_error(d, node, "'%s': invalid duration %s (write e.g. 500ms, 30s, 5m, 1h)", f->key,
                      describe_node(node, shown, sizeof(shown)));
        return;
    case PL_CFG_SIZE:
        if (pl_parse_size(v, (uint64_t *)slot) < 0)
            dec_error(d, node, "'%s': invalid size %s (write e.g. 512KiB, 4MiB, 1GB)", f->key,
                      describe_node(node, shown, sizeof(shown)));
        return;
    case PL_CFG_STRLIST: {
        pl_strlist list = {0};
        if (node->kind == PL_NODE_SCALAR) { /* a single string stands for [it] */
            list.items = malloc(sizeof(char *));
            if (list.items && (list.items[0] = strdup(v)))
                list.n = 1;
        } else if (node->kind == PL_NODE_SEQ) {
            list.items = calloc(node->n ? node->n : 1, sizeof(char *));
            for (size_t i = 0; list.items && i < node->n; i++) {
                const pl_cfg_node *item = node->items[i];
                if (item->kind != PL_NODE_SCALAR) {
                    dec_error(d, item, "'%s': expected a string, got %s", f->key,
                              describe_node(item, shown, sizeof(shown)));
                    continue;
                }
                list.items[list.n] = strdup(item->value);
                if (list.items[list.n])
                    list.n++;
            }
        } else {
            dec_error(d, node, "'%s': expected a list of strings, got %s", f->key,
                      describe_node(node, shown, sizeof(shown)));
            return;
        }
        clear_field(f, base);
        *(pl_strlist *)slot = list;
        return;
    }
    case PL_CFG_STRMAP: {
        if (node->kind != PL_NODE_MAP) {
            dec_error(d, node, "'%s': expected a map of strings, got %s", f->key,
                      describe_node(node, shown, sizeof(shown)));
            return;
        }
        pl_strmap map = {0};
        size_t cap = node->n ? node->n : 1;
        map.keys = calloc(cap, sizeof(char *));
        map.values = calloc(cap, sizeof(char *));
        for (size_t i = 0; map.keys && map.values && i < node->n; i++) {
            const pl_cfg_node *item = node->items[i];
            if (item->kind != PL_NODE_SCALAR && item->kind != PL_NODE_NULL) {
                dec_error(d, item, "'%s.%s': expected a string, got %s", f->key,
                          node->keys[i]->value, describe_node(item, shown, sizeof(shown)));
                continue;
            }
            map.keys[map.n] = strdup(node->keys[i]->value);
            map.values[map.n] = strdup(item->kind == PL_NODE_SCALAR ? item->value : "");
            if (map.keys[map.n] && map.values[map.n])
                map.n++;
            else {
                free(map.keys[map.n]);
                free(map.values[map.n]);
            }
        }
        clear_field(f, base);
        *(pl_strmap *)slot = map;
        return;
    }
    case PL_CFG_IGNORED: {
        /* a Collector key proflink refuses: its help starts with "not
         * supported" and says what to use instead */
        if (f->description && strncmp(f->description, "not supported", 13) == 0) {
            dec_error(d, key ? key : node, "'%s': %s", f->key, f->description);
            return;
        }
        /* the help says what proflink does instead, when it does more than
         * nothing ("accepted for Collector configs; <what>") */
        const char *why = f->description ? strstr(f->description, "; ") : NULL;
        if (why && strcmp(why, "; no effect") != 0)
            pl_cfg_warn_at(d->errs, key ? key : node,
                           "'%s' is accepted for compatibility and has no effect (%s)", f->key,
                           why + 2);
        else
            pl_cfg_warn_at(d->errs, key ? key : node,
                           "'%s' is accepted for compatibility and has no effect", f->key);
        return;
    }
    case PL_CFG_SECTION:
        if (node->kind != PL_NODE_MAP) {
            dec_error(d, node, "'%s': expected a map, got %s", f->key,
                      describe_node(node, shown, sizeof(shown)));
            return;
        }
        clear_field(f, base);
        decode_section(d, f->section, node, key, slot, NULL);
        return;
    case PL_CFG_LIST: {
        if (node->kind != PL_NODE_SEQ) {
            dec_error(d, node, "'%s': expected a list, got %s", f->key,
                      describe_node(node, shown, sizeof(shown)));
            return;
        }
        clear_field(f, base);
        pl_cfg_list *list = slot;
        list->items = calloc(node->n ? node->n : 1, f->section->size);
        if (!list->items) {
            dec_error(d, node, "out of memory");
            return;
        }
        for (size_t i = 0; i < node->n; i++) {
            const pl_cfg_node *item = node->items[i];
            void *elem = (char *)list->items + list->n * f->section->size;
            if (item->kind != PL_NODE_MAP && item->kind != PL_NODE_NULL) {
                dec_error(d, item, "'%s': each item must be a map, got %s", f->key,
                          describe_node(item, shown, sizeof(shown)));
                continue;
            }
            decode_section(d, f->section, item, item, elem, NULL);
            list->n++;
        }
        return;
    }
    }
}

static int fill_defaults(const pl_cfg_section *section, void *out);

/* Applies a default written as YAML text. Returns 0 or -1 (bad table). */
static int apply_default(decoder *d, const pl_cfg_field *f, void *base)
{
    void *slot = (char *)base + f->offset;
    if (f->type == PL_CFG_SECTION)
        return f->section ? fill_defaults(f->section, slot) : -1;
    if (!f->default_value)
        return 0;
    int before = d->n_errors;
    if (f->type <= PL_CFG_SIZE) {
        pl_cfg_node node = {.kind = PL_NODE_SCALAR, .value = (char *)f->default_value};
        node.file = "<defaults>";
        set_field(d, f, NULL, &node, base);
        return d->n_errors == before ? 0 : -1;
    }
    pl_cfg_errors scratch;
    pl_cfg_errors_init(&scratch);
    pl_cfg_doc *doc =
        pl_cfg_doc_parse("<defaults>", f->default_value, strlen(f->default_value), &scratch);
    int rc = -1;
    if (doc && doc->root) {
        set_field(d, f, NULL, doc->root, base);
        rc = d->n_errors == before ? 0 : -1;
    } else if (doc) {
        rc = 0; /* an empty default */
    }
    pl_cfg_doc_free(doc);
    pl_cfg_errors_free(&scratch);
    return rc;
}

/* Zeroes `out` and writes every default, recursively, without validating.
 * Errors here are bugs in a table; they are reported by the caller. */
static int fill_defaults(const pl_cfg_section *section, void *out)
{
    memset(out, 0, section->size);
    pl_cfg_errors scratch;
    pl_cfg_errors_init(&scratch);
    decoder quiet = {.errs = &scratch};
    int rc = 0;
    for (size_t i = 0; section->fields && section->fields[i].key; i++)
        if (apply_default(&quiet, &section->fields[i], out) < 0)
            rc = -1;
    pl_cfg_errors_free(&scratch);
    return rc;
}

/* Compares the number in `slot` (of the field's type) with `limit`, YAML text
 * of the same type: <0, 0, >0; *bad when the limit does not parse. */
static int compare_limit(const pl_cfg_field *f, const void *slot, const char *limit, bool *bad)
{
    char *end = NULL;
    switch (f->type) {
    case PL_CFG_INT: {
        errno = 0;
        long long l = strtoll(limit, &end, 10);
        int64_t v = *(const int64_t *)slot;
        *bad = errno || end == limit || *end;
        return (v > l) - (v < l);
    }
    case PL_CFG_DURATION: {
        int64_t l = 0, v = *(const int64_t *)slot;
        *bad = pl_parse_duration(limit, &l) < 0;
        return (v > l) - (v < l);
    }
    case PL_CFG_SIZE: {
        uint64_t l = 0, v = *(const uint64_t *)slot;
        *bad = pl_parse_size(limit, &l) < 0;
        return (v > l) - (v < l);
    }
    case PL_CFG_DOUBLE: {
        double l = strtod(limit, &end), v = *(const double *)slot;
        *bad = end == limit || *end;
        return (v > l) - (v < l);
    }
    default:
        *bad = true;
        return 0;
    }
}

static bool rule_holds(const pl_cfg_field *f, const void *base, bool *bad)
{
    const pl_cfg_rule *r = f->rule;
    const void *slot = (const char *)base + f->offset;
    *bad = false;
    if (r->required) {
        switch (f->type) {
        case PL_CFG_STRING:
        case PL_CFG_ADDRESS: {
            const char *s = *(char *const *)slot;
            return s && *s;
        }
        case PL_CFG_STRLIST:
            return ((const pl_strlist *)slot)->n != 0;
        case PL_CFG_STRMAP:
            return ((const pl_strmap *)slot)->n != 0;
        case PL_CFG_LIST:
            return ((const pl_cfg_list *)slot)->n != 0;
        default:
            *bad = true;
            return true;
        }
    }
    bool ok = true;
    if (r->minimum && compare_limit(f, slot, r->minimum, bad) < 0)
        ok = false;
    if (r->exclusive_minimum && compare_limit(f, slot, r->exclusive_minimum, bad) <= 0)
        ok = false;
    if (r->maximum && compare_limit(f, slot, r->maximum, bad) > 0)
        ok = false;
    return ok || *bad;
}

/* The rules of a filled section's fields, in table order, then its validate
 * hook: the hook sees values that passed the simple checks reported. */
static void check_section(decoder *d, const pl_cfg_section *section, void *out,
                          const pl_cfg_node *map, const pl_cfg_node *where)
{
    pl_cfg_ctx ctx = {.report = {cfg_report}, .errs = d->errs, .map = map, .where = where};
    for (size_t i = 0; section->fields && section->fields[i].key; i++) {
        const pl_cfg_field *f = &section->fields[i];
        if (!f->rule)
            continue;
        bool bad;
        if (!rule_holds(f, out, &bad))
            pl_cfg_errorf(&ctx, f->key, "%s", f->rule->message ? f->rule->message : "is invalid");
        else if (bad)
            pl_cfg_errorf(&ctx, f->key, "a limit in the component table does not parse");
    }
    int by_rules = ctx.n_errors;
    int n = section->validate ? section->validate(out, &ctx) : 0;
    int by_hook = ctx.n_errors - by_rules;
    d->n_errors += by_rules + (n > by_hook ? n : by_hook);
}

/* Runs the validate hooks of a section left at its defaults (and of its
 * nested sections), locating their errors at `where`. */
static void validate_defaults(decoder *d, const pl_cfg_section *section, void *out,
                              const pl_cfg_node *where)
{
    for (size_t i = 0; section->fields && section->fields[i].key; i++) {
        const pl_cfg_field *f = &section->fields[i];
        if (f->type == PL_CFG_SECTION && f->section)
            validate_defaults(d, f->section, (char *)out + f->offset, where);
    }
    check_section(d, section, out, NULL, where);
}

static bool in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
}

static int decode_section(decoder *d, const pl_cfg_section *section, const pl_cfg_node *node,
                          const pl_cfg_node *where, void *out, const char *const *skip)
{
    int before = d->n_errors;
    const pl_cfg_field *fields = section->fields;
    if (fill_defaults(section, out) < 0)
        dec_error(d, where ? where : node, "a default in the component table does not parse");
    const pl_cfg_node *map = node && node->kind == PL_NODE_MAP ? node : NULL;
    if (node && node->kind != PL_NODE_MAP && node->kind != PL_NODE_NULL) {
        char shown[80];
        dec_error(d, node, "expected a map, got %s", describe_node(node, shown, sizeof(shown)));
    }
    for (size_t k = 0; map && k < map->n; k++) {
        const pl_cfg_node *key = map->keys[k];
        const pl_cfg_node *value = map->items[k];
        if (in_list(skip, key->value))
            continue;
        const pl_cfg_field *f = NULL;
        for (size_t i = 0; fields && fields[i].key; i++) {
            if (strcmp(fields[i].key, key->value) == 0) {
                f = &fields[i];
                break;
            }
        }
        if (!f) {
            char known[600];
            size_t len = 0;
            known[0] = '\0';
            for (size_t i = 0; fields && fields[i].key && len < sizeof(known) - 1; i++)
                len += (size_t)snprintf(known + len, sizeof(known) - len, "%s%s", len ? ", " : "",
                                        fields[i].key);
            for (size_t i = 0; skip && skip[i] && len < sizeof(known) - 1; i++)
                len += (size_t)snprintf(known + len, sizeof(known) - len, "%s%s", len ? ", " : "",
                                        skip[i]);
            const char *close = NULL;
            int best = 3; /* suggest only near misses */
            for (size_t i = 0; fields && fields[i].key; i++) {
                int dist = pl_cfg_edit_distance(key->value, fields[i].key);
                if (dist < best) {
                    best = dist;
                    close = fields[i].key;
                }
            }
            if (close)
                dec_error(d, key, "unknown key '%s' (did you mean '%s'? known keys: %s)",
                          key->value, close, known);
            else if (len)
                dec_error(d, key, "unknown key '%s' (known keys: %s)", key->value, known);
            else
                dec_error(d, key, "unknown key '%s' (this section takes no keys)", key->value);
            continue;
        }
        if (value->kind == PL_NODE_NULL) {
            if (f->type == PL_CFG_SECTION && f->section)
                validate_defaults(d, f->section, (char *)out + f->offset, key);
            continue; /* `key:` with nothing keeps the default */
        }
        set_field(d, f, key, value, out);
    }
    /* nested sections the file did not mention still get their checks */
    for (size_t i = 0; fields && fields[i].key; i++) {
        const pl_cfg_field *f = &fields[i];
        if (f->type == PL_CFG_SECTION && f->section && !pl_cfg_node_key(map, f->key))
            validate_defaults(d, f->section, (char *)out + f->offset, where ? where : node);
    }
    check_section(d, section, out, map, where ? where : node);
    return d->n_errors - before;
}

int pl_cfg_decode_skipping(const pl_cfg_section *section, const pl_cfg_node *node,
                           const pl_cfg_node *where, void *out, pl_cfg_errors *errs,
                           const char *const *skip)
{
    decoder d = {.errs = errs};
    return decode_section(&d, section, node, where, out, skip);
}

int pl_cfg_decode(const pl_cfg_section *section, const pl_cfg_node *node, const pl_cfg_node *where,
                  void *out, pl_cfg_errors *errs)
{
    return pl_cfg_decode_skipping(section, node, where, out, errs, NULL);
}

int pl_cfg_defaults(const pl_cfg_section *section, void *out)
{
    return fill_defaults(section, out);
}

void pl_cfg_free(const pl_cfg_section *section, void *cfg)
{
    if (!section || !cfg)
        return;
    for (size_t i = 0; section->fields && section->fields[i].key; i++)
        clear_field(&section->fields[i], cfg);
}

/* ---- documentation ------------------------------------------------------ */

void pl_cfg_describe(FILE *out, const pl_cfg_section *section, int indent)
{
    if (!section)
        return;
    for (size_t i = 0; section->fields && section->fields[i].key; i++) {
        const pl_cfg_field *f = &section->fields[i];
        int key_width = 28 - indent;
        if (key_width < 8)
            key_width = 8;
        char def[64];
        if (f->type == PL_CFG_SECTION || f->type == PL_CFG_LIST)
            snprintf(def, sizeof(def), "-");
        else if (f->default_value)
            snprintf(def, sizeof(def), "%s", f->default_value[0] ? f->default_value : "\"\"");
        else
            snprintf(def, sizeof(def), "(none)");
        fprintf(out, "%*s%-*s %-16s %-18s %s\n", indent, "", key_width, f->key,
                pl_cfg_type_name(f->type), def, f->description ? f->description : "");
        if ((f->type == PL_CFG_SECTION || f->type == PL_CFG_LIST) && f->section)
            pl_cfg_describe(out, f->section, indent + 2);
    }
}
