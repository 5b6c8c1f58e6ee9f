/* trace/trace.h — request tracing (Triton's trace extension).
 *
 * Settings: one global set (from --trace-config, changed live through the
 * trace endpoints) and, per model, overrides of single fields that fall back
 * to the global value while they are unset (protocol-facts §1.14):
 * trace_level (OFF | TIMESTAMPS and/or TENSORS), trace_rate (trace every
 * rate-th request), trace_count (traces left to take, -1 = unlimited),
 * log_frequency (write every N traces to "<trace_file>.<index>", 0 = at
 * shutdown to <trace_file>) and trace_file (fixed at start-up, as in Triton).
 *
 * A sampled request carries a `struct pts_trace` (request.h) that the
 * frontend, the server and the scheduler stamp as it passes; whoever frees
 * the request ends the trace. Ended traces are collected per setting and
 * written by one writer thread — Triton's trace JSON to the trace file and a
 * Chrome/Perfetto trace next to it ("<file>.chrome.json") — so no request
 * thread or event loop ever waits on a file.
 *
 * The tracer is process-wide, like the log (core/log.h): a server starts it
 * with pts_trace_init and stops it with pts_trace_shutdown, which writes
 * what is still collected. Before init (and after shutdown) nothing is
 * sampled and every stamp is a no-op, so code under test needs no tracer.
 *
 * Threading: every function is thread-safe. A `struct pts_trace` is used by
 * one thread at a time (it travels with its request).
 */
#ifndef PTS_TRACE_TRACE_H
#define PTS_TRACE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/tensor.h"

/* trace_level bits; 0 is OFF. */
enum {
  PTS_TRACE_TIMESTAMPS = 1u << 0,
  PTS_TRACE_TENSORS = 1u << 1,
};

/* Triton's timestamp names, in the order a request meets them. */
#define PTS_TRACE_POINT_MAP(XX) \
  XX(HTTP_RECV_START)           \
  XX(HTTP_RECV_END)             \
  XX(GRPC_WAITREAD_START)       \
  XX(GRPC_WAITREAD_END)         \
  XX(REQUEST_START)             \
  XX(QUEUE_START)               \
  XX(COMPUTE_START)             \
  XX(COMPUTE_INPUT_END)         \
  XX(COMPUTE_OUTPUT_START)      \
  XX(COMPUTE_END)               \
  XX(INFER_RESPONSE_COMPLETE)   \
  XX(REQUEST_END)               \
  XX(HTTP_SEND_START)           \
  XX(HTTP_SEND_END)             \
  XX(GRPC_SEND_START)           \
  XX(GRPC_SEND_END)

enum pts_trace_point {
#define XX(n) PTS_TRACE_##n,
  PTS_TRACE_POINT_MAP(XX)
#undef XX
      PTS_TRACE_POINT_COUNT
};

/* "QUEUE_START"; "" when out of range. */
const char *pts_trace_point_name(enum pts_trace_point p);

/* ---- start-up ---- */

struct pts_trace_options {
  /* --trace-config values, tritonserver's form: "[triton,]<key>=<value>"
   * with key level (repeatable: levels add up), rate, count, mode (only
   * "triton"), file, log-frequency (or log_frequency). Borrowed. */
  const char *const *config;
  size_t n_config;
  /* Where the operator profiler writes (trace/profile.h); NULL = the trace
   * file's directory, or the working directory without a trace file.
   * Borrowed during init. */
  const char *profile_dir;
};

/* Checks --trace-config values without starting anything (so a bad flag
 * fails before models load). INVALID_ARG names the value and the problem. */
enum pts_status pts_trace_check_config(const char *const *config, size_t n, struct pts_error *err);

/* Applies the options and starts the writer thread. A second init without
 * shutdown is refused with ALREADY_EXISTS (the first settings stay). */
enum pts_status pts_trace_init(const struct pts_trace_options *o, struct pts_error *err);

/* Writes every collected trace (and pending profiles), stops the writer and
 * forgets all settings. Traces still travelling with requests are dropped
 * when they end. Safe to call without init. */
void pts_trace_shutdown(void);

/* ---- settings (the trace endpoints; HTTP and gRPC share them) ---- */

/* One key of an update. `clear` (JSON null, or a gRPC value list that is
 * empty) returns a model's field to the global value, or a global field to
 * its start-up value. Otherwise `values` holds the new value: one string,
 * or for trace_level one or more level names. */
struct pts_trace_update {
  const char *key;
  const char *const *values; /* borrowed */
  size_t n_values;
  bool clear;
};

/* Applies all keys or none. `model` NULL = the global settings. Keys:
 * trace_level, trace_rate, trace_count, log_frequency; trace_file is
 * refused with UNSUPPORTED "trace file location can not be updated through
 * network protocol" (Triton's text); trace_mode accepts only "triton". The
 * ptserve extension "profile_executions" (per model only) arms the operator
 * profiler for the next N executions. Errors are INVALID_ARG naming the key
 * and the value. The caller checks that the model exists. */
enum pts_status pts_trace_update(const char *model, const struct pts_trace_update *u, size_t n,
                                 struct pts_error *err);

/* The effective settings of `model` (NULL = global), as the endpoints show
 * them: keys in Triton's order (trace_file, trace_level, trace_rate,
 * trace_count, log_frequency, trace_mode; plus profile_executions for a
 * model), every value a string, trace_level an array. The strings live in
 * the struct. trace_count shows the traces still to be taken. */
#define PTS_TRACE_MAX_KEYS 7
struct pts_trace_kv {
  const char *key;
  bool array;      /* trace_level */
  size_t n_values; /* 1, or 1-2 for trace_level */
  const char *values[2];
};
struct pts_trace_settings {
  size_t n;
  struct pts_trace_kv kv[PTS_TRACE_MAX_KEYS];
  char file[4096];
  char rate[24], count[24], log_frequency[24], profile[24];
};
void pts_trace_get(const char *model, struct pts_trace_settings *out);

/* ---- one request's trace ---- */

struct pts_trace;

/* Decides whether the request now arriving for `model` is traced (every
 * trace_rate-th request while the level is not OFF and trace_count is not
 * exhausted, with a trace file set). Returns NULL (not traced, the common
 * case: one atomic load while tracing is off everywhere) or a new trace,
 * owned by the caller until pts_trace_end. */
struct pts_trace *pts_trace_sample(const char *model);

/* Stamps `point` at `ns` (pts_now_ns clock). NULL-safe; ignored unless the
 * trace level has TIMESTAMPS. */
void pts_trace_record(struct pts_trace *t, enum pts_trace_point point, uint64_t ns);
/* The model version that ran the request (known after resolution), and the
 * request's "id" (may be NULL). NULL-safe. */
void pts_trace_set_model(struct pts_trace *t, const char *model, int64_t version);
void pts_trace_set_request_id(struct pts_trace *t, const char *id);
/* Whether the trace records tensors (level TENSORS). NULL-safe (false). */
bool pts_trace_wants_tensors(const struct pts_trace *t);
/* Records a tensor's contents under `activity` ("TENSOR_QUEUE_INPUT",
 * "TENSOR_BACKEND_OUTPUT"), rendered now (the tensor may be freed after).
 * NULL-safe; ignored without TENSORS. */
void pts_trace_tensor(struct pts_trace *t, const char *activity, const struct pts_tensor *tensor);
/* The trace's id (unique in the process, from 1). 0 for NULL. */
uint64_t pts_trace_id(const struct pts_trace *t);

/* Hands the trace to its collection (written later, off this thread).
 * NULL-safe; the trace is gone afterwards. */
void pts_trace_end(struct pts_trace *t);

#endif
