/*
 * otlp_tables.h: the OTLP messages proflink decodes into core/model.h,
 * described once as tables (private to proto/). One row per field: its
 * JSON name (lowerCamelCase; the protobuf name is its snake_case form),
 * field number (from the nanopb-generated *_tag macros, so from the .proto
 * files), kind, and where it lives in the model struct. Both decoders walk
 * these tables, in both directions: the protobuf decoder (otlp_pb_dec.c) and
 * encoder (otlp_pb_enc.c), the JSON decoder (otlp_json_dec.c) and encoder
 * (otlp_json.c). Only AnyValue, a oneof, is handled by hand in each. The
 * JSON encoder writes members in row order, the protobuf one by field number.
 */
#ifndef PL_OTLP_TABLES_H
#define PL_OTLP_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/model.h"

typedef enum fkind {
    FK_STR,  /* pl_bytes, UTF-8 (LEN) */
    FK_B64,  /* pl_bytes (LEN); base64 in JSON */
    FK_ID,   /* uint8_t[arg] + uint8_t length at aux (LEN); hex in JSON */
    FK_U32,  /* varint */
    FK_I32,  /* varint */
    FK_U64,  /* varint */
    FK_I64,  /* varint */
    FK_FX32, /* fixed32 -> uint32_t */
    FK_FX64, /* fixed64 -> uint64_t */
    FK_ENUM, /* int32_t varint; names in JSON */
    FK_MSG,  /* singular sub-message; aux = its bool has_ flag */
    FK_ANY,  /* pl_value (AnyValue) */
    /* repeated: pointer at off, uint32_t count at aux, capacity at aux2 */
    FK_LIST, /* sub-messages */
    FK_ANYS, /* AnyValues (pl_value) */
    FK_I32S, /* int32, packed varint */
    FK_I64S, /* int64, packed varint */
    FK_U64S, /* fixed64, packed */
    FK_STRS, /* strings */
} fkind;

#define FK_IS_LIST(k) ((k) >= FK_LIST)
#define NO_OFF        0xffffu
#define ARG_NO_MERGE  1 /* FK_MSG: a second occurrence is an error, not a merge */

/* Encoder flags (jfield.enc). Proto3 leaves out a member that has its
 * default value; these rows are written anyway, as proflink always has. */
#define ENC_JSON_ALWAYS 1 /* JSON: written even when empty (KeyValue.key, .value) */
#define ENC_PB_ALWAYS   2 /* protobuf: written even when empty (KeyValue.value) */
#define ENC_NONEMPTY    4 /* FK_MSG: written when its has_ flag is set or a member is */

typedef struct jmsg jmsg;
typedef struct jfield {
    const char *name; /* lowerCamelCase */
    uint8_t name_len;
    uint8_t kind;
    uint8_t arg;  /* FK_ID: id length; FK_ENUM: number of names; FK_MSG: ARG_* */
    uint8_t num;  /* protobuf field number (all below 32) */
    uint8_t enc;  /* ENC_* */
    uint16_t off; /* the member */
    uint16_t aux;
    uint16_t aux2;
    const void *sub; /* FK_MSG / FK_LIST: const jmsg *; FK_ENUM: names */
} jfield;

/* Filled once at start-up from the rows. */
typedef struct jindex {
    uint8_t by_num[32];    /* field number -> row + 1 (0: unknown) */
    uint8_t pb_order[32];  /* rows by ascending field number (protobuf encoding order) */
    uint32_t varint_mask;  /* packed varint lists, for counting elements */
    uint32_t fixed64_mask; /* packed fixed64 lists */
    bool has_lists;
    uint8_t n_lists; /* the list rows, so the decoder sizes them without a scan */
    uint8_t lists[16];
} jindex;

struct jmsg {
    uint16_t size;
    uint16_t n_fields;
    const jfield *fields;
    jindex *ix;
};

extern const jmsg pl_tm_traces, pl_tm_profiles, pl_tm_keyvalue, pl_tm_arrayvalue, pl_tm_kvlist;
/* Messages the protobuf encoder writes by hand (otlp_pb_enc.c). */
extern const jmsg pl_tm_sample, pl_tm_location, pl_tm_stack, pl_tm_function;

static inline size_t pl_tm_elem_size(const jfield *f)
{
    switch (f->kind) {
    case FK_LIST:
        return ((const jmsg *)f->sub)->size;
    case FK_ANYS:
        return sizeof(pl_value);
    case FK_I32S:
        return 4;
    case FK_I64S:
    case FK_U64S:
        return 8;
    default:
        return sizeof(pl_bytes);
    }
}

/* The row for a protobuf field number, or NULL. */
static inline const jfield *pl_tm_by_num(const jmsg *m, uint32_t num)
{
    unsigned k = num < 32 ? m->ix->by_num[num] : 0;
    return k ? &m->fields[k - 1] : NULL;
}

#endif
