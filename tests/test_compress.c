/*
 * test_compress.c: body codings: round trips, limits enforced while
 * inflating, corrupt and truncated input, raw deflate fallback.
 */
#include <zlib.h>

#include "net/compress.h"
#include "testlib.h"

static uint8_t *sample(size_t n)
{
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)("telemetry span attributes "[i % 26] + (i / 1000) % 3);
    return b;
}

static void roundtrip(pl_encoding enc)
{
    size_t n = 200000;
    uint8_t *in = sample(n);
    pl_buf z;
    pl_buf_init(&z);
    pl_err err = {{0}};
    CHECK_EQ_INT(pl_compress(enc, in, n, 0, &z, &err), PL_OK);
    if (enc != PL_ENCODING_IDENTITY)
        CHECK(z.len < n / 4);
    uint8_t *out = NULL;
    size_t out_len = 0;
    CHECK_EQ_INT(pl_decompress(enc, z.data, z.len, n, &out, &out_len, &err), PL_OK);
    CHECK_EQ_BYTES(out, out_len, in, n);
    free(out);
    /* one byte under the size: too large, detected while inflating */
    CHECK_EQ_INT(pl_decompress(enc, z.data, z.len, n - 1, &out, &out_len, &err), PL_ERR_TOO_LARGE);
    CHECK(out == NULL);
    /* truncated */
    if (enc != PL_ENCODING_IDENTITY) {
        CHECK_EQ_INT(pl_decompress(enc, z.data, z.len / 2, n, &out, &out_len, &err),
                     PL_ERR_INVALID);
        CHECK(strstr(err.msg, pl_encoding_name(enc)) != NULL);
    }
    pl_buf_free(&z);
    free(in);
}

static void test_roundtrips(void)
{
    roundtrip(PL_ENCODING_IDENTITY);
    roundtrip(PL_ENCODING_GZIP);
    roundtrip(PL_ENCODING_DEFLATE);
    roundtrip(PL_ENCODING_ZSTD);
}

static void test_corrupt_input(void)
{
    const uint8_t junk[] = "this is not compressed at all, not even a little bit";
    uint8_t *out;
    size_t len;
    pl_err err = {{0}};
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_GZIP, junk, sizeof(junk), 1 << 20, &out, &len, &err),
                 PL_ERR_INVALID);
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_ZSTD, junk, sizeof(junk), 1 << 20, &out, &len, &err),
                 PL_ERR_INVALID);
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_ZSTD, junk, 0, 1 << 20, &out, &len, &err),
                 PL_ERR_INVALID);
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_GZIP, junk, 0, 1 << 20, &out, &len, &err),
                 PL_ERR_INVALID);
    /* a gzip header followed by garbage */
    uint8_t bad[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_GZIP, bad, sizeof(bad), 1 << 20, &out, &len, &err),
                 PL_ERR_INVALID);
}

static void test_raw_deflate_fallback(void)
{
    const char *text = "raw deflate without a zlib header, as some clients send it";
    uint8_t z[256];
    z_stream zs = {0};
    deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    zs.next_in = (Bytef *)text;
    zs.avail_in = (uInt)strlen(text);
    zs.next_out = z;
    zs.avail_out = sizeof(z);
    CHECK_EQ_INT(deflate(&zs, Z_FINISH), Z_STREAM_END);
    size_t zlen = sizeof(z) - zs.avail_out;
    deflateEnd(&zs);
    uint8_t *out;
    size_t len;
    pl_err err = {{0}};
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_DEFLATE, z, zlen, 1000, &out, &len, &err), PL_OK);
    CHECK_EQ_BYTES(out, len, text, strlen(text));
    free(out);
}

static void test_gzip_bomb_is_bounded(void)
{
    /* 64 MiB of zeros compresses to ~64 KiB; a 1 MiB limit stops it early */
    size_t n = 64u << 20;
    uint8_t *zeros = calloc(1, n);
    pl_buf z;
    pl_buf_init(&z);
    pl_err err = {{0}};
    CHECK_EQ_INT(pl_compress(PL_ENCODING_GZIP, zeros, n, 9, &z, &err), PL_OK);
    free(zeros);
    uint8_t *out;
    size_t len;
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_GZIP, z.data, z.len, 1 << 20, &out, &len, &err),
                 PL_ERR_TOO_LARGE);
    CHECK(strstr(err.msg, "larger than") != NULL);
    pl_buf_free(&z);
}

static void test_concatenated_gzip_members(void)
{
    pl_buf z;
    pl_buf_init(&z);
    pl_err err = {{0}};
    pl_compress(PL_ENCODING_GZIP, (const uint8_t *)"abc", 3, 0, &z, &err);
    pl_compress(PL_ENCODING_GZIP, (const uint8_t *)"def", 3, 0, &z, &err);
    uint8_t *out;
    size_t len;
    CHECK_EQ_INT(pl_decompress(PL_ENCODING_GZIP, z.data, z.len, 100, &out, &len, &err), PL_OK);
    CHECK_EQ_BYTES(out, len, "abcdef", 6);
    free(out);
    pl_buf_free(&z);
}

static void test_encoding_names(void)
{
    pl_encoding e;
    CHECK(pl_encoding_parse("gzip", 4, &e) && e == PL_ENCODING_GZIP);
    CHECK(pl_encoding_parse(" GZip ", 6, &e) && e == PL_ENCODING_GZIP);
    CHECK(pl_encoding_parse("", 0, &e) && e == PL_ENCODING_IDENTITY);
    CHECK(pl_encoding_parse("identity", 8, &e) && e == PL_ENCODING_IDENTITY);
    CHECK(pl_encoding_parse("zstd", 4, &e) && e == PL_ENCODING_ZSTD);
    CHECK(pl_encoding_parse("deflate", 7, &e) && e == PL_ENCODING_DEFLATE);
    CHECK(!pl_encoding_parse("br", 2, &e));
    CHECK(!pl_encoding_parse("snappy", 6, &e));
}

int main(void)
{
    PL_RUN(test_roundtrips);
    PL_RUN(test_corrupt_input);
    PL_RUN(test_raw_deflate_fallback);
    PL_RUN(test_gzip_bomb_is_bounded);
    PL_RUN(test_concatenated_gzip_members);
    PL_RUN(test_encoding_names);
    return pl_test_done();
}
