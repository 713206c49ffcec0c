/* correlation_enrich.c: see correlation.c for the design. */
#include "correlation_int.h"

/* ---- sample-side helpers ---------------------------------------------------------------- */

static pl_bytes value_text(const pl_dictionary *dict, const pl_value *v)
{
    if (v->type == PL_VALUE_STRING)
        return v->u.str;
    if (v->type == PL_VALUE_STRINDEX)
        return pl_dict_string(dict, v->u.strindex);
    return (pl_bytes){NULL, 0};
}

/* The span id (and trace id, when known) a sample points to. */
bool pl_corr_sample_ids(const pl_dictionary *dict, const pl_sample *s, uint64_t *key,
                        uint8_t trace[16], bool *has_trace)
{
    *has_trace = false;
    *key = 0;
    if (s->link_index > 0 && (uint32_t)s->link_index < dict->n_links) {
        const pl_link *l = &dict->links[s->link_index];
        if (span_id_valid(l->span_id, l->span_id_len)) {
            *key = id_key(l->span_id);
            if (trace_id_valid(l->trace_id, l->trace_id_len)) {
                memcpy(trace, l->trace_id, 16);
                *has_trace = true;
            }
        }
    }
    if (*key && *has_trace)
        return true;
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        if (ai <= 0 || (uint32_t)ai >= dict->n_attributes)
            continue;
        const pl_kvu *a = &dict->attributes[ai];
        pl_bytes k = pl_dict_string(dict, a->key_strindex);
        if (k.len != 7 && k.len != 8 && k.len != 10)
            continue;
        pl_bytes v = value_text(dict, &a->value);
        if (!*key && v.len == 16 &&
            (pl_bytes_eq_cstr(k, "span_id") || pl_bytes_eq_cstr(k, "profile_id"))) {
            uint8_t id[8];
            if (pl_hex_decode((const char *)v.ptr, 16, id, 8) == 0 && id_key(id))
                *key = id_key(id);
        } else if (!*has_trace && v.len == 32 && pl_bytes_eq_cstr(k, "trace_id")) {
            if (pl_hex_decode((const char *)v.ptr, 32, trace, 16) == 0 && trace_id_valid(trace, 16))
                *has_trace = true;
        }
    }
    return *key != 0;
}

/* A sample's time range; false when it has none. */
bool pl_corr_sample_time(const profile_info *pi, const pl_sample *s, uint64_t *lo, uint64_t *hi)
{
    if (s->n_timestamps) {
        uint64_t a = UINT64_MAX, b = 0;
        for (uint32_t i = 0; i < s->n_timestamps; i++) {
            uint64_t t = s->timestamps_unix_nano[i];
            if (t < a)
                a = t;
            if (t > b)
                b = t;
        }
        *lo = a;
        *hi = b;
        return true;
    }
    if (pi->t_start) {
        *lo = pi->t_start;
        *hi = pi->t_end;
        return true;
    }
    return false;
}

static contrib sample_contrib(const profile_info *pi, const pl_sample *s)
{
    contrib c = {0, 0, 0, 0};
    uint64_t v = 0;
    if (s->n_values) {
        for (uint32_t i = 0; i < s->n_values; i++)
            if (s->values[i] > 0)
                v += (uint64_t)s->values[i];
    } else {
        v = s->n_timestamps; /* timestamps only: each counts as 1 */
    }
    if (pi->counts_samples)
        c.samples = v;
    else if (pi->counts_entries)
        c.samples = s->n_timestamps ? s->n_timestamps : 1;
    if (pi->cpu_mult)
        c.cpu = v * (uint64_t)pi->cpu_mult;
    if (pi->wall_mult)
        c.wall = v * (uint64_t)pi->wall_mult;
    switch (pi->top_kind) {
    case 1:
        c.top = c.cpu;
        break;
    case 2:
        c.top = c.wall;
        break;
    case 3:
        c.top = c.samples ? c.samples : v;
        break;
    }
    return c;
}

/* The leaf (self) function of a sample's stack: its function_table index,
 * 0 when unknown. */
static int32_t leaf_function(const pl_dictionary *dict, const pl_sample *s)
{
    int32_t none = 0;
    if (s->stack_index <= 0 || (uint32_t)s->stack_index >= dict->n_stacks)
        return none;
    const pl_stack *st = &dict->stacks[s->stack_index];
    if (!st->n_location_indices)
        return none;
    int32_t li = st->location_indices[0];
    if (li < 0 || (uint32_t)li >= dict->n_locations)
        return none;
    const pl_location *loc = &dict->locations[li];
    if (!loc->n_lines)
        return none;
    int32_t fi = loc->lines[0].function_index; /* callee first: the innermost frame */
    if (fi <= 0 || (uint32_t)fi >= dict->n_functions)
        return none;
    return fi;
}

/* ---- dictionary writer ------------------------------------------------------------------ */

void pl_corr_writer_reset(dict_writer *w)
{
    free(w->fn_ids);
    free(w->link_uses);
    memset(w, 0, sizeof(*w));
}

/* Binds the writer to a batch: its dictionary's builder (core/dict.h) does
 * the interning; the writer keeps hints in front of it. */
static int writer_bind(dict_writer *w, pl_batch *batch)
{
    pl_dictionary *dict = &batch->data.profiles.dict;
    if (w->dict == dict && w->batch == batch)
        return 0;
    pl_corr_writer_reset(w);
    if (pl_dict_ensure_zero_entries(&batch->arena, dict))
        return -1;
    batch->data.profiles.has_dictionary = true;
    w->dict = dict;
    w->batch = batch;
    return 0;
}

/* Index of string s (copied into the batch when new); -1 on OOM. */
static int32_t writer_string(dict_writer *w, pl_bytes s)
{
    pl_dictionary *d = w->dict;
    uint32_t h = (uint32_t)(pl_mix64((uintptr_t)s.ptr ^ s.len) & 63);
    int32_t hint = w->str_hint[h].ptr == s.ptr ? w->str_hint[h].idx - 1 : -1;
    if (hint >= 0 && (uint32_t)hint < d->n_strings && pl_bytes_eq(d->strings[hint], s))
        return hint;
    int32_t idx = pl_dict_intern_string_copy(&w->batch->arena, d, s);
    if (idx >= 0) {
        w->str_hint[h].ptr = s.ptr;
        w->str_hint[h].idx = idx + 1;
    }
    return idx;
}

/* Index of attribute key=value (value bytes must already live in the batch). */
static int32_t writer_attribute(dict_writer *w, int32_t key, pl_value value)
{
    pl_dictionary *d = w->dict;
    /* String values come from the string table (one address per string):
     * the hint is keyed by that address and the key. */
    bool str = value.type == PL_VALUE_STRING;
    uint32_t h = str ? (uint32_t)(pl_mix64((uintptr_t)value.u.str.ptr ^ (uint32_t)key) & 63) : 0;
    if (str && w->attr_hint[h].ptr == value.u.str.ptr && w->attr_hint[h].idx) {
        int32_t ai = w->attr_hint[h].idx - 1;
        const pl_kvu *a = (uint32_t)ai < d->n_attributes ? &d->attributes[ai] : NULL;
        if (a && a->key_strindex == key && a->unit_strindex == 0 && pl_value_eq(&a->value, &value))
            return ai;
    }
    int32_t idx = pl_dict_intern_attribute(&w->batch->arena, d, key, value, 0);
    if (idx >= 0 && str) {
        w->attr_hint[h].ptr = value.u.str.ptr;
        w->attr_hint[h].idx = idx + 1;
    }
    return idx;
}

/* ---- enrichment of samples -------------------------------------------------------------- */

void pl_corr_cache_clear(correlation *self)
{
    /* Only the filled slots: a batch of a few spans after one of thousands
     * must not clear (and later scan) the whole table. */
    for (uint32_t k = 0; k < self->cache_count; k++)
        memset(&self->cache[self->cache_used[k]], 0, sizeof(enrich_slot));
    self->cache_count = 0;
}

static uint32_t cache_home(const correlation *self, const pl_dictionary *dict, const void *span)
{
    return (uint32_t)pl_mix64((uintptr_t)span ^ (uintptr_t)dict) & self->cache_mask;
}

/* Doubles the cache, keeping its slots and their filling order. */
static int cache_grow(correlation *self)
{
    uint32_t cap = self->cache ? (self->cache_mask + 1) * 2 : 256;
    enrich_slot *n = calloc(cap, sizeof(enrich_slot));
    uint32_t *used = malloc(cap / 2 * sizeof(uint32_t));
    if (!n || !used) {
        free(n);
        free(used);
        return -1;
    }
    enrich_slot *old = self->cache;
    self->cache = n;
    self->cache_mask = cap - 1;
    for (uint32_t k = 0; k < self->cache_count; k++) {
        const enrich_slot *o = &old[self->cache_used[k]];
        uint32_t j = cache_home(self, o->dict, o->span);
        while (n[j].span)
            j = (j + 1) & self->cache_mask;
        n[j] = *o;
        used[k] = j;
    }
    free(old);
    free(self->cache_used);
    self->cache_used = used;
    return 0;
}

static enrich_slot *cache_slot(correlation *self, const pl_dictionary *dict, const void *span)
{
    if ((!self->cache || (self->cache_count + 1) * 2 > self->cache_mask + 1) && cache_grow(self))
        return NULL;
    uint32_t j = cache_home(self, dict, span);
    while (self->cache[j].span) {
        if (self->cache[j].span == span && self->cache[j].dict == dict)
            return &self->cache[j];
        j = (j + 1) & self->cache_mask;
    }
    return &self->cache[j];
}

/* Appends a link to the dictionary (no dedupe: one per span and batch). */
static int32_t writer_link(dict_writer *w, const pl_link *l)
{
    return pl_dict_append(&w->batch->arena, w->dict, PL_DICT_LINKS, l);
}

/* Whether link li of the (bound) batch's dictionary is named by exactly
 * one sample of the batch: counted over all of them at the first question. */
static bool link_named_once(dict_writer *w, pl_batch *batch, int32_t li)
{
    if (writer_bind(w, batch))
        return false;
    if (!w->link_uses) {
        const pl_profiles *ps = &batch->data.profiles;
        w->n_link_uses = ps->dict.n_links;
        w->link_uses = calloc(w->n_link_uses ? w->n_link_uses : 1, 1);
        if (!w->link_uses)
            return false;
        for (uint32_t r = 0; r < ps->n_resources; r++)
            for (uint32_t sc = 0; sc < ps->resources[r].n_scopes; sc++) {
                const pl_scope_profiles *sp = &ps->resources[r].scopes[sc];
                for (uint32_t pi = 0; pi < sp->n_profiles; pi++)
                    for (uint32_t si = 0; si < sp->profiles[pi].n_samples; si++) {
                        int32_t k = sp->profiles[pi].samples[si].link_index;
                        if (k > 0 && (uint32_t)k < w->n_link_uses && w->link_uses[k] < 2)
                            w->link_uses[k]++;
                    }
            }
    }
    return li > 0 && (uint32_t)li < w->n_link_uses && w->link_uses[li] == 1;
}

/* The held spans a labels walk went through, from the span up to its local
 * root: the first `fused` of them are exactly the entries the roll-up of a
 * contribution would visit (pl_corr_roll_up), so a new span's first sample
 * hands its contribution up along them while they are still in the cache,
 * instead of walking the chain again, cold, at the end of the batch. */
typedef struct anc_walk {
    span_entry *chain[MAX_ANCESTRY];
    int n, fused;
    bool built; /* the labels were built for this sample (its span's first in the session) */
} anc_walk;

static bool same_trace(const uint8_t *a, const uint8_t *b)
{
    return a == b || (a && b && memcmp(a, b, 16) == 0);
}

/* The held parent `pkey` in `trace`, as pl_corr_find_span(held only) finds it.
 * *agrees stays true when pl_corr_find_span(held or placeholder) in the same
 * trace would find it too, i.e. when no matching placeholder comes first. */
static span_entry *find_held_parent(correlation *self, uint64_t pkey, const uint8_t *trace,
                                    bool *agrees)
{
    SPAN_EACH(&self->spans, pkey, i)
    {
        span_entry *p = &self->spans.slots[i];
        if (p->state == ENTRY_HELD) {
            const pl_span *sp = p->span;
            if (!trace || !trace_id_valid(sp->trace_id, sp->trace_id_len) ||
                memcmp(sp->trace_id, trace, 16) == 0)
                return p;
        } else if (p->state == ENTRY_PLACEHOLDER && *agrees) {
            const span_stats *st = p->stats ? &self->stats_arr[p->stats] : NULL;
            if (!trace || !st || !st->has_trace || memcmp(st->trace_id, trace, 16) == 0)
                *agrees = false;
        }
    }
    return NULL;
}

/* The labels of held span `e`: its name, its local root's name, its
 * service, and each span_attributes key found on it or its ancestors up to
 * the local root. The chain walked is left in `walk`. */
static size_t span_labels(correlation *self, span_entry *e, label *items, size_t max,
                          anc_walk *walk)
{
    const pl_span *sp = e->span;
    size_t n_items = 0;
    items[n_items++] = (label){self->names[NAME_SPAN_NAME], pl_value_string(sp->name), 0};
    /* The chain up to the local root, walked once for the root's name and
     * for the span_attributes lookups. */
    span_entry **chain = walk->chain;
    int n_chain = 0;
    span_entry *root = e;
    chain[n_chain++] = e;
    walk->fused = 1;
    const uint8_t *etrace = pl_corr_span_trace(sp); /* the trace a roll-up from e walks in */
    const late_span *gone = NULL;                   /* an ancestor that already left */
    while (n_chain < MAX_ANCESTRY) {
        const pl_span *rsp = root->span;
        if (!span_id_valid(rsp->parent_span_id, rsp->parent_span_id_len))
            break;
        uint64_t pkey = id_key(rsp->parent_span_id);
        const uint8_t *rtrace = pl_corr_span_trace(rsp);
        bool agrees = walk->fused == n_chain && same_trace(rtrace, etrace);
        span_entry *p = find_held_parent(self, pkey, rtrace, &agrees);
        if (!p) {
            const late_span *lp =
                self->late ? pl_corr_late_find(self, pkey, pl_corr_span_trace(rsp), false, 0, 0)
                           : NULL;
            if (lp && lp->service == e->service)
                gone = lp;
            break;
        }
        if (p->service != e->service)
            break;
        root = p;
        chain[n_chain++] = p;
        if (agrees)
            walk->fused = n_chain;
    }
    walk->n = n_chain;
    pl_bytes root_name = gone ? pl_corr_late_root_name(self, gone) : root->span->name;
    items[n_items++] = (label){self->names[NAME_ROOT_SPAN_NAME], pl_value_string(root_name), 1};
    pl_bytes svc = pl_corr_service_name(self, e->service);
    if (svc.len)
        items[n_items++] = (label){self->names[NAME_SERVICE_NAME], pl_value_string(svc), 2};
    for (size_t k = 0; k < self->n_span_attr_keys && n_items < max; k++) {
        pl_bytes key = self->span_attr_keys[k];
        /* The span first, then its ancestors up to the local root: http.route
         * usually sits on the server span, not on the span the sample hit. */
        bool found = false;
        for (int depth = 0; depth < n_chain && !found; depth++) {
            pl_kv *kv = pl_attrs_find(&chain[depth]->span->attrs, (const char *)key.ptr, key.len);
            if (kv && (kv->value.type == PL_VALUE_STRING || kv->value.type == PL_VALUE_INT ||
                       kv->value.type == PL_VALUE_DOUBLE || kv->value.type == PL_VALUE_BOOL)) {
                items[n_items++] = (label){key, kv->value, 3 + (uint32_t)k};
                found = true;
            }
        }
        pl_value v;
        if (!found && gone && pl_corr_late_attr(self, gone, k, &v))
            items[n_items++] = (label){key, v, 3 + (uint32_t)k};
    }
    return n_items;
}

/* Takes `slot` for target t, with its attribute list idx (n entries, shared
 * read-only: lists are replaced downstream, never written in place). */
static int fill_slot(correlation *self, const link_target *t, const dict_writer *w,
                     enrich_slot *slot, int32_t *idx, uint32_t n)
{
    slot->idx = idx;
    slot->n = n;
    slot->n_ids = 0;
    slot->ids_built = false;
    slot->link = 0;
    slot->dict = w->dict;
    slot->span = t->id;
    slot->late = t->entry == NULL;
    self->cache_used[self->cache_count++] = (uint32_t)(slot - self->cache);
    return 0;
}

/* Fills `slot` for target `t` in the dictionary of `batch`. */
static int build_span_labels(correlation *self, const link_target *t, pl_batch *batch,
                             enrich_slot *slot, anc_walk *walk)
{
    dict_writer *w = &self->writer;
    if (writer_bind(w, batch))
        return -1;
    __typeof__(w->label_sets[0]) *set = NULL;
    late_labels_key lk;
    if (!t->entry) {
        /* A summary made of what an earlier one of the batch was: its list. */
        uint64_t h = pl_corr_late_labels_key(self, t->late, &lk);
        set = &w->label_sets[h & 63];
        if (set->idx && set->hash == h && pl_corr_late_labels_key_eq(&set->key, &lk))
            return fill_slot(self, t, w, slot, set->idx, set->n);
        set->idx = NULL;
        set->hash = h;
        set->key = lk;
    }
    int32_t tmp[3 + 64];
    uint32_t n = 0;
    size_t max_n = 3 + (self->n_span_attr_keys < 64 ? self->n_span_attr_keys : 64);
    label items[3 + 64];
    size_t n_items = t->entry ? span_labels(self, t->entry, items, max_n, walk)
                              : pl_corr_late_labels(self, t->late, items, max_n);
    for (size_t k = 0; k < n_items; k++) {
        /* The keys are the same for every span: looked up once per batch. */
        int32_t none = 0;
        int32_t *cached = items[k].slot < sizeof(w->key_idx) / sizeof(w->key_idx[0])
                              ? &w->key_idx[items[k].slot]
                              : &none;
        int32_t ks = *cached ? *cached - 1 : writer_string(w, items[k].key);
        if (ks < 0)
            return -1;
        *cached = ks + 1;
        pl_value v = items[k].value;
        uint32_t h = 0;
        if (v.type == PL_VALUE_STRING) {
            /* Most spans share their labels with others of the batch. */
            h = (uint32_t)(pl_mix64((uintptr_t)v.u.str.ptr ^ ((uint64_t)(uint32_t)ks << 40)) & 63);
            int32_t ai = w->label_hint[h].ptr == v.u.str.ptr && w->label_hint[h].key == ks
                             ? w->label_hint[h].idx - 1
                             : -1;
            const pl_kvu *a =
                ai > 0 && (uint32_t)ai < w->dict->n_attributes ? &w->dict->attributes[ai] : NULL;
            if (a && a->key_strindex == ks && a->value.type == PL_VALUE_STRING &&
                pl_bytes_eq(a->value.u.str, v.u.str)) {
                tmp[n++] = ai;
                continue;
            }
            /* The string table holds the batch's own copy; the value shares it. */
            int32_t vs = writer_string(w, v.u.str);
            if (vs < 0)
                return -1;
            v.u.str = w->dict->strings[vs];
        }
        int32_t ai = writer_attribute(w, ks, v);
        if (ai < 0)
            return -1;
        if (items[k].value.type == PL_VALUE_STRING) {
            w->label_hint[h].ptr = items[k].value.u.str.ptr;
            w->label_hint[h].key = ks;
            w->label_hint[h].idx = ai + 1;
        }
        tmp[n++] = ai;
    }
    int32_t *idx = pl_batch_alloc(batch, n * sizeof(int32_t));
    if (!idx)
        return -1;
    memcpy(idx, tmp, n * sizeof(int32_t));
    if (set) {
        set->idx = idx;
        set->n = n;
    }
    return fill_slot(self, t, w, slot, idx, n);
}

/* The trace_id / span_id attributes of a slot's span (hex). */
static int build_id_labels(correlation *self, const link_target *tg, pl_batch *batch,
                           enrich_slot *slot)
{
    dict_writer *w = &self->writer;
    if (writer_bind(w, batch))
        return -1;
    char hex[33];
    slot->n_ids = 0;
    for (int k = 0; k < 2; k++) {
        bool trace = k == 0;
        if (trace && !tg->trace_id)
            continue;
        pl_hex_encode(trace ? tg->trace_id : tg->span_id, trace ? 16 : 8, hex);
        int32_t ks = writer_string(w, self->names[trace ? NAME_TRACE_ID : NAME_SPAN_ID]);
        int32_t vs = ks < 0 ? -1 : writer_string(w, (pl_bytes){(uint8_t *)hex, trace ? 32u : 16u});
        if (vs < 0)
            return -1;
        int32_t ai = writer_attribute(w, ks, pl_value_string(w->dict->strings[vs]));
        if (ai < 0)
            return -1;
        slot->ids[slot->n_ids++] = ai;
    }
    slot->ids_built = true;
    return 0;
}

/* Points the sample at its span: completes its link with the span's trace
 * id, and gives it the span's labels (its own attributes with the same keys
 * are replaced, so keys stay unique within a sample). A sample with a link
 * gets no trace_id / span_id attributes: the link carries them, and the
 * pprof encoder writes labels from both (they would appear twice). */
static enrich_slot *enrich_sample(correlation *self, const link_target *tg, pl_sample *s,
                                  pl_batch *batch, anc_walk *walk)
{
    pl_dictionary *dict = &batch->data.profiles.dict;
    enrich_slot *slot = cache_slot(self, dict, tg->id);
    if (!slot)
        return NULL;
    if (!slot->span) {
        if (build_span_labels(self, tg, batch, slot, walk)) {
            memset(slot, 0, sizeof(*slot));
            if (walk)
                walk->n = 0;
            return NULL;
        }
        if (walk)
            walk->built = true;
    }
    bool has_link =
        s->link_index > 0 && (uint32_t)s->link_index < dict->n_links &&
        span_id_valid(dict->links[s->link_index].span_id, dict->links[s->link_index].span_id_len);
    if (has_link) {
        const pl_link *l = &dict->links[s->link_index];
        if (!trace_id_valid(l->trace_id, l->trace_id_len) && tg->trace_id) {
            if (link_named_once(&self->writer, batch, s->link_index)) {
                /* No other sample names it: completed where it is. */
                pl_link own = *l;
                memcpy(own.trace_id, tg->trace_id, 16);
                own.trace_id_len = 16;
                pl_dict_set(&batch->arena, dict, PL_DICT_LINKS, s->link_index, &own);
            } else {
                if (!slot->link) {
                    pl_link full;
                    memset(&full, 0, sizeof(full));
                    memcpy(full.trace_id, tg->trace_id, 16);
                    full.trace_id_len = 16;
                    memcpy(full.span_id, tg->span_id, 8);
                    full.span_id_len = 8;
                    int32_t li = writer_link(&self->writer, &full);
                    slot->link = li > 0 ? li : 0;
                }
                if (slot->link)
                    s->link_index = slot->link;
            }
        }
    }
    if (!has_link && !slot->ids_built && build_id_labels(self, tg, batch, slot))
        slot->n_ids = 0;
    uint32_t n_ids = has_link ? 0 : slot->n_ids;
    uint32_t n_add = n_ids + slot->n;
    if (!s->n_attribute_indices) {
        /* Nothing of its own to keep: the sample shares the slot's list
         * (attribute lists are replaced downstream, never written in place). */
        if (n_ids && !slot->with_ids) {
            slot->with_ids = pl_batch_alloc(batch, n_add * sizeof(int32_t));
            if (slot->with_ids) {
                memcpy(slot->with_ids, slot->ids, n_ids * sizeof(int32_t));
                memcpy(slot->with_ids + n_ids, slot->idx, slot->n * sizeof(int32_t));
            }
        }
        int32_t *list = n_ids ? slot->with_ids : slot->idx;
        if (list) {
            s->attribute_indices = list;
            s->n_attribute_indices = n_add;
        }
        return slot;
    }
    int32_t *idx = pl_batch_alloc(batch, (s->n_attribute_indices + n_add) * sizeof(int32_t));
    if (!idx)
        return slot;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        int32_t ai = s->attribute_indices[i];
        bool replaced = false;
        if (ai > 0 && (uint32_t)ai < dict->n_attributes) {
            int32_t key = dict->attributes[ai].key_strindex;
            for (uint32_t j = 0; j < n_add && !replaced; j++) {
                int32_t mine = j < n_ids ? slot->ids[j] : slot->idx[j - n_ids];
                mine = dict->attributes[mine].key_strindex;
                replaced = key == mine ||
                           pl_bytes_eq(pl_dict_string(dict, key), pl_dict_string(dict, mine));
            }
        }
        if (!replaced)
            idx[n++] = ai;
    }
    memcpy(idx + n, slot->ids, n_ids * sizeof(int32_t));
    memcpy(idx + n + n_ids, slot->idx, slot->n * sizeof(int32_t));
    s->attribute_indices = idx;
    s->n_attribute_indices = n + n_add;
    return slot;
}

/* Pool id of the leaf function of a sample (through the writer's
 * per-dictionary cache). */
static uint32_t sample_function(correlation *self, pl_batch *batch, const pl_sample *s)
{
    dict_writer *w = &self->writer;
    const pl_dictionary *dict = &batch->data.profiles.dict;
    int32_t fi = leaf_function(dict, s);
    if (writer_bind(w, batch))
        return 0;
    if (!w->fn_ids) {
        w->n_fn_ids = dict->n_functions;
        w->fn_ids = calloc(w->n_fn_ids ? w->n_fn_ids : 1, sizeof(uint32_t));
        if (!w->fn_ids)
            return 0;
    }
    if (fi <= 0 || (uint32_t)fi >= w->n_fn_ids)
        return pl_corr_fn_pool_id(self, PL_BYTES_LIT("[unknown]"));
    if (!w->fn_ids[fi]) {
        pl_bytes name = pl_dict_string(dict, dict->functions[fi].name_strindex);
        w->fn_ids[fi] = pl_corr_fn_pool_id(self, name.len ? name : PL_BYTES_LIT("[unknown]"));
    }
    return w->fn_ids[fi];
}

/* Counts one linked sample (contribution c, leaf function fn) into span
 * entry e's own statistics, and what is left to hand up into its slot. */
static void count_linked(correlation *self, span_entry *e, const uint8_t *trace, contrib c,
                         uint32_t fn, enrich_slot *slot)
{
    span_stats *st = pl_corr_entry_stats(self, e);
    if (st) {
        if (trace && !st->has_trace) {
            memcpy(st->trace_id, trace, 16);
            st->has_trace = true;
        }
        st->linked++;
        st->samples += c.samples;
        st->samples_total += c.samples;
        st->cpu_self += c.cpu;
        st->cpu_total += c.cpu;
        st->wall_self += c.wall;
        st->wall_total += c.wall;
        if (fn)
            pl_corr_stats_add_function(self, st, fn, c.top);
    }
    if (slot) {
        slot->roll.samples += c.samples;
        slot->roll.cpu += c.cpu;
        slot->roll.wall += c.wall;
    }
    (*self->c_linked_samples)++;
}

/* Hands c up to the ancestors of walk->chain[0] now: along the entries the
 * labels walk just went through, then on from the last of them as
 * pl_corr_roll_up would. */
static void roll_up_walked(correlation *self, const anc_walk *walk, contrib c)
{
    const pl_span *sp = walk->chain[0]->span;
    const uint8_t *trace = pl_corr_span_trace(sp);
    for (int k = 1; k < walk->fused; k++) {
        span_stats *st = pl_corr_entry_stats(self, walk->chain[k]);
        if (!st)
            return;
        st->samples_total += c.samples;
        st->cpu_total += c.cpu;
        st->wall_total += c.wall;
    }
    pl_corr_roll_up_from(self, walk->chain[walk->fused - 1], c, trace, walk->fused - 1);
}

/* The link target of a span's summary (a spilled or departed span). */
static void late_target(link_target *tg, const late_span *ls)
{
    memset(tg, 0, sizeof(*tg));
    tg->late = ls;
    tg->id = ls;
    tg->trace_id = ls->has_trace ? ls->trace_id : NULL;
    memcpy(tg->span_id, &ls->key, 8);
}

/* Counts linked sample s (enriched into slot) into entry e's statistics.
 * True when its contribution *c is to be handed up to the ancestors at once
 * (walked: the labels walk went up from e for this sample); otherwise it
 * gathers in slot until the session ends. */
static bool count_sample(correlation *self, span_entry *e, const uint8_t *trace, pl_sample *s,
                         profile_info *pi, enrich_slot *slot, bool walked, contrib *c)
{
    pl_corr_service_linked(self, e->service, pi->service);
    *c = sample_contrib(pi, s);
    uint32_t fn = c->top && self->cfg.top_functions > 0 ? sample_function(self, pi->batch, s) : 0;
    bool now = slot && walked && (c->samples || c->cpu || c->wall);
    count_linked(self, e, trace, *c, fn, now ? NULL : slot);
    return now;
}

/* Links sample s (of profile pi) to the held span entry e. The first
 * sample of a span in a linking session hands its contribution up at once,
 * along the chain its labels were found on; the others gather in its slot
 * until the session ends (pl_corr_link_session_end). */
void pl_corr_link_sample(correlation *self, span_entry *e, pl_sample *s, profile_info *pi)
{
    link_target tg;
    memset(&tg, 0, sizeof(tg));
    tg.entry = e;
    tg.id = e->span;
    tg.trace_id =
        trace_id_valid(e->span->trace_id, e->span->trace_id_len) ? e->span->trace_id : NULL;
    memcpy(tg.span_id, e->span->span_id, 8);
    anc_walk walk;
    walk.n = 0;
    walk.built = false;
    enrich_slot *slot = enrich_sample(self, &tg, s, pi->batch, &walk);
    contrib c;
    if (count_sample(self, e, NULL, s, pi, slot, walk.n != 0, &c))
        roll_up_walked(self, &walk, c); /* may add placeholders: entries move after this */
}

/* Links sample s to a span whose batch spilled (to disk, or packed in
 * memory): enriched from the span's summary like a late sample, and counted
 * into the span's statistics (written on it when its batch is read back)
 * and its ancestors' totals: at once for the span's first sample in the
 * session (correlation_warm.c loaded its parent), as for held spans, the
 * others when the session ends. */
void pl_corr_link_spilled(correlation *self, span_entry *e, const late_span *ls, pl_sample *s,
                          profile_info *pi)
{
    link_target tg;
    late_target(&tg, ls);
    anc_walk walk;
    walk.n = 0;
    walk.built = false;
    enrich_slot *slot = enrich_sample(self, &tg, s, pi->batch, &walk);
    contrib c;
    if (count_sample(self, e, tg.trace_id, s, pi, slot, walk.built, &c))
        pl_corr_roll_up(self, e, c,
                        tg.trace_id); /* may add placeholders: entries move after this */
}

/* Enriches late sample s from the summary of its departed span: the same
 * labels and link as on time, but nothing to add to (the span has left). */
void pl_corr_link_late(correlation *self, const late_span *ls, pl_sample *s, profile_info *pi)
{
    link_target tg;
    late_target(&tg, ls);
    enrich_sample(self, &tg, s, pi->batch, NULL);
    (*self->c_late_linked)++;
}

/* Hands the contributions gathered during a linking session up to the
 * ancestors, and forgets the session's caches. */
void pl_corr_link_session_end(correlation *self)
{
    for (uint32_t k = 0; k < self->cache_count; k++) {
        enrich_slot *slot = &self->cache[self->cache_used[k]];
        if (!(slot->roll.samples || slot->roll.cpu || slot->roll.wall))
            continue;
        if (slot->late) {
            /* Samples of a spilled span (late ones add nothing). */
            const late_span *ls = slot->span;
            span_entry *se = pl_corr_spilled_entry(self, ls);
            if (se)
                pl_corr_roll_up(self, se, slot->roll, ls->has_trace ? ls->trace_id : NULL);
            continue;
        }
        span_entry *e = pl_corr_entry_of_span(self, slot->span);
        if (e)
            pl_corr_roll_up(self, e, slot->roll, NULL);
    }
    pl_corr_cache_clear(self);
    pl_corr_writer_reset(&self->writer);
}

/* What a sample (span id, trace id when known, time when known) links to:
 * the first entry with its span id, in probe order, that it matches, of
 * the spans held in memory, decoded (their trace id and times) or packed by
 * hold_compression (those of their own summaries), so that both settings
 * link alike. A held one is returned; for a packed one, NULL with the entry
 * in *spilled and its summary in *summary. A spilled entry that is exact
 * (corr_ref_exact, also on disk) ends the walk, as the only one with the
 * id. NULL and nothing set: no such span; the caller looks among the
 * summaries (spans on disk, spans that left). */
span_entry *pl_corr_match_sample(correlation *self, uint64_t key, const uint8_t *trace,
                                 bool has_time, uint64_t lo, uint64_t hi, span_entry **spilled,
                                 const late_span **summary)
{
    *spilled = NULL;
    *summary = NULL;
    SPAN_EACH(&self->spans, key, i)
    {
        span_entry *e = &self->spans.slots[i];
        if (e->state == ENTRY_HELD) {
            const pl_span *sp = e->span;
            if (trace && trace_id_valid(sp->trace_id, sp->trace_id_len) &&
                memcmp(sp->trace_id, trace, 16) != 0)
                continue;
            if (has_time && !pl_corr_span_time_matches(self, sp, lo, hi))
                continue;
            return e;
        }
        if (e->state != ENTRY_SPILLED || !e->late_ref)
            continue;
        bool exact = e->alone;
        if (!exact && !self->held[e->held].packed)
            continue; /* on disk: found through its summary, as without packing */
        const late_span *ls = pl_corr_late_ref_match(self, e, trace, has_time, lo, hi);
        if (ls) {
            *spilled = e;
            *summary = ls;
            return NULL;
        }
        if (exact)
            return NULL;
    }
    return NULL;
}
