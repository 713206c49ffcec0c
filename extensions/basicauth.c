/*
 * basicauth.c: the `basicauth` extension, as in the Collector.
 *
 *   basicauth/server:
 *     htpasswd:
 *       file: /etc/proflink/.htpasswd   # re-read when it changes
 *       inline: |
 *         alice:{SHA}...
 *   basicauth/client:
 *     client_auth: { username: u, password: p }
 *
 * Password forms (what `htpasswd -B` / `-s` and crypt(3) write): bcrypt
 * ($2y$, $2b$, $2a$), SHA-512/256-crypt ($6$, $5$), {SHA}, and plain text.
 * Apache's default $apr1$ (MD5) is refused at load with a hint to use -B:
 * libcrypt does not implement it and it is weak anyway.
 *
 * bcrypt is slow on purpose (tens of ms); a client sending the same valid
 * credentials on every request would pay it each time, so a verified
 * password is remembered per user as a salted SHA-256 digest and later
 * requests compare digests. The authenticated user name travels with the
 * request (pl_http_request.auth_user).
 */
#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config/decode.h"
#include "core/buf.h"
#include "core/file_stamp.h"
#include "core/log.h"
#include "extensions/auth.h"
#include "net/http_auth.h"

#include "extensions/basicauth.config.h"

static int basic_validate(void *cfg, pl_cfg_ctx *ctx)
{
    basic_cfg *c = cfg;
    bool server = (c->htpasswd.file && *c->htpasswd.file) ||
                  (c->htpasswd.inline_text && *c->htpasswd.inline_text);
    bool client = c->client_auth.username && *c->client_auth.username;
    if (pl_cfg_node_key(ctx->map, "htpasswd") && pl_cfg_node_key(ctx->map, "client_auth")) {
        /* as in the Collector: one instance is a server or a client one */
        pl_cfg_errorf(ctx, "client_auth",
                      "set htpasswd (receivers) or client_auth (exporters), not both; define "
                      "two extensions, e.g. basicauth/server and basicauth/client");
        return 1;
    }
    if (!server && !client) {
        pl_cfg_errorf(ctx, NULL, "needs htpasswd (receivers) or client_auth (exporters)");
        return 1;
    }
    if (c->client_auth.username && strchr(c->client_auth.username, ':')) {
        pl_cfg_errorf(ctx, "client_auth", "username must not contain ':'");
        return 1;
    }
    return 0;
}

#include "extensions/basicauth.config.inc"

typedef struct user {
    char *name;
    char *hash;
    bool verified; /* digest holds a verified password's salted SHA-256 */
    uint8_t digest[32];
} user;

typedef struct basic {
    pl_auth_instance base; /* authenticator, id and the lock `base.mu` */
    char *file;
    char *inline_text;
    user *users;
    size_t n_users;
    pl_file_watch watch; /* of `file` */
    uint8_t salt[16];
    char *client_value; /* "Basic base64(user:pass)" */
    /* Receivers on several worker threads check at once: `base.mu` guards the
     * users (replaced when the file changes), their verified-digest cache
     * and the re-read clock. The slow part, crypt() of a bcrypt or SHA-crypt
     * hash, runs outside it, on a copy of the hash; `generation` tells the
     * caller whether the users it verified against are still the current
     * ones before it caches the result. */
    uint64_t generation;
} basic;

static void users_free(user *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(u[i].name);
        free(u[i].hash);
    }
    free(u);
}

/* Parses htpasswd lines into users; -1 with err on a bad line. */
static int parse_lines(const char *text, const char *where, user **users, size_t *n, pl_err *err)
{
    const char *p = text;
    int line = 0;
    while (p && *p) {
        line++;
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (p[len - 1] == '\r' || p[len - 1] == ' '))
            len--;
        const char *colon = memchr(p, ':', len);
        if (len && p[0] != '#') {
            if (!colon || colon == p) {
                pl_errf(err, PL_ERR_INVALID, "%s line %d: expected user:password", where, line);
                return -1;
            }
            size_t hl = len - (size_t)(colon + 1 - p);
            if (hl >= 6 && strncmp(colon + 1, "$apr1$", 6) == 0) {
                pl_errf(err, PL_ERR_INVALID,
                        "%s line %d: $apr1$ (Apache MD5) is not supported; create the entry "
                        "with htpasswd -B (bcrypt)",
                        where, line);
                return -1;
            }
            user *grown = realloc(*users, (*n + 1) * sizeof(user));
            if (!grown)
                return pl_errf(err, PL_ERR_NOMEM, "out of memory"), -1;
            *users = grown;
            user *u = &grown[*n];
            memset(u, 0, sizeof(*u));
            u->name = strndup(p, (size_t)(colon - p));
            u->hash = strndup(colon + 1, hl);
            (*n)++;
            if (!u->name || !u->hash)
                return pl_errf(err, PL_ERR_NOMEM, "out of memory"), -1;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

static char *read_file(const char *path, pl_file_stamp *stamp)
{
    if (!pl_file_stamp_of(path, stamp) || stamp->size > 16 * 1024 * 1024)
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc((size_t)stamp->size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)stamp->size, f) : 0;
    fclose(f);
    if (!buf)
        return NULL;
    buf[n] = 0;
    return buf;
}

static int load_users(basic *b, pl_err *err)
{
    user *users = NULL;
    size_t n = 0;
    pl_file_stamp stamp = {0, 0};
    if (b->file) {
        char *text = read_file(b->file, &stamp);
        if (!text) {
            pl_errf(err, PL_ERR_INVALID, "htpasswd.file %s: cannot read", b->file);
            return -1;
        }
        int rc = parse_lines(text, b->file, &users, &n, err);
        free(text);
        if (rc != 0) {
            users_free(users, n);
            return -1;
        }
    }
    if (b->inline_text && parse_lines(b->inline_text, "htpasswd.inline", &users, &n, err) != 0) {
        users_free(users, n);
        return -1;
    }
    users_free(b->users, b->n_users);
    b->users = users;
    b->n_users = n;
    b->generation++;
    b->watch.seen = stamp;
    return 0;
}

static void maybe_reload(basic *b)
{
    if (!b->file || pl_file_watch_poll(&b->watch, b->file, pl_time_mono_ns()) <= 0)
        return;
    pl_err err = {{0}};
    if (load_users(b, &err) == 0)
        pl_info(b->base.id, "users re-read from %s", b->file);
    else
        pl_warn(b->base.id, "%s; keeping the previous users", err.msg);
}

static void salted_digest(const basic *b, const char *pw, size_t len, uint8_t out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n = 0;
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
        EVP_DigestUpdate(ctx, b->salt, sizeof(b->salt)) != 1 ||
        EVP_DigestUpdate(ctx, pw, len) != 1 || EVP_DigestFinal_ex(ctx, out, &n) != 1)
        memset(out, 0, 32);
    EVP_MD_CTX_free(ctx);
}

/* Checks pw against an htpasswd hash (a copy: called without b->base.mu). */
static bool verify_hash(const char *h, const char *pw, size_t len)
{
    bool ok = false;
    if (strncmp(h, "{SHA}", 5) == 0) {
        uint8_t sha[SHA_DIGEST_LENGTH];
        SHA1((const unsigned char *)pw, len, sha);
        char enc[64];
        EVP_EncodeBlock((unsigned char *)enc, sha, SHA_DIGEST_LENGTH);
        ok = strlen(h + 5) == strlen(enc) && CRYPTO_memcmp(h + 5, enc, strlen(enc)) == 0;
    } else if (h[0] == '$') {
        char *plain = strndup(pw, len);
        if (!plain)
            return false;
        /* large (about 32 KiB): one per thread rather than on the stack */
        static _Thread_local struct crypt_data cd;
        memset(&cd, 0, sizeof(cd));
        /* crypt_rn: libxcrypt's variant that returns NULL on failure (and
         * that sanitizers do not intercept) */
        const char *out = crypt_rn(plain, h, &cd, (int)sizeof(cd));
        ok = out && out[0] != '*' && strlen(out) == strlen(h) &&
             CRYPTO_memcmp(out, h, strlen(h)) == 0;
        OPENSSL_cleanse(plain, len);
        OPENSSL_cleanse(&cd, sizeof(cd));
        free(plain);
    } else {
        ok = strlen(h) == len && CRYPTO_memcmp(h, pw, len) == 0;
    }
    return ok;
}

/* The user named `name`, with b->base.mu held; NULL when unknown. */
static user *find_user(basic *b, const unsigned char *name, size_t len)
{
    for (size_t i = 0; i < b->n_users; i++) {
        user *u = &b->users[i];
        if (strlen(u->name) == len && memcmp(u->name, name, len) == 0)
            return u;
    }
    return NULL;
}

/* Verifies user `name`'s password. A crypt() hash verified once is
 * remembered as a salted SHA-256 of the password, so the next requests of
 * that client cost a digest instead of a bcrypt. */
static bool verify(basic *b, const unsigned char *name, size_t name_len, const char *pw, size_t len)
{
    uint8_t d[32];
    pthread_mutex_lock(&b->base.mu);
    maybe_reload(b);
    user *u = find_user(b, name, name_len);
    if (!u) {
        pthread_mutex_unlock(&b->base.mu);
        return false;
    }
    if (u->verified) {
        bool hit;
        salted_digest(b, pw, len, d);
        hit = CRYPTO_memcmp(d, u->digest, 32) == 0;
        if (hit) {
            pthread_mutex_unlock(&b->base.mu);
            return true;
        }
    }
    char *h = strdup(u->hash);
    uint64_t generation = b->generation;
    pthread_mutex_unlock(&b->base.mu);
    if (!h)
        return false;
    bool ok = verify_hash(h, pw, len);
    if (ok && h[0] == '$') {
        salted_digest(b, pw, len, d);
        pthread_mutex_lock(&b->base.mu);
        /* the users may have been re-read meanwhile: cache only into the
         * same generation's entry */
        if (b->generation == generation && (u = find_user(b, name, name_len)) &&
            strcmp(u->hash, h) == 0) {
            memcpy(u->digest, d, 32);
            u->verified = true;
        }
        pthread_mutex_unlock(&b->base.mu);
    }
    OPENSSL_cleanse(d, sizeof(d));
    free(h);
    return ok;
}

static bool basic_check(void *arg, const pl_http_request *req, char *user_out, size_t cap)
{
    basic *b = arg;
    size_t len = 0;
    const char *v = pl_http_header_get(req, "authorization", &len);
    if (!v || len < 7 || strncasecmp(v, "Basic ", 6) != 0 || len > 4096)
        return false;
    v += 6;
    len -= 6;
    while (len && *v == ' ')
        v++, len--;
    while (len && v[len - 1] == ' ')
        len--;
    if (len == 0 || len % 4)
        return false;
    unsigned char dec[3072 + 4];
    int n = EVP_DecodeBlock(dec, (const unsigned char *)v, (int)len);
    if (n < 0)
        return false;
    /* EVP_DecodeBlock counts padding as zero bytes */
    if (v[len - 1] == '=')
        n--;
    if (v[len - 2] == '=')
        n--;
    const unsigned char *colon = memchr(dec, ':', (size_t)n);
    if (!colon)
        return false;
    size_t ulen = (size_t)(colon - dec);
    const char *pw = (const char *)colon + 1;
    size_t pwlen = (size_t)n - ulen - 1;
    bool ok = verify(b, dec, ulen, pw, pwlen);
    if (ok && cap) {
        size_t k = ulen < cap - 1 ? ulen : cap - 1;
        memcpy(user_out, dec, k);
        user_out[k] = 0;
    }
    OPENSSL_cleanse(dec, sizeof(dec));
    return ok;
}

static bool basic_client(void *arg, char *name, size_t name_cap, char *value, size_t value_cap)
{
    basic *b = arg;
    if (!b->client_value)
        return false;
    snprintf(name, name_cap, "Authorization");
    snprintf(value, value_cap, "%s", b->client_value);
    return true;
}

/* Frees an instance (also the pl_authenticator's release hook). */
static void basic_free(void *arg)
{
    basic *b = arg;
    free(b->file);
    free(b->inline_text);
    free(b->client_value);
    users_free(b->users, b->n_users);
    pl_auth_instance_free(&b->base);
}

static pl_status basic_create(const pl_create_settings *settings, const void *config, void **out,
                              pl_err *err)
{
    const basic_cfg *c = config;
    basic *b = pl_auth_instance_new(sizeof(*b), settings, "basicauth", err);
    if (!b)
        return PL_ERR_NOMEM;
    if (c->htpasswd.file && *c->htpasswd.file)
        b->file = strdup(c->htpasswd.file);
    if (c->htpasswd.inline_text && *c->htpasswd.inline_text)
        b->inline_text = strdup(c->htpasswd.inline_text);
    if (RAND_bytes(b->salt, sizeof(b->salt)) != 1) {
        basic_free(b);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    if ((b->file || b->inline_text) && load_users(b, err) != 0) {
        basic_free(b);
        return PL_ERR_INVALID;
    }
    if (c->client_auth.username && *c->client_auth.username) {
        b->client_value =
            pl_http_basic_credentials(c->client_auth.username, c->client_auth.password);
        if (!b->client_value) {
            basic_free(b);
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
    }
    b->watch.checked_ns = pl_time_mono_ns();
    pl_auth_register_as(&b->base.a, b->base.id, "Basic realm=\"proflink\"",
                        (b->file || b->inline_text) ? basic_check : NULL,
                        b->client_value ? basic_client : NULL, basic_free, b);
    *out = b;
    return PL_OK;
}

const pl_component_type pl_extension_basicauth = {
    PL_COMPONENT_HEAD("basicauth", PL_KIND_EXTENSION, 0, &basic_section),
    .description = "HTTP basic authentication: receivers check users from an htpasswd file or "
                   "inline lines (401 / UNAUTHENTICATED otherwise), exporters send client_auth",
    .create = basic_create,
    .destroy = pl_auth_extension_destroy,
};
