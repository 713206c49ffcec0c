/*
 * fuzz_sources.c: the command line's configuration sources. The input's
 * first line is a --set argument, the rest a yaml: fragment; both become
 * documents, `a::b` keys are split, the --set is merged over the fragment
 * and the result printed with secrets masked. Whatever the bytes: a
 * document or an error that says why, never a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/sources.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (memchr(data, 0, size))
        return 0; /* a NUL ends an argument on a command line */
    /* "yaml:" + input, so the fragment after the first line can borrow it */
    char *text = malloc(size + 6);
    if (!text)
        return 0;
    memcpy(text, "yaml:", 5);
    memcpy(text + 5, data, size);
    text[size + 5] = '\0';
    const char *set = text + 5;
    char *fragment = NULL;
    char *nl = strchr(text + 5, '\n');
    size_t rest = nl ? strlen(nl + 1) : 0;
    fragment = malloc(rest + 6);
    if (!fragment) {
        free(text);
        return 0;
    }
    memcpy(fragment, "yaml:", 5);
    memcpy(fragment + 5, nl ? nl + 1 : "", rest + 1);
    if (nl)
        *nl = '\0';

    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *base = pl_cfg_doc_from_uri(fragment, &errs);
    pl_cfg_doc *over = pl_cfg_doc_from_set(set, &errs);
    if (!base && errs.n == 0)
        __builtin_trap(); /* a refusal always says why */
    if (base && over && pl_cfg_doc_split_paths(base) == 0 && pl_cfg_doc_split_paths(over) == 0 &&
        pl_cfg_doc_merge(base, over) == 0)
        over = NULL; /* taken by the merge */
    if (base) {
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull) {
            pl_cfg_doc_print(base, devnull, true);
            fclose(devnull);
        }
    }
    pl_cfg_doc_free(over);
    pl_cfg_doc_free(base);
    pl_cfg_errors_free(&errs);
    free(fragment);
    free(text);
    return 0;
}
