/*
 * file.c: the `file` exporter: appends every batch it gets to a file, one
 * export request per record, for all four signals.
 *
 *   format: json   one OTLP/JSON export request per line (NDJSON):
 *                  traces   {"resourceSpans":[...]}
 *                  profiles {"resourceProfiles":[...],"dictionary":{...}}
 *                  logs / metrics (kept as opaque protobuf by proflink):
 *                  {"signal":"logs","protobuf":"<base64 of the
 *                   ExportLogsServiceRequest>"}  (resp. "metrics")
 *   format: proto  length-prefixed binary records: a 4-byte big-endian
 *                  length, then the protobuf export request (as the
 *                  Collector's file exporter writes them). Records carry no
 *                  signal tag: give each signal its own file when reading
 *                  them back.
 *
 * The encoders are proflink's OTLP codecs, so what comes out is exactly the
 * model that went through the pipeline (protobuf records of canonical input
 * are byte-identical to what was received). Interop tests rely on this.
 *
 * Every record is written with write(2) and the file is flushed to the OS
 * before export() returns, so a reader sees complete records at once.
 * Writing happens on the event loop thread: fine for tests, debugging and
 * moderate volumes, not meant for very high rates or slow disks.
 *
 * Rotation (rotation.max_megabytes > 0): before a record would take the file
 * past the limit, the file is renamed to PATH.1 (older backups shift to
 * PATH.2, ...; at most rotation.max_backups are kept, the oldest is deleted)
 * and a new file is started. A record larger than the limit still goes into
 * a file of its own. As in the Collector, `rotation:` present (even empty)
 * turns rotation on with 100 MiB files; rotation.max_days deletes rotated
 * files last written longer ago.
 *
 * compression: zstd compresses every record (the protobuf request, or the
 * JSON line without its newline) and writes it behind a 4-byte big-endian
 * length, whatever the format.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/decode.h"
#include "core/buf.h"
#include "core/component.h"
#include "core/log.h"
#include "exporters/file.h"
#include "net/compress.h"
#include "proto/otlp_json.h"
#include "proto/otlp_pb.h"

typedef pl_file_exporter_config file_cfg;

static int file_validate(void *cfg, pl_cfg_ctx *ctx)
{
    file_cfg *c = cfg;
    int errors = 0;
    errors += pl_cfg_check(
        ctx, !(c->format && strcmp(c->format, "json") != 0 && strcmp(c->format, "proto") != 0),
        "format", "must be json or proto, not '%s'", c->format);
    errors += pl_cfg_check(
        ctx, !c->compression || !*c->compression || strcmp(c->compression, "zstd") == 0,
        "compression", "must be zstd (or empty for none), not '%s'", c->compression);
    /* as in the Collector: `rotation:` present turns rotation on, with
     * 100 MiB files unless max_megabytes says otherwise */
    if (pl_cfg_node_key(ctx->map, "rotation")) {
        if (c->rotation.max_megabytes == 0)
            c->rotation.max_megabytes = 100;
    } else {
        c->rotation.max_megabytes = 0;
    }
    return errors;
}

#include "exporters/file.config.inc"

typedef struct file_exporter {
    char *id;
    char *path;
    bool proto;
    uint64_t max_bytes; /* 0: no rotation */
    int max_backups;
    int64_t max_days; /* 0: rotated files are kept whatever their age */
    bool zstd;        /* records compressed, each behind its length */
    int fd;
    uint64_t size; /* current file size */
    pl_stats *stats;
    pl_buf buf;  /* reused between exports */
    pl_buf zbuf; /* the compressed record */
} file_exporter;

static pl_status file_open(file_exporter *f, pl_err *err)
{
    f->fd = open(f->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f->fd < 0)
        return pl_errf(err, PL_ERR_INTERNAL, "%s: cannot open %s: %s", f->id, f->path,
                       strerror(errno));
    struct stat st;
    f->size = fstat(f->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    return PL_OK;
}

static pl_status file_create(const pl_create_settings *settings, const void *config,
                             void **out_self, pl_err *err)
{
    const file_cfg *c = config;
    if (!c || !c->path || !*c->path)
        return pl_errf(err, PL_ERR_INVALID, "file exporter: path is required");
    file_exporter *f = calloc(1, sizeof(*f));
    if (!f)
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    f->id = strdup(settings->id ? settings->id : "file");
    f->path = strdup(c->path);
    f->proto = c->format && strcmp(c->format, "proto") == 0;
    f->max_bytes = c->rotation.max_megabytes > 0 ? (uint64_t)c->rotation.max_megabytes << 20 : 0;
    f->max_backups = (int)c->rotation.max_backups;
    f->max_days = c->rotation.max_days;
    f->zstd = c->compression && strcmp(c->compression, "zstd") == 0;
    pl_buf_init(&f->zbuf);
    f->stats = settings->stats;
    f->fd = -1;
    pl_buf_init(&f->buf);
    if (!f->id || !f->path) {
        free(f->id);
        free(f->path);
        free(f);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    *out_self = f;
    return PL_OK;
}

/* Opening happens at start, so that a bad path is a start-up error. */
static pl_status file_start(void *self, pl_err *err)
{
    file_exporter *f = self;
    return f->fd >= 0 ? PL_OK : file_open(f, err);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static char *backup_name(const char *path, int i)
{
    size_t n = strlen(path) + 16;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s.%d", path, i);
    return s;
}

/* Renames PATH -> PATH.1 after shifting older backups; reopens PATH. */
static int file_rotate(file_exporter *f)
{
    close(f->fd);
    f->fd = -1;
    if (f->max_backups <= 0) {
        unlink(f->path);
    } else {
        char *oldest = backup_name(f->path, f->max_backups);
        if (oldest)
            unlink(oldest);
        free(oldest);
        for (int i = f->max_backups - 1; i >= 1; i--) {
            char *from = backup_name(f->path, i), *to = backup_name(f->path, i + 1);
            if (from && to)
                rename(from, to); /* missing backups are fine */
            free(from);
            free(to);
        }
        char *first = backup_name(f->path, 1);
        if (!first || rename(f->path, first) != 0)
            pl_warn(f->id, "cannot rotate %s: %s", f->path, strerror(errno));
        free(first);
        /* max_days: rotated files last written longer ago are deleted */
        time_t cutoff = time(NULL) - (time_t)f->max_days * 86400;
        for (int i = 2; f->max_days > 0 && i <= f->max_backups; i++) {
            char *name = backup_name(f->path, i);
            struct stat st;
            if (name && stat(name, &st) == 0 && st.st_mtime < cutoff)
                unlink(name);
            free(name);
        }
    }
    pl_err err;
    if (file_open(f, &err) != PL_OK) {
        pl_error(f->id, "%s", err.msg);
        return -1;
    }
    return 0;
}

/* Encodes one batch as one record into f->buf. */
static bool encode_record(file_exporter *f, const pl_batch *batch)
{
    pl_buf *b = &f->buf;
    pl_buf_reset(b);
    if (f->proto) {
        static const uint8_t zero[4] = {0};
        pl_buf_append(b, zero, 4); /* length, filled in below */
        switch (batch->signal) {
        case PL_SIGNAL_TRACES:
            pl_otlp_encode_traces(&batch->data.traces, b);
            break;
        case PL_SIGNAL_PROFILES:
            pl_otlp_encode_profiles(&batch->data.profiles, b);
            break;
        default:
            pl_buf_append(b, batch->data.raw.ptr, batch->data.raw.len);
            break;
        }
        if (!pl_buf_ok(b) || b->len - 4 > UINT32_MAX)
            return false;
        uint32_t n = (uint32_t)(b->len - 4);
        b->data[0] = (uint8_t)(n >> 24);
        b->data[1] = (uint8_t)(n >> 16);
        b->data[2] = (uint8_t)(n >> 8);
        b->data[3] = (uint8_t)n;
        return true;
    }
    switch (batch->signal) {
    case PL_SIGNAL_TRACES:
        pl_otlp_json_encode_traces(&batch->data.traces, b);
        break;
    case PL_SIGNAL_PROFILES:
        pl_otlp_json_encode_profiles(&batch->data.profiles, b);
        break;
    default:
        pl_buf_printf(b, "{\"signal\":\"%s\",\"protobuf\":\"", pl_signal_name(batch->signal));
        pl_otlp_base64_encode(b, batch->data.raw.ptr, batch->data.raw.len);
        pl_buf_append_str(b, "\"}");
        break;
    }
    pl_buf_append_byte(b, '\n');
    return pl_buf_ok(b);
}

/* Items for the sent/failed counters: log records and data points are
 * counted inside the opaque requests. */
static size_t batch_items(const pl_batch *batch)
{
    size_t n = 0;
    if (batch->signal == PL_SIGNAL_LOGS &&
        pl_otlp_count_logs(batch->data.raw.ptr, batch->data.raw.len, &n, NULL) == PL_OK)
        return n;
    if (batch->signal == PL_SIGNAL_METRICS &&
        pl_otlp_count_metrics(batch->data.raw.ptr, batch->data.raw.len, &n, NULL) == PL_OK)
        return n;
    return pl_batch_items(batch);
}

static pl_status file_export(void *self, const pl_batch *batch)
{
    file_exporter *f = self;
    size_t items = batch_items(batch);
    if (!encode_record(f, batch)) {
        pl_buf_free(&f->buf);
        pl_stats_add(f->stats, batch->signal, PL_STAT_FAILED, items);
        pl_error(f->id, "out of memory encoding a %s batch", pl_signal_name(batch->signal));
        return PL_ERR_NOMEM;
    }
    const pl_buf *rec = &f->buf;
    if (f->zstd) {
        /* the payload without its framing: the proto length or the json
         * line's newline; the compressed bytes get a length of their own */
        const uint8_t *p = f->proto ? f->buf.data + 4 : f->buf.data;
        size_t n = f->proto ? f->buf.len - 4 : f->buf.len - 1;
        pl_err zerr;
        static const uint8_t zero[4] = {0};
        pl_buf_reset(&f->zbuf);
        pl_buf_append(&f->zbuf, zero, 4);
        if (pl_compress(PL_ENCODING_ZSTD, p, n, 0, &f->zbuf, &zerr) != PL_OK ||
            !pl_buf_ok(&f->zbuf) || f->zbuf.len - 4 > UINT32_MAX) {
            pl_stats_add(f->stats, batch->signal, PL_STAT_FAILED, items);
            pl_error(f->id, "cannot compress a %s batch", pl_signal_name(batch->signal));
            return PL_ERR_NOMEM;
        }
        uint32_t zn = (uint32_t)(f->zbuf.len - 4);
        f->zbuf.data[0] = (uint8_t)(zn >> 24);
        f->zbuf.data[1] = (uint8_t)(zn >> 16);
        f->zbuf.data[2] = (uint8_t)(zn >> 8);
        f->zbuf.data[3] = (uint8_t)zn;
        rec = &f->zbuf;
    }
    if (f->fd < 0) {
        pl_err err;
        if (file_open(f, &err) != PL_OK) {
            pl_stats_add(f->stats, batch->signal, PL_STAT_FAILED, items);
            pl_error(f->id, "%s", err.msg);
            return PL_ERR_INTERNAL;
        }
    }
    if (f->max_bytes && f->size > 0 && f->size + rec->len > f->max_bytes && file_rotate(f) != 0) {
        pl_stats_add(f->stats, batch->signal, PL_STAT_FAILED, items);
        return PL_ERR_INTERNAL;
    }
    if (write_all(f->fd, rec->data, rec->len) != 0) {
        pl_error(f->id, "writing %s: %s", f->path, strerror(errno));
        pl_stats_add(f->stats, batch->signal, PL_STAT_FAILED, items);
        return PL_ERR_INTERNAL;
    }
    f->size += rec->len;
    /* Keep memory bounded after an unusually large batch. */
    if (f->buf.cap > (4u << 20))
        pl_buf_free(&f->buf);
    if (f->zbuf.cap > (4u << 20))
        pl_buf_free(&f->zbuf);
    pl_stats_add(f->stats, batch->signal, PL_STAT_SENT, items);
    return PL_OK;
}

static void file_shutdown(void *self)
{
    (void)self;
}

static void file_destroy(void *self)
{
    file_exporter *f = self;
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    pl_buf_free(&f->buf);
    pl_buf_free(&f->zbuf);
    free(f->id);
    free(f->path);
    free(f);
}

const pl_component_type pl_exporter_file = {
    PL_COMPONENT_HEAD("file", PL_KIND_EXPORTER, PL_SIGNALS_ALL, &file_section),
    .description = "Appends export requests to a file: OTLP/JSON lines or length-prefixed "
                   "protobuf, with size-based rotation.",
    PL_COMPONENT_LIFECYCLE(file_create, file_start, file_shutdown, file_destroy),
    .export = file_export,
};
