/*
 * sources.h: where a configuration comes from, as with the OpenTelemetry
 * Collector's command line.
 *
 *   --config PATH | file:PATH   a YAML file
 *   --config env:VAR            YAML held in an environment variable
 *   --config 'yaml:a::b: v'     an inline YAML fragment
 *   --set a.b.c=v (or a::b::c=v) one value; v is YAML ([x, y] is a list)
 *
 * The sources are merged in order (--config values first, then --set):
 * maps merge deeply, anything else is replaced by the later source. In every
 * source a key `a::b` means the nested `a: {b: ...}`. Values keep the file,
 * line and column they came from, so errors point into the right source.
 */
#ifndef PL_CONFIG_SOURCES_H
#define PL_CONFIG_SOURCES_H

#include <stdbool.h>
#include <stdio.h>

#include "config/node.h"

typedef struct pl_cfg_sources {
    char **configs; /* --config values, in order */
    size_t n_configs;
    char **sets; /* --set values, in order */
    size_t n_sets;
} pl_cfg_sources;

/* Reads and merges every source. NULL when one cannot be read or parsed
 * (every source is still tried, so all such problems are in errs). */
pl_cfg_doc *pl_cfg_sources_load(const pl_cfg_sources *src, pl_cfg_errors *errs);

/* One source as a document (before merging). NULL on error. */
pl_cfg_doc *pl_cfg_doc_from_uri(const char *uri, pl_cfg_errors *errs);
pl_cfg_doc *pl_cfg_doc_from_set(const char *arg, pl_cfg_errors *errs);
/* Merges `over` into `base` (deeply for maps) and takes `over`. 0 or -1. */
int pl_cfg_doc_merge(pl_cfg_doc *base, pl_cfg_doc *over);
/* Turns `a::b: v` keys into nested maps. 0 or -1 on OOM. */
int pl_cfg_doc_split_paths(pl_cfg_doc *doc);

/* Is a value under this key a secret (password, token, secret, api_key,
 * authorization, ...; case-insensitive, anywhere in the key)? */
bool pl_cfg_key_is_secret(const char *key);
/* Writes the document as YAML; with `mask`, non-empty scalars under secret
 * keys (at any depth below them) become [REDACTED]. 0 or -1. */
int pl_cfg_doc_print(const pl_cfg_doc *doc, FILE *out, bool mask);

#endif
