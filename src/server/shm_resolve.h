/* server/shm_resolve.h — turns the shared-memory places of a request into views.
 *
 * Frontends only record where a tensor lives (struct pts_shm_place in
 * scheduler/request.h); the server calls pts_shm_resolve before validating
 * the request, so both protocols share one implementation and one set of
 * messages.
 *
 * Threading: thread-safe (the registry locks itself); the request belongs
 * to the calling thread.
 */
#ifndef PTS_SERVER_SHM_RESOLVE_H
#define PTS_SERVER_SHM_RESOLVE_H

#include <stdbool.h>

#include "core/status.h"
#include "scheduler/request.h"
#include "shm/shm.h"

/* For every input placed in shared memory: inputs[i] becomes a view of the
 * region (data, byte_size = the place's byte size, mem/device, and a buf
 * reference that keeps the region in use until the request is freed). An
 * input in device memory that the backend can not read (`device_inputs`
 * false), and any BYTES input in device memory, is copied to host memory
 * once instead. For every requested output placed in shared memory:
 * shm_target gets a view of its place. On error the request keeps what was
 * resolved so far (pts_infer_request_free releases it) and err names the
 * tensor. `r` may be NULL only for requests without shared memory. */
enum pts_status pts_shm_resolve(struct pts_shm_registry *r, struct pts_infer_request *req,
                                bool device_inputs, struct pts_error *err);

#endif
