/* scheduler/reshape.h — a config `reshape` applied to a concrete shape.
 *
 * The scheduler maps every request's inputs and every answer's outputs
 * through a model's reshape; warmup (warmup.c) maps the shapes of its
 * samples the same way. A module of its own so that warmup needs nothing
 * of the scheduler's file, which calls warmup.
 *
 * Threading: pure; any thread.
 */
#ifndef PTS_SCHEDULER_RESHAPE_H
#define PTS_SCHEDULER_RESHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/tensor.h"

/* Maps a concrete shape between two config views of one tensor: `actual`
 * follows `from` (config dims, -1 = any), the result follows `to`. Used for
 * `reshape` in both directions (input: dims → reshape.shape; output:
 * reshape.shape → dims). Each -1 of `to` takes the value of the matching -1
 * of `from`; when their counts differ, a single -1 of `to` is inferred from
 * the element count. Returns INVALID_ARG when the shapes can not correspond.
 * Neither side includes the batch dimension. */
enum pts_status pts_reshape_map(const int64_t *from, size_t n_from, const int64_t *to, size_t n_to,
                                const struct pts_shape *actual, struct pts_shape *out,
                                struct pts_error *err);

/* The same for a full shape: with `batched`, its first dimension is the
 * batch, kept as it is, and the rest is mapped. */
enum pts_status pts_reshape_map_batched(const int64_t *from, size_t n_from, const int64_t *to,
                                        size_t n_to, bool batched,
                                        const struct pts_shape *actual, struct pts_shape *out,
                                        struct pts_error *err);

#endif
