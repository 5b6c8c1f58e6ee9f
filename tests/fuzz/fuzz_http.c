/* tests/fuzz/fuzz_http.c — raw bytes into the real HTTP frontend.
 *
 * LLVMFuzzerInitialize builds a small identity repository in a temporary
 * directory, creates the server core and starts the HTTP frontend on an
 * ephemeral loopback port with one loop thread, all inside this process.
 * Each input is written to a fresh connection, which is then half-closed;
 * the driver reads until the server closes it. Everything a client controls
 * is reached this way: the transport and its parser (conn.c, http-parser), the router, every handler,
 * the v2 decoder with binary tails and compression, validation, the
 * scheduler, the identity backend and the reply encoder.
 *
 * The server must never crash, hang a connection past the read timeout, or
 * stop answering: every 64 inputs a health check must still get 200.
 * Failures of the driver's own socket calls (EINTR from libFuzzer's alarm,
 * no free descriptor or port) are retried, then skip the input with a note:
 * only the server's failures stop the run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "frontend/http/http.h"
#include "fuzz_common.h"
#include "server/server.h"

static struct pts_server *server;
static struct pts_http *http;
static int port;

static void write_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "fuzz_http: can not write %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

static void make_model(const char *root, const char *name, const char *config) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  mkdir(dir, 0755);
  write_file(dir, "config.pbtxt", config);
  snprintf(dir, sizeof dir, "%s/%s/1", root, name);
  mkdir(dir, 0755);
}

static void make_repo(char *root) {
  if (!mkdtemp(root)) {
    fprintf(stderr, "fuzz_http: can not create %s: %s\n", root, strerror(errno));
    exit(1);
  }
  make_model(root, "id_fp32",
             "backend: \"identity\"\nmax_batch_size: 8\n"
             "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
             "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n");
  make_model(root, "id_bytes",
             "backend: \"identity\"\nmax_batch_size: 0\n"
             "input [ { name: \"INPUT0\" data_type: TYPE_STRING dims: [ -1 ] } ]\n"
             "output [ { name: \"OUTPUT0\" data_type: TYPE_STRING dims: [ -1 ] } ]\n");
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet_log();
  static char root[] = "/tmp/pts_fuzz_http_XXXXXX";
  make_repo(root);
  struct pts_server_options o;
  pts_server_options_default(&o);
  const char *repos[] = {root};
  o.model_repositories = repos;
  o.n_model_repositories = 1;
  o.http_address = "127.0.0.1";
  o.http_port = 0;
  o.http_thread_count = 1;
  o.http_max_input_size = 1 << 16;
  struct pts_error err;
  if (pts_server_create(&o, &server, &err) != PTS_OK ||
      pts_http_start(server, &o, &http, &err) != PTS_OK) {
    fprintf(stderr, "fuzz_http: can not start the server: %s\n", err.msg);
    exit(1);
  }
  port = pts_http_port(http);
  /* The server lives until the process exits: libFuzzer never returns from
   * its main loop, so there is no place to stop it. */
  return 0;
}

/* The harness's own socket calls can fail in ways that say nothing about
 * the server: libFuzzer's -timeout alarm (SIGALRM) interrupts a blocking
 * call (EINTR), and a busy machine leaves connect() waiting on a full accept
 * backlog long enough for that to happen; descriptors or ephemeral ports can
 * run out for a moment. Such failures are retried, and when they persist the
 * input or the check is skipped with a note. Only the server's behaviour
 * (a refused connection, a missing health answer) fails the run. */
enum { CONNECT_ATTEMPTS = 3, CONNECT_MS = 2000 };

static unsigned harness_skips;

static void harness_note(const char *what, int err) {
  /* The first few in full, then every 1000th: a flood would slow the run. */
  if (++harness_skips <= 5 || harness_skips % 1000 == 0)
    fprintf(stderr, "fuzz_http: harness: %s: %s (skipped; %u so far)\n", what, strerror(err),
            harness_skips);
}

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* poll() on one descriptor until `deadline` (now_ms() time), resumed after
 * signals with the time that is left: 1 ready, 0 timed out, -1 error. */
static int poll_until(struct pollfd *p, int64_t deadline) {
  for (;;) {
    int64_t left = deadline - now_ms();
    int n = poll(p, 1, left > 0 ? (int)left : 0);
    if (n >= 0 || errno != EINTR) return n;
  }
}

/* One connection attempt: 0 and *fd_out, or the errno of the failure. An
 * interrupted connect() goes on in the background (POSIX), so it is
 * awaited rather than restarted. */
static int connect_once(int *fd_out) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int e = 0;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    e = errno;
    if (e == EINTR || e == EINPROGRESS) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      int n = poll_until(&p, now_ms() + CONNECT_MS);
      socklen_t len = sizeof e;
      if (n < 0)
        e = errno;
      else if (n == 0)
        e = ETIMEDOUT;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
        e = errno;
    }
  }
  if (e != 0) {
    close(fd);
    return e;
  }
  *fd_out = fd;
  return 0;
}

/* A connected socket, or -1 after a note when the harness could not make
 * one. The listener lives in this process, so a refusal is the server's
 * failure. */
static int connect_server(void) {
  int e = 0;
  for (int attempt = 1; attempt <= CONNECT_ATTEMPTS; attempt++) {
    int fd;
    e = connect_once(&fd);
    if (e == 0) return fd;
    fuzz_check(e != ECONNREFUSED, "the server refused a connection");
    /* Give the machine a moment (EAGAIN, EADDRNOTAVAIL, EMFILE pass). */
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 20000000L * attempt};
    nanosleep(&pause, NULL);
  }
  harness_note("connect", e);
  return -1;
}

/* Reads what the server sends until it closes the connection or `ms` pass
 * (in total). Returns the byte count seen (the first `cap` bytes go to
 * `out`). */
static size_t drain(int fd, int ms, char *out, size_t cap) {
  size_t total = 0;
  char buf[4096];
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int64_t deadline = now_ms() + ms;
  while (poll_until(&p, deadline) > 0) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (total < cap) memcpy(out + total, buf, (size_t)n < cap - total ? (size_t)n : cap - total);
    total += (size_t)n;
  }
  return total;
}

static void send_all(int fd, const uint8_t *data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return; /* the server may close early on a bad request */
    data += n;
    size -= (size_t)n;
  }
}

static void check_alive(void) {
  static const char probe[] =
      "GET /v2/health/live HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  int fd = connect_server();
  if (fd < 0) return; /* noted; the next check tries again */
  send_all(fd, (const uint8_t *)probe, sizeof probe - 1);
  char head[16] = {0};
  drain(fd, 5000, head, sizeof head - 1);
  close(fd);
  fuzz_check(strncmp(head, "HTTP/1.1 200", 12) == 0, "server stopped answering health checks");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = connect_server();
  if (fd < 0) return 0; /* the harness could not connect: noted, input skipped */
  send_all(fd, data, size);
  shutdown(fd, SHUT_WR);
  char head[1];
  drain(fd, 2000, head, 0);
  close(fd);
  static unsigned runs;
  if (++runs % 64 == 0) check_alive();
  return 0;
}
