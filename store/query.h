/*
 * query.h: `proflink query ...`, implemented with the embedded store
 * (store/sqlite_query.c). main() hands it the arguments after "query" and
 * the component types a --config file is read with (the registry's).
 */
#ifndef PL_STORE_QUERY_H
#define PL_STORE_QUERY_H

#include "core/component.h"

/* Returns the process exit code. */
int pl_query_main(int argc, char **argv, const pl_component_type *const *types);

#endif
