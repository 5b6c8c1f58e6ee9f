/* net/tls.h — TLS for a server's accepted connections, on OpenSSL.
 *
 * A pts_tls_ctx is what a listener proves and trusts: its certificate
 * chain and key, the roots a client certificate must chain to when one is
 * required, the one ALPN protocol it speaks. A pts_tls is one connection's
 * session over its non-blocking socket, read and written in place of
 * recv() and evbuffer_write(), with their contracts: the caller's event
 * loop stays as it is, and the handshake happens inside the first reads
 * and writes, one step per readiness of the socket.
 *
 * OpenSSL reads and writes the socket itself (a socket BIO): records are
 * decrypted straight into the caller's buffer, and encrypted straight from
 * the evbuffer's chains, those it holds by reference too. The only copy
 * TLS adds is of small chains gathered into one record (pts_tls_write);
 * a plaintext connection never comes here.
 *
 * A session can wait on the socket in the other direction than it is used:
 * a read may have to write (a handshake message the socket did not take)
 * and a write may have to read (a write before the handshake is done).
 * pts_tls_read_wants_write and pts_tls_write_wants_read say so after a
 * call that returned EAGAIN; the caller then waits for that readiness and
 * calls the same function again.
 *
 * Threading: pts_tls_ctx_new and pts_tls_ctx_free run on the main thread;
 * a context is read-only once made and may serve sessions on any number of
 * threads. A session belongs to one thread at a time (its connection's
 * loop). OpenSSL's error queue is per thread, and every call here leaves
 * its thread's queue empty.
 */
#ifndef PTS_NET_TLS_H
#define PTS_NET_TLS_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/status.h"

struct evbuffer;
struct pts_tls_ctx;
struct pts_tls;

/* What a context is made of. Strings are borrowed for the call only. */
struct pts_tls_config {
  const char *cert_file; /* PEM: the server's certificate, then its chain */
  const char *key_file;  /* PEM: its private key, without a pass phrase */
  const char *ca_file;   /* PEM: the roots a client certificate must chain to; NULL: none */
  bool verify_client;    /* require a client certificate, verified against ca_file */
  const char *alpn;      /* the protocol chosen when the client offers it ("h2") */
  /* The flags that named the files ("--grpc-server-cert"), for messages. */
  const char *cert_flag, *key_flag, *ca_flag;
};

/* Reads the files and makes a context: TLS 1.2 or 1.3, OpenSSL's default
 * ciphers, no renegotiation. Each file is read here, so a missing,
 * unreadable or malformed one, a key that does not match the certificate,
 * or verify_client without ca_file is INVALID_ARG, with a message naming
 * the flag and the file. Free with pts_tls_ctx_free. */
enum pts_status pts_tls_ctx_new(const struct pts_tls_config *c, struct pts_tls_ctx **out,
                                struct pts_error *err);
/* NULL-safe. After every session made from it is freed: the handshake
 * reads its ALPN choice from here. */
void pts_tls_ctx_free(struct pts_tls_ctx *ctx);

/* A server-side session on the accepted, non-blocking socket `fd`
 * (borrowed: the caller closes it, after pts_tls_free). NULL when out of
 * memory. */
struct pts_tls *pts_tls_new(struct pts_tls_ctx *ctx, int fd);
/* Sends close_notify when the session is whole (best effort: a socket
 * that does not take it now is not waited on), then frees. NULL-safe. */
void pts_tls_free(struct pts_tls *t);

/* recv()'s contract: up to `len` decrypted bytes into buf, or 0 when the
 * client closed (its close_notify, or the socket's end), or -1 with errno:
 * EAGAIN to wait on the socket (pts_tls_read_wants_write says for
 * writing), EPROTO when TLS failed (the handshake or a record:
 * pts_tls_failure says why), or the socket's own error. */
ssize_t pts_tls_read(struct pts_tls *t, void *buf, size_t len);
/* Whether bytes already taken from the socket wait inside the session: a
 * read will find them without the socket becoming readable again. */
bool pts_tls_pending(const struct pts_tls *t);
/* evbuffer_write()'s contract: writes what the socket takes of `out`,
 * drains it, returns the bytes written, or -1 with errno as
 * pts_tls_read's (EAGAIN: nothing went; pts_tls_write_wants_read says
 * whether it waits for reading; while pts_tls_read_wants_write, it waits
 * for that read to be retried). Chains smaller than a record are
 * gathered into one (a copy of at most 16 KiB) so that small frames do not
 * each cost a record and a syscall. */
int pts_tls_write(struct pts_tls *t, struct evbuffer *out);

/* The last pts_tls_read returned EAGAIN waiting for the socket to take a
 * write: call it again once the socket is writable. */
bool pts_tls_read_wants_write(const struct pts_tls *t);
/* The last pts_tls_write returned EAGAIN waiting for the client's bytes:
 * call it again once the socket is readable (after reading them). */
bool pts_tls_write_wants_read(const struct pts_tls *t);
/* Why the session failed ("TLS handshake failed: certificate verify failed
 * (the client's certificate: certificate has expired)"), after a call
 * returned EPROTO; NULL when it has not failed, or ended without a TLS
 * error (a client that went away). Valid until pts_tls_free. */
const char *pts_tls_failure(const struct pts_tls *t);

#endif
