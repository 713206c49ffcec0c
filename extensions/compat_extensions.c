/*
 * compat_extensions.c: the `pprof` and `zpages` extensions.
 *
 * Collector configurations copied from elsewhere often list these two. In the
 * Collector they expose Go's runtime profiler and in-process debug pages;
 * proflink has neither, so both load, log once that they do nothing, and let
 * the rest of the configuration run. Their Collector keys are accepted and
 * ignored (PL_CFG_IGNORED) so `proflink validate` passes such a file.
 */
#include <stdlib.h>

#include "core/component.h"
#include "core/log.h"

#include "extensions/compat_extensions.config.h"

#include "extensions/compat_extensions.config.inc"

static pl_status compat_create(const pl_create_settings *settings, const void *config, void **out,
                               pl_err *err)
{
    (void)config;
    (void)err;
    pl_info(settings->id, "loaded for compatibility with Collector configs; it has no effect in "
                          "proflink (see GET /metrics on the telemetry address instead)");
    *out = malloc(1);
    return *out ? PL_OK : PL_ERR_NOMEM;
}

static void compat_destroy(void *self)
{
    free(self);
}

const pl_component_type pl_extension_pprof = {
    PL_COMPONENT_HEAD("pprof", PL_KIND_EXTENSION, 0, &pprof_section),
    .description = "accepted for Collector configs (Go runtime profiler there); no effect",
    .create = compat_create,
    .destroy = compat_destroy,
};

const pl_component_type pl_extension_zpages = {
    PL_COMPONENT_HEAD("zpages", PL_KIND_EXTENSION, 0, &zpages_section),
    .description = "accepted for Collector configs (debug pages there); no effect",
    .create = compat_create,
    .destroy = compat_destroy,
};
