// examples/custom_op/softshrink.cc — a custom operator for ptserve:
// ptserve_ops::softshrink, registered with TORCH_LIBRARY.
//
// softshrink(x, lambd) = x - lambd  where x >  lambd
//                        x + lambd  where x < -lambd
//                        0          elsewhere
// (what torch.nn.functional.softshrink computes). This file has the schema
// and the CPU kernel; softshrink_cuda.cu adds a CUDA kernel when the build
// has CUDA. Build it against the same LibTorch as the server (the C++ ABI
// differs between LibTorch versions); ptserve dlopens it before loading a
// model whose config lists it (docs/custom-ops.md).

#include <torch/library.h>
#include <torch/torch.h>

namespace {

template <typename T>
void shrink(const T *in, T *out, int64_t n, T lambd) {
  for (int64_t i = 0; i < n; i++) {
    T v = in[i];
    out[i] = v > lambd ? v - lambd : (v < -lambd ? v + lambd : T(0));
  }
}

at::Tensor softshrink_cpu(const at::Tensor &x, double lambd) {
  TORCH_CHECK(lambd >= 0, "softshrink: lambd must be >= 0, got ", lambd);
  at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  AT_DISPATCH_FLOATING_TYPES(in.scalar_type(), "ptserve_ops::softshrink", [&] {
    shrink<scalar_t>(in.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), in.numel(),
                     static_cast<scalar_t>(lambd));
  });
  return out;
}

}  // namespace

TORCH_LIBRARY(ptserve_ops, m) { m.def("softshrink(Tensor x, float lambd=0.5) -> Tensor"); }

TORCH_LIBRARY_IMPL(ptserve_ops, CPU, m) { m.impl("softshrink", softshrink_cpu); }
