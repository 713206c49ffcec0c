/*
 * strlist.h: owned copies of configuration string lists (pl_strlist, see
 * component.h). A component keeps its own copy of a list from its config,
 * which the pipeline frees after create; these are the copy, free and
 * membership test they share.
 */
#ifndef PL_STRLIST_H
#define PL_STRLIST_H

#include <stdbool.h>

#include "component.h"
#include "model.h"

/* Copies every string of src into dst (malloc'd). All or nothing: on
 * failure (out of memory) dst is left empty and -1 is returned. */
int pl_strlist_copy(pl_strlist *dst, const pl_strlist *src);
/* Frees the strings and the array; l is left empty. */
void pl_strlist_free(pl_strlist *l);
/* True when one of l's strings equals s. */
bool pl_strlist_contains(const pl_strlist *l, pl_bytes s);

#endif
