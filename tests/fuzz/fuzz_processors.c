/*
 * fuzz_processors.c: the processors on whatever the OTLP decoders accept.
 *
 * Requests come from the network, so a profiles dictionary can be as odd
 * as the decoder lets through: empty tables, unreferenced entries, strings
 * used in several roles, values by string index. The first input byte
 * chooses traces (even) or profiles (odd) and the split size; the rest is
 * an OTLP request. Whatever decodes goes twice through attributes,
 * resource and redaction, then both copies through batch (merged, then
 * split). Every profiles batch that comes out must pass the codec's index
 * check and encode; a processor that crashes, leaks or writes out of
 * bounds is caught by the sanitizers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/decode.h"
#include "config/node.h"
#include "core/buf.h"
#include "core/component.h"
#include "pipeline/consumer.h"
#include "proto/otlp_pb.h"

extern const pl_component_type pl_processor_batch;
extern const pl_component_type pl_processor_attributes;
extern const pl_component_type pl_processor_resource;
extern const pl_component_type pl_processor_redaction;

typedef struct inst {
    const pl_component_type *type;
    void *cfg;
    void *self;
} inst;

static void inst_open(inst *in, const pl_component_type *type, const char *yaml)
{
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("fuzz.yaml", yaml, strlen(yaml), &errs);
    in->type = type;
    in->cfg = calloc(1, type->config->size);
    if (!doc || !in->cfg || pl_cfg_decode(type->config, doc->root, doc->root, in->cfg, &errs))
        abort(); /* the configs below are valid */
    pl_cfg_doc_free(doc);
    pl_cfg_errors_free(&errs);
    pl_err err;
    pl_create_settings s;
    memset(&s, 0, sizeof(s));
    s.id = type->type;
    if (type->create(&s, in->cfg, &in->self, &err) != PL_OK)
        abort();
}

static void inst_close(inst *in)
{
    in->type->shutdown(in->self);
    in->type->destroy(in->self);
    pl_cfg_free(in->type->config, in->cfg);
    free(in->cfg);
}

static inst attributes, resource, redaction;
static int ready;

static pl_status check_and_free(void *arg, pl_batch *b)
{
    (void)arg;
    if (b->signal == PL_SIGNAL_PROFILES) {
        pl_err err;
        if (pl_otlp_validate_profiles(&b->data.profiles, &err) != PL_OK)
            abort();
        pl_buf out;
        pl_buf_init(&out);
        if (!pl_otlp_encode_profiles(&b->data.profiles, &out))
            abort();
        pl_buf_free(&out);
    } else {
        pl_buf out;
        pl_buf_init(&out);
        if (!pl_otlp_encode_traces(&b->data.traces, &out))
            abort();
        pl_buf_free(&out);
    }
    pl_batch_free(b);
    return PL_OK;
}

/* Runs one batch through attributes -> resource -> redaction, collecting
 * the result in *out. */
static pl_status keep(void *arg, pl_batch *b)
{
    *(pl_batch **)arg = b;
    return PL_OK;
}

static pl_batch *transform(pl_batch *b)
{
    pl_batch *out = NULL;
    pl_consumer k;
    pl_consumer_init_func(&k, keep, &out);
    if (attributes.type->consume(attributes.self, b, &k) != PL_OK || !out)
        return NULL;
    b = out;
    out = NULL;
    if (resource.type->consume(resource.self, b, &k) != PL_OK || !out)
        return NULL;
    b = out;
    out = NULL;
    if (redaction.type->consume(redaction.self, b, &k) != PL_OK || !out)
        return NULL;
    return out;
}

/* Inputs the decoder accepts but leaves inconsistent are the decoder's
 * business (fuzz_otlp_pb); they are skipped here so this target keeps
 * exercising the processors. Known case: a resource given twice in one
 * ResourceSpans/ResourceProfiles whose first copy had entity_refs. */
static bool resource_consistent(const pl_resource *r)
{
    if (r->n_entity_refs && !r->entity_refs)
        return false;
    for (uint32_t i = 0; i < r->n_entity_refs; i++)
        if ((r->entity_refs[i].n_id_keys && !r->entity_refs[i].id_keys) ||
            (r->entity_refs[i].n_description_keys && !r->entity_refs[i].description_keys))
            return false;
    return true;
}

static bool batch_consistent(const pl_batch *b)
{
    if (b->signal == PL_SIGNAL_TRACES) {
        for (uint32_t i = 0; i < b->data.traces.n_resources; i++)
            if (!resource_consistent(&b->data.traces.resources[i].resource))
                return false;
    } else {
        for (uint32_t i = 0; i < b->data.profiles.n_resources; i++)
            if (!resource_consistent(&b->data.profiles.resources[i].resource))
                return false;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready) {
        inst_open(
            &attributes, &pl_processor_attributes,
            "actions:\n"
            "  - {key: env, action: insert, value: prod}\n"
            "  - {key: thread, action: hash}\n"
            "  - {key: url, action: extract, pattern: '^(?P<scheme>\\w+)://(?P<host>[^/]*)'}\n"
            "  - {key: n, action: convert, converted_type: string}\n"
            "  - {pattern: '^tmp\\.', action: delete}\n"
            "  - {key: copy, action: upsert, from_attribute: service.name}\n");
        inst_open(&resource, &pl_processor_resource,
                  "attributes:\n"
                  "  - {key: host.name, action: upsert, value: h}\n"
                  "  - {key: service.name, action: convert, converted_type: int}\n");
        inst_open(&redaction, &pl_processor_redaction,
                  "blocked_values: ['\\d{4}', 'a*']\n"
                  "blocked_key_patterns: ['secret']\n"
                  "functions: ['^m', 'x$']\n"
                  "files: ['/']\n");
        ready = 1;
    }
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    bool profiles = mode & 1;
    pl_signal sig = profiles ? PL_SIGNAL_PROFILES : PL_SIGNAL_TRACES;
    pl_batch *b = pl_batch_new(sig);
    pl_err err;
    pl_status st = profiles ? pl_otlp_decode_profiles(b, buf, size, &err)
                            : pl_otlp_decode_traces(b, buf, size, &err);
    if (st != PL_OK || !batch_consistent(b)) {
        pl_batch_free(b);
        free(buf);
        return 0;
    }
    pl_batch *copy = pl_batch_clone(b);
    pl_batch *t1 = transform(b);
    pl_batch *t2 = copy ? transform(copy) : NULL;
    /* Merge both, split at 1..8 items. */
    char yaml[128];
    snprintf(yaml, sizeof(yaml), "send_batch_size: 0\nsend_batch_max_size: %d\ntimeout: 1h\n",
             1 + ((mode >> 1) & 7));
    inst batch;
    inst_open(&batch, &pl_processor_batch, yaml);
    pl_consumer sink;
    pl_consumer_init_func(&sink, check_and_free, NULL);
    if (t1)
        batch.type->consume(batch.self, t1, &sink);
    if (t2)
        batch.type->consume(batch.self, t2, &sink);
    inst_close(&batch); /* shutdown flushes into the checks */
    free(buf);
    return 0;
}
