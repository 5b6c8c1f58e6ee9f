/* config/model_config_sequence.h — `sequence_batching` in a model config:
 * its defaults, its validation, and the config the backend runs.
 *
 * A model with sequence_batching takes more tensors than its clients send:
 * one per control input (CONTROL_SEQUENCE_START/_END/_READY/_CORRID) and one
 * per implicit state (`state[].input_name`), and it gives back one more per
 * state (`state[].output_name`). Triton's PyTorch backend counts them among
 * forward()'s arguments (config inputs, then control inputs, then states;
 * triton-anchor §1.4). ptserve gives the backend an "execution config": the
 * model's config with those tensors appended to `input` and `output`, so a
 * backend binds them like any other tensor and needs to know nothing of
 * sequences. Clients, validation and /config see the model's own config.
 *
 * Threading: pure functions over configs the caller owns.
 */
#ifndef PTS_CONFIG_MODEL_CONFIG_SEQUENCE_H
#define PTS_CONFIG_MODEL_CONFIG_SEQUENCE_H

#include "core/status.h"
#include "model_config.pb-c.h"

/* Triton's defaults (protocol-facts §4.3): max_sequence_idle_microseconds
 * 0 → 1,000,000; no strategy → direct; oldest without preferred sizes →
 * [max_batch_size]. Then validation: control inputs (one control each,
 * false/true pairs of two values, CORRID data types, each kind once, names
 * unique and distinct from the inputs), states (names, data type, dims,
 * initial_state), and what ptserve does not do (iterative_sequence,
 * minimum_slot_utilization, STRING or variable-size states, model_warmup),
 * each error naming the field. A config without sequence_batching passes
 * untouched. */
enum pts_status pts_model_config_sequence_complete(Inference__ModelConfig *cfg,
                                                   struct pts_error *err);

/* The execution config of a model with sequence_batching (see above): a
 * deep copy of cfg whose `input` continues with one [1] tensor per control
 * input (its control's data type) and one tensor per state (state dims),
 * and whose `output` continues with one tensor per state output. Caller
 * frees *out with pts_model_config_free. */
enum pts_status pts_model_config_sequence_exec(const Inference__ModelConfig *cfg,
                                               Inference__ModelConfig **out,
                                               struct pts_error *err);

/* The data type a control input gives the model: INT32, FP32 or BOOL from
 * which false/true list is set, the control's data_type for CORRID. */
Inference__DataType pts_model_config_control_type(
    const Inference__ModelSequenceBatching__Control *c);

#endif
