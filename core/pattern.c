/*
 * pattern.c: PCRE2 compilation and matching on byte views, replace-all, and
 * a small SHA-256 (see pattern.h).
 *
 * SHA-256 is written out here (FIPS 180-4) rather than linked from OpenSSL:
 * it is 80 lines, it is only used to hash short attribute values, and it
 * keeps the build free of a crypto dependency for one function.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pattern.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"

int pl_pattern_compile(pl_pattern *p, const char *src, char *err, size_t err_len)
{
    memset(p, 0, sizeof(*p));
    int code_err = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code *code =
        pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED, 0, &code_err, &offset, NULL);
    if (!code) {
        PCRE2_UCHAR msg[256];
        if (pcre2_get_error_message(code_err, msg, sizeof(msg)) < 0)
            snprintf((char *)msg, sizeof(msg), "error %d", code_err);
        snprintf(err, err_len, "%s at offset %zu", (const char *)msg, (size_t)offset);
        return -1;
    }
    /* JIT makes matching several times faster; without it (some platforms,
     * or no executable memory) the interpreter gives the same results. */
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    uint32_t groups = 0, name_count = 0, entry_size = 0;
    PCRE2_SPTR table = NULL;
    pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups);
    pcre2_pattern_info(code, PCRE2_INFO_NAMECOUNT, &name_count);
    pcre2_pattern_info(code, PCRE2_INFO_NAMEENTRYSIZE, &entry_size);
    pcre2_pattern_info(code, PCRE2_INFO_NAMETABLE, &table);
    p->code = code;
    p->n_groups = groups;
    p->group_names = calloc(groups + 1, sizeof(char *));
    p->match_data = pcre2_match_data_create_from_pattern(code, NULL);
    if (!p->group_names || !p->match_data) {
        pl_pattern_free(p);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    /* Name table entries: 2-byte group number, then the NUL-terminated name. */
    for (uint32_t i = 0; i < name_count; i++) {
        PCRE2_SPTR e = table + (size_t)i * entry_size;
        uint32_t number = (uint32_t)e[0] << 8 | e[1];
        if (number > groups || p->group_names[number])
            continue;
        p->group_names[number] = strdup((const char *)e + 2);
        if (!p->group_names[number]) {
            pl_pattern_free(p);
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        p->n_named++;
    }
    return 0;
}

void pl_pattern_list_free(pl_pattern_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        pl_pattern_free(&l->items[i]);
    free(l->items);
    memset(l, 0, sizeof(*l));
}

int pl_pattern_list_build(pl_pattern_list *l, const pl_strlist *src, const char *what, pl_err *err)
{
    memset(l, 0, sizeof(*l));
    if (!src->n)
        return 0;
    l->items = calloc(src->n, sizeof(pl_pattern));
    if (!l->items)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory"), -1;
    for (size_t i = 0; i < src->n; i++) {
        char msg[300];
        if (pl_pattern_compile(&l->items[i], src->items[i], msg, sizeof(msg)) != 0) {
            if (what)
                pl_errf(err, PL_ERR_INVALID, "%s entry %zu: invalid regular expression \"%s\": %s",
                        what, i, src->items[i], msg);
            else
                pl_errf(err, PL_ERR_INVALID, "invalid regular expression \"%s\": %s", src->items[i],
                        msg);
            pl_pattern_list_free(l);
            return -1;
        }
        l->n = i + 1;
    }
    return 0;
}

bool pl_pattern_list_any(const pl_pattern_list *l, pl_bytes s)
{
    for (size_t i = 0; i < l->n; i++)
        if (pl_pattern_exec(&l->items[i], s, NULL, 0))
            return true;
    return false;
}

void pl_pattern_free(pl_pattern *p)
{
    if (p->group_names) {
        for (size_t g = 0; g <= p->n_groups; g++)
            free(p->group_names[g]);
        free(p->group_names);
    }
    if (p->match_data)
        pcre2_match_data_free(p->match_data);
    if (p->code)
        pcre2_code_free(p->code);
    memset(p, 0, sizeof(*p));
}

/* Runs a match from `start`; returns the pcre2_match result (>0 on match). */
static int run_match(const pl_pattern *p, pl_bytes s, size_t start)
{
    PCRE2_SPTR subject = s.ptr ? (PCRE2_SPTR)s.ptr : (PCRE2_SPTR) "";
    return pcre2_match(p->code, subject, s.len, start, 0, p->match_data, NULL);
}

bool pl_pattern_exec(const pl_pattern *p, pl_bytes s, pl_match *m, size_t n_m)
{
    int rc = run_match(p, s, 0);
    if (rc < 0)
        return false;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->match_data);
    uint32_t n_ov = pcre2_get_ovector_count(p->match_data);
    for (size_t g = 0; g < n_m; g++) {
        if (g < n_ov && g < (size_t)rc && ov[2 * g] != PCRE2_UNSET) {
            m[g].so = (int64_t)ov[2 * g];
            m[g].eo = (int64_t)ov[2 * g + 1];
        } else {
            m[g].so = m[g].eo = -1;
        }
    }
    return true;
}

int pl_pattern_replace_all(const pl_pattern *p, pl_arena *arena, pl_bytes s, pl_bytes with,
                           pl_bytes *out)
{
    *out = s;
    const char *str = s.ptr ? (const char *)s.ptr : "";
    size_t pos = 0, count = 0, cap = 0, o = 0;
    char *buf = NULL;
    while (pos <= s.len) {
        if (run_match(p, s, pos) < 0)
            break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->match_data);
        size_t so = (size_t)ov[0], eo = (size_t)ov[1];
        if (so < pos || eo < so) /* \K tricks can move the start back: stop */
            break;
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
        if (eo == so) { /* empty match: copy one byte and move on */
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
