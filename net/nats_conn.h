/*
 * nats_conn.h: the NATS connection both `nats` components open (libnats,
 * the NATS C client from Debian), and the checks of their shared keys.
 *
 * Threads. libnats reads and writes its socket on threads of its own and
 * runs its callbacks there. proflink does not hand it the pipeline loop
 * through libnats' libuv adapter: with the adapter the socket is read on the
 * loop, so the JetStream calls that wait for an answer (a publish waiting
 * for the stream's acknowledgement, a pull fetch, creating a consumer) would
 * wait on the very thread that has to read the answer, and the adapter keeps
 * its loop in a process-wide thread-local key. Instead each component runs
 * its blocking calls on threads it owns and hands results to the pipeline
 * loop through a mutex-guarded list and a uv_async (exporters/nats.c,
 * receivers/nats.c say exactly what crosses). Pipeline code runs on the
 * loop only.
 *
 * The connection retries its first connect and reconnects forever (every
 * 250 ms, to any server of the cluster the server told it about), so a
 * start while NATS is down, or a node that dies, is a wait, not an error:
 * what was not acknowledged meanwhile is retried by the caller.
 */
#ifndef PL_NET_NATS_CONN_H
#define PL_NET_NATS_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <nats/nats.h>
#include <uv.h>

#include "core/component.h"
#include "core/stats.h"
#include "net/tls.h"
#include "net/nats.config.h"

/* The auth sections the components' tables nest (net/nats.config.yaml),
 * and the TLS section of the OTLP exporters. */
extern const pl_cfg_section pl_nats_token_section;
extern const pl_cfg_section pl_nats_user_section;
extern const pl_cfg_section pl_nats_nkey_section;
extern const pl_cfg_section pl_nats_nkey_jwt_section;
extern const pl_cfg_section pl_nats_nkey_user_file_section;

/* A component's own copy of the connection keys both components share
 * (its config is not kept after create). */
typedef struct pl_nats_conn_settings {
    char *endpoint, *domain; /* domain: the JetStream domain, or NULL */
    pl_nats_token_config token;
    pl_nats_user_config user;
    pl_nats_nkey_user_file_config creds;
    pl_otlp_tls_config tls; /* insecure_skip_verify and the three files */
} pl_nats_conn_settings;

/* Copies the keys (empty strings become NULL). False when out of memory;
 * pl_nats_settings_free frees what was copied either way. */
bool pl_nats_settings_copy(pl_nats_conn_settings *dst, const char *endpoint, const char *domain,
                           const pl_nats_token_config *token, const pl_nats_user_config *user,
                           const pl_nats_nkey_user_file_config *creds,
                           const pl_otlp_tls_config *tls);
void pl_nats_settings_free(pl_nats_conn_settings *s);

/* Connects (or starts connecting in the background: a server that is not
 * up yet is not an error) and makes the JetStream context in `s->domain`;
 * `wait_ms` > 0 sets how long its calls wait for an answer. `name` is the
 * connection name the server shows (the component id; kept by the caller
 * while connected). PL_ERR_INVALID for settings libnats refuses (a bad
 * URL, an unreadable certificate or credentials file). */
pl_status pl_nats_connect_js(const char *name, const pl_nats_conn_settings *s, int64_t wait_ms,
                             natsConnection **nc, jsCtx **js, pl_err *err);

/* What both nats components hold alike: their id, loop and counters,
 * their copy of the connection keys, the connection and its JetStream
 * context, and the lock, condition and loop wake-up their threads share
 * with the loop. */
typedef struct pl_nats_client {
    char *id;
    uv_loop_t *loop;
    pl_stats *stats;
    pl_nats_conn_settings conn;
    natsConnection *nc;
    jsCtx *js;
    uv_mutex_t lock;
    uv_cond_t wake;
    uv_async_t async;
    bool async_ready;
} pl_nats_client;

/* Fills `cl` (zeroed) from the create settings and the shared keys.
 * PL_ERR_INTERNAL when the lock or condition cannot be made (nothing to
 * release: free the owner); PL_ERR_NOMEM when a copy failed (release it). */
pl_status pl_nats_client_init(pl_nats_client *cl, const pl_create_settings *settings,
                              const char *endpoint, const char *domain,
                              const pl_nats_token_config *token, const pl_nats_user_config *user,
                              const pl_nats_nkey_user_file_config *creds,
                              const pl_otlp_tls_config *tls, pl_err *err);

/* Makes the loop wake-up: `cb` runs on the loop with handle data `owner`. */
pl_status pl_nats_client_async(pl_nats_client *cl, void *owner, uv_async_cb cb, pl_err *err);

/* The end of a component's destroy, once its threads have stopped: frees
 * the client's parts, then `owner` (malloc'd; after the loop has closed the
 * wake-up when there is one). */
void pl_nats_client_release(pl_nats_client *cl, void *owner);

/* Closes and frees a connection (NULL is fine). Blocking calls of other
 * threads on it return NATS_CONNECTION_CLOSED. */
void pl_nats_close(natsConnection *nc);

/* The checks of the `nats_connection` keys, for the validate hooks: the
 * endpoint's scheme, complete auth sections, the methods proflink does not
 * support, one method at most. Returns the number of errors reported. */
int pl_nats_validate_connection(pl_cfg_ctx *ctx, const char *endpoint,
                                const pl_nats_token_config *token, const pl_nats_user_config *user,
                                const pl_nats_nkey_config *nkey,
                                const pl_nats_nkey_jwt_config *nkey_jwt,
                                const pl_nats_nkey_user_file_config *creds);

/* The subject of a signal when none is configured, as the Collector's
 * NATS components name them: otel_spans, otel_profiles, otel_logs,
 * otel_metrics. */
const char *pl_nats_default_subject(pl_signal signal);

/* True for a subject NATS accepts: tokens of printable characters without
 * spaces, separated by single dots; with `wildcards`, a token may be `*`
 * and the last one `>`. */
bool pl_nats_subject_valid(const char *subject, bool wildcards);

/* True for a consumer (durable) or stream name: no dots, spaces, wildcards
 * or path separators. */
bool pl_nats_name_valid(const char *name);

/* "otlp_proto" -> false, "otlp_json" -> true; -1 for anything else, 0 on
 * success. NULL or "" is otlp_proto. */
int pl_nats_marshaler_parse(const char *text, bool *json);

#endif
