/*
 * traces_fixture.h: the traces batch most C tests start from: one resource
 * (with service.name when a service is given) holding one scope of n zeroed
 * spans, which the test then fills in. Strings are copied into the batch's
 * arena, so the batch owns everything it points at.
 */
#ifndef PL_TESTS_TRACES_FIXTURE_H
#define PL_TESTS_TRACES_FIXTURE_H

#include <string.h>

#include "core/model.h"

/* `service` and `scope` (the scope's name; NULL: no scope message) may be
 * NULL. *spans receives the n spans. */
static __attribute__((unused)) pl_batch *tf_traces(const char *service, const char *scope,
                                                   uint32_t n, pl_span **spans)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = 1;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    pl_resource_spans *rs = &t->resources[0];
    rs->has_resource = true;
    if (service)
        pl_attrs_put(&b->arena, &rs->resource.attrs, pl_batch_bytes(b, "service.name", 12),
                     pl_value_string(pl_batch_bytes(b, service, strlen(service))));
    rs->n_scopes = 1;
    rs->scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    pl_scope_spans *ss = &rs->scopes[0];
    if (scope) {
        ss->has_scope = true;
        ss->scope.name = pl_batch_bytes(b, scope, strlen(scope));
    }
    ss->n_spans = n;
    ss->spans = pl_batch_alloc(b, sizeof(pl_span) * (size_t)n);
    *spans = ss->spans;
    return b;
}

#endif
