/*
 * sources.c: where a configuration comes from, as the OpenTelemetry
 * Collector reads it (see sources.h).
 *
 * Every source becomes a position-carrying document first (so an error in a
 * --set or a yaml: fragment points into that fragment), then the documents
 * are merged into the first one in command-line order: maps deeply, anything
 * else (lists included) replaced by the later source. Keys written as
 * `a::b::c` are nested maps, in every source, as in the Collector.
 */
#include "sources.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ---- merging ------------------------------------------------------------ */

/* Aliases can make the tree a graph (even a cycle): depth is bounded. */
#define MAX_MERGE_DEPTH 64

/* ...and a graph can hold many paths to the same maps (a chain of aliases
 * each naming the previous twice doubles them per level): the map pairs
 * merged in one merge are bounded as well. */
#define MAX_MERGE_VISITS 100000

static pl_cfg_node *merge_at(pl_cfg_node *base, pl_cfg_node *over, int depth, size_t *visits)
{
    if (!base)
        return over;
    if (!over)
        return base;
    if (base->kind != PL_NODE_MAP || over->kind != PL_NODE_MAP || depth > MAX_MERGE_DEPTH ||
        ++*visits > MAX_MERGE_VISITS)
        return over; /* scalars, lists and nulls: the later source wins */
    for (size_t i = 0; i < over->n; i++) {
        bool found = false;
        for (size_t j = 0; j < base->n; j++) {
            if (strcmp(base->keys[j]->value, over->keys[i]->value) == 0) {
                bool both_maps = base->items[j] && over->items[i] &&
                                 base->items[j]->kind == PL_NODE_MAP &&
                                 over->items[i]->kind == PL_NODE_MAP;
                if (!both_maps) /* a replaced value is located where it came from */
                    base->keys[j] = over->keys[i];
                base->items[j] = merge_at(base->items[j], over->items[i], depth + 1, visits);
                found = true;
                break;
            }
        }
        if (!found && pl_cfg_node_append(base, over->keys[i], over->items[i]) < 0)
            return base;
    }
    return base;
}

static pl_cfg_node *merge_nodes(pl_cfg_node *base, pl_cfg_node *over)
{
    size_t visits = 0;
    return merge_at(base, over, 0, &visits);
}

int pl_cfg_doc_merge(pl_cfg_doc *base, pl_cfg_doc *over)
{
    pl_cfg_node *root = over->root;
    if (pl_cfg_doc_adopt(base, over) < 0)
        return -1;
    base->root = merge_nodes(base->root, root);
    return 0;
}

/* Rewrites every `a::b: v` key of `map` (recursively) as `a: {b: v}`,
 * merging with a sibling `a` when there is one. */
static int split_paths(pl_cfg_doc *doc, pl_cfg_node *node, int depth)
{
    if (!node || depth > 64 || node->paths_split)
        return 0;
    /* once per node: an alias names the same node again, and a chain of
     * aliases each naming the previous twice would be walked 2^n times */
    node->paths_split = node->kind == PL_NODE_SEQ || node->kind == PL_NODE_MAP;
    if (node->kind == PL_NODE_SEQ) {
        for (size_t i = 0; i < node->n; i++)
            if (split_paths(doc, node->items[i], depth + 1) < 0)
                return -1;
        return 0;
    }
    if (node->kind != PL_NODE_MAP)
        return 0;
    size_t n = node->n;
    pl_cfg_node **keys = node->keys, **items = node->items;
    bool any = false;
    for (size_t i = 0; i < n; i++)
        any |= strstr(keys[i]->value, "::") != NULL;
    if (!any) {
        for (size_t i = 0; i < n; i++)
            if (split_paths(doc, items[i], depth + 1) < 0)
                return -1;
        return 0;
    }
    /* rebuild the map from its entries */
    node->keys = node->items = NULL;
    node->n = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        pl_cfg_node *key = keys[i], *item = items[i];
        const char *sep = strstr(key->value, "::");
        if (sep && sep != key->value && sep[2]) {
            /* key "a::rest": "a" -> { "rest": item } (rest split on recursion) */
            pl_cfg_node *head =
                pl_cfg_doc_node(doc, PL_NODE_SCALAR, key->file, key->line, key->col);
            pl_cfg_node *tail = pl_cfg_doc_node(doc, PL_NODE_SCALAR, key->file, key->line,
                                                key->col + (int)(sep - key->value) + 2);
            pl_cfg_node *inner = pl_cfg_doc_node(doc, PL_NODE_MAP, key->file, key->line, key->col);
            if (!head || !tail || !inner) {
                rc = -1;
                break;
            }
            head->value = strndup(key->value, (size_t)(sep - key->value));
            tail->value = strdup(sep + 2);
            if (!head->value || !tail->value || pl_cfg_node_append(inner, tail, item) < 0) {
                rc = -1;
                break;
            }
            key = head;
            item = inner;
        }
        if (split_paths(doc, item, depth + 1) < 0) {
            rc = -1;
            break;
        }
        pl_cfg_node *existing = NULL;
        for (size_t j = 0; j < node->n; j++)
            if (strcmp(node->keys[j]->value, key->value) == 0)
                existing = node->items[j];
        if (existing) {
            for (size_t j = 0; j < node->n; j++)
                if (strcmp(node->keys[j]->value, key->value) == 0)
                    node->items[j] = merge_nodes(existing, item);
        } else if (pl_cfg_node_append(node, key, item) < 0) {
            rc = -1;
        }
    }
    free(keys);
    free(items);
    return rc;
}

int pl_cfg_doc_split_paths(pl_cfg_doc *doc)
{
    return split_paths(doc, doc->root, 0);
}

/* ---- sources ------------------------------------------------------------ */

pl_cfg_doc *pl_cfg_doc_from_uri(const char *uri, pl_cfg_errors *errs)
{
    if (strncmp(uri, "yaml:", 5) == 0) {
        /* the fragment's own text names it in messages and logs, unless it
         * may hold a secret */
        char name[96];
        if (pl_cfg_key_is_secret(uri + 5))
            snprintf(name, sizeof(name), "yaml:(a fragment naming a secret)");
        else
            snprintf(name, sizeof(name), "%.80s%s", uri, strlen(uri) > 80 ? "..." : "");
        return pl_cfg_doc_parse(name, uri + 5, strlen(uri + 5), errs);
    }
    if (strncmp(uri, "env:", 4) == 0) {
        const char *v = getenv(uri + 4);
        if (!v) {
            pl_cfg_errors_add(errs, uri, 0, 0, "environment variable %s is not set", uri + 4);
            return NULL;
        }
        return pl_cfg_doc_parse(uri, v, strlen(v), errs);
    }
    if (strncmp(uri, "file:", 5) == 0)
        uri += 5;
    return pl_cfg_doc_load(uri, errs);
}

pl_cfg_doc *pl_cfg_doc_from_set(const char *arg, pl_cfg_errors *errs)
{
    char name[160];
    const char *eq = strchr(arg, '=');
    /* the value names the source in messages, unless the path is a secret's */
    char path[128];
    snprintf(path, sizeof(path), "%.*s", eq ? (int)(eq - arg) : (int)strlen(arg), arg);
    if (eq && pl_cfg_key_is_secret(path))
        snprintf(name, sizeof(name), "--set %.120s=[REDACTED]", path);
    else
        snprintf(name, sizeof(name), "--set %.140s", arg);
    if (!eq || eq == arg) {
        pl_cfg_errors_add(errs, name, 0, 0,
                          "expected --set path=value (e.g. "
                          "processors.batch.timeout=2s)");
        return NULL;
    }
    /* The value is YAML ([a, b] is a list); what does not parse is a string. */
    const char *value = eq + 1;
    pl_cfg_errors scratch;
    pl_cfg_errors_init(&scratch);
    pl_cfg_doc *doc = pl_cfg_doc_parse(name, value, strlen(value), &scratch);
    if (doc && scratch.n == 0 && scratch.n_warnings == 0 && doc->root &&
        doc->root->kind == PL_NODE_MAP) {
        /* `a=b: c` reads as a map; keep it a string, like `a=b:c` */
        pl_cfg_doc_free(doc);
        doc = NULL;
    }
    if (!doc || scratch.n > 0) {
        pl_cfg_doc_free(doc);
        doc = pl_cfg_doc_parse(name, "", 0, errs);
        if (!doc) {
            pl_cfg_errors_free(&scratch);
            return NULL;
        }
        pl_cfg_node *s = pl_cfg_doc_node(doc, PL_NODE_SCALAR, NULL, 1, (int)(eq - arg) + 2);
        if (!s || !(s->value = strdup(value))) {
            pl_cfg_errors_free(&scratch);
            pl_cfg_doc_free(doc);
            return NULL;
        }
        s->quoted = true;
        doc->root = s;
    } else {
        for (size_t i = 0; i < scratch.n_warnings; i++) {
            const pl_cfg_error *w = &scratch.warnings[i];
            const char *msg = strstr(w->text, "warning: ");
            pl_cfg_node at = {.file = name, .line = w->line, .col = w->col + (int)(eq - arg) + 1};
            pl_cfg_warn_at(errs, &at, "%s", msg ? msg + 9 : w->text);
        }
    }
    pl_cfg_errors_free(&scratch);
    pl_cfg_node *value_node = doc->root;
    if (!value_node) { /* `path=`: null */
        value_node = pl_cfg_doc_node(doc, PL_NODE_NULL, NULL, 1, (int)(eq - arg) + 2);
        if (!value_node || !(value_node->value = strdup(""))) {
            pl_cfg_doc_free(doc);
            return NULL;
        }
    }
    /* The Collector's separator for --set is `::`; a dotted path
     * (processors.batch.timeout) is accepted too when no `::` is used. */
    const char *sep = "::";
    size_t path_len = (size_t)(eq - arg);
    bool colons = false;
    for (size_t i = 0; i + 1 < path_len; i++)
        colons |= arg[i] == ':' && arg[i + 1] == ':';
    if (!colons)
        sep = ".";
    size_t sep_len = strlen(sep);
    /* build from the leaf up: the last segment maps to the value */
    pl_cfg_node *child = value_node;
    size_t end = path_len;
    for (;;) {
        size_t start = end;
        while (start > 0 && !(start >= sep_len && memcmp(arg + start - sep_len, sep, sep_len) == 0))
            start--;
        if (start == end) {
            pl_cfg_errors_add(errs, name, 0, 0, "empty key in the path '%.*s'", (int)path_len, arg);
            pl_cfg_doc_free(doc);
            return NULL;
        }
        pl_cfg_node *map = pl_cfg_doc_node(doc, PL_NODE_MAP, NULL, 1, (int)start + 1);
        pl_cfg_node *key = pl_cfg_doc_node(doc, PL_NODE_SCALAR, NULL, 1, (int)start + 1);
        if (!map || !key || !(key->value = strndup(arg + start, end - start)) ||
            pl_cfg_node_append(map, key, child) < 0) {
            pl_cfg_doc_free(doc);
            return NULL;
        }
        child = map;
        if (start == 0)
            break;
        end = start - sep_len;
    }
    doc->root = child;
    return doc;
}

pl_cfg_doc *pl_cfg_sources_load(const pl_cfg_sources *src, pl_cfg_errors *errs)
{
    pl_cfg_doc *merged = NULL;
    bool failed = false;
    for (size_t i = 0; i < src->n_configs + src->n_sets; i++) {
        pl_cfg_doc *doc = i < src->n_configs
                              ? pl_cfg_doc_from_uri(src->configs[i], errs)
                              : pl_cfg_doc_from_set(src->sets[i - src->n_configs], errs);
        if (!doc) {
            failed = true; /* keep reading the others: report everything */
            continue;
        }
        if (pl_cfg_doc_split_paths(doc) < 0) {
            pl_cfg_errors_add(errs, doc->file, 0, 0, "out of memory");
            pl_cfg_doc_free(doc);
            failed = true;
            continue;
        }
        if (!merged) {
            merged = doc;
        } else if (pl_cfg_doc_merge(merged, doc) < 0) {
            pl_cfg_errors_add(errs, doc->file, 0, 0, "out of memory");
            pl_cfg_doc_free(doc);
            failed = true;
        }
    }
    if (failed || !merged) {
        if (!merged && !failed)
            pl_cfg_errors_add(errs, "proflink", 0, 0, "no configuration given");
        pl_cfg_doc_free(merged);
        return NULL;
    }
    return merged;
}

/* ---- printing ----------------------------------------------------------- */

bool pl_cfg_key_is_secret(const char *key)
{
    static const char *const words[] = {"password",   "passwd",      "token",   "secret",
                                        "api_key",    "apikey",      "api-key", "authorization",
                                        "credential", "private_key", NULL};
    for (size_t i = 0; words[i]; i++)
        if (strcasestr(key, words[i]))
            return true;
    return false;
}

typedef struct printer {
    yaml_emitter_t em;
    bool mask;
    bool ok;
    size_t budget; /* nodes left: aliases can multiply a small file */
} printer;

/* The emitter frees an event it took (also when it fails); one not handed
 * to it, after a failure, is freed here. */
static void emit(printer *p, yaml_event_t *ev)
{
    if (ev->type == YAML_NO_EVENT) /* its initialize failed (e.g. not UTF-8) */
        p->ok = false;
    else if (!p->ok)
        yaml_event_delete(ev);
    else if (!yaml_emitter_emit(&p->em, ev))
        p->ok = false;
    memset(ev, 0, sizeof(*ev)); /* so a failing initialize is seen as such */
}

static void emit_scalar(printer *p, const char *v, bool quoted)
{
    yaml_event_t ev = {0};
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)v, (int)strlen(v), 1, 1,
                                 quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
    emit(p, &ev);
}

static void emit_node(printer *p, const pl_cfg_node *node, bool secret, int depth)
{
    yaml_event_t ev = {0};
    if (p->budget == 0) {
        p->ok = false;
        return;
    }
    p->budget--;
    if (!node || node->kind == PL_NODE_NULL || depth > 64) {
        yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)"", 0, 1, 1,
                                     YAML_PLAIN_SCALAR_STYLE);
        emit(p, &ev);
        return;
    }
    if (node->kind == PL_NODE_SCALAR) {
        if (secret && p->mask && node->value[0])
            emit_scalar(p, "[REDACTED]", false);
        else
            emit_scalar(p, node->value, node->quoted);
        return;
    }
    if (node->kind == PL_NODE_SEQ) {
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
        emit(p, &ev);
        for (size_t i = 0; i < node->n; i++)
            emit_node(p, node->items[i], secret, depth + 1);
        yaml_sequence_end_event_initialize(&ev);
        emit(p, &ev);
        return;
    }
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
    emit(p, &ev);
    for (size_t i = 0; i < node->n; i++) {
        const char *k = node->keys[i]->value;
        emit_scalar(p, k, false);
        emit_node(p, node->items[i], secret || pl_cfg_key_is_secret(k), depth + 1);
    }
    yaml_mapping_end_event_initialize(&ev);
    emit(p, &ev);
}

static int write_out(void *data, unsigned char *buffer, size_t size)
{
    return fwrite(buffer, 1, size, (FILE *)data) == size;
}

int pl_cfg_doc_print(const pl_cfg_doc *doc, FILE *out, bool mask)
{
    printer p = {.mask = mask, .ok = true, .budget = 1u << 20};
    if (!yaml_emitter_initialize(&p.em))
        return -1;
    yaml_emitter_set_output(&p.em, write_out, out);
    yaml_emitter_set_unicode(&p.em, 1);
    yaml_emitter_set_indent(&p.em, 2);
    yaml_event_t ev = {0};
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    emit(&p, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    emit(&p, &ev);
    emit_node(&p, doc->root, false, 0);
    yaml_document_end_event_initialize(&ev, 1);
    emit(&p, &ev);
    yaml_stream_end_event_initialize(&ev);
    emit(&p, &ev);
    yaml_emitter_delete(&p.em);
    return p.ok ? 0 : -1;
}
