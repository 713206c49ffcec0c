/*
 * compress.c: request bodies in their Content-Encoding (see compress.h);
 * the codings themselves are proto/coding.c.
 */
#include "compress.h"

#include <stdlib.h>

#include "net/http_server.h"

/* ---- request bodies ----------------------------------------------------- */

bool pl_request_encoding(const pl_http_request *req, pl_encoding *out)
{
    size_t len = 0;
    const char *ce = pl_http_header_get(req, "content-encoding", &len);
    *out = PL_ENCODING_IDENTITY;
    return !ce || pl_encoding_parse(ce, len, out);
}

pl_status pl_request_body(pl_http_request *req, pl_encoding enc, size_t max_out, uint8_t **out,
                          size_t *out_len, pl_err *err)
{
    if (enc == PL_ENCODING_IDENTITY) {
        *out_len = req->body_len;
        *out = pl_http_request_take_body(req);
        if (!*out)
            *out = calloc(1, 1);
        return *out ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    return pl_decompress(enc, req->body ? req->body : (const uint8_t *)"", req->body_len, max_out,
                         out, out_len, err);
}
