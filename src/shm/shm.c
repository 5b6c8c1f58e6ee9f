/* shm/shm.c — see shm.h. */
#include "shm/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/copy.h"
#include "core/log.h"

struct region {
  atomic_int refs; /* the registry's while registered, plus one per view */
  enum pts_shm_kind kind;
  char *name;
  char *key; /* system regions */
  uint64_t offset, byte_size;
  void *base;       /* the region's first byte: mapping + delta, or the device address */
  void *map;        /* system: what mmap returned (page-aligned), for munmap */
  size_t map_len;   /* system: the mapped length */
  int fd;           /* system: kept open for the fstat check; -1 otherwise */
  int64_t device;   /* CUDA */
  bool pinned;      /* system: pinned through cuda->pin */
  bool unregistered; /* asked to go while views held it; guarded by the registry's mu */
  const struct pts_shm_cuda_ops *cuda;
  struct region *next; /* the registry's list, sorted by name */
};

struct pts_shm_registry {
  pthread_mutex_t mu;
  struct region *head; /* guarded by mu */
  bool enabled;
  const struct pts_shm_cuda_ops *cuda;
};

static const char *kind_text(enum pts_shm_kind k) {
  return k == PTS_SHM_CUDA ? "CUDA" : "system";
}

static enum pts_status disabled(struct pts_error *err) {
  return pts_error_set(err, PTS_UNSUPPORTED,
                       "client shared memory is disabled on this server; start it with "
                       "--allow-client-shm=true to register and use shared-memory regions");
}

/* ------------------------------------------------------------ regions */

static void region_destroy(struct region *g) {
  if (g->kind == PTS_SHM_SYSTEM) {
    if (g->pinned) g->cuda->unpin(g->map);
    if (g->map) munmap(g->map, g->map_len);
    if (g->fd >= 0) close(g->fd);
  } else if (g->base && g->cuda) {
    g->cuda->close(g->base, (int)g->device);
  }
  pts_free(g->name);
  pts_free(g->key);
  pts_free(g);
}

static void region_release(struct region *g) {
  if (atomic_fetch_sub(&g->refs, 1) == 1) region_destroy(g);
}

/* pts_buf release callback of a view. */
static void view_release(void *ctx, void *data) {
  (void)data;
  region_release(ctx);
}

static struct region *find(struct pts_shm_registry *r, const char *name) {
  for (struct region *g = r->head; g; g = g->next)
    if (strcmp(g->name, name) == 0) return g;
  return NULL;
}

static void sweep_locked(struct pts_shm_registry *r);

/* Links g in, keeping the list sorted by name. Called with mu held. */
static void link_sorted(struct pts_shm_registry *r, struct region *g) {
  struct region **at = &r->head;
  while (*at && strcmp((*at)->name, g->name) < 0) at = &(*at)->next;
  g->next = *at;
  *at = g;
}

static struct region *region_new(enum pts_shm_kind kind, const char *name, const char *key,
                                 struct pts_error *err) {
  struct region *g = pts_calloc(1, sizeof *g);
  if (g) {
    g->kind = kind;
    g->fd = -1;
    atomic_init(&g->refs, 1);
    g->name = pts_strdup(name);
    g->key = pts_strdup(key ? key : "");
  }
  if (!g || !g->name || !g->key) {
    if (g) {
      pts_free(g->name);
      pts_free(g->key);
      pts_free(g);
    }
    pts_error_set(err, PTS_NOMEM, "out of memory registering shared memory region '%s'", name);
    return NULL;
  }
  return g;
}

/* Checks shared by both kinds before anything is opened. */
static enum pts_status check_new(struct pts_shm_registry *r, enum pts_shm_kind kind,
                                 const char *name, uint64_t byte_size, struct pts_error *err) {
  if (!r->enabled) return disabled(err);
  /* Triton's words first (its QA matches them: shm_open fails on the
   * empty key of a system region; a CUDA region is refused as invalid
   * args); an empty name is the client's mistake, so INVALID_ARG where
   * Triton's gRPC says INTERNAL. */
  if ((!name || !name[0]) && kind == PTS_SHM_SYSTEM)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Unable to open shared memory region: '': the region name is empty");
  if (!name || !name[0])
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '': invalid args: the region "
                         "name is empty");
  if (byte_size == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': invalid args: "
                         "byte_size must be greater than 0",
                         name);
  pthread_mutex_lock(&r->mu);
  sweep_locked(r);
  bool taken = find(r, name) != NULL;
  pthread_mutex_unlock(&r->mu);
  if (taken)
    return pts_error_set(err, PTS_ALREADY_EXISTS, "shared memory region '%s' already in manager",
                         name);
  return PTS_OK;
}

/* Links g in unless the name was taken meanwhile (two registrations of one
 * name racing); on failure g is destroyed. */
static enum pts_status publish(struct pts_shm_registry *r, struct region *g,
                               struct pts_error *err) {
  pthread_mutex_lock(&r->mu);
  sweep_locked(r);
  bool taken = find(r, g->name) != NULL;
  if (!taken) link_sorted(r, g);
  pthread_mutex_unlock(&r->mu);
  if (taken) {
    enum pts_status st = pts_error_set(
        err, PTS_ALREADY_EXISTS, "shared memory region '%s' already in manager", g->name);
    region_destroy(g);
    return st;
  }
  return PTS_OK;
}

/* ----------------------------------------------------------- registry */

struct pts_shm_registry *pts_shm_registry_new(bool enabled, const struct pts_shm_cuda_ops *cuda) {
  struct pts_shm_registry *r = pts_calloc(1, sizeof *r);
  if (!r) return NULL;
  pthread_mutex_init(&r->mu, NULL);
  r->enabled = enabled;
  r->cuda = cuda;
  return r;
}

void pts_shm_registry_free(struct pts_shm_registry *r) {
  if (!r) return;
  struct region *g = r->head;
  while (g) {
    struct region *next = g->next;
    if (atomic_load(&g->refs) > 1)
      PTS_LOG_WARN("shared memory region '%s' is still used by %d request(s) at shutdown; it is "
                   "unmapped when they finish",
                   g->name, atomic_load(&g->refs) - 1);
    region_release(g);
    g = next;
  }
  pthread_mutex_destroy(&r->mu);
  pts_free(r);
}

bool pts_shm_cuda_available(const struct pts_shm_registry *r) { return r && r->cuda; }

/* --------------------------------------------------------- system kind */

/* The key names one POSIX shared-memory object: "/name" (or "name"), no
 * other '/', at most NAME_MAX bytes, as shm_open(3) requires. Checked here
 * so the client gets a message, not EINVAL. */
static enum pts_status check_key(const char *name, const char *key, struct pts_error *err) {
  if (!key || !key[0])
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': the key (the name of "
                         "the POSIX shared memory object) is empty",
                         name);
  const char *rest = key[0] == '/' ? key + 1 : key;
  /* Triton's Python backend keeps its stubs' tensors in objects of this
   * prefix, and Triton refuses them so a client can not map (and write)
   * another model's memory. ptserve has no Python backend, but it may share
   * a host with tritonserver during a move, so it refuses them too, in
   * Triton's words (its QA matches them). */
  static const char reserved[] = "triton_python_backend_shm_region_";
  if (strncmp(rest, reserved, sizeof reserved - 1) == 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "cannot register shared memory region '%s' with key '%.80s' as the key "
                         "contains the reserved prefix '%s'",
                         name, key, reserved);
  if (!rest[0] || strchr(rest, '/') || strlen(rest) > NAME_MAX)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': invalid key '%.80s': a "
                         "POSIX shared memory name is '/' followed by up to %d characters "
                         "other than '/'",
                         name, key, NAME_MAX);
  return PTS_OK;
}

enum pts_status pts_shm_register_system(struct pts_shm_registry *r, const char *name,
                                        const char *key, uint64_t offset, uint64_t byte_size,
                                        struct pts_error *err) {
  enum pts_status st = check_new(r, PTS_SHM_SYSTEM, name, byte_size, err);
  if (st == PTS_OK) st = check_key(name, key, err);
  if (st != PTS_OK) return st;
  if (offset > UINT64_MAX - byte_size || offset + byte_size > (uint64_t)SIZE_MAX ||
      offset + byte_size > (uint64_t)INT64_MAX)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': invalid args: offset "
                         "%llu + byte_size %llu overflows",
                         name, (unsigned long long)offset, (unsigned long long)byte_size);

  struct region *g = region_new(PTS_SHM_SYSTEM, name, key, err);
  if (!g) return PTS_NOMEM;
  g->offset = offset;
  g->byte_size = byte_size;
  g->cuda = r->cuda;
  g->fd = shm_open(key, O_RDWR, 0);
  if (g->fd < 0) {
    int e = errno;
    region_destroy(g);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': unable to open shared "
                         "memory object '%s': %s",
                         name, key, strerror(e));
  }
  struct stat sb;
  if (fstat(g->fd, &sb) != 0 || sb.st_size < 0) {
    int e = errno;
    region_destroy(g);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': can not read the size "
                         "of shared memory object '%s': %s",
                         name, key, strerror(e));
  }
  if (offset + byte_size > (uint64_t)sb.st_size) {
    region_destroy(g);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': invalid args: offset "
                         "%llu + byte_size %llu is past the end of shared memory object '%s' "
                         "(%lld bytes)",
                         name, (unsigned long long)offset, (unsigned long long)byte_size, key,
                         (long long)sb.st_size);
  }
  /* mmap wants a page-aligned offset: map from the page that holds the
   * first byte and point into it. */
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
  uint64_t delta = offset % page;
  g->map_len = (size_t)(byte_size + delta);
  void *map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd,
                   (off_t)(offset - delta));
  if (map == MAP_FAILED) {
    int e = errno;
    region_destroy(g);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': unable to map shared "
                         "memory object '%s': %s",
                         name, key, strerror(e));
  }
  g->map = map;
  g->base = (char *)map + delta;
  if (r->cuda && r->cuda->pin) g->pinned = r->cuda->pin(g->map, g->map_len);
  st = publish(r, g, err);
  if (st == PTS_OK)
    PTS_LOG_VERBOSE(1, "registered system shared memory region '%s': key '%s', offset %llu, %llu "
                    "bytes%s",
                    name, key, (unsigned long long)offset, (unsigned long long)byte_size,
                    g->pinned ? ", pinned for DMA" : "");
  return st;
}

/* ----------------------------------------------------------- CUDA kind */

enum pts_status pts_shm_register_cuda(struct pts_shm_registry *r, const char *name,
                                      const void *handle, size_t handle_len, int64_t device,
                                      uint64_t byte_size, struct pts_error *err) {
  enum pts_status st = check_new(r, PTS_SHM_CUDA, name, byte_size, err);
  if (st != PTS_OK) return st;
  if (!r->cuda)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register CUDA shared memory region '%s': CUDA is not "
                         "available in this build of ptserve (its LibTorch has no CUDA)",
                         name);
  if (handle_len != PTS_SHM_CUDA_HANDLE_SIZE)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register CUDA shared memory region '%s': the raw handle is "
                         "%zu bytes, a cudaIpcMemHandle_t is %d",
                         name, handle_len, PTS_SHM_CUDA_HANDLE_SIZE);
  if (device < 0 || device > INT32_MAX)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register CUDA shared memory region '%s': invalid device id "
                         "%lld",
                         name, (long long)device);
  struct region *g = region_new(PTS_SHM_CUDA, name, "", err);
  if (!g) return PTS_NOMEM;
  g->byte_size = byte_size;
  g->device = device;
  g->cuda = r->cuda;
  st = r->cuda->open(handle, (int)device, byte_size, &g->base, err);
  if (st != PTS_OK) {
    g->base = NULL;
    region_destroy(g);
    pts_error_prefix(err, "failed to register CUDA shared memory region '%s'", name);
    return st;
  }
  st = publish(r, g, err);
  if (st == PTS_OK)
    PTS_LOG_VERBOSE(1, "registered CUDA shared memory region '%s': device %lld, %llu bytes", name,
                    (long long)device, (unsigned long long)byte_size);
  return st;
}

/* --------------------------------------------------------- unregister */

static void unlink_locked(struct pts_shm_registry *r, struct region *g) {
  struct region **at = &r->head;
  while (*at != g) at = &(*at)->next;
  *at = g->next;
  region_release(g);
}

/* Drops g if its unregistering waited for its last view and that view is
 * gone; true when it did. Called with mu held. */
static bool drop_if_done_locked(struct pts_shm_registry *r, struct region *g) {
  if (!g->unregistered || atomic_load(&g->refs) != 1) return false;
  unlink_locked(r, g);
  return true;
}

/* Drops every such region. Called with mu held by the entry points that
 * look at the whole list (register, unregister, status), so that a client
 * sees a region gone once the requests using it are done; a request's
 * lookup checks only the region it names. */
static void sweep_locked(struct pts_shm_registry *r) {
  struct region *g = r->head;
  while (g) {
    struct region *next = g->next;
    drop_if_done_locked(r, g);
    g = next;
  }
}

/* Unlinks and releases g; one that a view uses stays, marked, until its
 * last view is released (tritonserver's behaviour since 25.x: the client
 * may unregister at any time). Called with mu held. */
static void unregister_one(struct pts_shm_registry *r, struct region *g) {
  if (atomic_load(&g->refs) > 1)
    g->unregistered = true;
  else
    unlink_locked(r, g);
}

enum pts_status pts_shm_unregister(struct pts_shm_registry *r, enum pts_shm_kind kind,
                                   const char *name, struct pts_error *err) {
  if (!r->enabled) return disabled(err);
  pthread_mutex_lock(&r->mu);
  sweep_locked(r);
  if (name && name[0]) {
    struct region *g = find(r, name);
    if (g && g->kind == kind) unregister_one(r, g);
  } else {
    struct region *g = r->head;
    while (g) {
      struct region *next = g->next;
      if (g->kind == kind) unregister_one(r, g);
      g = next;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return PTS_OK;
}

/* ------------------------------------------------------------- status */

void pts_shm_status_free(struct pts_shm_status *s, size_t n) {
  for (size_t i = 0; s && i < n; i++) {
    pts_free(s[i].name);
    pts_free(s[i].key);
  }
  pts_free(s);
}

enum pts_status pts_shm_status_get(struct pts_shm_registry *r, enum pts_shm_kind kind,
                                   const char *name, struct pts_shm_status **out, size_t *n,
                                   struct pts_error *err) {
  *out = NULL;
  *n = 0;
  bool one = name && name[0];
  pthread_mutex_lock(&r->mu);
  sweep_locked(r);
  enum pts_status st = PTS_OK;
  size_t count = 0;
  if (one) {
    struct region *g = find(r, name);
    if (!g)
      st = pts_error_set(err, PTS_NOT_FOUND, "Unable to find %s shared memory region: '%s'",
                         kind == PTS_SHM_CUDA ? "cuda" : "system", name);
    else if (g->kind != kind)
      st = pts_error_set(err, PTS_NOT_FOUND,
                         "The region named '%s' is registered as %s shared memory, not %s shared "
                         "memory",
                         name, kind_text(g->kind), kind_text(kind));
    count = 1;
  } else {
    for (struct region *g = r->head; g; g = g->next)
      if (g->kind == kind) count++;
  }
  struct pts_shm_status *s = NULL;
  if (st == PTS_OK) {
    s = pts_calloc(count ? count : 1, sizeof *s);
    if (!s) st = pts_error_set(err, PTS_NOMEM, "out of memory reporting shared memory status");
  }
  size_t k = 0;
  for (struct region *g = r->head; st == PTS_OK && g; g = g->next) {
    if (g->kind != kind || (one && strcmp(g->name, name) != 0)) continue;
    s[k].name = pts_strdup(g->name);
    s[k].key = pts_strdup(g->key);
    s[k].offset = g->offset;
    s[k].byte_size = g->byte_size;
    s[k].device = g->device;
    k++;
    if (!s[k - 1].name || !s[k - 1].key)
      st = pts_error_set(err, PTS_NOMEM, "out of memory reporting shared memory status");
  }
  pthread_mutex_unlock(&r->mu);
  if (st != PTS_OK) {
    pts_shm_status_free(s, k);
    return st;
  }
  *out = s;
  *n = k;
  return PTS_OK;
}

/* ---------------------------------------------------------------- use */

/* A system object must still cover the registered range: one shrunk by
 * its owner would fault (SIGBUS) on the first access past its new end. */
static enum pts_status check_still_covered(const struct region *g, struct pts_error *err) {
  struct stat sb;
  if (fstat(g->fd, &sb) != 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "shared memory region '%s': can not read the size of object '%s': %s",
                         g->name, g->key, strerror(errno));
  if (sb.st_size < 0 || (uint64_t)sb.st_size < g->offset + g->byte_size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "shared memory region '%s': object '%s' shrank to %lld bytes after it "
                         "was registered (offset %llu + byte_size %llu); register it again",
                         g->name, g->key, (long long)sb.st_size, (unsigned long long)g->offset,
                         (unsigned long long)g->byte_size);
  return PTS_OK;
}

enum pts_status pts_shm_acquire(struct pts_shm_registry *r, const char *name, uint64_t offset,
                                uint64_t byte_size, const char *what, struct pts_buf **view,
                                enum pts_mem *mem, int *device, struct pts_error *err) {
  *view = NULL;
  if (!r->enabled) return disabled(err);
  pthread_mutex_lock(&r->mu);
  struct region *g = find(r, name ? name : "");
  if (g && drop_if_done_locked(r, g)) g = NULL;
  enum pts_status st = PTS_OK;
  if (!g)
    st = pts_error_set(err, PTS_NOT_FOUND, "%s: Unable to find shared memory region: '%s'", what,
                       name ? name : "");
  else if (offset >= g->byte_size)
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "%s: Invalid offset for shared memory region: '%s': offset %llu is not "
                       "inside its %llu bytes",
                       what, name, (unsigned long long)offset, (unsigned long long)g->byte_size);
  else if (byte_size > UINT64_MAX - offset)
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "%s: Integer overflow detected: byte_size %llu + offset %llu is more than "
                       "a 64-bit size, for shared memory region '%s'",
                       what, (unsigned long long)byte_size, (unsigned long long)offset, name);
  else if (byte_size > g->byte_size - offset)
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "%s: Invalid offset + byte size for shared memory region: '%s': offset "
                       "%llu + byte size %llu is past its %llu bytes",
                       what, name, (unsigned long long)offset, (unsigned long long)byte_size,
                       (unsigned long long)g->byte_size);
  else if (g->kind == PTS_SHM_SYSTEM)
    st = check_still_covered(g, err);
  if (st == PTS_OK) atomic_fetch_add(&g->refs, 1);
  pthread_mutex_unlock(&r->mu);
  if (st != PTS_OK) return st;
  *view = pts_buf_wrap((char *)g->base + offset, (size_t)byte_size, view_release, g);
  if (!*view) {
    region_release(g);
    return pts_error_set(err, PTS_NOMEM, "%s: out of memory using shared memory region '%s'",
                         what, name);
  }
  *mem = g->kind == PTS_SHM_CUDA ? PTS_MEM_DEVICE : g->pinned ? PTS_MEM_PINNED : PTS_MEM_HOST;
  *device = g->kind == PTS_SHM_CUDA ? (int)g->device : 0;
  return PTS_OK;
}

/* The region behind a view; NULL for a buffer that is not a view. */
static const struct region *view_region(const struct pts_buf *view) {
  return view && view->release == view_release ? view->ctx : NULL;
}

bool pts_shm_is_view(const struct pts_buf *b) { return view_region(b) != NULL; }

enum pts_status pts_shm_write(struct pts_buf *view, enum pts_mem mem, int device, const void *src,
                              size_t n, struct pts_error *err) {
  if (n > view->size)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%zu bytes do not fit in the %zu bytes of the shared memory place", n,
                         view->size);
  if (n == 0) return PTS_OK;
  if (mem != PTS_MEM_DEVICE) {
    memmove(view->data, src, n); /* an output may be a view of an input in the same region */
    pts_copy_count(n);
    return PTS_OK;
  }
  const struct region *g = view_region(view);
  if (!g || !g->cuda) return pts_error_set(err, PTS_INTERNAL, "a device view without CUDA");
  return g->cuda->to_device(view->data, src, n, device, err);
}

enum pts_status pts_shm_write_deferred(struct pts_shm_writes *w, struct pts_buf *view,
                                       enum pts_mem mem, int device, const void *src, size_t n,
                                       struct pts_error *err) {
  const struct region *g = mem == PTS_MEM_DEVICE ? view_region(view) : NULL;
  if (!g || !g->cuda || !g->cuda->to_device_batch || !g->cuda->sync || device < 0 || n == 0 ||
      n > view->size || (w->cuda && w->cuda != g->cuda))
    return pts_shm_write(view, mem, device, src, n, err);
  if (w->count == w->cap) {
    size_t cap = w->cap ? 2 * w->cap : 16;
    struct pts_shm_copy *c = pts_realloc(w->copies, cap * sizeof *c);
    if (!c) return pts_shm_write(view, mem, device, src, n, err);
    w->copies = c;
    w->cap = cap;
  }
  w->copies[w->count++] = (struct pts_shm_copy){view->data, src, n, device};
  w->cuda = g->cuda;
  return PTS_OK;
}

/* Hands `device` the copies of w on it in one batch, then waits for them. */
static enum pts_status writes_land_on(const struct pts_shm_writes *w, int device,
                                      struct pts_error *err) {
  size_t k = 0;
  for (size_t i = 0; i < w->count; i++) k += w->copies[i].device == device;
  void **dsts = pts_malloc(k * sizeof *dsts);
  const void **srcs = pts_malloc(k * sizeof *srcs);
  size_t *sizes = pts_malloc(k * sizeof *sizes);
  enum pts_status st = PTS_OK;
  if (!dsts || !srcs || !sizes) {
    st = pts_error_set(err, PTS_INTERNAL, "out of memory for %zu copies to CUDA device %d", k,
                       device);
  } else {
    k = 0;
    for (size_t i = 0; i < w->count; i++)
      if (w->copies[i].device == device) {
        dsts[k] = w->copies[i].dst;
        srcs[k] = w->copies[i].src;
        sizes[k++] = w->copies[i].n;
      }
    st = w->cuda->to_device_batch(dsts, srcs, sizes, k, device, err);
  }
  pts_free(dsts);
  pts_free(srcs);
  pts_free(sizes);
  /* wait even after a failed enqueue: copies it did enqueue read the sources */
  struct pts_error e;
  if (w->cuda->sync(device, &e) != PTS_OK && st == PTS_OK) {
    *err = e;
    st = e.code;
  }
  return st;
}

enum pts_status pts_shm_writes_finish(struct pts_shm_writes *w, struct pts_error *err) {
  enum pts_status st = PTS_OK;
  for (size_t i = 0; i < w->count; i++) {
    int d = w->copies[i].device;
    bool seen = false; /* its device's batch already made (a batch has few devices) */
    for (size_t j = 0; j < i && !seen; j++) seen = w->copies[j].device == d;
    if (seen) continue;
    struct pts_error e;
    if (writes_land_on(w, d, &e) != PTS_OK && st == PTS_OK) {
      *err = e;
      st = e.code;
    }
  }
  pts_free(w->copies);
  *w = (struct pts_shm_writes){0};
  return st;
}

enum pts_status pts_shm_read_device(const struct pts_buf *view, int device, void *dst, size_t n,
                                    struct pts_error *err) {
  if (n > view->size)
    return pts_error_set(err, PTS_INTERNAL, "reading %zu bytes of a %zu-byte shared memory view",
                         n, view->size);
  const struct region *g = view_region(view);
  if (!g || !g->cuda) return pts_error_set(err, PTS_INTERNAL, "a device view without CUDA");
  pts_copy_count(n); /* into host memory: what the copy counter counts (core/copy.h) */
  return g->cuda->to_host(dst, view->data, n, device, err);
}
