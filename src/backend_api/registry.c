/* backend_api/registry.c — the backends compiled into this binary.
 * A table, not a plugin loader: ptserve ships its backends, and a fixed list
 * keeps start-up and the failure modes simple. */
#include <stdio.h>
#include <string.h>

#include "backend_api/backend.h"

extern const struct pts_backend pts_identity_backend;
#ifdef PTS_WITH_PYTORCH
extern const struct pts_backend pts_pytorch_backend;
#endif

static const struct pts_backend *const backends[] = {
    &pts_identity_backend,
#ifdef PTS_WITH_PYTORCH
    &pts_pytorch_backend,
#endif
};

const struct pts_backend *pts_backend_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (strcmp(backends[i]->name, name) == 0) return backends[i];
  return NULL;
}

void pts_backend_list(char *out, size_t out_size) {
  size_t used = 0;
  if (out_size == 0) return;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof backends / sizeof backends[0] && used < out_size; i++) {
    int n = snprintf(out + used, out_size - used, "%s'%s'", i ? ", " : "", backends[i]->name);
    if (n < 0) return;
    used += (size_t)n;
  }
}

const struct pts_shm_cuda_ops *pts_backend_cuda_shm_ops(void) {
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
    const struct pts_shm_cuda_ops *ops =
        backends[i]->cuda_shm_ops ? backends[i]->cuda_shm_ops() : NULL;
    if (ops) return ops;
  }
  return NULL;
}
