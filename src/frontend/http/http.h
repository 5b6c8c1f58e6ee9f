/* frontend/http/http.h — the KServe v2 HTTP/REST frontend (libevent loops,
 * http-parser; the transport is conn.c).
 *
 * N event loops (--http-thread-count) share one listening socket. A request
 * is parsed and answered on its loop's thread only; inference completions
 * come back from instance threads, and repository answers (index, load,
 * unload) from the server's threads, through event_active() on that loop.
 *
 * Threading: pts_http_start and pts_http_stop run on the main thread.
 */
#ifndef PTS_FRONTEND_HTTP_HTTP_H
#define PTS_FRONTEND_HTTP_HTTP_H

#include "core/status.h"
#include "server/server.h"

struct pts_http;

/* Binds o->http_address:o->http_port and starts the loop threads. The server
 * is borrowed and must outlive the frontend. */
enum pts_status pts_http_start(struct pts_server *s, const struct pts_server_options *o,
                               struct pts_http **out, struct pts_error *err);
/* The port actually bound (useful with --http-port 0). */
/* A cloud platform's listener (cloud.h: SageMaker, Vertex AI) on `port`
 * of every address, with `threads` loops; the limits of `o` are shared with
 * the KServe listener. `cloud` is borrowed until pts_http_stop returns. */
struct pts_cloud;
enum pts_status pts_http_start_cloud(struct pts_server *s, const struct pts_server_options *o,
                                     const struct pts_cloud *cloud, int port, int threads,
                                     struct pts_http **out, struct pts_error *err);
int pts_http_port(const struct pts_http *h);
/* The connection limit in force (--http-max-connections or its default). */
unsigned long pts_http_max_connections(const struct pts_http *h);
/* Stops accepting, finishes the loops, joins the threads, frees. NULL-safe. */
void pts_http_stop(struct pts_http *h);

#endif
