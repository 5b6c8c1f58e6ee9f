/* ensemble/ensemble.h — Triton's ensembles: a model with platform
 * "ensemble" whose `ensemble_scheduling.step`s run other models of the
 * repository as a graph (docs/ensembles.md, docs/internals/ensemble.md).
 *
 * An ensemble version is loaded like any model: it gets a scheduler (its
 * queue, its statistics, its request validation and response building),
 * whose backend is the one below. The ensemble backend's `execute` runs one
 * ensemble request: it puts the request's inputs in a table of ensemble
 * tensors, queues every step whose inputs are all there as a request of its
 * own on the composing model's scheduler (through the repository: the same
 * lookup, validation and queue as a client request), files each step's
 * outputs in the table when its answer comes, queues the steps that have
 * become runnable, and returns the ensemble's outputs when the last step is
 * done. Tensors move between steps as views that share the producer's
 * buffer by reference count: no copy.
 *
 * Layers: above the repository (it resolves and queues on composing models
 * through it), below the server, which creates the host and hands it to
 * the repository (pts_repository_set_ensemble): the repository passes it to
 * the backend as the model description's opaque `host`.
 *
 * Threading: the graph functions are pure. The backend's model_load runs on
 * a load thread; execute on the ensemble's instance threads
 * (PTS_ENSEMBLE_INSTANCES of them: so many ensemble requests run at once);
 * a step's completion on the composing model's instance thread, which only
 * files the outputs and wakes the ensemble's thread.
 */
#ifndef PTS_ENSEMBLE_ENSEMBLE_H
#define PTS_ENSEMBLE_ENSEMBLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend_api/backend.h"
#include "core/status.h"
#include "model_config.pb-c.h"

struct pts_repository;

/* How many ensemble requests of one ensemble version run at once; more
 * wait in its queue (and count as queue time in its statistics). */
enum { PTS_ENSEMBLE_INSTANCES = 16 };

/* What the ensemble backend needs from the server; owned by the server,
 * borrowed by the repository and every ensemble for the server's life. */
struct pts_ensemble_host {
  struct pts_repository *repo;
};

/* The backend that runs ensembles (name "ensemble"; not in the backend
 * registry: the repository uses it for configs with platform "ensemble"). */
extern const struct pts_backend pts_ensemble_backend;

/* The graph of an ensemble's steps, from its (completed) config alone:
 * which step writes and which steps read each ensemble tensor. */
struct pts_ensemble_graph;

/* Checks the steps of `cfg` (platform "ensemble") as Triton does, with
 * messages that name the ensemble, the step and the tensor: every ensemble
 * tensor is written by one step at most and never over an ensemble input;
 * every tensor a step reads is an ensemble input or written by a step;
 * every ensemble output is written; every ensemble input is read; the
 * steps form no cycle. On OK the caller frees *out with
 * pts_ensemble_graph_free; cfg must outlive it (names are borrowed). */
enum pts_status pts_ensemble_graph_build(const Inference__ModelConfig *cfg,
                                         struct pts_ensemble_graph **out, struct pts_error *err);
void pts_ensemble_graph_free(struct pts_ensemble_graph *g); /* NULL-safe */

/* The distinct model names the steps of ensemble config `cfg` use, in step
 * order; borrowed from cfg. Writes at most `cap` and returns the count. */
size_t pts_ensemble_composing_models(const Inference__ModelConfig *cfg, const char **names,
                                     size_t cap);

#endif
