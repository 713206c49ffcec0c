/*
 * sqlite_damage_fixture.h: damage to a queue's SQLite file, as a disk or a
 * crash would do it: the file grows by other pages (a filler table), then
 * its last four 16 KiB pages are overwritten with garbage, leaving the
 * queue's own pages at the front intact.
 */
#ifndef PL_TESTS_SQLITE_DAMAGE_FIXTURE_H
#define PL_TESTS_SQLITE_DAMAGE_FIXTURE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>

/* False when the file could not be opened or was too small to damage. */
static __attribute__((unused)) bool damage_sqlite_tail(const char *path)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return false;
    int rc = sqlite3_exec(db,
                          "CREATE TABLE filler(b BLOB);"
                          "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE "
                          "i < 40) INSERT INTO filler SELECT randomblob(9000) FROM n;",
                          NULL, NULL, NULL);
    sqlite3_close(db);
    FILE *f = fopen(path, "r+b");
    if (rc != SQLITE_OK || !f) {
        if (f)
            fclose(f);
        return false;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    if (size <= 8 * 16384) {
        fclose(f);
        return false;
    }
    fseek(f, size - 4 * 16384, SEEK_SET);
    for (long i = 0; i < 4 * 16384; i++)
        fputc(0xA5, f);
    return fclose(f) == 0;
}

#endif
