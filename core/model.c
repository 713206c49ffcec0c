/*
 * model.c: batches and the small helpers processors use on the model.
 *
 * A batch is an arena plus a list of adopted malloc'd buffers (request bodies
 * that decoded strings point into). Freeing a batch frees both in one go.
 *
 * Attribute lists and dictionary tables grow geometrically inside the arena:
 * the old array is abandoned (arenas never free single objects), which costs
 * at most as much again as the final size, and keeps appends O(1) amortised.
 *
 * The profiles dictionary and its builder are core/dict.c.
 */
#include "model.h"

#include <stdlib.h>
#include <string.h>

#include "hash.h"

struct pl_batch_buffer {
    struct pl_batch_buffer *next;
    void *data;
    size_t size;
};

/* ---- signals and bytes -------------------------------------------------- */

static const char *const signal_names[PL_SIGNAL_COUNT] = {"traces", "profiles", "logs", "metrics"};

const char *pl_signal_name(pl_signal s)
{
    if ((unsigned)s < PL_SIGNAL_COUNT)
        return signal_names[s];
    return "unknown";
}

int pl_signal_from_name(const char *name, size_t len, pl_signal *out)
{
    for (int i = 0; i < PL_SIGNAL_COUNT; i++) {
        if (strlen(signal_names[i]) == len && memcmp(signal_names[i], name, len) == 0) {
            *out = (pl_signal)i;
            return 0;
        }
    }
    return -1;
}

pl_bytes pl_bytes_from_cstr(const char *s)
{
    pl_bytes b = {(const uint8_t *)s, s ? (uint32_t)strlen(s) : 0};
    return b;
}

bool pl_bytes_eq(pl_bytes a, pl_bytes b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

bool pl_bytes_eq_cstr(pl_bytes a, const char *s)
{
    size_t n = strlen(s);
    return a.len == n && (n == 0 || memcmp(a.ptr, s, n) == 0);
}

/* ---- batches ------------------------------------------------------------ */

pl_batch *pl_batch_new(pl_signal signal)
{
    pl_batch *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->signal = signal;
    pl_arena_init(&b->arena);
    return b;
}

static void wal_release_all(pl_batch *b)
{
    pl_wal_tags *t = b->wal;
    if (!t)
        return;
    b->wal = NULL;
    for (uint32_t i = 0; i < t->n; i++)
        t->tag[i].owner->hooks->release(t->tag[i].owner, t->tag[i].seq, t->settled, t->refused);
    free(t->tag);
    free(t);
}

int pl_batch_wal_add(pl_batch *b, pl_wal_owner *owner, uint64_t seq)
{
    pl_wal_tags *t = b->wal;
    if (!t) {
        t = calloc(1, sizeof(*t));
        if (!t)
            return -1;
        b->wal = t;
    }
    for (uint32_t i = 0; i < t->n; i++)
        if (t->tag[i].owner == owner && t->tag[i].seq == seq)
            return 0;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 4;
        pl_wal_tag *tag = realloc(t->tag, cap * sizeof(pl_wal_tag));
        if (!tag)
            return -1;
        t->tag = tag;
        t->cap = cap;
    }
    t->tag[t->n++] = (pl_wal_tag){owner, seq};
    owner->hooks->retain(owner, seq);
    return 0;
}

int pl_batch_wal_inherit(pl_batch *dst, const pl_batch *src)
{
    if (!src->wal)
        return 0;
    for (uint32_t i = 0; i < src->wal->n; i++)
        if (pl_batch_wal_add(dst, src->wal->tag[i].owner, src->wal->tag[i].seq))
            return -1;
    return 0;
}

void pl_batch_wal_handoff(pl_batch *b)
{
    if (b->wal) {
        b->wal->settled = true;
        wal_release_all(b);
    }
}

void pl_batch_wal_recovered(pl_batch *b, uint32_t refusals)
{
    if (!b->wal || !refusals)
        return;
    for (uint32_t i = 0; i < b->wal->n; i++) {
        pl_wal_owner *o = b->wal->tag[i].owner;
        if (o->hooks->recovered)
            o->hooks->recovered(o, b->wal->tag[i].seq, refusals);
    }
}

void pl_batch_wal_refused(pl_batch *b)
{
    if (b->wal && !b->wal->settled)
        b->wal->refused = true;
}

pl_batch *pl_batch_ref(const pl_batch *batch)
{
    pl_batch *b = (pl_batch *)batch;
    __atomic_fetch_add(&b->refs, 1, __ATOMIC_RELAXED);
    return b;
}

void pl_batch_free(pl_batch *batch)
{
    if (!batch)
        return;
    wal_release_all(batch);
    /* another holder: it frees (the acquire pairs with the release of the
     * holder that frees first, so every read of the batch happened before) */
    unsigned refs = __atomic_load_n(&batch->refs, __ATOMIC_ACQUIRE);
    while (refs > 0)
        if (__atomic_compare_exchange_n(&batch->refs, &refs, refs - 1, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return;
    struct pl_batch_buffer *buf = batch->buffers;
    while (buf) {
        struct pl_batch_buffer *next = buf->next;
        free(buf->data);
        free(buf);
        buf = next;
    }
    pl_arena_free(&batch->arena);
    free(batch);
}

void *pl_batch_alloc(pl_batch *batch, size_t size)
{
    return pl_arena_calloc(&batch->arena, 1, size);
}

int pl_batch_adopt(pl_batch *batch, void *buffer, size_t size)
{
    struct pl_batch_buffer *node = malloc(sizeof(*node));
    if (!node)
        return -1;
    node->data = buffer;
    node->size = size;
    node->next = batch->buffers;
    batch->buffers = node;
    batch->buffer_bytes += size;
    return 0;
}

pl_bytes pl_batch_bytes(pl_batch *batch, const void *src, size_t len)
{
    pl_bytes out = {NULL, 0};
    if (len > UINT32_MAX)
        return out;
    char *p = pl_arena_memdup(&batch->arena, src, len);
    if (!p)
        return out;
    out.ptr = (const uint8_t *)p;
    out.len = (uint32_t)len;
    return out;
}

size_t pl_batch_items(const pl_batch *batch)
{
    size_t n = 0;
    switch (batch->signal) {
    case PL_SIGNAL_TRACES:
        for (uint32_t r = 0; r < batch->data.traces.n_resources; r++) {
            const pl_resource_spans *rs = &batch->data.traces.resources[r];
            for (uint32_t s = 0; s < rs->n_scopes; s++)
                n += rs->scopes[s].n_spans;
        }
        return n;
    case PL_SIGNAL_PROFILES:
        for (uint32_t r = 0; r < batch->data.profiles.n_resources; r++) {
            const pl_resource_profiles *rp = &batch->data.profiles.resources[r];
            for (uint32_t s = 0; s < rp->n_scopes; s++)
                for (uint32_t p = 0; p < rp->scopes[s].n_profiles; p++)
                    n += rp->scopes[s].profiles[p].n_samples;
        }
        return n;
    default:
        return 1;
    }
}

size_t pl_batch_memory(const pl_batch *batch)
{
    return sizeof(*batch) + pl_arena_bytes(&batch->arena) + batch->buffer_bytes;
}

bool pl_batch_metadata_get(const pl_batch *batch, const char *key, pl_bytes *out)
{
    for (uint32_t i = 0; i < batch->metadata.n; i++) {
        const pl_kv *kv = &batch->metadata.items[i];
        if (pl_bytes_eq_cstr(kv->key, key)) {
            if (out)
                *out = kv->value.u.str;
            return true;
        }
    }
    return false;
}

/* ---- deep copy ---------------------------------------------------------- */

/* The copy helpers (core/model.h) return 0 or -1 (OOM, also recorded in
 * c->oom). They write into `dst`, which the caller has filled with a shallow
 * copy of the source. */
typedef pl_copier clone_ctx;

static int copy_failed(clone_ctx *c)
{
    c->oom = true;
    return -1;
}

int pl_copy_bytes(pl_copier *c, pl_bytes *b)
{
    if (b->len == 0) {
        b->ptr = NULL;
        return 0;
    }
    char *p = pl_arena_memdup(c->arena, b->ptr, b->len);
    if (!p) {
        b->len = 0;
        b->ptr = NULL;
        return copy_failed(c);
    }
    b->ptr = (const uint8_t *)p;
    return 0;
}

/* Copies an array of n elements; NULL stays NULL. */
void *pl_copy_array(pl_copier *c, const void *src, size_t n, size_t elem, int *fail)
{
    if (!src || n == 0)
        return NULL;
    void *p = pl_arena_calloc(c->arena, n, elem);
    if (!p) {
        c->oom = true;
        *fail = 1;
        return NULL;
    }
    memcpy(p, src, n * elem);
    return p;
}

static int copy_kvs(clone_ctx *c, pl_kv *items, uint32_t n);

int pl_copy_value(pl_copier *c, pl_value *v)
{
    int fail = 0;
    switch (v->type) {
    case PL_VALUE_STRING:
    case PL_VALUE_BYTES:
        return pl_copy_bytes(c, &v->u.str);
    case PL_VALUE_STRINDEX:
        if (c->remap)
            v->u.strindex = c->remap(c->remap_ctx, v->u.strindex);
        return 0;
    case PL_VALUE_ARRAY:
        v->u.array.items =
            pl_copy_array(c, v->u.array.items, v->u.array.n, sizeof(pl_value), &fail);
        if (!v->u.array.items)
            v->u.array.n = 0;
        if (fail)
            return -1;
        for (uint32_t i = 0; i < v->u.array.n; i++)
            if (pl_copy_value(c, &v->u.array.items[i]))
                return -1;
        return 0;
    case PL_VALUE_KVLIST:
        v->u.kvlist.items =
            pl_copy_array(c, v->u.kvlist.items, v->u.kvlist.n, sizeof(pl_kv), &fail);
        if (!v->u.kvlist.items)
            v->u.kvlist.n = 0;
        if (fail)
            return -1;
        return copy_kvs(c, v->u.kvlist.items, v->u.kvlist.n);
    default:
        return 0;
    }
}

static int copy_kvs(clone_ctx *c, pl_kv *items, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (c->remap && items[i].key_strindex)
            items[i].key_strindex = c->remap(c->remap_ctx, items[i].key_strindex);
        if (pl_copy_bytes(c, &items[i].key) || pl_copy_value(c, &items[i].value))
            return -1;
    }
    return 0;
}

int pl_copy_attrs(pl_copier *c, pl_attrs *a)
{
    int fail = 0;
    /* The copy is exactly n long: spare capacity is not worth duplicating. */
    a->items = pl_copy_array(c, a->items, a->n, sizeof(pl_kv), &fail);
    if (!a->items)
        a->n = 0;
    a->cap = a->n;
    if (fail)
        return -1;
    return copy_kvs(c, a->items, a->n);
}

static int copy_bytes_list(clone_ctx *c, pl_bytes **list, uint32_t *n)
{
    int fail = 0;
    *list = pl_copy_array(c, *list, *n, sizeof(pl_bytes), &fail);
    if (!*list)
        *n = 0;
    if (fail)
        return -1;
    for (uint32_t i = 0; i < *n; i++)
        if (pl_copy_bytes(c, &(*list)[i]))
            return -1;
    return 0;
}

int pl_copy_resource(pl_copier *c, pl_resource *r)
{
    int fail = 0;
    if (pl_copy_attrs(c, &r->attrs))
        return -1;
    r->entity_refs =
        pl_copy_array(c, r->entity_refs, r->n_entity_refs, sizeof(pl_entity_ref), &fail);
    if (!r->entity_refs)
        r->n_entity_refs = 0; /* never trust a count without its array */
    if (fail)
        return -1;
    for (uint32_t i = 0; i < r->n_entity_refs; i++) {
        pl_entity_ref *e = &r->entity_refs[i];
        if (pl_copy_bytes(c, &e->schema_url) || pl_copy_bytes(c, &e->type) ||
            copy_bytes_list(c, &e->id_keys, &e->n_id_keys) ||
            copy_bytes_list(c, &e->description_keys, &e->n_description_keys))
            return -1;
    }
    return 0;
}

int pl_copy_scope(pl_copier *c, pl_scope *s)
{
    return pl_copy_bytes(c, &s->name) || pl_copy_bytes(c, &s->version) ||
                   pl_copy_attrs(c, &s->attrs)
               ? -1
               : 0;
}

int pl_copy_span(pl_copier *c, pl_span *sp)
{
    int fail = 0;
    if (pl_copy_bytes(c, &sp->trace_state) || pl_copy_bytes(c, &sp->name) ||
        pl_copy_attrs(c, &sp->attrs) || pl_copy_bytes(c, &sp->status.message))
        return -1;
    sp->events = pl_copy_array(c, sp->events, sp->n_events, sizeof(pl_span_event), &fail);
    sp->links = pl_copy_array(c, sp->links, sp->n_links, sizeof(pl_span_link), &fail);
    if (!sp->events)
        sp->n_events = 0;
    if (!sp->links)
        sp->n_links = 0;
    if (fail)
        return -1;
    for (uint32_t i = 0; i < sp->n_events; i++)
        if (pl_copy_bytes(c, &sp->events[i].name) || pl_copy_attrs(c, &sp->events[i].attrs))
            return -1;
    for (uint32_t i = 0; i < sp->n_links; i++)
        if (pl_copy_bytes(c, &sp->links[i].trace_state) || pl_copy_attrs(c, &sp->links[i].attrs))
            return -1;
    return 0;
}

/* Traces and profiles share their envelope (resources -> scopes -> items)
 * with the same struct layout (checked in proto/otlp_pb.c); one loop copies
 * both, through offsets of the traces structs. */
_Static_assert(sizeof(pl_resource_spans) == sizeof(pl_resource_profiles) &&
                   sizeof(pl_scope_spans) == sizeof(pl_scope_profiles) &&
                   offsetof(pl_resource_spans, scopes) == offsetof(pl_resource_profiles, scopes) &&
                   offsetof(pl_scope_spans, spans) == offsetof(pl_scope_profiles, profiles) &&
                   offsetof(pl_scope_spans, n_spans) == offsetof(pl_scope_profiles, n_profiles),
               "envelope layout");

typedef int (*copy_item_fn)(clone_ctx *c, void *item);

/* Copies the array at *(void **)field_ptr of n elements in place. */
static int copy_member_array(clone_ctx *c, uint8_t *owner, size_t ptr_off, size_t n_off,
                             size_t elem)
{
    void *items;
    uint32_t n;
    int fail = 0;
    memcpy(&items, owner + ptr_off, sizeof items);
    memcpy(&n, owner + n_off, sizeof n);
    items = pl_copy_array(c, items, n, elem, &fail);
    if (!items)
        n = 0;
    memcpy(owner + ptr_off, &items, sizeof items);
    memcpy(owner + n_off, &n, sizeof n);
    return fail ? -1 : 0;
}

static int copy_envelope(clone_ctx *c, uint8_t *holder, size_t res_off, size_t n_res_off,
                         size_t item_size, copy_item_fn item)
{
    if (copy_member_array(c, holder, res_off, n_res_off, sizeof(pl_resource_spans)))
        return -1;
    uint8_t *res;
    uint32_t n_res;
    memcpy(&res, holder + res_off, sizeof res);
    memcpy(&n_res, holder + n_res_off, sizeof n_res);
    for (uint32_t r = 0; r < n_res; r++) {
        uint8_t *rs = res + r * sizeof(pl_resource_spans);
        if (pl_copy_resource(c, (pl_resource *)(rs + offsetof(pl_resource_spans, resource))) ||
            pl_copy_bytes(c, (pl_bytes *)(rs + offsetof(pl_resource_spans, schema_url))) ||
            copy_member_array(c, rs, offsetof(pl_resource_spans, scopes),
                              offsetof(pl_resource_spans, n_scopes), sizeof(pl_scope_spans)))
            return -1;
        uint8_t *scopes;
        uint32_t n_scopes;
        memcpy(&scopes, rs + offsetof(pl_resource_spans, scopes), sizeof scopes);
        memcpy(&n_scopes, rs + offsetof(pl_resource_spans, n_scopes), sizeof n_scopes);
        for (uint32_t s = 0; s < n_scopes; s++) {
            uint8_t *ss = scopes + s * sizeof(pl_scope_spans);
            if (pl_copy_scope(c, (pl_scope *)(ss + offsetof(pl_scope_spans, scope))) ||
                pl_copy_bytes(c, (pl_bytes *)(ss + offsetof(pl_scope_spans, schema_url))) ||
                copy_member_array(c, ss, offsetof(pl_scope_spans, spans),
                                  offsetof(pl_scope_spans, n_spans), item_size))
                return -1;
            uint8_t *items;
            uint32_t n_items;
            memcpy(&items, ss + offsetof(pl_scope_spans, spans), sizeof items);
            memcpy(&n_items, ss + offsetof(pl_scope_spans, n_spans), sizeof n_items);
            for (uint32_t i = 0; i < n_items; i++)
                if (item(c, items + i * item_size))
                    return -1;
        }
    }
    return 0;
}

static int copy_span_item(clone_ctx *c, void *item)
{
    return pl_copy_span(c, item);
}

static int copy_traces(clone_ctx *c, pl_traces *t)
{
    return copy_envelope(c, (uint8_t *)t, offsetof(pl_traces, resources),
                         offsetof(pl_traces, n_resources), sizeof(pl_span), copy_span_item);
}

static int32_t *copy_i32(clone_ctx *c, int32_t *src, uint32_t *n, int *fail)
{
    int32_t *p = pl_copy_array(c, src, *n, sizeof(int32_t), fail);
    if (!p)
        *n = 0;
    return p;
}

static int copy_profile(clone_ctx *c, pl_profile *p)
{
    int fail = 0;
    if (pl_copy_bytes(c, &p->original_payload_format) || pl_copy_bytes(c, &p->original_payload))
        return -1;
    p->attribute_indices = copy_i32(c, p->attribute_indices, &p->n_attribute_indices, &fail);
    p->samples = pl_copy_array(c, p->samples, p->n_samples, sizeof(pl_sample), &fail);
    if (fail)
        return -1;
    if (!p->samples)
        p->n_samples = 0;
    for (uint32_t i = 0; i < p->n_samples; i++) {
        pl_sample *s = &p->samples[i];
        s->attribute_indices = copy_i32(c, s->attribute_indices, &s->n_attribute_indices, &fail);
        s->values = pl_copy_array(c, s->values, s->n_values, sizeof(int64_t), &fail);
        s->timestamps_unix_nano =
            pl_copy_array(c, s->timestamps_unix_nano, s->n_timestamps, sizeof(uint64_t), &fail);
        if (fail)
            return -1;
        if (!s->values)
            s->n_values = 0;
        if (!s->timestamps_unix_nano)
            s->n_timestamps = 0;
    }
    return 0;
}

static int copy_profile_item(clone_ctx *c, void *item)
{
    return copy_profile(c, item);
}

static int copy_profiles(clone_ctx *c, pl_profiles *ps)
{
    if (copy_envelope(c, (uint8_t *)ps, offsetof(pl_profiles, resources),
                      offsetof(pl_profiles, n_resources), sizeof(pl_profile), copy_profile_item))
        return -1;
    return pl_dict_copy(c, &ps->dict);
}

pl_batch *pl_batch_clone(const pl_batch *batch)
{
    pl_batch *b = pl_batch_new(batch->signal);
    if (!b)
        return NULL;
    clone_ctx c = {&b->arena};
    b->data = batch->data;
    b->metadata = batch->metadata;
    b->received_unix_nano = batch->received_unix_nano;
    int rc = pl_batch_wal_inherit(b, batch);
    if (rc) {
        pl_batch_free(b);
        return NULL;
    }
    switch (batch->signal) {
    case PL_SIGNAL_TRACES:
        rc = copy_traces(&c, &b->data.traces);
        break;
    case PL_SIGNAL_PROFILES:
        rc = copy_profiles(&c, &b->data.profiles);
        break;
    default:
        rc = pl_copy_bytes(&c, &b->data.raw);
        break;
    }
    if (rc == 0) {
        int fail = 0;
        b->metadata.items =
            pl_copy_array(&c, b->metadata.items, b->metadata.n, sizeof(pl_kv), &fail);
        if (!b->metadata.items)
            b->metadata.n = 0;
        rc = fail ? -1 : copy_kvs(&c, b->metadata.items, b->metadata.n);
    }
    if (rc != 0) {
        pl_batch_free(b);
        return NULL;
    }
    return b;
}

/* ---- attributes and values ---------------------------------------------- */

pl_kv *pl_attrs_find(const pl_attrs *attrs, const char *key, size_t key_len)
{
    for (uint32_t i = 0; i < attrs->n; i++) {
        pl_kv *kv = &attrs->items[i];
        if (kv->key.len == key_len && (key_len == 0 || memcmp(kv->key.ptr, key, key_len) == 0))
            return kv;
    }
    return NULL;
}

pl_kv *pl_attrs_put(pl_arena *arena, pl_attrs *attrs, pl_bytes key, pl_value value)
{
    pl_kv *kv = pl_attrs_find(attrs, (const char *)key.ptr, key.len);
    if (kv) {
        kv->value = value;
        return kv;
    }
    if (attrs->n >= attrs->cap) {
        uint32_t cap = attrs->cap < attrs->n ? attrs->n : attrs->cap;
        cap = cap < 4 ? 8 : cap * 2;
        pl_kv *items = pl_arena_grow(arena, attrs->items, attrs->n, cap, sizeof(pl_kv));
        if (!items)
            return NULL;
        attrs->items = items;
        attrs->cap = cap;
    }
    kv = &attrs->items[attrs->n++];
    memset(kv, 0, sizeof(*kv));
    kv->key = key;
    kv->value = value;
    return kv;
}

bool pl_attrs_remove(pl_attrs *attrs, const char *key, size_t key_len)
{
    pl_kv *kv = pl_attrs_find(attrs, key, key_len);
    if (!kv)
        return false;
    size_t i = (size_t)(kv - attrs->items);
    memmove(kv, kv + 1, (attrs->n - i - 1) * sizeof(pl_kv));
    attrs->n--;
    return true;
}

pl_value pl_value_string(pl_bytes s)
{
    return (pl_value){.type = PL_VALUE_STRING, .u.str = s};
}

pl_value pl_value_int(int64_t i)
{
    return (pl_value){.type = PL_VALUE_INT, .u.i = i};
}

pl_value pl_value_double(double d)
{
    return (pl_value){.type = PL_VALUE_DOUBLE, .u.d = d};
}

pl_value pl_value_bool(bool b)
{
    return (pl_value){.type = PL_VALUE_BOOL, .u.b = b};
}

bool pl_value_eq(const pl_value *a, const pl_value *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case PL_VALUE_EMPTY:
        return true;
    case PL_VALUE_STRING:
    case PL_VALUE_BYTES:
        return pl_bytes_eq(a->u.str, b->u.str);
    case PL_VALUE_BOOL:
        return a->u.b == b->u.b;
    case PL_VALUE_INT:
        return a->u.i == b->u.i;
    case PL_VALUE_DOUBLE:
        /* Bitwise, so that NaN equals itself and a value is equal to its copy. */
        return memcmp(&a->u.d, &b->u.d, sizeof(double)) == 0;
    case PL_VALUE_STRINDEX:
        return a->u.strindex == b->u.strindex;
    case PL_VALUE_ARRAY:
        if (a->u.array.n != b->u.array.n)
            return false;
        for (uint32_t i = 0; i < a->u.array.n; i++)
            if (!pl_value_eq(&a->u.array.items[i], &b->u.array.items[i]))
                return false;
        return true;
    case PL_VALUE_KVLIST:
        if (a->u.kvlist.n != b->u.kvlist.n)
            return false;
        for (uint32_t i = 0; i < a->u.kvlist.n; i++) {
            const pl_kv *x = &a->u.kvlist.items[i], *y = &b->u.kvlist.items[i];
            if (!pl_bytes_eq(x->key, y->key) || x->key_strindex != y->key_strindex ||
                !pl_value_eq(&x->value, &y->value))
                return false;
        }
        return true;
    }
    return false;
}

/* ---- hex ---------------------------------------------------------------- */

void pl_hex_encode(const uint8_t *bytes, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * len] = '\0';
}

int pl_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int pl_hex_decode(const char *hex, size_t hex_len, uint8_t *out, size_t len)
{
    if (hex_len != 2 * len)
        return -1;
    for (size_t i = 0; i < len; i++) {
        int hi = pl_hex_digit(hex[2 * i]), lo = pl_hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}
