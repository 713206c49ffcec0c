/*
 * base64.c: see base64.h.
 */
#include "base64.h"

void pl_base64_encode(const uint8_t *in, size_t len, pl_buf *out, bool pad)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (len == 0 || !pl_buf_reserve(out, (len + 2) / 3 * 4))
        return;
    uint8_t *p = out->data + out->len;
    size_t i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t x = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *p++ = (uint8_t)tbl[x >> 18];
        *p++ = (uint8_t)tbl[(x >> 12) & 63];
        *p++ = (uint8_t)tbl[(x >> 6) & 63];
        *p++ = (uint8_t)tbl[x & 63];
    }
    if (i < len) {
        uint32_t x = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);
        *p++ = (uint8_t)tbl[x >> 18];
        *p++ = (uint8_t)tbl[(x >> 12) & 63];
        if (i + 1 < len)
            *p++ = (uint8_t)tbl[(x >> 6) & 63];
        else if (pad)
            *p++ = '=';
        if (pad)
            *p++ = '=';
    }
    out->len = (size_t)(p - out->data);
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int pl_base64_decode_into(const char *in, size_t n, uint8_t *out, size_t *out_len, size_t *bad_at)
{
    size_t o = 0, end = n;
    while (end && in[end - 1] == '=')
        end--;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < end; i++) {
        int x = b64_value((unsigned char)in[i]);
        if (x < 0) {
            *bad_at = i;
            return -1;
        }
        acc = acc << 6 | (uint32_t)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    if (bits >= 6) { /* a lone trailing character */
        *bad_at = end - 1;
        return -1;
    }
    *out_len = o;
    return 0;
}

long pl_base64_decode(const char *in, size_t len, uint8_t *out)
{
    size_t n, bad;
    return pl_base64_decode_into(in, len, out, &n, &bad) ? -1 : (long)n;
}
