/*
 * test_auth.c: the authentication extensions (extensions/auth.c,
 * basicauth.c, bearertokenauth.c) on their own: htpasswd parsing (files,
 * comments, CRLF, every password form, the line a mistake is on), the
 * parsing of the Authorization header, bearer token comparison (schemes,
 * other headers, rotation lists, token files re-read when they change),
 * the 401 and its challenge, the config checks, and the registry's
 * answers to listeners and exporters. Requests go through the HTTP
 * server's request path in memory (pl_http_server_feed).
 */
#include <crypt.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extensions/auth.h"
#include "ext_fixture.h"
#include "testlib.h"

static int handled;
static char handled_user[80];

static void handler(void *arg, pl_http_request *req, pl_http_response *res)
{
    (void)arg;
    handled++;
    snprintf(handled_user, sizeof(handled_user), "%s", req->auth_user ? req->auth_user : "");
    pl_http_respond(res, 200, NULL, 0, "ok", 2);
}

/* The status line's code of the answer to a request carrying `header` (a
 * whole "Name: value" line, or NULL for none); the answer in *out when
 * asked for (free it). */
static int status_with(const pl_authenticator *a, const char *header, char **out)
{
    pl_http_server_options opt = {.auth = &a->server};
    char req[8192];
    snprintf(req, sizeof(req), "POST /v1/traces HTTP/1.1\r\n%s%sContent-Length: 0\r\n\r\n",
             header ? header : "", header ? "\r\n" : "");
    char *answer = feed_to(&opt, handler, NULL, req);
    int code = 0;
    sscanf(answer, "HTTP/1.1 %d", &code);
    if (out)
        *out = answer;
    else
        free(answer);
    return code;
}

/* The same with "Authorization: Basic base64(user_pass)". */
static int basic_status(const pl_authenticator *a, const char *user_pass)
{
    unsigned char b64[512];
    EVP_EncodeBlock(b64, (const unsigned char *)user_pass, (int)strlen(user_pass));
    char line[600];
    snprintf(line, sizeof(line), "Authorization: Basic %s", b64);
    return status_with(a, line, NULL);
}

/* Creates extension `type` as `id` from `yaml` (the instance in *ext) and
 * finds it in the registry; NULL when either fails. */
static const pl_authenticator *make_auth(const char *type, const char *id, const char *yaml,
                                         void **ext)
{
    pl_err err = {{0}};
    *ext = make_ext(type, id, yaml, &err);
    if (!*ext) {
        fprintf(stderr, "  %s: %s\n", id, err.msg);
        return NULL;
    }
    return pl_auth_find(id, &err);
}

/* Writes `text` to `path` (replacing it). */
static bool write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    fputs(text, f);
    return fclose(f) == 0;
}

/* A temporary file holding `text`; its path in `path` (cap 64). */
static bool temp_file(char *path, const char *text)
{
    snprintf(path, 64, "/tmp/proflink-auth-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return false;
    close(fd);
    return write_file(path, text);
}

/* True when decoding `yaml` as extension `type`'s config gives exactly one
 * error, and it holds `text`. */
static bool decode_refused(const char *type, const char *yaml, const char *text)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    decode_ext(type, yaml, &errs);
    bool ok = errs.n == 1 && strstr(errs.items[0].text, text) != NULL;
    if (!ok)
        pl_cfg_errors_print(&errs, stderr);
    pl_cfg_errors_free(&errs);
    return ok;
}

/* make_auth with a config naming a temporary file that holds `text`:
 * `key_format` is the YAML with one %s for the file's path, which goes to
 * `path` (cap 64) for the caller to change and remove. */
static const pl_authenticator *make_auth_with_file(const char *type, const char *id,
                                                   const char *key_format, const char *text,
                                                   char *path, void **ext)
{
    *ext = NULL;
    if (!temp_file(path, text))
        return NULL;
    char yaml[256];
    snprintf(yaml, sizeof(yaml), key_format, path);
    return make_auth(type, id, yaml, ext);
}

/* ---- basicauth ----------------------------------------------------------- */

/* Every password form htpasswd and crypt(3) write, from a file with
 * comments, blank lines, CRLF line ends and trailing blanks. */
static void test_htpasswd_forms(void)
{
    /* bcrypt made here (cost 4: fast); SHA-256-crypt from
     * `openssl passwd -5 -salt abcdefgh hunter2` */
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    REQUIRE(crypt_gensalt_rn("$2b$", 4, NULL, 0, salt, sizeof(salt)) != NULL);
    struct crypt_data cd;
    memset(&cd, 0, sizeof(cd));
    const char *bcrypt = crypt_rn("hunter2", salt, &cd, (int)sizeof(cd));
    REQUIRE(bcrypt != NULL && bcrypt[0] == '$');
    char text[1024];
    snprintf(text, sizeof(text),
             "# users of the test\r\n"
             "\r\n"
             "ann:%s\r\n"
             "bo:$5$abcdefgh$XEPmEiAJvPG31m/DaIsyckkv.Sxd.8NrmElXxCKFQr/  \n"
             "cy:{SHA}87u9ZqY9S/F0eUBXjsPQEDUw4h0=\n"
             "dee:plain:with:colons",
             bcrypt);
    char path[64];
    void *ext;
    const pl_authenticator *a = make_auth_with_file("basicauth", "basicauth/forms",
                                                    "htpasswd: {file: %s}\n", text, path, &ext);
    REQUIRE(a != NULL);
    CHECK(a->client_header == NULL); /* a server-only instance */
    struct {
        const char *user_pass;
        int status;
    } cases[] = {
        {"ann:hunter2", 200},
        {"ann:hunter2", 200}, /* again: from the digest cache */
        {"ann:hunter3", 401},
        {"ann:", 401},
        {"bo:hunter2", 200},
        {"bo:hunter2 ", 401},
        {"cy:hunter2", 200},
        {"cy:Hunter2", 401},
        {"dee:plain:with:colons", 200}, /* the password is all after the first ':' */
        {"dee:plain", 401},
        {"nobody:hunter2", 401},
        {"ANN:hunter2", 401}, /* user names are case-sensitive */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        handled = 0;
        handled_user[0] = 0;
        int st = basic_status(a, cases[i].user_pass);
        CHECK_EQ_INT(st, cases[i].status);
        if (st != cases[i].status)
            fprintf(stderr, "  case %zu: %s\n", i, cases[i].user_pass);
        CHECK_EQ_INT(handled, cases[i].status == 200);
        if (cases[i].status == 200) /* the user name reaches the handler */
            CHECK(strncmp(cases[i].user_pass, handled_user, strlen(handled_user)) == 0 &&
                  cases[i].user_pass[strlen(handled_user)] == ':');
    }
    destroy_ext("basicauth", ext);
    unlink(path);
}

/* What the Authorization header may look like: the scheme in any case,
 * blanks around the credentials; refused: another scheme, bad base64, no
 * colon, an oversized value. Refusals are 401 with the Basic challenge and
 * never reach the handler. */
static void test_basic_header_parsing(void)
{
    pl_err err = {{0}};
    void *ext =
        make_ext("basicauth", "basicauth/hdr", "htpasswd: {inline: \"ann:hunter2\"}\n", &err);
    REQUIRE(ext != NULL);
    const pl_authenticator *a = pl_auth_find("basicauth/hdr", &err);
    REQUIRE(a != NULL);
    /* base64("ann:hunter2") = YW5uOmh1bnRlcjI= */
    struct {
        const char *line;
        int status;
    } cases[] = {
        {"Authorization: Basic YW5uOmh1bnRlcjI=", 200},
        {"authorization: bAsIc YW5uOmh1bnRlcjI=", 200},
        {"Authorization: Basic    YW5uOmh1bnRlcjI=   ", 200},
        {NULL, 401},
        {"Authorization: Bearer YW5uOmh1bnRlcjI=", 401},
        {"Authorization: BasicYW5uOmh1bnRlcjI=", 401},
        {"Authorization: Basic ", 401},
        {"Authorization: Basic YW5uOmh1bnRlcjI", 401},    /* not a multiple of 4 */
        {"Authorization: Basic YW5u*mh1bnRlcjI=", 401},   /* not base64 */
        {"Authorization: Basic YW5uaHVudGVyMg==", 401},   /* "annhunter2": no colon */
        {"Authorization: Basic Omh1bnRlcjI=", 401},       /* ":hunter2": no user */
        {"X-Authorization: Basic YW5uOmh1bnRlcjI=", 401}, /* another header */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        handled = 0;
        char *out = NULL;
        int st = status_with(a, cases[i].line, &out);
        CHECK_EQ_INT(st, cases[i].status);
        if (st != cases[i].status)
            fprintf(stderr, "  case %zu: %s\n", i, cases[i].line ? cases[i].line : "(none)");
        if (cases[i].status == 401) {
            CHECK(strstr(out, "WWW-Authenticate: Basic realm=\"proflink\"\r\n") != NULL);
            CHECK_EQ_INT(handled, 0);
        }
        free(out);
    }
    /* a value over 4 KiB is refused before decoding */
    char line[6000];
    int n = snprintf(line, sizeof(line), "Authorization: Basic ");
    memset(line + n, 'A', 4800);
    line[n + 4800] = 0;
    CHECK_EQ_INT(status_with(a, line, NULL), 401);
    destroy_ext("basicauth", ext);
}

/* A bad htpasswd line fails the start and names its place; so do an
 * unreadable file and Apache's MD5. */
static void test_htpasswd_errors(void)
{
    struct {
        const char *inline_text;
        const char *want;
    } cases[] = {
        {"ann:x\\nno-colon\\n", "htpasswd.inline line 2: expected user:password"},
        {"# c\\n\\n:nameless\\n", "htpasswd.inline line 3: expected user:password"},
        {"ann:$apr1$abc$def\\n", "htpasswd.inline line 1: $apr1$ (Apache MD5) is not supported"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char yaml[256];
        snprintf(yaml, sizeof(yaml), "htpasswd: {inline: \"%s\"}\n", cases[i].inline_text);
        pl_err err = {{0}};
        CHECK(make_ext("basicauth", "basicauth/bad", yaml, &err) == NULL);
        CHECK(strstr(err.msg, cases[i].want) != NULL);
        if (!strstr(err.msg, cases[i].want))
            fprintf(stderr, "  case %zu: %s\n", i, err.msg);
        CHECK(pl_auth_lookup("basicauth/bad") == NULL); /* nothing registered */
    }
    pl_err err = {{0}};
    CHECK(make_ext("basicauth", "basicauth/bad", "htpasswd: {file: /nonexistent/.htpasswd}\n",
                   &err) == NULL);
    CHECK(strstr(err.msg, "htpasswd.file /nonexistent/.htpasswd: cannot read") != NULL);
    /* the place in a file */
    char path[64];
    REQUIRE(temp_file(path, "ann:x\nbo:y\nbroken\n"));
    char yaml[128];
    snprintf(yaml, sizeof(yaml), "htpasswd: {file: %s}\n", path);
    CHECK(make_ext("basicauth", "basicauth/bad", yaml, &err) == NULL);
    char want[128];
    snprintf(want, sizeof(want), "%s line 3: expected user:password", path);
    CHECK(strstr(err.msg, want) != NULL);
    unlink(path);

    /* config checks */
    CHECK(decode_refused("basicauth", "{}\n", "needs htpasswd (receivers) or client_auth"));
    CHECK(decode_refused("basicauth", "client_auth: {username: \"a:b\", password: x}\n",
                         "username must not contain ':'"));
}

/* The users file is re-read when it changes (looked at once a second at
 * most); a file that turns bad keeps the users in use. */
static void test_htpasswd_reread(void)
{
    char path[64];
    void *ext;
    const pl_authenticator *a = make_auth_with_file(
        "basicauth", "basicauth/reread", "htpasswd: {file: %s}\n", "ann:one\n", path, &ext);
    REQUIRE(a != NULL);
    CHECK_EQ_INT(basic_status(a, "ann:one"), 200);
    /* a different size, so the change shows even within one mtime tick */
    REQUIRE(write_file(path, "ann:two2\nbo:three\n"));
    usleep(1100 * 1000); /* past the once-a-second look */
    CHECK_EQ_INT(basic_status(a, "ann:two2"), 200);
    CHECK_EQ_INT(basic_status(a, "bo:three"), 200);
    CHECK_EQ_INT(basic_status(a, "ann:one"), 401);
    /* broken: the previous users stay */
    REQUIRE(write_file(path, "no colon at all\n"));
    usleep(1100 * 1000);
    CHECK_EQ_INT(basic_status(a, "bo:three"), 200);
    destroy_ext("basicauth", ext);
    unlink(path);
}

/* ---- bearertokenauth ----------------------------------------------------- */

static void test_bearer_variants(void)
{
    struct {
        const char *yaml;
        const char *line;
        int status;
    } cases[] = {
        /* the default scheme, matched in any case; the token exactly */
        {"token: s3cret\n", "Authorization: Bearer s3cret", 200},
        {"token: s3cret\n", "Authorization: BEARER s3cret", 200},
        {"token: s3cret\n", "Authorization: Bearer   s3cret", 200},
        {"token: s3cret\n", "Authorization: Bearer S3cret", 401},
        {"token: s3cret\n", "Authorization: Bearer s3cret s3cret", 401},
        {"token: s3cret\n", "Authorization: Bearers3cret", 401},
        {"token: s3cret\n", "Authorization: Bearer", 401},
        {"token: s3cret\n", NULL, 401},
        /* another header, no scheme: the value is the token */
        {"token: k1\nheader: X-Api-Key\nscheme: \"\"\n", "X-Api-Key: k1", 200},
        {"token: k1\nheader: X-Api-Key\nscheme: \"\"\n", "x-api-key: k1", 200},
        {"token: k1\nheader: X-Api-Key\nscheme: \"\"\n", "X-Api-Key: Bearer k1", 401},
        {"token: k1\nheader: X-Api-Key\nscheme: \"\"\n", "Authorization: k1", 401},
        /* another scheme */
        {"token: k2\nscheme: Token\n", "Authorization: Token k2", 200},
        {"token: k2\nscheme: Token\n", "Authorization: Bearer k2", 401},
        /* rotation: any listed token */
        {"tokens: [old, new]\n", "Authorization: Bearer old", 200},
        {"tokens: [old, new]\n", "Authorization: Bearer new", 200},
        {"tokens: [old, new]\n", "Authorization: Bearer ne", 401},
        {"tokens: [old, new]\n", "Authorization: Bearer oldnew", 401},
        {"token: a\ntokens: [b]\n", "Authorization: Bearer a", 200},
        {"token: a\ntokens: [b]\n", "Authorization: Bearer b", 200},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        void *ext = NULL;
        const pl_authenticator *a =
            make_auth("bearertokenauth", "bearertokenauth/v", cases[i].yaml, &ext);
        REQUIRE(a != NULL);
        handled = 0;
        char *out = NULL;
        int st = status_with(a, cases[i].line, &out);
        CHECK_EQ_INT(st, cases[i].status);
        if (st != cases[i].status)
            fprintf(stderr, "  case %zu: %s / %s\n", i, cases[i].yaml, cases[i].line);
        if (cases[i].status == 401) {
            CHECK(strstr(out, "WWW-Authenticate: Bearer\r\n") != NULL);
            CHECK_EQ_INT(handled, 0);
        }
        free(out);
        destroy_ext("bearertokenauth", ext);
    }
}

/* What exporters send: "<header>: <scheme> <token>", the first token of a
 * list, the token alone without a scheme. */
static void test_bearer_client_header(void)
{
    struct {
        const char *yaml;
        const char *want;
    } cases[] = {
        {"token: s3cret\n", "Authorization: Bearer s3cret"},
        {"tokens: [first, second]\n", "Authorization: Bearer first"},
        {"token: k\nheader: X-Api-Key\nscheme: \"\"\n", "X-Api-Key: k"},
        {"token: k\nscheme: Token\n", "Authorization: Token k"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pl_err err = {{0}};
        void *ext = make_ext("bearertokenauth", "bearertokenauth/c", cases[i].yaml, &err);
        REQUIRE(ext != NULL);
        char *line = pl_auth_client_header_for(NULL, "bearertokenauth/c");
        CHECK_EQ_STR(line, cases[i].want);
        free(line);
        destroy_ext("bearertokenauth", ext);
    }
}

/* A token file: trailing newline and blanks dropped; re-read when it
 * changes; an unreadable file keeps the last token. */
static void test_bearer_token_file(void)
{
    char path[64];
    void *ext;
    const pl_authenticator *a = make_auth_with_file(
        "bearertokenauth", "bearertokenauth/f", "filename: %s\n", "first-token \t\r\n", path, &ext);
    REQUIRE(a != NULL);
    CHECK_EQ_INT(status_with(a, "Authorization: Bearer first-token", NULL), 200);
    REQUIRE(write_file(path, "second-token-longer\n"));
    usleep(1100 * 1000); /* past the once-a-second look */
    CHECK_EQ_INT(status_with(a, "Authorization: Bearer second-token-longer", NULL), 200);
    CHECK_EQ_INT(status_with(a, "Authorization: Bearer first-token", NULL), 401);
    char *line = pl_auth_client_header_line(a);
    CHECK_EQ_STR(line, "Authorization: Bearer second-token-longer");
    free(line);
    unlink(path);
    usleep(1100 * 1000);
    CHECK_EQ_INT(status_with(a, "Authorization: Bearer second-token-longer", NULL), 200);
    destroy_ext("bearertokenauth", ext);

    /* unreadable at start: refused with the file named */
    pl_err err = {{0}};
    CHECK(make_ext("bearertokenauth", "bearertokenauth/f", "filename: /nonexistent/token\n",
                   &err) == NULL);
    CHECK(strstr(err.msg, "filename /nonexistent/token: cannot read the token") != NULL);
    CHECK(pl_auth_lookup("bearertokenauth/f") == NULL);
}

/* An empty token never matches, not even an empty header value. */
static void test_bearer_empty_token(void)
{
    void *ext = NULL;
    const pl_authenticator *a =
        make_auth("bearertokenauth", "bearertokenauth/e",
                  "tokens: [\"\", real]\nheader: X-Key\nscheme: \"\"\n", &ext);
    REQUIRE(a != NULL);
    CHECK_EQ_INT(status_with(a, "X-Key: ", NULL), 401);
    CHECK_EQ_INT(status_with(a, "X-Key: real", NULL), 200);
    destroy_ext("bearertokenauth", ext);

    CHECK(decode_refused("bearertokenauth", "scheme: Bearer\n", "needs token, tokens or filename"));
    CHECK(decode_refused("bearertokenauth", "token: x\nheader: \"\"\n",
                         "'header': must not be empty"));
}

/* ---- the registry -------------------------------------------------------- */

/* Listeners need a server side, exporters a client side; each says which
 * is missing. Exporters' header follows what is registered now. */
static void test_registry_sides(void)
{
    pl_err err = {{0}};
    void *server = make_ext("basicauth", "basicauth/server", "htpasswd: {inline: \"a:b\"}\n", &err);
    void *client = make_ext("basicauth", "basicauth/client",
                            "client_auth: {username: a, password: b}\n", &err);
    REQUIRE(server && client);

    pl_listener_security sec;
    pl_auth_ref_config ref = {(char *)"basicauth/client"};
    CHECK(pl_listener_security_init(&sec, NULL, NULL, &ref, NULL, &err) == PL_ERR_INVALID);
    CHECK(strstr(err.msg, "'basicauth/client' has no server side") != NULL);
    ref.authenticator = (char *)"basicauth/server";
    REQUIRE(pl_listener_security_init(&sec, NULL, NULL, &ref, NULL, &err) == PL_OK);
    CHECK_EQ_STR(pl_listener_security_scheme(&sec), "http");
    pl_http_server_options opt = {0};
    pl_listener_security_apply(&sec, &opt);
    CHECK(opt.auth != NULL && opt.tls == NULL && opt.cors == NULL);
    CHECK_EQ_STR(opt.auth->challenge, "Basic realm=\"proflink\"");
    pl_listener_security_free(&sec);
    /* no authenticator configured: nothing applied */
    pl_auth_ref_config none = {NULL};
    REQUIRE(pl_listener_security_init(&sec, NULL, NULL, &none, NULL, &err) == PL_OK);
    opt = (pl_http_server_options){0};
    pl_listener_security_apply(&sec, &opt);
    CHECK(opt.auth == NULL);
    pl_listener_security_free(&sec);

    char *id = (char *)"x";
    CHECK(pl_auth_client_resolve(NULL, &ref, &id, &err) == PL_ERR_INVALID);
    CHECK(id == NULL);
    CHECK(strstr(err.msg, "'basicauth/server' has no client side") != NULL);
    ref.authenticator = (char *)"basicauth/missing";
    CHECK(pl_auth_client_resolve(NULL, &ref, &id, &err) == PL_ERR_INVALID);
    CHECK(strstr(err.msg, "'basicauth/missing' is not a running authentication extension") != NULL);
    CHECK(pl_auth_client_resolve(NULL, &none, &id, &err) == PL_OK);
    CHECK(id == NULL);
    ref.authenticator = (char *)"basicauth/client";
    REQUIRE(pl_auth_client_resolve(NULL, &ref, &id, &err) == PL_OK);
    CHECK_EQ_STR(id, "basicauth/client");
    char *line = pl_auth_client_header_for(NULL, id);
    CHECK_EQ_STR(line, "Authorization: Basic YTpi"); /* base64("a:b") */
    free(line);
    CHECK(pl_auth_client_header_for(NULL, NULL) == NULL);
    CHECK(pl_auth_client_header_line(NULL) == NULL);

    /* a reload's new instance under the same id wins while both exist */
    void *newer = make_ext("basicauth", "basicauth/client",
                           "client_auth: {username: c, password: d}\n", &err);
    REQUIRE(newer != NULL);
    line = pl_auth_client_header_for(NULL, id);
    CHECK_EQ_STR(line, "Authorization: Basic Yzpk"); /* base64("c:d") */
    free(line);
    destroy_ext("basicauth", client);
    line = pl_auth_client_header_for(NULL, id);
    CHECK_EQ_STR(line, "Authorization: Basic Yzpk");
    free(line);
    destroy_ext("basicauth", newer);
    CHECK(pl_auth_client_header_for(NULL, id) == NULL); /* gone: sent without credentials */
    free(id);
    destroy_ext("basicauth", server);
    CHECK(pl_auth_lookup("basicauth/server") == NULL);
}

int main(void)
{
    PL_RUN(test_htpasswd_forms);
    PL_RUN(test_basic_header_parsing);
    PL_RUN(test_htpasswd_errors);
    PL_RUN(test_htpasswd_reread);
    PL_RUN(test_bearer_variants);
    PL_RUN(test_bearer_client_header);
    PL_RUN(test_bearer_token_file);
    PL_RUN(test_bearer_empty_token);
    PL_RUN(test_registry_sides);
    return pl_test_done();
}
