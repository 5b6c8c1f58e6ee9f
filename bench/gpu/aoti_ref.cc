// bench/gpu/aoti_ref.cc — the AOTInductor reference of the GPU benchmark
// where PyTorch's Python loader can not run: LibTorch's own
// torch::inductor::AOTIModelPackageLoader, used as PyTorch's C++ docs show
// (load the .pt2, call run() with a vector of tensors), in this process.
// Not ptserve's code: nothing here comes from src/. torch 2.11's Python
// aoti_load_package crashes in this class's constructor on the GPU host
// (docs/gpu.md), while the constructor called from C++ loads the package.
//
//   aoti_ref PACKAGE.pt2 DTYPE SHAPE LABEL CSV [BATCHES] [SECONDS]
//
// The same rows as torch_ref.py's, appended to CSV
// (label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us; per_sec counts items):
//   LABEL/device/b<N>        the batch already on cuda:0: run(), synchronize;
//   LABEL/pinned/b<N>        a pinned host batch copied in (non_blocking),
//                            run(), the output copied back into pinned host
//                            memory, synchronize;
//   LABEL/device_graph/b<N>, LABEL/pinned_graph/b<N>  run() captured as a
//                            CUDA graph at this batch and replayed (a second
//                            loader, run single-threaded, as capture needs:
//                            its default runner queries CUDA events, which
//                            capture forbids); the pinned one copies the host
//                            batch into the graph's input and its output out.
// Each is warmed for 20 calls, then timed for SECONDS (default 2) of calls.
// Threading: one thread. Ownership: every tensor is owned by main's scope.
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <sys/resource.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

double cpu_s() {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec + 1e-6 * (r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int64_t> ints(const std::string &list) {
  std::vector<int64_t> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoll(item));
  return out;
}

// Appends one row: warm for 20 calls, then time calls for `seconds`.
void measure(FILE *csv, const std::string &label, int64_t items, double seconds,
             const std::function<void()> &call) {
  for (int i = 0; i < 20; i++) call();
  torch::cuda::synchronize();
  std::vector<double> lat;
  double c0 = cpu_s(), t0 = now_s();
  while (now_s() - t0 < seconds || lat.size() < 10) {
    double s = now_s();
    call();
    lat.push_back(now_s() - s);
  }
  double wall = now_s() - t0, cpu = cpu_s() - c0;
  std::sort(lat.begin(), lat.end());
  size_t n = lat.size();
  double p99 = lat[std::min(n - 1, static_cast<size_t>(n * 0.99))];
  fprintf(csv, "%s,%zu,%.1f,%.1f,%.1f,%.1f,%.1f\n", label.c_str(), n, n * items / wall,
          1e6 * wall / n, 1e6 * lat[n / 2], 1e6 * p99, 1e6 * cpu / n);
  fflush(csv);
  printf("%s: %.0f items/s, p50 %.0f us\n", label.c_str(), n * items / wall, 1e6 * lat[n / 2]);
  fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: aoti_ref PACKAGE DTYPE SHAPE LABEL CSV [BATCHES] [SECONDS]\n");
    return 2;
  }
  std::string path = argv[1], label = argv[4];
  auto dtype = std::string(argv[2]) == "FP16" ? torch::kHalf : torch::kFloat;
  std::vector<int64_t> shape = ints(argv[3]);
  std::vector<int64_t> batches = ints(argc > 6 ? argv[6] : "1,8,32,128");
  double seconds = argc > 7 ? std::stod(argv[7]) : 2.0;
  FILE *csv = fopen(argv[5], "a");
  if (!csv) {
    perror(argv[5]);
    return 1;
  }
  if (ftell(csv) == 0) fprintf(csv, "label,calls,per_sec,mean_us,p50_us,p99_us,cpu_us\n");

  c10::InferenceMode guard;
  torch::Device dev(torch::kCUDA, 0);
  torch::inductor::AOTIModelPackageLoader loader(path);  // as PyTorch's docs show
  torch::inductor::AOTIModelPackageLoader single(path, "model", /*run_single_threaded=*/true,
                                                 /*num_runners=*/1, /*device_index=*/0);
  for (int64_t b : batches) {
    std::vector<int64_t> full{b};
    full.insert(full.end(), shape.begin(), shape.end());
    torch::Tensor x_dev = torch::randn(full, torch::TensorOptions().device(dev)).to(dtype);
    torch::Tensor y = loader.run({x_dev})[0];
    torch::Tensor x_host = x_dev.cpu().pin_memory();
    torch::Tensor y_host = torch::empty(y.sizes(), y.options().device(torch::kCPU)).pin_memory();
    std::string row = "/b" + std::to_string(b);

    measure(csv, label + "/device" + row, b, seconds, [&] {
      loader.run({x_dev});
      torch::cuda::synchronize();
    });
    measure(csv, label + "/pinned" + row, b, seconds, [&] {
      torch::Tensor x = x_host.to(dev, /*non_blocking=*/true);
      y_host.copy_(loader.run({x})[0], /*non_blocking=*/true);
      torch::cuda::synchronize();
    });

    // run() as a CUDA graph: warmed on a side stream, captured on it.
    at::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, 0);
    torch::Tensor static_out;
    at::cuda::CUDAGraph graph;
    {
      c10::cuda::CUDAStreamGuard sg(side);
      for (int i = 0; i < 10; i++) single.run({x_dev}, side.stream());
      side.synchronize();
      graph.capture_begin();
      static_out = single.run({x_dev}, side.stream())[0];
      graph.capture_end();
    }
    torch::cuda::synchronize();
    measure(csv, label + "/device_graph" + row, b, seconds, [&] {
      graph.replay();
      torch::cuda::synchronize();
    });
    measure(csv, label + "/pinned_graph" + row, b, seconds, [&] {
      x_dev.copy_(x_host, /*non_blocking=*/true);
      graph.replay();
      y_host.copy_(static_out, /*non_blocking=*/true);
      torch::cuda::synchronize();
    });
  }
  fclose(csv);
  return 0;
}
