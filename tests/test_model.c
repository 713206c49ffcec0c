/*
 * test_model.c: batches, deep copies, attribute and dictionary helpers, hex.
 */
#include <math.h>

#include "core/model.h"
#include "profile_fixture.h"
#include "testlib.h"
#include "traces_fixture.h"

static void test_signal_names(void)
{
    pl_signal s;
    CHECK_EQ_STR(pl_signal_name(PL_SIGNAL_TRACES), "traces");
    CHECK_EQ_STR(pl_signal_name(PL_SIGNAL_METRICS), "metrics");
    CHECK_EQ_INT(pl_signal_from_name("profiles", 8, &s), 0);
    CHECK_EQ_INT(s, PL_SIGNAL_PROFILES);
    CHECK_EQ_INT(pl_signal_from_name("logsx", 4, &s), 0);
    CHECK_EQ_INT(s, PL_SIGNAL_LOGS);
    CHECK_EQ_INT(pl_signal_from_name("log", 3, &s), -1);
}

static void test_bytes(void)
{
    pl_bytes a = pl_bytes_from_cstr("abc");
    CHECK_EQ_INT(a.len, 3);
    CHECK(pl_bytes_eq(a, PL_BYTES_LIT("abc")));
    CHECK(!pl_bytes_eq(a, PL_BYTES_LIT("abd")));
    CHECK(pl_bytes_eq_cstr(a, "abc"));
    CHECK(!pl_bytes_eq_cstr(a, "ab"));
    CHECK(pl_bytes_eq((pl_bytes){NULL, 0}, PL_BYTES_LIT("")));
}

static void test_hex(void)
{
    uint8_t id[8] = {0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}, back[8];
    char hex[17];
    pl_hex_encode(id, 8, hex);
    CHECK_EQ_STR(hex, "b7ad6b7169203331");
    CHECK_EQ_INT(pl_hex_decode("B7AD6B7169203331", 16, back, 8), 0);
    CHECK_EQ_BYTES(back, 8, id, 8);
    CHECK_EQ_INT(pl_hex_decode("b7ad6b716920333", 15, back, 8), -1);
    CHECK_EQ_INT(pl_hex_decode("b7ad6b716920333g", 16, back, 8), -1);
}

static void test_attrs(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    REQUIRE(b);
    pl_attrs attrs = {0};
    for (int i = 0; i < 100; i++) {
        char key[16];
        int n = snprintf(key, sizeof key, "k%d", i);
        REQUIRE(
            pl_attrs_put(&b->arena, &attrs, pl_batch_bytes(b, key, (size_t)n), pl_value_int(i)));
    }
    CHECK_EQ_INT(attrs.n, 100);
    CHECK(attrs.cap >= 100);
    pl_kv *kv = pl_attrs_find(&attrs, "k42", 3);
    REQUIRE(kv);
    CHECK_EQ_INT(kv->value.u.i, 42);
    /* Replacing keeps one entry. */
    REQUIRE(pl_attrs_put(&b->arena, &attrs, PL_BYTES_LIT("k42"), pl_value_bool(true)));
    CHECK_EQ_INT(attrs.n, 100);
    CHECK_EQ_INT(pl_attrs_find(&attrs, "k42", 3)->value.type, PL_VALUE_BOOL);
    CHECK(pl_attrs_remove(&attrs, "k0", 2));
    CHECK(!pl_attrs_remove(&attrs, "k0", 2));
    CHECK_EQ_INT(attrs.n, 99);
    CHECK_BYTES_STR(attrs.items[0].key, "k1"); /* order kept */
    CHECK(pl_attrs_find(&attrs, "nope", 4) == NULL);
    pl_batch_free(b);
}

static void test_value_eq(void)
{
    pl_value a = pl_value_string(PL_BYTES_LIT("x")), b = pl_value_string(PL_BYTES_LIT("x"));
    CHECK(pl_value_eq(&a, &b));
    b = pl_value_string(PL_BYTES_LIT("y"));
    CHECK(!pl_value_eq(&a, &b));
    pl_value n1 = pl_value_double(NAN), n2 = pl_value_double(NAN);
    CHECK(pl_value_eq(&n1, &n2));
    pl_value i1 = pl_value_int(1), d1 = pl_value_double(1);
    CHECK(!pl_value_eq(&i1, &d1));
    pl_value items1[2] = {pl_value_int(1), pl_value_bool(false)};
    pl_value items2[2] = {pl_value_int(1), pl_value_bool(true)};
    pl_value arr1 = {.type = PL_VALUE_ARRAY, .u.array = {items1, 2}};
    pl_value arr2 = {.type = PL_VALUE_ARRAY, .u.array = {items2, 2}};
    CHECK(pl_value_eq(&arr1, &arr1));
    CHECK(!pl_value_eq(&arr1, &arr2));
}

static void test_batch_adopt_memory(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_LOGS);
    REQUIRE(b);
    size_t before = pl_batch_memory(b);
    void *buf = malloc(1000);
    REQUIRE(buf);
    CHECK_EQ_INT(pl_batch_adopt(b, buf, 1000), 0);
    CHECK(pl_batch_memory(b) >= before + 1000);
    b->data.raw = pl_batch_bytes(b, "\x0a\x00", 2);
    CHECK_EQ_INT(pl_batch_items(b), 1);
    int *z = pl_batch_alloc(b, 64 * sizeof(int));
    REQUIRE(z);
    int sum = 0;
    for (int i = 0; i < 64; i++)
        sum += z[i];
    CHECK_EQ_INT(sum, 0);
    pl_batch_free(b); /* ASan reports the adopted buffer if it leaks */
}

static pl_batch *build_traces(void)
{
    pl_span *spans;
    pl_batch *b = tf_traces("checkout", "demo", 2, &spans);
    for (int i = 0; i < 2; i++) {
        pl_span *sp = &spans[i];
        memset(sp->trace_id, 0xab, 16);
        sp->trace_id_len = 16;
        sp->span_id[0] = (uint8_t)(i + 1);
        sp->span_id_len = 8;
        sp->name = pl_batch_bytes(b, "GET /cart", 9);
        pl_value *arr = pl_batch_alloc(b, 2 * sizeof(pl_value));
        arr[0] = pl_value_string(pl_batch_bytes(b, "a", 1));
        arr[1] = pl_value_int(7);
        pl_value v = {.type = PL_VALUE_ARRAY, .u.array = {arr, 2}};
        pl_attrs_put(&b->arena, &sp->attrs, pl_batch_bytes(b, "list", 4), v);
        sp->n_events = 1;
        sp->events = pl_batch_alloc(b, sizeof(pl_span_event));
        sp->events[0].name = pl_batch_bytes(b, "ev", 2);
    }
    pl_kv md = {.key = pl_batch_bytes(b, "tenant", 6),
                .value = pl_value_string(pl_batch_bytes(b, "acme", 4))};
    b->metadata.items = pl_batch_alloc(b, sizeof(pl_kv));
    b->metadata.items[0] = md;
    b->metadata.n = 1;
    return b;
}

static void test_clone_traces(void)
{
    pl_batch *b = build_traces();
    REQUIRE(b);
    CHECK_EQ_INT(pl_batch_items(b), 2);
    pl_batch *c = pl_batch_clone(b);
    REQUIRE(c);
    const pl_span *orig = &b->data.traces.resources[0].scopes[0].spans[1];
    const pl_span *copy = &c->data.traces.resources[0].scopes[0].spans[1];
    CHECK(copy != orig);
    CHECK(copy->name.ptr != orig->name.ptr);
    CHECK_BYTES_STR(copy->name, "GET /cart");
    CHECK_EQ_INT(copy->span_id[0], 2);
    CHECK(pl_value_eq(&copy->attrs.items[0].value, &orig->attrs.items[0].value));
    CHECK(copy->attrs.items[0].value.u.array.items != orig->attrs.items[0].value.u.array.items);
    CHECK_BYTES_STR(copy->events[0].name, "ev");
    pl_bytes tenant;
    CHECK(pl_batch_metadata_get(c, "tenant", &tenant));
    CHECK_BYTES_STR(tenant, "acme");
    CHECK(!pl_batch_metadata_get(c, "other", &tenant));
    CHECK_EQ_INT(pl_batch_items(c), 2);
    /* The copy must not depend on the original's memory. */
    pl_batch_free(b);
    CHECK_BYTES_STR(c->data.traces.resources[0].resource.attrs.items[0].value.u.str, "checkout");
    CHECK_BYTES_STR(c->data.traces.resources[0].scopes[0].spans[0].name, "GET /cart");
    pl_batch_free(c);
}

static void test_dictionary_and_clone_profiles(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    REQUIRE(b);
    pl_profiles *p = &b->data.profiles;
    pl_dictionary *d = &p->dict;
    CHECK_EQ_INT(pl_dict_ensure_zero_entries(&b->arena, d), 0);
    CHECK_EQ_INT(d->n_strings, 1);
    CHECK_EQ_INT(d->n_links, 1);
    CHECK_EQ_INT(d->links[0].trace_id_len, 16);
    CHECK_EQ_INT(d->n_stacks, 1);
    int32_t cpu = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu"));
    CHECK_EQ_INT(cpu, 1);
    CHECK_EQ_INT(pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("")), 0);
    for (int i = 0; i < 1000; i++) {
        char s[16];
        int n = snprintf(s, sizeof s, "s%d", i);
        CHECK_EQ_INT(pl_dict_intern_string(&b->arena, d, pl_batch_bytes(b, s, (size_t)n)), i + 2);
    }
    CHECK_EQ_INT(pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu")), cpu);
    CHECK_EQ_INT(pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("s500")), 502);
    CHECK_BYTES_STR(pl_dict_string(d, 502), "s500");
    CHECK_EQ_INT(pl_dict_string(d, 100000).len, 0);
    CHECK_EQ_INT(pl_dict_string(d, -1).len, 0);

    int32_t a1 = pl_dict_intern_attribute(&b->arena, d, cpu, pl_value_int(5), 0);
    CHECK_EQ_INT(a1, 1);
    CHECK_EQ_INT(pl_dict_intern_attribute(&b->arena, d, cpu, pl_value_int(5), 0), a1);
    CHECK_EQ_INT(pl_dict_intern_attribute(&b->arena, d, cpu, pl_value_int(6), 0), 2);

    pl_link l = {.trace_id_len = 16, .span_id_len = 8};
    memset(l.trace_id, 1, 16);
    memset(l.span_id, 2, 8);
    int32_t li = pl_dict_intern_link(&b->arena, d, &l);
    CHECK_EQ_INT(li, 1);
    CHECK_EQ_INT(pl_dict_intern_link(&b->arena, d, &l), li);
    l.span_id[7] = 3;
    CHECK_EQ_INT(pl_dict_intern_link(&b->arena, d, &l), 2);

    /* One profile with two samples. */
    p->has_dictionary = true;
    pl_profile *prof = add_single_profile(b, 2);
    int64_t *vals = pl_batch_alloc(b, sizeof(int64_t));
    vals[0] = 10;
    prof->samples[1].values = vals;
    prof->samples[1].n_values = 1;
    prof->samples[1].link_index = li;
    CHECK_EQ_INT(pl_batch_items(b), 2);

    pl_batch *c = pl_batch_clone(b);
    REQUIRE(c);
    pl_batch_free(b);
    const pl_profiles *cp = &c->data.profiles;
    CHECK(cp->has_dictionary);
    CHECK_EQ_INT(cp->dict.n_strings, 1002);
    CHECK_BYTES_STR(pl_dict_string(&cp->dict, 1), "cpu");
    CHECK_BYTES_STR(pl_dict_string(&cp->dict, 1001), "s999");
    CHECK_EQ_INT(cp->dict.n_links, 3);
    CHECK_EQ_INT(cp->dict.links[1].span_id[7], 2);
    CHECK_EQ_INT(cp->resources[0].scopes[0].profiles[0].samples[1].values[0], 10);
    CHECK_EQ_INT(cp->resources[0].scopes[0].profiles[0].samples[1].link_index, 1);
    /* The clone's tables can still grow. */
    pl_dictionary *cd = &c->data.profiles.dict;
    CHECK_EQ_INT(pl_dict_intern_string(&c->arena, cd, PL_BYTES_LIT("new")), 1002);
    CHECK_EQ_INT(pl_batch_items(c), 2);
    pl_batch_free(c);
}

/* A large array gets a block of its own without making the small objects
 * after it start a block grown from the array's size. */
static void test_arena_large_block(void)
{
    pl_arena a;
    pl_arena_init(&a);
    char *first = pl_arena_alloc(&a, 100);
    REQUIRE(first);
    size_t before = pl_arena_bytes(&a);
    uint8_t *big = pl_arena_alloc(&a, 600 * 1024);
    REQUIRE(big);
    memset(big, 0xab, 600 * 1024);
    size_t with_big = pl_arena_bytes(&a);
    CHECK(with_big - before < 600 * 1024 + 256);
    /* 3 KiB of small objects fit in the first 4 KiB block */
    char *small[96];
    for (int i = 0; i < 96; i++) {
        small[i] = pl_arena_alloc(&a, 32);
        REQUIRE(small[i]);
        memset(small[i], i, 32);
    }
    CHECK_EQ_INT((long long)pl_arena_bytes(&a), (long long)with_big);
    /* beyond it, the next block is 8 KiB, not 1 MiB */
    for (int i = 0; i < 64; i++)
        REQUIRE(pl_arena_alloc(&a, 32));
    CHECK(pl_arena_bytes(&a) - with_big < 16 * 1024);
    for (int i = 0; i < 96; i++)
        CHECK_EQ_INT(small[i][31], i);
    CHECK_EQ_INT(big[600 * 1024 - 1], 0xab);
    pl_arena_free(&a);
    CHECK_EQ_INT((long long)pl_arena_bytes(&a), 0);
}

/* What pl_dict_intern_string answered before it had an index: the newest
 * equal string, else a new one at the end. */
static int32_t scan_intern(const pl_dictionary *d, pl_bytes s)
{
    for (uint32_t i = d->n_strings; i-- > 0;)
        if (pl_bytes_eq(d->strings[i], s))
            return (int32_t)i;
    return (int32_t)d->n_strings;
}

/* The builder's string index, under what its writers do: interning,
 * appends without deduplication (a decoder's staged block, single entries,
 * duplicates among them) and entries replaced in place (redaction blanking,
 * a rename). 20k random operations, every answer compared with a scan:
 * without replacements the builder answers as the scan does (the newest
 * equal string); with them, an answer may be another equal entry or a new
 * one (a replaced entry may hide an older equal one), and always holds s. */
static void dict_string_ops(bool replacements)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    REQUIRE(b);
    pl_dictionary *d = &b->data.profiles.dict;
    REQUIRE(pl_dict_ensure_zero_entries(&b->arena, d) == 0);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    int bad = 0, interned = 0, hits = 0;
    for (int op = 0; op < 20000; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        char text[16];
        int len = snprintf(text, sizeof text, "k%u", (unsigned)(x % 3000));
        pl_bytes s = pl_batch_bytes(b, text, (size_t)len);
        switch ((x >> 32) % 16) {
        case 0: /* appended without deduplication, maybe a duplicate */
            REQUIRE(pl_dict_append(&b->arena, d, PL_DICT_STRINGS, &s) > 0);
            break;
        case 1: { /* a staged block of three */
            pl_bytes *blk = pl_dict_append_begin(&b->arena, d, PL_DICT_STRINGS, 3);
            REQUIRE(blk);
            blk[0] = s;
            blk[2] = s;
            if ((x >> 40) % 4)
                pl_dict_append_commit(d, PL_DICT_STRINGS, 3);
            break;
        }
        case 2: /* blanked in place */
        case 3: /* renamed in place */
            if (replacements && d->n_strings > 1) {
                int32_t at = 1 + (int32_t)((x >> 40) % (d->n_strings - 1));
                pl_bytes to = (x >> 32) % 16 == 2 ? (pl_bytes){NULL, 0} : s;
                REQUIRE(pl_dict_set(&b->arena, d, PL_DICT_STRINGS, at, &to) == 0);
            }
            break;
        default: {
            int32_t want = scan_intern(d, s);
            uint32_t n_before = d->n_strings;
            int32_t got = pl_dict_intern_string(&b->arena, d, s);
            interned++;
            hits += want < (int32_t)n_before;
            if (got < 0 || !pl_bytes_eq(pl_dict_string(d, got), s))
                bad++;
            else if (!replacements && got != want)
                bad++;
        }
        }
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(interned > 10000);
    CHECK(hits > 5000);
    CHECK(d->n_strings > 1000);
    CHECK(d->index != NULL);
    CHECK_EQ_INT(pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("")), 0);
    pl_batch_free(b);
}

static void test_dict_string_index(void)
{
    dict_string_ops(false);
    dict_string_ops(true);
}

/* Every table deduplicates by content through the same index: equal
 * entries built from separate memory get one index, different ones two. */
static void test_dict_tables(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_PROFILES);
    REQUIRE(b);
    pl_arena *a = &b->arena;
    pl_dictionary *d = &b->data.profiles.dict;
    int32_t name = pl_dict_intern_string(a, d, PL_BYTES_LIT("main"));
    CHECK_EQ_INT(name, 1);
    pl_function f = {name, name, 0, 7};
    int32_t fi = pl_dict_intern_function(a, d, &f);
    CHECK(fi > 0);
    f.start_line = 8;
    CHECK(pl_dict_intern_function(a, d, &f) != fi);
    f.start_line = 7;
    CHECK_EQ_INT(pl_dict_intern_function(a, d, &f), fi);
    pl_line l1[1] = {{fi, 12, 0}}, l2[1] = {{fi, 12, 0}};
    pl_location loc = {0, 0x1000, l1, 1, NULL, 0};
    int32_t li = pl_dict_intern_location(a, d, &loc);
    loc.lines = l2;
    CHECK_EQ_INT(pl_dict_intern_location(a, d, &loc), li);
    l2[0].line = 13;
    CHECK(pl_dict_intern_location(a, d, &loc) != li);
    int32_t locs[2] = {li, li}, locs2[2] = {li, li};
    int32_t st = pl_dict_intern_stack(a, d, locs, 2);
    locs[0] = 99; /* the stack keeps its own copy */
    CHECK_EQ_INT(pl_dict_intern_stack(a, d, locs2, 2), st);
    CHECK_EQ_INT(d->stacks[st].location_indices[0], li);
    CHECK(pl_dict_intern_stack(a, d, locs2, 1) != st);
    int32_t at = pl_dict_intern_attribute(a, d, name, pl_value_string(PL_BYTES_LIT("v")), 0);
    CHECK_EQ_INT(pl_dict_intern_attribute(a, d, name, pl_value_string(PL_BYTES_LIT("v")), 0), at);
    CHECK(pl_dict_intern_attribute(a, d, name, pl_value_int(1), 0) != at);
    pl_link ln = {{1}, {2}, 16, 8};
    int32_t lk = pl_dict_intern_link(a, d, &ln);
    CHECK_EQ_INT(pl_dict_intern_link(a, d, &ln), lk);
    CHECK(pl_dict_append(a, d, PL_DICT_LINKS, &ln) != lk); /* on purpose apart */
    pl_mapping m = {0x1000, 0x2000, 0, name, NULL, 0};
    int32_t mi = pl_dict_intern_mapping(a, d, &m);
    CHECK_EQ_INT(pl_dict_intern_mapping(a, d, &m), mi);
    /* A replaced function is found under its new content, not its old. */
    pl_function g = {name, 0, 0, 7};
    REQUIRE(pl_dict_set(a, d, PL_DICT_FUNCTIONS, fi, &g) == 0);
    CHECK_EQ_INT(pl_dict_intern_function(a, d, &g), fi);
    CHECK(pl_dict_intern_function(a, d, &f) != fi);
    CHECK_EQ_INT(pl_dict_count(d, PL_DICT_FUNCTIONS), 4);
    pl_batch_free(b);
}

static void test_clone_raw(void)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_METRICS);
    REQUIRE(b);
    uint8_t *body = malloc(4);
    memcpy(body, "\x0a\x02\x0a\x00", 4);
    pl_batch_adopt(b, body, 4);
    b->data.raw = (pl_bytes){body, 4};
    pl_batch *c = pl_batch_clone(b);
    pl_batch_free(b);
    REQUIRE(c);
    CHECK_EQ_BYTES(c->data.raw.ptr, c->data.raw.len, "\x0a\x02\x0a\x00", 4);
    CHECK_EQ_INT(c->signal, PL_SIGNAL_METRICS);
    pl_batch_free(c);
}

int main(void)
{
    PL_RUN(test_signal_names);
    PL_RUN(test_bytes);
    PL_RUN(test_hex);
    PL_RUN(test_attrs);
    PL_RUN(test_value_eq);
    PL_RUN(test_batch_adopt_memory);
    PL_RUN(test_clone_traces);
    PL_RUN(test_dictionary_and_clone_profiles);
    PL_RUN(test_dict_string_index);
    PL_RUN(test_dict_tables);
    PL_RUN(test_clone_raw);
    PL_RUN(test_arena_large_block);
    return pl_test_done();
}
