/* frontend/http/http.c — the loops, the handler of every endpoint, and
 * the hop from an instance thread back to the loop that owns a request.
 *
 * See http.h for the threading model and docs/internals/http.md for the
 * life of a request. The connection and its bytes are conn.c's, the wire
 * format v2_json.c's, the URL map router.c's; this file glues them to the
 * server core.
 */
#include "frontend/http/http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config/model_config.h"
#include "core/alloc.h"
#include "core/asan.h"
#include "core/fmt.h"
#include "core/header_forward.h"
#include "core/log.h"
#include "core/name.h"
#include "core/overload.h"
#include "frontend/http/cloud.h"
#include "frontend/http/compress.h"
#include "frontend/http/conn.h"
#include "frontend/http/generate.h"
#include "frontend/http/jsonw.h"
#include "frontend/http/repo_json.h"
#include "net/libevent.h"
#include "net/listen.h"
#include "frontend/http/http_impl.h"
#include "frontend/http/restrict.h"
#include "frontend/http/router.h"
#include "frontend/http/settings_http.h"
#include "frontend/http/shm_http.h"
#include "frontend/http/v2_json.h"
#include "frontend/http/stats_json.h"
#include "trace/trace.h"

/* How long pts_http_stop lets running inferences finish and be answered
 * before it closes the connections anyway. */
#define DRAIN_SECONDS 10

/* The extensions this frontend implements today (protocol-facts §1.4);
 * cuda_shared_memory is added when this build has CUDA (as Triton lists it
 * only when built with GPU support). */
static const char *const EXTENSIONS[] = {"classification", "sequence", "model_configuration",
                                         "binary_tensor_data", "model_repository",
                                         "model_repository(unload_dependents)",
                                         "schedule_policy", "statistics", "trace", "logging",
                                         "system_shared_memory", "cuda_shared_memory"};

/* One inference between pts_server_infer_async and its reply. */
struct infer_ctx {
  struct loop *loop;
  struct conn *cn;            /* its connection; NULL once gone */
  struct event *ev;                /* on loop->base; fired by the done callback */
  struct pts_infer_request *ireq;  /* owned, except while the core has it */
  struct pts_infer_response *resp; /* owned once done ran */
  struct pts_error err;
  enum pts_http_encoding accept;
  /* The reply's form: PTS_ROUTE_MODEL_INFER (the v2 tensors), or Triton's
   * generate extension, one JSON object or one Server-Sent Event. */
  enum pts_http_route_kind form;
  /* A repository request (index, load, unload) answered by a server
   * thread: its answer is `err`, or `body` (owned JSON; NULL = empty 200). */
  bool control;
  char *body;
  size_t body_len;
  bool completed; /* done ran (guarded by mu) */
  /* The loop thread is inside pts_server_infer_async for it (guarded by
   * mu): a done that runs meanwhile (run to completion, on this thread)
   * leaves the reply to handle_infer instead of firing the event. */
  bool submitting;
  bool orphaned;  /* the frontend stopped first; done frees (guarded by mu) */
  struct infer_ctx *prev, *next;
};

/* ------------------------------------------------------------------ */
/* lifetime of the shared state                                        */

static void hub_release(struct pts_http *h) {
  if (atomic_fetch_sub(&h->refs, 1) != 1) return;
  pts_restrictions_clear(&h->restrictions);
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->drained);
  pts_free(h->loops);
  pts_free(h);
}

/* ------------------------------------------------------------------ */
/* replies                                                             */

static void send_empty(struct conn *cn, int code) { pts_conn_send(cn, code); }

static void send_json(struct conn *cn, int code, const char *json, size_t len) {
  pts_conn_add_header(cn, "Content-Type", "application/json");
  evbuffer_add(pts_conn_reply_body(cn), json, len);
  pts_conn_send(cn, code);
}

/* Sends `json` and frees it; NULL (allocation failed) becomes a 500. */
static void send_owned_json(struct conn *cn, int code, char *json, size_t len) {
  if (!json) {
    static const char oom[] = "{\"error\":\"out of memory\"}";
    send_json(cn, 500, oom, sizeof oom - 1);
    return;
  }
  send_json(cn, code, json, len);
  pts_free(json);
}

static void send_error_msg(struct conn *cn, enum pts_status code, const char *msg) {
  size_t len = 0;
  char *json = pts_v2_error_json(msg, &len);
  send_owned_json(cn, pts_status_http(code), json, len);
}

static void send_error(struct conn *cn, const struct pts_error *err) {
  /* An overload answer says when to come back (RFC 9110 §10.2.3). */
  if (err->code == PTS_EXHAUSTED)
    pts_conn_add_header(cn, "Retry-After", PTS_CONN_RETRY_AFTER_S == 1 ? "1" : "2");
  send_error_msg(cn, err->code, err->msg);
}

/* ------------------------------------------------------------------ */
/* request helpers                                                     */

/* The request's body, shared with the connection (and then with the
 * request's tensors): it was read once, into a buffer of its size. */
static enum pts_status read_body(struct pts_http *h, struct conn *cn, struct pts_buf **out,
                                 struct pts_error *err) {
  struct pts_buf *b = pts_conn_body(cn);
  if (!b) return pts_error_set(err, PTS_NOMEM, "out of memory reading a request body");
  /* conn.c refuses a longer body before reading it; kept for its message. */
  if (b->size > h->max_input) {
    size_t len = b->size;
    pts_buf_release(b);
    return pts_error_set(err, PTS_TOO_LARGE,
                         "request body of %zu bytes exceeds the maximum allowed input size of %zu "
                         "bytes (--http-max-input-size)",
                         len, h->max_input);
  }
  *out = b;
  return PTS_OK;
}

/* ------------------------------------------------------------------ */
/* endpoints other than infer                                          */

/* The Open Inference Protocol's bodies ({"live": bool}, {"ready": bool}),
 * which KServe's Python SDK reads; tritonserver sends none, and
 * tritonclient reads only the status. */
static void handle_health(struct pts_http *h, struct conn *cn, bool ready) {
  bool ok = ready ? pts_server_is_ready(h->server) : pts_server_is_live(h->server);
  if (h->cloud) { /* SageMaker's /ping, Vertex AI's health route: the status alone */
    send_empty(cn, ok ? 200 : 400);
    return;
  }
  static const char *const bodies[2][2] = {{"{\"live\":false}", "{\"live\":true}"},
                                           {"{\"ready\":false}", "{\"ready\":true}"}};
  const char *body = bodies[ready][ok];
  send_json(cn, ok ? 200 : 400, body, strlen(body));
}

static void handle_server_metadata(struct pts_http *h, struct conn *cn) {
  size_t len = 0, n = sizeof EXTENSIONS / sizeof EXTENSIONS[0];
  if (!pts_shm_cuda_available(pts_server_shm(h->server))) n--; /* cuda_shared_memory is last */
  char *json =
      pts_v2_server_metadata(pts_server_id(h->server), pts_server_version(), EXTENSIONS, n, &len);
  send_owned_json(cn, 200, json, len);
}

static void handle_model_metadata(struct pts_http *h, struct conn *cn,
                                  const struct pts_http_route *r) {
  struct pts_error err;
  struct pts_model *m = NULL;
  if (pts_server_model_get(h->server, r->model, r->version, false, &m, &err) != PTS_OK) {
    send_error(cn, &err);
    return;
  }
  int64_t one = pts_model_version(m);
  int64_t *versions = NULL;
  size_t n = 1;
  if (r->version < 0 &&
      pts_server_model_versions(h->server, r->model, &versions, &n, &err) != PTS_OK) {
    pts_model_release(m);
    send_error(cn, &err);
    return;
  }
  size_t len = 0;
  char *json =
      pts_v2_model_metadata(r->model, versions ? versions : &one, n, pts_model_config(m), &len);
  pts_free(versions);
  pts_model_release(m);
  send_owned_json(cn, 200, json, len);
}

static void handle_model_ready(struct pts_http *h, struct conn *cn,
                               const struct pts_http_route *r) {
  struct pts_error err;
  bool ready;
  if (pts_server_model_ready(h->server, r->model, r->version, &ready, &err) != PTS_OK) {
    send_error(cn, &err);
    return;
  }
  /* protocol-facts §1.3: known but not ready is 400 with this exact text.
   * Ready: the Open Inference Protocol's {"name": ..., "ready": true}. */
  if (ready) {
    struct pts_jsonw w;
    pts_jsonw_init(&w);
    pts_jsonw_cstr(&w, "{\"name\":");
    pts_jsonw_str(&w, r->model, strlen(r->model));
    pts_jsonw_cstr(&w, ",\"ready\":true}");
    size_t len = 0;
    char *json = pts_jsonw_take(&w, &len);
    send_owned_json(cn, 200, json, len);
  } else {
    send_error_msg(cn, PTS_INVALID_ARG, "Model version not ready");
  }
}

static void handle_model_config(struct pts_http *h, struct conn *cn,
                                const struct pts_http_route *r) {
  struct pts_error err;
  struct pts_model *m = NULL;
  if (pts_server_model_get(h->server, r->model, r->version, false, &m, &err) != PTS_OK) {
    send_error(cn, &err);
    return;
  }
  const Inference__ModelConfig *cfg = pts_model_config(m);
  char *json = cfg ? pts_model_config_to_json(cfg) : NULL;
  pts_model_release(m);
  if (!json) {
    send_error_msg(
        cn, PTS_INTERNAL,
        cfg ? "out of memory rendering the model configuration" : "the model has no configuration");
    return;
  }
  send_owned_json(cn, 200, json, strlen(json));
}

/* Statistics extension (§1.11); r->model NULL = every model. */
static void handle_model_stats(struct pts_http *h, struct conn *cn,
                               const struct pts_http_route *r) {
  struct pts_error err;
  struct pts_model_stats *stats = NULL;
  size_t n = 0, len = 0;
  if (pts_server_model_stats(h->server, r->model, r->version, &stats, &n, &err) != PTS_OK) {
    send_error(cn, &err);
    return;
  }
  char *json = pts_v2_stats_json(stats, n, &len);
  pts_server_model_stats_free(stats, n);
  send_owned_json(cn, 200, json, len);
}

/* System and CUDA shared-memory extensions (shm_http.h). */
static void handle_shm(struct pts_http *h, struct conn *cn,
                       const struct pts_http_route *r) {
  struct pts_error err;
  struct pts_shm_registry *shm = pts_server_shm(h->server);
  enum pts_status st = PTS_OK;
  if (r->kind == PTS_ROUTE_SHM_STATUS) {
    char *json = NULL;
    size_t len = 0;
    st = pts_http_shm_status(shm, r->cuda, r->region, &json, &len, &err);
    if (st == PTS_OK) {
      send_owned_json(cn, 200, json, len);
      return;
    }
  } else if (r->kind == PTS_ROUTE_SHM_REGISTER) {
    struct pts_buf *body = NULL;
    st = read_body(h, cn, &body, &err);
    if (st == PTS_OK)
      st = pts_http_shm_register(shm, r->cuda, r->region, body->data, body->size, &err);
    pts_buf_release(body);
  } else {
    st = pts_shm_unregister(shm, r->cuda ? PTS_SHM_CUDA : PTS_SHM_SYSTEM, r->region, &err);
  }
  if (st != PTS_OK)
    send_error(cn, &err);
  else
    send_empty(cn, 200);
}

/* Trace and logging extensions (settings_http.h): GET reads, POST updates. */
static void handle_settings(struct pts_http *h, struct conn *cn,
                            const struct pts_http_route *r, bool post) {
  struct pts_error err;
  struct pts_buf *body = NULL;
  if (post && read_body(h, cn, &body, &err) != PTS_OK) {
    send_error(cn, &err);
    return;
  }
  const char *data = body ? (const char *)body->data : NULL;
  size_t size = body ? body->size : 0;
  char *json = NULL;
  size_t len = 0;
  enum pts_status st =
      r->kind == PTS_ROUTE_LOGGING
          ? pts_http_logging(post, data, size, &json, &len, &err)
          : pts_http_trace_setting(h->server, r->model, post, data, size, &json, &len, &err);
  pts_buf_release(body);
  if (st != PTS_OK)
    send_error(cn, &err);
  else
    send_owned_json(cn, 200, json, len);
}

/* ------------------------------------------------------------------ */
/* infer                                                               */

static void ctx_unlink(struct infer_ctx *c) {
  if (c->prev)
    c->prev->next = c->next;
  else
    c->loop->pending = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
}

static void ctx_free(struct infer_ctx *c) {
  struct pts_http *h = c->loop->h;
  if (c->ev) event_free(c->ev);
  pts_free(c->body);
  pts_infer_request_free(c->ireq);
  pts_infer_response_free(c->resp);
  pts_free(c);
  hub_release(h);
}

static void on_infer_ready(evutil_socket_t fd, short what, void *arg);

/* Loop thread: a zeroed context with its event on this loop (fired with
 * the context as argument), from the loop's spares when it has one; NULL
 * when out of memory. Holds no reference to the hub yet. */
static struct infer_ctx *ctx_take(struct loop *lp) {
  if (lp->n_spare > 0) {
    struct infer_ctx *c = lp->spare[--lp->n_spare];
    PTS_ASAN_UNPOISON(c, sizeof *c);
    return c;
  }
  struct infer_ctx *c = pts_calloc(1, sizeof *c);
  if (!c) return NULL;
  c->loop = lp;
  c->ev = event_new(lp->base, -1, 0, on_infer_ready, c);
  if (!c->ev) {
    pts_free(c);
    return NULL;
  }
  return c;
}

/* Loop thread: gives back a context that holds nothing (no request,
 * response, body or hub reference) and whose event is not pending. */
static void ctx_put(struct infer_ctx *c) {
  struct loop *lp = c->loop;
  struct event *ev = c->ev;
  if (!ev || lp->n_spare == PTS_HTTP_CTX_POOL) {
    if (ev) event_free(ev);
    pts_free(c);
    return;
  }
  memset(c, 0, sizeof *c);
  c->loop = lp;
  c->ev = ev;
  lp->spare_ev[lp->n_spare] = ev;
  lp->spare[lp->n_spare++] = c;
  PTS_ASAN_POISON(c, sizeof *c);
}

/* Loop thread: ctx_free, keeping the context for the next request. */
static void ctx_recycle(struct infer_ctx *c) {
  struct pts_http *h = c->loop->h;
  pts_free(c->body);
  pts_infer_request_free(c->ireq);
  pts_infer_response_free(c->resp);
  c->body = NULL;
  c->ireq = NULL;
  c->resp = NULL;
  ctx_put(c);
  hub_release(h);
}

/* conn.c (pts_conn_handlers.orphan): the connection of a pending inference
 * closed. */
static void ctx_orphan_conn(struct infer_ctx *c) {
  /* The connection is closing: the reply has nowhere to go. */
  c->cn = NULL;
}

static void release_chunk(const void *data, size_t len, void *arg) {
  (void)data;
  (void)len;
  pts_buf_release(arg);
}

static void free_owned(const void *data, size_t len, void *arg) {
  (void)len;
  (void)arg;
  pts_free((void *)data);
}

/* Writes an encoded reply uncompressed: the JSON, then every binary chunk
 * by reference (the socket reads the batch output buffer directly). */
static void send_plain(struct conn *cn, struct pts_v2_reply *r) {
  struct evbuffer *out = pts_conn_reply_body(cn);
  evbuffer_add(out, r->json, r->json_len);
  for (size_t i = 0; i < r->n_chunks; i++) {
    struct pts_v2_chunk *c = &r->chunks[i];
    if (c->buf && evbuffer_add_reference(out, c->data, c->size, release_chunk, c->buf) == 0) {
      c->buf = NULL; /* the reference now belongs to libevent */
    } else {
      evbuffer_add(out, c->data, c->size);
    }
  }
}

/* Compresses JSON and chunks as one stream; on failure the caller sends
 * the body uncompressed (§1.8). */
static bool send_compressed(struct conn *cn, struct pts_v2_reply *r,
                            enum pts_http_encoding enc) {
  struct pts_http_piece stack[8];
  struct pts_http_piece *pieces = stack;
  size_t n = r->n_chunks + 1;
  if (n > 8) {
    pieces = pts_calloc(n, sizeof *pieces);
    if (!pieces) return false;
  }
  pieces[0].data = r->json;
  pieces[0].len = r->json_len;
  for (size_t i = 0; i < r->n_chunks; i++) {
    pieces[i + 1].data = r->chunks[i].data;
    pieces[i + 1].len = r->chunks[i].size;
  }
  void *z = NULL;
  size_t zlen = 0;
  struct pts_error err;
  enum pts_status st = pts_http_deflate(enc, PTS_HTTP_DEFLATE_DEFAULT, pieces, n, &z, &zlen, &err);
  if (pieces != stack) pts_free(pieces);
  if (st != PTS_OK) {
    PTS_LOG_WARN("sending an uncompressed response: %s", err.msg);
    return false;
  }
  pts_conn_add_header(cn, "Content-Encoding", pts_http_encoding_name(enc));
  struct evbuffer *out = pts_conn_reply_body(cn);
  if (evbuffer_add_reference(out, z, zlen, free_owned, NULL) != 0) {
    evbuffer_add(out, z, zlen);
    pts_free(z);
  }
  return true;
}

/* Sends the reply body written so far. It is held until the client reads
 * it (or goes): charged like a request body, so slow readers fill the
 * budget and new work is refused, instead of the server's memory growing
 * with every reply nobody reads. */
static void send_charged(struct conn *cn, int code) {
  size_t n = evbuffer_get_length(pts_conn_reply_body(cn));
  pts_overload_charge(n);
  cn->reply_charged = n;
  pts_conn_send(cn, code);
}

static void send_infer_reply(struct infer_ctx *c) {
  struct pts_error err;
  struct pts_v2_reply r;
  if (pts_v2_encode_infer(c->ireq, c->resp, &r, &err) != PTS_OK) {
    send_error(c->cn, &err);
    return;
  }
  const struct pts_cloud *cloud = c->loop->h->cloud;
  if (r.binary && cloud) {
    /* The platforms pass no custom header: the size rides in the type. */
    char type[128 + PTS_FMT_INT_MAX];
    size_t n = strlen(cloud->binary_mime);
    if (n > 128) n = 128; /* static strings of cloud.c, well below */
    memcpy(type, cloud->binary_mime, n);
    type[n + pts_fmt_u64(type + n, r.json_len)] = 0;
    pts_conn_add_header(c->cn, "Content-Type", type);
  } else if (r.binary) {
    char num[PTS_FMT_INT_MAX];
    pts_fmt_u64(num, r.json_len);
    pts_conn_add_header(c->cn, "Content-Type", "application/octet-stream");
    pts_conn_add_header(c->cn, "Inference-Header-Content-Length", num);
  } else {
    pts_conn_add_header(c->cn, "Content-Type", "application/json");
  }
  if (c->accept == PTS_HTTP_ENC_IDENTITY || !send_compressed(c->cn, &r, c->accept))
    send_plain(c->cn, &r);
  pts_v2_reply_clear(&r);
  send_charged(c->cn, 200);
}

static const char SSE_TYPE[] = "text/event-stream; charset=utf-8";

/* An inference's failure on generate_stream: Triton sets the status from
 * the error and sends the error object as the stream's one event. */
static void send_event_error(struct conn *cn, const struct pts_error *err) {
  size_t len = 0;
  char *event = pts_generate_error_event(err->msg, &len);
  if (!event) {
    send_error(cn, err);
    return;
  }
  pts_conn_add_header(cn, "Content-Type", SSE_TYPE);
  evbuffer_add(pts_conn_reply_body(cn), event, len);
  pts_free(event);
  pts_conn_send(cn, pts_status_http(err->code));
}

/* The generate extension's reply (§1.17): the outputs as one JSON object,
 * or, for generate_stream, as the one event of the stream (a TorchScript
 * model answers a request once). */
static void send_generate_reply(struct infer_ctx *c) {
  bool stream = c->form == PTS_ROUTE_MODEL_GENERATE_STREAM;
  struct pts_error err;
  char *out = NULL;
  size_t len = 0;
  if (pts_generate_encode(c->ireq, c->resp, stream, &out, &len, &err) != PTS_OK) {
    if (stream)
      send_event_error(c->cn, &err);
    else
      send_error(c->cn, &err);
    return;
  }
  pts_conn_add_header(c->cn, "Content-Type", stream ? SSE_TYPE : "application/json");
  struct evbuffer *body = pts_conn_reply_body(c->cn);
  if (evbuffer_add_reference(body, out, len, free_owned, NULL) != 0) {
    evbuffer_add(body, out, len);
    pts_free(out);
  }
  send_charged(c->cn, 200);
}

void pts_http_reply_finished(struct pts_http *h) {
  pthread_mutex_lock(&h->mu);
  h->in_flight--;
  pthread_cond_broadcast(&h->drained);
  pthread_mutex_unlock(&h->mu);
}

/* An accepted request counts as in flight until its reply has been written
 * to the socket (or the connection is gone), so a shutdown never closes a
 * connection with an answer still in its output buffer. A connection
 * answers one request at a time, so its reply_pending stands for that one
 * reply; conn.c ends it when the reply is written or the connection
 * closes (pts_conn_handlers.reply_end). */
static void reply_end(struct conn *cn) {
  cn->reply_pending = false;
  pts_overload_release(cn->reply_charged);
  cn->reply_charged = 0;
  pts_http_reply_finished(cn->lp->h);
}

static void on_infer_ready(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct infer_ctx *c = arg;
  struct pts_http *h = c->loop->h;
  pthread_mutex_lock(&h->mu);
  ctx_unlink(c);
  pthread_mutex_unlock(&h->mu);
  if (!c->cn) {
    pts_http_reply_finished(h); /* the client is gone: nothing to write */
  } else {
    c->cn->ctx = NULL;
    c->cn->reply_pending = true;
    struct pts_trace *trace = c->ireq ? c->ireq->trace : NULL;
    pts_trace_record(trace, PTS_TRACE_HTTP_SEND_START, pts_now_ns());
    if (c->err.code != PTS_OK && c->form == PTS_ROUTE_MODEL_GENERATE_STREAM)
      send_event_error(c->cn, &c->err);
    else if (c->err.code != PTS_OK)
      send_error(c->cn, &c->err);
    else if (c->control && c->body)
      send_json(c->cn, 200, c->body, c->body_len);
    else if (c->control)
      send_empty(c->cn, 200);
    else if (!c->resp)
      send_error_msg(c->cn, PTS_INTERNAL, "the inference finished without a response");
    else if (c->form != PTS_ROUTE_MODEL_INFER)
      send_generate_reply(c);
    else
      send_infer_reply(c);
    pts_trace_record(trace, PTS_TRACE_HTTP_SEND_END, pts_now_ns());
  }
  ctx_recycle(c); /* frees the request, which ends its trace */
}

/* Instance thread (or the caller's, for requests answered at once). */
static void on_infer_done(struct pts_infer_request *ireq, struct pts_infer_response *resp,
                          const struct pts_error *err, void *arg) {
  struct infer_ctx *c = arg;
  struct pts_http *h = c->loop->h;
  pthread_mutex_lock(&h->mu);
  c->ireq = ireq;
  c->resp = resp;
  if (err && err->code != PTS_OK)
    c->err = *err;
  else
    pts_error_clear(&c->err);
  c->completed = true;
  if (c->submitting) { /* handle_infer answers it when infer_async returns */
    pthread_mutex_unlock(&h->mu);
    return;
  }
  if (c->orphaned) {
    pthread_mutex_unlock(&h->mu);
    ctx_free(c);
    return;
  }
  /* Under the lock, so pts_http_stop can not free the event meanwhile. */
  event_active(c->ev, EV_READ, 0);
  pthread_mutex_unlock(&h->mu);
}

/* The request headers an inference reads. */
struct infer_headers {
  const char *encoding;      /* Content-Encoding */
  const char *header_length; /* Inference-Header-Content-Length */
  const char *accept;        /* Accept-Encoding */
  const char *type;          /* Content-Type (read on SageMaker's listener) */
};

/* Finds them in one pass over the request's headers, the first of each
 * name in any case, rather than one walk of the list per name. Names are
 * compared only when the length matches. */
static void infer_headers(struct conn *cn, struct infer_headers *out) {
  memset(out, 0, sizeof *out);
  const char *key, *value;
  size_t len;
  for (size_t i = 0; pts_conn_header_at(cn, i, &key, &len, &value); i++) {
    const char **slot = NULL, *name = NULL;
    switch (len) {
      case 16:
        slot = &out->encoding, name = "Content-Encoding";
        break;
      case 31:
        slot = &out->header_length, name = "Inference-Header-Content-Length";
        break;
      case 15:
        slot = &out->accept, name = "Accept-Encoding";
        break;
      case 12:
        slot = &out->type, name = "Content-Type";
        break;
      default:
        continue;
    }
    if (!*slot && strncasecmp(key, name, len) == 0) *slot = value;
  }
}

/* A raw binary request (Inference-Header-Content-Length: 0): the model's
 * configuration says what the body is (pts_v2_decode_raw). The model is
 * looked up here, as the server will look it up again to run it: a reload
 * in between at worst refuses the request there. */
static enum pts_status decode_raw(struct pts_http *h, struct pts_buf *body,
                                  struct pts_infer_request *ireq, struct pts_error *err) {
  struct pts_model *m = NULL;
  enum pts_status st =
      pts_server_model_get(h->server, ireq->model_name, ireq->model_version, false, &m, err);
  if (st != PTS_OK) return st;
  st = pts_v2_decode_raw(body, pts_model_config(m), ireq, err);
  pts_model_release(m);
  return st;
}

/* A generate request (§1.17): one JSON object, read against the model's
 * configuration, looked up as for a raw request. Triton takes no
 * compressed body here. */
static enum pts_status decode_generate(struct pts_http *h, struct conn *cn,
                                       const struct infer_headers *hd,
                                       struct pts_infer_request *ireq, struct pts_error *err) {
  struct pts_model *m = NULL;
  enum pts_status st =
      pts_server_model_get(h->server, ireq->model_name, ireq->model_version, false, &m, err);
  if (st != PTS_OK) return st;
  if (pts_http_content_encoding(hd->encoding) != PTS_HTTP_ENC_IDENTITY) {
    pts_model_release(m);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Unsupported content-encoding, only 'identity' is supported (got "
                         "'%.40s')",
                         hd->encoding);
  }
  struct pts_buf *body = NULL;
  st = read_body(h, cn, &body, err);
  if (st == PTS_OK) {
    st = pts_generate_decode((const char *)body->data, body->size, pts_model_config(m), ireq, err);
    pts_buf_release(body);
  }
  pts_model_release(m);
  return st;
}

static enum pts_status decode_request(struct pts_http *h, struct conn *cn,
                                      const struct infer_headers *hd,
                                      struct pts_infer_request *ireq, struct pts_error *err) {
  enum pts_http_encoding enc = pts_http_content_encoding(hd->encoding);
  if (enc == PTS_HTTP_ENC_UNKNOWN) {
    pts_conn_add_header(cn, "Accept-Encoding", "gzip, deflate");
    return pts_error_set(err, PTS_UNSUPPORTED, "Unsupported compression type '%.40s'",
                         hd->encoding);
  }
  struct pts_buf *body = NULL;
  enum pts_status st = read_body(h, cn, &body, err);
  if (st != PTS_OK) return st;
  if (enc != PTS_HTTP_ENC_IDENTITY) {
    struct pts_buf *plain = NULL;
    st = pts_http_inflate(body->data, body->size, h->max_input, enc, &plain, err);
    pts_buf_release(body);
    if (st != PTS_OK) return st;
    body = plain;
  }
  size_t header_len;
  st = pts_v2_header_length(hd->header_length, body->size, &header_len, err);
  if (st == PTS_OK && hd->header_length && header_len == 0)
    st = decode_raw(h, body, ireq, err);
  else if (st == PTS_OK)
    st = pts_v2_decode_infer(body, header_len, ireq, err);
  pts_buf_release(body); /* binary inputs keep their own references */
  return st;
}

/* --http-header-forward-pattern: the matching headers become string
 * parameters after the body's own, in the order received, as Triton's
 * ForwardHeaders (core/header_forward.h). */
static enum pts_status forward_headers(struct conn *cn, struct pts_infer_request *ireq,
                                       struct pts_error *err) {
  const char *key, *value;
  size_t len;
  for (size_t i = 0; pts_conn_header_at(cn, i, &key, &len, &value); i++) {
    if (!pts_header_forward_match(PTS_FORWARD_HTTP, key, len)) continue;
    enum pts_status st =
        pts_infer_request_add_string_param(ireq, key, len, value, strlen(value), err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}

/* Budget: `carried` bytes of the memory budget come with the request
 * (conn.c charged them when its head was admitted); they become the
 * inference request's charge, adjusted to what it holds once decoded, and
 * return to the budget when it is freed. */
static void handle_infer(struct loop *lp, struct conn *cn, struct pts_http_route *r,
                         size_t carried) {
  struct pts_http *h = lp->h;
  struct pts_error err;
  if (atomic_load(&h->stopping)) {
    pts_overload_release(carried);
    send_error_msg(cn, PTS_UNAVAILABLE, "the server is shutting down");
    return;
  }
  struct pts_infer_request *ireq = pts_infer_request_new();
  struct infer_ctx *c = ctx_take(lp);
  if (!ireq || !c) {
    pts_overload_release(carried);
    pts_infer_request_free(ireq);
    if (c) ctx_put(c);
    send_error_msg(cn, PTS_NOMEM, "out of memory accepting an inference request");
    return;
  }
  ireq->budget_bytes = carried; /* pts_infer_request_free returns it */
  ireq->receive_ns = pts_now_ns();
  ireq->model_name = r->model;
  r->model = NULL;
  ireq->model_version = r->version;
  ireq->trace = pts_trace_sample(ireq->model_name);
  pts_trace_record(ireq->trace, PTS_TRACE_HTTP_RECV_START, ireq->receive_ns);
  struct infer_headers hd;
  infer_headers(cn, &hd);
  enum pts_status decoded = PTS_OK;
  if (h->cloud) /* the JSON header's size is in the Content-Type, if anywhere */
    decoded = pts_cloud_header_length(h->cloud, hd.type, &hd.header_length, &err);
  if (decoded == PTS_OK)
    decoded = r->kind == PTS_ROUTE_MODEL_INFER ? decode_request(h, cn, &hd, ireq, &err)
                                               : decode_generate(h, cn, &hd, ireq, &err);
  /* Triton forwards on its own inference route only (not generate, not
   * the SageMaker and Vertex AI listeners). */
  if (decoded == PTS_OK && r->kind == PTS_ROUTE_MODEL_INFER && !h->cloud)
    decoded = forward_headers(cn, ireq, &err);
  pts_trace_record(ireq->trace, PTS_TRACE_HTTP_RECV_END, pts_now_ns());
  if (decoded != PTS_OK) {
    pts_infer_request_free(ireq);
    ctx_put(c);
    send_error(cn, &err);
    return;
  }
  /* Admitted: decoded tensors are charged whether or not they fit. */
  ireq->budget_bytes =
      pts_overload_recharge(ireq->budget_bytes, pts_infer_request_held_bytes(ireq));
  c->loop = lp;
  c->cn = cn;
  c->accept = pts_http_accept_encoding(hd.accept);
  c->form = r->kind;
  ireq->done = on_infer_done;
  ireq->done_ctx = c;
  atomic_fetch_add(&h->refs, 1);
  pthread_mutex_lock(&h->mu);
  c->next = lp->pending;
  if (c->next) c->next->prev = c;
  lp->pending = c;
  h->in_flight++;
  c->submitting = true;
  pthread_mutex_unlock(&h->mu);
  cn->ctx = c;

  enum pts_status st = pts_server_infer_async(h->server, ireq, &err);
  pthread_mutex_lock(&h->mu);
  c->submitting = false;
  bool answered = st == PTS_OK && c->completed;
  pthread_mutex_unlock(&h->mu);
  /* Run to completion (or an instance thread that was quicker than this
   * one): done has been called; answer now, without the event's trip
   * through the loop. The loop is running, so the frontend can not have
   * orphaned c meanwhile. */
  if (answered) on_infer_ready(-1, 0, c);
  if (st != PTS_OK) {
    /* done will never run: the request is still ours. */
    cn->ctx = NULL;
    pthread_mutex_lock(&h->mu);
    ctx_unlink(c);
    h->in_flight--;
    pthread_cond_broadcast(&h->drained);
    pthread_mutex_unlock(&h->mu);
    c->ireq = ireq;
    pts_trace_record(ireq->trace, PTS_TRACE_HTTP_SEND_START, pts_now_ns());
    send_error(cn, &err);
    pts_trace_record(ireq->trace, PTS_TRACE_HTTP_SEND_END, pts_now_ns());
    ctx_recycle(c);
  }
}

/* ------------------------------------------------------------------ */
/* repository (model_repository extension, protocol-facts §1.12)       */

/* A repository request in flight, counted and listed like an inference
 * (so a stopping frontend waits for its answer), answered by a server
 * thread through on_control_done / on_index_done. NULL when out of memory
 * (the request was answered). */
static struct infer_ctx *control_begin(struct loop *lp, struct conn *cn) {
  struct pts_http *h = lp->h;
  struct infer_ctx *c = pts_calloc(1, sizeof *c); /* the connection's close orphans c */
  if (c) c->ev = event_new(lp->base, -1, 0, on_infer_ready, c);
  if (!c || !c->ev) {
    if (c) pts_free(c);
    send_error_msg(cn, PTS_NOMEM, "out of memory accepting a repository request");
    return NULL;
  }
  c->loop = lp;
  c->cn = cn;
  c->control = true;
  atomic_fetch_add(&h->refs, 1);
  pthread_mutex_lock(&h->mu);
  c->next = lp->pending;
  if (c->next) c->next->prev = c;
  lp->pending = c;
  h->in_flight++;
  pthread_mutex_unlock(&h->mu);
  cn->ctx = c;
  return c;
}

/* The server refused the request at once: no callback will come. */
static void control_refused(struct infer_ctx *c, const struct pts_error *err) {
  struct pts_http *h = c->loop->h;
  if (c->cn) c->cn->ctx = NULL;
  pthread_mutex_lock(&h->mu);
  ctx_unlink(c);
  h->in_flight--;
  pthread_cond_broadcast(&h->drained);
  pthread_mutex_unlock(&h->mu);
  send_error(c->cn, err);
  ctx_free(c);
}

/* Server thread: hands the answer to the loop (or frees, when orphaned). */
static void control_finish(struct infer_ctx *c, const struct pts_error *err, char *body,
                           size_t len) {
  struct pts_http *h = c->loop->h;
  pthread_mutex_lock(&h->mu);
  if (err && err->code != PTS_OK)
    c->err = *err;
  else
    pts_error_clear(&c->err);
  c->body = body;
  c->body_len = len;
  c->completed = true;
  if (c->orphaned) {
    pthread_mutex_unlock(&h->mu);
    ctx_free(c);
    return;
  }
  event_active(c->ev, EV_READ, 0);
  pthread_mutex_unlock(&h->mu);
}

static void on_control_done(const struct pts_error *err, void *arg) {
  control_finish(arg, err, NULL, 0);
}

static void on_index_done(struct pts_index_entry *entries, size_t n, const struct pts_error *err,
                          void *arg) {
  struct pts_error rendered = *err;
  char *json = NULL;
  size_t len = 0;
  if (err->code == PTS_OK && !(json = pts_v2_index_json(entries, n, &len)))
    pts_error_set(&rendered, PTS_NOMEM, "out of memory rendering the repository index");
  pts_server_index_free(entries, n);
  control_finish(arg, &rendered, json, len);
}

static void handle_repo_index(struct loop *lp, struct conn *cn) {
  struct pts_http *h = lp->h;
  struct pts_error err;
  struct pts_buf *body = NULL;
  bool ready = false;
  if (read_body(h, cn, &body, &err) != PTS_OK ||
      pts_v2_parse_index_request(body->data, body->size, &ready, &err) != PTS_OK) {
    pts_buf_release(body);
    send_error(cn, &err);
    return;
  }
  pts_buf_release(body);
  /* The index re-reads the repositories: a server thread does that. */
  struct infer_ctx *c = control_begin(lp, cn);
  if (c && pts_server_index_async(h->server, ready, on_index_done, c, &err) != PTS_OK)
    control_refused(c, &err);
}

static void handle_repo_control(struct loop *lp, struct conn *cn,
                                const struct pts_http_route *r) {
  struct pts_http *h = lp->h;
  struct pts_error err;
  bool load = r->kind == PTS_ROUTE_REPO_LOAD;
  if (r->repo && r->repo[0]) {
    /* protocol-facts §1.1: a named repository is not supported. */
    pts_error_set(&err, PTS_UNSUPPORTED, "failed to %s '%s': repository name '%s' is not supported "
                  "in the path", load ? "load" : "unload", r->model, r->repo);
    send_error(cn, &err);
    return;
  }
  struct pts_buf *body = NULL;
  struct pts_load_params params;
  memset(&params, 0, sizeof params);
  bool dependents = false;
  enum pts_status st = read_body(h, cn, &body, &err);
  if (st == PTS_OK && load)
    st = pts_repo_parse_load(body->data, body->size, r->model, &params, &err);
  else if (st == PTS_OK)
    st = pts_repo_parse_unload(body->data, body->size, r->model, &dependents, &err);
  pts_buf_release(body);
  if (st != PTS_OK) {
    pts_load_params_clear(&params);
    send_error(cn, &err);
    return;
  }
  struct infer_ctx *c = control_begin(lp, cn);
  if (!c) {
    pts_load_params_clear(&params);
    return;
  }
  st = load ? pts_server_model_load_async(h->server, r->model, &params, on_control_done, c, &err)
            : pts_server_model_unload_async(h->server, r->model, dependents, on_control_done, c,
                                            &err);
  if (st != PTS_OK) control_refused(c, &err);
}

/* ------------------------------------------------------------------ */
/* dispatch                                                            */

/* --http-restricted-api: 403 unless the API group's header is present with
 * its value (checked before the method, as tritonserver does). */
static bool refuse_restricted(struct pts_http *h, struct conn *cn, const char *path) {
  const struct pts_restriction *rs =
      pts_restriction_for(&h->restrictions, pts_http_api_of_path(path));
  if (!rs) return false;
  const char *v = pts_conn_header(cn, rs->header);
  if (v && strcmp(v, rs->value) == 0) return false;
  char msg[PTS_ERROR_MSG_MAX];
  snprintf(msg, sizeof msg, "This API is restricted, expecting header '%s'", rs->header);
  size_t len = 0;
  char *json = pts_v2_error_json(msg, &len);
  send_owned_json(cn, json ? 403 : 500, json, len);
  return true;
}

/* Names from the path never reach a lookup or a file path with '/' or
 * '..' in them (an encoded %2F survives the split into segments). */
static bool refuse_bad_names(struct conn *cn, const struct pts_http_route *r) {
  struct pts_error err;
  if ((r->model && pts_name_check("model name", r->model, &err) != PTS_OK) ||
      (r->repo && pts_name_check("repository name", r->repo, &err) != PTS_OK)) {
    send_error(cn, &err);
    return true;
  }
  return false;
}

/* conn.c (pts_conn_handlers.on_request): a complete request on `cn`. */
static void on_request(struct conn *cn) {
  struct loop *lp = cn->lp;
  struct pts_http *h = lp->h;
  /* Once a stop was asked for, each reply ends its connection (with
   * Connection: close): a keep-alive client, or a load balancer's pooled
   * connection, moves to a replica that stays. */
  if (pts_server_is_shutting_down(h->server)) pts_conn_close_after(cn);
  /* The bytes this request was charged while it arrived: an inference
   * takes them over; for every other route they go back once answered. */
  size_t carried = pts_conn_take_charge(cn);
  const char *path = pts_conn_path(cn);
  struct pts_http_route r;
  struct pts_error err;
  enum pts_status routed =
      h->cloud ? pts_cloud_route(h->cloud, path,
                                 h->cloud->redirect
                                     ? pts_conn_header(cn, PTS_VERTEX_AI_REDIRECT_HEADER)
                                     : NULL,
                                 &r, &err)
               : pts_http_route_parse(path, &r, &err);
  if (routed != PTS_OK) {
    pts_overload_release(carried);
    send_error(cn, &err);
    return;
  }
  if (r.kind == PTS_ROUTE_NOT_FOUND && h->cloud) {
    send_empty(cn, 400); /* tritonserver's answer to any other path there */
  } else if (r.kind == PTS_ROUTE_NOT_FOUND) {
    send_error_msg(cn, PTS_NOT_FOUND, "Not Found");
  } else if (refuse_restricted(h, cn, path) || refuse_bad_names(cn, &r)) {
    /* answered */
  } else if (!pts_http_route_allows(r.kind, pts_conn_method(cn))) {
    /* 405 is not in the status table: it is a transport answer. */
    static const char body[] = "{\"error\":\"Method Not Allowed\"}";
    send_json(cn, 405, body, sizeof body - 1);
  } else {
    switch (r.kind) {
      case PTS_ROUTE_HEALTH_LIVE:
        handle_health(h, cn, false);
        break;
      case PTS_ROUTE_HEALTH_READY:
        handle_health(h, cn, true);
        break;
      case PTS_ROUTE_SERVER_METADATA:
        handle_server_metadata(h, cn);
        break;
      case PTS_ROUTE_MODEL_METADATA:
        handle_model_metadata(h, cn, &r);
        break;
      case PTS_ROUTE_MODEL_READY:
        handle_model_ready(h, cn, &r);
        break;
      case PTS_ROUTE_MODEL_CONFIG:
        handle_model_config(h, cn, &r);
        break;
      case PTS_ROUTE_MODEL_INFER:
      case PTS_ROUTE_MODEL_GENERATE:
      case PTS_ROUTE_MODEL_GENERATE_STREAM:
        handle_infer(lp, cn, &r, carried);
        carried = 0;
        break;
      case PTS_ROUTE_MODEL_STATS:
        handle_model_stats(h, cn, &r);
        break;
      case PTS_ROUTE_REPO_INDEX:
        handle_repo_index(lp, cn);
        break;
      case PTS_ROUTE_REPO_LOAD:
      case PTS_ROUTE_REPO_UNLOAD:
        handle_repo_control(lp, cn, &r);
        break;
      case PTS_ROUTE_TRACE_SETTING:
      case PTS_ROUTE_LOGGING:
        handle_settings(h, cn, &r, pts_conn_method(cn) == PTS_HTTP_POST);
        break;
      case PTS_ROUTE_SHM_STATUS:
      case PTS_ROUTE_SHM_REGISTER:
      case PTS_ROUTE_SHM_UNREGISTER:
        handle_shm(h, cn, &r);
        break;
      default:
        send_error_msg(cn, PTS_NOT_FOUND, "Not Found");
    }
  }
  pts_overload_release(carried);
  pts_http_route_clear(&r);
}

/* ------------------------------------------------------------------ */
/* loops                                                               */

static void on_stop(evutil_socket_t fd, short what, void *arg) {
  (void)fd;
  (void)what;
  struct loop *lp = arg;
  event_base_loopbreak(lp->base);
}

static void *loop_main(void *arg) {
  struct loop *lp = arg;
  event_base_loop(lp->base, EVLOOP_NO_EXIT_ON_EMPTY);
  return NULL;
}

static enum pts_status loop_init(struct loop *lp, struct pts_http *h, evutil_socket_t listen_fd,
                                 struct pts_error *err) {
  lp->h = h;
  lp->base = pts_libevent_loop_base();
  if (!lp->base) return pts_error_set(err, PTS_INTERNAL, "failed to create an event loop");
  lp->stop_ev = event_new(lp->base, -1, 0, on_stop, lp);
  if (!lp->stop_ev)
    return pts_error_set(err, PTS_INTERNAL, "failed to create the HTTP server");
  evutil_socket_t fd = dup(listen_fd);
  if (fd < 0)
    return pts_error_set(err, PTS_INTERNAL, "failed to duplicate the listening socket: %s",
                         strerror(errno));
  evutil_make_socket_nonblocking(fd);
  evutil_make_socket_closeonexec(fd);
  static const struct pts_conn_handlers handlers = {
      .on_request = on_request, .reply_end = reply_end, .orphan = ctx_orphan_conn};
  return pts_conn_listen(lp, fd, &handlers, err); /* takes fd */
}

static void loop_destroy(struct loop *lp) {
  while (lp->n_spare > 0) { /* their events are on lp->base */
    struct infer_ctx *c = lp->spare[--lp->n_spare];
    PTS_ASAN_UNPOISON(c, sizeof *c);
    event_free(c->ev);
    pts_free(c);
  }
  if (lp->stop_ev) event_free(lp->stop_ev);
  pts_conn_close_all(lp); /* the listener and every connection */
  if (lp->base) event_base_free(lp->base);
  lp->stop_ev = NULL;
  lp->base = NULL;
}

/* ------------------------------------------------------------------ */
/* start / stop                                                        */

/* --http-max-connections, or by default what the descriptor limit leaves
 * after files, loops and gRPC (core/overload.h). */
static unsigned long max_connections(const struct pts_server_options *o) {
  if (o->http_max_connections > 0) return o->http_max_connections;
  struct rlimit rl;
  uint64_t nofile = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    nofile = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)rl.rlim_cur;
  return pts_overload_default_connections(nofile, o->allow_grpc ? 75 : 100);
}

/* The listener's own settings; the rest of `o` (limits) is shared by
 * both listeners. */
struct listener {
  const char *what, *flag, *address;
  int port, threads;
  bool reuse_port;
  const char *const *restricted;
  size_t n_restricted;
  const struct pts_cloud *cloud;
};

static enum pts_status start(struct pts_server *s, const struct pts_server_options *o,
                             const struct listener *l, struct pts_http **out,
                             struct pts_error *err) {
  /* Bases must be created lock-aware so instance threads may event_active;
   * libevent's log lines go through ours. */
  pts_libevent_init();
  struct pts_http *h = pts_calloc(1, sizeof *h);
  if (!h) return pts_error_set(err, PTS_NOMEM, "out of memory starting the HTTP frontend");
  h->server = s;
  h->max_input = o->http_max_input_size;
  h->max_header = o->http_max_header_size ? o->http_max_header_size : 64u * 1024;
  h->timeout_s = o->http_timeout_secs;
  h->max_connections = max_connections(o);
  /* http-parser's own limit on a head (80 KB by default, for the whole
   * process) must not be the one a request meets first: conn.c's is. */
  uint64_t parser_max = (uint64_t)h->max_header + 4096;
  if (parser_max > 80u * 1024)
    http_parser_set_max_header_size(parser_max > UINT32_MAX ? UINT32_MAX : (uint32_t)parser_max);
  h->n_loops = l->threads > 0 ? (size_t)l->threads : 1;
  h->cloud = l->cloud;
  atomic_init(&h->refs, 1);
  atomic_init(&h->stopping, false);
  pthread_mutex_init(&h->mu, NULL);
  pthread_cond_init(&h->drained, NULL);
  h->loops = pts_calloc(h->n_loops, sizeof *h->loops);
  if (!h->loops) {
    hub_release(h);
    return pts_error_set(err, PTS_NOMEM, "out of memory starting the HTTP frontend");
  }
  evutil_socket_t fd = -1;
  enum pts_status st =
      pts_http_restrictions_parse(l->restricted, l->n_restricted, &h->restrictions, err);
  if (st != PTS_OK) {
    hub_release(h);
    return st;
  }
  st = pts_listen_open(l->what, l->flag, l->address, l->port, l->reuse_port, &fd, &h->port, err);
  for (size_t i = 0; st == PTS_OK && i < h->n_loops; i++) st = loop_init(&h->loops[i], h, fd, err);
  if (fd >= 0) close(fd); /* each loop listens on its own duplicate */
  for (size_t i = 0; st == PTS_OK && i < h->n_loops; i++) {
    int rc = pthread_create(&h->loops[i].thread, NULL, loop_main, &h->loops[i]);
    if (rc != 0)
      st = pts_error_set(err, PTS_INTERNAL, "failed to start an HTTP thread: %s", strerror(rc));
    else
      h->loops[i].thread_started = true;
  }
  if (st != PTS_OK) {
    pts_http_stop(h);
    return st;
  }
  *out = h;
  return PTS_OK;
}

enum pts_status pts_http_start(struct pts_server *s, const struct pts_server_options *o,
                               struct pts_http **out, struct pts_error *err) {
  struct listener l = {.what = "HTTP",
                       .flag = "--http-address",
                       .address = o->http_address,
                       .port = o->http_port,
                       .threads = o->http_thread_count,
                       .reuse_port = o->reuse_http_port,
                       .restricted = o->http_restricted_api,
                       .n_restricted = o->n_http_restricted_api};
  return start(s, o, &l, out, err);
}

enum pts_status pts_http_start_cloud(struct pts_server *s, const struct pts_server_options *o,
                                     const struct pts_cloud *cloud, int port, int threads,
                                     struct pts_http **out, struct pts_error *err) {
  /* Triton's SageMaker and Vertex AI services listen on every address,
   * take no --http-restricted-api, and share no port. */
  struct listener l = {.what = cloud->what,
                       .flag = "the platform's port",
                       .address = "0.0.0.0",
                       .port = port,
                       .threads = threads,
                       .cloud = cloud};
  return start(s, o, &l, out, err);
}

int pts_http_port(const struct pts_http *h) { return h ? h->port : -1; }

unsigned long pts_http_max_connections(const struct pts_http *h) {
  return h ? h->max_connections : 0;
}

/* Waits (bounded) until every accepted inference was answered. */
static void drain(struct pts_http *h) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += DRAIN_SECONDS;
  pthread_mutex_lock(&h->mu);
  while (h->in_flight > 0) {
    if (pthread_cond_timedwait(&h->drained, &h->mu, &until) == ETIMEDOUT) break;
  }
  if (h->in_flight > 0)
    PTS_LOG_WARN("HTTP frontend stopping with %zu inference requests still running", h->in_flight);
  pthread_mutex_unlock(&h->mu);
}

/* After the loops are gone: requests still in the core are answered to
 * nobody. Finished ones are freed here, the others by their done callback. */
static void orphan_pending(struct pts_http *h) {
  pthread_mutex_lock(&h->mu);
  for (size_t i = 0; i < h->n_loops; i++) {
    struct infer_ctx *c;
    while ((c = h->loops[i].pending) != NULL) {
      ctx_unlink(c);
      event_free(c->ev);
      c->ev = NULL;
      c->cn = NULL;
      if (c->cn) c->cn->ctx = NULL; /* loop_destroy closes the connection later */
      c->cn = NULL;
      if (c->completed) {
        pthread_mutex_unlock(&h->mu);
        ctx_free(c);
        pthread_mutex_lock(&h->mu);
      } else {
        c->orphaned = true;
      }
    }
  }
  pthread_mutex_unlock(&h->mu);
}

void pts_http_stop(struct pts_http *h) {
  if (!h) return;
  atomic_store(&h->stopping, true);
  bool any_thread = false;
  for (size_t i = 0; i < h->n_loops; i++) any_thread |= h->loops[i].thread_started;
  if (any_thread) drain(h);
  for (size_t i = 0; i < h->n_loops; i++) {
    struct loop *lp = &h->loops[i];
    if (!lp->thread_started) continue;
    event_active(lp->stop_ev, EV_READ, 0);
    pthread_join(lp->thread, NULL);
    lp->thread_started = false;
  }
  orphan_pending(h);
  for (size_t i = 0; i < h->n_loops; i++) loop_destroy(&h->loops[i]);
  hub_release(h);
}
