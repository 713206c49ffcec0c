/*
 * buf.h: a growable byte buffer (malloc'd), used by encoders and network code,
 * and the growth step of malloc'd arrays.
 * On allocation failure a buffer becomes "failed": further appends are no-ops
 * and pl_buf_ok() returns false, so encoders check once at the end.
 */
#ifndef PL_BUF_H
#define PL_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pl_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
    bool failed;
} pl_buf;

void pl_buf_init(pl_buf *b);
void pl_buf_free(pl_buf *b);
void pl_buf_reset(pl_buf *b); /* len = 0, keeps memory, clears failure */
bool pl_buf_reserve(pl_buf *b, size_t extra);
void pl_buf_append(pl_buf *b, const void *data, size_t len);
void pl_buf_append_byte(pl_buf *b, uint8_t byte);
void pl_buf_append_str(pl_buf *b, const char *s);
void pl_buf_printf(pl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline bool pl_buf_ok(const pl_buf *b)
{
    return !b->failed;
}
/* Hands the data to the caller (malloc'd; free() it) and empties b. */
uint8_t *pl_buf_steal(pl_buf *b, size_t *len);
/* Appends s[0..n) as a JSON string literal, quotes included: '"' and '\\'
 * escaped, \n \r \t by name, other control characters as \u00XX; every other
 * byte (UTF-8 included) as it is. s may be NULL when n is 0. */
void pl_buf_json_string(pl_buf *b, const void *s, size_t n);
/* The same; all_u writes every control character as \u00XX (no \n, \r, \t). */
void pl_buf_json_string_ex(pl_buf *b, const void *s, size_t n, bool all_u);

/* Growable malloc'd arrays: makes room for one more element in *items (n
 * used, *cap allocated), doubling the capacity (the first time to `first`).
 * 0, or -1 on OOM (the array is left as it was). */
int pl_array_reserve(void **items, size_t n, size_t *cap, size_t elem_size, size_t first);

#endif
