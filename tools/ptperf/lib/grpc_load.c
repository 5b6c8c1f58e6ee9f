/* ptperf/lib/grpc_load.c — the completion-queue loop that keeps N gRPC
 * requests in flight. */
#include "ptperf/lib/grpc_load.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "ptperf/lib/absl_sync.h"
#include "core/alloc.h"
#include "ptperf/lib/grpc_msg.h"

/* After a transport failure (UNAVAILABLE, a broken stream) a slot waits
 * this long before its next call, not in a busy loop. */
#define RETRY_DELAY_NS (100 * 1000 * 1000ULL)
/* How often the loop looks at the stop flag. */
#define POLL_NS (50 * 1000 * 1000ULL)

enum tag_kind {
  TAG_CONNECT,      /* a connectivity watch, while starting */
  TAG_UNARY,        /* the one batch of a ModelInfer call */
  TAG_STREAM_OPEN,  /* SEND_INITIAL_METADATA + RECV_INITIAL_METADATA */
  TAG_STREAM_SEND,  /* SEND_MESSAGE of the slot's request */
  TAG_STREAM_RECV,  /* RECV_MESSAGE of its response */
  TAG_STREAM_STATUS /* RECV_STATUS_ON_CLIENT: the stream is over */
};

struct slot;

struct tag {
  enum tag_kind kind;
  struct slot *s;
};

/* One in-flight slot: a unary call, or a stream and its one request. */
struct slot {
  struct ptperf_grpc_load *l;
  grpc_channel *ch; /* borrowed from l->channels */
  void *method;     /* the method registered on ch */
  grpc_call *call;  /* NULL while idle */
  int pending;      /* batches started on call and not completed */
  struct tag t_call, t_send, t_recv, t_status;
  grpc_metadata_array initial_md, trailing_md;
  grpc_byte_buffer *send_bb, *recv_bb;
  grpc_status_code status;
  grpc_slice details;
  bool in_flight;    /* a request is waiting for its response */
  bool sent;         /* stream: the request's SEND_MESSAGE completed */
  bool ended;        /* stream: RECV_MESSAGE found the stream over */
  bool status_in;    /* stream: RECV_STATUS_ON_CLIENT completed */
  uint64_t t0;       /* when the request was handed to gRPC */
  uint64_t retry_at; /* idle slot: earliest next start */
  uint8_t *rbuf;     /* a response's bytes, when they came in pieces */
  size_t rcap;
};

struct ptperf_grpc_load {
  bool streaming;
  uint8_t *const *messages;
  const size_t *message_lens;
  size_t n_messages, next_message;
  grpc_slice *slices; /* static slices over messages: no copy per send */
  int n_channels;
  grpc_channel **channels;
  void **methods; /* per channel */
  grpc_completion_queue *cq;
  int n_slots;
  struct slot *slots;
  int idle; /* slots with no call, waiting for retry_at */
  pthread_t thread;
  bool thread_started;
  atomic_bool stop;
  struct ptperf_recorder *rec; /* borrowed */
};

static bool stopping(const struct ptperf_grpc_load *l) {
  return atomic_load_explicit(&l->stop, memory_order_relaxed);
}

static gpr_timespec deadline_in_ns(uint64_t ns) {
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos((int64_t)ns, GPR_TIMESPAN));
}

static grpc_call *new_call(struct slot *s) {
  return grpc_channel_create_registered_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->l->cq,
                                             s->method, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
}

static grpc_byte_buffer *next_message(struct ptperf_grpc_load *l) {
  size_t i = l->next_message++ % l->n_messages;
  return grpc_raw_byte_buffer_create(&l->slices[i], 1);
}

/* Releases what the last call left; the slot is then idle. */
static void slot_clear(struct slot *s) {
  if (s->send_bb) grpc_byte_buffer_destroy(s->send_bb);
  if (s->recv_bb) grpc_byte_buffer_destroy(s->recv_bb);
  s->send_bb = s->recv_bb = NULL;
  if (s->call) {
    grpc_slice_unref(s->details);
    grpc_metadata_array_destroy(&s->initial_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    grpc_call_unref(s->call);
    s->call = NULL;
  }
  s->in_flight = false;
}

/* The slot starts again after `delay_ns`, from the loop. */
static void slot_idle(struct slot *s, uint64_t delay_ns) {
  s->retry_at = ptperf_now_ns() + delay_ns;
  s->l->idle++;
}

static void call_init(struct slot *s) {
  grpc_metadata_array_init(&s->initial_md);
  grpc_metadata_array_init(&s->trailing_md);
  s->details = grpc_empty_slice();
  s->status = GRPC_STATUS_OK;
  s->status_in = s->ended = false;
}

static void op_recv_status(struct slot *s, grpc_op *op) {
  op->op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  op->data.recv_status_on_client.trailing_metadata = &s->trailing_md;
  op->data.recv_status_on_client.status = &s->status;
  op->data.recv_status_on_client.status_details = &s->details;
}

static bool start_batch(struct slot *s, const grpc_op *ops, size_t n, struct tag *t,
                        const char *what) {
  grpc_call_error e = grpc_call_start_batch(s->call, ops, n, t, NULL);
  if (e != GRPC_CALL_OK) {
    ptperf_recorder_error(s->l->rec, "%s: grpc_call_start_batch failed (grpc_call_error %d)", what,
                          (int)e);
    return false;
  }
  s->pending++;
  return true;
}

/* A response's bytes in one piece: in s->rbuf. */
static bool message_bytes(struct slot *s, grpc_byte_buffer *bb, size_t *len) {
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, bb)) return false;
  grpc_slice sl;
  size_t at = 0;
  bool ok = true;
  while (grpc_byte_buffer_reader_next(&rd, &sl)) {
    size_t n = GRPC_SLICE_LENGTH(sl);
    if (ok && at + n > s->rcap) {
      size_t cap = s->rcap ? s->rcap : 256;
      while (cap < at + n) cap *= 2;
      uint8_t *b = pts_realloc(s->rbuf, cap);
      if (b) {
        s->rbuf = b;
        s->rcap = cap;
      } else {
        ok = false;
      }
    }
    if (ok && n) memcpy(s->rbuf + at, GRPC_SLICE_START_PTR(sl), n);
    at += n;
    grpc_slice_unref(sl);
  }
  grpc_byte_buffer_reader_destroy(&rd);
  *len = at;
  return ok;
}

/* Judges one response message and records the request. */
static void judge_response(struct slot *s, uint64_t lat, const char *what) {
  size_t len;
  struct pts_error err;
  struct ptperf_grpc_reply reply;
  if (!message_bytes(s, s->recv_bb, &len)) {
    ptperf_recorder_error(s->l->rec, "%s: can not read a response message", what);
    return;
  }
  if (ptperf_grpc_response_check(s->rbuf, len, s->l->streaming, &reply, &err) != PTS_OK) {
    ptperf_recorder_error(s->l->rec, "%s: %s", what, err.msg);
    return;
  }
  ptperf_recorder_ok(s->l->rec, lat);
}

static void status_error(struct slot *s, const char *what, const char *context) {
  ptperf_recorder_error(s->l->rec, "%s: %sgRPC status %d %s: %.*s", what, context, (int)s->status,
                        ptperf_grpc_status_name((int)s->status), (int)GRPC_SLICE_LENGTH(s->details),
                        (const char *)GRPC_SLICE_START_PTR(s->details));
}

/* ------------------------------------------------------------ unary */

static void unary_start(struct slot *s) {
  s->call = new_call(s);
  call_init(s);
  s->send_bb = next_message(s->l);
  s->recv_bb = NULL;
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = s->send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &s->recv_bb;
  op_recv_status(s, &ops[5]);
  s->in_flight = true;
  s->t0 = ptperf_now_ns();
  if (!start_batch(s, ops, 6, &s->t_call, "ModelInfer")) {
    slot_clear(s);
    slot_idle(s, RETRY_DELAY_NS);
  }
}

static void unary_done(struct slot *s, bool success) {
  uint64_t lat = ptperf_now_ns() - s->t0;
  s->pending--;
  bool transport = false;
  if (!stopping(s->l)) {
    if (!success) {
      ptperf_recorder_error(s->l->rec, "ModelInfer: the call's batch failed");
    } else if (s->status != GRPC_STATUS_OK) {
      status_error(s, "ModelInfer", "");
      transport = s->status == GRPC_STATUS_UNAVAILABLE;
    } else if (!s->recv_bb) {
      ptperf_recorder_error(s->l->rec, "ModelInfer: status OK but no response message");
    } else {
      judge_response(s, lat, "ModelInfer");
    }
  }
  slot_clear(s);
  if (stopping(s->l)) return;
  if (transport)
    slot_idle(s, RETRY_DELAY_NS);
  else
    unary_start(s);
}

/* ------------------------------------------------------------ streams */

static void stream_send(struct slot *s) {
  s->send_bb = next_message(s->l);
  s->recv_bb = NULL;
  s->in_flight = true;
  s->sent = false;
  grpc_op send, recv;
  memset(&send, 0, sizeof send);
  memset(&recv, 0, sizeof recv);
  send.op = GRPC_OP_SEND_MESSAGE;
  send.data.send_message.send_message = s->send_bb;
  recv.op = GRPC_OP_RECV_MESSAGE;
  recv.data.recv_message.recv_message = &s->recv_bb;
  s->t0 = ptperf_now_ns();
  /* A batch that can not start leaves the request unanswered: cancelling
   * ends the stream, which counts it and reopens. */
  if (!start_batch(s, &send, 1, &s->t_send, "ModelStreamInfer") ||
      !start_batch(s, &recv, 1, &s->t_recv, "ModelStreamInfer")) {
    s->in_flight = false;
    grpc_call_cancel(s->call, NULL);
  }
}

static void stream_open(struct slot *s) {
  s->call = new_call(s);
  call_init(s);
  grpc_op ops[2], status;
  memset(ops, 0, sizeof ops);
  memset(&status, 0, sizeof status);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[1].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
  op_recv_status(s, &status);
  if (!start_batch(s, ops, 2, &s->t_call, "ModelStreamInfer")) {
    slot_clear(s);
    slot_idle(s, RETRY_DELAY_NS);
    return;
  }
  if (!start_batch(s, &status, 1, &s->t_status, "ModelStreamInfer")) {
    /* No status will tell when it is over: end it and let the open batch
     * complete before the slot is cleared (stream_step). */
    grpc_call_cancel(s->call, NULL);
    s->status_in = true;
    s->status = GRPC_STATUS_CANCELLED;
    return;
  }
  stream_send(s);
}

/* After any completion on a stream: the next request, or the end. */
static void stream_step(struct slot *s) {
  struct ptperf_grpc_load *l = s->l;
  if (s->status_in) {
    if (s->pending > 0) return; /* the send or receive still has to come back */
    if (!stopping(l)) {
      if (s->in_flight)
        status_error(s, "ModelStreamInfer", "the stream ended with a request unanswered: ");
      else if (s->status != GRPC_STATUS_OK)
        status_error(s, "ModelStreamInfer", "the stream ended: ");
    }
    slot_clear(s);
    if (!stopping(l)) slot_idle(s, RETRY_DELAY_NS);
    return;
  }
  /* One SEND_MESSAGE at a time: the next request waits for the response
   * and for its own send to complete. A stream that ended waits for its
   * status. */
  if (s->in_flight || !s->sent || s->ended || stopping(l)) return;
  stream_send(s);
}

static void stream_event(struct slot *s, enum tag_kind kind, bool success) {
  struct ptperf_grpc_load *l = s->l;
  uint64_t lat = ptperf_now_ns() - s->t0;
  s->pending--;
  switch (kind) {
    case TAG_STREAM_OPEN:
      break; /* a failure shows in the status */
    case TAG_STREAM_SEND:
      grpc_byte_buffer_destroy(s->send_bb);
      s->send_bb = NULL;
      s->sent = true;
      break;
    case TAG_STREAM_STATUS:
      s->status_in = true;
      break;
    case TAG_STREAM_RECV:
      if (!success || !s->recv_bb) {
        s->ended = true;
        break;
      }
      if (!stopping(l)) judge_response(s, lat, "ModelStreamInfer");
      grpc_byte_buffer_destroy(s->recv_bb);
      s->recv_bb = NULL;
      s->in_flight = false;
      break;
    default:
      break;
  }
  stream_step(s);
}

/* ------------------------------------------------------------ the loop */

static void slot_start(struct slot *s) {
  if (s->l->streaming)
    stream_open(s);
  else
    unary_start(s);
}

/* Starts idle slots whose time has come; returns the nearest retry time
 * of those still waiting (UINT64_MAX: none). */
static uint64_t start_idle(struct ptperf_grpc_load *l) {
  uint64_t now = ptperf_now_ns(), next = UINT64_MAX;
  for (int i = 0; i < l->n_slots && l->idle > 0; i++) {
    struct slot *s = &l->slots[i];
    if (s->call || s->retry_at == 0) continue;
    if (s->retry_at > now) {
      if (s->retry_at < next) next = s->retry_at;
      continue;
    }
    s->retry_at = 0;
    l->idle--;
    slot_start(s);
  }
  return next;
}

static void dispatch(grpc_event ev) {
  struct tag *t = ev.tag;
  if (!t || t->kind == TAG_CONNECT) return;
  if (t->kind == TAG_UNARY)
    unary_done(t->s, ev.success != 0);
  else
    stream_event(t->s, t->kind, ev.success != 0);
}

static int pending_total(const struct ptperf_grpc_load *l) {
  int n = 0;
  for (int i = 0; i < l->n_slots; i++) n += l->slots[i].pending;
  return n;
}

static void *load_main(void *arg) {
  struct ptperf_grpc_load *l = arg;
  for (int i = 0; i < l->n_slots; i++) slot_start(&l->slots[i]);
  while (!stopping(l)) {
    uint64_t wait = POLL_NS;
    if (l->idle > 0) {
      uint64_t next = start_idle(l), now = ptperf_now_ns();
      if (next != UINT64_MAX) wait = next <= now ? 0 : next - now < wait ? next - now : wait;
    }
    grpc_event ev = grpc_completion_queue_next(l->cq, deadline_in_ns(wait), NULL);
    if (ev.type == GRPC_OP_COMPLETE) dispatch(ev);
  }
  /* Stopping: end every call, then wait until gRPC has handed back every
   * batch, so nothing completes into freed memory. */
  for (int i = 0; i < l->n_slots; i++)
    if (l->slots[i].call) grpc_call_cancel(l->slots[i].call, NULL);
  while (pending_total(l) > 0) {
    grpc_event ev = grpc_completion_queue_next(l->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_OP_COMPLETE) dispatch(ev);
  }
  for (int i = 0; i < l->n_slots; i++) slot_clear(&l->slots[i]);
  return NULL;
}

/* ------------------------------------------------------------ start, stop */

static grpc_channel *channel_new(const char *target) {
  grpc_arg args[3];
  memset(args, 0, sizeof args);
  /* Responses as large as the server sends (it allows INT32_MAX). */
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[0].value.integer = -1;
  /* Channels with the same target would otherwise share one connection
   * (gRPC's global subchannel pool): --grpc-channels N means N. */
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
  args[1].value.integer = 1;
  /* No retries. ptperf sets no retry policy, but a channel with retries
   * enabled still runs every call through gRPC's retry filter, which keeps
   * what it sends to be able to send it again (65.8k -> 58.0k instructions
   * per unary call, callgrind), and retries "transparently" a call the
   * server refused before reading it (a GOAWAY race, a refused stream).
   * A load generator should cost the cores it shares with the server no
   * more than it must, and should count such a refusal, not hide it. */
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = (char *)GRPC_ARG_ENABLE_RETRIES;
  args[2].value.integer = 0;
  grpc_channel_args ca = {.num_args = 3, .args = args};
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  grpc_channel *ch = grpc_channel_create(target, creds, &ca);
  grpc_channel_credentials_release(creds);
  return ch;
}

static const char *state_name(grpc_connectivity_state st) {
  switch (st) {
    case GRPC_CHANNEL_IDLE:
      return "IDLE";
    case GRPC_CHANNEL_CONNECTING:
      return "CONNECTING";
    case GRPC_CHANNEL_READY:
      return "READY";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "TRANSIENT_FAILURE";
    default:
      return "SHUTDOWN";
  }
}

/* Connects up front, so that a wrong address fails here, not as errors. */
static enum pts_status wait_ready(grpc_channel *ch, grpc_completion_queue *cq, const char *target,
                                  int timeout_ms, struct pts_error *err) {
  static struct tag connect_tag = {TAG_CONNECT, NULL};
  gpr_timespec deadline = deadline_in_ns((uint64_t)timeout_ms * 1000000ULL);
  for (;;) {
    grpc_connectivity_state st = grpc_channel_check_connectivity_state(ch, 1);
    if (st == GRPC_CHANNEL_READY) return PTS_OK;
    /* TRANSIENT_FAILURE: a connection attempt failed (refused, no route);
     * the HTTP side already answered, so waiting for backoff would only
     * delay the message. */
    if (st == GRPC_CHANNEL_SHUTDOWN || st == GRPC_CHANNEL_TRANSIENT_FAILURE ||
        gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), deadline) >= 0)
      return pts_error_set(err, PTS_UNAVAILABLE,
                           "can not connect to the gRPC server at %s within %d ms (channel %s)",
                           target, timeout_ms, state_name(st));
    grpc_channel_watch_connectivity_state(ch, st, deadline, cq, &connect_tag);
    grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  }
}

static void load_free(struct ptperf_grpc_load *l) {
  if (l->slots)
    for (int i = 0; i < l->n_slots; i++) pts_free(l->slots[i].rbuf);
  pts_free(l->slots);
  if (l->cq) {
    grpc_completion_queue_shutdown(l->cq);
    while (grpc_completion_queue_next(l->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(l->cq);
  }
  for (int i = 0; l->channels && i < l->n_channels; i++)
    if (l->channels[i]) grpc_channel_destroy(l->channels[i]);
  pts_free(l->channels);
  pts_free(l->methods);
  pts_free(l->slices);
  pts_free(l);
  grpc_shutdown();
}

enum pts_status ptperf_grpc_load_start(const struct ptperf_grpc_options *o,
                                       uint8_t *const *messages, const size_t *message_lens,
                                       size_t n_messages, struct ptperf_grpc_load **out,
                                       struct pts_error *err) {
  *out = NULL;
  if (o->concurrency < 1 || o->channels < 1 || n_messages == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "concurrency %d, %d channels, %zu requests: each must be >= 1",
                         o->concurrency, o->channels, n_messages);
  struct ptperf_grpc_load *l = pts_calloc(1, sizeof *l);
  if (!l) return pts_error_set(err, PTS_NOMEM, "no memory for the gRPC load");
  pts_absl_detector_off(); /* ptperf/lib/absl_sync.h */
  grpc_init();
  l->rec = o->rec;
  atomic_init(&l->stop, false);
  l->streaming = o->streaming;
  l->messages = messages;
  l->message_lens = message_lens;
  l->n_messages = n_messages;
  l->n_channels = o->channels;
  l->n_slots = o->concurrency;
  l->slices = pts_calloc(n_messages, sizeof l->slices[0]);
  l->channels = pts_calloc((size_t)o->channels, sizeof l->channels[0]);
  l->methods = pts_calloc((size_t)o->channels, sizeof l->methods[0]);
  l->slots = pts_calloc((size_t)o->concurrency, sizeof l->slots[0]);
  l->cq = grpc_completion_queue_create_for_next(NULL);
  if (!l->slices || !l->channels || !l->methods || !l->slots) {
    load_free(l);
    return pts_error_set(err, PTS_NOMEM, "no memory for %d gRPC calls", o->concurrency);
  }
  for (size_t i = 0; i < n_messages; i++)
    l->slices[i] = grpc_slice_from_static_buffer(messages[i], message_lens[i]);
  const char *method = o->streaming ? PTPERF_GRPC_STREAM_METHOD : PTPERF_GRPC_INFER_METHOD;
  for (int i = 0; i < o->channels; i++) {
    l->channels[i] = channel_new(o->target);
    l->methods[i] = grpc_channel_register_call(l->channels[i], method, NULL, NULL);
    enum pts_status st = wait_ready(l->channels[i], l->cq, o->target, o->connect_timeout_ms, err);
    if (st) {
      load_free(l);
      return st;
    }
  }
  for (int i = 0; i < o->concurrency; i++) {
    struct slot *s = &l->slots[i];
    s->l = l;
    s->ch = l->channels[i % o->channels];
    s->method = l->methods[i % o->channels];
    s->t_call = (struct tag){o->streaming ? TAG_STREAM_OPEN : TAG_UNARY, s};
    s->t_send = (struct tag){TAG_STREAM_SEND, s};
    s->t_recv = (struct tag){TAG_STREAM_RECV, s};
    s->t_status = (struct tag){TAG_STREAM_STATUS, s};
  }
  if (pthread_create(&l->thread, NULL, load_main, l) != 0) {
    load_free(l);
    return pts_error_set(err, PTS_INTERNAL, "can not start the gRPC load thread");
  }
  l->thread_started = true;
  *out = l;
  return PTS_OK;
}

void ptperf_grpc_load_stop(struct ptperf_grpc_load *l) {
  if (!l) return;
  atomic_store(&l->stop, true);
  if (l->thread_started) pthread_join(l->thread, NULL);
  load_free(l);
}
