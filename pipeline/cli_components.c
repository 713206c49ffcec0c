/*
 * cli_components.c: `proflink components`, in text or as the proflink(1)
 * manual page. Both are printed from the component descriptors' config
 * tables, the same tables the loader validates with, so neither the
 * listing nor the installed man page can drift from what the code accepts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/decode.h"
#include "core/component.h"
#include "pipeline/cli.h"
#include "pipeline/registry.h"
#include "pipeline/version.h"

static const pl_kind kinds[] = {PL_KIND_RECEIVER, PL_KIND_PROCESSOR, PL_KIND_EXPORTER,
                                PL_KIND_EXTENSION};

static void signals_text(unsigned mask, char *buf, size_t size)
{
    static const char *const names[] = {"traces", "profiles", "logs", "metrics"};
    size_t len = 0;
    buf[0] = '\0';
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        if (mask & PL_SIGNAL_MASK(s))
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", names[s]);
}

static int print_text(const char *only)
{
    int found = 0;
    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; pl_component_types[i]; i++) {
            const pl_component_type *t = pl_component_types[i];
            if (t->kind != kinds[k] ||
                (only && strcmp(only, t->type) != 0 &&
                 pl_config_find_type(pl_component_types, t->kind, only, strlen(only)) != t))
                continue; /* `only` may be an alias (otlp_grpc) */
            found++;
            printf("%s %s\n", pl_kind_name(t->kind), t->type);
            if (t->signals) { /* extensions take no signals */
                char sig[64];
                signals_text(t->signals, sig, sizeof(sig));
                printf("  signals: %s\n", sig);
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

/* troff text: a leading dot or quote would be a request; backslashes and
 * hyphens are escaped so they print as typed. */
static void man_text(const char *s)
{
    if (*s == '.' || *s == '\'')
        fputs("\\&", stdout);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", stdout);
        else if (*s == '-')
            fputs("\\-", stdout);
        else if (*s == '\n')
            fputc(' ', stdout);
        else
            fputc(*s, stdout);
    }
}

static void man_fields(const pl_cfg_section *section, const char *prefix)
{
    for (size_t i = 0; section && section->fields && section->fields[i].key; i++) {
        const pl_cfg_field *f = &section->fields[i];
        char path[256];
        snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", f->key);
        fputs(".TP\n.B ", stdout);
        man_text(path);
        fputs("\n(", stdout);
        man_text(pl_cfg_type_name(f->type));
        if (f->type != PL_CFG_SECTION && f->type != PL_CFG_LIST && f->default_value) {
            fputs(", default ", stdout);
            man_text(f->default_value[0] ? f->default_value : "\"\"");
        }
        fputs(") ", stdout);
        man_text(f->description ? f->description : "");
        fputc('\n', stdout);
        if ((f->type == PL_CFG_SECTION || f->type == PL_CFG_LIST) && f->section)
            man_fields(f->section, path);
    }
}

static int print_man(void)
{
    printf(".TH PROFLINK 1 \"\" \"proflink %s\" \"User Commands\"\n", PL_VERSION);
    fputs(".SH NAME\nproflink \\- a pipeline server that links continuous profiles to traces\n"
          ".SH SYNOPSIS\n"
          ".B proflink\n[\\fB\\-\\-config\\fR \\fISRC\\fR]... [\\fB\\-\\-set\\fR "
          "\\fIPATH\\fR=\\fIVALUE\\fR]...\n.br\n"
          ".B proflink validate\n[\\fB\\-\\-config\\fR \\fISRC\\fR]... [\\fB\\-\\-set\\fR "
          "\\fIPATH\\fR=\\fIVALUE\\fR]...\n.br\n"
          ".B proflink print\\-config\n[\\fB\\-\\-mode\\fR redacted|unredacted]\n.br\n"
          ".B proflink components\n[\\fITYPE\\fR] [\\fB\\-\\-format\\fR text|man]\n.br\n"
          ".B proflink query\n\\fI...\\fR\n"
          ".SH DESCRIPTION\n"
          "proflink receives traces and continuous profiles (OTLP, Pyroscope, pprof), links "
          "profile samples to the spans they were taken in, and exports both. Its "
          "configuration has the OpenTelemetry Collector's shape: \\fBreceivers\\fR, "
          "\\fBprocessors\\fR, \\fBexporters\\fR, \\fBextensions\\fR and \\fBservice\\fR.\n"
          ".SH OPTIONS\n"
          ".TP\n.BI \\-\\-config \" SRC\"\n"
          "A configuration source: a file path, \\fBfile:\\fIPATH\\fR, \\fBenv:\\fIVAR\\fR or "
          "\\fByaml:\\fITEXT\\fR. Repeat to merge several in order: maps merge deeply, lists "
          "are replaced. Values may use ${env:VAR}, ${env:VAR:\\-default} and ${file:PATH}; an "
          "unset variable is empty, with a warning. Default: ./collector.yaml.\n"
          ".TP\n.BI \\-\\-set \" PATH=VALUE\"\n"
          "Overrides one value after every \\-\\-config, e.g. "
          "\\-\\-set=processors.batch.timeout=2s (or processors::batch::timeout=2s).\n"
          ".SH SIGNALS\n"
          "SIGTERM and SIGINT drain in\\-flight data and exit 0. SIGHUP reads the sources "
          "again and swaps only the components whose settings changed.\n",
          stdout);
    static const char *const titles[] = {"RECEIVERS", "PROCESSORS", "EXPORTERS", "EXTENSIONS"};
    for (size_t k = 0; k < 4; k++) {
        printf(".SH %s\n", titles[k]);
        for (size_t i = 0; pl_component_types[i]; i++) {
            const pl_component_type *t = pl_component_types[i];
            if (t->kind != kinds[k])
                continue;
            fputs(".SS ", stdout);
            man_text(t->type);
            fputc('\n', stdout);
            man_text(t->description ? t->description : "");
            fputc('\n', stdout);
            if (t->signals) {
                char sig[64];
                signals_text(t->signals, sig, sizeof(sig));
                fputs(".br\nSignals: ", stdout);
                man_text(sig);
                fputc('\n', stdout);
            }
            man_fields(t->config, "");
        }
    }
    fputs(".SH SERVICE\nThe \\fBservice\\fR section, besides \\fBpipelines\\fR:\n", stdout);
    man_fields(&pl_service_section, "service");
    fputs(".SH FILES\n.TP\n/etc/proflink/collector.yaml\nThe configuration of the system "
          "service.\n.TP\n/var/lib/proflink\nThe service's data (the embedded store).\n"
          ".SH SEE ALSO\nThe OpenTelemetry Collector's configuration documentation.\n",
          stdout);
    return 0;
}

int pl_cli_components(int argc, char **argv)
{
    const char *only = NULL, *format = "text";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else if (strncmp(a, "--format=", 9) == 0)
            format = a + 9;
        else if (a[0] != '-' && !only)
            only = a;
        else {
            fprintf(stderr,
                    "proflink components: unknown argument '%s'\n"
                    "usage: proflink components [TYPE] [--format text|man]\n",
                    a);
            return 2;
        }
    }
    if (strcmp(format, "man") == 0)
        return print_man();
    if (strcmp(format, "text") != 0) {
        fprintf(stderr, "proflink components: --format must be text or man\n");
        return 2;
    }
    return print_text(only);
}
