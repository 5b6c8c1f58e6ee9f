/* core/name.h — names that end up as one path component.
 *
 * Model names are directory names of a repository and file names in a config
 * (default_model_filename) are joined to a version directory, so a name with
 * '/' or '..' could reach outside the repository (".." up, "/" down). Every
 * place that takes such a name from a client or a config refuses these
 * before using it; the checks are here so HTTP, gRPC and the config loader
 * refuse the same names with the same words.
 *
 * Threading: pure functions; thread-safe.
 */
#ifndef PTS_CORE_NAME_H
#define PTS_CORE_NAME_H

#include <stdbool.h>

#include "core/status.h"

/* A safe name: non-empty, no '/', no '\\', no "..", no control characters. */
bool pts_name_is_safe(const char *name);

/* OK, or INVALID_ARG "invalid <what> '<name>': ..." (`what` e.g. "model
 * name"). NULL is treated as empty. */
enum pts_status pts_name_check(const char *what, const char *name, struct pts_error *err);

#endif
