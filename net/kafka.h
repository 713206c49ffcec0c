/*
 * kafka.h: what the kafka exporter and receiver share on top of librdkafka:
 * building a client configuration from the Collector's keys (brokers,
 * client_id, tls, auth.sasl), the partitioner the Collector uses by default
 * for keyed records, and the bridge that brings librdkafka's results onto
 * the pipeline loop.
 *
 * Threads. librdkafka runs threads of its own (one per broker, plus the
 * main one). proflink code never runs on them except for two pure
 * functions: the partitioner (it only hashes the key) and the log callback
 * (pl_log may be called from any thread). Everything else (delivery
 * reports, consumed records, rebalances, commits, errors) is put on a
 * librdkafka queue and served on the loop: librdkafka writes a byte to a
 * pipe when the queue turns non-empty (rd_kafka_queue_io_event_enable), a
 * uv_poll on the pipe's read end wakes the loop, and the component's
 * `serve` callback polls the queue there, where it may call pipeline code.
 * A timer polls as well, as a safety net and for the work the component
 * defers (a partition paused by back-pressure).
 */
#ifndef PL_NET_KAFKA_H
#define PL_NET_KAFKA_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/component.h"

#include "net/kafka.config.h"
#include "net/tls.config.h"

/* The `auth` section both components nest (auth.sasl). */
extern const pl_cfg_section pl_kafka_auth_section;
extern const pl_cfg_section pl_kafka_sasl_section;

/* The connection settings both components take. Borrowed. */
typedef struct pl_kafka_conn {
    const char *id; /* component id, for logs */
    const pl_strlist *brokers;
    const char *client_id;
    /* TLS: on when ca_file, cert_file or insecure_skip_verify is set */
    const pl_otlp_tls_config *tls;
    const pl_kafka_auth_config *auth;
} pl_kafka_conn;

/* A new client configuration with the connection settings and proflink's
 * log callback. NULL with err set when librdkafka refuses a setting (e.g. a
 * SASL mechanism it was built without). */
rd_kafka_conf_t *pl_kafka_conf_new(const pl_kafka_conn *conn, pl_err *err);
/* rd_kafka_conf_set with proflink's error convention: PL_OK or
 * PL_ERR_INVALID with err naming the key. */
pl_status pl_kafka_conf_set(rd_kafka_conf_t *conf, const char *key, const char *value, pl_err *err);

/* The Collector's default partition of a keyed record (franz-go's
 * SaramaCompatHasher over 32-bit FNV-1a, as sarama's hash partitioner):
 * the hash read as a signed 32-bit number, modulo n, made non-negative. */
uint32_t pl_kafka_fnv1a32(const void *key, size_t len);
int32_t pl_kafka_sarama_partition(const void *key, size_t len, int32_t partitions);
/* The same as a librdkafka partitioner callback (rd_kafka_topic_conf_set_
 * partitioner_cb); records without a key go to a random available
 * partition. Runs on librdkafka's threads: pure. */
int32_t pl_kafka_partitioner(const rd_kafka_topic_t *rkt, const void *key, size_t keylen,
                             int32_t partitions, void *topic_opaque, void *msg_opaque);

/* ---- the loop bridge ---------------------------------------------------- */

typedef struct pl_kafka_waker pl_kafka_waker;
/* Called on the loop when the queue may hold events and every
 * `interval_ms` (timer). */
typedef void (*pl_kafka_serve_fn)(void *arg);

/* Wakes `serve` on `loop` when `queue` (borrowed; keep it alive until the
 * waker is closed) turns non-empty. NULL with err set on failure. */
pl_kafka_waker *pl_kafka_waker_new(uv_loop_t *loop, rd_kafka_queue_t *queue, uint64_t interval_ms,
                                   pl_kafka_serve_fn serve, void *arg, pl_err *err);
/* Asks for another `serve` call soon (the component stopped polling before
 * the queue was empty). */
void pl_kafka_waker_again(pl_kafka_waker *w);
/* Stops the waker; its memory is released once libuv closed its handles
 * (run the loop afterwards). Disables the queue's io events first. */
void pl_kafka_waker_close(pl_kafka_waker *w);

#endif
