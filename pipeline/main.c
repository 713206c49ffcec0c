/*
 * main.c: the proflink command line.
 *
 *   proflink [--config F]            run the pipelines of F (default ./collector.yaml)
 *   proflink validate --config F     check F; exit 0, or 1 listing every problem
 *   proflink components              every component type, its signals and config keys
 *   proflink query ...               ask the embedded store (see `proflink query --help`)
 *   proflink --version
 *
 * Every failure to start is one line on stderr and a non-zero exit code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/decode.h"
#include "core/component.h"
#include "core/log.h"
#include "pipeline/query.h"
#include "pipeline/service.h"
#include "pipeline/version.h"

#define DEFAULT_CONFIG "collector.yaml"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: proflink [--config FILE]          run (default FILE: ./" DEFAULT_CONFIG ")\n"
            "       proflink validate --config FILE   check a configuration file\n"
            "       proflink components [TYPE]        list component types and their settings\n"
            "       proflink query ...                query the embedded store\n"
            "       proflink --version\n");
}

/* Finds --config F / --config=F / -c F (or a bare path) in argv[from..];
 * NULL if absent. Sets *bad when an unknown argument is present. */
static const char *config_arg(int argc, char **argv, int from, bool *bad)
{
    const char *path = NULL;
    for (int i = from; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) && i + 1 < argc) {
            path = argv[++i];
        } else if (strncmp(a, "--config=", 9) == 0) {
            path = a + 9;
        } else if (a[0] != '-' && !path) {
            path = a;
        } else if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) {
            fprintf(stderr, "proflink: %s needs a file name\n", a);
            *bad = true;
        } else {
            fprintf(stderr, "proflink: unknown argument '%s'\n", a);
            *bad = true;
        }
    }
    return path;
}

static int cmd_validate(const char *path)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load_file(path, &errs);
    if (!cfg) {
        pl_cfg_errors_print(&errs, stderr);
        if (errs.n > 1)
            fprintf(stderr, "%s: %zu problems found\n", path, errs.n);
        pl_cfg_errors_free(&errs);
        return 1;
    }
    for (size_t i = 0; i < cfg->n_components; i++) {
        const pl_config_component *c = &cfg->components[i];
        if (c->n_pipelines == 0 && c->key)
            fprintf(stderr, "%s:%d:%d: warning: %s '%s' is defined but not used\n", c->key->file,
                    c->key->line, c->key->col, pl_kind_name(c->kind), c->id);
    }
    printf("%s: ok (%zu pipeline%s, %zu component%s)\n", path, cfg->n_pipelines,
           cfg->n_pipelines == 1 ? "" : "s", cfg->n_components, cfg->n_components == 1 ? "" : "s");
    pl_config_free(cfg);
    pl_cfg_errors_free(&errs);
    return 0;
}

static void print_signals(unsigned mask)
{
    bool first = true;
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        if (!(mask & PL_SIGNAL_MASK(s)))
            continue;
        static const char *names[] = {"traces", "profiles", "logs", "metrics"};
        printf("%s%s", first ? "" : ", ", names[s]);
        first = false;
    }
}

/* Prints every component type, or only those whose type is `only`. */
static int cmd_components(const char *only)
{
    static const pl_kind kinds[] = {PL_KIND_RECEIVER, PL_KIND_PROCESSOR, PL_KIND_EXPORTER,
                                    PL_KIND_EXTENSION};
    int found = 0;
    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; pl_component_types[i]; i++) {
            const pl_component_type *t = pl_component_types[i];
            if (t->kind != kinds[k] || (only && strcmp(only, t->type) != 0))
                continue;
            found++;
            printf("%s %s\n", pl_kind_name(t->kind), t->type);
            if (t->signals) { /* extensions take no signals */
                printf("  signals: ");
                print_signals(t->signals);
                printf("\n");
            }
            printf("  %s\n", t->description ? t->description : "");
            if (t->config && t->config->fields && t->config->fields[0].key) {
                printf("  %-26s %-16s %-18s %s\n", "key", "type", "default", "description");
                pl_cfg_describe(stdout, t->config, 2);
            } else {
                printf("  (no settings)\n");
            }
            printf("\n");
        }
    }
    if (only && strcmp(only, "service") != 0) {
        if (found)
            return 0;
        fprintf(stderr, "proflink: no component type '%s' (see `proflink components`)\n", only);
        return 1;
    }
    printf("service\n  the `service` section of the file (besides `pipelines`)\n");
    printf("  %-26s %-16s %-18s %s\n", "key", "type", "default", "description");
    pl_cfg_describe(stdout, &pl_service_section, 2);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0)) {
        printf("proflink %s\n", PL_VERSION);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "components") == 0)
        return cmd_components(argc >= 3 ? argv[2] : NULL);
    if (argc >= 2 && strcmp(argv[1], "query") == 0)
        return pl_query_main(argc - 1, argv + 1);
    bool bad = false;
    if (argc >= 2 && strcmp(argv[1], "validate") == 0) {
        const char *path = config_arg(argc, argv, 2, &bad);
        if (bad) {
            usage(stderr);
            return 2;
        }
        return cmd_validate(path ? path : DEFAULT_CONFIG);
    }
    const char *path = config_arg(argc, argv, 1, &bad);
    if (bad) {
        usage(stderr);
        return 2;
    }
    return pl_service_main(path ? path : DEFAULT_CONFIG);
}
