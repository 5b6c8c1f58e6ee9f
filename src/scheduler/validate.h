/* scheduler/validate.h — checks a native request against its model's config.
 *
 * The rules and messages are Triton's (protocol-facts §1.6, §4.4), so a
 * client written against tritonserver sees the same 400s: unknown, duplicate
 * or missing inputs, data types, shapes against dims (-1 = any) with the
 * implicit batch dimension when max_batch_size > 0, batch size limits, byte
 * sizes of fixed-size tensors, BYTES element counts, and the requested
 * outputs. Every failure is PTS_INVALID_ARG with a message naming the model
 * and the tensor.
 *
 * Threading: pure function over borrowed data; thread-safe.
 */
#ifndef PTS_SCHEDULER_VALIDATE_H
#define PTS_SCHEDULER_VALIDATE_H

#include <stdint.h>

#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"

/* Validates `req` (borrowed) against `cfg`, the completed config of the model
 * named `model_name`. On success stores the request's batch size in
 * *batch_size: the shared leading dimension when max_batch_size > 0, else 0
 * (the model does not batch). */
enum pts_status pts_validate_request(const Inference__ModelConfig *cfg, const char *model_name,
                                     const struct pts_infer_request *req, int64_t *batch_size,
                                     struct pts_error *err);

#endif
