/*
 * sqlite_exporter_fixture.h: the `sqlite` exporter as the store benchmarks
 * run it: its defaults, a database path, no query API, an optional
 * max_size, on a loop the benchmark drives itself.
 */
#ifndef PL_BENCH_SQLITE_EXPORTER_FIXTURE_H
#define PL_BENCH_SQLITE_EXPORTER_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config/decode.h"
#include "core/component.h"
#include "core/stats.h"

extern const pl_component_type pl_exporter_sqlite;

typedef struct bench_sqlite {
    const pl_cfg_section *sec;
    void *cfg;
    uv_loop_t loop;
    pl_stats *stats;
    void *x; /* the exporter */
} bench_sqlite;

/* Creates and starts the exporter; max_size NULL keeps the default, and so
 * does queue_size unless BENCH_QUEUE_SIZE is set (e.g. 128MiB). 0, or
 * 2 for a bad max_size, 1 for anything else (said on stderr). */
static int bench_sqlite_start(bench_sqlite *b, const char *path, const char *max_size)
{
    memset(b, 0, sizeof(*b));
    b->sec = pl_exporter_sqlite.config;
    b->cfg = calloc(1, b->sec->size);
    if (!b->cfg || pl_cfg_defaults(b->sec, b->cfg) != 0)
        return 1;
    for (const pl_cfg_field *f = b->sec->fields; f->key; f++) {
        char *slot = (char *)b->cfg + f->offset;
        if (strcmp(f->key, "path") == 0) {
            free(*(char **)slot);
            *(char **)slot = strdup(path);
        } else if (strcmp(f->key, "max_size") == 0 && max_size) {
            if (pl_parse_size(max_size, (uint64_t *)slot) != 0) {
                fprintf(stderr, "bad MAX_SIZE %s\n", max_size);
                return 2;
            }
        } else if (strcmp(f->key, "queue_size") == 0 && getenv("BENCH_QUEUE_SIZE")) {
            if (pl_parse_size(getenv("BENCH_QUEUE_SIZE"), (uint64_t *)slot) != 0) {
                fprintf(stderr, "bad BENCH_QUEUE_SIZE\n");
                return 2;
            }
        } else if (strcmp(f->key, "api") == 0) {
            for (const pl_cfg_field *g = f->section->fields; g->key; g++)
                if (strcmp(g->key, "endpoint") == 0) {
                    free(*(char **)(slot + g->offset));
                    *(char **)(slot + g->offset) = strdup("");
                }
        }
    }
    uv_loop_init(&b->loop);
    b->stats = pl_stats_new("sqlite", PL_KIND_EXPORTER);
    pl_create_settings set = {0};
    set.id = "sqlite";
    set.loop = &b->loop;
    set.stats = b->stats;
    pl_err err = {{0}};
    if (pl_exporter_sqlite.create(&set, b->cfg, &b->x, &err) != PL_OK ||
        pl_exporter_sqlite.start(b->x, &err) != PL_OK) {
        fprintf(stderr, "exporter: %s\n", err.msg);
        return 1;
    }
    return 0;
}

/* Shuts the exporter down (what is queued is written) and destroys it;
 * b->stats stays readable until bench_sqlite_free. */
static void bench_sqlite_stop(bench_sqlite *b)
{
    pl_exporter_sqlite.shutdown(b->x);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    pl_exporter_sqlite.destroy(b->x);
    b->x = NULL;
}

static void bench_sqlite_free(bench_sqlite *b)
{
    uv_loop_close(&b->loop);
    pl_cfg_free(b->sec, b->cfg);
    free(b->cfg);
    pl_stats_free(b->stats);
}

#endif
