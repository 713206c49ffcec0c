/*
 * fuzz_ingest.c: the parsing of the Pyroscope /ingest handler: the query
 * string (URL decoding, name, from, until, format, sampleRate, spyName), the
 * application name with its {labels}, the time forms (digits, YYYYMMDD,
 * now-<n><unit>), the format choice from format= and Content-Type, and a
 * multipart sample_type_config part applied to a decoded profile.
 *
 * The handler's helpers are static in receivers/pyroscope.c, so this target
 * compiles that file into itself (its exported component is then this
 * target's copy; nothing else of the receiver runs).
 *
 * Input: query string, a NUL, Content-Type, a NUL, sample_type_config JSON.
 */
#include "../../receivers/pyroscope.c"

#include "../pprof_fixture.h"
#include "proto/otlp_pb.h"

static pl_buf profile;

static void split(const uint8_t **p, const uint8_t *end, char **out)
{
    const uint8_t *nul = memchr(*p, 0, (size_t)(end - *p));
    size_t n = nul ? (size_t)(nul - *p) : (size_t)(end - *p);
    *out = malloc(n + 1);
    memcpy(*out, *p, n);
    (*out)[n] = 0;
    *p += nul ? n + 1 : n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!profile.len) {
        pl_buf_init(&profile);
        build_profile(&profile, NULL);
    }
    const uint8_t *p = data, *end = data + size;
    char *query, *ctype;
    split(&p, end, &query);
    split(&p, end, &ctype);
    pl_bytes stc = {p, (uint32_t)(end - p)};

    char *name = query_get(query, "name");
    char *from = query_get(query, "from");
    char *until = query_get(query, "until");
    char *format = query_get(query, "format");
    char *spy = query_get(query, "spyName");
    char *rate = query_get(query, "sampleRate");
    (void)pick_format(format, ctype, strlen(ctype));
    uint64_t now = 1700000000000000000ull;
    uint64_t t_from = parse_time(from, now), t_until = parse_time(until, now);
    (void)t_from, (void)t_until;
    if (rate)
        (void)strtol(rate, NULL, 10);

    pl_err err = {{0}};
    upload_name un;
    if (parse_name(name, &un, &err) == PL_OK) {
        const char *service = name_label(&un, "service_name");
        upload_meta um;
        build_meta(&un, service && *service ? service : un.app, spy, &um);
        pl_batch *batch = pl_pprof_decode(profile.data, profile.len, &um.meta, &err);
        if (!batch)
            __builtin_trap(); /* the fixture is valid */
        if (stc.len)
            (void)apply_sample_type_config(batch, stc, &err);
        if (pl_otlp_validate_profiles(&batch->data.profiles, &err) != PL_OK)
            __builtin_trap(); /* what the config changed still indexes inside */
        pl_batch_free(batch);
    }
    free(un.storage);
    free(name);
    free(from);
    free(until);
    free(format);
    free(spy);
    free(rate);
    free(query);
    free(ctype);
    return 0;
}
