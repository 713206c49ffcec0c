/*
 * registry.h: the one list of built-in component types (pipeline/registry.c).
 * It sits on the top floor because it names every component; the command
 * line and the service hand it to the config loader (pl_config_load), and
 * tests pass it, or a list of their own, the same way.
 */
#ifndef PL_PIPELINE_REGISTRY_H
#define PL_PIPELINE_REGISTRY_H

#include <stddef.h>

#include "core/component.h"

/* Every built-in component type, NULL-terminated. */
extern const pl_component_type *const pl_component_types[];
/* The built-in type of that kind and name, or NULL. */
const pl_component_type *pl_component_type_find(pl_kind kind, const char *type, size_t len);

#endif
