/*
 * queue.h: the sending queue every network exporter sits on (otlp,
 * otlphttp, pyroscope): bounded buffering, N concurrent senders, retries
 * with exponential backoff and jitter, and an optional persistent mode in
 * SQLite so that neither a backend outage nor a restart of proflink loses
 * acknowledged data.
 *
 * An exporter supplies two functions (pl_queue_sender):
 *   encode(batch) -> payload bytes + item count   (runs inside export())
 *   send(payload) -> later, pl_queue_send_done(result)
 * and classifies each answer as OK, RETRYABLE (+ the delay the server asked
 * for, if any) or PERMANENT. The queue does everything else:
 *
 *   export(batch) --encode--> entry --(storage: INSERT+COMMIT)--> FIFO
 *        \-- full: PL_ERR_REFUSED, the receiver answers 503/UNAVAILABLE
 *   FIFO --> one of num_consumers slots --send--> done(result)
 *        OK         -> counted sent, (storage: DELETE), next entry
 *        PERMANENT  -> counted failed and logged, never retried
 *        RETRYABLE  -> the slot waits (backoff, or the server's delay if
 *                      longer) and sends the same entry again, until
 *                      max_elapsed_time, then counted failed and logged
 *
 * A slot keeps its entry while it waits, as the Collector's retry sender
 * does: when the backend is down at most num_consumers requests are being
 * retried, the rest wait in order, and the queue fills up, which is what
 * pushes back on the receivers (nothing is dropped silently).
 *
 * Bounds: queue_size (batches), max_items and max_bytes (encoded payload
 * bytes) count everything accepted and not finished, including what is in
 * flight or waiting for a retry, so they bound memory as well as disk.
 *
 * Persistent mode (sending_queue.storage): the payload is compressed with
 * zstd (unless the exporter says it is compressed already: the OTLP
 * exporters compress once, at export, with the wire coding, and that is what
 * is stored) and INSERTed into a SQLite database in WAL mode, and the commit has
 * happened before export() returns PL_OK, i.e. before the receiver
 * acknowledges the data. The row is deleted only after the backend accepted
 * it (or the queue gave up on it). On start the rows left by an earlier run
 * are queued again (their payloads are read back lazily, one at a time, as a
 * slot takes them). So a kill -9 at any point loses nothing that was
 * acknowledged, and what gets sent twice is at most what was in flight.
 * Commits use synchronous=NORMAL by default: in WAL mode a committed
 * transaction then survives the death of the process (the data is in the
 * operating system's cache) but not a power loss or kernel crash; `fsync:
 * true` makes every commit wait for the disk as well (synchronous=FULL). The
 * SQLite work runs on the loop thread: one INSERT (one commit) per accepted
 * batch, and the DELETEs of the batches sent during one loop iteration in
 * one commit; each commit is a write to the WAL file (tens of microseconds
 * without fsync).
 *
 * Encoding on the workers. With service.workers > 1, an in-memory queue
 * whose sender says encode_anywhere does not encode inside export(): it
 * admits the batch against queue_size and max_items (the batch counts as
 * one of `batches` from then on), keeps a reference on it (pl_batch_ref)
 * and hands encode() to a worker thread (pl_host_submit). export()
 * returns PL_OK at once, which is what an in-memory queue's PL_OK always
 * meant: the data is the queue's. When the encoding is done the loop puts
 * the payload into the FIFO, in the order export() was called (a payload
 * finished early waits for those admitted before it), so the order of
 * sends is the same as without workers. max_bytes is checked at admission
 * against the bytes already encoded; what is being encoded is counted
 * when done (at most queue_size batches can be in encoding). An encoding
 * that fails after admission (out of memory, a gRPC message over 4 GiB) is
 * counted as failed and logged, like a send that can never succeed.
 * pending() counts batches in encoding, so a shutdown waits for them. With
 * storage, export() still encodes on the loop: its PL_OK promises a
 * commit, which needs the payload.
 */
#ifndef PL_EXPORTERS_QUEUE_H
#define PL_EXPORTERS_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/component.h"

/* ---- configuration ------------------------------------------------------ */

#include "exporters/queue.config.h"
#include "net/retry.h"

/* The table to embed in an exporter's config as a PL_CFG_SECTION field
 * named "sending_queue" (and "retry_on_failure": pl_retry_section,
 * net/retry.h). */
extern const pl_cfg_section pl_sending_queue_section;

/* The sending_queue settings inside an exporter's decoded config `cfg`
 * (described by `section`), found through the tables; NULL if it has none. */
const pl_sending_queue_config *pl_queue_config_of(const pl_cfg_section *section, const void *cfg);

/* ---- the exporter's side ------------------------------------------------ */

typedef enum pl_send_outcome {
    PL_SEND_OK = 0,    /* accepted (possibly partially: see rejected_items) */
    PL_SEND_RETRYABLE, /* try again later (429/502/503/504, UNAVAILABLE, no connection, ...) */
    PL_SEND_PERMANENT, /* never retry (400, INVALID_ARGUMENT, ...) */
} pl_send_outcome;

typedef struct pl_send_result {
    pl_send_outcome outcome;
    /* RETRYABLE: the delay the server asked for (Retry-After, RetryInfo);
     * 0 = none, use the backoff. The queue waits the longer of the two. */
    int64_t retry_after_ns;
    /* OK with a partial success: items the backend refused. They are
     * counted as failed and logged, and never retried. */
    uint64_t rejected_items;
    char message[256]; /* why, for the logs */
} pl_send_result;

/* One send in progress (opaque); completed with pl_queue_send_done. */
typedef struct pl_queue_send pl_queue_send;

typedef struct pl_queue_sender {
    /* Encodes a borrowed batch into the bytes to send (and to persist):
     * appends them to `out`, sets *items (what the stats count). Returns
     * PL_OK or an error for export() to return (the batch is then not
     * queued). */
    pl_status (*encode)(void *arg, const pl_batch *batch, pl_buf *out, uint64_t *items,
                        pl_err *err);
    /* Sends one payload of `signal`. `payload` stays valid until
     * pl_queue_send_done(send, ...) is called, which must happen exactly
     * once, either later on the loop or from inside this call. */
    void (*send)(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                 pl_queue_send *send);
    void *arg;
    /* The payloads encode() makes are compressed already (e.g. the gzip body
     * that goes on the wire): the storage keeps them as they are instead of
     * compressing them a second time with zstd. */
    bool payload_compressed;
    /* encode() may run on a worker thread (pipeline/workers.h), at the same
     * time as the loop runs this exporter: it reads only settings that do
     * not change, or reads them atomically, and keeps no scratch state in
     * `arg`. See "Encoding on the workers" below. */
    bool encode_anywhere;
} pl_queue_sender;

/* Reports the outcome of a send. `result` is copied. */
void pl_queue_send_done(pl_queue_send *send, const pl_send_result *result);

/* Helpers to fill a result. */
void pl_send_result_set(pl_send_result *result, pl_send_outcome outcome, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- the queue ---------------------------------------------------------- */

typedef struct pl_queue pl_queue;

/* Creates a queue for exporter `settings->id` (settings borrowed; configs
 * copied). Opens (and creates) the storage database if one is configured,
 * so a bad path is reported at startup. NULL with err set on failure. */
pl_queue *pl_queue_new(const pl_create_settings *settings, const pl_sending_queue_config *qcfg,
                       const pl_retry_config *rcfg, const pl_queue_sender *sender, pl_err *err);

/* Queues what an earlier run left in the storage and starts sending. */
pl_status pl_queue_start(pl_queue *queue, pl_err *err);

/* Encodes `batch` (borrowed) and queues it. PL_OK means the data is the
 * queue's responsibility (and, with storage, committed to disk).
 * PL_ERR_REFUSED: the queue is full or shutting down (retry later). Other
 * errors come from encode. */
pl_status pl_queue_export(pl_queue *queue, const pl_batch *batch);

/* Queues an already encoded payload (copied). Same answers as export. */
/* Around the pl_queue_push calls of one batch (pl_queue_export does it
 * itself): with storage, the rows and the deletion of the write-ahead log
 * entries the batch completes commit together (exporters/queue_wal.h).
 * tx_end returns `st`; a refusal rolls the rows back. */
void pl_queue_tx_begin(pl_queue *queue, const pl_batch *batch);
pl_status pl_queue_tx_end(pl_queue *queue, const pl_batch *batch, pl_status st);

pl_status pl_queue_push(pl_queue *queue, pl_signal signal, const uint8_t *payload, size_t len,
                        uint64_t items);

/* Stops accepting data. In memory mode the queue keeps sending (and
 * retrying) until it is empty or destroyed; with storage only the sends in
 * flight are finished, the rest stays on disk for the next start. */
void pl_queue_shutdown(pl_queue *queue);

/* What the host waits for after shutdown: batches not finished (memory
 * mode) or sends in flight (storage mode). */
size_t pl_queue_pending(const pl_queue *queue);
/* `queue` when it keeps its batches on disk (sending_queue.storage), else
 * NULL: what an exporter's stored_queue hook answers (core/component.h). */
pl_queue *pl_queue_stored(pl_queue *queue);

/* Frees the queue. Batches still in memory and not persisted are counted as
 * dropped and logged. A send still in flight is orphaned: its
 * pl_queue_send_done still has to be called (it then only frees it), so an
 * exporter should cancel its requests first (closing its HTTP client does).
 * Memory is released once libuv has closed the queue's timers (run the
 * loop afterwards). */
void pl_queue_destroy(pl_queue *queue);

/* Introspection for tests and telemetry. */
typedef struct pl_queue_info {
    size_t batches; /* not finished (queued + in flight + waiting to retry) */
    uint64_t items;
    uint64_t bytes;
    size_t in_flight;
    size_t stored; /* rows in the storage database for this exporter */
} pl_queue_info;
void pl_queue_get_info(const pl_queue *queue, pl_queue_info *info);

/* The storage file a config resolves to for exporter `id` (malloc'd; NULL
 * when storage is not set). A directory gets "<dir>/<id>.queue.db" with the
 * id's '/' replaced by '_'. */
char *pl_queue_storage_file(const char *storage, const char *id);

#endif
