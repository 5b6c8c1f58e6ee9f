/* trace/nvtx.h — NVTX ranges for Nsight Systems, per request and per batch.
 *
 * Compiled in only when the build has the CUDA toolkit's header-only NVTX3
 * (CMake defines PTS_WITH_NVTX in CUDA builds); elsewhere every function is
 * an empty stub. Even when compiled in, ranges are off until the server runs
 * with PTSERVE_NVTX=1 in its environment (read once), so a production
 * server pays one branch per call.
 *
 * Ranges: "<model> request <trace-or-seq id>" from enqueue to completion
 * (a start/end range: it begins and ends on different threads), and
 * "<model> batch of <n> (size <b>)" pushed and popped on the instance thread
 * around the backend's execute.
 *
 * Threading: thread-safe (NVTX is).
 */
#ifndef PTS_TRACE_NVTX_H
#define PTS_TRACE_NVTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether ranges are emitted (compiled in and PTSERVE_NVTX=1). */
bool pts_nvtx_enabled(void);

/* Starts a request range; returns its id (0 when off). */
uint64_t pts_nvtx_request_begin(const char *model, uint64_t seq);
/* Ends it (0 is ignored). */
void pts_nvtx_request_end(uint64_t range);

/* Pushes / pops the batch range on the calling thread. */
void pts_nvtx_batch_push(const char *model, size_t n_requests, int64_t batch_size);
void pts_nvtx_batch_pop(void);

#endif
