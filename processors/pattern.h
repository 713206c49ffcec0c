/*
 * pattern.h: regular expressions for the attributes, resource and redaction
 * processors, plus the SHA-256 the `hash` action needs.
 *
 * Patterns are POSIX extended regular expressions (regcomp, REG_EXTENDED),
 * compiled once when a processor is created. Users copy Collector configs,
 * whose Go/RE2 patterns name their groups with (?P<name>...) or
 * (?<name>...); POSIX has no named groups, so pl_pattern_compile rewrites
 * those (and (?:...)) to plain groups and remembers which group number got
 * which name. Other (?...) constructs are rejected with their offset rather
 * than silently meaning something else.
 *
 * Matching uses glibc's REG_STARTEND so that strings need not be
 * NUL-terminated (batch strings are views into request bodies).
 */
#ifndef PL_PROCESSORS_PATTERN_H
#define PL_PROCESSORS_PATTERN_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

typedef struct pl_pattern {
    regex_t re;
    bool compiled;
    size_t n_groups;    /* capture groups (re.re_nsub) */
    char **group_names; /* [n_groups + 1], index = group number; NULL = unnamed */
    size_t n_named;
} pl_pattern;

/* Compiles `src`. Returns 0, or -1 with a message in err (naming the byte
 * offset for errors found while translating group syntax). */
int pl_pattern_compile(pl_pattern *p, const char *src, char *err, size_t err_len);
void pl_pattern_free(pl_pattern *p);

/* True when `s` contains a match. `m` (n_m entries, may be 0) receives the
 * group offsets relative to s.ptr. */
bool pl_pattern_exec(const pl_pattern *p, pl_bytes s, regmatch_t *m, size_t n_m);

/* Replaces every non-overlapping match of `p` in `s` by `with`; the result
 * is allocated in `arena`. Returns the number of replacements (0: *out = s),
 * or -1 on OOM. */
int pl_pattern_replace_all(const pl_pattern *p, pl_arena *arena, pl_bytes s, pl_bytes with,
                           pl_bytes *out);

/* SHA-256 of len bytes, as 64 lowercase hex chars plus a NUL. */
void pl_sha256_hex(const void *data, size_t len, char out[65]);

#endif
