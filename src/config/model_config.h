/* config/model_config.h — a model's config.pbtxt, loaded, completed and
 * validated as Triton does, and rendered back as Triton's /config JSON.
 *
 * The config is the protobuf-c message generated from proto/model_config.proto
 * (`Inference__ModelConfig`); every other module reads it through that struct.
 *
 * Threading: pure functions; a loaded config is immutable and may be read
 * from any thread while its model lives.
 */
#ifndef PTS_CONFIG_MODEL_CONFIG_H
#define PTS_CONFIG_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "model_config.pb-c.h"

/* Parses config.pbtxt text (protobuf text format) into a new ModelConfig.
 * `source` names the file in error messages ("<source>:<line>:<col>: ...").
 * Caller frees *out with pts_model_config_free. */
enum pts_status pts_model_config_parse(const char *text, size_t len, const char *source,
                                       Inference__ModelConfig **out, struct pts_error *err);

/* Reads <model_dir>/config.pbtxt (an absent file gives an empty config, as
 * Triton allows), then completes and validates it (see below). With a
 * custom config name set (--model-config-name), <model_dir>/configs/
 * <name>.pbtxt is read instead where it exists, as in tritonserver. */
enum pts_status pts_model_config_load(const char *model_dir, const char *model_name,
                                      Inference__ModelConfig **out, struct pts_error *err);

/* --model-config-name: NULL or "" for none. Set once at start-up, before
 * any model loads (it is read without a lock). `name` must outlive the
 * loads (an argv string). */
void pts_model_config_set_custom_name(const char *name);

/* --disable-auto-complete-config (and the deprecated --strict-model-config
 * =true): off, every model must have its config file (an absent one is
 * NOT_FOUND, in Triton's words), and backends complete nothing from the model
 * file (aoti.h); the core's defaults (name, platform, instance groups, ...)
 * still apply, as in Triton. On by default. Set once at start-up, before
 * any model loads (read without a lock). */
void pts_model_config_set_autofill(bool on);
bool pts_model_config_autofill(void);

/* A config given as JSON text (the `config` parameter of a repository load,
 * protocol-facts §1.12: protobuf's JSON mapping, pbjson.h), then completed
 * and validated like a config.pbtxt read from `model_dir` for `model_name`.
 * Errors name the parameter and the field ("load config of model 'm': field
 * 'max_batch_size': ..."). Caller frees *out with pts_model_config_free. */
enum pts_status pts_model_config_from_json(const char *json, size_t len, const char *model_dir,
                                           const char *model_name, Inference__ModelConfig **out,
                                           struct pts_error *err);

/* Triton's core autofill and normalization (protocol-facts §4.1, §4.3): name,
 * backend/platform/default_model_filename, version_policy, instance_group,
 * dynamic-batching preferred sizes, pinned-memory flags; then validation
 * (§4.1, §4.4, §3.3) and rejection of fields ptserve does not support, each
 * error naming the field. `model_dir` is used to probe version directories
 * for model files when backend and platform are both empty. */
enum pts_status pts_model_config_complete(Inference__ModelConfig *cfg, const char *model_dir,
                                          const char *model_name, struct pts_error *err);

/* Checks again what depends on the inputs and outputs — their names,
 * types and dims, and the warmups that feed them — once a backend has
 * completed them from the model file (backend.h, `completable`). */
enum pts_status pts_model_config_check_completed(const Inference__ModelConfig *cfg,
                                                 struct pts_error *err);

/* Settles instance-group devices once the backend has said how many GPUs
 * it can use (CUDA devices, or 1 for MPS), as Triton's core does: KIND_AUTO
 * becomes KIND_GPU when every listed GPU (any GPU when none is listed)
 * exists, else KIND_CPU; a KIND_GPU group without `gpus` gets every GPU.
 * KIND_GPU on a host without GPUs stays KIND_GPU: the backend falls back to
 * the CPU with a warning. /config shows the resolved kinds. */
enum pts_status pts_model_config_resolve_devices(Inference__ModelConfig *cfg, int gpu_count,
                                                 struct pts_error *err);

/* Whether the config is an ensemble's (platform "ensemble"). NULL-safe. */
bool pts_model_config_is_ensemble(const Inference__ModelConfig *cfg);

void pts_model_config_free(Inference__ModelConfig *cfg);

/* The config as Triton's /config JSON (protocol-facts §1.10). Returns a new
 * NUL-terminated string (pts_free), or NULL on allocation failure. */
char *pts_model_config_to_json(const Inference__ModelConfig *cfg);

/* parameters[key].string_value, or NULL when absent. Borrowed from cfg. */
const char *pts_model_config_param(const Inference__ModelConfig *cfg, const char *key);

/* The input or output the config declares under `name`, or NULL. Borrowed
 * from cfg. */
const Inference__ModelInput *pts_model_config_input(const Inference__ModelConfig *cfg,
                                                    const char *name);
const Inference__ModelOutput *pts_model_config_output(const Inference__ModelConfig *cfg,
                                                      const char *name);

/* Parses a boolean parameter the way Triton's backends do: true/on/1,
 * false/off/0, case-insensitive. Absent → `dflt`. A malformed value is an
 * INVALID_ARG naming the key. */
enum pts_status pts_model_config_param_bool(const Inference__ModelConfig *cfg, const char *key,
                                            bool dflt, bool *out, struct pts_error *err);
/* Integer parameter; absent → `dflt`. */
enum pts_status pts_model_config_param_int(const Inference__ModelConfig *cfg, const char *key,
                                           long dflt, long *out, struct pts_error *err);

#endif
