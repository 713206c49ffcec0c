/*
 * test_file_exporter.c: the `file` exporter writes exactly what went
 * through the pipeline: JSON lines that decode to the same model, protobuf
 * records byte-identical to the encoder's output, opaque logs/metrics, and
 * size-based rotation.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include "config/decode.h"
#include "net/compress.h"

#include "core/buf.h"
#include "core/component.h"
#include "core/model.h"
#include "core/stats.h"
#include "exporters/file.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"
#include "testlib.h"

extern const pl_component_type pl_exporter_file;

static char dir[] = "/tmp/pl_file_exporter_XXXXXX";

static void *make_exporter(const char *name, const char *format, int64_t max_mb, int64_t backups,
                           pl_stats **stats_out)
{
    pl_file_exporter_config *cfg = calloc(1, pl_exporter_file.config->size);
    if (pl_cfg_defaults(pl_exporter_file.config, cfg) != 0)
        return NULL;
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    free(cfg->path);
    cfg->path = strdup(path);
    free(cfg->format);
    cfg->format = strdup(format);
    cfg->rotation.max_megabytes = max_mb;
    cfg->rotation.max_backups = backups;
    pl_stats *stats = pl_stats_new(name, PL_KIND_EXPORTER);
    pl_create_settings s = {.id = name, .stats = stats, .signals = PL_SIGNALS_ALL};
    void *self = NULL;
    pl_err err;
    if (pl_exporter_file.create(&s, cfg, &self, &err) != PL_OK ||
        pl_exporter_file.start(self, &err) != PL_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        self = NULL;
    }
    pl_cfg_free(pl_exporter_file.config, cfg);
    free(cfg);
    *stats_out = stats;
    return self;
}

static pl_buf read_file(const char *name)
{
    pl_buf b;
    pl_buf_init(&b);
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return b;
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        pl_buf_append(&b, chunk, n);
    fclose(f);
    return b;
}

static pl_batch *make_traces(int n_spans, size_t value_len)
{
    pl_batch *b = pl_batch_new(PL_SIGNAL_TRACES);
    pl_traces *t = &b->data.traces;
    t->n_resources = 1;
    t->resources = pl_batch_alloc(b, sizeof(pl_resource_spans));
    t->resources[0].has_resource = true;
    pl_attrs_put(&b->arena, &t->resources[0].resource.attrs, PL_BYTES_LIT("service.name"),
                 pl_value_string(PL_BYTES_LIT("svc")));
    t->resources[0].n_scopes = 1;
    t->resources[0].scopes = pl_batch_alloc(b, sizeof(pl_scope_spans));
    pl_scope_spans *ss = &t->resources[0].scopes[0];
    ss->n_spans = (uint32_t)n_spans;
    ss->spans = pl_batch_alloc(b, (size_t)n_spans * sizeof(pl_span));
    char *big = pl_batch_alloc(b, value_len + 1);
    memset(big, 'v', value_len);
    for (int i = 0; i < n_spans; i++) {
        pl_span *sp = &ss->spans[i];
        memset(sp->trace_id, 0x5a, 16);
        sp->trace_id_len = 16;
        sp->span_id[7] = (uint8_t)(i + 1);
        sp->span_id_len = 8;
        sp->name = PL_BYTES_LIT("op \"quoted\"\n");
        sp->start_time_unix_nano = 1700000000000000000ull + (uint64_t)i;
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("big"),
                     pl_value_string((pl_bytes){(const uint8_t *)big, (uint32_t)value_len}));
        pl_attrs_put(&b->arena, &sp->attrs, PL_BYTES_LIT("d"), pl_value_double(0.1));
    }
    return b;
}

static void test_json_traces_exact(void)
{
    pl_stats *stats;
    void *x = make_exporter("traces.jsonl", "json", 0, 0, &stats);
    REQUIRE(x);
    pl_batch *b1 = make_traces(3, 10), *b2 = make_traces(1, 5);
    CHECK_EQ_INT(pl_exporter_file.export(x, b1), PL_OK);
    CHECK_EQ_INT(pl_exporter_file.export(x, b2), PL_OK);
    /* Readable right away, without shutdown. */
    pl_buf content = read_file("traces.jsonl");
    REQUIRE(content.len > 0);
    CHECK_EQ_INT(content.data[content.len - 1], '\n');
    uint8_t *nl = memchr(content.data, '\n', content.len);
    REQUIRE(nl);
    pl_batch *d1 = pl_batch_new(PL_SIGNAL_TRACES), *d2 = pl_batch_new(PL_SIGNAL_TRACES);
    pl_err err;
    CHECK_EQ_INT(pl_otlp_json_decode_traces(d1, content.data, (size_t)(nl - content.data), &err),
                 PL_OK);
    CHECK_EQ_INT(
        pl_otlp_json_decode_traces(d2, nl + 1, content.len - (size_t)(nl + 1 - content.data), &err),
        PL_OK);
    pl_buf a, c;
    pl_buf_init(&a);
    pl_buf_init(&c);
    pl_otlp_encode_traces(&b1->data.traces, &a);
    pl_otlp_encode_traces(&d1->data.traces, &c);
    CHECK_EQ_BYTES(a.data, a.len, c.data, c.len);
    pl_buf_reset(&a);
    pl_buf_reset(&c);
    pl_otlp_encode_traces(&b2->data.traces, &a);
    pl_otlp_encode_traces(&d2->data.traces, &c);
    CHECK_EQ_BYTES(a.data, a.len, c.data, c.len);
    CHECK_EQ_UINT(pl_stats_get(stats, PL_SIGNAL_TRACES, PL_STAT_SENT), 4);
    pl_buf_free(&a);
    pl_buf_free(&c);
    pl_buf_free(&content);
    pl_batch_free(b1);
    pl_batch_free(b2);
    pl_batch_free(d1);
    pl_batch_free(d2);
    pl_exporter_file.destroy(x);
    pl_stats_free(stats);
}

static void test_proto_records_and_logs(void)
{
    pl_stats *stats;
    void *x = make_exporter("all.pb", "proto", 0, 0, &stats);
    REQUIRE(x);
    pl_batch *t = make_traces(2, 3);
    CHECK_EQ_INT(pl_exporter_file.export(x, t), PL_OK);
    /* logs: one resource_logs, one scope_logs, two records */
    static const uint8_t logs[] = {0x0a, 0x08, 0x12, 0x06, 0x12, 0x00, 0x12, 0x02, 0x18, 0x09};
    pl_batch *l = pl_batch_new(PL_SIGNAL_LOGS);
    l->data.raw = (pl_bytes){logs, sizeof logs};
    CHECK_EQ_INT(pl_exporter_file.export(x, l), PL_OK);
    CHECK_EQ_UINT(pl_stats_get(stats, PL_SIGNAL_LOGS, PL_STAT_SENT), 2);
    pl_buf content = read_file("all.pb");
    pl_buf want;
    pl_buf_init(&want);
    pl_otlp_encode_traces(&t->data.traces, &want);
    REQUIRE(content.len == 4 + want.len + 4 + sizeof logs);
    uint32_t n = (uint32_t)content.data[0] << 24 | (uint32_t)content.data[1] << 16 |
                 (uint32_t)content.data[2] << 8 | content.data[3];
    CHECK_EQ_UINT(n, want.len);
    CHECK_EQ_BYTES(content.data + 4, n, want.data, want.len);
    CHECK_EQ_BYTES(content.data + 8 + n, sizeof logs, logs, sizeof logs);
    CHECK_EQ_INT(content.data[4 + n + 3], sizeof logs);
    pl_buf_free(&want);
    pl_buf_free(&content);
    pl_batch_free(t);
    pl_batch_free(l);
    pl_exporter_file.destroy(x);
    pl_stats_free(stats);

    /* JSON form of an opaque metrics request. */
    x = make_exporter("metrics.jsonl", "json", 0, 0, &stats);
    REQUIRE(x);
    pl_batch *m = pl_batch_new(PL_SIGNAL_METRICS);
    m->data.raw = (pl_bytes){(const uint8_t *)"\x0a\x00", 2};
    CHECK_EQ_INT(pl_exporter_file.export(x, m), PL_OK);
    content = read_file("metrics.jsonl");
    pl_buf_append_byte(&content, 0);
    CHECK_EQ_STR((char *)content.data, "{\"signal\":\"metrics\",\"protobuf\":\"CgA=\"}\n");
    pl_buf_free(&content);
    pl_batch_free(m);
    pl_exporter_file.destroy(x);
    pl_stats_free(stats);
}

static void test_rotation(void)
{
    pl_stats *stats;
    void *x = make_exporter("rot.jsonl", "json", 1, 2, &stats);
    REQUIRE(x);
    /* ~400 KiB per record: 1 MiB holds two. Seven records make four files:
     * records 7 | 5-6 (.1) | 3-4 (.2) | 1-2 deleted (max_backups 2). */
    pl_batch *b = make_traces(1, 400 * 1024);
    for (int i = 0; i < 7; i++)
        CHECK_EQ_INT(pl_exporter_file.export(x, b), PL_OK);
    char path[256];
    struct stat st;
    snprintf(path, sizeof path, "%s/rot.jsonl", dir);
    CHECK(stat(path, &st) == 0 && st.st_size > 0 && st.st_size <= (1 << 20));
    snprintf(path, sizeof path, "%s/rot.jsonl.1", dir);
    CHECK(stat(path, &st) == 0 && st.st_size > (600 << 10) && st.st_size <= (1 << 20));
    snprintf(path, sizeof path, "%s/rot.jsonl.2", dir);
    CHECK(stat(path, &st) == 0);
    snprintf(path, sizeof path, "%s/rot.jsonl.3", dir);
    CHECK(stat(path, &st) != 0);
    pl_buf content = read_file("rot.jsonl");
    int lines = 0;
    for (size_t i = 0; i < content.len; i++)
        lines += content.data[i] == '\n';
    CHECK_EQ_INT(lines, 1);
    pl_buf_free(&content);
    pl_batch_free(b);
    pl_exporter_file.destroy(x);
    pl_stats_free(stats);
}

/* The Collector's meaning of `rotation:`: present (even empty) turns it on
 * with 100 MiB files and 100 backups; absent, there is no rotation. */
static void test_rotation_config_like_the_collector(void)
{
    static const struct {
        const char *yaml;
        int64_t mb, backups;
    } cases[] = {
        {"path: x\n", 0, 100},
        {"path: x\nrotation:\n", 100, 100},
        {"path: x\nrotation: {}\n", 100, 100},
        {"path: x\nrotation: {max_megabytes: 5, max_backups: 3, max_days: 2}\n", 5, 3},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pl_cfg_errors errs;
        pl_cfg_errors_init(&errs);
        pl_cfg_doc *doc = pl_cfg_doc_parse("t.yaml", cases[i].yaml, strlen(cases[i].yaml), &errs);
        REQUIRE(doc);
        pl_file_exporter_config *cfg = calloc(1, pl_exporter_file.config->size);
        CHECK_EQ_INT(pl_cfg_decode(pl_exporter_file.config, doc->root, doc->root, cfg, &errs), 0);
        CHECK_EQ_INT(cfg->rotation.max_megabytes, cases[i].mb);
        CHECK_EQ_INT(cfg->rotation.max_backups, cases[i].backups);
        pl_cfg_free(pl_exporter_file.config, cfg);
        free(cfg);
        pl_cfg_doc_free(doc);
        pl_cfg_errors_free(&errs);
    }
}

/* compression: zstd: each record is a 4-byte big-endian length and the
 * zstd frame of the JSON line (without its newline). */
static void test_zstd_records(void)
{
    pl_stats *stats;
    pl_file_exporter_config *cfg = calloc(1, pl_exporter_file.config->size);
    REQUIRE(pl_cfg_defaults(pl_exporter_file.config, cfg) == 0);
    char path[256];
    snprintf(path, sizeof path, "%s/z.jsonl", dir);
    cfg->path = strdup(path);
    cfg->compression = strdup("zstd");
    stats = pl_stats_new("z", PL_KIND_EXPORTER);
    pl_create_settings s = {.id = "file/z", .stats = stats, .signals = PL_SIGNALS_ALL};
    void *x = NULL;
    pl_err err;
    REQUIRE(pl_exporter_file.create(&s, cfg, &x, &err) == PL_OK);
    REQUIRE(pl_exporter_file.start(x, &err) == PL_OK);
    pl_batch *b = make_traces(3, 2000);
    CHECK_EQ_INT(pl_exporter_file.export(x, b), PL_OK);
    CHECK_EQ_INT(pl_exporter_file.export(x, b), PL_OK);
    pl_buf want;
    pl_buf_init(&want);
    pl_otlp_json_encode_traces(&b->data.traces, &want);
    pl_buf content = read_file("z.jsonl");
    size_t off = 0;
    int records = 0;
    while (off + 4 <= content.len) {
        const uint8_t *p = content.data + off;
        size_t n = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
        REQUIRE(off + 4 + n <= content.len);
        CHECK(n < want.len); /* it is compressed */
        uint8_t *out = NULL;
        size_t out_len = 0;
        REQUIRE(pl_decompress(PL_ENCODING_ZSTD, p + 4, n, 1 << 24, &out, &out_len, &err) == PL_OK);
        CHECK(out_len == want.len && memcmp(out, want.data, want.len) == 0);
        free(out);
        off += 4 + n;
        records++;
    }
    CHECK_EQ_UINT(off, content.len);
    CHECK_EQ_INT(records, 2);
    pl_buf_free(&want);
    pl_buf_free(&content);
    pl_batch_free(b);
    pl_exporter_file.destroy(x);
    pl_cfg_free(pl_exporter_file.config, cfg);
    free(cfg);
    pl_stats_free(stats);
}

/* rotation.max_days: at a rotation, rotated files last written longer ago
 * than that are deleted; recent ones stay. */
static void test_rotation_max_days(void)
{
    pl_stats *stats;
    char path[256];
    /* an old and a fresh backup, as a previous run left them */
    snprintf(path, sizeof path, "%s/days.jsonl.1", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("old\n", f);
    fclose(f);
    struct utimbuf old = {.actime = time(NULL) - 5 * 86400, .modtime = time(NULL) - 5 * 86400};
    REQUIRE(utime(path, &old) == 0);
    snprintf(path, sizeof path, "%s/days.jsonl.2", dir);
    f = fopen(path, "w");
    REQUIRE(f);
    fputs("fresh\n", f);
    fclose(f);
    pl_file_exporter_config *cfg = calloc(1, pl_exporter_file.config->size);
    REQUIRE(pl_cfg_defaults(pl_exporter_file.config, cfg) == 0);
    snprintf(path, sizeof path, "%s/days.jsonl", dir);
    cfg->path = strdup(path);
    cfg->rotation.max_megabytes = 1;
    cfg->rotation.max_backups = 10;
    cfg->rotation.max_days = 2;
    stats = pl_stats_new("d", PL_KIND_EXPORTER);
    pl_create_settings s = {.id = "file/d", .stats = stats, .signals = PL_SIGNALS_ALL};
    void *x = NULL;
    pl_err err;
    REQUIRE(pl_exporter_file.create(&s, cfg, &x, &err) == PL_OK);
    REQUIRE(pl_exporter_file.start(x, &err) == PL_OK);
    pl_batch *b = make_traces(1, 700 * 1024);
    CHECK_EQ_INT(pl_exporter_file.export(x, b), PL_OK);
    CHECK_EQ_INT(pl_exporter_file.export(x, b), PL_OK); /* rotates: .1 -> .2 (old), .2 -> .3 */
    struct stat st;
    snprintf(path, sizeof path, "%s/days.jsonl.1", dir);
    CHECK(stat(path, &st) == 0); /* the file just rotated */
    snprintf(path, sizeof path, "%s/days.jsonl.2", dir);
    CHECK(stat(path, &st) != 0); /* the 5-day-old one, deleted */
    snprintf(path, sizeof path, "%s/days.jsonl.3", dir);
    CHECK(stat(path, &st) == 0); /* the fresh one, kept */
    pl_batch_free(b);
    pl_exporter_file.destroy(x);
    pl_cfg_free(pl_exporter_file.config, cfg);
    free(cfg);
    pl_stats_free(stats);
}

static void test_bad_path(void)
{
    pl_file_exporter_config *cfg = calloc(1, pl_exporter_file.config->size);
    REQUIRE(pl_cfg_defaults(pl_exporter_file.config, cfg) == 0);
    cfg->path = strdup("/nonexistent-dir/x/y.json");
    pl_stats *stats = pl_stats_new("bad", PL_KIND_EXPORTER);
    pl_create_settings s = {.id = "file/bad", .stats = stats};
    void *self = NULL;
    pl_err err;
    CHECK_EQ_INT(pl_exporter_file.create(&s, cfg, &self, &err), PL_OK);
    CHECK(pl_exporter_file.start(self, &err) != PL_OK);
    CHECK(strstr(err.msg, "/nonexistent-dir/x/y.json") != NULL);
    pl_exporter_file.destroy(self);
    pl_cfg_free(pl_exporter_file.config, cfg);
    free(cfg);
    pl_stats_free(stats);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    PL_RUN(test_json_traces_exact);
    PL_RUN(test_proto_records_and_logs);
    PL_RUN(test_rotation);
    PL_RUN(test_rotation_config_like_the_collector);
    PL_RUN(test_zstd_records);
    PL_RUN(test_rotation_max_days);
    PL_RUN(test_bad_path);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return pl_test_done();
}
