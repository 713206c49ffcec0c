/*
 * node.h: a YAML document as a small tree that remembers where everything was.
 *
 * libyaml's event stream is turned into maps, sequences and scalars, each
 * carrying the file name, line and column (1-based) where it starts, so that
 * every later check (unknown key, wrong type, undefined component) can point
 * the user at the exact spot. Scalar values are expanded here, once:
 * ${env:VAR}, ${VAR}, ${env:VAR:-default} and ${VAR:-default} are replaced by
 * the environment's value, ${file:path} by the file's content (trailing line
 * breaks removed), and `$$` by a single dollar. A plain value that is one
 * ${file:path} and nothing else is, as in the Collector, that file parsed as
 * YAML in its place (a map or a list; a scalar stays text), its nodes
 * keeping their positions in that file. Expansion happens on values
 * only (never keys), after parsing, so a variable's content can never change
 * the structure of the document. A variable that is unset and has no default
 * becomes empty with a warning, as in the OpenTelemetry Collector; a bad
 * reference or an unreadable file is an error that does not stop the walk.
 *
 * All nodes of a document live in one list owned by the document, so aliases
 * (*anchor) simply point at the anchored node and freeing is one walk.
 *
 * Errors are collected, not fatal: a pl_cfg_errors list gathers every
 * "file:line:col: message" so one `proflink validate` run shows them all.
 */
#ifndef PL_CONFIG_NODE_H
#define PL_CONFIG_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum pl_node_kind {
    PL_NODE_NULL = 0, /* `key:` with no value, `~`, `null` */
    PL_NODE_SCALAR,
    PL_NODE_MAP,
    PL_NODE_SEQ,
} pl_node_kind;

typedef struct pl_cfg_node pl_cfg_node;
struct pl_cfg_node {
    pl_node_kind kind;
    const char *file; /* the document's file name (shared) */
    int line, col;    /* 1-based */
    char *value;      /* SCALAR: expanded text, NUL-terminated */
    bool quoted;      /* SCALAR: written with quotes or as a block */
    /* MAP: keys[i] (scalars) -> items[i]; SEQ: items[i]. */
    pl_cfg_node **keys;
    pl_cfg_node **items;
    size_t n;
    bool paths_split; /* MAP/SEQ: `a::b` keys below are split (aliases share a node) */
};

/* One error, kept with its position so the list can be sorted. */
typedef struct pl_cfg_error {
    char *text; /* "file:line:col: message" (or "file: message") */
    int line, col;
    int file_rank; /* order in which its source was first named */
    size_t seq;    /* insertion order, for a stable sort */
} pl_cfg_error;

/* Errors (a config with any is refused) and warnings (reported, accepted). */
typedef struct pl_cfg_errors {
    pl_cfg_error *items;
    size_t n, cap;
    pl_cfg_error *warnings; /* text "file:line:col: warning: message" */
    size_t n_warnings, cap_warnings;
    char **files; /* for file_rank */
    size_t n_files;
} pl_cfg_errors;

void pl_cfg_errors_init(pl_cfg_errors *errs);
void pl_cfg_errors_free(pl_cfg_errors *errs);
/* Adds "file:line:col: message"; line 0 means "no position" ("file: message"). */
void pl_cfg_errors_add(pl_cfg_errors *errs, const char *file, int line, int col, const char *fmt,
                       ...) __attribute__((format(printf, 5, 6)));
void pl_cfg_errors_addv(pl_cfg_errors *errs, const char *file, int line, int col, const char *fmt,
                        va_list ap);
/* Adds an error located at `node`. */
void pl_cfg_errors_at(pl_cfg_errors *errs, const pl_cfg_node *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Adds a warning located at `node`. */
void pl_cfg_warn_at(pl_cfg_errors *errs, const pl_cfg_node *node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Orders by source, then line, then column, then insertion. */
void pl_cfg_errors_sort(pl_cfg_errors *errs);
/* Prints one error per line. */
void pl_cfg_errors_print(const pl_cfg_errors *errs, FILE *out);
void pl_cfg_warnings_print(const pl_cfg_errors *errs, FILE *out);

typedef struct pl_cfg_doc {
    char *file;        /* name used in messages */
    pl_cfg_node *root; /* NULL for an empty document */
    pl_cfg_node **all; /* every node, for freeing */
    size_t n_all, cap_all;
    char **files; /* names of merged-in documents, which their nodes point at */
    size_t n_files;
} pl_cfg_doc;

/* Parses YAML text. Returns the document (possibly with root NULL when the
 * text is empty), or NULL when the text is not valid YAML. Duplicate keys are
 * added to errs but still give a document, so later checks can run. */
pl_cfg_doc *pl_cfg_doc_parse(const char *file, const char *text, size_t len, pl_cfg_errors *errs);
/* Reads and parses a file; a file that cannot be read is one error
 * "path: cannot read: <reason>". */
pl_cfg_doc *pl_cfg_doc_load(const char *path, pl_cfg_errors *errs);
void pl_cfg_doc_free(pl_cfg_doc *doc);
/* A new node owned by `doc` (file NULL: the document's name). */
pl_cfg_node *pl_cfg_doc_node(pl_cfg_doc *doc, pl_node_kind kind, const char *file, int line,
                             int col);
/* Appends to a map (key, item) or a list (key NULL). 0 or -1 on OOM. */
int pl_cfg_node_append(pl_cfg_node *parent, pl_cfg_node *key, pl_cfg_node *item);
/* Moves every node of `from` (and its file names) into `into` and frees
 * `from`'s shell; `from`'s root is not attached anywhere. 0 or -1. */
int pl_cfg_doc_adopt(pl_cfg_doc *into, pl_cfg_doc *from);

/* Expands ${...} references in `text` (see the header comment). Returns a
 * malloc'd string, or NULL with a message in `why` (NULL also on OOM).
 * Unset variables are listed in `warn` (may be NULL; "" when none). */
char *pl_cfg_expand(const char *text, char *why, size_t why_size, char *warn, size_t warn_size);

/* Map lookup by key; NULL if absent or not a map. */
pl_cfg_node *pl_cfg_node_get(const pl_cfg_node *map, const char *key);
/* The key node of `key` in `map`; NULL if absent. */
pl_cfg_node *pl_cfg_node_key(const pl_cfg_node *map, const char *key);
const char *pl_cfg_node_kind_name(const pl_cfg_node *node);

/* Edit distance between two short words (for "did you mean" hints); large
 * values are capped. */
int pl_cfg_edit_distance(const char *a, const char *b);

#endif
