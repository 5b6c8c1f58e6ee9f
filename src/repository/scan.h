/* repository/scan.h — what the file system says about model repositories:
 * which directories are models, which subdirectories are versions, and a
 * fingerprint of a model's files for poll mode. Private to
 * src/repository/.
 *
 * Threading: pure functions over the file system; thread-safe. They read
 * files, so they run on server threads only (never an event loop).
 */
#ifndef PTS_REPOSITORY_SCAN_H
#define PTS_REPOSITORY_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* "a" + "/" + "b" in a new string (pts_free), or NULL. */
char *pts_scan_path_join(const char *a, const char *b);

bool pts_scan_is_dir(const char *path);

/* The version directories of a model, ascending, into a new array
 * (pts_free). Triton's rule: a positive decimal number without a leading
 * zero; anything else is ignored, and with `warn` a directory ignored for
 * a leading zero or for not being a number is a warning in Triton's words
 * (warmup, initial_state and configs are the model's own folders, not
 * versions). err may be NULL. */
enum pts_status pts_scan_versions(const char *dir, bool warn, int64_t **out, size_t *n,
                                  struct pts_error *err);

/* A model directory holds config.pbtxt or at least one version directory. */
bool pts_scan_is_model(const char *dir);

/* A hash of the names, types, sizes, inodes and modification times of
 * everything below `dir` (8 levels), in name order: it changes when any
 * file of the model changes. A change detector, not a defence. */
uint64_t pts_scan_fingerprint(const char *dir);

/* A model directory found in a repository. */
struct pts_scan_candidate {
  char *name;       /* owned */
  char *dir;        /* owned */
  const char *repo; /* borrowed: the repository path given */
};

/* Appends the model directories of `repo` to *list (growing it; *n used,
 * *cap allocated). INVALID_ARG when the repository can not be read. */
enum pts_status pts_scan_repository(const char *repo, struct pts_scan_candidate **list, size_t *n,
                                    size_t *cap, struct pts_error *err);
void pts_scan_candidates_free(struct pts_scan_candidate *c, size_t n);
/* qsort order: by name, then directory. */
int pts_scan_cmp_candidate(const void *a, const void *b);

#endif
