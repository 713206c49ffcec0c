/*
 * test_pyroscope_shapes.c: uploads shaped like each Pyroscope SDK's, written
 * here by a small pprof writer, through the `pyroscope` receiver over real
 * HTTP and out of the `pyroscope` exporter's encoder. For each: the status,
 * the Pyroscope profile type ids (`__name__:type:unit:period type:period
 * unit`) on arrival and as sent on, the totals per type, the labels and the
 * span links.
 *
 *   - py-spy, rbspy (samples/count with a CPU period): process_cpu, stored
 *     and sent as samples:count (no conversion);
 *   - a .NET profiler upload (cpu first, then allocation and lock types with
 *     `-` in their names, every function id 0): repaired and accepted on
 *     /ingest, all under process_cpu; the same pprof refused on push;
 *   - @pyroscope/nodejs with microsecond units: every column `wall`, units
 *     kept on the way to Pyroscope;
 *   - the Go SDK's block and mutex profiles on the push API: two profile
 *     names for the same sample types, as the client's __name__ says;
 *   - a folded upload named app.cpu: service app; a leaf frame of one space;
 *   - string tables with a NUL byte or invalid UTF-8: 422 on /ingest, 400
 *     (invalid_argument) on push.
 */
#include "net/compress.h"
#include "pprof_fixture.h"
#include "proto/pprof.h"
#include "pyroscope_receiver_fixture.h"
#include "proto/pyroscope_push.h"
#include "testlib.h"

pl_status pl_pyroscope_exporter_encode(const pl_batch *batch, pl_buf *out, pl_err *err);

#define SPAN "00000000000000ef"

/* ---- a pprof of a given shape ----------------------------------------------- */

typedef struct shape {
    const char *types[4][2]; /* sample type, unit */
    int n_types;
    const char *ptype, *punit; /* NULL: no period type */
    int64_t period;
    bool zero_function_ids; /* every Function.id 0 (old .NET profilers) */
    const char *bad_string; /* appended to the string table as it is */
    size_t bad_len;
} shape;

typedef struct strtab {
    const char *s[32];
    size_t len[32];
    int n;
} strtab;

static uint64_t str_of(strtab *t, const char *s, size_t len)
{
    for (int i = 0; i < t->n; i++)
        if (t->len[i] == len && memcmp(t->s[i], s, len) == 0)
            return (uint64_t)i;
    t->s[t->n] = s;
    t->len[t->n] = len;
    return (uint64_t)t->n++;
}

static uint64_t str(strtab *t, const char *s)
{
    return str_of(t, s, strlen(s));
}

/* Two samples: [work, main] worth 10 x (column + 1) with span_id SPAN, and
 * [main] worth 1 x (column + 1). So column c totals 11 x (c + 1), 10 x
 * (c + 1) of it linked to SPAN. Location ids 1, 2; function ids 1, 2 (or 0). */
static void write_shape(const shape *sh, pl_buf *out)
{
    strtab t = {.n = 0};
    str(&t, "");
    pl_buf m, sub;
    pl_buf_init(&m);
    pl_buf_init(&sub);
    for (int c = 0; c < sh->n_types; c++) {
        w_uint(&m, 1, str(&t, sh->types[c][0]));
        w_uint(&m, 2, str(&t, sh->types[c][1]));
        w_msg(out, 1, &m);
    }
    for (int smp = 0; smp < 2; smp++) {
        uint64_t locs[2] = {1, 2};
        w_packed(&m, 1, smp == 0 ? locs : locs + 1, smp == 0 ? 2 : 1);
        uint64_t vals[4];
        for (int c = 0; c < sh->n_types; c++)
            vals[c] = (uint64_t)(smp == 0 ? 10 : 1) * (uint64_t)(c + 1);
        w_packed(&m, 2, vals, (size_t)sh->n_types);
        if (smp == 0) {
            w_uint(&sub, 1, str(&t, "span_id"));
            w_uint(&sub, 2, str(&t, SPAN));
            w_msg(&m, 3, &sub);
        }
        w_msg(out, 2, &m);
    }
    const char *fn[2] = {"work", "main"};
    for (int i = 0; i < 2; i++) { /* locations: line -> function id i + 1 */
        w_uint(&m, 1, (uint64_t)i + 1);
        w_uint(&sub, 1, (uint64_t)i + 1);
        w_uint(&sub, 2, 10 + (uint64_t)i);
        w_msg(&m, 4, &sub);
        w_msg(out, 4, &m);
    }
    for (int i = 0; i < 2; i++) {
        w_uint(&m, 1, sh->zero_function_ids ? 0 : (uint64_t)i + 1);
        w_uint(&m, 2, str(&t, fn[i]));
        w_msg(out, 5, &m);
    }
    if (sh->ptype) {
        w_uint(&m, 1, str(&t, sh->ptype));
        w_uint(&m, 2, str(&t, sh->punit));
        w_msg(out, 11, &m);
        w_uint(out, 12, (uint64_t)sh->period);
    }
    if (sh->bad_string)
        str_of(&t, sh->bad_string, sh->bad_len);
    for (int i = 0; i < t.n; i++)
        w_bytes(out, 6, t.s[i], t.len[i]);
    w_uint(out, 9, 1700000000000000000ull);
    pl_buf_free(&m);
    pl_buf_free(&sub);
}

/* ---- what arrived, what leaves ------------------------------------------------ */

#define MAX_IDS 16

typedef struct type_totals {
    char id[MAX_IDS][160]; /* profile type ids */
    int64_t total[MAX_IDS], linked[MAX_IDS];
    int n;
} type_totals;

static int64_t *slot(type_totals *tt, const char *id, int64_t **linked)
{
    for (int i = 0; i < tt->n; i++)
        if (strcmp(tt->id[i], id) == 0) {
            *linked = &tt->linked[i];
            return &tt->total[i];
        }
    if (tt->n == MAX_IDS)
        return NULL;
    snprintf(tt->id[tt->n], sizeof(tt->id[0]), "%s", id);
    *linked = &tt->linked[tt->n];
    return &tt->total[tt->n++];
}

/* Adds every profile of the batch under its type id, named `name` (NULL:
 * pl_pprof_profile_name). A sample links to SPAN by its Link or (as sent
 * to Pyroscope) by a span_id attribute. */
static void add_batch(type_totals *tt, const pl_batch *b, pl_bytes name)
{
    const pl_profiles *ps = &b->data.profiles;
    const pl_dictionary *d = &ps->dict;
    for (uint32_t r = 0; r < ps->n_resources; r++)
        for (uint32_t s = 0; s < ps->resources[r].n_scopes; s++)
            for (uint32_t i = 0; i < ps->resources[r].scopes[s].n_profiles; i++) {
                const pl_profile *p = &ps->resources[r].scopes[s].profiles[i];
                pl_bytes n = name.len ? name : pl_pprof_profile_name(d, p, NULL);
                pl_bytes parts[4] = {pl_dict_string(d, p->sample_type.type_strindex),
                                     pl_dict_string(d, p->sample_type.unit_strindex),
                                     {NULL, 0},
                                     {NULL, 0}};
                if (p->has_period_type) {
                    parts[2] = pl_dict_string(d, p->period_type.type_strindex);
                    parts[3] = pl_dict_string(d, p->period_type.unit_strindex);
                }
                char id[160];
                snprintf(id, sizeof(id), "%.*s:%.*s:%.*s:%.*s:%.*s", (int)n.len,
                         (const char *)n.ptr, (int)parts[0].len, (const char *)parts[0].ptr,
                         (int)parts[1].len, (const char *)parts[1].ptr, (int)parts[2].len,
                         parts[2].ptr ? (const char *)parts[2].ptr : "", (int)parts[3].len,
                         parts[3].ptr ? (const char *)parts[3].ptr : "");
                int64_t *linked, *total = slot(tt, id, &linked);
                if (!total)
                    continue;
                for (uint32_t k = 0; k < p->n_samples; k++) {
                    const pl_sample *smp = &p->samples[k];
                    *total += smp->values[0];
                    char hex[17] = "";
                    if (smp->link_index > 0)
                        pl_hex_encode(d->links[smp->link_index].span_id, 8, hex);
                    for (uint32_t a = 0; a < smp->n_attribute_indices; a++) {
                        const pl_kvu *kv = &d->attributes[smp->attribute_indices[a]];
                        if (pl_bytes_eq_cstr(pl_dict_string(d, kv->key_strindex), "span_id") &&
                            kv->value.u.str.len == 16)
                            memcpy(hex, kv->value.u.str.ptr, 16);
                    }
                    if (strcmp(hex, SPAN) == 0)
                        *linked += smp->values[0];
                }
            }
}

/* What the pyroscope exporter sends for the batch, decoded back: each
 * series' pprof under the series' __name__. */
static void add_exported(type_totals *tt, const pl_batch *b)
{
    pl_buf out;
    pl_buf_init(&out);
    pl_err err = {{0}};
    REQUIRE(pl_pyroscope_exporter_encode(b, &out, &err) == PL_OK);
    pl_push_request req = {0};
    REQUIRE(pl_push_decode_proto(out.data, out.len, &req, &err) == PL_OK);
    for (uint32_t i = 0; i < req.n_series; i++) {
        pl_bytes name = {NULL, 0};
        for (uint32_t l = 0; l < req.series[i].n_labels; l++)
            if (pl_bytes_eq_cstr(req.series[i].labels[l].name, "__name__"))
                name = req.series[i].labels[l].value;
        for (uint32_t j = 0; j < req.series[i].n_samples; j++) {
            pl_bytes raw = req.series[i].samples[j].raw_profile;
            pl_batch *pb = pl_pprof_decode(raw.ptr, raw.len, NULL, &err);
            REQUIRE(pb);
            add_batch(tt, pb, name);
            pl_batch_free(pb);
        }
    }
    pl_push_request_free(&req);
    pl_buf_free(&out);
}

/* Checks the type ids (in any order) and their totals and linked totals. */
static void expect_types(const type_totals *tt, const char *const *ids, const int64_t *totals,
                         const int64_t *linked, int n)
{
    CHECK_EQ_INT(tt->n, n);
    for (int i = 0; i < n; i++) {
        int found = -1;
        for (int k = 0; k < tt->n; k++)
            if (strcmp(tt->id[k], ids[i]) == 0)
                found = k;
        if (found < 0) {
            fprintf(stderr, "  type id %s missing; have:", ids[i]);
            for (int k = 0; k < tt->n; k++)
                fprintf(stderr, " %s", tt->id[k]);
            fprintf(stderr, "\n");
            CHECK(found >= 0);
            continue;
        }
        CHECK_EQ_INT(tt->total[found], totals[i]);
        CHECK_EQ_INT(tt->linked[found], linked[i]);
    }
}

/* The same for what was received (batch b) and for what the pyroscope
 * exporter makes of it. */
static void expect_types_in_and_out(const pl_batch *b, const char *const *ids,
                                    const int64_t *totals, const int64_t *linked, int n)
{
    type_totals in = {.n = 0}, out = {.n = 0};
    add_batch(&in, b, (pl_bytes){NULL, 0});
    expect_types(&in, ids, totals, linked, n);
    add_exported(&out, b);
    expect_types(&out, ids, totals, linked, n);
}

/* Posts `sh` to /ingest as a pprof (gzipped) and checks the answer. */
static pl_batch *ingest_shape(const char *query, const shape *sh, int status)
{
    pl_buf p, z;
    pl_buf_init(&p);
    pl_buf_init(&z);
    write_shape(sh, &p);
    pl_gzip(p.data, p.len, &z);
    response r = {0};
    post(query, "application/octet-stream", z.data, z.len, &r);
    CHECK_EQ_INT(r.status, status);
    if (r.status != status)
        fprintf(stderr, "  %s: %s\n", query, (const char *)r.body.data);
    pl_batch *b = status == 200 ? take_captured() : NULL;
    if (status != 200)
        CHECK(take_captured() == NULL);
    pl_buf_free(&p);
    pl_buf_free(&z);
    pl_buf_free(&r.body);
    return b;
}

/* ---- the shapes ------------------------------------------------------------- */

/* py-spy, rbspy and the Python SDK upload samples/count with a CPU period:
 * process_cpu:samples:count, kept in samples (Pyroscope converts only OTLP). */
static void test_pyspy_rbspy(void)
{
    shape sh = {{{"samples", "count"}}, 1, "cpu", "nanoseconds", 10000000, false, NULL, 0};
    const char *spies[] = {"pyspy", "rbspy"};
    for (int i = 0; i < 2; i++) {
        char q[256];
        snprintf(q, sizeof(q),
                 "/ingest?name=script-app%%7Benv%%3Dprod%%7D&format=pprof&spyName=%s"
                 "&sampleRate=100",
                 spies[i]);
        pl_batch *b = ingest_shape(q, &sh, 200);
        REQUIRE(b);
        const char *ids[] = {"process_cpu:samples:count:cpu:nanoseconds"};
        int64_t totals[] = {11}, linked[] = {10};
        expect_types_in_and_out(b, ids, totals, linked, 1);
        CHECK_BYTES_STR(resource_attr(b, 0, "pyroscope.spy_name")->u.str, spies[i]);
        CHECK_BYTES_STR(resource_attr(b, 0, "env")->u.str, "prod");
        pl_batch_free(b);
    }
}

/* An older .NET profiler: every function id 0, `-` in type names. */
static void test_dotnet(void)
{
    shape sh = {{{"cpu", "nanoseconds"},
                 {"alloc-samples", "count"},
                 {"alloc-size", "bytes"},
                 {"lock-count", "count"}},
                4,
                "cpu",
                "nanoseconds",
                10000000,
                true,
                NULL,
                0};
    pl_batch *b = ingest_shape(
        "/ingest?name=dotnet-app&format=pprof&spyName=dotnetspy&sampleRate=100", &sh, 200);
    REQUIRE(b);
    const char *ids[] = {
        "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
        "process_cpu:alloc_samples:count:cpu:nanoseconds",
        "process_cpu:alloc_size:bytes:cpu:nanoseconds",
        "process_cpu:lock_count:count:cpu:nanoseconds",
    };
    int64_t totals[] = {11, 22, 33, 44}, linked[] = {10, 20, 30, 40};
    expect_types_in_and_out(b, ids, totals, linked, 4);
    /* the repaired ids point at the right functions: the leaf is work */
    const pl_dictionary *d = &b->data.profiles.dict;
    const pl_profile *p = &b->data.profiles.resources[0].scopes[0].profiles[0];
    const pl_location *leaf =
        &d->locations[d->stacks[p->samples[0].stack_index].location_indices[0]];
    CHECK_BYTES_STR(pl_dict_string(d, d->functions[leaf->lines[0].function_index].name_strindex),
                    "work");
    pl_batch_free(b);

    /* `-` alone (valid ids) is accepted and repaired too */
    sh.zero_function_ids = false;
    b = ingest_shape("/ingest?name=dotnet-app&format=pprof&spyName=dotnetspy", &sh, 200);
    REQUIRE(b);
    CHECK_EQ_INT(column_total(b, "alloc_size"), 33);
    pl_batch_free(b);

    /* the push API does not repair (as Pyroscope's does not): 400 */
    sh.zero_function_ids = true;
    pl_buf p1;
    pl_buf_init(&p1);
    write_shape(&sh, &p1);
    pl_push_label labels[] = {{PL_BYTES_LIT("__name__"), PL_BYTES_LIT("process_cpu")},
                              {PL_BYTES_LIT("service_name"), PL_BYTES_LIT("dotnet-app")}};
    pl_push_sample smp = {{p1.data, (uint32_t)p1.len}, PL_BYTES_LIT("")};
    pl_push_series series = {labels, 2, &smp, 1};
    pl_push_request req = {&series, 1, {0}};
    pl_buf body;
    pl_buf_init(&body);
    REQUIRE(pl_push_encode_proto(&req, &body));
    response r = {0};
    post("/push.v1.PusherService/Push", "application/proto", body.data, body.len, &r);
    expect_error(&r, 400, "is zero or repeated");
    CHECK(take_captured() == NULL);
    pl_buf_free(&p1);
    pl_buf_free(&body);
    pl_buf_free(&r.body);
}

/* @pyroscope/nodejs with microsecond units: every column `wall`, units kept. */
static void test_nodejs_microseconds(void)
{
    shape sh = {{{"samples", "count"}, {"wall", "microseconds"}, {"cpu", "microseconds"}},
                3,
                "wall",
                "microseconds",
                10000,
                false,
                NULL,
                0};
    pl_batch *b = ingest_shape("/ingest?name=node-app&format=pprof&spyName=nodespy", &sh, 200);
    REQUIRE(b);
    const char *ids[] = {
        "wall:samples:count:wall:microseconds",
        "wall:wall:microseconds:wall:microseconds",
        "wall:cpu:microseconds:wall:microseconds",
    };
    int64_t totals[] = {11, 22, 33}, linked[] = {10, 20, 30};
    expect_types_in_and_out(b, ids, totals, linked, 3);
    pl_batch_free(b);
}

/* The Go SDK pushes block and mutex with the same sample types: the
 * client's __name__ keeps them apart. */
static void test_push_block_and_mutex(void)
{
    shape sh = {{{"contentions", "count"}, {"delay", "nanoseconds"}},
                2,
                "contentions",
                "count",
                1,
                false,
                NULL,
                0};
    pl_buf p1;
    pl_buf_init(&p1);
    write_shape(&sh, &p1);
    pl_push_label block[] = {{PL_BYTES_LIT("__name__"), PL_BYTES_LIT("block")},
                             {PL_BYTES_LIT("service_name"), PL_BYTES_LIT("go-app")}};
    pl_push_label mutex[] = {{PL_BYTES_LIT("__name__"), PL_BYTES_LIT("mutex")},
                             {PL_BYTES_LIT("service_name"), PL_BYTES_LIT("go-app")}};
    pl_push_sample smp = {{p1.data, (uint32_t)p1.len}, PL_BYTES_LIT("")};
    pl_push_series series[] = {{block, 2, &smp, 1}, {mutex, 2, &smp, 1}};
    pl_push_request req = {series, 2, {0}};
    pl_buf body;
    pl_buf_init(&body);
    REQUIRE(pl_push_encode_proto(&req, &body));
    response r = {0};
    post("/push.v1.PusherService/Push", "application/proto", body.data, body.len, &r);
    CHECK_EQ_INT(r.status, 200);
    pl_batch *b = take_captured();
    REQUIRE(b);
    const char *ids[] = {
        "block:contentions:count:contentions:count",
        "block:delay:nanoseconds:contentions:count",
        "mutex:contentions:count:contentions:count",
        "mutex:delay:nanoseconds:contentions:count",
    };
    int64_t totals[] = {11, 22, 11, 22}, linked[] = {10, 20, 10, 20};
    expect_types_in_and_out(b, ids, totals, linked, 4);
    CHECK(resource_attr(b, 0, "__name__") == NULL);
    pl_batch_free(b);
    pl_buf_free(&p1);
    pl_buf_free(&body);
    pl_buf_free(&r.body);
}

/* Folded text named app.cpu: service app, process_cpu; a leaf frame that is
 * one space stays a frame. */
static void test_folded_names(void)
{
    const char *text = "main;work 3\nmain;work;  2\n";
    response r = {0};
    post("/ingest?name=app.cpu&sampleRate=100", "text/plain", text, strlen(text), &r);
    CHECK_EQ_INT(r.status, 200);
    pl_batch *b = take_captured();
    REQUIRE(b);
    CHECK_BYTES_STR(resource_attr(b, 0, "service.name")->u.str, "app");
    const char *ids[] = {"process_cpu:cpu:nanoseconds:cpu:nanoseconds"};
    int64_t totals[] = {5 * 10000000}, linked[] = {0};
    expect_types_in_and_out(b, ids, totals, linked, 1);
    /* the second line's leaf is " " under work: work keeps only 3 as self */
    const pl_dictionary *d = &b->data.profiles.dict;
    const pl_profile *p = &b->data.profiles.resources[0].scopes[0].profiles[0];
    int64_t space_leaf = 0, work_leaf = 0;
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const pl_stack *st = &d->stacks[p->samples[i].stack_index];
        const pl_location *leaf = &d->locations[st->location_indices[0]];
        pl_bytes fn = pl_dict_string(d, d->functions[leaf->lines[0].function_index].name_strindex);
        if (pl_bytes_eq_cstr(fn, " ") && st->n_location_indices == 3)
            space_leaf += p->samples[i].values[0];
        if (pl_bytes_eq_cstr(fn, "work"))
            work_leaf += p->samples[i].values[0];
    }
    CHECK_EQ_INT(space_leaf, 2 * 10000000);
    CHECK_EQ_INT(work_leaf, 3 * 10000000);
    pl_batch_free(b);
    /* other suffixes, as Pyroscope's legacy adapter converts them */
    const struct {
        const char *suffix, *id;
        int64_t total;
    } legacy[] = {
        {"wall", "wall:wall:nanoseconds:cpu:nanoseconds", 5 * 10000000},
        {"goroutines", "goroutine:goroutines:count::", 5},
        {"lock_count", "block:contentions:count::", 5},
        {"inuse_space", "memory:inuse_space:bytes::", 5},
        {"live", "memory:live:count::", 5},
    };
    for (size_t i = 0; i < sizeof(legacy) / sizeof(legacy[0]); i++) {
        char q[128];
        snprintf(q, sizeof(q), "/ingest?name=app.%s&sampleRate=100", legacy[i].suffix);
        post(q, "text/plain", text, strlen(text), &r);
        CHECK_EQ_INT(r.status, 200);
        b = take_captured();
        REQUIRE(b);
        CHECK_BYTES_STR(resource_attr(b, 0, "service.name")->u.str, "app");
        const char *lid[] = {legacy[i].id};
        int64_t ltotal[] = {legacy[i].total}, llinked[] = {0};
        type_totals lin = {.n = 0}, lout = {.n = 0};
        add_batch(&lin, b, (pl_bytes){NULL, 0});
        expect_types(&lin, lid, ltotal, llinked, 1);
        add_exported(&lout, b);
        expect_types(&lout, lid, ltotal, llinked, 1);
        pl_batch_free(b);
    }
    /* frame names must be UTF-8 text (they become pprof strings) */
    post("/ingest?name=app.cpu", "text/plain", "main;\xff\xfe 1\n", 9, &r);
    expect_error(&r, 400, "line 1: not valid UTF-8");
    CHECK(take_captured() == NULL);
    pl_buf_free(&r.body);
}

/* A NUL byte or invalid UTF-8 in the string table: refused at the door. */
static void test_bad_strings(void)
{
    static const char nul[] = {'a', 0, 'b'};
    static const char bad_utf8[] = {'f', 'o', (char)0xc3, (char)0x28};
    const struct {
        const char *s;
        size_t len;
        const char *why;
    } cases[] = {{nul, sizeof(nul), "NUL"}, {bad_utf8, sizeof(bad_utf8), "UTF-8"}};
    for (int i = 0; i < 2; i++) {
        shape sh = {{{"cpu", "nanoseconds"}},
                    1,
                    "cpu",
                    "nanoseconds",
                    10000000,
                    false,
                    cases[i].s,
                    cases[i].len};
        pl_buf p1;
        pl_buf_init(&p1);
        write_shape(&sh, &p1);
        response r = {0};
        post("/ingest?name=app&format=pprof", "application/octet-stream", p1.data, p1.len, &r);
        expect_error(&r, 422, cases[i].why);
        CHECK(strstr((const char *)r.body.data, "invalid_argument") != NULL);
        CHECK(take_captured() == NULL);
        pl_push_label labels[] = {{PL_BYTES_LIT("__name__"), PL_BYTES_LIT("process_cpu")}};
        pl_push_sample smp = {{p1.data, (uint32_t)p1.len}, PL_BYTES_LIT("")};
        pl_push_series series = {labels, 1, &smp, 1};
        pl_push_request req = {&series, 1, {0}};
        pl_buf body;
        pl_buf_init(&body);
        REQUIRE(pl_push_encode_proto(&req, &body));
        post("/push.v1.PusherService/Push", "application/proto", body.data, body.len, &r);
        expect_error(&r, 400, cases[i].why);
        CHECK(take_captured() == NULL);
        pl_buf_free(&body);
        pl_buf_free(&p1);
        pl_buf_free(&r.body);
    }
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (start_receiver()) {
        fprintf(stderr, "cannot start the receiver\n");
        return 1;
    }
    PL_RUN(test_pyspy_rbspy);
    PL_RUN(test_dotnet);
    PL_RUN(test_nodejs_microseconds);
    PL_RUN(test_push_block_and_mutex);
    PL_RUN(test_folded_names);
    PL_RUN(test_bad_strings);
    stop_receiver();
    curl_global_cleanup();
    return pl_test_done();
}
