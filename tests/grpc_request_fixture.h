/*
 * grpc_request_fixture.h: a gRPC request as the HTTP server hands it to a
 * handler (HTTP/2, POST, content-type application/grpc), for tests and fuzz
 * targets of the gRPC framing.
 */
#ifndef PL_TESTS_GRPC_REQUEST_FIXTURE_H
#define PL_TESTS_GRPC_REQUEST_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/http_server.h"

/* To `path`, with grpc-encoding `encoding` (NULL: none) and a malloc'd copy
 * of the body (NULL when out of memory). The headers go into `headers`,
 * which must outlive the request. */
static __attribute__((unused)) pl_http_request grpc_request(pl_http_header headers[2],
                                                            const char *path, const uint8_t *body,
                                                            size_t len, const char *encoding)
{
    size_t n = 0;
    headers[n++] = (pl_http_header){"content-type", 12, "application/grpc", 16};
    if (encoding)
        headers[n++] = (pl_http_header){"grpc-encoding", 13, encoding, strlen(encoding)};
    pl_http_request req;
    memset(&req, 0, sizeof(req));
    req.http_version = 2;
    req.method = "POST";
    req.path = path;
    req.query = "";
    req.headers = headers;
    req.n_headers = n;
    req.body = malloc(len ? len : 1);
    if (req.body && len)
        memcpy(req.body, body, len);
    req.body_len = len;
    return req;
}

#endif
