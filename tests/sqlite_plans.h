/*
 * sqlite_plans.h: the store tests watch SQLite's query planner. SQLite logs
 * SQLITE_WARNING_AUTOINDEX whenever it plans to build an index of its own
 * for one run of a statement (a full scan of the table each time): on the
 * store's large tables that is a missing index or a query that does not
 * use the one it should. A test file calls pl_test_watch_plans() first in
 * main() (before any other SQLite call) and pl_test_plans_checked() last;
 * the latter fails the run when any such warning named a proflink table.
 */
#ifndef PL_TEST_SQLITE_PLANS_H
#define PL_TEST_SQLITE_PLANS_H

#include <sqlite3.h>
#include <stdio.h>

#include "testlib.h"

static int pl_test_autoindexes; /* warnings seen (the API thread logs too) */

static void pl_test_plan_log(void *arg, int code, const char *msg)
{
    (void)arg;
    if (code != SQLITE_WARNING_AUTOINDEX)
        return;
    __atomic_add_fetch(&pl_test_autoindexes, 1, __ATOMIC_RELAXED);
    fprintf(stderr, "  sqlite planned an %s\n", msg);
}

static void pl_test_watch_plans(void)
{
    sqlite3_config(SQLITE_CONFIG_LOG, pl_test_plan_log, NULL);
}

/* Runs as a test of its own: "ok" when no statement needed an automatic index. */
static void pl_test_plans_checked(void)
{
    CHECK_EQ_INT(__atomic_load_n(&pl_test_autoindexes, __ATOMIC_RELAXED), 0);
}

#endif
