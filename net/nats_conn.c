/*
 * nats_conn.c: opening a NATS connection from the `nats` components' keys,
 * and checking those keys (net/nats_conn.h says why libnats keeps its own
 * threads).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "net/nats_conn.h"

#include "net/nats.config.inc"

static bool set(const char *s)
{
    return s && s[0];
}

static bool url_scheme_ok(const char *url)
{
    static const char *const schemes[] = {"nats://", "tls://", "ws://", "wss://"};
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
            return url[strlen(schemes[i])] != 0;
    /* libnats also takes host:port without a scheme */
    return strstr(url, "://") == NULL && url[0] != 0;
}

static bool endpoint_ok(const char *endpoint)
{
    char buf[1024];
    if (strlen(endpoint) >= sizeof(buf))
        return false;
    snprintf(buf, sizeof(buf), "%s", endpoint);
    char *save = NULL;
    int n = 0;
    for (char *url = strtok_r(buf, ",", &save); url; url = strtok_r(NULL, ",", &save)) {
        while (*url == ' ')
            url++;
        if (!url_scheme_ok(url) || strchr(url, ' '))
            return false;
        n++;
    }
    return n > 0;
}

int pl_nats_validate_connection(pl_cfg_ctx *ctx, const char *endpoint,
                                const pl_nats_token_config *token, const pl_nats_user_config *user,
                                const pl_nats_nkey_config *nkey,
                                const pl_nats_nkey_jwt_config *nkey_jwt,
                                const pl_nats_nkey_user_file_config *creds)
{
    int errors = 0;
    errors += pl_cfg_check(ctx, set(endpoint) && endpoint_ok(endpoint), "endpoint",
                           "must be a NATS URL such as nats://localhost:4222 (several: "
                           "comma-separated), got \"%s\"",
                           endpoint ? endpoint : "");
    bool has_user = set(user->username) || set(user->password);
    errors += pl_cfg_check(ctx, !has_user || (set(user->username) && set(user->password)), "user",
                           "needs both username and password");
    errors += pl_cfg_check(ctx, !set(nkey->public_key) && !set(nkey->seed), "nkey",
                           "is not supported by proflink; put the key in a credentials file "
                           "and use nkey_user_file");
    errors += pl_cfg_check(ctx, !set(nkey_jwt->jwt) && !set(nkey_jwt->seed), "nkey_jwt",
                           "is not supported by proflink; put the JWT and seed in a credentials "
                           "file and use nkey_user_file");
    int methods = set(token->token) + has_user + set(creds->user_file);
    errors += pl_cfg_check(ctx, methods <= 1, "token",
                           "token, user and nkey_user_file exclude each other: set one");
    return errors;
}

bool pl_nats_subject_valid(const char *subject, bool wildcards)
{
    if (!set(subject))
        return false;
    const char *p = subject;
    for (;;) {
        const char *end = strchr(p, '.');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0)
            return false;
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)p[i];
            if (c <= ' ' || c == 0x7f)
                return false;
            if ((c == '*' || c == '>') && (!wildcards || len != 1))
                return false;
        }
        if (p[0] == '>' && end) /* '>' only as the last token */
            return false;
        if (!end)
            return true;
        p = end + 1;
    }
}

bool pl_nats_name_valid(const char *name)
{
    if (!set(name) || strlen(name) > 255)
        return false;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p <= ' ' || *p == 0x7f || *p == '.' || *p == '*' || *p == '>' || *p == '/' ||
            *p == '\\')
            return false;
    return true;
}

int pl_nats_marshaler_parse(const char *text, bool *json)
{
    if (!set(text) || strcmp(text, "otlp_proto") == 0) {
        *json = false;
        return 0;
    }
    if (strcmp(text, "otlp_json") == 0) {
        *json = true;
        return 0;
    }
    return -1;
}

static pl_status nats_fail(pl_err *err, natsStatus s, const char *what)
{
    natsStatus last = NATS_OK;
    const char *text = nats_GetLastError(&last);
    return pl_errf(err, PL_ERR_INVALID, "%s: %s%s%s", what, natsStatus_GetText(s),
                   text && text[0] ? ": " : "", text && text[0] ? text : "");
}

static void on_disconnected(natsConnection *nc, void *closure)
{
    if (natsConnection_IsClosed(nc)) /* closed by proflink itself */
        return;
    pl_warn((const char *)closure, "disconnected from NATS; reconnecting");
}

static void on_connected(natsConnection *nc, void *closure)
{
    char url[256] = "";
    natsConnection_GetConnectedUrl(nc, url, sizeof(url));
    pl_info((const char *)closure, "connected to NATS at %s", url);
}

static void on_reconnected(natsConnection *nc, void *closure)
{
    char url[256] = "";
    natsConnection_GetConnectedUrl(nc, url, sizeof(url));
    pl_info((const char *)closure, "reconnected to NATS at %s", url);
}

static char *dup_opt(const char *s, bool *ok)
{
    if (!s || !s[0])
        return NULL;
    char *d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

bool pl_nats_settings_copy(pl_nats_conn_settings *dst, const char *endpoint, const char *domain,
                           const pl_nats_token_config *token, const pl_nats_user_config *user,
                           const pl_nats_nkey_user_file_config *creds,
                           const pl_otlp_tls_config *tls)
{
    bool ok = true;
    memset(dst, 0, sizeof(*dst));
    dst->endpoint = dup_opt(endpoint, &ok);
    dst->domain = dup_opt(domain, &ok);
    dst->token.token = dup_opt(token->token, &ok);
    dst->user.username = dup_opt(user->username, &ok);
    dst->user.password = dup_opt(user->password, &ok);
    dst->creds.user_file = dup_opt(creds->user_file, &ok);
    dst->tls.insecure_skip_verify = tls->insecure_skip_verify;
    dst->tls.ca_file = dup_opt(tls->ca_file, &ok);
    dst->tls.cert_file = dup_opt(tls->cert_file, &ok);
    dst->tls.key_file = dup_opt(tls->key_file, &ok);
    return ok;
}

void pl_nats_settings_free(pl_nats_conn_settings *s)
{
    free(s->endpoint);
    free(s->domain);
    free(s->token.token);
    free(s->user.username);
    free(s->user.password);
    free(s->creds.user_file);
    free(s->tls.ca_file);
    free(s->tls.cert_file);
    free(s->tls.key_file);
    memset(s, 0, sizeof(*s));
}

static pl_status nats_connect(const char *name, const pl_nats_conn_settings *p,
                              natsConnection **out, pl_err *err)
{
    natsOptions *opts = NULL;
    natsStatus s = natsOptions_Create(&opts);
    if (s != NATS_OK)
        return nats_fail(err, s, "NATS options");
    pl_status st = PL_OK;
    /* The callbacks' closure is the name, which the component keeps for the
     * connection's life. They run on libnats' threads and only log. */
    name = name ? name : "nats";
#define TRY(call, what)                                                                            \
    do {                                                                                           \
        if (st == PL_OK && (s = (call)) != NATS_OK)                                                \
            st = nats_fail(err, s, what);                                                          \
    } while (0)
    /* several URLs: libnats takes them as a server list, not as one URL */
    char urls_buf[1024];
    const char *urls[32];
    int n_urls = 0;
    snprintf(urls_buf, sizeof(urls_buf), "%s", p->endpoint ? p->endpoint : "");
    char *save = NULL;
    for (char *u = strtok_r(urls_buf, ",", &save); u && n_urls < 32;
         u = strtok_r(NULL, ",", &save)) {
        while (*u == ' ')
            u++;
        size_t len = strlen(u);
        while (len && u[len - 1] == ' ')
            u[--len] = 0;
        if (len)
            urls[n_urls++] = u;
    }
    TRY(natsOptions_SetServers(opts, urls, n_urls), "endpoint");
    TRY(natsOptions_SetName(opts, name), "name");
    TRY(natsOptions_SetMaxReconnect(opts, -1), "max_reconnect");
    TRY(natsOptions_SetReconnectWait(opts, 250), "reconnect_wait");
    TRY(natsOptions_SetTimeout(opts, 2000), "connect timeout");
    /* With a connected callback libnats retries a failed first connect in
     * the background; without one it would retry inside Connect, here,
     * blocking the start. */
    TRY(natsOptions_SetRetryOnFailedConnect(opts, true, on_connected, (void *)name),
        "retry on failed connect");
    TRY(natsOptions_SetDisconnectedCB(opts, on_disconnected, (void *)name), "callbacks");
    TRY(natsOptions_SetReconnectedCB(opts, on_reconnected, (void *)name), "callbacks");
    if (set(p->token.token))
        TRY(natsOptions_SetToken(opts, p->token.token), "token");
    if (set(p->user.username))
        TRY(natsOptions_SetUserInfo(opts, p->user.username, p->user.password), "user");
    if (set(p->creds.user_file))
        TRY(natsOptions_SetUserCredentialsFromFiles(opts, p->creds.user_file, NULL),
            "nkey_user_file");
    const pl_otlp_tls_config *tls = &p->tls;
    if ((set(tls->ca_file) || set(tls->cert_file) || tls->insecure_skip_verify)) {
        TRY(natsOptions_SetSecure(opts, true), "tls");
        if (set(tls->ca_file))
            TRY(natsOptions_LoadCATrustedCertificates(opts, tls->ca_file), "tls::ca_file");
        if (set(tls->cert_file))
            TRY(natsOptions_LoadCertificatesChain(opts, tls->cert_file, tls->key_file),
                "tls::cert_file");
        if (tls->insecure_skip_verify)
            TRY(natsOptions_SkipServerVerification(opts, true), "tls::insecure_skip_verify");
    }
#undef TRY
    if (st == PL_OK) {
        s = natsConnection_Connect(out, opts);
        if (s == NATS_NOT_YET_CONNECTED) {
            pl_warn(name, "NATS at %s is not reachable yet; connecting in the background",
                    p->endpoint);
        } else if (s != NATS_OK) {
            st = nats_fail(err, s, "connecting to NATS");
            *out = NULL;
        }
    }
    natsOptions_Destroy(opts);
    return st;
}

pl_status pl_nats_connect_js(const char *name, const pl_nats_conn_settings *s, int64_t wait_ms,
                             natsConnection **nc, jsCtx **js, pl_err *err)
{
    pl_status st = nats_connect(name, s, nc, err);
    if (st != PL_OK)
        return st;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Domain = s->domain;
    if (wait_ms > 0)
        jo.Wait = wait_ms;
    natsStatus ns = natsConnection_JetStream(js, *nc, &jo);
    if (ns != NATS_OK)
        return pl_errf(err, PL_ERR_INTERNAL, "JetStream context: %s", natsStatus_GetText(ns));
    return PL_OK;
}

const char *pl_nats_default_subject(pl_signal signal)
{
    static const char *const subjects[PL_SIGNAL_COUNT] = {
        [PL_SIGNAL_TRACES] = "otel_spans",
        [PL_SIGNAL_PROFILES] = "otel_profiles",
        [PL_SIGNAL_LOGS] = "otel_logs",
        [PL_SIGNAL_METRICS] = "otel_metrics",
    };
    return (unsigned)signal < PL_SIGNAL_COUNT ? subjects[signal] : "";
}

pl_status pl_nats_client_init(pl_nats_client *cl, const pl_create_settings *settings,
                              const char *endpoint, const char *domain,
                              const pl_nats_token_config *token, const pl_nats_user_config *user,
                              const pl_nats_nkey_user_file_config *creds,
                              const pl_otlp_tls_config *tls, pl_err *err)
{
    if (uv_mutex_init(&cl->lock) != 0)
        return pl_errf(err, PL_ERR_INTERNAL, "mutex");
    if (uv_cond_init(&cl->wake) != 0) {
        uv_mutex_destroy(&cl->lock);
        return pl_errf(err, PL_ERR_INTERNAL, "condition variable");
    }
    cl->id = strdup(settings->id ? settings->id : "nats");
    cl->loop = settings->loop;
    cl->stats = settings->stats;
    bool ok = pl_nats_settings_copy(&cl->conn, endpoint, domain, token, user, creds, tls);
    if (!ok || !cl->id)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    return PL_OK;
}

pl_status pl_nats_client_async(pl_nats_client *cl, void *owner, uv_async_cb cb, pl_err *err)
{
    if (uv_async_init(cl->loop, &cl->async, cb) != 0)
        return pl_errf(err, PL_ERR_INTERNAL, "uv_async_init failed");
    cl->async.data = owner;
    cl->async_ready = true;
    return PL_OK;
}

static void on_owner_async_closed(uv_handle_t *h)
{
    free(h->data);
}

void pl_nats_client_release(pl_nats_client *cl, void *owner)
{
    jsCtx_Destroy(cl->js);
    if (cl->nc)
        natsConnection_Destroy(cl->nc);
    pl_nats_settings_free(&cl->conn);
    free(cl->id);
    uv_cond_destroy(&cl->wake);
    uv_mutex_destroy(&cl->lock);
    if (cl->async_ready) {
        cl->async.data = owner;
        uv_close((uv_handle_t *)&cl->async, on_owner_async_closed);
    } else {
        free(owner);
    }
}

void pl_nats_close(natsConnection *nc)
{
    if (!nc)
        return;
    natsConnection_Close(nc);
    natsConnection_Destroy(nc);
}
