/*
 * test_config.c: loading collector.yaml: good files decode to the right
 * values, and every class of mistake is reported at its exact
 * file:line:col, all of them in one pass.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "config/decode.h"
#include "config/node.h"
#include "core/buf.h"
#include "core/log.h"
#include "exporters/queue.h"
#include "cfg_errors_fixture.h"
#include "testlib.h"
#include "pipeline_fixtures.h"

static pl_cfg_errors errs;

static pl_config *load(const char *text)
{
    pl_cfg_errors_free(&errs);
    pl_cfg_errors_init(&errs);
    return pl_config_load_string("t.yaml", text, strlen(text), fx_registry(), &errs);
}

#define CHECK_ERROR(prefix)                                                                        \
    CHECK_CFG_ERROR(&errs, cfg_error_starts(&errs, prefix), "starting with \"" prefix "\"")

static const pl_config_component *component(const pl_config *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->n_components; i++)
        if (strcmp(cfg->components[i].id, id) == 0)
            return &cfg->components[i];
    return NULL;
}

static const char good_yaml[] = "receivers:\n"
                                "  feeder:\n"
                                "processors:\n"
                                "  kitchen/full:\n"
                                "    endpoint: ${env:PL_TEST_HOST}:${PL_TEST_PORT}\n"
                                "    max_items: 42\n"
                                "    enabled: false\n"
                                "    ratio: 0.25\n"
                                "    timeout: 1m30s\n"
                                "    max_size: 512KiB\n"
                                "    attributes: [a, b, c]\n"
                                "    headers:\n"
                                "      x-api-key: \"$${not_expanded}\"\n"
                                "      tenant: ${env:PL_TEST_MISSING:-fallback}\n"
                                "    tls: {insecure: true}\n"
                                "    rules:\n"
                                "      - key: k1\n"
                                "      - key: k2\n"
                                "        action: delete\n"
                                "  kitchen:\n"
                                "exporters:\n"
                                "  capture:\n"
                                "  capture/2: {backlog: 3}\n"
                                "service:\n"
                                "  shutdown_timeout: 2s\n"
                                "  telemetry:\n"
                                "    logs: {level: debug}\n"
                                "    metrics: {address: \"\"}\n"
                                "  pipelines:\n"
                                "    traces:\n"
                                "      receivers: [feeder]\n"
                                "      processors: [kitchen/full, kitchen]\n"
                                "      exporters: [capture]\n"
                                "    traces/second:\n"
                                "      receivers: [feeder]\n"
                                "      processors: [kitchen]\n"
                                "      exporters: [capture, capture/2]\n"
                                "    profiles:\n"
                                "      receivers: [feeder]\n"
                                "      exporters: [capture]\n";

static void test_good_file_decodes_every_type(void)
{
    setenv("PL_TEST_HOST", "collector.local", 1);
    setenv("PL_TEST_PORT", "4317", 1);
    unsetenv("PL_TEST_MISSING");
    pl_config *cfg = load(good_yaml);
    for (size_t i = 0; i < errs.n; i++)
        fprintf(stderr, "    %s\n", errs.items[i].text);
    REQUIRE(cfg != NULL);
    CHECK_EQ_UINT(cfg->n_pipelines, 3);
    CHECK_EQ_UINT(cfg->n_components, 5);

    const pl_config_component *full = component(cfg, "kitchen/full");
    REQUIRE(full && full->type == &fx_kitchen);
    const kitchen_cfg *k = full->cfg;
    CHECK_EQ_STR(k->endpoint, "collector.local:4317");
    CHECK_EQ_INT(k->max_items, 42);
    CHECK(k->enabled == false);
    CHECK(k->ratio == 0.25);
    CHECK_EQ_INT(k->timeout, 90LL * 1000000000LL);
    CHECK_EQ_UINT(k->max_size, 512 * 1024);
    REQUIRE(k->attributes.n == 3);
    CHECK_EQ_STR(k->attributes.items[2], "c");
    REQUIRE(k->headers.n == 2);
    CHECK_EQ_STR(k->headers.keys[0], "x-api-key");
    CHECK_EQ_STR(k->headers.values[0], "${not_expanded}");
    CHECK_EQ_STR(k->headers.values[1], "fallback");
    CHECK(k->tls.insecure == true);
    CHECK(k->tls.ca_file == NULL);
    REQUIRE(k->rules.n == 2);
    const kitchen_rule *rules = k->rules.items;
    CHECK_EQ_STR(rules[0].key, "k1");
    CHECK_EQ_STR(rules[0].action, "upsert");
    CHECK_EQ_STR(rules[1].action, "delete");

    /* the same type with nothing set gets every default from the table */
    const pl_config_component *plain = component(cfg, "kitchen");
    REQUIRE(plain != NULL);
    const kitchen_cfg *d = plain->cfg;
    CHECK_EQ_STR(d->endpoint, "127.0.0.1:4317");
    CHECK_EQ_INT(d->max_items, 100);
    CHECK(d->enabled == true);
    CHECK(d->ratio == 0.5);
    CHECK_EQ_INT(d->timeout, 5LL * 1000000000LL);
    CHECK_EQ_UINT(d->max_size, 4u << 20);
    REQUIRE(d->attributes.n == 2);
    CHECK_EQ_STR(d->attributes.items[0], "http.route");
    CHECK_EQ_UINT(d->rules.n, 0);

    /* signals are the union over the pipelines; shared ids are one entry */
    const pl_config_component *cap = component(cfg, "capture");
    REQUIRE(cap != NULL);
    CHECK_EQ_UINT(cap->signals,
                  PL_SIGNAL_MASK(PL_SIGNAL_TRACES) | PL_SIGNAL_MASK(PL_SIGNAL_PROFILES));
    CHECK_EQ_INT(cap->n_pipelines, 3);
    CHECK_EQ_INT(component(cfg, "kitchen")->n_pipelines, 2);

    CHECK_EQ_STR(cfg->pipelines[1].name, "traces/second");
    CHECK_EQ_INT(cfg->pipelines[1].signal, PL_SIGNAL_TRACES);
    CHECK_EQ_UINT(cfg->pipelines[1].n_exporters, 2);
    CHECK_EQ_INT(cfg->pipelines[2].signal, PL_SIGNAL_PROFILES);
    CHECK_EQ_INT(cfg->service.shutdown_timeout, 2000000000LL);
    CHECK_EQ_INT(cfg->log_level, PL_LOG_DEBUG);
    CHECK(pl_config_metrics_address(cfg) == NULL);
    pl_config_free(cfg);
}

static void test_service_defaults(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder], exporters: [capture]}\n");
    REQUIRE(cfg != NULL);
    CHECK_EQ_STR(pl_config_metrics_address(cfg), "127.0.0.1:8888");
    CHECK(!cfg->metrics_address_set);
    CHECK_EQ_INT(cfg->service.shutdown_timeout, 10LL * 1000000000LL);
    CHECK_EQ_INT(cfg->log_level, PL_LOG_INFO);
    pl_config_free(cfg);
}

static void test_yaml_syntax_error_has_position(void)
{
    pl_config *cfg = load("receivers:\n"
                          "  feeder: {endpoint: [a, b}\n");
    CHECK(cfg == NULL);
    CHECK_EQ_UINT(errs.n, 1);
    CHECK_ERROR("t.yaml:2:27: YAML syntax error: did not find expected ',' or ']'");

    cfg = load("receivers:\n"
               "  feeder:\n"
               " bad indent: 1\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:3:2: YAML syntax error");
}

static void test_unknown_key(void)
{
    pl_config *cfg = load("receivers:\n"
                          "  feeder:\n"
                          "processors:\n"
                          "  kitchen:\n"
                          "    endpont: x\n"
                          "    tls:\n"
                          "      verify: true\n"
                          "exporters: {capture: }\n"
                          "connectors: {}\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces:\n"
                          "      receivers: [feeder]\n"
                          "      processors: [kitchen]\n"
                          "      exporters: [capture]\n"
                          "      extra: [x]\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:5:5: unknown key 'endpont' (did you mean 'endpoint'? known keys: "
                "endpoint, max_items");
    CHECK_ERROR("t.yaml:7:7: unknown key 'verify' (known keys: ca_file, insecure)");
    CHECK_ERROR("t.yaml:9:1: 'connectors' are not supported: proflink runs no connectors");
    CHECK_ERROR("t.yaml:16:7: unknown key 'extra'");
    CHECK_EQ_UINT(errs.n, 4);
}

static void test_wrong_types(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "processors:\n"
                          "  kitchen:\n"
                          "    max_items: many\n"
                          "    enabled: maybe\n"
                          "    ratio: [1]\n"
                          "    endpoint: {host: x}\n"
                          "    attributes: {a: b}\n"
                          "    tls: yes\n"
                          "    rules: [plain]\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder], processors: [kitchen], exporters: "
                          "[capture]}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:4:16: 'max_items': expected an integer, got 'many'");
    CHECK_ERROR("t.yaml:5:14: 'enabled': expected true or false, got 'maybe'");
    CHECK_ERROR("t.yaml:6:12: 'ratio': expected a number, got a list");
    CHECK_ERROR("t.yaml:7:15: 'endpoint': expected a string, got a map");
    CHECK_ERROR("t.yaml:8:17: 'attributes': expected a list of strings, got a map");
    CHECK_ERROR("t.yaml:9:10: 'tls': expected a map, got 'yes'");
    CHECK_ERROR("t.yaml:10:13: 'rules': each item must be a map, got 'plain'");
    CHECK_EQ_UINT(errs.n, 7);
}

static void test_bad_duration_and_size(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "processors:\n"
                          "  kitchen:\n"
                          "    timeout: 5 parsecs\n"
                          "    max_size: 4 MiBs\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  shutdown_timeout: -1s\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder], processors: [kitchen], exporters: "
                          "[capture]}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:4:14: 'timeout': invalid duration '5 parsecs'");
    CHECK_ERROR("t.yaml:5:15: 'max_size': invalid size '4 MiBs'");
    CHECK_ERROR("t.yaml:8:21: 'shutdown_timeout': invalid duration '-1s'");
    CHECK_EQ_UINT(errs.n, 3);
}

static void test_unknown_component_type(void)
{
    pl_config *cfg = load("receivers:\n"
                          "  feeder:\n"
                          "  frob/in:\n"
                          "  zipkin:\n"
                          "exporters:\n"
                          "  capture:\n"
                          "  /nameless:\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces:\n"
                          "      receivers: [feeder, frob/in, zipkin]\n"
                          "      exporters: [capture]\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:3:3: unknown receiver type 'frob' (known: ");
    /* a well-known Collector type says what it is and what to use */
    CHECK_ERROR("t.yaml:4:3: unknown receiver type 'zipkin': a contrib receiver proflink does not "
                "have; send OTLP to the otlp receiver (known: ");
    CHECK_ERROR("t.yaml:7:3: bad component id '/nameless'");
    /* the pipeline's references to frob/in and zipkin are not reported a second time */
    CHECK_EQ_UINT(errs.n, 3);
}

static void test_undefined_component_reference(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  extensions: [health]\n"
                          "  pipelines:\n"
                          "    traces:\n"
                          "      receivers: [feeder, otlp]\n"
                          "      processors: [batch]\n"
                          "      exporters:\n"
                          "        - capture\n"
                          "        - capture/missing\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:4:16: extension 'health' is not defined under 'extensions'");
    CHECK_ERROR("t.yaml:7:27: receiver 'otlp' is not defined under 'receivers'");
    CHECK_ERROR("t.yaml:8:20: processor 'batch' is not defined under 'processors'");
    CHECK_ERROR("t.yaml:11:11: exporter 'capture/missing' is not defined under 'exporters'");
    CHECK_EQ_UINT(errs.n, 4);

    /* a near miss gets a suggestion */
    cfg =
        load("receivers: {feeder: }\n"
             "exporters: {capture/main: }\n"
             "service: {pipelines: {traces: {receivers: [feeder], exporters: [capture/mian]}}}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:3:65: exporter 'capture/mian' is not defined under 'exporters' (did you "
                "mean 'capture/main'?)");
}

static void test_pipeline_without_receivers_or_exporters(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces:\n"
                          "      exporters: [capture]\n"
                          "    profiles:\n"
                          "      receivers: [feeder]\n"
                          "      exporters: []\n"
                          "    metrics/x:\n"
                          "    spans:\n"
                          "      receivers: [feeder]\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:5:5: pipeline 'traces' has no receivers");
    CHECK_ERROR("t.yaml:7:5: pipeline 'profiles' has no exporters");
    CHECK_ERROR("t.yaml:10:5: pipeline 'metrics/x' has no receivers");
    CHECK_ERROR("t.yaml:10:5: pipeline 'metrics/x' has no exporters");
    CHECK_ERROR("t.yaml:11:5: bad pipeline name 'spans'");
    CHECK_EQ_UINT(errs.n, 5);

    cfg = load("receivers: {feeder: }\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:1:1: service.pipelines: at least one pipeline is required");
}

static void test_unsupported_signal(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "processors: {holder: }\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    logs:\n"
                          "      receivers: [feeder]\n"
                          "      processors: [holder]\n"
                          "      exporters: [capture]\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:7:19: receiver 'feeder' does not support logs (pipeline 'logs'); it "
                "handles: traces, profiles");
    CHECK_ERROR("t.yaml:8:20: processor 'holder' does not support logs");
    CHECK_ERROR("t.yaml:9:19: exporter 'capture' does not support logs");
    CHECK_EQ_UINT(errs.n, 3);
}

static void test_env_expansion(void)
{
    setenv("PL_TEST_ENDPOINT", "10.0.0.1:9999", 1);
    setenv("PL_TEST_EMPTY", "", 1);
    unsetenv("PL_TEST_UNSET");
    char why[256], warn[256];
    char *s = pl_cfg_expand("a ${env:PL_TEST_ENDPOINT} b", why, sizeof(why), warn, sizeof(warn));
    CHECK_EQ_STR(s, "a 10.0.0.1:9999 b");
    free(s);
    s = pl_cfg_expand("${PL_TEST_ENDPOINT}", why, sizeof(why), warn, sizeof(warn));
    CHECK_EQ_STR(s, "10.0.0.1:9999");
    free(s);
    s = pl_cfg_expand("${env:PL_TEST_UNSET:-0.0.0.0:4317}", why, sizeof(why), warn, sizeof(warn));
    CHECK_EQ_STR(s, "0.0.0.0:4317");
    free(s);
    s = pl_cfg_expand("${PL_TEST_EMPTY:-dflt}|${PL_TEST_EMPTY}|", why, sizeof(why), warn,
                      sizeof(warn));
    CHECK_EQ_STR(s, "dflt||");
    free(s);
    s = pl_cfg_expand("cost $5 and $${HOME} and $$", why, sizeof(why), warn, sizeof(warn));
    CHECK_EQ_STR(s, "cost $5 and ${HOME} and $");
    free(s);
    /* unset: empty, with a warning (as the Collector does) */
    s = pl_cfg_expand("[${env:PL_TEST_UNSET}]", why, sizeof(why), warn, sizeof(warn));
    CHECK_EQ_STR(s, "[]");
    free(s);
    CHECK(strstr(warn, "PL_TEST_UNSET is not set") != NULL);
    s = pl_cfg_expand("${unknown:x}", why, sizeof(why), warn, sizeof(warn));
    CHECK(s == NULL);
    CHECK(strstr(why, "unknown provider 'unknown'") != NULL);
    s = pl_cfg_expand("${oops", why, sizeof(why), warn, sizeof(warn));
    CHECK(s == NULL);
    s = pl_cfg_expand("${bad name}", why, sizeof(why), warn, sizeof(warn));
    CHECK(s == NULL);

    /* in a file: the missing variable is a warning at its value, and a bad
     * reference an error that does not hide the others */
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "processors:\n"
                          "  kitchen:\n"
                          "    endpoint: \"${env:PL_TEST_UNSET}\"\n"
                          "    max_items: ${PL_TEST_COUNT:-7}\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder], processors: [kitchen], exporters: "
                          "[capture]}\n");
    CHECK(cfg != NULL);
    CHECK_EQ_UINT(errs.n, 0);
    CHECK_EQ_UINT(errs.n_warnings, 1);
    CHECK(errs.n_warnings == 1 &&
          strncmp(errs.warnings[0].text,
                  "t.yaml:4:15: warning: environment variable PL_TEST_UNSET is not set", 66) == 0);
    pl_config_free(cfg);
    cfg = load("receivers: {feeder: }\n"
               "processors:\n"
               "  kitchen:\n"
               "    endpoint: ${file:/nonexistent/secret}\n"
               "    max_items: many\n"
               "exporters: {capture: }\n"
               "service:\n"
               "  pipelines:\n"
               "    traces: {receivers: [feeder], processors: [kitchen], exporters: "
               "[capture]}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:4:15: ${file:/nonexistent/secret}: cannot read");
    CHECK_ERROR("t.yaml:5:16: 'max_items': expected an integer");
    CHECK_EQ_UINT(errs.n, 2);

    /* an expanded value is typed like any other; keys are never expanded */
    cfg = load("receivers: {feeder: }\n"
               "processors:\n"
               "  kitchen:\n"
               "    max_items: ${PL_TEST_COUNT:-7}\n"
               "exporters: {capture: }\n"
               "service:\n"
               "  pipelines:\n"
               "    traces: {receivers: [feeder], processors: [kitchen], exporters: [capture]}\n");
    REQUIRE(cfg != NULL);
    CHECK_EQ_INT(((kitchen_cfg *)component(cfg, "kitchen")->cfg)->max_items, 7);
    pl_config_free(cfg);
}

static void test_duplicate_keys_and_validate_hooks(void)
{
    pl_config *cfg = load("receivers: {feeder: }\n"
                          "processors:\n"
                          "  kitchen:\n"
                          "    max_items: -1\n"
                          "    rules:\n"
                          "      - action: delete\n"
                          "  kitchen:\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder], processors: [kitchen], exporters: "
                          "[capture]}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:4:5: 'max_items': must not be negative");
    CHECK_ERROR("t.yaml:6:9: 'key': a rule needs a key");
    CHECK_ERROR("t.yaml:7:3: duplicate key 'kitchen' (first at line 3)");
}

static void test_anchors_and_merge_keys(void)
{
    pl_config *cfg = load("x-defaults: &tls {insecure: true}\n"
                          "receivers: {feeder: }\n"
                          "processors:\n"
                          "  kitchen/base: &base\n"
                          "    max_items: 5\n"
                          "    tls: *tls\n"
                          "  kitchen/derived:\n"
                          "    <<: *base\n"
                          "    max_items: 9\n"
                          "exporters: {capture: }\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [feeder], processors: [kitchen/base, "
                          "kitchen/derived], exporters: [capture]}\n");
    /* the x- top-level key is unknown (proflink has no extension fields) */
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:1:1: unknown key 'x-defaults'");
    CHECK_EQ_UINT(errs.n, 1);

    cfg = load("receivers: {feeder: }\n"
               "processors:\n"
               "  kitchen/base: &base\n"
               "    max_items: 5\n"
               "    tls: {insecure: true}\n"
               "  kitchen/derived:\n"
               "    <<: *base\n"
               "    max_items: 9\n"
               "  kitchen/bad:\n"
               "    <<: [1]\n"
               "exporters: {capture: }\n"
               "service:\n"
               "  pipelines:\n"
               "    traces: {receivers: [feeder], processors: [kitchen/base, "
               "kitchen/derived], exporters: [capture]}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:10:10: '<<' merges maps only");

    cfg = load("receivers: {feeder: }\n"
               "processors:\n"
               "  kitchen/base: &base\n"
               "    max_items: 5\n"
               "    tls: {insecure: true}\n"
               "  kitchen/derived:\n"
               "    <<: *base\n"
               "    max_items: 9\n"
               "exporters: {capture: }\n"
               "service:\n"
               "  pipelines:\n"
               "    traces: {receivers: [feeder], processors: [kitchen/base, "
               "kitchen/derived], exporters: [capture]}\n");
    REQUIRE(cfg != NULL);
    const kitchen_cfg *d = component(cfg, "kitchen/derived")->cfg;
    CHECK_EQ_INT(d->max_items, 9);  /* its own value wins */
    CHECK(d->tls.insecure == true); /* merged from the anchor */
    CHECK_EQ_INT(((const kitchen_cfg *)component(cfg, "kitchen/base")->cfg)->max_items, 5);
    pl_config_free(cfg);
}

static void test_errors_are_sorted_and_all_reported(void)
{
    pl_config *cfg = load("receivers: {feeder: {x: 1}}\n"
                          "processors:\n"
                          "  kitchen: {timeout: forever, max_size: lots}\n"
                          "exporters: {capture: {backlog: x}}\n"
                          "service:\n"
                          "  pipelines:\n"
                          "    traces: {receivers: [nope], exporters: [capture]}\n");
    CHECK(cfg == NULL);
    CHECK_EQ_UINT(errs.n, 5);
    for (size_t i = 1; i < errs.n; i++)
        CHECK(errs.items[i - 1].line < errs.items[i].line ||
              (errs.items[i - 1].line == errs.items[i].line &&
               errs.items[i - 1].col <= errs.items[i].col));
}

static void test_hostile_input_never_crashes(void)
{
    static const char *inputs[] = {
        "",
        "just a string",
        "- a\n- b\n",
        "\x01\x02\xff\xfe garbage: [",
        "a: *nowhere\n",
        "receivers: &r {feeder: }\nexporters: *r\n",
        "--- {}\n--- {}\n",
        "? [complex, key]\n: value\n",
        "receivers:\n  feeder: !!binary aGVsbG8=\n",
        "service: [1, 2]\n",
        "service: {pipelines: [traces]}\n",
        "service: {pipelines: {traces: [x]}}\n",
        "service: {pipelines: {traces: {receivers: {a: b}, exporters: [[x]]}}}\n",
        "receivers: [feeder]\n",
        "exporters: {capture: [1]}\n",
        "processors: {kitchen: {headers: {a: [1]}, rules: {a: b}}}\n",
        /* a cycle with two ways back at every level (2^64 paths) */
        "a::b: 1\nx: &x {b: *x, c: &y {d: *x}}\n",
    };
    for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
        pl_config *cfg = load(inputs[i]);
        CHECK(cfg == NULL);
        CHECK(errs.n > 0);
    }
    /* deep nesting is refused, not recursed into */
    char deep[4096];
    size_t n = 0;
    for (int i = 0; i < 2000; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    CHECK(load(deep) == NULL);
    CHECK(errs.n > 0);
    /* aliases that name the previous one twice, 40 levels: 2^40 paths to
     * the first map, each with an `a::b` key to split; walked once each */
    pl_buf chain;
    pl_buf_init(&chain);
    pl_buf_append_str(&chain, "extensions:\n  l0: &l0\n    k::v: 1\n");
    for (int i = 1; i <= 40; i++)
        pl_buf_printf(&chain, "  l%d: &l%d\n    x::a: *l%d\n    x::b: *l%d\n", i, i, i - 1, i - 1);
    pl_buf_append_byte(&chain, 0);
    REQUIRE(pl_buf_ok(&chain));
    CHECK(load((const char *)chain.data) == NULL); /* unknown extension types */
    CHECK(errs.n > 0);
    CHECK(cfg_error_starts(&errs, "t.yaml:2:3: unknown extension type 'l0'"));
    pl_buf_free(&chain);
    /* a missing file is one error with the reason */
    pl_cfg_errors_free(&errs);
    pl_cfg_errors_init(&errs);
    CHECK(pl_config_load_file("/nonexistent/collector.yaml", fx_registry(), &errs) == NULL);
    CHECK_EQ_UINT(errs.n, 1);
    CHECK_ERROR("/nonexistent/collector.yaml: cannot read: No such file or directory");
}

static void test_parse_duration_and_size(void)
{
    int64_t ns;
    CHECK(pl_parse_duration("500ms", &ns) == 0 && ns == 500000000);
    CHECK(pl_parse_duration("30s", &ns) == 0 && ns == 30000000000LL);
    CHECK(pl_parse_duration("5m", &ns) == 0 && ns == 300000000000LL);
    CHECK(pl_parse_duration("1h", &ns) == 0 && ns == 3600000000000LL);
    CHECK(pl_parse_duration("1.5s", &ns) == 0 && ns == 1500000000);
    CHECK(pl_parse_duration("1m30s", &ns) == 0 && ns == 90000000000LL);
    CHECK(pl_parse_duration("250us", &ns) == 0 && ns == 250000);
    CHECK(pl_parse_duration("7ns", &ns) == 0 && ns == 7);
    CHECK(pl_parse_duration("10", &ns) == 0 && ns == 10000000000LL);
    CHECK(pl_parse_duration("0", &ns) == 0 && ns == 0);
    CHECK(pl_parse_duration("", &ns) < 0);
    CHECK(pl_parse_duration("s", &ns) < 0);
    CHECK(pl_parse_duration("-1s", &ns) < 0);
    CHECK(pl_parse_duration("5x", &ns) < 0);
    CHECK(pl_parse_duration("1e3s", &ns) < 0);
    CHECK(pl_parse_duration("10 20", &ns) < 0);
    CHECK(pl_parse_duration("99999999999h", &ns) < 0);

    uint64_t b;
    CHECK(pl_parse_size("512KiB", &b) == 0 && b == 512 * 1024);
    CHECK(pl_parse_size("4MiB", &b) == 0 && b == 4u << 20);
    CHECK(pl_parse_size("1GiB", &b) == 0 && b == 1u << 30);
    CHECK(pl_parse_size("1GB", &b) == 0 && b == 1000000000);
    CHECK(pl_parse_size("2KB", &b) == 0 && b == 2000);
    CHECK(pl_parse_size("1.5MiB", &b) == 0 && b == 1572864);
    CHECK(pl_parse_size("100", &b) == 0 && b == 100);
    CHECK(pl_parse_size("64 MiB", &b) == 0 && b == 64u << 20);
    CHECK(pl_parse_size("", &b) < 0);
    CHECK(pl_parse_size("MiB", &b) < 0);
    CHECK(pl_parse_size("-1", &b) < 0);
    CHECK(pl_parse_size("4XB", &b) < 0);
    CHECK(pl_parse_size("99999999999999TiB", &b) < 0);
}

static void test_defaults_and_free(void)
{
    kitchen_cfg k;
    CHECK_EQ_INT(pl_cfg_defaults(&kitchen_section, &k), 0);
    CHECK_EQ_STR(k.endpoint, "127.0.0.1:4317");
    CHECK_EQ_UINT(k.attributes.n, 2);
    CHECK_EQ_UINT(k.max_size, 4u << 20);
    pl_cfg_free(&kitchen_section, &k);

    /* a table whose default does not parse is reported */
    static const pl_cfg_field broken_fields[] = {
        {"n", PL_CFG_INT, "ten", 0, "broken", NULL},
        {0},
    };
    static const pl_cfg_section broken = {sizeof(int64_t), broken_fields, NULL};
    int64_t n;
    CHECK_EQ_INT(pl_cfg_defaults(&broken, &n), -1);
}

static void test_integers_are_decimal_or_hex(void)
{
    static const char *texts[] = {"010", "0x10", " 42", "-7", "1e3", "12abc", ""};
    static const long long want[] = {10, 16, 42, -7, -1, -1, -1}; /* -1: an error */
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml),
                 "receivers: {feeder: }\n"
                 "processors: {kitchen: {max_items: \"%s\"}}\n"
                 "exporters: {capture: }\n"
                 "service: {pipelines: {traces: {receivers: [feeder], processors: [kitchen], "
                 "exporters: [capture]}}}\n",
                 texts[i]);
        pl_config *cfg = load(yaml);
        if (want[i] < 0 && texts[i][0] != '-') {
            CHECK(cfg == NULL);
            continue;
        }
        REQUIRE(cfg != NULL || want[i] == -7);
        if (want[i] == -7) { /* negative is an error of the validate hook, not the parser */
            CHECK(cfg == NULL);
            CHECK_ERROR("t.yaml:2:24: 'max_items': must not be negative");
            continue;
        }
        CHECK_EQ_INT(((const kitchen_cfg *)component(cfg, "kitchen")->cfg)->max_items, want[i]);
        pl_config_free(cfg);
    }
}

/* Several sources merge as the Collector merges them: maps deeply, lists
 * and scalars replaced, in order; `a::b` keys nest; --set comes last. */
static void test_sources_merge_in_order(void)
{
    char dir[] = "/tmp/pl_cfg_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char base[128], over[128], secret[128];
    snprintf(base, sizeof(base), "%s/base.yaml", dir);
    snprintf(over, sizeof(over), "%s/over.yaml", dir);
    snprintf(secret, sizeof(secret), "%s/secret", dir);
    FILE *f = fopen(base, "w");
    fputs("receivers: {feeder: }\n"
          "processors:\n"
          "  kitchen: {max_items: 1, ratio: 0.5, attributes: [a, b]}\n"
          "exporters: {capture: }\n"
          "service:\n"
          "  pipelines:\n"
          "    traces: {receivers: [feeder], processors: [kitchen], exporters: [capture]}\n",
          f);
    fclose(f);
    f = fopen(secret, "w");
    fputs("from-a-file\n\n", f);
    fclose(f);
    char over_text[256];
    snprintf(over_text, sizeof(over_text),
             "processors::kitchen::max_items: 2\n"
             "processors: {kitchen: {attributes: [c], endpoint: \"${file:%s}\"}}\n",
             secret);
    f = fopen(over, "w");
    fputs(over_text, f);
    fclose(f);

    char *configs[] = {base, over, "yaml:processors::kitchen::ratio: 0.75"};
    char *sets[] = {"processors.kitchen.max_items=3"};
    pl_cfg_sources src = {configs, 3, sets, 1};
    pl_cfg_errors_free(&errs);
    pl_cfg_errors_init(&errs);
    pl_config *cfg = pl_config_load(&src, fx_registry(), &errs);
    CHECK(cfg != NULL);
    if (cfg) {
        const kitchen_cfg *k = component(cfg, "kitchen")->cfg;
        CHECK_EQ_INT(k->max_items, 3);     /* --set wins */
        CHECK(k->ratio == 0.75);           /* yaml: after the files */
        CHECK_EQ_UINT(k->attributes.n, 1); /* lists are replaced */
        CHECK_EQ_STR(k->attributes.items[0], "c");
        CHECK_EQ_STR(k->endpoint, "from-a-file"); /* trailing line breaks removed */
        CHECK_EQ_UINT(cfg->sources.n_configs, 3);
        /* a reload reads the same sources again */
        pl_cfg_errors e2;
        pl_cfg_errors_init(&e2);
        pl_config *again = pl_config_reload(cfg, &e2);
        CHECK(again != NULL);
        if (again)
            CHECK_EQ_INT(((const kitchen_cfg *)component(again, "kitchen")->cfg)->max_items, 3);
        pl_config_free(again);
        pl_cfg_errors_free(&e2);
    }
    pl_config_free(cfg);

    /* a --set with a bad value is reported at the --set */
    char *bad_sets[] = {"processors::kitchen::max_items=many", "nokey"};
    pl_cfg_sources bad = {configs, 1, bad_sets, 2};
    pl_cfg_errors_free(&errs);
    pl_cfg_errors_init(&errs);
    CHECK(pl_config_load(&bad, fx_registry(), &errs) == NULL);
    CHECK_ERROR("--set nokey: expected --set path=value");
    pl_cfg_errors_free(&errs);
    pl_cfg_errors_init(&errs);
    bad.n_sets = 1;
    CHECK(pl_config_load(&bad, fx_registry(), &errs) == NULL);
    CHECK_ERROR("--set processors::kitchen::max_items=many:1:");

    unlink(base);
    unlink(over);
    unlink(secret);
    rmdir(dir);
}

static void test_listen_addresses(void)
{
    char host[64], why[200];
    int port;
    CHECK_EQ_INT(
        pl_cfg_address_parse("127.0.0.1:4317", host, sizeof(host), &port, why, sizeof(why)), 0);
    CHECK_EQ_STR(host, "127.0.0.1");
    CHECK_EQ_INT(port, 4317);
    CHECK_EQ_INT(pl_cfg_address_parse(":4318", host, sizeof(host), &port, why, sizeof(why)), 0);
    CHECK_EQ_STR(host, "0.0.0.0");
    CHECK_EQ_INT(pl_cfg_address_parse("localhost:1", host, sizeof(host), &port, why, sizeof(why)),
                 0);
    CHECK_EQ_STR(host, "127.0.0.1");
    CHECK_EQ_INT(pl_cfg_address_parse("[::1]:65535", host, sizeof(host), &port, why, sizeof(why)),
                 0);
    CHECK_EQ_STR(host, "::1");
    CHECK_EQ_INT(pl_cfg_address_parse("none", host, sizeof(host), &port, why, sizeof(why)), 0);
    CHECK_EQ_INT(port, -1);
    CHECK_EQ_INT(pl_cfg_address_parse("0.0.0.0:65536", NULL, 0, NULL, why, sizeof(why)), -1);
    CHECK(strstr(why, "0 to 65535") != NULL);
    CHECK_EQ_INT(
        pl_cfg_address_parse("0.0.0.0:99999999999999999999", NULL, 0, NULL, why, sizeof(why)), -1);
    CHECK_EQ_INT(pl_cfg_address_parse("h.example:80", NULL, 0, NULL, why, sizeof(why)), -1);
    CHECK_EQ_INT(pl_cfg_address_parse("1.2.3.4", NULL, 0, NULL, why, sizeof(why)), -1);
    CHECK_EQ_INT(pl_cfg_address_parse("1.2.3.4:", NULL, 0, NULL, why, sizeof(why)), -1);
    CHECK_EQ_INT(pl_cfg_address_parse("[::1:80", NULL, 0, NULL, why, sizeof(why)), -1);
}

static void test_secret_keys(void)
{
    CHECK(pl_cfg_key_is_secret("password"));
    CHECK(pl_cfg_key_is_secret("Authorization"));
    CHECK(pl_cfg_key_is_secret("X-API-Token"));
    CHECK(pl_cfg_key_is_secret("client_secret"));
    CHECK(pl_cfg_key_is_secret("api_key"));
    CHECK(!pl_cfg_key_is_secret("endpoint"));
    CHECK(!pl_cfg_key_is_secret("key_file"));
}

/* ---- the schema's per-option rules (pl_cfg_rule) ------------------------ */

typedef struct rules_cfg {
    int64_t n;
    int64_t every;
    uint64_t cap;
    double f;
    char *path;
    pl_strlist names;
    int hook_saw_errors; /* what the validate hook found already reported */
} rules_cfg;

static int rules_hook(void *cfg, pl_cfg_ctx *ctx)
{
    rules_cfg *c = cfg;
    c->hook_saw_errors = errs.n > 0 ? (int)errs.n : -1;
    return pl_cfg_check(ctx, c->n != 7, "n", "seven is cross-checked by the hook");
}

static const pl_cfg_field rules_fields[] = {
    {"n", PL_CFG_INT, "5", offsetof(rules_cfg, n), NULL, NULL,
     &(const pl_cfg_rule){.minimum = "0", .maximum = "10", .message = "n is 0..10"}},
    {"every", PL_CFG_DURATION, "1s", offsetof(rules_cfg, every), NULL, NULL,
     &(const pl_cfg_rule){.exclusive_minimum = "0", .message = "must be positive"}},
    {"cap", PL_CFG_SIZE, "1MiB", offsetof(rules_cfg, cap), NULL, NULL,
     &(const pl_cfg_rule){.minimum = "1MiB", .message = "must be at least 1MiB"}},
    {"f", PL_CFG_DOUBLE, "0.5", offsetof(rules_cfg, f), NULL, NULL,
     &(const pl_cfg_rule){.exclusive_minimum = "0", .maximum = "1", .message = "f is (0, 1]"}},
    {"path", PL_CFG_STRING, NULL, offsetof(rules_cfg, path), NULL, NULL,
     &(const pl_cfg_rule){.required = true, .message = "is required"}},
    {"names", PL_CFG_STRLIST, NULL, offsetof(rules_cfg, names), NULL, NULL,
     &(const pl_cfg_rule){.required = true, .message = "needs a name"}},
    {0},
};
static const pl_cfg_section rules_section = {sizeof(rules_cfg), rules_fields, rules_hook};

/* limits that do not parse: a bug in a table */
static const pl_cfg_field bad_limit_fields[] = {
    {"n", PL_CFG_INT, "1", offsetof(rules_cfg, n), NULL, NULL,
     &(const pl_cfg_rule){.minimum = "zero", .message = "never shown"}},
    {"every", PL_CFG_DURATION, "1s", offsetof(rules_cfg, every), NULL, NULL,
     &(const pl_cfg_rule){.maximum = "soon", .message = "never shown"}},
    {0},
};
static const pl_cfg_section bad_limit_section = {sizeof(rules_cfg), bad_limit_fields, NULL};

/* Decodes `yaml` (NULL: the section absent) with rules_section; returns the
 * error count, errors in `errs`, sorted. */
static int decode_rules(const char *yaml, const pl_cfg_section *section, rules_cfg *out)
{
    pl_cfg_errors_free(&errs);
    pl_cfg_errors_init(&errs);
    pl_cfg_doc *doc = yaml ? pl_cfg_doc_parse("r.yaml", yaml, strlen(yaml), &errs) : NULL;
    int n = pl_cfg_decode(section, doc ? doc->root : NULL, NULL, out, &errs);
    pl_cfg_errors_sort(&errs);
    pl_cfg_doc_free(doc);
    return n;
}

static void test_schema_rules(void)
{
    rules_cfg c;
    /* every limit met, at its edge */
    CHECK_EQ_INT(decode_rules("n: 10\nevery: 1ns\ncap: 1MiB\nf: 1\npath: p\nnames: [a]\n",
                              &rules_section, &c),
                 0);
    CHECK_EQ_INT(c.hook_saw_errors, -1);
    pl_cfg_free(&rules_section, &c);
    CHECK_EQ_INT(decode_rules("n: 0\npath: p\nnames: [a]\nf: 0.001\n", &rules_section, &c), 0);
    pl_cfg_free(&rules_section, &c);

    /* every limit missed by one step: one error each, at the value's key,
     * with the schema's message; the hook runs after them */
    CHECK_EQ_INT(decode_rules("n: 11\nevery: 0s\ncap: 1048575\nf: 0\npath: \"\"\nnames: []\n",
                              &rules_section, &c),
                 6);
    CHECK_ERROR("r.yaml:1:1: 'n': n is 0..10");
    CHECK_ERROR("r.yaml:2:1: 'every': must be positive");
    CHECK_ERROR("r.yaml:3:1: 'cap': must be at least 1MiB");
    CHECK_ERROR("r.yaml:4:1: 'f': f is (0, 1]");
    CHECK_ERROR("r.yaml:5:1: 'path': is required");
    CHECK_ERROR("r.yaml:6:1: 'names': needs a name");
    CHECK_EQ_INT(c.hook_saw_errors, 6);
    pl_cfg_free(&rules_section, &c);
    CHECK_EQ_INT(decode_rules("n: -1\nf: 1.5\npath: p\nnames: [a]\n", &rules_section, &c), 2);
    CHECK_ERROR("r.yaml:1:1: 'n': n is 0..10");
    CHECK_ERROR("r.yaml:2:1: 'f': f is (0, 1]");
    pl_cfg_free(&rules_section, &c);

    /* rules and the hook's own errors add up */
    CHECK_EQ_INT(decode_rules("n: 7\npath: \"\"\nnames: [a]\n", &rules_section, &c), 2);
    CHECK_ERROR("r.yaml:1:1: 'n': seven is cross-checked by the hook");
    pl_cfg_free(&rules_section, &c);

    /* an absent section is checked at its defaults: the required ones fail */
    CHECK_EQ_INT(decode_rules(NULL, &rules_section, &c), 2);
    CHECK(errs.n == 2 && strstr(errs.items[0].text, "'path': is required") &&
          strstr(errs.items[1].text, "'names': needs a name"));
    pl_cfg_free(&rules_section, &c);

    /* a limit that does not parse is a table bug, reported, never a pass
     * or a crash */
    CHECK_EQ_INT(decode_rules("n: 1\n", &bad_limit_section, &c), 2);
    CHECK_ERROR("r.yaml:1:1: 'n': a limit in the component table does not parse");
    pl_cfg_free(&bad_limit_section, &c);
}

/* sending_queue.storage naming a configured file_storage extension becomes
 * its directory; a path stays a path; a
 * file_storage id naming no extension is an error at its position. */
static void test_file_storage_resolves_queue_storage(void)
{
    pl_config *cfg = load("extensions:\n"
                          "  file_storage/q:\n"
                          "    directory: /var/tmp/pl-q\n"
                          "    compaction: {on_start: true}\n"
                          "  file_storage:\n"
                          "    directory: /var/tmp/pl-default/\n"
                          "receivers: {feeder: }\n"
                          "exporters:\n"
                          "  otlp/a:\n"
                          "    endpoint: localhost:4317\n"
                          "    sending_queue: {storage: file_storage/q}\n"
                          "  otlp/b:\n"
                          "    endpoint: localhost:4317\n"
                          "    sending_queue: {storage: /var/tmp/plain}\n"
                          "  otlp/c:\n"
                          "    endpoint: localhost:4317\n"
                          "    sending_queue: {storage: file_storage}\n"
                          "service:\n"
                          "  extensions: [file_storage/q]\n"
                          "  pipelines:\n"
                          "    traces:\n"
                          "      receivers: [feeder]\n"
                          "      exporters: [otlp/a, otlp/b, otlp/c]\n");
    for (size_t i = 0; !cfg && i < errs.n; i++)
        fprintf(stderr, "    %s\n", errs.items[i].text);
    REQUIRE(cfg != NULL);
    const pl_config_component *a = component(cfg, "otlp/a");
    const pl_config_component *b = component(cfg, "otlp/b");
    REQUIRE(a && b);
    const pl_sending_queue_config *qa = pl_queue_config_of(a->type->config, a->cfg);
    const pl_sending_queue_config *qb = pl_queue_config_of(b->type->config, b->cfg);
    REQUIRE(qa && qb);
    CHECK_EQ_STR(qa->storage, "/var/tmp/pl-q/");
    CHECK_EQ_STR(qb->storage, "/var/tmp/plain");
    char *file = pl_queue_storage_file(qa->storage, "otlp/a");
    CHECK(file && strncmp(file, "/var/tmp/pl-q/", 14) == 0 && strstr(file, ".queue.db"));
    free(file);
    const pl_config_component *c = component(cfg, "otlp/c");
    REQUIRE(c);
    const pl_sending_queue_config *qc = pl_queue_config_of(c->type->config, c->cfg);
    REQUIRE(qc);
    CHECK_EQ_STR(qc->storage, "/var/tmp/pl-default/");
    pl_config_free(cfg);

    cfg = load("extensions:\n"
               "  file_storage/other: {directory: /var/tmp/x}\n"
               "receivers: {feeder: }\n"
               "exporters:\n"
               "  otlp:\n"
               "    endpoint: localhost:4317\n"
               "    sending_queue:\n"
               "      storage: file_storage/q\n"
               "service:\n"
               "  pipelines:\n"
               "    traces: {receivers: [feeder], exporters: [otlp]}\n");
    CHECK(cfg == NULL);
    CHECK_ERROR("t.yaml:8:16: sending_queue.storage 'file_storage/q' names no configured "
                "file_storage extension");
    CHECK_EQ_UINT(errs.n, 1);
}

int main(void)
{
    pl_cfg_errors_init(&errs);
    PL_RUN(test_good_file_decodes_every_type);
    PL_RUN(test_service_defaults);
    PL_RUN(test_yaml_syntax_error_has_position);
    PL_RUN(test_unknown_key);
    PL_RUN(test_wrong_types);
    PL_RUN(test_bad_duration_and_size);
    PL_RUN(test_unknown_component_type);
    PL_RUN(test_undefined_component_reference);
    PL_RUN(test_pipeline_without_receivers_or_exporters);
    PL_RUN(test_unsupported_signal);
    PL_RUN(test_env_expansion);
    PL_RUN(test_duplicate_keys_and_validate_hooks);
    PL_RUN(test_anchors_and_merge_keys);
    PL_RUN(test_errors_are_sorted_and_all_reported);
    PL_RUN(test_hostile_input_never_crashes);
    PL_RUN(test_parse_duration_and_size);
    PL_RUN(test_defaults_and_free);
    PL_RUN(test_integers_are_decimal_or_hex);
    PL_RUN(test_sources_merge_in_order);
    PL_RUN(test_listen_addresses);
    PL_RUN(test_secret_keys);
    PL_RUN(test_schema_rules);
    PL_RUN(test_file_storage_resolves_queue_storage);
    pl_cfg_errors_free(&errs);
    return pl_test_done();
}
