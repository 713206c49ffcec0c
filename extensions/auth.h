/*
 * auth.h: authentication extensions and how listeners and exporters use
 * them, in the Collector's shape:
 *
 *   extensions:
 *     bearertokenauth/in: { token: "s3cret" }          # or filename: token.txt
 *     basicauth/in: { htpasswd: { file: .htpasswd } }  # or inline: "user:pass"
 *     basicauth/out: { client_auth: { username: u, password: p } }
 *   receivers:
 *     otlp: { protocols: { http: { auth: { authenticator: bearertokenauth/in } } } }
 *   exporters:
 *     otlphttp: { endpoint: ..., auth: { authenticator: basicauth/out } }
 *   service:
 *     extensions: [bearertokenauth/in, basicauth/in, basicauth/out]
 *
 * An authentication extension registers itself by id when created
 * (extensions are created before exporters and receivers, and destroyed
 * after them). A receiver or exporter checks its `authenticator` at create
 * time (a name that is not a running authentication extension fails the
 * start with a message saying so) and then looks it up by id for each
 * request: a reload may replace the extension while keeping the receiver,
 * and the newest instance registered under an id is the one used. Should
 * the id have gone, requests are refused (401), never let through.
 *
 * Also here: the security settings every listener shares (tls, auth, cors),
 * copied from a receiver's config and applied to its server options.
 */
#ifndef PL_EXTENSIONS_AUTH_H
#define PL_EXTENSIONS_AUTH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/component.h"
#include "net/http_cors.h"
#include "net/http_server.h"
#include "net/tls.h"

/* The authenticators of one pipeline process: the host's (pl_host.auth),
 * made by the service. Components created without a host (unit tests)
 * share one of their own. */
typedef struct pl_auth_registry pl_auth_registry;
pl_auth_registry *pl_auth_registry_new(void);
void pl_auth_registry_free(pl_auth_registry *registry);

/* An authentication extension instance. */
typedef struct pl_authenticator {
    pl_auth_registry *registry; /* where it is registered (pl_auth_instance_new) */
    const char *id;
    pl_http_auth server; /* check() for receivers (NULL check: client only) */
    /* The header an exporter sends ("Authorization", "Bearer ..."); false
     * when this extension has no client side. */
    bool (*client_header)(void *arg, char *name, size_t name_cap, char *value, size_t value_cap);
    void *arg;
    void (*release)(void *arg); /* frees the extension (pl_auth_extension_destroy) */
} pl_authenticator;

void pl_auth_register(pl_authenticator *a);
/* Fills `a` for the extension `id` and registers it: receivers ask `check`
 * (NULL: no server side) and answer a failure with `challenge`; exporters
 * send what `client_header` writes (NULL: no client side); both get `arg`,
 * and so does `release` when the extension is destroyed. */
void pl_auth_register_as(pl_authenticator *a, const char *id, const char *challenge,
                         bool (*check)(void *arg, const pl_http_request *req, char *user,
                                       size_t cap),
                         bool (*client_header)(void *arg, char *name, size_t name_cap, char *value,
                                               size_t value_cap),
                         void (*release)(void *arg), void *arg);
void pl_auth_unregister(pl_authenticator *a);
/* The destroy hook of an authentication extension whose instance starts
 * with its registered pl_authenticator: unregisters it, then releases it. */
void pl_auth_extension_destroy(void *self);
/* What every authentication extension instance starts with: its registered
 * authenticator (first, for pl_auth_extension_destroy), its id, and the lock
 * that guards what a file re-read replaces while receivers on several worker
 * threads check at once. */
typedef struct pl_auth_instance {
    pl_authenticator a;
    char *id;
    pthread_mutex_t mu;
} pl_auth_instance;

/* A zeroed instance of `size` bytes that starts with a pl_auth_instance, its
 * lock ready and its id settings->id (else `type`); NULL with err set when
 * out of memory. */
void *pl_auth_instance_new(size_t size, const pl_create_settings *settings, const char *type,
                           pl_err *err);
/* Frees what pl_auth_instance_new set up, and the instance. */
void pl_auth_instance_free(pl_auth_instance *inst);
/* For tests, among the authenticators created without a host: NULL with
 * err set when `id` is not a running authentication extension. */
const pl_authenticator *pl_auth_find(const char *id, pl_err *err);
/* The same without an error: NULL when absent. */
const pl_authenticator *pl_auth_lookup(const char *id);

/* `auth: { authenticator: <id> }` */
#include "extensions/auth.config.h"
extern const pl_cfg_section pl_auth_ref_section;

/* What a listener keeps from its config: copies of tls and cors, and the
 * resolved authenticator. */
typedef struct pl_listener_security {
    pl_tls_server_config tls;
    pl_http_cors_config cors;
    char *auth_id;              /* the authenticator's id, looked up per request */
    pl_auth_registry *registry; /* in the host's registry */
    pl_http_auth auth;          /* what the server calls: forwards to the lookup */
} pl_listener_security;

/* Every listener's config also has the per-client connection cap: the
 * `listener_per_client` option group of config/shared.config.yaml (an
 * int64_t `max_connections_per_client` in its struct; 0 = default). */

pl_status pl_listener_security_init(pl_listener_security *out, const pl_host *host,
                                    const pl_tls_server_config *tls, const pl_auth_ref_config *auth,
                                    const pl_http_cors_config *cors, pl_err *err);
/* Points the options at the copies (valid while `sec` lives). */
void pl_listener_security_apply(const pl_listener_security *sec, pl_http_server_options *opt);
void pl_listener_security_free(pl_listener_security *sec);
/* "https" or "http" for log lines. */
const char *pl_listener_security_scheme(const pl_listener_security *sec);

/* Exporters: the header line "Name: value" to send, built for each request
 * (a token file may have changed). NULL when `a` is NULL; malloc'd. */
char *pl_auth_client_header_line(const pl_authenticator *a);
/* Exporters' `auth:`: checks at create that `ref` names an extension with a
 * client side; *id_out gets a copy of the id (NULL when none configured). */
pl_status pl_auth_client_resolve(const pl_host *host, const pl_auth_ref_config *ref, char **id_out,
                                 pl_err *err);
/* The header line for the authenticator registered under `id` now; NULL
 * when id is NULL or it is gone (logged). */
char *pl_auth_client_header_for(const pl_host *host, const char *id);

#endif
