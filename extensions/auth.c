/*
 * auth.c: the registry of running authentication extensions and the
 * listener security settings. See auth.h.
 */
#include "auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strlist.h"

/* Few authenticators exist (one per configured extension): a short list.
 *
 * Receivers on worker threads (service.workers) check requests while the
 * pipeline loop may register or unregister extensions (a reload). The list
 * sits behind a read-write lock, and a check holds the read side for its
 * whole duration, so an extension cannot be destroyed under a check running
 * on another thread: its destroy hook unregisters first, which waits for
 * the checks in progress. Checks themselves run in parallel (each extension
 * guards its own mutable state). */
typedef struct reg_entry {
    pl_authenticator *a;
    struct reg_entry *next;
} reg_entry;

struct pl_auth_registry {
    reg_entry *head;
    /* writers first: a reload is not held off by a steady stream of checks */
    pthread_rwlock_t lock;
};

/* The registry of components built without a host's (unit tests). */
static pl_auth_registry no_host_registry = {.lock =
                                                PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP};

pl_auth_registry *pl_auth_registry_new(void)
{
    pl_auth_registry *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&r->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    return r;
}

void pl_auth_registry_free(pl_auth_registry *r)
{
    if (!r)
        return;
    while (r->head) {
        reg_entry *e = r->head;
        r->head = e->next;
        free(e);
    }
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

static pl_auth_registry *registry_of(const pl_host *host)
{
    return host && host->auth ? host->auth : &no_host_registry;
}

void pl_auth_register(pl_authenticator *a)
{
    pl_auth_registry *r = a->registry ? a->registry : &no_host_registry;
    a->registry = r;
    reg_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return; /* pl_auth_find then reports it missing */
    e->a = a;
    pthread_rwlock_wrlock(&r->lock);
    e->next = r->head;
    r->head = e; /* newest first: a reload's new instance wins */
    pthread_rwlock_unlock(&r->lock);
}

void pl_auth_register_as(pl_authenticator *a, const char *id, const char *challenge,
                         bool (*check)(void *arg, const pl_http_request *req, char *user,
                                       size_t cap),
                         bool (*client_header)(void *arg, char *name, size_t name_cap, char *value,
                                               size_t value_cap),
                         void (*release)(void *arg), void *arg)
{
    *a = (pl_authenticator){
        .registry = a->registry, /* pl_auth_instance_new's: the host's */
        .id = id,
        .server = {.name = id, .challenge = challenge, .check = check, .arg = arg},
        .client_header = client_header,
        .arg = arg,
        .release = release,
    };
    pl_auth_register(a);
}

void pl_auth_extension_destroy(void *self)
{
    pl_authenticator *a = self;
    if (!a)
        return;
    pl_auth_unregister(a);
    a->release(a->arg);
}

void *pl_auth_instance_new(size_t size, const pl_create_settings *settings, const char *type,
                           pl_err *err)
{
    pl_auth_instance *inst = calloc(1, size);
    if (inst)
        inst->id = strdup(settings->id ? settings->id : type);
    if (!inst || !inst->id) {
        free(inst);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&inst->mu, NULL);
    inst->a.registry = registry_of(settings->host);
    return inst;
}

void pl_auth_instance_free(pl_auth_instance *inst)
{
    free(inst->id);
    pthread_mutex_destroy(&inst->mu);
    free(inst);
}

void pl_auth_unregister(pl_authenticator *a)
{
    pl_auth_registry *r = a->registry ? a->registry : &no_host_registry;
    pthread_rwlock_wrlock(&r->lock);
    for (reg_entry **p = &r->head; *p; p = &(*p)->next) {
        if ((*p)->a == a) {
            reg_entry *e = *p;
            *p = e->next;
            free(e);
            break;
        }
    }
    pthread_rwlock_unlock(&r->lock);
}

/* With r->lock held (either side). */
static const pl_authenticator *lookup_locked(const pl_auth_registry *r, const char *id)
{
    for (reg_entry *e = r->head; e; e = e->next)
        if (strcmp(e->a->id, id) == 0)
            return e->a;
    return NULL;
}

/* The pointer stays valid on the pipeline loop (where extensions are
 * created and destroyed) until the next reload; other threads go through
 * check_by_id, which holds the lock across the call. */
static const pl_authenticator *lookup(pl_auth_registry *r, const char *id)
{
    pthread_rwlock_rdlock(&r->lock);
    const pl_authenticator *a = lookup_locked(r, id);
    pthread_rwlock_unlock(&r->lock);
    return a;
}

const pl_authenticator *pl_auth_lookup(const char *id)
{
    return lookup(&no_host_registry, id);
}

static const pl_authenticator *find(pl_auth_registry *r, const char *id, pl_err *err)
{
    const pl_authenticator *a = lookup(r, id);
    if (a)
        return a;
    pl_errf(err, PL_ERR_INVALID,
            "auth.authenticator '%s' is not a running authentication extension (define it under "
            "extensions and list it in service.extensions)",
            id);
    return NULL;
}

const pl_authenticator *pl_auth_find(const char *id, pl_err *err)
{
    return find(&no_host_registry, id, err);
}

#include "extensions/auth.config.inc"

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

/* The server's view of a listener's authenticator: whatever is registered
 * under the id now. Gone (a reload removed it): refused, and said so. */
static bool check_by_id(void *arg, const pl_http_request *req, char *user, size_t cap)
{
    const pl_listener_security *sec = arg;
    pl_auth_registry *r = sec->registry;
    pthread_rwlock_rdlock(&r->lock);
    const pl_authenticator *a = lookup_locked(r, sec->auth_id);
    bool missing = !a || !a->server.check;
    bool ok = !missing && a->server.check(a->server.arg, req, user, cap);
    pthread_rwlock_unlock(&r->lock);
    if (missing)
        pl_error("auth", "authenticator '%s' is not running; refusing the request", sec->auth_id);
    return ok;
}

pl_status pl_listener_security_init(pl_listener_security *out, const pl_host *host,
                                    const pl_tls_server_config *tls, const pl_auth_ref_config *auth,
                                    const pl_http_cors_config *cors, pl_err *err)
{
    memset(out, 0, sizeof(*out));
    out->registry = registry_of(host);
    if (tls && pl_tls_server_config_enabled(tls)) {
        out->tls.cert_file = dup_or_null(tls->cert_file);
        out->tls.key_file = dup_or_null(tls->key_file);
        out->tls.client_ca_file = dup_or_null(tls->client_ca_file);
        out->tls.min_version = dup_or_null(tls->min_version);
        out->tls.max_version = dup_or_null(tls->max_version);
        out->tls.reload_interval_ns = tls->reload_interval_ns;
        if (!out->tls.cert_file) {
            pl_listener_security_free(out);
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
    }
    if (cors && pl_http_cors_enabled(cors) && pl_http_cors_copy(&out->cors, cors) != 0) {
        pl_listener_security_free(out);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    if (auth && auth->authenticator && *auth->authenticator) {
        const pl_authenticator *a = find(out->registry, auth->authenticator, err);
        if (!a || !a->server.check) {
            if (a)
                pl_errf(err, PL_ERR_INVALID, "auth.authenticator '%s' has no server side",
                        auth->authenticator);
            pl_listener_security_free(out);
            return PL_ERR_INVALID;
        }
        out->auth_id = strdup(auth->authenticator);
        if (!out->auth_id) {
            pl_listener_security_free(out);
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        }
        /* the challenge is a literal of the extension's type: stable */
        out->auth = (pl_http_auth){.name = out->auth_id,
                                   .challenge = a->server.challenge,
                                   .check = check_by_id,
                                   .arg = out};
    }
    return PL_OK;
}

void pl_listener_security_apply(const pl_listener_security *sec, pl_http_server_options *opt)
{
    opt->tls = pl_tls_server_config_enabled(&sec->tls) ? &sec->tls : NULL;
    opt->cors = pl_http_cors_enabled(&sec->cors) ? &sec->cors : NULL;
    opt->auth = sec->auth_id ? &sec->auth : NULL;
}

void pl_listener_security_free(pl_listener_security *sec)
{
    free(sec->tls.cert_file);
    free(sec->tls.key_file);
    free(sec->tls.client_ca_file);
    free(sec->tls.min_version);
    free(sec->tls.max_version);
    pl_http_cors_free(&sec->cors);
    free(sec->auth_id);
    memset(sec, 0, sizeof(*sec));
}

const char *pl_listener_security_scheme(const pl_listener_security *sec)
{
    return pl_tls_server_config_enabled(&sec->tls) ? "https" : "http";
}

char *pl_auth_client_header_line(const pl_authenticator *a)
{
    if (!a || !a->client_header)
        return NULL;
    char name[64], value[4096];
    if (!a->client_header(a->arg, name, sizeof(name), value, sizeof(value)))
        return NULL;
    size_t len = strlen(name) + strlen(value) + 3;
    char *line = malloc(len);
    if (line)
        snprintf(line, len, "%s: %s", name, value);
    return line;
}

pl_status pl_auth_client_resolve(const pl_host *host, const pl_auth_ref_config *ref, char **id_out,
                                 pl_err *err)
{
    *id_out = NULL;
    if (!ref || !ref->authenticator || !*ref->authenticator)
        return PL_OK;
    const pl_authenticator *a = find(registry_of(host), ref->authenticator, err);
    if (!a)
        return PL_ERR_INVALID;
    if (!a->client_header)
        return pl_errf(err, PL_ERR_INVALID, "auth.authenticator '%s' has no client side",
                       ref->authenticator);
    *id_out = strdup(ref->authenticator);
    return *id_out ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
}

char *pl_auth_client_header_for(const pl_host *host, const char *id)
{
    if (!id)
        return NULL;
    const pl_authenticator *a = lookup(registry_of(host), id);
    if (!a || !a->client_header) {
        pl_error("auth", "authenticator '%s' is not running; sending without credentials", id);
        return NULL;
    }
    return pl_auth_client_header_line(a);
}
