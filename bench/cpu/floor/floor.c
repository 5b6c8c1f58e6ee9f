/* bench/cpu/floor/floor.c — the least an HTTP server can spend per request
 * on this machine: answers ptperf's requests for `mlp` with bytes that
 * ptserve itself sent in the same run (recorded by run.sh), from one epoll
 * loop on one thread, with no parser library, no model and no allocation
 * per request. What it costs per request is the kernel's share (loopback
 * TCP, the sleep in epoll_wait and the wake-up) plus a few hundred
 * instructions of its own; ptserve's CPU per request minus this is what
 * ptserve's code and LibTorch add.
 *
 *   floor PORT DIR
 *
 * DIR holds the recorded answers, each a complete HTTP response (status
 * line, headers, body): metadata.http (GET /v2/models/mlp), config.http
 * (GET /v2/models/mlp/config) and infer.http (POST /v2/models/mlp/infer).
 * GET /floor/count answers the number of infer requests served so far, as
 * plain text, so that run.sh can divide CPU time by an exact count.
 *
 * Not a server anyone should run: it trusts its client (a request head must
 * fit in one buffer; a body is skipped by its Content-Length), and it
 * answers every request with the recorded bytes, so the same Date header
 * each time. Single-threaded: one loop does everything.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_CAP 16384
#define MAX_CONNS 1024

struct answer {
  char *bytes; /* owned; the whole response */
  size_t len;
};

struct fconn {
  int fd;            /* the connection's socket; owned */
  size_t len;        /* bytes in buf */
  size_t skip;       /* body bytes still to drop (read past without a copy) */
  char buf[BUF_CAP]; /* the request head being read */
};

static struct answer g_metadata, g_config, g_infer;
static unsigned long long g_infers;
static struct fconn *g_conns[MAX_CONNS]; /* by fd; owned */

static void load(struct answer *a, const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  a->bytes = malloc((size_t)n);
  if (!a->bytes || fread(a->bytes, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "floor: cannot read %s\n", path);
    exit(2);
  }
  a->len = (size_t)n;
  fclose(f);
}

static void drop(int ep, struct fconn *c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  g_conns[c->fd] = NULL;
  free(c);
}

/* Writes all of `b`; the answers are small, so a full socket buffer means a
 * client that stopped reading, which this benchmark's client never does. */
static bool send_all(int fd, const char *b, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= (size_t)w;
  }
  return true;
}

/* Value of Content-Length in the head [h, h+n), 0 when absent. */
static size_t content_length(const char *h, size_t n) {
  static const char key[] = "\r\ncontent-length:";
  for (size_t i = 0; i + sizeof key - 1 <= n; i++) {
    if (h[i] == '\r' && strncasecmp(h + i, key, sizeof key - 1) == 0)
      return strtoul(h + i + sizeof key - 1, NULL, 10);
  }
  return 0;
}

/* Answers every complete request in c->buf. False: close the connection. */
static bool serve(struct fconn *c) {
  for (;;) {
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end) return c->len < BUF_CAP;
    size_t head = (size_t)(end - c->buf) + 4;
    size_t body = content_length(c->buf, head);
    bool close_after = memmem(c->buf, head, "Connection: close", 17) != NULL;
    const struct answer *a = &g_infer;
    char count[64];
    struct answer counted;
    if (strncmp(c->buf, "GET /floor/count ", 17) == 0) {
      char digits[24];
      int dn = snprintf(digits, sizeof digits, "%llu", g_infers);
      counted.len = (size_t)snprintf(count, sizeof count, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s",
                                     dn, digits);
      counted.bytes = count;
      a = &counted;
    } else if (strncmp(c->buf, "GET /v2/models/mlp/config ", 26) == 0) {
      a = &g_config;
    } else if (strncmp(c->buf, "GET /v2/models/mlp ", 19) == 0) {
      a = &g_metadata;
    } else {
      g_infers++;
    }
    /* Drop the head and as much of the body as is here. */
    size_t have = c->len - head;
    size_t take = body < have ? body : have;
    memmove(c->buf, c->buf + head + take, have - take);
    c->len = have - take;
    c->skip = body - take;
    if (!send_all(c->fd, a->bytes, a->len) || close_after) return false;
    if (c->skip > 0) return true;
  }
}

static bool on_readable(struct fconn *c) {
  if (c->skip > 0) { /* the rest of a body: read into the buffer, discarded */
    size_t want = c->skip < BUF_CAP ? c->skip : BUF_CAP;
    ssize_t r = read(c->fd, c->buf, want);
    if (r <= 0) return r < 0 && errno == EAGAIN;
    c->skip -= (size_t)r;
    return true;
  }
  ssize_t r = read(c->fd, c->buf + c->len, BUF_CAP - c->len);
  if (r <= 0) return r < 0 && errno == EAGAIN;
  c->len += (size_t)r;
  return serve(c);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: floor PORT DIR\n");
    return 2;
  }
  load(&g_metadata, argv[2], "metadata.http");
  load(&g_config, argv[2], "config.http");
  load(&g_infer, argv[2], "infer.http");

  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 128) != 0) {
    perror("floor: listen");
    return 1;
  }
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  fprintf(stderr, "floor: serving on 127.0.0.1:%s\n", argv[1]);

  struct epoll_event evs[64];
  for (;;) {
    int n = epoll_wait(ep, evs, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == ls) {
        int cfd;
        while ((cfd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          struct fconn *c = cfd < MAX_CONNS ? malloc(sizeof *c) : NULL;
          if (!c) {
            close(cfd);
            continue;
          }
          c->fd = cfd;
          c->len = c->skip = 0;
          /* As ptserve's sockets: replies leave at once. */
          setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          g_conns[cfd] = c;
          struct epoll_event cev = {.events = EPOLLIN, .data.fd = cfd};
          epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &cev);
        }
        continue;
      }
      struct fconn *c = g_conns[fd];
      if (c && !on_readable(c)) drop(ep, c);
    }
  }
}
