/* ptperf/lib/shm.h — perf_analyzer's --shared-memory system, over HTTP.
 *
 * The inputs of the prepared requests live in one POSIX shared-memory
 * object that the server maps once (system shared-memory extension,
 * protocol-facts §1.15): request i reads its inputs at its own offset, and
 * every output goes to a region of --output-shared-memory-size bytes per
 * output, shared by all requests as perf_analyzer does (the bytes written
 * are not read back: the load measures transfer, not results). A request
 * is then a small JSON document naming places instead of carrying tensors.
 *
 * Threading: setup and teardown on the controlling thread; the built
 * requests are plain bytes.
 */
#ifndef PTPERF_SHM_H
#define PTPERF_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "ptperf/lib/http.h"
#include "ptperf/lib/infer.h"

struct ptperf_shm {
  char key[64];        /* "/ptperf_<pid>" */
  void *map;
  size_t size;
  size_t input_bytes;  /* one request's inputs, back to back */
  size_t n_requests;
  size_t output_bytes; /* per output */
  bool registered;
};

/* Creates and fills the object (request i's inputs from seed0 + i, or
 * zeros), registers regions "ptperf_in" and "ptperf_out" with the server
 * (the server must run with --allow-client-shm=true). BYTES inputs are not
 * supported (INVALID_ARG). On error nothing is left behind. */
enum pts_status ptperf_shm_setup(const struct ptperf_addr *a, const struct ptperf_model *m,
                                 size_t n_requests, uint64_t seed0, bool zero_data,
                                 size_t output_bytes, struct ptperf_shm *out,
                                 struct pts_error *err);

/* A complete HTTP/1.1 POST .../infer for request i whose inputs and
 * outputs are places in the regions. Caller frees *out with pts_free. */
enum pts_status ptperf_shm_request_build(const struct ptperf_model *m, const struct ptperf_shm *s,
                                         size_t i, const char *host, char **out, size_t *out_len,
                                         struct pts_error *err);

/* Unregisters the regions and removes the object. NULL-safe, idempotent. */
void ptperf_shm_teardown(const struct ptperf_addr *a, struct ptperf_shm *s);

#endif
