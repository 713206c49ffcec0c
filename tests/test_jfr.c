/*
 * test_jfr.c: the JFR reader (proto/jfr.c) against the JDK's own reading of
 * a real recording, and against hand-built async-profiler-style chunks.
 *
 *   - tests/jfr/fixture.jfr, recorded by Debian's OpenJDK from
 *     tests/jfr/Workload.java: per event type, the event count and, per leaf
 *     frame (package.Class.method:line), the events and the summed value
 *     (TLAB size, allocation size, weight, duration in ns) must equal what
 *     `jfr print --json` / `jfr summary` report (tests/jfr/fixture.expected.json,
 *     written by tests/jfr/make_expected.py); the pprofs made are decoded
 *     back with proto/pprof_decode.c, so the comparison covers the whole path;
 *   - the same recording twice in one body (two chunks): every total doubles;
 *   - contextId -> LabelsSnapshot labels -> span links; the ActiveSetting
 *     `event` (wall mode); an unknown event type skipped;
 *   - malformed input: every truncation and every single-byte change of a
 *     small chunk, and header faults: an error, never a crash; the
 *     memory and object budgets, and the bound on fields read (types of
 *     empty fields): PL_ERR_TOO_LARGE.
 *
 *   - async-profiler 3.x span context (spanId, spanName) -> span_id links
 *     and span_name labels; live objects and native memory (malloc) as the
 *     profiles Pyroscope makes of them, with their profile type ids.
 *
 * argv[1]: the tests/jfr directory. With --write-async-fixture DIR it
 * writes DIR/async_context.jfr and DIR/async_span.jfr instead (the
 * checked-in copies must match).
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>

#include "jfr_fixture.h"
#include "proto/jfr.h"
#include "proto/pprof.h"
#include "testlib.h"

static const char *dir = "tests/jfr";

static uint8_t *read_file(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *d = malloc(n > 0 ? (size_t)n : 1);
    if (d && fread(d, 1, (size_t)n, f) != (size_t)n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return d;
}

static const pl_jfr_profile *find_profile(const pl_jfr_result *r, pl_jfr_kind k)
{
    for (uint32_t i = 0; i < r->n_profiles; i++)
        if (r->profiles[i].kind == k)
            return &r->profiles[i];
    return NULL;
}

/* Per leaf "function:line": [events (or value of column 0), value of column 1]. */
static json_object *leaf_totals(const pl_batch *b)
{
    const pl_profiles *ps = &b->data.profiles;
    const pl_scope_profiles *sc = &ps->resources[0].scopes[0];
    json_object *out = json_object_new_object();
    for (uint32_t c = 0; c < sc->n_profiles; c++) {
        const pl_profile *p = &sc->profiles[c];
        for (uint32_t i = 0; i < p->n_samples; i++) {
            const pl_stack *st = &ps->dict.stacks[p->samples[i].stack_index];
            if (!st->n_location_indices)
                continue;
            const pl_location *loc = &ps->dict.locations[st->location_indices[0]];
            pl_bytes fn = pl_dict_string(
                &ps->dict, ps->dict.functions[loc->lines[0].function_index].name_strindex);
            char key[512];
            snprintf(key, sizeof(key), "%.*s:%lld", (int)fn.len, (const char *)fn.ptr,
                     (long long)loc->lines[0].line);
            json_object *e;
            if (!json_object_object_get_ex(out, key, &e)) {
                e = json_object_new_array();
                json_object_array_add(e, json_object_new_int64(0));
                json_object_array_add(e, json_object_new_int64(0));
                json_object_object_add(out, key, e);
            }
            int64_t old = json_object_get_int64(json_object_array_get_idx(e, c));
            json_object_array_put_idx(e, c, json_object_new_int64(old + p->samples[i].values[0]));
        }
    }
    return out;
}

static const struct {
    const char *name;
    pl_jfr_kind kind;
    const char *series;
    const char *types[2];
    bool sampled; /* one period per event */
} kinds[] = {
    {"cpu", PL_JFR_CPU, "process_cpu", {"cpu", NULL}, true},
    {"wall", PL_JFR_WALL, "wall", {"wall", NULL}, true},
    {"alloc_in_new_tlab",
     PL_JFR_ALLOC_IN_NEW_TLAB,
     "memory",
     {"alloc_in_new_tlab_objects", "alloc_in_new_tlab_bytes"}},
    {"alloc_outside_tlab",
     PL_JFR_ALLOC_OUTSIDE_TLAB,
     "memory",
     {"alloc_outside_tlab_objects", "alloc_outside_tlab_bytes"}},
    {"alloc_sample", PL_JFR_ALLOC_SAMPLE, "memory", {"alloc_sample_objects", "alloc_sample_bytes"}},
    {"lock", PL_JFR_LOCK, "mutex", {"contentions", "delay"}},
    {"park", PL_JFR_PARK, "block", {"contentions", "delay"}},
    /* the JDK's old object samples: live objects, one per event */
    {"live", PL_JFR_LIVE, "memory", {"live", NULL}},
};

#define PERIOD 10000000 /* sampleRate 100 */

/* Compares one decoding of `data` (`copies` times the fixture) with the
 * expected JSON. */
static void check_against_jdk(const uint8_t *data, size_t len, int copies)
{
    size_t elen;
    char *etext = (char *)read_file("fixture.expected.json", &elen);
    REQUIRE(etext);
    etext = realloc(etext, elen + 1);
    etext[elen] = '\0';
    json_object *expected = json_tokener_parse(etext);
    free(etext);
    REQUIRE(expected);
    json_object *ekinds = json_object_object_get(expected, "kinds");
    CHECK_EQ_INT(json_object_get_int(json_object_object_get(expected, "chunks")) * copies,
                 (int)copies);

    pl_jfr_result r;
    pl_err err = {{0}};
    pl_jfr_options o = {.sample_rate = 100};
    REQUIRE(pl_jfr_to_pprof(data, len, &o, &r, &err) == PL_OK);
    CHECK_EQ_UINT(r.chunks, (unsigned)copies);
    CHECK_EQ_STR(r.event_setting, "");
    CHECK_EQ_UINT(r.skipped_no_stack, 0);
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        json_object *ek = json_object_object_get(ekinds, kinds[k].name);
        REQUIRE(ek);
        int64_t events = json_object_get_int64(json_object_object_get(ek, "events")) * copies;
        CHECK(events > 0); /* the workload makes every kind */
        CHECK_EQ_INT((int64_t)r.events_by_kind[kinds[k].kind], events);
        const pl_jfr_profile *p = find_profile(&r, kinds[k].kind);
        REQUIRE(p);
        CHECK_EQ_STR(p->name, kinds[k].series);
        CHECK_EQ_INT((int64_t)p->events, events);
        pl_pprof_meta meta = {.profile_name = pl_bytes_from_cstr(p->name)};
        pl_batch *b = pl_pprof_decode(p->pprof.data, p->pprof.len, &meta, &err);
        if (!b)
            fprintf(stderr, "  %s: %s\n", kinds[k].name, err.msg);
        REQUIRE(b);
        const pl_profiles *ps = &b->data.profiles;
        const pl_scope_profiles *sc = &ps->resources[0].scopes[0];
        CHECK_EQ_UINT(sc->n_profiles, kinds[k].types[1] ? 2u : 1u);
        for (uint32_t c = 0; c < sc->n_profiles; c++) {
            CHECK_BYTES_STR(pl_dict_string(&ps->dict, sc->profiles[c].sample_type.type_strindex),
                            kinds[k].types[c]);
            bool special = false;
            CHECK_BYTES_STR(pl_pprof_profile_name(&ps->dict, &sc->profiles[c], &special),
                            kinds[k].series);
        }
        /* per leaf frame: events (CPU/wall: x period) and summed values */
        json_object *got = leaf_totals(b), *want = json_object_object_get(ek, "leaves");
        bool sampled = kinds[k].sampled;
        json_object_object_foreach(want, key, val)
        {
            json_object *g;
            int64_t e0 = json_object_get_int64(json_object_array_get_idx(val, 0)) * copies;
            int64_t e1 = json_object_get_int64(json_object_array_get_idx(val, 1)) * copies;
            if (!json_object_object_get_ex(got, key, &g)) {
                fprintf(stderr, "  %s: leaf %s missing\n", kinds[k].name, key);
                CHECK(false);
                continue;
            }
            CHECK_EQ_INT(json_object_get_int64(json_object_array_get_idx(g, 0)),
                         sampled ? e0 * PERIOD : e0);
            if (kinds[k].types[1])
                CHECK_EQ_INT(json_object_get_int64(json_object_array_get_idx(g, 1)), e1);
        }
        CHECK_EQ_INT(json_object_object_length(got), json_object_object_length(want));
        json_object_put(got);
        pl_batch_free(b);
    }
    pl_jfr_result_free(&r);
    json_object_put(expected);
}

static void test_jdk_recording_matches_jfr_print(void)
{
    size_t len;
    uint8_t *data = read_file("fixture.jfr", &len);
    REQUIRE(data);
    check_against_jdk(data, len, 1);
    free(data);
}

static void test_several_chunks_in_one_body(void)
{
    size_t len;
    uint8_t *data = read_file("fixture.jfr", &len);
    REQUIRE(data);
    uint8_t *two = malloc(2 * len);
    memcpy(two, data, len);
    memcpy(two + len, data, len);
    check_against_jdk(two, 2 * len, 2);
    free(two);
    free(data);
}

/* ---- async-profiler style: context ids and labels --------------------------- */

static void pb_var(pl_buf *b, uint64_t v)
{
    jw_var(b, v); /* protobuf varints are the same for values below 2^56 */
}

static void pb_msg(pl_buf *b, uint32_t field, const pl_buf *m)
{
    pb_var(b, (uint64_t)field << 3 | 2);
    pb_var(b, m->len);
    pl_buf_append(b, m->data, m->len);
}

/* A LabelsSnapshot (proto/jfr/labels.proto): contexts ctx[i] = {context
 * id, key, value, key, value} (string indices; a 0 key ends the pairs) and
 * the string table strings[1..n_strings - 1]. */
static void labels_snapshot(pl_buf *out, const int64_t (*ctx)[5], int n_ctx,
                            const char *const *strings, int n_strings)
{
    pl_buf entry, c, pair;
    pl_buf_init(&entry);
    pl_buf_init(&c);
    pl_buf_init(&pair);
    for (int i = 0; i < n_ctx; i++) {
        for (int j = 0; j < 2 && ctx[i][1 + 2 * j]; j++) {
            pl_buf_reset(&pair);
            pb_var(&pair, 1 << 3), pb_var(&pair, (uint64_t)ctx[i][1 + 2 * j]);
            pb_var(&pair, 2 << 3), pb_var(&pair, (uint64_t)ctx[i][2 + 2 * j]);
            pb_msg(&c, 1, &pair);
        }
        pb_var(&entry, 1 << 3), pb_var(&entry, (uint64_t)ctx[i][0]);
        pb_msg(&entry, 2, &c);
        pb_msg(out, 1, &entry);
        pl_buf_reset(&entry);
        pl_buf_reset(&c);
    }
    for (int s = 1; s < n_strings; s++) {
        pb_var(&entry, 1 << 3), pb_var(&entry, (uint64_t)s);
        pb_var(&entry, 2 << 3 | 2), pb_var(&entry, strlen(strings[s]));
        pl_buf_append_str(&entry, strings[s]);
        pb_msg(out, 2, &entry);
        pl_buf_reset(&entry);
    }
    pl_buf_free(&entry);
    pl_buf_free(&c);
    pl_buf_free(&pair);
}

/* LabelsSnapshot: context 1 {span_id: A}, context 2 {span_id: B, span_name: GET /x}. */
static void build_labels(pl_buf *out)
{
    static const char *const strings[] = {
        NULL, "span_id", "00f067aa0ba902b7", "b7ad6b7169203331", "span_name", "GET /x"};
    static const int64_t ctx[][5] = {{1, 1, 2, 0, 0}, {2, 1, 3, 4, 5}};
    labels_snapshot(out, ctx, 2, strings, 6);
}

/* Total of column 0 per span link ("" = none) in the first profile. */
static int64_t total_for_span(const pl_batch *b, const char *span)
{
    const pl_profiles *ps = &b->data.profiles;
    const pl_profile *p = &ps->resources[0].scopes[0].profiles[0];
    int64_t sum = 0;
    for (uint32_t i = 0; i < p->n_samples; i++) {
        char hex[17] = "";
        if (p->samples[i].link_index > 0)
            pl_hex_encode(ps->dict.links[p->samples[i].link_index].span_id, 8, hex);
        if (strcmp(hex, span) == 0)
            sum += p->samples[i].values[0];
    }
    return sum;
}

static void test_context_labels_link_spans(void)
{
    pl_buf jfr, lb;
    pl_buf_init(&jfr);
    pl_buf_init(&lb);
    build_async_jfr(&jfr, "itimer");
    build_labels(&lb);
    pl_err err = {{0}};
    pl_jfr_labels *labels = pl_jfr_labels_decode(lb.data, lb.len, &err);
    REQUIRE(labels);
    CHECK_EQ_UINT(pl_jfr_labels_contexts(labels), 2);
    pl_jfr_result r;
    pl_jfr_options o = {
        .sample_rate = 100, .labels = labels, .time_unix_nano = 5, .duration_nano = 7};
    REQUIRE(pl_jfr_to_pprof(jfr.data, jfr.len, &o, &r, &err) == PL_OK);
    CHECK_EQ_STR(r.event_setting, "itimer");
    CHECK_EQ_UINT(r.events, 9); /* setting, 6 samples, 1 allocation, 1 unknown */
    CHECK_EQ_UINT(r.events_by_kind[PL_JFR_CPU], 6);
    CHECK_EQ_UINT(r.events_by_kind[PL_JFR_WALL], 0);
    CHECK_EQ_UINT(r.n_profiles, 2);
    const pl_jfr_profile *cpu = find_profile(&r, PL_JFR_CPU);
    REQUIRE(cpu);
    CHECK_EQ_UINT(cpu->samples, 3); /* (A, 1), (B, 2), (A, 0) */
    pl_batch *b = pl_pprof_decode(cpu->pprof.data, cpu->pprof.len, NULL, &err);
    REQUIRE(b);
    CHECK_EQ_INT(total_for_span(b, "00f067aa0ba902b7"), 3 * PERIOD);
    CHECK_EQ_INT(total_for_span(b, "b7ad6b7169203331"), 2 * PERIOD);
    CHECK_EQ_INT(total_for_span(b, ""), 1 * PERIOD);
    const pl_profile *p = &b->data.profiles.resources[0].scopes[0].profiles[0];
    CHECK_EQ_UINT(p->time_unix_nano, 5);
    CHECK_EQ_UINT(p->duration_nano, 7);
    /* span_name stays a sample attribute; frames are package.Class.method with lines */
    const pl_dictionary *d = &b->data.profiles.dict;
    bool span_name = false, work = false;
    for (uint32_t i = 1; i < d->n_attributes; i++)
        span_name |=
            pl_bytes_eq_cstr(pl_dict_string(d, d->attributes[i].key_strindex), "span_name") &&
            pl_bytes_eq_cstr(d->attributes[i].value.u.str, "GET /x");
    for (uint32_t i = 1; i < d->n_locations; i++) {
        pl_bytes fn =
            pl_dict_string(d, d->functions[d->locations[i].lines[0].function_index].name_strindex);
        work |= pl_bytes_eq_cstr(fn, "proflink.fixture.Workload.work") &&
                d->locations[i].lines[0].line == 10;
    }
    CHECK(span_name);
    CHECK(work);
    pl_batch_free(b);
    const pl_jfr_profile *tlab = find_profile(&r, PL_JFR_ALLOC_IN_NEW_TLAB);
    REQUIRE(tlab);
    b = pl_pprof_decode(tlab->pprof.data, tlab->pprof.len, NULL, &err);
    REQUIRE(b);
    CHECK_EQ_INT(total_for_span(b, "00f067aa0ba902b7"), 1);
    CHECK_EQ_INT(b->data.profiles.resources[0].scopes[0].profiles[1].samples[0].values[0], 4096);
    pl_batch_free(b);
    pl_jfr_result_free(&r);

    /* without labels: the same totals, no links */
    o.labels = NULL;
    REQUIRE(pl_jfr_to_pprof(jfr.data, jfr.len, &o, &r, &err) == PL_OK);
    b = pl_pprof_decode(r.profiles[0].pprof.data, r.profiles[0].pprof.len, NULL, &err);
    REQUIRE(b);
    CHECK_EQ_INT(total_for_span(b, ""), 6 * PERIOD);
    pl_batch_free(b);
    pl_jfr_result_free(&r);
    pl_jfr_labels_free(labels);

    /* a corrupt labels part */
    CHECK(pl_jfr_labels_decode(lb.data, lb.len - 1, &err) == NULL);
    CHECK(strstr(err.msg, "labels") != NULL);
    pl_buf_free(&jfr);
    pl_buf_free(&lb);
}

static void test_wall_mode(void)
{
    pl_buf jfr;
    pl_buf_init(&jfr);
    build_async_jfr(&jfr, "wall");
    pl_jfr_result r;
    pl_err err = {{0}};
    pl_jfr_options o = {.sample_rate = 50};
    REQUIRE(pl_jfr_to_pprof(jfr.data, jfr.len, &o, &r, &err) == PL_OK);
    CHECK_EQ_STR(r.event_setting, "wall");
    CHECK_EQ_UINT(r.events_by_kind[PL_JFR_WALL], 6);
    const pl_jfr_profile *wall = find_profile(&r, PL_JFR_WALL);
    REQUIRE(wall);
    CHECK_EQ_STR(wall->name, "wall");
    pl_batch *b = pl_pprof_decode(wall->pprof.data, wall->pprof.len, NULL, &err);
    REQUIRE(b);
    CHECK_EQ_INT(total_for_span(b, ""), 6 * 20000000);
    pl_batch_free(b);
    pl_jfr_result_free(&r);
    pl_buf_free(&jfr);
}

/* ---- async-profiler 3.x: span context, live objects, native memory ------- */

/* LabelsSnapshot for build_async_span_jfr: strings 1 "GET /checkout", 2 "",
 * 3 "user", 4 "alice", 5 "span_id", 6 "00000000000000aa"; context 1
 * {user: alice}, context 2 {span_id: 00000000000000aa} (the event's own
 * span must win over it). */
static void build_span_labels(pl_buf *out)
{
    static const char *const strings[] = {NULL,      "GET /checkout",   "", "user", "alice",
                                          "span_id", "00000000000000aa"};
    static const int64_t ctx[][5] = {{1, 3, 4, 0, 0}, {2, 5, 6, 0, 0}};
    labels_snapshot(out, ctx, 2, strings, 7);
}

/* The pprof of kind k decoded as the receiver does (named by its kind). */
static pl_batch *decode_kind(const pl_jfr_result *r, pl_jfr_kind k)
{
    const pl_jfr_profile *p = find_profile(r, k);
    if (!p)
        return NULL;
    pl_err err = {{0}};
    pl_pprof_meta meta = {.profile_name = pl_bytes_from_cstr(p->name)};
    return pl_pprof_decode(p->pprof.data, p->pprof.len, &meta, &err);
}

/* Pyroscope's profile type id of column c:
 * name:sample type:unit:period type:period unit. */
static void type_id(const pl_batch *b, uint32_t c, char *out, size_t cap)
{
    const pl_profiles *ps = &b->data.profiles;
    const pl_profile *p = &ps->resources[0].scopes[0].profiles[c];
    pl_bytes parts[5] = {pl_pprof_profile_name(&ps->dict, p, NULL),
                         pl_dict_string(&ps->dict, p->sample_type.type_strindex),
                         pl_dict_string(&ps->dict, p->sample_type.unit_strindex),
                         {NULL, 0},
                         {NULL, 0}};
    if (p->has_period_type) {
        parts[3] = pl_dict_string(&ps->dict, p->period_type.type_strindex);
        parts[4] = pl_dict_string(&ps->dict, p->period_type.unit_strindex);
    }
    size_t n = 0;
    for (int i = 0; i < 5; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%.*s", i ? ":" : "", (int)parts[i].len,
                              parts[i].ptr ? (const char *)parts[i].ptr : "");
}

/* Sum of column c over the samples whose attribute `key` is `value`
 * (value NULL: samples without it). */
static int64_t total_with_attr(const pl_batch *b, uint32_t c, const char *key, const char *value)
{
    const pl_profiles *ps = &b->data.profiles;
    const pl_profile *p = &ps->resources[0].scopes[0].profiles[c];
    int64_t sum = 0;
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const pl_sample *smp = &p->samples[i];
        const pl_value *v = NULL;
        for (uint32_t a = 0; a < smp->n_attribute_indices; a++) {
            const pl_kvu *kv = &ps->dict.attributes[smp->attribute_indices[a]];
            if (pl_bytes_eq_cstr(pl_dict_string(&ps->dict, kv->key_strindex), key))
                v = &kv->value;
        }
        if (value ? v && pl_bytes_eq_cstr(v->u.str, value) : v == NULL)
            sum += smp->values[0];
    }
    return sum;
}

static void test_span_context(void)
{
    pl_buf jfr, lb;
    pl_buf_init(&jfr);
    pl_buf_init(&lb);
    build_async_span_jfr(&jfr);
    build_span_labels(&lb);
    pl_err err = {{0}};
    pl_jfr_labels *labels = pl_jfr_labels_decode(lb.data, lb.len, &err);
    REQUIRE(labels);
    pl_jfr_result r;
    pl_jfr_options o = {.sample_rate = 100, .labels = labels};
    REQUIRE(pl_jfr_to_pprof(jfr.data, jfr.len, &o, &r, &err) == PL_OK);
    CHECK_EQ_UINT(r.events_by_kind[PL_JFR_CPU], 7);
    CHECK_EQ_UINT(r.events_by_kind[PL_JFR_LIVE], 3);
    CHECK_EQ_UINT(r.events_by_kind[PL_JFR_MALLOC], 3);
    CHECK_EQ_UINT(r.events_by_kind[PL_JFR_LOCK], 2);
    CHECK_EQ_UINT(r.n_profiles, 5); /* cpu, tlab, lock, live, malloc */
    char id[160];

    /* CPU: span links, span names, context labels */
    pl_batch *b = decode_kind(&r, PL_JFR_CPU);
    REQUIRE(b);
    type_id(b, 0, id, sizeof(id));
    CHECK_EQ_STR(id, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    CHECK_EQ_INT(total_for_span(b, "00000000000000ef"), 4 * PERIOD);
    CHECK_EQ_INT(total_for_span(b, "1234abcd00ff0001"), 2 * PERIOD); /* not the context's */
    CHECK_EQ_INT(total_for_span(b, ""), 1 * PERIOD);
    CHECK_EQ_INT(total_for_span(b, "00000000000000aa"), 0);
    CHECK_EQ_INT(total_with_attr(b, 0, "span_name", "GET /checkout"), 4 * PERIOD);
    CHECK_EQ_INT(total_with_attr(b, 0, "span_name", NULL), 3 * PERIOD); /* "" is left out */
    CHECK_EQ_INT(total_with_attr(b, 0, "user", "alice"), 4 * PERIOD);
    pl_batch_free(b);

    /* allocations in a new TLAB carry the span too */
    b = decode_kind(&r, PL_JFR_ALLOC_IN_NEW_TLAB);
    REQUIRE(b);
    type_id(b, 1, id, sizeof(id));
    CHECK_EQ_STR(id, "memory:alloc_in_new_tlab_bytes:bytes:space:bytes");
    CHECK_EQ_INT(total_for_span(b, "00000000000000ef"), 1);
    CHECK_EQ_INT(total_with_attr(b, 1, "span_name", "GET /checkout"), 4096);
    pl_batch_free(b);

    /* locks: contentions and delay (ticks at 1e9/s), linked */
    b = decode_kind(&r, PL_JFR_LOCK);
    REQUIRE(b);
    type_id(b, 0, id, sizeof(id));
    CHECK_EQ_STR(id, "mutex:contentions:count:mutex:count");
    CHECK_EQ_INT(total_for_span(b, "1234abcd00ff0001"), 2);
    CHECK_EQ_INT(total_with_attr(b, 1, "span_name", NULL), 12000000);
    pl_batch_free(b);

    /* live objects: memory:live:count */
    b = decode_kind(&r, PL_JFR_LIVE);
    REQUIRE(b);
    CHECK_EQ_UINT(b->data.profiles.resources[0].scopes[0].n_profiles, 1);
    type_id(b, 0, id, sizeof(id));
    CHECK_EQ_STR(id, "memory:live:count:objects:count");
    CHECK_EQ_INT(total_with_attr(b, 0, "span_name", NULL), 3);
    pl_batch_free(b);

    /* native memory: malloc objects and bytes, no period type */
    b = decode_kind(&r, PL_JFR_MALLOC);
    REQUIRE(b);
    type_id(b, 0, id, sizeof(id));
    CHECK_EQ_STR(id, "memory:malloc_objects:count::");
    type_id(b, 1, id, sizeof(id));
    CHECK_EQ_STR(id, "memory:malloc_bytes:bytes::");
    CHECK_EQ_INT(total_with_attr(b, 0, "span_name", NULL), 3);
    CHECK_EQ_INT(total_with_attr(b, 1, "span_name", NULL), 1128);
    pl_batch_free(b);
    pl_jfr_result_free(&r);

    /* without a labels part: the span ids still link, names are unknown */
    o.labels = NULL;
    REQUIRE(pl_jfr_to_pprof(jfr.data, jfr.len, &o, &r, &err) == PL_OK);
    b = decode_kind(&r, PL_JFR_CPU);
    REQUIRE(b);
    CHECK_EQ_INT(total_for_span(b, "00000000000000ef"), 4 * PERIOD);
    CHECK_EQ_INT(total_for_span(b, "1234abcd00ff0001"), 2 * PERIOD);
    CHECK_EQ_INT(total_with_attr(b, 0, "span_name", NULL), 7 * PERIOD);
    pl_batch_free(b);
    pl_jfr_result_free(&r);
    pl_jfr_labels_free(labels);
    pl_buf_free(&jfr);
    pl_buf_free(&lb);
}

static void check_file(const char *name, const pl_buf *want)
{
    size_t len;
    uint8_t *data = read_file(name, &len);
    REQUIRE(data);
    CHECK_EQ_BYTES(data, len, want->data, want->len);
    free(data);
}

static void test_checked_in_async_fixture(void)
{
    pl_buf jfr;
    pl_buf_init(&jfr);
    build_async_jfr(&jfr, "itimer");
    check_file("async_context.jfr", &jfr);
    pl_buf_reset(&jfr);
    build_async_span_jfr(&jfr);
    check_file("async_span.jfr", &jfr);
    pl_buf_free(&jfr);
}

/* ---- malformed input and budgets --------------------------------------------- */

static pl_status decode_status(const uint8_t *data, size_t len, const pl_jfr_options *o,
                               pl_err *err)
{
    pl_jfr_result r;
    pl_status st = pl_jfr_to_pprof(data, len, o, &r, err);
    pl_jfr_result_free(&r);
    return st;
}

static void test_truncated_and_corrupt(void)
{
    pl_buf jfr;
    pl_buf_init(&jfr);
    build_async_jfr(&jfr, "itimer");
    pl_err err = {{0}};
    /* every truncation is an error naming JFR */
    for (size_t n = 0; n < jfr.len; n++) {
        pl_status st = decode_status(jfr.data, n, NULL, &err);
        if (st != PL_ERR_INVALID) {
            fprintf(stderr, "  prefix %zu: status %d\n", n, st);
            CHECK(false);
            break;
        }
        CHECK(strncmp(err.msg, "JFR", 3) == 0);
    }
    /* every byte changed to a few values: an answer, never a crash (ASan
     * and UBSan watch this in CI) */
    uint8_t *copy = malloc(jfr.len);
    static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    int ok = 0, bad = 0;
    for (size_t i = 0; i < jfr.len; i++) {
        for (size_t v = 0; v < sizeof(vals); v++) {
            memcpy(copy, jfr.data, jfr.len);
            if (copy[i] == vals[v])
                continue;
            copy[i] = vals[v];
            pl_status st = decode_status(copy, jfr.len, NULL, &err);
            CHECK(st == PL_OK || st == PL_ERR_INVALID || st == PL_ERR_TOO_LARGE);
            st == PL_OK ? ok++ : bad++;
        }
    }
    CHECK(ok > 0 && bad > 0);
    free(copy);

    /* header faults, each with its message */
    static const struct {
        size_t at;
        uint8_t value;
        const char *msg;
    } faults[] = {
        {0, 'X', "magic"}, {5, 1, "version 1"},           {15, 0xff, "size"},
        {63, 0, "ticks"},  {31, 0xff, "metadata offset"},
    };
    copy = malloc(jfr.len);
    for (size_t f = 0; f < sizeof(faults) / sizeof(faults[0]); f++) {
        memcpy(copy, jfr.data, jfr.len);
        copy[faults[f].at] = faults[f].value;
        if (faults[f].at == 63)
            memset(copy + 56, 0, 8);
        CHECK_EQ_INT(decode_status(copy, jfr.len, NULL, &err), PL_ERR_INVALID);
        if (!strstr(err.msg, faults[f].msg))
            fprintf(stderr, "  fault %zu: %s\n", f, err.msg);
        CHECK(strstr(err.msg, faults[f].msg) != NULL);
    }
    /* a chunk still being written (size 0), and trailing garbage after a chunk */
    memcpy(copy, jfr.data, jfr.len);
    memset(copy + 8, 0, 8);
    CHECK_EQ_INT(decode_status(copy, jfr.len, NULL, &err), PL_ERR_INVALID);
    CHECK(strstr(err.msg, "size 0") != NULL);
    free(copy);
    pl_buf more;
    pl_buf_init(&more);
    pl_buf_append(&more, jfr.data, jfr.len);
    pl_buf_append(&more, "garbage", 7);
    CHECK_EQ_INT(decode_status(more.data, more.len, NULL, &err), PL_ERR_INVALID);
    CHECK(strstr(err.msg, "chunk 1") != NULL);
    CHECK_EQ_INT(decode_status(NULL, 0, NULL, &err), PL_ERR_INVALID);
    pl_buf_free(&more);
    pl_buf_free(&jfr);
}

static void test_budgets(void)
{
    size_t len;
    uint8_t *data = read_file("fixture.jfr", &len);
    REQUIRE(data);
    pl_err err = {{0}};
    pl_jfr_options o = {.max_memory = 256 << 10};
    CHECK_EQ_INT(decode_status(data, len, &o, &err), PL_ERR_TOO_LARGE);
    CHECK(strstr(err.msg, "memory") != NULL);
    o = (pl_jfr_options){.max_objects = 1000};
    CHECK_EQ_INT(decode_status(data, len, &o, &err), PL_ERR_TOO_LARGE);
    CHECK(strstr(err.msg, "objects") != NULL);
    o = (pl_jfr_options){.max_memory = 64 << 20, .max_objects = 1 << 20};
    CHECK_EQ_INT(decode_status(data, len, &o, &err), PL_OK);
    free(data);
}

/* A type with thousands of fields that take no bytes: reading its events
 * would cost far more than the body's size suggests; the reader stops. */
static void test_empty_fields_bound_the_work(void)
{
    enum {
        W_ROOT,
        W_META,
        W_CLASS,
        W_FIELD,
        W_NAME,
        W_ID,
        W_CLS,
        W_LONG,
        W_EMPTY,
        W_EXEC,
        W_F,
        W_ID_LONG,
        W_ID_EMPTY,
        W_ID_EXEC,
        W_N
    };
    static const char *const ws[W_N] = {
        "root", "metadata", "class", "field",     "name",
        "id",   "class",    "long",  "jdk.Empty", "jdk.ExecutionSample",
        "f",    "200",      "201",   "202"};
    enum { FIELDS = 4000, EVENTS = 60000 };
    pl_buf b;
    pl_buf_init(&b);
    uint8_t header[68] = {'F', 'L', 'R', 0, 0, 2, 0, 0};
    pl_buf_append(&b, header, sizeof(header));
    for (int i = 0; i < EVENTS; i++) {
        size_t e = jw_begin(&b, 202);
        jw_var(&b, 1);
        jw_end(&b, e);
    }
    size_t meta_at = b.len;
    size_t e = jw_begin(&b, 0);
    jw_var(&b, 0), jw_var(&b, 0), jw_var(&b, 1);
    jw_var(&b, W_N);
    for (int i = 0; i < W_N; i++)
        jw_str(&b, ws[i]);
    jw_var(&b, W_ROOT), jw_var(&b, 0), jw_var(&b, 1);
    jw_var(&b, W_META), jw_var(&b, 0), jw_var(&b, 3);
    jw_class(&b, W_ID_LONG, W_LONG, NULL, 0);
    jw_class(&b, W_ID_EMPTY, W_EMPTY, NULL, 0);
    jw_var(&b, W_CLASS), jw_var(&b, 2), jw_var(&b, W_ID), jw_var(&b, W_ID_EXEC);
    jw_var(&b, W_NAME), jw_var(&b, W_EXEC);
    jw_var(&b, FIELDS + 1);
    jw_field(&b, W_F, W_ID_LONG, 0, 0);
    for (int i = 0; i < FIELDS; i++)
        jw_field(&b, W_F, W_ID_EMPTY, 0, 0);
    jw_end(&b, e);
    REQUIRE(pl_buf_ok(&b));
    jw_be(b.data + 8, b.len, 8);
    jw_be(b.data + 24, meta_at, 8);
    jw_be(b.data + 56, 1000000000ull, 8);
    jw_be(b.data + 64, 1, 4);
    pl_err err = {{0}};
    CHECK_EQ_INT(decode_status(b.data, b.len, NULL, &err), PL_ERR_TOO_LARGE);
    CHECK(strstr(err.msg, "fields to read") != NULL);
    pl_buf_free(&b);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-async-fixture") == 0) {
        int rc = 0;
        for (int k = 0; k < 2; k++) {
            pl_buf jfr;
            pl_buf_init(&jfr);
            if (k == 0)
                build_async_jfr(&jfr, "itimer");
            else
                build_async_span_jfr(&jfr);
            char path[1024];
            snprintf(path, sizeof(path), "%s/%s", argv[2],
                     k ? "async_span.jfr" : "async_context.jfr");
            FILE *f = fopen(path, "wb");
            rc |= f && fwrite(jfr.data, 1, jfr.len, f) == jfr.len ? 0 : 1;
            if (f)
                fclose(f);
            pl_buf_free(&jfr);
        }
        return rc;
    }
    if (argc > 1)
        dir = argv[1];
    PL_RUN(test_jdk_recording_matches_jfr_print);
    PL_RUN(test_several_chunks_in_one_body);
    PL_RUN(test_context_labels_link_spans);
    PL_RUN(test_wall_mode);
    PL_RUN(test_span_context);
    PL_RUN(test_checked_in_async_fixture);
    PL_RUN(test_truncated_and_corrupt);
    PL_RUN(test_budgets);
    PL_RUN(test_empty_fields_bound_the_work);
    return pl_test_done();
}
