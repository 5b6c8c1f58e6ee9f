/* scheduler/request.h — the native inference request and response.
 *
 * Frontends parse their wire format at the edge into a `struct
 * pts_infer_request` and hand it to pts_server_infer_async(); nothing past the
 * frontend sees JSON or protobuf. Input tensors are views of the request body
 * (each holds a reference to the body buffer), so binary inputs are never
 * copied on the way in. The response's output tensors are views of the
 * backend's batch outputs, shared by reference count.
 *
 * Ownership: the frontend allocates the request; once pts_server_infer_async
 * returns OK the server owns it until `done` is called, which hands both the
 * request and the response back to the frontend (free them with
 * pts_infer_request_free / pts_infer_response_free). When infer_async fails,
 * `done` is never called and the caller still owns the request.
 *
 * Threading: `done` runs on a scheduler instance thread, or on the thread
 * that called pts_server_infer_async, before that returns: for requests
 * answered without running a model, and for those the scheduler ran there
 * (run to completion, docs/internals/scheduler.md). Frontends hop back to
 * their own thread from an instance thread.
 */
#ifndef PTS_SCHEDULER_REQUEST_H
#define PTS_SCHEDULER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/request_param.h"
#include "core/status.h"
#include "tensor/tensor.h"

struct pts_infer_request;
struct pts_infer_response;
struct pts_trace;

/* Bytes inside each request and response for their small pieces (see
 * `arena` below): a request of two inputs and two requested outputs with
 * short names, a response of four outputs, fit. */
#define PTS_INFER_REQUEST_ARENA_BYTES 640
#define PTS_INFER_RESPONSE_ARENA_BYTES 896

/* Called exactly once per accepted request. `err` is NULL or PTS_OK on
 * success; on failure `resp` may be NULL. Takes ownership of req and resp. */
typedef void (*pts_infer_done_fn)(struct pts_infer_request *req, struct pts_infer_response *resp,
                                  const struct pts_error *err, void *ctx);

/* Where a tensor lives in a registered shared-memory region: the
 * shared_memory_region / shared_memory_byte_size / shared_memory_offset
 * parameters of an input or a requested output (protocol-facts §1.15).
 * Frontends fill it while decoding; the server resolves it against the
 * region registry (shm/shm.h) before validation. */
struct pts_shm_place {
  char *region;       /* owned; NULL = not in shared memory */
  uint64_t offset;
  uint64_t byte_size;
};

struct pts_requested_output {
  char *name;              /* owned */
  bool binary;             /* HTTP: send as binary data (frontend detail, kept for it) */
  bool binary_set;         /* whether the request said binary_data for this output */
  uint32_t classification; /* 0 = off; k > 0 = top-k classification (scheduler/classify.h) */
  struct pts_shm_place shm; /* region.region != NULL: write the output there */
  /* Set when `shm` is resolved: one reference to the region, `data` the
   * output's place in it (shm.byte_size bytes), `mem`/`device` what memory
   * that is. The scheduler copies the output there; the response then
   * carries the output's name, datatype and shape but no data. */
  struct pts_buf *shm_target;
  enum pts_mem shm_mem;
  int shm_device;
};

struct pts_infer_request {
  char *id;                /* owned, may be NULL; echoed in the response */
  char *model_name;        /* owned */
  int64_t model_version;   /* -1 = latest ready version */

  size_t n_inputs;
  struct pts_tensor *inputs;  /* owned array of n_inputs */
  /* NULL, or an owned array of n_inputs: where each input lives in shared
   * memory (entries with region == NULL carry their data in the request).
   * Once the server resolved them, inputs[i] is a view of the region that
   * holds a reference to it (so the region stays mapped while in use). */
  struct pts_shm_place *input_shm;
  size_t n_outputs;           /* 0 = every output of the model */
  struct pts_requested_output *outputs; /* owned array of n_outputs */

  bool binary_data_output;   /* HTTP request parameter */
  /* The parameters handed on to the model (core/request_param.h): the
   * request's custom ones, then forwarded headers. Owned heap array, keys
   * and strings heap too (pts_infer_request_add_param). */
  struct pts_request_param *params;
  size_t n_params, cap_params;
  uint64_t priority;         /* 0 = model default */
  uint64_t timeout_us;       /* 0 = none */

  /* The sequence extension (protocol-facts §1.16), used by models with
   * sequence_batching (scheduler/sequence.h): the correlation id is an
   * integer (sequence_id_str NULL; 0 = none) or a string (owned; "" = none). */
  uint64_t sequence_id;
  char *sequence_id_str;
  bool sequence_start;
  bool sequence_end;

  pts_infer_done_fn done;
  void *done_ctx;

  uint64_t receive_ns;       /* monotonic clock when the frontend got the request */

  /* Set when the request is traced (trace/trace.h): owned; the frontend,
   * the server and the scheduler stamp it, and pts_infer_request_free ends
   * it (hands it to the trace writer). NULL for untraced requests. */
  struct pts_trace *trace;
  uint64_t nvtx_range; /* NVTX request range (trace/nvtx.h); 0 = none */

  /* Bytes of the request memory budget (core/overload.h) this request
   * holds; pts_infer_request_free returns them. Set by the frontend. */
  size_t budget_bytes;

  /* Space inside the request for its own small pieces: a frontend takes
   * the inputs and outputs arrays, tensor and output names and the id from
   * here (pts_infer_request_calloc / _strndup) instead of one malloc each
   * (issue #13). Any "owned" pointer above may point into it or to the
   * heap; pts_infer_request_free frees only the latter. Pieces are valid
   * until the request is freed: never move one into another object (copy
   * it). Set up by pts_infer_request_new; a zeroed request has none, and
   * then everything comes from the heap. Only the request's owner of the
   * moment takes pieces (in practice the frontend, while decoding). */
  struct pts_arena arena;
  _Alignas(16) unsigned char arena_mem[PTS_INFER_REQUEST_ARENA_BYTES];
};

struct pts_infer_response {
  char *model_name;       /* owned */
  int64_t model_version;
  char *id;               /* owned, may be NULL */
  size_t n_outputs;
  struct pts_tensor *outputs;  /* owned array; the requested outputs in request
                                  order, or all outputs in config order */
  /* As the request's: model_name, id and the outputs array may be pieces
   * of it (pts_infer_response_new_for); tensor names never are, since
   * output tensors are moved out of responses (ensembles). */
  struct pts_arena arena;
  _Alignas(16) unsigned char arena_mem[PTS_INFER_RESPONSE_ARENA_BYTES];
};

/* A zeroed request (caller fills it), or NULL on allocation failure.
 * model_version starts at -1 (latest), the one field whose zero is not a
 * useful default. */
struct pts_infer_request *pts_infer_request_new(void);
/* Zeroed space, or a NUL-terminated copy of `n` bytes of `s`, owned by the
 * request (in its arena when it fits, else on the heap; either way freed
 * with it by pts_infer_request_free).
 * NULL when out of memory (strndup: or when `s` is NULL). */
void *pts_infer_request_calloc(struct pts_infer_request *req, size_t count, size_t size);
char *pts_infer_request_strndup(struct pts_infer_request *req, const char *s, size_t n);
char *pts_infer_request_strdup(struct pts_infer_request *req, const char *s);
void pts_infer_request_free(struct pts_infer_request *req);  /* NULL-safe */
/* Bytes the request's inputs hold: each distinct buffer once (binary
 * inputs share the body's). What the memory budget charges it. */
size_t pts_infer_request_held_bytes(const struct pts_infer_request *req);

/* Appends a copy of `p` (its key and string value are copied) to
 * req->params. PTS_NOMEM naming the key when it can not. */
enum pts_status pts_infer_request_add_param(struct pts_infer_request *req,
                                            const struct pts_request_param *p,
                                            struct pts_error *err);
/* The same for a string parameter given as two byte ranges (a header's
 * name and value, not NUL-terminated). */
enum pts_status pts_infer_request_add_string_param(struct pts_infer_request *req, const char *key,
                                                   size_t key_len, const char *value,
                                                   size_t value_len, struct pts_error *err);
/* The shared-memory place of input i (i < n_inputs), allocating
 * req->input_shm on first use; NULL when out of memory. */
struct pts_shm_place *pts_infer_request_input_shm(struct pts_infer_request *req, size_t i);
/* Drops the request's shared-memory references: the views its inputs hold
 * (those tensors keep name and shape, lose data) and its outputs' targets
 * (the places stay, so encoders still leave those outputs' data out).
 * Called once the outputs are written and before the answer leaves, so a
 * client that unregisters a region right after its answer never finds it
 * still in use. Idempotent. */
void pts_infer_request_release_shm(struct pts_infer_request *req);
/* Marks PTS_MEM_PINNED every host input whose bytes lie in a pinned buffer
 * (a body received into pinned memory: core/pinned.h), so that a batch of
 * this one request goes to a GPU by DMA from it with no staging copy. */
void pts_infer_request_note_pinned(struct pts_infer_request *req);
struct pts_infer_response *pts_infer_response_new(void);
/* A response whose model_name (a copy of `model_name`), id (a copy of `id`,
 * or NULL) and outputs array (`n_outputs` zeroed tensors; n_outputs left
 * 0 for the caller to count up) are all set, in one allocation when they
 * fit its arena. NULL when out of memory. */
struct pts_infer_response *pts_infer_response_new_for(const char *model_name, const char *id,
                                                      size_t n_outputs);
void pts_infer_response_free(struct pts_infer_response *resp); /* NULL-safe */

/* Monotonic nanoseconds, for the timestamps above. */
uint64_t pts_now_ns(void);

#endif
