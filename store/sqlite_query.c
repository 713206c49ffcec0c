/*
 * sqlite_query.c: `proflink query ...`, the command-line reader of the
 * embedded store.
 *
 *   proflink query traces [--service S] [--tenant T] [--since 1h] [--min-duration 100ms]
 *                         [--limit N]
 *   proflink query trace ID [--top N] [--attributes]
 *   proflink query flamegraph (--span ID [--descendants] | --trace ID | --service S [--since 1h])
 *                             [--format folded|svg|json|pprof|speedscope] [--type T]
 *                             [--output FILE]
 *   proflink query top [--service S | --span ID | --trace ID] [--since 1h] [--limit N] [--type T]
 *   proflink query services
 *
 * Every command takes --db PATH (default: the `sqlite` exporter's path in
 * --config FILE when given, else ./data/proflink.db) and --json (the same
 * JSON the query API serves). Output is for people: aligned columns,
 * durations with units, slowest or hottest first. Exit status: 0 on
 * success, 1 when the store cannot answer, 2 on a usage error.
 *
 * The store is opened read-only, so querying a running proflink is safe.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config/config.h"
#include "core/component.h"
#include "core/log.h"
#include "store/query.h"
#include "store/sqlite_api.h"
#include "store/sqlite_store.h"

static const char usage_text[] =
    "usage: proflink query <command> [options]\n"
    "\n"
    "commands:\n"
    "  traces      recent traces, slowest first, with root span, duration and CPU time\n"
    "              [--service S] [--tenant T] [--since 1h] [--min-duration 100ms]\n"
    "              [--limit 20]   (--tenant: the X-Scope-OrgID the trace came with)\n"
    "  trace ID    the span tree of one trace: durations, CPU time and hottest functions\n"
    "              [--top 3] [--attributes]\n"
    "  flamegraph  the profile of a span, a trace or a service\n"
    "              (--span ID [--descendants] | --trace ID | --service S [--since 1h])\n"
    "              [--format folded|svg|json|pprof|speedscope] [--type cpu|wall|alloc_space|...]\n"
    "              [--output FILE]   (pprof: gzipped, for `go tool pprof`)\n"
    "  top         hottest functions, self and total\n"
    "              [--service S | --span ID | --trace ID] [--since 1h] [--limit 20] [--type T]\n"
    "  services    service names in the store\n"
    "\n"
    "options for every command:\n"
    "  --db PATH       the store (default: the sqlite exporter's path in --config, else\n"
    "                  ./data/proflink.db)\n"
    "  --config FILE   read the store path from this collector.yaml\n"
    "  --json          print JSON (the query API's format)\n"
    "\n"
    "durations: 500ms, 30s, 15m, 2h, 1d; --since 0 means all time.\n";

typedef struct opts {
    const char *command;
    const char *positional;
    const char *db;
    const char *config;
    const char *service;
    const char *tenant;
    const char *since;
    const char *min_duration;
    const char *span;
    const char *trace;
    const char *format;
    const char *type;
    const char *output;
    long limit;
    long top;
    bool json;
    bool attributes;
    bool descendants;
    bool help;
} opts;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "proflink query: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see `proflink query --help`)\n");
    return 2;
}

static int parse_long(const char *name, const char *v, long max, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x <= 0 || x > max) {
        fprintf(stderr, "proflink query: %s: expected a number from 1 to %ld, got '%s'\n", name,
                max, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    memset(o, 0, sizeof(*o));
    int i = 0;
    if (argc > 0 && strcmp(argv[0], "query") == 0)
        i = 1; /* tolerate being handed argv including "query" */
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char name[32];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            o->help = true;
            continue;
        }
        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        if (strcmp(a, "--attributes") == 0) {
            o->attributes = true;
            continue;
        }
        if (strcmp(a, "--descendants") == 0) {
            o->descendants = true;
            continue;
        }
        if (strncmp(a, "--", 2) == 0) {
            const char *eq = strchr(a, '=');
            size_t len = eq ? (size_t)(eq - a) : strlen(a);
            if (len >= sizeof(name))
                return usage_error("unknown option %s", a);
            memcpy(name, a, len);
            name[len] = 0;
            if (eq) {
                val = eq + 1;
            } else {
                if (i + 1 >= argc)
                    return usage_error("%s needs a value", a);
                val = argv[++i];
            }
            if (strcmp(name, "--db") == 0)
                o->db = val;
            else if (strcmp(name, "--config") == 0)
                o->config = val;
            else if (strcmp(name, "--service") == 0)
                o->service = val;
            else if (strcmp(name, "--tenant") == 0)
                o->tenant = val;
            else if (strcmp(name, "--since") == 0)
                o->since = val;
            else if (strcmp(name, "--min-duration") == 0)
                o->min_duration = val;
            else if (strcmp(name, "--span") == 0)
                o->span = val;
            else if (strcmp(name, "--trace") == 0)
                o->trace = val;
            else if (strcmp(name, "--format") == 0)
                o->format = val;
            else if (strcmp(name, "--type") == 0)
                o->type = val;
            else if (strcmp(name, "--output") == 0 || strcmp(name, "-o") == 0)
                o->output = val;
            else if (strcmp(name, "--limit") == 0) {
                if (parse_long("--limit", val, 100000, &o->limit) < 0)
                    return 2;
            } else if (strcmp(name, "--top") == 0) {
                if (parse_long("--top", val, 100, &o->top) < 0)
                    return 2;
            } else
                return usage_error("unknown option %s", name);
            continue;
        }
        if (!o->command)
            o->command = a;
        else if (!o->positional)
            o->positional = a;
        else
            return usage_error("unexpected argument '%s'", a);
    }
    return 0;
}

/* The sqlite exporter's path from a collector.yaml (first sqlite exporter). */
static char *path_from_config(const char *file, const pl_component_type *const *types)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load_file(file, types, &errs);
    if (!cfg) {
        pl_cfg_errors_print(&errs, stderr);
        fprintf(stderr, "proflink query: %s has errors; pass --db PATH instead\n", file);
        pl_cfg_errors_free(&errs);
        return NULL;
    }
    pl_cfg_errors_free(&errs);
    char *path = NULL;
    for (size_t i = 0; i < cfg->n_components; i++) {
        const pl_config_component *c = &cfg->components[i];
        if (c->kind == PL_KIND_EXPORTER && c->type && strcmp(c->type->type, "sqlite") == 0 &&
            c->cfg) {
            /* the first field of the sqlite exporter's config is its path */
            const char *p = *(char *const *)c->cfg;
            path = strdup(p && *p ? p : "./data/proflink.db");
            break;
        }
    }
    if (!path)
        fprintf(stderr, "proflink query: %s has no sqlite exporter; pass --db PATH\n", file);
    pl_config_free(cfg);
    return path;
}

static void print_time(uint64_t ns, char *out, size_t cap)
{
    time_t secs = (time_t)(ns / 1000000000ull);
    struct tm tm;
    localtime_r(&secs, &tm);
    strftime(out, cap, "%H:%M:%S", &tm);
}

/* "CPU 35.0ms", "wall 1.20s", "80 samples" or "CPU -": what a trace's
 * time is, with its kind, for the trace header line. */
static void time_label(pl_time_kind kind, int64_t value, char *out, size_t cap)
{
    char d[24];
    switch (kind) {
    case PL_TIME_CPU:
    case PL_TIME_WALL:
        pl_format_duration(value > 0 ? (uint64_t)value : 0, d, sizeof(d));
        snprintf(out, cap, "%s %s", kind == PL_TIME_CPU ? "CPU" : "wall", d);
        break;
    case PL_TIME_COUNT:
        snprintf(out, cap, "%" PRId64 " samples", value);
        break;
    default:
        snprintf(out, cap, "CPU -");
        break;
    }
}

static int write_output(const opts *o, const pl_buf *b)
{
    if (!pl_buf_ok(b)) {
        fprintf(stderr, "proflink query: out of memory\n");
        return 1;
    }
    FILE *f = stdout;
    if (o->output && strcmp(o->output, "-") != 0) {
        f = fopen(o->output, "wb");
        if (!f) {
            fprintf(stderr, "proflink query: %s: %s\n", o->output, strerror(errno));
            return 1;
        }
    }
    size_t n = b->len ? fwrite(b->data, 1, b->len, f) : 0;
    int rc = (n == b->len) ? 0 : 1;
    if (f != stdout) {
        if (fclose(f) != 0)
            rc = 1;
        if (!rc)
            fprintf(stderr, "wrote %s (%zu bytes)\n", o->output, b->len);
    } else {
        fflush(stdout);
    }
    return rc;
}

static bool since_option(const opts *o, uint64_t *out)
{
    uint64_t now = pl_time_now_ns();
    if (!o->since) {
        *out = now - PL_QUERY_DEFAULT_SINCE_NS;
        return true;
    }
    if (pl_query_parse_since(o->since, now, out) < 0) {
        fprintf(stderr, "proflink query: --since: not a duration: '%s' (e.g. 15m, 2h, 0)\n",
                o->since);
        return false;
    }
    return true;
}

static int cmd_traces(pl_store *s, const opts *o)
{
    pl_trace_query q = {0};
    q.service = o->service;
    q.tenant = o->tenant;
    q.limit = o->limit ? (uint32_t)o->limit : 20;
    if (!since_option(o, &q.since_ns))
        return 2;
    if (o->min_duration) {
        int64_t d;
        if (pl_parse_duration(o->min_duration, &d) < 0 || d < 0) {
            fprintf(stderr, "proflink query: --min-duration: not a duration: '%s'\n",
                    o->min_duration);
            return 2;
        }
        q.min_duration_ns = (uint64_t)d;
    }
    pl_err err = {{0}};
    pl_trace_list list;
    if (pl_store_query_traces(s, &q, &list, &err) != PL_OK) {
        fprintf(stderr, "proflink query: %s\n", err.msg);
        return 1;
    }
    pl_buf b;
    pl_buf_init(&b);
    if (o->json) {
        pl_json_traces(&list, &b);
        pl_buf_append_byte(&b, '\n');
    } else if (list.n == 0) {
        pl_buf_printf(&b, "no traces%s%s%s\n", o->service ? " of service " : "",
                      o->service ? o->service : "",
                      o->since ? "" : " in the last hour (try --since 0)");
    } else {
        /* TIME: CPU, else wall ("... wall"), else a sample count */
        pl_buf_printf(&b, "%-32s  %-8s  %9s  %14s  %5s  %-16s  %s\n", "TRACE ID", "START",
                      "DURATION", "TIME", "SPANS", "SERVICE", "ROOT SPAN");
        for (size_t i = 0; i < list.n; i++) {
            const pl_trace_summary *t = &list.items[i];
            char id[33], start[16], dur[24], cpu[32];
            pl_hex_encode(t->trace_id, 16, id);
            print_time(t->start_ns, start, sizeof(start));
            pl_format_duration(t->duration_ns, dur, sizeof(dur));
            pl_format_time(t->time_kind, t->time, cpu, sizeof(cpu));
            pl_buf_printf(&b, "%s  %-8s  %9s  %14s  %5u  %-16s  %s%s%s\n", id, start, dur, cpu,
                          t->span_count, *t->root_service ? t->root_service : "-",
                          t->has_root ? t->root_name : "(root span not stored)",
                          t->error_count ? "  [error]" : "", "");
        }
    }
    pl_trace_list_free(&list);
    int rc = write_output(o, &b);
    pl_buf_free(&b);
    return rc;
}

/* "exception: Type: message" lines for a span's exception events. */
static void print_exceptions(pl_buf *b, const char *events_json, int indent)
{
    if (!events_json || strcmp(events_json, "[]") == 0)
        return;
    json_object *events = json_tokener_parse(events_json);
    if (!events || !json_object_is_type(events, json_type_array)) {
        json_object_put(events);
        return;
    }
    size_t n = json_object_array_length(events);
    for (size_t i = 0; i < n; i++) {
        json_object *ev = json_object_array_get_idx(events, i), *name, *attrs, *v;
        if (!json_object_object_get_ex(ev, "name", &name) ||
            strcmp(json_object_get_string(name), "exception") != 0)
            continue;
        const char *type = "", *message = "";
        if (json_object_object_get_ex(ev, "attributes", &attrs)) {
            if (json_object_object_get_ex(attrs, "exception.type", &v))
                type = json_object_get_string(v);
            if (json_object_object_get_ex(attrs, "exception.message", &v))
                message = json_object_get_string(v);
        }
        pl_buf_printf(b, "%*s  exception: %s%s%s\n", indent, "", type,
                      *type && *message ? ": " : "", message);
    }
    json_object_put(events);
}

static const char *kind_name(int kind)
{
    static const char *const names[] = {"", "internal", "server", "client", "producer", "consumer"};
    return kind >= 0 && kind <= 5 ? names[kind] : "";
}

static int cmd_trace(pl_store *s, const opts *o)
{
    uint8_t id[16];
    const char *text = o->positional ? o->positional : o->trace;
    if (!text)
        return usage_error("%s", "query trace needs a trace id");
    if (pl_query_parse_trace_id(text, id) < 0)
        return usage_error("not a trace id (32 hex characters): '%s'", text);
    size_t top = o->top ? (size_t)o->top : 3;
    pl_err err = {{0}};
    pl_trace_detail d;
    pl_status st = pl_store_query_trace(s, id, top, &d, &err);
    if (st != PL_OK) {
        fprintf(stderr, "proflink query: %s\n", err.msg);
        return 1;
    }
    pl_buf b;
    pl_buf_init(&b);
    if (o->json) {
        pl_json_trace(&d, &b);
        pl_buf_append_byte(&b, '\n');
    } else {
        char dur[24], cpu[32], start[16];
        pl_format_duration(d.summary.duration_ns, dur, sizeof(dur));
        time_label(d.summary.time_kind, d.summary.time, cpu, sizeof(cpu));
        print_time(d.summary.start_ns, start, sizeof(start));
        pl_buf_printf(&b, "trace %s  %s  %zu spans  duration %s  %s%s\n\n", text, start, d.n, dur,
                      cpu, d.summary.error_count ? "  (has errors)" : "");
        pl_buf_printf(&b, "%9s  %9s  %14s  %s\n", "START", "DURATION", "TIME", "SPAN");
        for (size_t i = 0; i < d.n; i++) {
            const pl_span_row *r = &d.spans[i];
            char sid[17];
            pl_hex_encode(r->span_id, 8, sid);
            pl_format_duration(r->end_ns - r->start_ns, dur, sizeof(dur));
            pl_format_time(r->time_kind, r->time, cpu, sizeof(cpu));
            /* start as an offset into the trace: where the time went */
            char offset[24];
            uint64_t t0 = d.summary.start_ns;
            if (r->start_ns == t0) {
                snprintf(offset, sizeof(offset), "0");
            } else if (r->start_ns > t0) {
                offset[0] = '+';
                pl_format_duration(r->start_ns - t0, offset + 1, sizeof(offset) - 1);
            } else {
                offset[0] = '-';
                pl_format_duration(t0 - r->start_ns, offset + 1, sizeof(offset) - 1);
            }
            pl_buf_printf(&b, "%9s  %9s  %14s  ", offset, dur, cpu);
            int depth = r->depth > 40 ? 40 : r->depth;
            for (int k = 0; k < depth; k++)
                pl_buf_append_str(&b, "  ");
            pl_buf_printf(&b, "%s  [%s%s%s] %s%s\n", r->name, r->service,
                          *kind_name(r->kind) ? ", " : "", kind_name(r->kind), sid,
                          r->status_code == 2 ? "  ERROR" : "");
            int indent = 38 + 2 * depth;
            if (r->status_code == 2 && *r->status_message)
                pl_buf_printf(&b, "%*s  error: %s\n", indent, "", r->status_message);
            print_exceptions(&b, r->events_json, indent);
            if (r->n_top) {
                pl_buf_printf(&b, "%*s  hot:", indent, "");
                for (size_t k = 0; k < r->n_top; k++) {
                    char v[24];
                    if (r->time_kind == PL_TIME_CPU || r->time_kind == PL_TIME_WALL)
                        pl_format_duration((uint64_t)r->top[k].self, v, sizeof(v));
                    else if (r->time_kind == PL_TIME_COUNT)
                        snprintf(v, sizeof(v), "%" PRId64 " samples", r->top[k].self);
                    else
                        snprintf(v, sizeof(v), "%" PRId64, r->top[k].self);
                    pl_buf_printf(&b, "%s %s %s", k ? "," : "", r->top[k].name, v);
                }
                pl_buf_append_byte(&b, '\n');
            } else if (*r->top_functions_attr) {
                pl_buf_printf(&b, "%*s  hot: %s\n", indent, "", r->top_functions_attr);
            }
            if (o->attributes) {
                pl_buf_printf(&b, "%*s  attributes: %s\n", indent, "", r->attributes_json);
                pl_buf_printf(&b, "%*s  resource: %s\n", indent, "", r->resource_json);
                if (strcmp(r->events_json, "[]") != 0)
                    pl_buf_printf(&b, "%*s  events: %s\n", indent, "", r->events_json);
            }
        }
    }
    pl_trace_detail_free(&d);
    int rc = write_output(o, &b);
    pl_buf_free(&b);
    return rc;
}

static int profile_query_from(const opts *o, bool service_optional, pl_profile_query *q)
{
    memset(q, 0, sizeof(*q));
    int n = !!o->span + !!o->trace + !!o->service;
    if (n > 1 || (n == 0 && !service_optional))
        return usage_error("%s", "give exactly one of --span ID, --trace ID or --service S");
    q->type = o->type;
    q->descendants = o->descendants;
    if (o->span) {
        q->scope = PL_PROFILE_SPAN;
        if (pl_query_parse_span_id(o->span, q->span_id) < 0)
            return usage_error("not a span id (16 hex characters): '%s'", o->span);
        return 0;
    }
    if (o->trace) {
        q->scope = PL_PROFILE_TRACE;
        if (pl_query_parse_trace_id(o->trace, q->trace_id) < 0)
            return usage_error("not a trace id (32 hex characters): '%s'", o->trace);
        return 0;
    }
    q->scope = PL_PROFILE_SERVICE;
    q->service = o->service;
    return since_option(o, &q->since_ns) ? 0 : 2;
}

static void profile_title(const opts *o, char *out, size_t cap)
{
    if (o->span)
        snprintf(out, cap, "span %s", o->span);
    else if (o->trace)
        snprintf(out, cap, "trace %s", o->trace);
    else
        snprintf(out, cap, "service %s, last %s", o->service ? o->service : "(all)",
                 o->since ? o->since : "1h");
}

static void print_types(const pl_profile_result *r);

static int cmd_flamegraph(pl_store *s, const opts *o)
{
    pl_profile_query q;
    int rc = profile_query_from(o, false, &q);
    if (rc)
        return rc;
    const char *format = o->format ? o->format : "folded";
    if (o->json)
        format = "json";
    if (strcmp(format, "folded") && strcmp(format, "svg") && strcmp(format, "json") &&
        strcmp(format, "pprof") && strcmp(format, "speedscope"))
        return usage_error("--format: folded, svg, json, pprof or speedscope, not '%s'", format);
    if (strcmp(format, "pprof") == 0 && !o->output && isatty(STDOUT_FILENO))
        return usage_error("%s", "--format pprof is binary: give --output FILE (or redirect)");
    pl_err err = {{0}};
    pl_profile_result r;
    if (pl_store_query_profile(s, &q, &r, &err) != PL_OK) {
        fprintf(stderr, "proflink query: %s\n", err.msg);
        return 1;
    }
    if (r.n_stacks == 0) {
        fprintf(stderr, "proflink query: no samples for this selection%s\n",
                o->type ? " and type" : "");
        print_types(&r);
    }
    pl_buf b;
    pl_buf_init(&b);
    if (strcmp(format, "svg") == 0) {
        char title[160];
        profile_title(o, title, sizeof(title));
        pl_flamegraph_svg(&r, title, &b);
    } else if (strcmp(format, "json") == 0) {
        pl_json_profile(&r, 0, true, &b);
        pl_buf_append_byte(&b, '\n');
    } else if (strcmp(format, "pprof") == 0) {
        if (pl_flamegraph_pprof(&r, (uint64_t)time(NULL) * 1000000000ull, &b) < 0)
            b.failed = true;
    } else if (strcmp(format, "speedscope") == 0) {
        char title[160];
        profile_title(o, title, sizeof(title));
        if (pl_flamegraph_speedscope(&r, title, &b) < 0)
            b.failed = true;
        pl_buf_append_byte(&b, '\n');
    } else {
        pl_folded_text(&r, &b);
    }
    pl_profile_result_free(&r);
    rc = write_output(o, &b);
    pl_buf_free(&b);
    return rc;
}

/* When a selection has samples of other types than the one shown. */
static void print_types(const pl_profile_result *r)
{
    if (!r->n_types)
        return;
    fprintf(stderr, "proflink query: types stored here (--type):");
    for (size_t i = 0; i < r->n_types; i++)
        fprintf(stderr, " %s", r->types[i]);
    fprintf(stderr, "\n");
}

static void value_text(const pl_profile_result *r, int64_t v, char *out, size_t cap)
{
    if (strcmp(r->unit, "nanoseconds") == 0 && v >= 0)
        pl_format_duration((uint64_t)v, out, cap);
    else
        snprintf(out, cap, "%" PRId64, v);
}

static int cmd_top(pl_store *s, const opts *o)
{
    pl_profile_query q;
    int rc = profile_query_from(o, true, &q);
    if (rc)
        return rc;
    q.time_only = true; /* CPU, else wall, else counts: never a heap profile unless asked */
    pl_err err = {{0}};
    pl_profile_result r;
    if (pl_store_query_profile(s, &q, &r, &err) != PL_OK) {
        fprintf(stderr, "proflink query: %s\n", err.msg);
        return 1;
    }
    size_t limit = o->limit ? (size_t)o->limit : 20;
    pl_buf b;
    pl_buf_init(&b);
    if (o->json) {
        pl_json_profile(&r, limit, false, &b);
        pl_buf_append_byte(&b, '\n');
    } else if (r.n_functions == 0) {
        pl_buf_printf(&b, "no samples for this selection\n");
        print_types(&r);
    } else {
        char total[32];
        value_text(&r, r.total, total, sizeof(total));
        if (strcmp(r.type, "cpu") == 0)
            pl_buf_printf(&b, "CPU time, total %s\n\n", total);
        else if (strcmp(r.type, "wall") == 0)
            pl_buf_printf(&b, "wall time, total %s\n\n", total);
        else
            pl_buf_printf(&b, "%s%s%s%s, total %s\n\n", r.type, *r.unit ? " (" : "", r.unit,
                          *r.unit ? ")" : "", total);
        pl_buf_printf(&b, "%10s %6s  %10s %6s  %s\n", "SELF", "SELF%", "TOTAL", "TOTAL%",
                      "FUNCTION");
        for (size_t i = 0; i < r.n_functions && i < limit; i++) {
            const pl_function_stat *f = &r.functions[i];
            char self[32], tot[32];
            value_text(&r, f->self, self, sizeof(self));
            value_text(&r, f->total, tot, sizeof(tot));
            double ps = r.total ? 100.0 * (double)f->self / (double)r.total : 0;
            double pt = r.total ? 100.0 * (double)f->total / (double)r.total : 0;
            pl_buf_printf(&b, "%10s %5.1f%%  %10s %5.1f%%  %s%s%s%s\n", self, ps, tot, pt, f->name,
                          *f->file ? "  (" : "", f->file, *f->file ? ")" : "");
        }
    }
    pl_profile_result_free(&r);
    rc = write_output(o, &b);
    pl_buf_free(&b);
    return rc;
}

static int cmd_services(pl_store *s, const opts *o)
{
    char **names;
    size_t n;
    pl_err err = {{0}};
    if (pl_store_query_services(s, NULL, &names, &n, &err) != PL_OK) {
        fprintf(stderr, "proflink query: %s\n", err.msg);
        return 1;
    }
    pl_buf b;
    pl_buf_init(&b);
    if (o->json) {
        pl_json_services(names, n, &b);
        pl_buf_append_byte(&b, '\n');
    } else {
        for (size_t i = 0; i < n; i++)
            pl_buf_printf(&b, "%s\n", names[i]);
    }
    pl_store_free_names(names, n);
    int rc = write_output(o, &b);
    pl_buf_free(&b);
    return rc;
}

int pl_query_main(int argc, char **argv, const pl_component_type *const *types)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc;
    if (o.help || !o.command) {
        fputs(usage_text, o.help ? stdout : stderr);
        return o.help ? 0 : 2;
    }
    int (*cmd)(pl_store *, const opts *) = NULL;
    if (strcmp(o.command, "traces") == 0)
        cmd = cmd_traces;
    else if (strcmp(o.command, "trace") == 0)
        cmd = cmd_trace;
    else if (strcmp(o.command, "flamegraph") == 0 || strcmp(o.command, "flame") == 0)
        cmd = cmd_flamegraph;
    else if (strcmp(o.command, "top") == 0)
        cmd = cmd_top;
    else if (strcmp(o.command, "services") == 0)
        cmd = cmd_services;
    else
        return usage_error("unknown command '%s'", o.command);
    if (o.positional && cmd != cmd_trace)
        return usage_error("unexpected argument '%s'", o.positional);

    char *db = NULL;
    if (o.db)
        db = strdup(o.db);
    else if (o.config) {
        db = path_from_config(o.config, types);
        if (!db)
            return 1;
    } else
        db = strdup("./data/proflink.db");
    if (!db) {
        fprintf(stderr, "proflink query: out of memory\n");
        return 1;
    }
    pl_store_options opt = {.read_only = true, .busy_timeout_ms = 5000};
    pl_store *s = NULL;
    pl_err err = {{0}};
    if (pl_store_open(db, &opt, &s, NULL, &err) != PL_OK) {
        fprintf(stderr, "proflink query: %s\n", err.msg);
        free(db);
        return 1;
    }
    rc = cmd(s, &o);
    pl_store_close(s);
    free(db);
    return rc;
}
