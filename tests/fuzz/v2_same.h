/* tests/fuzz/v2_same.h — whether two decoded infer requests are alike, field
 * by field, for the fields an HTTP header fills (id, binary_data_output,
 * inputs and their shared-memory places, requested outputs): what the
 * one-pass decoder of the common header (frontend/http/v2_fast.h) must
 * share with the full decoder. Used by fuzz_v2_infer.c and
 * tests/unit/frontend/v2_fast_test.c.
 *
 * Threading: pure. */
#ifndef PTS_TESTS_V2_SAME_H
#define PTS_TESTS_V2_SAME_H

#include <stdbool.h>
#include <string.h>

#include "scheduler/request.h"

static inline bool v2_same_str(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static inline bool v2_same_request(const struct pts_infer_request *a,
                                   const struct pts_infer_request *b) {
  if (!v2_same_str(a->id, b->id) || a->binary_data_output != b->binary_data_output ||
      a->n_inputs != b->n_inputs || a->n_outputs != b->n_outputs)
    return false;
  for (size_t i = 0; i < a->n_inputs; i++) {
    const struct pts_tensor *x = &a->inputs[i], *y = &b->inputs[i];
    if (!v2_same_str(x->name, y->name) || x->dtype != y->dtype || x->data != y->data ||
        x->byte_size != y->byte_size || x->buf != y->buf || x->mem != y->mem ||
        x->shape.ndim != y->shape.ndim ||
        memcmp(x->shape.dims, y->shape.dims, (size_t)x->shape.ndim * sizeof x->shape.dims[0]))
      return false;
    /* The input's shared-memory place: the array exists once any input
     * names one. */
    const struct pts_shm_place none = {0};
    const struct pts_shm_place *p = a->input_shm ? &a->input_shm[i] : &none;
    const struct pts_shm_place *q = b->input_shm ? &b->input_shm[i] : &none;
    if (!v2_same_str(p->region, q->region) || p->byte_size != q->byte_size ||
        p->offset != q->offset)
      return false;
  }
  if (!a->input_shm != !b->input_shm) return false;
  for (size_t i = 0; i < a->n_outputs; i++) {
    const struct pts_requested_output *x = &a->outputs[i], *y = &b->outputs[i];
    if (!v2_same_str(x->name, y->name) || x->binary != y->binary ||
        x->binary_set != y->binary_set || x->classification != y->classification ||
        !v2_same_str(x->shm.region, y->shm.region) || x->shm.byte_size != y->shm.byte_size ||
        x->shm.offset != y->shm.offset)
      return false;
  }
  return true;
}

#endif
