/* bench/http_transport/transport.c — what the HTTP/1.1 layer costs per
 * request, in user-space instructions, for three ways of serving the same
 * keep-alive request on one libevent loop:
 *
 *   evhttp       libevent's HTTP server, used as ptserve's frontend uses it
 *                (the head read by evhttp, the reply's headers in two of its
 *                entries, src/frontend/http/http.c: add_reply_headers)
 *   http_parser  a bufferevent, node's http-parser (Debian libhttp-parser)
 *                for the head, the reply head written by hand
 *   pico         the same with picohttpparser, the parser inside Debian's
 *                libh2o-evloop (exported, but with no installed header: its
 *                prototype is declared below as picohttpparser.h has it)
 *
 * Every mode does the same work around the parse: the four request headers
 * ptserve reads are found (Content-Type, Inference-Header-Content-Length,
 * Content-Encoding, Accept-Encoding), the body is copied into one malloc'd
 * buffer (the one copy ptserve makes), and the same reply goes out: a head
 * with Content-Length, Date, Content-Type and Inference-Header-Content-Length
 * and a 156-byte body. No model runs, so what is left is the transport.
 *
 * Usage: transport MODE REQUESTS. The client is a blocking socket in the
 * same thread; under `valgrind --tool=callgrind --collect-atstart=no` only
 * the server's side (the event loop's turns) of REQUESTS requests after 200
 * of warm-up is collected, and run.sh divides by REQUESTS. Natively, the
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID: user and kernel, the kernel's
 * loopback delivery of each reply included) over the same turns is printed
 * per request.
 *
 * Threading: one thread; the client and the server take turns. */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

/* From picohttpparser.h (h2o 2.2's lib/common/picohttpparser.c). */
struct phr_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
};
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len,
                      const char **path, size_t *path_len, int *minor_version,
                      struct phr_header *headers, size_t *num_headers, size_t last_len);

#define BODY_JSON 140
#define BODY_BIN 64
#define REPLY_JSON 140
#define REPLY_BIN 16

static void die(const char *what) {
  fprintf(stderr, "transport: %s: %s\n", what, strerror(errno));
  exit(2);
}

/* ---- what every mode does with a request -------------------------------- */

struct seen { /* the headers ptserve reads, as (pointer, length) */
  const char *type, *hlen, *enc, *accept;
  size_t type_n, hlen_n, enc_n, accept_n;
};

static void note_header(struct seen *s, const char *name, size_t nn, const char *v, size_t vn) {
  switch (nn) {
    case 12:
      if (strncasecmp(name, "Content-Type", 12) == 0) s->type = v, s->type_n = vn;
      break;
    case 16:
      if (strncasecmp(name, "Content-Encoding", 16) == 0) s->enc = v, s->enc_n = vn;
      break;
    case 15:
      if (strncasecmp(name, "Accept-Encoding", 15) == 0) s->accept = v, s->accept_n = vn;
      break;
    case 31:
      if (strncasecmp(name, "Inference-Header-Content-Length", 31) == 0)
        s->hlen = v, s->hlen_n = vn;
      break;
  }
}

static size_t served;
static char reply_body[REPLY_JSON + REPLY_BIN];

/* The body's one copy, checked and freed as the request's end would. */
static void take_body(const char *data, size_t n, const struct seen *s) {
  char *copy = malloc(n ? n : 1);
  if (!copy) die("malloc");
  memcpy(copy, data, n);
  if (!s->hlen || strtoul(s->hlen, NULL, 10) != BODY_JSON || n != BODY_JSON + BODY_BIN) {
    fprintf(stderr, "transport: request misread (%zu bytes)\n", n);
    exit(2);
  }
  served += (unsigned char)copy[0] == '{';
  free(copy);
}

/* The HTTP date, formatted once a second (as ptserve's pts_fmt_http_date_now). */
static const char *http_date(void) {
  static char buf[40];
  static time_t at = -1;
  time_t now = time(NULL);
  if (now != at) {
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    at = now;
  }
  return buf;
}

/* Appends n bytes at *d. Every mode pieces its reply head together with
 * these two, as ptserve does (http.c: add_reply_headers), not with printf. */
static void put(char **d, const char *s, size_t n) {
  memcpy(*d, s, n);
  *d += n;
}
static void put_uint(char **d, unsigned v) {
  char tmp[12];
  size_t n = 0;
  do tmp[sizeof tmp - ++n] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  put(d, tmp + sizeof tmp - n, n);
}
#define PUT_LIT(d, lit) put((d), (lit), sizeof(lit) - 1)

/* ---- evhttp --------------------------------------------------------------- */

static void on_evhttp_request(struct evhttp_request *req, void *arg) {
  (void)arg;
  struct seen s = {0};
  struct evkeyval *kv;
  TAILQ_FOREACH(kv, evhttp_request_get_input_headers(req), next)
    note_header(&s, kv->key, strlen(kv->key), kv->value, strlen(kv->value));
  struct evbuffer *in = evhttp_request_get_input_buffer(req);
  size_t n = evbuffer_get_length(in);
  take_body((const char *)evbuffer_pullup(in, -1), n, &s);
  evbuffer_drain(in, n);
  /* ptserve's reply headers: Content-Length through evhttp_add_header, and
   * one Date entry whose value carries the other lines (http.c). */
  struct evkeyvalq *hdr = evhttp_request_get_output_headers(req);
  char num[12], *d = num;
  put_uint(&d, REPLY_JSON + REPLY_BIN);
  *d = '\0';
  evhttp_add_header(hdr, "Content-Length", num);
  char *v = malloc(128);
  struct evkeyval *e = malloc(sizeof *e);
  char *k = strdup("Date");
  if (!v || !e || !k) die("malloc");
  d = v;
  const char *date = http_date();
  put(&d, date, strlen(date));
  PUT_LIT(&d, "\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: ");
  put_uint(&d, REPLY_JSON);
  *d = '\0';
  e->key = k;
  e->value = v;
  TAILQ_INSERT_TAIL(hdr, e, next);
  evbuffer_add(evhttp_request_get_output_buffer(req), reply_body, sizeof reply_body);
  evhttp_send_reply(req, 200, "OK", NULL);
}

/* ---- a bufferevent and a parser -------------------------------------------- */

enum mode { MODE_EVHTTP, MODE_HTTP_PARSER, MODE_PICO };

struct conn {
  enum mode mode;
  struct bufferevent *bev;
  http_parser hp;
  struct seen seen;
  const char *field;
  size_t field_n;
  const char *body;
  size_t body_n;
  bool complete;
};

/* The reply head by hand: constant lines, the date and the two numbers. */
static void send_reply(struct bufferevent *bev) {
  char head[256], *d = head;
  const char *date = http_date();
  PUT_LIT(&d, "HTTP/1.1 200 OK\r\nContent-Length: ");
  put_uint(&d, REPLY_JSON + REPLY_BIN);
  PUT_LIT(&d, "\r\nDate: ");
  put(&d, date, strlen(date));
  PUT_LIT(&d, "\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: ");
  put_uint(&d, REPLY_JSON);
  PUT_LIT(&d, "\r\n\r\n");
  struct evbuffer *out = bufferevent_get_output(bev);
  evbuffer_add(out, head, (size_t)(d - head));
  evbuffer_add(out, reply_body, sizeof reply_body);
}

static int hp_field(http_parser *p, const char *a, size_t n) {
  struct conn *c = p->data;
  c->field = a, c->field_n = n;
  return 0;
}
static int hp_value(http_parser *p, const char *a, size_t n) {
  struct conn *c = p->data;
  note_header(&c->seen, c->field, c->field_n, a, n);
  return 0;
}
static int hp_body(http_parser *p, const char *a, size_t n) {
  struct conn *c = p->data;
  c->body = a, c->body_n = n; /* one piece: the whole request is pulled up */
  return 0;
}
static int hp_complete(http_parser *p) {
  struct conn *c = p->data;
  c->complete = true;
  http_parser_pause(p, 1); /* one request per call, like pipelining would need */
  return 0;
}
static http_parser_settings hp_settings = {
    .on_header_field = hp_field,
    .on_header_value = hp_value,
    .on_body = hp_body,
    .on_message_complete = hp_complete,
};

static void on_read(struct bufferevent *bev, void *arg) {
  struct conn *c = arg;
  struct evbuffer *in = bufferevent_get_input(bev);
  for (;;) {
    size_t len = evbuffer_get_length(in);
    if (len == 0) return;
    const char *buf = (const char *)evbuffer_pullup(in, -1);
    size_t used;
    memset(&c->seen, 0, sizeof c->seen);
    if (c->mode == MODE_HTTP_PARSER) {
      c->complete = false;
      c->body_n = 0;
      used = http_parser_execute(&c->hp, &hp_settings, buf, len);
      if (HTTP_PARSER_ERRNO(&c->hp) == HPE_PAUSED) http_parser_pause(&c->hp, 0);
      else if (HTTP_PARSER_ERRNO(&c->hp) != HPE_OK) die("http_parser");
      if (!c->complete) return; /* (not in this benchmark: requests arrive whole) */
      take_body(c->body, c->body_n, &c->seen);
    } else {
      const char *method, *path;
      size_t method_n, path_n, nh = 16;
      int minor;
      struct phr_header h[16];
      int r = phr_parse_request(buf, len, &method, &method_n, &path, &path_n, &minor, h, &nh, 0);
      if (r == -2) return;
      if (r < 0) die("phr_parse_request");
      size_t clen = 0;
      for (size_t i = 0; i < nh; i++) {
        if (h[i].name_len == 14 && strncasecmp(h[i].name, "Content-Length", 14) == 0)
          clen = strtoul(h[i].value, NULL, 10);
        else
          note_header(&c->seen, h[i].name, h[i].name_len, h[i].value, h[i].value_len);
      }
      if (len < (size_t)r + clen) return;
      take_body(buf + r, clen, &c->seen);
      used = (size_t)r + clen;
    }
    evbuffer_drain(in, used);
    send_reply(bev);
  }
}

/* ---- the client and the loop ------------------------------------------------ */

static const char *request_text(size_t *len, const char *host) {
  static char req[1024];
  int n = snprintf(req, sizeof req,
                   "POST /v2/models/mlp/infer HTTP/1.1\r\nHost: %s\r\n"
                   "Content-Type: application/octet-stream\r\n"
                   "Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n",
                   host, BODY_JSON, BODY_JSON + BODY_BIN);
  memset(req + n, ' ', BODY_JSON);
  req[n] = '{';
  memset(req + n + BODY_JSON, 7, BODY_BIN);
  *len = (size_t)n + BODY_JSON + BODY_BIN;
  return req;
}

/* Bytes of one whole reply at the start of buf, or 0 when not all there. */
static size_t reply_len(const char *buf, size_t n) {
  const char *end = memmem(buf, n, "\r\n\r\n", 4);
  if (!end) return 0;
  const char *cl = memmem(buf, (size_t)(end - buf), "Content-Length: ", 16);
  if (!cl) {
    fprintf(stderr, "transport: a reply without Content-Length\n");
    exit(2);
  }
  size_t total = (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10);
  return n >= total ? total : 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: transport evhttp|http_parser|pico REQUESTS\n");
    return 2;
  }
  enum mode mode = strcmp(argv[1], "evhttp") == 0        ? MODE_EVHTTP
                   : strcmp(argv[1], "http_parser") == 0 ? MODE_HTTP_PARSER
                   : strcmp(argv[1], "pico") == 0        ? MODE_PICO
                                                         : (enum mode)-1;
  if ((int)mode < 0) return fprintf(stderr, "transport: unknown mode %s\n", argv[1]), 2;
  long requests = strtol(argv[2], NULL, 10);
  memset(reply_body, 'r', sizeof reply_body);

  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sl) || listen(lfd, 1) ||
      getsockname(lfd, (struct sockaddr *)&sa, &sl))
    die("listen");
  /* epoll's change list on, as ptserve's loops have it (net/libevent.c):
   * evhttp's switching a socket's events off and on within one turn
   * reaches epoll once, not per switch. */
  struct event_config *cfg = event_config_new();
  if (!cfg) die("event_config_new");
  event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
  struct event_base *base = event_base_new_with_config(cfg);
  event_config_free(cfg);
  if (!base) die("event_base_new_with_config");
  struct evhttp *http = NULL;
  struct conn c = {.mode = mode};
  int one = 1;
  if (mode == MODE_EVHTTP) {
    /* evhttp accepts the connection itself, on the loop's first turn. */
    http = evhttp_new(base);
    evhttp_set_gencb(http, on_evhttp_request, NULL);
    evutil_make_socket_nonblocking(lfd);
    if (evhttp_accept_socket(http, lfd) != 0) die("evhttp_accept_socket");
  }
  int cfd = socket(AF_INET, SOCK_STREAM, 0);
  if (cfd < 0 || connect(cfd, (struct sockaddr *)&sa, sl)) die("connect");
  setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (mode != MODE_EVHTTP) {
    int sfd = accept(lfd, NULL, NULL);
    if (sfd < 0) die("accept");
    setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    evutil_make_socket_nonblocking(sfd);
    c.bev = bufferevent_socket_new(base, sfd, BEV_OPT_CLOSE_ON_FREE);
    http_parser_init(&c.hp, HTTP_REQUEST);
    c.hp.data = &c;
    bufferevent_setcb(c.bev, on_read, NULL, NULL, &c);
    bufferevent_enable(c.bev, EV_READ);
  }

  char host[32];
  snprintf(host, sizeof host, "127.0.0.1:%d", ntohs(sa.sin_port));
  size_t req_len;
  const char *req = request_text(&req_len, host);
  static char rbuf[4096];
  const long warm = 200;
  long long server_ns = 0; /* this thread's CPU time in the server's loop turns */
  for (long i = 0; i < warm + requests; i++) {
    bool measured = i >= warm;
    if (write(cfd, req, req_len) != (ssize_t)req_len) die("write");
    size_t have = 0, whole = 0;
    while (!whole) {
      struct timespec t0, t1;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
      if (measured) CALLGRIND_TOGGLE_COLLECT;
      event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
      if (measured) CALLGRIND_TOGGLE_COLLECT;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
      if (measured)
        server_ns += (t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
      ssize_t got = recv(cfd, rbuf + have, sizeof rbuf - have, MSG_DONTWAIT);
      if (got < 0 && errno != EAGAIN) die("recv");
      if (got > 0) have += (size_t)got;
      whole = reply_len(rbuf, have);
    }
    if (whole != have || memcmp(rbuf, "HTTP/1.1 200 OK\r\n", 17) != 0) {
      fprintf(stderr, "transport: unexpected reply: %.*s\n", (int)have, rbuf);
      return 2;
    }
  }
  printf("%s: %zu requests served; server CPU %.2f us per request\n", argv[1], served,
         requests > 0 ? server_ns / 1e3 / (double)requests : 0.0);
  close(cfd);
  if (http) evhttp_free(http);
  if (c.bev) bufferevent_free(c.bev);
  event_base_free(base);
  if (!http) close(lfd); /* evhttp closes the socket it accepts on */
  return served == (size_t)(warm + requests) ? 0 : 1;
}
