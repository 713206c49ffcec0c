/*
 * test_pprof.c: the pprof decoder (pprof -> profiles model) and encoder.
 *
 * pprof inputs are built by hand here with a tiny protobuf writer, so a test
 * can write packed and unpacked repeated fields, sparse ids and fields in
 * any order, and can break exactly one reference at a time.
 */
#include <stdarg.h>
#include <time.h>

#include "proto/pprof.h"
#include "testlib.h"

#include "pprof_fixture.h"

static pl_batch *decode_buf(const pl_buf *b, pl_err *err)
{
    return pl_pprof_decode(b->data, b->len, NULL, err);
}

/* Name of the leaf function of a sample. */
static pl_bytes frame_name(const pl_dictionary *d, const pl_sample *s, uint32_t depth)
{
    const pl_stack *st = &d->stacks[s->stack_index];
    if (depth >= st->n_location_indices)
        return (pl_bytes){NULL, 0};
    const pl_location *loc = &d->locations[st->location_indices[depth]];
    if (!loc->n_lines)
        return (pl_bytes){NULL, 0};
    return pl_dict_string(d, d->functions[loc->lines[0].function_index].name_strindex);
}

static const pl_kvu *sample_attr(const pl_dictionary *d, const pl_sample *s, const char *key)
{
    for (uint32_t i = 0; i < s->n_attribute_indices; i++) {
        const pl_kvu *a = &d->attributes[s->attribute_indices[i]];
        if (pl_bytes_eq_cstr(pl_dict_string(d, a->key_strindex), key))
            return a;
    }
    return NULL;
}

static void check_decoded(const pl_batch *batch)
{
    const pl_profiles *ps = &batch->data.profiles;
    const pl_dictionary *d = &ps->dict;
    REQUIRE(ps->n_resources == 1);
    REQUIRE(ps->resources[0].n_scopes == 1);
    const pl_scope_profiles *sc = &ps->resources[0].scopes[0];
    REQUIRE(sc->n_profiles == 2); /* one per sample type */
    const pl_profile *count = &sc->profiles[0], *cpu = &sc->profiles[1];
    CHECK_BYTES_STR(pl_dict_string(d, count->sample_type.type_strindex), "samples");
    CHECK_BYTES_STR(pl_dict_string(d, cpu->sample_type.type_strindex), "cpu");
    CHECK_BYTES_STR(pl_dict_string(d, cpu->sample_type.unit_strindex), "nanoseconds");
    CHECK_BYTES_STR(pl_dict_string(d, cpu->period_type.type_strindex), "cpu");
    CHECK_EQ_INT(cpu->period, 10000000);
    CHECK_EQ_UINT(cpu->time_unix_nano, 1700000000000000000ull);
    CHECK_EQ_UINT(cpu->duration_nano, 10000000000ull);
    REQUIRE(count->n_samples == 2 && cpu->n_samples == 2);
    CHECK_EQ_INT(count->samples[0].values[0], 3);
    CHECK_EQ_INT(cpu->samples[0].values[0], 30000000);
    CHECK_EQ_INT(count->samples[1].values[0], 2);
    CHECK_EQ_INT(cpu->samples[1].values[0], 20000000);
    CHECK_EQ_INT(cpu->samples[0].n_values, 1);

    /* stacks: leaf first */
    const pl_sample *a = &cpu->samples[0], *b = &cpu->samples[1];
    CHECK_BYTES_STR(frame_name(d, a, 0), "leaf");
    CHECK_BYTES_STR(frame_name(d, a, 1), "work");
    CHECK_BYTES_STR(frame_name(d, a, 2), "main");
    CHECK_EQ_UINT(d->stacks[a->stack_index].n_location_indices, 3);
    CHECK_BYTES_STR(frame_name(d, b, 0), "work");
    CHECK_EQ_UINT(d->stacks[b->stack_index].n_location_indices, 2);
    CHECK_EQ_INT(a->stack_index, count->samples[0].stack_index);
    const pl_location *leaf = &d->locations[d->stacks[a->stack_index].location_indices[0]];
    CHECK_EQ_UINT(leaf->address, 0x1234);
    CHECK_EQ_INT(leaf->lines[0].line, 30);
    CHECK_EQ_INT(leaf->mapping_index, 0);
    const pl_location *mainloc = &d->locations[d->stacks[a->stack_index].location_indices[2]];
    REQUIRE(mainloc->mapping_index > 0);
    const pl_mapping *map = &d->mappings[mainloc->mapping_index];
    CHECK_EQ_UINT(map->memory_start, 0x400000);
    CHECK_BYTES_STR(pl_dict_string(d, map->filename_strindex), "/bin/app");
    REQUIRE(map->n_attribute_indices == 1);
    CHECK_BYTES_STR(d->attributes[map->attribute_indices[0]].value.u.str, "abc123");

    /* links: span id from span_id (A) and profile_id (B), trace id for A only */
    REQUIRE(a->link_index > 0 && b->link_index > 0);
    const pl_link *la = &d->links[a->link_index], *lb = &d->links[b->link_index];
    char hex[33];
    CHECK_EQ_INT(la->span_id_len, 8);
    pl_hex_encode(la->span_id, 8, hex);
    CHECK_EQ_STR(hex, "00f067aa0ba902b7");
    CHECK_EQ_INT(la->trace_id_len, 16);
    pl_hex_encode(la->trace_id, 16, hex);
    CHECK_EQ_STR(hex, "4bf92f3577b34da6a3ce929d0e0e4736");
    pl_hex_encode(lb->span_id, 8, hex);
    CHECK_EQ_STR(hex, "00f067aa0ba902b7");
    CHECK_EQ_INT(lb->trace_id_len, 0);

    /* attributes: thread (string), bytes (int with unit); no link labels */
    CHECK(sample_attr(d, a, "span_id") == NULL);
    CHECK(sample_attr(d, a, "trace_id") == NULL);
    CHECK(sample_attr(d, b, "profile_id") == NULL);
    const pl_kvu *thread = sample_attr(d, a, "thread");
    REQUIRE(thread);
    CHECK_EQ_INT(thread->value.type, PL_VALUE_STRING);
    CHECK_BYTES_STR(thread->value.u.str, "t1");
    const pl_kvu *bytes = sample_attr(d, a, "bytes");
    REQUIRE(bytes);
    CHECK_EQ_INT(bytes->value.type, PL_VALUE_INT);
    CHECK_EQ_INT(bytes->value.u.i, 512);
    CHECK_BYTES_STR(pl_dict_string(d, bytes->unit_strindex), "bytes");
    CHECK_EQ_UINT(b->n_attribute_indices, 1); /* repeated key: first wins */
    CHECK_BYTES_STR(sample_attr(d, b, "thread")->value.u.str, "t1");
    /* dictionary zero entries */
    CHECK_EQ_UINT(d->strings[0].len, 0);
    CHECK_EQ_INT(d->links[0].span_id_len, 8);
}

static void test_decode_hand_built(void)
{
    pl_buf b;
    pl_buf_init(&b);
    build_profile(&b, NULL);
    pl_err err = {{0}};
    pl_batch *batch = decode_buf(&b, &err);
    if (!batch)
        fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(batch);
    CHECK_EQ_INT(batch->signal, PL_SIGNAL_PROFILES);
    CHECK_EQ_UINT(pl_batch_items(batch), 4);
    check_decoded(batch);
    pl_batch_free(batch);
    pl_buf_free(&b);
}

static void test_decode_gzipped(void)
{
    pl_buf b, z;
    pl_buf_init(&b);
    pl_buf_init(&z);
    build_profile(&b, NULL);
    REQUIRE(pl_gzip(b.data, b.len, &z) == 0);
    CHECK(pl_is_gzip(z.data, z.len));
    pl_err err = {{0}};
    pl_batch *batch = pl_pprof_decode(z.data, z.len, NULL, &err);
    REQUIRE(batch);
    check_decoded(batch);
    pl_batch_free(batch);

    /* corrupt gzip: flip a byte of the deflate stream; truncate */
    z.data[z.len / 2] ^= 0xff;
    batch = pl_pprof_decode(z.data, z.len, NULL, &err);
    CHECK(batch == NULL);
    z.data[z.len / 2] ^= 0xff;
    batch = pl_pprof_decode(z.data, z.len - 10, NULL, &err);
    CHECK(batch == NULL);
    CHECK(strstr(err.msg, "gzip") != NULL);
    pl_buf_free(&b);
    pl_buf_free(&z);
}

static void expect_invalid(const breakage *br, const char *needle)
{
    pl_buf b;
    pl_buf_init(&b);
    build_profile(&b, br);
    pl_err err = {{0}};
    pl_batch *batch = decode_buf(&b, &err);
    CHECK(batch == NULL);
    if (batch)
        pl_batch_free(batch);
    else if (!strstr(err.msg, needle)) {
        fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", err.msg, needle);
        CHECK(0);
    }
    pl_buf_free(&b);
}

static void test_invalid_references(void)
{
    expect_invalid(&(breakage){.bad_location_id = true}, "location id 999 not found");
    expect_invalid(&(breakage){.bad_function_id = true}, "function id 77 not found");
    expect_invalid(&(breakage){.bad_mapping_id = true}, "mapping id 6 not found");
    expect_invalid(&(breakage){.bad_string = true}, "string index 9999 out of range");
    expect_invalid(&(breakage){.first_string_nonempty = true}, "string_table[0]");
    expect_invalid(&(breakage){.value_count = true}, "3 values for 2 sample types");
    expect_invalid(&(breakage){.duplicate_location_id = true}, "zero or repeated");
    expect_invalid(&(breakage){.bad_label_key = true}, "label key string index 5000");
}

/* Every truncation either decodes (a field boundary) or fails cleanly. */
static void test_truncated(void)
{
    pl_buf b;
    pl_buf_init(&b);
    build_profile(&b, NULL);
    int failed = 0;
    for (size_t n = 0; n < b.len; n++) {
        pl_err err = {{0}};
        pl_batch *batch = pl_pprof_decode(b.data, n, NULL, &err);
        if (batch)
            pl_batch_free(batch);
        else {
            failed++;
            CHECK(err.msg[0] != '\0');
        }
    }
    CHECK(failed > (int)b.len / 2);
    /* Garbage: a varint that never ends; a wrong wire type. */
    uint8_t bad1[] = {0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint8_t bad2[] = {0x10, 0x01}; /* field 2 (sample) as a varint */
    pl_err err = {{0}};
    CHECK(pl_pprof_decode(bad1, sizeof(bad1), NULL, &err) == NULL);
    CHECK(pl_pprof_decode(bad2, sizeof(bad2), NULL, &err) == NULL);
    CHECK(strstr(err.msg, "wire type") != NULL);
    pl_buf_free(&b);
}

/* Per-function totals (leaf self value) of a profile's column. */
static int64_t total_for(const pl_dictionary *d, const pl_profile *p, const char *leaf)
{
    int64_t sum = 0;
    for (uint32_t i = 0; i < p->n_samples; i++)
        if (pl_bytes_eq_cstr(frame_name(d, &p->samples[i], 0), leaf))
            sum += p->samples[i].values[0];
    return sum;
}

static void test_round_trip(void)
{
    pl_buf b;
    pl_buf_init(&b);
    build_profile(&b, NULL);
    pl_err err = {{0}};
    pl_batch *batch = decode_buf(&b, &err);
    REQUIRE(batch);
    const pl_dictionary *d = &batch->data.profiles.dict;
    const pl_profile *cpu = &batch->data.profiles.resources[0].scopes[0].profiles[1];

    pl_buf enc;
    pl_buf_init(&enc);
    REQUIRE(pl_pprof_encode(d, cpu, NULL, &enc, &err) == PL_OK);
    pl_batch *again = pl_pprof_decode(enc.data, enc.len, NULL, &err);
    if (!again)
        fprintf(stderr, "  %s\n", err.msg);
    REQUIRE(again);
    const pl_dictionary *d2 = &again->data.profiles.dict;
    REQUIRE(again->data.profiles.resources[0].scopes[0].n_profiles == 1);
    const pl_profile *p2 = &again->data.profiles.resources[0].scopes[0].profiles[0];
    CHECK_BYTES_STR(pl_dict_string(d2, p2->sample_type.type_strindex), "cpu");
    CHECK_EQ_INT(p2->period, 10000000);
    CHECK_EQ_UINT(p2->time_unix_nano, 1700000000000000000ull);
    REQUIRE(p2->n_samples == 2);
    CHECK_EQ_INT(total_for(d2, p2, "leaf"), total_for(d, cpu, "leaf"));
    CHECK_EQ_INT(total_for(d2, p2, "work"), total_for(d, cpu, "work"));
    CHECK_BYTES_STR(frame_name(d2, &p2->samples[0], 2), "main");
    /* the link came back as span_id/trace_id labels and is a link again */
    REQUIRE(p2->samples[0].link_index > 0);
    CHECK(memcmp(d2->links[p2->samples[0].link_index].span_id,
                 d->links[cpu->samples[0].link_index].span_id, 8) == 0);
    CHECK_EQ_INT(d2->links[p2->samples[0].link_index].trace_id_len, 16);
    CHECK_BYTES_STR(sample_attr(d2, &p2->samples[0], "thread")->value.u.str, "t1");
    const pl_kvu *bytes = sample_attr(d2, &p2->samples[0], "bytes");
    REQUIRE(bytes);
    CHECK_EQ_INT(bytes->value.u.i, 512);
    /* the build id survived */
    const pl_location *mainloc =
        &d2->locations[d2->stacks[p2->samples[0].stack_index].location_indices[2]];
    REQUIRE(mainloc->mapping_index > 0);
    CHECK_EQ_UINT(d2->mappings[mainloc->mapping_index].n_attribute_indices, 1);

    /* Encoding again gives the same bytes (deterministic). */
    pl_buf enc2;
    pl_buf_init(&enc2);
    REQUIRE(pl_pprof_encode(d2, p2, NULL, &enc2, &err) == PL_OK);
    CHECK_EQ_BYTES(enc.data, enc.len, enc2.data, enc2.len);

    /* The CPU special case on the count column: values x period. */
    const pl_profile *count = &batch->data.profiles.resources[0].scopes[0].profiles[0];
    bool special = false;
    CHECK_BYTES_STR(pl_pprof_profile_name(d, count, &special), "process_cpu");
    CHECK(special);
    pl_buf_reset(&enc);
    pl_pprof_encode_options o = {.cpu_to_nanoseconds = true, .skip_attribute = "thread"};
    uint32_t only_first = 0;
    o.sample_indices = &only_first;
    o.n_sample_indices = 1;
    REQUIRE(pl_pprof_encode(d, count, &o, &enc, &err) == PL_OK);
    pl_batch_free(again);
    again = pl_pprof_decode(enc.data, enc.len, NULL, &err);
    REQUIRE(again);
    p2 = &again->data.profiles.resources[0].scopes[0].profiles[0];
    d2 = &again->data.profiles.dict;
    REQUIRE(p2->n_samples == 1);
    CHECK_EQ_INT(p2->samples[0].values[0], 3 * 10000000);
    CHECK_BYTES_STR(pl_dict_string(d2, p2->sample_type.type_strindex), "cpu");
    CHECK(sample_attr(d2, &p2->samples[0], "thread") == NULL);
    CHECK(sample_attr(d2, &p2->samples[0], "bytes") != NULL);

    pl_batch_free(again);
    pl_batch_free(batch);
    pl_buf_free(&enc);
    pl_buf_free(&enc2);
    pl_buf_free(&b);
}

/* Two pprofs into one batch share one dictionary without duplicates. */
static void test_builder_shares_dictionary(void)
{
    pl_buf b;
    pl_buf_init(&b);
    build_profile(&b, NULL);
    pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_pprof_builder *builder = pl_pprof_builder_new(batch);
    REQUIRE(builder);
    pl_kv attr = {.key = PL_BYTES_LIT("service.name"),
                  .value = pl_value_string(PL_BYTES_LIT("checkout"))};
    pl_pprof_meta meta = {.resource_attrs = &attr, .n_resource_attrs = 1};
    pl_err err = {{0}};
    CHECK(pl_pprof_builder_add(builder, b.data, b.len, &meta, &err) == PL_OK);
    uint32_t strings = batch->data.profiles.dict.n_strings;
    uint32_t stacks = batch->data.profiles.dict.n_stacks;
    uint32_t links = batch->data.profiles.dict.n_links;
    CHECK(pl_pprof_builder_add(builder, b.data, b.len, &meta, &err) == PL_OK);
    CHECK_EQ_UINT(pl_pprof_builder_samples(builder), 4);
    pl_pprof_builder_free(builder);
    const pl_profiles *ps = &batch->data.profiles;
    CHECK_EQ_UINT(ps->n_resources, 2);
    CHECK_EQ_UINT(ps->dict.n_strings, strings);
    /* locations are per pprof, so stacks differ; links are shared */
    CHECK_EQ_UINT(ps->dict.n_stacks, stacks + 2);
    CHECK_EQ_UINT(ps->dict.n_links, links);
    CHECK(ps->resources[1].has_resource);
    CHECK_BYTES_STR(ps->resources[1].resource.attrs.items[0].value.u.str, "checkout");
    pl_batch *copy = pl_batch_clone(batch);
    CHECK(copy != NULL);
    if (copy) {
        CHECK_EQ_UINT(pl_batch_items(copy), 8);
        pl_batch_free(copy);
    }
    pl_batch_free(batch);
    pl_buf_free(&b);
}

/* Profiles no Pyroscope API named: Pyroscope's OTLP ingest rule. */
static void test_profile_names(void)
{
    pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_dictionary *d = &batch->data.profiles.dict;
    pl_dict_ensure_zero_entries(&batch->arena, d);
    struct {
        const char *type, *unit, *ptype, *punit, *name;
        bool special;
    } cases[] = {
        {"samples", "count", "cpu", "nanoseconds", "process_cpu", true},
        {"cpu", "nanoseconds", "cpu", "nanoseconds", "process_cpu", false},
        {"wall", "nanoseconds", "wall", "nanoseconds", "process_cpu", false},
        {"inuse_space", "bytes", "space", "bytes", "process_cpu", false},
        {"events", "nanoseconds", "", "", "off_cpu", false},
        {"off_cpu", "nanoseconds", "", "", "off_cpu", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pl_profile p = {0};
        p.sample_type.type_strindex =
            pl_dict_intern_string(&batch->arena, d, pl_bytes_from_cstr(cases[i].type));
        p.sample_type.unit_strindex =
            pl_dict_intern_string(&batch->arena, d, pl_bytes_from_cstr(cases[i].unit));
        p.has_period_type = cases[i].ptype[0] != 0;
        p.period = p.has_period_type ? 10000000 : 0;
        p.period_type.type_strindex =
            pl_dict_intern_string(&batch->arena, d, pl_bytes_from_cstr(cases[i].ptype));
        p.period_type.unit_strindex =
            pl_dict_intern_string(&batch->arena, d, pl_bytes_from_cstr(cases[i].punit));
        bool special;
        pl_bytes name = pl_pprof_profile_name(d, &p, &special);
        CHECK_BYTES_STR(name, cases[i].name);
        CHECK_EQ_INT(special, cases[i].special);
    }
    pl_batch_free(batch);
}

/* Pyroscope's /ingest name of a pprof upload, from its sample types and
 * display names (pkg/og/convert/pprof metricName). */
static void test_ingest_names(void)
{
#define T(s) PL_BYTES_LIT(s)
    struct {
        pl_bytes types[3], display[3];
        uint32_t n;
        bool with_config;
        const char *name;
    } cases[] = {
        /* Go CPU; py-spy / rbspy / the Python SDK: samples displays as cpu */
        {{T("samples"), T("cpu")}, {{0}}, 2, false, "process_cpu"},
        {{T("samples")}, {{0}}, 1, false, "process_cpu"},
        /* Node.js: any `wall` column names the whole upload */
        {{T("samples"), T("wall"), T("cpu")}, {{0}}, 3, false, "wall"},
        /* .NET: cpu first, the allocation columns follow */
        {{T("cpu"), T("alloc_samples"), T("alloc_size")}, {{0}}, 3, false, "process_cpu"},
        {{T("inuse_objects"), T("inuse_space")}, {{0}}, 2, false, "memory"},
        {{T("goroutine")}, {{0}}, 1, false, "goroutines"},
        /* Go block without a config: contentions displays as mutex_count */
        {{T("contentions"), T("delay")}, {{0}}, 2, false, "mutex"},
        /* pyroscope-go's config for the block profile */
        {{T("contentions"), T("delay")}, {T("block_count"), T("block_duration")}, 2, true, "block"},
        {{T("exception")}, {{0}}, 1, false, "exception"},
    };
#undef T
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_BYTES_STR(pl_pprof_ingest_name(cases[i].types,
                                             cases[i].with_config ? cases[i].display : NULL,
                                             cases[i].n),
                        cases[i].name);
}

/* A name given by the API a pprof came through wins over every rule. */
static void test_given_name(void)
{
    pl_pprof_writer_options o = {"samples", "count", "cpu", "nanoseconds", 10000000, 1, 1};
    pl_pprof_writer *w = pl_pprof_writer_new(&o);
    pl_bytes frames[] = {PL_BYTES_LIT("main")};
    REQUIRE(pl_pprof_writer_add(w, frames, 1, 2) == 0);
    pl_buf p;
    pl_buf_init(&p);
    REQUIRE(pl_pprof_writer_finish(w, &p) == 0);
    pl_pprof_writer_free(w);
    pl_err err = {{0}};
    pl_pprof_meta meta = {.profile_name = PL_BYTES_LIT("wall")};
    pl_batch *b = pl_pprof_decode(p.data, p.len, &meta, &err);
    REQUIRE(b);
    const pl_profile *prof = &b->data.profiles.resources[0].scopes[0].profiles[0];
    bool special = true;
    CHECK_BYTES_STR(pl_pprof_profile_name(&b->data.profiles.dict, prof, &special), "wall");
    CHECK(!special); /* stored as it came: no conversion */
    pl_batch_free(b);
    b = pl_pprof_decode(p.data, p.len, NULL, &err);
    REQUIRE(b);
    prof = &b->data.profiles.resources[0].scopes[0].profiles[0];
    CHECK_BYTES_STR(pl_pprof_profile_name(&b->data.profiles.dict, prof, &special), "process_cpu");
    CHECK(special);
    pl_batch_free(b);
    pl_buf_free(&p);
}

/* An empty pprof (no sample types) is fine and adds nothing. */
static void test_empty(void)
{
    pl_err err = {{0}};
    pl_batch *batch = pl_pprof_decode((const uint8_t *)"", 0, NULL, &err);
    REQUIRE(batch);
    CHECK_EQ_UINT(batch->data.profiles.n_resources, 0);
    pl_batch_free(batch);
}

/* ---- hostile ids (issue 12, H1) --------------------------------------- */

/* The unkeyed splitmix64 finalizer the id maps used before they were keyed,
 * and its inverse: ids whose old hash is k << 32 all fall into one probe
 * chain of any table smaller than 2^32 slots. */
static uint64_t old_mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static uint64_t old_mix64_inverse(uint64_t h)
{
    h ^= h >> 33;
    h *= 0x9cb4b2f8129337dbULL; /* inverse of 0xc4ceb9fe1a85ec53 mod 2^64 */
    h ^= h >> 33;
    h *= 0x4f74430c22a54005ULL; /* inverse of 0xff51afd7ed558ccd */
    h ^= h >> 33;
    return h;
}

/* A pprof with n functions, n locations and n samples; ids chosen by
 * `id_of(k)` for k = 1..n (the same for functions and locations). */
static void build_many_ids(pl_buf *out, uint32_t n, uint64_t (*id_of)(uint32_t))
{
    pl_buf m, sub;
    pl_buf_init(&m);
    pl_buf_init(&sub);
    const char *st[] = {"", "samples", "count", "f"};
    for (int i = 0; i < 4; i++)
        w_bytes(out, 6, st[i], strlen(st[i]));
    w_uint(&m, 1, 1);
    w_uint(&m, 2, 2);
    w_msg(out, 1, &m);
    for (uint32_t k = 1; k <= n; k++) {
        uint64_t id = id_of(k);
        w_uint(&m, 1, id); /* Function.id */
        w_uint(&m, 2, 3);  /* Function.name */
        w_msg(out, 5, &m);
        w_uint(&sub, 1, id); /* Line.function_id */
        w_uint(&m, 1, id);   /* Location.id */
        w_msg(&m, 4, &sub);  /* Location.line */
        w_msg(out, 4, &m);
        uint64_t one = 1;
        w_packed(&m, 1, &id, 1);  /* Sample.location_id */
        w_packed(&m, 2, &one, 1); /* Sample.value */
        w_msg(out, 2, &m);
    }
    pl_buf_free(&m);
    pl_buf_free(&sub);
}

static uint64_t colliding_id(uint32_t k)
{
    return old_mix64_inverse((uint64_t)k << 32);
}

static uint64_t spread_id(uint32_t k)
{
    return old_mix64_inverse((uint64_t)k * 0x9e3779b97f4a7c15ULL);
}

static double decode_seconds(const pl_buf *b, size_t samples)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pl_err err = {{0}};
    pl_batch *batch = decode_buf(b, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(batch);
    if (batch) {
        CHECK_EQ_UINT(batch->data.profiles.resources[0].scopes[0].profiles[0].n_samples, samples);
        pl_batch_free(batch);
    } else {
        fprintf(stderr, "  decode failed: %s\n", err.msg);
    }
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

static void test_colliding_ids_linear(void)
{
    enum { N = 40000 };
    /* The fixture really is hostile for the old hash: every id's old hash
     * has its low 32 bits zero, and every id is beyond the dense range. */
    for (uint32_t k = 1; k <= N; k += 997) {
        CHECK_EQ_UINT(old_mix64(colliding_id(k)) & 0xffffffffu, 0);
        CHECK(colliding_id(k) > (uint64_t)N * 4 + 64);
    }
    pl_buf hostile, control;
    pl_buf_init(&hostile);
    pl_buf_init(&control);
    build_many_ids(&hostile, N, colliding_id);
    build_many_ids(&control, N, spread_id);
    double tc = decode_seconds(&control, N), th = decode_seconds(&hostile, N);
    printf("# %d colliding ids: %.3f s, spread ids: %.3f s\n", N, th, tc);
    /* Quadratic probing of 40k ids takes seconds (8e8 probes per table);
     * linear decoding is within a small factor of the control. */
    CHECK(th < tc * 4 + 0.05);
    pl_buf_free(&hostile);
    pl_buf_free(&control);
}

/* ---- the per-request budget (issue 12, H3) ----------------------------- */

/* A valid pprof of about `pad` bytes: one sample, and a long unused string. */
static void build_padded(pl_buf *out, size_t pad)
{
    pl_buf m;
    pl_buf_init(&m);
    const char *st[] = {"", "samples", "count"};
    for (int i = 0; i < 3; i++)
        w_bytes(out, 6, st[i], strlen(st[i]));
    char *big = malloc(pad);
    memset(big, 'x', pad);
    w_bytes(out, 6, big, pad);
    free(big);
    w_uint(&m, 1, 1);
    w_uint(&m, 2, 2);
    w_msg(out, 1, &m);
    uint64_t one = 1;
    w_packed(&m, 2, &one, 1);
    w_msg(out, 2, &m);
    pl_buf_free(&m);
}

static size_t batch_bytes(pl_batch *batch)
{
    return batch->buffer_bytes + pl_arena_bytes(&batch->arena);
}

static void test_budget_across_samples(void)
{
    /* Like a push request: many small gzip samples, each inflating to 3 MiB;
     * the request's 8 MiB budget admits two and refuses the third while it
     * is being inflated. */
    pl_buf raw, z;
    pl_buf_init(&raw);
    pl_buf_init(&z);
    build_padded(&raw, 3u << 20);
    REQUIRE(pl_gzip(raw.data, raw.len, &z) == 0);
    CHECK(z.len < 64 * 1024);
    pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_pprof_builder *b = pl_pprof_builder_new(batch);
    REQUIRE(b);
    pl_pprof_builder_set_budget(b, 8u << 20, 0);
    pl_err err = {{0}};
    pl_status st = PL_OK;
    int accepted = 0;
    for (int i = 0; i < 40 && st == PL_OK; i++) {
        st = pl_pprof_builder_add(b, z.data, z.len, NULL, &err);
        if (st == PL_OK)
            accepted++;
    }
    CHECK_EQ_INT(st, PL_ERR_TOO_LARGE);
    CHECK_EQ_INT(accepted, 2);
    CHECK(strstr(err.msg, "max_decoded_memory") != NULL);
    CHECK(batch_bytes(batch) <= 8u << 20);
    pl_pprof_builder_free(b);
    pl_batch_free(batch);

    /* Without a budget the same samples all decode (the limit is per pprof). */
    batch = pl_batch_new(PL_SIGNAL_PROFILES);
    b = pl_pprof_builder_new(batch);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(pl_pprof_builder_add(b, z.data, z.len, NULL, &err), PL_OK);
    pl_pprof_builder_free(b);
    pl_batch_free(batch);
    pl_buf_free(&raw);
    pl_buf_free(&z);
}

/* Decodes `pprof` under a budget of max_bytes / max_objects (0: none),
 * expecting it refused as too large with `why` in the message: the bytes
 * the batch holds afterwards, or SIZE_MAX when it was not refused so. */
static size_t refused_size(const pl_buf *pprof, size_t max_bytes, size_t max_objects,
                           const char *why)
{
    pl_batch *batch = pl_batch_new(PL_SIGNAL_PROFILES);
    pl_pprof_builder *b = pl_pprof_builder_new(batch);
    size_t used = SIZE_MAX;
    if (b) {
        pl_pprof_builder_set_budget(b, max_bytes, max_objects);
        pl_err err = {{0}};
        pl_status st = pl_pprof_builder_add(b, pprof->data, pprof->len, NULL, &err);
        if (st == PL_ERR_TOO_LARGE && strstr(err.msg, why))
            used = batch_bytes(batch);
        else
            fprintf(stderr, "  not refused for %s: %s\n", why, err.msg);
        pl_pprof_builder_free(b);
    }
    pl_batch_free(batch);
    return used;
}

/* The start of a pprof: the string table "", "samples", "count", and
 * `n_types` sample types samples/count (m is scratch). */
static void samples_count_prologue(pl_buf *out, pl_buf *m, int n_types)
{
    const char *st[] = {"", "samples", "count"};
    for (int i = 0; i < 3; i++)
        w_bytes(out, 6, st[i], strlen(st[i]));
    for (int t = 0; t < n_types; t++) {
        w_uint(m, 1, 1);
        w_uint(m, 2, 2);
        w_msg(out, 1, m);
    }
}

static void test_budget_expansion(void)
{
    /* 64 sample types and 200k empty samples: 0.4 MB of pprof that would
     * decode into 12.8M sample cells (over 600 MB). Refused from the counts,
     * before the sample arrays exist. */
    pl_buf out, m;
    pl_buf_init(&out);
    pl_buf_init(&m);
    samples_count_prologue(&out, &m, 64);
    for (int i = 0; i < 200000; i++)
        w_bytes(&out, 2, "", 0);
    CHECK(refused_size(&out, 40u << 20, 0, "budget") < 2u << 20);
    /* The object count alone refuses it too. */
    CHECK(refused_size(&out, 0, 1000000, "max_decoded_objects") != SIZE_MAX);
    pl_buf_free(&out);
    pl_buf_free(&m);
}

static void test_budget_arena_limit(void)
{
    /* Locations with many short lines: not in the count estimate, but each
     * line costs the arena far more than its four bytes of input; the arena
     * limit stops it. */
    pl_buf out, m;
    pl_buf_init(&out);
    pl_buf_init(&m);
    samples_count_prologue(&out, &m, 1);
    w_uint(&m, 1, 1); /* Function.id */
    w_msg(&out, 5, &m);
    for (int l = 0; l < 8; l++) {
        w_uint(&m, 1, (uint64_t)l + 1);
        for (int i = 0; i < 100000; i++)
            w_bytes(&m, 4, "\x08\x01", 2); /* Line{function_id=1} */
        w_msg(&out, 4, &m);
    }
    CHECK(refused_size(&out, 4u << 20, 0, "max_decoded_memory") <= 4u << 20);
    pl_buf_free(&out);
    pl_buf_free(&m);
}

int main(void)
{
    PL_RUN(test_decode_hand_built);
    PL_RUN(test_decode_gzipped);
    PL_RUN(test_invalid_references);
    PL_RUN(test_truncated);
    PL_RUN(test_round_trip);
    PL_RUN(test_builder_shares_dictionary);
    PL_RUN(test_profile_names);
    PL_RUN(test_ingest_names);
    PL_RUN(test_given_name);
    PL_RUN(test_empty);
    PL_RUN(test_colliding_ids_linear);
    PL_RUN(test_budget_across_samples);
    PL_RUN(test_budget_expansion);
    PL_RUN(test_budget_arena_limit);
    return pl_test_done();
}
