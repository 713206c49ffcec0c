/*
 * coding.c: gzip/deflate through zlib, zstd through libzstd (see coding.h).
 *
 * Both decompressors stream into a buffer that grows geometrically up to the
 * caller's limit. The first guess is four times the input (typical ratio for
 * telemetry protobuf is 3-10x), capped by the limit, so most bodies need one
 * or two reallocations.
 */
#include "coding.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>

bool pl_encoding_parse(const char *name, size_t len, pl_encoding *out)
{
    while (len && (*name == ' ' || *name == '\t')) {
        name++;
        len--;
    }
    while (len && (name[len - 1] == ' ' || name[len - 1] == '\t'))
        len--;
    static const struct {
        const char *name;
        pl_encoding enc;
    } names[] = {
        {"", PL_ENCODING_IDENTITY},       {"identity", PL_ENCODING_IDENTITY},
        {"gzip", PL_ENCODING_GZIP},       {"x-gzip", PL_ENCODING_GZIP},
        {"deflate", PL_ENCODING_DEFLATE}, {"zlib", PL_ENCODING_DEFLATE},
        {"zstd", PL_ENCODING_ZSTD},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strlen(names[i].name) == len && strncasecmp(names[i].name, name, len) == 0) {
            *out = names[i].enc;
            return true;
        }
    }
    return false;
}

const char *pl_encoding_name(pl_encoding enc)
{
    switch (enc) {
    case PL_ENCODING_IDENTITY:
        return "identity";
    case PL_ENCODING_GZIP:
        return "gzip";
    case PL_ENCODING_DEFLATE:
        return "deflate";
    case PL_ENCODING_ZSTD:
        return "zstd";
    }
    return "unknown";
}

/* Grows *buf (capacity *cap) toward max; false when already at max. */
static bool grow_output(uint8_t **buf, size_t *cap, size_t max, pl_status *st)
{
    if (*cap >= max) {
        *st = PL_ERR_TOO_LARGE;
        return false;
    }
    size_t ncap = *cap * 2;
    if (ncap > max || ncap < *cap)
        ncap = max;
    uint8_t *n = realloc(*buf, ncap ? ncap : 1);
    if (!n) {
        *st = PL_ERR_NOMEM;
        return false;
    }
    *buf = n;
    *cap = ncap;
    return true;
}

static size_t first_guess(size_t in_len, size_t max_out)
{
    size_t guess = in_len * 4;
    if (guess < 4096)
        guess = 4096;
    if (guess > max_out)
        guess = max_out;
    return guess;
}

/* windowBits: 16+15 gzip, 15 zlib, -15 raw deflate. */
static pl_status inflate_with(int window_bits, const uint8_t *in, size_t in_len, size_t max_out,
                              uint8_t **out, size_t *out_len, pl_err *err, const char *what)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, window_bits) != Z_OK)
        return pl_errf(err, PL_ERR_NOMEM, "%s: cannot initialise zlib", what);
    size_t cap = first_guess(in_len, max_out), len = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    pl_status st = PL_OK;
    if (!buf) {
        inflateEnd(&zs);
        return pl_errf(err, PL_ERR_NOMEM, "%s: out of memory", what);
    }
    const uint8_t *next_in = in;
    size_t avail_in = in_len;
    for (;;) {
        /* zlib counts in uInt; feed at most 1 GiB at a time. */
        uInt chunk_in = avail_in > (1u << 30) ? (1u << 30) : (uInt)avail_in;
        zs.next_in = (Bytef *)next_in;
        zs.avail_in = chunk_in;
        if (len == cap && !grow_output(&buf, &cap, max_out, &st))
            break;
        size_t room = cap - len;
        uInt chunk_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        zs.next_out = buf + len;
        zs.avail_out = chunk_out;
        int rc = inflate(&zs, Z_NO_FLUSH);
        size_t used_in = chunk_in - zs.avail_in;
        next_in += used_in;
        avail_in -= used_in;
        len += chunk_out - zs.avail_out;
        if (rc == Z_STREAM_END) {
            /* gzip allows several members back to back (RFC 1952 2.2). */
            if (window_bits > 15 && avail_in > 0 && next_in[0] == 0x1f) {
                inflateReset(&zs);
                continue;
            }
            break;
        }
        if (rc == Z_BUF_ERROR && avail_in == 0 && zs.avail_out != 0) {
            st = PL_ERR_INVALID;
            pl_errf(err, st, "%s: truncated data (ends after %zu bytes)", what, in_len);
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = PL_ERR_INVALID;
            pl_errf(err, st, "%s: corrupt data at input byte %zu: %s", what, (size_t)(next_in - in),
                    zs.msg ? zs.msg : "error");
            break;
        }
        if (rc == Z_BUF_ERROR && zs.avail_out != 0 && used_in == 0) {
            st = PL_ERR_INVALID;
            pl_errf(err, st, "%s: truncated data", what);
            break;
        }
    }
    inflateEnd(&zs);
    if (st == PL_ERR_TOO_LARGE)
        pl_errf(err, st, "%s: decompressed body larger than %zu bytes", what, max_out);
    else if (st == PL_ERR_NOMEM)
        pl_errf(err, st, "%s: out of memory", what);
    if (st != PL_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *out_len = len;
    return PL_OK;
}

static pl_status zstd_decompress(const uint8_t *in, size_t in_len, size_t max_out, uint8_t **out,
                                 size_t *out_len, pl_err *err)
{
    unsigned long long declared = ZSTD_getFrameContentSize(in, in_len);
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR &&
        declared > max_out)
        return pl_errf(err, PL_ERR_TOO_LARGE,
                       "zstd: frame declares %llu bytes, over the limit of %zu", declared, max_out);
    ZSTD_DStream *ds = ZSTD_createDStream();
    if (!ds)
        return pl_errf(err, PL_ERR_NOMEM, "zstd: out of memory");
    /* Refuse windows that would make the decoder itself allocate too much. */
    ZSTD_DCtx_setParameter(ds, ZSTD_d_windowLogMax, 27);
    size_t cap = first_guess(in_len, max_out), len = 0;
    if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR && declared > 0)
        cap = (size_t)declared;
    uint8_t *buf = malloc(cap ? cap : 1);
    pl_status st = PL_OK;
    if (!buf) {
        ZSTD_freeDStream(ds);
        return pl_errf(err, PL_ERR_NOMEM, "zstd: out of memory");
    }
    ZSTD_inBuffer ib = {in, in_len, 0};
    size_t last = 1;
    while (ib.pos < ib.size || last != 0) {
        if (len == cap && !grow_output(&buf, &cap, max_out, &st))
            break;
        ZSTD_outBuffer ob = {buf + len, cap - len, 0};
        size_t before_in = ib.pos;
        last = ZSTD_decompressStream(ds, &ob, &ib);
        len += ob.pos;
        if (ZSTD_isError(last)) {
            st = PL_ERR_INVALID;
            pl_errf(err, st, "zstd: corrupt data near input byte %zu: %s", ib.pos,
                    ZSTD_getErrorName(last));
            break;
        }
        if (ib.pos == ib.size && last != 0 && ob.pos < ob.size) {
            st = PL_ERR_INVALID;
            pl_errf(err, st, "zstd: truncated data (ends after %zu bytes)", in_len);
            break;
        }
        if (ob.pos == 0 && ib.pos == before_in && ob.size > 0) {
            st = PL_ERR_INVALID;
            pl_errf(err, st, "zstd: no progress at input byte %zu", ib.pos);
            break;
        }
    }
    ZSTD_freeDStream(ds);
    if (st == PL_ERR_TOO_LARGE)
        pl_errf(err, st, "zstd: decompressed body larger than %zu bytes", max_out);
    else if (st == PL_ERR_NOMEM)
        pl_errf(err, st, "zstd: out of memory");
    if (st != PL_OK) {
        free(buf);
        return st;
    }
    if (in_len == 0) {
        free(buf);
        return pl_errf(err, PL_ERR_INVALID, "zstd: empty input");
    }
    *out = buf;
    *out_len = len;
    return PL_OK;
}

pl_status pl_decompress(pl_encoding enc, const uint8_t *in, size_t in_len, size_t max_out,
                        uint8_t **out, size_t *out_len, pl_err *err)
{
    *out = NULL;
    *out_len = 0;
    switch (enc) {
    case PL_ENCODING_IDENTITY: {
        if (in_len > max_out)
            return pl_errf(err, PL_ERR_TOO_LARGE, "body of %zu bytes is over the limit of %zu",
                           in_len, max_out);
        uint8_t *b = malloc(in_len ? in_len : 1);
        if (!b)
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        if (in_len)
            memcpy(b, in, in_len);
        *out = b;
        *out_len = in_len;
        return PL_OK;
    }
    case PL_ENCODING_GZIP:
        return inflate_with(16 + MAX_WBITS, in, in_len, max_out, out, out_len, err, "gzip");
    case PL_ENCODING_DEFLATE: {
        /* RFC 9110 says zlib-wrapped; some clients send raw deflate. A zlib
         * header is two bytes whose big-endian value is a multiple of 31. */
        bool zlib_header = in_len >= 2 && (in[0] & 0x0f) == 8 && ((in[0] << 8) | in[1]) % 31 == 0;
        if (zlib_header)
            return inflate_with(MAX_WBITS, in, in_len, max_out, out, out_len, err, "deflate");
        return inflate_with(-MAX_WBITS, in, in_len, max_out, out, out_len, err, "deflate");
    }
    case PL_ENCODING_ZSTD:
        return zstd_decompress(in, in_len, max_out, out, out_len, err);
    }
    return pl_errf(err, PL_ERR_UNSUPPORTED, "unknown encoding");
}

static pl_status deflate_with(int window_bits, const uint8_t *in, size_t in_len, int level,
                              pl_buf *out, pl_err *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, level ? level : Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return pl_errf(err, PL_ERR_NOMEM, "cannot initialise zlib");
    size_t bound = deflateBound(&zs, (uLong)in_len) + 32;
    if (!pl_buf_reserve(out, bound)) {
        deflateEnd(&zs);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)in_len;
    zs.next_out = out->data + out->len;
    zs.avail_out = (uInt)bound;
    int rc = deflate(&zs, Z_FINISH);
    if (rc != Z_STREAM_END) {
        deflateEnd(&zs);
        return pl_errf(err, PL_ERR_INTERNAL, "deflate failed (%d)", rc);
    }
    out->len += bound - zs.avail_out;
    deflateEnd(&zs);
    return PL_OK;
}

pl_status pl_compress(pl_encoding enc, const uint8_t *in, size_t in_len, int level, pl_buf *out,
                      pl_err *err)
{
    switch (enc) {
    case PL_ENCODING_IDENTITY:
        pl_buf_append(out, in, in_len);
        return pl_buf_ok(out) ? PL_OK : pl_errf(err, PL_ERR_NOMEM, "out of memory");
    case PL_ENCODING_GZIP:
        if (in_len > UINT32_MAX)
            return pl_errf(err, PL_ERR_TOO_LARGE, "body too large to compress");
        return deflate_with(16 + MAX_WBITS, in, in_len, level, out, err);
    case PL_ENCODING_DEFLATE:
        if (in_len > UINT32_MAX)
            return pl_errf(err, PL_ERR_TOO_LARGE, "body too large to compress");
        return deflate_with(MAX_WBITS, in, in_len, level, out, err);
    case PL_ENCODING_ZSTD: {
        size_t bound = ZSTD_compressBound(in_len);
        if (!pl_buf_reserve(out, bound))
            return pl_errf(err, PL_ERR_NOMEM, "out of memory");
        size_t n = ZSTD_compress(out->data + out->len, bound, in, in_len, level ? level : 3);
        if (ZSTD_isError(n))
            return pl_errf(err, PL_ERR_INTERNAL, "zstd: %s", ZSTD_getErrorName(n));
        out->len += n;
        return PL_OK;
    }
    }
    return pl_errf(err, PL_ERR_UNSUPPORTED, "unknown encoding");
}
