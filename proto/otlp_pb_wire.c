/*
 * otlp_pb_wire.c: protobuf wire reading shared by proflink's decoders (see
 * otlp_pb_internal.h), and UTF-8 validation.
 */
#include <stdarg.h>
#include <stdio.h>

#include "otlp_pb_internal.h"

/* ---- UTF-8 -------------------------------------------------------------- */

bool pl_utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        /* ASCII fast path, 8 bytes at a time. */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= len)
            break;
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (len - i <= n) /* needs n continuation bytes after the lead byte */
            return false;
        for (size_t k = 1; k <= n; k++) {
            uint8_t cc = s[i + k];
            if ((cc & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (cc & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

static const char *const wt_names[8] = {
    "varint", "fixed64", "length-delimited", "group start", "group end", "fixed32", "6", "7"};

int pl_pb_wire_wrong_wt(dec *d, const char *name, const field *f, int want)
{
    return pl_pb_wire_fail(d, name, "wire type %s, want %s", wt_names[f->wt & 7], wt_names[want]);
}

/* Counts, per field number below 32, how many elements a message holds:
 * one per occurrence, or for fields in varint_mask / fixed64_mask, the number
 * of packed elements of a LEN occurrence. */
int pl_pb_wire_count_fields(dec *d, const uint8_t *p, const uint8_t *end, uint32_t counts[32],
                            uint32_t varint_mask, uint32_t fixed64_mask)
{
    memset(counts, 0, 32 * sizeof(uint32_t));
    while (p < end) {
        field f;
        if (pl_pb_wire_next_field(d, &p, end, &f))
            return -1;
        if (f.num >= 32)
            continue;
        uint32_t bit = 1u << f.num;
        uint64_t add = 1;
        if (f.wt == WT_LEN && (varint_mask & bit)) {
            add = 0;
            for (size_t i = 0; i < f.len; i++)
                add += f.ptr[i] < 0x80;
        } else if (f.wt == WT_LEN && (fixed64_mask & bit)) {
            add = f.len / 8;
        }
        if (counts[f.num] + add > UINT32_MAX / 2)
            return pl_pb_wire_fail(d, NULL, "too many elements in field %u", f.num);
        counts[f.num] += (uint32_t)add;
    }
    return 0;
}

/* Every array of the model comes from here: its elements are charged to
 * the request's budget (messages with a fixed overhead each, so a body of
 * empty sub-messages costs what it would take) before the memory is taken.
 * NULL with d->status set when over budget or out of memory. */
void *pl_pb_wire_calloc(dec *d, size_t n, size_t size)
{
    size_t cost = n * (size + (size > 8 ? 16 : 0));
    if (size && n > SIZE_MAX / 2 / size)
        cost = SIZE_MAX;
    d->used += cost < SIZE_MAX - d->used ? cost : SIZE_MAX - d->used;
    if (d->used > d->budget) {
        d->status = PL_ERR_TOO_LARGE;
        if (d->err)
            snprintf(d->err->msg, sizeof d->err->msg,
                     "decoded request larger than the limit of %zu bytes (every object counts)",
                     d->budget);
        return NULL;
    }
    void *p = pl_arena_calloc(d->arena, n, size);
    if (!p)
        pl_pb_wire_oom(d);
    return p;
}

/* Repeated int32 / int64 (varint, packed or not) and fixed64. `cap` comes
 * from count_fields, so running past it means the two passes disagree. */
int pl_pb_wire_rep_varint(dec *d, const field *f, const char *name, void *arr, int elem_size,
                          uint32_t *n, uint32_t cap)
{
    if (f->wt == WT_VARINT) {
        if (*n >= cap)
            return pl_pb_wire_fail(d, name, "element count changed between passes");
        if (elem_size == 4)
            ((int32_t *)arr)[(*n)++] = (int32_t)(uint32_t)f->v;
        else
            ((int64_t *)arr)[(*n)++] = (int64_t)f->v;
        return 0;
    }
    EXPECT(f, WT_LEN, name);
    const uint8_t *p = f->ptr, *end = f->ptr + f->len;
    while (p < end) {
        uint64_t v;
        int rc = read_varint(&p, end, &v);
        if (rc)
            return pl_pb_wire_fail(d, name, "%s packed varint",
                                   rc == -1 ? "truncated" : "overflowing");
        if (*n >= cap)
            return pl_pb_wire_fail(d, name, "element count changed between passes");
        if (elem_size == 4)
            ((int32_t *)arr)[(*n)++] = (int32_t)(uint32_t)v;
        else
            ((int64_t *)arr)[(*n)++] = (int64_t)v;
    }
    return 0;
}

int pl_pb_wire_rep_fixed64(dec *d, const field *f, const char *name, uint64_t *arr, uint32_t *n,
                           uint32_t cap)
{
    if (f->wt == WT_I64) {
        if (*n >= cap)
            return pl_pb_wire_fail(d, name, "element count changed between passes");
        arr[(*n)++] = f->v;
        return 0;
    }
    EXPECT(f, WT_LEN, name);
    if (f->len % 8)
        return pl_pb_wire_fail(d, name, "packed fixed64 length %zu is not a multiple of 8", f->len);
    for (size_t i = 0; i < f->len; i += 8) {
        if (*n >= cap)
            return pl_pb_wire_fail(d, name, "element count changed between passes");
        arr[(*n)++] = load64(f->ptr + i);
    }
    return 0;
}
