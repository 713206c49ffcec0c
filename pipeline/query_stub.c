/*
 * query_stub.c: stands in for `proflink query` while the build has no
 * embedded store (exporters/sqlite_query.c); pipeline/meson.build picks one.
 */
#include <stdio.h>

#include "pipeline/query.h"

int pl_query_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "proflink: query: this build has no embedded store\n");
    return 1;
}
