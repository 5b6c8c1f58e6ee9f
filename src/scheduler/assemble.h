/* scheduler/assemble.h — batch assembly: gathering the inputs of several
 * requests into one tensor per input, and splitting each batch output into
 * per-request slices.
 *
 * Gather makes one copy (each request's bytes once, into one contiguous
 * buffer: a new host buffer, or memory the backend provides, such as its
 * pinned staging), or none for a batch of one request (the tensor is then a
 * view of the request's own bytes). Inputs in device memory are gathered by
 * the backend on the device (pts_batch_device_parts lists them,
 * pts_batch_gathered describes the result). Split makes no copy: every slice points into the
 * batch output and holds its own reference to its buffer, so a response
 * lives on after the batch, and the HTTP frontend writes the slice to the
 * socket by reference. BYTES tensors are split by element count (each
 * request gets its own strings), walking the length prefixes once.
 *
 * Threading: pure functions over their arguments; thread-safe.
 */
#ifndef PTS_SCHEDULER_ASSEMBLE_H
#define PTS_SCHEDULER_ASSEMBLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend_api/backend.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"
#include "tensor/tensor.h"

/* The request's input called `name`, or NULL. Borrowed from req. */
const struct pts_tensor *pts_request_input(const struct pts_infer_request *req, const char *name);

/* Whether requests a and b may run in one batch of a model with this config:
 * every config input is present in both or in neither, with equal shapes
 * apart from the leading batch dimension (Triton batches only requests whose
 * shapes agree). An input in device memory (CUDA shared memory) batches
 * only with inputs in device memory on the same device, and only when
 * `device_gather` says the backend gathers them there (backend.h
 * gather_device); device memory never batches with host memory. */
bool pts_batch_compatible(const Inference__ModelConfig *cfg, const struct pts_infer_request *a,
                          const struct pts_infer_request *b, bool device_gather);

/* Gathers input `name` of reqs[0..n) (already checked compatible) into
 * *dst: dtype, shape ([sum of dim 0] + the common rest), data, byte_size,
 * mem. n == 1: dst borrows the request's bytes and buffer (no copy, no
 * reference) and *owned is NULL. n > 1: the bytes are copied (once, on
 * several threads when large: core/copy.h) into a new host buffer returned
 * in *owned (one reference, the caller releases it after the backend ran);
 * dst->buf points to it without a reference of its own. A request without
 * this (optional) input leaves dst with data == NULL. dst->name is not
 * touched. */
enum pts_status pts_batch_gather(const char *name, struct pts_infer_request *const *reqs, size_t n,
                                 struct pts_tensor *dst, struct pts_buf **owned,
                                 struct pts_error *err);

/* The bytes input `name` takes once gathered (0 when the requests left
 * that optional input out). */
enum pts_status pts_batch_gather_size(const char *name, struct pts_infer_request *const *reqs,
                                      size_t n, size_t *bytes, struct pts_error *err);

/* Gathers like pts_batch_gather, for any n, into memory the caller
 * provides (a backend's pinned staging buffer: the one host copy of the
 * input's bytes, with no intermediate buffer). `into` holds `cap` bytes,
 * at least pts_batch_gather_size (INTERNAL otherwise); dst->data = into,
 * dst->buf = NULL (the caller owns `into`), dst->mem = mem. Requests in
 * device memory can not be gathered (INTERNAL). */
enum pts_status pts_batch_gather_into(const char *name, struct pts_infer_request *const *reqs,
                                      size_t n, void *into, size_t cap, enum pts_mem mem,
                                      struct pts_tensor *dst, struct pts_error *err);

/* The parts of input `name` of reqs[0..n) (already checked compatible),
 * every one in device memory, for a gather on the device (backend.h
 * gather_device): parts[i] is request i's bytes (n entries, filled by the
 * call); *total their sum. INTERNAL when a part is not in device memory. */
enum pts_status pts_batch_device_parts(const char *name, struct pts_infer_request *const *reqs,
                                       size_t n, struct pts_device_part *parts, size_t *total,
                                       struct pts_error *err);

/* Describes in *dst input `name` of reqs[0..n) gathered elsewhere (by the
 * backend on the device, or by the caller): the requests' bytes one after
 * the other at `data`, in memory `mem` on `device`. dst->buf = NULL (the
 * memory is not the batch's to release). A request without this (optional)
 * input leaves dst as it is. */
enum pts_status pts_batch_gathered(const char *name, struct pts_infer_request *const *reqs,
                                   size_t n, void *data, enum pts_mem mem, int device,
                                   struct pts_tensor *dst, struct pts_error *err);

/* Splits `src` (a batch output, dim 0 = the sum of rows[]) into n slices
 * along dim 0, rows[i] rows each, into slices[0..n) (zeroed by the caller).
 * Each slice owns a copy of the name and one reference to src->buf; its
 * data points into src's bytes. On error nothing is left in slices. */
enum pts_status pts_batch_split(const struct pts_tensor *src, const int64_t *rows, size_t n,
                                struct pts_tensor *slices, struct pts_error *err);

#endif
