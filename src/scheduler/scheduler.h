/* scheduler/scheduler.h — the queue, the dynamic batcher and the instance
 * threads of one model version.
 *
 * Each loaded model version has one scheduler: a queue of validated requests
 * (priority levels and queue policies, queue.h) and one thread per backend
 * instance. A free instance thread forms the next batch (dynamic_batching:
 * preferred sizes, max queue delay; otherwise one request), gathers the
 * inputs into one tensor per input (assemble.h: one copy, none for a single
 * request; config order, `reshape` applied), runs the backend, checks and
 * maps the outputs back to the config's dims, splits them into per-request
 * slices that share the batch buffers, and answers each request through its
 * `done` callback. With preserve_ordering, responses leave in arrival order.
 * A model with sequence_batching is batched by the sequence batcher
 * (sequence.h) instead of the queue.
 * Statistics (stats.h) are kept at every step.
 *
 * Pipelined instances (a backend with execute_begin/execute_end, the
 * pytorch backend's CUDA instances): the thread begins the next batch
 * before it ends the one on the device, at most two at once, when the
 * batcher hands a full one out without waiting. Only with PTSERVE_PIPELINE=1
 * (read when the scheduler is created): off by default, as it measured
 * slower on an H100 (docs/gpu.md).
 *
 * Test hook: the environment variable PTSERVE_DELAY_SCHEDULER=N (read when
 * the scheduler is created) holds every model's queue until N requests are
 * queued, then lets it run normally — like Triton's
 * TRITONSERVER_DELAY_SCHEDULER, so batching tests need no timing. Never set
 * it in production.
 *
 * Layers: the scheduler knows nothing above it. What a queued request must
 * keep alive (its model version, in the repository) is an opaque `hold`
 * that the scheduler gives back through the creator's `release_hold`
 * callback once the request has been answered.
 *
 * Threading: pts_scheduler_create/destroy run on the repository's load
 * thread; enqueue, wait_idle and stats may be called from any thread.
 * Run to completion: when a model whose instances may be lent (KIND_CPU
 * ones, and those the backend's lendable allows: a CUDA instance of the
 * pytorch backend) has an idle instance and nothing
 * queued, enqueue runs the request on the calling thread, as that
 * instance's thread would have (docs/internals/scheduler.md), so the
 * request's done callback may run before enqueue returns.
 */
#ifndef PTS_SCHEDULER_SCHEDULER_H
#define PTS_SCHEDULER_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "backend_api/backend.h"
#include "core/status.h"
#include "model_config.pb-c.h"
#include "scheduler/request.h"
#include "scheduler/stats.h"

struct pts_scheduler;

struct pts_scheduler_params {
  const char *model_name; /* borrowed; must outlive the scheduler */
  int64_t version;
  const Inference__ModelConfig *config; /* borrowed; must outlive the scheduler */
  /* What the backend runs, when it differs from `config`: a model with
   * sequence_batching takes control inputs and states after its own inputs
   * and gives states back after its outputs (config/model_config_sequence.h).
   * NULL = config. Borrowed; must outlive the scheduler. */
  const Inference__ModelConfig *exec_config;
  const struct pts_backend *backend;
  void *model_state; /* the backend's, borrowed */
  size_t n_instances;
  const struct pts_backend_instance_desc *instances; /* copied during create */
  const char *model_dir; /* borrowed during create: where model_warmup's warmup/ and the
                            outputs' label files (classification) live */
  /* Gives back the `hold` of a request (pts_scheduler_enqueue) after its
   * done callback has returned; NULL when holds need no release. Called on
   * an instance thread; it must not call into this scheduler. */
  void (*release_hold)(void *hold);
};

/* Creates every instance through the backend, runs the config's
 * model_warmup on each (scheduler/warmup.h), and starts one thread per
 * instance. On failure nothing is left behind (instances already created are
 * destroyed) and err names the instance that failed. Caller frees *out with
 * pts_scheduler_destroy. */
enum pts_status pts_scheduler_create(const struct pts_scheduler_params *p,
                                     struct pts_scheduler **out, struct pts_error *err);

/* Queues an already validated request (or runs it at once on this thread:
 * run to completion, above). On OK the scheduler owns `req` and
 * `hold` (opaque; given to params.release_hold after req->done has been
 * called; may be NULL); `batch_size` is what pts_validate_request found. The request's
 * `priority` picks its level and `timeout_us` may shorten its queue timeout
 * (queue.h). On error the caller keeps both: UNAVAILABLE when the scheduler
 * is shutting down, or "model 'm' version v: Exceeds maximum queue size: ..."
 * when the level is full at its max_queue_size or the server's default cap
 * (core/overload.h; counted as a REJECTED failure in the statistics). */
enum pts_status pts_scheduler_enqueue(struct pts_scheduler *s, struct pts_infer_request *req,
                                      int64_t batch_size, void *hold, struct pts_error *err);

/* Copies this model version's statistics (stats.h) into *out, with
 * `pending` (requests queued now) and `version` filled and `name` NULL.
 * Caller clears *out with pts_model_stats_clear. */
enum pts_status pts_scheduler_stats(struct pts_scheduler *s, struct pts_model_stats *out,
                                    struct pts_error *err);

/* Waits until no request is queued or running, or until `deadline_ns`
 * (pts_now_ns clock; 0 = no limit). Returns the number still outstanding.
 * Releases the PTSERVE_DELAY_SCHEDULER hold, and from now on releases
 * every open sequence with nothing queued (so backlogged sequences run), so
 * a draining server never waits for requests that will not come: call it
 * only once the caller sends no more requests. */
size_t pts_scheduler_wait_idle(struct pts_scheduler *s, uint64_t deadline_ns);

/* Stops taking requests, lets the threads finish what is queued, joins them
 * and destroys the instances. NULL-safe. */
void pts_scheduler_destroy(struct pts_scheduler *s);

#endif
