/*
 * profile_fixture.h: the profile the store and query tests write next to
 * their spans: one resource (service.name given), one scope, one
 * cpu/nanoseconds profile at `now` with a single sample on stack 1, linked
 * to a span and carrying one value. The batch's dictionary must already
 * hold stack 1.
 */
#ifndef PL_TESTS_PROFILE_FIXTURE_H
#define PL_TESTS_PROFILE_FIXTURE_H

#include <string.h>

#include "core/model.h"

static __attribute__((unused)) pl_profile *add_linked_cpu_profile(pl_batch *b, const char *service,
                                                                  uint64_t now, const pl_link *link,
                                                                  int64_t value)
{
    pl_profiles *ps = &b->data.profiles;
    pl_dictionary *d = &ps->dict;
    ps->resources = pl_batch_alloc(b, sizeof(pl_resource_profiles));
    ps->n_resources = 1;
    pl_attrs_put(&b->arena, &ps->resources[0].resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(pl_bytes_from_cstr(service)));
    ps->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
    ps->resources[0].n_scopes = 1;
    pl_profile *p = pl_batch_alloc(b, sizeof(pl_profile));
    ps->resources[0].scopes[0].profiles = p;
    ps->resources[0].scopes[0].n_profiles = 1;
    p->sample_type.type_strindex = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu"));
    p->sample_type.unit_strindex = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("nanoseconds"));
    p->time_unix_nano = now;
    p->samples = pl_batch_alloc(b, sizeof(pl_sample));
    p->n_samples = 1;
    p->samples[0].stack_index = 1;
    p->samples[0].link_index = pl_dict_add_link(&b->arena, d, link);
    p->samples[0].values = pl_batch_alloc(b, sizeof(int64_t));
    p->samples[0].values[0] = value;
    p->samples[0].n_values = 1;
    return p;
}

#endif
