/* ptperf/lib/shm.h — perf_analyzer's --shared-memory system|cuda, over HTTP.
 *
 * The inputs of the prepared requests live in one region that the server
 * maps once (system and CUDA shared-memory extensions, protocol-facts
 * §1.15): request i reads its inputs at its own offset, and every output
 * goes to a second region of --output-shared-memory-size bytes per output,
 * shared by all requests as perf_analyzer does (the bytes written are not
 * read back: the load measures transfer, not results). A request is then
 * a small JSON document naming places instead of carrying tensors.
 *
 * The two kinds differ only in how a region is made and how the server is
 * told where it is: a POSIX shared-memory object named by its key
 * (system), or a cudaMalloc block on --cuda-device, filled once from the
 * host and named by its cudaIpcMemHandle_t (cuda; the runtime is loaded
 * at run time, lib/cuda.h). Registration, the requests and teardown are
 * the same code for both.
 *
 * Threading: setup and teardown on the controlling thread (CUDA's current
 * device is per thread); the built requests are plain bytes.
 */
#ifndef PTPERF_SHM_H
#define PTPERF_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "ptperf/lib/cuda.h"
#include "ptperf/lib/http.h"
#include "ptperf/lib/infer.h"

enum ptperf_shm_kind { PTPERF_SHM_NONE, PTPERF_SHM_SYSTEM, PTPERF_SHM_CUDA };

struct ptperf_shm_options {
  enum ptperf_shm_kind kind; /* SYSTEM or CUDA */
  int device;                /* CUDA: the GPU the regions live on */
  size_t n_requests;         /* request slots, each with its own inputs */
  uint64_t seed0;            /* request i's inputs from seed0 + i ... */
  bool zero_data;            /* ... or zeros */
  size_t output_bytes;       /* per output */
};

/* One region registered with the server; its storage is owned here. */
struct ptperf_shm_region {
  const char *name; /* static: "ptperf_in" or "ptperf_out" */
  size_t size;
  char key[64];     /* system: the object, "/ptperf_<pid>_in" */
  void *map;        /* system: the mapping (munmap) */
  void *dev;        /* cuda: the device allocation (ptperf_cuda_free) */
  bool made, registered;
};

struct ptperf_shm {
  enum ptperf_shm_kind kind; /* NONE: nothing set up (a zeroed struct) */
  int device;
  struct ptperf_cuda *cuda;  /* owned; CUDA only */
  struct ptperf_shm_region in, out;
  size_t input_bytes;        /* one request's inputs, back to back */
  size_t n_requests;
  size_t output_bytes;       /* per output */
};

/* Makes and fills the regions and registers them with the server as
 * "ptperf_in" and "ptperf_out" (the server must run with
 * --allow-client-shm=true). BYTES inputs are not supported (INVALID_ARG);
 * for CUDA, a runtime or device that is missing is UNAVAILABLE with
 * lib/cuda.h's message. On error nothing is left behind. */
enum pts_status ptperf_shm_setup(const struct ptperf_addr *a, const struct ptperf_model *m,
                                 const struct ptperf_shm_options *o, struct ptperf_shm *out,
                                 struct pts_error *err);

/* A complete HTTP/1.1 POST .../infer for request i whose inputs and
 * outputs are places in the regions. Caller frees *out with pts_free. */
enum pts_status ptperf_shm_request_build(const struct ptperf_model *m, const struct ptperf_shm *s,
                                         size_t i, const char *host, char **out, size_t *out_len,
                                         struct pts_error *err);

/* Unregisters the regions and frees their storage. NULL-safe,
 * idempotent. */
void ptperf_shm_teardown(const struct ptperf_addr *a, struct ptperf_shm *s);

#endif
