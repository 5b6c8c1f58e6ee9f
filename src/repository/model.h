/* repository/model.h — one version of one model (struct pts_model): its
 * lifecycle from LOADING to READY to UNLOADING to UNAVAILABLE, and the
 * reference count that lets a version be unloaded without dropping a
 * request. Private to src/repository/ (the layers above see the handle
 * and its accessors through repository/types.h).
 *
 * References. The repository's table holds one per version record; every
 * request routed to the version holds one from lookup until after its done
 * callback; frontends hold one while they read the config. Unloading
 * (pts_model_unload) is separate from freeing: it first makes sure nothing
 * but the named owners holds a reference — requests already accepted finish
 * normally — then destroys the scheduler and the backend's model. The last
 * pts_model_release only frees memory, so it is safe on any thread.
 *
 * Threading: pts_model_new/start/unload run on a load thread (the
 * repository's caller: never an event loop). State reads are atomic; the
 * reason is read and written under the model's own small lock, so the index
 * may copy it while a load thread changes it.
 */
#ifndef PTS_REPOSITORY_MODEL_H
#define PTS_REPOSITORY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "repository/types.h"
#include "scheduler/scheduler.h"

/* A private directory holding the `file:` overrides of one load; removed
 * when the last version loaded from it is unloaded. */
struct pts_override_dir;

/* Writes the files into a new private directory (mode 0700 under $TMPDIR,
 * default /tmp). Each path must be relative, its components safe names
 * (core/name.h); a path given twice is refused. Caller drops it with
 * pts_override_dir_release. */
enum pts_status pts_override_dir_create(const char *model, const struct pts_load_file *files,
                                        size_t n_files, struct pts_override_dir **out,
                                        struct pts_error *err);
/* The directory; borrowed while a reference is held. */
const char *pts_override_dir_path(const struct pts_override_dir *d);
struct pts_override_dir *pts_override_dir_retain(struct pts_override_dir *d);
/* The last release removes the directory tree. NULL-safe. */
void pts_override_dir_release(struct pts_override_dir *d);

/* A new version in state LOADING, with one reference (the caller's). NULL
 * when out of memory. */
struct pts_model *pts_model_new(const char *name, int64_t version);

/* Takes ownership of the version's completed config (set once, before
 * pts_model_start). */
void pts_model_set_config(struct pts_model *m, Inference__ModelConfig *cfg);

/* Loads the version from `model_dir` (borrowed during the call): the
 * backend's model, one instance per planned slot, warmup, the scheduler
 * (`override`, when not NULL, gets a reference that the model keeps until
 * it is unloaded). An ensemble's config runs on `ensemble`'s backend. The state stays LOADING: the
 * repository makes the version READY when it publishes it. On failure nothing is left loaded. */
/* How a version whose config has platform "ensemble" runs: the ensemble
 * backend and its host, both from the layer above (the repository's
 * pts_repository_set_ensemble); borrowed. */
struct pts_model_ensemble {
  const struct pts_backend *backend; /* NULL: ensembles can not load */
  void *host;
};

enum pts_status pts_model_start(struct pts_model *m, const char *model_dir,
                                struct pts_override_dir *override,
                                const struct pts_model_ensemble *ensemble, struct pts_error *err);

/* Marks the version UNAVAILABLE because its load failed, with Triton's
 * reason form "<Code>: <message>" ("Invalid argument: ..."), and logs it. */
void pts_model_fail(struct pts_model *m, const struct pts_error *why);
/* UNAVAILABLE because tritonserver's poll of the repository would not
 * even list it (a duplicated name; a missing config file when configs are
 * not completed): `reason` as it is, as Triton gives such reasons bare
 * ("model appears in two or more repositories", which clients compare),
 * and, like a version that is absent, it does not make the server unready
 * (pts_model_failed is false). */
void pts_model_poll_failed(struct pts_model *m, const char *reason);

/* A version the policy names but no directory holds: UNAVAILABLE with the
 * reason, logged as an error (as Triton logs it), but not a failure: the
 * other versions load and serve, and readiness does not wait for it. */
void pts_model_absent(struct pts_model *m, const struct pts_error *why);

/* Marks a version that is no longer wanted UNAVAILABLE with `reason`
 * ("unloaded"), not counted as a failure. */
void pts_model_mark_unloaded(struct pts_model *m, const char *reason);

void pts_model_set_state(struct pts_model *m, enum pts_model_state s);

/* Whether an UNAVAILABLE version got there by failing to load (as opposed
 * to being unloaded). */
bool pts_model_failed(const struct pts_model *m);

/* Whether the version has a running scheduler (it was started and not yet
 * unloaded). */
bool pts_model_loaded(const struct pts_model *m);

/* Unloads a started version: waits until no request is queued or running
 * on it and until only `owners` references are left (those the caller
 * accounts for: its own, the table's), then destroys the scheduler and the
 * backend's model and marks it UNAVAILABLE "unloaded" (a failed version
 * keeps its state and reason). Requests accepted before the version left
 * the routing table finish normally; the caller must have removed it from
 * routing (state not READY) first, so no new one can come. owners < 0:
 * only wait for the queue (at shutdown, when nothing routes any more and a
 * holder of a reference only reads). Safe on a version that was never
 * started. */
void pts_model_unload(struct pts_model *m, int owners);

#endif
