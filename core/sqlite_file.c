/*
 * sqlite_file.c: damaged SQLite files set aside and salvaged (see
 * sqlite_file.h). Runs on the thread that is about to own the file's
 * connection, before it opens it; each call uses its own short-lived
 * connections.
 */
#include "core/sqlite_file.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

/* The first line quick_check answers, or the error that stopped it. true
 * when the file reads as a sound database; *busy when it is locked. */
static bool quick_check(const char *path, char *why, size_t cap, bool *busy)
{
    *busy = false;
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    sqlite3_stmt *st = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL);
    bool ok = false;
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            const char *r = (const char *)sqlite3_column_text(st, 0);
            ok = r && strcmp(r, "ok") == 0;
            if (!ok)
                snprintf(why, cap, "quick_check: %s", r ? r : "(no answer)");
        }
    }
    if (rc != SQLITE_OK && rc != SQLITE_ROW) {
        int code = rc & 0xff;
        *busy = code == SQLITE_BUSY || code == SQLITE_LOCKED;
        snprintf(why, cap, "%s", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return ok;
}

bool pl_sqlite_file_check(const char *path, const char *component, char *aside, size_t cap)
{
    struct stat sb;
    if (!path || !path[0] || path[0] == ':' || stat(path, &sb) != 0 || sb.st_size == 0)
        return false;
    char why[512] = "";
    bool busy;
    if (quick_check(path, why, sizeof(why), &busy) || busy)
        return false;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
    /* never over an earlier file set aside (two in one second) */
    char to[4096];
    snprintf(to, sizeof(to), "%s.corrupt-%s", path, stamp);
    for (int i = 2; i < 1000 && access(to, F_OK) == 0; i++)
        snprintf(to, sizeof(to), "%s.corrupt-%s-%d", path, stamp, i);
    if (rename(path, to) != 0) {
        pl_error(component,
                 "%s is damaged (%s) and cannot be moved aside: %s; proflink keeps using it", path,
                 why, strerror(errno));
        return false;
    }
    const char *ext[] = {"-wal", "-shm"};
    for (int i = 0; i < 2; i++) {
        char a[4200], b[4200];
        snprintf(a, sizeof(a), "%s%s", path, ext[i]);
        snprintf(b, sizeof(b), "%s%s", to, ext[i]);
        rename(a, b); /* absent: fine */
    }
    pl_warn(component, "%s is damaged (%s): moved aside to %s; a fresh file is used", path, why,
            to);
    if (aside)
        snprintf(aside, cap, "%s", to);
    return true;
}

static bool table_exists(sqlite3 *db, const char *schema, const char *table)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT 1 FROM %s.sqlite_master WHERE type='table' AND name=?1",
             schema);
    sqlite3_stmt *st = NULL;
    bool found = false;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
        found = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return found;
}

/* Creates `table` in db's main schema from the old file's text. */
static bool create_like(sqlite3 *db, sqlite3 *old, const char *table)
{
    sqlite3_stmt *st = NULL;
    bool ok = false;
    if (sqlite3_prepare_v2(old, "SELECT sql FROM sqlite_master WHERE type='table' AND name=?1", -1,
                           &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            ok = sqlite3_exec(db, (const char *)sqlite3_column_text(st, 0), NULL, NULL, NULL) ==
                 SQLITE_OK;
    }
    sqlite3_finalize(st);
    return ok;
}

/* Copies rows of one table until the old file stops answering. */
static size_t copy_rows(sqlite3 *db, sqlite3 *old, const char *table)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT * FROM \"%s\"", table);
    sqlite3_stmt *rd = NULL, *wr = NULL;
    size_t copied = 0;
    if (sqlite3_prepare_v2(old, sql, -1, &rd, NULL) != SQLITE_OK) {
        sqlite3_finalize(rd);
        return 0;
    }
    int cols = sqlite3_column_count(rd);
    char ins[2048];
    int n = snprintf(ins, sizeof(ins), "INSERT OR IGNORE INTO main.\"%s\" VALUES(", table);
    for (int c = 0; c < cols && n < (int)sizeof(ins) - 8; c++)
        n += snprintf(ins + n, sizeof(ins) - (size_t)n, c ? ",?" : "?");
    snprintf(ins + n, sizeof(ins) - (size_t)n, ")");
    if (sqlite3_prepare_v2(db, ins, -1, &wr, NULL) == SQLITE_OK) {
        while (sqlite3_step(rd) == SQLITE_ROW) {
            for (int c = 0; c < cols; c++)
                sqlite3_bind_value(wr, c + 1, sqlite3_column_value(rd, c));
            if (sqlite3_step(wr) == SQLITE_DONE)
                copied++;
            sqlite3_reset(wr);
            sqlite3_clear_bindings(wr);
        }
    }
    sqlite3_finalize(wr);
    sqlite3_finalize(rd);
    return copied;
}

size_t pl_sqlite_file_salvage(sqlite3 *db, const char *from, const char *const *tables,
                              const char *component)
{
    sqlite3 *old = NULL;
    size_t total = 0;
    /* read-write: the file set aside may need its -wal recovered */
    if (sqlite3_open_v2(from, &old, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
        SQLITE_OK) {
        pl_warn(component, "nothing can be read back from %s: %s", from,
                old ? sqlite3_errmsg(old) : "cannot open");
        sqlite3_close(old);
        return 0;
    }
    bool tx = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) == SQLITE_OK;
    for (size_t i = 0; tables[i]; i++) {
        if (!table_exists(db, "main", tables[i]) && !create_like(db, old, tables[i]))
            continue;
        size_t n = copy_rows(db, old, tables[i]);
        if (n)
            pl_info(component, "%zu rows of %s read back from %s", n, tables[i], from);
        total += n;
    }
    if (tx && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        pl_warn(component, "cannot keep the rows read back from %s: %s", from, sqlite3_errmsg(db));
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        total = 0;
    }
    sqlite3_close(old);
    return total;
}

void pl_sqlite_library_setup(void)
{
    /* SQLITE_MISUSE once the library is initialised: nothing to undo */
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
