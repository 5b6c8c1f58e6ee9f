/* ptperf/lib/infer.h — what to send: the model's inputs and the requests.
 *
 * The inputs come from the server itself, as perf_analyzer takes them: the
 * model metadata (§1.5: names, datatypes, shapes with a leading -1 for
 * batching models) and the configuration's max_batch_size, which decides
 * whether that first dimension is the batch. Each request is built once,
 * in full (request line, headers, JSON header, binary tensors, §1.7), so the
 * load loop only writes bytes.
 *
 * Threading: pure functions over caller-owned memory; thread-safe.
 */
#ifndef PTPERF_INFER_H
#define PTPERF_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "tensor/dtype.h"

#define PTPERF_MAX_DIMS 16

/* A user-given shape for an input with variable dimensions (perf_analyzer's
 * --shape NAME:d1,d2: without the batch dimension). */
struct ptperf_shape_arg {
  const char *name; /* borrowed */
  int ndim;
  int64_t dims[PTPERF_MAX_DIMS];
};

struct ptperf_input {
  char *name;
  enum pts_dtype dtype;
  int ndim; /* the full request shape, batch dimension included */
  int64_t dims[PTPERF_MAX_DIMS];
  size_t byte_size; /* 0 for BYTES: the size depends on the generated strings */
};

struct ptperf_model {
  char *name;
  char *version; /* the version to address, or NULL for the server's choice */
  int64_t max_batch_size;
  int batch_size;
  size_t n_inputs;
  struct ptperf_input *inputs;
  size_t n_outputs;
  char **output_names; /* from the metadata's "outputs" (may be empty) */
};

/* Parses "NAME:d1,d2,..." into *out (name borrowed from arg). */
enum pts_status ptperf_shape_arg_parse(const char *arg, struct ptperf_shape_arg *out,
                                       struct pts_error *err);

/* Builds the model description from the metadata JSON and the config JSON
 * (may be NULL when the server has no /config: max_batch_size is then 0).
 * `version` (may be NULL) is copied. Every variable dimension must be fixed
 * by a shape argument. Caller frees *out with ptperf_model_free. */
enum pts_status ptperf_model_parse(const char *metadata_json, const char *config_json,
                                   const char *version, int batch_size,
                                   const struct ptperf_shape_arg *shapes, size_t n_shapes,
                                   struct ptperf_model **out, struct pts_error *err);
void ptperf_model_free(struct ptperf_model *m); /* NULL-safe */

/* The path of the model's endpoint `what` ("infer", "stats", ""), with the
 * model name percent-encoded. Caller frees with pts_free. */
char *ptperf_model_path(const struct ptperf_model *m, const char *what, bool with_version);

/* The bytes of one input's data as both protocols carry them: little-endian
 * elements, BYTES as 4-byte length-prefixed strings (§5). */
size_t ptperf_input_wire_size(const struct ptperf_input *in);

/* Writes every input's data, in input order, at dst (which holds the sum of
 * ptperf_input_wire_size): random from `seed`, or zeros. The same seed gives
 * the same tensors over HTTP and gRPC. */
void ptperf_inputs_fill(const struct ptperf_model *m, uint64_t seed, bool zero_data,
                        unsigned char *dst);

/* A complete HTTP/1.1 POST .../infer with every input as binary data and
 * binary outputs, filled with data from `seed` (zeros when zero_data).
 * `host` is the Host header value. Caller frees *out with pts_free. */
enum pts_status ptperf_request_build(const struct ptperf_model *m, const char *host, uint64_t seed,
                                     bool zero_data, char **out, size_t *out_len,
                                     struct pts_error *err);

#endif
