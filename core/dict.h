/*
 * dict.h: the profiles dictionary builder (included by core/model.h).
 *
 * A batch's pl_dictionary is built only through these functions: decoders,
 * the JFR reader, the batch processor, correlation and redaction all write
 * through them, and everyone else reads the tables through a
 * `const pl_dictionary *`. The builder owns one deduplicating index per
 * table (a pl_htab of core/hash.h in the batch arena, keyed with the
 * process's hash key since the entries are a client's data), kept beside
 * the tables in the dictionary itself, so that every writer of one batch
 * shares it: an entry interned by the decoder is found again by the
 * processor that adds the same string later.
 *
 * The tables are append-only. Entry 0 of each is the zero value and is
 * never returned for new content (but the empty string interns to 0).
 * Entries appended without deduplication (pl_dict_append, a decoder's
 * staged block) are indexed the next time the table is interned into; an
 * entry replaced in place (pl_dict_set, for redaction and correlation) is
 * indexed under its new content. A lookup compares the entry's current
 * content, so a hit is always exact; an equal entry it misses (only after
 * a replacement) costs a duplicate, never a wrong index.
 *
 * All functions return an index (>= 0) or -1 on OOM or a full table (2^31
 * entries), unless said otherwise. Memory comes from the arena given, which
 * must be the one the dictionary's tables live in (the batch's).
 */
#ifndef PL_CORE_DICT_H
#define PL_CORE_DICT_H

#include <stdint.h>

/* The tables, for the generic functions below. */
typedef enum pl_dict_table {
    PL_DICT_STRINGS,    /* pl_bytes */
    PL_DICT_FUNCTIONS,  /* pl_function */
    PL_DICT_MAPPINGS,   /* pl_mapping */
    PL_DICT_LOCATIONS,  /* pl_location */
    PL_DICT_STACKS,     /* pl_stack */
    PL_DICT_ATTRIBUTES, /* pl_kvu */
    PL_DICT_LINKS,      /* pl_link */
    PL_DICT_TABLES
} pl_dict_table;

/* Makes sure every table holds its zero entry at index 0 (link 0 carries
 * zero ids of full length). 0, or -1 on OOM. */
int pl_dict_ensure_zero_entries(pl_arena *arena, pl_dictionary *dict);

/* Interning: the index of an entry equal to the one given, appended when
 * there is none. Strings are stored as given (they must live as long as
 * the batch) unless by pl_dict_intern_string_copy; a function, mapping or
 * attribute is copied shallowly (its arrays and value must live in the
 * arena); a location's lines and a stack's location list are copied into
 * the arena when appended (the caller's may be scratch). */
int32_t pl_dict_intern_string(pl_arena *arena, pl_dictionary *dict, pl_bytes s);
/* The same, copying s into the arena when it is appended (for strings of
 * another batch). */
int32_t pl_dict_intern_string_copy(pl_arena *arena, pl_dictionary *dict, pl_bytes s);
int32_t pl_dict_intern_function(pl_arena *arena, pl_dictionary *dict, const pl_function *f);
int32_t pl_dict_intern_mapping(pl_arena *arena, pl_dictionary *dict, const pl_mapping *m);
int32_t pl_dict_intern_location(pl_arena *arena, pl_dictionary *dict, const pl_location *l);
int32_t pl_dict_intern_stack(pl_arena *arena, pl_dictionary *dict, const int32_t *locs, uint32_t n);
int32_t pl_dict_intern_attribute(pl_arena *arena, pl_dictionary *dict, int32_t key_strindex,
                                 pl_value value, int32_t unit_strindex);
int32_t pl_dict_intern_link(pl_arena *arena, pl_dictionary *dict, const pl_link *link);

/* Appends a (shallow) copy of `entry`, of table t's type, without looking
 * for an equal one: for entries that must stay apart (one link per span).
 * Its index, or -1. */
int32_t pl_dict_append(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, const void *entry);

/* A staged block, for a decoder that keeps its input's numbering: room for
 * n zeroed entries past the end of table t, to fill in place; they become
 * entries (at the positions the table had then) at pl_dict_append_commit,
 * and are forgotten when it is not called. NULL on OOM. */
void *pl_dict_append_begin(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, uint32_t n);
void pl_dict_append_commit(pl_dictionary *dict, pl_dict_table t, uint32_t n);

/* Makes room for `extra` more entries of table t and in its index (for a
 * writer that knows how many it adds). 0, or -1 on OOM. */
int pl_dict_reserve(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, uint32_t extra);

/* Replaces entry `index` (1 .. n-1) of table t with a shallow copy of
 * `entry` (redaction renaming a function, correlation completing a link).
 * 0, or -1 when out of range or on OOM (the entry is replaced even then;
 * only its indexing failed, which costs a duplicate later). */
int pl_dict_set(pl_arena *arena, pl_dictionary *dict, pl_dict_table t, int32_t index,
                const void *entry);

/* pl_batch_clone's part (core/model.h's copier): replaces every pointer of
 * a shallow copy of a dictionary with a copy in c->arena; the copy starts
 * without an index. 0, or -1 on OOM. */
struct pl_copier;
int pl_dict_copy(struct pl_copier *c, pl_dictionary *d);

/* Readers. Text of a string index; empty for out-of-range. */
pl_bytes pl_dict_string(const pl_dictionary *dict, int32_t index);
/* Entries in table t. */
uint32_t pl_dict_count(const pl_dictionary *dict, pl_dict_table t);

#endif
