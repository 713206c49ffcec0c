/*
 * pattern.c: POSIX regex compilation with named-group translation, matching
 * on byte views, replace-all, and a small SHA-256 (see pattern.h).
 *
 * SHA-256 is written out here (FIPS 180-4) rather than linked from OpenSSL:
 * it is 80 lines, it is only used to hash short attribute values, and it
 * keeps the build free of a crypto dependency for one function.
 */
#include "pattern.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"

static bool is_name_start(char c)
{
    return isalpha((unsigned char)c) || c == '_';
}

static bool is_name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* Skips a bracket expression starting at src[i] == '['; returns the index
 * just after its closing ']', or 0 if it is not closed. */
static size_t skip_bracket(const char *src, size_t i)
{
    size_t j = i + 1;
    if (src[j] == '^')
        j++;
    if (src[j] == ']')
        j++;
    while (src[j] && src[j] != ']') {
        if (src[j] == '[' && (src[j + 1] == ':' || src[j + 1] == '.' || src[j + 1] == '=')) {
            char kind = src[j + 1];
            const char *end = src + j + 2;
            while (*end && !(end[0] == kind && end[1] == ']'))
                end++;
            if (!*end)
                return 0;
            j = (size_t)(end - src) + 2;
            continue;
        }
        j++;
    }
    return src[j] == ']' ? j + 1 : 0;
}

int pl_pattern_compile(pl_pattern *p, const char *src, char *err, size_t err_len)
{
    memset(p, 0, sizeof(*p));
    size_t len = strlen(src);
    char *out = malloc(len + 1);
    /* At most one group per '(' in the source. */
    size_t max_groups = 1;
    for (size_t i = 0; i < len; i++)
        max_groups += src[i] == '(';
    char **names = calloc(max_groups + 1, sizeof(char *));
    if (!out || !names) {
        free(out);
        free(names);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    size_t o = 0, group = 0, n_named = 0;
    for (size_t i = 0; i < len;) {
        char c = src[i];
        if (c == '\\') {
            if (i + 1 >= len) {
                snprintf(err, err_len, "trailing backslash at offset %zu", i);
                goto fail;
            }
            out[o++] = src[i++];
            out[o++] = src[i++];
            continue;
        }
        if (c == '[') {
            size_t end = skip_bracket(src, i);
            if (!end) {
                snprintf(err, err_len, "unterminated bracket expression at offset %zu", i);
                goto fail;
            }
            memcpy(out + o, src + i, end - i);
            o += end - i;
            i = end;
            continue;
        }
        if (c == '(') {
            group++;
            out[o++] = '(';
            if (src[i + 1] != '?') {
                i++;
                continue;
            }
            size_t at = i;
            i += 2;
            if (src[i] == ':') { /* non-capturing: becomes an unnamed group */
                i++;
                continue;
            }
            if (src[i] == 'P')
                i++;
            if (src[i] != '<') {
                snprintf(err, err_len, "unsupported group syntax \"(?\" at offset %zu", at);
                goto fail;
            }
            i++;
            size_t name_start = i;
            if (!is_name_start(src[i])) {
                snprintf(err, err_len, "invalid group name at offset %zu", name_start);
                goto fail;
            }
            while (is_name_char(src[i]))
                i++;
            if (src[i] != '>') {
                snprintf(err, err_len, "unterminated group name at offset %zu", name_start);
                goto fail;
            }
            names[group] = strndup(src + name_start, i - name_start);
            if (!names[group]) {
                snprintf(err, err_len, "out of memory");
                goto fail;
            }
            for (size_t g = 1; g < group; g++) {
                if (names[g] && strcmp(names[g], names[group]) == 0) {
                    snprintf(err, err_len, "duplicate group name \"%s\" at offset %zu",
                             names[group], name_start);
                    goto fail;
                }
            }
            n_named++;
            i++; /* '>' */
            continue;
        }
        out[o++] = src[i++];
    }
    out[o] = '\0';
    int rc = regcomp(&p->re, out, REG_EXTENDED);
    if (rc != 0) {
        char msg[256];
        regerror(rc, &p->re, msg, sizeof(msg));
        snprintf(err, err_len, "%s", msg);
        goto fail;
    }
    free(out);
    p->compiled = true;
    p->n_groups = p->re.re_nsub;
    p->group_names = names;
    p->n_named = n_named;
    /* Our own count and regcomp's agree unless the source has a '(' we did
     * not see as a group (there is none in ERE); names beyond re_nsub would
     * be out of range, so guard anyway. */
    if (group != p->n_groups) {
        snprintf(err, err_len, "group count mismatch (%zu vs %zu)", group, p->n_groups);
        pl_pattern_free(p);
        return -1;
    }
    return 0;
fail:
    free(out);
    for (size_t g = 0; g <= max_groups; g++)
        free(names[g]);
    free(names);
    return -1;
}

void pl_pattern_free(pl_pattern *p)
{
    if (p->compiled)
        regfree(&p->re);
    if (p->group_names) {
        for (size_t g = 0; g <= p->n_groups; g++)
            free(p->group_names[g]);
        free(p->group_names);
    }
    memset(p, 0, sizeof(*p));
}

bool pl_pattern_exec(const pl_pattern *p, pl_bytes s, regmatch_t *m, size_t n_m)
{
    regmatch_t local[1];
    if (n_m == 0) {
        m = local;
        n_m = 1;
    }
    m[0].rm_so = 0;
    m[0].rm_eo = (regoff_t)s.len;
    const char *str = s.ptr ? (const char *)s.ptr : "";
    return regexec(&p->re, str, n_m, m, REG_STARTEND) == 0;
}

int pl_pattern_replace_all(const pl_pattern *p, pl_arena *arena, pl_bytes s, pl_bytes with,
                           pl_bytes *out)
{
    *out = s;
    const char *str = s.ptr ? (const char *)s.ptr : "";
    size_t pos = 0, count = 0, cap = 0, o = 0;
    char *buf = NULL;
    while (pos <= s.len) {
        regmatch_t m[1];
        m[0].rm_so = (regoff_t)pos;
        m[0].rm_eo = (regoff_t)s.len;
        int flags = REG_STARTEND | (pos > 0 ? REG_NOTBOL : 0);
        if (regexec(&p->re, str, 1, m, flags) != 0)
            break;
        size_t so = (size_t)m[0].rm_so, eo = (size_t)m[0].rm_eo;
        size_t need = o + (so - pos) + with.len + (s.len - eo) + 1;
        if (need > cap) {
            size_t ncap = need * 2 + 16;
            char *nb = pl_arena_grow(arena, buf, o, ncap, 1);
            if (!nb)
                return -1;
            buf = nb;
            cap = ncap;
        }
        memcpy(buf + o, str + pos, so - pos);
        o += so - pos;
        if (with.len)
            memcpy(buf + o, with.ptr, with.len);
        o += with.len;
        count++;
        if (eo == so) { /* empty match: copy one char and move on */
            if (eo < s.len)
                buf[o++] = str[eo];
            pos = eo + 1;
        } else {
            pos = eo;
        }
    }
    if (count == 0)
        return 0;
    if (pos < s.len) {
        memcpy(buf + o, str + pos, s.len - pos);
        o += s.len - pos;
    }
    out->ptr = (const uint8_t *)buf;
    out->len = (uint32_t)o;
    return (int)count;
}

/* ---- SHA-256 (FIPS 180-4) ---------------------------------------------- */

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = hh + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) +
                      sha256_k[i] + w[i];
        uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void pl_sha256_hex(const void *data, size_t len, char out[65])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t left = len;
    while (left >= 64) {
        sha256_block(h, p);
        p += 64;
        left -= 64;
    }
    uint8_t tail[128];
    memset(tail, 0, sizeof(tail));
    if (left)
        memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tail_len = left + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tail_len - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha256_block(h, tail);
    if (tail_len == 128)
        sha256_block(h, tail + 64);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) {
            uint8_t byte = (uint8_t)(h[i] >> (24 - 8 * j));
            out[8 * i + 2 * j] = hex[byte >> 4];
            out[8 * i + 2 * j + 1] = hex[byte & 15];
        }
    out[64] = '\0';
}
