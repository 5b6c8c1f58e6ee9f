/* backends/pytorch/device.h — which device a pytorch model instance runs on.
 *
 * The choice is a pure function of what the instance asks for (instance
 * group kind, GPU id, gpu_execution_accelerator names) and what this process
 * can offer (a capability set). Only torch_bridge.cc probes LibTorch for the
 * capabilities, so the policy is unit-tested with faked ones on any host,
 * including the CUDA and MPS branches that CI machines can not run.
 *
 * Policy (docs/pytorch-backend.md "Devices"):
 *   KIND_CPU   → cpu.
 *   KIND_MODEL → the model keeps the placement it was saved with; inputs and
 *                outputs go through the CPU.
 *   KIND_GPU   → the first available accelerator named in
 *                gpu_execution_accelerator ("cuda", "mps"), else cuda:<gpu id>,
 *                else mps; when no GPU can be had, cpu plus a warning that
 *                says why.
 *   KIND_AUTO  → as KIND_GPU, but falling back to cpu is not worth a warning.
 *
 * Threading: pure functions over caller memory; thread-safe.
 */
#ifndef PTS_BACKENDS_PYTORCH_DEVICE_H
#define PTS_BACKENDS_PYTORCH_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

/* What this process can run on, as probed from LibTorch. */
struct pts_device_caps {
  bool built_with_cuda;   /* LibTorch has its CUDA backend linked in */
  bool cuda_available;    /* ... and a driver and at least one device answer */
  int cuda_device_count;
  bool built_with_mps;
  bool mps_available;
};

/* Instance group kinds, numbered as ModelInstanceGroup.Kind so a config
 * value converts by cast (this header stays free of the protobuf types). */
enum pts_device_kind {
  PTS_DEVICE_KIND_AUTO = 0,
  PTS_DEVICE_KIND_GPU = 1,
  PTS_DEVICE_KIND_CPU = 2,
  PTS_DEVICE_KIND_MODEL = 3,
};

struct pts_device_request {
  enum pts_device_kind kind;
  int gpu_id;                       /* KIND_GPU: CUDA device id; -1 = unset (0) */
  const char *const *accelerators;  /* gpu_execution_accelerator names, borrowed */
  size_t n_accelerators;
};

enum pts_device_type { PTS_DEVICE_CPU, PTS_DEVICE_CUDA, PTS_DEVICE_MPS };

struct pts_device {
  enum pts_device_type type;
  int index;            /* CUDA device id; 0 otherwise */
  bool keep_placement;  /* KIND_MODEL: load without moving the model's tensors */
};

/* Chooses the device for one instance. On OK, *out is set and `warning`
 * (caller-owned, may be NULL) holds a one-line reason when a GPU was asked
 * for but the instance fell back to cpu, or "" otherwise. Errors
 * (INVALID_ARG): an accelerator name the pytorch backend does not know, or a
 * CUDA device id that does not exist on a host that has CUDA devices. */
enum pts_status pts_device_choose(const struct pts_device_caps *caps,
                                  const struct pts_device_request *req, struct pts_device *out,
                                  char *warning, size_t warning_size, struct pts_error *err);

/* Writes LibTorch's spelling of the device ("cpu", "cuda:1", "mps") into
 * out (always NUL-terminated). */
void pts_device_format(const struct pts_device *dev, char *out, size_t out_size);

#endif
