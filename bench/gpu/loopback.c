/* bench/gpu/loopback.c — what TCP over loopback alone costs one request.
 *
 *   bench_loopback --label NAME --request BYTES --response BYTES
 *                  [--answer-after-us N] [--seconds 2] [--csv FILE]
 *
 * A diagnostic for the batch-1 rows of the GPU bench, not a reference: one
 * client thread writes BYTES of request to a server thread over a loopback
 * TCP connection (TCP_NODELAY on both ends, as ptperf and ptserve set), the
 * server thread reads all of it and writes the response back, the client
 * reads all of that, and the next round begins: ptperf's concurrency 1 with
 * no HTTP, no JSON, no model. Both ends block in read() and write(), the
 * cheapest way a thread can wait for bytes, so the p50 printed is a floor
 * under any server's round trip of the same bytes on this host, the
 * kernel's two copies of the body and the two wake-ups included.
 *
 * --answer-after-us N: the server thread spins N µs between reading the
 * request and answering, as a server's thread would while the model runs,
 * and N is taken off every round. The client then waits in read() for as
 * long as ptperf waits for a batch-1 forward, and what that long wait
 * costs its wake-up (an idle CPU gone deep, a halted virtual CPU) is in
 * the number; without it, rounds follow each other within microseconds.
 *
 * Prints "label,request_bytes,response_bytes,rounds,p50_us,p90_us,
 * answer_after_us" (and appends it to --csv, with a header when the file
 * is new).
 *
 * Threading: the main thread is the client; one more thread serves the
 * connection until the process exits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Rounds run and thrown away first: TCP's receive buffers grow to the
 * body's size over the first transfers (autotuning), as they would on a
 * client's kept-alive connection. */
#define WARM_ROUNDS 200
#define MAX_ROUNDS 2000000

struct peer {
  int listener;
  size_t request, response;
  double answer_after_us; /* the server's spin before each answer */
};

static void die(const char *what) {
  fprintf(stderr, "bench_loopback: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void read_all(int fd, char *p, size_t n) {
  while (n > 0) {
    ssize_t got = read(fd, p, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) die("read");
    p += got;
    n -= (size_t)got;
  }
}

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t put = write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) die("write");
    p += put;
    n -= (size_t)put;
  }
}

static void no_delay(int fd) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* The server's side: a request in, the response out, until the client
 * goes (the process exits then). */
static void *serve(void *arg) {
  const struct peer *p = arg;
  int fd = accept(p->listener, NULL, NULL);
  if (fd < 0) die("accept");
  no_delay(fd);
  char *in = malloc(p->request), *out = calloc(1, p->response);
  if (!in || !out) die("malloc");
  for (;;) {
    read_all(fd, in, p->request);
    /* A spin, not a sleep: a sleep's own lateness would land in the
     * number, and a model's thread that waits by polling stays awake. */
    for (double until = now_us() + p->answer_after_us; now_us() < until;) {
    }
    write_all(fd, out, p->response);
  }
  return NULL;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  const char *label = "loopback", *csv = NULL;
  struct peer p = {.request = 0, .response = 0};
  double seconds = 2;
  static const struct option opts[] = {{"label", required_argument, NULL, 'l'},
                                       {"request", required_argument, NULL, 'q'},
                                       {"response", required_argument, NULL, 'r'},
                                       {"seconds", required_argument, NULL, 's'},
                                       {"csv", required_argument, NULL, 'c'},
                                       {"answer-after-us", required_argument, NULL, 'a'},
                                       {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
    if (c == 'l') label = optarg;
    else if (c == 'q') p.request = strtoul(optarg, NULL, 10);
    else if (c == 'r') p.response = strtoul(optarg, NULL, 10);
    else if (c == 's') seconds = strtod(optarg, NULL);
    else if (c == 'c') csv = optarg;
    else if (c == 'a') p.answer_after_us = strtod(optarg, NULL);
    else return 2;
  }
  if (p.request == 0 || p.response == 0 || !(seconds > 0) || !(p.answer_after_us >= 0)) {
    fprintf(stderr, "usage: bench_loopback --label NAME --request BYTES --response BYTES "
                    "[--answer-after-us N] [--seconds S] [--csv FILE]\n");
    return 2;
  }
  struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof at;
  p.listener = socket(AF_INET, SOCK_STREAM, 0);
  if (p.listener < 0 || bind(p.listener, (struct sockaddr *)&at, sizeof at) != 0 ||
      listen(p.listener, 1) != 0 || getsockname(p.listener, (struct sockaddr *)&at, &len) != 0)
    die("listen on 127.0.0.1");
  pthread_t server;
  if (pthread_create(&server, NULL, serve, &p) != 0) die("pthread_create");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&at, sizeof at) != 0) die("connect");
  no_delay(fd);
  char *out = calloc(1, p.request), *in = malloc(p.response);
  double *took = malloc(MAX_ROUNDS * sizeof *took);
  if (!out || !in || !took) die("malloc");
  size_t rounds = 0;
  double end = 0;
  for (size_t i = 0; rounds < MAX_ROUNDS; i++) {
    if (i == WARM_ROUNDS) end = now_us() + seconds * 1e6;
    double t0 = now_us();
    write_all(fd, out, p.request);
    read_all(fd, in, p.response);
    double t1 = now_us();
    if (i < WARM_ROUNDS) continue;
    took[rounds++] = t1 - t0 - p.answer_after_us;
    if (t1 >= end) break;
  }
  qsort(took, rounds, sizeof *took, by_value);
  char line[512];
  snprintf(line, sizeof line, "%s,%zu,%zu,%zu,%.1f,%.1f,%.0f\n", label, p.request, p.response,
           rounds, took[rounds / 2], took[rounds * 9 / 10], p.answer_after_us);
  fputs(line, stdout);
  if (csv) {
    FILE *f = fopen(csv, "a");
    if (!f || fseek(f, 0, SEEK_END) != 0) die(csv);
    if (ftell(f) == 0)
      fputs("label,request_bytes,response_bytes,rounds,p50_us,p90_us,answer_after_us\n", f);
    fputs(line, f);
    fclose(f);
  }
  /* The connection stays open: closed, the server thread would see the
   * end and exit(1) while this one exits 0. */
  free(took);
  free(in);
  free(out);
  return 0;
}
