/* backends/pytorch/torch_bridge.h — the C ABI over LibTorch.
 *
 * torch_bridge.cc is the only C++ file of ptserve. It loads TorchScript
 * modules and AOTInductor packages (one handle type, struct
 * pts_torch_module, for both), reads forward()'s signature or the package's
 * call specification, and runs the model on C tensor views:
 * inputs are wrapped with torch::from_blob (no copy), outputs are made
 * contiguous on the CPU and handed back without a copy, each with a release
 * callback that drops the kept-alive at::Tensor. No exception ever crosses
 * this boundary: every entry point catches and returns a status whose
 * message is the exception's text.
 *
 * This header is plain C and must stay includable from C++: it uses no
 * C11-only header (core/buf.h's <stdatomic.h> is not valid C++17), which is
 * why tensors here are described by bridge structs, not struct pts_tensor.
 *
 * Threading: load/free/introspection run on the repository's load threads;
 * several models may load at once (the bridge serializes reading AOTInductor
 * packages, which LibTorch can not do concurrently).
 * pts_torch_forward may run concurrently on different modules, and on one
 * module off CUDA from several threads (TorchScript inference is re-entrant
 * as long as nobody moves or retrains the module meanwhile). A module on
 * CUDA (its stream, events, staging sets) and the two halves
 * pts_torch_forward_begin/_end on any module belong to one thread at a
 * time: the instance's. The grad mode, the intra-op thread count and the
 * optimizer switch are set per calling thread.
 */
#ifndef PTS_BACKENDS_PYTORCH_TORCH_BRIDGE_H
#define PTS_BACKENDS_PYTORCH_TORCH_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/pytorch/device.h"
#include "core/status.h"
#include "tensor/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Equal to PTS_TENSOR_MAX_DIMS (checked in pytorch.c). */
#define PTS_TORCH_MAX_DIMS 16

struct pts_torch_module;

/* Kinds of forward() arguments the backend can feed. */
enum pts_torch_arg_kind {
  PTS_TORCH_ARG_TENSOR,      /* Tensor */
  PTS_TORCH_ARG_STRING_LIST, /* List[str] — a 1-D BYTES tensor */
  PTS_TORCH_ARG_TENSOR_DICT, /* Dict[str, Tensor] — inputs keyed by name */
  PTS_TORCH_ARG_OPTIONAL_TENSOR, /* Optional[Tensor] — None when an optional input is absent */
  PTS_TORCH_ARG_OTHER,       /* anything else: the model can not be served */
};

struct pts_torch_arg {
  const char *name;  /* borrowed from the module */
  const char *type;  /* TorchScript's spelling ("Tensor", "Dict[str, Tensor]") */
  enum pts_torch_arg_kind kind;
};

/* Where input or destination bytes live: enum pts_mem's values
 * (tensor/tensor.h, which C++ can not include; pytorch.c checks they
 * agree). Pinned host memory goes to a CUDA device by DMA with no staging
 * copy; device memory (CUDA shared memory) is used where it is. */
enum { PTS_TORCH_MEM_HOST = 0, PTS_TORCH_MEM_PINNED = 1, PTS_TORCH_MEM_DEVICE = 2 };

/* One input. For BYTES, `data` holds serialized elements (tensor/bytes.h)
 * and the argument becomes a List[str]. An absent (optional) input is
 * passed as None, or left out of the dict in dict mode. */
struct pts_torch_input {
  bool absent;
  const char *name;    /* dict key in dict mode; else only for messages */
  enum pts_dtype dtype;
  int ndim;
  const int64_t *dims; /* borrowed */
  const void *data;    /* borrowed for the call; never written by ptserve */
  size_t byte_size;
  int mem;             /* PTS_TORCH_MEM_*; never DEVICE for BYTES */
  int device;          /* CUDA device of DEVICE memory */
};

/* Where the caller would like one returned value written (a request's
 * shared-memory place): the value at position `index`, or under `key`
 * when the model returns a dict. The bridge writes a CUDA result there
 * directly (the device-to-host or device-to-device copy it makes anyway)
 * when it fits; the output then points at `data` and its release does
 * nothing. Results on the CPU are left to the caller. */
struct pts_torch_dest {
  size_t index;
  const char *key; /* NULL for positional values */
  void *data;      /* borrowed for the call */
  size_t size;
  int mem;         /* PTS_TORCH_MEM_* */
  int device;
};

/* One value the model returned. The memory stays valid until
 * release(release_ctx, data) is called, exactly once, by the owner of the
 * output (pts_torch_outputs_free calls it for entries still set). */
struct pts_torch_output {
  char *key;           /* dict key (pts_free), or NULL for positional outputs */
  enum pts_dtype dtype;
  int ndim;
  int64_t dims[PTS_TORCH_MAX_DIMS];
  void *data;
  size_t byte_size;
  void (*release)(void *ctx, void *data); /* matches pts_buf_release_fn */
  void *release_ctx;
};

struct pts_torch_outputs {
  size_t count;
  struct pts_torch_output *items; /* pts_free'd by pts_torch_outputs_free */
  bool keyed;                     /* the model returned a Dict[str, Tensor] */
  /* On a CUDA device the three phases are timed with CUDA events on the
   * instance's stream (device_timed = true): host-to-device input copies,
   * forward(), device-to-host output copies; on MPS (LibTorch >= 2.1) with
   * MPS events. Zero elsewhere. */
  bool device_timed;
  uint64_t input_ns, infer_ns, output_ns;
  /* The batch size of the captured CUDA graph the batch ran as (larger
   * than the batch when padded into it); 0: it ran eagerly. */
  int64_t graph_batch;
};

struct pts_torch_run_opts {
  bool inference_mode;      /* c10::InferenceMode; else torch::NoGradGuard */
  bool optimized_execution; /* TorchScript graph executor optimization */
  int intra_op_threads;     /* > 0: this thread's intra-op pool size; 0: LibTorch's default
                               (pts_torch_default_intra_threads) */
  bool dict_input;          /* pass all inputs as one Dict[str, Tensor] */
  /* cuDNN is a process-global switch in LibTorch. Executions that want it
   * off never overlap executions that want it on (a gate in the bridge), so
   * two models with different DISABLE_CUDNN settings can not see each
   * other's value, unlike Triton's backend, which flips it on every execute. */
  bool disable_cudnn;
  bool empty_cache;         /* ENABLE_CACHE_CLEANING: release cached CUDA blocks after the run */
  /* INPUT_MEMORY_FORMAT channels_last: every 4-D floating-point input is
   * given to the model in channels-last order (NHWC strides, the same
   * values), once it is on the instance's device; graphs are captured so */
  bool channels_last;
  const struct pts_torch_dest *dests; /* borrowed; n_dests entries, may be NULL */
  size_t n_dests;
};

/* LibTorch's version, e.g. "2.13.0". Static string. */
const char *pts_torch_version(void);

/* Probes what this process can run on. */
void pts_torch_probe(struct pts_device_caps *caps);

/* Loads a TorchScript file onto `dev` and puts it in eval mode. Caller frees
 * *out with pts_torch_free. Errors (UNAVAILABLE) carry LibTorch's message. */
enum pts_status pts_torch_load(const char *path, const struct pts_device *dev,
                               struct pts_torch_module **out, struct pts_error *err);
void pts_torch_free(struct pts_torch_module *m); /* NULL-safe */

/* forward()'s arguments without `self` (none for an AOTInductor package).
 * Borrowed until pts_torch_free. */
size_t pts_torch_arg_count(const struct pts_torch_module *m);
const struct pts_torch_arg *pts_torch_arg_at(const struct pts_torch_module *m, size_t i);

/* Whether forward() is declared to return a Dict (outputs then match config
 * output names by key). */
bool pts_torch_returns_dict(const struct pts_torch_module *m);

/* Sets the process-global inter-op pool size. LibTorch allows that once per
 * process: the first value wins, a later different one is ignored with a
 * warning naming `model`. n <= 0 does nothing. Never fails. */
void pts_torch_set_interop_threads(int n, const char *model);

/* LibTorch's intra-op pool size as this process started, before any model
 * set its own: OMP_NUM_THREADS when set, else the cores. Never fails. */
int pts_torch_default_intra_threads(void);

/* Runs forward(). Inputs are in argument order (or keyed, with dict_input).
 * On OK, *out holds every value returned (a Tensor → one output; a Tuple or
 * List → one per element; a Dict[str, Tensor] → one per key, keyed=true);
 * caller frees with pts_torch_outputs_free. Errors: INVALID_ARG for values
 * the backend can not return (with the element named), INTERNAL for
 * exceptions raised by the model (with their message). */
enum pts_status pts_torch_forward(struct pts_torch_module *m, const struct pts_torch_input *inputs,
                                  size_t n_inputs, const struct pts_torch_run_opts *opts,
                                  struct pts_torch_outputs *out, struct pts_error *err);

/* Batch sets per module: pts_torch_forward_begin's and pts_torch_staging's
 * `set`. Two, so that one batch can be in flight on the device while the
 * next one is gathered and begun (a pipeline of depth 2). */
#define PTS_TORCH_SETS 2

/* pts_torch_forward in two halves, for a pipeline (backend.h
 * execute_begin/execute_end). On a CUDA module, begin wraps the inputs,
 * enqueues their copies, the model (or a captured graph's replay) and the
 * copies of the outputs off the device on the instance's stream, records
 * the set's end event and returns without waiting; end waits for that
 * event, reads the phase timings and hands the outputs over (*out as
 * pts_torch_forward fills it). Elsewhere (CPU, MPS) begin does all the work
 * and end only hands the outputs over, so callers need not care which.
 *
 * `set` < PTS_TORCH_SETS. After a begin returned OK its set must be ended,
 * exactly once, before it is begun again; a begin that fails has waited
 * for the device and leaves nothing to end. Everything the inputs and
 * opts->dests point at — that set's staging memory included — must stay
 * valid and unwritten until end returns: the device may still read or
 * write it. Outputs land in memory that belongs to their batch (pinned
 * blocks released with the output, or the caller's dests), never in memory
 * a later batch writes. A module freed with a set still begun waits for
 * its stream first. */
enum pts_status pts_torch_forward_begin(struct pts_torch_module *m,
                                        const struct pts_torch_input *inputs, size_t n_inputs,
                                        const struct pts_torch_run_opts *opts, unsigned set,
                                        struct pts_error *err);
enum pts_status pts_torch_forward_end(struct pts_torch_module *m, unsigned set,
                                      struct pts_torch_outputs *out, struct pts_error *err);

/* Whether pts_torch_forward_begin returns before the device is done (a
 * module on a CUDA device): only then does a pipeline overlap anything. */
bool pts_torch_async(const struct pts_torch_module *m);

/* Applies TorchScript optimizations: freeze() and/or
 * optimize_for_inference() on the module, which must be in eval mode.
 * Errors (INVALID_ARG) carry LibTorch's message. */
enum pts_status pts_torch_optimize(struct pts_torch_module *m, bool freeze,
                                   bool optimize_for_inference, struct pts_error *err);

/* Makes the module's tensors (parameters, buffers, tensor attributes of it
 * and its submodules) inference tensors over the same storage, for a model
 * that always runs under c10::InferenceMode. A normal tensor keeps the
 * ADInplaceOrView key even there, so each view or in-place op on a weight
 * (linear's t(), addmm's expand of the bias) builds autograd view metadata
 * that nothing reads; about 3k instructions per forward of the 16 → 4
 * MLP (callgrind, 90.4k → 87.7k per HTTP request). Nothing is copied and tensors that shared a
 * storage still do. Sparse, quantized and other non-strided tensors are left as they are. Never
 * call it for a model run without InferenceMode: in-place ops on inference tensors are refused
 * outside it. *converted: tensors changed. */
enum pts_status pts_torch_inference_tensors(struct pts_torch_module *m, size_t *converted,
                                            struct pts_error *err);

/* Limits the caching allocator of `dev` to `fraction` of the device memory
 * (CUDA: setMemoryFraction per device; MPS: the high-watermark ratio). The
 * setting is process-global per device: the first model to set it for a
 * device wins, and a later different value is refused with INVALID_ARG
 * naming both models, so one model can never silently change another's
 * limit. CPU devices: no effect. */
enum pts_status pts_torch_set_memory_fraction(const struct pts_device *dev, double fraction,
                                              const char *model, struct pts_error *err);

/* Captures forward() as a CUDA graph for inputs of exactly these shapes
 * (data is ignored: the graph's static inputs start as zeros), whose dim 0
 * is `batch` (for a model that batches; 1 otherwise). Later
 * pts_torch_forward calls whose inputs match a captured graph's shapes and
 * data types replay it instead of running eagerly; so do batches of
 * min_batch up to batch - 1 rows with the other dims the same, padded up
 * to `batch` with zero rows (min_batch == batch: no padding; the smallest
 * graph that fits is used). Graphs of one module share a memory pool. CUDA
 * devices only; every input must be a present Tensor argument. */
enum pts_status pts_torch_capture_graph(struct pts_torch_module *m,
                                        const struct pts_torch_input *inputs, size_t n_inputs,
                                        int64_t batch, int64_t min_batch,
                                        const struct pts_torch_run_opts *opts,
                                        struct pts_error *err);

/* Pinned host memory of at least `bytes` bytes for input `slot` of batch
 * set `set` (< PTS_TORCH_SETS) of a module on a CUDA device, reused from
 * call to call (grown when too small, by powers of two): the scheduler
 * gathers a batch's input straight into it, and forward() copies it to the
 * device by DMA with no further host copy. *out is NULL (with OK) for a
 * module that is not on CUDA. *grown is the size of the buffer this call
 * pinned, 0 when it reused the one there. The memory stays valid until the
 * next call for the same set and slot or pts_torch_free; ask for a set only
 * while no batch is begun on it, and only from the thread that runs the
 * module's batches. */
enum pts_status pts_torch_staging(struct pts_torch_module *m, unsigned set, size_t slot,
                                  size_t bytes, void **out, size_t *grown,
                                  struct pts_error *err);

/* Pinned host memory for a request body (core/pinned.h's allocator):
 * `n` bytes from LibTorch's caching host allocator, or NULL (a build
 * without CUDA, or no memory). *ctx goes back to pts_torch_pinned_release
 * with the pointer. Any thread. */
void *pts_torch_pinned_alloc(size_t n, void **ctx);
void pts_torch_pinned_release(void *ctx, void *data);

/* One request's bytes of a batch input in CUDA device memory (a CUDA
 * shared-memory region), for pts_torch_gather_device. */
struct pts_torch_part {
  const void *data; /* device address; borrowed for the call */
  size_t byte_size;
  int device;       /* the CUDA device it lies on */
};

/* Gathers the n parts, one after the other, into device memory of at least
 * `total` bytes that the module owns for (set, slot) on its own device,
 * reused from call to call (grown when too small): device-to-device copies
 * (peer copies for parts on another device) on the module's stream, so
 * they are ordered before its next forward(). Returns once the copies are
 * done, so the parts may be freed right after (a request's region can go
 * as soon as its batch ends, even when forward() never runs); the wait
 * is for the copies alone, as the previous forward() has synchronized the
 * stream. `set` (0 or 1) picks one of two buffers per slot (double
 * buffering for a pipelined scheduler). *out is the device address.
 * UNSUPPORTED for a module not on CUDA (or a build without CUDA); call it
 * only from the thread that runs forward() on this module. */
enum pts_status pts_torch_gather_device(struct pts_torch_module *m, unsigned set, size_t slot,
                                        const struct pts_torch_part *parts, size_t n,
                                        size_t total, void **out, struct pts_error *err);

/* ---- AOTInductor packages (.pt2, platform torch_aoti) ----
 *
 * A package is loaded with LibTorch's AOTIModelPackageLoader into the same
 * handle as a TorchScript module, so batching, warmup, streams, CUDA graphs
 * and output handling are shared: pts_torch_forward takes its inputs in the
 * package's flat order and returns its flat list of outputs (never keyed).
 * The package's generated code checks every input's dtype, shape, stride
 * and device (AOTI_RUNTIME_CHECK_INPUTS, which the bridge sets for the
 * process unless the environment sets it), so a mismatch is an error, not
 * an out-of-bounds access. */

/* A package's metadata: AOTI_DEVICE_KEY ("cpu", "cuda", "mps"), AOTI_* of
 * the compiling host, and what the exporter added
 * (inductor_configs["aot_inductor.metadata"]). */
struct pts_torch_meta {
  size_t count;
  char **keys, **values; /* pts_free'd by pts_torch_meta_free */
};

/* Whether this LibTorch has AOTInductor's package loader. */
bool pts_torch_has_aoti(void);

/* Reads a package's metadata without loading its model (so a package for a
 * device this host lacks can be named). LibTorch versions without that
 * reader leave *out empty (count 0) and return OK; then read it from the
 * loaded package. Errors (UNAVAILABLE): not a readable package. Caller
 * frees *out with pts_torch_meta_free, also after an error. */
enum pts_status pts_torch_aoti_metadata(const char *path, struct pts_torch_meta *out,
                                        struct pts_error *err);
/* The metadata of a loaded package (empty for TorchScript). */
enum pts_status pts_torch_module_metadata(const struct pts_torch_module *m,
                                          struct pts_torch_meta *out, struct pts_error *err);
void pts_torch_meta_free(struct pts_torch_meta *meta); /* NULL-safe */
/* The value of `key`, or NULL. Borrowed until pts_torch_meta_free. */
const char *pts_torch_meta_get(const struct pts_torch_meta *meta, const char *key);

/* Loads a package for `dev` (its model .so is extracted to a temporary
 * directory and loaded; cuda:<i> runs on device i, on the handle's own
 * stream). Caller frees *out with pts_torch_free. Errors (UNAVAILABLE)
 * carry LibTorch's message; UNSUPPORTED when this LibTorch has no loader. */
enum pts_status pts_torch_load_aoti(const char *path, const struct pts_device *dev,
                                    struct pts_torch_module **out, struct pts_error *err);

/* A package whose compiled batch range starts above 1 (torch.export
 * specialized its Dim's lower bound to the example's batch): a batch of
 * fewer than `min_batch` rows is padded with zero rows up to it, run, and
 * only the real rows of each output are returned. 0 or 1: no padding. The
 * instance's thread, before its first forward. */
void pts_torch_set_min_batch(struct pts_torch_module *m, int64_t min_batch);

/* The package's call specification: side 0 the inputs, 1 the outputs, as
 * torch.utils._pytree treespec JSON (backends/pytorch/callspec.h reads
 * them). NULL for a TorchScript module. Borrowed until pts_torch_free. */
const char *pts_torch_call_spec(const struct pts_torch_module *m, int side);

/* Releases every output whose `release` is still set, then the array. */
void pts_torch_outputs_free(struct pts_torch_outputs *out);

/* ---- operator profiler (trace/profile.h) ---- */

/* One event LibTorch's profiler recorded. */
struct pts_torch_op {
  char *name;         /* pts_free'd by pts_torch_profile_free */
  char *shapes;       /* input shapes, "[[3, 16], [32, 16], [32]]" */
  char *dtypes;       /* input dtypes, "[float, float, float]" */
  uint64_t start_ns;  /* profiler clock */
  uint64_t cpu_ns;    /* host duration (device activity: its duration on the device) */
  uint64_t device_ns; /* kernel time of this operator and the operators it called */
  bool on_device;     /* a kernel or copy on the device, not a host operator */
};

struct pts_torch_profile {
  size_t count;
  struct pts_torch_op *ops; /* pts_free'd by pts_torch_profile_free */
  char note[192];           /* which profiler ran on which device */
};

/* Starts LibTorch's profiler on the calling thread (it is thread-local) for
 * the next forward() of `m`: the Kineto API with input shapes — CPU
 * operators always, CUDA kernels on a CUDA device, and the MPS os_signpost
 * trace on an MPS device (macOS). Errors
 * (INTERNAL) carry LibTorch's message; nothing is left running then. */
enum pts_status pts_torch_profile_start(struct pts_torch_module *m, struct pts_error *err);

/* Stops the profiler started on this thread and collects its events into
 * *out (free with pts_torch_profile_free, also after an error). */
enum pts_status pts_torch_profile_stop(struct pts_torch_module *m, struct pts_torch_profile *out,
                                       struct pts_error *err);
void pts_torch_profile_free(struct pts_torch_profile *p);

#ifdef __cplusplus
}
#endif

#endif
