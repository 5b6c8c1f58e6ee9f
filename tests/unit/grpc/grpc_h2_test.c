/* tests/unit/grpc/grpc_h2_test.c — the nghttp2 transport (frontend/grpc/h2.h)
 * against a real server core (identity backend, temporary repository),
 * over a socketpair: the test is the HTTP/2 client (an nghttp2 client
 * session) and drives the transport's loop itself, on one thread. Over
 * TLS too (pts_grpc_h2_set_tls): the client's TLS is OpenSSL on memory
 * BIOs, and the server's socket has the smallest send buffer, so that its
 * handshake (a 12 KB certificate, net/tls_pki.h) waits to write.
 * Expected values come from the request (identity) and gRPC's status
 * numbers (protocol-facts §2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "frontend/grpc/h2.h"
#include "grpc_service.pb-c.h"
#include "net/libevent.h"
#include "net/tls.h"
#include "net/tls_pki.h"
#include "server/fs_helpers.h"

#define SVC "/inference.GRPCInferenceService/"

struct fixture {
  char root[64];
  struct pts_server *s;
  struct pts_restrictions none;
  struct event_base *base;
  struct pts_grpc_h2 *h;
};

/* What the client saw on its one stream. */
struct seen {
  int32_t id;
  char status[8];      /* grpc-status, from headers or trailers */
  char message[256];   /* grpc-message */
  uint8_t data[4096];  /* the response body */
  size_t n_data;
  bool closed;
  uint32_t reset;      /* the stream's close code */
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  if (!f || !fs_tempdir(f->root, sizeof f->root)) return -1;
  if (fs_identity_model(f->root, "id", 8, NULL) || fs_mkdirs(f->root, "id/1")) return -1;
  struct pts_log_settings quiet = pts_log_get();
  quiet.info = quiet.warning = quiet.error = false;
  pts_log_set(&quiet);
  struct pts_server_options o;
  pts_server_options_default(&o);
  const char *repos[] = {f->root};
  o.model_repositories = repos;
  o.n_model_repositories = 1;
  struct pts_error err;
  if (pts_server_create(&o, &f->s, &err) != PTS_OK) return -1;
  pts_libevent_init();
  f->base = pts_libevent_loop_base();
  if (!f->base || pts_grpc_h2_new(f->s, &o, &f->none, f->base, &f->h, &err) != PTS_OK) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  assert_true(pts_grpc_h2_free(f->h));
  event_base_free(f->base);
  pts_server_destroy(f->s);
  fs_rmtree(f->root);
  free(f);
  return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *fr, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *u) {
  (void)s;
  (void)fr;
  (void)flags;
  struct seen *r = u;
  if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0)
    snprintf(r->status, sizeof r->status, "%.*s", (int)valuelen, value);
  if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0)
    snprintf(r->message, sizeof r->message, "%.*s", (int)valuelen, value);
  return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *u) {
  (void)s;
  (void)flags;
  (void)id;
  struct seen *r = u;
  assert_true(r->n_data + len <= sizeof r->data);
  memcpy(r->data + r->n_data, data, len);
  r->n_data += len;
  return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *u) {
  (void)s;
  struct seen *r = u;
  if (id == r->id) {
    r->closed = true;
    r->reset = code;
  }
  return 0;
}

/* The request body: a plain byte source. */
struct body {
  const uint8_t *p;
  size_t n;
};

static ssize_t body_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *u) {
  (void)s;
  (void)id;
  (void)u;
  struct body *b = src->ptr;
  size_t n = b->n < len ? b->n : len;
  memcpy(buf, b->p, n);
  b->p += n;
  b->n -= n;
  if (!b->n) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return (ssize_t)n;
}

/* The client's TLS: OpenSSL on memory BIOs between the nghttp2 client and
 * the socket, trusting tls_pki.h's CA. */
struct tls_client {
  SSL *ssl;
  BIO *in, *out;            /* for OpenSSL, from the socket; from OpenSSL, to it */
  uint8_t pending[16384];   /* nghttp2's bytes, until the handshake is done */
  size_t n_pending;
};

static void tls_client_start(struct tls_client *tc, SSL_CTX *ctx) {
  memset(tc, 0, sizeof *tc);
  tc->ssl = SSL_new(ctx);
  tc->in = BIO_new(BIO_s_mem());
  tc->out = BIO_new(BIO_s_mem());
  SSL_set_bio(tc->ssl, tc->in, tc->out);
  SSL_set_connect_state(tc->ssl);
  SSL_set1_host(tc->ssl, "localhost");
}

/* The handshake as far as it goes, nghttp2's bytes once it is done, and
 * what OpenSSL has to send, to the socket. */
static void tls_client_send(struct tls_client *tc, int fd) {
  if (!SSL_is_init_finished(tc->ssl)) SSL_do_handshake(tc->ssl);
  if (SSL_is_init_finished(tc->ssl) && tc->n_pending) {
    assert_int_equal(SSL_write(tc->ssl, tc->pending, (int)tc->n_pending), (int)tc->n_pending);
    tc->n_pending = 0;
  }
  uint8_t buf[65536];
  int k;
  while ((k = BIO_read(tc->out, buf, sizeof buf)) > 0)
    assert_int_equal(write(fd, buf, (size_t)k), k);
}

/* One call: `framed` (gRPC-framed messages) to `path`, over TLS when tc
 * is given; runs the server's loop and the client until the stream
 * closes. */
static void call_over(struct fixture *f, struct tls_client *tc, const char *path,
                      const uint8_t *framed, size_t n, struct seen *r) {
  memset(r, 0, sizeof *r);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
  if (tc) {
    int one = 1;
    assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof one), 0);
  }
  pts_grpc_h2_accept(f->h, sv[0]);
  nghttp2_session_callbacks *cbs;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
  nghttp2_session *cs;
  assert_int_equal(nghttp2_session_client_new(&cs, cbs, r), 0);
  nghttp2_submit_settings(cs, NGHTTP2_FLAG_NONE, NULL, 0);
  const nghttp2_nv nv[] = {
      {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, 0},
      {(uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0},
      {(uint8_t *)":path", (uint8_t *)path, 5, strlen(path), 0},
      {(uint8_t *)":authority", (uint8_t *)"unit", 10, 4, 0},
      {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0},
  };
  struct body b = {framed, n};
  nghttp2_data_provider dp = {.source.ptr = &b, .read_callback = body_read};
  r->id = nghttp2_submit_request(cs, NULL, nv, 5, n ? &dp : NULL, NULL);
  assert_true(r->id > 0);
  for (int round = 0; round < 20000 && !r->closed; round++) {
    const uint8_t *out;
    ssize_t k;
    while ((k = nghttp2_session_mem_send(cs, &out)) > 0) {
      if (!tc) {
        assert_int_equal(write(sv[1], out, (size_t)k), k);
        continue;
      }
      assert_true(tc->n_pending + (size_t)k <= sizeof tc->pending);
      memcpy(tc->pending + tc->n_pending, out, (size_t)k);
      tc->n_pending += (size_t)k;
    }
    if (tc) tls_client_send(tc, sv[1]);
    event_base_loop(f->base, EVLOOP_NONBLOCK);
    uint8_t buf[8192];
    ssize_t got = read(sv[1], buf, sizeof buf);
    if (got > 0 && tc) {
      assert_int_equal(BIO_write(tc->in, buf, (int)got), (int)got);
      int m;
      while ((m = SSL_read(tc->ssl, buf, sizeof buf)) > 0)
        assert_int_equal(nghttp2_session_mem_recv(cs, buf, (size_t)m), m);
    } else if (got > 0)
      assert_int_equal(nghttp2_session_mem_recv(cs, buf, (size_t)got), got);
    else if (got < 0 && errno == EAGAIN)
      usleep(100); /* an instance thread may be answering */
    else
      break;
  }
  assert_true(r->closed);
  nghttp2_session_del(cs);
  nghttp2_session_callbacks_del(cbs);
  close(sv[1]);
  /* The server sees the close and frees the connection. */
  for (int round = 0; round < 1000 && pts_grpc_h2_live(f->h) > 0; round++) {
    event_base_loop(f->base, EVLOOP_NONBLOCK);
    usleep(100);
  }
  assert_int_equal(pts_grpc_h2_live(f->h), 0);
}

static void call(struct fixture *f, const char *path, const uint8_t *framed, size_t n,
                 struct seen *r) {
  call_over(f, NULL, path, framed, n, r);
}

/* gRPC framing around a packed message. */
static size_t frame(const ProtobufCMessage *m, uint8_t *out) {
  size_t len = protobuf_c_message_pack(m, out + 5);
  out[0] = 0;
  out[1] = (uint8_t)(len >> 24);
  out[2] = (uint8_t)(len >> 16);
  out[3] = (uint8_t)(len >> 8);
  out[4] = (uint8_t)len;
  return len + 5;
}

/* ModelInfer on "id" with INT32 [1, 2] = {a, b}, id `rid`. */
static size_t infer_message(int32_t a, int32_t b, const char *rid, uint8_t *out) {
  Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
  Inference__ModelInferRequest__InferInputTensor in =
      INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
  Inference__ModelInferRequest__InferInputTensor *ins[] = {&in};
  int64_t shape[] = {1, 2};
  int32_t values[] = {a, b};
  ProtobufCBinaryData raw = {sizeof values, (uint8_t *)values};
  in.name = "INPUT0";
  in.datatype = "INT32";
  in.shape = shape;
  in.n_shape = 2;
  req.model_name = "id";
  req.id = (char *)rid;
  req.inputs = ins;
  req.n_inputs = 1;
  req.raw_input_contents = &raw;
  req.n_raw_input_contents = 1;
  return frame(&req.base, out);
}

/* The response messages in r's body, unpacked: ModelInferResponses or,
 * when `stream`, the ones inside ModelStreamInferResponses. */
static size_t responses(const struct seen *r, bool stream, Inference__ModelInferResponse **out,
                        size_t max) {
  size_t n = 0;
  for (size_t at = 0; at + 5 <= r->n_data && n < max;) {
    const uint8_t *p = r->data + at;
    assert_int_equal(p[0], 0);
    size_t len = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
    assert_true(at + 5 + len <= r->n_data);
    if (stream) {
      Inference__ModelStreamInferResponse *sr =
          inference__model_stream_infer_response__unpack(NULL, len, p + 5);
      assert_non_null(sr);
      assert_string_equal(sr->error_message, "");
      out[n++] = sr->infer_response;
      sr->infer_response = NULL;
      inference__model_stream_infer_response__free_unpacked(sr, NULL);
    } else {
      out[n++] = inference__model_infer_response__unpack(NULL, len, p + 5);
      assert_non_null(out[n - 1]);
    }
    at += 5 + len;
  }
  return n;
}

static void assert_identity(const Inference__ModelInferResponse *resp, int32_t a, int32_t b) {
  assert_int_equal(resp->n_raw_output_contents, 1);
  int32_t got[2];
  assert_int_equal(resp->raw_output_contents[0].len, sizeof got);
  memcpy(got, resp->raw_output_contents[0].data, sizeof got);
  assert_int_equal(got[0], a);
  assert_int_equal(got[1], b);
}

static void unary_infer(void **state) {
  struct fixture *f = *state;
  uint8_t msg[256];
  size_t n = infer_message(7, -3, "u1", msg);
  struct seen *r = malloc(sizeof *r);
  call(f, SVC "ModelInfer", msg, n, r);
  assert_string_equal(r->status, "0");
  Inference__ModelInferResponse *resp[2];
  assert_int_equal(responses(r, false, resp, 2), 1);
  assert_string_equal(resp[0]->id, "u1");
  assert_string_equal(resp[0]->model_name, "id");
  assert_identity(resp[0], 7, -3);
  inference__model_infer_response__free_unpacked(resp[0], NULL);
  free(r);
}

static void stream_of_three(void **state) {
  struct fixture *f = *state;
  uint8_t msg[768];
  size_t n = infer_message(1, 2, "s0", msg);
  n += infer_message(3, 4, "s1", msg + n);
  n += infer_message(5, 6, "s2", msg + n);
  struct seen *r = malloc(sizeof *r);
  call(f, SVC "ModelStreamInfer", msg, n, r);
  assert_string_equal(r->status, "0");
  Inference__ModelInferResponse *resp[4];
  assert_int_equal(responses(r, true, resp, 4), 3);
  bool seen_id[3] = {false, false, false};
  for (int i = 0; i < 3; i++) {
    int k = resp[i]->id[1] - '0';
    assert_true(k >= 0 && k < 3 && !seen_id[k]);
    seen_id[k] = true;
    assert_identity(resp[i], 2 * k + 1, 2 * k + 2);
    inference__model_infer_response__free_unpacked(resp[i], NULL);
  }
  free(r);
}

static void errors_are_statuses(void **state) {
  struct fixture *f = *state;
  struct seen *r = malloc(sizeof *r);
  uint8_t empty[5] = {0, 0, 0, 0, 0};
  /* unknown method: UNIMPLEMENTED, trailers only */
  call(f, SVC "NoSuchMethod", empty, sizeof empty, r);
  assert_string_equal(r->status, "12");
  assert_int_equal(r->n_data, 0);
  assert_non_null(strstr(r->message, "NoSuchMethod"));
  /* a message cut short: INVALID_ARGUMENT */
  uint8_t msg[256];
  size_t n = infer_message(1, 2, "cut", msg);
  call(f, SVC "ModelInfer", msg, n - 3, r);
  assert_string_equal(r->status, "3");
  /* no message at all */
  call(f, SVC "ModelInfer", NULL, 0, r);
  assert_string_equal(r->status, "3");
  /* a flag byte other than 0 and 1 */
  msg[0] = 7;
  call(f, SVC "ModelInfer", msg, n, r);
  assert_string_equal(r->status, "3");
  /* the core's own error, percent-encoded on the wire */
  n = infer_message(1, 2, "nf", msg);
  msg[0] = 0;
  Inference__ModelInferRequest *req = inference__model_infer_request__unpack(NULL, n - 5, msg + 5);
  char *name = req->model_name;
  req->model_name = "no such \xc3\xb6";
  n = frame(&req->base, msg);
  req->model_name = name;
  inference__model_infer_request__free_unpacked(req, NULL);
  call(f, SVC "ModelInfer", msg, n, r);
  assert_string_equal(r->status, "5");
  /* gRPC's spec: bytes outside 0x20-0x7e (and '%') as %XX, spaces as is */
  assert_non_null(strstr(r->message, "no such %C3%B6"));
  free(r);
}

/* Over TLS: a unary call and a stream, each on a connection whose
 * handshake does not fit in the server's socket at once (the read that
 * made it waits to write, and the loop resumes it when the socket drains);
 * then a client without TLS, whose connection alone is closed. */
static void over_tls(void **state) {
  struct fixture *f = *state;
  assert_int_equal(pki_make(NULL), 0);
  struct pts_tls_config c = {
      .cert_file = pki_file("server.pem"),
      .key_file = pki_file("server.key"),
      .alpn = "h2",
      .cert_flag = "--grpc-server-cert",
      .key_flag = "--grpc-server-key",
      .ca_flag = "--grpc-root-cert",
  };
  struct pts_tls_ctx *tls;
  struct pts_error err;
  assert_int_equal(pts_tls_ctx_new(&c, &tls, &err), PTS_OK);
  pts_grpc_h2_set_tls(f->h, tls);
  SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
  assert_int_equal(SSL_CTX_load_verify_locations(cctx, pki_file("ca.pem"), NULL), 1);
  SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
  assert_int_equal(SSL_CTX_set_alpn_protos(cctx, (const unsigned char *)"\x02h2", 3), 0);
  struct tls_client *tc = malloc(sizeof *tc);
  struct seen *r = malloc(sizeof *r);

  uint8_t msg[768];
  size_t n = infer_message(11, -12, "t1", msg);
  tls_client_start(tc, cctx);
  call_over(f, tc, SVC "ModelInfer", msg, n, r);
  assert_string_equal(r->status, "0");
  Inference__ModelInferResponse *resp[4];
  assert_int_equal(responses(r, false, resp, 4), 1);
  assert_string_equal(resp[0]->id, "t1");
  assert_identity(resp[0], 11, -12);
  inference__model_infer_response__free_unpacked(resp[0], NULL);
  SSL_free(tc->ssl);

  n = infer_message(1, 2, "s0", msg);
  n += infer_message(3, 4, "s1", msg + n);
  tls_client_start(tc, cctx);
  call_over(f, tc, SVC "ModelStreamInfer", msg, n, r);
  assert_string_equal(r->status, "0");
  assert_int_equal(responses(r, true, resp, 4), 2);
  for (int i = 0; i < 2; i++) {
    int k = resp[i]->id[1] - '0';
    assert_identity(resp[i], 2 * k + 1, 2 * k + 2);
    inference__model_infer_response__free_unpacked(resp[i], NULL);
  }
  SSL_free(tc->ssl);

  /* HTTP/2 without TLS: the server closes the socket (after an alert). */
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  pts_grpc_h2_accept(f->h, sv[0]);
  static const char preface[] = NGHTTP2_CLIENT_MAGIC;
  assert_int_equal(write(sv[1], preface, sizeof preface - 1), (ssize_t)sizeof preface - 1);
  bool ended = false;
  for (int round = 0; round < 1000 && !ended; round++) {
    event_base_loop(f->base, EVLOOP_NONBLOCK);
    uint8_t buf[256];
    ended = read(sv[1], buf, sizeof buf) == 0;
  }
  assert_true(ended);
  assert_int_equal(pts_grpc_h2_live(f->h), 0);
  close(sv[1]);

  pts_grpc_h2_set_tls(f->h, NULL);
  pts_tls_ctx_free(tls);
  SSL_CTX_free(cctx);
  free(tc);
  free(r);
  pki_remove(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(unary_infer),
      cmocka_unit_test(stream_of_three),
      cmocka_unit_test(errors_are_statuses),
      cmocka_unit_test(over_tls),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
