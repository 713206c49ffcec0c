/*
 * fuzz_queue_storage.c: rows read back from a persistent sending queue's
 * SQLite file at start: the queue's own rows (signal, raw size, zstd or raw
 * payload) and the write-ahead log's rows (metadata and an OTLP batch),
 * both as a damaged or hostile file could hold them.
 *
 * Input: records of [kind u8][signal u8][raw_size u32 LE][stored_as u8]
 * [len u16 LE][len bytes]. kind even: a pl_queue row; odd: a pl_wal row.
 * The file is written with those rows, then a queue opens it, starts (its
 * rows are queued again and sent to a sender that accepts them), and a
 * write-ahead log on it replays its rows into a consumer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <unistd.h>
#include <uv.h>

#include "core/stats.h"
#include "exporters/queue.h"
#include "exporters/queue_wal.h"
#include "pipeline/consumer.h"

static pl_status encode(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items, pl_err *err)
{
    (void)arg, (void)batch, (void)out, (void)err;
    *items = 0;
    return PL_OK;
}

static size_t sent_bytes;

static void send_fn(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                    pl_queue_send *send)
{
    (void)arg, (void)signal;
    for (size_t i = 0; i < len; i++)
        sent_bytes += payload[i]; /* touch every byte */
    pl_send_result r;
    pl_send_result_set(&r, PL_SEND_OK, "ok");
    pl_queue_send_done(send, &r);
}

static pl_status capture(void *arg, pl_batch *batch)
{
    (void)arg;
    sent_bytes += pl_batch_items(batch);
    pl_batch_free(batch);
    return PL_OK;
}

static void write_rows(const char *path, const uint8_t *data, size_t size)
{
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        abort();
    sqlite3_exec(
        db,
        "CREATE TABLE pl_queue(id INTEGER PRIMARY KEY AUTOINCREMENT, exporter TEXT NOT "
        "NULL, signal INTEGER NOT NULL, items INTEGER NOT NULL, raw_size INTEGER NOT NULL,"
        " created_unix_nano INTEGER NOT NULL, payload BLOB NOT NULL, stored_as INTEGER NOT "
        "NULL DEFAULT 0);"
        "CREATE TABLE pl_wal(seq INTEGER PRIMARY KEY, pipeline TEXT NOT NULL, signal "
        "INTEGER NOT NULL, received_unix_nano INTEGER NOT NULL, data BLOB NOT NULL);",
        NULL, NULL, NULL);
    sqlite3_stmt *q, *w;
    sqlite3_prepare_v2(db,
                       "INSERT INTO pl_queue(exporter, signal, items, raw_size, created_unix_nano,"
                       " payload, stored_as) VALUES('fuzz', ?1, 1, ?2, 0, ?3, ?4)",
                       -1, &q, NULL);
    sqlite3_prepare_v2(db,
                       "INSERT INTO pl_wal(pipeline, signal, received_unix_nano, data)"
                       " VALUES('p', ?1, 0, ?2)",
                       -1, &w, NULL);
    size_t off = 0;
    for (int n = 0; n < 16 && size - off >= 9; n++) {
        const uint8_t *h = data + off;
        uint32_t raw =
            (uint32_t)h[2] | (uint32_t)h[3] << 8 | (uint32_t)h[4] << 16 | (uint32_t)h[5] << 24;
        size_t len = (size_t)h[7] | (size_t)h[8] << 8;
        off += 9;
        if (len > size - off)
            len = size - off;
        sqlite3_stmt *st = (h[0] & 1) ? w : q;
        sqlite3_bind_int(st, 1, h[1] % 6 == 5 ? -1 : h[1] % 6);
        if (st == q) {
            sqlite3_bind_int64(st, 2,
                               (h[6] & 0x80) ? (sqlite3_int64)raw : (sqlite3_int64)(raw & 0xffff));
            sqlite3_bind_blob(st, 3, data + off, (int)len, SQLITE_STATIC);
            sqlite3_bind_int(st, 4, h[6] & 3);
        } else {
            sqlite3_bind_blob(st, 2, data + off, (int)len, SQLITE_STATIC);
        }
        sqlite3_step(st);
        sqlite3_reset(st);
        off += len;
    }
    sqlite3_finalize(q);
    sqlite3_finalize(w);
    sqlite3_close(db);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[128], extra[160];
    /* tmpfs when there is one: SQLite's syncs then cost nothing. */
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof(path), "%s/proflink-fuzz-queue-%d.db", dir, (int)getpid());
    unlink(path);
    snprintf(extra, sizeof(extra), "%s-wal", path);
    unlink(extra);
    snprintf(extra, sizeof(extra), "%s-shm", path);
    unlink(extra);
    write_rows(path, data, size);

    uv_loop_t loop;
    uv_loop_init(&loop);
    pl_stats *stats = pl_stats_new("fuzz", PL_KIND_EXPORTER);
    pl_create_settings settings = {0};
    settings.id = "fuzz";
    settings.loop = &loop;
    settings.stats = stats;
    pl_sending_queue_config qc = {0};
    qc.enabled = true;
    qc.num_consumers = 1;
    qc.queue_size = 100;
    qc.storage = path;
    pl_retry_config rc = {0};
    rc.initial_interval = 1000000;
    rc.max_interval = 1000000;
    rc.multiplier = 1;
    pl_queue_sender sender = {encode, send_fn, NULL, (data[0] & 2) != 0};
    pl_err err = {{0}};
    pl_queue *queue = pl_queue_new(&settings, &qc, &rc, &sender, &err);
    if (queue) {
        pl_consumer next;
        pl_consumer_init_func(&next, capture, NULL);
        for (pl_signal s = 0; s < PL_SIGNAL_COUNT; s++) {
            pl_queue_wal *w = pl_queue_wal_open(queue, "p", s, &next, &err);
            if (w) {
                pl_queue_wal_replay(w);
                pl_queue_wal_close(w);
            }
        }
        if (pl_queue_start(queue, &err) == PL_OK)
            for (int i = 0; i < 64 && pl_queue_pending(queue); i++)
                uv_run(&loop, UV_RUN_NOWAIT);
        pl_queue_shutdown(queue);
        pl_queue_destroy(queue);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    pl_stats_free(stats);
    unlink(path);
    return 0;
}
