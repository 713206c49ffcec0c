/*
 * profile_fixture.h: profiles batches built by hand for the model, store and
 * query tests.
 *   add_single_profile: one resource holding one scope holding one profile
 *     with n zeroed samples (the profile);
 *   add_linked_cpu_profile: that, with service.name on the resource, a
 *     cpu/nanoseconds profile at `now` and its single sample on stack 1,
 *     linked to a span and carrying one value. The batch's dictionary must
 *     already hold stack 1.
 */
#ifndef PL_TESTS_PROFILE_FIXTURE_H
#define PL_TESTS_PROFILE_FIXTURE_H

#include <string.h>

#include "core/model.h"

static __attribute__((unused)) pl_profile *add_single_profile(pl_batch *b, uint32_t n_samples)
{
    pl_profiles *ps = &b->data.profiles;
    ps->n_resources = 1;
    ps->resources = pl_batch_alloc(b, sizeof(pl_resource_profiles));
    ps->resources[0].n_scopes = 1;
    ps->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_profiles));
    pl_scope_profiles *sp = &ps->resources[0].scopes[0];
    sp->n_profiles = 1;
    sp->profiles = pl_batch_alloc(b, sizeof(pl_profile));
    pl_profile *p = &sp->profiles[0];
    p->n_samples = n_samples;
    p->samples = pl_batch_alloc(b, n_samples * sizeof(pl_sample));
    return p;
}

static __attribute__((unused)) pl_profile *add_linked_cpu_profile(pl_batch *b, const char *service,
                                                                  uint64_t now, const pl_link *link,
                                                                  int64_t value)
{
    pl_dictionary *d = &b->data.profiles.dict;
    pl_profile *p = add_single_profile(b, 1);
    pl_attrs_put(&b->arena, &b->data.profiles.resources[0].resource.attrs,
                 PL_BYTES_LIT("service.name"), pl_value_string(pl_bytes_from_cstr(service)));
    p->sample_type.type_strindex = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("cpu"));
    p->sample_type.unit_strindex = pl_dict_intern_string(&b->arena, d, PL_BYTES_LIT("nanoseconds"));
    p->time_unix_nano = now;
    p->samples[0].stack_index = 1;
    p->samples[0].link_index = pl_dict_intern_link(&b->arena, d, link);
    p->samples[0].values = pl_batch_alloc(b, sizeof(int64_t));
    p->samples[0].values[0] = value;
    p->samples[0].n_values = 1;
    return p;
}

#endif
