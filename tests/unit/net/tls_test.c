/* tests/unit/net/tls_test.c — net/tls.h: a server session on one end of a
 * socketpair, an OpenSSL client on memory BIOs at the other, and the test
 * carrying the bytes between them, a few at a time or not at all. So the
 * handshake can be cut anywhere, the server's socket left full, and the
 * server's answer checked after every step: recv()'s contract (EAGAIN, 0 at
 * the end, EPROTO for TLS), and which way a session waits.
 *
 * The certificates are tls_pki.h's, made with OpenSSL's API: a CA, a
 * server certificate it signed (large, so that the handshake does not fit
 * in a small socket buffer), client certificates it signed, one it signed
 * that has expired, and one of another CA. Expected values come from the
 * test's own bytes and OpenSSL's client, never from the server's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tls.h"
#include "net/tls_pki.h"

static struct pts_tls_config config(bool verify_client) {
  struct pts_tls_config c = {
      .cert_file = pki_file("server.pem"),
      .key_file = pki_file("server.key"),
      .ca_file = verify_client ? pki_file("ca.pem") : NULL,
      .verify_client = verify_client,
      .alpn = "h2",
      .cert_flag = "--grpc-server-cert",
      .key_flag = "--grpc-server-key",
      .ca_flag = "--grpc-root-cert",
  };
  return c;
}

static struct pts_tls_ctx *server_ctx(bool verify_client) {
  struct pts_tls_config c = config(verify_client);
  struct pts_tls_ctx *ctx = NULL;
  struct pts_error err;
  assert_int_equal(pts_tls_ctx_new(&c, &ctx, &err), PTS_OK);
  return ctx;
}

/* ------------------------------------------------------------------ */
/* a connection                                                        */

struct pair {
  int sfd, cfd;           /* the server's end (the session's socket), the test's */
  struct pts_tls *srv;
  SSL_CTX *cctx;
  SSL *cli;               /* OpenSSL's client, on memory BIOs */
  BIO *cin, *cout;        /* for the client, from the client */
};

/* A client trusting ca.pem, offering `alpn` ("\x02h2"), with <name>.pem
 * and <name>.key as its certificate when name is given. The server's
 * socket gets the smallest send buffer when small_sndbuf. */
static struct pair *pair_new(struct pts_tls_ctx *ctx, const char *name, const char *alpn,
                             bool small_sndbuf) {
  struct pair *p = calloc(1, sizeof *p);
  assert_non_null(p);
  int fds[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  p->sfd = fds[0];
  p->cfd = fds[1];
  if (small_sndbuf) {
    int one = 1;
    assert_int_equal(setsockopt(p->sfd, SOL_SOCKET, SO_SNDBUF, &one, sizeof one), 0);
  }
  p->srv = pts_tls_new(ctx, p->sfd);
  assert_non_null(p->srv);
  p->cctx = SSL_CTX_new(TLS_client_method());
  assert_int_equal(SSL_CTX_load_verify_locations(p->cctx, pki_file("ca.pem"), NULL), 1);
  SSL_CTX_set_verify(p->cctx, SSL_VERIFY_PEER, NULL);
  if (name) {
    char pem[64], key[64];
    snprintf(pem, sizeof pem, "%s.pem", name);
    snprintf(key, sizeof key, "%s.key", name);
    assert_int_equal(SSL_CTX_use_certificate_file(p->cctx, pki_file(pem), SSL_FILETYPE_PEM), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(p->cctx, pki_file(key), SSL_FILETYPE_PEM), 1);
  }
  if (alpn)
    assert_int_equal(SSL_CTX_set_alpn_protos(p->cctx, (const unsigned char *)alpn,
                                             (unsigned)strlen(alpn)),
                     0);
  p->cli = SSL_new(p->cctx);
  p->cin = BIO_new(BIO_s_mem());
  p->cout = BIO_new(BIO_s_mem());
  SSL_set_bio(p->cli, p->cin, p->cout);
  SSL_set_connect_state(p->cli);
  SSL_set1_host(p->cli, "localhost");
  return p;
}

static void pair_free(struct pair *p) {
  pts_tls_free(p->srv);
  SSL_free(p->cli);
  SSL_CTX_free(p->cctx);
  close(p->sfd);
  close(p->cfd);
  free(p);
}

/* Up to `max` of the client's bytes to the server's socket; how many. */
static size_t to_server(struct pair *p, size_t max) {
  uint8_t buf[65536];
  size_t n = (size_t)BIO_pending(p->cout);
  if (n > max) n = max;
  if (n > sizeof buf) n = sizeof buf;
  if (n == 0) return 0;
  assert_int_equal(BIO_read(p->cout, buf, (int)n), (int)n);
  assert_int_equal(write(p->cfd, buf, n), (ssize_t)n);
  return n;
}

/* Everything the server's socket holds, to the client; how much. */
static size_t to_client(struct pair *p) {
  uint8_t buf[65536];
  size_t total = 0;
  ssize_t n;
  while ((n = read(p->cfd, buf, sizeof buf)) > 0) {
    assert_int_equal(BIO_write(p->cin, buf, (int)n), (int)n);
    total += (size_t)n;
  }
  return total;
}

/* The client's handshake, as far as it goes: 1 once done. */
static int client_step(struct pair *p) {
  int rc = SSL_do_handshake(p->cli);
  if (rc != 1) {
    int e = SSL_get_error(p->cli, rc);
    assert_true(e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE);
  }
  return rc;
}

/* The server reads; -1 must be EAGAIN. Returns what pts_tls_read did. */
static ssize_t server_read(struct pair *p, void *buf, size_t len) {
  errno = 0;
  ssize_t n = pts_tls_read(p->srv, buf, len);
  if (n < 0) assert_int_equal(errno, EAGAIN);
  return n;
}

/* Both sides' handshakes, every byte carried at once, until the client
 * is done and the server has read all it sent. */
static void handshake(struct pair *p) {
  uint8_t buf[64];
  for (int i = 0; i < 20; i++) {
    int done = client_step(p);
    to_server(p, SIZE_MAX);
    assert_int_equal(server_read(p, buf, sizeof buf), -1);
    to_client(p);
    if (done == 1 && BIO_pending(p->cout) == 0) return;
  }
  fail_msg("no handshake in 20 rounds");
}

/* The server's session fails when it reads what the client sent: EPROTO,
 * and a reason that holds `words`. */
static void server_refuses(struct pair *p, const char *words) {
  uint8_t buf[64];
  ssize_t n = 0;
  for (int i = 0; i < 20; i++) {
    client_step(p);
    to_server(p, SIZE_MAX);
    errno = 0;
    n = pts_tls_read(p->srv, buf, sizeof buf);
    if (n == -1 && errno == EAGAIN) {
      to_client(p);
      /* TLS 1.3: the client is done before the server has checked its
       * certificate, and its first bytes come after */
      if (SSL_is_init_finished(p->cli)) SSL_write(p->cli, "PRI", 3);
      continue;
    }
    break;
  }
  assert_int_equal(n, -1);
  assert_int_equal(errno, EPROTO);
  const char *why = pts_tls_failure(p->srv);
  assert_non_null(why);
  if (!strstr(why, words)) fail_msg("'%s' does not say '%s'", why, words);
}

/* ------------------------------------------------------------------ */
/* tests                                                               */

/* Each bad file fails with the flag and the path in the message. */
static void test_bad_files_are_named(void **state) {
  (void)state;
  struct {
    const char *cert, *key, *ca;
    bool verify;
    const char *words[3];
  } cases[] = {
      {"missing.pem", "server.key", NULL, false,
       {"--grpc-server-cert", "missing.pem", "No such file"}},
      {"server.pem", "missing.key", NULL, false,
       {"--grpc-server-key", "missing.key", "No such file"}},
      {"junk.pem", "server.key", NULL, false,
       {"--grpc-server-cert", "junk.pem", "holds no PEM certificate"}},
      {"server.pem", "junk.pem", NULL, false,
       {"--grpc-server-key", "junk.pem", "holds no PEM private key"}},
      {"server.pem", "locked.key", NULL, false,
       {"--grpc-server-key", "locked.key", "pass phrase"}},
      {"server.pem", "spare.key", NULL, false,
       {"--grpc-server-key", "is not the key of", "--grpc-server-cert"}},
      {"server.pem", "server.key", "junk.pem", true,
       {"--grpc-root-cert", "junk.pem", "holds no PEM certificate"}},
      {"server.pem", "server.key", "missing.pem", true,
       {"--grpc-root-cert", "missing.pem", "No such file"}},
      {"server.pem", "server.key", NULL, true, {"--grpc-root-cert", "not given", ""}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct pts_tls_config c = config(false);
    c.cert_file = pki_file(cases[i].cert);
    c.key_file = pki_file(cases[i].key);
    c.ca_file = cases[i].ca ? pki_file(cases[i].ca) : NULL;
    c.verify_client = cases[i].verify;
    struct pts_tls_ctx *ctx = NULL;
    struct pts_error err;
    assert_int_equal(pts_tls_ctx_new(&c, &ctx, &err), PTS_INVALID_ARG);
    assert_null(ctx);
    for (int w = 0; w < 3; w++)
      if (!strstr(err.msg, cases[i].words[w]))
        fail_msg("case %zu: '%s' does not say '%s'", i, err.msg, cases[i].words[w]);
    assert_int_equal(ERR_peek_error(), 0); /* the thread's error queue is left empty */
  }
}

/* The handshake cut into single bytes: every read before the last byte of
 * a flight waits; a write before the handshake waits for reading; then
 * data goes both ways, ALPN chose h2, and close_notify ends it both ways. */
static void test_handshake_byte_by_byte(void **state) {
  (void)state;
  struct pts_tls_ctx *ctx = server_ctx(false);
  struct pair *p = pair_new(ctx, NULL, "\x08http/1.1\x02h2", false);
  uint8_t buf[256];
  /* The server's first write (HTTP/2's SETTINGS) comes before any byte. */
  struct evbuffer *out = evbuffer_new();
  evbuffer_add(out, "settings", 8);
  errno = 0;
  assert_int_equal(pts_tls_write(p->srv, out), -1);
  assert_int_equal(errno, EAGAIN);
  assert_true(pts_tls_write_wants_read(p->srv));
  assert_int_equal(evbuffer_get_length(out), 8);
  /* ClientHello, one byte at a time */
  assert_int_equal(client_step(p), -1);
  size_t hello = (size_t)BIO_pending(p->cout), sent = 0;
  assert_true(hello > 100);
  while (to_server(p, 1) == 1) {
    sent++;
    assert_int_equal(server_read(p, buf, sizeof buf), -1);
    assert_false(pts_tls_read_wants_write(p->srv));
    size_t answer = to_client(p);
    if (sent < hello) assert_int_equal(answer, 0); /* nothing before the whole hello */
    else assert_true(answer > 0);                  /* ServerHello ... Finished */
  }
  /* the client's Finished, one byte at a time */
  assert_int_equal(client_step(p), 1);
  while (to_server(p, 1) == 1) assert_int_equal(server_read(p, buf, sizeof buf), -1);
  /* the write that waited goes now */
  assert_int_equal(pts_tls_write(p->srv, out), 8);
  assert_int_equal(evbuffer_get_length(out), 0);
  to_client(p);
  assert_int_equal(SSL_read(p->cli, buf, sizeof buf), 8);
  assert_memory_equal(buf, "settings", 8);
  const unsigned char *alpn;
  unsigned alpn_len;
  SSL_get0_alpn_selected(p->cli, &alpn, &alpn_len);
  assert_int_equal(alpn_len, 2);
  assert_memory_equal(alpn, "h2", 2);
  assert_int_equal(SSL_write(p->cli, "PRI * HTTP/2.0", 14), 14);
  to_server(p, SIZE_MAX);
  assert_int_equal(server_read(p, buf, sizeof buf), 14);
  assert_memory_equal(buf, "PRI * HTTP/2.0", 14);
  assert_false(pts_tls_pending(p->srv));
  /* The client's close_notify is the end (0); the server answers with its
   * own when the session is freed. */
  SSL_shutdown(p->cli);
  to_server(p, SIZE_MAX);
  assert_int_equal(pts_tls_read(p->srv, buf, sizeof buf), 0);
  assert_null(pts_tls_failure(p->srv));
  pts_tls_free(p->srv);
  p->srv = NULL;
  to_client(p);
  assert_int_equal(SSL_shutdown(p->cli), 1); /* both close_notify seen */
  evbuffer_free(out);
  pair_free(p);
  pts_tls_ctx_free(ctx);
}

/* A client that does not offer h2 gets no ALPN answer, as from gRPC core,
 * and the handshake goes on. */
static void test_alpn_without_h2(void **state) {
  (void)state;
  struct pts_tls_ctx *ctx = server_ctx(false);
  struct pair *p = pair_new(ctx, NULL, "\x08http/1.1", false);
  handshake(p);
  const unsigned char *alpn;
  unsigned alpn_len;
  SSL_get0_alpn_selected(p->cli, &alpn, &alpn_len);
  assert_int_equal(alpn_len, 0);
  pair_free(p);
  pts_tls_ctx_free(ctx);
}

/* The server's flight does not fit in its socket: the read that made it
 * waits to write, a write meanwhile waits for it, and both go on once the
 * client has taken some. */
static void test_handshake_waits_to_write(void **state) {
  (void)state;
  struct pts_tls_ctx *ctx = server_ctx(false);
  struct pair *p = pair_new(ctx, NULL, "\x02h2", true);
  uint8_t buf[64];
  client_step(p);
  to_server(p, SIZE_MAX);
  int waits = 0;
  struct evbuffer *out = evbuffer_new();
  evbuffer_add(out, "settings", 8);
  for (int i = 0; i < 100 && !SSL_is_init_finished(p->cli); i++) {
    assert_int_equal(server_read(p, buf, sizeof buf), -1);
    if (pts_tls_read_wants_write(p->srv)) {
      waits++;
      /* A write meanwhile waits for the read (OpenSSL would fail the
       * session: the handshake's record is half written). */
      errno = 0;
      assert_int_equal(pts_tls_write(p->srv, out), -1);
      assert_int_equal(errno, EAGAIN);
      assert_null(pts_tls_failure(p->srv));
    }
    to_client(p);
    client_step(p);
    to_server(p, SIZE_MAX);
  }
  assert_true(SSL_is_init_finished(p->cli));
  assert_true(waits > 0); /* the 12 KB certificate did not fit at once */
  assert_int_equal(server_read(p, buf, sizeof buf), -1);
  assert_false(pts_tls_read_wants_write(p->srv));
  assert_int_equal(pts_tls_write(p->srv, out), 8);
  to_client(p);
  assert_int_equal(SSL_read(p->cli, buf, sizeof buf), 8);
  assert_memory_equal(buf, "settings", 8);
  assert_int_equal(SSL_write(p->cli, "ping", 4), 4);
  to_server(p, SIZE_MAX);
  assert_int_equal(server_read(p, buf, sizeof buf), 4);
  evbuffer_free(out);
  pair_free(p);
  pts_tls_ctx_free(ctx);
}

/* A client that does not read: the server writes what its socket takes,
 * waits (EAGAIN, not for reading), and goes on where it stopped, the
 * evbuffer grown meanwhile; small chains, a large reference among them,
 * arrive whole and in order. */
static void free_nothing(const void *data, size_t len, void *arg) {
  (void)data;
  (void)len;
  (*(int *)arg)++;
}

static void test_write_waits_and_resumes(void **state) {
  (void)state;
  struct pts_tls_ctx *ctx = server_ctx(false);
  struct pair *p = pair_new(ctx, NULL, "\x02h2", true);
  handshake(p);
  static uint8_t big[1 << 20], want[(1 << 20) + 8192], got[(1 << 20) + 8192];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7 + i / 251);
  struct evbuffer *out = evbuffer_new();
  size_t n_want = 0;
  int released = 0;
  for (int i = 0; i < 100; i++) { /* frame headers, say */
    uint8_t small[9];
    memset(small, 'a' + i % 26, sizeof small);
    evbuffer_add(out, small, sizeof small);
    memcpy(want + n_want, small, sizeof small);
    n_want += sizeof small;
  }
  evbuffer_add_reference(out, big, sizeof big, free_nothing, &released);
  memcpy(want + n_want, big, sizeof big);
  n_want += sizeof big;
  size_t n_got = 0;
  int waits = 0, added = 0;
  for (int round = 0; round < 10000 && evbuffer_get_length(out); round++) {
    errno = 0;
    int w = pts_tls_write(p->srv, out);
    if (w < 0) {
      assert_int_equal(errno, EAGAIN);
      assert_false(pts_tls_write_wants_read(p->srv));
      waits++;
      if (added < 50) { /* more small pieces behind the ones waiting */
        char more[16];
        snprintf(more, sizeof more, "m%05d", added++);
        evbuffer_add(out, more, 6);
        memcpy(want + n_want, more, 6);
        n_want += 6;
      }
    }
    to_client(p);
    int r;
    while ((r = SSL_read(p->cli, got + n_got, (int)(sizeof got - n_got))) > 0) n_got += (size_t)r;
  }
  assert_int_equal(evbuffer_get_length(out), 0);
  assert_true(waits > 10);
  assert_int_equal(released, 1);
  assert_int_equal(n_got, n_want);
  assert_memory_equal(got, want, n_want);
  evbuffer_free(out);
  pair_free(p);
  pts_tls_ctx_free(ctx);
}

/* A client without TLS (HTTP/2's preface): EPROTO, and the reason says
 * what it looks like. */
static void test_plaintext_client(void **state) {
  (void)state;
  struct pts_tls_ctx *ctx = server_ctx(false);
  struct pair *p = pair_new(ctx, NULL, NULL, false);
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  assert_int_equal(write(p->cfd, preface, sizeof preface - 1), (ssize_t)sizeof preface - 1);
  uint8_t buf[64];
  errno = 0;
  assert_int_equal(pts_tls_read(p->srv, buf, sizeof buf), -1);
  assert_int_equal(errno, EPROTO);
  assert_non_null(strstr(pts_tls_failure(p->srv), "TLS handshake failed"));
  assert_non_null(strstr(pts_tls_failure(p->srv), "without TLS"));
  assert_int_equal(ERR_peek_error(), 0);
  pair_free(p); /* no close_notify after a failure */
  pts_tls_ctx_free(ctx);
}

/* A client that goes away in the middle of its hello: the end, not a TLS
 * failure (a port probe says nothing in the log). */
static void test_client_gone_mid_handshake(void **state) {
  (void)state;
  struct pts_tls_ctx *ctx = server_ctx(false);
  struct pair *p = pair_new(ctx, NULL, "\x02h2", false);
  client_step(p);
  to_server(p, 20);
  uint8_t buf[64];
  assert_int_equal(server_read(p, buf, sizeof buf), -1);
  shutdown(p->cfd, SHUT_WR);
  assert_int_equal(pts_tls_read(p->srv, buf, sizeof buf), 0);
  assert_null(pts_tls_failure(p->srv));
  pair_free(p);
  pts_tls_ctx_free(ctx);
}

/* Client certificates required: none, another CA's, an expired one are
 * refused with the reason; the CA's own is served. */
static void test_client_certificates(void **state) {
  (void)state;
  struct pts_tls_ctx *ctx = server_ctx(true);
  struct {
    const char *name, *words;
  } refused[] = {
      {NULL, "did not return a certificate"},
      {"stranger", "unable to get local issuer certificate"},
      {"expired", "certificate has expired"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    struct pair *p = pair_new(ctx, refused[i].name, "\x02h2", false);
    server_refuses(p, refused[i].words);
    pair_free(p);
  }
  struct pair *p = pair_new(ctx, "client", "\x02h2", false);
  handshake(p);
  uint8_t buf[16];
  assert_int_equal(SSL_write(p->cli, "hello", 5), 5);
  to_server(p, SIZE_MAX);
  assert_int_equal(server_read(p, buf, sizeof buf), 5);
  pair_free(p);
  pts_tls_ctx_free(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_files_are_named),
      cmocka_unit_test(test_handshake_byte_by_byte),
      cmocka_unit_test(test_alpn_without_h2),
      cmocka_unit_test(test_handshake_waits_to_write),
      cmocka_unit_test(test_write_waits_and_resumes),
      cmocka_unit_test(test_plaintext_client),
      cmocka_unit_test(test_client_gone_mid_handshake),
      cmocka_unit_test(test_client_certificates),
  };
  return cmocka_run_group_tests(tests, pki_make, pki_remove);
}
