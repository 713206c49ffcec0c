/*
 * store_fixtures.h: what the store's tests share: a fresh directory per
 * test, hand-built trace and profile batches (core/model.h), and lookups in
 * query results. Static functions: include it in one test file each.
 */
#ifndef PL_TEST_STORE_FIXTURES_H
#define PL_TEST_STORE_FIXTURES_H

#pragma GCC diagnostic ignored "-Wunused-function"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "core/component.h"
#include "core/model.h"
#include "core/stats.h"
#include "store/sqlite_api.h"
#include "store/sqlite_store.h"
#include "testlib.h"

#define S(x)  ((uint64_t)(x)*1000000000ull)
#define MS(x) ((uint64_t)(x)*1000000ull)
#define BASE  S(1700000000)

static char tmp_root[256];
static int dir_counter;

/* Makes tmp_root, a fresh directory under $TMPDIR (or /tmp) named after
 * `prefix`; false (said on stderr) when it cannot. */
static bool tmp_root_make(const char *prefix)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_root, sizeof(tmp_root), "%s/%s-XXXXXX", tmp ? tmp : "/tmp", prefix);
    if (mkdtemp(tmp_root))
        return true;
    perror("mkdtemp");
    return false;
}

/* The end of a test run: tmp_root removed when every test passed (kept to
 * look at otherwise); the run's exit status. */
static int tmp_root_done(void)
{
    int rc = pl_test_done();
    if (rc == 0) {
        char cmd[400];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_root);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmp_root);
    }
    return rc;
}

static void fresh_path(char *out, size_t cap, const char *name)
{
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/t%d", tmp_root, ++dir_counter);
    mkdir(dir, 0755);
    snprintf(out, cap, "%s/%s", dir, name);
}

/* Makes the closed store at `path` look as an older proflink wrote it: `sql`
 * drops or adds what that version lacked or had (and sets its user_version). */
static void as_older_schema(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
}

static pl_store *open_rw(const char *path)
{
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_options opt = {.busy_timeout_ms = 2000};
    if (pl_store_open(path, &opt, &s, NULL, &err) != PL_OK)
        fprintf(stderr, "  open: %s\n", err.msg);
    return s;
}

static pl_store *open_ro(const char *path)
{
    pl_err err = {{0}};
    pl_store *s = NULL;
    pl_store_options opt = {.read_only = true, .busy_timeout_ms = 2000};
    if (pl_store_open(path, &opt, &s, NULL, &err) != PL_OK)
        fprintf(stderr, "  open ro: %s\n", err.msg);
    return s;
}

/* ---- fixtures: traces ---------------------------------------------------- */

static void make_trace_id(uint32_t n, uint8_t out[16])
{
    memset(out, 0, 16);
    out[0] = 0xab;
    out[12] = (uint8_t)(n >> 24);
    out[13] = (uint8_t)(n >> 16);
    out[14] = (uint8_t)(n >> 8);
    out[15] = (uint8_t)n;
}

static void make_span_id(uint32_t trace, uint32_t n, uint8_t out[8])
{
    out[0] = 0xcd;
    out[1] = (uint8_t)(trace >> 16);
    out[2] = (uint8_t)(trace >> 8);
    out[3] = (uint8_t)trace;
    out[4] = 0;
    out[5] = (uint8_t)(n >> 16);
    out[6] = (uint8_t)(n >> 8);
    out[7] = (uint8_t)(n + 1);
}

typedef struct span_spec {
    uint32_t trace;
    int id;     /* span number inside the trace */
    int parent; /* -1: root */
    const char *name;
    uint64_t start, end;
    int status;
} span_spec;

static pl_batch *traces_batch(const char *service, const span_spec *specs, size_t n)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    t->n_resources = 1;
    pl_resource_spans *rs = &t->resources[0];
    rs->has_resource = true;
    pl_attrs_put(&b->arena, &rs->resource.attrs, pl_batch_bytes(b, "service.name", 12),
                 pl_value_string(pl_batch_bytes(b, service, strlen(service))));
    pl_attrs_put(&b->arena, &rs->resource.attrs, pl_batch_bytes(b, "host.name", 9),
                 pl_value_string(pl_batch_bytes(b, "web-1", 5)));
    rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    rs->n_scopes = 1;
    pl_scope_spans *ss = &rs->scopes[0];
    ss->spans = pl_batch_alloc(b, n * sizeof(pl_span));
    ss->n_spans = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        pl_span *sp = &ss->spans[i];
        make_trace_id(specs[i].trace, sp->trace_id);
        sp->trace_id_len = 16;
        make_span_id(specs[i].trace, (uint32_t)specs[i].id, sp->span_id);
        sp->span_id_len = 8;
        if (specs[i].parent >= 0) {
            make_span_id(specs[i].trace, (uint32_t)specs[i].parent, sp->parent_span_id);
            sp->parent_span_id_len = 8;
        }
        sp->name = pl_batch_bytes(b, specs[i].name, strlen(specs[i].name));
        sp->kind = specs[i].parent < 0 ? 2 : 1;
        sp->start_time_unix_nano = specs[i].start;
        sp->end_time_unix_nano = specs[i].end;
        sp->status.code = specs[i].status;
        if (specs[i].status == 2) {
            sp->status.message = pl_batch_bytes(b, "boom", 4);
            sp->events = pl_batch_alloc(b, sizeof(pl_span_event));
            sp->n_events = 1;
            sp->events[0].name = pl_batch_bytes(b, "exception", 9);
            sp->events[0].time_unix_nano = specs[i].end;
            pl_attrs_put(&b->arena, &sp->events[0].attrs, pl_batch_bytes(b, "exception.type", 14),
                         pl_value_string(pl_batch_bytes(b, "TemplateError", 13)));
        }
        pl_attrs_put(&b->arena, &sp->attrs, pl_batch_bytes(b, "http.route", 10),
                     pl_value_string(pl_batch_bytes(b, "/users/{id}", 11)));
    }
    return b;
}

/* ---- fixtures: profiles -------------------------------------------------- */

typedef struct prof_builder {
    pl_batch *b;
    pl_profile *p;
    pl_dictionary *d;
    uint32_t cap_samples;
} prof_builder;

static int32_t str_idx(prof_builder *pb, const char *s)
{
    return pl_dict_intern_string(&pb->b->arena, pb->d, pl_batch_bytes(pb->b, s, strlen(s)));
}

/* One resource, one scope, one profile of type:unit (+ optional period). */
static void prof_begin(prof_builder *pb, const char *service, const char *type, const char *unit,
                       const char *period_type, const char *period_unit, int64_t period,
                       uint64_t time)
{
    memset(pb, 0, sizeof(*pb));
    pb->b = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_profiles *ps = &pb->b->data.profiles;
    ps->has_dictionary = true;
    pb->d = &ps->dict;
    pl_dict_ensure_zero_entries(&pb->b->arena, pb->d);
    /* fixed-capacity tables, enough for the tests */
    pb->d->functions = pl_arena_grow(&pb->b->arena, pb->d->functions, 1, 64, sizeof(pl_function));
    pb->d->cap_functions = 64;
    pb->d->locations = pl_arena_grow(&pb->b->arena, pb->d->locations, 1, 64, sizeof(pl_location));
    pb->d->cap_locations = 64;
    pb->d->stacks = pl_arena_grow(&pb->b->arena, pb->d->stacks, 1, 64, sizeof(pl_stack));
    pb->d->cap_stacks = 64;
    ps->resources = pl_batch_alloc(pb->b, sizeof(pl_resource_profiles));
    ps->n_resources = 1;
    pl_resource_profiles *rp = &ps->resources[0];
    rp->has_resource = true;
    if (service)
        pl_attrs_put(&pb->b->arena, &rp->resource.attrs, pl_batch_bytes(pb->b, "service.name", 12),
                     pl_value_string(pl_batch_bytes(pb->b, service, strlen(service))));
    rp->scopes = pl_batch_alloc(pb->b, sizeof(pl_scope_profiles));
    rp->n_scopes = 1;
    rp->scopes[0].profiles = pl_batch_alloc(pb->b, sizeof(pl_profile));
    rp->scopes[0].n_profiles = 1;
    pb->p = &rp->scopes[0].profiles[0];
    pb->p->has_sample_type = true;
    pb->p->sample_type.type_strindex = str_idx(pb, type);
    pb->p->sample_type.unit_strindex = str_idx(pb, unit);
    if (period_type) {
        pb->p->has_period_type = true;
        pb->p->period_type.type_strindex = str_idx(pb, period_type);
        pb->p->period_type.unit_strindex = str_idx(pb, period_unit);
        pb->p->period = period;
    }
    pb->p->time_unix_nano = time;
    pb->p->duration_nano = S(10);
    pb->cap_samples = 256;
    pb->p->samples = pl_batch_alloc(pb->b, pb->cap_samples * sizeof(pl_sample));
}

static int32_t location_for(prof_builder *pb, const char *fn)
{
    int32_t name = str_idx(pb, fn);
    for (uint32_t i = 1; i < pb->d->n_functions; i++)
        if (pb->d->functions[i].name_strindex == name)
            return (int32_t)i; /* location i has function i */
    uint32_t i = pb->d->n_functions++;
    pb->d->functions[i] = (pl_function){name, 0, str_idx(pb, "app.go"), 1};
    pl_location *loc = &pb->d->locations[pb->d->n_locations++];
    memset(loc, 0, sizeof(*loc));
    loc->lines = pl_batch_alloc(pb->b, sizeof(pl_line));
    loc->lines[0].function_index = (int32_t)i;
    loc->n_lines = 1;
    return (int32_t)i;
}

/* frames: "main;handler;parse" (root first, like folded output). */
static int32_t stack_for(prof_builder *pb, const char *folded)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", folded);
    int32_t locs[16];
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok && n < 16;
         tok = strtok_r(NULL, ";", &save))
        locs[n++] = location_for(pb, tok);
    pl_stack *st = &pb->d->stacks[pb->d->n_stacks];
    st->location_indices = pl_batch_alloc(pb->b, (size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        st->location_indices[i] = locs[n - 1 - i]; /* leaf first */
    st->n_location_indices = (uint32_t)n;
    return (int32_t)pb->d->n_stacks++;
}

typedef struct sample_spec {
    const char *stack;
    int64_t value;
    uint64_t ts;         /* 0: profile time */
    uint32_t trace;      /* with span >= 0 */
    int span;            /* -1: no span */
    bool by_attribute;   /* span_id/trace_id attributes instead of a Link */
    const char *service; /* sample attribute service.name, or NULL */
} sample_spec;

static void prof_sample(prof_builder *pb, const sample_spec *s)
{
    pl_sample *smp = &pb->p->samples[pb->p->n_samples++];
    memset(smp, 0, sizeof(*smp));
    smp->stack_index = stack_for(pb, s->stack);
    smp->values = pl_batch_alloc(pb->b, sizeof(int64_t));
    smp->values[0] = s->value;
    smp->n_values = 1;
    if (s->ts) {
        smp->timestamps_unix_nano = pl_batch_alloc(pb->b, sizeof(uint64_t));
        smp->timestamps_unix_nano[0] = s->ts;
        smp->n_timestamps = 1;
    }
    int32_t attrs[4];
    uint32_t na = 0;
    if (s->span >= 0) {
        pl_link l = {0};
        make_trace_id(s->trace, l.trace_id);
        make_span_id(s->trace, (uint32_t)s->span, l.span_id);
        l.trace_id_len = 16;
        l.span_id_len = 8;
        if (!s->by_attribute) {
            smp->link_index = pl_dict_intern_link(&pb->b->arena, pb->d, &l);
        } else {
            char hex[33];
            pl_hex_encode(l.span_id, 8, hex);
            attrs[na++] =
                pl_dict_intern_attribute(&pb->b->arena, pb->d, str_idx(pb, "span_id"),
                                         pl_value_string(pl_batch_bytes(pb->b, hex, 16)), 0);
            pl_hex_encode(l.trace_id, 16, hex);
            attrs[na++] =
                pl_dict_intern_attribute(&pb->b->arena, pb->d, str_idx(pb, "trace_id"),
                                         pl_value_string(pl_batch_bytes(pb->b, hex, 32)), 0);
        }
    }
    if (s->service)
        attrs[na++] = pl_dict_intern_attribute(
            &pb->b->arena, pb->d, str_idx(pb, "service.name"),
            pl_value_string(pl_batch_bytes(pb->b, s->service, strlen(s->service))), 0);
    if (na) {
        smp->attribute_indices = pl_batch_alloc(pb->b, na * sizeof(int32_t));
        memcpy(smp->attribute_indices, attrs, na * sizeof(int32_t));
        smp->n_attribute_indices = na;
    }
}

static pl_status write_one(pl_store *s, pl_batch *b)
{
    pl_err err = {{0}};
    pl_status st = pl_store_write_batch(s, b, NULL, &err);
    if (st != PL_OK)
        fprintf(stderr, "  write: %s\n", err.msg);
    pl_batch_free(b);
    return st;
}

/* Trace 1 of service "shop": GET /users (0..100ms) > db.query (10..60ms)
 * > decode (20..40ms), and render (60..90ms) under the root. */
static const span_spec shop_trace[] = {
    {1, 0, -1, "GET /users", BASE, BASE + MS(100), 0},
    {1, 1, 0, "db.query", BASE + MS(10), BASE + MS(60), 0},
    {1, 2, 1, "decode", BASE + MS(20), BASE + MS(40), 0},
    {1, 3, 0, "render", BASE + MS(60), BASE + MS(90), 2},
};

/* CPU samples: db.query 30ms (two stacks), decode 20ms, render 10ms, and
 * 5ms of unlinked background work. */
static pl_batch *shop_profile(void)
{
    prof_builder pb;
    prof_begin(&pb, "shop", "cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, BASE);
    sample_spec specs[] = {
        {"main;handler;query;sql_exec", (int64_t)MS(20), BASE + MS(30), 1, 1, false, NULL},
        {"main;handler;query;sql_parse", (int64_t)MS(10), BASE + MS(35), 1, 1, false, NULL},
        {"main;handler;query;json_decode", (int64_t)MS(20), BASE + MS(25), 1, 2, false, NULL},
        {"main;handler;render;template", (int64_t)MS(10), BASE + MS(70), 1, 3, false, NULL},
        {"main;gc", (int64_t)MS(5), BASE + MS(50), 0, -1, false, NULL},
    };
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
        prof_sample(&pb, &specs[i]);
    return pb.b;
}

static const pl_span_row *find_span(const pl_trace_detail *d, const char *name)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->spans[i].name, name) == 0)
            return &d->spans[i];
    return NULL;
}

static int64_t folded_value(const pl_profile_result *r, const char *frames)
{
    for (size_t i = 0; i < r->n_stacks; i++)
        if (strcmp(r->stacks[i].frames, frames) == 0)
            return r->stacks[i].value;
    return -1;
}

static const pl_function_stat *find_fn(const pl_profile_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_functions; i++)
        if (strcmp(r->functions[i].name, name) == 0)
            return &r->functions[i];
    return NULL;
}

/* Checks everything the shop fixture should answer. */
#endif
