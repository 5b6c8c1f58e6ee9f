/* server/server.h — the server core as the frontends see it.
 *
 * The server owns the model repository, one scheduler per loaded model
 * version, and the frontends. Frontends talk to the core only through the
 * functions below (and scheduler/request.h), so HTTP and (later) gRPC share
 * validation, scheduling and statistics.
 *
 * Threading: pts_server_create/run/destroy run on the main thread. Every
 * other function here is thread-safe and may be called from any frontend
 * thread; none of them blocks on a model.
 */
#ifndef PTS_SERVER_SERVER_H
#define PTS_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"

struct pts_server;

/* Command-line settings (tritonserver's flag names; src/main.c fills them). */
struct pts_server_options {
  const char **model_repositories;  /* borrowed, n_model_repositories entries */
  size_t n_model_repositories;
  bool strict_readiness;            /* --strict-readiness (default true) */
  bool exit_on_error;               /* --exit-on-error (default true) */
  bool allow_http;                  /* --allow-http (default true) */
  const char *http_address;         /* --http-address (default "0.0.0.0") */
  int http_port;                    /* --http-port (default 8000) */
  int http_thread_count;            /* --http-thread-count (default 8) */
  size_t http_max_input_size;       /* --http-max-input-size (default 64 MiB) */
};

/* Fills `o` with tritonserver's defaults. */
void pts_server_options_default(struct pts_server_options *o);

/* Loads every model of the repositories (a broken model becomes UNAVAILABLE
 * and is logged; it does not stop the others) and prints the model table.
 * Fails only when the repository can not be read, or when a model failed and
 * exit_on_error is set. */
enum pts_status pts_server_create(const struct pts_server_options *o, struct pts_server **out,
                                  struct pts_error *err);
/* Starts the frontends and blocks until pts_server_stop(). */
enum pts_status pts_server_run(struct pts_server *s, struct pts_error *err);
/* Async-signal-safe: asks pts_server_run to return. */
void pts_server_stop(struct pts_server *s);
/* Unloads everything. NULL-safe. */
void pts_server_destroy(struct pts_server *s);

/* ---- health and metadata ---- */

bool pts_server_is_live(struct pts_server *s);
/* Ready = started and (with strict readiness) every model READY. */
bool pts_server_is_ready(struct pts_server *s);
/* "0.1.0" etc. */
const char *pts_server_version(void);

/* ---- models ---- */

enum pts_model_state {
  PTS_MODEL_UNKNOWN,
  PTS_MODEL_READY,
  PTS_MODEL_UNAVAILABLE,
  PTS_MODEL_LOADING,
  PTS_MODEL_UNLOADING,
};
const char *pts_model_state_name(enum pts_model_state s); /* "READY", ... */

struct pts_model;  /* one version of one model; reference counted */

/* Finds a model version. version < 0 = the latest READY version. Errors:
 * NOT_FOUND "Request for unknown model: 'x' is not found", NOT_FOUND
 * "... has no available versions", NOT_FOUND for an unknown explicit version,
 * UNAVAILABLE when that version exists but is not READY (Triton's wording).
 * With `any_state`, a known but not-ready version is returned instead (for
 * the model-ready endpoint). Caller releases *out with pts_model_release. */
enum pts_status pts_server_model_get(struct pts_server *s, const char *name, int64_t version,
                                     bool any_state, struct pts_model **out,
                                     struct pts_error *err);
void pts_model_release(struct pts_model *m); /* NULL-safe */

const char *pts_model_name(const struct pts_model *m);
int64_t pts_model_version(const struct pts_model *m);
enum pts_model_state pts_model_state(const struct pts_model *m);
const char *pts_model_reason(const struct pts_model *m); /* "" when none */
/* The completed config; borrowed while the reference is held. NULL only for
 * a model whose config failed to load. */
const Inference__ModelConfig *pts_model_config(const struct pts_model *m);

/* READY versions of `name`, ascending, into a new array (pts_free). */
enum pts_status pts_server_model_versions(struct pts_server *s, const char *name,
                                          int64_t **versions, size_t *n, struct pts_error *err);

/* The repository index (model_repository extension). */
struct pts_index_entry {
  char *name;                 /* owned */
  int64_t version;            /* -1 when no version is known */
  enum pts_model_state state;
  char *reason;               /* owned, "" when none */
};
enum pts_status pts_server_index(struct pts_server *s, bool ready_only,
                                 struct pts_index_entry **entries, size_t *n,
                                 struct pts_error *err);
void pts_server_index_free(struct pts_index_entry *entries, size_t n);

/* ---- inference ---- */

/* Validates `req` against the model's config (datatypes, shapes, batch size,
 * unknown or missing inputs, unknown outputs, byte sizes, BYTES element
 * counts) and queues it. On OK the server owns req and calls req->done
 * exactly once. On error (returned synchronously with a message naming the
 * problem) done is never called and the caller keeps req. */
enum pts_status pts_server_infer_async(struct pts_server *s, struct pts_infer_request *req,
                                       struct pts_error *err);

#endif
