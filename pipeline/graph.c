/*
 * graph.c: instances and consumer wiring (see graph.h).
 *
 * A pl_consumer handed to a component stays valid for the component's life:
 * the `next` a processor gets is a link owned by the processor's instance
 * ("whatever follows processor X in pipeline P"), and a receiver's `next`
 * is a fan-out owned by its instance. Wiring a graph only re-points them,
 * which is what lets a reload keep an unchanged component, with the data it
 * holds and its counters, and move it into the new graph (pl_graph_swap).
 * Fan-out clones before handing on, because every consumer takes (and may
 * mutate) the batch it gets; the last pipeline gets the original, so the
 * common one-pipeline case copies nothing.
 */
#include "graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/decode.h"
#include "core/log.h"
#include "core/stats.h"
#include "exporters/queue.h"
#include "exporters/queue_wal.h"
#include "pipeline/consumer.h"

typedef struct instance instance;

extern const pl_component_type pl_processor_batch;

/* receiver -> every pipeline of one signal */
typedef struct fanout {
    pl_consumer consumer;
    instance *inst;
    pl_signal signal;
    pl_consumer **targets;
    size_t n;
} fanout;

/* what follows processor X in pipeline P: X's `next` for data from P */
typedef struct plink {
    pl_consumer consumer;
    char *pipeline;      /* P's name */
    pl_signal signal;    /* P's signal */
    pl_stats *stats;     /* X's: what passes here is X's outgoing items */
    pl_consumer *target; /* set by each wiring */
} plink;

/* one processor inside one pipeline */
typedef struct step {
    pl_consumer consumer;
    instance *inst;
    pl_signal signal;
    plink *next;
} step;

/* the exporters at the end of one pipeline */
typedef struct exporters_stage {
    pl_consumer consumer;
    pl_signal signal;
    instance **exporters;
    size_t n;
} exporters_stage;

/* Allocated one by one: a reload may move it to the next graph. */
struct instance {
    const pl_config_component *cc;
    void *self;
    pl_stats *stats;
    bool owns_stats; /* false while a replacement shares them */
    bool used, created, started, shut_down;
    fanout fan[PL_SIGNAL_COUNT];
    plink *links; /* processors: one per pipeline naming it */
    size_t n_links;
    /* exporters with sending_queue.batch: a batch processor in front */
    void *batcher;
    struct to_export {
        pl_consumer consumer;
        instance *inst;
        pl_signal signal;
    } to_export[PL_SIGNAL_COUNT];
};

typedef struct pipeline {
    const pl_config_pipeline *cp;
    step *steps;
    exporters_stage exporters;
    pl_consumer *entry; /* &gate */
    pl_consumer gate;   /* the write-ahead log when there is one, else first */
    pl_consumer *first;
    pl_queue_wal *wal;
    bool wal_moved; /* taken over from the graph a reload replaced: no replay */
} pipeline;

struct pl_graph {
    const pl_config *config;
    uv_loop_t *loop;
    const pl_host *host;  /* handed to every component it creates */
    instance **instances; /* parallel to config->components; NULL once moved */
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

static pl_status link_consume(void *arg, pl_batch *batch)
{
    plink *l = arg;
    if (l->stats && (unsigned)l->signal < PL_SIGNAL_COUNT)
        __atomic_fetch_add(&l->stats->flow[l->signal][1], pl_batch_items(batch), __ATOMIC_RELAXED);
    return pl_consumer_consume(l->target, batch);
}

static pl_status step_consume(void *arg, pl_batch *batch)
{
    step *s = arg;
    const pl_component_type *type = s->inst->cc->type;
    size_t items = pl_batch_items(batch);
    uint64_t before = accepted_or_refused(s->inst, s->signal);
    if (s->inst->stats)
        __atomic_fetch_add(&s->inst->stats->flow[s->signal][0], items, __ATOMIC_RELAXED);
    pl_status st;
    if (type->consume)
        st = type->consume(s->inst->self, batch, &s->next->consumer);
    else
        st = pl_consumer_consume(&s->next->consumer, batch);
    count(s->inst, s->signal, st, items, before);
    return st;
}

/* What an exporter's batcher sends on: the exporter, borrowing the batch. */
static pl_status to_export_consume(void *arg, pl_batch *batch)
{
    struct to_export *t = arg;
    instance *inst = t->inst;
    size_t items = pl_batch_items(batch);
    uint64_t before = accepted_or_refused(inst, t->signal);
    pl_status st = inst->cc->type->export ? inst->cc->type->export(inst->self, batch) : PL_OK;
    count(inst, t->signal, st, items, before);
    pl_batch_wal_refused(batch);
    pl_batch_free(batch);
    return st;
}

static pl_status exporters_consume(void *arg, pl_batch *batch)
{
    exporters_stage *e = arg;
    size_t items = pl_batch_items(batch);
    pl_status result = PL_OK;
    for (size_t i = 0; i < e->n; i++) {
        instance *inst = e->exporters[i];
        if (inst->batcher) { /* the batcher takes a copy of its own */
            pl_batch *copy = pl_batch_clone(batch);
            pl_status st = copy ? pl_processor_batch.consume(inst->batcher, copy,
                                                             &inst->to_export[e->signal].consumer)
                                : PL_ERR_NOMEM;
            result = worst(result, st);
            continue;
        }
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
        instance *inst = g->instances[i];
        if (inst && inst->used && inst->cc->kind == kind && strcmp(inst->cc->id, id) == 0)
            return inst;
    }
    return NULL;
}

/* The plink of processor `inst` for pipeline `name`, made on first use. */
static plink *instance_link(instance *inst, const char *name)
{
    for (size_t i = 0; i < inst->n_links; i++)
        if (strcmp(inst->links[i].pipeline, name) == 0)
            return &inst->links[i];
    return NULL;
}

/* Processors get one plink per pipeline that names them; the array is made
 * once per instance (a kept instance has the same pipelines, so its links,
 * which components hold on to, never move). */
static int make_links(instance *inst, const pl_config *cfg, size_t index)
{
    size_t n = 0;
    for (size_t p = 0; p < cfg->n_pipelines; p++)
        for (size_t k = 0; k < cfg->pipelines[p].n_processors; k++)
            n += cfg->pipelines[p].processors[k] == index;
    inst->links = calloc(n ? n : 1, sizeof(plink));
    if (!inst->links)
        return -1;
    for (size_t p = 0; p < cfg->n_pipelines; p++) {
        for (size_t k = 0; k < cfg->pipelines[p].n_processors; k++) {
            if (cfg->pipelines[p].processors[k] != index)
                continue;
            plink *l = &inst->links[inst->n_links];
            l->pipeline = strdup(cfg->pipelines[p].name);
            if (!l->pipeline)
                return -1;
            l->signal = cfg->pipelines[p].signal;
            l->stats = inst->stats;
            pl_consumer_init_func(&l->consumer, link_consume, l);
            inst->n_links++;
        }
    }
    return 0;
}

/* Wires the consumers of every pipeline, then each receiver's fan-outs:
 * the links and fan-outs of the instances (new or kept) are pointed at
 * this graph's steps and exporter stages. */
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
            pl->exporters.exporters[i] = g->instances[cp->exporters[i]];
        pl_consumer_init_func(&pl->exporters.consumer, exporters_consume, &pl->exporters);
        pl_consumer *next = &pl->exporters.consumer;
        for (size_t i = cp->n_processors; i-- > 0;) {
            step *s = &pl->steps[i];
            s->inst = g->instances[cp->processors[i]];
            s->signal = cp->signal;
            s->next = instance_link(s->inst, cp->name);
            if (!s->next)
                return -1;
            s->next->target = next;
            pl_consumer_init_func(&s->consumer, step_consume, s);
            next = &s->consumer;
        }
        pl->first = next;
        pl_consumer_init_func(&pl->gate, gate_consume, pl);
        pl->entry = &pl->gate;
    }
    for (size_t r = 0; r < g->n_instances; r++) {
        instance *inst = g->instances[r];
        if (!inst || !inst->used || inst->cc->kind != PL_KIND_RECEIVER)
            continue;
        for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
            fanout *f = &inst->fan[s];
            free(f->targets);
            f->targets = NULL;
            f->n = 0;
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

static void free_instance(instance *inst)
{
    if (!inst)
        return;
    for (int s = 0; s < PL_SIGNAL_COUNT; s++)
        free(inst->fan[s].targets);
    for (size_t i = 0; i < inst->n_links; i++)
        free(inst->links[i].pipeline);
    free(inst->links);
    if (inst->owns_stats)
        pl_stats_free(inst->stats);
    free(inst);
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
    for (size_t i = 0; g->instances && i < g->n_instances; i++)
        free_instance(g->instances[i]);
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
static pl_status open_wals(pl_graph *g, pl_graph *old, pl_err *err)
{
    for (size_t p = 0; p < g->config->n_pipelines; p++) {
        pipeline *pl = &g->pipelines[p];
        if (!pl->cp->n_processors || pl->wal)
            continue;
        for (size_t i = 0; i < pl->exporters.n && !pl->wal; i++) {
            const instance *e = pl->exporters.exporters[i];
            pl_queue *q =
                e->self && e->cc->type->stored_queue ? e->cc->type->stored_queue(e->self) : NULL;
            if (!q)
                continue;
            /* A reload keeps the log of a pipeline whose queue stays: batches
             * of the old chains still hold its entries. */
            for (size_t o = 0; old && o < old->config->n_pipelines && !pl->wal; o++) {
                pipeline *op = &old->pipelines[o];
                if (op->wal && pl_queue_wal_on(op->wal, q, pl->cp->name)) {
                    pl->wal = op->wal;
                    op->wal = NULL;
                    pl->wal_moved = true;
                    pl_queue_wal_retarget(pl->wal, pl->first);
                }
            }
            if (pl->wal)
                break;
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
            instance *inst = g->instances[i];
            if (inst && inst->created && inst->cc->kind == create_order[k]) {
                if (inst->batcher)
                    pl_processor_batch.destroy(inst->batcher);
                inst->batcher = NULL;
                if (inst->cc->type->destroy)
                    inst->cc->type->destroy(inst->self);
                inst->created = false;
                inst->self = NULL;
            }
        }
    }
}

/* A graph shell for `config`: instance slots and pipelines, nothing made. */
static pl_graph *graph_new(const pl_config *config, uv_loop_t *loop)
{
    pl_graph *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->config = config;
    g->loop = loop;
    g->n_instances = config->n_components;
    g->instances = calloc(config->n_components ? config->n_components : 1, sizeof(instance *));
    g->pipelines = calloc(config->n_pipelines ? config->n_pipelines : 1, sizeof(pipeline));
    if (!g->instances || !g->pipelines) {
        free_graph(g);
        return NULL;
    }
    return g;
}

/* A new, not yet created instance for component `i` of g's config. Its
 * counters are `stats` when given (shared with the instance it replaces),
 * else new ones. */
static instance *instance_new(pl_graph *g, size_t i, pl_stats *stats)
{
    instance *inst = calloc(1, sizeof(*inst));
    if (!inst)
        return NULL;
    inst->cc = &g->config->components[i];
    inst->used = inst->cc->n_pipelines > 0;
    if (inst->used) {
        inst->stats = stats ? stats : pl_stats_new(inst->cc->id, inst->cc->kind);
        inst->owns_stats = !stats;
        if (!inst->stats ||
            (inst->cc->kind == PL_KIND_PROCESSOR && make_links(inst, g->config, i))) {
            free_instance(inst);
            return NULL;
        }
        if (!stats)
            __atomic_store_n(&inst->stats->signals, inst->cc->signals, __ATOMIC_RELAXED);
    }
    return inst;
}

/* sending_queue.batch (the Collector's exporter-side batching): a batch
 * processor of the exporter's own in front of it, with flush_timeout as
 * its timeout, min_size as send_batch_size and max_size as
 * send_batch_max_size. It is started, shut down (handing on what it holds)
 * and destroyed with the exporter. */
static pl_status create_batcher(pl_graph *g, instance *inst, pl_err *err)
{
    const pl_sending_queue_config *q = pl_queue_config_of(inst->cc->type->config, inst->cc->cfg);
    if (!q || !q->batch_enabled)
        return PL_OK;
    char yaml[200];
    snprintf(yaml, sizeof(yaml),
             "send_batch_size: %lld\nsend_batch_max_size: %lld\ntimeout: %lldns\n",
             (long long)q->batch.min_size, (long long)q->batch.max_size,
             (long long)q->batch.flush_timeout);
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("sending_queue.batch", yaml, strlen(yaml), &errs);
    void *bcfg = calloc(1, pl_processor_batch.config->size);
    pl_status st = PL_ERR_NOMEM;
    if (doc && bcfg &&
        pl_cfg_decode(pl_processor_batch.config, doc->root, doc->root, bcfg, &errs) == 0) {
        char id[300];
        snprintf(id, sizeof(id), "%s/batch", inst->cc->id);
        pl_create_settings settings = {
            .id = id, .loop = g->loop, .host = g->host, .signals = inst->cc->signals};
        pl_err cerr = {{0}};
        st = pl_processor_batch.create(&settings, bcfg, &inst->batcher, &cerr);
        if (st != PL_OK)
            pl_errf(err, st, "exporter %s: sending_queue.batch: %s", inst->cc->id,
                    cerr.msg[0] ? cerr.msg : pl_status_name(st));
    } else {
        pl_errf(err, st, "exporter %s: sending_queue.batch: cannot set up", inst->cc->id);
    }
    if (bcfg)
        pl_cfg_free(pl_processor_batch.config, bcfg);
    free(bcfg);
    pl_cfg_doc_free(doc);
    pl_cfg_errors_free(&errs);
    for (int s = 0; s < PL_SIGNAL_COUNT; s++) {
        inst->to_export[s].inst = inst;
        inst->to_export[s].signal = (pl_signal)s;
        pl_consumer_init_func(&inst->to_export[s].consumer, to_export_consume, &inst->to_export[s]);
    }
    return st;
}

/* Runs the create hook of one instance (after wiring, so a receiver gets
 * its fan-outs). */
static pl_status create_instance(pl_graph *g, instance *inst, pl_err *err)
{
    const pl_component_type *type = inst->cc->type;
    pl_create_settings settings = {0};
    settings.id = inst->cc->id;
    settings.loop = g->loop;
    settings.host = g->host;
    settings.stats = inst->stats;
    settings.signals = inst->cc->signals;
    /* a receiver's fan-out for each signal it feeds (its config signals: the
     * union over the pipelines that list it); wiring fills the targets */
    if (inst->cc->kind == PL_KIND_RECEIVER)
        for (int s = 0; s < PL_SIGNAL_COUNT; s++)
            settings.next[s] =
                inst->cc->signals & PL_SIGNAL_MASK(s) ? &inst->fan[s].consumer : NULL;
    if (type->create) {
        pl_err cerr = {{0}};
        pl_status st = type->create(&settings, inst->cc->cfg, &inst->self, &cerr);
        if (st != PL_OK)
            return pl_errf(err, st, "%s %s: %s", pl_kind_name(inst->cc->kind), inst->cc->id,
                           cerr.msg[0] ? cerr.msg : pl_status_name(st));
    }
    inst->created = true;
    if (inst->cc->kind == PL_KIND_EXPORTER)
        return create_batcher(g, inst, err);
    return PL_OK;
}

/* Creates every instance of g not created yet, in create order; on failure
 * destroys those it created (kept instances from a previous graph are not
 * touched: they are already created). */
static pl_status create_missing(pl_graph *g, pl_err *err)
{
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < g->n_instances; i++) {
            instance *inst = g->instances[i];
            if (!inst || !inst->used || inst->created || inst->cc->kind != create_order[k])
                continue;
            pl_status st = create_instance(g, inst, err);
            if (st != PL_OK)
                return st;
        }
    }
    return PL_OK;
}

pl_graph *pl_graph_build(const pl_config *config, uv_loop_t *loop, pl_err *err)
{
    return pl_graph_build_host(config, loop, NULL, err);
}

pl_graph *pl_graph_build_host(const pl_config *config, uv_loop_t *loop, const pl_host *host,
                              pl_err *err)
{
    pl_graph *g = graph_new(config, loop);
    if (!g) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    g->host = host;
    for (size_t i = 0; i < g->n_instances; i++) {
        g->instances[i] = instance_new(g, i, NULL);
        if (!g->instances[i]) {
            free_graph(g);
            pl_errf(err, PL_ERR_NOMEM, "out of memory");
            return NULL;
        }
    }
    if (wire(g) < 0) {
        free_graph(g);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (create_missing(g, err) != PL_OK) {
        destroy_instances(g);
        free_graph(g);
        return NULL;
    }
    pl_status wst = open_wals(g, NULL, err);
    if (wst != PL_OK) {
        destroy_instances(g);
        free_graph(g);
        return NULL;
    }
    return g;
}

/* ---- reload: keep what did not change ------------------------------------- */

static const pl_cfg_node *component_body(const pl_config *cfg, const pl_config_component *c)
{
    static const char *const sections[] = {"receivers", "processors", "exporters", "extensions"};
    const pl_cfg_node *root = cfg->doc ? cfg->doc->root : NULL;
    return pl_cfg_node_get(pl_cfg_node_get(root, sections[c->kind]), c->id);
}

/* Aliases can make a small file a large tree: `budget` bounds the walk (a
 * comparison that runs out says "different", which only costs a rebuild). */
static bool nodes_equal(const pl_cfg_node *a, const pl_cfg_node *b, int depth, size_t *budget)
{
    bool a_empty = !a || a->kind == PL_NODE_NULL || (a->kind == PL_NODE_MAP && a->n == 0);
    bool b_empty = !b || b->kind == PL_NODE_NULL || (b->kind == PL_NODE_MAP && b->n == 0);
    if (a_empty || b_empty)
        return a_empty && b_empty;
    if (*budget == 0 || depth > 64)
        return false;
    (*budget)--;
    if (a->kind != b->kind || a->n != b->n)
        return false;
    if (a->kind == PL_NODE_SCALAR)
        return strcmp(a->value, b->value) == 0;
    for (size_t i = 0; i < a->n; i++) {
        const pl_cfg_node *bi =
            a->kind == PL_NODE_MAP ? pl_cfg_node_get(b, a->keys[i]->value) : b->items[i];
        if (a->kind == PL_NODE_MAP && !pl_cfg_node_key(b, a->keys[i]->value))
            return false;
        if (!nodes_equal(a->items[i], bi, depth + 1, budget))
            return false;
    }
    return true;
}

/* The pipelines that name component `index` of cfg, as a sorted-insensitive
 * check: same count and every name of one found in the other. */
static bool same_pipelines(const pl_config *a, size_t ia, const pl_config *b, size_t ib)
{
    size_t n = 0;
    for (size_t p = 0; p < a->n_pipelines; p++) {
        const pl_config_pipeline *pa = &a->pipelines[p];
        bool in_a = false;
        for (size_t k = 0; k < pa->n_processors; k++)
            in_a |= pa->processors[k] == ia;
        if (!in_a)
            continue;
        n++;
        bool in_b = false;
        for (size_t q = 0; q < b->n_pipelines && !in_b; q++) {
            const pl_config_pipeline *pb = &b->pipelines[q];
            if (strcmp(pb->name, pa->name) != 0)
                continue;
            for (size_t k = 0; k < pb->n_processors; k++)
                in_b |= pb->processors[k] == ib;
        }
        if (!in_b)
            return false;
    }
    size_t m = 0;
    for (size_t q = 0; q < b->n_pipelines; q++)
        for (size_t k = 0; k < b->pipelines[q].n_processors; k++)
            m += b->pipelines[q].processors[k] == ib;
    return n == m;
}

/* Can the running instance of component `ia` of `a` serve as component
 * `ib` of `b` as it is? Same kind, type and settings (as written, after
 * expansion), the same signals, and for a processor the same pipelines
 * (its links are per pipeline). */
static bool can_keep(const pl_config *a, size_t ia, const pl_config *b, size_t ib)
{
    const pl_config_component *ca = &a->components[ia], *cb = &b->components[ib];
    return ca->kind == cb->kind && ca->type == cb->type && strcmp(ca->id, cb->id) == 0 &&
           ca->signals == cb->signals && ca->n_pipelines > 0 && cb->n_pipelines > 0 &&
           nodes_equal(component_body(a, ca), component_body(b, cb), 0, &(size_t){100000}) &&
           (ca->kind != PL_KIND_PROCESSOR || same_pipelines(a, ia, b, ib));
}

static long find_in(const pl_graph *g, pl_kind kind, const char *id)
{
    for (size_t i = 0; i < g->n_instances; i++) {
        instance *inst = g->instances[i];
        if (inst && inst->cc->kind == kind && strcmp(inst->cc->id, id) == 0)
            return (long)i;
    }
    return -1;
}

pl_graph *pl_graph_swap(pl_graph *old, const pl_config *next, pl_err *err, pl_graph_swap_info *info)
{
    memset(info, 0, sizeof(*info));
    pl_graph *g = graph_new(next, old->loop);
    if (!g) {
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    g->host = old->host;
    /* 1. which running instances stay; new ones for the rest (sharing the
     *    counters of the instance they replace) */
    long *kept_from = calloc(g->n_instances ? g->n_instances : 1, sizeof(long));
    if (!kept_from) {
        free_graph(g);
        pl_errf(err, PL_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < g->n_instances; i++) {
        const pl_config_component *c = &next->components[i];
        long o = find_in(old, c->kind, c->id);
        instance *prev = o >= 0 ? old->instances[o] : NULL;
        kept_from[i] = -1;
        if (prev && prev->created && prev->started && !prev->shut_down &&
            can_keep(old->config, (size_t)o, next, i)) {
            kept_from[i] = o;
            continue;
        }
        g->instances[i] = instance_new(g, i, prev && prev->used ? prev->stats : NULL);
        if (!g->instances[i])
            goto oom;
    }
    /* 2. create the new ones (nothing listens yet; kept slots are empty,
     *    so only new instances are created) */
    if (create_missing(g, err) != PL_OK) {
        destroy_instances(g);
        free_graph(g);
        free(kept_from);
        return NULL;
    }
    /* 3. commit: the kept instances move over; the replaced and removed
     *    ones stop (receivers close, processors flush into the old chains,
     *    still wired to the exporters they had, exporters start draining) */
    info->old_touched = true;
    for (size_t i = 0; i < g->n_instances; i++) {
        if (kept_from[i] < 0)
            continue;
        instance *inst = old->instances[kept_from[i]];
        old->instances[kept_from[i]] = NULL;
        inst->cc = &next->components[i];
        g->instances[i] = inst;
        info->kept++;
    }
    for (size_t i = 0; i < g->n_instances; i++) {
        instance *inst = g->instances[i];
        if (kept_from[i] >= 0 || !inst->used)
            continue;
        long o = find_in(old, inst->cc->kind, inst->cc->id);
        if (o >= 0 && old->instances[o]->used && old->instances[o]->stats == inst->stats) {
            old->instances[o]->owns_stats = false; /* the counters go on */
            inst->owns_stats = true;
        }
        __atomic_store_n(&inst->stats->signals, inst->cc->signals, __ATOMIC_RELAXED);
        info->replaced += o >= 0;
        info->added += o < 0;
    }
    for (size_t i = 0; i < old->n_instances; i++)
        info->removed += old->instances[i] && old->instances[i]->used &&
                         find_in(g, old->instances[i]->cc->kind, old->instances[i]->cc->id) < 0;
    free(kept_from);
    pl_graph_shutdown(old);
    /* 4. everything, kept instances included, is wired to the new pipelines */
    if (wire(g) < 0)
        pl_errf(err, PL_ERR_NOMEM, "out of memory"); /* the caller starts over */
    else
        open_wals(g, old, err); /* on failure err is set: the caller starts over */
    return g;

oom:
    free_graph(g);
    free(kept_from);
    pl_errf(err, PL_ERR_NOMEM, "out of memory");
    return NULL;
}

static void shutdown_kind(pl_graph *g, pl_kind kind)
{
    for (size_t i = 0; i < g->n_instances; i++) {
        instance *inst = g->instances[i];
        if (inst && inst->started && !inst->shut_down && inst->cc->kind == kind) {
            inst->shut_down = true;
            if (inst->batcher && pl_processor_batch.shutdown)
                pl_processor_batch.shutdown(inst->batcher); /* hands on what it holds */
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
        if (g->pipelines[p].wal && !g->pipelines[p].wal_moved)
            pl_queue_wal_replay(g->pipelines[p].wal);
}

pl_status pl_graph_start(pl_graph *g, pl_err *err)
{
    for (int k = 0; k < 4; k++) {
        for (size_t i = 0; i < g->n_instances; i++) {
            instance *inst = g->instances[i];
            if (!inst || !inst->created || inst->started || inst->cc->kind != create_order[k])
                continue;
            if (create_order[k] == PL_KIND_RECEIVER)
                replay_wals(g); /* what was answered before a crash goes first */
            pl_err serr = {{0}};
            pl_status st = inst->cc->type->start ? inst->cc->type->start(inst->self, &serr) : PL_OK;
            if (st == PL_OK && inst->batcher && pl_processor_batch.start)
                st = pl_processor_batch.start(inst->batcher, &serr);
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
        instance *inst = g->instances[i];
        if (inst && inst->created && inst->cc->type->pending)
            total += inst->cc->type->pending(inst->self);
        if (inst && inst->batcher && pl_processor_batch.pending)
            total += pl_processor_batch.pending(inst->batcher);
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
        n += g->instances[i] && g->instances[i]->created;
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
