/*
 * ext_fixture.h: building an extension from YAML the way the service does
 * (decode its config table, then create), and driving the HTTP server's
 * request path from memory, for the authentication tests.
 */
#ifndef PL_TESTS_EXT_FIXTURE_H
#define PL_TESTS_EXT_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/decode.h"
#include "config/node.h"
#include "core/buf.h"
#include "core/component.h"
#include "net/http_server.h"
#include "pipeline/registry.h"
#include "testlib.h"

/* Creates extension `type` with id `id` from YAML; NULL (and the error in
 * err) when create refuses it. */
static __attribute__((unused)) void *make_ext(const char *type, const char *id, const char *yaml,
                                              pl_err *err)
{
    const pl_component_type *t = pl_component_type_find(PL_KIND_EXTENSION, type, strlen(type));
    CHECK(t != NULL);
    if (!t)
        return NULL;
    pl_cfg_errors errs;
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = pl_cfg_doc_parse("t.yaml", yaml, strlen(yaml), &errs);
    CHECK(doc != NULL);
    if (!doc)
        return NULL;
    void *cfg = calloc(1, t->config->size);
    int n = pl_cfg_decode(t->config, doc->root, doc->root, cfg, &errs);
    if (n)
        pl_cfg_errors_print(&errs, stderr);
    CHECK_EQ_INT(n, 0);
    pl_create_settings s = {.id = id};
    void *self = NULL;
    pl_status st = t->create(&s, cfg, &self, err);
    pl_cfg_free(t->config, cfg);
    free(cfg);
    pl_cfg_doc_free(doc);
    pl_cfg_errors_free(&errs);
    return st == PL_OK ? self : NULL;
}

static __attribute__((unused)) void destroy_ext(const char *type, void *self)
{
    pl_component_type_find(PL_KIND_EXTENSION, type, strlen(type))->destroy(self);
}

/* Errors (and warnings) of decoding `yaml` with extension `type`'s table. */
static __attribute__((unused)) void decode_ext(const char *type, const char *yaml,
                                               pl_cfg_errors *errs)
{
    const pl_component_type *t = pl_component_type_find(PL_KIND_EXTENSION, type, strlen(type));
    REQUIRE(t != NULL);
    pl_cfg_doc *doc = pl_cfg_doc_parse("t.yaml", yaml, strlen(yaml), errs);
    REQUIRE(doc != NULL);
    void *cfg = calloc(1, t->config->size);
    pl_cfg_decode(t->config, doc->root, doc->root, cfg, errs);
    pl_cfg_free(t->config, cfg);
    free(cfg);
    pl_cfg_doc_free(doc);
}

/* Feeds one request to a server with `opt` answering through `handler`;
 * the server's output, NUL-terminated (free it). */
static __attribute__((unused)) char *feed_to(const pl_http_server_options *opt,
                                             pl_http_handler handler, void *arg, const char *req)
{
    pl_buf out;
    pl_buf_init(&out);
    pl_http_server_feed(opt, handler, arg, (const uint8_t *)req, strlen(req), 0, &out);
    pl_buf_append_byte(&out, 0);
    size_t len;
    return (char *)pl_buf_steal(&out, &len);
}

#endif
