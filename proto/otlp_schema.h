/*
 * otlp_schema.h: protobuf message descriptions generated at build time from
 * the .proto files (gen_schema.py -> otlp_schema_gen.c), for the
 * table-driven OTLP/JSON -> protobuf transcoder (otlp_transcode.c).
 *
 * One row per field: its JSON name (lowerCamelCase; snake_case input is
 * matched by folding), number, type, whether it is repeated, whether OTLP/JSON
 * writes it as hex (trace and span ids) rather than base64, and its
 * sub-message or enum.
 */
#ifndef PL_OTLP_SCHEMA_H
#define PL_OTLP_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

typedef enum pl_pbtype {
    PL_PB_DOUBLE,
    PL_PB_FLOAT,
    PL_PB_INT32,
    PL_PB_INT64,
    PL_PB_UINT32,
    PL_PB_UINT64,
    PL_PB_SINT32,
    PL_PB_SINT64,
    PL_PB_FIXED32,
    PL_PB_FIXED64,
    PL_PB_SFIXED32,
    PL_PB_SFIXED64,
    PL_PB_BOOL,
    PL_PB_STRING,
    PL_PB_BYTES,
    PL_PB_ENUM,
    PL_PB_MESSAGE,
} pl_pbtype;

typedef struct pl_pbenum {
    const char *const *names;
    const int32_t *values;
    uint16_t n;
} pl_pbenum;

typedef struct pl_pbmsg pl_pbmsg;

typedef struct pl_pbfield {
    const char *json;
    uint8_t json_len;
    uint8_t type; /* pl_pbtype */
    uint8_t repeated;
    uint8_t hex_id;
    uint32_t number;
    const pl_pbmsg *msg; /* PL_PB_MESSAGE */
    const pl_pbenum *en; /* PL_PB_ENUM */
} pl_pbfield;

struct pl_pbmsg {
    const char *name;
    const pl_pbfield *fields; /* by field number */
    uint16_t n_fields;
};

#include "otlp_schema_gen.h"

#endif
