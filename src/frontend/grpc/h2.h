/* frontend/grpc/h2.h — the gRPC transport, on nghttp2.
 *
 * gRPC core, which served gRPC before, spends about half of a small unary ModelInfer's instructions
 * on its own machinery (docs/internals/grpc.md, "The transport, measured").
 * Here HTTP/2 is nghttp2's (framing, HPACK, flow control, SETTINGS, PING,
 * GOAWAY) and gRPC's own layer is written out: the 5-byte message prefix,
 * `grpc-encoding` (gzip and deflate requests, through zlib), the
 * `grpc-status` and `grpc-message` trailers, trailers-only errors.
 *
 * Each transport serves its connections on one libevent loop, the way an
 * HTTP loop serves its own (grpc.c runs --grpc-infer-thread-count of them,
 * the first on the gRPC listener's loop, and deals the connections out):
 * a small model with an idle instance runs to completion on that thread,
 * and instance and server threads hand answers back with one event_active
 * per wake-up.
 *
 * ModelStreamInfer streams use HTTP/2 flow control as their backpressure
 * (a stream's window is held while it has too many requests pending).
 *
 * With --grpc-use-ssl every connection is TLS (net/tls.h) under the same
 * HTTP/2: only the socket's reads and writes change, and a plaintext
 * connection takes none of TLS's branches but one test of a pointer.
 *
 * Deadlines (`grpc-timeout`) end a call with DEADLINE_EXCEEDED; inference
 * responses are compressed (gzip or deflate, whichever the client accepts)
 * at --grpc-infer-response-compression-level. Keepalive pings, the policing of the client's pings
 * and connection age follow gRPC core's flags (--grpc-keepalive-*, --grpc-http2-*,
 * --grpc-max-connection-age*).
 *
 * Threading: every function runs on the transport's loop thread, except
 * pts_grpc_h2_new, pts_grpc_h2_live and pts_grpc_h2_free (main thread, the
 * last after the loop has stopped) and pts_grpc_h2_drain and
 * pts_grpc_h2_give (any thread).
 * Inference and async-rpc completions arrive on instance and server
 * threads; they only store their answer and wake the loop.
 */
#ifndef PTS_FRONTEND_GRPC_H2_H
#define PTS_FRONTEND_GRPC_H2_H

#include <stddef.h>

#include "core/restrict.h"
#include "core/status.h"
#include "server/server.h"

struct event_base;
struct pts_grpc_h2;
struct pts_tls_ctx;

/* A transport serving on `base` (the listener's loop; borrowed until free)
 * with o's compression, keepalive and connection-age flags (read here).
 * The server and the restrictions are borrowed and must outlive it. */
enum pts_status pts_grpc_h2_new(struct pts_server *s, const struct pts_server_options *o,
                                const struct pts_restrictions *r, struct event_base *base,
                                struct pts_grpc_h2 **out, struct pts_error *err);
/* Serves TLS on every connection accepted from now on, with `tls`
 * (borrowed until free; see net/tls.h): the handshake, ALPN "h2", and
 * client certificates when the context requires them. A connection whose
 * handshake fails is closed alone, with a warning. Main thread, before
 * the loop serves a connection. */
void pts_grpc_h2_set_tls(struct pts_grpc_h2 *h, struct pts_tls_ctx *tls);
/* Serves the accepted, non-blocking socket `fd` (taken: closed on every
 * path). Loop thread. */
void pts_grpc_h2_accept(struct pts_grpc_h2 *h, int fd);
/* The same from another thread (the listener's, for a transport on another
 * loop): the socket is queued and the loop woken to accept it. */
void pts_grpc_h2_give(struct pts_grpc_h2 *h, int fd);
/* Shutdown, first step: GOAWAY on every connection (calls already started
 * go on), and connections accepted from now on are closed at once. Wakes
 * the loop; any thread. */
void pts_grpc_h2_drain(struct pts_grpc_h2 *h);
/* Connections open plus calls not yet freed; 0 once a drain is over. Any
 * thread. */
size_t pts_grpc_h2_live(struct pts_grpc_h2 *h);
/* Closes what is left and frees, once the loop has stopped. A call still
 * in the core (its completion would touch freed memory) makes it leave
 * the transport allocated instead, with a warning; false then. NULL-safe. */
bool pts_grpc_h2_free(struct pts_grpc_h2 *h);

#endif
