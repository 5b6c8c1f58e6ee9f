/* backends/pytorch/aoti.h — an AOTInductor package and its config.
 *
 * The config-side rules of platform "torch_aoti" (docs/pytorch-backend.md,
 * "AOTInductor packages"), as pure functions over the config, the package's
 * call specification (callspec.h) and its metadata, so they are unit-tested
 * without LibTorch:
 *
 *   devices    a package is compiled for one device kind (AOTI_DEVICE_KEY):
 *              KIND_AUTO groups take that kind, a group of the other kind is
 *              an error naming both;
 *   I/O record what the exporter wrote into the package metadata under
 *              "ptserve.io" (examples/export_aoti.py): the data type and
 *              shape of every flat input and output, -1 for a dynamic size.
 *              AOTInductor itself keeps no such record;
 *   complete   a config without inputs (outputs) gets them from the call
 *              specification, with types and dims from the I/O record;
 *   bind       config tensor names → flat positions (callspec.h names);
 *   check      config types and dims against the I/O record; with
 *              max_batch_size > 0 the first dimension must be dynamic.
 *
 * Threading: pure functions over caller memory (the repository's load
 * thread calls them from model_load).
 */
#ifndef PTS_BACKENDS_PYTORCH_AOTI_H
#define PTS_BACKENDS_PYTORCH_AOTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/pytorch/callspec.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"

/* The metadata key of the I/O record. */
#define PTS_AOTI_IO_KEY "ptserve.io"

/* Device kinds a package can be compiled for. */
enum pts_aoti_device { PTS_AOTI_CPU, PTS_AOTI_CUDA, PTS_AOTI_MPS };

/* AOTI_DEVICE_KEY → device kind. Errors (INVALID_ARG): a missing key or a
 * device ptserve does not run packages on (xpu, ...). */
enum pts_status pts_aoti_device_parse(const char *device_key, enum pts_aoti_device *out,
                                      struct pts_error *err);

/* Settles the instance groups against the package's device: KIND_AUTO
 * becomes KIND_CPU for a cpu package (its GPU ids dropped) and KIND_GPU
 * for a cuda or mps one; a KIND_CPU group for a GPU package, or a KIND_GPU
 * group for a cpu package, is an INVALID_ARG naming both devices. */
enum pts_status pts_aoti_settle_groups(Inference__ModelConfig *cfg, enum pts_aoti_device dev,
                                       struct pts_error *err);

struct pts_aoti_tensor {
  enum pts_dtype dtype;
  struct pts_shape shape; /* -1 = dynamic */
  /* Inputs: the sizes each dimension may take, when recorded ("min",
   * "max"; max -1 = unbounded). */
  bool ranged;
  int64_t min[PTS_TENSOR_MAX_DIMS], max[PTS_TENSOR_MAX_DIMS];
};

/* The I/O record of a package, in flat order. */
struct pts_aoti_io {
  size_t n_inputs, n_outputs;
  struct pts_aoti_tensor *inputs, *outputs; /* freed by pts_aoti_io_free */
};

/* Parses the "ptserve.io" metadata value: {"inputs": [{"dtype":
 * "TYPE_FP32", "shape": [-1, 16], "min": [1, 16], "max": [64, 16]}, ...],
 * "outputs": [...]} ("min" and "max" optional). Its counts must equal the
 * call specification's. Caller frees *out with pts_aoti_io_free. Errors
 * (INVALID_ARG) name the entry at fault. */
enum pts_status pts_aoti_io_parse(const char *json, const struct pts_callspec *cs,
                                  struct pts_aoti_io **out, struct pts_error *err);
void pts_aoti_io_free(struct pts_aoti_io *io); /* NULL-safe */

/* Backend auto-complete: a config without inputs gets one per flat input
 * of the package, named by its forward-based name (ARGS[0], KWARGS[x]);
 * a config without outputs one per flat output (RESULT, RESULT[key]).
 * Types and dims come from `io` (without the batch dimension when
 * max_batch_size > 0, which must then be dynamic); io == NULL is an
 * INVALID_ARG that lists the names to write by hand. Sides the config
 * already lists are left alone. */
enum pts_status pts_aoti_complete(Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                                  const struct pts_aoti_io *io, struct pts_error *err);

/* Binds config names to flat positions: input_slot[i] for config input i,
 * output_index[o] for config output o (caller-allocated, n_input and
 * n_output entries). Every package input must be bound exactly once (the
 * compiled model takes all of them), outputs at most once; optional inputs
 * are refused. */
enum pts_status pts_aoti_bind(const Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                              int *input_slot, int *output_index, struct pts_error *err);

/* Checks config types and dims (reshape when given, batch dimension
 * included) against the I/O record, given the binding: with
 * max_batch_size > 0 the recorded batch range must hold 1..max_batch_size,
 * and a fixed config size must be one the package takes. */
enum pts_status pts_aoti_check(const Inference__ModelConfig *cfg, const struct pts_callspec *cs,
                               const struct pts_aoti_io *io, const int *input_slot,
                               const int *output_index, struct pts_error *err);

/* Checks the shape one request batch gives package input k (as the package
 * sees it: batch dimension and reshape applied) against its recorded
 * ranges, so that a size the package would refuse never reaches it
 * (LibTorch leaks the input's handle when a package refuses it). OK when
 * nothing is recorded. Errors (INVALID_ARG) name `name`, the dimension and
 * the range. */
enum pts_status pts_aoti_check_shape(const struct pts_aoti_io *io, size_t k, const char *name,
                                     const struct pts_shape *shape, struct pts_error *err);

#endif
