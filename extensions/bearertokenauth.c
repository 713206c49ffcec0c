/*
 * bearertokenauth.c: the `bearertokenauth` extension, as in the Collector.
 *
 *   bearertokenauth:
 *     token: "s3cret"          # or: filename: /run/secrets/token
 *     scheme: Bearer           # the header value is "<scheme> <token>"
 *     header: Authorization
 *     tokens: [a, b]           # more accepted tokens (rotation)
 *
 * Receivers accept a request whose header carries one of the tokens;
 * exporters send the (first) token. A token file is re-read when its mtime
 * or size changes, checked at most once a second, so a rotated token takes
 * effect without a restart; a file that becomes unreadable keeps the last
 * token and is logged. Comparisons are constant-time.
 */
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/file_stamp.h"
#include "core/log.h"
#include "core/strlist.h"
#include "extensions/auth.h"

#include "extensions/bearertokenauth.config.h"

static int bearer_validate(void *cfg, pl_cfg_ctx *ctx)
{
    bearer_cfg *c = cfg;
    bool token = c->token && *c->token;
    bool file = c->filename && *c->filename;
    if (token && file) /* as in the Collector: the file wins */
        pl_cfg_warnf(ctx, "token", "ignored: the token is read from filename");
    if (!token && !file && c->tokens.n == 0) {
        pl_cfg_errorf(ctx, NULL, "needs token, tokens or filename");
        return 1;
    }
    if (!c->header || !*c->header) {
        pl_cfg_errorf(ctx, "header", "must not be empty");
        return 1;
    }
    return 0;
}

#include "extensions/bearertokenauth.config.inc"

typedef struct bearer {
    /* base.mu guards file_token and the re-read clock: receivers on several
     * worker threads check while an exporter on the pipeline loop reads the
     * token */
    pl_auth_instance base;
    char *scheme;
    char *header;
    char *file_token; /* from filename, or the inline token */
    pl_strlist tokens;
    char *filename;
    pl_file_watch watch; /* of `filename` */
} bearer;

/* Reads the token file (trailing whitespace dropped); 0 or -1. */
static int read_token(bearer *b)
{
    pl_file_stamp stamp;
    if (!pl_file_stamp_of(b->filename, &stamp))
        return -1;
    FILE *f = fopen(b->filename, "rb");
    if (!f)
        return -1;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    while (n &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        n--;
    buf[n] = 0;
    char *t = strdup(buf);
    if (!t)
        return -1;
    free(b->file_token);
    b->file_token = t;
    b->watch.seen = stamp;
    return 0;
}

static void maybe_reread(bearer *b)
{
    if (!b->filename)
        return;
    int changed = pl_file_watch_poll(&b->watch, b->filename, pl_time_mono_ns());
    if (changed < 0) {
        pl_warn(b->base.id, "%s: cannot read; keeping the last token", b->filename);
        return;
    }
    if (!changed)
        return;
    if (read_token(b) == 0)
        pl_info(b->base.id, "token re-read from %s", b->filename);
    else
        pl_warn(b->base.id, "%s: cannot read; keeping the last token", b->filename);
}

static bool token_eq(const char *want, const char *got, size_t got_len)
{
    size_t n = strlen(want);
    return n > 0 && n == got_len && CRYPTO_memcmp(want, got, n) == 0;
}

static bool bearer_check(void *arg, const pl_http_request *req, char *user, size_t cap)
{
    bearer *b = arg;
    (void)user;
    (void)cap;
    size_t len = 0;
    const char *v = pl_http_header_get(req, b->header, &len);
    if (!v)
        return false;
    size_t slen = strlen(b->scheme);
    if (slen) {
        if (len <= slen || strncasecmp(v, b->scheme, slen) != 0 || v[slen] != ' ')
            return false;
        v += slen + 1;
        len -= slen + 1;
        while (len && *v == ' ')
            v++, len--;
    }
    pthread_mutex_lock(&b->base.mu);
    maybe_reread(b);
    bool ok = b->file_token && token_eq(b->file_token, v, len);
    pthread_mutex_unlock(&b->base.mu);
    for (size_t i = 0; i < b->tokens.n; i++)
        ok |= token_eq(b->tokens.items[i], v, len);
    return ok;
}

static bool bearer_client(void *arg, char *name, size_t name_cap, char *value, size_t value_cap)
{
    bearer *b = arg;
    pthread_mutex_lock(&b->base.mu);
    maybe_reread(b);
    const char *t = b->file_token ? b->file_token : (b->tokens.n ? b->tokens.items[0] : NULL);
    if (t) {
        snprintf(name, name_cap, "%s", b->header);
        snprintf(value, value_cap, "%s%s%s", b->scheme, *b->scheme ? " " : "", t);
    }
    pthread_mutex_unlock(&b->base.mu);
    return t != NULL;
}

/* Frees an instance (also the pl_authenticator's release hook). */
static void bearer_free(void *arg)
{
    bearer *b = arg;
    free(b->scheme);
    free(b->header);
    free(b->file_token);
    free(b->filename);
    pl_strlist_free(&b->tokens);
    pl_auth_instance_free(&b->base);
}

static pl_status bearer_create(const pl_create_settings *settings, const void *config, void **out,
                               pl_err *err)
{
    const bearer_cfg *c = config;
    bearer *b = pl_auth_instance_new(sizeof(*b), settings, "bearertokenauth", err);
    if (!b)
        return PL_ERR_NOMEM;
    b->scheme = strdup(c->scheme ? c->scheme : "");
    b->header = strdup(c->header && *c->header ? c->header : "Authorization");
    if (c->token && *c->token)
        b->file_token = strdup(c->token);
    if (c->filename && *c->filename)
        b->filename = strdup(c->filename);
    if (!b->scheme || !b->header || (c->token && *c->token && !b->file_token) ||
        (c->filename && *c->filename && !b->filename) ||
        pl_strlist_copy(&b->tokens, &c->tokens) != 0) {
        bearer_free(b);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    if (b->filename && read_token(b) != 0) {
        pl_errf(err, PL_ERR_INVALID, "filename %s: cannot read the token", b->filename);
        bearer_free(b);
        return PL_ERR_INVALID;
    }
    b->watch.checked_ns = pl_time_mono_ns();
    pl_auth_register_as(&b->base.a, b->base.id, "Bearer", bearer_check, bearer_client, bearer_free,
                        b);
    *out = b;
    return PL_OK;
}

const pl_component_type pl_extension_bearertokenauth = {
    PL_COMPONENT_HEAD("bearertokenauth", PL_KIND_EXTENSION, 0, &bearer_section),
    .description = "bearer token authentication: receivers check it (401 / UNAUTHENTICATED "
                   "otherwise), exporters send it; token inline or from a file re-read on change",
    .create = bearer_create,
    .destroy = pl_auth_extension_destroy,
};
