/* repository/params.c — the parameters of a load (repository/types.h). */
#include <string.h>

#include "core/alloc.h"
#include "repository/types.h"

enum pts_status pts_load_params_add_file(struct pts_load_params *p, const char *path,
                                         uint8_t *data, size_t size, struct pts_error *err) {
  struct pts_load_file *grown = pts_realloc(p->files, (p->n_files + 1) * sizeof *grown);
  char *copy = grown ? pts_strdup(path) : NULL;
  if (!copy) {
    if (grown) p->files = grown;
    pts_free(data);
    return pts_error_set(err, PTS_NOMEM, "out of memory reading file override '%s'", path);
  }
  p->files = grown;
  p->files[p->n_files++] = (struct pts_load_file){.path = copy, .data = data, .size = size};
  return PTS_OK;
}

void pts_load_params_clear(struct pts_load_params *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_files; i++) {
    pts_free(p->files[i].path);
    pts_free(p->files[i].data);
  }
  pts_free(p->files);
  pts_free(p->config);
  memset(p, 0, sizeof *p);
}
