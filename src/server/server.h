/* server/server.h — the server core as the frontends see it.
 *
 * The server owns the model repository (which owns one scheduler per loaded
 * model version) and the frontends. Frontends talk to the core only through
 * the functions below, the request of scheduler/request.h and the model
 * types of repository/types.h, so HTTP and gRPC share validation,
 * scheduling and statistics.
 *
 * Threading: pts_server_create/run/destroy run on the main thread. Every
 * other function here is thread-safe and may be called from any frontend
 * thread; none of them blocks on a model or reads a file (what must — the
 * repository index, load and unload — is queued to the server's own
 * threads by the *_async functions, whose callbacks run there).
 */
#ifndef PTS_SERVER_SERVER_H
#define PTS_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "model_config.pb-c.h"
#include "repository/types.h"
#include "scheduler/request.h"
#include "scheduler/stats.h"

struct pts_server;

/* --model-control-mode (docs/configuration.md, internals/server.md). */
enum pts_model_control_mode {
  PTS_MODEL_CONTROL_NONE,     /* every model loads at start-up; no load/unload API */
  PTS_MODEL_CONTROL_POLL,     /* as NONE, then the repositories are re-read every
                                 --repository-poll-secs and changes applied */
  PTS_MODEL_CONTROL_EXPLICIT, /* --load-model at start-up, then the load/unload API */
};

/* Command-line settings (tritonserver's flag names; src/main.c fills them). */
struct pts_server_options {
  const char **model_repositories;  /* borrowed, n_model_repositories entries */
  size_t n_model_repositories;
  enum pts_model_control_mode model_control_mode; /* default NONE */
  const char *const *load_models;   /* --load-model values (explicit mode; "*" = every
                                       model); borrowed, must outlive pts_server_create */
  size_t n_load_models;
  unsigned repository_poll_secs;    /* --repository-poll-secs (default 15; 0 = no polling) */
  int model_load_thread_count;      /* --model-load-thread-count (default 4) */
  unsigned model_load_retry_count;  /* --model-load-retry-count (default 0): loads again at
                                       once after a failed load, as tritonserver */
  bool strict_readiness;            /* --strict-readiness (default true) */
  bool exit_on_error;               /* --exit-on-error (default true) */
  bool allow_http;                  /* --allow-http (default true) */
  const char *http_address;         /* --http-address (default "0.0.0.0") */
  const char *server_id;            /* --id: the name server metadata reports (default
                                       "ptserve"; tritonserver's is "triton"); copied */
  int http_port;                    /* --http-port (default 8000) */
  bool reuse_http_port;             /* --reuse-http-port (default false): SO_REUSEPORT */
  int http_thread_count;            /* --http-thread-count (default: cores, 2..8) */
  size_t http_max_input_size;       /* --http-max-input-size (default 64 MiB) */
  unsigned exit_timeout_secs;       /* --exit-timeout-secs (default 30): how long a stop
                                       waits for accepted requests */
  unsigned exit_drain_secs;         /* --exit-drain-secs (ptserve; default 0): how long a
                                       stop keeps serving, not ready, before it refuses new
                                       inference (docs/deploy.md) */
  size_t http_max_header_size;      /* --http-max-header-size (ptserve; default 64 KiB):
                                       request line plus headers */
  unsigned http_timeout_secs;       /* --http-timeout-secs (ptserve; default 60, 0 = none):
                                       a connection silent this long is closed */
  unsigned long http_max_connections; /* --http-max-connections (ptserve; 0 = the default:
                                       what the descriptor limit leaves, core/overload.h) */
  uint64_t default_max_queue_size; /* --default-max-queue-size (ptserve; default
                                       PTS_OVERLOAD_DEFAULT_QUEUE_CAP, 0 = unbounded): the cap of a
                                       queue whose config sets no max_queue_size */
  size_t request_memory_budget;     /* --request-memory-budget (ptserve; 0 = the default: a
                                       quarter of the memory; core/overload.h) */
  const char *const *http_restricted_api; /* --http-restricted-api values, each
                                       "<api>[,<api>...]:<header>=<value>"; borrowed, must
                                       outlive the server */
  size_t n_http_restricted_api;
  /* gRPC (src/frontend/grpc); strings borrowed, they must outlive the server */
  bool allow_grpc;                  /* --allow-grpc (default true) */
  const char *grpc_address;         /* --grpc-address (default "0.0.0.0") */
  int grpc_port;                    /* --grpc-port (default 8001; 0 = any free port) */
  const char *const *grpc_restricted_protocol; /* --grpc-restricted-protocol values, each
                                       "<api>[,<api>...]:<key>=<value>"; borrowed */
  size_t n_grpc_restricted_protocol;
  bool reuse_grpc_port;             /* --reuse-grpc-port (default false) */
  int grpc_infer_thread_count;      /* --grpc-infer-thread-count; 0 (default): nghttp2 one
                                       loop per core (pts_server_default_loops), core 1 */
  int grpc_compression_level;       /* --grpc-infer-response-compression-level:
                                       0 none (default), 1 low, 2 medium, 3 high */
  int grpc_keepalive_time_ms;       /* --grpc-keepalive-time (default 7200000) */
  int grpc_keepalive_timeout_ms;    /* --grpc-keepalive-timeout (default 20000) */
  bool grpc_keepalive_permit_without_calls; /* --grpc-keepalive-permit-without-calls (false) */
  int grpc_http2_max_pings_without_data;    /* --grpc-http2-max-pings-without-data (2) */
  int grpc_http2_min_recv_ping_interval_ms; /* --grpc-http2-min-recv-ping-interval-without-data
                                               (default 300000) */
  int grpc_http2_max_ping_strikes;  /* --grpc-http2-max-ping-strikes (default 2) */
  int grpc_max_connection_age_ms;   /* --grpc-max-connection-age (-1 = unset, default) */
  int grpc_max_connection_age_grace_ms; /* --grpc-max-connection-age-grace (-1 = unset) */
  int grpc_max_connections;         /* --grpc-max-connections (ptserve; 0 = the default of
                                       listen_grpc.c: a share of the descriptor limit) */
  /* TLS on the gRPC port (tritonserver's flags; main.c settles how they
   * combine, net/tls.h serves them) */
  bool grpc_use_ssl;                /* --grpc-use-ssl, or --grpc-use-ssl-mutual given
                                       (default false): gRPC over TLS */
  bool grpc_use_ssl_mutual;         /* --grpc-use-ssl-mutual (default false): a client
                                       certificate signed by grpc_root_cert is required */
  const char *grpc_server_cert;     /* --grpc-server-cert: PEM, the certificate and chain */
  const char *grpc_server_key;      /* --grpc-server-key: PEM, its private key */
  const char *grpc_root_cert;       /* --grpc-root-cert: PEM, the roots of client
                                       certificates */
  /* metrics (src/metrics); strings borrowed, they must outlive the server */
  bool allow_metrics;               /* --allow-metrics (default true) */
  bool allow_cpu_metrics;           /* --allow-cpu-metrics (default true) */
  bool allow_gpu_metrics;           /* --allow-gpu-metrics (default true: collected where
                                       NVML loads and finds a GPU) */
  const char *metrics_address;      /* --metrics-address (NULL = http_address) */
  int metrics_port;                 /* --metrics-port (default 8002; 0 = any free port) */
  int metrics_interval_ms;          /* --metrics-interval-ms (default 2000): CPU and GPU
                                       sampling interval */
  /* tracing (src/trace); strings borrowed, they must outlive the server */
  const char *const *trace_config;  /* --trace-config values, "[triton,]<key>=<value>" */
  size_t n_trace_config;
  const char *profile_dir;          /* --profile-dir (ptserve): operator profiles; NULL =
                                       the trace file's directory, else the working one */
  /* SageMaker's frontend (frontend/http/sagemaker.h): a second HTTP
   * listener with /ping and /invocations, as tritonserver's; what it
   * serves comes from the SAGEMAKER_TRITON_* environment. */
  bool allow_sagemaker;             /* --allow-sagemaker (default false) */
  int sagemaker_port;               /* --sagemaker-port (default 8080) */
  int sagemaker_thread_count;       /* --sagemaker-thread-count (default 8) */
  int sagemaker_safe_port_lo;       /* --sagemaker-safe-port-range <lo>-<hi>: the ports the */
  int sagemaker_safe_port_hi;       /* other services may use (-1 = unset, default) */
  /* Vertex AI's listener (cloud.h), its routes from the AIP_* environment */
  bool allow_vertex_ai;             /* --allow-vertex-ai (default false; true when
                                       AIP_MODE=PREDICTION, which also turns HTTP and gRPC off) */
  int vertex_ai_port;               /* --vertex-ai-port (default $AIP_HTTP_PORT, else 8080) */
  int vertex_ai_thread_count;       /* --vertex-ai-thread-count (default 8) */
  const char *vertex_ai_default_model; /* --vertex-ai-default-model (NULL: the one model) */
  bool allow_client_shm;            /* --allow-client-shm (default false, as Triton 26.04+):
                                       clients may register and use shared-memory regions */
  size_t response_cache_bytes;      /* --cache-config local,size=<bytes> (default 0: no
                                       response cache; cache/cache.h) */
};

/* Fills `o` with tritonserver's defaults. */
void pts_server_options_default(struct pts_server_options *o);
/* Event loops a frontend runs when its flag is not given: one per core, 2
 * to 8 (--http-thread-count; --grpc-infer-thread-count on nghttp2). */
int pts_server_default_loops(void);

/* Loads every model of the repositories (a broken model becomes UNAVAILABLE
 * and is logged; it does not stop the others) and prints the model table.
 * Fails only when the repository can not be read, or when a model failed and
 * exit_on_error is set. */
enum pts_status pts_server_create(const struct pts_server_options *o, struct pts_server **out,
                                  struct pts_error *err);
/* Starts the frontends and blocks until pts_server_stop(). Then the server
 * is no longer ready; for exit_drain_secs (or until a second
 * pts_server_stop) it still serves inference, so a load balancer sees the
 * failed readiness before anything is refused; then it refuses new inference
 * and waits up to exit_timeout_secs for accepted requests. DEADLINE when some are still
 * running then: the frontends are left as they are and the caller should
 * exit without pts_server_destroy (which would wait for them). */
enum pts_status pts_server_run(struct pts_server *s, struct pts_error *err);
/* Async-signal-safe: asks pts_server_run to return. */
void pts_server_stop(struct pts_server *s);
/* Unloads everything. NULL-safe. */
void pts_server_destroy(struct pts_server *s);

/* ---- health and metadata ---- */

bool pts_server_is_live(struct pts_server *s);
/* Ready = started and (with strict readiness) every model READY. */
bool pts_server_is_ready(struct pts_server *s);
/* True from the moment a stop was asked for (drain included): frontends
 * close each connection after its reply, so keep-alive clients reconnect,
 * through their load balancer, to a replica that stays. */
bool pts_server_is_shutting_down(struct pts_server *s);
/* "0.1.0" etc. */
const char *pts_server_version(void);
/* --id: the server's name in its metadata ("ptserve" by default). Owned by s. */
const char *pts_server_id(const struct pts_server *s);

/* ---- models ---- */

/* The version handle, its states and accessors (pts_model_name, _version,
 * _state, _reason, _config, _release) are the repository's:
 * repository/types.h. */

/* Finds a model version. version < 0 = the latest READY version. Errors, all
 * NOT_FOUND with Triton's words: "Request for unknown model: 'x' is not
 * found", "... has no available versions", an unknown explicit version, and
 * an explicit version that exists but is not READY (the message names its
 * state; Triton answers UNAVAILABLE there). With `any_state`, a known but
 * not-ready version is returned instead (for the model-ready endpoint).
 * Caller releases *out with pts_model_release. */
enum pts_status pts_server_model_get(struct pts_server *s, const char *name, int64_t version,
                                     bool any_state, struct pts_model **out,
                                     struct pts_error *err);

/* The model-ready endpoints' answer: whether `name` (version < 0: any
 * version) has a READY version, decided under the repository's lock
 * (pts_repository_ready says why a looked-up reference will not do).
 * Errors as pts_server_model_get's for an unknown name or version. */
enum pts_status pts_server_model_ready(struct pts_server *s, const char *name, int64_t version,
                                       bool *ready, struct pts_error *err);

/* READY versions of `name`, ascending, into a new array (pts_free). */
enum pts_status pts_server_model_versions(struct pts_server *s, const char *name,
                                          int64_t **versions, size_t *n, struct pts_error *err);

/* The repository index (model_repository extension, protocol-facts §1.12):
 * one entry (struct pts_index_entry, repository/types.h) per known version
 * of every model, and one entry with version -1 and state UNKNOWN (rendered
 * as just the name) for a model of the repositories that has never been
 * loaded (left out when ready_only). */
/* The index as the server knows it now (no file is read). Caller frees
 * with pts_server_index_free. */
enum pts_status pts_server_index(struct pts_server *s, bool ready_only,
                                 struct pts_index_entry **entries, size_t *n,
                                 struct pts_error *err);
void pts_server_index_free(struct pts_index_entry *entries, size_t n);

/* ---- model control (model_repository extension, protocol-facts §1.12) ----
 *
 * Load, unload and a fresh index need the file system, so they run on the
 * server's own threads, never on a frontend's: the *_async functions check
 * what they can at once (an error then is returned and `done` is never
 * called), queue the work and return; `done` is called exactly once, from a
 * server thread, when it has finished. */

/* The parameters of a load (struct pts_load_params, with its `file:`
 * overrides and pts_load_params_add_file/_clear) are the repository's:
 * repository/types.h. */

/* err->code is PTS_OK on success. Called on a server thread. */
typedef void (*pts_server_control_done_fn)(const struct pts_error *err, void *ctx);
/* Takes ownership of the index entries (free with pts_server_index_free);
 * on error entries is NULL. */
typedef void (*pts_server_index_done_fn)(struct pts_index_entry *entries, size_t n,
                                         const struct pts_error *err, void *ctx);

/* Loads `name`, or reloads it when loaded (an ensemble's composing models
 * are loaded first when none of their versions is READY): the versions its version policy
 * selects become READY before the versions they replace stop taking
 * requests; a load that fails leaves what was serving in place and says
 * why (in err and in the index). Only in explicit mode: otherwise
 * UNAVAILABLE "explicit model load / unload is not allowed if polling is
 * enabled", as tritonserver. The server takes *params (left zeroed)
 * whatever the result. */
enum pts_status pts_server_model_load_async(struct pts_server *s, const char *name,
                                            struct pts_load_params *params,
                                            pts_server_control_done_fn done, void *ctx,
                                            struct pts_error *err);
/* Unloads every version of `name`: they leave the routing table at once
 * (new requests get a 4xx naming the state), requests already accepted
 * finish, then the versions are freed and `done` runs. With
 * unload_dependents, unloading an ensemble also unloads its composing
 * models that no other loaded ensemble uses (Triton's meaning). */
enum pts_status pts_server_model_unload_async(struct pts_server *s, const char *name,
                                              bool unload_dependents,
                                              pts_server_control_done_fn done, void *ctx,
                                              struct pts_error *err);
/* The index after re-reading which models the repositories hold. */
enum pts_status pts_server_index_async(struct pts_server *s, bool ready_only,
                                       pts_server_index_done_fn done, void *ctx,
                                       struct pts_error *err);

/* ---- inference ---- */

/* Resolves the request's shared-memory places (server/shm_resolve.h), validates
 * `req` against the model's config (datatypes, shapes, batch size,
 * unknown or missing inputs, unknown outputs, byte sizes, BYTES element
 * counts) and queues it. On OK the server owns req and calls req->done
 * exactly once. On error (returned synchronously with a message naming the
 * problem) done is never called and the caller keeps req. */
enum pts_status pts_server_infer_async(struct pts_server *s, struct pts_infer_request *req,
                                       struct pts_error *err);

/* ---- shared memory (system and CUDA shared-memory extensions §1.15) ---- */

struct pts_shm_registry;
/* The server's region registry (shm/shm.h), for the frontends'
 * register / unregister / status endpoints. Borrowed for the server's
 * life. Inference requests are resolved against it inside
 * pts_server_infer_async. */
struct pts_shm_registry *pts_server_shm(struct pts_server *s);

/* ---- statistics (statistics extension §1.11, metrics) ---- */

/* Statistics of READY model versions: `name` NULL = every model; else that
 * model's READY versions (version < 0) or the one version asked for. Models
 * in name order, versions ascending. Errors are INVALID_ARG with Triton's
 * text: "requested model 'x' is not available" (unknown, or nothing READY),
 * "requested model version 3 is not available for model 'x'". Caller frees
 * *out with pts_server_model_stats_free. */
enum pts_status pts_server_model_stats(struct pts_server *s, const char *name, int64_t version,
                                       struct pts_model_stats **out, size_t *n,
                                       struct pts_error *err);
void pts_server_model_stats_free(struct pts_model_stats *st, size_t n); /* NULL-safe */

#endif
