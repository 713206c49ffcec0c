/*
 * json_reader.h: a streaming (pull) JSON reader over one buffer.
 *
 * No document tree is built: the caller asks for the next value in the shape
 * it expects (an object's members, an array's elements, a string, a number)
 * and skips what it does not know with pl_jr_skip. Strings come back as views
 * into the buffer (between the quotes); only strings that contain escapes
 * need pl_jr_unescape. So a decoder that keeps the buffer alive can point its
 * strings into it, as the protobuf decoder does.
 *
 * The reader is strict (RFC 8259): every string is checked to be valid UTF-8
 * and free of raw control characters, numbers follow the JSON grammar, and
 * nesting is bounded by max_depth. The first error stops the reader: every
 * later call fails, and pl_jr_error tells what and where.
 */
#ifndef PL_JSON_READER_H
#define PL_JSON_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pl_jtype {
    PL_JT_NONE = 0, /* end of input, or after an error */
    PL_JT_OBJECT,
    PL_JT_ARRAY,
    PL_JT_STRING,
    PL_JT_NUMBER,
    PL_JT_TRUE,
    PL_JT_FALSE,
    PL_JT_NULL,
    PL_JT_BAD, /* a character no JSON value starts with */
} pl_jtype;

typedef struct pl_jr {
    const uint8_t *p, *end, *start;
    const char *error; /* first error; NULL while the input is fine */
    size_t error_at;   /* its byte offset */
    unsigned depth, max_depth;
} pl_jr;

/* A string value or key: the raw bytes between the quotes. */
typedef struct pl_jstr {
    const uint8_t *ptr;
    size_t len;
    bool escaped; /* contains backslash escapes: use pl_jr_unescape */
} pl_jstr;

void pl_jr_init(pl_jr *r, const uint8_t *buf, size_t len, unsigned max_depth);

/* Skips white space and tells the type of the next value (not consumed). */
pl_jtype pl_jr_peek(pl_jr *r);

/* Each reads one value of its type; false on a syntax error (or when the
 * next value is of another type: check with pl_jr_peek first). */
bool pl_jr_string(pl_jr *r, pl_jstr *out);
bool pl_jr_number(pl_jr *r, const char **text, size_t *len);
bool pl_jr_literal(pl_jr *r); /* true, false or null */

/* Objects: pl_jr_object_begin consumes '{'; then each pl_jr_object_next
 * returns 1 with the next key (its ':' consumed, the value is next), 0 at the
 * closing '}' (consumed), -1 on an error. `count` starts at 0 and is kept by
 * the caller. Arrays alike, without a key. */
bool pl_jr_object_begin(pl_jr *r);
int pl_jr_object_next(pl_jr *r, unsigned *count, pl_jstr *key);
bool pl_jr_array_begin(pl_jr *r);
int pl_jr_array_next(pl_jr *r, unsigned *count);

/* How many bytes from p on are plain string content (ASCII, no quote,
 * backslash or control character), up to end: a decoder's fast path can
 * take such a string as is, the reader would accept it unchanged. */
size_t pl_jr_plain_len(const uint8_t *p, const uint8_t *end);

/* Skips any one value, checking its syntax. */
bool pl_jr_skip(pl_jr *r);

/* True when only white space remains (sets an error otherwise). */
bool pl_jr_finish(pl_jr *r);

/* Records an error at the current position (the first one wins); false. */
bool pl_jr_fail(pl_jr *r, const char *what);

/* Writes the unescaped string into out, which holds at least s->len bytes
 * (unescaping never lengthens). Returns the length, or -1 for an escape that
 * does not make valid UTF-8 (a lone surrogate). */
long pl_jr_unescape(const pl_jstr *s, uint8_t *out);

/* Key comparison after folding case and dropping '_' on both sides, so
 * "start_time_unix_nano" matches "startTimeUnixNano". */
bool pl_jr_key_folded_eq(const uint8_t *key, size_t key_len, const char *name);

#endif
