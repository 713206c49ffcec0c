/*
 * http_auth.h: the credentials an HTTP client sends, configured the same
 * way wherever proflink calls out (the pprof scrape receiver's targets, the
 * Pyroscope exporter): `bearer_token: T` or `basic_auth: {username,
 * password}`, one or the other, turned into one Authorization header value.
 * The basicauth extension's client side encodes with the same function.
 */
#ifndef PL_NET_HTTP_AUTH_H
#define PL_NET_HTTP_AUTH_H

#include "core/component.h"

#include "net/http_auth.config.h"

/* The `basic_auth` section: username, password. */
extern const pl_cfg_section pl_basic_auth_section;

/* "Basic " + base64(username ":" password), malloc'd (password NULL: "");
 * NULL on OOM. The plain pair is wiped before it is freed. */
char *pl_http_basic_credentials(const char *username, const char *password);

/* For a validate hook: 1 (and an error at `bearer_key`) when both a bearer
 * token and a basic auth user name are set, else 0. */
int pl_http_credentials_check(pl_cfg_ctx *ctx, const char *bearer_key, const char *bearer_token,
                              const pl_basic_auth_config *basic);

/* The Authorization value the settings ask for: "Bearer <token>" when a
 * token is set, else basic credentials when a user name is set, else none
 * (*value NULL). *value is malloc'd. 0, or -1 on OOM. */
int pl_http_authorization(const char *bearer_token, const pl_basic_auth_config *basic,
                          char **value);

#endif
