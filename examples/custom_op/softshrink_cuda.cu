// examples/custom_op/softshrink_cuda.cu — the CUDA kernel of
// ptserve_ops::softshrink (schema and CPU kernel: softshrink.cc). Compiled
// only when the build has CUDA; it runs on the stream LibTorch has current,
// which in ptserve is the model instance's own stream.

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>
#include <torch/torch.h>

namespace {

template <typename T>
__global__ void shrink_kernel(const T *in, T *out, int64_t n, T lambd) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T v = in[i];
  out[i] = v > lambd ? v - lambd : (v < -lambd ? v + lambd : T(0));
}

at::Tensor softshrink_cuda(const at::Tensor &x, double lambd) {
  TORCH_CHECK(lambd >= 0, "softshrink: lambd must be >= 0, got ", lambd);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  int64_t n = in.numel();
  if (n == 0) return out;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(in.scalar_type(), "ptserve_ops::softshrink (CUDA)", [&] {
    shrink_kernel<scalar_t><<<blocks, threads, 0, stream>>>(
        in.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n, static_cast<scalar_t>(lambd));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(ptserve_ops, CUDA, m) { m.impl("softshrink", softshrink_cuda); }
