/* frontend/grpc/grpc.c — the frontend's start and stop: the nghttp2
 * transport's loops (h2.h, the default), or the transport on gRPC core
 * (--grpc-transport core): completion-queue threads, the life of each
 * call, the hop back from instance threads, shutdown. The wire
 * conversions live in infer.c and admit.c, the small rpcs in rpc.c. */
#include "frontend/grpc/grpc.h"

#include <event2/event.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/absl_sync.h"
#include "core/alloc.h"
#include "core/log.h"
#include "core/overload.h"
#include "trace/trace.h"
#include "frontend/grpc/admit.h"
#include "frontend/grpc/h2.h"
#include "frontend/grpc/infer.h"
#include "frontend/grpc/listen_grpc.h"
#include "frontend/grpc/restrict_grpc.h"
#include "frontend/grpc/rpc.h"
#include "net/libevent.h"

/* grpc_server_request_call()s kept outstanding on each queue: how many new
 * calls a queue can be handed at once before its thread asks for more. */
#define CALLS_PER_QUEUE 16
/* At shutdown, how long running calls (open streams, mostly) may go on
 * before they are cancelled, and how long cancelled calls get to end. */
#define STOP_GRACE_S 5
#define STOP_CANCEL_S 10
/* Pieces at most this long are copied into the slice rather than
 * referenced: a reference costs more than copying a length prefix. */
#define COPY_PIECE_MAX 64
/* A stream stops reading requests while this many are in the core or
 * waiting to be sent, and reads again below half of it: a client that does
 * not read its responses can not make the server queue without bound. */
#define STREAM_WINDOW 128

enum tag_kind { TAG_NEW_CALL, TAG_RECV, TAG_SEND, TAG_FINISH, TAG_SHUTDOWN };

struct call;

/* What a completion-queue event points at. */
struct tag {
  enum tag_kind kind;
  struct call *call; /* NULL for TAG_SHUTDOWN */
};

struct queue {
  struct pts_grpc *g;
  grpc_completion_queue *cq;
  pthread_t thread;
  bool thread_started;
};

struct pts_grpc {
  struct pts_server *server;
  grpc_server *gs;
  int port;
  int compression_level; /* grpc_compression_level for infer responses */
  size_t n_queues;
  struct queue *queues;
  atomic_bool stopping;
  struct tag shutdown_tag;
  pthread_mutex_t mu;
  pthread_cond_t changed;
  size_t live_calls;  /* guarded by mu: struct calls not yet freed */
  bool shutdown_done; /* guarded by mu */
  /* --grpc-restricted-protocol; read-only while the queues run */
  struct pts_restrictions restrictions;
  grpc_resource_quota *quota; /* gRPC's own buffers, sized by the memory budget */
  /* ModelInfer registered with gRPC core, its message read with the call:
   * a unary inference then costs one completion-queue event and one batch
   * fewer (no RECV_MESSAGE of ours). Calls that do not match it (a client
   * without :authority) still arrive through grpc_server_request_call. */
  void *infer_method;                   /* gRPC core's handle; NULL if not registered */
  const struct pts_grpc_rpc *infer_rpc; /* the rpc table's ModelInfer */
  struct pts_grpc_listen *listen; /* accepts connections for gs */
  grpc_server_credentials *creds;  /* insecure: the only kind ptserve serves */
  /* --grpc-transport nghttp2: --grpc-infer-thread-count loops instead of
   * gs and the queues (which are then never created); loop 0 is the
   * listener's own */
  struct h2_loop *loops;
  size_t n_loops;
  size_t next_loop; /* listener thread: round robin of new connections */
};

/* One loop of the nghttp2 transport. */
struct h2_loop {
  struct pts_grpc_h2 *h2;
  struct event_base *base; /* owned, but loop 0's: the listener's */
  struct event *stop_ev;   /* owned; NULL for loop 0 */
  pthread_t thread;
  bool started;
};

/* A message waiting for the stream's one send slot. */
struct out_msg {
  struct out_msg *next;
  grpc_byte_buffer *bb;
};

/* One rpc, from grpc_server_request_call to its final status. Freed when
 * the last reference goes: one per outstanding batch, one per inference in
 * the core. Every grpc_call_start_batch on the call happens under `mu`, so
 * batches started from queue and instance threads never race. */
struct call {
  struct pts_grpc *g;
  struct queue *q;
  const struct pts_grpc_rpc *rpc;
  grpc_call *call;
  grpc_call_details details; /* unregistered calls: the method's path */
  gpr_timespec deadline;     /* registered calls: unused, gRPC core wants it */
  bool registered;           /* requested as g->infer_method, its message in recv_bb */
  grpc_metadata_array md;
  struct tag new_tag, recv_tag, send_tag, finish_tag;
  grpc_byte_buffer *recv_bb;   /* RECV_MESSAGE's output */
  grpc_byte_buffer *send_bb;   /* the SEND_MESSAGE in flight (streams) */
  grpc_byte_buffer *finish_bb; /* the final batch's message (unary) */
  int cancelled;               /* RECV_CLOSE_ON_SERVER's output */

  pthread_mutex_t mu;
  int refs;
  size_t in_flight;    /* requests in the core */
  bool md_sent;        /* initial metadata started */
  bool finish_started; /* status started: no more batches */
  bool half_closed;    /* stream: the client sent its last message */
  bool closing;        /* stream: close after in-flight requests (error or dead peer) */
  bool status_errors;  /* stream: triton_grpc_error: true */
  enum pts_status close_code;
  char close_msg[PTS_ERROR_MSG_MAX];
  struct out_msg *out_head, *out_tail;
  size_t n_out;     /* messages queued in out_head */
  bool recv_paused; /* stream: no receive started, the window is full */
};

/* ------------------------------------------------------------------ */
/* calls                                                               */

static struct call *call_new(struct pts_grpc *g, struct queue *q) {
  struct call *c = pts_calloc(1, sizeof *c);
  if (!c) return NULL;
  c->g = g;
  c->q = q;
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->md);
  c->new_tag = (struct tag){TAG_NEW_CALL, c};
  c->recv_tag = (struct tag){TAG_RECV, c};
  c->send_tag = (struct tag){TAG_SEND, c};
  c->finish_tag = (struct tag){TAG_FINISH, c};
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_lock(&g->mu);
  g->live_calls++;
  pthread_mutex_unlock(&g->mu);
  return c;
}

static void call_free(struct call *c) {
  struct pts_grpc *g = c->g;
  if (c->call) grpc_call_unref(c->call);
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->md);
  if (c->recv_bb) grpc_byte_buffer_destroy(c->recv_bb);
  if (c->send_bb) grpc_byte_buffer_destroy(c->send_bb);
  if (c->finish_bb) grpc_byte_buffer_destroy(c->finish_bb);
  while (c->out_head) {
    struct out_msg *m = c->out_head;
    c->out_head = m->next;
    grpc_byte_buffer_destroy(m->bb);
    pts_free(m);
  }
  pthread_mutex_destroy(&c->mu);
  pts_free(c);
  pthread_mutex_lock(&g->mu);
  g->live_calls--;
  pthread_cond_broadcast(&g->changed);
  pthread_mutex_unlock(&g->mu);
}

/* Drops one reference; frees the call on the last. Takes c->mu itself. */
static void call_unref(struct call *c) {
  pthread_mutex_lock(&c->mu);
  bool last = --c->refs == 0;
  pthread_mutex_unlock(&c->mu);
  if (last) call_free(c);
}

/* Starts a batch (c->mu held); the batch holds a reference until its tag
 * comes back. */
static bool start_locked(struct call *c, const grpc_op *ops, size_t n, struct tag *t) {
  grpc_call_error e = grpc_call_start_batch(c->call, ops, n, t, NULL);
  if (e != GRPC_CALL_OK) {
    PTS_LOG_ERROR("gRPC: starting a batch on %s failed (grpc_call_error %d)",
                  c->rpc ? c->rpc->path : "a call", (int)e);
    return false;
  }
  c->refs++;
  return true;
}

/* SEND_INITIAL_METADATA, once per call, with the response compression
 * level for inference rpcs (--grpc-infer-response-compression-level). */
static size_t add_initial_md(struct call *c, grpc_op *op) {
  if (c->md_sent) return 0;
  memset(op, 0, sizeof *op);
  op->op = GRPC_OP_SEND_INITIAL_METADATA;
  if (c->g->compression_level > 0 && c->rpc &&
      (c->rpc->kind == PTS_GRPC_INFER || c->rpc->kind == PTS_GRPC_STREAM)) {
    op->data.send_initial_metadata.maybe_compression_level.is_set = 1;
    op->data.send_initial_metadata.maybe_compression_level.level =
        (grpc_compression_level)c->g->compression_level;
  }
  c->md_sent = true;
  return 1;
}

/* ------------------------------------------------------------------ */
/* messages <-> buffers                                                */

static void release_slice(void *ctx, void *data) {
  (void)data;
  grpc_slice *s = ctx;
  grpc_slice_unref(*s);
  pts_free(s);
}

/* The received message as one pts_buf: the slice itself when the message
 * arrived in one piece (no copy), else one copy of all pieces. */
static enum pts_status message_buf(grpc_byte_buffer *bb, struct pts_buf **out,
                                   struct pts_error *err) {
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to read the request message (it could not be decompressed)");
  size_t n = 0, cap = 0, total = 0;
  grpc_slice *slices = NULL, s;
  enum pts_status st = PTS_OK;
  while (grpc_byte_buffer_reader_next(&rd, &s)) {
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 4;
      grpc_slice *grown = pts_realloc(slices, ncap * sizeof *grown);
      if (!grown) {
        grpc_slice_unref(s);
        st = pts_error_set(err, PTS_NOMEM, "out of memory reading a request message");
        break;
      }
      slices = grown;
      cap = ncap;
    }
    slices[n++] = s;
    total += GRPC_SLICE_LENGTH(s);
  }
  grpc_byte_buffer_reader_destroy(&rd);
  struct pts_buf *b = NULL;
  if (st == PTS_OK && n == 1) {
    grpc_slice *own = pts_malloc(sizeof *own);
    if (own) {
      *own = slices[0];
      b = pts_buf_wrap(GRPC_SLICE_START_PTR(*own), GRPC_SLICE_LENGTH(*own), release_slice, own);
      if (b)
        n = 0; /* the buffer owns the slice now */
      else
        pts_free(own);
    }
  } else if (st == PTS_OK) {
    b = pts_buf_new(total ? total : 1);
    size_t used = 0;
    for (size_t i = 0; b && i < n; i++) {
      memcpy((char *)b->data + used, GRPC_SLICE_START_PTR(slices[i]), GRPC_SLICE_LENGTH(slices[i]));
      used += GRPC_SLICE_LENGTH(slices[i]);
    }
    if (b) b->size = total;
  }
  for (size_t i = 0; i < n; i++) grpc_slice_unref(slices[i]);
  pts_free(slices);
  if (st == PTS_OK && !b)
    st = pts_error_set(err, PTS_NOMEM, "out of memory reading a request message");
  *out = b;
  return st;
}

static void release_piece(void *buf) { pts_buf_release(buf); }

/* A byte buffer over the reply's pieces: large pieces by reference (the
 * slice takes over the piece's buffer reference), small ones copied. The
 * reply is left empty. NULL on allocation failure. */
static grpc_byte_buffer *reply_bb(struct pts_grpc_reply *r) {
  size_t n = r->n_pieces;
  grpc_slice *slices = pts_calloc(n ? n : 1, sizeof *slices);
  if (!slices) {
    pts_grpc_reply_clear(r);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    struct pts_grpc_piece *p = &r->pieces[i];
    if (p->size <= COPY_PIECE_MAX || !p->buf) {
      slices[i] = grpc_slice_from_copied_buffer(p->data, p->size);
    } else {
      slices[i] = grpc_slice_new_with_user_data((void *)p->data, p->size, release_piece, p->buf);
      p->buf = NULL;
    }
  }
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(slices, n);
  for (size_t i = 0; i < n; i++) grpc_slice_unref(slices[i]);
  pts_free(slices);
  pts_grpc_reply_clear(r);
  return bb;
}

/* ------------------------------------------------------------------ */
/* finishing a call                                                    */

/* The final batch: initial metadata if not sent yet, the message (if any),
 * the status, and RECV_CLOSE_ON_SERVER when no receive is outstanding.
 * c->mu held. Takes `reply` (may be NULL). */
static void finish_locked(struct call *c, struct pts_grpc_reply *reply, enum pts_status code,
                          const char *msg, bool recv_close) {
  if (c->finish_started) {
    pts_grpc_reply_clear(reply);
    return;
  }
  c->finish_started = true;
  grpc_op ops[4];
  size_t n = add_initial_md(c, &ops[0]);
  if (reply && code == PTS_OK) {
    c->finish_bb = reply_bb(reply);
    if (!c->finish_bb) {
      code = PTS_NOMEM;
      msg = "out of memory sending the response";
    } else {
      memset(&ops[n], 0, sizeof ops[n]);
      ops[n].op = GRPC_OP_SEND_MESSAGE;
      ops[n].data.send_message.send_message = c->finish_bb;
      n++;
    }
  } else {
    pts_grpc_reply_clear(reply);
  }
  grpc_slice details = grpc_slice_from_copied_string(code == PTS_OK ? "" : msg);
  memset(&ops[n], 0, sizeof ops[n]);
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = (grpc_status_code)pts_status_grpc(code);
  ops[n].data.send_status_from_server.status_details = &details;
  n++;
  if (recv_close) {
    memset(&ops[n], 0, sizeof ops[n]);
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
    n++;
  }
  start_locked(c, ops, n, &c->finish_tag);
  grpc_slice_unref(details);
}

static void finish(struct call *c, struct pts_grpc_reply *reply, enum pts_status code,
                   const char *msg) {
  pthread_mutex_lock(&c->mu);
  finish_locked(c, reply, code, msg, true);
  pthread_mutex_unlock(&c->mu);
}

static bool start_recv_locked(struct call *c) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &c->recv_bb;
  return start_locked(c, &op, 1, &c->recv_tag);
}

/* ------------------------------------------------------------------ */
/* unary                                                               */

static void on_unary_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                          const struct pts_error *ierr, void *ctx) {
  struct call *c = ctx;
  struct pts_error err;
  struct pts_grpc_reply reply = {0, NULL, 0};
  pts_grpc_encode_done(req, resp, ierr, false, &reply, &err);
  pts_infer_response_free(resp);
  pthread_mutex_lock(&c->mu);
  c->in_flight--;
  finish_locked(c, &reply, err.code, err.msg, true);
  pthread_mutex_unlock(&c->mu);
  pts_trace_record(req->trace, PTS_TRACE_GRPC_SEND_END, pts_now_ns());
  pts_infer_request_free(req); /* ends its trace */
  call_unref(c); /* the inference's reference */
}

/* Decodes a ModelInferRequest into a native request whose completion
 * calls `done` with the call. NULL (err set) when the message is bad. */
static struct pts_infer_request *decode_request(struct call *c, grpc_byte_buffer *bb,
                                                pts_infer_done_fn done, struct pts_error *err) {
  struct pts_buf *msg = NULL;
  if (message_buf(bb, &msg, err) != PTS_OK) return NULL;
  struct pts_infer_request *req = pts_grpc_admit(msg, done, c, err);
  pts_buf_release(msg); /* raw inputs hold their own references */
  return req;
}

/* Hands `req` to the core with the call's reference; on a synchronous
 * error the request is freed and the error returned. */
static enum pts_status submit(struct call *c, struct pts_infer_request *req,
                              struct pts_error *err) {
  pthread_mutex_lock(&c->mu);
  c->in_flight++;
  c->refs++;
  pthread_mutex_unlock(&c->mu);
  if (pts_server_infer_async(c->g->server, req, err) == PTS_OK) return PTS_OK;
  pts_infer_request_free(req);
  pthread_mutex_lock(&c->mu);
  c->in_flight--;
  c->refs--; /* the call's own batch reference keeps it alive here */
  pthread_mutex_unlock(&c->mu);
  return err->code;
}

/* A server thread answers an async rpc; the call's reference taken in
 * unary_received is dropped here. */
static void on_async_done(struct pts_grpc_reply *reply, const struct pts_error *err, void *arg) {
  struct call *c = arg;
  pthread_mutex_lock(&c->mu);
  finish_locked(c, reply, err->code, err->msg, true);
  pthread_mutex_unlock(&c->mu);
  call_unref(c);
}

static void unary_received(struct call *c, grpc_byte_buffer *bb) {
  struct pts_error err;
  pts_error_clear(&err);
  if (c->rpc->kind == PTS_GRPC_ASYNC) {
    struct pts_buf *msg = NULL;
    if (message_buf(bb, &msg, &err) == PTS_OK) {
      pthread_mutex_lock(&c->mu);
      c->refs++; /* until on_async_done */
      pthread_mutex_unlock(&c->mu);
      if (c->rpc->start(c->g->server, msg, on_async_done, c, &err) != PTS_OK) {
        pthread_mutex_lock(&c->mu);
        c->refs--; /* the call's own batch reference keeps it alive here */
        pthread_mutex_unlock(&c->mu);
      }
    }
    pts_buf_release(msg);
    if (err.code != PTS_OK) finish(c, NULL, err.code, err.msg);
    return;
  }
  if (c->rpc->kind == PTS_GRPC_INFER) {
    struct pts_infer_request *req = decode_request(c, bb, on_unary_done, &err);
    if (req && submit(c, req, &err) == PTS_OK) return;
    finish(c, NULL, err.code, err.msg);
    return;
  }
  struct pts_buf *msg = NULL;
  struct pts_grpc_reply reply = {0, NULL, 0};
  if (message_buf(bb, &msg, &err) == PTS_OK) c->rpc->fn(c->g->server, msg, &reply, &err);
  pts_buf_release(msg);
  finish(c, &reply, err.code, err.msg);
}

/* A unary call's request message (NULL: the client sent none), taken. */
static void unary_arrived(struct call *c, grpc_byte_buffer *bb) {
  if (bb)
    unary_received(c, bb);
  else
    finish(c, NULL, PTS_INVALID_ARG, "the call carried no request message");
  if (bb) grpc_byte_buffer_destroy(bb);
}

/* ------------------------------------------------------------------ */
/* streams                                                             */

/* Starts the next queued message, or the final status when nothing is
 * left to send, in the core or to read. c->mu held. */
static void stream_progress_locked(struct call *c) {
  if (c->finish_started) return;
  if (c->recv_paused && !c->closing && c->in_flight + c->n_out < STREAM_WINDOW / 2) {
    c->recv_paused = false;
    if (!start_recv_locked(c)) c->closing = true;
  }
  if (c->send_bb) return;
  if (c->out_head && !c->closing) {
    struct out_msg *m = c->out_head;
    c->out_head = m->next;
    c->n_out--;
    if (!c->out_head) c->out_tail = NULL;
    c->send_bb = m->bb;
    pts_free(m);
    grpc_op ops[2];
    size_t n = add_initial_md(c, &ops[0]);
    memset(&ops[n], 0, sizeof ops[n]);
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = c->send_bb;
    n++;
    if (start_locked(c, ops, n, &c->send_tag)) return;
    grpc_byte_buffer_destroy(c->send_bb);
    c->send_bb = NULL;
    c->closing = true; /* the call is broken: stop sending */
  }
  if (c->in_flight > 0 || !(c->half_closed || c->closing)) return;
  if (c->out_head && !c->closing) return;
  enum pts_status code = c->closing && c->status_errors ? c->close_code : PTS_OK;
  /* A receive may still be outstanding while closing; RECV_CLOSE only
   * when the client has finished sending. */
  finish_locked(c, NULL, code, c->close_msg, c->half_closed);
}

/* Queues one ModelStreamInferResponse. c->mu held; takes `reply`. */
static void stream_send_locked(struct call *c, struct pts_grpc_reply *reply) {
  if (c->closing || c->finish_started) {
    pts_grpc_reply_clear(reply);
    return;
  }
  struct out_msg *m = pts_calloc(1, sizeof *m);
  grpc_byte_buffer *bb = m ? reply_bb(reply) : NULL;
  if (!bb) {
    pts_grpc_reply_clear(reply);
    pts_free(m);
    PTS_LOG_ERROR("gRPC: out of memory queueing a stream response; closing the stream");
    c->closing = true;
    c->close_code = PTS_NOMEM;
    snprintf(c->close_msg, sizeof c->close_msg, "out of memory sending a stream response");
    return;
  }
  m->bb = bb;
  if (c->out_tail)
    c->out_tail->next = m;
  else
    c->out_head = m;
  c->out_tail = m;
  c->n_out++;
}

/* A failed request on a stream: in-band error_message, or with
 * triton_grpc_error the stream's status. c->mu held. */
static void stream_error_locked(struct call *c, const char *id, const struct pts_error *err) {
  if (c->status_errors) {
    if (!c->closing) {
      c->closing = true;
      c->close_code = err->code;
      snprintf(c->close_msg, sizeof c->close_msg, "%s", err->msg);
    }
    return;
  }
  struct pts_grpc_reply reply = {0, NULL, 0};
  struct pts_error e2;
  if (pts_grpc_encode_stream_error(id, err->msg, &reply, &e2) == PTS_OK)
    stream_send_locked(c, &reply);
}

static void on_stream_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                           const struct pts_error *ierr, void *ctx) {
  struct call *c = ctx;
  struct pts_error err;
  struct pts_grpc_reply reply = {0, NULL, 0};
  pts_grpc_encode_done(req, resp, ierr, true, &reply, &err);
  pthread_mutex_lock(&c->mu);
  c->in_flight--;
  if (err.code == PTS_OK)
    stream_send_locked(c, &reply);
  else
    stream_error_locked(c, req->id, &err);
  stream_progress_locked(c);
  pthread_mutex_unlock(&c->mu);
  pts_trace_record(req->trace, PTS_TRACE_GRPC_SEND_END, pts_now_ns());
  pts_infer_request_free(req);
  pts_infer_response_free(resp);
  call_unref(c);
}

/* The request id, for an in-band error about a message that could not be
 * admitted. */
static char *request_id(grpc_byte_buffer *bb) {
  struct pts_buf *msg = NULL;
  struct pts_error err;
  if (message_buf(bb, &msg, &err) != PTS_OK) return NULL;
  char *id = pts_grpc_request_id(msg);
  pts_buf_release(msg);
  return id;
}

static void stream_received(struct call *c, grpc_byte_buffer *bb) {
  struct pts_error err;
  pts_error_clear(&err);
  struct pts_infer_request *req = decode_request(c, bb, on_stream_done, &err);
  char *id = NULL;
  if (!req) {
    id = request_id(bb);
  } else {
    id = req->id ? pts_strdup(req->id) : NULL;
    if (submit(c, req, &err) == PTS_OK) {
      pts_free(id);
      return;
    }
  }
  pthread_mutex_lock(&c->mu);
  stream_error_locked(c, id, &err);
  pthread_mutex_unlock(&c->mu);
  pts_free(id);
}

static bool metadata_is_true(const grpc_metadata_array *md, const char *key) {
  for (size_t i = 0; i < md->count; i++) {
    const grpc_metadata *m = &md->metadata[i];
    if (grpc_slice_str_cmp(m->key, key) == 0) {
      size_t len = GRPC_SLICE_LENGTH(m->value);
      return len == 4 && strncasecmp((const char *)GRPC_SLICE_START_PTR(m->value), "true", 4) == 0;
    }
  }
  return false;
}

/* ------------------------------------------------------------------ */
/* events                                                              */

/* Asks gRPC core for the next call on `q`: a ModelInfer call with its
 * message when `registered`, else any other call. */
static void request_call(struct pts_grpc *g, struct queue *q, bool registered) {
  struct call *c = call_new(g, q);
  if (!c) {
    PTS_LOG_ERROR("gRPC: out of memory waiting for a new call");
    return;
  }
  c->registered = registered;
  grpc_call_error e =
      registered ? grpc_server_request_registered_call(g->gs, g->infer_method, &c->call,
                                                       &c->deadline, &c->md, &c->recv_bb, q->cq,
                                                       q->cq, &c->new_tag)
                 : grpc_server_request_call(g->gs, &c->call, &c->details, &c->md, q->cq, q->cq,
                                            &c->new_tag);
  if (e != GRPC_CALL_OK) {
    PTS_LOG_ERROR("gRPC: grpc_server_request_call failed (grpc_call_error %d)", (int)e);
    call_free(c);
  }
}

static void on_new_call(struct call *c, bool ok) {
  struct pts_grpc *g = c->g;
  if (!ok) { /* the server is shutting down */
    call_free(c);
    return;
  }
  if (!atomic_load(&g->stopping)) request_call(g, c->q, c->registered);
  c->refs = 1; /* held across this function so no batch completion frees it */
  const char *path;
  size_t len;
  if (c->registered) { /* gRPC core leaves details empty for these */
    c->rpc = g->infer_rpc;
    path = PTS_GRPC_INFER_PATH;
    len = sizeof PTS_GRPC_INFER_PATH - 1;
  } else {
    path = (const char *)GRPC_SLICE_START_PTR(c->details.method);
    len = GRPC_SLICE_LENGTH(c->details.method);
    c->rpc = pts_grpc_rpc_find(path, len);
  }
  bool received = false; /* the registered call's message is here: handle it below */
  PTS_LOG_VERBOSE(1, "gRPC: %.*s", (int)len, path);
  struct pts_error rerr;
  pthread_mutex_lock(&c->mu);
  if (!c->rpc) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "unknown method %.*s: ptserve serves GRPCInferenceService and "
             "grpc.health.v1.Health/Check",
             (int)(len > 120 ? 120 : len), path);
    finish_locked(c, NULL, PTS_UNSUPPORTED, msg, false);
  } else if (pts_grpc_restriction_check(&g->restrictions, path, len, &c->md, &rerr) != PTS_OK) {
    finish_locked(c, NULL, rerr.code, rerr.msg, false);
  } else {
    if (c->rpc->kind == PTS_GRPC_STREAM)
      c->status_errors = metadata_is_true(&c->md, "triton_grpc_error");
    if (c->registered)
      received = true;
    else if (!start_recv_locked(c))
      finish_locked(c, NULL, PTS_INTERNAL, "failed to read the request", false);
  }
  pthread_mutex_unlock(&c->mu);
  if (received) {
    grpc_byte_buffer *bb = c->recv_bb;
    c->recv_bb = NULL;
    unary_arrived(c, bb);
  }
  call_unref(c);
}

static void on_recv(struct call *c, bool ok) {
  grpc_byte_buffer *bb = ok ? c->recv_bb : NULL;
  if (!ok && c->recv_bb) grpc_byte_buffer_destroy(c->recv_bb);
  c->recv_bb = NULL;
  if (c->rpc->kind != PTS_GRPC_STREAM) {
    unary_arrived(c, bb);
    bb = NULL; /* destroyed there */
  } else {
    pthread_mutex_lock(&c->mu);
    bool closing = c->closing;
    if (!bb) c->half_closed = true;
    pthread_mutex_unlock(&c->mu);
    if (bb && !closing) stream_received(c, bb);
    pthread_mutex_lock(&c->mu);
    if (bb && !c->closing && !c->finish_started) {
      if (c->in_flight + c->n_out >= STREAM_WINDOW) {
        PTS_LOG_VERBOSE(1, "gRPC: stream window full (%zu requests pending); pausing reads",
                        c->in_flight + c->n_out);
        c->recv_paused = true;
      } else if (!start_recv_locked(c))
        c->closing = true;
    }
    stream_progress_locked(c);
    pthread_mutex_unlock(&c->mu);
  }
  if (bb) grpc_byte_buffer_destroy(bb);
  call_unref(c);
}

static void on_send(struct call *c, bool ok) {
  pthread_mutex_lock(&c->mu);
  grpc_byte_buffer_destroy(c->send_bb);
  c->send_bb = NULL;
  if (!ok) c->closing = true; /* the peer is gone: drop what is queued */
  stream_progress_locked(c);
  pthread_mutex_unlock(&c->mu);
  call_unref(c);
}

static void handle_event(struct pts_grpc *g, grpc_event ev) {
  struct tag *t = ev.tag;
  bool ok = ev.success != 0;
  switch (t->kind) {
    case TAG_NEW_CALL:
      on_new_call(t->call, ok);
      break;
    case TAG_RECV:
      on_recv(t->call, ok);
      break;
    case TAG_SEND:
      on_send(t->call, ok);
      break;
    case TAG_FINISH:
      call_unref(t->call);
      break;
    case TAG_SHUTDOWN:
      pthread_mutex_lock(&g->mu);
      g->shutdown_done = true;
      pthread_cond_broadcast(&g->changed);
      pthread_mutex_unlock(&g->mu);
      break;
  }
}

static void *queue_main(void *arg) {
  struct queue *q = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(q->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
    if (ev.type == GRPC_OP_COMPLETE) handle_event(q->g, ev);
  }
  return NULL;
}

/* ------------------------------------------------------------------ */
/* start and stop                                                      */

static void arg_int(grpc_arg *a, const char *key, int v) {
  a->type = GRPC_ARG_INTEGER;
  a->key = (char *)key;
  a->value.integer = v;
}

static size_t channel_args(const struct pts_server_options *o, grpc_resource_quota *quota,
                           grpc_arg *a) {
  size_t n = 0;
  /* gRPC reads whole messages before a call sees them: its resource quota
   * bounds what its transports buffer, the budget what the server keeps
   * (decode_request). */
  if (quota) {
    a[n].type = GRPC_ARG_POINTER;
    a[n].key = (char *)GRPC_ARG_RESOURCE_QUOTA;
    a[n].value.pointer.p = quota;
    a[n].value.pointer.vtable = grpc_resource_quota_arg_vtable();
    n++;
  }
  /* Triton's message limits: INT32_MAX both ways. */
  arg_int(&a[n++], GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, INT_MAX);
  arg_int(&a[n++], GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, INT_MAX);
  arg_int(&a[n++], GRPC_ARG_ALLOW_REUSEPORT, o->reuse_grpc_port ? 1 : 0);
  arg_int(&a[n++], GRPC_ARG_KEEPALIVE_TIME_MS, o->grpc_keepalive_time_ms);
  arg_int(&a[n++], GRPC_ARG_KEEPALIVE_TIMEOUT_MS, o->grpc_keepalive_timeout_ms);
  arg_int(&a[n++], GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
          o->grpc_keepalive_permit_without_calls ? 1 : 0);
  arg_int(&a[n++], GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, o->grpc_http2_max_pings_without_data);
  arg_int(&a[n++], GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
          o->grpc_http2_min_recv_ping_interval_ms);
  arg_int(&a[n++], GRPC_ARG_HTTP2_MAX_PING_STRIKES, o->grpc_http2_max_ping_strikes);
  if (o->grpc_max_connection_age_ms >= 0)
    arg_int(&a[n++], GRPC_ARG_MAX_CONNECTION_AGE_MS, o->grpc_max_connection_age_ms);
  if (o->grpc_max_connection_age_grace_ms >= 0)
    arg_int(&a[n++], GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, o->grpc_max_connection_age_grace_ms);
  return n;
}

/* Waits until `flag` (guarded by g->mu) is set or `seconds` pass. */
static bool wait_for(struct pts_grpc *g, bool (*done)(struct pts_grpc *), unsigned seconds) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += seconds;
  pthread_mutex_lock(&g->mu);
  bool ok;
  while (!(ok = done(g)))
    if (pthread_cond_timedwait(&g->changed, &g->mu, &until) != 0) {
      ok = done(g);
      break;
    }
  pthread_mutex_unlock(&g->mu);
  return ok;
}

static bool is_shut_down(struct pts_grpc *g) { return g->shutdown_done; }

static void destroy_queues(struct pts_grpc *g) {
  for (size_t i = 0; i < g->n_queues; i++) {
    struct queue *q = &g->queues[i];
    if (!q->cq) continue;
    grpc_completion_queue_shutdown(q->cq);
    if (q->thread_started) {
      pthread_join(q->thread, NULL);
    } else {
      while (grpc_completion_queue_next(q->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
             GRPC_QUEUE_SHUTDOWN) {
      }
    }
    grpc_completion_queue_destroy(q->cq);
  }
}

static void grpc_free(struct pts_grpc *g) {
  if (g->quota) grpc_resource_quota_unref(g->quota);
  if (g->creds) grpc_server_credentials_release(g->creds);
  pts_restrictions_clear(&g->restrictions);
  pts_free(g->queues);
  pthread_cond_destroy(&g->changed);
  pthread_mutex_destroy(&g->mu);
  pts_free(g);
  grpc_shutdown();
}

/* gRPC's own log lines (gpr_log) through ptserve's logger, with gRPC's file
 * and line, rate limited: nothing in the process writes another format. */
static void on_grpc_log(gpr_log_func_args *a) {
  static struct pts_log_limit limit;
  if (a->severity == GPR_LOG_SEVERITY_DEBUG) {
    pts_log_write(PTS_LOG_VERBOSE, 2, a->file, a->line, "gRPC: %s", a->message);
    return;
  }
  unsigned long dropped = 0;
  if (!pts_log_limit_allow(&limit, 100000000u, &dropped)) return;
  char more[80] = "";
  if (dropped) snprintf(more, sizeof more, " (and %lu more gRPC messages dropped)", dropped);
  pts_log_write(a->severity == GPR_LOG_SEVERITY_ERROR ? PTS_LOG_ERROR : PTS_LOG_INFO, 0, a->file,
                a->line, "gRPC: %s%s", a->message, more);
}

/* The quota gRPC's transports get: the budget, but never so small that a
 * few connections' read buffers exhaust it. */
static size_t grpc_quota_size(size_t budget) {
  const size_t floor = (size_t)64 << 20;
  return budget < floor ? floor : budget;
}

/* The listener's loop: a new connection for gRPC core. */
static void take_fd(void *ctx, int fd) {
  struct pts_grpc *g = ctx;
  grpc_server_add_channel_from_fd(g->gs, fd, g->creds); /* gRPC owns fd now */
}

/* The listener's thread: a new connection for the nghttp2 transport, to
 * the loops in turn; loop 0 is this thread's own. */
static void take_fd_h2(void *ctx, int fd) {
  struct pts_grpc *g = ctx;
  size_t i = g->next_loop++ % g->n_loops;
  if (i == 0)
    pts_grpc_h2_accept(g->loops[0].h2, fd);
  else
    pts_grpc_h2_give(g->loops[i].h2, fd);
}

static void on_loop_stop(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  event_base_loopbreak(arg);
}

static void *loop_main(void *arg) {
  event_base_loop(arg, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

/* Stops the loops (the listener's with the listener) and frees the
 * transports; false when one is left behind (a call still in the core). */
static bool stop_loops(struct pts_grpc *g) {
  pts_grpc_listen_halt(g->listen);
  for (size_t i = 1; i < g->n_loops; i++) {
    struct h2_loop *lp = &g->loops[i];
    if (!lp->started) continue;
    event_active(lp->stop_ev, EV_READ, 0);
    pthread_join(lp->thread, NULL);
  }
  bool all = true;
  for (size_t i = 0; i < g->n_loops; i++) all &= pts_grpc_h2_free(g->loops[i].h2);
  if (!all) return false;
  for (size_t i = 1; i < g->n_loops; i++) {
    if (g->loops[i].stop_ev) event_free(g->loops[i].stop_ev);
    if (g->loops[i].base) event_base_free(g->loops[i].base);
  }
  pts_grpc_listen_stop(g->listen);
  pts_restrictions_clear(&g->restrictions);
  pts_free(g->loops);
  pts_free(g->queues);
  pts_free(g);
  return true;
}

/* --grpc-transport nghttp2: --grpc-infer-thread-count libevent loops, the
 * first the listener's own (h2.h); gRPC core is not started. */
static enum pts_status start_h2(struct pts_grpc *g, const struct pts_server_options *o,
                                struct pts_grpc **out, struct pts_error *err) {
  g->n_loops = g->n_queues;
  g->loops = pts_calloc(g->n_loops, sizeof *g->loops);
  enum pts_status st = g->loops ? PTS_OK
                                : pts_error_set(err, PTS_NOMEM, "out of memory starting gRPC");
  for (size_t i = 0; st == PTS_OK && i < g->n_loops; i++) {
    struct h2_loop *lp = &g->loops[i];
    lp->base = i == 0 ? pts_grpc_listen_base(g->listen) : pts_libevent_loop_base();
    if (i > 0 && lp->base) lp->stop_ev = event_new(lp->base, -1, 0, on_loop_stop, lp->base);
    if (!lp->base || (i > 0 && !lp->stop_ev))
      st = pts_error_set(err, PTS_NOMEM, "out of memory starting gRPC");
    else
      st = pts_grpc_h2_new(g->server, o, &g->restrictions, lp->base, &lp->h2, err);
    if (st == PTS_OK && i > 0) {
      int rc = pthread_create(&lp->thread, NULL, loop_main, lp->base);
      if (rc != 0)
        st = pts_error_set(err, PTS_INTERNAL, "failed to start gRPC loop %zu: %s", i, strerror(rc));
      lp->started = rc == 0;
    }
  }
  if (st == PTS_OK) st = pts_grpc_listen_run(g->listen, take_fd_h2, g, err);
  if (st != PTS_OK) {
    if (g->loops) {
      stop_loops(g);
    } else {
      pts_grpc_listen_stop(g->listen);
      pts_restrictions_clear(&g->restrictions);
      pts_free(g->queues);
      pts_free(g);
    }
    return st;
  }
  PTS_LOG_INFO("gRPC: serving on nghttp2 (--grpc-transport nghttp2), %zu loop%s", g->n_loops,
               g->n_loops == 1 ? "" : "s");
  *out = g;
  return PTS_OK;
}

/* Shutdown of the nghttp2 transport: GOAWAY on every connection, the grace
 * for running calls, then the loops stop and what is left is closed. */
static void stop_h2(struct pts_grpc *g) {
  for (size_t i = 0; i < g->n_loops; i++) pts_grpc_h2_drain(g->loops[i].h2);
  struct timespec step = {0, 10 * 1000 * 1000};
  for (int k = 0; k < STOP_GRACE_S * 100; k++) {
    size_t live = 0;
    for (size_t i = 0; i < g->n_loops; i++) live += pts_grpc_h2_live(g->loops[i].h2);
    if (live == 0) break;
    nanosleep(&step, NULL);
  }
  stop_loops(g); /* a transport left behind says so */
}

enum pts_status pts_grpc_start(struct pts_server *s, const struct pts_server_options *o,
                               struct pts_grpc **out, struct pts_error *err) {
  gpr_set_log_function(on_grpc_log);
  struct pts_grpc *g = pts_calloc(1, sizeof *g);
  /* Not given: nghttp2's loops are independent, as the HTTP loops (a
   * connection stays on one), so one per core; gRPC core's queue threads
   * are not (server.c says why it gets one). */
  size_t nq = o->grpc_infer_thread_count > 0 ? (size_t)o->grpc_infer_thread_count
              : o->grpc_nghttp2             ? (size_t)pts_server_default_loops()
                                            : 1;
  if (g) g->queues = pts_calloc(nq, sizeof *g->queues);
  if (!g || !g->queues) {
    pts_free(g);
    return pts_error_set(err, PTS_NOMEM, "out of memory starting the gRPC frontend");
  }
  enum pts_status rst = pts_grpc_restrictions_parse(
      o->grpc_restricted_protocol, o->n_grpc_restricted_protocol, &g->restrictions, err);
  /* The port is ours, not gRPC's: listen_grpc.h says why. */
  if (rst == PTS_OK) rst = pts_grpc_listen_open(o, &g->listen, &g->port, err);
  if (rst != PTS_OK) {
    pts_restrictions_clear(&g->restrictions);
    pts_free(g->queues);
    pts_free(g);
    return rst;
  }
  g->server = s;
  g->compression_level = o->grpc_compression_level;
  g->n_queues = nq;
  if (o->grpc_nghttp2) return start_h2(g, o, out, err);
  pts_absl_detector_off();
  grpc_init();
  g->shutdown_tag.kind = TAG_SHUTDOWN;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->changed, NULL);
  g->quota = grpc_resource_quota_create("ptserve");
  if (g->quota) grpc_resource_quota_resize(g->quota, grpc_quota_size(pts_overload_budget()));
  grpc_arg args[16];
  grpc_channel_args ca = {channel_args(o, g->quota, args), args};
  g->gs = grpc_server_create(&ca, NULL);
  g->infer_rpc = pts_grpc_rpc_find(PTS_GRPC_INFER_PATH, strlen(PTS_GRPC_INFER_PATH));
  g->infer_method = grpc_server_register_method(g->gs, PTS_GRPC_INFER_PATH, NULL,
                                                GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
  for (size_t i = 0; i < nq; i++) {
    g->queues[i].g = g;
    g->queues[i].cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(g->gs, g->queues[i].cq, NULL);
  }
  grpc_server_start(g->gs);
  for (size_t i = 0; i < nq; i++) {
    struct queue *q = &g->queues[i];
    for (int k = 0; k < CALLS_PER_QUEUE; k++) {
      request_call(g, q, false);
      if (g->infer_method) request_call(g, q, true);
    }
    if (pthread_create(&q->thread, NULL, queue_main, q) == 0)
      q->thread_started = true;
    else
      PTS_LOG_ERROR("gRPC: failed to start completion-queue thread %zu", i);
  }
  g->creds = grpc_insecure_server_credentials_create();
  enum pts_status st = g->creds ? pts_grpc_listen_run(g->listen, take_fd, g, err)
                                : pts_error_set(err, PTS_NOMEM, "out of memory starting gRPC");
  if (st != PTS_OK) {
    pts_grpc_stop(g);
    return st;
  }
  PTS_LOG_INFO("gRPC: serving on gRPC core (--grpc-transport core), %zu completion-queue "
               "thread%s",
               nq, nq == 1 ? "" : "s");
  *out = g;
  return PTS_OK;
}

unsigned long pts_grpc_max_connections(const struct pts_grpc *g) {
  return g ? pts_grpc_listen_max_connections(g->listen) : 0;
}

int pts_grpc_port(const struct pts_grpc *g) { return g ? g->port : 0; }

void pts_grpc_stop(struct pts_grpc *g) {
  if (!g) return;
  if (g->loops) {
    stop_h2(g);
    return;
  }
  atomic_store(&g->stopping, true);
  pts_grpc_listen_stop(g->listen); /* no new connections */
  g->listen = NULL;
  grpc_server_shutdown_and_notify(g->gs, g->queues[0].cq, &g->shutdown_tag);
  if (!wait_for(g, is_shut_down, STOP_GRACE_S)) {
    grpc_server_cancel_all_calls(g->gs);
    if (!wait_for(g, is_shut_down, STOP_CANCEL_S)) {
      /* A call still waits for a request the core never answered: freeing
       * now would let that completion touch freed memory. */
      PTS_LOG_WARN("gRPC: calls still running after %d s; leaving the gRPC service behind",
                   STOP_GRACE_S + STOP_CANCEL_S);
      return;
    }
  }
  grpc_server_destroy(g->gs);
  destroy_queues(g);
  grpc_free(g);
}
