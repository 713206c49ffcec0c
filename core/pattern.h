/*
 * pattern.h: regular expressions for the attributes, resource and redaction
 * processors and the store's queries (label matchers, TraceQL), plus the
 * SHA-256 the `hash` action needs.
 *
 * Patterns are PCRE2 (Perl-compatible) regular expressions, compiled once
 * when a processor is created and JIT-compiled when the platform allows.
 * PCRE2 rather than POSIX regcomp because users copy Collector configs,
 * whose Go/RE2 patterns use \d, \w, (?i), non-greedy repeats and named
 * groups (?P<name>...): POSIX EREs have none of these and would silently
 * read `\d` as a literal `d` (a redaction pattern that never matches).
 * PCRE2 also reports the offset of a syntax error, which the validate hooks
 * pass on. Matching is byte-wise (no UTF mode), so attribute values that are
 * not valid UTF-8 are matched rather than rejected.
 *
 * Matching is not thread-safe per pattern (each keeps its match data); the
 * processors run on the loop thread.
 */
#ifndef PL_CORE_PATTERN_H
#define PL_CORE_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/component.h"
#include "core/model.h"
#include "core/status.h"

/* Offsets of one group in the subject; -1/-1 when the group did not take
 * part in the match. */
typedef struct pl_match {
    int64_t so, eo;
} pl_match;

typedef struct pl_pattern {
    void *code;         /* pcre2_code * */
    void *match_data;   /* pcre2_match_data * */
    size_t n_groups;    /* capture groups */
    char **group_names; /* [n_groups + 1], index = group number; NULL = unnamed */
    size_t n_named;
} pl_pattern;

/* Compiles `src`. Returns 0, or -1 with a message naming the byte offset of
 * the error in err. */
int pl_pattern_compile(pl_pattern *p, const char *src, char *err, size_t err_len);
void pl_pattern_free(pl_pattern *p);

/* True when `s` contains a match. `m` (n_m entries, may be 0) receives the
 * group offsets relative to s.ptr. */
bool pl_pattern_exec(const pl_pattern *p, pl_bytes s, pl_match *m, size_t n_m);

/* Replaces every non-overlapping match of `p` in `s` by `with`; the result
 * is allocated in `arena`. Returns the number of replacements (0: *out = s),
 * or -1 on OOM. */
int pl_pattern_replace_all(const pl_pattern *p, pl_arena *arena, pl_bytes s, pl_bytes with,
                           pl_bytes *out);

/* The compiled regexes of one configured list (e.g. redaction's
 * blocked_values, or an attributes include block's services). */
typedef struct pl_pattern_list {
    pl_pattern *items;
    size_t n;
} pl_pattern_list;

/* Compiles every regex of `src` into l. On failure l is left empty, -1 is
 * returned and err says "out of memory" or, for a bad regex,
 * "invalid regular expression \"...\": <why>", prefixed by
 * "<what> entry <index>: " when `what` is given. */
int pl_pattern_list_build(pl_pattern_list *l, const pl_strlist *src, const char *what, pl_err *err);
void pl_pattern_list_free(pl_pattern_list *l);
/* True when one of the patterns matches somewhere in `s`. */
bool pl_pattern_list_any(const pl_pattern_list *l, pl_bytes s);

/* SHA-256 of len bytes, as 64 lowercase hex chars plus a NUL. */
void pl_sha256_hex(const void *data, size_t len, char out[65]);

#endif
