/*
 * export_formats.c: a stored profile (folded stacks) as a gzipped pprof
 * Profile (for `go tool pprof` and Pyroscope's import) and as speedscope's
 * JSON file format. Both are written from pl_profile_result, so the command
 * line, the API and the web view's download buttons give the same bytes.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "proto/pprof.h"
#include "store/sqlite_store.h"

/* Splits "root;child;leaf" into frames, leaf first (pprof's order). Returns
 * the count; frames point into `text`. */
static size_t split_leaf_first(const char *text, pl_bytes *frames, size_t cap)
{
    size_t n = 0;
    const char *p = text;
    while (*p && n < cap) {
        const char *semi = strchr(p, ';');
        size_t len = semi ? (size_t)(semi - p) : strlen(p);
        frames[n++] = (pl_bytes){(const uint8_t *)p, len};
        if (!semi)
            break;
        p = semi + 1;
    }
    for (size_t i = 0; i < n / 2; i++) {
        pl_bytes t = frames[i];
        frames[i] = frames[n - 1 - i];
        frames[n - 1 - i] = t;
    }
    return n;
}

#define MAX_FRAMES 1024

int pl_flamegraph_pprof(const pl_profile_result *r, uint64_t time_ns, pl_buf *out)
{
    bool counted = strcmp(r->unit, "count") == 0;
    pl_pprof_writer_options opt = {
        .sample_type = *r->type ? r->type : "samples",
        .sample_unit = *r->unit ? r->unit : "count",
        .period_type = counted ? NULL : (*r->type ? r->type : NULL),
        .period_unit = counted ? NULL : (*r->unit ? r->unit : NULL),
        .period = counted ? 0 : 1,
        .time_unix_nano = time_ns,
    };
    pl_pprof_writer *w = pl_pprof_writer_new(&opt);
    pl_bytes *frames = malloc(MAX_FRAMES * sizeof(pl_bytes));
    int rc = (w && frames) ? 0 : -1;
    for (size_t i = 0; i < r->n_stacks && rc == 0; i++) {
        size_t n = split_leaf_first(r->stacks[i].frames, frames, MAX_FRAMES);
        rc = pl_pprof_writer_add(w, frames, n, r->stacks[i].value);
    }
    pl_buf raw;
    pl_buf_init(&raw);
    if (rc == 0)
        rc = pl_pprof_writer_finish(w, &raw);
    if (rc == 0 && !pl_buf_ok(&raw))
        rc = -1;
    if (rc == 0)
        rc = pl_gzip(raw.data ? raw.data : (const uint8_t *)"", raw.len, out);
    pl_buf_free(&raw);
    free(frames);
    pl_pprof_writer_free(w);
    return rc;
}

/* speedscope's units: its file format knows these, anything else is "none". */
static const char *speedscope_unit(const char *unit)
{
    static const char *const known[] = {"nanoseconds", "microseconds", "milliseconds", "seconds",
                                        "bytes"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(unit, known[i]) == 0)
            return known[i];
    return "none";
}

/* Frame name -> index, for the shared frame table. */
typedef struct frame_index {
    pl_htab tab;
    const char **names;
    size_t *lens;
    size_t n, cap;
} frame_index;

typedef struct frame_key {
    const frame_index *fi;
    const char *s;
    size_t len;
} frame_key;

static bool frame_eq(const void *ctx, uint32_t val)
{
    const frame_key *k = ctx;
    return k->fi->lens[val - 1] == k->len && memcmp(k->fi->names[val - 1], k->s, k->len) == 0;
}

/* 1-based index of the frame, added when new; 0 on OOM. */
static uint32_t frame_id(frame_index *fi, const char *s, size_t len)
{
    frame_key k = {fi, s, len};
    uint32_t h = (uint32_t)pl_hash_bytes(s, len);
    uint32_t *slot = pl_htab_slot(&fi->tab, h, frame_eq, &k);
    if (!slot)
        return 0;
    if (*slot)
        return *slot;
    if (fi->n == fi->cap) {
        size_t cap = fi->cap ? fi->cap * 2 : 256;
        const char **names = realloc(fi->names, cap * sizeof(char *));
        if (names)
            fi->names = names;
        size_t *lens = realloc(fi->lens, cap * sizeof(size_t));
        if (lens)
            fi->lens = lens;
        if (!names || !lens)
            return 0;
        fi->cap = cap;
    }
    fi->names[fi->n] = s;
    fi->lens[fi->n] = len;
    *slot = (uint32_t)++fi->n;
    pl_htab_added(&fi->tab, slot, h);
    return *slot;
}

int pl_flamegraph_speedscope(const pl_profile_result *r, const char *name, pl_buf *out)
{
    frame_index fi = {0};
    pl_buf samples;
    pl_buf_init(&samples);
    int rc = 0;
    pl_buf_append_byte(&samples, '[');
    for (size_t i = 0; i < r->n_stacks && rc == 0; i++) {
        pl_buf_append_str(&samples, i ? ",[" : "[");
        const char *p = r->stacks[i].frames;
        bool first = true;
        while (*p) { /* root first: speedscope's order */
            const char *semi = strchr(p, ';');
            size_t len = semi ? (size_t)(semi - p) : strlen(p);
            uint32_t id = frame_id(&fi, p, len);
            if (!id) {
                rc = -1;
                break;
            }
            pl_buf_printf(&samples, "%s%u", first ? "" : ",", id - 1);
            first = false;
            if (!semi)
                break;
            p = semi + 1;
        }
        pl_buf_append_byte(&samples, ']');
    }
    pl_buf_append_byte(&samples, ']');
    if (rc == 0) {
        pl_buf_append_str(out,
                          "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
                          "\"exporter\":\"proflink\",\"name\":");
        pl_buf_json_string(out, name, strlen(name));
        pl_buf_append_str(out, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
        for (size_t i = 0; i < fi.n; i++) {
            pl_buf_append_str(out, i ? ",{\"name\":" : "{\"name\":");
            pl_buf_json_string(out, fi.names[i], fi.lens[i]);
            pl_buf_append_byte(out, '}');
        }
        pl_buf_append_str(out, "]},\"profiles\":[{\"type\":\"sampled\",\"name\":");
        pl_buf_json_string(out, name, strlen(name));
        pl_buf_printf(out,
                      ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%" PRId64 ",\"samples\":",
                      speedscope_unit(r->unit), r->total);
        if (samples.data)
            pl_buf_append(out, samples.data, samples.len);
        pl_buf_append_str(out, ",\"weights\":[");
        for (size_t i = 0; i < r->n_stacks; i++)
            pl_buf_printf(out, "%s%" PRId64, i ? "," : "", r->stacks[i].value);
        pl_buf_append_str(out, "]}]}");
        if (!pl_buf_ok(out) || !pl_buf_ok(&samples))
            rc = -1;
    }
    pl_buf_free(&samples);
    pl_htab_free(&fi.tab);
    free(fi.names);
    free(fi.lens);
    return rc;
}
