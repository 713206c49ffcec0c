/*
 * graph.c: instances and consumer wiring (see graph.h).
 *
 * Everything the consumers point at is allocated once, at build time, in
 * arrays that never move, so a pl_consumer handed to a component stays valid
 * until pl_graph_destroy. Fan-out clones before handing on, because every
 * consumer takes (and may mutate) the batch it gets; the last pipeline gets
 * the original, so the common one-pipeline case copies nothing.
 */
#include "graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/stats.h"
#include "exporters/queue_wal.h"
#include "pipeline/consumer.h"

typedef struct instance instance;

/* receiver -> every pipeline of one signal */
typedef struct fanout {
    pl_consumer consumer;
    instance *inst;
    pl_signal signal;
    pl_consumer **targets;
    size_t n;
} fanout;

/* one processor inside one pipeline */
typedef struct step {
    pl_consumer consumer;
    instance *inst;
    pl_signal signal;
    pl_consumer *next;
} step;

/* the exporters at the end of one pipeline */
typedef struct exporters_stage {
    pl_consumer consumer;
    pl_signal signal;
    instance **exporters;
    size_t n;
} exporters_stage;

struct instance {
    const pl_config_component *cc;
    void *self;
    pl_stats *stats;
    bool used, created, started, shut_down;
    fanout fan[PL_SIGNAL_COUNT];
};

typedef struct pipeline {
    const pl_config_pipeline *cp;
    step *steps;
    exporters_stage exporters;
    pl_consumer *entry; /* &gate */
    pl_consumer gate;   /* the write-ahead log when there is one, else first */
    pl_consumer *first;
    pl_queue_wal *wal;
} pipeline;

struct pl_graph {
    const pl_config *config;
    uv_loop_t *loop;
    instance *instances; /* parallel to config->components */
    size_t n_instances;
    pipeline *pipelines; /* parallel to config->pipelines */
    bool shut_down;
    bool replayed; /* write-ahead logs replayed (once, before the receivers start) */
};

/* Of two outcomes, the one a sender must hear: any failure beats success,
 * and a retryable failure beats a final one (the sender must resend). */
static pl_status worst(pl_status a, pl_status b)
{
    if (a == PL_OK)
        return b;
    if (b == PL_OK)
        return a;
    if (pl_status_retryable(b) && !pl_status_retryable(a))
        return b;
    return a;
}

static uint64_t accepted_or_refused(const instance *inst, pl_signal signal)
{
    return pl_stats_get(inst->stats, signal, PL_STAT_ACCEPTED) +
           pl_stats_get(inst->stats, signal, PL_STAT_REFUSED);
}

/* Counts what a hook took, unless the component counted it itself during
 * the call (`before` is its accepted+refused total from just before). */
static void count(instance *inst, pl_signal signal, pl_status st, size_t items, uint64_t before)
{
    if (accepted_or_refused(inst, signal) != before)
        return;
    pl_stats_add(inst->stats, signal, st == PL_OK ? PL_STAT_ACCEPTED : PL_STAT_REFUSED, items);
}

static pl_status fanout_consume(void *arg, pl_batch *batch)
{
    fanout *f = arg;
    pl_status result = PL_OK;
    for (size_t i = 0; i < f->n; i++) {
        pl_batch *b = batch;
        if (i + 1 < f->n) {
            b = pl_batch_clone(batch);
            if (!b) {
                result = worst(result, PL_ERR_NOMEM);
                continue;
            }
        }
        result = worst(result, pl_consumer_consume(f->targets[i], b));
    }
    if (f->n == 0)
        pl_batch_free(batch);
    /* no counting here: receivers count what they accept, since they also
     * see what never becomes a batch */
    return result;
}

static pl_status step_consume(void *arg, pl_batch *batch)
{
    step *s = arg;
    const pl_component_type *type = s->inst->cc->type;
    size_t items = pl_batch_items(batch);
    uint64_t before = accepted_or_refused(s->inst, s->signal);
    pl_status st;
    if (type->consume)
        st = type->consume(s->inst->self, batch, s->next);
    else
        st = pl_consumer_consume(s->next, batch);
    count(s->inst, s->signal, st, items, before);
    return st;
}

static pl_status exporters_consume(void *arg, pl_batch *batch)
{
    exporters_stage *e = arg;
    size_t items = pl_batch_items(batch);
    pl_status result = PL_OK;
    for (size_t i = 0; i < e->n; i++) {
        instance *inst = e->exporters[i];
        uint64_t before = accepted_or_refused(inst, e->signal);
        pl_status st = inst->cc->type->export ? inst->cc->type->export(inst->self, batch) : PL_OK;
        count(inst, e->signal, st, items, before);
        result = worst(result, st);
    }
    /* Write-ahead entries not committed by the persistent queue (it refused:
     * full, shutting down) are kept for replay rather than dropped. */
    pl_batch_wal_refused(batch);
    pl_batch_free(batch);
    return result;
}

static pl_status gate_consume(void *arg, pl_batch *batch)
{
    pipeline *pl = arg;
    return pl_consumer_consume(pl->wal ? pl_queue_wal_consumer(pl->wal) : pl->first, batch);
}

static instance *find_instance(const pl_graph *g, pl_kind kind, const char *id)
{
    for (size_t i = 0; i < g->n_instances; i++) {
        instance *inst = &g->instances[i];
        if (inst->used && inst->cc->kind == kind && strcmp(inst->cc->id, id) == 0)
            return inst;
    }
    return NULL;
}

/* Wires the consumers of every pipeline, then each receiver's fan-outs. */
static int wire(pl_graph *g)
{
    const pl_config *cfg = g->config;
    for (size_t p = 0; p < cfg->n_pipelines; p++) {
        const pl_config_pipeline *cp = &cfg->pipelines[p];
        pipeline *pl = &g->pipelines[p];
        pl->cp = cp;
        pl->exporters.signal = cp->signal;
        pl->exporters.n = cp->n_exporters;
        pl->exporters.exporters = calloc(cp->n_exporters ? cp->n_exporters : 1, sizeof(instance *));
        pl->steps = calloc(cp->n_processors ? cp->n_processors : 1, sizeof(step));
        if (!pl->exporters.exporters || !pl->steps)
            return -1;
        for (size_t i = 0; i < cp->n_exporters; i++)
            pl->exporters.exporters[i] = &g->instances[cp->exporters[i]];
        pl_consumer_init_func(&pl->exporters.consumer, exporters_consume, &pl->exporters);
        pl_consumer *next = &pl->exporters.consumer;
        for (size_t i = cp->n_processors; i-- > 0;) {
            step *s = &pl->steps[i];
            s->inst = &g->instances[cp->processors[i]];
            s->signal = cp->signal;
            s->next = next;
            pl_consumer_init_func(&s->consumer, step_consume, s);
            next = &s->consumer;
        }
        pl->first = next;
        pl_consumer_init_func(&pl->gate, gate_consume, pl);
        pl->entry = &pl->gate;
    }
    for (size_t r = 0; r < g->n_instances; r++) {
        instance *inst = &g->instances[r];
        if (!inst->used || inst->cc->kind != PL_KIND_RECEIVER)
            continue;
        for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
            fanout *f = &inst->fan[s];
            f->inst = inst;
            f->signal = (pl_signal)s;
            pl_consumer_init_func(&f->consumer, fanout_consume, f);
            size_t n = 0;
            for (size_t p = 0; p < cfg->n_pipelines; p++) {
                const pl_config_pipeline *cp = &cfg->pipelines[p];
                if (cp->signal != (pl_signal)s)
                    continue;
                for (size_t k = 0; k < cp->n_receivers; k++)
                    if (cp->receivers[k] == r)
                        n++;
            }
            if (n == 0)
                continue;
            f->targets = calloc(n, sizeof(pl_consumer *));
            if (!f->targets)
                return -1;
            for (size_t p = 0; p < cfg->n_pipelines; p++) {
                const pl_config_pipeline *cp = &cfg->pipelines[p];
                if (cp->signal != (pl_signal)s)
                    continue;
                for (size_t k = 0; k < cp->n_receivers; k++)
                    if (cp->receivers[k] == r)
                        f->targets[f->n++] = g->pipelines[p].entry;
            }
        }
    }
    return 0;
}

static void free_graph(pl_graph *g)
{
    if (!g)
        return;
    for (size_t p = 0; g->pipelines && p < g->config->n_pipelines; p++) {
        free(g->pipelines[p].steps);
        free(g->pipelines[p].exporters.exporters);
    }
    free(g->pipelines);
    for (size_t i = 0; i < g->n_instances; i++) {
        for (int s = 0; s < PL_SIGNAL_COUNT; s++)
            free(g->instances[i].fan[s].targets);
        pl_stats_free(g->instances[i].stats);
    }
    free(g->instances);
    free(g);
}

/* Create and destroy order; start is the same, shutdown the reverse. */
static const pl_kind create_order[] = {PL_KIND_EXTENSION, PL_KIND_EXPORTER, PL_KIND_PROCESSOR,
                                       PL_KIND_RECEIVER};

static void close_wals(pl_graph *g)
{
    for (size_t p = 0; g->pipelines && p < g->config->n_pipelines; p++) {
        pl_queue_wal_close(g->pipelines[p].wal);
        g->pipelines[p].wal = NULL;
    }
}

/* A pipeline with processors in front of an exporter that keeps a
 * persistent queue gets a write-ahead log at its entry: the processors hold
 * answered data in memory (exporters/queue_wal.h). */
static pl_status open_wals(pl_graph *g, pl_err *err)
{
    for (size_t p = 0; p < g->config->n_pipelines; p++) {
        pipeline *pl = &g->pipelines[p];
        if (!pl->cp->n_processors)
            continue;
        for (size_t i = 0; i < pl->exporters.n && !pl->wal; i++) {
            pl_queue *q = pl_queue_find_stored(pl->exporters.exporters[i]->cc->id);
            if (!q)
                continue;
            pl_err werr = {{0}};
            pl->wal = pl_queue_wal_open(q, pl->cp->name, pl->cp->signal, pl->first, &werr);
            if (!pl->wal)
                return pl_errf(err, PL_ERR_INTERNAL, "pipeline %s: %s", pl->cp->name, werr.msg);
        }
    }
    return PL_OK;
}

static void destroy_instances(pl_graph *g)
{
    for (int k = 3; k >= 0; k--) {
        if (create_order[k] == PL_KIND_EXPORTER)
            close_wals(g); /* after the processors let go of their batches */
        for (size_t i = 0; i < g->n_instances; i++) {
            instance *inst = &g->instances[i];
            if (inst->created && inst->cc->kind == create_order[k]) {
                if (inst->cc->type->destroy)
                    inst->cc->type->destroy(inst->self);
                inst->created = false;
                inst->self = NULL;
            }
        }
    }
}

pl_graph *pl_graph_build(const pl_config *config, uv_loop_t *loop, pl_err *err)
{
    pl_graph *g = calloc(1, sizeof(*g));
    if (!g) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    g->config = config;
    g->loop = loop;
    g->n_instances = config->n_components;
    g->instances = calloc(config->n_components ? config->n_components : 1, sizeof(instance));
    g->pipelines = calloc(config->n_pipelines ? config->n_pipelines : 1, sizeof(pipeline));
    if (!g->instances || !g->pipelines) {
        free_graph(g);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < g->n_instances; i++) {
        instance *inst = &g->instances[i];
        inst->cc = &config->components[i];
        inst->used = inst->cc->n_pipelines > 0;
        if (inst->used) {
            inst->stats = pl_stats_new(inst->cc->id, inst->cc->kind);
            if (inst->stats)
                inst->stats->signals = inst->cc->signals;
            if (!inst->stats) {
                free_graph(g);
                pl_errf(err, PL_ERR_NOMEM, "out of memory");
                return NULL;
            }
        }
    }
    if (wire(g) < 0) {
        free_graph(g);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < g->n_instances; i++) {
            instance *inst = &g->instances[i];
            if (!inst->used || inst->cc->kind != create_order[k])
                continue;
            const pl_component_type *type = inst->cc->type;
            pl_create_settings settings = {0};
            settings.id = inst->cc->id;
            settings.loop = loop;
            settings.stats = inst->stats;
            settings.signals = inst->cc->signals;
            if (inst->cc->kind == PL_KIND_RECEIVER)
                for (int s = 0; s < PL_SIGNAL_COUNT; s++)
                    settings.next[s] = inst->fan[s].n ? &inst->fan[s].consumer : NULL;
            if (!type->create) {
                inst->created = true;
                continue;
            }
            pl_err cerr = {{0}};
            pl_status st = type->create(&settings, inst->cc->cfg, &inst->self, &cerr);
            if (st != PL_OK) {
                pl_errf(err, st, "%s %s: %s", pl_kind_name(inst->cc->kind), inst->cc->id,
                        cerr.msg[0] ? cerr.msg : pl_status_name(st));
                destroy_instances(g);
                free_graph(g);
                return NULL;
            }
            inst->created = true;
        }
    }
    pl_status wst = open_wals(g, err);
    if (wst != PL_OK) {
        destroy_instances(g);
        free_graph(g);
        return NULL;
    }
    return g;
}

static void shutdown_kind(pl_graph *g, pl_kind kind)
{
    for (size_t i = 0; i < g->n_instances; i++) {
        instance *inst = &g->instances[i];
        if (inst->started && !inst->shut_down && inst->cc->kind == kind) {
            inst->shut_down = true;
            if (inst->cc->type->shutdown)
                inst->cc->type->shutdown(inst->self);
        }
    }
}

void pl_graph_shutdown(pl_graph *g)
{
    if (!g || g->shut_down)
        return;
    g->shut_down = true;
    for (int k = 3; k >= 0; k--)
        shutdown_kind(g, create_order[k]);
}

static void replay_wals(pl_graph *g)
{
    if (g->replayed)
        return;
    g->replayed = true;
    for (size_t p = 0; p < g->config->n_pipelines; p++)
        if (g->pipelines[p].wal)
            pl_queue_wal_replay(g->pipelines[p].wal);
}

pl_status pl_graph_start(pl_graph *g, pl_err *err)
{
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < g->n_instances; i++) {
            instance *inst = &g->instances[i];
            if (!inst->created || inst->started || inst->cc->kind != create_order[k])
                continue;
            if (create_order[k] == PL_KIND_RECEIVER)
                replay_wals(g); /* what was answered before a crash goes first */
            pl_err serr = {{0}};
            pl_status st = inst->cc->type->start ? inst->cc->type->start(inst->self, &serr) : PL_OK;
            if (st != PL_OK) {
                pl_errf(err, st, "%s %s: %s", pl_kind_name(inst->cc->kind), inst->cc->id,
                        serr.msg[0] ? serr.msg : pl_status_name(st));
                pl_graph_shutdown(g);
                return st;
            }
            inst->started = true;
            pl_debug("pipeline", "started %s %s", pl_kind_name(inst->cc->kind), inst->cc->id);
        }
    }
    replay_wals(g);
    return PL_OK;
}

size_t pl_graph_pending(pl_graph *g)
{
    size_t total = 0;
    for (size_t i = 0; g && i < g->n_instances; i++) {
        instance *inst = &g->instances[i];
        if (inst->created && inst->cc->type->pending)
            total += inst->cc->type->pending(inst->self);
    }
    return total;
}

void pl_graph_destroy(pl_graph *g)
{
    if (!g)
        return;
    destroy_instances(g);
    free_graph(g);
}

size_t pl_graph_instance_count(const pl_graph *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_instances; i++)
        n += g->instances[i].created;
    return n;
}

void *pl_graph_instance(const pl_graph *g, pl_kind kind, const char *id)
{
    instance *inst = find_instance(g, kind, id);
    return inst ? inst->self : NULL;
}

pl_consumer *pl_graph_receiver_next(const pl_graph *g, const char *id, pl_signal signal)
{
    instance *inst = find_instance(g, PL_KIND_RECEIVER, id);
    if (!inst || (unsigned)signal >= PL_SIGNAL_COUNT || inst->fan[signal].n == 0)
        return NULL;
    return &inst->fan[signal].consumer;
}

pl_stats *pl_graph_stats(const pl_graph *g, pl_kind kind, const char *id)
{
    instance *inst = find_instance(g, kind, id);
    return inst ? inst->stats : NULL;
}
