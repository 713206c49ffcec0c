/*
 * queue_wal.h: a write-ahead log at the entry of a pipeline whose exporter
 * keeps a persistent sending queue.
 *
 * Processors in front of the queue hold data in memory (batch waits for its
 * timeout, correlation for its window) after the receiver has answered 200.
 * Without this log a crash then loses data the client was told is safe. The
 * log lives in the persistent queue's own SQLite file (table pl_wal): every
 * batch entering the pipeline is written there, with synchronous=FULL (the
 * commit waits for the disk), before the pipeline sees it and so before the
 * answer. Its row is deleted in the same transaction that INSERTs the queue
 * row holding its data, so after a crash an item is either still in the log
 * (replayed at start) or in the queue (sent from there), never both and never
 * neither: exactly once.
 *
 * Batches carry the entries they came from (pl_batch.wal, core/model.h);
 * processors that build new batches (batch) make them inherit the tags. An
 * entry whose data spread over several queued batches (a split by
 * send_batch_max_size) is deleted with the last of them; a crash between
 * those commits replays the whole entry, so its earlier parts arrive twice
 * (at least once). With several persistent exporters in one pipeline the log
 * lives in the first one's file; the others are at least once. A batch the
 * queue refuses (full, shutting down) keeps its entry for the next start.
 * The sqlite store's copy of a batch holds no entry (store/sqlite.c): the
 * queue's commit settles it, so the store is at most once across a crash
 * for the moments between its copy and its commit.
 *
 * What a restart can still send twice (all of it after kill -9 or a power
 * loss, none after a SIGTERM that finishes its drain):
 *   - a queued batch the backend accepted whose row was not yet deleted
 *     (deletes are committed once per loop iteration): the classic window
 *     between a send and its bookkeeping, at most the batches in flight;
 *   - the earlier parts of an entry split across queued batches (above);
 *   - an entry whose DELETE failed (disk full, I/O error) and had not yet
 *     been retried: failed deletes are kept in memory and retried at most
 *     once a second and at close, so a clean stop after the disk recovers
 *     leaves none behind.
 * An entry is deleted only once its data is committed to the queue's table,
 * dropped on purpose, or taken into the queue's memory by an export whose
 * COMMIT failed (disk full): that batch is sent from memory, and a crash
 * before the send loses it (the failed commit is logged). Keeping its entry
 * instead would send it twice after the restart.
 *
 * Threads: the log and its connection belong to the pipeline loop (the
 * thread that opened it). Batches carrying its tags may be freed on any
 * thread; such a release is queued under a mutex and applied on the loop
 * (uv_async), never on the freeing thread (queue_wal.c, "Threads").
 */
#ifndef PL_QUEUE_WAL_H
#define PL_QUEUE_WAL_H

#include <sqlite3.h>
#include <uv.h>

#include "core/component.h"
#include "exporters/queue.h"

typedef struct pl_queue_wal pl_queue_wal;

/* The database handle and file of a persistent queue (pl_queue_stored). */
sqlite3 *pl_queue_sqlite(pl_queue *queue, const char **path);
/* The loop the queue runs on: the thread that owns its connection. */
uv_loop_t *pl_queue_loop(pl_queue *queue);

/* Opens the log of pipeline `pipeline` in the queue's file; batches go on
 * to `next`. NULL + err on error. */
pl_queue_wal *pl_queue_wal_open(pl_queue *queue, const char *pipeline, pl_signal signal,
                                pl_consumer *next, pl_err *err);

/* A reload (pl_graph_swap) moves the log of a pipeline whose persistent
 * queue stays: on() tells whether `wal` is the log of `pipeline` in
 * `queue`'s file; retarget() makes it feed the new graph's chain. Its rows
 * and open entries go on as they were (no replay). */
bool pl_queue_wal_on(const pl_queue_wal *wal, pl_queue *queue, const char *pipeline);
void pl_queue_wal_retarget(pl_queue_wal *wal, pl_consumer *next);

/* The consumer to put at the pipeline's entry. */
pl_consumer *pl_queue_wal_consumer(pl_queue_wal *wal);

/* Sends what the log still holds from before a restart (call once, after the
 * pipeline started). Returns the number of entries replayed. */
size_t pl_queue_wal_replay(pl_queue_wal *wal);

/* Closes the log (before its queue is destroyed); later releases of tags it
 * issued are ignored. */
void pl_queue_wal_close(pl_queue_wal *wal);

/* Entries the log holds (tests, telemetry). */
size_t pl_queue_wal_rows(pl_queue_wal *wal);

/* Used by queue.c inside its insert transaction: deletes the log rows of
 * `batch`'s entries for which this batch is the last holder. Then, after
 * COMMIT, pl_queue_wal_tx_done(db, batch, committed). */
void pl_queue_wal_tx_delete(sqlite3 *db, const pl_batch *batch);
void pl_queue_wal_tx_done(sqlite3 *db, const pl_batch *batch, bool committed);

#endif
