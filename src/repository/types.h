/* repository/types.h — what the layers above the repository see of it: the
 * states of a model version, the reference-counted version handle and its
 * accessors, the parameters of a load and the entries of the index.
 *
 * Declared here, by the layer that owns them, so that dependencies point one
 * way: server → repository → scheduler → backend_api/core. server/server.h
 * includes this header and hands the same types to the frontends; nothing
 * in src/repository/ or below includes server/server.h
 * (docs/internals/repository.md, "Layers").
 *
 * Threading: the accessors may be called from any thread while the caller
 * holds a reference; pts_model_release from any thread (the last one only
 * frees memory). The load parameter functions are not shared between
 * threads: one owner builds and clears a pts_load_params.
 */
#ifndef PTS_REPOSITORY_TYPES_H
#define PTS_REPOSITORY_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "model_config.pb-c.h"

/* The state of one model version (the machine is drawn in
 * docs/internals/repository.md). Only READY versions take requests. */
enum pts_model_state {
  PTS_MODEL_UNKNOWN,     /* in a repository, never loaded (index only) */
  PTS_MODEL_READY,       /* serving */
  PTS_MODEL_UNAVAILABLE, /* unloaded, failed to load, or named but absent */
  PTS_MODEL_LOADING,     /* being loaded, nothing of it serves yet */
  PTS_MODEL_UNLOADING,   /* out of routing; finishing what it accepted */
};
const char *pts_model_state_name(enum pts_model_state s); /* "READY", ... */

struct pts_model; /* one version of one model; reference counted */

void pts_model_release(struct pts_model *m); /* NULL-safe */

const char *pts_model_name(const struct pts_model *m);
int64_t pts_model_version(const struct pts_model *m);
enum pts_model_state pts_model_state(const struct pts_model *m);
/* Copies the state's reason ("" when none) into buf, truncated to `size`;
 * returns its full length. A copy, because a load thread may change it. */
size_t pts_model_reason(const struct pts_model *m, char *buf, size_t size);
/* The completed config; borrowed while the reference is held. NULL only for
 * a model whose config failed to load. */
const Inference__ModelConfig *pts_model_config(const struct pts_model *m);

/* One entry of the repository index (model_repository extension,
 * protocol-facts §1.12): a known version of a model, or (version -1, state
 * UNKNOWN) a model of the repositories that has never been loaded. */
struct pts_index_entry {
  char *name;                 /* owned */
  int64_t version;            /* -1 when no version is known */
  enum pts_model_state state;
  char *reason;               /* owned, "" when none */
};

/* A `file:<version>/<name>` parameter of a load: one model file. */
struct pts_load_file {
  char *path;    /* owned; "<version>/<name>", relative to the model directory */
  uint8_t *data; /* owned (pts_free) */
  size_t size;
};

/* The parameters of a load request. */
struct pts_load_params {
  char *config;       /* owned; a ModelConfig as JSON that replaces config.pbtxt; NULL = none */
  size_t config_len;
  struct pts_load_file *files; /* owned; n_files entries */
  size_t n_files;
};
/* Adds a file (takes `data`, copies `path`); NOMEM leaves `data` freed. */
enum pts_status pts_load_params_add_file(struct pts_load_params *p, const char *path,
                                         uint8_t *data, size_t size, struct pts_error *err);
/* Frees everything and zeroes *p. NULL-safe. */
void pts_load_params_clear(struct pts_load_params *p);

#endif
