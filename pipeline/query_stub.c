/*
 * query_stub.c: stands in for `proflink query` while the build has no
 * embedded store (store/sqlite_query.c); pipeline/meson.build leaves it
 * out once that file is built. It is also weak, so a real pl_query_main
 * wherever it lives wins over it instead of clashing with it.
 */
#include <stdio.h>

#include "store/query.h"

__attribute__((weak)) int pl_query_main(int argc, char **argv,
                                        const pl_component_type *const *types)
{
    (void)argc;
    (void)argv;
    (void)types;
    fprintf(stderr, "proflink: query: this build has no embedded store\n");
    return 1;
}
