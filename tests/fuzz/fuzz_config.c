/*
 * fuzz_config.c: collector.yaml text through the whole loader (YAML tree,
 * env expansion, every registered component's config table, pipeline
 * checks). Whatever the bytes, it must return a config or errors, never
 * crash; and a config that loads must print its errors as none.
 */
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "pipeline/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg =
        pl_config_load_string("fuzz.yaml", (const char *)data, size, pl_component_types, &errs);
    if (cfg && errs.n != 0)
        __builtin_trap(); /* a config is returned only when there is no error */
    if (!cfg && errs.n == 0)
        __builtin_trap(); /* a refusal always says why */
    pl_config_free(cfg);
    pl_cfg_errors_free(&errs);
    return 0;
}
