/*
 * test_http_security.c: what the HTTP server does before a handler runs
 * (CORS, authentication), and the authentication extensions themselves,
 * driven through pl_http_server_feed (no sockets). TLS is covered by the
 * interop test tls_auth.test.mjs with real clients.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/decode.h"
#include "config/node.h"
#include "core/buf.h"
#include "core/file_stamp.h"
#include "extensions/auth.h"
#include "net/http_auth.h"
#include "net/http_cors.h"
#include "net/http_server.h"
#include "ext_fixture.h"
#include "testlib.h"

#include <openssl/evp.h>

static int handled;
static char handled_user[64];

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    (void)arg;
    handled++;
    snprintf(handled_user, sizeof(handled_user), "%s", req->auth_user ? req->auth_user : "");
    pl_http_respond(res, 200, NULL, 0, "ok", 2);
}

/* Feeds one request; the server's output, NUL-terminated (free it). */
static char *feed(const pl_http_server_options *opt, const char *req)
{
    return feed_to(opt, handler, NULL, req);
}

/* ---- CORS --------------------------------------------------------------- */

static void test_cors_glob(void)
{
    CHECK(pl_http_cors_match("*", "https://a.example", 17));
    CHECK(pl_http_cors_match("https://*.example.com", "https://app.example.com", 23));
    CHECK(!pl_http_cors_match("https://*.example.com", "https://example.com", 19));
    CHECK(!pl_http_cors_match("https://*.example.com", "https://app.example.com.evil.io", 31));
    CHECK(pl_http_cors_match("http://localhost:*", "http://localhost:3000", 21));
    CHECK(!pl_http_cors_match("http://localhost:3000", "http://localhost:30000", 22));
    CHECK(pl_http_cors_match("a*b*c", "a-b-b-c", 7));
    CHECK(!pl_http_cors_match("a*b*c", "a-b-b-", 6));
}

static pl_http_cors_config cors_config(void)
{
    static char *origins[] = {"https://*.example.com"};
    static char *headers[] = {"x-custom"};
    pl_http_cors_config c = {{origins, 1}, {headers, 1}, 600};
    return c;
}

static void test_cors_preflight(void)
{
    pl_http_cors_config c = cors_config();
    pl_http_server_options opt = {.cors = &c};
    handled = 0;
    char *out = feed(&opt, "OPTIONS /v1/traces HTTP/1.1\r\nHost: x\r\n"
                           "Origin: https://app.example.com\r\n"
                           "Access-Control-Request-Method: POST\r\n"
                           "Access-Control-Request-Headers: content-type, x-custom\r\n\r\n");
    CHECK(strstr(out, "HTTP/1.1 204") == out);
    CHECK(strstr(out, "Access-Control-Allow-Origin: https://app.example.com\r\n") != NULL);
    CHECK(strstr(out, "Access-Control-Allow-Methods: POST\r\n") != NULL);
    CHECK(strstr(out, "Access-Control-Allow-Headers: content-type, x-custom\r\n") != NULL);
    CHECK(strstr(out, "Access-Control-Max-Age: 600\r\n") != NULL);
    CHECK_EQ_INT(handled, 0); /* answered by the server, not the handler */
    free(out);

    /* an origin, a method or a header not allowed: no CORS headers */
    const char *bad[] = {
        "OPTIONS / HTTP/1.1\r\nOrigin: https://evil.io\r\nAccess-Control-Request-Method: "
        "POST\r\n\r\n",
        "OPTIONS / HTTP/1.1\r\nOrigin: https://a.example.com\r\nAccess-Control-Request-Method: "
        "DELETE\r\n\r\n",
        "OPTIONS / HTTP/1.1\r\nOrigin: https://a.example.com\r\nAccess-Control-Request-Method: "
        "POST\r\nAccess-Control-Request-Headers: x-other\r\n\r\n",
    };
    for (size_t i = 0; i < 3; i++) {
        out = feed(&opt, bad[i]);
        CHECK(strstr(out, "HTTP/1.1 204") == out);
        CHECK(strstr(out, "Access-Control-Allow-Origin") == NULL);
        free(out);
    }
}

static void test_cors_actual_request(void)
{
    pl_http_cors_config c = cors_config();
    pl_http_server_options opt = {.cors = &c};
    char *out = feed(&opt, "POST /v1/traces HTTP/1.1\r\nOrigin: https://app.example.com\r\n"
                           "Content-Length: 0\r\n\r\n");
    CHECK(strstr(out, "HTTP/1.1 200") == out);
    CHECK(strstr(out, "Access-Control-Allow-Origin: https://app.example.com\r\n") != NULL);
    CHECK(strstr(out, "Vary: Origin\r\n") != NULL);
    free(out);
    out = feed(&opt,
               "POST /v1/traces HTTP/1.1\r\nOrigin: https://evil.io\r\nContent-Length: 0\r\n\r\n");
    CHECK(strstr(out, "HTTP/1.1 200") == out);
    CHECK(strstr(out, "Access-Control-Allow-Origin") == NULL);
    free(out);
    /* without cors configured an OPTIONS goes to the handler as before */
    handled = 0;
    out = feed(NULL, "OPTIONS / HTTP/1.1\r\nOrigin: https://app.example.com\r\n"
                     "Access-Control-Request-Method: POST\r\n\r\n");
    CHECK_EQ_INT(handled, 1);
    free(out);
}

/* ---- authentication extensions ------------------------------------------ */

static void test_bearer_token(void)
{
    pl_err err = {{0}};
    void *ext = make_ext("bearertokenauth", "bearertokenauth/t",
                         "token: s3cret\ntokens: [rotated]\n", &err);
    REQUIRE(ext != NULL);
    const pl_authenticator *a = pl_auth_find("bearertokenauth/t", &err);
    REQUIRE(a != NULL);
    pl_http_server_options opt = {.auth = &a->server};
    handled = 0;
    char *out = feed(&opt, "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
    CHECK(strstr(out, "HTTP/1.1 401") == out);
    CHECK(strstr(out, "WWW-Authenticate: Bearer\r\n") != NULL);
    free(out);
    const char *wrong[] = {"Bearer s3cre", "Bearer s3cret2", "Basic s3cret", "s3cret", "Bearer "};
    for (size_t i = 0; i < 5; i++) {
        char req[256];
        snprintf(req, sizeof(req),
                 "POST /x HTTP/1.1\r\nAuthorization: %s\r\nContent-Length: 0\r\n\r\n", wrong[i]);
        out = feed(&opt, req);
        CHECK(strstr(out, "HTTP/1.1 401") == out);
        free(out);
    }
    CHECK_EQ_INT(handled, 0);
    out =
        feed(&opt, "POST /x HTTP/1.1\r\nAuthorization: Bearer s3cret\r\nContent-Length: 0\r\n\r\n");
    CHECK(strstr(out, "HTTP/1.1 200") == out);
    free(out);
    out = feed(&opt,
               "POST /x HTTP/1.1\r\nauthorization: bearer rotated\r\nContent-Length: 0\r\n\r\n");
    CHECK(strstr(out, "HTTP/1.1 200") == out);
    free(out);
    CHECK_EQ_INT(handled, 2);
    /* refused at the headers: the answer comes before the (unfinished) body */
    out = feed(&opt, "POST /x HTTP/1.1\r\nContent-Length: 100000\r\n\r\npartial");
    CHECK(strstr(out, "HTTP/1.1 401") == out);
    CHECK(strstr(out, "Connection: close") != NULL);
    free(out);
    CHECK_EQ_INT(handled, 2);
    /* the client side sends the first token */
    char *line = pl_auth_client_header_line(a);
    REQUIRE(line != NULL);
    CHECK(strcmp(line, "Authorization: Bearer s3cret") == 0);
    free(line);
    destroy_ext("bearertokenauth", ext);
    CHECK(pl_auth_find("bearertokenauth/t", &err) == NULL); /* unregistered */
}

static void test_basic_auth(void)
{
    pl_err err = {{0}};
    /* hunter2 as SHA-512-crypt, {SHA} and plain text */
    void *ext = make_ext(
        "basicauth", "basicauth/t",
        "htpasswd:\n  inline: |\n"
        "    # comment\n"
        "    ann:$6$abcdefgh$M/eYsB4rVXAm3ZNc88J.UD9rCKAT6FB1rahiwJCHtEndQNORCub5qhjxn50qbqVVthkM."
        "9HpEwtf0t.iV9uH0/\n"
        "    bo:{SHA}87u9ZqY9S/F0eUBXjsPQEDUw4h0=\n"
        "    cy:hunter2\n",
        &err);
    REQUIRE(ext != NULL);
    const pl_authenticator *a = pl_auth_find("basicauth/t", &err);
    REQUIRE(a != NULL);
    pl_http_server_options opt = {.auth = &a->server};
    struct {
        const char *user_pass;
        bool ok;
    } cases[] = {{"ann:hunter2", true},  {"ann:hunter2", true}, /* second: the cached digest */
                 {"ann:hunter3", false}, {"bo:hunter2", true},  {"bo:hunter", false},
                 {"cy:hunter2", true},   {"cy:", false},        {"dan:hunter2", false},
                 {"annhunter2", false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        unsigned char b64[128];
        EVP_EncodeBlock(b64, (const unsigned char *)cases[i].user_pass,
                        (int)strlen(cases[i].user_pass));
        char req[256];
        snprintf(req, sizeof(req),
                 "POST /x HTTP/1.1\r\nAuthorization: Basic %s\r\nContent-Length: 0\r\n\r\n", b64);
        handled = 0;
        char *out = feed(&opt, req);
        if (cases[i].ok) {
            CHECK(strstr(out, "HTTP/1.1 200") == out);
            CHECK_EQ_INT(handled, 1);
            /* the user name reaches the handler */
            CHECK(strncmp(handled_user, cases[i].user_pass, strlen(handled_user)) == 0 &&
                  handled_user[0]);
        } else {
            CHECK(strstr(out, "HTTP/1.1 401") == out);
            CHECK(strstr(out, "WWW-Authenticate: Basic realm=\"proflink\"") != NULL);
            CHECK_EQ_INT(handled, 0);
        }
        free(out);
    }
    destroy_ext("basicauth", ext);
    /* the client side: a second instance with client_auth */
    ext = make_ext("basicauth", "basicauth/tc", "client_auth: {username: ann, password: hunter2}\n",
                   &err);
    REQUIRE(ext != NULL);
    a = pl_auth_find("basicauth/tc", &err);
    REQUIRE(a != NULL);
    char *line = pl_auth_client_header_line(a);
    REQUIRE(line != NULL);
    CHECK(strcmp(line, "Authorization: Basic YW5uOmh1bnRlcjI=") == 0);
    free(line);
    destroy_ext("basicauth", ext);

    /* Apache's MD5 is refused with a hint */
    pl_err e2 = {{0}};
    CHECK(make_ext("basicauth", "basicauth/md5",
                   "htpasswd: {inline: \"x:$apr1$abc$defghijklmnopqrstuvwx\"}\n", &e2) == NULL);
    CHECK(strstr(e2.msg, "htpasswd -B") != NULL);
}

/* The Collector's rules: bearertokenauth with token and filename reads the
 * file (with a warning that the token is ignored); basicauth is a server
 * (htpasswd) or a client (client_auth) instance, never both. */
static void test_collector_auth_rules(void)
{
    char path[] = "/tmp/proflink-token-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "from-file\n", 10) == 10);
    close(fd);
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "token: inline\nfilename: %s\n", path);
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    decode_ext("bearertokenauth", yaml, &errs);
    CHECK_EQ_UINT(errs.n, 0);
    REQUIRE(errs.n_warnings == 1);
    CHECK(strstr(errs.warnings[0].text,
                 "t.yaml:1:1: warning: 'token': ignored: the token is read from "
                 "filename") == errs.warnings[0].text);
    pl_cfg_errors_free(&errs);
    pl_err err = {{0}};
    void *ext = make_ext("bearertokenauth", "bearertokenauth/both", yaml, &err);
    REQUIRE(ext != NULL);
    const pl_authenticator *a = pl_auth_find("bearertokenauth/both", &err);
    REQUIRE(a != NULL);
    char *line = pl_auth_client_header_line(a);
    REQUIRE(line != NULL);
    CHECK_EQ_STR(line, "Authorization: Bearer from-file");
    free(line);
    pl_http_server_options opt = {.auth = &a->server};
    char *out = feed(&opt, "POST /x HTTP/1.1\r\nAuthorization: Bearer inline\r\n"
                           "Content-Length: 0\r\n\r\n");
    CHECK(strstr(out, "HTTP/1.1 401") == out);
    free(out);
    destroy_ext("bearertokenauth", ext);
    unlink(path);

    pl_cfg_errors_init(&errs);
    decode_ext("basicauth",
               "htpasswd: {inline: \"ann:hunter2\"}\nclient_auth: {username: ann, password: x}\n",
               &errs);
    REQUIRE(errs.n == 1);
    CHECK(strstr(errs.items[0].text, "t.yaml:2:1: 'client_auth': set htpasswd (receivers) or "
                                     "client_auth (exporters), not both") == errs.items[0].text);
    pl_cfg_errors_free(&errs);
}

static void test_unknown_authenticator(void)
{
    pl_err err = {{0}};
    pl_listener_security sec;
    pl_auth_ref_config ref = {(char *)"nope"};
    CHECK(pl_listener_security_init(&sec, NULL, NULL, &ref, NULL, &err) != PL_OK);
    CHECK(strstr(err.msg, "'nope' is not a running authentication extension") != NULL);
}

/* A reload may replace an extension and keep the receiver: the listener
 * uses whatever is registered under the id now, and refuses when nothing is. */
static void test_authenticator_replaced(void)
{
    pl_err err = {{0}};
    void *old = make_ext("bearertokenauth", "bearertokenauth/r", "token: one\n", &err);
    REQUIRE(old != NULL);
    pl_listener_security sec;
    pl_auth_ref_config ref = {(char *)"bearertokenauth/r"};
    REQUIRE(pl_listener_security_init(&sec, NULL, NULL, &ref, NULL, &err) == PL_OK);
    pl_http_server_options opt = {0};
    pl_listener_security_apply(&sec, &opt);
    REQUIRE(opt.auth != NULL);
    const char *with_one = "GET / HTTP/1.1\r\nAuthorization: Bearer one\r\n\r\n";
    const char *with_two = "GET / HTTP/1.1\r\nAuthorization: Bearer two\r\n\r\n";
    char *out = feed(&opt, with_one);
    CHECK(strstr(out, "HTTP/1.1 200") == out);
    free(out);
    /* the new instance is created before the old one goes */
    void *new = make_ext("bearertokenauth", "bearertokenauth/r", "token: two\n", &err);
    REQUIRE(new != NULL);
    destroy_ext("bearertokenauth", old);
    out = feed(&opt, with_two);
    CHECK(strstr(out, "HTTP/1.1 200") == out);
    free(out);
    out = feed(&opt, with_one);
    CHECK(strstr(out, "HTTP/1.1 401") == out);
    free(out);
    destroy_ext("bearertokenauth", new);
    out = feed(&opt, with_two); /* gone: refused, not let through */
    CHECK(strstr(out, "HTTP/1.1 401") == out);
    free(out);
    pl_listener_security_free(&sec);
}

/* reload: unchanged files are not re-read; changed ones are; broken ones
 * keep the previous certificate serving and are not retried until they
 * change again. */
static void test_tls_reload(void)
{
    char dir[] = "/tmp/proflink-tls-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    char cmd[1024], cert[256], key[256];
    snprintf(cert, sizeof(cert), "%s/c.pem", dir);
    snprintf(key, sizeof(key), "%s/k.pem", dir);
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s -out %s -days 1 -subj /CN=localhost >/dev/null 2>&1",
             key, cert);
    REQUIRE(system(cmd) == 0);
    pl_tls_server_config cfg = {.cert_file = cert, .key_file = key};
    pl_err err = {{0}};
    pl_tls_server *t = pl_tls_server_new(&cfg, true, true, "t", &err);
    REQUIRE(t != NULL);
    CHECK_EQ_INT(pl_tls_server_reload(t, false, &err), 0); /* unchanged */
    /* a renewed certificate (new file, different size or time) */
    snprintf(cmd, sizeof(cmd),
             "sleep 0.01; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -keyout %s -out %s -days 2 -subj /CN=renewed.localhost >/dev/null 2>&1",
             key, cert);
    REQUIRE(system(cmd) == 0);
    CHECK_EQ_INT(pl_tls_server_reload(t, false, &err), 1);
    /* a half-written one */
    FILE *f = fopen(cert, "w");
    REQUIRE(f != NULL);
    fputs("-----BEGIN CERTIFICATE-----\nMIIB\n", f);
    fclose(f);
    CHECK_EQ_INT(pl_tls_server_reload(t, false, &err), -1);
    CHECK(strstr(err.msg, "tls.cert_file") != NULL);
    CHECK_EQ_INT(pl_tls_server_reload(t, false, &err), 0); /* not retried until it changes */
    pl_tls_conn *c = pl_tls_conn_new(t);                   /* the previous context still serves */
    CHECK(c != NULL);
    pl_tls_conn_free(c);
    pl_tls_server_free(t);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

static void test_tls_config_errors(void)
{
    pl_err err = {{0}};
    pl_tls_server_config cfg = {.cert_file = (char *)"/nonexistent/cert.pem",
                                .key_file = (char *)"/nonexistent/key.pem"};
    CHECK(pl_tls_server_new(&cfg, true, true, "t", &err) == NULL);
    CHECK(strstr(err.msg, "tls.cert_file /nonexistent/cert.pem") != NULL);
}

/* ---- authenticators on several threads ----------------------------------
 * Receivers on worker threads check requests at once while the htpasswd
 * file is re-read and a reload replaces the extension under the same id:
 * every answer stays right (and a -Db_sanitize=thread build sees no race). */

typedef struct auth_thread_ctx {
    const pl_http_server_options *opt;
    int stop;
    int wrong; /* answers that were not what the credentials deserve */
    int checked;
} auth_thread_ctx;

static void count_handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    (void)arg;
    (void)req;
    pl_http_respond(res, 200, NULL, 0, "ok", 2);
}

static bool answered(const pl_http_server_options *opt, const char *user_pass, int status)
{
    unsigned char b64[128];
    EVP_EncodeBlock(b64, (const unsigned char *)user_pass, (int)strlen(user_pass));
    char req[256];
    snprintf(req, sizeof(req),
             "POST /x HTTP/1.1\r\nAuthorization: Basic %s\r\nContent-Length: 0\r\n\r\n", b64);
    pl_buf out;
    pl_buf_init(&out);
    pl_http_server_feed(opt, count_handler, NULL, (const uint8_t *)req, strlen(req), 0, &out);
    char want[32];
    snprintf(want, sizeof(want), "HTTP/1.1 %d", status);
    bool ok = out.len >= strlen(want) && memcmp(out.data, want, strlen(want)) == 0;
    pl_buf_free(&out);
    return ok;
}

static void *auth_thread(void *arg)
{
    auth_thread_ctx *c = arg;
    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        int wrong = !answered(c->opt, "ann:hunter2", 200) + !answered(c->opt, "cy:hunter2", 200) +
                    !answered(c->opt, "ann:hunter3", 401) + !answered(c->opt, "dan:x", 401);
        __atomic_fetch_add(&c->wrong, wrong, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->checked, 4, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Replaced the way an operator should (write aside, rename over): a
 * re-read that caught the file truncated, half written, would rightly
 * refuse every user until the next look a second later. */
static void write_htpasswd(const char *path)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "w");
    REQUIRE(f != NULL);
    fputs("ann:$6$abcdefgh$M/eYsB4rVXAm3ZNc88J.UD9rCKAT6FB1rahiwJCHtEndQNORCub5qhjxn50qbqVVthkM."
          "9HpEwtf0t.iV9uH0/\ncy:hunter2\n",
          f);
    fclose(f);
    REQUIRE(rename(tmp, path) == 0);
}

static void test_auth_threads(void)
{
    char path[] = "/tmp/proflink-htpasswd-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    write_htpasswd(path);
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "htpasswd: {file: %s}\n", path);
    pl_err err = {{0}};
    void *ext = make_ext("basicauth", "basicauth/mt", yaml, &err);
    REQUIRE(ext != NULL);
    pl_listener_security sec;
    pl_auth_ref_config ref = {(char *)"basicauth/mt"};
    REQUIRE(pl_listener_security_init(&sec, NULL, NULL, &ref, NULL, &err) == PL_OK);
    pl_http_server_options opt = {0};
    pl_listener_security_apply(&sec, &opt);
    auth_thread_ctx c = {.opt = &opt};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, auth_thread, &c) == 0);
    /* 1.6 s: the file changes (re-read at most once a second) and, half
     * way, a reload replaces the extension (newest first, then the old one
     * goes while checks may be running in it) */
    for (int step = 0; step < 16; step++) {
        usleep(100000);
        write_htpasswd(path);
        if (step == 8) {
            void *fresh = make_ext("basicauth", "basicauth/mt", yaml, &err);
            REQUIRE(fresh != NULL);
            destroy_ext("basicauth", ext);
            ext = fresh;
        }
    }
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(c.checked > 40);
    CHECK_EQ_INT(c.wrong, 0);
    pl_listener_security_free(&sec);
    destroy_ext("basicauth", ext);
    unlink(path);
}

/* ---- client credentials and watched files -------------------------------- */

/* What an HTTP client sends for bearer_token / basic_auth settings (the
 * pprof scrape receiver, the Pyroscope exporter, basicauth's client side). */
static void test_client_credentials(void)
{
    char *v = pl_http_basic_credentials("Aladdin", "open sesame"); /* RFC 7617's example */
    REQUIRE(v);
    CHECK_EQ_STR(v, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    free(v);
    v = pl_http_basic_credentials("u", NULL); /* no password: "u:" */
    REQUIRE(v);
    CHECK_EQ_STR(v, "Basic dTo=");
    free(v);

    pl_basic_auth_config basic = {(char *)"scraper", (char *)"s3cret"};
    CHECK_EQ_INT(pl_http_authorization("tok-123", &basic, &v), 0); /* the token wins */
    REQUIRE(v);
    CHECK_EQ_STR(v, "Bearer tok-123");
    free(v);
    CHECK_EQ_INT(pl_http_authorization("", &basic, &v), 0);
    REQUIRE(v);
    CHECK_EQ_STR(v, "Basic c2NyYXBlcjpzM2NyZXQ=");
    free(v);
    pl_basic_auth_config nobody = {(char *)"", (char *)"x"};
    CHECK_EQ_INT(pl_http_authorization(NULL, &nobody, &v), 0);
    CHECK(v == NULL);
    CHECK_EQ_INT(pl_http_authorization(NULL, NULL, &v), 0);
    CHECK(v == NULL);
}

/* Decodes `yaml` with a component's config table: the number of errors,
 * their text in msg. */
static int decode_errors(pl_kind kind, const char *type, const char *yaml, char *msg, size_t cap)
{
    const pl_component_type *t = pl_component_type_find(kind, type, strlen(type));
    CHECK(t != NULL);
    if (!t)
        return -1;
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("t.yaml", yaml, strlen(yaml), &errs);
    CHECK(doc != NULL);
    if (!doc)
        return -1;
    void *cfg = calloc(1, t->config->size);
    CHECK(cfg != NULL);
    if (!cfg)
        return -1;
    int n = pl_cfg_decode(t->config, doc->root, doc->root, cfg, &errs);
    FILE *f = fmemopen(msg, cap, "w");
    CHECK(f != NULL);
    if (!f)
        return -1;
    pl_cfg_errors_print(&errs, f);
    fclose(f);
    pl_cfg_free(t->config, cfg);
    free(cfg);
    pl_cfg_doc_free(doc);
    pl_cfg_errors_free(&errs);
    return n;
}

/* bearer_token or basic_auth, not both: the same rule for a scrape target
 * and for the Pyroscope exporter. */
static void test_credentials_rule(void)
{
    const char *both = "set either bearer_token or basic_auth, not both";
    struct {
        pl_kind kind;
        const char *type, *yaml;
        int errors;
    } cases[] = {
        {PL_KIND_EXPORTER, "pyroscope",
         "endpoint: http://p:4040\nbearer_token: t\nbasic_auth: {username: u, password: p}\n", 1},
        {PL_KIND_EXPORTER, "pyroscope", "endpoint: http://p:4040\nbasic_auth: {username: u}\n", 0},
        {PL_KIND_RECEIVER, "pprof_scrape",
         "targets:\n  - endpoint: http://t:6060\n    bearer_token: t\n"
         "    basic_auth: {username: u}\n",
         1},
        {PL_KIND_RECEIVER, "pprof_scrape",
         "targets:\n  - endpoint: http://t:6060\n    bearer_token: t\n", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char msg[2048];
        CHECK_EQ_INT(decode_errors(cases[i].kind, cases[i].type, cases[i].yaml, msg, sizeof msg),
                     cases[i].errors);
        if (cases[i].errors)
            CHECK(strstr(msg, both) != NULL);
    }
}

/* A watched file is looked at once a second at most, and reports a change
 * of content (size or mtime), not a look at the same content. */
static void test_file_watch(void)
{
    char path[] = "/tmp/proflink_watch_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, "one", 3) == 3);
    pl_file_watch w = {{0, 0}, 0};
    CHECK(pl_file_stamp_of(path, &w.seen));
    CHECK_EQ_INT((int)w.seen.size, 3);
    uint64_t t = 10ull * 1000000000ull;
    CHECK_EQ_INT(pl_file_watch_poll(&w, path, t), 0); /* unchanged */
    REQUIRE(write(fd, "two", 3) == 3);
    CHECK_EQ_INT(pl_file_watch_poll(&w, path, t + 500000000ull), 0); /* too soon to look */
    CHECK_EQ_INT(pl_file_watch_poll(&w, path, t + 1000000000ull), 1);
    CHECK(pl_file_stamp_of(path, &w.seen)); /* the owner re-read it */
    CHECK_EQ_INT(pl_file_watch_poll(&w, path, t + 3000000000ull), 0);
    close(fd);
    unlink(path);
    CHECK_EQ_INT(pl_file_watch_poll(&w, path, t + 5000000000ull), -1);
    pl_file_stamp gone;
    CHECK(!pl_file_stamp_of(path, &gone));
    CHECK_EQ_INT((int)gone.size, 0);
    CHECK(!pl_file_stamp_of(NULL, &gone));
}

int main(void)
{
    PL_RUN(test_cors_glob);
    PL_RUN(test_cors_preflight);
    PL_RUN(test_cors_actual_request);
    PL_RUN(test_bearer_token);
    PL_RUN(test_basic_auth);
    PL_RUN(test_collector_auth_rules);
    PL_RUN(test_unknown_authenticator);
    PL_RUN(test_authenticator_replaced);
    PL_RUN(test_auth_threads);
    PL_RUN(test_tls_reload);
    PL_RUN(test_tls_config_errors);
    PL_RUN(test_client_credentials);
    PL_RUN(test_credentials_rule);
    PL_RUN(test_file_watch);
    return pl_test_done();
}
