/*
 * value_json.h: an attribute value (pl_value) as text, the one writer behind
 * every place that shows a value: the OTLP/JSON encoder (AnyValue as the
 * OTLP mapping), the store's attribute columns and the attributes
 * processor's string conversion (plain JSON), and the debug exporter
 * (human-readable). Their outputs differ in a few real ways, which the
 * options name; everything else is shared.
 *
 *                 shape  bytes   doubles    non-finite          int64   depth
 *   OTLP/JSON     OTLP   base64  ROUNDTRIP  "NaN"/"Infinity"    string  -
 *   store         PLAIN  hex     G17        null                number  16
 *   attributes    PLAIN  base64  SHORTEST   "NaN"/"+Inf"/"-Inf" number  -
 *   debug         TEXT   size    G          as printf           number  8
 */
#ifndef PL_VALUE_JSON_H
#define PL_VALUE_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "model.h"

typedef enum pl_vj_shape {
    PL_VJ_PLAIN, /* JSON: "s", 1, [..], {"k":v}; an empty value is null */
    PL_VJ_OTLP,  /* the OTLP/JSON AnyValue: {"stringValue":"s"}, {"kvlistValue":{"values":[..]}} */
    PL_VJ_TEXT,  /* for people: "s", [a, b], {k: v}, (empty); strings unescaped */
} pl_vj_shape;

typedef enum pl_vj_bytes {
    PL_VJ_BYTES_BASE64, /* "AQI=" */
    PL_VJ_BYTES_HEX,    /* "0102" */
    PL_VJ_BYTES_SIZE,   /* <2 bytes> */
} pl_vj_bytes;

typedef enum pl_vj_double {
    PL_VJ_DOUBLE_ROUNDTRIP, /* %.15g, or %.17g when that does not read back */
    PL_VJ_DOUBLE_SHORTEST,  /* the fewest digits that read back */
    PL_VJ_DOUBLE_G17,       /* %.17g */
    PL_VJ_DOUBLE_G,         /* %g (loses digits: for display only) */
} pl_vj_double;

typedef enum pl_vj_nonfinite {
    PL_VJ_NONFINITE_NULL,   /* null */
    PL_VJ_NONFINITE_OTLP,   /* "NaN", "Infinity", "-Infinity" (the protobuf JSON mapping) */
    PL_VJ_NONFINITE_PROM,   /* "NaN", "+Inf", "-Inf" (the Collector's attribute conversion) */
    PL_VJ_NONFINITE_FORMAT, /* whatever the double format writes (nan, inf) */
} pl_vj_nonfinite;

typedef enum pl_vj_strindex {
    PL_VJ_STRINDEX_NUMBER, /* the index */
    PL_VJ_STRINDEX_NULL,   /* null */
    PL_VJ_STRINDEX_DICT,   /* the dictionary's string (TEXT), "" without one */
} pl_vj_strindex;

typedef struct pl_value_json_opts {
    uint8_t shape;     /* pl_vj_shape */
    uint8_t bytes;     /* pl_vj_bytes */
    uint8_t doubles;   /* pl_vj_double */
    uint8_t nonfinite; /* pl_vj_nonfinite */
    uint8_t strindex;  /* pl_vj_strindex */
    bool escape_all_u; /* strings: every control character as \u00XX (not \n, \t, \r) */
    bool int_string;   /* int64 as a JSON string ("-5"), as the OTLP mapping says */
    int max_depth;     /* > 0: values nested deeper are written as too_deep */
    const char *too_deep;
    const pl_dictionary *dict; /* PL_VJ_STRINDEX_DICT */
} pl_value_json_opts;

/* The presets of the table above. */
extern const pl_value_json_opts pl_vj_otlp, pl_vj_store, pl_vj_attributes, pl_vj_debug;

/* Appends v (nothing is appended once b has failed). */
void pl_value_json(pl_buf *b, const pl_value *v, const pl_value_json_opts *o);

/* Attributes as one map value (a kvlist): {"k":v,...} in PLAIN. */
void pl_kvs_json(pl_buf *b, const pl_kv *items, uint32_t n, const pl_value_json_opts *o);

/* A JSON string in the options' escaping (quoted, or raw for TEXT). */
void pl_vj_string(pl_buf *b, const uint8_t *s, size_t n, const pl_value_json_opts *o);

/* Integers without printf; `quoted` writes them as JSON strings. */
void pl_json_uint(pl_buf *b, uint64_t v, bool quoted);
void pl_json_int(pl_buf *b, int64_t v, bool quoted);

#endif
