/* scheduler/warmup.h — model_warmup: sample requests run on every instance
 * before its model is READY.
 *
 * TorchScript's profiling executor, cuDNN's algorithm search and CUDA's lazy
 * module loading make the first executions of a model slow; a server that
 * answers "ready" before paying that cost hands it to its first users.
 * Warmup runs the config's samples (zero_data, random_data or
 * input_data_file from <model>/warmup/, replicated to batch_size, `count`
 * times) through the instance exactly as a real batch would reach it
 * (config order, reshape applied, batch dimension leading).
 *
 * Threading: runs on the thread that creates the instance, before the
 * instance's own thread starts taking requests.
 */
#ifndef PTS_SCHEDULER_WARMUP_H
#define PTS_SCHEDULER_WARMUP_H

#include "backend_api/backend.h"
#include "core/status.h"
#include "model_config.pb-c.h"

/* Runs every model_warmup entry of `cfg` on one instance. `model_dir` is
 * where warmup/ lives. A failure (bad data file, an execute error) makes
 * the instance, and so the model, fail to load; err names the warmup, the
 * input and the instance. No warmup entries: returns OK at once. */
enum pts_status pts_warmup_run(const Inference__ModelConfig *cfg, const char *model_name,
                               const char *model_dir, const struct pts_backend *backend,
                               void *instance_state, const char *instance_name,
                               struct pts_error *err);

#endif
