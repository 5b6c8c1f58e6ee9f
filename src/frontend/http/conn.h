/* frontend/http/conn.h — one HTTP/1.1 connection: its socket, the request
 * being read (node's http-parser, one per connection), admission, and the
 * reply being written. docs/internals/http.md tells the life of a request.
 *
 * A connection reads one request at a time. When a request is complete the
 * parser is paused and the request handed to the frontend (the on_request
 * of the handlers http.c gives pts_conn_listen); bytes of a pipelined next
 * request wait in the connection's input until the reply has been
 * written. Admission happens when a request's head is complete, before any
 * of its body is kept:
 *  - beyond --http-max-connections a new connection is answered 503 with
 *    Retry-After and closed;
 *  - a declared body above --http-max-input-size is answered 413, one
 *    larger than the whole --request-memory-budget 413, one that does not
 *    fit what is left of the budget 503 — each without reading the body;
 *  - a chunked body is charged as it arrives and refused the same way when
 *    it outgrows either limit.
 * A refused connection is answered, its sending side shut, and its input
 * read and dropped until the client closes (for at most a few seconds), so
 * the answer is not destroyed by a reset.
 *
 * The body of an admitted request is read into one pts_buf of its declared
 * size — large bodies straight from the socket, never through another
 * buffer — and handed to the handler, whose tensors share it.
 *
 * Threading: everything here runs on the connection's loop thread.
 */
#ifndef PTS_FRONTEND_HTTP_CONN_H
#define PTS_FRONTEND_HTTP_CONN_H

#include <event2/util.h>
#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/buf.h"
#include "core/status.h"
#include "frontend/http/http_impl.h"
#include "frontend/http/router.h"

/* How long a client is asked to wait before retrying a 503 (Retry-After). */
#define PTS_CONN_RETRY_AFTER_S 1

/* What the connection is doing. */
enum conn_state {
  CONN_READING,  /* reading a request (or waiting for one) */
  CONN_HANDLING, /* a request was handed over; its reply is not written yet */
  CONN_REFUSING, /* answered with an error; input is dropped until the peer goes */
  CONN_DEAD,     /* closed; freed on the next turn of the loop */
};

/* One header of the current request: offsets of NUL-terminated strings in
 * the connection's head buffer. */
struct conn_header {
  uint32_t name, value;
};

struct conn {
  struct loop *lp;
  int fd;                 /* owned */
  struct event *rev;      /* read readiness, persistent (--http-timeout-secs) */
  struct event *wev;      /* write readiness while a reply is left; also fires the close */
  enum conn_state state;
  bool has_slot;          /* holds one of --http-max-connections' slots */
  bool peer_eof;          /* the client shut its sending side */
  bool reading;           /* rev is added */
  bool in_process;        /* conn_process is on the stack */
  bool close_after;       /* close once the current reply is written */
  bool head_reply;        /* the current request is a HEAD: the reply has no body */
  bool complete;          /* the parser saw the end of the current request */
  bool sent;              /* the current request's reply is in `out` */
  bool writing;           /* wev is added: `out` waits for the socket */
  http_parser parser;
  /* Input not parsed yet: in[in_pos, in_len). Owned, PTS_CONN_IN_CAP bytes. */
  char *in;
  size_t in_pos, in_len;
  /* The current request's URL and headers, NUL-terminated one after the
   * other (owned); `piece` is what the parser delivered last. */
  char *hb;
  size_t hb_len, hb_cap;
  int piece;
  size_t path;            /* offset of the URL's path in hb */
  struct conn_header *hdrs; /* owned */
  size_t n_hdrs, hdrs_cap;
  /* The current request's body: `body` (owned, of the declared size) with
   * body_len bytes arrived, or for a chunked body `chunks` (owned, grown). */
  struct pts_buf *body;
  size_t body_len;
  char *chunks;
  size_t chunks_cap;
  bool chunked;
  size_t charged;         /* what this connection holds of the memory budget */
  /* A refusal decided inside a parser callback, carried out after it. */
  int refuse_code;
  bool refuse_retry;
  char *refuse_msg;       /* owned */
  size_t discarded;       /* CONN_REFUSING: bytes thrown away */
  time_t refused_at;      /* CONN_REFUSING: when (monotonic seconds) */
  /* The reply: headers the handler added, its body, and what is being
   * written (head and body). Owned. */
  char xh[512];
  size_t xh_len;
  struct evbuffer *reply;
  struct evbuffer *out;
  /* http.c */
  struct infer_ctx *ctx; /* the request of this connection in the core */
  bool reply_pending;    /* its reply is being written (counts in h->in_flight) */
  size_t reply_charged;  /* bytes of that reply charged to the memory budget until written:
                            a client that never reads holds them, and the budget refuses
                            new work rather than let such clients pin unbounded memory */
  struct conn *prev, *next; /* on lp->conns */
};

/* What the frontend (http.c) does for its connections. conn.c calls these
 * and never http.c's functions by name: http.c uses this file, not the
 * other way round. Loop thread. */
struct pts_conn_handlers {
  /* A complete request on `cn`: handle it, reply with pts_conn_send. */
  void (*on_request)(struct conn *cn);
  /* The reply pending on `cn` (reply_pending) is written, or its
   * connection is gone. */
  void (*reply_end)(struct conn *cn);
  /* The connection of a request in the core (cn->ctx) closed. */
  void (*orphan)(struct infer_ctx *ctx);
};

/* Loop set-up, before the loop runs: the listener on `fd` (taken over) and
 * its accept pause; the loop's connections call `handlers` (borrowed: they
 * must outlive the loop). */
enum pts_status pts_conn_listen(struct loop *lp, evutil_socket_t fd,
                                const struct pts_conn_handlers *handlers,
                                struct pts_error *err);
/* After the loop stopped: closes every connection (orphaning what is in
 * the core) and frees the listener. */
void pts_conn_close_all(struct loop *lp);

/* The current request, while it is handled. */
enum pts_http_method pts_conn_method(const struct conn *cn);
const char *pts_conn_path(const struct conn *cn);
/* The first header of that name (any case), or NULL. Borrowed until the reply. */
const char *pts_conn_header(const struct conn *cn, const char *name);
/* The request's headers one by one: false past the last. Borrowed until the reply. */
bool pts_conn_header_at(const struct conn *cn, size_t i, const char **name, size_t *name_len,
                        const char **value);
/* The body (a new reference; never NULL but out of memory, when it is
 * empty). The connection keeps its own until the reply. */
struct pts_buf *pts_conn_body(struct conn *cn);
/* The bytes of the memory budget the request carries (its head and body);
 * the caller now holds them and releases them (or hands them on). */
size_t pts_conn_take_charge(struct conn *cn);

/* The reply: headers (name and value borrowed, copied now), the body
 * buffer to fill, then pts_conn_send. */
void pts_conn_add_header(struct conn *cn, const char *name, const char *value);
struct evbuffer *pts_conn_reply_body(struct conn *cn);
/* The connection closes once this request's reply is written. */
void pts_conn_close_after(struct conn *cn);
/* Writes the reply (status `code`) with Content-Length, Date and the
 * added headers. The connection reads its next request once it is out. */
void pts_conn_send(struct conn *cn, int code);

#endif
