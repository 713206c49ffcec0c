/*
 * retry.c: the `retry_on_failure` table and its check (see retry.h).
 */
#include "net/retry.h"

static int retry_validate(void *cfg, pl_cfg_ctx *ctx)
{
    pl_retry_config *c = cfg;
    return pl_cfg_check(ctx, c->max_interval >= c->initial_interval, "max_interval",
                        "must not be shorter than initial_interval");
}

#include "net/retry.config.inc"
