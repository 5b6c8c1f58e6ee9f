/* tests/fuzz/fuzz_grpc_h2.c — bytes from a client into the nghttp2 gRPC
 * transport (frontend/grpc/h2.h): the input follows the HTTP/2 client
 * preface on one connection of a real server core (an identity model on a
 * temporary repository), then the client half-closes. nghttp2 parses the
 * frames; the transport cuts DATA into gRPC messages, inflates, dispatches
 * to the rpcs and the core, and answers.
 *
 * Properties: nothing crashes or leaks (the sanitizers), and once the
 * client is gone every call and the connection are freed (the transport's
 * live count returns to 0) within a bound.
 *
 * Threading: libFuzzer's thread drives the transport's loop itself;
 * instance threads answer through it. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/overload.h"
#include "core/restrict.h"
#include "frontend/grpc/h2.h"
#include "fuzz_common.h"
#include "net/libevent.h"
#include "server/server.h"

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/* Input written before the loop runs, at most: a large input reaches the
 * transport in several reads, which cut its frames, as a real client's
 * segments do (and the rest of a large DATA frame is read straight into
 * its message: h2.c's direct_room). The small seeds go in one. */
#define WRITE_PIECE 4096
static const char CONFIG[] =
    "name: \"id\"\nbackend: \"identity\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 2 ] } ]\n";

static struct pts_server *server;
static struct pts_restrictions none;
static struct event_base *base;
static struct pts_grpc_h2 *h2;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  fuzz_check(f != NULL, "cannot write the fuzz repository");
  fputs(text, f);
  fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_quiet_log();
  static char root[] = "/tmp/fuzz_grpc_h2.XXXXXX";
  fuzz_check(mkdtemp(root) != NULL, "mkdtemp");
  char path[256];
  snprintf(path, sizeof path, "%s/id", root);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/id/1", root);
  mkdir(path, 0700);
  snprintf(path, sizeof path, "%s/id/config.pbtxt", root);
  write_file(path, CONFIG);
  struct pts_server_options o;
  pts_server_options_default(&o);
  const char *repos[] = {root};
  o.model_repositories = repos;
  o.n_model_repositories = 1;
  /* A message's buffer is allocated at the length its prefix declares, up
   * to the request memory budget: the default (a quarter of the machine's
   * memory) lets a 5-byte prefix ask for 2 GiB, which libFuzzer's 2 GiB
   * malloc limit reports as out-of-memory. 64 MiB, as on a small box, keeps
   * the budget's refusal in the paths explored. (The server's run sets it
   * from --request-memory-budget; this driver does not run it.) */
  pts_overload_configure(64u << 20);
  struct pts_error err;
  fuzz_check(pts_server_create(&o, &server, &err) == PTS_OK, "server start");
  pts_libevent_init();
  base = pts_libevent_loop_base();
  fuzz_check(base && pts_grpc_h2_new(server, &o, &none, base, &h2, &err) == PTS_OK,
             "transport start");
  return 0;
}

/* Reads and drops what the server sent. */
static void drain(int fd) {
  char buf[16384];
  while (read(fd, buf, sizeof buf) > 0) {
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  fuzz_check(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
  fcntl(sv[0], F_SETFL, O_NONBLOCK);
  fcntl(sv[1], F_SETFL, O_NONBLOCK);
  pts_grpc_h2_accept(h2, sv[0]);
  /* The preface, then the input, as the socket takes it, at most
   * WRITE_PIECE bytes before the loop runs. */
  size_t at = 0, total = sizeof PREFACE - 1 + size;
  for (int round = 0; at < total && round < 100000; round++) {
    const uint8_t *p = at < sizeof PREFACE - 1 ? (const uint8_t *)PREFACE + at
                                                : data + (at - (sizeof PREFACE - 1));
    size_t n = at < sizeof PREFACE - 1 ? sizeof PREFACE - 1 - at : total - at;
    if (n > WRITE_PIECE) n = WRITE_PIECE;
    ssize_t w = send(sv[1], p, n, MSG_NOSIGNAL); /* EPIPE, not SIGPIPE, once the server closed */
    if (w > 0) at += (size_t)w;
    if (w < 0 && errno != EAGAIN) break; /* the server closed the connection */
    event_base_loop(base, EVLOOP_NONBLOCK);
    drain(sv[1]);
  }
  shutdown(sv[1], SHUT_WR);
  /* The client is gone: every call and the connection must go too. */
  for (int round = 0; round < 20000 && pts_grpc_h2_live(h2) > 0; round++) {
    event_base_loop(base, EVLOOP_NONBLOCK);
    drain(sv[1]);
    if (round > 100) usleep(100); /* an instance thread may be answering */
  }
  fuzz_check(pts_grpc_h2_live(h2) == 0, "a call or the connection outlived its client");
  close(sv[1]);
  return 0;
}
