/* repository/repository.h — the model repositories on disk and the models
 * loaded from them.
 *
 * pts_repository_create scans every --model-repository directory, picks the
 * versions each model's version_policy selects, and loads them: config,
 * backend, instances, scheduler. A model that fails anywhere becomes
 * UNAVAILABLE with the reason kept (Triton's "<Code>: <message>" form) and
 * the others load regardless. Models (struct pts_model, declared in
 * server/server.h) are reference counted: the repository holds one reference
 * per version, every request and every frontend lookup holds its own.
 *
 * Threading: create and destroy run on the main thread (which is the load
 * thread: backends see model_load/instance_create there). After create the
 * set of models is fixed, so every lookup below is lock-free and may be
 * called from any thread; model states are atomic. (Explicit load/unload, a
 * later issue, will add a lock around the table.)
 */
#ifndef PTS_REPOSITORY_REPOSITORY_H
#define PTS_REPOSITORY_REPOSITORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "scheduler/scheduler.h"
#include "server/server.h"

struct pts_repository;

/* One model name: its versions ascending. A model whose config failed, that
 * has no version under its policy, or that appears in two repositories has a
 * single UNAVAILABLE entry with version -1 (or, for a bad config, the
 * version the default policy would have served). */
struct pts_repository_model {
  const char *name;            /* borrowed from the repository */
  size_t n_versions;           /* >= 1 */
  struct pts_model **versions; /* the repository's references; borrowed */
};

/* Scans and loads. Fails only when a repository directory can not be read;
 * model failures are kept in the models' states. Caller frees *out with
 * pts_repository_destroy. */
enum pts_status pts_repository_create(const char *const *paths, size_t n_paths,
                                      struct pts_repository **out, struct pts_error *err);

/* Unloads every model (each scheduler finishes what is queued first) and
 * drops the repository's references. NULL-safe. */
void pts_repository_destroy(struct pts_repository *r);

/* Models sorted by name. Borrowed until pts_repository_destroy. */
size_t pts_repository_count(const struct pts_repository *r);
const struct pts_repository_model *pts_repository_at(const struct pts_repository *r, size_t i);
/* NULL when no model has this name. */
const struct pts_repository_model *pts_repository_find(const struct pts_repository *r,
                                                       const char *name);

/* Whether any model or version failed to load. */
bool pts_repository_any_failed(const struct pts_repository *r);

/* ---- model internals the server core needs (not for frontends) ---- */

/* Adds a reference; returns m. */
struct pts_model *pts_model_retain(struct pts_model *m);
/* The model's scheduler; NULL unless READY. Borrowed while a reference is held
 * and the model has not been unloaded. */
struct pts_scheduler *pts_model_scheduler(const struct pts_model *m);

#endif
