/* backends/pytorch/device.c — the device policy (see device.h). */
#include "backends/pytorch/device.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Why no GPU can be had, in words a user can act on. */
static const char *no_gpu_reason(const struct pts_device_caps *caps) {
  if (!caps->built_with_cuda && !caps->built_with_mps)
    return "this LibTorch was built without CUDA and MPS support";
  if (caps->built_with_cuda && !caps->built_with_mps)
    return "LibTorch has CUDA support but no CUDA device is available";
  if (!caps->built_with_cuda && caps->built_with_mps)
    return "LibTorch has MPS support but MPS is not available on this machine";
  return "neither a CUDA device nor MPS is available";
}

static const char *accelerator_reason(const struct pts_device_caps *caps, bool is_mps) {
  if (is_mps)
    return caps->built_with_mps ? "MPS is not available on this machine"
                                : "this LibTorch was built without MPS support";
  if (!caps->built_with_cuda) return "this LibTorch was built without CUDA support";
  if (!caps->cuda_available) return "no CUDA device is available";
  return "the requested CUDA device does not exist";
}

static enum pts_status check_accelerators(const struct pts_device_request *req,
                                          struct pts_error *err) {
  for (size_t i = 0; i < req->n_accelerators; i++) {
    const char *name = req->accelerators[i] ? req->accelerators[i] : "";
    if (strcasecmp(name, "cuda") != 0 && strcasecmp(name, "mps") != 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "optimization.execution_accelerators.gpu_execution_accelerator "
                           "'%s' is not supported by the pytorch backend (it knows 'cuda' "
                           "and 'mps')",
                           name);
  }
  return PTS_OK;
}

/* The first requested accelerator that is usable; false when none is. The
 * reason for the first unusable one goes to *why. */
static bool pick_accelerator(const struct pts_device_caps *caps,
                             const struct pts_device_request *req, int gpu_id,
                             struct pts_device *out, const char **first_missing,
                             const char **why) {
  for (size_t i = 0; i < req->n_accelerators; i++) {
    bool is_mps = strcasecmp(req->accelerators[i], "mps") == 0;
    if (is_mps && caps->mps_available) {
      out->type = PTS_DEVICE_MPS;
      return true;
    }
    if (!is_mps && caps->cuda_available && gpu_id < caps->cuda_device_count) {
      out->type = PTS_DEVICE_CUDA;
      out->index = gpu_id;
      return true;
    }
    if (!*first_missing) {
      *first_missing = req->accelerators[i];
      *why = accelerator_reason(caps, is_mps);
    }
  }
  return false;
}

enum pts_status pts_device_choose(const struct pts_device_caps *caps,
                                  const struct pts_device_request *req, struct pts_device *out,
                                  char *warning, size_t warning_size, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  out->type = PTS_DEVICE_CPU;
  if (warning && warning_size > 0) warning[0] = '\0';
  enum pts_status st = check_accelerators(req, err);
  if (st != PTS_OK) return st;

  switch (req->kind) {
    case PTS_DEVICE_KIND_CPU:
      return PTS_OK;
    case PTS_DEVICE_KIND_MODEL:
      out->keep_placement = true;
      return PTS_OK;
    case PTS_DEVICE_KIND_GPU:
    case PTS_DEVICE_KIND_AUTO:
      break;
    default:
      return pts_error_set(err, PTS_INVALID_ARG, "unknown instance_group kind %d", (int)req->kind);
  }

  bool is_gpu = req->kind == PTS_DEVICE_KIND_GPU;
  int gpu_id = req->gpu_id < 0 ? 0 : req->gpu_id;
  const char *missing = NULL, *why = NULL;
  if (pick_accelerator(caps, req, gpu_id, out, &missing, &why)) return PTS_OK;

  if (caps->cuda_available && gpu_id < caps->cuda_device_count) {
    out->type = PTS_DEVICE_CUDA;
    out->index = gpu_id;
  } else if (caps->cuda_available && is_gpu && !caps->mps_available) {
    return pts_error_set(err, PTS_INVALID_ARG,
                         "instance_group asks for GPU %d but only %d CUDA device(s) are visible",
                         gpu_id, caps->cuda_device_count);
  } else if (caps->mps_available && (is_gpu || !caps->cuda_available)) {
    out->type = PTS_DEVICE_MPS;
  } else {
    if (!is_gpu || !warning || warning_size == 0) return PTS_OK;
    if (missing)
      snprintf(warning, warning_size,
               "gpu_execution_accelerator '%s' is not usable (%s); falling back to cpu", missing,
               why);
    else
      snprintf(warning, warning_size, "KIND_GPU asked for a GPU but %s; falling back to cpu",
               no_gpu_reason(caps));
    return PTS_OK;
  }

  if (missing && warning && warning_size > 0) {
    char dev[32];
    pts_device_format(out, dev, sizeof dev);
    snprintf(warning, warning_size,
             "gpu_execution_accelerator '%s' is not usable (%s); using %s instead", missing, why,
             dev);
  }
  return PTS_OK;
}

void pts_device_format(const struct pts_device *dev, char *out, size_t out_size) {
  if (!out || out_size == 0) return;
  switch (dev->type) {
    case PTS_DEVICE_CUDA:
      snprintf(out, out_size, "cuda:%d", dev->index);
      break;
    case PTS_DEVICE_MPS:
      snprintf(out, out_size, "mps");
      break;
    default:
      snprintf(out, out_size, "cpu");
      break;
  }
}
