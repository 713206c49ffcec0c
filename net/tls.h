/*
 * tls.h: server-side TLS for every proflink listener (OpenSSL).
 *
 * Configured with the Collector's `tls:` block on a receiver or extension:
 *
 *   tls:
 *     cert_file: server.pem        # certificate chain, PEM
 *     key_file: server.key
 *     client_ca_file: clients.pem  # mutual TLS: a client certificate signed
 *                                  # by one of these is required
 *     min_version: "1.2"           # "1.2" (default) or "1.3"
 *     reload_interval: 1h          # re-read the files when they changed
 *
 * A pl_tls_server is one listener's context. It holds the current SSL_CTX;
 * reloading builds a new one from the files and swaps it in only if it
 * loads (a half-written certificate keeps the old one serving). Existing
 * connections keep the context they started with. SIGHUP reloads every live
 * context (pl_tls_reload_all).
 *
 * A pl_tls_conn is one connection's TLS state, driven through memory BIOs:
 * the HTTP server feeds it the bytes read from the socket and writes what it
 * produces, so TLS fits the server's "bytes in, bytes out" design without
 * OpenSSL touching the socket. ALPN picks "h2" or "http/1.1" from what the
 * listener allows; gRPC clients require "h2".
 */
#ifndef PL_NET_TLS_H
#define PL_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/component.h"
#include "core/status.h"

#include "net/tls.config.h"

/* The `tls:` table shared by every listener's config. */
extern const pl_cfg_section pl_tls_server_section;
/* The `tls:` table of clients (exporters, the kafka and nats connections):
 * ca_file, cert_file, key_file, insecure_skip_verify (pl_otlp_tls_config). */
extern const pl_cfg_section pl_otlp_tls_section;

/* True when the block asks for TLS (cert_file set). */
bool pl_tls_server_config_enabled(const pl_tls_server_config *cfg);

typedef struct pl_tls_server pl_tls_server;

/* Loads the certificate, key and client CAs. `h2` / `http1`: the ALPN
 * protocols offered. NULL with err set ("tls.cert_file: ...: No such file"). */
pl_tls_server *pl_tls_server_new(const pl_tls_server_config *cfg, bool h2, bool http1,
                                 const char *name, pl_err *err);
/* Re-reads the files if any changed since the last load (force: always).
 * On failure the old context stays and err says why; returns 1 reloaded,
 * 0 unchanged, -1 failed. */
int pl_tls_server_reload(pl_tls_server *t, bool force, pl_err *err);
uint64_t pl_tls_server_reload_interval_ms(const pl_tls_server *t);
bool pl_tls_server_mutual(const pl_tls_server *t);
void pl_tls_server_free(pl_tls_server *t);
/* SIGHUP: forces a reload of every live context (failures are logged). */
void pl_tls_reload_all(void);

typedef struct pl_tls_conn pl_tls_conn;

pl_tls_conn *pl_tls_conn_new(pl_tls_server *t);
void pl_tls_conn_free(pl_tls_conn *tc);

/* Called with decrypted bytes; returns false to stop (the connection is
 * closing). */
typedef bool (*pl_tls_deliver)(void *arg, const uint8_t *data, size_t len);

/* Feeds bytes read from the socket. Decrypted application data goes to
 * `deliver` (through `scratch`). Returns 0, or -1 on a fatal TLS error
 * (handshake refused, bad record): the output may then hold an alert worth
 * sending before closing, and pl_tls_conn_error says what went wrong. */
int pl_tls_conn_input(pl_tls_conn *tc, const uint8_t *data, size_t len, pl_tls_deliver deliver,
                      void *arg, uint8_t *scratch, size_t scratch_len);
/* Encrypts application data into the output. 0 or -1. */
int pl_tls_conn_encrypt(pl_tls_conn *tc, const uint8_t *data, size_t len);
/* Queues a close_notify alert. */
void pl_tls_conn_close_notify(pl_tls_conn *tc);
/* Takes what is ready to be written to the socket (malloc'd), or NULL. */
uint8_t *pl_tls_conn_take_output(pl_tls_conn *tc, size_t *len);

bool pl_tls_conn_established(const pl_tls_conn *tc);
/* "h2", "http/1.1" or "" (no ALPN). */
const char *pl_tls_conn_alpn(const pl_tls_conn *tc);
/* The verified client certificate's subject CN (mutual TLS), or NULL. */
const char *pl_tls_conn_peer_name(const pl_tls_conn *tc);
const char *pl_tls_conn_error(const pl_tls_conn *tc);

#endif
