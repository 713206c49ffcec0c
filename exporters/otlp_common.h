/*
 * otlp_common.h: what the two OTLP exporters share: `otlphttp` (OTLP/HTTP,
 * protobuf) and `otlp` (OTLP/gRPC). Both sit on the sending queue
 * (exporters/queue.h) and the HTTP client (net/http_client.h); they differ
 * only in how a payload becomes a request (URL, headers, gRPC framing) and
 * how an answer becomes OK / retryable / permanent, which each file does in
 * its `send` and `classify` functions.
 *
 * Payloads in the queue (and in its storage) are the request bodies ready
 * for the wire: compressed once, at export (gzip by default), behind one
 * byte that names the coding (see otlp_common.c), so retries cost no
 * compression and a stored payload does not depend on the exporter's
 * current settings. The top bit of that byte (PL_OTLP_PAYLOAD_JSON) marks
 * an OTLP/JSON body (otlphttp `encoding: json`), sent as application/json.
 */
#ifndef PL_EXPORTERS_OTLP_COMMON_H
#define PL_EXPORTERS_OTLP_COMMON_H

#include "core/component.h"
#include "exporters/queue.h"
#include "extensions/auth.h"
#include "net/compress.h"
#include "net/http_client.h"
#include "net/tls.h"

/* Both OTLP exporters' config: the otlphttp schema has every option, the
 * otlp (gRPC) one a part. */
#include "exporters/otlphttp.config.h"

/* The `otlp` exporter's config table (exporters/otlp.c). */
extern const pl_cfg_field pl_otlp_grpc_fields[];

/* Flag in a queued payload's first byte: the body is OTLP/JSON. */
#define PL_OTLP_PAYLOAD_JSON 0x80u
/* Flag: a tenant follows the first byte, as [length][bytes] (1..255 bytes),
 * before the body. Payloads stored without it have no tenant. */
#define PL_OTLP_PAYLOAD_TENANT 0x40u

/* One exporter instance (either kind). */
typedef struct pl_otlp_exporter pl_otlp_exporter;

/* Fills `result` from a finished HTTP exchange of `signal`. */
typedef void (*pl_otlp_classify_fn)(pl_otlp_exporter *x, pl_signal signal,
                                    const pl_http_client_result *res, pl_send_result *result);

struct pl_otlp_exporter {
    bool grpc;
    char *id;
    uv_loop_t *loop;
    pl_stats *stats;
    pl_http_client *client;
    pl_queue *queue;
    char *urls[PL_SIGNAL_COUNT];
    char **headers; /* "Name: value" lines, fixed for every request */
    size_t n_headers;
    pl_encoding compression;
    bool json; /* otlphttp: traces and profiles as OTLP/JSON (logs, metrics stay protobuf) */
    unsigned refused_codings; /* gRPC: bit per pl_encoding the server answered UNIMPLEMENTED to */
    uint64_t *downgrades;     /* counter compression_downgrades (NULL without stats) */
    uint64_t timeout_ms;
    pl_http_tls tls;
    char *auth_id;       /* auth extension (client side), looked up per request */
    const pl_host *host; /* where auth_id is looked up */
    char *tenant_header; /* forwarded tenant's header name, or NULL */
    pl_otlp_classify_fn classify;
    pl_buf scratch; /* encoding buffer reused across exports on the loop */
    /* Set by the loadbalancing exporter on its members: sees every send's
     * result before the queue does, with the queued payload (coding byte
     * first). It may hand the payload to other members and then set the
     * outcome to OK, so that a failed member's data moves on instead of
     * waiting for it. NULL for a plain exporter. */
    void (*observe)(void *arg, pl_signal signal, const uint8_t *payload, size_t len,
                    pl_send_result *result);
    void *observe_arg;
};

/* Creates the shared part: the queue, the HTTP client, TLS settings, the
 * configured headers plus `extra_headers` (name, value pairs ending with
 * NULL; the coding header is added per request). URLs are filled in by the
 * caller afterwards. */
pl_status pl_otlp_exporter_create(const pl_create_settings *settings,
                                  const pl_otlp_exporter_config *cfg, bool grpc,
                                  const char *const *extra_headers, pl_otlp_classify_fn classify,
                                  pl_otlp_exporter **out, pl_err *err);

/* How each exporter reads an answer (exposed for the fuzz target). */
void pl_otlphttp_classify(pl_otlp_exporter *x, pl_signal signal, const pl_http_client_result *res,
                          pl_send_result *result);
void pl_otlp_grpc_classify(pl_otlp_exporter *x, pl_signal signal, const pl_http_client_result *res,
                           pl_send_result *result);

/* Hooks shared by both descriptors. */
pl_status pl_otlp_exporter_start(void *self, pl_err *err);
pl_status pl_otlp_exporter_export(void *self, const pl_batch *batch);
void pl_otlp_exporter_shutdown(void *self);
size_t pl_otlp_exporter_pending(void *self);
struct pl_queue *pl_otlp_exporter_stored_queue(void *self);
void pl_otlp_exporter_destroy(void *self);

/* gRPC: true when an answer says the server cannot decode `coding`
 * (UNIMPLEMENTED with a grpc-accept-encoding that lacks it, or a message
 * naming it); *fallback is then gzip or identity. Exposed for the fuzz
 * target and tests. */
bool pl_otlp_grpc_coding_refused(const pl_http_client_result *res, pl_encoding coding,
                                 pl_encoding *fallback);

/* Parses the `compression` setting (NULL / "" = gzip). 0 or -1. */
int pl_otlp_compression_parse(const char *text, pl_encoding *out);

/* True when a response's Content-Type says protobuf (or says nothing). */
bool pl_otlp_is_protobuf_response(const pl_http_client_result *res);

/* gRPC helpers, exposed for tests. */
bool pl_grpc_code_retryable(int code, bool has_retry_info);
int pl_grpc_code_from_http(int http_status);
/* Base64 (standard or URL alphabet, padded or not) into a malloc'd buffer;
 * NULL on bad input or OOM. */
uint8_t *pl_otlp_base64_decode(const char *in, size_t len, size_t *out_len);
/* Percent-decoding of grpc-message into out (size >= 1); bad escapes are
 * kept as they are. */
void pl_grpc_message_decode(const char *in, size_t len, char *out, size_t out_size);

#endif
