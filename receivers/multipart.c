/*
 * multipart.c: see multipart.h. A part is
 *
 *   --BOUNDARY CRLF headers CRLF CRLF data CRLF --BOUNDARY ... --BOUNDARY-- CRLF
 *
 * Data may contain anything except "CRLF--BOUNDARY", so finding the end of a
 * part is a memmem for that delimiter. Bare LF line ends are accepted too
 * (some hand-written clients send them).
 */
#include "multipart.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

static bool is_space(uint8_t c)
{
    return c == ' ' || c == '\t';
}

/* Reads a parameter value starting at p: "quoted" or a token. */
static pl_bytes param_value(const uint8_t *p, const uint8_t *end)
{
    if (p < end && *p == '"') {
        const uint8_t *q = ++p;
        while (q < end && *q != '"')
            q++;
        return (pl_bytes){p, (uint32_t)(q - p)};
    }
    const uint8_t *q = p;
    while (q < end && *q != ';' && *q != ',' && !is_space(*q) && *q != '\r' && *q != '\n')
        q++;
    return (pl_bytes){p, (uint32_t)(q - p)};
}

/* Finds parameter `name` (e.g. "name=") in a header value, as a whole word:
 * "filename=" must not match inside "xfilename=" nor "name=" inside it. */
static bool find_param(const uint8_t *p, const uint8_t *end, const char *name, pl_bytes *out)
{
    size_t n = strlen(name);
    for (const uint8_t *q = p; q + n <= end; q++) {
        if (strncasecmp((const char *)q, name, n) != 0)
            continue;
        if (q > p && !(is_space(q[-1]) || q[-1] == ';'))
            continue;
        *out = param_value(q + n, end);
        return true;
    }
    return false;
}

int pl_multipart_boundary(const char *content_type, size_t len, pl_bytes *boundary)
{
    const uint8_t *p = (const uint8_t *)content_type, *end = p + len;
    if (!find_param(p, end, "boundary=", boundary))
        return -1;
    if (boundary->len == 0 || boundary->len > 200)
        return -1;
    return 0;
}

/* Returns the position after the line end at p (CRLF or LF), or NULL. */
static const uint8_t *skip_eol(const uint8_t *p, const uint8_t *end)
{
    if (p < end && *p == '\r')
        p++;
    if (p < end && *p == '\n')
        return p + 1;
    return NULL;
}

static void parse_part_headers(const uint8_t *p, const uint8_t *end, pl_multipart_part *part)
{
    while (p < end) {
        const uint8_t *eol = memchr(p, '\n', (size_t)(end - p));
        const uint8_t *line_end = eol ? eol : end;
        const uint8_t *colon = memchr(p, ':', (size_t)(line_end - p));
        if (colon) {
            size_t name_len = (size_t)(colon - p);
            const uint8_t *v = colon + 1;
            while (v < line_end && is_space(*v))
                v++;
            const uint8_t *ve = line_end;
            while (ve > v && (ve[-1] == '\r' || is_space(ve[-1])))
                ve--;
            if (name_len == 19 && strncasecmp((const char *)p, "Content-Disposition", 19) == 0) {
                find_param(v, ve, "name=", &part->name);
                find_param(v, ve, "filename=", &part->filename);
            } else if (name_len == 12 && strncasecmp((const char *)p, "Content-Type", 12) == 0) {
                part->content_type = (pl_bytes){v, (uint32_t)(ve - v)};
            }
        }
        p = eol ? eol + 1 : end;
    }
}

pl_status pl_multipart_parse(pl_bytes boundary, const uint8_t *body, size_t len,
                             pl_multipart_part *parts, size_t max_parts, size_t *n_parts,
                             pl_err *err)
{
    *n_parts = 0;
    const uint8_t *end = body + len;
    char delim[208];
    if (boundary.len == 0 || boundary.len > 200)
        return pl_errf(err, PL_ERR_INVALID, "multipart: bad boundary");
    delim[0] = '-', delim[1] = '-';
    memcpy(delim + 2, boundary.ptr, boundary.len);
    size_t dlen = boundary.len + 2;

    /* The first delimiter: at the very start, or after a preamble line end. */
    const uint8_t *p = body;
    if (!(len >= dlen && memcmp(body, delim, dlen) == 0)) {
        p = NULL;
        for (const uint8_t *q = body; q + dlen + 1 <= end;) {
            const uint8_t *hit = memmem(q, (size_t)(end - q), delim, dlen);
            if (!hit)
                break;
            if (hit[-1] == '\n') {
                p = hit;
                break;
            }
            q = hit + 1;
        }
        if (!p)
            return pl_errf(err, PL_ERR_INVALID, "multipart: boundary not found in body");
    }
    for (;;) {
        p += dlen; /* just after a delimiter */
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            return PL_OK; /* close delimiter; an epilogue is ignored */
        while (p < end && is_space(*p))
            p++;
        const uint8_t *h = skip_eol(p, end);
        if (!h)
            return pl_errf(err, PL_ERR_INVALID, "multipart: part %zu: bad delimiter line",
                           *n_parts);
        /* Headers end at an empty line. */
        const uint8_t *data = NULL, *hend = h;
        if (skip_eol(h, end)) {
            data = skip_eol(h, end); /* no headers at all */
            hend = h;
        } else {
            for (const uint8_t *q = h; q < end; q++) {
                if (*q != '\n')
                    continue;
                const uint8_t *blank = skip_eol(q + 1, end);
                if (blank) {
                    hend = q + 1;
                    data = blank;
                    break;
                }
            }
        }
        if (!data)
            return pl_errf(err, PL_ERR_INVALID, "multipart: part %zu: headers do not end",
                           *n_parts);
        /* Data ends at LF--BOUNDARY (the CR before it, if any, is not data). */
        const uint8_t *next = NULL;
        for (const uint8_t *q = data; q < end;) {
            const uint8_t *hit = memmem(q, (size_t)(end - q), delim, dlen);
            if (!hit)
                break;
            if (hit[-1] == '\n') { /* hit > body: data starts after a line end */
                next = hit;
                break;
            }
            q = hit + 1;
        }
        if (!next)
            return pl_errf(err, PL_ERR_INVALID, "multipart: part %zu: no closing boundary",
                           *n_parts);
        const uint8_t *data_end = next - 1;
        if (data_end > data && data_end[-1] == '\r')
            data_end--;
        if (data_end < data) /* "headers CRLF CRLF --BOUNDARY": empty data */
            data_end = data;
        if (*n_parts >= max_parts)
            return pl_errf(err, PL_ERR_INVALID, "multipart: more than %zu parts", max_parts);
        pl_multipart_part *part = &parts[(*n_parts)++];
        memset(part, 0, sizeof(*part));
        parse_part_headers(h, hend, part);
        part->data = (pl_bytes){data, (uint32_t)(data_end - data)};
        if ((size_t)(data_end - data) > UINT32_MAX)
            return pl_errf(err, PL_ERR_INVALID, "multipart: part too large");
        p = next;
    }
}

const pl_multipart_part *pl_multipart_find(const pl_multipart_part *parts, size_t n,
                                           const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (pl_bytes_eq_cstr(parts[i].name, name))
            return &parts[i];
    return NULL;
}
