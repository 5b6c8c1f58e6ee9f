/* frontend/grpc/h2_call.c — the nghttp2 transport's calls (h2.h; the
 * structures in h2_priv.h): a stream's request headers and messages, their
 * dispatch to the core, the answers queued per call and written into DATA
 * frames, the grpc-status trailers. The connections are h2.c's. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/header_forward.h"
#include "core/log.h"
#include "core/overload.h"
#include "core/pinned.h"
#include "frontend/grpc/admit.h"
#include "frontend/grpc/h2_priv.h"
#include "frontend/grpc/restrict_grpc.h"
#include "frontend/grpc/rpc.h"
#include "frontend/http/compress.h"
#include "trace/trace.h"

/* ------------------------------------------------------------------ */
/* calls                                                               */

/* Drops one reference (struct out_msg's refs): the last frees the message
 * and its reply. */
static void out_free(struct out_msg *m) {
  if (--m->refs) return;
  pts_grpc_reply_clear(&m->reply);
  pts_free(m->message);
  pts_free(m);
}

/* evbuffer's cleanup of a reply piece it held by reference: written, or
 * the connection's output freed. */
static void out_piece_done(const void *data, size_t len, void *arg) {
  (void)data;
  (void)len;
  out_free(arg);
}

static void out_free_list(struct out_msg *m) {
  while (m) {
    struct out_msg *next = m->next;
    out_free(m);
    m = next;
  }
}

/* A connection's two lists of calls (conn->calls, conn->orphans) share
 * the calls' prev/next: a call is on one of them at most. */
static void list_push(struct call **head, size_t *n, struct call *c) {
  c->prev = NULL;
  c->next = *head;
  if (*head) (*head)->prev = c;
  *head = c;
  (*n)++;
}

static void list_unlink(struct call **head, size_t *n, struct call *c) {
  if (c->prev)
    c->prev->next = c->next;
  else
    *head = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  (*n)--;
}

static struct call *call_new(struct conn *cn, int32_t id) {
  struct call *c = pts_calloc(1, sizeof *c);
  if (!c) return NULL;
  c->h = cn->h;
  c->conn = cn;
  c->id = id;
  c->timeout_us = -1;
  list_push(&cn->calls, &cn->n_calls, c);
  atomic_fetch_add(&cn->h->live, 1);
  return c;
}

/* Off its connection's list: it is an orphan from now on. */
static void call_detach(struct call *c) {
  struct conn *cn = c->conn;
  if (!cn) return;
  if (cn->heading == c) cn->heading = NULL;
  list_unlink(&cn->calls, &cn->n_calls, c);
  c->conn = NULL;
}

/* Off its origin's orphans (freed, or the connection is). */
static void orphan_unlink(struct call *c) {
  struct conn *cn = c->origin;
  if (!cn) return;
  list_unlink(&cn->orphans, &cn->n_orphans, c);
  c->origin = NULL;
}

static void call_drop_input(struct call *c) {
  pts_buf_release(c->msg);
  c->msg = NULL;
  pts_buf_release(c->unary_msg);
  c->unary_msg = NULL;
  pts_overload_release(c->charged);
  c->charged = 0;
}

static void call_free(struct call *c) {
  call_detach(c);
  orphan_unlink(c);
  call_drop_input(c);
  out_free_list(c->out_head);
  out_free_list(c->done_head); /* none: nothing is in the core */
  pts_free(c->close_msg);
  for (size_t i = 0; i < c->n_fwd; i++) {
    pts_free(c->fwd[i].key);
    pts_free(c->fwd[i].v.s);
  }
  pts_free(c->fwd);
  if (c->deadline_ev) event_free(c->deadline_ev);
  atomic_fetch_sub(&c->h->live, 1);
  pts_free(c);
}

void pts_grpc_h2_conn_calls_release(struct conn *cn) {
  while (cn->calls) {
    struct call *c = cn->calls;
    if (c->n_core)
      call_detach(c); /* freed by its last completion */
    else
      call_free(c);
  }
  while (cn->orphans) orphan_unlink(cn->orphans); /* they go on, counted nowhere */
}

/* ------------------------------------------------------------------ */
/* answers                                                             */

/* grpc-message is percent-encoded: bytes outside printable ASCII and '%'
 * (the gRPC HTTP/2 spec). `out` holds 3 * strlen(in) + 1. */
static size_t percent_encode(const char *in, char *out) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
    if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
      out[n++] = (char)*p;
    } else {
      out[n++] = '%';
      out[n++] = hex[*p >> 4];
      out[n++] = hex[*p & 15];
    }
  }
  out[n] = '\0';
  return n;
}

#define NV(name, value, vlen) \
  {(uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, (vlen), NGHTTP2_NV_FLAG_NONE}
/* A header whose name and value are static: nghttp2 keeps the pointers
 * instead of copying the bytes into the frame's own array. */
#define NV_STATIC(name, value, vlen)                                  \
  {(uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, (vlen), \
   NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE}

/* grpc-status values, 0 to 16 (a table: snprintf was 1% of a unary call). */
static const char *const GRPC_CODES[] = {"0", "1", "2",  "3",  "4",  "5",  "6",  "7", "8",
                                         "9", "10", "11", "12", "13", "14", "15", "16"};

/* Ends the call with its status: trailers after the messages, or the whole
 * response as trailers when nothing was sent (trailers-only). */
static int submit_status(struct call *c, bool trailers_only) {
  enum pts_status code = c->closing ? c->close_code : PTS_OK;
  int g = pts_status_grpc(code);
  const char *status = g >= 0 && g <= 16 ? GRPC_CODES[g] : GRPC_CODES[2]; /* 2: UNKNOWN */
  const char *msg = code == PTS_OK ? "" : c->close_msg ? c->close_msg : pts_status_name(code);
  char *enc = *msg ? pts_malloc(3 * strlen(msg) + 1) : NULL;
  size_t elen = enc ? percent_encode(msg, enc) : 0;
  const nghttp2_nv nv[] = {NV_STATIC(":status", "200", 3),
                           NV_STATIC("content-type", "application/grpc", 16),
                           NV_STATIC("grpc-status", status, strlen(status)),
                           NV("grpc-message", enc ? enc : "", elen)};
  size_t n = elen ? 4 : 3;
  c->finished = true;
  int rv = trailers_only ? nghttp2_submit_response(c->conn->s, c->id, nv, n, NULL)
                         : nghttp2_submit_trailer(c->conn->s, c->id, nv + 2, n - 2);
  pts_free(enc);
  return rv;
}

/* A paused stream gets its window back once below half of
 * STREAM_PENDING_MAX: the client may send again (a WINDOW_UPDATE, queued
 * even from inside nghttp2's send). */
static void maybe_unpause(struct call *c) {
  if (c->paused && c->n_core + c->n_out < STREAM_PENDING_MAX / 2) {
    c->paused = false;
    nghttp2_session_consume_stream(c->conn->s, c->id, c->unconsumed);
    c->unconsumed = 0;
  }
}

/* Whether everything is said: nothing in the core, nothing more to read
 * (or closing), nothing left to send. */
static bool call_done(const struct call *c) {
  return c->n_core == 0 && (c->half_closed || c->closing) && (!c->out_head || c->closing);
}

/* DATA frames of at least this many bytes carry the reply's pieces by
 * reference (NGHTTP2_DATA_FLAG_NO_COPY, reply_send): a large answer is
 * neither copied into nghttp2's frame buffer nor again into the output
 * evbuffer. Smaller ones are copied: a reference costs an evbuffer chain. */
#define NO_COPY_MIN 4096

/* Hands the next `len` queued bytes (prefix, then the reply's pieces, of
 * one message after another) on: copied to `buf`, or, with `buf` NULL,
 * added to `out` (the 5-byte prefixes copied, the pieces by reference, each
 * holding its message). A message handed on whole leaves the list. Returns
 * -1 when the evbuffer could not take a piece. */
static int out_take(struct call *c, size_t len, uint8_t *buf, struct evbuffer *out) {
  while (len && c->out_head) {
    struct out_msg *m = c->out_head;
    size_t total = PREFIX + m->reply.size, at = m->at, take;
    const uint8_t *from;
    bool piece = at >= PREFIX;
    if (!piece) {
      take = PREFIX - at < len ? PREFIX - at : len;
      from = m->prefix + at;
    } else {
      /* The piece holding byte `at`: replies have a handful of pieces. */
      size_t off = at - PREFIX, i = 0;
      while (off >= m->reply.pieces[i].size) off -= m->reply.pieces[i++].size;
      const struct pts_grpc_piece *p = &m->reply.pieces[i];
      take = p->size - off < len ? p->size - off : len;
      from = (const uint8_t *)p->data + off;
    }
    if (buf) {
      memcpy(buf, from, take);
      buf += take;
    } else if (!piece) {
      if (evbuffer_add(out, from, take) != 0) return -1;
    } else {
      m->refs++;
      if (evbuffer_add_reference(out, from, take, out_piece_done, m) != 0) {
        m->refs--;
        return -1;
      }
    }
    len -= take;
    m->at += take;
    if (m->at == total) {
      c->out_head = m->next;
      if (!c->out_head) c->out_tail = NULL;
      c->n_out--;
      out_free(m);
      maybe_unpause(c);
    }
  }
  return 0;
}

/* The data source of a call's response: up to `length` queued bytes for
 * the next DATA frame, copied into nghttp2's frame buffer or, for a large
 * frame, left to reply_send; the status trailer after the last. */
static ssize_t reply_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                          uint32_t *flags, nghttp2_data_source *src, void *u) {
  (void)s;
  (void)id;
  (void)u;
  struct call *c = src->ptr;
  if (c->closing) { /* a status error or a dead stream: what is queued is dropped */
    out_free_list(c->out_head);
    c->out_head = c->out_tail = NULL;
    c->n_out = 0;
  }
  size_t queued = 0; /* all of it, or past `length`: then no EOF yet */
  for (const struct out_msg *m = c->out_head; m && queued <= length; m = m->next)
    queued += PREFIX + m->reply.size - m->at;
  size_t n = queued < length ? queued : length;
  if (n >= NO_COPY_MIN)
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY; /* reply_send takes the bytes */
  else
    out_take(c, n, buf, NULL);
  /* call_done, as it will be once these n bytes are taken. */
  if (n == queued && c->n_core == 0 && (c->half_closed || c->closing)) {
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    if (submit_status(c, false) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
  } else if (n == 0) {
    c->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

/* A DATA frame reply_read left uncopied: its header, then its `length`
 * bytes by reference, into the connection's output (send_out writes it).
 * ptserve never pads frames (no select_padding callback). */
static int reply_send(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t length,
                      nghttp2_data_source *src, void *u) {
  (void)s;
  struct conn *cn = u;
  if (f->data.padlen > 0 || evbuffer_add(cn->out, framehd, 9) != 0 ||
      out_take(src->ptr, length, NULL, cn->out) != 0)
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  return 0;
}

/* Moves the call along after anything changed: gives a paused stream its
 * window back, starts the response or resumes its data, ends the call. */
static void progress(struct call *c) {
  struct conn *cn = c->conn;
  if (!cn || c->finished) return;
  pts_grpc_h2_mark_dirty(cn);
  maybe_unpause(c);
  if (!c->started) {
    if (call_done(c)) {
      if (submit_status(c, true) != 0)
        nghttp2_submit_rst_stream(cn->s, NGHTTP2_FLAG_NONE, c->id, NGHTTP2_INTERNAL_ERROR);
      return;
    }
    if (!c->out_head || c->closing) return;
    const char *enc = pts_http_encoding_name(c->resp_enc);
    const nghttp2_nv head[] = {NV_STATIC(":status", "200", 3),
                               NV_STATIC("content-type", "application/grpc", 16),
                               NV_STATIC("grpc-encoding", enc, strlen(enc))};
    nghttp2_data_provider dp = {.source.ptr = c, .read_callback = reply_read};
    c->started = true;
    size_t n = c->resp_enc == PTS_HTTP_ENC_IDENTITY ? 2 : 3;
    if (nghttp2_submit_response(cn->s, c->id, head, n, &dp) != 0)
      nghttp2_submit_rst_stream(cn->s, NGHTTP2_FLAG_NONE, c->id, NGHTTP2_INTERNAL_ERROR);
    return;
  }
  if (c->deferred && (c->out_head || call_done(c))) {
    c->deferred = false;
    nghttp2_session_resume_data(cn->s, c->id);
  }
}

/* Ends the call with `code` once what is in the core is back (a unary
 * call's error; a stream's with triton_grpc_error). The first one counts. */
static void call_close(struct call *c, enum pts_status code, const char *msg) {
  if (!c->closing) {
    c->closing = true;
    c->close_code = code;
    c->close_msg = pts_strdup(msg);
  }
  call_drop_input(c);
  progress(c);
}

static void call_fail(struct call *c, enum pts_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void call_fail(struct call *c, enum pts_status code, const char *fmt, ...) {
  struct pts_error err;
  va_list ap;
  va_start(ap, fmt);
  pts_error_setv(&err, code, fmt, ap);
  va_end(ap);
  call_close(c, err.code, err.msg);
}

/* Queues one encoded message; takes `reply`. */
static void call_send(struct call *c, struct out_msg *m) {
  uint32_t len = (uint32_t)m->reply.size;
  m->prefix[0] = m->compressed ? 1 : 0;
  m->prefix[1] = (uint8_t)(len >> 24);
  m->prefix[2] = (uint8_t)(len >> 16);
  m->prefix[3] = (uint8_t)(len >> 8);
  m->prefix[4] = (uint8_t)len;
  m->next = NULL;
  if (c->out_tail)
    c->out_tail->next = m;
  else
    c->out_head = m;
  c->out_tail = m;
  c->n_out++;
}

/* Any thread: one completion of the call, `m` (taken; NULL when it could
 * not be allocated), for the loop. */
static void hand_back(struct call *c, struct out_msg *m) {
  struct pts_grpc_h2 *h = c->h;
  pthread_mutex_lock(&h->mu);
  if (!m)
    c->n_lost++;
  else if (c->done_tail)
    c->done_tail->next = m;
  else
    c->done_head = m;
  if (m) c->done_tail = m;
  bool wake = false;
  if (!c->in_ready) {
    c->in_ready = true;
    c->ready_next = h->ready;
    h->ready = c;
    atomic_store_explicit(&h->any_ready, true, memory_order_relaxed);
    /* On the loop's own thread (run to completion inside
     * pts_server_infer_async, under on_read) the read callback takes it
     * when mem_recv returns: no wake-up, no extra callback. */
    wake = !h->wake_pending && !pthread_equal(pthread_self(), h->loop_thread);
    if (wake) h->wake_pending = true;
  }
  pthread_mutex_unlock(&h->mu);
  if (wake) event_active(h->wake_ev, EV_READ, 0);
}

/* A completion as a message: the reply (taken), or the error. NULL when
 * out of memory (the reply is released). */
static struct out_msg *out_new(struct pts_grpc_reply *reply, const struct pts_error *err) {
  struct out_msg *m = pts_calloc(1, sizeof *m);
  if (!m) {
    pts_grpc_reply_clear(reply);
    return NULL;
  }
  m->refs = 1;
  if (err && err->code != PTS_OK) {
    m->code = err->code;
    m->message = pts_strdup(err->msg);
    pts_grpc_reply_clear(reply);
  } else if (reply) {
    m->reply = *reply;
    *reply = (struct pts_grpc_reply){0, NULL, 0};
  }
  return m;
}

/* The reply's pieces compressed into one (gzip or zlib's deflate, at
 * zlib level 1, 6 or 9 for low, medium, high), by HTTP's compressor. On
 * failure the reply is cleared and err set. */
static void compress_reply(enum pts_http_encoding enc, int level, struct pts_grpc_reply *reply,
                           struct pts_error *err) {
  static const int zlevel[] = {0, 1, 6, 9};
  struct pts_http_piece *in = pts_calloc(reply->n_pieces ? reply->n_pieces : 1, sizeof *in);
  struct pts_grpc_piece *piece = pts_calloc(1, sizeof *piece);
  void *z = NULL;
  size_t zlen = 0;
  struct pts_buf *out = NULL;
  enum pts_status st = PTS_NOMEM;
  if (in && piece) {
    for (size_t i = 0; i < reply->n_pieces; i++)
      in[i] = (struct pts_http_piece){reply->pieces[i].data, reply->pieces[i].size};
    st = pts_http_deflate(enc, zlevel[level & 3], in, reply->n_pieces, &z, &zlen, err);
  }
  pts_free(in);
  pts_grpc_reply_clear(reply);
  if (st == PTS_OK && !(out = pts_buf_wrap(z, zlen, NULL, NULL))) {
    pts_free(z);
    st = PTS_NOMEM;
  }
  if (st != PTS_OK) {
    pts_free(piece);
    if (st == PTS_NOMEM) pts_error_set(err, PTS_NOMEM, "out of memory compressing a response");
    return;
  }
  *piece = (struct pts_grpc_piece){out->data, out->size, out};
  *reply = (struct pts_grpc_reply){1, piece, out->size};
}

/* Instance thread, or the loop's own inside pts_server_infer_async. */
static void on_infer_done(struct pts_infer_request *req, struct pts_infer_response *resp,
                          const struct pts_error *ierr, void *ctx) {
  struct call *c = ctx;
  struct pts_error err;
  struct pts_grpc_reply reply = {0, NULL, 0};
  pts_grpc_encode_done(req, resp, ierr, c->stream, &reply, &err);
  pts_infer_response_free(resp);
  if (err.code != PTS_OK && c->stream && !c->status_errors) {
    /* in band: a ModelStreamInferResponse naming the failed request */
    struct pts_error e2;
    if (pts_grpc_encode_stream_error(req->id, err.msg, &reply, &e2) == PTS_OK)
      pts_error_clear(&err);
  }
  if (err.code == PTS_OK && c->resp_enc != PTS_HTTP_ENC_IDENTITY)
    compress_reply(c->resp_enc, c->h->compression_level, &reply, &err);
  pts_trace_record(req->trace, PTS_TRACE_GRPC_SEND_END, pts_now_ns());
  pts_infer_request_free(req); /* ends its trace */
  struct out_msg *m = out_new(&reply, &err);
  if (m) m->compressed = c->resp_enc != PTS_HTTP_ENC_IDENTITY && m->code == PTS_OK;
  hand_back(c, m);
}

/* Server thread: a repository rpc's answer. */
static void on_async_done(struct pts_grpc_reply *reply, const struct pts_error *err, void *arg) {
  hand_back(arg, out_new(reply, err));
}

/* One completion on the loop: a message to send, or an error that ends
 * the call. */
static void take_one(struct call *c, struct out_msg *m) {
  c->n_core--;
  if (!c->conn || c->closing) {
    out_free(m);
  } else if (m->code != PTS_OK) {
    call_close(c, m->code, m->message);
    out_free(m);
  } else {
    call_send(c, m);
  }
}

/* The completions that came back since the last look. */
void pts_grpc_h2_take_ready(struct pts_grpc_h2 *h) {
  /* Most reads come with no completion waiting: no lock then. A completion
   * that lands after this look wakes the loop itself. */
  if (!atomic_load_explicit(&h->any_ready, memory_order_relaxed)) return;
  /* Everything is moved out under one lock: once it is released, another
   * completion may put a call on the ready list again (ready_next). */
  pthread_mutex_lock(&h->mu);
  struct call *c = h->ready;
  h->ready = NULL;
  h->wake_pending = false;
  atomic_store_explicit(&h->any_ready, false, memory_order_relaxed);
  for (struct call *k = c; k; k = k->ready_next) {
    k->in_ready = false;
    k->taken = k->done_head;
    k->taken_lost = k->n_lost;
    k->taken_next = k->ready_next;
    k->done_head = k->done_tail = NULL;
    k->n_lost = 0;
  }
  pthread_mutex_unlock(&h->mu);
  while (c) {
    struct call *next = c->taken_next;
    struct out_msg *m = c->taken;
    size_t lost = c->taken_lost;
    c->taken = NULL;
    while (m) {
      struct out_msg *after = m->next;
      take_one(c, m);
      m = after;
    }
    c->n_core -= lost;
    if (lost && c->conn) call_close(c, PTS_NOMEM, "out of memory sending a response");
    if (!c->conn && c->n_core == 0)
      call_free(c);
    else
      progress(c);
    c = next;
  }
}

/* ------------------------------------------------------------------ */
/* requests                                                            */

/* The decompressed message of a call that sent grpc-encoding gzip or
 * deflate, by HTTP's decompressor, which stops at `max_out`: here the
 * request memory budget's room, so that a small message that inflates to
 * gigabytes is refused before it is. The errors are gRPC's: the budget's
 * message, and for a bad stream the one gRPC core's path gives. */
static struct pts_buf *inflate_msg(const struct pts_buf *in, enum pts_http_encoding enc,
                                   struct pts_error *err) {
  size_t held = pts_overload_held(), budget = pts_overload_budget();
  size_t room = budget > held ? budget - held : 0;
  struct pts_buf *out = NULL;
  switch (pts_http_inflate(in->data, in->size, room, enc, &out, err)) {
    case PTS_OK:
      return out;
    case PTS_TOO_LARGE:
      pts_error_set(err, PTS_EXHAUSTED,
                    "request message refused: decompressed, it would exceed the request memory "
                    "budget (%zu of %zu bytes held; --request-memory-budget)",
                    held, budget);
      return NULL;
    case PTS_INVALID_ARG:
      pts_error_set(err, PTS_INVALID_ARG,
                    "failed to read the request message (it could not be decompressed)");
      return NULL;
    default:
      return NULL;
  }
}

/* A stream request that never reached the core: an in-band error naming
 * it (`id` may be NULL; taken), or with triton_grpc_error the stream's
 * status. */
static void stream_reject(struct call *c, char *id, const struct pts_error *err) {
  if (c->status_errors) {
    pts_free(id);
    call_close(c, err->code, err->msg);
    return;
  }
  struct pts_grpc_reply reply = {0, NULL, 0};
  struct pts_error e2;
  struct out_msg *m = NULL;
  if (pts_grpc_encode_stream_error(id, err->msg, &reply, &e2) == PTS_OK)
    m = out_new(&reply, NULL);
  pts_free(id);
  if (m)
    call_send(c, m);
  else
    call_close(c, PTS_NOMEM, "out of memory sending a stream response");
}

/* A whole request message (`msg` taken, the budget's charge ended). */
static void dispatch(struct call *c, struct pts_buf *msg, bool compressed) {
  struct pts_error err;
  pts_error_clear(&err);
  if (compressed) {
    struct pts_buf *plain = inflate_msg(msg, c->req_enc, &err);
    pts_buf_release(msg);
    msg = plain;
  }
  struct pts_grpc_h2 *h = c->h;
  if (!msg) {
    if (c->stream)
      stream_reject(c, NULL, &err);
    else
      call_close(c, err.code, err.msg);
    return;
  }
  if (c->rpc->kind == PTS_GRPC_INFER || c->rpc->kind == PTS_GRPC_STREAM) {
    struct pts_infer_request *req = pts_grpc_admit(msg, on_infer_done, c, &err);
    /* Triton adds the forwarded metadata after the message's parameters. */
    if (req && c->fwd_failed) {
      pts_error_set(&err, PTS_NOMEM, "out of memory keeping the call's forwarded metadata");
      pts_infer_request_free(req);
      req = NULL;
    }
    for (size_t i = 0; req && i < c->n_fwd; i++) {
      if (pts_infer_request_add_param(req, &c->fwd[i], &err) != PTS_OK) {
        pts_infer_request_free(req);
        req = NULL;
      }
    }
    if (req) {
      c->n_core++;
      if (pts_server_infer_async(h->server, req, &err) == PTS_OK) {
        pts_buf_release(msg);
        if (c->stream && c->n_core + c->n_out >= STREAM_PENDING_MAX && !c->paused) {
          PTS_LOG_VERBOSE(1, "gRPC: stream window full (%zu requests pending); pausing reads",
                          c->n_core + c->n_out);
          c->paused = true;
        }
        return;
      }
      c->n_core--;
    }
    if (c->stream)
      stream_reject(c, !req ? pts_grpc_request_id(msg) : req->id ? pts_strdup(req->id) : NULL,
                    &err);
    else
      call_close(c, err.code, err.msg);
    pts_infer_request_free(req);
    pts_buf_release(msg);
  } else if (c->rpc->kind == PTS_GRPC_ASYNC) {
    c->n_core++;
    if (c->rpc->start(h->server, msg, on_async_done, c, &err) != PTS_OK) {
      c->n_core--;
      call_close(c, err.code, err.msg);
    }
    pts_buf_release(msg);
  } else {
    struct pts_grpc_reply reply = {0, NULL, 0};
    struct out_msg *m = NULL;
    if (c->rpc->fn(h->server, msg, &reply, &err) == PTS_OK) m = out_new(&reply, NULL);
    pts_buf_release(msg);
    if (m)
      call_send(c, m);
    else if (err.code != PTS_OK)
      call_close(c, err.code, err.msg);
    else
      call_close(c, PTS_NOMEM, "out of memory sending a response");
  }
}

/* The call's grpc-timeout has passed: it ends with DEADLINE_EXCEEDED
 * (what is queued is dropped; requests already in the core finish first,
 * their answers dropped). The connection's frames go out from the loop's
 * wake event (h2.c's on_wake flushes every dirty connection), which this
 * file activates rather than calling into h2.c, the file above it. */
static void on_deadline(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct call *c = arg;
  struct pts_grpc_h2 *h = c->h; /* call_close may free c */
  if (c->conn && !c->finished) call_close(c, PTS_DEADLINE, "Deadline Exceeded");
  event_active(h->wake_ev, 0, 0);
}

/* The request's headers are all in: refuse what can not be served. */
static bool headers_ok(struct call *c) {
  if (!c->post || !c->grpc_type) {
    /* Not a gRPC request at all: HTTP's answer (gRPC's spec: 415 for a
     * content-type it does not know). */
    static const nghttp2_nv head[] = {NV_STATIC(":status", "415", 3)};
    c->finished = c->closing = true;
    nghttp2_submit_response(c->conn->s, c->id, head, 1, NULL);
    pts_grpc_h2_mark_dirty(c->conn);
    return false;
  }
  if (!c->rpc) {
    call_fail(c, PTS_UNSUPPORTED,
              "unknown method %s: ptserve serves GRPCInferenceService and "
              "grpc.health.v1.Health/Check",
              c->path);
    return false;
  }
  if (c->rs && !c->rs_ok) {
    call_fail(c, PTS_UNAVAILABLE,
              "This protocol is restricted, expecting header '" PTS_GRPC_RESTRICTED_PREFIX "%s'",
              c->rs->header);
    return false;
  }
  if (c->req_enc == PTS_HTTP_ENC_UNKNOWN) {
    call_fail(c, PTS_UNSUPPORTED,
              "grpc-encoding of %s is not supported: ptserve reads identity, gzip and deflate",
              c->path);
    return false;
  }
  c->stream = c->rpc->kind == PTS_GRPC_STREAM;
  if (c->h->compression_level > 0 && (c->stream || c->rpc->kind == PTS_GRPC_INFER))
    c->resp_enc = c->accept_gzip      ? PTS_HTTP_ENC_GZIP
                  : c->accept_deflate ? PTS_HTTP_ENC_DEFLATE
                                      : PTS_HTTP_ENC_IDENTITY;
  if (c->timeout_us >= 0) {
    c->deadline_ev = evtimer_new(c->h->base, on_deadline, c);
    struct timeval tv = {(time_t)(c->timeout_us / 1000000), (suseconds_t)(c->timeout_us % 1000000)};
    if (c->deadline_ev) evtimer_add(c->deadline_ev, &tv);
  }
  return true;
}

/* Message bytes of a DATA frame: the prefix, then into c->msg. The budget
 * is charged when the prefix gives the length, before anything is kept.
 * A stream's messages go to the core as each completes; a unary call's
 * one waits for END_STREAM. */
static void take_data(struct call *c, const uint8_t *data, size_t len) {
  while (len && !c->closing) {
    if (c->prefix_len < PREFIX) {
      size_t take = PREFIX - c->prefix_len < len ? PREFIX - c->prefix_len : len;
      memcpy(c->prefix + c->prefix_len, data, take);
      c->prefix_len += take;
      data += take;
      len -= take;
      if (c->prefix_len < PREFIX) return;
      const uint8_t *p = c->prefix;
      size_t n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
      c->msg_compressed = p[0] == 1;
      if (p[0] > 1) {
        call_fail(c, PTS_INVALID_ARG, "bad message prefix on %s (flag byte not 0 or 1)", c->path);
        return;
      }
      if (c->unary_msg) {
        call_fail(c, PTS_INVALID_ARG, "%s is unary: the call carried more than one message",
                  c->path);
        return;
      }
      if (n > MAX_MESSAGE) {
        call_fail(c, PTS_EXHAUSTED, "a message on %s is larger than 2147483647 bytes", c->path);
        return;
      }
      if (!pts_overload_try_charge(n)) {
        pts_overload_count(PTS_OVERLOAD_GRPC_MEMORY_REFUSED, 1);
        call_fail(c, PTS_EXHAUSTED,
                  "request of %zu bytes refused: the request memory budget is exhausted (%zu of "
                  "%zu bytes held; --request-memory-budget); retry later",
                  n, pts_overload_held(), pts_overload_budget());
        return;
      }
      c->charged = n;
      c->msg_len = n;
      c->msg = pts_buf_new_io(n ? n : 1); /* pinned when large and a GPU reads it */
      if (!c->msg) {
        call_fail(c, PTS_NOMEM, "out of memory reading a message on %s", c->path);
        return;
      }
      c->msg->size = 0;
    }
    size_t want = c->msg_len - c->msg->size, take = want < len ? want : len;
    uint8_t *dst = (uint8_t *)c->msg->data + c->msg->size;
    if (dst != data) memmove(dst, data, take); /* equal: read in place (pts_grpc_h2_call_room) */
    c->msg->size += take;
    data += take;
    len -= take;
    if (c->msg->size < c->msg_len) continue;
    /* A whole message: the core charges what it keeps (pts_grpc_admit). */
    struct pts_buf *msg = c->msg;
    c->msg = NULL;
    c->prefix_len = 0;
    pts_overload_release(c->charged);
    c->charged = 0;
    if (c->stream)
      dispatch(c, msg, c->msg_compressed);
    else
      c->unary_msg = msg;
  }
}

uint8_t *pts_grpc_h2_call_room(struct conn *cn, int32_t id, size_t *room) {
  struct call *c = nghttp2_session_get_stream_user_data(cn->s, id);
  if (!c || c->closing || c->prefix_len < PREFIX || !c->msg) return NULL;
  *room = c->msg_len - c->msg->size;
  return (uint8_t *)c->msg->data + c->msg->size;
}

/* ------------------------------------------------------------------ */
/* nghttp2 callbacks                                                   */

static bool name_is(const uint8_t *name, size_t n, const char *lit, size_t litn) {
  return n == litn && memcmp(name, lit, n) == 0;
}
#define IS(lit) name_is(name, namelen, lit, sizeof(lit) - 1)

/* The metadata gRPC's transport consumes, which grpc++'s
 * ServerContext::client_metadata() (what Triton forwards from) never
 * shows: pseudo-headers, content-type, te and the grpc-* transport keys.
 * user-agent and the application's own keys are shown. */
static bool transport_header(const uint8_t *name, size_t namelen) {
  return namelen == 0 || name[0] == ':' || IS("content-type") || IS("te") ||
         IS("grpc-timeout") || IS("grpc-encoding") || IS("grpc-accept-encoding");
}

/* Keeps one metadata entry for the call's requests (h2_priv.h `fwd`). */
static void keep_forwarded(struct call *c, const uint8_t *name, size_t namelen,
                           const uint8_t *value, size_t valuelen) {
  if (c->fwd_failed) return;
  struct pts_request_param *grown = pts_realloc(c->fwd, (c->n_fwd + 1) * sizeof *grown);
  char *k = pts_strndup((const char *)name, namelen);
  char *v = pts_strndup((const char *)value, valuelen);
  if (grown) c->fwd = grown;
  if (!grown || !k || !v) {
    pts_free(k);
    pts_free(v);
    c->fwd_failed = true;
    return;
  }
  c->fwd[c->n_fwd++] = (struct pts_request_param){.key = k, .type = PTS_PARAM_STRING, .v.s = v};
}

/* grpc-timeout: at most 8 digits and a unit (H M S m u n), in µs; -1 when
 * malformed (then no deadline, as gRPC core ignores a bad one). */
static int64_t grpc_timeout_us(const uint8_t *v, size_t n) {
  if (n < 2 || n > 9) return -1;
  int64_t x = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    x = x * 10 + (v[i] - '0');
  }
  switch (v[n - 1]) {
    case 'H': return x * 3600 * 1000000;
    case 'M': return x * 60 * 1000000;
    case 'S': return x * 1000000;
    case 'm': return x * 1000;
    case 'u': return x;
    case 'n': return (x + 999) / 1000;
    default: return -1;
  }
}

/* Whether a comma-separated header value lists `tok`. */
static bool list_has(const uint8_t *v, size_t n, const char *tok) {
  size_t t = strlen(tok);
  for (size_t i = 0; i < n;) {
    while (i < n && (v[i] == ' ' || v[i] == ',')) i++;
    size_t j = i;
    while (j < n && v[j] != ',' && v[j] != ' ') j++;
    if (j - i == t && memcmp(v + i, tok, t) == 0) return true;
    i = j;
  }
  return false;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *u) {
  struct conn *cn = u;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  /* Reset streams whose requests are still in the core count too: a
   * client that resets what it opens gets no more of the server's work at
   * once than one that waits (struct conn's orphans). REFUSED_STREAM
   * says nothing was done, so gRPC clients retry the call. */
  bool full = cn->n_calls + cn->n_orphans >= CONN_CALLS_MAX;
  struct call *c = full ? NULL : call_new(cn, f->hd.stream_id);
  if (!c) {
    static struct pts_log_limit limit;
    unsigned long dropped;
    if (full && pts_log_limit_allow(&limit, 1000000000u, &dropped))
      PTS_LOG_VERBOSE(1,
                      "gRPC: refusing stream %d: %zu calls and %zu reset calls still in the core "
                      "on its connection (%lu more refused since the last such line)",
                      f->hd.stream_id, cn->n_calls, cn->n_orphans, dropped);
    /* The stream is not ours: nghttp2 still reads its frames, and the
     * callbacks find no call for it and ignore them. */
    return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                     full ? NGHTTP2_REFUSED_STREAM : NGHTTP2_INTERNAL_ERROR) == 0
               ? 0
               : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  nghttp2_session_set_stream_user_data(s, f->hd.stream_id, c);
  cn->heading = c;
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *u) {
  (void)s;
  (void)flags;
  struct conn *cn = u;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  struct call *c = cn->heading;
  if (!c || c->id != f->hd.stream_id) return 0;
  if (IS(":path")) {
    c->rpc = pts_grpc_rpc_find((const char *)value, valuelen);
    size_t n = valuelen < sizeof c->path - 1 ? valuelen : sizeof c->path - 1;
    memcpy(c->path, value, n);
    c->path[n] = '\0';
    c->rs = pts_restriction_for(c->h->restrictions,
                                pts_grpc_api_of_method((const char *)value, valuelen));
  } else if (IS(":method")) {
    c->post = valuelen == 4 && memcmp(value, "POST", 4) == 0;
  } else if (IS("content-type")) {
    /* application/grpc, optionally +proto or ;params */
    c->grpc_type = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                   (valuelen == 16 || value[16] == '+' || value[16] == ';');
  } else if (IS("triton_grpc_error")) {
    c->status_errors = valuelen == 4 && strncasecmp((const char *)value, "true", 4) == 0;
  } else if (IS("grpc-timeout")) {
    c->timeout_us = grpc_timeout_us(value, valuelen);
  } else if (IS("grpc-accept-encoding") && c->h->compression_level > 0) {
    c->accept_gzip = list_has(value, valuelen, "gzip");
    c->accept_deflate = list_has(value, valuelen, "deflate");
  } else if (IS("grpc-encoding")) {
    c->req_enc = valuelen == 8 && memcmp(value, "identity", 8) == 0 ? PTS_HTTP_ENC_IDENTITY
                 : valuelen == 4 && memcmp(value, "gzip", 4) == 0   ? PTS_HTTP_ENC_GZIP
                 : valuelen == 7 && memcmp(value, "deflate", 7) == 0 ? PTS_HTTP_ENC_DEFLATE
                                                                     : PTS_HTTP_ENC_UNKNOWN;
  } else if (c->rs && !c->rs_ok) {
    c->rs_ok = pts_grpc_restriction_header(c->rs, (const char *)name, namelen,
                                           (const char *)value, valuelen);
  }
  /* Pseudo-headers come first (RFC 9113 8.3), so the method is known. */
  if (c->rpc && (c->rpc->kind == PTS_GRPC_INFER || c->rpc->kind == PTS_GRPC_STREAM) &&
      !transport_header(name, namelen) &&
      pts_header_forward_match(PTS_FORWARD_GRPC, (const char *)name, namelen))
    keep_forwarded(c, name, namelen, value, valuelen);
  return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *u) {
  (void)flags;
  (void)u;
  /* Window updates are ours (NO_AUTO_WINDOW_UPDATE): the connection's at
   * once, a stream's unless it is paused (STREAM_PENDING_MAX). */
  nghttp2_session_consume_connection(s, len);
  struct call *c = nghttp2_session_get_stream_user_data(s, id);
  if (c && !c->closing) take_data(c, data, len);
  if (c && c->paused)
    c->unconsumed += len;
  else
    nghttp2_session_consume_stream(s, id, len);
  return 0;
}

void pts_grpc_h2_call_frame(struct conn *cn, const nghttp2_frame *f) {
  if (f->hd.type == NGHTTP2_HEADERS) cn->heading = NULL;
  struct call *c = nghttp2_session_get_stream_user_data(cn->s, f->hd.stream_id);
  if (!c || c->finished) return;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST &&
      !headers_ok(c))
    return;
  if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return;
  c->half_closed = true;
  if (!c->closing && (c->prefix_len || c->msg))
    call_fail(c, PTS_INVALID_ARG, "the last message on %s was cut short", c->path);
  else if (!c->closing && !c->stream && !c->unary_msg)
    call_fail(c, PTS_INVALID_ARG, "the call carried no request message");
  if (!c->closing && !c->stream) {
    struct pts_buf *msg = c->unary_msg;
    c->unary_msg = NULL;
    dispatch(c, msg, c->msg_compressed);
  }
  progress(c);
}

/* A stream ends: answered, reset by either side, or refused. A call with
 * requests still in the core becomes an orphan of its connection, which
 * keeps counting it (on_begin_headers) until its last completion frees it.
 * Nothing here may fail the session: a reset is the client's right at any
 * point of a call (RFC 9113 5.4.2, 8.7). */
static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *u) {
  (void)code;
  struct conn *cn = u;
  struct call *c = nghttp2_session_get_stream_user_data(s, id);
  if (!c) return 0;
  nghttp2_session_set_stream_user_data(s, id, NULL);
  if (!c->n_core) {
    call_free(c);
    return 0;
  }
  call_detach(c);
  c->origin = cn;
  list_push(&cn->orphans, &cn->n_orphans, c);
  return 0;
}

void pts_grpc_h2_call_callbacks(nghttp2_session_callbacks *cbs) {
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
  nghttp2_session_callbacks_set_send_data_callback(cbs, reply_send);
}
