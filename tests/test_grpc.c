/*
 * test_grpc.c: reading unary gRPC request messages (framing, encodings,
 * limits) and the encodings used in gRPC answers.
 */
#include "core/buf.h"
#include "net/compress.h"
#include "net/grpc.h"
#include "otlp_pb.h"
#include "grpc_request_fixture.h"
#include "testlib.h"

static pl_http_request make_req(const uint8_t *body, size_t len, const char *encoding)
{
    static pl_http_header headers[2];
    return grpc_request(headers, "/x", body, len, encoding);
}

static void frame(pl_buf *out, uint8_t flag, const void *msg, size_t len)
{
    uint8_t p[5] = {flag, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                    (uint8_t)len};
    pl_buf_append(out, p, 5);
    pl_buf_append(out, msg, len);
}

static pl_status read_one(const pl_buf *body, const char *enc, size_t max, pl_grpc_message *m,
                          pl_err *err)
{
    pl_http_request req = make_req(body->data, body->len, enc);
    pl_status st = pl_grpc_read_message(&req, max, m, err);
    free(req.body);
    return st;
}

static void test_identity_message_in_place(void)
{
    pl_buf b;
    pl_buf_init(&b);
    frame(&b, 0, "hello", 5);
    pl_http_request req = make_req(b.data, b.len, NULL);
    pl_grpc_message m;
    pl_err err = {{0}};
    CHECK_EQ_INT(pl_grpc_read_message(&req, 100, &m, &err), PL_OK);
    CHECK_EQ_BYTES(m.data, m.len, "hello", 5);
    CHECK(req.body == NULL); /* taken, no copy */
    CHECK(m.data == m.owner + 5);
    free(m.owner);
    pl_buf_free(&b);
}

static void test_empty_message_is_valid(void)
{
    pl_buf b;
    pl_buf_init(&b);
    frame(&b, 0, "", 0);
    pl_grpc_message m;
    pl_err err = {{0}};
    CHECK_EQ_INT(read_one(&b, NULL, 100, &m, &err), PL_OK);
    CHECK_EQ_INT(m.len, 0);
    free(m.owner);
    pl_buf_free(&b);
}

static void test_compressed_messages(void)
{
    const char *encs[] = {"gzip", "zstd", "deflate"};
    pl_encoding e[] = {PL_ENCODING_GZIP, PL_ENCODING_ZSTD, PL_ENCODING_DEFLATE};
    for (int i = 0; i < 3; i++) {
        pl_buf z, b;
        pl_buf_init(&z);
        pl_buf_init(&b);
        pl_err err = {{0}};
        pl_compress(e[i], (const uint8_t *)"compressed payload", 18, 0, &z, &err);
        frame(&b, 1, z.data, z.len);
        pl_grpc_message m;
        CHECK_EQ_INT(read_one(&b, encs[i], 100, &m, &err), PL_OK);
        CHECK_EQ_BYTES(m.data, m.len, "compressed payload", 18);
        free(m.owner);
        /* the limit applies after decompression */
        CHECK_EQ_INT(read_one(&b, encs[i], 10, &m, &err), PL_ERR_TOO_LARGE);
        /* an uncompressed message with grpc-encoding set is fine */
        pl_buf_reset(&b);
        frame(&b, 0, "plain", 5);
        CHECK_EQ_INT(read_one(&b, encs[i], 100, &m, &err), PL_OK);
        CHECK_EQ_BYTES(m.data, m.len, "plain", 5);
        free(m.owner);
        pl_buf_free(&z);
        pl_buf_free(&b);
    }
}

static void test_framing_errors(void)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_grpc_message m;
    pl_err err = {{0}};
    /* short prefix */
    pl_buf_append(&b, "\0\0\0", 3);
    CHECK_EQ_INT(read_one(&b, NULL, 100, &m, &err), PL_ERR_INVALID);
    /* length says more than arrived: a huge length prefix */
    pl_buf_reset(&b);
    pl_buf_append(&b,
                  "\0\xff\xff\xff\xf0"
                  "abc",
                  8);
    CHECK_EQ_INT(read_one(&b, NULL, 100, &m, &err), PL_ERR_INVALID);
    CHECK(strstr(err.msg, "prefix says") != NULL);
    /* two messages in a unary call */
    pl_buf_reset(&b);
    frame(&b, 0, "a", 1);
    frame(&b, 0, "b", 1);
    CHECK_EQ_INT(read_one(&b, NULL, 100, &m, &err), PL_ERR_INVALID);
    /* compressed flag without grpc-encoding */
    pl_buf_reset(&b);
    frame(&b, 1, "abc", 3);
    CHECK_EQ_INT(read_one(&b, NULL, 100, &m, &err), PL_ERR_INVALID);
    CHECK(strstr(err.msg, "no grpc-encoding") != NULL);
    /* unsupported encoding: UNIMPLEMENTED */
    CHECK_EQ_INT(read_one(&b, "snappy", 100, &m, &err), PL_ERR_UNSUPPORTED);
    CHECK_EQ_INT(pl_status_grpc(PL_ERR_UNSUPPORTED), PL_GRPC_UNIMPLEMENTED);
    /* bad gzip */
    CHECK_EQ_INT(read_one(&b, "gzip", 100, &m, &err), PL_ERR_INVALID);
    /* over the limit, uncompressed: RESOURCE_EXHAUSTED */
    pl_buf_reset(&b);
    frame(&b, 0, "0123456789", 10);
    CHECK_EQ_INT(read_one(&b, NULL, 9, &m, &err), PL_ERR_TOO_LARGE);
    CHECK_EQ_INT(pl_status_grpc(PL_ERR_TOO_LARGE), PL_GRPC_RESOURCE_EXHAUSTED);
    /* the server flagged the body as too large */
    pl_http_request req = make_req(b.data, b.len, NULL);
    req.too_large = true;
    CHECK_EQ_INT(pl_grpc_read_message(&req, 100, &m, &err), PL_ERR_TOO_LARGE);
    free(req.body);
    pl_buf_free(&b);
}

static void test_content_type(void)
{
    pl_http_header h = {"content-type", 12, "application/grpc+proto", 22};
    pl_http_request req = {.headers = &h, .n_headers = 1};
    CHECK(pl_grpc_is_grpc(&req));
    h.value = "application/grpc";
    h.value_len = 16;
    CHECK(pl_grpc_is_grpc(&req));
    h.value = "application/grpcx";
    h.value_len = 17;
    CHECK(!pl_grpc_is_grpc(&req));
    h.value = "application/json";
    h.value_len = 16;
    CHECK(!pl_grpc_is_grpc(&req));
    req.n_headers = 0;
    CHECK(!pl_grpc_is_grpc(&req));
}

static void test_percent_encoding(void)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_grpc_percent_encode("a b%c\n\xc3\xa9", &b);
    pl_buf_append_byte(&b, 0);
    CHECK_EQ_STR((char *)b.data, "a b%25c%0A%C3%A9");
    pl_buf_free(&b);
}

static void test_base64(void)
{
    pl_buf b;
    pl_buf_init(&b);
    pl_base64_encode((const uint8_t *)"foob", 4, &b, true);
    pl_buf_append_byte(&b, 0);
    CHECK_EQ_STR((char *)b.data, "Zm9vYg==");
    pl_buf_reset(&b);
    pl_base64_encode((const uint8_t *)"foob", 4, &b, false);
    pl_buf_append_byte(&b, 0);
    CHECK_EQ_STR((char *)b.data, "Zm9vYg");
    pl_buf_reset(&b);
    pl_base64_encode((const uint8_t *)"fooba", 5, &b, true);
    pl_buf_append_byte(&b, 0);
    CHECK_EQ_STR((char *)b.data, "Zm9vYmE=");
    pl_buf_reset(&b);
    pl_base64_encode((const uint8_t *)"foobar", 6, &b, false);
    pl_buf_append_byte(&b, 0);
    CHECK_EQ_STR((char *)b.data, "Zm9vYmFy");
    pl_buf_free(&b);
}

int main(void)
{
    PL_RUN(test_identity_message_in_place);
    PL_RUN(test_empty_message_is_valid);
    PL_RUN(test_compressed_messages);
    PL_RUN(test_framing_errors);
    PL_RUN(test_content_type);
    PL_RUN(test_percent_encoding);
    PL_RUN(test_base64);
    return pl_test_done();
}
