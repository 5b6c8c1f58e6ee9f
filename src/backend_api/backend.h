/* backend_api/backend.h — the interface every backend implements (the
 * implementations live in src/backends/: a folder name that says which is
 * which, since `backend/` beside `backends/` did not).
 *
 * A backend turns a loaded model into instances and runs batches on them.
 * The core gives it inputs already validated against the config, in config
 * input order, with any `reshape` applied and the batch dimension (when
 * max_batch_size > 0) leading; it takes back one output tensor per config
 * output, in config output order, in the reshaped shape. The core then maps
 * shapes back to config dims and slices outputs per request.
 *
 * Backends: "identity" (plain C; output i echoes input i — protocol tests
 * need no torch) and "pytorch" (LibTorch through one C++ bridge file).
 *
 * Threading: model_load/model_unload and instance_create/destroy run on the
 * repository's load thread. execute() runs on the instance's own thread,
 * or on a thread it is lent to (the scheduler's run to completion: a
 * KIND_CPU instance, or one whose lendable() says it may be), one batch
 * at a time per instance; different instances of one model may execute
 * concurrently. A pipelined instance (execute_begin/execute_end,
 * below) has at most two batches begun at once, one per staging set, both
 * begun and ended on its own thread.
 */
#ifndef PTS_BACKEND_API_BACKEND_H
#define PTS_BACKEND_API_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/request_param.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "tensor/tensor.h"

struct pts_profile_ticket;
struct pts_shm_cuda_ops;

struct pts_backend_model_desc {
  const char *name;
  int64_t version;
  const Inference__ModelConfig *config; /* borrowed; valid until model_unload */
  /* The same config, writable during model_load only (backend
   * auto-complete): a backend may fill in what its model file knows —
   * inputs and outputs the config leaves out, the kind of KIND_AUTO
   * instance groups. The repository validates the result again
   * (pts_model_config_check_completed) and settles devices after
   * model_load. */
  Inference__ModelConfig *completable;
  const char *model_dir;    /* <repository>/<name> */
  const char *version_dir;  /* <repository>/<name>/<version> */
  const char *model_path;   /* <version_dir>/<default_model_filename> */
  /* What the layer above lent this kind of model (the ensemble backend's
   * struct pts_ensemble_host, ensemble/ensemble.h); NULL for the others.
   * Borrowed for the model's life. */
  void *host;
};

struct pts_backend_instance_desc {
  const char *name;     /* "<group name>_<index>", as Triton names instances */
  Inference__ModelInstanceGroup__Kind kind;
  int device_id;        /* GPU id for KIND_GPU, -1 otherwise */
  int index;            /* 0-based index over all instances of the model */
  const char *host_policy; /* the host policy it runs under (core/host_policy.h): its
                              group's, else "cpu", "gpu_<id>" or "model"; borrowed */
  /* Its group's rate_limiter, or NULL: the scheduler's (scheduler/rate_limit.h);
   * backends ignore it. Borrowed from the model config. */
  const Inference__ModelRateLimiter *rate_limiter;
};

/* Where the request of a batch of one wants an output: its shared-memory
 * place (scheduler/request.h). */
struct pts_output_dest {
  void *data; /* NULL: no wish for this output */
  size_t size;
  enum pts_mem mem;
  int device;
};

/* One request's bytes of a batch input in device memory (CUDA shared
 * memory), for gather_device. */
struct pts_device_part {
  const void *data; /* device address; borrowed for the call */
  size_t byte_size;
  int device;       /* the CUDA device it lies on */
};

struct pts_batch {
  int64_t batch_size;          /* total batch; 0 when the model does not batch */
  size_t n_inputs;
  const struct pts_tensor *inputs;  /* borrowed, config order; an optional
                                       input the request left out has
                                       data == NULL and shape.ndim == 0 */
  size_t n_outputs;
  struct pts_tensor *outputs;  /* zeroed by the caller; the backend fills every
                                  entry (name, dtype, shape, data, buf); the
                                  caller clears them */
  /* NULL, or one entry per config output: a batch of one request that
   * placed outputs in shared memory says where. A backend may write a
   * (non-BYTES) output straight there when it fits (its output tensor then
   * points at `data`; the copy it saves is the scheduler's). Ignoring it is
   * always correct. Borrowed for the call. */
  const struct pts_output_dest *output_dest;
  /* Set by a backend that timed the phases on the device itself (CUDA
   * events): input copies, the model, output copies. Statistics then use
   * these instead of the host clock. */
  bool device_timed;
  uint64_t device_input_ns, device_infer_ns, device_output_ns;
  /* Non-NULL: record this execution with the operator profiler and add its
   * events with pts_profile_add (trace/profile.h). Owned by the caller,
   * which ends it after execute; a backend that can not profile ignores it
   * (or says why with pts_profile_note). */
  struct pts_profile_ticket *profile;
  /* The sequence extension's fields of a batch of one request (zero, NULL
   * and false for a batch of several): a backend that sends requests on
   * passes them with it, as the ensemble does to its steps (Triton's
   * ensembles do the same). sequence_id_str is borrowed for the call. */
  uint64_t sequence_id;
  const char *sequence_id_str;
  bool sequence_start, sequence_end;
  /* Likewise the request parameters of a batch of one request
   * (core/request_param.h: its custom parameters, then the headers
   * --*-header-forward-pattern forwards), which the ensemble hands to its
   * steps, as Triton's does. Borrowed for the call; none for a batch of
   * several. */
  const struct pts_request_param *params;
  size_t n_params;
  /* The staging set (0 or 1) the scheduler gathered the inputs into
   * (input_staging's `set`): a pipelined instance keeps a second batch in
   * that set while this one runs. Always 0 for an instance that does not
   * pipeline. */
  unsigned set;
};

struct pts_backend {
  const char *name;
  enum pts_status (*model_load)(const struct pts_backend_model_desc *desc, void **model_state,
                                struct pts_error *err);
  void (*model_unload)(void *model_state);
  enum pts_status (*instance_create)(void *model_state,
                                     const struct pts_backend_instance_desc *desc,
                                     void **instance_state, struct pts_error *err);
  void (*instance_destroy)(void *instance_state);
  enum pts_status (*execute)(void *instance_state, struct pts_batch *batch,
                             struct pts_error *err);
  /* (optional) How many GPUs this backend can place instances on (CUDA
   * devices; 1 for MPS); decides what KIND_AUTO means. NULL = none. */
  int (*gpu_count)(void);
  /* (optional) Memory to gather the batch's input `input` (config order)
   * into: at least `byte_size` bytes the backend owns, reused from batch
   * to batch (a CUDA instance's pinned staging buffer, from which its
   * host-to-device copy needs no further host copy). `set` (0 or 1, the
   * batch's pts_batch.set) picks one of two such buffers per input, so a
   * pipelined instance gathers the next batch while the device still
   * reads the last one. The scheduler calls it on the instance thread
   * before execute (or execute_begin); the memory must stay valid and
   * untouched by the backend until that execute (execute_end) returns,
   * and the scheduler does not ask for the same set again before then.
   * *data NULL (with OK) declines: the scheduler then gathers as usual.
   * *mem says what memory it is. */
  enum pts_status (*input_staging)(void *instance_state, unsigned set, size_t input,
                                   size_t byte_size, void **data, enum pts_mem *mem,
                                   struct pts_error *err);
  /* (optional, the three or none) Pipelined execution, for a device that
   * runs asynchronously (a CUDA stream): the instance thread starts a
   * batch, then gathers and starts the next one while the device still
   * works on the first (docs/internals/scheduler.md, "Pipelined
   * instances").
   *
   * pipelined(instance_state): whether this instance runs batches that
   * way (the pytorch backend: a CUDA instance); asked once, after
   * instance_create.
   *
   * execute_begin: starts the batch (batch->set names its staging set)
   * and returns without waiting for the device. Its inputs (staging
   * memory, request bytes) stay valid and untouched until execute_end
   * returns. On an error nothing is left running and execute_end is not
   * called. Never given a batch with a profile ticket (the scheduler runs
   * those with execute, alone).
   *
   * execute_end: waits for the batch begun on batch->set (the same struct)
   * and fills what execute would: outputs, device times. Called exactly
   * once per successful execute_begin, in the order they were begun; at
   * most two batches (one per set) are begun and not yet ended. execute
   * keeps working on such an instance (warmup, profiled batches, batches
   * run while nothing is in flight). */
  bool (*pipelined)(void *instance_state);
  /* (optional) Whether this instance, not of KIND_CPU, may run a batch on
   * a thread other than its own: the scheduler's run to completion lends
   * an idle instance to the thread that enqueued the request (an event
   * loop), which then calls input_staging, gather_device and execute on
   * it, one batch at a time, while the instance's thread keeps off. True
   * when the instance keeps nothing on its thread (the pytorch backend: a
   * CUDA instance sets its device and stream on each call). Asked once,
   * after instance_create; never for a pipelined instance. NULL: only
   * KIND_CPU instances are lent. */
  bool (*lendable)(void *instance_state);
  enum pts_status (*execute_begin)(void *instance_state, struct pts_batch *batch,
                                   struct pts_error *err);
  enum pts_status (*execute_end)(void *instance_state, struct pts_batch *batch,
                                 struct pts_error *err);
  /* (optional) Gathers the batch's input `input` (config order), whose n
   * parts all lie in device memory, one after the other into device memory
   * the instance owns: at least `total` bytes on the instance's device,
   * reused from batch to batch (grown when too small), so that a batch of
   * CUDA shared-memory requests costs device-to-device copies and no host
   * copy. The copies are ordered before the instance's next execute (its
   * CUDA stream) and have finished reading the parts when it returns: the
   * requests, and their regions, may go as soon as the batch ends, even
   * when execute fails. `set` (0 or 1) picks one of two buffers per input,
   * so that a pipelined scheduler can gather batch b+1 while batch b runs;
   * callers without a pipeline pass 0. The scheduler calls it on the
   * instance thread before execute; the memory stays untouched by the
   * backend until that execute returns. On OK *data (PTS_MEM_DEVICE) and
   * *device say where the batch input is; *data NULL (with OK) declines (an
   * instance not on a GPU): the scheduler then copies the parts to host
   * memory. Its presence lets requests whose inputs are in device memory
   * batch together (pts_batch_compatible), so only a backend with
   * device_inputs sets it. */
  enum pts_status (*gather_device)(void *instance_state, unsigned set, size_t input,
                                   const struct pts_device_part *parts, size_t n, size_t total,
                                   void **data, int *device, struct pts_error *err);
  /* Whether execute() takes inputs in device memory (PTS_MEM_DEVICE: CUDA
   * shared memory) itself. When false the server copies such inputs to
   * host memory before the request is queued. Every backend takes
   * PTS_MEM_PINNED inputs, which are ordinary host memory to the CPU. */
  bool device_inputs;
  /* (optional) The CUDA runtime operations of the CUDA shared-memory
   * extension (shm/shm.h), or NULL when this build of the backend has no
   * CUDA. Called once, when the server starts. */
  const struct pts_shm_cuda_ops *(*cuda_shm_ops)(void);
  /* (optional) Instances for a model whose config has no instance_group
   * (the ensemble backend: how many of its requests run at once). 0 = 1. */
  unsigned default_instances;
};

/* The CUDA operations of the first compiled-in backend that has them
 * (cuda_shm_ops), or NULL: then this build has no CUDA shared memory. */
const struct pts_shm_cuda_ops *pts_backend_cuda_shm_ops(void);

/* The registry: backends compiled into this binary, by config `backend`
 * name ("identity", "pytorch"). NULL when unknown. */
const struct pts_backend *pts_backend_find(const char *name);

/* Writes the names of the compiled-in backends, "'identity', 'pytorch'", into
 * out (always NUL-terminated), for error messages that say what exists. */
void pts_backend_list(char *out, size_t out_size);

#endif
