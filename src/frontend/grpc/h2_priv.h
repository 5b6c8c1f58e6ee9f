/* frontend/grpc/h2_priv.h — the nghttp2 transport's structures, shared by
 * its two halves: h2.c (connections: sockets, the HTTP/2 session, flushing,
 * keepalive, connection age, the transport's life) and h2_call.c (calls:
 * request headers and messages, dispatch to the core, answers and their
 * frames). Private to those two files; other modules use h2.h.
 *
 * Threading: as h2.h says. Everything here belongs to the transport's loop
 * thread, except what struct call and struct pts_grpc_h2 mark as guarded by
 * h->mu (completions from instance and server threads).
 */
#ifndef PTS_FRONTEND_GRPC_H2_PRIV_H
#define PTS_FRONTEND_GRPC_H2_PRIV_H

#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/grpc/h2.h"
#include "frontend/grpc/rpc.h"
#include "frontend/http/compress.h"
#include "net/tls.h"

/* The gRPC message prefix: a compressed flag and a 32-bit length. */
#define PREFIX 5
/* gRPC's message limit, as gRPC core's with Triton's settings. */
#define MAX_MESSAGE 0x7fffffffu
/* A ModelStreamInfer stream stops taking requests (its HTTP/2 window is
 * not given back) while this many are in the core or waiting to be sent,
 * and takes them again below half of it, as grpc.c's STREAM_WINDOW. */
#define STREAM_PENDING_MAX 128
/* The most calls one connection may have at once, counting those whose
 * streams its client has reset while their requests are still in the
 * core (struct conn's orphans): past it a new stream is refused with
 * REFUSED_STREAM, which gRPC clients retry. It is not advertised as
 * SETTINGS_MAX_CONCURRENT_STREAMS, as tritonserver advertises none:
 * grpcio's client stops opening streams once its own count reaches the
 * server's limit, and under cancellations that count runs ahead of the
 * streams open on the wire, so a client that cancels stalls for good on
 * any limit (docs/internals/grpc.md, "Cancelled calls"). */
#define CONN_CALLS_MAX 4096

struct conn;

/* One message to send: the 5-byte prefix, then the reply's pieces. An
 * error (code != OK) is a status to end the call with instead. */
struct out_msg {
  struct out_msg *next;
  /* References (loop thread, once queued; 1 when made): the call's list
   * holds one, and each piece of the reply that a connection's output
   * evbuffer holds by reference (large DATA frames) one more. */
  unsigned refs;
  struct pts_grpc_reply reply;
  uint8_t prefix[PREFIX];
  size_t at;           /* bytes of prefix + reply handed to nghttp2 */
  bool compressed;     /* the reply is compressed (the prefix's flag) */
  enum pts_status code;
  char *message;       /* owned; the error's */
};

/* One gRPC call: an HTTP/2 stream from its HEADERS to its close. Lives on
 * the loop thread. Completions (instance and server threads) only append
 * to `done` under h->mu and wake the loop; `conn` goes NULL when the
 * stream or its connection ends first (an orphan, freed once nothing of it
 * is left in the core). */
struct call {
  struct pts_grpc_h2 *h;
  struct conn *conn;         /* NULL: orphaned */
  /* conn->calls; an orphan whose connection lives, origin->orphans */
  struct call *prev, *next;
  /* An orphan's connection, while both live: the orphan still counts
   * against its CONN_CALLS_MAX (NULL otherwise). */
  struct conn *origin;
  int32_t id;
  const struct pts_grpc_rpc *rpc;   /* NULL: unknown method */
  const struct pts_restriction *rs; /* the restriction on rpc's group, if any */
  char path[128];                   /* the :path, for messages (truncated) */
  bool post, grpc_type, rs_ok;
  enum pts_http_encoding req_enc; /* grpc-encoding of its messages */
  bool status_errors; /* stream: triton_grpc_error: true */
  bool stream;        /* ModelStreamInfer */
  int64_t timeout_us;        /* grpc-timeout; -1: none */
  struct event *deadline_ev; /* owned; armed when timeout_us >= 0 */
  bool accept_gzip, accept_deflate; /* grpc-accept-encoding */
  /* --grpc-header-forward-pattern: the inference call's metadata to hand
   * on as string parameters with each of its requests. Owned array, keys
   * and values owned too; fwd_failed: one could not be kept (the call's
   * requests then fail, rather than go without it). */
  struct pts_request_param *fwd;
  size_t n_fwd;
  bool fwd_failed;
  /* inference responses' compression (--grpc-infer-response-compression-level
   * and what the client accepts), fixed at the headers */
  enum pts_http_encoding resp_enc;
  /* the request messages as they arrive */
  uint8_t prefix[PREFIX];
  size_t prefix_len;
  struct pts_buf *msg; /* owned; msg->size = bytes so far */
  size_t msg_len;      /* the prefix's length */
  size_t charged;      /* budget held for msg */
  bool msg_compressed;
  struct pts_buf *unary_msg; /* a unary call's whole message, until END_STREAM */
  size_t n_core;       /* requests in the core, completions not yet taken */
  bool half_closed;    /* the client sent END_STREAM */
  bool closing;        /* no more sending: the status comes once n_core is 0 */
  enum pts_status close_code;
  char *close_msg;     /* owned */
  bool paused;         /* stream: its window is held (STREAM_PENDING_MAX) */
  size_t unconsumed;   /* stream: bytes received while paused */
  /* the answer */
  struct out_msg *out_head, *out_tail; /* to send, in order */
  size_t n_out;
  bool started;  /* response HEADERS submitted */
  bool deferred; /* the data source said "nothing yet": resume on the next message */
  bool finished; /* END_STREAM (trailers or trailers-only) submitted */
  /* guarded by h->mu */
  struct out_msg *done_head, *done_tail;
  size_t n_lost; /* completions whose message could not be allocated */
  bool in_ready;
  struct call *ready_next;
  /* loop thread: what take_ready moved out of the above in one go */
  struct out_msg *taken;
  size_t taken_lost;
  struct call *taken_next;
};

struct conn {
  struct pts_grpc_h2 *h;
  int fd;
  /* Owned; NULL: plaintext. The socket's bytes go through it both ways
   * (conn_recv, conn_write in h2.c). */
  struct pts_tls *tls;
  bool rd_paused; /* TLS: rd is off while a read waits to write (tls_events) */
  nghttp2_session *s;
  struct event *rd, *wr;
  struct evbuffer *out;     /* serialized frames the socket has not taken */
  struct conn *prev, *next; /* h->conns */
  struct conn *dirty_next;  /* h->dirty */
  bool dirty, dead;
  bool close_after_send;    /* GOAWAY for an offence: close once it is written */
  struct call *calls;       /* streams with a call */
  size_t n_calls;           /* on `calls` */
  /* Calls whose stream the client reset (a cancel, or its own deadline)
   * while their requests were still in the core: they run to the end, so a
   * client that opens and resets streams as fast as it can (HTTP/2's
   * Rapid Reset, CVE-2023-44487) would otherwise have the server work on
   * any number of them at once. They count against CONN_CALLS_MAX. */
  struct call *orphans;
  size_t n_orphans;
  /* The call whose request header block is being read: a block is never
   * interleaved with other frames (RFC 9113 6.10), so on_header need not
   * look its stream up once per header field. Borrowed; NULL outside one. */
  struct call *heading;
  /* --grpc-keepalive-*: the server's pings, and the client's policed */
  struct event *ka_ev;      /* owned: the next ping, or the wait for its ACK */
  bool ka_waiting;          /* a ping is out, its ACK not back */
  int pings_without_data;   /* ours since the client last sent a frame of a call */
  int strikes;              /* the client's pings too close together */
  uint64_t last_ping_ns;    /* the client's last ping */
  /* --grpc-max-connection-age(-grace) */
  struct event *age_ev;     /* owned: GOAWAY at the age, then the close after the grace */
  bool aged;                /* GOAWAY sent for age; the grace runs */
  /* Where the input stands in the client's frames (frame_piece): bytes of
   * its 24-byte preface still to come, of the current frame's payload
   * still to come (a DATA frame's: frame_data), and the start of a frame
   * header cut by a read. */
  size_t preface_left;
  size_t frame_left;
  bool frame_data;
  bool frame_padded;    /* a DATA frame's: its payload is not all message */
  int32_t frame_stream; /* a DATA frame's */
  uint8_t head[9];
  size_t head_len;
};

/* A socket handed over by pts_grpc_h2_give. */
struct incoming {
  struct incoming *next;
  int fd;
};

struct pts_grpc_h2 {
  struct pts_server *server;
  struct pts_tls_ctx *tls; /* borrowed (pts_grpc_h2_set_tls); NULL: plaintext */
  const struct pts_restrictions *restrictions;
  int compression_level; /* --grpc-infer-response-compression-level, 0-3 */
  /* the keepalive and connection-age flags (server.h), in ms */
  int ka_time_ms, ka_timeout_ms, max_pings_without_data, min_ping_interval_ms, max_strikes;
  bool ka_without_calls;
  int age_ms, age_grace_ms; /* -1: unset */
  struct event_base *base;
  uint8_t *rbuf;       /* owned; loop thread: every connection's recv() lands here */
  nghttp2_session_callbacks *cbs;
  nghttp2_option *opt;
  struct event *wake_ev, *drain_ev;
  struct conn *conns;  /* loop thread */
  struct conn *dirty;  /* loop thread: to flush at the end of this callback */
  bool draining;       /* loop thread */
  atomic_size_t live;  /* conns + calls */
  pthread_mutex_t mu;
  struct call *ready;  /* guarded by mu: calls with completions to take */
  bool wake_pending;   /* guarded by mu */
  atomic_bool any_ready; /* ready is not empty: take_ready's look without the lock */
  struct incoming *incoming; /* guarded by mu: sockets given from another thread */
  struct event *incoming_ev; /* owned: wakes the loop for them */
  pthread_t loop_thread; /* set by the first accept, before any call exists */
  bool loop_known;
};

/* Puts the connection on the list flushed at the end of the loop callback
 * (flush_dirty in h2.c): what nghttp2 has queued is written then, once. */
static inline void pts_grpc_h2_mark_dirty(struct conn *cn) {
  if (cn->dirty) return;
  cn->dirty = true;
  cn->dirty_next = cn->h->dirty;
  cn->h->dirty = cn;
}

/* h2_call.c, for h2.c: */
/* Sets the stream callbacks (headers, DATA, stream close) on `cbs`. */
void pts_grpc_h2_call_callbacks(nghttp2_session_callbacks *cbs);
/* A HEADERS or DATA frame of a call is in: its headers checked, the end of
 * its requests seen. */
void pts_grpc_h2_call_frame(struct conn *cn, const nghttp2_frame *f);
/* The connection is being freed: each of its calls is freed now, or by
 * its last completion; its orphans go on, counted nowhere. */
void pts_grpc_h2_conn_calls_release(struct conn *cn);
/* Takes the completions that instance and server threads handed back. */
void pts_grpc_h2_take_ready(struct pts_grpc_h2 *h);
/* Where the next bytes of stream `id`'s current request message go, and
 * how many it still lacks (*room), once its prefix is read; else NULL.
 * Borrowed: valid until those bytes go to nghttp2, whose DATA callback
 * then finds them in place and does not copy them. */
uint8_t *pts_grpc_h2_call_room(struct conn *cn, int32_t id, size_t *room);

#endif
