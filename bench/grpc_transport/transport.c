/* bench/grpc_transport/transport.c — what a gRPC call costs the server in
 * its transport, in user-space instructions and CPU time, for two ways of
 * serving the same ModelInfer call, unary or as messages of a
 * ModelStreamInfer stream:
 *
 *   core     gRPC core's C API, used as ptserve's gRPC frontend uses it
 *            (src/frontend/grpc/grpc.c): one completion-queue thread;
 *            ModelInfer registered with its message read with the call and
 *            answered in one batch (initial metadata, message, status,
 *            RECV_CLOSE_ON_SERVER); a stream taken as an unregistered call,
 *            one receive and one send outstanding, the status once the
 *            client half-closes. run.sh builds it twice: gRPC core shared
 *            (mode core) and from its archives (core_static), as
 *            CMakeLists.txt links ptserve.
 *   nghttp2  nghttp2's HTTP/2 session (Debian libnghttp2) on a libevent
 *            loop, one thread, as ptserve's HTTP frontend reads sockets
 *            (src/frontend/http/conn.c): gRPC's framing (the 5-byte message
 *            prefix, the path, content-type, grpc-timeout and grpc-encoding
 *            headers, the grpc-status trailer) done here.
 *
 * Both modes do the same work around the transport: each request message
 * is checked (its first field is the model name "mlp") and answered with
 * the ModelInferResponse ptserve sends for the 16 -> 4 MLP (on a stream,
 * wrapped in a ModelStreamInferResponse). No model runs, no request is
 * decoded: what is left is the transport.
 *
 * Usage:
 *   transport core|nghttp2 PORT WARMUP CALLS   serve until killed; from the
 *       arrival of message WARMUP+1 to that of message WARMUP+CALLS+1:
 *       callgrind instrumentation on (CALLGRIND_START_INSTRUMENTATION, for
 *       every thread, under --instr-atstart=no; dumped at the end) and the
 *       process's CPU time (user and kernel, all threads), printed as
 *       "server CPU X us per call".
 *   transport client PORT TOTAL CONCURRENCY [stream]   a gRPC core client
 *       (as ptperf's: one channel, retries off, abseil's deadlock detector
 *       off): TOTAL unary calls, CONCURRENCY at a time, or TOTAL messages
 *       over CONCURRENCY streams with one message in flight each; prints
 *       its wall time per call and fails if any reply was not the expected
 *       one.
 *
 * Threading: the nghttp2 server and the client are one thread each; the
 * core server's calls are handled on its one completion-queue thread, with
 * gRPC core's own threads beside it. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <event2/event.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <nghttp2/nghttp2.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#define INFER_PATH "/inference.GRPCInferenceService/ModelInfer"
#define STREAM_PATH "/inference.GRPCInferenceService/ModelStreamInfer"

static void die(const char *what) {
  fprintf(stderr, "transport: %s\n", what);
  exit(2);
}

/* ---- the messages -------------------------------------------------------- */

/* Protobuf by hand: a length-delimited field (tag, varint length < 128). */
static size_t put_bytes(uint8_t *p, int field, const void *v, size_t n) {
  p[0] = (uint8_t)(field << 3 | 2);
  p[1] = (uint8_t)n;
  memcpy(p + 2, v, n);
  return n + 2;
}

/* A tensor's metadata: name = 1, datatype = 2, shape = 3 (packed). */
static size_t put_tensor(uint8_t *p, int field, const char *name, const uint8_t *shape,
                         size_t dims) {
  uint8_t t[64];
  size_t n = put_bytes(t, 1, name, strlen(name));
  n += put_bytes(t + n, 2, "FP32", 4);
  n += put_bytes(t + n, 3, shape, dims);
  return put_bytes(p, field, t, n);
}

/* What ptperf sends to mlp (tools/ptperf/lib/grpc_msg.c): ModelInferRequest
 * {model_name, inputs[INPUT0 FP32 [1,16]], raw_input_contents[64 bytes]}. */
static size_t request_message(uint8_t *p) {
  static const uint8_t shape[] = {1, 16};
  uint8_t data[64];
  for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 37);
  size_t n = put_bytes(p, 1, "mlp", 3);
  n += put_tensor(p + n, 5, "INPUT0", shape, sizeof shape);
  n += put_bytes(p + n, 7, data, sizeof data);
  return n;
}

/* What ptserve answers: ModelInferResponse {model_name, model_version,
 * outputs[OUTPUT0 FP32 [1,4]], raw_output_contents[16 bytes]}. */
static size_t reply_message(uint8_t *p) {
  static const uint8_t shape[] = {1, 4};
  uint8_t data[16] = {0};
  size_t n = put_bytes(p, 1, "mlp", 3);
  n += put_bytes(p + n, 2, "1", 1);
  n += put_tensor(p + n, 5, "OUTPUT0", shape, sizeof shape);
  n += put_bytes(p + n, 6, data, sizeof data);
  return n;
}

static uint8_t g_reply[128];
static size_t g_reply_len;
/* A stream's reply: ModelStreamInferResponse {infer_response = 2: the above}. */
static uint8_t g_stream_reply[132];
static size_t g_stream_reply_len;

/* The work both servers do with a request: its model name must be mlp. */
static bool request_ok(const uint8_t *m, size_t n) {
  return n > 5 && m[0] == (1 << 3 | 2) && m[1] == 3 && memcmp(m + 2, "mlp", 3) == 0;
}

/* ---- the measured window ------------------------------------------------- */

static long g_warmup, g_calls, g_arrived;
static struct timespec g_cpu0;

static double cpu_us(const struct timespec *a, const struct timespec *b) {
  return (double)(b->tv_sec - a->tv_sec) * 1e6 + (double)(b->tv_nsec - a->tv_nsec) / 1e3;
}

/* Called as each call arrives. */
static void arrived(void) {
  g_arrived++;
  if (g_arrived == g_warmup + 1) {
    CALLGRIND_START_INSTRUMENTATION;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &g_cpu0);
  } else if (g_arrived == g_warmup + g_calls + 1) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS;
    printf("server CPU %.3f us per call (%ld calls)\n", cpu_us(&g_cpu0, &t) / (double)g_calls,
           g_calls);
    fflush(stdout);
  }
}

/* abseil's mutex deadlock detector off, as ptserve and ptperf turn it off
 * (src/core/absl_sync.c); run.sh finds the mangled name in Debian's
 * libabsl_synchronization. */
static void absl_detector_off(void) {
#ifdef ABSL_DETECTOR_SYM
  void (*set_mode)(int) = NULL;
  void *p = dlsym(RTLD_DEFAULT, ABSL_DETECTOR_SYM);
  memcpy(&set_mode, &p, sizeof p);
  if (set_mode)
    set_mode(0);
  else
    fprintf(stderr, "transport: %s not found; abseil's deadlock detector stays on\n",
            ABSL_DETECTOR_SYM);
#endif
}

/* ---- core: gRPC core's server --------------------------------------------- */

/* A call and the tags of its batches. A unary call has one batch after it
 * arrives; a stream has a receive and a send outstanding at once, then the
 * final batch. */
struct core_call;
struct core_tag {
  enum { T_NEW, T_RECV, T_SEND, T_FINISH } kind;
  struct core_call *c;
};

struct core_call {
  bool stream;
  grpc_call *call;
  gpr_timespec deadline;       /* unary (registered) */
  grpc_call_details details;   /* streams (unregistered, as in ptserve) */
  grpc_metadata_array md;
  grpc_byte_buffer *recv_bb, *send_bb;
  int cancelled;
  struct core_tag t_new, t_recv, t_send, t_finish;
  bool md_sent, sending, half_closed, finishing, bad;
  int pending; /* stream replies waiting for the send in flight */
};

static grpc_server *g_gs;
static grpc_completion_queue *g_cq;
static void *g_method;

static void core_request(bool stream) {
  struct core_call *c = calloc(1, sizeof *c);
  if (!c) die("out of memory");
  c->stream = stream;
  c->t_new = (struct core_tag){T_NEW, c};
  c->t_recv = (struct core_tag){T_RECV, c};
  c->t_send = (struct core_tag){T_SEND, c};
  c->t_finish = (struct core_tag){T_FINISH, c};
  grpc_metadata_array_init(&c->md);
  grpc_call_details_init(&c->details);
  grpc_call_error e =
      stream ? grpc_server_request_call(g_gs, &c->call, &c->details, &c->md, g_cq, g_cq, &c->t_new)
             : grpc_server_request_registered_call(g_gs, g_method, &c->call, &c->deadline, &c->md,
                                                   &c->recv_bb, g_cq, g_cq, &c->t_new);
  if (e != GRPC_CALL_OK) die("grpc_server_request_call failed");
}

static void core_free(struct core_call *c) {
  if (c->call) grpc_call_unref(c->call);
  grpc_metadata_array_destroy(&c->md);
  grpc_call_details_destroy(&c->details);
  if (c->recv_bb) grpc_byte_buffer_destroy(c->recv_bb);
  if (c->send_bb) grpc_byte_buffer_destroy(c->send_bb);
  free(c);
}

/* The message as ptserve reads it (grpc.c, message_buf): the slice itself
 * when it came in one piece, else one copy of the pieces. */
static bool core_message_ok(grpc_byte_buffer *bb) {
  grpc_byte_buffer_reader rd;
  if (!bb || !grpc_byte_buffer_reader_init(&rd, bb)) return false;
  grpc_slice s;
  uint8_t *copy = NULL;
  size_t n = 0, len = 0;
  bool ok = false;
  while (grpc_byte_buffer_reader_next(&rd, &s)) {
    size_t k = GRPC_SLICE_LENGTH(s);
    if (n++ == 0 && k == grpc_byte_buffer_length(bb)) {
      ok = request_ok(GRPC_SLICE_START_PTR(s), k);
    } else {
      uint8_t *c = realloc(copy, len + k);
      if (!c) die("out of memory");
      copy = c;
      memcpy(copy + len, GRPC_SLICE_START_PTR(s), k);
      len += k;
    }
    grpc_slice_unref(s);
  }
  grpc_byte_buffer_reader_destroy(&rd);
  if (copy) {
    ok = request_ok(copy, len);
    free(copy);
  }
  return ok;
}

static void core_batch(struct core_call *c, const grpc_op *ops, size_t n, struct core_tag *t) {
  if (grpc_call_start_batch(c->call, ops, n, t, NULL) != GRPC_CALL_OK)
    die("grpc_call_start_batch failed");
}

static size_t core_initial_md(struct core_call *c, grpc_op *op) {
  if (c->md_sent) return 0;
  c->md_sent = true;
  op->op = GRPC_OP_SEND_INITIAL_METADATA;
  return 1;
}

static size_t core_reply(struct core_call *c, grpc_op *op) {
  grpc_slice s = c->stream ? grpc_slice_from_copied_buffer((const char *)g_stream_reply,
                                                           g_stream_reply_len)
                           : grpc_slice_from_copied_buffer((const char *)g_reply, g_reply_len);
  c->send_bb = grpc_raw_byte_buffer_create(&s, 1);
  grpc_slice_unref(s);
  op->op = GRPC_OP_SEND_MESSAGE;
  op->data.send_message.send_message = c->send_bb;
  return 1;
}

/* The final batch: initial metadata if not sent, the reply (unary), the
 * status, RECV_CLOSE_ON_SERVER. */
static void core_finish(struct core_call *c, bool with_reply) {
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  size_t n = core_initial_md(c, &ops[0]);
  if (with_reply && !c->bad) n += core_reply(c, &ops[n]);
  grpc_slice details = grpc_slice_from_copied_string(c->bad ? "bad request" : "");
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status =
      c->bad ? GRPC_STATUS_INVALID_ARGUMENT : GRPC_STATUS_OK;
  ops[n++].data.send_status_from_server.status_details = &details;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
  c->finishing = true;
  core_batch(c, ops, n, &c->t_finish);
  grpc_slice_unref(details);
}

static void core_recv(struct core_call *c) {
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &c->recv_bb;
  core_batch(c, &op, 1, &c->t_recv);
}

static void core_send(struct core_call *c) {
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  size_t n = core_initial_md(c, &ops[0]);
  n += core_reply(c, &ops[n]);
  c->sending = true;
  core_batch(c, ops, n, &c->t_send);
}

static void core_event(struct core_tag *t, bool success) {
  struct core_call *c = t->c;
  switch (t->kind) {
    case T_NEW:
      if (!success) {
        core_free(c);
        return;
      }
      core_request(c->stream);
      if (c->stream) {
        if (grpc_slice_str_cmp(c->details.method, STREAM_PATH) != 0) c->bad = true;
        core_recv(c);
        return;
      }
      arrived();
      c->bad = !core_message_ok(c->recv_bb);
      grpc_byte_buffer_destroy(c->recv_bb);
      c->recv_bb = NULL;
      core_finish(c, true);
      return;
    case T_RECV:
      if (!success || !c->recv_bb) { /* the client closed its side */
        c->half_closed = true;
        if (!c->sending) core_finish(c, false);
        return;
      }
      arrived();
      if (!core_message_ok(c->recv_bb)) c->bad = true;
      grpc_byte_buffer_destroy(c->recv_bb);
      c->recv_bb = NULL;
      if (c->sending)
        c->pending++;
      else
        core_send(c);
      core_recv(c);
      return;
    case T_SEND:
      grpc_byte_buffer_destroy(c->send_bb);
      c->send_bb = NULL;
      c->sending = false;
      if (c->pending > 0) {
        c->pending--;
        core_send(c);
      } else if (c->half_closed) {
        core_finish(c, false);
      }
      return;
    case T_FINISH:
      core_free(c);
      return;
  }
}

static _Noreturn void serve_core(int port) {
  absl_detector_off();
  grpc_init();
  grpc_arg args[2];
  memset(args, 0, sizeof args);
  args[0].type = args[1].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[0].value.integer = INT32_MAX;
  args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
  args[1].value.integer = INT32_MAX;
  grpc_channel_args ca = {.num_args = 2, .args = args};
  g_gs = grpc_server_create(&ca, NULL);
  g_cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(g_gs, g_cq, NULL);
  g_method = grpc_server_register_method(g_gs, INFER_PATH, NULL,
                                         GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);

  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  int bound = grpc_server_add_http2_port(g_gs, addr, creds);
  grpc_server_credentials_release(creds);
  if (bound <= 0) die("cannot bind the gRPC port");
  grpc_server_start(g_gs);
  core_request(false);
  core_request(true);
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(g_cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_OP_COMPLETE) core_event(ev.tag, ev.success != 0);
  }
}

/* ---- nghttp2: an HTTP/2 session on a libevent loop ------------------------ */

/* One HTTP/2 stream, one call: what has come of its messages, what is
 * queued of its replies. A unary call is a stream with one message. */
struct h2_stream {
  int32_t id;
  uint8_t *in; /* malloc'd: received bytes not yet a whole message */
  size_t in_len, in_cap;
  uint8_t *out; /* malloc'd: framed replies not yet handed to nghttp2 */
  size_t out_len, out_off, out_cap;
  bool path_ok, stream_ok, type_ok, enc_ok;
  long long timeout_us; /* grpc-timeout, -1 when absent: parsed as a server
                         * must, though this one enforces no deadline */
  bool responded;       /* HEADERS submitted */
  bool deferred;        /* the data source waits for a reply */
  bool half_closed;     /* the client's END_STREAM came */
  int status;           /* grpc-status to send: 0, or 3 (INVALID_ARGUMENT) */
};

struct h2_conn {
  int fd;
  struct event *rev, *wev;
  nghttp2_session *s;
  uint8_t *out; /* bytes nghttp2 gave us that the socket has not taken */
  size_t out_len, out_cap;
};

static struct event_base *g_base;

static void h2_close(struct h2_conn *c) {
  event_free(c->rev);
  event_free(c->wev);
  nghttp2_session_del(c->s);
  close(c->fd);
  free(c->out);
  free(c);
}

/* grpc-timeout: up to 8 digits and a unit (H M S m u n). */
static long long grpc_timeout_us(const uint8_t *v, size_t n) {
  if (n < 2 || n > 9) return -1;
  long long x = 0;
  for (size_t i = 0; i + 1 < n; i++) {
    if (v[i] < '0' || v[i] > '9') return -1;
    x = x * 10 + (v[i] - '0');
  }
  switch (v[n - 1]) {
    case 'H': return x * 3600000000LL;
    case 'M': return x * 60000000LL;
    case 'S': return x * 1000000LL;
    case 'm': return x * 1000LL;
    case 'u': return x;
    case 'n': return x / 1000;
    default: return -1;
  }
}

static bool name_is(const uint8_t *name, size_t n, const char *lit) {
  size_t l = strlen(lit);
  return n == l && memcmp(name, lit, l) == 0;
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *u) {
  (void)u;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  struct h2_stream *st = calloc(1, sizeof *st);
  if (!st) return NGHTTP2_ERR_CALLBACK_FAILURE;
  st->id = f->hd.stream_id;
  st->timeout_us = -1;
  st->enc_ok = true;
  nghttp2_session_set_stream_user_data(s, st->id, st);
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *u) {
  (void)flags;
  (void)u;
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  struct h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
  if (!st) return 0;
  if (name_is(name, namelen, ":path")) {
    st->path_ok = name_is(value, valuelen, INFER_PATH);
    st->stream_ok = name_is(value, valuelen, STREAM_PATH);
  } else if (name_is(name, namelen, "content-type")) {
    st->type_ok = valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                  (valuelen == 16 || value[16] == '+' || value[16] == ';');
  } else if (name_is(name, namelen, "grpc-timeout")) {
    st->timeout_us = grpc_timeout_us(value, valuelen);
  } else if (name_is(name, namelen, "grpc-encoding")) {
    st->enc_ok = name_is(value, valuelen, "identity");
  }
  return 0;
}

static bool grow(uint8_t **buf, size_t *cap, size_t need) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 256;
  while (c < need) c *= 2;
  uint8_t *b = realloc(*buf, c);
  if (!b) return false;
  *buf = b;
  *cap = c;
  return true;
}

/* The reply's DATA: what is queued; then, once the client has closed its
 * side and everything is out, the grpc-status trailer. */
static ssize_t reply_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                          uint32_t *flags, nghttp2_data_source *src, void *u) {
  (void)u;
  struct h2_stream *st = src->ptr;
  size_t n = st->out_len - st->out_off;
  if (n > length) n = length;
  memcpy(buf, st->out + st->out_off, n);
  st->out_off += n;
  if (st->out_off == st->out_len) st->out_off = st->out_len = 0;
  if (st->out_len == 0 && st->half_closed) {
    nghttp2_nv trailers[] = {
        {(uint8_t *)"grpc-status", (uint8_t *)(st->status == 0 ? "0" : "3"), 11, 1,
         NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE},
    };
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    if (nghttp2_submit_trailer(s, id, trailers, 1) != 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
  } else if (n == 0) {
    st->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return (ssize_t)n;
}

/* HEADERS once; afterwards wakes the data source when it waits. */
static int h2_kick(nghttp2_session *s, struct h2_stream *st) {
  static const nghttp2_nv head[] = {
      {(uint8_t *)":status", (uint8_t *)"200", 7, 3,
       NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE},
      {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16,
       NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE},
  };
  if (!st->responded) {
    st->responded = true;
    nghttp2_data_provider dp = {.source.ptr = st, .read_callback = reply_read};
    return nghttp2_submit_response(s, st->id, head, 2, &dp) == 0 ? 0
                                                                  : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  if (st->deferred) {
    st->deferred = false;
    return nghttp2_session_resume_data(s, st->id) == 0 ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  return 0;
}

/* One whole message: checked, and its reply queued. */
static bool h2_message(struct h2_stream *st, const uint8_t *m, size_t n) {
  arrived();
  if (!(st->path_ok || st->stream_ok) || !st->type_ok || !st->enc_ok || !request_ok(m, n)) {
    st->status = 3;
    return true;
  }
  const uint8_t *r = st->stream_ok ? g_stream_reply : g_reply;
  size_t rn = st->stream_ok ? g_stream_reply_len : g_reply_len;
  if (!grow(&st->out, &st->out_cap, st->out_len + 5 + rn)) return false;
  uint8_t *p = st->out + st->out_len;
  p[0] = 0;
  p[1] = (uint8_t)(rn >> 24);
  p[2] = (uint8_t)(rn >> 16);
  p[3] = (uint8_t)(rn >> 8);
  p[4] = (uint8_t)rn;
  memcpy(p + 5, r, rn);
  st->out_len += 5 + rn;
  return true;
}

/* DATA: gathered until whole messages (5-byte prefix + length) are in. */
static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *u) {
  (void)flags;
  (void)u;
  struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
  if (!st) return 0;
  if (!grow(&st->in, &st->in_cap, st->in_len + len)) return NGHTTP2_ERR_CALLBACK_FAILURE;
  memcpy(st->in + st->in_len, data, len);
  st->in_len += len;
  size_t off = 0, before = st->out_len;
  while (st->in_len - off >= 5) {
    const uint8_t *m = st->in + off;
    size_t mlen = (size_t)m[1] << 24 | (size_t)m[2] << 16 | (size_t)m[3] << 8 | m[4];
    if (st->in_len - off - 5 < mlen) break;
    if (m[0] != 0) st->status = 3; /* compressed without grpc-encoding */
    if (!h2_message(st, m + 5, mlen)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    off += 5 + mlen;
  }
  memmove(st->in, st->in + off, st->in_len - off);
  st->in_len -= off;
  return st->out_len != before ? h2_kick(s, st) : 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *u) {
  (void)u;
  if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
      (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
    struct h2_stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st) return 0;
    st->half_closed = true;
    if (st->in_len) st->status = 3; /* a message cut short */
    return h2_kick(s, st);
  }
  return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *u) {
  (void)code;
  (void)u;
  struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);
  if (st) {
    nghttp2_session_set_stream_user_data(s, id, NULL);
    free(st->in);
    free(st->out);
    free(st);
  }
  return 0;
}

/* What nghttp2 has to send, gathered into c->out, then written. */
static bool h2_flush(struct h2_conn *c) {
  for (;;) {
    const uint8_t *data;
    ssize_t n = nghttp2_session_mem_send(c->s, &data);
    if (n < 0) return false;
    if (n == 0) break;
    if (c->out_len + (size_t)n > c->out_cap) {
      size_t cap = c->out_cap ? c->out_cap : 4096;
      while (cap < c->out_len + (size_t)n) cap *= 2;
      uint8_t *o = realloc(c->out, cap);
      if (!o) return false;
      c->out = o;
      c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, (size_t)n);
    c->out_len += (size_t)n;
  }
  while (c->out_len > 0) {
    ssize_t w = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      event_add(c->wev, NULL);
      return true;
    }
    if (w <= 0) return false;
    memmove(c->out, c->out + w, c->out_len - (size_t)w);
    c->out_len -= (size_t)w;
  }
  return nghttp2_session_want_read(c->s) || nghttp2_session_want_write(c->s);
}

static void h2_on_read(evutil_socket_t fd, short what, void *arg) {
  (void)what;
  struct h2_conn *c = arg;
  uint8_t buf[16384];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0 || nghttp2_session_mem_recv(c->s, buf, (size_t)n) < 0 || !h2_flush(c))
    h2_close(c);
}

static void h2_on_write(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct h2_conn *c = arg;
  if (!h2_flush(c)) h2_close(c);
}

static ssize_t no_send(nghttp2_session *s, const uint8_t *d, size_t n, int fl, void *u) {
  (void)s, (void)d, (void)n, (void)fl, (void)u;
  return NGHTTP2_ERR_CALLBACK_FAILURE; /* mem_send only */
}

static nghttp2_session_callbacks *g_cbs;

static void h2_on_accept(evutil_socket_t lfd, short what, void *arg) {
  (void)what;
  (void)arg;
  int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct h2_conn *c = calloc(1, sizeof *c);
  if (!c) die("out of memory");
  c->fd = fd;
  if (nghttp2_session_server_new(&c->s, g_cbs, c) != 0) die("nghttp2_session_server_new");
  nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100}};
  nghttp2_submit_settings(c->s, NGHTTP2_FLAG_NONE, iv, 1);
  c->rev = event_new(g_base, fd, EV_READ | EV_PERSIST, h2_on_read, c);
  c->wev = event_new(g_base, fd, EV_WRITE, h2_on_write, c);
  event_add(c->rev, NULL);
  if (!h2_flush(c)) h2_close(c);
}

static int serve_nghttp2(int port) {
  nghttp2_session_callbacks_new(&g_cbs);
  nghttp2_session_callbacks_set_send_callback(g_cbs, no_send);
  nghttp2_session_callbacks_set_on_begin_headers_callback(g_cbs, on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(g_cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(g_cbs, on_data_chunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(g_cbs, on_frame_recv);
  nghttp2_session_callbacks_set_on_stream_close_callback(g_cbs, on_stream_close);
  struct event_config *cfg = event_config_new();
  event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST); /* as ptserve's loops */
  g_base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(lfd, 64) != 0)
    die("cannot bind the port");
  struct event *lev = event_new(g_base, lfd, EV_READ | EV_PERSIST, h2_on_accept, NULL);
  event_add(lev, NULL);
  event_base_dispatch(g_base);
  return 0;
}

/* ---- the client ------------------------------------------------------------ */

/* One call (unary) or one stream in flight. A stream's batches: its
 * opening, then one send and one receive per message, then its close. */
struct slot;
struct slot_tag {
  enum { S_UNARY, S_OPEN, S_SEND, S_RECV, S_CLOSE } kind;
  struct slot *s;
};

struct slot {
  grpc_call *call;
  grpc_byte_buffer *send_bb, *recv_bb;
  grpc_metadata_array imd, tmd;
  grpc_status_code status;
  grpc_slice details;
  struct slot_tag t_unary, t_open, t_send, t_recv, t_close;
  bool sent, received; /* a stream's message: both batches back */
};

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

struct client {
  grpc_channel *ch;
  void *method, *stream_method;
  grpc_completion_queue *cq;
  grpc_slice req; /* static: no copy per send */
  long bad;
};

static void batch(struct slot *s, const grpc_op *ops, size_t n, struct slot_tag *t) {
  if (grpc_call_start_batch(s->call, ops, n, t, NULL) != GRPC_CALL_OK)
    die("grpc_call_start_batch failed");
}

static void call_open(struct client *cl, struct slot *s, void *method) {
  s->call = grpc_channel_create_registered_call(cl->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cl->cq,
                                                method, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  grpc_metadata_array_init(&s->imd);
  grpc_metadata_array_init(&s->tmd);
  s->details = grpc_empty_slice();
}

static void call_close(struct slot *s) {
  grpc_metadata_array_destroy(&s->imd);
  grpc_metadata_array_destroy(&s->tmd);
  grpc_slice_unref(s->details);
  grpc_call_unref(s->call);
  s->call = NULL;
}

static void fail(struct client *cl, struct slot *s, const char *what) {
  if (cl->bad++ == 0) {
    char *d = grpc_slice_to_c_string(s->details);
    fprintf(stderr, "transport client: %s failed: status %d (%s)\n", what, (int)s->status, d);
    gpr_free(d);
  }
}

/* A reply as expected? Releases it either way. */
static bool reply_ok(struct slot *s, size_t want) {
  bool ok = s->recv_bb && grpc_byte_buffer_length(s->recv_bb) == want;
  if (s->recv_bb) grpc_byte_buffer_destroy(s->recv_bb);
  s->recv_bb = NULL;
  return ok;
}

/* A unary call, every op in one batch (as ptperf's unary calls). */
static void unary_start(struct client *cl, struct slot *s) {
  call_open(cl, s, cl->method);
  s->send_bb = grpc_raw_byte_buffer_create(&cl->req, 1);
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = s->send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->imd;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &s->recv_bb;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &s->tmd;
  ops[5].data.recv_status_on_client.status = &s->status;
  ops[5].data.recv_status_on_client.status_details = &s->details;
  batch(s, ops, 6, &s->t_unary);
}

/* A stream's next message: its send and its reply's receive. */
static void stream_message(struct client *cl, struct slot *s) {
  s->send_bb = grpc_raw_byte_buffer_create(&cl->req, 1);
  s->sent = s->received = false;
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_SEND_MESSAGE;
  op.data.send_message.send_message = s->send_bb;
  batch(s, &op, 1, &s->t_send);
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &s->recv_bb;
  batch(s, &op, 1, &s->t_recv);
}

static void stream_start(struct client *cl, struct slot *s) {
  call_open(cl, s, cl->stream_method);
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[1].data.recv_initial_metadata.recv_initial_metadata = &s->imd;
  batch(s, ops, 2, &s->t_open);
  stream_message(cl, s);
}

static void stream_end(struct slot *s) {
  grpc_op ops[2];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[1].data.recv_status_on_client.trailing_metadata = &s->tmd;
  ops[1].data.recv_status_on_client.status = &s->status;
  ops[1].data.recv_status_on_client.status_details = &s->details;
  batch(s, ops, 2, &s->t_close);
}

static int run_client(int port, long total, int conc, bool streaming) {
  absl_detector_off();
  grpc_init();
  grpc_arg args[2];
  memset(args, 0, sizeof args);
  args[0].type = args[1].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_ENABLE_RETRIES;
  args[0].value.integer = 0;
  args[1].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[1].value.integer = -1;
  grpc_channel_args ca = {.num_args = 2, .args = args};
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", port);
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  struct client cl = {0};
  cl.ch = grpc_channel_create(target, creds, &ca);
  grpc_channel_credentials_release(creds);
  cl.method = grpc_channel_register_call(cl.ch, INFER_PATH, NULL, NULL);
  cl.stream_method = grpc_channel_register_call(cl.ch, STREAM_PATH, NULL, NULL);
  cl.cq = grpc_completion_queue_create_for_next(NULL);
  static uint8_t req[256];
  size_t req_len = request_message(req);
  cl.req = grpc_slice_from_static_buffer(req, req_len);
  struct slot *slots = calloc((size_t)conc, sizeof *slots);
  if (!slots) die("out of memory");
  long started = 0, finished = 0;
  int open_streams = 0;
  double t0 = now_us();
  for (int i = 0; i < conc && started < total; i++, started++) {
    struct slot *s = &slots[i];
    s->t_unary = (struct slot_tag){S_UNARY, s};
    s->t_open = (struct slot_tag){S_OPEN, s};
    s->t_send = (struct slot_tag){S_SEND, s};
    s->t_recv = (struct slot_tag){S_RECV, s};
    s->t_close = (struct slot_tag){S_CLOSE, s};
    if (streaming) {
      stream_start(&cl, s);
      open_streams++;
    } else {
      unary_start(&cl, s);
    }
  }
  while (finished < total || open_streams > 0) {
    grpc_event ev = grpc_completion_queue_next(cl.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type != GRPC_OP_COMPLETE) continue;
    struct slot_tag *t = ev.tag;
    struct slot *s = t->s;
    bool next = false;
    switch (t->kind) {
      case S_UNARY:
        grpc_byte_buffer_destroy(s->send_bb);
        s->send_bb = NULL;
        if (!ev.success || s->status != GRPC_STATUS_OK || !reply_ok(s, g_reply_len)) fail(&cl, s, "a call");
        call_close(s);
        finished++;
        if (started < total) {
          started++;
          unary_start(&cl, s);
        }
        break;
      case S_OPEN:
        break;
      case S_SEND:
        grpc_byte_buffer_destroy(s->send_bb);
        s->send_bb = NULL;
        s->sent = true;
        next = s->received;
        break;
      case S_RECV:
        if (!ev.success || !reply_ok(s, g_stream_reply_len)) fail(&cl, s, "a stream's reply");
        finished++;
        s->received = true;
        next = s->sent;
        break;
      case S_CLOSE:
        if (!ev.success || s->status != GRPC_STATUS_OK) fail(&cl, s, "a stream");
        call_close(s);
        open_streams--;
        break;
    }
    if (next) { /* both halves of a streamed message are back */
      if (started < total) {
        started++;
        stream_message(&cl, s);
      } else {
        stream_end(s);
      }
    }
  }
  double wall = now_us() - t0;
  printf("client: %ld %s, %ld failed, %.2f us wall per call (message %zu bytes, reply %zu)\n",
         total, streaming ? "streamed messages" : "calls", cl.bad, wall / (double)total, req_len,
         g_reply_len);
  return cl.bad ? 1 : 0;
}

int main(int argc, char **argv) {
  g_reply_len = reply_message(g_reply);
  g_stream_reply_len = put_bytes(g_stream_reply, 2, g_reply, g_reply_len);
  if ((argc == 5 || argc == 6) && strcmp(argv[1], "client") == 0)
    return run_client(atoi(argv[2]), atol(argv[3]), atoi(argv[4]),
                      argc == 6 && strcmp(argv[5], "stream") == 0);
  if (argc == 5) {
    g_warmup = atol(argv[3]);
    g_calls = atol(argv[4]);
    if (strcmp(argv[1], "core") == 0) serve_core(atoi(argv[2]));
    if (strcmp(argv[1], "nghttp2") == 0) return serve_nghttp2(atoi(argv[2]));
  }
  fprintf(stderr,
          "usage: transport core|nghttp2 PORT WARMUP CALLS\n"
          "       transport client PORT TOTAL CONCURRENCY [stream]\n");
  return 2;
}
