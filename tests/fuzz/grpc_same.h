/* tests/fuzz/grpc_same.h — whether two decoded ModelInferRequests are
 * alike, field by field, for everything a gRPC message fills: model name
 * and version, the request parameters, and what v2_same.h compares (id,
 * inputs and their shared-memory places, requested outputs). What the
 * one-pass decoder of the common message (frontend/grpc/infer_fast.h) must
 * share with the full decoder. Used by fuzz_grpc_infer.c and
 * tests/unit/grpc/grpc_fast_test.c.
 *
 * Threading: pure. */
#ifndef PTS_TESTS_GRPC_SAME_H
#define PTS_TESTS_GRPC_SAME_H

#include <stdbool.h>

#include "scheduler/request.h"
#include "v2_same.h"

static inline bool grpc_same_request(const struct pts_infer_request *a,
                                     const struct pts_infer_request *b) {
  if (!v2_same_str(a->model_name, b->model_name) || a->model_version != b->model_version ||
      a->priority != b->priority || a->timeout_us != b->timeout_us ||
      a->sequence_id != b->sequence_id || !v2_same_str(a->sequence_id_str, b->sequence_id_str) ||
      a->sequence_start != b->sequence_start || a->sequence_end != b->sequence_end ||
      (a->input_shm == NULL) != (b->input_shm == NULL))
    return false;
  for (size_t i = 0; a->input_shm && i < a->n_inputs; i++) {
    const struct pts_shm_place *x = &a->input_shm[i], *y = &b->input_shm[i];
    if (!v2_same_str(x->region, y->region) || x->byte_size != y->byte_size ||
        x->offset != y->offset)
      return false;
  }
  return v2_same_request(a, b);
}

#endif
