/*
 * tls.c: server-side TLS with OpenSSL memory BIOs. See tls.h.
 *
 * Choices:
 *   - TLS 1.2 is the floor (the Collector's default too); renegotiation is
 *     off (a client-driven CPU cost with no use here) and so is compression.
 *   - Idle connections release their record buffers (SSL_MODE_RELEASE_
 *     BUFFERS): a thousand idle keep-alive clients should not each hold
 *     ~34 KiB of OpenSSL buffers.
 *   - Mutual TLS is "verify peer, fail if no certificate": a client without
 *     a certificate, or with one the CAs did not sign (or expired), fails the
 *     handshake with an alert; the HTTP layer never sees it.
 *   - Reloading compares the files' mtime and size with the last load, so a
 *     reload_interval of seconds costs three stat() calls per tick.
 *   - Listeners may run on worker loops (service.workers) while SIGHUP is
 *     handled on the pipeline loop: list_mu guards the list of live contexts
 *     (held through a SIGHUP reload, so a context cannot be freed under
 *     it), ctx_mu each context's current SSL_CTX. A connection takes its
 *     own reference (SSL_new) under ctx_mu, so swapping in a reloaded
 *     SSL_CTX never frees one a connection uses.
 */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file_stamp.h"
#include "core/log.h"

/* ---- configuration ------------------------------------------------------ */

static int version_ok(const char *v)
{
    return !v || !*v || strcmp(v, "1.2") == 0 || strcmp(v, "1.3") == 0;
}

static int validate_tls(void *cfg, pl_cfg_ctx *ctx)
{
    pl_tls_server_config *c = cfg;
    int errors = 0;
    bool cert = c->cert_file && *c->cert_file;
    bool key = c->key_file && *c->key_file;
    errors += pl_cfg_check(ctx, cert == key, cert ? "key_file" : "cert_file",
                           "cert_file and key_file go together (TLS needs both)");
    errors += pl_cfg_check(ctx, !(c->client_ca_file && *c->client_ca_file && !cert),
                           "client_ca_file", "mutual TLS needs cert_file and key_file too");
    errors += pl_cfg_check(ctx, version_ok(c->min_version), "min_version",
                           "'%s': use \"1.2\" or \"1.3\"", c->min_version);
    errors += pl_cfg_check(ctx, version_ok(c->max_version), "max_version",
                           "'%s': use \"1.2\" or \"1.3\"", c->max_version);
    return errors;
}

#include "net/tls.config.inc"

bool pl_tls_server_config_enabled(const pl_tls_server_config *cfg)
{
    return cfg && cfg->cert_file && *cfg->cert_file;
}

/* ---- contexts ----------------------------------------------------------- */

struct pl_tls_server {
    pl_tls_server *prev, *next; /* live contexts, for SIGHUP */
    char *name;
    char *cert_file, *key_file, *client_ca_file;
    int min_version, max_version;
    uint64_t reload_interval_ms;
    unsigned alpn; /* ALPN_H2 | ALPN_HTTP1 */
    SSL_CTX *ctx;
    pl_file_stamp stamps[3];
};

#define ALPN_H2    1u
#define ALPN_HTTP1 2u

static pl_tls_server *live;
static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

static int parse_version(const char *v, int fallback)
{
    if (!v || !*v)
        return fallback;
    return strcmp(v, "1.3") == 0 ? TLS1_3_VERSION : TLS1_2_VERSION;
}

/* The most specific OpenSSL error queued, as text; clears the queue. */
static void ssl_error_text(char *out, size_t cap)
{
    unsigned long e, last = 0;
    while ((e = ERR_get_error()) != 0)
        last = e;
    if (!last) {
        snprintf(out, cap, "unknown TLS error");
        return;
    }
    const char *reason = ERR_reason_error_string(last);
    snprintf(out, cap, "%s", reason ? reason : "TLS error");
}

/* ALPN: the server's preference (h2 first) among what the client offers.
 * With no overlap the handshake goes on without ALPN, and the HTTP layer
 * tells the protocols apart by the client preface as in cleartext. */
static int on_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    unsigned allowed = (unsigned)(uintptr_t)arg;
    static const struct {
        unsigned flag;
        const char *name;
    } prefs[] = {{ALPN_H2, "h2"}, {ALPN_HTTP1, "http/1.1"}};
    for (size_t p = 0; p < 2; p++) {
        if (!(allowed & prefs[p].flag))
            continue;
        size_t n = strlen(prefs[p].name);
        for (unsigned i = 0; i < inlen;) {
            unsigned len = in[i];
            if (i + 1 + len > inlen)
                break;
            if (len == n && memcmp(in + i + 1, prefs[p].name, n) == 0) {
                *out = in + i + 1;
                *outlen = (unsigned char)len;
                return SSL_TLSEXT_ERR_OK;
            }
            i += 1 + len;
        }
    }
    return SSL_TLSEXT_ERR_NOACK;
}

static SSL_CTX *build_ctx(pl_tls_server *t, pl_err *err)
{
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        ssl_error_text(why, sizeof(why));
        pl_errf(err, PL_ERR_INTERNAL, "tls: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, t->min_version);
    if (t->max_version)
        SSL_CTX_set_max_proto_version(ctx, t->max_version);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    /* AES-128-GCM first (with the server's preference): the cipher is most
     * of what TLS costs per byte received, and AES-128 decrypts about 1.7x
     * faster than AES-256 on AES-NI machines, at a security level nobody
     * questions (Go's and BoringSSL's defaults make the same choice). */
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256:"
                                  "TLS_AES_256_GCM_SHA384");
    SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                 "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
                                 "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384");
    if (SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1) {
        ssl_error_text(why, sizeof(why));
        pl_errf(err, PL_ERR_INVALID, "tls.cert_file %s: %s", t->cert_file, why);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) != 1) {
        ssl_error_text(why, sizeof(why));
        pl_errf(err, PL_ERR_INVALID, "tls.key_file %s: %s", t->key_file, why);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        pl_errf(err, PL_ERR_INVALID, "tls.key_file %s does not match tls.cert_file %s", t->key_file,
                t->cert_file);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (t->client_ca_file) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(t->client_ca_file);
        if (!names || SSL_CTX_load_verify_locations(ctx, t->client_ca_file, NULL) != 1) {
            ssl_error_text(why, sizeof(why));
            pl_errf(err, PL_ERR_INVALID, "tls.client_ca_file %s: %s", t->client_ca_file,
                    names ? why : "no certificate in it");
            if (names)
                sk_X509_NAME_pop_free(names, X509_NAME_free);
            SSL_CTX_free(ctx);
            return NULL;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        /* Resumed sessions keep the verified identity; the id context ties
         * them to this listener. */
        static const unsigned char sid[] = "proflink";
        SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    }
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn_select, (void *)(uintptr_t)t->alpn);
    return ctx;
}

pl_tls_server *pl_tls_server_new(const pl_tls_server_config *cfg, bool h2, bool http1,
                                 const char *name, pl_err *err)
{
    if (!pl_tls_server_config_enabled(cfg) || !cfg->key_file || !*cfg->key_file) {
        pl_errf(err, PL_ERR_INVALID, "tls: cert_file and key_file are required");
        return NULL;
    }
    pl_tls_server *t = calloc(1, sizeof(*t));
    if (!t) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    t->name = strdup(name ? name : "tls");
    t->cert_file = dup_or_null(cfg->cert_file);
    t->key_file = dup_or_null(cfg->key_file);
    t->client_ca_file = dup_or_null(cfg->client_ca_file);
    t->min_version = parse_version(cfg->min_version, TLS1_2_VERSION);
    t->max_version = parse_version(cfg->max_version, 0);
    t->reload_interval_ms =
        cfg->reload_interval_ns > 0 ? (uint64_t)(cfg->reload_interval_ns / 1000000) : 0;
    if (cfg->reload_interval_ns > 0 && t->reload_interval_ms == 0)
        t->reload_interval_ms = 1;
    t->alpn = (h2 ? ALPN_H2 : 0) | (http1 ? ALPN_HTTP1 : 0);
    if (!t->name || !t->cert_file || !t->key_file ||
        (cfg->client_ca_file && *cfg->client_ca_file && !t->client_ca_file)) {
        pl_tls_server_free(t);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (pl_tls_server_reload(t, true, err) < 0) {
        pl_tls_server_free(t);
        return NULL;
    }
    pthread_mutex_lock(&list_mu);
    t->next = live;
    if (live)
        live->prev = t;
    live = t;
    pthread_mutex_unlock(&list_mu);
    return t;
}

int pl_tls_server_reload(pl_tls_server *t, bool force, pl_err *err)
{
    pl_file_stamp now[3];
    pl_file_stamp_of(t->cert_file, &now[0]);
    pl_file_stamp_of(t->key_file, &now[1]);
    pl_file_stamp_of(t->client_ca_file, &now[2]);
    pthread_mutex_lock(&ctx_mu);
    bool same = t->ctx && memcmp(now, t->stamps, sizeof(now)) == 0;
    pthread_mutex_unlock(&ctx_mu);
    if (!force && same)
        return 0;
    SSL_CTX *ctx = build_ctx(t, err); /* file reads: outside the lock */
    pthread_mutex_lock(&ctx_mu);
    /* Remember a failed state too: the same broken files are not retried
     * (and logged) on every tick, only once they change. */
    memcpy(t->stamps, now, sizeof(now));
    SSL_CTX *old = ctx ? t->ctx : NULL;
    if (ctx)
        t->ctx = ctx;
    pthread_mutex_unlock(&ctx_mu);
    if (old)
        SSL_CTX_free(old); /* connections using it hold their own reference */
    return ctx ? 1 : -1;
}

uint64_t pl_tls_server_reload_interval_ms(const pl_tls_server *t)
{
    return t->reload_interval_ms;
}

bool pl_tls_server_mutual(const pl_tls_server *t)
{
    return t->client_ca_file != NULL;
}

void pl_tls_server_free(pl_tls_server *t)
{
    if (!t)
        return;
    pthread_mutex_lock(&list_mu);
    if (t->prev)
        t->prev->next = t->next;
    else if (live == t)
        live = t->next;
    if (t->next)
        t->next->prev = t->prev;
    pthread_mutex_unlock(&list_mu);
    if (t->ctx)
        SSL_CTX_free(t->ctx);
    free(t->name);
    free(t->cert_file);
    free(t->key_file);
    free(t->client_ca_file);
    free(t);
}

void pl_tls_reload_all(void)
{
    pthread_mutex_lock(&list_mu); /* no context is freed meanwhile */
    for (pl_tls_server *t = live; t; t = t->next) {
        pl_err err = {{0}};
        int rc = pl_tls_server_reload(t, true, &err);
        if (rc < 0)
            pl_error(t->name, "TLS files not reloaded, the previous ones stay: %s", err.msg);
        else
            pl_info(t->name, "TLS certificate reloaded from %s", t->cert_file);
    }
    pthread_mutex_unlock(&list_mu);
}

/* ---- connections -------------------------------------------------------- */

struct pl_tls_conn {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    bool failed;
    char peer_name[128];
    bool peer_checked;
    char error[160];
};

pl_tls_conn *pl_tls_conn_new(pl_tls_server *t)
{
    pl_tls_conn *tc = calloc(1, sizeof(*tc));
    if (!tc)
        return NULL;
    pthread_mutex_lock(&ctx_mu);
    tc->ssl = SSL_new(t->ctx); /* holds its own reference to the SSL_CTX */
    pthread_mutex_unlock(&ctx_mu);
    tc->rbio = BIO_new(BIO_s_mem());
    tc->wbio = BIO_new(BIO_s_mem());
    if (!tc->ssl || !tc->rbio || !tc->wbio) {
        SSL_free(tc->ssl);
        BIO_free(tc->rbio);
        BIO_free(tc->wbio);
        free(tc);
        return NULL;
    }
    /* An empty input BIO means "wait for more", not end of stream. */
    BIO_set_mem_eof_return(tc->rbio, -1);
    SSL_set_bio(tc->ssl, tc->rbio, tc->wbio);
    SSL_set_accept_state(tc->ssl);
    return tc;
}

void pl_tls_conn_free(pl_tls_conn *tc)
{
    if (!tc)
        return;
    SSL_free(tc->ssl); /* frees the BIOs */
    free(tc);
}

static void conn_failed(pl_tls_conn *tc)
{
    char why[128];
    ssl_error_text(why, sizeof(why));
    long v = SSL_get_verify_result(tc->ssl);
    if (v != X509_V_OK)
        snprintf(tc->error, sizeof(tc->error), "%s (%s)", why, X509_verify_cert_error_string(v));
    else
        snprintf(tc->error, sizeof(tc->error), "%s", why);
    tc->failed = true;
}

int pl_tls_conn_input(pl_tls_conn *tc, const uint8_t *data, size_t len, pl_tls_deliver deliver,
                      void *arg, uint8_t *scratch, size_t scratch_len)
{
    if (tc->failed)
        return -1;
    if (len && BIO_write(tc->rbio, data, (int)len) != (int)len) {
        snprintf(tc->error, sizeof(tc->error), "out of memory");
        tc->failed = true;
        return -1;
    }
    for (;;) {
        int n = SSL_read(tc->ssl, scratch, (int)scratch_len);
        if (n > 0) {
            if (!deliver(arg, scratch, (size_t)n))
                return 0;
            continue;
        }
        int e = SSL_get_error(tc->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            return 0;
        if (e == SSL_ERROR_ZERO_RETURN) /* close_notify: the peer is done */
            return 0;
        conn_failed(tc);
        return -1;
    }
}

int pl_tls_conn_encrypt(pl_tls_conn *tc, const uint8_t *data, size_t len)
{
    if (tc->failed)
        return -1;
    while (len) {
        int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
        int n = SSL_write(tc->ssl, data, chunk);
        if (n <= 0) {
            conn_failed(tc);
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

void pl_tls_conn_close_notify(pl_tls_conn *tc)
{
    if (!tc->failed && SSL_is_init_finished(tc->ssl))
        SSL_shutdown(tc->ssl);
    ERR_clear_error();
}

uint8_t *pl_tls_conn_take_output(pl_tls_conn *tc, size_t *len)
{
    size_t pending = BIO_ctrl_pending(tc->wbio);
    *len = 0;
    if (!pending)
        return NULL;
    uint8_t *out = malloc(pending);
    if (!out)
        return NULL;
    int n = BIO_read(tc->wbio, out, (int)pending);
    if (n <= 0) {
        free(out);
        return NULL;
    }
    *len = (size_t)n;
    return out;
}

bool pl_tls_conn_established(const pl_tls_conn *tc)
{
    return SSL_is_init_finished(tc->ssl);
}

const char *pl_tls_conn_alpn(const pl_tls_conn *tc)
{
    const unsigned char *p = NULL;
    unsigned int n = 0;
    SSL_get0_alpn_selected(tc->ssl, &p, &n);
    if (!p || n == 0)
        return "";
    return n == 2 ? "h2" : "http/1.1";
}

const char *pl_tls_conn_peer_name(const pl_tls_conn *tc)
{
    pl_tls_conn *m = (pl_tls_conn *)tc;
    if (!m->peer_checked && SSL_is_init_finished(m->ssl)) {
        m->peer_checked = true;
        X509 *cert = SSL_get0_peer_certificate(m->ssl);
        if (cert && SSL_get_verify_result(m->ssl) == X509_V_OK) {
            X509_NAME *subject = X509_get_subject_name(cert);
            if (X509_NAME_get_text_by_NID(subject, NID_commonName, m->peer_name,
                                          (int)sizeof(m->peer_name)) <= 0)
                m->peer_name[0] = 0;
        }
    }
    return m->peer_name[0] ? m->peer_name : NULL;
}

const char *pl_tls_conn_error(const pl_tls_conn *tc)
{
    return tc->error[0] ? tc->error : "TLS error";
}
