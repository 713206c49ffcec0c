/*
 * redaction.c: the `redaction` processor: masks sensitive data before it
 * leaves the host.
 *
 *   redaction:
 *     allow_all_keys: false         # the default: keep only allowed_keys (+ ignored_keys)
 *     allowed_keys: [http.method, http.route]
 *     ignored_keys: [trace.note]    # never masked
 *     blocked_values: ['[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}', 'Bearer [A-Za-z0-9._-]+']
 *     allowed_values: ['.+@example\.com']  # values matching one are never masked
 *     blocked_key_patterns: ['.*token.*']   # the whole value is masked
 *     summary: debug                # silent (default), info (counts), debug (counts, keys)
 *     replacement: "****"
 *     functions: ['^secret_', 'internal::billing::']
 *     files: ['/home/[^/]+/']
 *     function_replacement: "[REDACTED]"
 *
 * Spans (and their resources and events): string values matching a blocked
 * pattern have every match replaced (the Collector's redaction processor
 * behaviour); values of keys matching blocked_key_patterns are replaced
 * whole; with allow_all_keys: false, attributes whose key is neither allowed
 * nor ignored are removed. The keys the Collector's redaction processor has
 * mean what they mean there: allow_all_keys defaults to false (with no
 * allowed_keys every attribute is removed), allowed_values exempts values
 * from masking, and summary adds redaction.{redacted,masked}.{keys,count}
 * and redaction.ignored.count to each span (and resource) it changed.
 *
 * Logs and metrics (opaque requests, opaque_attrs.c): the attributes of
 * each resource, log record and data point are treated as a span's, and
 * blocked values in a log body are masked; the rest of the request is kept
 * byte for byte. A
 * request that does not parse is refused rather than passed on unredacted.
 *
 * Profiles: function names (and system names) matching `functions`, and
 * file names of functions and mappings matching `files`, are replaced whole
 * by function_replacement; sample / location / mapping attribute values
 * (pprof labels) get the same value masking as span attributes; resources
 * too. The dictionary is shared by every sample of a request, so changes are
 * made copy-on-write: the function or attribute entry is pointed at a new
 * string in the batch arena; the original text is never written to (it may
 * be a view into the request body). Afterwards any string-table entry that
 * nothing references any more is blanked, otherwise the sensitive text would
 * still travel in the string table. original_payload (the raw pprof, which
 * holds every name in clear) is dropped from a profile when anything in its
 * request was redacted.
 *
 * All patterns are PCRE2 regexes (pattern.h) compiled once at create; invalid
 * ones are reported by the config's validate hook with their position.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/component.h"
#include "core/log.h"
#include "core/strlist.h"
#include "opaque_attrs.h"
#include "core/pattern.h"

#include "processors/redaction.config.h"

static int validate_patterns(pl_cfg_ctx *ctx, const char *key, const pl_strlist *list)
{
    int errors = 0;
    for (size_t i = 0; i < list->n; i++) {
        pl_pattern p;
        char msg[300];
        if (pl_pattern_compile(&p, list->items[i], msg, sizeof(msg)) != 0) {
            pl_cfg_errorf(ctx, key, "entry %zu: invalid regular expression \"%s\": %s", i,
                          list->items[i], msg);
            errors++;
        } else {
            pl_pattern_free(&p);
        }
    }
    return errors;
}

static int redaction_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    redaction_cfg *c = cfg_;
    int errors = 0;
    errors += validate_patterns(ctx, "blocked_values", &c->blocked_values);
    errors += validate_patterns(ctx, "allowed_values", &c->allowed_values);
    if (c->summary && strcmp(c->summary, "debug") != 0 && strcmp(c->summary, "info") != 0 &&
        strcmp(c->summary, "silent") != 0) {
        pl_cfg_errorf(ctx, "summary", "must be debug, info or silent");
        errors++;
    }
    errors += validate_patterns(ctx, "blocked_key_patterns", &c->blocked_key_patterns);
    errors += validate_patterns(ctx, "ignored_key_patterns", &c->ignored_key_patterns);
    errors += validate_patterns(ctx, "functions", &c->functions);
    errors += validate_patterns(ctx, "files", &c->files);
    return errors;
}

#include "processors/redaction.config.inc"

/* ---- instance ----------------------------------------------------------- */

typedef struct redaction {
    char id[128];
    pl_stats *stats;
    bool allow_all_keys;
    pl_strlist allowed_keys, ignored_keys; /* owned copies */
    pl_pattern_list blocked_values, allowed_values, blocked_keys, ignored_keys_re, functions, files;
    int summary; /* 0 silent, 1 info, 2 debug */
    char *replacement, *function_replacement;
    uint64_t *masked_values, *removed_keys, *redacted_functions, *redacted_files, *dropped_payloads;
} redaction;

static void redaction_destroy(void *self)
{
    redaction *r = self;
    if (!r)
        return;
    pl_strlist_free(&r->allowed_keys);
    pl_strlist_free(&r->ignored_keys);
    pl_pattern_list_free(&r->blocked_values);
    pl_pattern_list_free(&r->allowed_values);
    pl_pattern_list_free(&r->blocked_keys);
    pl_pattern_list_free(&r->ignored_keys_re);
    pl_pattern_list_free(&r->functions);
    pl_pattern_list_free(&r->files);
    free(r->replacement);
    free(r->function_replacement);
    free(r);
}

static pl_status redaction_create(const pl_create_settings *s, const void *config, void **out,
                                  pl_err *err)
{
    const redaction_cfg *c = config;
    redaction *r = calloc(1, sizeof(*r));
    if (!r)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    snprintf(r->id, sizeof(r->id), "%s", s && s->id ? s->id : "redaction");
    r->stats = s ? s->stats : NULL;
    r->allow_all_keys = c->allow_all_keys;
    r->summary = !c->summary                        ? 0
                 : strcmp(c->summary, "debug") == 0 ? 2
                 : strcmp(c->summary, "info") == 0  ? 1
                                                    : 0;
    r->replacement = strdup(c->replacement ? c->replacement : "****");
    r->function_replacement =
        strdup(c->function_replacement ? c->function_replacement : "[REDACTED]");
    if (!r->replacement || !r->function_replacement ||
        pl_strlist_copy(&r->allowed_keys, &c->allowed_keys) ||
        pl_strlist_copy(&r->ignored_keys, &c->ignored_keys)) {
        redaction_destroy(r);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    if (pl_pattern_list_build(&r->blocked_values, &c->blocked_values, "blocked_values", err) ||
        pl_pattern_list_build(&r->allowed_values, &c->allowed_values, "allowed_values", err) ||
        pl_pattern_list_build(&r->blocked_keys, &c->blocked_key_patterns, "blocked_key_patterns",
                              err) ||
        pl_pattern_list_build(&r->ignored_keys_re, &c->ignored_key_patterns, "ignored_key_patterns",
                              err) ||
        pl_pattern_list_build(&r->functions, &c->functions, "functions", err) ||
        pl_pattern_list_build(&r->files, &c->files, "files", err)) {
        redaction_destroy(r);
        return PL_ERR_INVALID;
    }
    r->masked_values = pl_stats_counter(r->stats, "masked_values", "attribute values masked");
    r->removed_keys =
        pl_stats_counter(r->stats, "removed_keys", "attributes removed (not in allowed_keys)");
    r->redacted_functions =
        pl_stats_counter(r->stats, "redacted_functions", "profile function names replaced");
    r->redacted_files = pl_stats_counter(r->stats, "redacted_files", "profile file names replaced");
    r->dropped_payloads = pl_stats_counter(r->stats, "dropped_original_payloads",
                                           "original profile payloads dropped after redaction");
    *out = r;
    return PL_OK;
}

static pl_status redaction_start(void *self, pl_err *err)
{
    return PL_OK;
}

/* ---- values ------------------------------------------------------------- */

typedef struct redact_ctx {
    redaction *r;
    pl_batch *batch;
    pl_bytes replacement; /* in the batch arena */
    pl_bytes function_replacement;
    uint64_t changes;
    bool oom;
} redact_ctx;

/* Masks every blocked match in a string; true when it changed. */
static bool mask_string(redact_ctx *c, pl_bytes in, pl_bytes *out)
{
    bool changed = false;
    pl_bytes cur = in;
    if (c->r->blocked_values.n && pl_pattern_list_any(&c->r->allowed_values, in))
        return false; /* an allowed value is exempt, as in the Collector */
    for (size_t i = 0; i < c->r->blocked_values.n; i++) {
        pl_bytes next;
        int n = pl_pattern_replace_all(&c->r->blocked_values.items[i], &c->batch->arena, cur,
                                       c->replacement, &next);
        if (n < 0) {
            c->oom = true;
            return false;
        }
        if (n > 0) {
            cur = next;
            changed = true;
        }
    }
    *out = cur;
    return changed;
}

/* Masks strings inside a value (recursing into arrays and maps, copying
 * them before any change). `dict` resolves string_value_strindex. */
/* The first change inside an array or kvlist copies its items into the
 * batch arena (the originals may be shared); false on OOM. */
static bool copy_on_write(redact_ctx *c, void **copy, const void *items, uint32_t n, size_t size)
{
    if (*copy)
        return true;
    *copy = pl_arena_calloc(&c->batch->arena, n, size);
    if (!*copy) {
        c->oom = true;
        return false;
    }
    memcpy(*copy, items, n * size);
    return true;
}

static bool mask_value(redact_ctx *c, pl_value *v, bool whole, const pl_dictionary *dict)
{
    switch (v->type) {
    case PL_VALUE_STRINDEX:
    case PL_VALUE_STRING: {
        pl_bytes s = v->type == PL_VALUE_STRING
                         ? v->u.str
                         : (dict ? pl_dict_string(dict, v->u.strindex) : (pl_bytes){NULL, 0});
        if (whole) {
            if (pl_bytes_eq(s, c->replacement) && v->type == PL_VALUE_STRING)
                return false;
            *v = pl_value_string(c->replacement);
            return true;
        }
        pl_bytes out;
        if (!mask_string(c, s, &out))
            return false;
        *v = pl_value_string(out);
        return true;
    }
    case PL_VALUE_ARRAY: {
        pl_value *copy = NULL;
        bool changed = false;
        for (uint32_t i = 0; i < v->u.array.n; i++) {
            pl_value item = (copy ? copy : v->u.array.items)[i];
            if (!mask_value(c, &item, whole, dict))
                continue;
            if (!copy_on_write(c, (void **)&copy, v->u.array.items, v->u.array.n, sizeof(pl_value)))
                return false;
            copy[i] = item;
            changed = true;
        }
        if (copy)
            v->u.array.items = copy;
        return changed;
    }
    case PL_VALUE_KVLIST: {
        pl_kv *copy = NULL;
        bool changed = false;
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            pl_kv item = (copy ? copy : v->u.kvlist.items)[i];
            if (!mask_value(c, &item.value, whole, dict))
                continue;
            if (!copy_on_write(c, (void **)&copy, v->u.kvlist.items, v->u.kvlist.n, sizeof(pl_kv)))
                return false;
            copy[i] = item;
            changed = true;
        }
        if (copy)
            v->u.kvlist.items = copy;
        return changed;
    }
    default:
        return false;
    }
}

/* What to do with one attribute key. */
typedef enum key_verdict { KEY_MASK, KEY_MASK_WHOLE, KEY_KEEP, KEY_REMOVE } key_verdict;

static key_verdict judge_key(const redaction *r, pl_bytes key)
{
    if (pl_strlist_contains(&r->ignored_keys, key) || pl_pattern_list_any(&r->ignored_keys_re, key))
        return KEY_KEEP;
    if (!r->allow_all_keys && !pl_strlist_contains(&r->allowed_keys, key))
        return KEY_REMOVE;
    if (pl_pattern_list_any(&r->blocked_keys, key))
        return KEY_MASK_WHOLE;
    return KEY_MASK;
}

/* What one attribute set went through, for the summary attributes. */
typedef struct attr_summary {
    char redacted[512], masked[512]; /* comma-separated keys (debug) */
    size_t n_redacted, n_masked, n_ignored;
} attr_summary;

static void summary_key(char *list, size_t size, pl_bytes key)
{
    size_t len = strlen(list);
    if (len + key.len + 2 >= size)
        return; /* a long list is cut, the count stays exact */
    if (len)
        list[len++] = ',';
    memcpy(list + len, key.ptr, key.len);
    list[len + key.len] = '\0';
}

static void redact_attrs_summary(redact_ctx *c, pl_attrs *attrs, const pl_dictionary *dict,
                                 attr_summary *sum)
{
    uint32_t o = 0;
    for (uint32_t i = 0; i < attrs->n; i++) {
        pl_kv *kv = &attrs->items[i];
        pl_bytes key = kv->key;
        if (key.len == 0 && kv->key_strindex && dict)
            key = pl_dict_string(dict, kv->key_strindex);
        key_verdict v = judge_key(c->r, key);
        if (v == KEY_REMOVE) {
            (*c->r->removed_keys)++;
            c->changes++;
            if (sum) {
                sum->n_redacted++;
                summary_key(sum->redacted, sizeof(sum->redacted), key);
            }
            continue;
        }
        if (v == KEY_KEEP && sum)
            sum->n_ignored++;
        if (v != KEY_KEEP && mask_value(c, &kv->value, v == KEY_MASK_WHOLE, dict)) {
            (*c->r->masked_values)++;
            c->changes++;
            if (sum) {
                sum->n_masked++;
                summary_key(sum->masked, sizeof(sum->masked), key);
            }
        }
        if (o != i)
            attrs->items[o] = *kv;
        o++;
    }
    attrs->n = o;
}

static void redact_attrs(redact_ctx *c, pl_attrs *attrs, const pl_dictionary *dict)
{
    redact_attrs_summary(c, attrs, dict, NULL);
}

static void put_summary(redact_ctx *c, pl_attrs *attrs, const char *key, pl_value v)
{
    if (!pl_attrs_put(&c->batch->arena, attrs, pl_bytes_from_cstr(key), v))
        c->oom = true;
}

/* Redacts a span's or a resource's attributes and, with summary info or
 * debug, records what was done on them (the Collector's attribute names;
 * zero counts are left out). */
static void redact_with_summary(redact_ctx *c, pl_attrs *attrs)
{
    if (c->r->summary == 0) {
        redact_attrs(c, attrs, NULL);
        return;
    }
    attr_summary sum = {0};
    redact_attrs_summary(c, attrs, NULL, &sum);
    bool debug = c->r->summary == 2;
    if (sum.n_redacted) {
        if (debug)
            put_summary(
                c, attrs, "redaction.redacted.keys",
                pl_value_string(pl_batch_bytes(c->batch, sum.redacted, strlen(sum.redacted))));
        put_summary(c, attrs, "redaction.redacted.count", pl_value_int((int64_t)sum.n_redacted));
    }
    if (sum.n_masked) {
        if (debug)
            put_summary(c, attrs, "redaction.masked.keys",
                        pl_value_string(pl_batch_bytes(c->batch, sum.masked, strlen(sum.masked))));
        put_summary(c, attrs, "redaction.masked.count", pl_value_int((int64_t)sum.n_masked));
    }
    if (sum.n_ignored)
        put_summary(c, attrs, "redaction.ignored.count", pl_value_int((int64_t)sum.n_ignored));
}

/* ---- traces ------------------------------------------------------------- */

static void redact_traces(redact_ctx *c, pl_traces *t)
{
    for (uint32_t r = 0; r < t->n_resources; r++) {
        pl_resource_spans *rs = &t->resources[r];
        redact_with_summary(c, &rs->resource.attrs);
        for (uint32_t s = 0; s < rs->n_scopes; s++) {
            pl_scope_spans *ss = &rs->scopes[s];
            for (uint32_t i = 0; i < ss->n_spans; i++) {
                pl_span *sp = &ss->spans[i];
                redact_with_summary(c, &sp->attrs);
                for (uint32_t e = 0; e < sp->n_events; e++)
                    redact_attrs(c, &sp->events[e].attrs, NULL);
                for (uint32_t l = 0; l < sp->n_links; l++)
                    redact_attrs(c, &sp->links[l].attrs, NULL);
            }
        }
    }
}

/* ---- profiles ----------------------------------------------------------- */

static bool string_matches(const pl_pattern_list *set, const pl_dictionary *d, int32_t idx)
{
    if (idx <= 0 || (uint32_t)idx >= d->n_strings)
        return false;
    return pl_pattern_list_any(set, d->strings[idx]);
}

static void mark(uint8_t *used, const pl_dictionary *d, int32_t idx)
{
    if (idx > 0 && (uint32_t)idx < d->n_strings)
        used[idx] = 1;
}

static void mark_value(uint8_t *used, const pl_dictionary *d, const pl_value *v)
{
    if (v->type == PL_VALUE_STRINDEX) {
        mark(used, d, v->u.strindex);
    } else if (v->type == PL_VALUE_ARRAY) {
        for (uint32_t i = 0; i < v->u.array.n; i++)
            mark_value(used, d, &v->u.array.items[i]);
    } else if (v->type == PL_VALUE_KVLIST) {
        for (uint32_t i = 0; i < v->u.kvlist.n; i++) {
            mark(used, d, v->u.kvlist.items[i].key_strindex);
            mark_value(used, d, &v->u.kvlist.items[i].value);
        }
    }
}

static void mark_attrs(uint8_t *used, const pl_dictionary *d, const pl_attrs *a)
{
    for (uint32_t i = 0; i < a->n; i++) {
        mark(used, d, a->items[i].key_strindex);
        mark_value(used, d, &a->items[i].value);
    }
}

/* Blanks string-table entries nothing references any more, so redacted text
 * does not travel as an orphan. */
static bool scrub_orphan_strings(redact_ctx *c, pl_profiles *ps)
{
    pl_dictionary *d = &ps->dict;
    if (d->n_strings <= 1)
        return true;
    uint8_t *used = calloc(d->n_strings, 1);
    if (!used)
        return false;
    for (uint32_t i = 0; i < d->n_functions; i++) {
        mark(used, d, d->functions[i].name_strindex);
        mark(used, d, d->functions[i].system_name_strindex);
        mark(used, d, d->functions[i].filename_strindex);
    }
    for (uint32_t i = 0; i < d->n_mappings; i++)
        mark(used, d, d->mappings[i].filename_strindex);
    for (uint32_t i = 0; i < d->n_attributes; i++) {
        mark(used, d, d->attributes[i].key_strindex);
        mark(used, d, d->attributes[i].unit_strindex);
        mark_value(used, d, &d->attributes[i].value);
    }
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        const pl_resource_profiles *rp = &ps->resources[r];
        mark_attrs(used, d, &rp->resource.attrs);
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            const pl_scope_profiles *sp = &rp->scopes[s];
            mark_attrs(used, d, &sp->scope.attrs);
            for (uint32_t p = 0; p < sp->n_profiles; p++) {
                const pl_profile *pr = &sp->profiles[p];
                mark(used, d, pr->sample_type.type_strindex);
                mark(used, d, pr->sample_type.unit_strindex);
                mark(used, d, pr->period_type.type_strindex);
                mark(used, d, pr->period_type.unit_strindex);
            }
        }
    }
    static const pl_bytes blank = {NULL, 0};
    for (uint32_t i = 1; i < d->n_strings; i++)
        if (!used[i] && d->strings[i].len)
            pl_dict_set(&c->batch->arena, d, PL_DICT_STRINGS, (int32_t)i, &blank);
    free(used);
    return true;
}

static void redact_profiles(redact_ctx *c, pl_profiles *ps)
{
    redaction *r = c->r;
    pl_dictionary *d = &ps->dict;
    int32_t repl = -1;
    bool want_names = r->functions.n || r->files.n;
    if (want_names && (d->n_functions > 1 || d->n_mappings > 1)) {
        repl = pl_dict_intern_string(&c->batch->arena, d, c->function_replacement);
        if (repl < 0) {
            c->oom = true;
            return;
        }
    }
    if (repl > 0) {
        for (uint32_t i = 1; i < d->n_functions; i++) {
            pl_function f = d->functions[i];
            bool name_hit = string_matches(&r->functions, d, f.name_strindex) ||
                            string_matches(&r->functions, d, f.system_name_strindex);
            bool changed = false;
            if (name_hit) {
                if (f.name_strindex)
                    f.name_strindex = repl;
                if (f.system_name_strindex)
                    f.system_name_strindex = repl;
                (*r->redacted_functions)++;
                c->changes++;
                changed = true;
            }
            if (f.filename_strindex != repl && string_matches(&r->files, d, f.filename_strindex)) {
                f.filename_strindex = repl;
                (*r->redacted_files)++;
                c->changes++;
                changed = true;
            }
            if (changed)
                pl_dict_set(&c->batch->arena, d, PL_DICT_FUNCTIONS, (int32_t)i, &f);
        }
        for (uint32_t i = 1; i < d->n_mappings; i++) {
            pl_mapping m = d->mappings[i];
            if (m.filename_strindex != repl && string_matches(&r->files, d, m.filename_strindex)) {
                m.filename_strindex = repl;
                pl_dict_set(&c->batch->arena, d, PL_DICT_MAPPINGS, (int32_t)i, &m);
                (*r->redacted_files)++;
                c->changes++;
            }
        }
    }
    /* Attribute table: value masking applies to every entry, whoever points
     * at it (samples, locations, mappings, profiles). */
    bool any_removed_key = false;
    uint8_t *remove = NULL;
    if (!r->allow_all_keys && d->n_attributes > 1) {
        remove = calloc(d->n_attributes, 1);
        if (!remove) {
            c->oom = true;
            return;
        }
    }
    for (uint32_t i = 1; i < d->n_attributes; i++) {
        pl_kvu a = d->attributes[i];
        key_verdict v = judge_key(r, pl_dict_string(d, a.key_strindex));
        if (v == KEY_REMOVE) {
            remove[i] = 1;
            any_removed_key = true;
            continue;
        }
        if (v != KEY_KEEP && mask_value(c, &a.value, v == KEY_MASK_WHOLE, d)) {
            pl_dict_set(&c->batch->arena, d, PL_DICT_ATTRIBUTES, (int32_t)i, &a);
            (*r->masked_values)++;
            c->changes++;
        }
        if (c->oom)
            break;
    }
    for (uint32_t rr = 0; rr < ps->n_resources && !c->oom; rr++) {
        pl_resource_profiles *rp = &ps->resources[rr];
        redact_attrs(c, &rp->resource.attrs, d);
        for (uint32_t s = 0; s < rp->n_scopes && !c->oom; s++) {
            pl_scope_profiles *sp = &rp->scopes[s];
            for (uint32_t p = 0; p < sp->n_profiles && any_removed_key; p++) {
                pl_profile *pr = &sp->profiles[p];
                for (uint32_t k = 0; k < pr->n_samples; k++) {
                    pl_sample *smp = &pr->samples[k];
                    uint32_t keep = 0;
                    for (uint32_t j = 0; j < smp->n_attribute_indices; j++) {
                        int32_t ix = smp->attribute_indices[j];
                        if (!(ix > 0 && (uint32_t)ix < d->n_attributes && remove[ix]))
                            keep++;
                    }
                    if (keep == smp->n_attribute_indices)
                        continue;
                    /* A new array: the old one may be shared with other samples. */
                    int32_t *na =
                        keep ? pl_arena_calloc(&c->batch->arena, keep, sizeof(int32_t)) : NULL;
                    if (keep && !na) {
                        c->oom = true;
                        break;
                    }
                    uint32_t o = 0;
                    for (uint32_t j = 0; j < smp->n_attribute_indices; j++) {
                        int32_t ix = smp->attribute_indices[j];
                        if (!(ix > 0 && (uint32_t)ix < d->n_attributes && remove[ix]))
                            na[o++] = ix;
                    }
                    *r->removed_keys += smp->n_attribute_indices - keep;
                    c->changes++;
                    smp->attribute_indices = na;
                    smp->n_attribute_indices = keep;
                }
            }
        }
    }
    free(remove);
    if (c->oom || c->changes == 0)
        return;
    if (!scrub_orphan_strings(c, ps)) {
        c->oom = true;
        return;
    }
    for (uint32_t rr = 0; rr < ps->n_resources; rr++) {
        pl_resource_profiles *rp = &ps->resources[rr];
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            pl_scope_profiles *sp = &rp->scopes[s];
            for (uint32_t p = 0; p < sp->n_profiles; p++) {
                pl_profile *pr = &sp->profiles[p];
                if (pr->original_payload.len || pr->original_payload_format.len) {
                    pr->original_payload = (pl_bytes){NULL, 0};
                    pr->original_payload_format = (pl_bytes){NULL, 0};
                    (*r->dropped_payloads)++;
                }
            }
        }
    }
}

/* ---- logs and metrics --------------------------------------------------- */

/* One resource's, log record's or data point's attributes
 * (pl_opaque_rewrite_attrs); new strings go to `tmp`, whose list is
 * encoded back into the request. */
static bool redact_opaque_list(void *arg, pl_batch *tmp, pl_attrs *attrs, pl_bytes service)
{
    (void)service;
    redaction *r = arg;
    redact_ctx c = {.r = r, .batch = tmp};
    c.replacement = pl_batch_bytes(tmp, r->replacement, strlen(r->replacement));
    if (!c.replacement.ptr && *r->replacement)
        return false;
    redact_with_summary(&c, attrs);
    return !c.oom;
}

/* A log record's body: blocked values masked as in an attribute value. */
static bool redact_opaque_body(void *arg, pl_batch *tmp, pl_value *body)
{
    redaction *r = arg;
    redact_ctx c = {.r = r, .batch = tmp};
    c.replacement = pl_batch_bytes(tmp, r->replacement, strlen(r->replacement));
    if (!c.replacement.ptr && *r->replacement)
        return false;
    if (mask_value(&c, body, false, NULL))
        (*r->masked_values)++;
    return !c.oom;
}

static pl_status redaction_consume(void *self, pl_batch *batch, pl_consumer *next)
{
    redaction *r = self;
    if ((batch->signal == PL_SIGNAL_LOGS || batch->signal == PL_SIGNAL_METRICS) &&
        batch->data.raw.len &&
        !pl_opaque_rewrite(batch, true, redact_opaque_list, redact_opaque_body, r)) {
        /* Unredacted data must not leave: refuse the whole request. */
        pl_warn(r->id, "%s request that does not parse or out of memory; refused",
                pl_signal_name(batch->signal));
        pl_batch_free(batch);
        return PL_ERR_INVALID;
    }
    if (batch->signal == PL_SIGNAL_TRACES || batch->signal == PL_SIGNAL_PROFILES) {
        redact_ctx c = {.r = r, .batch = batch};
        c.replacement = pl_batch_bytes(batch, r->replacement, strlen(r->replacement));
        c.function_replacement =
            pl_batch_bytes(batch, r->function_replacement, strlen(r->function_replacement));
        if ((!c.replacement.ptr && *r->replacement) ||
            (!c.function_replacement.ptr && *r->function_replacement))
            c.oom = true;
        else if (batch->signal == PL_SIGNAL_TRACES)
            redact_traces(&c, &batch->data.traces);
        else
            redact_profiles(&c, &batch->data.profiles);
        if (c.oom) {
            /* Half-redacted data must not leave: refuse the whole batch. */
            pl_warn(r->id, "out of memory while redacting; %zu %s refused", pl_batch_items(batch),
                    pl_signal_name(batch->signal));
            pl_batch_free(batch);
            return PL_ERR_NOMEM;
        }
    }
    return pl_consumer_consume(next, batch);
}

static void redaction_shutdown(void *self) {}

const pl_component_type pl_processor_redaction = {
    PL_COMPONENT_HEAD("redaction", PL_KIND_PROCESSOR, PL_SIGNALS_ALL, &redaction_section),
    .description = "masks sensitive attribute values, profile function and file names",
    PL_COMPONENT_LIFECYCLE(redaction_create, redaction_start, redaction_shutdown,
                           redaction_destroy),
    .consume = redaction_consume,
};
