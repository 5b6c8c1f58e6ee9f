// backends/pytorch/torch_bridge.cc — the C ABI over LibTorch (torch_bridge.h).
//
// The only C++ in ptserve. Every extern "C" entry point runs its body inside
// guarded(), so a c10::Error or std::exception becomes a pts_status with the
// exception's message (without LibTorch's C++ backtrace, which means nothing
// to a user) and never unwinds into C.

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/script.h>
#include <torch/version.h>
// Parallel.h is not pulled in by script.h; it is small (thread-pool sizes).
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

// The bridge is written for LibTorch 2.x (the pip wheel's; README says which
// releases): MPS events, the Kineto profiler and AOTInductor packages have
// no 1.x counterparts worth keeping code for.
static_assert(TORCH_VERSION_MAJOR >= 2 && (TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 1),
              "ptserve needs LibTorch 2.1 or later");

#ifdef PTS_WITH_CUDA
// Only in CUDA builds (the pip torch of GPU hosts): these need the CUDA
// runtime headers, which a CPU LibTorch does not ship.
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <sys/prctl.h>  // the timed wait's timer slack
#endif
#include <ATen/detail/MPSHooksInterface.h>
// AOTInductor's package loader (torch._inductor.aoti_compile_and_package's
// .pt2 files) is a LibTorch 2.x class; without it, torch_aoti models fail
// to load with a message saying so.
#if __has_include(<torch/csrc/inductor/aoti_package/model_package_loader.h>)
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#define PTS_HAVE_AOTI 1
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include "core/alloc.h"
#include "core/log.h"
#include "core/status.h"
#include "tensor/bytes.h"
#include "tensor/dtype.h"
}
#include "backends/pytorch/torch_bridge.h"

#ifdef PTS_WITH_CUDA
// One captured forward(): static inputs it reads, the outputs it writes.
// `batch` is dim 0 of every input; a smaller batch from `min_batch` on is
// padded up to it (min_batch == batch: that size only).
struct CapturedGraph {
  at::cuda::CUDAGraph graph;
  std::vector<at::Tensor> inputs;
  c10::IValue outputs;
  int64_t batch = 0;
  int64_t min_batch = 0;
};
#endif

// One batch between pts_torch_forward_begin and pts_torch_forward_end. A
// module keeps PTS_TORCH_SETS of them, so one batch can be in flight on
// the device while the next one is gathered into the other set's staging
// and begun. Only the thread that runs the module's batches touches them.
struct ForwardSet {
  bool pending = false;        // begun, not yet ended
  bool empty_cache = false;    // the batch's opts->empty_cache, applied at end
  pts_torch_outputs result{};  // owned while pending; its D2H copies may still run
#ifdef PTS_WITH_CUDA
  // The four phase events of this set's batch (make_events); [3] is the
  // one end waits on.
  std::unique_ptr<at::cuda::CUDAEvent> events[4];
  // For the timed wait (wait_end): the host clock when event 0 was
  // recorded, and the batch's input bytes, which pick the estimate.
  uint64_t begin_ns = 0;
  size_t input_bytes = 0;
  // Pinned staging per input slot (pts_torch_staging): the scheduler
  // gathers into it, forward() copies it to the device by DMA. Reused; the
  // scheduler gathers into a set only after the batch that last used it
  // has ended (its end event has passed), so the device is done reading.
  std::vector<at::Tensor> staging;
  // Device memory per input slot that pts_torch_gather_device gathers a
  // batch of CUDA shared-memory inputs into; allocated on the module's
  // stream, reused like `staging`.
  std::vector<at::Tensor> gathered;
#endif
};

struct pts_torch_module {
  torch::jit::Module module;  // TorchScript
  // module's forward(), owned by its compilation unit, which the module
  // keeps alive; looked up again whenever `module` is replaced (freeze).
  torch::jit::Function *forward = nullptr;
#ifdef PTS_HAVE_AOTI
  // An AOTInductor package instead (aoti set): it runs on flat lists of
  // tensors; call_spec holds the pytree specs that name them.
  std::unique_ptr<torch::inductor::AOTIModelPackageLoader> aoti;
#endif
  bool is_aoti = false;
  // A package's smallest compiled batch (pts_torch_set_min_batch); smaller
  // batches are padded up to it. 0: none.
  int64_t min_batch = 0;
  std::string call_spec[2];
  c10::Device device{c10::kCPU};
  bool move_inputs = false;  // false: inputs stay on the CPU (cpu or KIND_MODEL)
  bool returns_dict = false;
  std::vector<std::string> names, types;
  std::vector<pts_torch_arg> args;
#ifdef PTS_WITH_CUDA
  // Each instance loads its own module, so these are per instance: its own
  // stream (work of different instances overlaps) and its captured graphs.
  // Only the instance's thread uses them.
  c10::optional<c10::cuda::CUDAStream> stream;
  std::vector<std::unique_ptr<CapturedGraph>> graphs;
  // The memory pool the graphs share: they replay one at a time on
  // `stream`, so one graph's intermediates can reuse another's (the
  // outputs each keeps stay its own). Made at the first capture.
  c10::optional<decltype(at::cuda::graph_pool_handle())> graph_pool;
  // The stream pts_torch_gather_device copies on (made on first use): not
  // `stream`, where waiting for the copies would also wait for the batch
  // in flight ahead of them.
  c10::optional<c10::cuda::CUDAStream> copy_stream;
  // The device time (events 0 to 3) of the last batch that had
  // `est_bytes` of input: what wait_end expects the next such batch to
  // take. SIZE_MAX: no estimate yet.
  size_t est_bytes = SIZE_MAX;
  uint64_t est_ns = 0;
#endif
  // Per-batch state, by the set pts_torch_forward_begin names.
  ForwardSet sets[PTS_TORCH_SETS];

  pts_torch_module() = default;
  pts_torch_module(const pts_torch_module &) = delete;
  pts_torch_module &operator=(const pts_torch_module &) = delete;
  // A batch begun and never ended (a caller's bug, or a shutdown path that
  // skipped it): the device may still write its output blocks and read its
  // staging, which are freed with the module, so wait for the stream first.
  ~pts_torch_module() {
    bool any = false;
    for (ForwardSet &fs : sets) any |= fs.pending;
    if (!any) return;
#ifdef PTS_WITH_CUDA
    try {
      if (stream) stream->synchronize();
    } catch (...) {
    }
#endif
    for (ForwardSet &fs : sets) pts_torch_outputs_free(&fs.result);
  }
};

namespace {

// AOTInductor's generated code checks the dtype, shape, stride and device
// of every input only when AOTI_RUNTIME_CHECK_INPUTS is set (read once per
// package library); unchecked, a tensor of the wrong shape makes the
// compiled kernels read or write out of bounds. ptserve turns the checks
// on for the whole process, before any thread exists, unless the
// environment already says otherwise; a mismatch then is an error message.
const bool aoti_checks_on = [] {
  setenv("AOTI_RUNTIME_CHECK_INPUTS", "1", /*overwrite=*/0);
  const char *v = getenv("AOTI_RUNTIME_CHECK_INPUTS");
  return v && v[0] != '0';
}();

// A failure whose message is already written for the user.
struct BridgeError {
  enum pts_status code;
  std::string msg;
};

[[noreturn]] void fail(enum pts_status code, std::string msg) {
  throw BridgeError{code, std::move(msg)};
}

// TorchScript interpreter errors carry both tracebacks before the actual
// error on their last line; a user (and the 512-byte error buffer) needs
// that line only.
std::string concise(const char *what) {
  std::string msg(what);
  // AOTInductor's messages end with a newline.
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  if (msg.find("Traceback of TorchScript") == std::string::npos) return msg;
  size_t end = msg.find_last_not_of(" \n");
  if (end == std::string::npos) return msg;
  size_t begin = msg.rfind('\n', end);
  return msg.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin + 1));
}

// LibTorch's cuDNN switch is process-global. Executions that want it on and
// executions that want it off take turns: any number of one kind run
// together, the other kind waits until they drain. Flipping the flag per
// execute, as Triton does, lets a concurrent model run with the wrong value.
class CudnnGate {
 public:
  void enter(bool enabled) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return active_ == 0 || enabled_ == enabled; });
    if (active_++ == 0 && at::globalContext().userEnabledCuDNN() != enabled)
      at::globalContext().setUserEnabledCuDNN(enabled);
    enabled_ = enabled;
  }
  void leave() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_ == 0) cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int active_ = 0;
  bool enabled_ = true;
};

CudnnGate cudnn_gate;

struct CudnnScope {
  explicit CudnnScope(bool enabled) { cudnn_gate.enter(enabled); }
  ~CudnnScope() { cudnn_gate.leave(); }
};

// What a failed forward()'s message starts with, as Triton's PyTorch
// backend words it (clients and log searches match on it).
constexpr const char kExecuteFailure[] = "PyTorch execute failure: ";

template <class F>
enum pts_status guarded(struct pts_error *err, enum pts_status code, const char *prefix, F &&body) {
  try {
    return body();
  } catch (const BridgeError &e) {
    return pts_error_set(err, e.code, "%s", e.msg.c_str());
  } catch (const c10::Error &e) {
    return pts_error_set(err, code, "%s%s", prefix, concise(e.what_without_backtrace()).c_str());
  } catch (const std::exception &e) {
    return pts_error_set(err, code, "%s%s", prefix, concise(e.what()).c_str());
  } catch (...) {
    return pts_error_set(err, code, "%sunknown C++ exception", prefix);
  }
}

bool to_scalar_type(enum pts_dtype t, at::ScalarType *out) {
  switch (t) {
    case PTS_DTYPE_BOOL: *out = at::kBool; return true;
    case PTS_DTYPE_UINT8: *out = at::kByte; return true;
    case PTS_DTYPE_INT8: *out = at::kChar; return true;
    case PTS_DTYPE_INT16: *out = at::kShort; return true;
    case PTS_DTYPE_INT32: *out = at::kInt; return true;
    case PTS_DTYPE_INT64: *out = at::kLong; return true;
    case PTS_DTYPE_FP16: *out = at::kHalf; return true;
    case PTS_DTYPE_FP32: *out = at::kFloat; return true;
    case PTS_DTYPE_FP64: *out = at::kDouble; return true;
    case PTS_DTYPE_BF16: *out = at::kBFloat16; return true;
    default: return false;
  }
}

enum pts_dtype from_scalar_type(at::ScalarType s) {
  switch (s) {
    case at::kBool: return PTS_DTYPE_BOOL;
    case at::kByte: return PTS_DTYPE_UINT8;
    case at::kChar: return PTS_DTYPE_INT8;
    case at::kShort: return PTS_DTYPE_INT16;
    case at::kInt: return PTS_DTYPE_INT32;
    case at::kLong: return PTS_DTYPE_INT64;
    case at::kHalf: return PTS_DTYPE_FP16;
    case at::kFloat: return PTS_DTYPE_FP32;
    case at::kDouble: return PTS_DTYPE_FP64;
    case at::kBFloat16: return PTS_DTYPE_BF16;
    default: return PTS_DTYPE_INVALID;
  }
}

c10::Device to_torch_device(const struct pts_device *dev) {
  switch (dev->type) {
    case PTS_DEVICE_CUDA: return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(dev->index));
    case PTS_DEVICE_MPS: return c10::Device(c10::kMPS);
    default: return c10::Device(c10::kCPU);
  }
}

enum pts_torch_arg_kind arg_kind(const c10::TypePtr &t) {
  if (t->kind() == c10::TypeKind::TensorType) return PTS_TORCH_ARG_TENSOR;
  if (auto list = t->cast<c10::ListType>()) {
    if (list->getElementType()->kind() == c10::TypeKind::StringType)
      return PTS_TORCH_ARG_STRING_LIST;
  }
  if (auto opt = t->cast<c10::OptionalType>()) {
    if (opt->getElementType()->kind() == c10::TypeKind::TensorType)
      return PTS_TORCH_ARG_OPTIONAL_TENSOR;
  }
  if (auto dict = t->cast<c10::DictType>()) {
    if (dict->getKeyType()->kind() == c10::TypeKind::StringType &&
        dict->getValueType()->kind() == c10::TypeKind::TensorType)
      return PTS_TORCH_ARG_TENSOR_DICT;
  }
  return PTS_TORCH_ARG_OTHER;
}

void read_schema(pts_torch_module *m) {
  m->forward = &m->module.get_method("forward").function();
  const c10::FunctionSchema &schema = m->forward->getSchema();
  const auto &arguments = schema.arguments();
  // Argument 0 is `self`.
  for (size_t i = 1; i < arguments.size(); i++) {
    m->names.push_back(arguments[i].name());
    m->types.push_back(arguments[i].type()->annotation_str());
  }
  const auto &returns = schema.returns();
  m->returns_dict = returns.size() == 1 && returns[0].type()->kind() == c10::TypeKind::DictType;
  for (size_t i = 1; i < arguments.size(); i++)
    m->args.push_back({m->names[i - 1].c_str(), m->types[i - 1].c_str(),
                       arg_kind(arguments[i].type())});
}

// The pool size this process started with, captured before any model
// changes it, so a model without INTRA_OP_THREAD_COUNT gets it back.
int default_intra_threads() {
  static const int n = at::get_num_threads();
  return n;
}

// The intra-op pool size is per OpenMP thread; instance threads are
// dedicated, so setting it here gives each model its own value. LibTorch
// initialises a thread's value lazily from a process-global on its first
// parallel op; initialising first keeps that from overwriting ours.
void apply_intra_threads(int wanted) {
  static thread_local int current = 0;
  int n = wanted > 0 ? wanted : default_intra_threads();
  if (n == current) return;
  at::internal::lazy_init_num_threads();
  at::set_num_threads(n);
  current = n;
}

// Memory ranges of the request's inputs: an output that lies in one of them
// (the model returned an input or a view of one) must be copied, because
// the request buffer may be gone before the response is sent.
struct Range {
  const char *begin, *end;
};

bool overlaps(const std::vector<Range> &ranges, const void *p, size_t n) {
  const char *b = static_cast<const char *>(p), *e = b + n;
  for (const Range &r : ranges)
    if (b < r.end && r.begin < e) return true;
  return false;
}

// An input as a tensor where it lies: a view of the request's host bytes,
// or of a client's CUDA buffer (CUDA shared memory). Host bytes bound for a
// CUDA module are staged into pinned memory here unless they are pinned
// already (the scheduler's staging, a pinned body or shared-memory
// region), so that every copy to the device is an asynchronous DMA; LibTorch's
// caching host allocator recycles that block once the copy's event has
// passed. Moving to the device is placed()'s, or, for a batch a captured
// graph takes, the copy into the graph's static input (stage_in_graph).
at::Tensor source_view(const pts_torch_input &in, const pts_torch_module *m) {
  at::ScalarType st;
  if (!to_scalar_type(in.dtype, &st))
    fail(PTS_INVALID_ARG, std::string("input '") + in.name + "' has data type " +
                              pts_dtype_name(in.dtype) + ", which PyTorch does not support");
  c10::IntArrayRef sizes(in.dims, in.ndim);  // borrowed: LibTorch copies the sizes
  // at::, not torch::: the torch:: factories wrap the tensor once more as
  // an autograd variable (about 750 instructions per input), which an
  // input that never requires grad does not need.
  auto options = at::TensorOptions().dtype(st);
  if (in.byte_size == 0 || in.data == nullptr)
    return at::empty(sizes, options);  // from_blob wants real memory
  if (in.mem == PTS_TORCH_MEM_DEVICE) {
    c10::Device where(c10::kCUDA, static_cast<c10::DeviceIndex>(in.device));
    return at::from_blob(const_cast<void *>(in.data), sizes, options.device(where));
  }
  at::Tensor t = at::from_blob(const_cast<void *>(in.data), sizes, options);
  if (m->move_inputs && m->device.is_cuda() && in.mem != PTS_TORCH_MEM_PINNED && t.numel() > 0) {
    at::Tensor pinned = at::empty(t.sizes(), t.options().pinned_memory(true));
    pinned.copy_(t);
    return pinned;
  }
  return t;
}

// A source view moved to where the model runs: the instance's device, or
// the CPU for a model that keeps its inputs there. A CUDA buffer on the
// instance's own device is read where it is (no copy); pinned host memory
// goes to a CUDA device by DMA on the instance's stream.
at::Tensor placed(const at::Tensor &t, const pts_torch_module *m) {
  if (!m->move_inputs) return t.is_cpu() ? t : t.to(c10::Device(c10::kCPU));
  if (t.device() == m->device) return t;
  if (m->device.is_cuda() && t.is_cpu() && t.numel() > 0)
    return t.to(m->device, /*non_blocking=*/true);
  return t.to(m->device);
}

at::Tensor wrap_tensor(const pts_torch_input &in, const pts_torch_module *m) {
  return placed(source_view(in, m), m);
}

// INPUT_MEMORY_FORMAT channels_last: a 4-D floating-point tensor in NHWC
// order, as PyTorch's docs have convolutional networks fed. cuDNN then
// runs their convolutions in its NHWC kernels: ResNet-50 in FP16 on an
// H200 took 15,500 images/s from a channels-last batch against 10,000
// from the same batch in NCHW (docs/gpu.md). The copy that reorders it
// runs on the device, after the input has moved there.
at::Tensor laid_out(at::Tensor t, const pts_torch_run_opts *opts) {
  if (opts->channels_last && t.dim() == 4 && t.is_floating_point())
    return t.contiguous(at::MemoryFormat::ChannelsLast);
  return t;
}

c10::List<std::string> wrap_strings(const pts_torch_input &in) {
  c10::List<std::string> list;
  size_t offset = 0;
  const char *elem;
  uint32_t len;
  int rc;
  while ((rc = pts_bytes_next(in.data, in.byte_size, &offset, &elem, &len)) == 1)
    list.push_back(std::string(elem, len));
  if (rc < 0)
    fail(PTS_INVALID_ARG,
         std::string("input '") + in.name + "' holds a truncated BYTES element");
  return list;
}

extern "C" {
static void release_tensor(void *ctx, void *) { delete static_cast<at::Tensor *>(ctx); }
static void release_malloc(void *, void *data) { pts_free(data); }
static void release_nothing(void *, void *) {}  // a caller's destination (pts_torch_dest)
}

std::string describe(const std::string *key, size_t index) {
  if (key) return "output '" + *key + "'";
  return "output " + std::to_string(index);
}

const pts_torch_dest *find_dest(const pts_torch_run_opts *opts, const std::string *key,
                                size_t index) {
  for (size_t i = 0; opts && i < opts->n_dests; i++) {
    const pts_torch_dest &d = opts->dests[i];
    if (key ? d.key && *key == d.key : !d.key && d.index == index) return &d;
  }
  return nullptr;
}

pts_torch_output tensor_output(at::Tensor t, const std::vector<Range> &inputs,
                               const std::string *key, size_t index,
                               const pts_torch_run_opts *opts) {
  enum pts_dtype dtype = from_scalar_type(t.scalar_type());
  if (dtype == PTS_DTYPE_INVALID)
    fail(PTS_INVALID_ARG, describe(key, index) + " of the model has data type " +
                              std::string(c10::toString(t.scalar_type())) +
                              ", which has no KServe data type");
  if (t.dim() > PTS_TORCH_MAX_DIMS)
    fail(PTS_INVALID_ARG, describe(key, index) + " of the model has " +
                              std::to_string(t.dim()) + " dimensions, more than ptserve supports");
  const pts_torch_dest *dest = t.device().is_cuda() ? find_dest(opts, key, index) : nullptr;
  if (dest && static_cast<size_t>(t.nbytes()) <= dest->size) {
    // The request wants this output in its shared-memory region: the one
    // copy off the device goes straight there (stream-ordered; the caller
    // synchronizes the stream before the response announces it).
    c10::Device where = dest->mem == PTS_TORCH_MEM_DEVICE
                            ? c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(dest->device))
                            : c10::Device(c10::kCPU);
    at::Tensor placed = torch::from_blob(dest->data, t.sizes(), t.options().device(where));
    placed.copy_(t, /*non_blocking=*/true);
    pts_torch_output o{};
    o.dtype = dtype;
    o.ndim = static_cast<int>(t.dim());
    for (int d = 0; d < o.ndim; d++) o.dims[d] = t.size(d);
    o.data = dest->data;
    o.byte_size = placed.nbytes();
    o.release = release_nothing;
    return o;
  }
  if (t.device().is_cuda()) {
    // Stream-ordered copy into pinned host memory; the caller synchronizes
    // the stream before anyone reads it. The pinned block returns to
    // LibTorch's caching host allocator when the response is done with it
    // (and is recycled from there: no cudaHostAlloc per batch).
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    host.copy_(t, /*non_blocking=*/true);
    t = host;
  } else if (!t.device().is_cpu()) {
    t = t.to(at::kCPU);  // MPS: to() waits for the queue; unified memory makes it cheap
  }
  t = t.contiguous();
  if (overlaps(inputs, t.data_ptr(), t.nbytes())) t = t.clone();

  pts_torch_output o{};
  o.dtype = dtype;
  o.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < o.ndim; d++) o.dims[d] = t.size(d);
  auto *kept = new at::Tensor(std::move(t));
  o.data = kept->data_ptr();
  o.byte_size = kept->nbytes();
  o.release = release_tensor;
  o.release_ctx = kept;
  return o;
}

bool is_string_list(const c10::IValue &v) {
  return v.isList() && v.toList().elementType()->kind() == c10::TypeKind::StringType;
}

pts_torch_output strings_output(const c10::IValue &v, const std::string *key, size_t index) {
  c10::List<c10::IValue> list = v.toList();
  size_t total = 0;
  for (size_t i = 0; i < list.size(); i++) {
    size_t len = list.get(i).toStringRef().size();
    if (len > UINT32_MAX)
      fail(PTS_INVALID_ARG, describe(key, index) + " holds a string longer than 4 GiB");
    total += 4 + len;
  }
  void *data = pts_malloc(total ? total : 1);
  if (!data) fail(PTS_NOMEM, describe(key, index) + ": out of memory for strings");
  size_t used = 0;
  for (size_t i = 0; i < list.size(); i++) {
    const std::string &s = list.get(i).toStringRef();
    pts_bytes_put(data, total, &used, s.data(), static_cast<uint32_t>(s.size()));
  }
  pts_torch_output o{};
  o.dtype = PTS_DTYPE_BYTES;
  o.ndim = 1;
  o.dims[0] = static_cast<int64_t>(list.size());
  o.data = data;
  o.byte_size = total;
  o.release = release_malloc;
  o.release_ctx = nullptr;
  return o;
}

// Holds the outputs collected so far and releases them if the walk fails.
struct OutputList {
  std::vector<pts_torch_output> items;
  bool keyed = false;
  ~OutputList() {
    for (auto &o : items) {
      if (o.release) o.release(o.release_ctx, o.data);
      pts_free(o.key);
    }
  }
};

void add_value(OutputList &out, const c10::IValue &v, const std::vector<Range> &inputs,
               const std::string *key, const pts_torch_run_opts *opts) {
  size_t index = out.items.size();
  pts_torch_output o{};
  if (v.isTensor())
    o = tensor_output(v.toTensor(), inputs, key, index, opts);
  else if (is_string_list(v))
    o = strings_output(v, key, index);
  else
    fail(PTS_INVALID_ARG, describe(key, index) + " of the model is a " + v.tagKind() +
                              "; outputs must be Tensor or List[str]");
  out.items.push_back(o);
  if (key) {
    out.items.back().key = pts_strdup(key->c_str());
    if (!out.items.back().key) fail(PTS_NOMEM, "out of memory for output names");
  }
}

void walk_result(OutputList &out, const c10::IValue &result, const std::vector<Range> &inputs,
                 const pts_torch_run_opts *opts) {
  if (result.isTuple()) {
    for (const c10::IValue &e : result.toTupleRef().elements())
      add_value(out, e, inputs, nullptr, opts);
  } else if (result.isTensorList()) {
    for (const at::Tensor &t : result.toTensorVector())
      add_value(out, c10::IValue(t), inputs, nullptr, opts);
  } else if (result.isGenericDict()) {
    out.keyed = true;
    for (const auto &kv : result.toGenericDict()) {
      if (!kv.key().isString())
        fail(PTS_INVALID_ARG, std::string("the model returned a dict keyed by ") +
                                  kv.key().tagKind() + "; output dicts must be keyed by str");
      std::string k = kv.key().toStringRef();
      add_value(out, kv.value(), inputs, &k, opts);
    }
  } else if (result.isTensor() || is_string_list(result)) {
    add_value(out, result, inputs, nullptr, opts);
  } else {
    fail(PTS_INVALID_ARG, std::string("the model returned a ") + result.tagKind() +
                              "; ptserve accepts Tensor, List[str], a Tuple or List of those, "
                              "or Dict[str, Tensor]");
  }
}

// A package's input checks report "input_handles[<i>]: <what>" about its
// i-th flat input: that is the client's input that does not fit (400),
// named as the config names it, not a failure of the model. A runner that
// does not hand on the package's words (PTS_AOTI_RUNNER_SILENT, CMakeLists)
// says only that the call failed; the error then says where the reason is.
void explain_package_failure(const char *what, const pts_torch_input *inputs, size_t n) {
  std::string msg = concise(what);
  size_t at = msg.find("input_handles[");
  if (at != std::string::npos) {
    size_t k = std::strtoul(msg.c_str() + at + std::strlen("input_handles["), nullptr, 10);
    if (k >= n) return;
    fail(PTS_INVALID_ARG, std::string("input '") + inputs[k].name +
                              "' does not fit the compiled package: " + msg.substr(at));
  }
#ifdef PTS_AOTI_RUNNER_SILENT
  // "run_func_( <its arguments> ) API call failed at <the runner's source
  // file>, line N": the arguments and the place in LibTorch help nobody;
  // the pointer to the log does.
  at = msg.find("API call failed");
  if (at == std::string::npos) return;
  size_t paren = msg.find('(');
  std::string call = paren < at ? msg.substr(0, paren) + "(...) " : msg.substr(0, at);
  fail(PTS_INTERNAL, kExecuteFailure + call +
                         "API call failed (this LibTorch's AOTInductor runner does not hand on "
                         "the package's reason; the package wrote it to the server's log)");
#endif
}

// forward() of a TorchScript module, or run() of an AOTInductor package on
// the instance's CUDA stream (null: the current stream, or none on the
// CPU); a package's flat list of results comes back as a TensorList.
c10::IValue eager_run(pts_torch_module *m, std::vector<c10::IValue> args) {
#ifdef PTS_HAVE_AOTI
  if (m->is_aoti) {
    std::vector<at::Tensor> inputs;
    inputs.reserve(args.size());
    for (c10::IValue &a : args) inputs.push_back(a.toTensor());
    void *stream = nullptr;
#ifdef PTS_WITH_CUDA
    if (m->stream) stream = static_cast<void *>(m->stream->stream());
#endif
    // A batch below the package's compiled range: zero rows up to its
    // smallest batch, then only the real rows of each result (views).
    int64_t rows = inputs.empty() || inputs[0].dim() == 0 ? 0 : inputs[0].size(0);
    if (rows == 0 || rows >= m->min_batch) return c10::IValue(m->aoti->run(inputs, stream));
    for (at::Tensor &t : inputs) {
      std::vector<int64_t> pad_shape = t.sizes().vec();
      pad_shape[0] = m->min_batch - rows;
      t = at::cat({t, at::zeros(pad_shape, t.options())});
    }
    std::vector<at::Tensor> outs = m->aoti->run(inputs, stream);
    for (at::Tensor &o : outs)
      if (o.dim() > 0 && o.size(0) == m->min_batch) o = o.narrow(0, 0, rows);
    return c10::IValue(outs);
  }
#endif
  // Module::forward() would go through torch::jit::Method, whose call
  // builds a Module for `self` (with a Dict of traced inputs) every time:
  // about 2k instructions per forward of the 16 -> 4 MLP (87.7k -> 85.5k
  // per HTTP request, callgrind). The same steps without
  // it: `self` first, the profiler's record of the call, the schema check.
  args.insert(args.begin(), m->module._ivalue());
  RECORD_TORCHSCRIPT_FUNCTION(m->forward->name(), args);
  return (*m->forward)(std::move(args));
}

#ifdef PTS_WITH_CUDA
bool same_signature(const std::vector<at::Tensor> &a, const std::vector<c10::IValue> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (!b[i].isTensor()) return false;
    const at::Tensor &t = b[i].toTensor();
    if (t.scalar_type() != a[i].scalar_type() || !t.sizes().equals(a[i].sizes())) return false;
  }
  return true;
}

// Whether a captured graph can take these arguments padded: the same
// types and dims but dim 0, which lies in [min_batch, batch).
bool pads_into(const CapturedGraph &g, const std::vector<c10::IValue> &b) {
  if (g.min_batch >= g.batch || g.inputs.size() != b.size()) return false;
  for (size_t i = 0; i < b.size(); i++) {
    if (!b[i].isTensor()) return false;
    const at::Tensor &t = b[i].toTensor(), &s = g.inputs[i];
    if (t.scalar_type() != s.scalar_type() || t.dim() != s.dim() || t.dim() == 0) return false;
    if (t.size(0) < g.min_batch || t.size(0) >= g.batch) return false;
    for (int64_t d = 1; d < t.dim(); d++)
      if (t.size(d) != s.size(d)) return false;
  }
  return true;
}

// The first n rows of every tensor in a graph's outputs whose dim 0 is the
// graph's batch (views of the static outputs, copied out as usual).
c10::IValue first_rows(const c10::IValue &v, int64_t batch, int64_t n) {
  if (v.isTensor()) {
    const at::Tensor &t = v.toTensor();
    return t.dim() > 0 && t.size(0) == batch ? c10::IValue(t.narrow(0, 0, n)) : v;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> items;
    for (const auto &e : v.toTupleRef().elements()) items.push_back(first_rows(e, batch, n));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  if (v.isList()) {
    c10::List<c10::IValue> in = v.toList();
    c10::impl::GenericList out(in.elementType());
    for (size_t k = 0; k < in.size(); k++) out.push_back(first_rows(in.get(k), batch, n));
    return out;
  }
  if (v.isGenericDict()) {
    c10::Dict<c10::IValue, c10::IValue> in = v.toGenericDict();
    c10::impl::GenericDict out(in.keyType(), in.valueType());
    for (const auto &e : in) out.insert(e.key(), first_rows(e.value(), batch, n));
    return out;
  }
  return v;
}

// The captured graph that takes these arguments (source views, where the
// batch lies): one whose static inputs have their shapes and types, else
// the smallest that pads them (CUDA_GRAPH_PAD_BATCHES, Triton's
// graph_lower_bound); nullptr when none does. The batch is copied straight
// into the graph's static inputs on the stream: one DMA from pinned host
// memory, or one device copy from a CUDA shared-memory buffer. A padded
// batch fills their first rows and the rest is zeroed, so what the model
// computes there is the same each time. *rows is the batch's size.
// Any channels-last reorder is the graph's own first step (capture), so
// nothing else runs outside the graph.
CapturedGraph *stage_in_graph(pts_torch_module *m, const pts_torch_input *inputs,
                              const std::vector<c10::IValue> &args, int64_t *rows) {
  CapturedGraph *pick = nullptr;
  bool exact = false;
  for (auto &g : m->graphs) {
    if (same_signature(g->inputs, args)) {
      pick = g.get();
      exact = true;
      break;
    }
    if (pads_into(*g, args) && (!pick || g->batch < pick->batch)) pick = g.get();
  }
  if (!pick) return nullptr;
  int64_t n = exact ? pick->batch : args[0].toTensor().size(0);
  for (size_t i = 0; i < args.size(); i++) {
    const at::Tensor &src = args[i].toTensor(), &dst = pick->inputs[i];
    // Both are dense and of one type (same_signature, pads_into; the static
    // inputs are row-major), so the first n rows are one block of bytes.
    // Straight to the runtime on the instance's stream rather than through
    // at::Tensor::copy_ and zero_, whose dispatch and TensorIterator set-up
    // are host time spent with the device idle at batch 1. Only from bytes
    // the caller keeps until the batch ends (pinned or on the device): a
    // block source_view staged belongs to LibTorch's host allocator, which
    // must see the copy (copy_ records it) before it hands the block out
    // again.
    size_t row = dst.numel() ? dst.nbytes() / static_cast<size_t>(pick->batch) : 0;
    bool kept = inputs[i].mem == PTS_TORCH_MEM_PINNED || inputs[i].mem == PTS_TORCH_MEM_DEVICE;
    if (kept && src.is_contiguous() && src.nbytes() == row * static_cast<size_t>(n)) {
      cudaStream_t s = m->stream->stream();
      C10_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(),
                                     cudaMemcpyDefault, s));
      if (!exact)
        C10_CUDA_CHECK(cudaMemsetAsync(static_cast<char *>(dst.data_ptr()) + src.nbytes(), 0,
                                       dst.nbytes() - src.nbytes(), s));
    } else {
      (exact ? dst : dst.narrow(0, 0, n)).copy_(src, /*non_blocking=*/true);
      if (!exact) dst.narrow(0, n, pick->batch - n).zero_();
    }
  }
  *rows = n;
  return pick;
}

// Replays a graph its batch was staged in: the outputs are the graph's own
// tensors (their first rows when padded), copied out before the next
// replay can overwrite them.
c10::IValue replay(CapturedGraph *g, int64_t rows, struct pts_torch_outputs *out) {
  g->graph.replay();
  out->graph_batch = g->batch;
  return rows == g->batch ? g->outputs : first_rows(g->outputs, g->batch, rows);
}
#endif

#ifdef PTS_WITH_CUDA
// How the instance thread waits for a batch's end event:
//  - block: cudaEventSynchronize on an event made with
//    cudaEventBlockingSync; the thread sleeps in the driver until the GPU
//    signals (no CPU while waiting), and the interrupt's wake-up is
//    latency added to every batch;
//  - spin: the same on a default event, which polls: a core busy for the
//    whole batch (with a few instances per GPU, one core each, taken from
//    HTTP parsing and gathers), but the end is seen at once;
//  - timed (the default): the thread sleeps through most of the time the
//    last batch of the same input size took on the device, then polls the
//    event every few microseconds; with no estimate yet, or when the batch
//    runs late, it blocks. Little CPU and little latency.
// PTSERVE_CUDA_WAIT=block|spin|timed picks one for A/B measurements
// (PTSERVE_CUDA_SPIN_WAIT=1, the older switch, means spin); read once.
enum class WaitMode { block, spin, timed };
WaitMode wait_mode() {
  static const WaitMode mode = [] {
    const char *v = std::getenv("PTSERVE_CUDA_WAIT");
    const char *spin = std::getenv("PTSERVE_CUDA_SPIN_WAIT");
    if (v && std::strcmp(v, "block") == 0) return WaitMode::block;
    if ((v && std::strcmp(v, "spin") == 0) || (spin && std::strcmp(spin, "1") == 0))
      return WaitMode::spin;
    return WaitMode::timed;
  }();
  return mode;
}

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void sleep_ns(uint64_t ns) {
  struct timespec ts = {static_cast<time_t>(ns / 1000000000u),
                        static_cast<long>(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The four phase events. Timing needs events created with timing enabled
// (CUDAEvent's default flags disable it). The last one is what the instance
// thread waits on (wait_end); it blocks in the driver unless the mode is
// spin.
void make_events(pts_torch_module *m) {
  const bool spin = wait_mode() == WaitMode::spin;
  for (ForwardSet &fs : m->sets) {
    for (int k = 0; k < 3; k++) fs.events[k].reset(new at::cuda::CUDAEvent(cudaEventDefault));
    fs.events[3].reset(new at::cuda::CUDAEvent(spin ? cudaEventDefault : cudaEventBlockingSync));
  }
}

// The timed wait spins on batches the device finishes within this many
// nanoseconds (the last estimate): for them a sleep and its wake-up cost
// more than the batch, and a spin of at most that long is cheap. 200 us by
// default; PTSERVE_CUDA_SPIN_BELOW_US overrides it (0: never spin), read
// once.
uint64_t spin_below_ns() {
  static const uint64_t ns = [] {
    const char *v = std::getenv("PTSERVE_CUDA_SPIN_BELOW_US");
    char *end = nullptr;
    unsigned long long us = v ? std::strtoull(v, &end, 10) : 200;
    if (v && (end == v || *end != '\0')) us = 200;
    return static_cast<uint64_t>(us) * 1000u;
  }();
  return ns;
}

// Whether the timed wait spins once its sleep is over, instead of polling
// with kPoll sleeps: PTSERVE_CUDA_SPIN_TAIL=1 turns it on (off by default);
// read once. On an H100 host it cut the input phase of the batch-1 CUDA
// graph at concurrency 1 by 9-15 us (medians of 6 servers each way), not
// enough to change which batch-1 targets are met, and cost the server 60-150
// us of CPU per request there and 170-255 us on the eager ResNet-50s, which
// put those over issue 46's 500 us (docs/experiments/gpu-batch1-wait). A
// deployment that trades a core for those microseconds turns it on.
bool spin_tail() {
  static const bool on = [] {
    const char *v = std::getenv("PTSERVE_CUDA_SPIN_TAIL");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// Waits for the set's end event as wait_mode says. The timed wait sleeps
// through 7/8 of the estimate less kLead (a batch may run faster than the
// last one did: the other instances' work on the GPU comes and goes), then
// polls every kPoll (with spin_tail: without sleeping until an eighth of
// the estimate plus kLead past it, that much CPU per batch at most, then
// every kPoll); past twice the estimate (plus kLate) it stops polling and
// blocks. A batch estimated under spin_below_ns() is polled without sleeps
// from the start: on a small model each sleep's wake-up (a timer, the
// scheduler, on a VM an exit) is longer than the whole batch on the device,
// so polling with sleeps added most of the instance's time per batch
// (docs/experiments/gpu-wait-ab, the mlp rows). The instance thread's
// timer slack is cut to 1 us first: the kernel's default of 50 us
// would stretch every sleep by that much.
void wait_end(pts_torch_module *m, ForwardSet &fs) {
  constexpr uint64_t kLead = 100000, kPoll = 10000, kLate = 1000000;
  at::cuda::CUDAEvent &end = *fs.events[3];
  if (wait_mode() != WaitMode::timed || m->est_bytes != fs.input_bytes) {
    end.synchronize();
    return;
  }
  const bool small = m->est_ns < spin_below_ns();
  uint64_t give_up = fs.begin_ns + 2 * m->est_ns + kLate;
  uint64_t spin_until = small ? give_up : fs.begin_ns + m->est_ns / 8 * 9 + kLead;
  if (!small) {
    static thread_local bool slack_set = false;
    if (!slack_set) {
      prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
      slack_set = true;
    }
    uint64_t wake = fs.begin_ns + m->est_ns / 8 * 7, now = steady_ns();
    if (now + kLead < wake) sleep_ns(wake - kLead - now);
    if (!spin_tail()) spin_until = 0;
  }
  while (!end.query()) {
    uint64_t now = steady_ns();
    if (now > give_up) {
      end.synchronize();
      return;
    }
    if (now > spin_until) sleep_ns(kPoll);
  }
}
#endif

// Whether the module's work is queued on a CUDA stream, so that
// begin_forward returns before the device is done.
bool on_stream(const pts_torch_module *m) {
#ifdef PTS_WITH_CUDA
  return m->stream.has_value();
#else
  (void)m;
  return false;
#endif
}

// Records event k of the set on the module's stream (CUDA only).
void record_event(pts_torch_module *m, ForwardSet &fs, int k) {
#ifdef PTS_WITH_CUDA
  if (m->stream) fs.events[k]->record(*m->stream);
#else
  (void)m;
  (void)fs;
  (void)k;
#endif
}

// Waits for the set's end event (its batch's output copies included) and
// reads the event timings into *out. Without CUDA there is nothing queued:
// CPU work is done when forward() returns, and MPS copies to the CPU wait
// for the queue (begin_forward timed them already).
void finish_device_work(pts_torch_module *m, ForwardSet &fs, struct pts_torch_outputs *out) {
#ifdef PTS_WITH_CUDA
  if (!m->stream) return;
  wait_end(m, fs);
  auto ns = [&](int a, int b) {
    return static_cast<uint64_t>(fs.events[a]->elapsed_time(*fs.events[b]) * 1e6);
  };
  m->est_bytes = fs.input_bytes;
  m->est_ns = ns(0, 3);
  out->device_timed = true;
  out->input_ns = ns(0, 1);
  out->infer_ns = ns(1, 2);
  out->output_ns = ns(2, 3);
#else
  (void)m;
  (void)fs;
  (void)out;
#endif
}

// After a failed begin: the stream may still read the batch's inputs (a
// staging set the caller will gather into again) or write its outputs, so
// wait for it before the failure is reported. Its own failure (a sticky
// CUDA error) adds nothing to the one being reported.
void drain_stream(pts_torch_module *m) {
#ifdef PTS_WITH_CUDA
  try {
    if (m->stream) m->stream->synchronize();
  } catch (...) {
  }
#else
  (void)m;
#endif
}

// MPS events (what torch.mps.Event uses; LibTorch 2.1 and later) time the
// same three phases on an MPS device as the CUDA events do on CUDA. Acquired
// per forward() and released after: MPS keeps a pool of them. Compiled
// against 2.x headers; not run on the Linux hosts of CI (no MPS there).
class MpsTimer {
 public:
  explicit MpsTimer(const c10::Device &device) {
    if (!device.is_mps()) return;
    const at::MPSHooksInterface &hooks = at::detail::getMPSHooks();
    for (uint32_t &id : ids_) id = hooks.acquireEvent(/*enable_timing=*/true);
    on_ = true;
  }
  ~MpsTimer() {
    if (!on_) return;
    for (uint32_t id : ids_) {
      try {
        at::detail::getMPSHooks().releaseEvent(id);
      } catch (...) {
      }
    }
  }
  void record(int k) {
    if (on_) at::detail::getMPSHooks().recordEvent(ids_[k]);
  }
  void finish(struct pts_torch_outputs *out) {
    if (!on_) return;
    const at::MPSHooksInterface &hooks = at::detail::getMPSHooks();
    hooks.synchronizeEvent(ids_[3]);
    auto ns = [&](int a, int b) {
      return static_cast<uint64_t>(hooks.elapsedTimeOfEvents(ids_[a], ids_[b]) * 1e6);
    };
    out->device_timed = true;
    out->input_ns = ns(0, 1);
    out->infer_ns = ns(1, 2);
    out->output_ns = ns(2, 3);
  }

 private:
  uint32_t ids_[4] = {0, 0, 0, 0};
  bool on_ = false;
};

void release_cached_memory(pts_torch_module *m) {
#ifdef PTS_WITH_CUDA
  if (m->device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#else
  (void)m;
#endif
}

// The set a caller names, checked.
ForwardSet &forward_set(pts_torch_module *m, unsigned set) {
  if (set >= PTS_TORCH_SETS)
    fail(PTS_INTERNAL, "batch set " + std::to_string(set) + " does not exist (there are " +
                           std::to_string(PTS_TORCH_SETS) + ")");
  return m->sets[set];
}

// Closes a set's outputs if whatever follows fails: the caller then gets
// none, and their pinned blocks and tensors go back at once.
struct OutputsHold {
  pts_torch_outputs o{};
  ~OutputsHold() { pts_torch_outputs_free(&o); }
};

// The first half of a forward: inputs wrapped (and on CUDA copied to the
// device), the model run or its graph replayed, the outputs walked (on
// CUDA: their device-to-host copies enqueued), the end event recorded. On
// a CUDA module all of it is queued on the instance's stream and nothing
// waits for the device; `fs` keeps the events and the outputs, whose bytes
// may still be on their way. Elsewhere the work is done on return.
void begin_forward(pts_torch_module *m, const pts_torch_input *inputs, size_t n_inputs,
                   const pts_torch_run_opts *opts, ForwardSet &fs) {
  if (fs.pending) fail(PTS_INTERNAL, "a batch is already in flight on this set");
  fs.result = pts_torch_outputs{};
  try {
    apply_intra_threads(opts->intra_op_threads);
    // The flag is per thread; setting it goes through the JIT logger's
    // level check (about 1.6k instructions, 1.7% of a small HTTP request),
    // so it is set only when it changes.
    if (torch::jit::getGraphExecutorOptimize() != opts->optimized_execution)
      torch::jit::setGraphExecutorOptimize(opts->optimized_execution);
    c10::InferenceMode inference_guard(opts->inference_mode);
    torch::NoGradGuard no_grad;
    CudnnScope cudnn(!opts->disable_cudnn);
#ifdef PTS_WITH_CUDA
    // The instance's stream becomes this thread's current stream, so the
    // input copies, the model's kernels and the output copies are ordered
    // on it (behind the batch of the other set, when one is in flight);
    // other instances' streams run concurrently.
    c10::optional<c10::cuda::CUDAStreamGuard> stream_guard;
    if (m->stream) stream_guard.emplace(*m->stream);
#endif
    record_event(m, fs, 0);
#ifdef PTS_WITH_CUDA
    fs.begin_ns = steady_ns();
    fs.input_bytes = 0;
    for (size_t i = 0; i < n_inputs; i++) fs.input_bytes += inputs[i].byte_size;
#endif

    MpsTimer mps_timer(m->device);
    mps_timer.record(0);
    std::vector<Range> ranges;
    ranges.reserve(n_inputs);
    std::vector<c10::IValue> args;
    args.reserve(n_inputs + 1);  // Method prepends `self`
    // A Dict allocates its table: made only for models that take one.
    std::optional<c10::Dict<std::string, at::Tensor>> dict;
    if (opts->dict_input) dict.emplace();
    // A module with captured graphs first takes its tensors where they lie
    // (source views): a graph that takes the batch copies them straight
    // into its static inputs; only a batch no graph takes is moved and laid
    // out for an eager run.
#ifdef PTS_WITH_CUDA
    const bool graphed = !m->graphs.empty() && m->move_inputs && !opts->dict_input;
#else
    const bool graphed = false;
#endif
    for (size_t i = 0; i < n_inputs; i++) {
      const pts_torch_input &in = inputs[i];
      const char *base = static_cast<const char *>(in.data);
      if (base) ranges.push_back({base, base + in.byte_size});
      if (m->is_aoti && (in.absent || in.dtype == PTS_DTYPE_BYTES)) {
        fail(PTS_INVALID_ARG, std::string("input '") + in.name +
                                  (in.absent ? "' is missing; an AOTInductor package takes "
                                               "every input"
                                             : "' is BYTES; AOTInductor packages take tensors"));
      } else if (in.absent) {
        if (!opts->dict_input) args.emplace_back();  // None
      } else if (in.dtype == PTS_DTYPE_BYTES) {
        if (opts->dict_input)
          fail(PTS_INVALID_ARG, std::string("input '") + in.name +
                                    "' is BYTES, but the model takes Dict[str, Tensor]");
        args.emplace_back(wrap_strings(in));
      } else if (opts->dict_input) {
        dict->insert(in.name, laid_out(wrap_tensor(in, m), opts));
      } else if (graphed) {
        args.emplace_back(source_view(in, m));
      } else {
        args.emplace_back(laid_out(wrap_tensor(in, m), opts));
      }
    }
    if (opts->dict_input) args.emplace_back(std::move(*dict));
#ifdef PTS_WITH_CUDA
    // The copy into a graph's static inputs is queued before event 1, so
    // it counts as the input phase, as the eager path's copies do.
    CapturedGraph *graph = nullptr;
    int64_t rows = 0;
    if (graphed && !(graph = stage_in_graph(m, inputs, args, &rows)))
      for (c10::IValue &a : args)
        if (a.isTensor()) a = laid_out(placed(a.toTensor(), m), opts);
#endif

    mps_timer.record(1);
    c10::IValue result;
    try {
      record_event(m, fs, 1);
#ifdef PTS_WITH_CUDA
      result = graph ? replay(graph, rows, &fs.result) : eager_run(m, std::move(args));
#else
      result = eager_run(m, std::move(args));
#endif
      record_event(m, fs, 2);
    } catch (const c10::Error &e) {
      if (m->is_aoti) explain_package_failure(e.what_without_backtrace(), inputs, n_inputs);
      throw;
    } catch (const std::exception &e) {
      if (m->is_aoti) explain_package_failure(e.what(), inputs, n_inputs);
      throw;
    }
    mps_timer.record(2);

    // The outputs' copies off the device are enqueued here, into pinned
    // blocks (or the caller's dests) that belong to this set's batch until
    // its outputs are released: a later batch never writes them. A
    // captured graph's static outputs are copied before the next replay
    // can overwrite them, because both are ordered on the one stream.
    OutputList list;
    walk_result(list, result, ranges, opts);
    mps_timer.record(3);
    mps_timer.finish(&fs.result);
    record_event(m, fs, 3);
    size_t n = list.items.size();
    auto *items = static_cast<pts_torch_output *>(pts_calloc(n ? n : 1, sizeof(pts_torch_output)));
    if (!items) fail(PTS_NOMEM, "out of memory for the model's outputs");
    std::memcpy(items, list.items.data(), n * sizeof(pts_torch_output));
    list.items.clear();  // ownership moved to the set
    fs.result.items = items;
    fs.result.count = n;
    fs.result.keyed = list.keyed;
    fs.empty_cache = opts->empty_cache;
    fs.pending = true;
  } catch (...) {
    drain_stream(m);
    throw;
  }
}

// The second half: waits for the set's end event (on CUDA), reads the
// phase timings and hands the outputs over to *out.
void end_forward(pts_torch_module *m, ForwardSet &fs, pts_torch_outputs *out) {
  if (!fs.pending) fail(PTS_INTERNAL, "no batch is in flight on this set");
  fs.pending = false;
  OutputsHold hold;
  hold.o = fs.result;  // from here on freed unless handed over
  fs.result = pts_torch_outputs{};
  finish_device_work(m, fs, &hold.o);
  if (fs.empty_cache) release_cached_memory(m);
  *out = hold.o;
  hold.o = pts_torch_outputs{};
}

std::mutex memory_fraction_mu;
struct FractionOwner {
  c10::Device device;
  double fraction;
  std::string model;
};
std::vector<FractionOwner> memory_fractions;

std::mutex interop_mu;
int interop_threads = 0;  // 0: not set yet
std::string interop_model;

// ---- operator profiler ----

namespace prof = torch::autograd::profiler;
namespace pimpl = torch::profiler::impl;

// Later 2.x releases replaced KinetoEvent's microsecond accessors with
// nanosecond ones; these pick whichever this LibTorch has.
template <class E>
auto event_start_ns(const E &e, int) -> decltype(static_cast<uint64_t>(e.startNs())) {
  return static_cast<uint64_t>(e.startNs());
}
template <class E>
uint64_t event_start_ns(const E &e, long) {
  return static_cast<uint64_t>(e.startUs()) * 1000;
}
template <class E>
auto event_duration_ns(const E &e, int) -> decltype(static_cast<uint64_t>(e.durationNs())) {
  return static_cast<uint64_t>(e.durationNs());
}
template <class E>
uint64_t event_duration_ns(const E &e, long) {
  return static_cast<uint64_t>(e.durationUs()) * 1000;
}

std::string shapes_text(const prof::KinetoEvent &e) {
  if (!e.hasShapes()) return "";
  std::string s = "[";
  bool first = true;
  for (const auto &shape : e.shapes()) {
    s += first ? "[" : ", [";
    first = false;
    for (size_t i = 0; i < shape.size(); i++) s += (i ? ", " : "") + std::to_string(shape[i]);
    s += "]";
  }
  return s + "]";
}

std::string dtypes_text(const prof::KinetoEvent &e) {
  if (!e.hasTypes()) return "";
  std::string s = "[";
  bool first = true;
  for (const auto &t : e.dtypes()) {
    s += first ? "" : ", ";
    first = false;
    s += t.empty() ? "-" : t;  // arguments that are neither tensors nor scalars
  }
  return s + "]";
}

struct ProfOp {
  std::string name, shapes, dtypes;
  uint64_t start, dur, device = 0, thread = 0;
  bool on_device = false;
};

// Kernels are linked to the operator that launched them; the operators
// that called that one (same thread, enclosing in time) get its device time
// too, so aten::linear shows the time of the addmm kernel it led to.
void attribute_device_time(std::vector<ProfOp> &ops) {
  std::vector<size_t> order;
  for (size_t i = 0; i < ops.size(); i++)
    if (!ops[i].on_device) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ops[a].thread != ops[b].thread) return ops[a].thread < ops[b].thread;
    if (ops[a].start != ops[b].start) return ops[a].start < ops[b].start;
    return ops[a].dur > ops[b].dur;  // the enclosing one first
  });
  std::vector<size_t> parent(ops.size(), SIZE_MAX), stack;
  for (size_t i : order) {
    while (!stack.empty() && (ops[stack.back()].thread != ops[i].thread ||
                              ops[stack.back()].start + ops[stack.back()].dur < ops[i].start))
      stack.pop_back();
    if (!stack.empty()) parent[i] = stack.back();
    stack.push_back(i);
  }
  for (size_t k = order.size(); k-- > 0;) {
    size_t i = order[k];
    if (parent[i] != SIZE_MAX) ops[parent[i]].device += ops[i].device;
  }
}

std::vector<ProfOp> collect_events(const std::vector<prof::KinetoEvent> &events) {
  std::vector<ProfOp> ops;
  std::unordered_map<uint64_t, size_t> by_correlation;
  for (const prof::KinetoEvent &e : events) {
    ProfOp op;
    op.name = e.name();
    op.shapes = shapes_text(e);
    op.dtypes = dtypes_text(e);
    op.start = event_start_ns(e, 0);
    op.dur = event_duration_ns(e, 0);
    op.thread = e.startThreadId();
    op.on_device = e.deviceType() != c10::DeviceType::CPU;
    if (!op.on_device && e.correlationId()) by_correlation[e.correlationId()] = ops.size();
    ops.push_back(std::move(op));
  }
  for (size_t i = 0; i < ops.size(); i++) {
    if (!ops[i].on_device) continue;
    auto host = by_correlation.find(events[i].linkedCorrelationId());
    if (host != by_correlation.end()) ops[host->second].device += ops[i].dur;
  }
  attribute_device_time(ops);
  return ops;
}

// ---- AOTInductor packages ----

#ifdef PTS_HAVE_AOTI
// Models load in parallel (--model-load-thread-count), and LibTorch's
// package reading is not safe for that: two packages read at once came back
// with each other's metadata (LibTorch 2.13). Reading a package's metadata
// and creating a loader (which unpacks the package) take turns; running
// loaded packages does not.
std::mutex aoti_load_mu;

// The metadata of a package without loading its model, where LibTorch can
// (a static reader in later 2.x); otherwise nothing, and the caller reads
// it from the loaded package.
template <class L>
auto package_metadata(const std::string &path, int)
    -> decltype(L::load_metadata_from_package(path, std::string("model"))) {
  return L::load_metadata_from_package(path, "model");
}
template <class L>
std::unordered_map<std::string, std::string> package_metadata(const std::string &, long) {
  return {};
}

void fill_meta(const std::unordered_map<std::string, std::string> &meta, pts_torch_meta *out) {
  size_t n = meta.size();
  out->keys = static_cast<char **>(pts_calloc(n ? n : 1, sizeof(char *)));
  out->values = static_cast<char **>(pts_calloc(n ? n : 1, sizeof(char *)));
  if (!out->keys || !out->values) {
    pts_free(out->keys);
    pts_free(out->values);
    out->keys = out->values = nullptr;
    fail(PTS_NOMEM, "out of memory reading the package's metadata");
  }
  for (const auto &kv : meta) {
    out->keys[out->count] = pts_strdup(kv.first.c_str());
    out->values[out->count] = pts_strdup(kv.second.c_str());
    out->count++;
    if (!out->keys[out->count - 1] || !out->values[out->count - 1]) {
      pts_torch_meta_free(out);
      fail(PTS_NOMEM, "out of memory reading the package's metadata");
    }
  }
}
#endif

thread_local bool mps_trace_on = false;  // this thread started the MPS signpost trace

}  // namespace

extern "C" {

const char *pts_torch_version(void) { return TORCH_VERSION; }

void pts_torch_probe(struct pts_device_caps *caps) {
  std::memset(caps, 0, sizeof *caps);
  try {
    (void)default_intra_threads();
    caps->built_with_cuda = c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA);
    caps->cuda_available = at::hasCUDA();
    caps->cuda_device_count = caps->cuda_available ? static_cast<int>(at::getNumGPUs()) : 0;
    caps->built_with_mps = c10::impl::hasDeviceGuardImpl(c10::DeviceType::MPS);
    caps->mps_available = at::hasMPS();
  } catch (const std::exception &e) {
    PTS_LOG_WARN("probing LibTorch devices failed, using cpu only: %s", e.what());
    std::memset(caps, 0, sizeof *caps);
  }
}

enum pts_status pts_torch_load(const char *path, const struct pts_device *dev,
                               struct pts_torch_module **out, struct pts_error *err) {
  *out = nullptr;
  std::string prefix = std::string("failed to load TorchScript model '") + path + "': ";
  return guarded(err, PTS_UNAVAILABLE, prefix.c_str(), [&]() {
    auto *m = new pts_torch_module();
    try {
      m->device = to_torch_device(dev);
      if (dev->keep_placement) {
        m->module = torch::jit::load(path);
      } else {
        m->module = torch::jit::load(path, m->device);
        m->move_inputs = !m->device.is_cpu();
      }
#ifdef PTS_WITH_CUDA
      if (m->device.is_cuda()) {
        m->stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, m->device.index());
        make_events(m);
      }
#endif
      m->module.eval();
      read_schema(m);
    } catch (...) {
      delete m;
      throw;
    }
    *out = m;
    return PTS_OK;
  });
}

bool pts_torch_has_aoti(void) {
#ifdef PTS_HAVE_AOTI
  return true;
#else
  return false;
#endif
}

enum pts_status pts_torch_aoti_metadata(const char *path, struct pts_torch_meta *out,
                                        struct pts_error *err) {
  std::memset(out, 0, sizeof *out);
  std::string prefix = std::string("failed to read the AOTInductor package '") + path + "': ";
  return guarded(err, PTS_UNAVAILABLE, prefix.c_str(), [&]() {
#ifdef PTS_HAVE_AOTI
    std::unordered_map<std::string, std::string> meta;
    {
      std::lock_guard<std::mutex> lock(aoti_load_mu);
      meta = package_metadata<torch::inductor::AOTIModelPackageLoader>(path, 0);
    }
    fill_meta(meta, out);
#endif
    return PTS_OK;
  });
}

enum pts_status pts_torch_module_metadata(const struct pts_torch_module *m,
                                          struct pts_torch_meta *out, struct pts_error *err) {
  std::memset(out, 0, sizeof *out);
  return guarded(err, PTS_INTERNAL, "reading the package's metadata failed: ", [&]() {
#ifdef PTS_HAVE_AOTI
    if (m->is_aoti) fill_meta(m->aoti->get_metadata(), out);
#else
    (void)m;
#endif
    return PTS_OK;
  });
}

void pts_torch_meta_free(struct pts_torch_meta *meta) {
  if (!meta || !meta->keys) return;
  for (size_t i = 0; i < meta->count; i++) {
    pts_free(meta->keys[i]);
    pts_free(meta->values[i]);
  }
  pts_free(meta->keys);
  pts_free(meta->values);
  std::memset(meta, 0, sizeof *meta);
}

const char *pts_torch_meta_get(const struct pts_torch_meta *meta, const char *key) {
  for (size_t i = 0; i < meta->count; i++)
    if (std::strcmp(meta->keys[i], key) == 0) return meta->values[i];
  return nullptr;
}

void pts_torch_set_min_batch(struct pts_torch_module *m, int64_t min_batch) {
  m->min_batch = min_batch > 1 ? min_batch : 0;
}

enum pts_status pts_torch_load_aoti(const char *path, const struct pts_device *dev,
                                    struct pts_torch_module **out, struct pts_error *err) {
  *out = nullptr;
  std::string prefix = std::string("failed to load AOTInductor package '") + path + "': ";
  return guarded(err, PTS_UNAVAILABLE, prefix.c_str(), [&]() {
#ifdef PTS_HAVE_AOTI
    auto m = std::make_unique<pts_torch_module>();
    m->device = to_torch_device(dev);
    m->is_aoti = true;
    if (!aoti_checks_on) {
      static std::once_flag warned;
      std::call_once(warned, [] {
        PTS_LOG_WARN("AOTI_RUNTIME_CHECK_INPUTS is 0: AOTInductor packages run without checking "
                     "their inputs, so a package whose inputs do not match its config can read "
                     "out of bounds");
      });
    }
    // Single-threaded runner: each instance owns its package and runs one
    // batch at a time on its own thread, so the container's locks and its
    // per-run CUDA event bookkeeping (a cudaEventQuery, which stream
    // capture forbids) are not needed.
    c10::DeviceIndex index =
        m->device.is_cuda() ? m->device.index() : static_cast<c10::DeviceIndex>(-1);
    {
      std::lock_guard<std::mutex> lock(aoti_load_mu);
      m->aoti = std::make_unique<torch::inductor::AOTIModelPackageLoader>(
          path, "model", /*run_single_threaded=*/true, /*num_runners=*/1, index);
    }
    std::vector<std::string> spec = m->aoti->get_call_spec();
    if (spec.size() != 2)
      fail(PTS_INVALID_ARG, prefix + "its call specification has " +
                                std::to_string(spec.size()) + " parts, not 2 (inputs, outputs)");
    m->call_spec[0] = spec[0];
    m->call_spec[1] = spec[1];
    m->move_inputs = !m->device.is_cpu();
#ifdef PTS_WITH_CUDA
    if (m->device.is_cuda()) {
      m->stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, m->device.index());
      make_events(m.get());
    }
#endif
    *out = m.release();
    return PTS_OK;
#else
    (void)dev;
    fail(PTS_UNSUPPORTED, prefix + "LibTorch " + TORCH_VERSION +
                              " has no AOTInductor package loader (torch_aoti needs 2.6 or newer)");
    return PTS_OK;  // not reached; gives the lambda its return type
#endif
  });
}

const char *pts_torch_call_spec(const struct pts_torch_module *m, int side) {
  if (!m->is_aoti || side < 0 || side > 1) return nullptr;
  return m->call_spec[side].c_str();
}

void pts_torch_free(struct pts_torch_module *m) { delete m; }

size_t pts_torch_arg_count(const struct pts_torch_module *m) { return m->args.size(); }

const struct pts_torch_arg *pts_torch_arg_at(const struct pts_torch_module *m, size_t i) {
  return i < m->args.size() ? &m->args[i] : nullptr;
}

bool pts_torch_returns_dict(const struct pts_torch_module *m) { return m->returns_dict; }

int pts_torch_default_intra_threads(void) {
  try {
    return default_intra_threads();
  } catch (const std::exception &) {
    return 0;  // the caller falls back to the core count
  }
}

void pts_torch_set_interop_threads(int n, const char *model) {
  if (n <= 0) return;
  std::lock_guard<std::mutex> lock(interop_mu);
  if (interop_threads == 0) {
    try {
      at::set_num_interop_threads(n);
      interop_threads = n;
      interop_model = model;
      PTS_LOG_INFO("inter-op thread pool set to %d threads (INTER_OP_THREAD_COUNT of model '%s')",
                   n, model);
    } catch (const std::exception &e) {
      PTS_LOG_WARN("INTER_OP_THREAD_COUNT %d of model '%s' is ignored: %s", n, model,
                   e.what());
    }
    return;
  }
  if (interop_threads != n)
    PTS_LOG_WARN("INTER_OP_THREAD_COUNT %d of model '%s' is ignored: the inter-op thread pool "
                 "is process-global and model '%s' already set it to %d",
                 n, model, interop_model.c_str(), interop_threads);
}

enum pts_status pts_torch_forward(struct pts_torch_module *m, const struct pts_torch_input *inputs,
                                  size_t n_inputs, const struct pts_torch_run_opts *opts,
                                  struct pts_torch_outputs *out, struct pts_error *err) {
  std::memset(out, 0, sizeof *out);
  return guarded(err, PTS_INTERNAL, kExecuteFailure, [&]() {
    // A module off CUDA keeps no per-batch state between the halves, so a
    // set of its own keeps this call re-entrant (header: several threads
    // may run one CPU module).
    ForwardSet local;
    ForwardSet &fs = on_stream(m) ? m->sets[0] : local;
    begin_forward(m, inputs, n_inputs, opts, fs);
    end_forward(m, fs, out);
    return PTS_OK;
  });
}

enum pts_status pts_torch_forward_begin(struct pts_torch_module *m,
                                        const struct pts_torch_input *inputs, size_t n_inputs,
                                        const struct pts_torch_run_opts *opts, unsigned set,
                                        struct pts_error *err) {
  return guarded(err, PTS_INTERNAL, kExecuteFailure, [&]() {
    begin_forward(m, inputs, n_inputs, opts, forward_set(m, set));
    return PTS_OK;
  });
}

enum pts_status pts_torch_forward_end(struct pts_torch_module *m, unsigned set,
                                      struct pts_torch_outputs *out, struct pts_error *err) {
  std::memset(out, 0, sizeof *out);
  return guarded(err, PTS_INTERNAL, kExecuteFailure, [&]() {
    end_forward(m, forward_set(m, set), out);
    return PTS_OK;
  });
}

bool pts_torch_async(const struct pts_torch_module *m) { return on_stream(m); }

enum pts_status pts_torch_optimize(struct pts_torch_module *m, bool freeze,
                                   bool optimize_for_inference, struct pts_error *err) {
  return guarded(err, PTS_INVALID_ARG, "optimizing the TorchScript module failed: ", [&]() {
    if (m->is_aoti) fail(PTS_INVALID_ARG, "an AOTInductor package is not a TorchScript module");
    if (optimize_for_inference)
      m->module = torch::jit::optimize_for_inference(m->module);  // freezes first
    else if (freeze)
      m->module = torch::jit::freeze(m->module);
    m->forward = &m->module.get_method("forward").function();
    return PTS_OK;
  });
}

enum pts_status pts_torch_inference_tensors(struct pts_torch_module *m, size_t *converted,
                                            struct pts_error *err) {
  *converted = 0;
  const char *what = "making the module's tensors inference tensors failed: ";
  return guarded(err, PTS_INTERNAL, what, [&]() {
    if (m->is_aoti) return PTS_OK;  // a compiled package keeps its own constants
    c10::InferenceMode guard;       // what at::empty makes here is an inference tensor
    // By TensorImpl, so that one tensor held by two attributes stays one.
    std::unordered_map<const c10::TensorImpl *, at::Tensor> made;
    std::unordered_set<const c10::ivalue::Object *> visited;
    std::vector<c10::intrusive_ptr<c10::ivalue::Object>> todo{m->module._ivalue()};
    while (!todo.empty()) {
      c10::intrusive_ptr<c10::ivalue::Object> obj = std::move(todo.back());
      todo.pop_back();
      if (!visited.insert(obj.get()).second) continue;
      for (size_t i = 0; i < obj->slots().size(); i++) {
        const c10::IValue &v = obj->getSlot(i);
        if (v.isObject()) {
          todo.push_back(v.toObject());
          continue;
        }
        if (!v.isTensor()) continue;
        const at::Tensor &t = v.toTensor();
        if (!t.defined() || t.is_inference() || t.layout() != at::kStrided || t.is_quantized() ||
            !t.has_storage())
          continue;
        auto it = made.find(t.unsafeGetTensorImpl());
        if (it == made.end()) {
          at::TensorOptions like = at::TensorOptions().dtype(t.dtype()).device(t.device());
          at::Tensor fresh = at::empty({0}, like);
          fresh.set_(t.storage(), t.storage_offset(), t.sizes(), t.strides());
          it = made.emplace(t.unsafeGetTensorImpl(), std::move(fresh)).first;
          ++*converted;
        }
        obj->setSlot(i, it->second);
      }
    }
    return PTS_OK;
  });
}

enum pts_status pts_torch_set_memory_fraction(const struct pts_device *dev, double fraction,
                                              const char *model, struct pts_error *err) {
  if (dev->type == PTS_DEVICE_CPU) return PTS_OK;
  c10::Device device = to_torch_device(dev);
  std::lock_guard<std::mutex> lock(memory_fraction_mu);
  for (const FractionOwner &o : memory_fractions) {
    if (o.device != device) continue;
    if (o.fraction == fraction) return PTS_OK;
    return pts_error_set(err, PTS_INVALID_ARG,
                         "MEMORY_FRACTION %g of model '%s' conflicts with %g set by model '%s' "
                         "for %s: the limit is per process and device",
                         fraction, model, o.fraction, o.model.c_str(), device.str().c_str());
  }
  return guarded(err, PTS_INVALID_ARG, "setting MEMORY_FRACTION failed: ", [&]() {
    if (dev->type == PTS_DEVICE_CUDA) {
#ifdef PTS_WITH_CUDA
      // The caching allocator of a device exists only once CUDA has been
      // initialised for it; a first tiny allocation does that.
      (void)at::empty({1}, at::TensorOptions().dtype(at::kByte).device(device));
      c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, device.index());
#else
      fail(PTS_UNSUPPORTED, "MEMORY_FRACTION: this LibTorch has no CUDA");
#endif
    } else {
      at::detail::getMPSHooks().setMemoryFraction(fraction);
    }
    memory_fractions.push_back({device, fraction, model});
    PTS_LOG_INFO("memory fraction of %s set to %g by model '%s' (process-wide for that device)",
                 device.str().c_str(), fraction, model);
    return PTS_OK;
  });
}

#ifdef PTS_WITH_CUDA
// Held while a CUDA graph is captured (pts_torch_capture_graph).
static std::mutex capture_mutex;
#endif

enum pts_status pts_torch_capture_graph(struct pts_torch_module *m,
                                        const struct pts_torch_input *inputs, size_t n_inputs,
                                        int64_t batch, int64_t min_batch,
                                        const struct pts_torch_run_opts *opts,
                                        struct pts_error *err) {
  return guarded(err, PTS_INVALID_ARG, "CUDA graph capture failed: ", [&]() {
#ifdef PTS_WITH_CUDA
    if (!m->stream) fail(PTS_INVALID_ARG, "CUDA graphs need an instance on a CUDA device");
    if (opts->dict_input) fail(PTS_INVALID_ARG, "CUDA graphs need Tensor arguments, not a dict");
    torch::jit::setGraphExecutorOptimize(opts->optimized_execution);
    c10::InferenceMode inference_guard(opts->inference_mode);
    torch::NoGradGuard no_grad;
    CudnnScope cudnn(!opts->disable_cudnn);
    c10::cuda::CUDAStreamGuard stream_guard(*m->stream);  // capture needs a non-default stream
    auto g = std::make_unique<CapturedGraph>();
    g->batch = batch;
    g->min_batch = min_batch;
    for (size_t i = 0; i < n_inputs; i++) {
      const pts_torch_input &in = inputs[i];
      at::ScalarType st;
      if (in.absent || in.dtype == PTS_DTYPE_BYTES || !to_scalar_type(in.dtype, &st))
        fail(PTS_INVALID_ARG, std::string("input '") + in.name +
                                  "' is not a Tensor; CUDA graphs need Tensor inputs");
      std::vector<int64_t> sizes(in.dims, in.dims + in.ndim);
      // In the layout batches arrive in (row-major): a replay copies a batch
      // in as it lies (stage_in_graph).
      g->inputs.push_back(at::zeros(sizes, at::TensorOptions().dtype(st).device(m->device)));
    }
    // forward()'s arguments: the static inputs laid out (INPUT_MEMORY_FORMAT).
    // Made inside the capture, so a channels-last reorder is the graph's
    // first step and replays with it.
    auto laid_out_args = [&]() {
      std::vector<c10::IValue> args;
      for (const at::Tensor &t : g->inputs) args.emplace_back(laid_out(t, opts));
      return args;
    };
    // The profiling executor specializes over the first runs; capture a
    // settled graph, never one that is still being optimized.
    for (int i = 0; i < 3; i++) eager_run(m, laid_out_args());
    m->stream->synchronize();
    if (!m->graph_pool) m->graph_pool = at::cuda::graph_pool_handle();
    {
      // Thread-local capture, one at a time in the process. The default
      // (global) mode forbids every thread's cudaMalloc and cublasCreate
      // while a capture lasts: instances and models loading beside it
      // failed ("operation not permitted when stream is capturing",
      // CUBLAS_STATUS_NOT_INITIALIZED), and so would a model serving
      // requests beside a load. Here only this thread is bound.
      std::lock_guard<std::mutex> one_capture(capture_mutex);
      g->graph.capture_begin(*m->graph_pool, cudaStreamCaptureModeThreadLocal);
      try {
        g->outputs = eager_run(m, laid_out_args());
      } catch (...) {
        try {  // end the capture, or the stream stays capturing for good
          g->graph.capture_end();
        } catch (...) {
        }
        throw;
      }
      g->graph.capture_end();
    }
    m->stream->synchronize();
    m->graphs.push_back(std::move(g));
    return PTS_OK;
#else
    (void)m;
    (void)inputs;
    (void)n_inputs;
    (void)batch;
    (void)min_batch;
    (void)opts;
    fail(PTS_UNSUPPORTED, "CUDA graphs need a LibTorch built with CUDA");
    return PTS_OK;  // not reached; gives the lambda its return type
#endif
  });
}

enum pts_status pts_torch_profile_start(struct pts_torch_module *m, struct pts_error *err) {
  return guarded(err, PTS_INTERNAL, "starting LibTorch's profiler failed: ", [&]() {
    pimpl::ProfilerConfig cfg(pimpl::ProfilerState::KINETO, /*report_input_shapes=*/true,
                              /*profile_memory=*/false);
    std::set<pimpl::ActivityType> acts{pimpl::ActivityType::CPU};
#ifdef PTS_WITH_CUDA
    if (m->device.is_cuda()) acts.insert(pimpl::ActivityType::CUDA);
#endif
    prof::prepareProfiler(cfg, acts);
    prof::enableProfiler(cfg, acts);
    // Apple's os_signpost intervals (Instruments' Metal System Trace): what
    // torch.mps.profiler.start() switches on. Not run on Linux hosts.
    if (m->device.is_mps()) {
      try {
        at::detail::getMPSHooks().profilerStartTrace("interval", /*waitUntilCompleted=*/false);
        mps_trace_on = true;
      } catch (...) {
        (void)prof::disableProfiler();
        throw;
      }
    }
    return PTS_OK;
  });
}

enum pts_status pts_torch_profile_stop(struct pts_torch_module *m, struct pts_torch_profile *out,
                                       struct pts_error *err) {
  std::memset(out, 0, sizeof *out);
  return guarded(err, PTS_INTERNAL, "stopping LibTorch's profiler failed: ", [&]() {
    std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
    if (mps_trace_on) {
      mps_trace_on = false;
      at::detail::getMPSHooks().profilerStopTrace();
    }
    std::vector<ProfOp> ops = collect_events(result->events());
    auto *items = static_cast<pts_torch_op *>(pts_calloc(ops.size() + 1, sizeof(pts_torch_op)));
    if (!items) fail(PTS_NOMEM, "out of memory collecting the profiler's events");
    out->ops = items;
    for (const ProfOp &op : ops) {
      pts_torch_op &o = items[out->count];
      o.name = pts_strdup(op.name.c_str());
      o.shapes = pts_strdup(op.shapes.c_str());
      o.dtypes = pts_strdup(op.dtypes.c_str());
      out->count++;
      if (!o.name || !o.shapes || !o.dtypes)
        fail(PTS_NOMEM, "out of memory collecting the profiler's events");
      o.start_ns = op.start;
      o.cpu_ns = op.dur;
      o.device_ns = op.device;
      o.on_device = op.on_device;
    }
    std::snprintf(out->note, sizeof out->note,
                  "LibTorch %s profiler (Kineto API%s), device %s, input shapes recorded",
                  TORCH_VERSION,
#ifdef PTS_WITH_CUDA
                  m->device.is_cuda() ? ", CPU and CUDA activities" : ", CPU activities",
#else
                  ", CPU activities",
#endif
                  m->device.str().c_str());
    return PTS_OK;
  });
}

void pts_torch_profile_free(struct pts_torch_profile *p) {
  if (!p || !p->ops) return;
  for (size_t i = 0; i < p->count; i++) {
    pts_free(p->ops[i].name);
    pts_free(p->ops[i].shapes);
    pts_free(p->ops[i].dtypes);
  }
  pts_free(p->ops);
  p->ops = nullptr;
  p->count = 0;
}

enum pts_status pts_torch_staging(struct pts_torch_module *m, unsigned set, size_t slot,
                                  size_t bytes, void **out, size_t *grown,
                                  struct pts_error *err) {
  *out = nullptr;
  *grown = 0;
  return guarded(err, PTS_NOMEM, "allocating pinned staging memory failed: ", [&]() {
    ForwardSet &fs = forward_set(m, set);
#ifdef PTS_WITH_CUDA
    if (!m->stream) return PTS_OK;
    if (fs.staging.size() <= slot) fs.staging.resize(slot + 1);
    at::Tensor &buf = fs.staging[slot];
    if (!buf.defined() || static_cast<size_t>(buf.numel()) < bytes) {
      // Grow by powers of two, so batch sizes that vary settle quickly.
      size_t cap = 1u << 16;
      while (cap < bytes) cap *= 2;
      buf = at::Tensor();  // the old block back to the allocator first
      buf = at::empty({static_cast<int64_t>(cap)},
                      at::TensorOptions().dtype(at::kByte).pinned_memory(true));
      *grown = cap;
    }
    *out = buf.data_ptr();
#else
    (void)fs;
    (void)slot;
    (void)bytes;
#endif
    return PTS_OK;
  });
}

void *pts_torch_pinned_alloc(size_t n, void **ctx) {
  *ctx = nullptr;
#ifdef PTS_WITH_CUDA
  try {
    // The tensor owns the block; deleting it hands the block back to the
    // caching host allocator, which hands it to the next body of its size.
    auto *t = new at::Tensor(at::empty({static_cast<int64_t>(n)},
                                       at::TensorOptions().dtype(at::kByte).pinned_memory(true)));
    *ctx = t;
    return t->data_ptr();
  } catch (...) {
    return nullptr;
  }
#else
  (void)n;
  return nullptr;
#endif
}

void pts_torch_pinned_release(void *ctx, void *data) {
  (void)data;
#ifdef PTS_WITH_CUDA
  delete static_cast<at::Tensor *>(ctx);
#else
  (void)ctx;
#endif
}

enum pts_status pts_torch_gather_device(struct pts_torch_module *m, unsigned set, size_t slot,
                                        const struct pts_torch_part *parts, size_t n,
                                        size_t total, void **out, struct pts_error *err) {
  *out = nullptr;
  return guarded(err, PTS_INTERNAL, "gathering inputs on the device failed: ", [&]() {
#ifdef PTS_WITH_CUDA
    if (!m->stream) fail(PTS_UNSUPPORTED, "gathering inputs on the device needs a CUDA module");
    if (set >= PTS_TORCH_SETS)
      fail(PTS_INTERNAL, "gather buffer set " + std::to_string(set) + " (0 or 1)");
    // The buffer is allocated for the module's stream, which reads it in
    // forward(); the copies run on the side stream and are waited for below.
    c10::cuda::CUDAStreamGuard stream_guard(*m->stream);
    if (!m->copy_stream) m->copy_stream = c10::cuda::getStreamFromPool(false, m->device.index());
    std::vector<at::Tensor> &bufs = m->sets[set].gathered;
    if (bufs.size() <= slot) bufs.resize(slot + 1);
    at::Tensor &buf = bufs[slot];
    if (!buf.defined() || static_cast<size_t>(buf.numel()) < total) {
      size_t cap = 1u << 16;  // powers of two, as staging
      while (cap < total) cap *= 2;
      buf = at::Tensor();
      buf = at::empty({static_cast<int64_t>(cap)},
                      at::TensorOptions().dtype(at::kByte).device(m->device));
    }
    char *dst = static_cast<char *>(buf.data_ptr());
    cudaStream_t stream = m->copy_stream->stream();
    int here = m->device.index();
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
      const pts_torch_part &p = parts[i];
      if (p.byte_size > total - at)
        fail(PTS_INTERNAL, "the parts hold more than the " + std::to_string(total) +
                               " bytes announced");
      if (p.byte_size == 0) continue;
      if (p.device == here)
        C10_CUDA_CHECK(cudaMemcpyAsync(dst + at, p.data, p.byte_size, cudaMemcpyDeviceToDevice,
                                       stream));
      else  // a region on another GPU: the driver copies peer to peer (or through the host)
        C10_CUDA_CHECK(cudaMemcpyPeerAsync(dst + at, here, p.data, p.device, p.byte_size, stream));
      at += p.byte_size;
    }
    // The parts belong to requests that may be answered (and their regions
    // unregistered) without forward() ever running, so the copies must be
    // over when this returns; on the side stream that is the copies' own
    // time, not the batch still running on the module's stream. The set's
    // buffer is free: its last batch has ended (the scheduler's rule).
    m->copy_stream->synchronize();
    *out = dst;
#else
    (void)m;
    (void)set;
    (void)slot;
    (void)parts;
    (void)n;
    (void)total;
    fail(PTS_UNSUPPORTED, "this build has no CUDA: there is no device to gather inputs on");
#endif
    return PTS_OK;
  });
}

void pts_torch_outputs_free(struct pts_torch_outputs *out) {
  if (!out || !out->items) return;
  for (size_t i = 0; i < out->count; i++) {
    pts_torch_output &o = out->items[i];
    if (o.release) o.release(o.release_ctx, o.data);
    pts_free(o.key);
  }
  pts_free(out->items);
  out->items = nullptr;
  out->count = 0;
}

}  // extern "C"
