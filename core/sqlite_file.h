/*
 * sqlite_file.h: what proflink does with a damaged SQLite file at start.
 *
 * A file that holds answered data (a persistent sending queue with its
 * write-ahead log, the sqlite store) must neither be run on silently when
 * it is unreadable, nor stop proflink from starting, which would hold the
 * data in it hostage. So before a writer opens such a file:
 *
 *   1. pl_sqlite_file_check() opens it and runs `PRAGMA quick_check`. A file
 *      that is not a database, or fails the check, is renamed aside to
 *      `<path>.corrupt-<UTC timestamp>` (with its -wal and -shm files), and
 *      the reason is logged at warn. The caller then creates a fresh file.
 *   2. pl_sqlite_file_salvage() copies, row by row, whatever can still be
 *      read of the named tables of the file set aside into the fresh one
 *      (best effort: a row that cannot be read ends that table's copy).
 *
 * A file locked by another process is not damaged: it is left alone, and
 * the caller's own open reports the lock.
 */
#ifndef PL_CORE_SQLITE_FILE_H
#define PL_CORE_SQLITE_FILE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

/* Checks the database at `path` (absent or empty: fine). When it is
 * damaged, moves it aside, logs why under `component`, writes the new name
 * to `aside` (cap bytes) and returns true; false otherwise. */
bool pl_sqlite_file_check(const char *path, const char *component, char *aside, size_t cap);

/* Copies the readable rows of `tables` (NULL-terminated) from the database
 * file `from` into `db`, in one transaction. A table missing in `db` is
 * created from `from`'s schema text. Returns the number of rows copied. */
size_t pl_sqlite_file_salvage(sqlite3 *db, const char *from, const char *const *tables,
                              const char *component);

/* Sets the SQLite library up before the first connection: no memory
 * statistics (SQLite otherwise takes one process-wide mutex on every
 * allocation and free of every connection; proflink reads none of them).
 * Call at process start, before any thread opens a database; once SQLite
 * is initialised it does nothing. */
void pl_sqlite_library_setup(void);

#endif
