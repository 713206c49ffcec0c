/*
 * cfg_errors_fixture.h: looking for a config error in a pl_cfg_errors, and a
 * check that shows every error there was when the wanted one is missing.
 */
#ifndef PL_TESTS_CFG_ERRORS_FIXTURE_H
#define PL_TESTS_CFG_ERRORS_FIXTURE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config/node.h"
#include "testlib.h"

/* True when some error starts with `prefix` (e.g. "t.yaml:3:5: unknown key"). */
static __attribute__((unused)) bool cfg_error_starts(const pl_cfg_errors *errs, const char *prefix)
{
    for (size_t i = 0; i < errs->n; i++)
        if (strncmp(errs->items[i].text, prefix, strlen(prefix)) == 0)
            return true;
    return false;
}

/* True when some error contains `part`. */
static __attribute__((unused)) bool cfg_error_contains(const pl_cfg_errors *errs, const char *part)
{
    for (size_t i = 0; i < errs->n; i++)
        if (strstr(errs->items[i].text, part))
            return true;
    return false;
}

/* Fails (listing the errors there were) unless `found`; `what` says what
 * was looked for. */
#define CHECK_CFG_ERROR(errs, found, what)                                                         \
    do {                                                                                           \
        if (!(found)) {                                                                            \
            PL_FAIL_("no error %s; got:", what);                                                   \
            for (size_t i_ = 0; i_ < (errs)->n; i_++)                                              \
                fprintf(stderr, "    %s\n", (errs)->items[i_].text);                               \
        }                                                                                          \
    } while (0)

#endif
