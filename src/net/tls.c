/* net/tls.c — see tls.h. */
#include "net/tls.h"

#include <errno.h>
#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"

/* TLS's largest record payload: smaller chains are gathered up to it. */
#define RECORD (16u << 10)
/* The session's read buffer (read-ahead): one recv() takes several records
 * of a large message instead of one record in two recv()s (its 5-byte
 * header, then its body), which is what OpenSSL does without read-ahead.
 * It is released while the connection is idle (SSL_MODE_RELEASE_BUFFERS),
 * so an idle connection costs no buffer. */
#define READ_BUFFER (64u << 10)
/* The most pts_tls_write writes in one call: its result is an int. */
#define WRITE_PASS_MAX (1u << 30)

struct pts_tls_ctx {
  SSL_CTX *ssl; /* owned */
  /* ALPN, in its wire form: one length-prefixed protocol name */
  unsigned char alpn[256];
  unsigned alpn_len;
};

struct pts_tls {
  SSL *ssl; /* owned; its socket BIO borrows the caller's fd */
  bool read_wants_write, write_wants_read;
  /* A fatal error, or the socket's end without close_notify: OpenSSL
   * forbids SSL_shutdown then, and there is no one to send it to. */
  bool broken;
  bool failed;    /* `why` holds the failure */
  char why[256];
};

/* ------------------------------------------------------------------ */
/* contexts                                                            */

/* OpenSSL's reason for the last error on this thread's queue ("no start
 * line"), into out; the queue is emptied. */
static void last_reason(char *out, size_t size) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e ? ERR_reason_error_string(e) : NULL;
  if (r)
    snprintf(out, size, "%s", r);
  else if (e)
    ERR_error_string_n(e, out, size);
  else
    snprintf(out, size, "no reason given");
  ERR_clear_error();
}

static enum pts_status file_failed(struct pts_error *err, const char *flag, const char *path,
                                   const char *what) {
  char why[160];
  last_reason(why, sizeof why);
  return pts_error_set(err, PTS_INVALID_ARG, "%s '%s' %s (OpenSSL: %s)", flag, path, what, why);
}

/* The file can be opened: OpenSSL's own message for a missing file is
 * "system lib", which says less than errno. */
static enum pts_status readable(const char *flag, const char *path, struct pts_error *err) {
  FILE *f = fopen(path, "r");
  if (!f)
    return pts_error_set(err, PTS_INVALID_ARG, "%s '%s' can not be read: %s", flag, path,
                         strerror(errno));
  fclose(f);
  return PTS_OK;
}

/* A key with a pass phrase would make OpenSSL ask for it on the terminal,
 * and a server has no one there: refused, without asking (tritonserver's
 * gRPC core takes no pass phrase either). */
static int no_pass_phrase(char *buf, int size, int rwflag, void *u) {
  (void)buf;
  (void)size;
  (void)rwflag;
  (void)u;
  return 0;
}

/* The context's protocol when the client offers it; else the handshake
 * goes on without ALPN, as gRPC core's server does: a client that then
 * does not speak HTTP/2 fails at its first frame. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg) {
  (void)ssl;
  struct pts_tls_ctx *c = arg;
  unsigned char *chosen;
  unsigned char len;
  if (inlen == 0 ||
      SSL_select_next_proto(&chosen, &len, c->alpn, c->alpn_len, in, inlen) !=
          OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = chosen;
  *outlen = len;
  return SSL_TLSEXT_ERR_OK;
}

/* The files into c->ssl, each checked as it is read. */
static enum pts_status load(struct pts_tls_ctx *c, const struct pts_tls_config *cf,
                            struct pts_error *err) {
  SSL_CTX *ctx = c->ssl;
  if (SSL_CTX_use_certificate_chain_file(ctx, cf->cert_file) != 1)
    return file_failed(err, cf->cert_flag, cf->cert_file, "holds no PEM certificate");
  /* The key is read apart from its use, so that one that does not match
   * the certificate is told from one that can not be read. */
  FILE *f = fopen(cf->key_file, "r");
  EVP_PKEY *key = f ? PEM_read_PrivateKey(f, NULL, no_pass_phrase, NULL) : NULL;
  if (f) fclose(f);
  if (!key)
    return file_failed(err, cf->key_flag, cf->key_file,
                       "holds no PEM private key (one with a pass phrase can not be read)");
  bool matches = SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  if (!matches) {
    ERR_clear_error();
    return pts_error_set(err, PTS_INVALID_ARG, "%s '%s' is not the key of %s '%s'", cf->key_flag,
                         cf->key_file, cf->cert_flag, cf->cert_file);
  }
  if (cf->ca_file) {
    if (SSL_CTX_load_verify_locations(ctx, cf->ca_file, NULL) != 1)
      return file_failed(err, cf->ca_flag, cf->ca_file, "holds no PEM certificate");
    /* The roots' names go in the CertificateRequest, so a client holding
     * several certificates can pick the one they signed. */
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(cf->ca_file);
    if (!names) return file_failed(err, cf->ca_flag, cf->ca_file, "holds no PEM certificate");
    SSL_CTX_set_client_CA_list(ctx, names);
  }
  if (cf->verify_client)
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  return PTS_OK;
}

enum pts_status pts_tls_ctx_new(const struct pts_tls_config *cf, struct pts_tls_ctx **out,
                                struct pts_error *err) {
  if (cf->verify_client && !cf->ca_file)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "client certificates are verified against %s, which is not given",
                         cf->ca_flag);
  size_t alpn = strlen(cf->alpn);
  if (alpn == 0 || alpn > 255)
    return pts_error_set(err, PTS_INTERNAL, "bad ALPN protocol name '%s'", cf->alpn);
  enum pts_status st = readable(cf->cert_flag, cf->cert_file, err);
  if (st == PTS_OK) st = readable(cf->key_flag, cf->key_file, err);
  if (st == PTS_OK && cf->ca_file) st = readable(cf->ca_flag, cf->ca_file, err);
  if (st != PTS_OK) return st;
  struct pts_tls_ctx *c = pts_calloc(1, sizeof *c);
  if (!c) return pts_error_set(err, PTS_NOMEM, "out of memory setting up TLS");
  c->alpn[0] = (unsigned char)alpn;
  memcpy(c->alpn + 1, cf->alpn, alpn);
  c->alpn_len = (unsigned)alpn + 1;
  c->ssl = SSL_CTX_new(TLS_server_method());
  if (!c->ssl) {
    char why[160];
    last_reason(why, sizeof why);
    pts_free(c);
    return pts_error_set(err, PTS_INTERNAL, "failed to set up TLS (OpenSSL: %s)", why);
  }
  SSL_CTX *ctx = c->ssl;
  /* TLS 1.2 and 1.3, as gRPC core's server; HTTP/2 over TLS needs 1.2 at
   * least (RFC 9113 9.2). Renegotiation is a client's way to make the
   * server do handshakes at will, and HTTP/2 forbids it. */
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  /* pts_tls_write hands OpenSSL the evbuffer's first chain, which may move
   * (be gathered) between a write that waited and its retry; each record
   * written is drained at once. */
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, READ_BUFFER);
  /* OpenSSL refuses to resume a session whose client was verified unless
   * the server names its context. */
  static const unsigned char sid[] = "ptserve";
  SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
  SSL_CTX_set_alpn_select_cb(ctx, alpn_select, c);
  st = load(c, cf, err);
  ERR_clear_error(); /* what reading the files left behind, even when it worked */
  if (st != PTS_OK) {
    pts_tls_ctx_free(c);
    return st;
  }
  *out = c;
  return PTS_OK;
}

void pts_tls_ctx_free(struct pts_tls_ctx *c) {
  if (!c) return;
  SSL_CTX_free(c->ssl);
  pts_free(c);
}

/* ------------------------------------------------------------------ */
/* sessions                                                            */

struct pts_tls *pts_tls_new(struct pts_tls_ctx *c, int fd) {
  struct pts_tls *t = pts_calloc(1, sizeof *t);
  if (!t) return NULL;
  t->ssl = SSL_new(c->ssl);
  if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1) { /* a socket BIO that leaves fd open */
    ERR_clear_error();
    SSL_free(t->ssl);
    pts_free(t);
    return NULL;
  }
  SSL_set_accept_state(t->ssl);
  return t;
}

void pts_tls_free(struct pts_tls *t) {
  if (!t) return;
  if (!t->broken && SSL_is_init_finished(t->ssl)) (void)SSL_shutdown(t->ssl);
  ERR_clear_error();
  SSL_free(t->ssl);
  pts_free(t);
}

/* A fatal error: why, in words an operator can act on. */
static void describe(struct pts_tls *t, unsigned long e) {
  const char *stage = SSL_is_init_finished(t->ssl) ? "TLS failed" : "TLS handshake failed";
  const char *reason = ERR_reason_error_string(e);
  int r = ERR_GET_REASON(e);
  const char *hint = "";
  if (ERR_GET_LIB(e) == ERR_LIB_SSL && (r == SSL_R_WRONG_VERSION_NUMBER || r == SSL_R_HTTP_REQUEST))
    hint = " (a client without TLS?)";
  long v = SSL_get_verify_result(t->ssl);
  if (v != X509_V_OK)
    snprintf(t->why, sizeof t->why, "%s: %s (the client's certificate: %s)", stage,
             reason ? reason : "unknown error", X509_verify_cert_error_string(v));
  else
    snprintf(t->why, sizeof t->why, "%s: %s%s", stage, reason ? reason : "unknown error", hint);
  t->failed = true;
}

/* What a call that did not succeed (rc, and errno as it returned) means,
 * in recv()'s terms. `reading`: SSL_read, else SSL_write. */
static int settle(struct pts_tls *t, int rc, int sys, bool reading) {
  int e = SSL_get_error(t->ssl, rc);
  unsigned long last = ERR_peek_last_error();
  ERR_clear_error();
  switch (e) {
    case SSL_ERROR_WANT_READ: /* each flag is cleared by its own call only */
      if (!reading) t->write_wants_read = true;
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_WANT_WRITE:
      if (reading) t->read_wants_write = true;
      errno = EAGAIN;
      return -1;
    case SSL_ERROR_ZERO_RETURN: /* the client's close_notify: ours goes at free */
      if (reading) return 0;
      errno = EPIPE;
      return -1;
    case SSL_ERROR_SYSCALL: /* the socket failed, or ended (sys 0) */
      t->broken = true;
      if (reading && sys == 0) return 0;
      errno = sys ? sys : EPIPE;
      return -1;
    default:
      t->broken = true;
      /* The socket ended without close_notify: OpenSSL 3 calls that an
       * error; a client that went away is not one of TLS. */
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
      if (ERR_GET_LIB(last) == ERR_LIB_SSL &&
          ERR_GET_REASON(last) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        if (reading) return 0;
        errno = EPIPE;
        return -1;
      }
#endif
      describe(t, last);
      errno = EPROTO;
      return -1;
  }
}

ssize_t pts_tls_read(struct pts_tls *t, void *buf, size_t len) {
  t->read_wants_write = false;
  size_t n = 0;
  int rc = SSL_read_ex(t->ssl, buf, len, &n);
  if (rc == 1) return (ssize_t)n;
  return settle(t, rc, errno, true);
}

bool pts_tls_pending(const struct pts_tls *t) { return SSL_has_pending(t->ssl) == 1; }

int pts_tls_write(struct pts_tls *t, struct evbuffer *out) {
  t->write_wants_read = false;
  /* A read that waits to write holds a handshake record half written:
   * OpenSSL must finish it in the read's retry, and a write now fails the
   * session ("bad length": it checks our length against that record's). */
  if (t->read_wants_write) {
    errno = EAGAIN;
    return -1;
  }
  size_t total = 0;
  while (total < WRITE_PASS_MAX) {
    size_t left = evbuffer_get_length(out);
    struct evbuffer_iovec v;
    if (left == 0 || evbuffer_peek(out, -1, NULL, &v, 1) < 1) break;
    const void *p = v.iov_base;
    size_t len = v.iov_len;
    /* A retry after EAGAIN must offer at least what the first try did;
     * it does: the buffer only grows at its end, and a gathered chain is
     * at least as long as the gathering before it. */
    if (len < RECORD && left > len) {
      len = left < RECORD ? left : RECORD;
      p = evbuffer_pullup(out, (ssize_t)len);
      if (!p) {
        errno = ENOMEM;
        return -1;
      }
    }
    size_t n = 0;
    int rc = SSL_write_ex(t->ssl, p, len, &n);
    if (rc == 1) {
      evbuffer_drain(out, n);
      total += n;
      continue;
    }
    if (settle(t, rc, errno, false) < 0 && errno == EAGAIN && total > 0) break;
    return -1;
  }
  return (int)total;
}

bool pts_tls_read_wants_write(const struct pts_tls *t) { return t->read_wants_write; }

bool pts_tls_write_wants_read(const struct pts_tls *t) { return t->write_wants_read; }

const char *pts_tls_failure(const struct pts_tls *t) { return t->failed ? t->why : NULL; }
