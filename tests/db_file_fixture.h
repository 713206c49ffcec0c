/*
 * db_file_fixture.h: removes an SQLite database file with its -wal and -shm
 * files, as the store's tests, benchmarks and fuzz targets do before and
 * after a run.
 */
#ifndef PL_TEST_DB_FILE_FIXTURE_H
#define PL_TEST_DB_FILE_FIXTURE_H

#include <stdio.h>
#include <unistd.h>

static inline void db_file_remove(const char *path)
{
    char side[4200];
    unlink(path);
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
}

#endif
