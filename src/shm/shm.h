/* shm/shm.h — the registry of client shared-memory regions: the system and
 * CUDA shared-memory extensions (protocol-facts §1.15), shared by the HTTP
 * and gRPC frontends.
 *
 * A client creates a POSIX shared-memory object (or a CUDA allocation),
 * registers it under a name, and then names the region, an offset and a
 * byte size instead of sending tensor bytes: inputs are read in place and
 * outputs are written there, so large tensors never cross the socket.
 *
 * System regions: registration shm_open()s the key, checks that offset +
 * byte_size lies inside the object, and mmap()s that range (read-write,
 * shared). The descriptor stays open, so every use re-checks with fstat()
 * that the object still covers the range: a client that shrinks the object
 * after registering gets an error instead of crashing the server with
 * SIGBUS. When a CUDA backend is present (pts_shm_cuda_ops) the mapping is
 * also pinned, so a GPU copies from it by DMA with no staging copy.
 *
 * CUDA regions: registration opens the client's cudaIpcMemHandle_t (64
 * bytes) on its device through the CUDA operations a CUDA-enabled backend
 * provides. Without them (a build without CUDA) every CUDA registration is
 * refused with a message saying so.
 *
 * Lifetime: a region is reference counted. The registry holds one
 * reference while the region is registered, and every view handed to a
 * request (pts_shm_acquire) holds one, so a region is never unmapped under
 * a request. Unregistering a region that requests are using succeeds, as
 * in tritonserver since 25.x (its QA, L0_shared_memory, checks it): the
 * region stays registered, listed and usable until its last view is
 * released, and is gone from then on (the next call into the registry
 * drops it). Releases up to 24.x refused instead, as ptserve did.
 * Unregistering a name that is not registered succeeds and does nothing,
 * as in Triton.
 *
 * Every offset and size a client gives is checked against the region
 * before any byte is touched (overflow included): nothing here, and no user
 * of a view, reads or writes past a region's end.
 *
 * Threading: every function is thread-safe (one mutex per registry; it is
 * never held while a request runs). Views may be released on any thread.
 */
#ifndef PTS_SHM_SHM_H
#define PTS_SHM_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/status.h"
#include "tensor/tensor.h"

struct pts_shm_registry;

enum pts_shm_kind { PTS_SHM_SYSTEM, PTS_SHM_CUDA };

/* Size of a cudaIpcMemHandle_t, the raw handle a CUDA registration sends. */
#define PTS_SHM_CUDA_HANDLE_SIZE 64

/* The CUDA runtime calls the registry needs, provided by a backend built
 * with CUDA (backend.h: cuda_shm_ops). Every function may be called from
 * any thread. */
struct pts_shm_cuda_ops {
  /* Opens `handle` (PTS_SHM_CUDA_HANDLE_SIZE bytes) on `device` and checks
   * that the allocation behind it holds at least `byte_size` bytes. On OK
   * *dev_ptr is the mapped device address; close it with `close`. */
  enum pts_status (*open)(const void *handle, int device, uint64_t byte_size, void **dev_ptr,
                          struct pts_error *err);
  void (*close)(void *dev_ptr, int device);
  /* Synchronous copies between host memory and device memory on `device`. */
  enum pts_status (*to_device)(void *dst, const void *src, size_t n, int device,
                               struct pts_error *err);
  enum pts_status (*to_host)(void *dst, const void *src, size_t n, int device,
                             struct pts_error *err);
  /* `count` copies from host memory into device memory of `device`
   * (sizes[i] bytes from srcs[i] to dsts[i]), only enqueued, with one
   * runtime call where the runtime has one: the sources must stay as they
   * are until `sync` on that device has returned. The arrays are the
   * caller's, read during the call. Both NULL, or neither. */
  enum pts_status (*to_device_batch)(void *const *dsts, const void *const *srcs,
                                     const size_t *sizes, size_t count, int device,
                                     struct pts_error *err);
  /* Waits until every copy enqueued on `device` has landed. */
  enum pts_status (*sync)(int device, struct pts_error *err);
  /* Pins host memory for DMA (page-aligned `addr`); false when it could not
   * (the region then works unpinned). */
  bool (*pin)(void *addr, size_t n);
  void (*unpin)(void *addr);
};

/* A new, empty registry. `enabled` = --allow-client-shm: when false every
 * registration, unregistration and use answers UNSUPPORTED with a message
 * naming the flag (status still answers, with no regions). `cuda` may be
 * NULL (no CUDA in this build); it is borrowed for the registry's life.
 * Returns NULL when out of memory. */
struct pts_shm_registry *pts_shm_registry_new(bool enabled, const struct pts_shm_cuda_ops *cuda);
/* Unregisters everything; regions still used by a view stay mapped until
 * their last view is released. NULL-safe. */
void pts_shm_registry_free(struct pts_shm_registry *r);

/* Whether CUDA regions can be registered (the cuda_shared_memory extension
 * is available). */
bool pts_shm_cuda_available(const struct pts_shm_registry *r);

/* System region `name` = bytes [offset, offset + byte_size) of the POSIX
 * shared-memory object `key`. Errors: ALREADY_EXISTS when the name is
 * registered (either kind); INVALID_ARG for an empty name or key, a zero
 * byte_size, a key that can not be opened (with the reason), a range
 * outside the object; UNSUPPORTED when disabled. */
enum pts_status pts_shm_register_system(struct pts_shm_registry *r, const char *name,
                                        const char *key, uint64_t offset, uint64_t byte_size,
                                        struct pts_error *err);

/* CUDA region `name` = the allocation behind `handle` (handle_len must be
 * PTS_SHM_CUDA_HANDLE_SIZE) on GPU `device`, byte_size bytes of it. Errors
 * as above, plus INVALID_ARG when this build has no CUDA or the handle can
 * not be opened. */
enum pts_status pts_shm_register_cuda(struct pts_shm_registry *r, const char *name,
                                      const void *handle, size_t handle_len, int64_t device,
                                      uint64_t byte_size, struct pts_error *err);

/* Unregisters region `name` of `kind` (a region of the other kind, or no
 * region of that name: OK, nothing happens), or every region of `kind`
 * when name is NULL or "". A region in use goes when its last view is
 * released (above). Fails only when shared memory is disabled. */
enum pts_status pts_shm_unregister(struct pts_shm_registry *r, enum pts_shm_kind kind,
                                   const char *name, struct pts_error *err);

/* One registered region, as the status endpoints report it. */
struct pts_shm_status {
  char *name;         /* owned */
  char *key;          /* owned; "" for CUDA regions */
  uint64_t offset;    /* 0 for CUDA regions */
  uint64_t byte_size;
  int64_t device;     /* CUDA device id; 0 for system regions */
};

/* The regions of `kind`, sorted by name (name NULL or "": all of them;
 * else just that one, NOT_FOUND when it is not registered or is of the
 * other kind, with Triton's words). Caller frees with pts_shm_status_free. */
enum pts_status pts_shm_status_get(struct pts_shm_registry *r, enum pts_shm_kind kind,
                                   const char *name, struct pts_shm_status **out, size_t *n,
                                   struct pts_error *err);
void pts_shm_status_free(struct pts_shm_status *s, size_t n); /* NULL-safe */

/* A view of bytes [offset, offset + byte_size) of region `name` (either
 * kind), for one tensor of a request. `what` names the tensor for messages
 * ("input 'INPUT0'"). On OK *view is a buffer with one reference whose
 * data/size are that range (a device address for CUDA regions); it keeps
 * the region mapped and registered until released (pts_buf_release, any
 * thread). *mem and *device say what memory it is. Errors: NOT_FOUND for
 * an unknown region, INVALID_ARG for a range outside the region or an
 * object that shrank, UNSUPPORTED when disabled. */
enum pts_status pts_shm_acquire(struct pts_shm_registry *r, const char *name, uint64_t offset,
                                uint64_t byte_size, const char *what, struct pts_buf **view,
                                enum pts_mem *mem, int *device, struct pts_error *err);

/* Whether b is a view handed out by pts_shm_acquire (NULL: false). */
bool pts_shm_is_view(const struct pts_buf *b);

/* Copies n bytes of host memory `src` into the place of a view made by
 * pts_shm_acquire (its first n bytes): memmove for host memory, the CUDA
 * copy for device memory. n must not exceed the view's size (checked:
 * INVALID_ARG). */
enum pts_status pts_shm_write(struct pts_buf *view, enum pts_mem mem, int device, const void *src,
                              size_t n, struct pts_error *err);

/* The writes of one batch's answers, made together. A batch of N requests
 * with outputs in CUDA regions made N synchronized copies, one stream round
 * trip each (1.8 ms for 128 answers of 2 KB on an H200, most of a batch's
 * output time); one wait per batch took that to 1.4 ms, by estimate mostly
 * the 128 copy calls. So the device copies are only noted here, and
 * pts_shm_writes_finish hands each device its copies in one batch
 * (to_device_batch) and waits for it once.
 *
 * Usage: zero it; pts_shm_write_deferred per output; then
 * pts_shm_writes_finish before anyone reads a region or frees a source
 * (finish also frees what the notes took).
 * Threading: one thread's, for the batch. */
struct pts_shm_copy {
  void *dst;       /* in a CUDA region's mapping; borrowed */
  const void *src; /* host memory; borrowed, must outlive the finish */
  size_t n;
  int device;
};
struct pts_shm_writes {
  const struct pts_shm_cuda_ops *cuda; /* of the regions written; borrowed */
  struct pts_shm_copy *copies;         /* owned; count of cap used */
  size_t count, cap;
};

/* pts_shm_write, except that a copy to device memory is only noted in w
 * (checked as pts_shm_write checks it): `src` must then stay as it is
 * until pts_shm_writes_finish. Host memory, and backends without batched
 * copies, are written at once (also when a note can not be allocated). */
enum pts_status pts_shm_write_deferred(struct pts_shm_writes *w, struct pts_buf *view,
                                       enum pts_mem mem, int device, const void *src, size_t n,
                                       struct pts_error *err);

/* Makes every copy noted in w, one batch per device, and waits for each
 * device once; w is empty again after. An error means some of them may not
 * have landed. */
enum pts_status pts_shm_writes_finish(struct pts_shm_writes *w, struct pts_error *err);

/* Copies the first n bytes of a device view (pts_shm_acquire) into host
 * memory `dst`. */
enum pts_status pts_shm_read_device(const struct pts_buf *view, int device, void *dst, size_t n,
                                    struct pts_error *err);

#endif
