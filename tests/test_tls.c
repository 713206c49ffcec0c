/*
 * test_tls.c: the listeners' server-side TLS (net/tls.c), driven through its
 * memory BIOs by an OpenSSL client in the same process (no sockets): the
 * handshake and data both ways, ALPN, mutual TLS (a client certificate is
 * required; one from another CA is refused), min_version / max_version,
 * close_notify, garbage input, and the errors of loading bad files or
 * settings. Certificates come from pki_fixture.h, made at run time.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/decode.h"
#include "config/node.h"
#include "net/tls.h"
#include "cfg_errors_fixture.h"
#include "pki_fixture.h"
#include "testlib.h"

static pki P;

/* ---- an in-memory client ------------------------------------------------- */

typedef struct client_opts {
    const char *ca;   /* file the client trusts (NULL: no verification) */
    const char *cert; /* client certificate and key (mutual TLS) */
    const char *key;
    int min_version, max_version; /* 0: OpenSSL's defaults */
    const char *alpn;             /* wire-format ALPN list, NULL: none offered */
    size_t alpn_len;
} client_opts;

typedef struct client {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *rbio, *wbio;
} client;

static bool client_init(client *c, const client_opts *o)
{
    memset(c, 0, sizeof(*c));
    c->ctx = SSL_CTX_new(TLS_client_method());
    if (!c->ctx)
        return false;
    if (o->ca) {
        if (SSL_CTX_load_verify_locations(c->ctx, o->ca, NULL) != 1)
            return false;
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
    }
    if (o->cert && (SSL_CTX_use_certificate_file(c->ctx, o->cert, SSL_FILETYPE_PEM) != 1 ||
                    SSL_CTX_use_PrivateKey_file(c->ctx, o->key, SSL_FILETYPE_PEM) != 1))
        return false;
    if (o->min_version)
        SSL_CTX_set_min_proto_version(c->ctx, o->min_version);
    if (o->max_version)
        SSL_CTX_set_max_proto_version(c->ctx, o->max_version);
    if (o->alpn)
        SSL_CTX_set_alpn_protos(c->ctx, (const unsigned char *)o->alpn, (unsigned)o->alpn_len);
    c->ssl = SSL_new(c->ctx);
    c->rbio = BIO_new(BIO_s_mem());
    c->wbio = BIO_new(BIO_s_mem());
    if (!c->ssl || !c->rbio || !c->wbio)
        return false;
    BIO_set_mem_eof_return(c->rbio, -1);
    SSL_set_bio(c->ssl, c->rbio, c->wbio);
    SSL_set_tlsext_host_name(c->ssl, "localhost");
    SSL_set1_host(c->ssl, "localhost");
    SSL_set_connect_state(c->ssl);
    return true;
}

static void client_free(client *c)
{
    SSL_free(c->ssl);
    SSL_CTX_free(c->ctx);
    ERR_clear_error();
}

/* What the server delivered, decrypted. */
typedef struct received {
    char data[256];
    size_t len;
} received;

static bool deliver(void *arg, const uint8_t *data, size_t len)
{
    received *r = arg;
    size_t room = sizeof(r->data) - 1 - r->len;
    size_t n = len < room ? len : room;
    memcpy(r->data + r->len, data, n);
    r->len += n;
    r->data[r->len] = 0;
    return true;
}

/* Moves the client's pending bytes to the server; the server's input result. */
static int client_to_server(client *c, pl_tls_conn *tc, received *r)
{
    uint8_t buf[16384], scratch[16384];
    int rc = 0;
    int n;
    while ((n = BIO_read(c->wbio, buf, sizeof(buf))) > 0)
        if (pl_tls_conn_input(tc, buf, (size_t)n, deliver, r, scratch, sizeof(scratch)) != 0)
            rc = -1;
    return rc;
}

/* Moves the server's pending bytes to the client. */
static void server_to_client(pl_tls_conn *tc, client *c)
{
    size_t len;
    uint8_t *out = pl_tls_conn_take_output(tc, &len);
    if (out) {
        BIO_write(c->rbio, out, (int)len);
        free(out);
    }
}

typedef struct outcome {
    bool client_done;  /* the client's handshake finished */
    bool server_done;  /* pl_tls_conn_established */
    bool server_error; /* pl_tls_conn_input returned -1 */
} outcome;

/* Runs the handshake until both sides finish or one fails. */
static outcome handshake(client *c, pl_tls_conn *tc, received *r)
{
    outcome o = {0};
    for (int round = 0; round < 16; round++) {
        int hs = SSL_do_handshake(c->ssl);
        if (hs == 1)
            o.client_done = true;
        else if (SSL_get_error(c->ssl, hs) != SSL_ERROR_WANT_READ)
            break;
        if (client_to_server(c, tc, r) != 0) {
            o.server_error = true;
            server_to_client(tc, c); /* the alert */
            break;
        }
        server_to_client(tc, c);
        if (o.client_done && pl_tls_conn_established(tc))
            break;
    }
    o.server_done = pl_tls_conn_established(tc);
    return o;
}

/* After the client finishes (TLS 1.3: before the server has checked the
 * client's certificate), the first application data tells whether the
 * server accepted it: returns the server's input result. */
static int send_app_data(client *c, pl_tls_conn *tc, received *r, const char *text)
{
    if (SSL_write(c->ssl, text, (int)strlen(text)) <= 0)
        return -2;
    return client_to_server(c, tc, r);
}

static pl_tls_server *server_new(const char *client_ca, const char *min, const char *max, bool h2,
                                 bool http1, pl_err *err)
{
    pl_tls_server_config cfg = {
        .cert_file = (char *)pki_file(&P, "server.pem"),
        .key_file = (char *)pki_file(&P, "server.key"),
        .client_ca_file = client_ca ? (char *)pki_file(&P, client_ca) : NULL,
        .min_version = (char *)min,
        .max_version = (char *)max,
    };
    return pl_tls_server_new(&cfg, h2, http1, "tls-test", err);
}

/* ---- tests --------------------------------------------------------------- */

static void test_handshake_and_data(void)
{
    pl_err err = {{0}};
    pl_tls_server *t = server_new(NULL, NULL, NULL, true, true, &err);
    REQUIRE(t != NULL);
    CHECK(!pl_tls_server_mutual(t));
    pl_tls_conn *tc = pl_tls_conn_new(t);
    REQUIRE(tc != NULL);
    client c;
    client_opts o = {.ca = pki_file(&P, "ca.pem"), .alpn = "\x02h2\x08http/1.1", .alpn_len = 12};
    REQUIRE(client_init(&c, &o));
    received r = {0};
    CHECK(!pl_tls_conn_established(tc));
    outcome oc = handshake(&c, tc, &r);
    CHECK(oc.client_done);
    CHECK(oc.server_done);
    CHECK(!oc.server_error);
    CHECK_EQ_INT(SSL_get_verify_result(c.ssl), X509_V_OK); /* the server's chain and name */
    CHECK_EQ_STR(pl_tls_conn_alpn(tc), "h2");
    CHECK(pl_tls_conn_peer_name(tc) == NULL); /* no client certificate asked for */
    CHECK_EQ_INT(SSL_version(c.ssl), TLS1_3_VERSION);

    /* client to server */
    CHECK_EQ_INT(send_app_data(&c, tc, &r, "GET / HTTP/1.1\r\n\r\n"), 0);
    CHECK_EQ_STR(r.data, "GET / HTTP/1.1\r\n\r\n");
    /* server to client */
    CHECK_EQ_INT(pl_tls_conn_encrypt(tc, (const uint8_t *)"HTTP/1.1 200 OK", 15), 0);
    server_to_client(tc, &c);
    char got[64] = {0};
    CHECK_EQ_INT(SSL_read(c.ssl, got, sizeof(got) - 1), 15);
    CHECK_EQ_STR(got, "HTTP/1.1 200 OK");
    /* close_notify: the client sees a clean end of stream */
    pl_tls_conn_close_notify(tc);
    server_to_client(tc, &c);
    CHECK_EQ_INT(SSL_read(c.ssl, got, sizeof(got)), 0);
    CHECK_EQ_INT(SSL_get_error(c.ssl, 0), SSL_ERROR_ZERO_RETURN);
    client_free(&c);
    pl_tls_conn_free(tc);
    pl_tls_server_free(t);
}

/* ALPN: the server's preference (h2) among what the client offers and the
 * listener allows; none in common, or none offered: no ALPN. */
static void test_alpn(void)
{
    struct {
        bool h2, http1;
        const char *offer;
        size_t offer_len;
        const char *want;
    } cases[] = {
        {true, true, "\x08http/1.1\x02h2", 12, "h2"},
        {false, true, "\x02h2\x08http/1.1", 12, "http/1.1"},
        {true, false, "\x08http/1.1", 9, ""},
        {true, true, NULL, 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pl_err err = {{0}};
        pl_tls_server *t = server_new(NULL, NULL, NULL, cases[i].h2, cases[i].http1, &err);
        REQUIRE(t != NULL);
        pl_tls_conn *tc = pl_tls_conn_new(t);
        client c;
        client_opts o = {.alpn = cases[i].offer, .alpn_len = cases[i].offer_len};
        REQUIRE(tc && client_init(&c, &o));
        received r = {0};
        outcome oc = handshake(&c, tc, &r);
        CHECK(oc.client_done && oc.server_done);
        CHECK_EQ_STR(pl_tls_conn_alpn(tc), cases[i].want);
        client_free(&c);
        pl_tls_conn_free(tc);
        pl_tls_server_free(t);
    }
}

/* Mutual TLS, at TLS 1.2 and 1.3: with a certificate from the configured
 * CA the handshake completes and the peer name is its CN; without one, or
 * with one from another CA, the server refuses and says why. */
static void test_client_certificate(void)
{
    static const int versions[] = {TLS1_2_VERSION, TLS1_3_VERSION};
    for (size_t v = 0; v < 2; v++) {
        pl_err err = {{0}};
        pl_tls_server *t = server_new("ca.pem", NULL, NULL, false, true, &err);
        REQUIRE(t != NULL);
        CHECK(pl_tls_server_mutual(t));
        struct {
            const char *cert, *key;
            bool accepted;
            const char *why; /* in pl_tls_conn_error */
        } cases[] = {
            {"client.pem", "client.key", true, NULL},
            {NULL, NULL, false, "certificate"},
            {"other.pem", "other.key", false, "certificate verify failed"},
        };
        for (size_t i = 0; i < 3; i++) {
            pl_tls_conn *tc = pl_tls_conn_new(t);
            client c;
            client_opts o = {.ca = pki_file(&P, "ca.pem"),
                             .cert = cases[i].cert ? pki_file(&P, cases[i].cert) : NULL,
                             .key = cases[i].key ? pki_file(&P, cases[i].key) : NULL,
                             .min_version = versions[v],
                             .max_version = versions[v]};
            REQUIRE(tc && client_init(&c, &o));
            received r = {0};
            outcome oc = handshake(&c, tc, &r);
            /* TLS 1.3: the client is done before the server has read its
             * certificate; the server's verdict comes with the next bytes */
            int data_rc = oc.server_error ? -1 : send_app_data(&c, tc, &r, "hello");
            if (cases[i].accepted) {
                CHECK(oc.server_done);
                CHECK_EQ_INT(data_rc, 0);
                CHECK_EQ_STR(r.data, "hello");
                CHECK_EQ_STR(pl_tls_conn_peer_name(tc), "good-client");
            } else {
                CHECK(data_rc != 0);
                CHECK_EQ_UINT(r.len, 0); /* nothing reached the application */
                CHECK(pl_tls_conn_peer_name(tc) == NULL);
                CHECK(strstr(pl_tls_conn_error(tc), cases[i].why) != NULL);
                if (!strstr(pl_tls_conn_error(tc), cases[i].why))
                    fprintf(stderr, "  error was: %s\n", pl_tls_conn_error(tc));
                /* later input is refused too */
                uint8_t scratch[64];
                CHECK_EQ_INT(pl_tls_conn_input(tc, (const uint8_t *)"x", 1, deliver, &r, scratch,
                                               sizeof(scratch)),
                             -1);
            }
            client_free(&c);
            pl_tls_conn_free(tc);
        }
        pl_tls_server_free(t);
    }
}

/* The version a client with `o` and the server `t` agree on; 0 when the
 * handshake does not complete on both sides. */
static int negotiated(pl_tls_server *t, const client_opts *o)
{
    pl_tls_conn *tc = pl_tls_conn_new(t);
    client c = {0};
    int version = 0;
    if (tc && client_init(&c, o)) {
        received r = {0};
        outcome oc = handshake(&c, tc, &r);
        if (oc.client_done && oc.server_done)
            version = SSL_version(c.ssl);
    }
    client_free(&c);
    pl_tls_conn_free(tc);
    return version;
}

/* min_version "1.3" refuses a TLS 1.2-only client; max_version "1.2"
 * holds a TLS 1.3-capable client at 1.2; the default floor is 1.2. */
static void test_versions(void)
{
    pl_err err = {{0}};
    pl_tls_server *t = server_new(NULL, "1.3", NULL, false, true, &err);
    REQUIRE(t != NULL);
    pl_tls_conn *tc = pl_tls_conn_new(t);
    client c;
    client_opts o = {.max_version = TLS1_2_VERSION};
    REQUIRE(tc && client_init(&c, &o));
    received r = {0};
    outcome oc = handshake(&c, tc, &r);
    CHECK(!oc.client_done);
    CHECK(!oc.server_done);
    CHECK(oc.server_error);
    CHECK(strstr(pl_tls_conn_error(tc), "protocol") != NULL);
    client_free(&c);
    pl_tls_conn_free(tc);
    /* a 1.3 client is served */
    o = (client_opts){0};
    CHECK_EQ_INT(negotiated(t, &o), TLS1_3_VERSION);
    pl_tls_server_free(t);

    t = server_new(NULL, NULL, "1.2", false, true, &err);
    REQUIRE(t != NULL);
    CHECK_EQ_INT(negotiated(t, &o), TLS1_2_VERSION);
    pl_tls_server_free(t);

    /* the default floor: a TLS 1.1 client is refused */
    t = server_new(NULL, NULL, NULL, false, true, &err);
    REQUIRE(t != NULL);
    tc = pl_tls_conn_new(t);
    o = (client_opts){.min_version = TLS1_VERSION, .max_version = TLS1_1_VERSION};
    REQUIRE(tc && client_init(&c, &o));
    SSL_set_security_level(c.ssl, 0); /* let the client offer 1.1 at all */
    oc = handshake(&c, tc, &r);
    CHECK(!oc.server_done);
    CHECK(oc.server_error);
    client_free(&c);
    pl_tls_conn_free(tc);
    pl_tls_server_free(t);
}

/* Bytes that are not TLS end the connection with an error, not a crash. */
static void test_garbage(void)
{
    pl_err err = {{0}};
    pl_tls_server *t = server_new(NULL, NULL, NULL, true, true, &err);
    REQUIRE(t != NULL);
    pl_tls_conn *tc = pl_tls_conn_new(t);
    REQUIRE(tc != NULL);
    received r = {0};
    uint8_t scratch[256];
    const char *junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    CHECK_EQ_INT(pl_tls_conn_input(tc, (const uint8_t *)junk, strlen(junk), deliver, &r, scratch,
                                   sizeof(scratch)),
                 -1);
    CHECK(!pl_tls_conn_established(tc));
    CHECK(strcmp(pl_tls_conn_error(tc), "TLS error") != 0); /* a specific reason */
    CHECK_EQ_UINT(r.len, 0);
    CHECK_EQ_INT(pl_tls_conn_encrypt(tc, (const uint8_t *)"x", 1), -1);
    pl_tls_conn_free(tc);
    pl_tls_server_free(t);
}

/* Files that do not load fail pl_tls_server_new with the option named. */
static void test_bad_files(void)
{
    struct {
        const char *cert, *key, *ca;
        const char *want;
    } cases[] = {
        {"server.pem", NULL, NULL, "cert_file and key_file are required"},
        {"missing.pem", "server.key", NULL, "tls.cert_file"},
        {"server.pem", "missing.key", NULL, "tls.key_file"},
        {"server.pem", "client.key", NULL, "tls.key_file"}, /* another certificate's key */
        {"server.pem", "server.key", "missing.pem", "tls.client_ca_file"},
        {"server.pem", "server.key", "ca.srl", "tls.client_ca_file"}, /* no certificate in it */
        {"server.key", "server.key", NULL, "tls.cert_file"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pl_tls_server_config cfg = {
            .cert_file = (char *)pki_file(&P, cases[i].cert),
            .key_file = cases[i].key ? (char *)pki_file(&P, cases[i].key) : NULL,
            .client_ca_file = cases[i].ca ? (char *)pki_file(&P, cases[i].ca) : NULL,
        };
        pl_err err = {{0}};
        pl_tls_server *t = pl_tls_server_new(&cfg, true, true, "t", &err);
        CHECK(t == NULL);
        CHECK(strstr(err.msg, cases[i].want) != NULL);
        if (!strstr(err.msg, cases[i].want))
            fprintf(stderr, "  case %zu: %s\n", i, err.msg);
        pl_tls_server_free(t);
    }
    pl_tls_server_config off = {0};
    CHECK(!pl_tls_server_config_enabled(&off));
    CHECK(!pl_tls_server_config_enabled(NULL));
}

/* The `tls:` table's checks, with the place of each mistake. */
static int decode_tls(const char *yaml, pl_cfg_errors *errs, pl_tls_server_config *out)
{
    pl_cfg_doc *doc = pl_cfg_doc_parse("t.yaml", yaml, strlen(yaml), errs);
    if (!doc)
        return -1;
    memset(out, 0, sizeof(*out));
    int n = pl_cfg_decode(&pl_tls_server_section, doc->root, doc->root, out, errs);
    pl_cfg_doc_free(doc);
    return n;
}

static void test_config_checks(void)
{
    struct {
        const char *yaml;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {"cert_file: a.pem\nkey_file: a.key\nmin_version: \"1.3\"\n", NULL},
        {"cert_file: a.pem\n", "'key_file': cert_file and key_file go together"},
        {"key_file: a.key\n", "'cert_file': cert_file and key_file go together"},
        {"client_ca_file: ca.pem\n", "'client_ca_file': mutual TLS needs cert_file"},
        {"cert_file: a.pem\nkey_file: a.key\nmin_version: \"1.1\"\n",
         "'min_version': '1.1': use \"1.2\" or \"1.3\""},
        {"cert_file: a.pem\nkey_file: a.key\nmax_version: \"2\"\n", "'max_version': '2'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pl_cfg_errors errs;
        pl_cfg_errors_init(&errs);
        pl_tls_server_config cfg;
        int n = decode_tls(cases[i].yaml, &errs, &cfg);
        if (cases[i].want) {
            CHECK(n > 0);
            CHECK(cfg_error_contains(&errs, cases[i].want));
            if (!cfg_error_contains(&errs, cases[i].want))
                pl_cfg_errors_print(&errs, stderr);
        } else {
            CHECK_EQ_INT(n, 0);
            CHECK(pl_tls_server_config_enabled(&cfg));
            CHECK_EQ_STR(cfg.min_version, "1.3");
        }
        pl_cfg_free(&pl_tls_server_section, &cfg);
        pl_cfg_errors_free(&errs);
    }
    /* the default floor is "1.2" */
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_tls_server_config cfg;
    CHECK_EQ_INT(decode_tls("cert_file: a.pem\nkey_file: a.key\n", &errs, &cfg), 0);
    CHECK_EQ_STR(cfg.min_version, "1.2");
    pl_cfg_free(&pl_tls_server_section, &cfg);
    pl_cfg_errors_free(&errs);
}

int main(void)
{
    if (!pki_ready(&P))
        return 1;
    PL_RUN(test_handshake_and_data);
    PL_RUN(test_alpn);
    PL_RUN(test_client_certificate);
    PL_RUN(test_versions);
    PL_RUN(test_garbage);
    PL_RUN(test_bad_files);
    PL_RUN(test_config_checks);
    pki_remove(&P);
    return pl_test_done();
}
