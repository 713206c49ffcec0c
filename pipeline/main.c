/*
 * main.c: the proflink command line, shaped like the OpenTelemetry
 * Collector's (otelcol):
 *
 *   proflink [--config SRC]... [--set k=v]...          run (default ./collector.yaml)
 *   proflink validate [--config SRC]... [--set k=v]... check; every problem in one pass
 *   proflink print-config [...] [--mode redacted|unredacted]
 *   proflink components [TYPE] [--format text|man]
 *   proflink query ...                                 ask the embedded store
 *   proflink --version | version
 *
 * SRC is a path, file:PATH, env:VAR or yaml:INLINE (config/sources.h); the
 * sources are merged in order, then every --set. Every subcommand takes
 * --help. An unknown subcommand or option is an error with the usage
 * (exit 2), never a run with a guessed meaning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "config/decode.h"
#include "core/component.h"
#include "core/log.h"
#include "core/sqlite_file.h"
#include "pipeline/cli.h"
#include "pipeline/registry.h"
#include "store/query.h"
#include "pipeline/service.h"
#include "pipeline/version.h"

#define DEFAULT_CONFIG "collector.yaml"

static const char sources_help[] =
    "  --config SRC     a configuration source; repeat to merge several in order\n"
    "                   (maps merge deeply, lists are replaced). SRC is a file path,\n"
    "                   file:PATH, env:VAR (YAML in a variable) or yaml:TEXT, e.g.\n"
    "                   'yaml:exporters::debug::verbosity: detailed'.\n"
    "                   Default: ./" DEFAULT_CONFIG "\n"
    "  --set PATH=VALUE override one value after every --config, e.g.\n"
    "                   --set=processors.batch.timeout=2s (or processors::batch::timeout)\n";

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: proflink [--config SRC]... [--set PATH=VALUE]...   run the pipelines\n"
        "       proflink validate [--config SRC]... [--set ...]   check a configuration\n"
        "       proflink print-config [--config SRC]... [--set ...] [--mode redacted|unredacted]\n"
        "       proflink components [TYPE] [--format text|man]  component types and settings\n"
        "       proflink query ...                              query the embedded store\n"
        "       proflink --version\n"
        "\n"
        "Run `proflink COMMAND --help` for one command.\n");
}

static void command_usage(FILE *out, const char *cmd)
{
    if (strcmp(cmd, "validate") == 0) {
        fprintf(out,
                "usage: proflink validate [--config SRC]... [--set PATH=VALUE]...\n"
                "\n"
                "Reads and merges the sources and checks everything that can be checked\n"
                "without starting: YAML, keys and types, component references, signals,\n"
                "listening addresses (port range, an address of this machine, two components\n"
                "on one port). Prints every problem as file:line:col: message and exits 1 if\n"
                "there is any; warnings (unset variables, ignored keys) do not fail.\n\n%s",
                sources_help);
    } else if (strcmp(cmd, "print-config") == 0) {
        fprintf(out,
                "usage: proflink print-config [--config SRC]... [--set PATH=VALUE]...\n"
                "                             [--mode redacted|unredacted]\n"
                "\n"
                "Prints the configuration as proflink reads it: sources merged, --set applied,\n"
                "${env:...} and ${file:...} expanded. In the default redacted mode the values of\n"
                "keys naming secrets (password, token, secret, api_key, authorization, ...)\n"
                "are shown as [REDACTED].\n\n%s",
                sources_help);
    } else if (strcmp(cmd, "components") == 0) {
        fprintf(out, "usage: proflink components [TYPE] [--format text|man]\n"
                     "\n"
                     "Lists every receiver, processor, exporter and extension with its signals\n"
                     "and settings (key, type, default, description), or only TYPE. With\n"
                     "--format man, writes the proflink(1) manual page from the same tables.\n");
    } else {
        usage(out);
        fprintf(out, "\n%s", sources_help);
    }
}

static bool is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* Reads --config / --set (either `--opt V` or `--opt=V`) from argv[from..].
 * `extra`, when given, takes the command's own options (returns how many
 * arguments it used, 0 if not its own). -1: bad usage (said on stderr). */
typedef int (*extra_opt_fn)(void *arg, int argc, char **argv, int i);

static int parse_sources(int argc, char **argv, int from, pl_cfg_sources *src, extra_opt_fn extra,
                         void *extra_arg)
{
    for (int i = from; i < argc; i++) {
        const char *a = argv[i];
        char ***list = NULL;
        size_t *n = NULL;
        const char *value = NULL;
        if (strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0 || strncmp(a, "--config=", 9) == 0) {
            list = &src->configs;
            n = &src->n_configs;
        } else if (strcmp(a, "--set") == 0 || strncmp(a, "--set=", 6) == 0) {
            list = &src->sets;
            n = &src->n_sets;
        }
        if (list) {
            const char *eq = strchr(a, '=');
            if (eq && a[1] == '-') {
                value = eq + 1;
            } else if (i + 1 < argc) {
                value = argv[++i];
            } else {
                fprintf(stderr, "proflink: %s needs a value\n", a);
                return -1;
            }
            char **grown = realloc(*list, (*n + 1) * sizeof(*grown));
            if (!grown)
                return -1;
            grown[(*n)++] = (char *)value;
            *list = grown;
            continue;
        }
        int used = extra ? extra(extra_arg, argc, argv, i) : 0;
        if (used < 0)
            return -1;
        if (used > 0) {
            i += used - 1;
            continue;
        }
        /* a bare existing file is still taken as the config, as before */
        struct stat st;
        if (a[0] != '-' && src->n_configs == 0 && stat(a, &st) == 0 && S_ISREG(st.st_mode)) {
            char **grown = realloc(src->configs, sizeof(*grown));
            if (!grown)
                return -1;
            grown[src->n_configs++] = (char *)a;
            src->configs = grown;
            continue;
        }
        fprintf(stderr, "proflink: unknown argument '%s'\n", a);
        return -1;
    }
    if (src->n_configs == 0) {
        static char def[] = DEFAULT_CONFIG;
        char **grown = realloc(src->configs, sizeof(*grown));
        if (!grown)
            return -1;
        grown[0] = def;
        src->configs = grown;
        src->n_configs = 1;
    }
    return 0;
}

static void free_sources(pl_cfg_sources *src)
{
    free(src->configs);
    free(src->sets);
}

static int cmd_validate(const pl_cfg_sources *src)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load(src, pl_component_types, &errs);
    if (cfg)
        pl_config_check_addresses(cfg, &errs);
    pl_cfg_warnings_print(&errs, stderr);
    const char *name = src->configs[0];
    if (!cfg || errs.n > 0) {
        pl_cfg_errors_print(&errs, stderr);
        if (errs.n > 1)
            fprintf(stderr, "%s: %zu problems found\n", name, errs.n);
        pl_config_free(cfg);
        pl_cfg_errors_free(&errs);
        return 1;
    }
    for (size_t i = 0; i < cfg->n_components; i++) {
        const pl_config_component *c = &cfg->components[i];
        if (c->n_pipelines == 0 && c->key)
            fprintf(stderr, "%s:%d:%d: warning: %s '%s' is defined but not used\n", c->key->file,
                    c->key->line, c->key->col, pl_kind_name(c->kind), c->id);
    }
    printf("%s: ok (%zu pipeline%s, %zu component%s)\n", cfg->path, cfg->n_pipelines,
           cfg->n_pipelines == 1 ? "" : "s", cfg->n_components, cfg->n_components == 1 ? "" : "s");
    pl_config_free(cfg);
    pl_cfg_errors_free(&errs);
    return 0;
}

static int mode_opt(void *arg, int argc, char **argv, int i)
{
    bool *redacted = arg;
    const char *a = argv[i], *v;
    if (strcmp(a, "--mode") == 0 && i + 1 < argc)
        v = argv[i + 1];
    else if (strncmp(a, "--mode=", 7) == 0)
        v = a + 7;
    else
        return 0;
    if (strcmp(v, "redacted") == 0)
        *redacted = true;
    else if (strcmp(v, "unredacted") == 0)
        *redacted = false;
    else {
        fprintf(stderr, "proflink: --mode must be redacted or unredacted\n");
        return -1;
    }
    return a[6] == '=' ? 1 : 2;
}

/* The configuration as read, after merging and expansion. It is printed
 * only when it is valid, so what is shown is what would run. */
static int cmd_print_config(const pl_cfg_sources *src, bool redacted)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load(src, pl_component_types, &errs);
    pl_cfg_warnings_print(&errs, stderr);
    if (!cfg) {
        pl_cfg_errors_print(&errs, stderr);
        pl_cfg_errors_free(&errs);
        return 1;
    }
    int rc = 0;
    if (pl_cfg_doc_print(cfg->doc, stdout, redacted) != 0) {
        fprintf(stderr, "proflink: cannot print the configuration (a value that is not UTF-8, "
                        "aliases making it larger than a million values, or an output error)\n");
        rc = 1;
    }
    pl_config_free(cfg);
    pl_cfg_errors_free(&errs);
    return rc;
}

static const char *const commands[] = {"validate", "print-config", "components", "query",
                                       "version",  "help",         NULL};

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "version") == 0 && is_help(argv[2])) {
        printf("usage: proflink version (or --version): prints the version\n");
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0)) {
        printf("proflink %s\n", PL_VERSION);
        return 0;
    }
    if (argc >= 2 && (is_help(argv[1]) || strcmp(argv[1], "help") == 0)) {
        if (argc >= 3 && strcmp(argv[1], "help") == 0)
            command_usage(stdout, argv[2]);
        else
            command_usage(stdout, "");
        return 0;
    }
    pl_sqlite_library_setup();
    const char *cmd = argc >= 2 && argv[1][0] != '-' ? argv[1] : NULL;
    if (cmd && strcmp(cmd, "query") == 0)
        return pl_query_main(argc - 1, argv + 1, pl_component_types);
    for (int i = 2; cmd && i < argc; i++) {
        if (is_help(argv[i])) {
            command_usage(stdout, cmd);
            return 0;
        }
    }
    if (cmd && strcmp(cmd, "components") == 0)
        return pl_cli_components(argc - 2, argv + 2);
    pl_cfg_sources src = {0};
    int rc;
    if (cmd && strcmp(cmd, "validate") == 0) {
        if (parse_sources(argc, argv, 2, &src, NULL, NULL) < 0)
            goto bad_usage;
        rc = cmd_validate(&src);
    } else if (cmd && strcmp(cmd, "print-config") == 0) {
        bool redacted = true;
        if (parse_sources(argc, argv, 2, &src, mode_opt, &redacted) < 0)
            goto bad_usage;
        rc = cmd_print_config(&src, redacted);
    } else {
        struct stat st;
        if (cmd && !(stat(cmd, &st) == 0 && S_ISREG(st.st_mode))) {
            const char *close = NULL;
            for (size_t i = 0; commands[i]; i++)
                if (pl_cfg_edit_distance(cmd, commands[i]) <= 2)
                    close = commands[i];
            if (close)
                fprintf(stderr, "proflink: unknown command '%s' (did you mean '%s'?)\n", cmd,
                        close);
            else
                fprintf(stderr, "proflink: unknown command '%s'\n", cmd);
            usage(stderr);
            return 2;
        }
        if (parse_sources(argc, argv, 1, &src, NULL, NULL) < 0)
            goto bad_usage;
        rc = pl_service_main(&src);
    }
    free_sources(&src);
    return rc;
bad_usage:
    free_sources(&src);
    usage(stderr);
    return 2;
}
