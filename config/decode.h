/*
 * decode.h: the table-driven decoder behind pl_cfg_section / pl_cfg_field
 * (core/component.h), and the printer of those tables.
 *
 * One walk over a table does everything: it fills the defaults, applies the
 * YAML values with type checks, reports unknown keys (listing the keys that
 * exist), recurses into nested sections and lists, then calls the section's
 * validate hook. Errors are collected, never fatal, and each carries the
 * position of the offending key or value. `proflink components` prints the
 * very same tables with pl_cfg_describe, so documentation and validation
 * cannot disagree.
 */
#ifndef PL_CONFIG_DECODE_H
#define PL_CONFIG_DECODE_H

#include <stdio.h>

#include "config/node.h"
#include "core/component.h"

/* What pl_cfg_errorf needs to point at the right place. */
struct pl_cfg_ctx {
    pl_cfg_reporter report; /* first: core/cfg.c reaches the loader through it */
    pl_cfg_errors *errs;
    const pl_cfg_node *map;   /* the section's mapping, or NULL if absent/null */
    const pl_cfg_node *where; /* position used when the key is not in `map` */
    int n_errors;
};

/* Decodes `node` (a mapping, a null node, or NULL for "absent") into `out`,
 * a buffer of section->size bytes that this function zeroes and fills with
 * defaults first. `where` locates errors about the section as a whole (the
 * key that introduced it). Returns the number of errors added to errs; the
 * struct is always left in a state pl_cfg_free can release. */
int pl_cfg_decode(const pl_cfg_section *section, const pl_cfg_node *node, const pl_cfg_node *where,
                  void *out, pl_cfg_errors *errs);

/* Decodes, like pl_cfg_decode, but skips the keys listed in `skip`
 * (NULL-terminated): the caller handles them (e.g. service.pipelines). */
int pl_cfg_decode_skipping(const pl_cfg_section *section, const pl_cfg_node *node,
                           const pl_cfg_node *where, void *out, pl_cfg_errors *errs,
                           const char *const *skip);

/* Fills `out` (section->size bytes) with the defaults only, without YAML.
 * Returns 0, or -1 if a default does not parse (a bug in a table). */
int pl_cfg_defaults(const pl_cfg_section *section, void *out);
/* Frees strings, lists and maps inside a filled struct (not the struct). */
void pl_cfg_free(const pl_cfg_section *section, void *cfg);

/* Checks a listening address "host:port" ("[v6]:port"): the port 0-65535,
 * the host an IP literal, localhost, or empty (every interface). "" and
 * "none" (off) pass with port -1. Fills host (an IP) and port when given.
 * 0, or -1 with the reason in why. */
int pl_cfg_address_parse(const char *addr, char *host, size_t host_size, int *port, char *why,
                         size_t why_size);

/* "string", "int", "duration", ... */
const char *pl_cfg_type_name(pl_cfg_type type);

/* Prints every key of the section: name, type, default, description; nested
 * sections indented by two more spaces. */
void pl_cfg_describe(FILE *out, const pl_cfg_section *section, int indent);

#endif
