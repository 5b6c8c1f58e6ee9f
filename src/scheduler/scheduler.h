/* scheduler/scheduler.h — the queue and the instance threads of one model
 * version.
 *
 * Each loaded model version has one scheduler: a FIFO of validated requests
 * and one thread per backend instance. An instance thread takes a batch from
 * the queue, lays the inputs out the way the backend wants them (config
 * order, `reshape` applied, zero copy), runs the backend, checks and maps the
 * outputs back to the config's dims, and answers each request through its
 * `done` callback with views of the output buffers.
 *
 * Today a batch is one request. The dynamic batcher (preferred sizes, queue
 * delay, priorities, timeouts) lives in this module's batch-forming step, so
 * it can be added without touching the repository, the server or backends.
 *
 * Threading: pts_scheduler_create/destroy run on the repository's load
 * thread; enqueue and wait_idle may be called from any thread.
 */
#ifndef PTS_SCHEDULER_SCHEDULER_H
#define PTS_SCHEDULER_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"
#include "server/server.h"

struct pts_scheduler;

struct pts_scheduler_params {
  const char *model_name; /* borrowed; must outlive the scheduler */
  int64_t version;
  const Inference__ModelConfig *config; /* borrowed; must outlive the scheduler */
  const struct pts_backend *backend;
  void *model_state; /* the backend's, borrowed */
  size_t n_instances;
  const struct pts_backend_instance_desc *instances; /* copied during create */
};

/* Creates every instance through the backend and starts one thread per
 * instance. On failure nothing is left behind (instances already created are
 * destroyed) and err names the instance that failed. Caller frees *out with
 * pts_scheduler_destroy. */
enum pts_status pts_scheduler_create(const struct pts_scheduler_params *p,
                                     struct pts_scheduler **out, struct pts_error *err);

/* Queues an already validated request. On OK the scheduler owns `req` and the
 * model reference `model` (one reference, released after req->done has been
 * called); `batch_size` is what pts_validate_request found. On error (the
 * scheduler is shutting down: UNAVAILABLE) the caller keeps both. */
enum pts_status pts_scheduler_enqueue(struct pts_scheduler *s, struct pts_infer_request *req,
                                      int64_t batch_size, struct pts_model *model,
                                      struct pts_error *err);

/* Waits until no request is queued or running, or until `deadline_ns`
 * (pts_now_ns clock; 0 = no limit). Returns the number still outstanding. */
size_t pts_scheduler_wait_idle(struct pts_scheduler *s, uint64_t deadline_ns);

/* Stops taking requests, lets the threads finish what is queued, joins them
 * and destroys the instances. NULL-safe. */
void pts_scheduler_destroy(struct pts_scheduler *s);

/* Maps a concrete shape between two config views of one tensor: `actual`
 * follows `from` (config dims, -1 = any), the result follows `to`. Used for
 * `reshape` in both directions (input: dims → reshape.shape; output:
 * reshape.shape → dims). Each -1 of `to` takes the value of the matching -1
 * of `from`; when their counts differ, a single -1 of `to` is inferred from
 * the element count. Returns INVALID_ARG when the shapes can not correspond.
 * Neither side includes the batch dimension. */
enum pts_status pts_scheduler_map_shape(const int64_t *from, size_t n_from, const int64_t *to,
                                        size_t n_to, const struct pts_shape *actual,
                                        struct pts_shape *out, struct pts_error *err);

#endif
