/* backends/pytorch/cuda_shm.h — the CUDA operations of the CUDA
 * shared-memory extension, provided by the pytorch backend because its
 * LibTorch is what brings the CUDA runtime (see cuda_shm.c).
 *
 * Threading: thread-safe.
 */
#ifndef PTS_BACKENDS_PYTORCH_CUDA_SHM_H
#define PTS_BACKENDS_PYTORCH_CUDA_SHM_H

#include "shm/shm.h"

/* The operations, or NULL in a build without CUDA (PTS_WITH_CUDA unset).
 * Static: never freed. */
const struct pts_shm_cuda_ops *pts_pytorch_cuda_shm_ops(void);

#endif
