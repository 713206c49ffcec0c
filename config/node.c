/*
 * node.c: YAML text -> position-carrying node tree, environment expansion,
 * and the error list (see node.h).
 *
 * The tree is built by recursive descent over libyaml's events. Nesting is
 * limited (MAX_DEPTH) so a hostile file cannot exhaust the stack, and every
 * libyaml error becomes one positioned error instead of a crash.
 */
#include "node.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_DEPTH 64

/* ---- errors ------------------------------------------------------------- */

void pl_cfg_errors_init(pl_cfg_errors *errs)
{
    memset(errs, 0, sizeof(*errs));
}

static void free_list(pl_cfg_error *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(items[i].text);
    free(items);
}

void pl_cfg_errors_free(pl_cfg_errors *errs)
{
    if (!errs)
        return;
    free_list(errs->items, errs->n);
    free_list(errs->warnings, errs->n_warnings);
    for (size_t i = 0; i < errs->n_files; i++)
        free(errs->files[i]);
    free(errs->files);
    memset(errs, 0, sizeof(*errs));
}

/* The order in which a file was first named: messages of several merged
 * sources sort by source first, then by position. */
static int file_rank(pl_cfg_errors *errs, const char *file)
{
    for (size_t i = 0; i < errs->n_files; i++)
        if (strcmp(errs->files[i], file) == 0)
            return (int)i;
    char **files = realloc(errs->files, (errs->n_files + 1) * sizeof(*files));
    if (!files)
        return (int)errs->n_files;
    errs->files = files;
    files[errs->n_files] = strdup(file);
    if (!files[errs->n_files])
        return (int)errs->n_files;
    return (int)errs->n_files++;
}

static void add_to(pl_cfg_errors *errs, bool warning, const char *file, int line, int col,
                   const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    char text[1400];
    const char *tag = warning ? "warning: " : "";
    if (line > 0)
        snprintf(text, sizeof(text), "%s:%d:%d: %s%s", file ? file : "", line, col, tag, msg);
    else
        snprintf(text, sizeof(text), "%s: %s%s", file ? file : "", tag, msg);
    pl_cfg_error **items = warning ? &errs->warnings : &errs->items;
    size_t *n = warning ? &errs->n_warnings : &errs->n;
    size_t *cap = warning ? &errs->cap_warnings : &errs->cap;
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        pl_cfg_error *grown = realloc(*items, c * sizeof(*grown));
        if (!grown)
            return;
        *items = grown;
        *cap = c;
    }
    pl_cfg_error *e = &(*items)[*n];
    e->text = strdup(text);
    if (!e->text)
        return;
    e->line = line;
    e->col = col;
    e->seq = *n;
    e->file_rank = file_rank(errs, file ? file : "");
    (*n)++;
}

void pl_cfg_errors_addv(pl_cfg_errors *errs, const char *file, int line, int col, const char *fmt,
                        va_list ap)
{
    if (errs)
        add_to(errs, false, file, line, col, fmt, ap);
}

void pl_cfg_errors_add(pl_cfg_errors *errs, const char *file, int line, int col, const char *fmt,
                       ...)
{
    va_list ap;
    va_start(ap, fmt);
    pl_cfg_errors_addv(errs, file, line, col, fmt, ap);
    va_end(ap);
}

void pl_cfg_errors_at(pl_cfg_errors *errs, const pl_cfg_node *node, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (node)
        pl_cfg_errors_addv(errs, node->file, node->line, node->col, fmt, ap);
    else
        pl_cfg_errors_addv(errs, "", 0, 0, fmt, ap);
    va_end(ap);
}

void pl_cfg_warn_at(pl_cfg_errors *errs, const pl_cfg_node *node, const char *fmt, ...)
{
    if (!errs)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (node)
        add_to(errs, true, node->file, node->line, node->col, fmt, ap);
    else
        add_to(errs, true, "", 0, 0, fmt, ap);
    va_end(ap);
}

static int error_cmp(const void *a, const void *b)
{
    const pl_cfg_error *x = a, *y = b;
    if (x->file_rank != y->file_rank)
        return x->file_rank < y->file_rank ? -1 : 1;
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    if (x->col != y->col)
        return x->col < y->col ? -1 : 1;
    return x->seq < y->seq ? -1 : (x->seq > y->seq);
}

void pl_cfg_errors_sort(pl_cfg_errors *errs)
{
    if (errs->n > 1)
        qsort(errs->items, errs->n, sizeof(errs->items[0]), error_cmp);
    if (errs->n_warnings > 1)
        qsort(errs->warnings, errs->n_warnings, sizeof(errs->warnings[0]), error_cmp);
}

void pl_cfg_errors_print(const pl_cfg_errors *errs, FILE *out)
{
    for (size_t i = 0; i < errs->n; i++)
        fprintf(out, "%s\n", errs->items[i].text);
}

void pl_cfg_warnings_print(const pl_cfg_errors *errs, FILE *out)
{
    for (size_t i = 0; i < errs->n_warnings; i++)
        fprintf(out, "%s\n", errs->warnings[i].text);
}

/* ---- environment expansion --------------------------------------------- */

typedef struct strbuf {
    char *p;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_add(strbuf *sb, const char *s, size_t len)
{
    if (sb->oom)
        return;
    if (sb->n + len + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 32;
        while (cap < sb->n + len + 1)
            cap *= 2;
        char *p = realloc(sb->p, cap);
        if (!p) {
            sb->oom = true;
            return;
        }
        sb->p = p;
        sb->cap = cap;
    }
    memcpy(sb->p + sb->n, s, len);
    sb->n += len;
    sb->p[sb->n] = '\0';
}

static bool env_name_ok(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
                  (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

/* A provider's file is a secret or a small fragment, never a data set. */
#define MAX_PROVIDER_FILE (1u << 20)

/* Reads `path` for ${file:path}: the content without its trailing line
 * breaks (a file written by `echo` has one; a password never ends in one).
 * NULL with why set when it cannot be read. */
static char *read_provider_file(const char *path, char *why, size_t why_size)
{
    /* a regular file only: a FIFO or a device (/dev/stdin) could block or
     * never end; O_NONBLOCK keeps even the open from waiting */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, why_size, "${file:%s}: cannot read: %s", path,
                 fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    char *text = malloc(MAX_PROVIDER_FILE + 1);
    if (!text) {
        fclose(f);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    size_t len = fread(text, 1, MAX_PROVIDER_FILE + 1, f);
    bool failed = ferror(f);
    fclose(f);
    if (failed || len > MAX_PROVIDER_FILE) {
        snprintf(why, why_size, "${file:%s}: %s", path,
                 failed ? "read error" : "larger than 1 MiB");
        free(text);
        return NULL;
    }
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        len--;
    text[len] = '\0';
    if (strlen(text) != len) {
        snprintf(why, why_size, "${file:%s}: contains a NUL byte", path);
        free(text);
        return NULL;
    }
    return text;
}

static void add_warning(char *warn, size_t warn_size, const char *fmt, const char *name)
{
    if (!warn || !warn_size)
        return;
    size_t used = strlen(warn);
    if (used && used + 2 < warn_size) {
        snprintf(warn + used, warn_size - used, "; ");
        used += 2;
    }
    if (used < warn_size)
        snprintf(warn + used, warn_size - used, fmt, name, name);
}

char *pl_cfg_expand(const char *text, char *why, size_t why_size, char *warn, size_t warn_size)
{
    strbuf sb = {0};
    sb_add(&sb, "", 0);
    if (warn && warn_size)
        warn[0] = '\0';
    const char *p = text;
    while (*p) {
        const char *dollar = strchr(p, '$');
        if (!dollar) {
            sb_add(&sb, p, strlen(p));
            break;
        }
        sb_add(&sb, p, (size_t)(dollar - p));
        if (dollar[1] == '$') { /* $$ -> $ */
            sb_add(&sb, "$", 1);
            p = dollar + 2;
            continue;
        }
        if (dollar[1] != '{') { /* a lone dollar stays as written */
            sb_add(&sb, "$", 1);
            p = dollar + 1;
            continue;
        }
        const char *close = strchr(dollar + 2, '}');
        if (!close) {
            snprintf(why, why_size, "unterminated '${' in value");
            free(sb.p);
            return NULL;
        }
        const char *ref = dollar + 2;
        size_t ref_len = (size_t)(close - ref);
        if (ref_len >= 5 && memcmp(ref, "file:", 5) == 0) {
            char path[4096];
            if (ref_len - 5 == 0 || ref_len - 5 >= sizeof(path)) {
                snprintf(why, why_size, "bad file reference '%.*s'", (int)(close - dollar + 1),
                         dollar);
                free(sb.p);
                return NULL;
            }
            memcpy(path, ref + 5, ref_len - 5);
            path[ref_len - 5] = '\0';
            char *content = read_provider_file(path, why, why_size);
            if (!content) {
                free(sb.p);
                return NULL;
            }
            sb_add(&sb, content, strlen(content));
            free(content);
            p = close + 1;
            continue;
        }
        if (ref_len >= 4 && memcmp(ref, "env:", 4) == 0) {
            ref += 4;
            ref_len -= 4;
        }
        const char *def = NULL;
        size_t def_len = 0, name_len = ref_len;
        for (size_t i = 0; i + 1 < ref_len; i++) {
            if (ref[i] == ':' && ref[i + 1] == '-') {
                name_len = i;
                def = ref + i + 2;
                def_len = ref_len - i - 2;
                break;
            }
        }
        if (!env_name_ok(ref, name_len)) {
            const char *colon = memchr(ref, ':', name_len);
            if (colon && env_name_ok(ref, (size_t)(colon - ref)))
                snprintf(why, why_size, "unknown provider '%.*s' in '%.*s' (known: env, file)",
                         (int)(colon - ref), ref, (int)(close - dollar + 1), dollar);
            else
                snprintf(why, why_size, "bad variable reference '%.*s'", (int)(close - dollar + 1),
                         dollar);
            free(sb.p);
            return NULL;
        }
        char name[256];
        if (name_len >= sizeof(name)) {
            snprintf(why, why_size, "variable name too long");
            free(sb.p);
            return NULL;
        }
        memcpy(name, ref, name_len);
        name[name_len] = '\0';
        const char *value = getenv(name);
        if (value && (*value || !def))
            sb_add(&sb, value, strlen(value));
        else if (def)
            sb_add(&sb, def, def_len);
        else /* as the Collector does: empty, and said so */
            add_warning(warn, warn_size,
                        "environment variable %s is not set; using an empty value (write "
                        "${env:%s:-default} to choose one)",
                        name);
        p = close + 1;
    }
    if (sb.oom) {
        free(sb.p);
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    return sb.p;
}

/* ---- the tree ----------------------------------------------------------- */

typedef struct anchor {
    char *name;
    pl_cfg_node *node;
} anchor;

typedef struct builder {
    yaml_parser_t parser;
    pl_cfg_doc *doc;
    pl_cfg_errors *errs;
    int n_errors;
    anchor *anchors;
    size_t n_anchors, cap_anchors;
    int includes; /* how many ${file:...} documents enclose this one */
} builder;

/* ${file:...} documents may name further files, this deep at most (a file
 * naming itself stops here). */
#define MAX_INCLUDES 8

static pl_cfg_doc *doc_parse(const char *file, const char *text, size_t len, pl_cfg_errors *errs,
                             int includes);

pl_cfg_node *pl_cfg_doc_node(pl_cfg_doc *doc, pl_node_kind kind, const char *file, int line,
                             int col)
{
    if (doc->n_all == doc->cap_all) {
        size_t cap = doc->cap_all ? doc->cap_all * 2 : 64;
        pl_cfg_node **all = realloc(doc->all, cap * sizeof(*all));
        if (!all)
            return NULL;
        doc->all = all;
        doc->cap_all = cap;
    }
    pl_cfg_node *node = calloc(1, sizeof(*node));
    if (!node)
        return NULL;
    doc->all[doc->n_all++] = node;
    node->kind = kind;
    node->file = file ? file : doc->file;
    node->line = line;
    node->col = col;
    return node;
}

static pl_cfg_node *new_node(builder *b, pl_node_kind kind, const yaml_mark_t *mark)
{
    return pl_cfg_doc_node(b->doc, kind, b->doc->file, (int)mark->line + 1, (int)mark->column + 1);
}

int pl_cfg_node_append(pl_cfg_node *parent, pl_cfg_node *key, pl_cfg_node *item)
{
    /* grow both arrays together in powers of two */
    size_t n = parent->n;
    if ((n & (n - 1)) == 0) {
        size_t cap = n ? n * 2 : 4;
        pl_cfg_node **items = realloc(parent->items, cap * sizeof(*items));
        if (!items)
            return -1;
        parent->items = items;
        if (parent->kind == PL_NODE_MAP) {
            pl_cfg_node **keys = realloc(parent->keys, cap * sizeof(*keys));
            if (!keys)
                return -1;
            parent->keys = keys;
        }
    }
    if (parent->kind == PL_NODE_MAP)
        parent->keys[n] = key;
    parent->items[n] = item;
    parent->n = n + 1;
    return 0;
}

static void builder_error(builder *b, const yaml_mark_t *mark, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void builder_error(builder *b, const yaml_mark_t *mark, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pl_cfg_errors_addv(b->errs, b->doc->file, (int)mark->line + 1, (int)mark->column + 1, fmt, ap);
    va_end(ap);
    b->n_errors++;
}

static void parser_error(builder *b)
{
    yaml_parser_t *p = &b->parser;
    if (p->error == YAML_MEMORY_ERROR) {
        pl_cfg_errors_add(b->errs, b->doc->file, 0, 0, "out of memory while parsing");
        b->n_errors++;
        return;
    }
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->context)
        builder_error(b, &p->problem_mark, "YAML syntax error: %s %s", problem, p->context);
    else
        builder_error(b, &p->problem_mark, "YAML syntax error: %s", problem);
}

static bool next_event(builder *b, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&b->parser, ev)) {
        parser_error(b);
        return false;
    }
    return true;
}

static void remember_anchor(builder *b, const yaml_char_t *name, pl_cfg_node *node)
{
    if (!name || !node)
        return;
    if (b->n_anchors == b->cap_anchors) {
        size_t cap = b->cap_anchors ? b->cap_anchors * 2 : 8;
        anchor *a = realloc(b->anchors, cap * sizeof(*a));
        if (!a)
            return;
        b->anchors = a;
        b->cap_anchors = cap;
    }
    char *copy = strdup((const char *)name);
    if (!copy)
        return;
    b->anchors[b->n_anchors].name = copy;
    b->anchors[b->n_anchors].node = node;
    b->n_anchors++;
}

static bool is_merge_key(const pl_cfg_node *key)
{
    return key->kind == PL_NODE_SCALAR && !key->quoted && strcmp(key->value, "<<") == 0;
}

/* YAML merge keys (`<<: *defaults` or `<<: [*a, *b]`): the merged maps'
 * entries are added unless the map sets the key itself. The `<<` entries
 * are removed, so later checks never see them. */
static int apply_merge_keys(builder *b, pl_cfg_node *map)
{
    size_t n_own = 0;
    bool any = false;
    for (size_t i = 0; i < map->n; i++)
        any |= is_merge_key(map->keys[i]);
    if (!any)
        return 0;
    size_t total = map->n;
    pl_cfg_node **merged_from = calloc(total, sizeof(*merged_from));
    if (!merged_from)
        return -1;
    size_t n_merges = 0;
    /* keep the map's own entries in place, in order */
    for (size_t i = 0; i < map->n; i++) {
        if (is_merge_key(map->keys[i])) {
            merged_from[n_merges++] = map->items[i];
            continue;
        }
        map->keys[n_own] = map->keys[i];
        map->items[n_own] = map->items[i];
        n_own++;
    }
    map->n = n_own;
    int rc = 0;
    for (size_t m = 0; m < n_merges && rc == 0; m++) {
        pl_cfg_node *src = merged_from[m];
        pl_cfg_node **sources = &src;
        size_t n_sources = 1;
        if (src->kind == PL_NODE_SEQ) {
            sources = src->items;
            n_sources = src->n;
        }
        for (size_t k = 0; k < n_sources && rc == 0; k++) {
            pl_cfg_node *from = sources[k];
            if (from->kind != PL_NODE_MAP) {
                pl_cfg_errors_at(b->errs, from, "'<<' merges maps only, not a %s",
                                 pl_cfg_node_kind_name(from));
                b->n_errors++;
                rc = -1;
                break;
            }
            for (size_t e = 0; e < from->n; e++) {
                if (pl_cfg_node_key(map, from->keys[e]->value))
                    continue; /* the map's own value (or an earlier merge) wins */
                if (pl_cfg_node_append(map, from->keys[e], from->items[e]) < 0) {
                    rc = -1;
                    break;
                }
            }
        }
    }
    free(merged_from);
    return rc;
}

static bool is_null_scalar(const yaml_event_t *ev)
{
    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)ev->data.scalar.value;
    return strcmp(v, "") == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
           strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

/* Builds the node that starts with `ev` (already read); consumes its end.
 * `is_key`: keys are not expanded and must be scalars. NULL on error. */
/* Is the whole (plain) scalar one ${file:PATH}? Then, as in the Collector,
 * the file is YAML in place of the value (`exporters: ${file:exp.yaml}`);
 * inside a longer string the content is pasted as text. */
static bool whole_file_reference(const char *raw)
{
    if (strncmp(raw, "${file:", 7) != 0)
        return false;
    const char *close = strchr(raw, '}');
    return close && close[1] == '\0' && close > raw + 7;
}

/* Reads and parses the file of a whole-value ${file:PATH} at `at`. A map or
 * a list replaces the value (*out, its nodes moved into b's document, each
 * keeping its position in the file); a scalar leaves *out NULL and the value
 * is expanded as text as before. -1 only when out of memory. */
static int include_file(builder *b, const pl_cfg_node *at, const char *raw, pl_cfg_node **out)
{
    *out = NULL;
    if (b->includes >= MAX_INCLUDES) {
        pl_cfg_errors_at(b->errs, at, "%s: files included %d deep (does a file name itself?)", raw,
                         MAX_INCLUDES);
        return 0; /* the text expansion then reads it as a string */
    }
    char path[4096], why[300];
    snprintf(path, sizeof(path), "%.*s", (int)(strlen(raw) - 8), raw + 7);
    char *content = read_provider_file(path, why, sizeof(why));
    if (!content)
        return 0; /* reported by the text expansion, at the value */
    size_t n_before = b->errs->n;
    pl_cfg_doc *inc = doc_parse(path, content, strlen(content), b->errs, b->includes + 1);
    free(content);
    if (!inc) {
        if (b->errs->n == n_before)
            return -1;
        b->n_errors++;
        return 0;
    }
    pl_cfg_node *root = inc->root;
    if (!root || (root->kind != PL_NODE_MAP && root->kind != PL_NODE_SEQ)) {
        pl_cfg_doc_free(inc);
        return 0;
    }
    if (pl_cfg_doc_adopt(b->doc, inc) < 0) {
        pl_cfg_doc_free(inc);
        return -1;
    }
    *out = root;
    return 0;
}

static pl_cfg_node *build_node(builder *b, yaml_event_t *ev, int depth, bool is_key)
{
    if (depth > MAX_DEPTH) {
        builder_error(b, &ev->start_mark, "nesting deeper than %d levels", MAX_DEPTH);
        return NULL;
    }
    switch (ev->type) {
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (size_t i = b->n_anchors; i-- > 0;)
            if (strcmp(b->anchors[i].name, name) == 0)
                return b->anchors[i].node;
        builder_error(b, &ev->start_mark, "unknown alias '*%s'", name);
        return NULL;
    }
    case YAML_SCALAR_EVENT: {
        bool null = !is_key && is_null_scalar(ev);
        pl_cfg_node *node = new_node(b, null ? PL_NODE_NULL : PL_NODE_SCALAR, &ev->start_mark);
        if (!node)
            return NULL;
        node->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
        const char *raw = (const char *)ev->data.scalar.value;
        if (ev->data.scalar.length != strlen(raw)) {
            builder_error(b, &ev->start_mark, "NUL character in a string");
            return NULL;
        }
        pl_cfg_node *included = NULL;
        if (!is_key && !null && !node->quoted && whole_file_reference(raw) &&
            include_file(b, node, raw, &included) < 0)
            return NULL;
        if (included)
            return included;
        if (is_key || null) {
            node->value = strdup(raw);
        } else {
            /* A bad reference is reported but does not stop the walk, so
             * one `validate` shows it with every other problem. */
            char why[300], warn[600];
            node->value = pl_cfg_expand(raw, why, sizeof(why), warn, sizeof(warn));
            if (!node->value) {
                pl_cfg_errors_at(b->errs, node, "%s", why);
                node->value = strdup("");
            }
            if (warn[0])
                pl_cfg_warn_at(b->errs, node, "%s", warn);
        }
        if (!node->value)
            return NULL;
        remember_anchor(b, ev->data.scalar.anchor, node);
        return node;
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool is_map = ev->type == YAML_MAPPING_START_EVENT;
        if (is_key) {
            builder_error(b, &ev->start_mark, "a key must be a plain string, not a %s",
                          is_map ? "map" : "list");
            return NULL;
        }
        pl_cfg_node *node = new_node(b, is_map ? PL_NODE_MAP : PL_NODE_SEQ, &ev->start_mark);
        if (!node)
            return NULL;
        remember_anchor(b, is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor,
                        node);
        for (;;) {
            yaml_event_t child;
            if (!next_event(b, &child))
                return NULL;
            if (child.type == YAML_SEQUENCE_END_EVENT || child.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&child);
                if (is_map && apply_merge_keys(b, node) < 0)
                    return NULL;
                return node;
            }
            pl_cfg_node *key = NULL;
            if (is_map) {
                key = build_node(b, &child, depth + 1, true);
                yaml_event_delete(&child);
                if (!key)
                    return NULL;
                if (key->kind != PL_NODE_SCALAR) {
                    pl_cfg_errors_at(b->errs, key, "a key must be a plain string");
                    b->n_errors++;
                    return NULL;
                }
                if (!next_event(b, &child))
                    return NULL;
            }
            pl_cfg_node *item = build_node(b, &child, depth + 1, false);
            yaml_event_delete(&child);
            if (!item)
                return NULL;
            if (is_map && !is_merge_key(key)) {
                for (size_t i = 0; i < node->n; i++) {
                    if (strcmp(node->keys[i]->value, key->value) == 0) {
                        /* reported, but the tree stays usable so the
                         * rest of the file is still checked */
                        pl_cfg_errors_at(b->errs, key, "duplicate key '%s' (first at line %d)",
                                         key->value, node->keys[i]->line);
                        break;
                    }
                }
            }
            if (pl_cfg_node_append(node, key, item) < 0)
                return NULL;
        }
    }
    default:
        builder_error(b, &ev->start_mark, "unexpected YAML event");
        return NULL;
    }
}

pl_cfg_doc *pl_cfg_doc_parse(const char *file, const char *text, size_t len, pl_cfg_errors *errs)
{
    return doc_parse(file, text, len, errs, 0);
}

static pl_cfg_doc *doc_parse(const char *file, const char *text, size_t len, pl_cfg_errors *errs,
                             int includes)
{
    builder b = {0};
    b.errs = errs;
    b.includes = includes;
    b.doc = calloc(1, sizeof(*b.doc));
    if (!b.doc)
        return NULL;
    b.doc->file = strdup(file ? file : "<config>");
    if (!b.doc->file) {
        free(b.doc);
        return NULL;
    }
    if (!yaml_parser_initialize(&b.parser)) {
        pl_cfg_doc_free(b.doc);
        return NULL;
    }
    yaml_parser_set_input_string(&b.parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&b.parser, YAML_UTF8_ENCODING);

    bool ok = true, seen_document = false;
    for (;;) {
        yaml_event_t ev;
        if (!next_event(&b, &ev)) {
            ok = false;
            break;
        }
        yaml_event_type_t type = ev.type;
        if (type == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (type == YAML_DOCUMENT_START_EVENT) {
            if (seen_document) {
                builder_error(&b, &ev.start_mark, "only one YAML document is allowed");
                yaml_event_delete(&ev);
                ok = false;
                break;
            }
            seen_document = true;
            yaml_event_delete(&ev);
            yaml_event_t first;
            if (!next_event(&b, &first)) {
                ok = false;
                break;
            }
            if (first.type != YAML_DOCUMENT_END_EVENT) {
                b.doc->root = build_node(&b, &first, 0, false);
                if (!b.doc->root) {
                    yaml_event_delete(&first);
                    ok = false;
                    if (b.n_errors == 0)
                        pl_cfg_errors_add(errs, b.doc->file, 0, 0, "out of memory");
                    break;
                }
                if (b.doc->root->kind == PL_NODE_NULL)
                    b.doc->root = NULL;
            }
            yaml_event_delete(&first);
            continue;
        }
        yaml_event_delete(&ev); /* STREAM_START, DOCUMENT_END */
    }
    yaml_parser_delete(&b.parser);
    for (size_t i = 0; i < b.n_anchors; i++)
        free(b.anchors[i].name);
    free(b.anchors);
    if (!ok || b.n_errors > 0) {
        pl_cfg_doc_free(b.doc);
        return NULL;
    }
    return b.doc;
}

pl_cfg_doc *pl_cfg_doc_load(const char *path, pl_cfg_errors *errs)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        pl_cfg_errors_add(errs, path, 0, 0, "cannot read: %s", strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (64u << 20)) {
                pl_cfg_errors_add(errs, path, 0, 0, "cannot read: file larger than 64 MiB");
                free(text);
                fclose(f);
                return NULL;
            }
            char *p = realloc(text, cap);
            if (!p) {
                free(text);
                fclose(f);
                pl_cfg_errors_add(errs, path, 0, 0, "cannot read: out of memory");
                return NULL;
            }
            text = p;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                pl_cfg_errors_add(errs, path, 0, 0, "cannot read: %s", strerror(errno));
                free(text);
                fclose(f);
                return NULL;
            }
            break;
        }
    }
    fclose(f);
    pl_cfg_doc *doc = pl_cfg_doc_parse(path, text ? text : "", len, errs);
    free(text);
    return doc;
}

void pl_cfg_doc_free(pl_cfg_doc *doc)
{
    if (!doc)
        return;
    for (size_t i = 0; i < doc->n_all; i++) {
        pl_cfg_node *node = doc->all[i];
        free(node->value);
        free(node->keys);
        free(node->items);
        free(node);
    }
    free(doc->all);
    for (size_t i = 0; i < doc->n_files; i++)
        free(doc->files[i]);
    free(doc->files);
    free(doc->file);
    free(doc);
}

int pl_cfg_doc_adopt(pl_cfg_doc *into, pl_cfg_doc *from)
{
    size_t need = into->n_all + from->n_all;
    if (need > into->cap_all) {
        pl_cfg_node **all = realloc(into->all, need * sizeof(*all));
        if (!all)
            return -1;
        into->all = all;
        into->cap_all = need;
    }
    char **files = realloc(into->files, (into->n_files + from->n_files + 1) * sizeof(*files));
    if (!files)
        return -1;
    into->files = files;
    memcpy(into->all + into->n_all, from->all, from->n_all * sizeof(*from->all));
    into->n_all = need;
    files[into->n_files++] = from->file;
    for (size_t i = 0; i < from->n_files; i++)
        files[into->n_files++] = from->files[i];
    free(from->files);
    free(from->all);
    free(from);
    return 0;
}

pl_cfg_node *pl_cfg_node_key(const pl_cfg_node *map, const char *key)
{
    if (!map || map->kind != PL_NODE_MAP || !key)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->value, key) == 0)
            return map->keys[i];
    return NULL;
}

pl_cfg_node *pl_cfg_node_get(const pl_cfg_node *map, const char *key)
{
    if (!map || map->kind != PL_NODE_MAP || !key)
        return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i]->value, key) == 0)
            return map->items[i];
    return NULL;
}

const char *pl_cfg_node_kind_name(const pl_cfg_node *node)
{
    if (!node)
        return "nothing";
    switch (node->kind) {
    case PL_NODE_NULL:
        return "null";
    case PL_NODE_SCALAR:
        return "scalar";
    case PL_NODE_MAP:
        return "map";
    case PL_NODE_SEQ:
        return "list";
    }
    return "?";
}

int pl_cfg_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}
