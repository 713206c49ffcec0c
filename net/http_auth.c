/*
 * http_auth.c: see http_auth.h.
 */
#include "net/http_auth.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"

#include "net/http_auth.config.inc"

static bool set(const char *s)
{
    return s && *s;
}

char *pl_http_basic_credentials(const char *username, const char *password)
{
    if (!password)
        password = "";
    size_t ulen = strlen(username), plen = strlen(password), n = ulen + 1 + plen;
    char *pair = malloc(n);
    pl_buf out;
    pl_buf_init(&out);
    /* Reserved up front so the encoded secret is never left behind in a
     * buffer that was grown and freed. */
    if (!pair || !pl_buf_reserve(&out, 6 + 4 * ((n + 2) / 3) + 1)) {
        free(pair);
        pl_buf_free(&out);
        return NULL;
    }
    memcpy(pair, username, ulen);
    pair[ulen] = ':';
    memcpy(pair + ulen + 1, password, plen);
    pl_buf_append_str(&out, "Basic ");
    pl_base64_encode((const uint8_t *)pair, n, &out, true);
    pl_buf_append_byte(&out, 0);
    OPENSSL_cleanse(pair, n);
    free(pair);
    if (!pl_buf_ok(&out)) {
        pl_buf_free(&out);
        return NULL;
    }
    return (char *)pl_buf_steal(&out, NULL);
}

int pl_http_credentials_check(pl_cfg_ctx *ctx, const char *bearer_key, const char *bearer_token,
                              const pl_basic_auth_config *basic)
{
    return pl_cfg_check(ctx, !(set(bearer_token) && set(basic->username)), bearer_key,
                        "set either bearer_token or basic_auth, not both");
}

int pl_http_authorization(const char *bearer_token, const pl_basic_auth_config *basic, char **value)
{
    *value = NULL;
    if (set(bearer_token)) {
        size_t len = strlen(bearer_token) + 8;
        *value = malloc(len);
        if (*value)
            snprintf(*value, len, "Bearer %s", bearer_token);
    } else if (basic && set(basic->username)) {
        *value = pl_http_basic_credentials(basic->username, basic->password);
    } else {
        return 0;
    }
    return *value ? 0 : -1;
}
