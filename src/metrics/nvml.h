/* metrics/nvml.h — GPU gauges read through NVML, loaded at run time.
 *
 * tritonserver collects nv_gpu_* through DCGM; ptserve asks NVML
 * (libnvidia-ml.so.1, which every NVIDIA driver installs) directly, and
 * loads it with dlopen so that the binary has no link-time dependency on
 * the driver: a CPU-only host simply has no library to open, and the
 * server then logs one line and serves no GPU metrics. The environment
 * variable PTSERVE_NVML_LIBRARY names another library to open (a driver
 * installed outside the loader path; tests use a missing path to exercise
 * the CPU-host branch on a GPU host).
 *
 * Ownership: pts_nvml_open returns an owned handle (pts_nvml_close);
 * samples are plain values written into the caller's array.
 * Threading: one handle is used by one thread (the metrics loop); NVML
 * itself is thread-safe, so the handle may live on any thread.
 */
#ifndef PTS_METRICS_NVML_H
#define PTS_METRICS_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At most this many GPUs are reported (NVML numbers more only on machines
 * far larger than any one ptserve process drives). */
#define PTS_NVML_MAX_GPUS 64

/* One GPU at one instant. A value NVML could not read has its `has_`
 * flag false and is left out of the text (some boards report no power). */
struct pts_gpu_sample {
  char uuid[96];          /* "GPU-..." as NVML spells it: the gpu_uuid label */
  bool has_utilization;
  double utilization;     /* 0.0 .. 1.0: share of the last sample period a kernel ran */
  bool has_memory;
  uint64_t memory_total_bytes;
  uint64_t memory_used_bytes;
  bool has_power;
  double power_watts;     /* current draw */
  bool has_power_limit;
  double power_limit_watts;
  bool has_energy;
  double energy_joules;   /* since pts_nvml_open (tritonserver: since it started) */
};

struct pts_nvml;

/* Loads NVML, initialises it and counts the GPUs. NULL when that fails or
 * there is no GPU; then `why` (why_size bytes) says why, in words fit for
 * the log. On success logs "Collecting metrics for GPU <i>: <name>" for
 * each GPU, as tritonserver does. */
struct pts_nvml *pts_nvml_open(char *why, size_t why_size);
/* The GPUs' current values into out[0 .. max); returns how many. */
size_t pts_nvml_sample(struct pts_nvml *n, struct pts_gpu_sample *out, size_t max);
/* nvmlShutdown, dlclose, free. NULL-safe. */
void pts_nvml_close(struct pts_nvml *n);

#endif
