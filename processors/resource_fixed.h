/*
 * resource_fixed.h: a fixed set of resource attributes applied to every
 * resource of traces, profiles, logs and metrics, with the `resource`
 * processor's engine (attributes.c). Used by resourcedetection.
 */
#ifndef PL_RESOURCE_FIXED_H
#define PL_RESOURCE_FIXED_H

#include <stdbool.h>
#include <stddef.h>

#include "core/component.h"

/* Builds an instance setting keys[i] = values[i] (strings, copied) on every
 * resource: replacing a value already there when `override`, else only
 * where the key is absent. */
pl_status pl_resource_fixed_create(const pl_create_settings *s, const char *const *keys,
                                   const char *const *values, size_t n, bool override, void **out,
                                   pl_err *err);
pl_status pl_resource_fixed_consume(void *self, pl_batch *batch, pl_consumer *next);
void pl_resource_fixed_destroy(void *self);

#endif
