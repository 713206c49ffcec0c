/*
 * query.h: `proflink query ...`, implemented with the embedded store
 * (store/sqlite_query.c). main() hands it the arguments after "query".
 */
#ifndef PL_PIPELINE_QUERY_H
#define PL_PIPELINE_QUERY_H

/* Returns the process exit code. */
int pl_query_main(int argc, char **argv);

#endif
