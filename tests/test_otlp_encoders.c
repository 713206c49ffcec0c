/*
 * test_otlp_encoders.c: the table-driven OTLP encoders (protobuf and JSON)
 * write exactly the bytes of the hand-written encoders they replaced
 * (tests/tools/ref_*_enc.c), on random batches that set every member of
 * every message (or leave it at its default), on the fuzz seed corpora and
 * on edge cases (status without its flag, empty keys and values, extreme
 * integers, non-finite doubles); and what they write decodes back to a
 * batch that encodes the same again.
 *
 *   test_otlp_encoders [corpus-dir...]
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/model.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "testlib.h"
#include "tools/ref_enc.h"

/* ---- random batches ----------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    uint64_t x = rng_state; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static unsigned below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

/* Half the time zero (left out by the encoders), else anything, extremes
 * included. */
static uint64_t r64(void)
{
    switch (below(6)) {
    case 0:
    case 1:
    case 2:
        return 0;
    case 3:
        return UINT64_MAX - below(2) * (UINT64_MAX / 2 + 1); /* -1 / INT64_MIN-ish */
    case 4:
        return below(300);
    default:
        return rnd();
    }
}

static uint32_t r32(void)
{
    return (uint32_t)r64();
}

static pl_bytes rstr(pl_batch *b)
{
    static const char *const pool[] = {
        "", "a", "GET /api/cart", "quote\" back\\slash", "ctl\x01\n\t", "\xc3\xa9t\xc3\xa9", "k"};
    const char *s = pool[below(sizeof pool / sizeof pool[0])];
    if (below(4) == 0) { /* a longer one: lengths past 127 move the content */
        size_t n = 100 + below(300);
        char *p = pl_batch_alloc(b, n);
        for (size_t i = 0; i < n; i++)
            p[i] = (char)('a' + i % 26);
        return (pl_bytes){(const uint8_t *)p, (uint32_t)n};
    }
    return pl_batch_bytes(b, s, strlen(s));
}

static void rid(uint8_t *id, uint8_t *len, uint8_t full)
{
    *len = below(3) ? full : 0;
    for (unsigned i = 0; i < full; i++)
        id[i] = below(4) ? (uint8_t)rnd() : 0;
}

static void rvalue(pl_batch *b, pl_value *v, int depth);

static void rattrs(pl_batch *b, pl_attrs *a, int depth)
{
    a->n = below(4);
    a->items = a->n ? pl_batch_alloc(b, a->n * sizeof(pl_kv)) : NULL;
    for (uint32_t i = 0; i < a->n; i++) {
        a->items[i].key = rstr(b);
        a->items[i].key_strindex = (int32_t)(below(3) ? 0 : r32());
        rvalue(b, &a->items[i].value, depth + 1);
    }
}

static void rvalue(pl_batch *b, pl_value *v, int depth)
{
    static const double doubles[] = {0.0, -0.0, 0.1, 1.0 / 3, 1e300, -2.5e-310, 123456789.0};
    memset(v, 0, sizeof *v);
    v->type = (pl_value_type)below(depth > 3 ? 5 : 9);
    switch (v->type) {
    case PL_VALUE_STRING:
    case PL_VALUE_BYTES:
        v->u.str = rstr(b);
        break;
    case PL_VALUE_BOOL:
        v->u.b = below(2);
        break;
    case PL_VALUE_INT:
        v->u.i = (int64_t)r64();
        break;
    case PL_VALUE_DOUBLE:
        switch (below(4)) {
        case 0:
            v->u.d = NAN;
            break;
        case 1:
            v->u.d = below(2) ? INFINITY : -INFINITY;
            break;
        default:
            v->u.d = doubles[below(sizeof doubles / sizeof doubles[0])];
        }
        break;
    case PL_VALUE_ARRAY:
        v->u.array.n = below(4);
        v->u.array.items = v->u.array.n ? pl_batch_alloc(b, v->u.array.n * sizeof(pl_value)) : NULL;
        for (uint32_t i = 0; i < v->u.array.n; i++)
            rvalue(b, &v->u.array.items[i], depth + 1);
        break;
    case PL_VALUE_KVLIST: {
        pl_attrs a;
        rattrs(b, &a, depth);
        v->u.kvlist.items = a.items;
        v->u.kvlist.n = a.n;
        break;
    }
    case PL_VALUE_STRINDEX:
        v->u.strindex = (int32_t)r32();
        break;
    default:
        break;
    }
}

static pl_bytes *rstrs(pl_batch *b, uint32_t *n)
{
    *n = below(3);
    pl_bytes *s = *n ? pl_batch_alloc(b, *n * sizeof(pl_bytes)) : NULL;
    for (uint32_t i = 0; i < *n; i++)
        s[i] = rstr(b);
    return s;
}

static void rresource(pl_batch *b, bool *has, pl_resource *r)
{
    *has = below(4) != 0;
    rattrs(b, &r->attrs, 0);
    r->dropped_attributes_count = r32();
    r->n_entity_refs = below(3);
    r->entity_refs =
        r->n_entity_refs ? pl_batch_alloc(b, r->n_entity_refs * sizeof(pl_entity_ref)) : NULL;
    for (uint32_t i = 0; i < r->n_entity_refs; i++) {
        pl_entity_ref *e = &r->entity_refs[i];
        e->schema_url = rstr(b);
        e->type = rstr(b);
        e->id_keys = rstrs(b, &e->n_id_keys);
        e->description_keys = rstrs(b, &e->n_description_keys);
    }
}

static void rscope(pl_batch *b, bool *has, pl_scope *s)
{
    *has = below(4) != 0;
    s->name = rstr(b);
    s->version = rstr(b);
    rattrs(b, &s->attrs, 0);
    s->dropped_attributes_count = r32();
}

#define RLIST(b, items, n, max)                                                                    \
    ((n) = below(max), (items) = (n) ? pl_batch_alloc((b), (n) * sizeof *(items)) : NULL)

static void rspan(pl_batch *b, pl_span *sp)
{
    rid(sp->trace_id, &sp->trace_id_len, 16);
    rid(sp->span_id, &sp->span_id_len, 8);
    rid(sp->parent_span_id, &sp->parent_span_id_len, 8);
    sp->trace_state = rstr(b);
    sp->flags = r32();
    sp->name = rstr(b);
    sp->kind = (int32_t)below(7);
    sp->start_time_unix_nano = r64();
    sp->end_time_unix_nano = r64();
    rattrs(b, &sp->attrs, 0);
    sp->dropped_attributes_count = r32();
    RLIST(b, sp->events, sp->n_events, 3);
    for (uint32_t i = 0; i < sp->n_events; i++) {
        sp->events[i].time_unix_nano = r64();
        sp->events[i].name = rstr(b);
        rattrs(b, &sp->events[i].attrs, 0);
        sp->events[i].dropped_attributes_count = r32();
    }
    sp->dropped_events_count = r32();
    RLIST(b, sp->links, sp->n_links, 3);
    for (uint32_t i = 0; i < sp->n_links; i++) {
        pl_span_link *l = &sp->links[i];
        rid(l->trace_id, &l->trace_id_len, 16);
        rid(l->span_id, &l->span_id_len, 8);
        l->trace_state = rstr(b);
        rattrs(b, &l->attrs, 0);
        l->dropped_attributes_count = r32();
        l->flags = r32();
    }
    sp->dropped_links_count = r32();
    /* Every combination of the flag and the content. */
    sp->has_status = below(2);
    sp->status.code = (int32_t)below(3);
    sp->status.message = below(2) ? rstr(b) : (pl_bytes){NULL, 0};
}

static pl_batch *random_traces(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    RLIST(b, t->resources, t->n_resources, 3);
    for (uint32_t r = 0; r < t->n_resources; r++) {
        pl_resource_spans *rs = &t->resources[r];
        rresource(b, &rs->has_resource, &rs->resource);
        rs->schema_url = rstr(b);
        RLIST(b, rs->scopes, rs->n_scopes, 3);
        for (uint32_t s = 0; s < rs->n_scopes; s++) {
            pl_scope_spans *ss = &rs->scopes[s];
            rscope(b, &ss->has_scope, &ss->scope);
            ss->schema_url = rstr(b);
            RLIST(b, ss->spans, ss->n_spans, 4);
            for (uint32_t i = 0; i < ss->n_spans; i++)
                rspan(b, &ss->spans[i]);
        }
    }
    return b;
}

static int32_t *ri32s(pl_batch *b, uint32_t *n)
{
    int32_t *v;
    RLIST(b, v, *n, 4);
    for (uint32_t i = 0; i < *n; i++)
        v[i] = (int32_t)r32();
    return v;
}

static void rprofile(pl_batch *b, pl_profile *p)
{
    p->has_sample_type = below(2);
    p->sample_type = (pl_vtype){(int32_t)r32(), (int32_t)r32()};
    RLIST(b, p->samples, p->n_samples, 4);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        pl_sample *s = &p->samples[i];
        s->stack_index = (int32_t)r32();
        s->link_index = (int32_t)r32();
        s->attribute_indices = ri32s(b, &s->n_attribute_indices);
        RLIST(b, s->values, s->n_values, 4);
        for (uint32_t k = 0; k < s->n_values; k++)
            s->values[k] = (int64_t)r64();
        RLIST(b, s->timestamps_unix_nano, s->n_timestamps, 4);
        for (uint32_t k = 0; k < s->n_timestamps; k++)
            s->timestamps_unix_nano[k] = r64();
    }
    p->time_unix_nano = r64();
    p->duration_nano = r64();
    p->has_period_type = below(2);
    p->period_type = (pl_vtype){(int32_t)r32(), 0};
    p->period = (int64_t)r64();
    rid(p->profile_id, &p->profile_id_len, 16);
    p->dropped_attributes_count = r32();
    p->original_payload_format = rstr(b);
    p->original_payload = rstr(b);
    p->attribute_indices = ri32s(b, &p->n_attribute_indices);
}

static void rdictionary(pl_batch *b, pl_dictionary *d)
{
    RLIST(b, d->mappings, d->n_mappings, 4);
    for (uint32_t i = 0; i < d->n_mappings; i++) {
        pl_mapping *m = &d->mappings[i];
        m->memory_start = r64();
        m->memory_limit = r64();
        m->file_offset = r64();
        m->filename_strindex = (int32_t)r32();
        m->attribute_indices = ri32s(b, &m->n_attribute_indices);
    }
    RLIST(b, d->locations, d->n_locations, 4);
    for (uint32_t i = 0; i < d->n_locations; i++) {
        pl_location *l = &d->locations[i];
        l->mapping_index = (int32_t)r32();
        l->address = r64();
        RLIST(b, l->lines, l->n_lines, 3);
        for (uint32_t k = 0; k < l->n_lines; k++)
            l->lines[k] = (pl_line){(int32_t)r32(), (int64_t)r64(), (int64_t)r64()};
        l->attribute_indices = ri32s(b, &l->n_attribute_indices);
    }
    RLIST(b, d->functions, d->n_functions, 4);
    for (uint32_t i = 0; i < d->n_functions; i++)
        d->functions[i] =
            (pl_function){(int32_t)r32(), (int32_t)r32(), (int32_t)r32(), (int64_t)r64()};
    RLIST(b, d->links, d->n_links, 3);
    for (uint32_t i = 0; i < d->n_links; i++) {
        rid(d->links[i].trace_id, &d->links[i].trace_id_len, 16);
        rid(d->links[i].span_id, &d->links[i].span_id_len, 8);
    }
    d->strings = rstrs(b, &d->n_strings);
    RLIST(b, d->attributes, d->n_attributes, 4);
    for (uint32_t i = 0; i < d->n_attributes; i++) {
        d->attributes[i].key_strindex = (int32_t)r32();
        rvalue(b, &d->attributes[i].value, 0);
        d->attributes[i].unit_strindex = (int32_t)r32();
    }
    RLIST(b, d->stacks, d->n_stacks, 3);
    for (uint32_t i = 0; i < d->n_stacks; i++)
        d->stacks[i].location_indices = ri32s(b, &d->stacks[i].n_location_indices);
}

static pl_batch *random_profiles(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &b->data.profiles;
    RLIST(b, ps->resources, ps->n_resources, 3);
    for (uint32_t r = 0; r < ps->n_resources; r++) {
        pl_resource_profiles *rp = &ps->resources[r];
        rresource(b, &rp->has_resource, &rp->resource);
        rp->schema_url = rstr(b);
        RLIST(b, rp->scopes, rp->n_scopes, 3);
        for (uint32_t s = 0; s < rp->n_scopes; s++) {
            pl_scope_profiles *sp = &rp->scopes[s];
            rscope(b, &sp->has_scope, &sp->scope);
            sp->schema_url = rstr(b);
            RLIST(b, sp->profiles, sp->n_profiles, 3);
            for (uint32_t i = 0; i < sp->n_profiles; i++)
                rprofile(b, &sp->profiles[i]);
        }
    }
    ps->has_dictionary = below(4) != 0;
    rdictionary(b, &ps->dict);
    return b;
}

/* ---- comparison --------------------------------------------------------- */

static bool same(const pl_buf *a, const pl_buf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

static size_t first_diff(const pl_buf *a, const pl_buf *b)
{
    size_t i = 0;
    while (i < a->len && i < b->len && a->data[i] == b->data[i])
        i++;
    return i;
}

static int compared; /* batches checked, for the summary line */

/* Encodes with the table walkers and the references; both forms must match,
 * and the walker's output must decode to a batch that encodes the same. */
static void check_batch(const pl_batch *b, const char *what)
{
    bool prof = b->signal == PL_SIGNAL_PROFILES;
    pl_buf pb, pb_ref, js, js_ref;
    pl_buf_init(&pb);
    pl_buf_init(&pb_ref);
    pl_buf_init(&js);
    pl_buf_init(&js_ref);
    if (prof) {
        CHECK(pl_otlp_encode_profiles(&b->data.profiles, &pb));
        CHECK(ref_pb_encode_profiles(&b->data.profiles, &pb_ref));
        CHECK(pl_otlp_json_encode_profiles(&b->data.profiles, &js));
        CHECK(ref_json_encode_profiles(&b->data.profiles, &js_ref));
    } else {
        CHECK(pl_otlp_encode_traces(&b->data.traces, &pb));
        CHECK(ref_pb_encode_traces(&b->data.traces, &pb_ref));
        CHECK(pl_otlp_json_encode_traces(&b->data.traces, &js));
        CHECK(ref_json_encode_traces(&b->data.traces, &js_ref));
    }
    if (!same(&pb, &pb_ref))
        PL_FAIL_("%s: protobuf differs at byte %zu (%zu vs %zu bytes)", what,
                 first_diff(&pb, &pb_ref), pb.len, pb_ref.len);
    if (!same(&js, &js_ref)) {
        size_t at = first_diff(&js, &js_ref), from = at > 60 ? at - 60 : 0;
        PL_FAIL_("%s: JSON differs at byte %zu:\n  new ...%.*s\n  ref ...%.*s", what, at,
                 (int)(js.len - from < 120 ? js.len - from : 120), (const char *)js.data + from,
                 (int)(js_ref.len - from < 120 ? js_ref.len - from : 120),
                 (const char *)js_ref.data + from);
    }
    /* Round trip through the protobuf decoder (random profiles usually
     * have indices out of range, which the decoder refuses). */
    pl_batch *back = pl_batch_new(b->signal);
    pl_err err = {{0}};
    if (prof && pl_otlp_validate_profiles(&b->data.profiles, &err) != PL_OK) {
        /* nothing to decode back */
    } else if (pl_otlp_decode_ex(back, pb.data, pb.len, PL_OTLP_DECODE_BUDGET, &err) == PL_OK) {
        pl_buf again;
        pl_buf_init(&again);
        if (prof)
            pl_otlp_encode_profiles(&back->data.profiles, &again);
        else
            pl_otlp_encode_traces(&back->data.traces, &again);
        if (!same(&again, &pb))
            PL_FAIL_("%s: protobuf re-encoding differs at byte %zu", what, first_diff(&again, &pb));
        pl_buf_free(&again);
    } else {
        PL_FAIL_("%s: own protobuf does not decode: %s", what, err.msg);
    }
    pl_batch_free(back);
    pl_buf_free(&pb);
    pl_buf_free(&pb_ref);
    pl_buf_free(&js);
    pl_buf_free(&js_ref);
    compared++;
}

static void test_random_traces(void)
{
    char what[32];
    for (int i = 0; i < 400; i++) {
        pl_batch *b = random_traces();
        snprintf(what, sizeof what, "traces #%d", i);
        check_batch(b, what);
        pl_batch_free(b);
    }
}

static void test_random_profiles(void)
{
    char what[32];
    for (int i = 0; i < 400; i++) {
        pl_batch *b = random_profiles();
        snprintf(what, sizeof what, "profiles #%d", i);
        check_batch(b, what);
        pl_batch_free(b);
    }
}

/* The rows with encoder flags, one at a time. */
static void test_edges(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = 1;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    t->resources[0].n_scopes = 1;
    t->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    pl_scope_spans *ss = &t->resources[0].scopes[0];
    ss->n_spans = 4;
    ss->spans = pl_batch_alloc(b, 4 * sizeof(pl_span));
    ss->spans[1].status.code = 2;   /* no has_status: still written */
    ss->spans[2].has_status = true; /* empty but present: written */
    ss->spans[3].attrs.n = 1;       /* empty key, empty value: both written */
    ss->spans[3].attrs.items = pl_batch_alloc(b, sizeof(pl_kv));
    pl_buf js;
    pl_buf_init(&js);
    REQUIRE(pl_otlp_json_encode_traces(t, &js));
    pl_buf_append_byte(&js, 0);
    CHECK(strstr((const char *)js.data, "\"spans\":[{},{\"status\":{\"code\":2}},{\"status\":{}},"
                                        "{\"attributes\":[{\"key\":\"\",\"value\":{}}]}]") != NULL);
    check_batch(b, "edges");
    pl_buf_free(&js);
    pl_batch_free(b);
}

/* Every file of the fuzz seed corpora that decodes (as either signal, from
 * protobuf or JSON) is compared too. */
static void test_corpus(int ndirs, char **dirs)
{
    int files = 0;
    for (int k = 0; k < ndirs; k++) {
        DIR *dir = opendir(dirs[k]);
        if (!dir) {
            PL_FAIL_("cannot open %s", dirs[k]);
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.')
                continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dirs[k], e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            pl_buf in;
            pl_buf_init(&in);
            char chunk[4096];
            size_t n;
            while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
                pl_buf_append(&in, chunk, n);
            fclose(f);
            files++;
            for (int sig = 0; sig < 2; sig++) {
                for (int json = 0; json < 2; json++) {
                    /* fuzz_otlp_json reads its first byte as the signal. */
                    const uint8_t *p = in.data;
                    size_t len = in.len;
                    if (json && len) {
                        p++;
                        len--;
                    }
                    pl_batch *b = pl_batch_new(sig ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES);
                    pl_err err = {{0}};
                    pl_status st =
                        json ? pl_otlp_json_decode_ex(b, p, len, PL_OTLP_DECODE_BUDGET, &err)
                             : pl_otlp_decode_ex(b, p, len, PL_OTLP_DECODE_BUDGET, &err);
                    if (st == PL_OK)
                        check_batch(b, path);
                    pl_batch_free(b);
                }
            }
            pl_buf_free(&in);
        }
        closedir(dir);
    }
    CHECK(files >= 6);
}

static int g_ndirs;
static char **g_dirs;

static void test_fuzz_corpora(void)
{
    test_corpus(g_ndirs, g_dirs);
}

int main(int argc, char **argv)
{
    g_ndirs = argc - 1;
    g_dirs = argv + 1;
    PL_RUN(test_edges);
    PL_RUN(test_random_traces);
    PL_RUN(test_random_profiles);
    if (g_ndirs)
        PL_RUN(test_fuzz_corpora);
    printf("# %d batches compared\n", compared);
    return pl_test_done();
}
