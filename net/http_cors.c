/*
 * http_cors.c: see http_cors.h.
 *
 * Like the Collector (rs/cors with AllowCredentials), an allowed origin is
 * echoed rather than answered with "*", so browsers may send credentials.
 * Request headers a browser asks for in a preflight are allowed when they
 * are in the safe set below or in allowed_headers ("*" allows any).
 */
#include "http_cors.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/strlist.h"

#include "net/http_cors.config.inc"

bool pl_http_cors_enabled(const pl_http_cors_config *cors)
{
    return cors && cors->allowed_origins.n > 0;
}

int pl_http_cors_copy(pl_http_cors_config *dst, const pl_http_cors_config *src)
{
    memset(dst, 0, sizeof(*dst));
    if (pl_strlist_copy(&dst->allowed_origins, &src->allowed_origins) != 0 ||
        pl_strlist_copy(&dst->allowed_headers, &src->allowed_headers) != 0) {
        pl_http_cors_free(dst);
        return -1;
    }
    dst->max_age = src->max_age;
    return 0;
}

void pl_http_cors_free(pl_http_cors_config *cors)
{
    pl_strlist_free(&cors->allowed_origins);
    pl_strlist_free(&cors->allowed_headers);
}

/* Iterative glob: on a mismatch after a '*', the star absorbs one more
 * character. O(pattern * input) at worst, and both are short. Case matters
 * except that schemes and hosts are compared case-insensitively by
 * lower-casing nothing: browsers send origins lower case. */
bool pl_http_cors_match(const char *pattern, const char *s, size_t len)
{
    size_t p = 0, i = 0, star = (size_t)-1, mark = 0;
    size_t plen = strlen(pattern);
    while (i < len) {
        if (p < plen && pattern[p] == '*') {
            star = p++;
            mark = i;
        } else if (p < plen && pattern[p] == s[i]) {
            p++;
            i++;
        } else if (star != (size_t)-1) {
            p = star + 1;
            i = ++mark;
        } else {
            return false;
        }
    }
    while (p < plen && pattern[p] == '*')
        p++;
    return p == plen;
}

bool pl_http_cors_origin_allowed(const pl_http_cors_config *cors, const char *origin, size_t len)
{
    if (!pl_http_cors_enabled(cors) || !origin || len == 0 || len > 1024)
        return false;
    for (size_t i = 0; i < cors->allowed_origins.n; i++)
        if (pl_http_cors_match(cors->allowed_origins.items[i], origin, len))
            return true;
    return false;
}

static bool header_allowed(const pl_http_cors_config *cors, const char *name, size_t len)
{
    static const char *const safe[] = {
        "content-type",  "content-encoding", "accept",           "authorization",
        "x-scope-orgid", "origin",           "x-requested-with", NULL};
    for (size_t i = 0; safe[i]; i++)
        if (strlen(safe[i]) == len && strncasecmp(safe[i], name, len) == 0)
            return true;
    for (size_t i = 0; i < cors->allowed_headers.n; i++) {
        const char *a = cors->allowed_headers.items[i];
        if (strcmp(a, "*") == 0 || (strlen(a) == len && strncasecmp(a, name, len) == 0))
            return true;
    }
    return false;
}

/* Every comma-separated name in Access-Control-Request-Headers allowed? */
static bool headers_allowed(const pl_http_cors_config *cors, const char *list, size_t len)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (list[i] == ' ' || list[i] == ',' || list[i] == '\t'))
            i++;
        size_t start = i;
        while (i < len && list[i] != ',' && list[i] != ' ' && list[i] != '\t')
            i++;
        if (i > start && !header_allowed(cors, list + start, i - start))
            return false;
    }
    return true;
}

bool pl_http_cors_preflight(const pl_http_cors_config *cors, const pl_http_request *req,
                            pl_http_response *res)
{
    if (strcmp(req->method, "OPTIONS") != 0)
        return false;
    size_t olen = 0, mlen = 0, hlen = 0;
    const char *origin = pl_http_header_get(req, "origin", &olen);
    const char *method = pl_http_header_get(req, "access-control-request-method", &mlen);
    if (!origin || !method)
        return false;
    const char *hdrs = pl_http_header_get(req, "access-control-request-headers", &hlen);
    bool method_ok = (mlen == 4 && memcmp(method, "POST", 4) == 0) ||
                     (mlen == 3 && memcmp(method, "GET", 3) == 0) ||
                     (mlen == 4 && memcmp(method, "HEAD", 4) == 0);
    if (!pl_http_cors_origin_allowed(cors, origin, olen) || !method_ok ||
        (hdrs && !headers_allowed(cors, hdrs, hlen))) {
        /* No CORS headers: the browser refuses the actual request. */
        static const pl_http_header vary = {"Vary", 4, "Origin", 6};
        pl_http_respond(res, 204, &vary, 1, NULL, 0);
        return true;
    }
    char age[24];
    int agelen = snprintf(age, sizeof(age), "%lld", (long long)cors->max_age);
    pl_http_header h[6];
    size_t n = 0;
    h[n++] = (pl_http_header){"Access-Control-Allow-Origin", 27, origin, olen};
    h[n++] = (pl_http_header){"Access-Control-Allow-Methods", 28, method, mlen};
    h[n++] = (pl_http_header){"Access-Control-Allow-Credentials", 32, "true", 4};
    h[n++] = (pl_http_header){"Vary", 4, "Origin", 6};
    if (hdrs && hlen)
        h[n++] = (pl_http_header){"Access-Control-Allow-Headers", 28, hdrs, hlen};
    if (cors->max_age > 0)
        h[n++] = (pl_http_header){"Access-Control-Max-Age", 22, age, (size_t)agelen};
    pl_http_respond(res, 204, h, n, NULL, 0);
    return true;
}
