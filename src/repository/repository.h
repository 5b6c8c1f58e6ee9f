/* repository/repository.h — the model repositories on disk and the table of
 * model versions loaded from them: the routing table every request goes
 * through, and the operations that change it (load, reload, unload, poll).
 *
 * The table has one entry per model name the repositories hold (or a load
 * brought in with file overrides). Each entry keeps one record per version
 * it has seen (struct pts_model, repository/types.h): READY
 * versions serve; LOADING, UNLOADING and UNAVAILABLE ones are there for the
 * index and for clear errors. A load builds the new versions beside the
 * ones serving and swaps them in under the table lock, so a model never
 * goes without a READY version while a reload succeeds; a failed load
 * changes nothing that serves. Rules and states follow Triton
 * (docs/internals/repository.md).
 *
 * Threading: lookups (get, versions, snapshot, index, all_ready) may be
 * called from any thread; they take the table lock for a few pointer reads
 * and never block on a model or read a file. create, rescan, load, unload,
 * poll and destroy read the file system and may wait for requests: they
 * run on server threads (the main thread at start-up and shutdown, the
 * load and repository threads in between), never on an event loop. Loads
 * and unloads of one model are serialised; different models proceed in
 * parallel.
 */
#ifndef PTS_REPOSITORY_REPOSITORY_H
#define PTS_REPOSITORY_REPOSITORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "repository/types.h"
#include "scheduler/scheduler.h"

struct pts_repository;

/* Copies the paths and scans them for model directories; loads nothing.
 * Fails only when a repository directory can not be read. Caller frees *out
 * with pts_repository_destroy. */
enum pts_status pts_repository_create(const char *const *paths, size_t n_paths,
                                      struct pts_repository **out, struct pts_error *err);

/* --model-load-retry-count: a version whose load fails is loaded again, at
 * once, up to `n` more times before the load counts as failed (tritonserver's
 * ModelLifeCycle does the same). 0 (default): no retry. Set before the
 * first load. */
void pts_repository_set_load_retries(struct pts_repository *r, unsigned n);

/* Unloads every version (each scheduler finishes what is queued first) and
 * frees the table. No load or unload may be running. NULL-safe. */
void pts_repository_destroy(struct pts_repository *r);

/* Re-reads which model directories the repositories hold: new ones join
 * the table, vanished ones are marked absent (they keep serving until
 * unloaded). */
enum pts_status pts_repository_rescan(struct pts_repository *r, struct pts_error *err);

/* The names of the models found on disk, in name order (for loading every
 * model at start-up). Caller frees each and the array with pts_free. */
enum pts_status pts_repository_names(struct pts_repository *r, char ***names, size_t *n,
                                     struct pts_error *err);

/* ---- operations (server threads only) ---- */

/* Loads `name`, or reloads it. `params` (borrowed; NULL = none) may replace
 * config.pbtxt and supply the files. Looks for the model's directory again
 * first, so a model added after start-up can be loaded. Errors: NOT_FOUND
 * when no repository holds the model (and no files are given); otherwise
 * the load's failure as Triton words it ("load failed for model 'm':
 * version 1 is at UNAVAILABLE state: ..."). */
enum pts_status pts_repository_load(struct pts_repository *r, const char *name,
                                    const struct pts_load_params *params, struct pts_error *err);

/* Takes every version of `name` out of the routing table, waits for the
 * requests they accepted, and unloads them (UNAVAILABLE "unloaded").
 * NOT_FOUND when the name is unknown; a model that is not loaded is OK. */
enum pts_status pts_repository_unload(struct pts_repository *r, const char *name,
                                      struct pts_error *err);

/* Ensembles (ensemble/ensemble.h, above this layer): the backend that
 * runs configs with platform "ensemble" and the opaque host it is lent
 * (struct pts_backend_model_desc.host). Both borrowed for the repository's
 * life. Call once, before the first load; without it an ensemble fails to
 * load. */
void pts_repository_set_ensemble(struct pts_repository *r, const struct pts_backend *backend,
                                 void *host);

/* Loads `name` unless a version of it is READY already (checked under the
 * model's load lock, so a load running on another thread is waited for,
 * not repeated). For the composing models of an ensemble. Errors as
 * pts_repository_load. */
enum pts_status pts_repository_ensure_loaded(struct pts_repository *r, const char *name,
                                             struct pts_error *err);

/* Reads and completes the config `name` would load with now (`params`,
 * borrowed, may replace config.pbtxt), without loading anything: what an
 * ensemble's load must load first. Caller frees *out with
 * pts_model_config_free. */
enum pts_status pts_repository_read_config(struct pts_repository *r, const char *name,
                                           const struct pts_load_params *params,
                                           Inference__ModelConfig **out, struct pts_error *err);

/* What a poll of the repositories asks for. */
enum pts_repository_action_kind { PTS_REPOSITORY_LOAD, PTS_REPOSITORY_UNLOAD };
struct pts_repository_action {
  enum pts_repository_action_kind kind;
  char *name; /* owned (pts_free) */
};

/* Poll mode: rescans, then compares each model's files (names, sizes and
 * modification times of everything under its directory) with what its last
 * load saw. A new or changed model is to be (re)loaded, a vanished one that
 * still serves unloaded. A model with an action already queued is skipped
 * until its load or unload starts. Caller frees with
 * pts_repository_actions_free. */
enum pts_status pts_repository_poll(struct pts_repository *r,
                                    struct pts_repository_action **actions, size_t *n,
                                    struct pts_error *err);
void pts_repository_actions_free(struct pts_repository_action *a, size_t n);

/* ---- lookups (any thread) ---- */

/* A model version to serve (version < 0: the latest READY one), with the
 * messages of pts_server_model_get (server/server.h, which passes them
 * on). Caller releases *out. */
enum pts_status pts_repository_get(struct pts_repository *r, const char *name, int64_t version,
                                   bool any_state, struct pts_model **out, struct pts_error *err);

/* Whether `name` has a READY version now (version < 0: any version),
 * decided under the table lock. A reference from pts_repository_get can
 * not answer that: a reload replaces the record it holds, which turns
 * UNLOADING at the moment the new one becomes READY, so its state says
 * "not ready" of a model that never stopped being ready. NOT_FOUND, with
 * pts_repository_get's messages, for an unknown name or version. */
enum pts_status pts_repository_ready(struct pts_repository *r, const char *name, int64_t version,
                                     bool *ready, struct pts_error *err);

/* READY versions of `name`, ascending, into a new array (pts_free). */
enum pts_status pts_repository_ready_versions(struct pts_repository *r, const char *name,
                                              int64_t **versions, size_t *n,
                                              struct pts_error *err);

/* References to the version records of `name` (NULL: every model), in name
 * then version order; only READY ones when ready_only. NOT_FOUND for an
 * unknown name. Caller frees with pts_repository_snapshot_free. */
enum pts_status pts_repository_snapshot(struct pts_repository *r, const char *name,
                                        bool ready_only, struct pts_model ***models, size_t *n,
                                        struct pts_error *err);
void pts_repository_snapshot_free(struct pts_model **models, size_t n);

/* The index (struct pts_index_entry, repository/types.h) from the table as
 * it is. */
enum pts_status pts_repository_index(struct pts_repository *r, bool ready_only,
                                     struct pts_index_entry **entries, size_t *n,
                                     struct pts_error *err);

/* Strict readiness: no version is LOADING or failed (versions that were
 * unloaded, or are being unloaded, do not count). */
bool pts_repository_all_ready(struct pts_repository *r);

/* ---- model internals the server core needs (not for frontends) ---- */

/* Adds a reference; returns m. */
struct pts_model *pts_model_retain(struct pts_model *m);
/* The model's scheduler; NULL unless loaded. Borrowed while a reference is
 * held: an unload waits for every reference before it destroys it. */
struct pts_scheduler *pts_model_scheduler(const struct pts_model *m);
/* Queues a request that pts_validate_request accepted (batch_size is what
 * it found) on the version's scheduler. On OK the scheduler owns `req` and
 * the caller's reference to `m`, which it releases after req->done; on
 * error the caller keeps both: UNAVAILABLE when the version has no
 * scheduler or it is shutting down, or the scheduler's queue-full refusal
 * (pts_scheduler_enqueue). */
enum pts_status pts_model_enqueue(struct pts_model *m, struct pts_infer_request *req,
                                  int64_t batch_size, struct pts_error *err);

#endif
