/* tests/unit/shm/shm_test.c — the shared-memory region registry and the
 * resolution of a request's shared-memory places (shm/shm.h, resolve.h).
 *
 * System regions are real POSIX shared-memory objects made here with
 * shm_open; CUDA regions go through fake CUDA operations whose "device"
 * is host memory, so the registry's CUDA bookkeeping (open, close, copies,
 * pinning) runs without a GPU. Expected bytes are written by the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "server/shm_resolve.h"
#include "shm/shm.h"

/* ---- a POSIX shared-memory object of the test ---- */

struct object {
  char key[64];
  unsigned char *p;
  size_t size;
};

static void object_make(struct object *o, const char *tag, size_t size) {
  snprintf(o->key, sizeof o->key, "/pts_shm_test_%d_%s", (int)getpid(), tag);
  int fd = shm_open(o->key, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)size), 0);
  o->p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  assert_true(o->p != MAP_FAILED);
  close(fd);
  o->size = size;
  for (size_t i = 0; i < size; i++) o->p[i] = (unsigned char)(i & 0xff);
}

static void object_drop(struct object *o) {
  munmap(o->p, o->size);
  shm_unlink(o->key);
}

/* ---- fake CUDA: the "device" is host memory named by the handle ---- */

struct fake_device {
  unsigned char mem[256];
  int opened, closed, pinned, unpinned, to_device, to_host;
};
static struct fake_device dev;

static enum pts_status fake_open(const void *handle, int device, uint64_t byte_size,
                                 void **dev_ptr, struct pts_error *err) {
  (void)device;
  if (memcmp(handle, "GOOD", 4) != 0)
    return pts_error_set(err, PTS_INVALID_ARG, "fake: the handle does not open");
  if (byte_size > sizeof dev.mem)
    return pts_error_set(err, PTS_INVALID_ARG, "fake: the allocation is smaller");
  dev.opened++;
  *dev_ptr = dev.mem;
  return PTS_OK;
}
static void fake_close(void *p, int device) {
  (void)device;
  assert_ptr_equal(p, dev.mem);
  dev.closed++;
}
static enum pts_status fake_to_device(void *dst, const void *src, size_t n, int device,
                                      struct pts_error *err) {
  (void)device;
  (void)err;
  memcpy(dst, src, n);
  dev.to_device++;
  return PTS_OK;
}
static enum pts_status fake_to_host(void *dst, const void *src, size_t n, int device,
                                    struct pts_error *err) {
  (void)device;
  (void)err;
  memcpy(dst, src, n);
  dev.to_host++;
  return PTS_OK;
}
static bool fake_pin(void *addr, size_t n) {
  (void)addr;
  (void)n;
  dev.pinned++;
  return true;
}
static void fake_unpin(void *addr) {
  (void)addr;
  dev.unpinned++;
}
static const struct pts_shm_cuda_ops fake_cuda = {.open = fake_open,
                                                  .close = fake_close,
                                                  .to_device = fake_to_device,
                                                  .to_host = fake_to_host,
                                                  .pin = fake_pin,
                                                  .unpin = fake_unpin};

static unsigned char good_handle[PTS_SHM_CUDA_HANDLE_SIZE] = "GOOD";

/* ---- tests ---- */

static void register_status_unregister(void **state) {
  (void)state;
  struct object a, b;
  object_make(&a, "a", 4096);
  object_make(&b, "b", 64);
  struct pts_shm_registry *r = pts_shm_registry_new(true, NULL);
  struct pts_error err;
  assert_int_equal(pts_shm_register_system(r, "zeta", a.key, 100, 200, &err), PTS_OK);
  assert_int_equal(pts_shm_register_system(r, "alpha", b.key, 0, 64, &err), PTS_OK);
  struct pts_shm_status *s;
  size_t n;
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, NULL, &s, &n, &err), PTS_OK);
  assert_int_equal(n, 2); /* sorted by name, as Triton's map */
  assert_string_equal(s[0].name, "alpha");
  assert_string_equal(s[0].key, b.key);
  assert_int_equal(s[0].byte_size, 64);
  assert_string_equal(s[1].name, "zeta");
  assert_int_equal(s[1].offset, 100);
  assert_int_equal(s[1].byte_size, 200);
  pts_shm_status_free(s, n);
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, "zeta", &s, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  assert_string_equal(s[0].name, "zeta");
  pts_shm_status_free(s, n);
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, "nope", &s, &n, &err), PTS_NOT_FOUND);
  assert_non_null(strstr(err.msg, "Unable to find system shared memory region: 'nope'"));
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_CUDA, NULL, &s, &n, &err), PTS_OK);
  assert_int_equal(n, 0);
  pts_shm_status_free(s, n);
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_CUDA, "zeta", &s, &n, &err), PTS_NOT_FOUND);
  assert_non_null(strstr(err.msg, "registered as system shared memory, not CUDA"));

  /* unregister one; an unknown name, or the other kind, is a no-op (Triton) */
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, "zeta", &err), PTS_OK);
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, "zeta", &err), PTS_OK);
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_CUDA, "alpha", &err), PTS_OK);
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, NULL, &s, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  pts_shm_status_free(s, n);
  /* the name is free again */
  assert_int_equal(pts_shm_register_system(r, "zeta", a.key, 0, 8, &err), PTS_OK);
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, NULL, &err), PTS_OK);
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, NULL, &s, &n, &err), PTS_OK);
  assert_int_equal(n, 0);
  pts_shm_status_free(s, n);
  pts_shm_registry_free(r);
  object_drop(&a);
  object_drop(&b);
}

static void bad_registrations(void **state) {
  (void)state;
  struct object a;
  object_make(&a, "bad", 100);
  struct pts_shm_registry *r = pts_shm_registry_new(true, NULL);
  struct pts_error err;
  struct {
    const char *name, *key;
    uint64_t offset, size;
    enum pts_status code;
    const char *words;
  } cases[] = {
      {"x", "/pts_shm_test_missing_key", 0, 8, PTS_INVALID_ARG, "unable to open shared memory"},
      {"x", "", 0, 8, PTS_INVALID_ARG, "key"},
      {"x", "/a/b", 0, 8, PTS_INVALID_ARG, "invalid key '/a/b'"},
      {"x", "/", 0, 8, PTS_INVALID_ARG, "invalid key"},
      {"", a.key, 0, 8, PTS_INVALID_ARG, "Unable to open shared memory region: '': the region name is empty"},
      /* Triton's QA matches "failed to register shared memory region.*invalid args". */
      {"x", a.key, 0, 0, PTS_INVALID_ARG, "'x': invalid args: byte_size must be greater than 0"},
      {"x", a.key, 0, 101, PTS_INVALID_ARG, "'x': invalid args: offset 0 + byte_size 101 is past the end"},
      {"x", a.key, 99, 2, PTS_INVALID_ARG, "invalid args: offset 99 + byte_size 2 is past the end"},
      {"x", a.key, 100, 1, PTS_INVALID_ARG, "invalid args: offset 100 + byte_size 1 is past the end"},
      {"x", a.key, UINT64_MAX, 2, PTS_INVALID_ARG, "invalid args: offset 18446744073709551615 + byte_size 2 overflows"},
      {"x", a.key, 1, UINT64_MAX, PTS_INVALID_ARG, "invalid args: offset 1 + byte_size 18446744073709551615 overflows"},
      /* Triton's Python backend's prefix, with or without the leading '/'. */
      {"y", "triton_python_backend_shm_region__k", 0, 8, PTS_INVALID_ARG,
       "cannot register shared memory region 'y' with key 'triton_python_backend_shm_region__k' "
       "as the key contains the reserved prefix 'triton_python_backend_shm_region_'"},
      {"y", "/triton_python_backend_shm_region_k", 0, 8, PTS_INVALID_ARG,
       "with key '/triton_python_backend_shm_region_k' as the key contains the reserved prefix"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    enum pts_status st = pts_shm_register_system(r, cases[i].name, cases[i].key, cases[i].offset,
                                                 cases[i].size, &err);
    if (st != cases[i].code || !strstr(err.msg, cases[i].words))
      fail_msg("case %zu: status %d, message '%s'", i, st, err.msg);
  }
  /* double registration: either kind owns the name */
  assert_int_equal(pts_shm_register_system(r, "x", a.key, 0, 100, &err), PTS_OK);
  assert_int_equal(pts_shm_register_system(r, "x", a.key, 0, 100, &err), PTS_ALREADY_EXISTS);
  assert_non_null(strstr(err.msg, "shared memory region 'x' already in manager"));
  /* no CUDA in this registry */
  assert_int_equal(
      pts_shm_register_cuda(r, "c", good_handle, sizeof good_handle, 0, 8, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "CUDA is not available in this build"));
  assert_false(pts_shm_cuda_available(r));
  pts_shm_registry_free(r);
  object_drop(&a);
}

static void disabled_registry(void **state) {
  (void)state;
  struct object a;
  object_make(&a, "off", 64);
  struct pts_shm_registry *r = pts_shm_registry_new(false, NULL);
  struct pts_error err;
  assert_int_equal(pts_shm_register_system(r, "x", a.key, 0, 8, &err), PTS_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "--allow-client-shm=true"));
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, NULL, &err), PTS_UNSUPPORTED);
  struct pts_buf *v;
  enum pts_mem mem;
  int device;
  assert_int_equal(pts_shm_acquire(r, "x", 0, 8, "input 'I'", &v, &mem, &device, &err),
                   PTS_UNSUPPORTED);
  struct pts_shm_status *s;
  size_t n;
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, NULL, &s, &n, &err), PTS_OK);
  assert_int_equal(n, 0);
  pts_shm_status_free(s, n);
  pts_shm_registry_free(r);
  object_drop(&a);
}

/* Views are bounds-checked, point at the right bytes (an unaligned offset
 * included), and keep the region registered and mapped, after an
 * unregister, until the last of them is released. */
static void views_and_in_use(void **state) {
  (void)state;
  struct object a;
  object_make(&a, "views", 8192);
  struct pts_shm_registry *r = pts_shm_registry_new(true, NULL);
  struct pts_error err;
  assert_int_equal(pts_shm_register_system(r, "reg", a.key, 4100, 1000, &err), PTS_OK);
  struct pts_buf *v, *w;
  enum pts_mem mem;
  int device;
  assert_int_equal(pts_shm_acquire(r, "reg", 10, 20, "input 'I'", &v, &mem, &device, &err),
                   PTS_OK);
  assert_int_equal(mem, PTS_MEM_HOST);
  assert_int_equal(v->size, 20);
  assert_memory_equal(v->data, a.p + 4110, 20);
  /* a write through the view reaches the object */
  unsigned char data[4] = {9, 8, 7, 6};
  assert_int_equal(pts_shm_write(v, mem, device, data, 4, &err), PTS_OK);
  assert_memory_equal(a.p + 4110, data, 4);
  assert_int_equal(pts_shm_write(v, mem, device, data, 21, &err), PTS_INVALID_ARG);

  struct {
    const char *name;
    uint64_t offset, size;
    enum pts_status code;
    const char *words;
  } bad[] = {
      {"nope", 0, 1, PTS_NOT_FOUND, "Unable to find shared memory region: 'nope'"},
      {"reg", 1000, 0, PTS_INVALID_ARG, "Invalid offset for shared memory region: 'reg'"},
      {"reg", 999, 2, PTS_INVALID_ARG, "Invalid offset + byte size"},
      {"reg", 0, 1001, PTS_INVALID_ARG, "Invalid offset + byte size"},
      /* An offset inside and a size that wraps it: Triton's QA matches the
       * overflow's words; an offset outside is refused as such first. */
      {"reg", 1, UINT64_MAX, PTS_INVALID_ARG,
       "Integer overflow detected: byte_size 18446744073709551615 + offset 1"},
      {"reg", 32, UINT64_MAX - 31, PTS_INVALID_ARG, "Integer overflow detected: byte_size "},
      {"reg", UINT64_MAX - 31, 64, PTS_INVALID_ARG,
       "Invalid offset for shared memory region: 'reg': offset 18446744073709551584"},
      {"reg", UINT64_MAX, 1, PTS_INVALID_ARG, "Invalid offset"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    enum pts_status st = pts_shm_acquire(r, bad[i].name, bad[i].offset, bad[i].size,
                                         "output 'O'", &w, &mem, &device, &err);
    if (st != bad[i].code || !strstr(err.msg, bad[i].words) || !strstr(err.msg, "output 'O'"))
      fail_msg("case %zu: status %d, message '%s'", i, st, err.msg);
    assert_null(w);
  }
  /* the whole region is one valid view */
  assert_int_equal(pts_shm_acquire(r, "reg", 0, 1000, "input 'I'", &w, &mem, &device, &err),
                   PTS_OK);

  /* Unregistering while two views hold it succeeds (Triton since 25.x);
   * the region stays listed and usable until the last view goes. */
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, "reg", &err), PTS_OK);
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, NULL, &err), PTS_OK);
  struct pts_shm_status *stat = NULL;
  size_t n = 0;
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, "reg", &stat, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  pts_shm_status_free(stat, n);
  struct pts_buf *x = NULL;
  assert_int_equal(pts_shm_acquire(r, "reg", 0, 8, "input 'J'", &x, &mem, &device, &err), PTS_OK);
  pts_buf_release(v);
  pts_buf_release(w);
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, "reg", &stat, &n, &err), PTS_OK);
  pts_shm_status_free(stat, n);
  assert_memory_equal(x->data, a.p + 4100, 8); /* still mapped, the right bytes */
  pts_buf_release(x); /* the last view: the region goes */
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_SYSTEM, "reg", &stat, &n, &err), PTS_NOT_FOUND);
  assert_int_equal(pts_shm_acquire(r, "reg", 0, 8, "input 'K'", &x, &mem, &device, &err),
                   PTS_NOT_FOUND);
  /* and its name is free again */
  assert_int_equal(pts_shm_register_system(r, "reg", a.key, 0, 1000, &err), PTS_OK);
  pts_shm_registry_free(r);
  object_drop(&a);
}

/* A client that shrinks its object after registering gets an error, not a
 * SIGBUS in the server. */
static void shrunk_object_is_refused(void **state) {
  (void)state;
  struct object a;
  object_make(&a, "shrink", 8192);
  struct pts_shm_registry *r = pts_shm_registry_new(true, NULL);
  struct pts_error err;
  assert_int_equal(pts_shm_register_system(r, "reg", a.key, 0, 8192, &err), PTS_OK);
  int fd = shm_open(a.key, O_RDWR, 0);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, 100), 0);
  close(fd);
  struct pts_buf *v;
  enum pts_mem mem;
  int device;
  assert_int_equal(pts_shm_acquire(r, "reg", 0, 8, "input 'I'", &v, &mem, &device, &err),
                   PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "shrank to 100 bytes"));
  pts_shm_registry_free(r);
  munmap(a.p, a.size);
  shm_unlink(a.key);
}

/* A view outlives the registry: the mapping stays until it is released. */
static void view_outlives_registry(void **state) {
  (void)state;
  struct object a;
  object_make(&a, "outlive", 4096);
  struct pts_shm_registry *r = pts_shm_registry_new(true, NULL);
  struct pts_error err;
  assert_int_equal(pts_shm_register_system(r, "reg", a.key, 0, 4096, &err), PTS_OK);
  struct pts_buf *v;
  enum pts_mem mem;
  int device;
  assert_int_equal(pts_shm_acquire(r, "reg", 0, 16, "input 'I'", &v, &mem, &device, &err),
                   PTS_OK);
  pts_shm_registry_free(r);
  assert_memory_equal(v->data, a.p, 16); /* still mapped */
  pts_buf_release(v);
  object_drop(&a);
}

static void cuda_regions(void **state) {
  (void)state;
  memset(&dev, 0, sizeof dev);
  struct object a;
  object_make(&a, "pinned", 4096);
  struct pts_shm_registry *r = pts_shm_registry_new(true, &fake_cuda);
  struct pts_error err;
  assert_true(pts_shm_cuda_available(r));
  /* system regions get pinned when CUDA is there */
  assert_int_equal(pts_shm_register_system(r, "sys", a.key, 0, 4096, &err), PTS_OK);
  assert_int_equal(dev.pinned, 1);
  struct pts_buf *v;
  enum pts_mem mem;
  int device;
  assert_int_equal(pts_shm_acquire(r, "sys", 0, 8, "input 'I'", &v, &mem, &device, &err), PTS_OK);
  assert_int_equal(mem, PTS_MEM_PINNED);
  pts_buf_release(v);

  unsigned char short_handle[10] = "GOOD";
  assert_int_equal(pts_shm_register_cuda(r, "c", short_handle, sizeof short_handle, 0, 8, &err),
                   PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "10 bytes, a cudaIpcMemHandle_t is 64"));
  unsigned char bad_handle[PTS_SHM_CUDA_HANDLE_SIZE] = "BAD";
  assert_int_equal(pts_shm_register_cuda(r, "c", bad_handle, sizeof bad_handle, 0, 8, &err),
                   PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "failed to register CUDA shared memory region 'c'"));
  assert_non_null(strstr(err.msg, "does not open"));
  assert_int_equal(
      pts_shm_register_cuda(r, "c", good_handle, sizeof good_handle, -1, 8, &err), PTS_INVALID_ARG);
  assert_non_null(strstr(err.msg, "device id"));
  assert_int_equal(
      pts_shm_register_cuda(r, "sys", good_handle, sizeof good_handle, 0, 8, &err),
      PTS_ALREADY_EXISTS);
  assert_int_equal(
      pts_shm_register_cuda(r, "c", good_handle, sizeof good_handle, 3, 128, &err), PTS_OK);
  assert_int_equal(dev.opened, 1);

  struct pts_shm_status *s;
  size_t n;
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_CUDA, NULL, &s, &n, &err), PTS_OK);
  assert_int_equal(n, 1);
  assert_string_equal(s[0].name, "c");
  assert_int_equal(s[0].device, 3);
  assert_int_equal(s[0].byte_size, 128);
  pts_shm_status_free(s, n);

  assert_int_equal(pts_shm_acquire(r, "c", 16, 8, "output 'O'", &v, &mem, &device, &err), PTS_OK);
  assert_int_equal(mem, PTS_MEM_DEVICE);
  assert_int_equal(device, 3);
  assert_ptr_equal(v->data, dev.mem + 16);
  unsigned char data[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[8];
  assert_int_equal(pts_shm_write(v, mem, device, data, 8, &err), PTS_OK);
  assert_int_equal(dev.to_device, 1);
  assert_memory_equal(dev.mem + 16, data, 8);
  assert_int_equal(pts_shm_read_device(v, device, back, 8, &err), PTS_OK);
  assert_memory_equal(back, data, 8);
  /* CUDA regions are unregistered through their own endpoint only */
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, NULL, &err), PTS_OK);
  /* in use: unregistered once its view goes, closed at the next call */
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_CUDA, "c", &err), PTS_OK);
  assert_int_equal(dev.closed, 0);
  pts_buf_release(v);
  assert_int_equal(dev.unpinned, 1);
  assert_int_equal(pts_shm_status_get(r, PTS_SHM_CUDA, NULL, &s, &n, &err), PTS_OK);
  assert_int_equal(n, 0);
  pts_shm_status_free(s, n);
  assert_int_equal(dev.closed, 1);
  pts_shm_registry_free(r);
  object_drop(&a);
}

/* ---- deferred writes: a fake whose batched copies land at sync ---- */

static struct {
  struct {
    void *dst;
    const void *src;
    size_t n;
    int device;
  } queued[8];
  int n_queued, batches, last_batch, batch_device[4], syncs, synced_device[4], fail_sync;
} async_dev;

static enum pts_status fake_to_device_batch(void *const *dsts, const void *const *srcs,
                                            const size_t *sizes, size_t count, int device,
                                            struct pts_error *err) {
  if (async_dev.n_queued + (int)count > 8)
    return pts_error_set(err, PTS_INTERNAL, "fake: queue full");
  async_dev.batch_device[async_dev.batches++ % 4] = device;
  async_dev.last_batch = (int)count;
  for (size_t i = 0; i < count; i++) {
    async_dev.queued[async_dev.n_queued].dst = dsts[i];
    async_dev.queued[async_dev.n_queued].src = srcs[i];
    async_dev.queued[async_dev.n_queued].device = device;
    async_dev.queued[async_dev.n_queued++].n = sizes[i];
  }
  return PTS_OK;
}
/* Lands the copies queued on `device` (the others stay queued). */
static enum pts_status fake_sync(int device, struct pts_error *err) {
  async_dev.synced_device[async_dev.syncs++ % 4] = device;
  if (async_dev.fail_sync) return pts_error_set(err, PTS_INTERNAL, "fake: the copies failed");
  int k = 0;
  for (int i = 0; i < async_dev.n_queued; i++) {
    if (async_dev.queued[i].device == device)
      memcpy(async_dev.queued[i].dst, async_dev.queued[i].src, async_dev.queued[i].n);
    else
      async_dev.queued[k++] = async_dev.queued[i];
  }
  async_dev.n_queued = k;
  return PTS_OK;
}
static const struct pts_shm_cuda_ops fake_async_cuda = {.open = fake_open,
                                                        .close = fake_close,
                                                        .to_device = fake_to_device,
                                                        .to_host = fake_to_host,
                                                        .to_device_batch = fake_to_device_batch,
                                                        .sync = fake_sync,
                                                        .pin = fake_pin,
                                                        .unpin = fake_unpin};

/* A batch's device writes are only noted, then handed over in one batch per
 * device and waited for once; host writes (and backends without batched
 * copies) are done at once. */
static void deferred_writes_wait_once(void **state) {
  (void)state;
  memset(&dev, 0, sizeof dev);
  memset(&async_dev, 0, sizeof async_dev);
  struct object a;
  object_make(&a, "deferred", 4096);
  struct pts_shm_registry *r = pts_shm_registry_new(true, &fake_async_cuda);
  struct pts_error err;
  assert_int_equal(
      pts_shm_register_cuda(r, "c", good_handle, sizeof good_handle, 2, 128, &err), PTS_OK);
  assert_int_equal(pts_shm_register_system(r, "sys", a.key, 0, 4096, &err), PTS_OK);
  struct pts_buf *v[3];
  enum pts_mem mem[3];
  int device[3];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pts_shm_acquire(r, "c", 8 * (uint64_t)i, 8, "output 'O'", &v[i], &mem[i],
                                     &device[i], &err),
                     PTS_OK);
  assert_int_equal(pts_shm_acquire(r, "sys", 0, 8, "output 'O'", &v[2], &mem[2], &device[2], &err),
                   PTS_OK);
  unsigned char src[3][8];
  for (int i = 0; i < 3; i++) memset(src[i], 10 + i, 8);
  struct pts_shm_writes w = {0};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(pts_shm_write_deferred(&w, v[i], mem[i], device[i], src[i], 8, &err),
                     PTS_OK);
    /* the CUDA ones noted, nothing handed to the device yet; the system
     * region written at once */
    assert_int_equal(w.count, i < 2 ? (size_t)i + 1 : 2);
    assert_int_equal(async_dev.batches, 0);
  }
  assert_int_equal(dev.to_device, 0);
  assert_int_equal(((unsigned char *)v[2]->data)[0], 12);
  assert_int_equal(dev.mem[0], 0); /* not landed yet */
  assert_int_equal(pts_shm_writes_finish(&w, &err), PTS_OK);
  assert_int_equal(async_dev.batches, 1); /* one call for both */
  assert_int_equal(async_dev.last_batch, 2);
  assert_int_equal(async_dev.batch_device[0], 2);
  assert_int_equal(async_dev.syncs, 1); /* one wait for both */
  assert_int_equal(async_dev.synced_device[0], 2);
  assert_memory_equal(dev.mem, src[0], 8);
  assert_memory_equal(dev.mem + 8, src[1], 8);
  assert_int_equal(w.count, 0);
  assert_null(w.copies);
  assert_int_equal(pts_shm_writes_finish(&w, &err), PTS_OK); /* nothing left: no wait */
  assert_int_equal(async_dev.syncs, 1);

  /* too large for its place: refused before anything is noted */
  unsigned char big[16] = {0};
  assert_int_equal(pts_shm_write_deferred(&w, v[0], mem[0], device[0], big, 16, &err),
                   PTS_INVALID_ARG);
  assert_int_equal(w.count, 0);

  /* regions on two devices: one batch and one wait each, every copy landed */
  struct pts_buf *v3;
  enum pts_mem mem3;
  int device3;
  assert_int_equal(
      pts_shm_register_cuda(r, "d", good_handle, sizeof good_handle, 3, 128, &err), PTS_OK);
  assert_int_equal(pts_shm_acquire(r, "d", 16, 8, "output 'O'", &v3, &mem3, &device3, &err),
                   PTS_OK);
  assert_int_equal(device3, 3);
  memset(dev.mem, 0, 32);
  memset(&async_dev, 0, sizeof async_dev);
  assert_int_equal(pts_shm_write_deferred(&w, v[0], mem[0], device[0], src[0], 8, &err), PTS_OK);
  assert_int_equal(pts_shm_write_deferred(&w, v3, mem3, device3, src[1], 8, &err), PTS_OK);
  assert_int_equal(pts_shm_write_deferred(&w, v[1], mem[1], device[1], src[2], 8, &err), PTS_OK);
  assert_int_equal(pts_shm_writes_finish(&w, &err), PTS_OK);
  assert_int_equal(async_dev.batches, 2);
  assert_int_equal(async_dev.batch_device[0], 2); /* in the order the devices came */
  assert_int_equal(async_dev.batch_device[1], 3);
  assert_int_equal(async_dev.syncs, 2);
  assert_int_equal(async_dev.synced_device[0], 2);
  assert_int_equal(async_dev.synced_device[1], 3);
  assert_int_equal(async_dev.last_batch, 1);
  assert_int_equal(async_dev.n_queued, 0);
  assert_memory_equal(dev.mem, src[0], 8);
  assert_memory_equal(dev.mem + 8, src[2], 8);
  assert_memory_equal(dev.mem + 16, src[1], 8);
  pts_buf_release(v3);

  /* a failed wait is the finish's error, and w is emptied all the same */
  async_dev.fail_sync = 1;
  assert_int_equal(pts_shm_write_deferred(&w, v[1], mem[1], device[1], src[0], 8, &err), PTS_OK);
  assert_int_equal(pts_shm_writes_finish(&w, &err), PTS_INTERNAL);
  assert_non_null(strstr(err.msg, "the copies failed"));
  assert_int_equal(w.count, 0);
  for (int i = 0; i < 3; i++) pts_buf_release(v[i]);
  pts_shm_registry_free(r);

  /* a backend without batched copies: written at once */
  memset(&dev, 0, sizeof dev);
  r = pts_shm_registry_new(true, &fake_cuda);
  assert_int_equal(
      pts_shm_register_cuda(r, "c", good_handle, sizeof good_handle, 0, 128, &err), PTS_OK);
  assert_int_equal(pts_shm_acquire(r, "c", 0, 8, "output 'O'", &v[0], &mem[0], &device[0], &err),
                   PTS_OK);
  assert_int_equal(pts_shm_write_deferred(&w, v[0], mem[0], device[0], src[1], 8, &err),
                   PTS_OK);
  assert_int_equal(w.count, 0); /* nothing noted */
  assert_int_equal(dev.to_device, 1);
  assert_memory_equal(dev.mem, src[1], 8);
  pts_buf_release(v[0]);
  pts_shm_registry_free(r);
  object_drop(&a);
}

/* ---- resolution of a request ---- */

static struct pts_infer_request *request(size_t n_in, size_t n_out) {
  struct pts_infer_request *req = pts_infer_request_new();
  req->inputs = pts_calloc(n_in, sizeof *req->inputs);
  req->n_inputs = n_in;
  req->outputs = pts_calloc(n_out ? n_out : 1, sizeof *req->outputs);
  req->n_outputs = n_out;
  return req;
}

static void resolve_places(void **state) {
  (void)state;
  memset(&dev, 0, sizeof dev);
  struct object a;
  object_make(&a, "resolve", 4096);
  struct pts_shm_registry *r = pts_shm_registry_new(true, &fake_cuda);
  struct pts_error err;
  assert_int_equal(pts_shm_register_system(r, "in", a.key, 0, 4096, &err), PTS_OK);
  assert_int_equal(
      pts_shm_register_cuda(r, "gpu", good_handle, sizeof good_handle, 1, 256, &err), PTS_OK);
  for (size_t i = 0; i < sizeof dev.mem; i++) dev.mem[i] = (unsigned char)(255 - i);

  struct pts_infer_request *req = request(3, 1);
  req->inputs[0].name = pts_strdup("A");
  req->inputs[0].dtype = PTS_DTYPE_FP32;
  req->inputs[1].name = pts_strdup("B");
  req->inputs[1].dtype = PTS_DTYPE_FP32;
  req->inputs[2].name = pts_strdup("S");
  req->inputs[2].dtype = PTS_DTYPE_BYTES;
  pts_infer_request_input_shm(req, 0)->region = pts_strdup("in");
  req->input_shm[0].offset = 8;
  req->input_shm[0].byte_size = 16;
  req->input_shm[1] = (struct pts_shm_place){pts_strdup("gpu"), 4, 8};
  req->input_shm[2] = (struct pts_shm_place){pts_strdup("gpu"), 0, 8};
  req->outputs[0].name = pts_strdup("O");
  req->outputs[0].shm = (struct pts_shm_place){pts_strdup("in"), 100, 32};

  /* a backend that reads device memory: B stays on the device, S (BYTES)
   * is copied to the host */
  assert_int_equal(pts_shm_resolve(r, req, true, &err), PTS_OK);
  /* a view of the object (the server's own mapping of it): no copy */
  assert_memory_equal(req->inputs[0].data, a.p + 8, 16);
  a.p[8] ^= 0xff;
  assert_memory_equal(req->inputs[0].data, a.p + 8, 16);
  assert_int_equal(req->inputs[0].byte_size, 16);
  assert_int_equal(req->inputs[0].mem, PTS_MEM_PINNED);
  assert_ptr_equal(req->inputs[1].data, dev.mem + 4);
  assert_int_equal(req->inputs[1].mem, PTS_MEM_DEVICE);
  assert_int_equal(req->inputs[1].device, 1);
  assert_int_equal(req->inputs[2].mem, PTS_MEM_HOST);
  assert_memory_equal(req->inputs[2].data, dev.mem, 8);
  assert_int_equal(dev.to_host, 1);
  assert_non_null(req->outputs[0].shm_target);
  assert_int_equal(req->outputs[0].shm_target->size, 32);
  unsigned char out[4] = {1, 2, 3, 4};
  assert_int_equal(pts_shm_write(req->outputs[0].shm_target, req->outputs[0].shm_mem, 0, out, 4,
                                 &err),
                   PTS_OK);
  assert_memory_equal(a.p + 100, out, 4);
  pts_infer_request_free(req);

  /* a backend that does not: device inputs come to the host */
  req = request(1, 0);
  req->inputs[0].name = pts_strdup("B");
  req->inputs[0].dtype = PTS_DTYPE_INT8;
  pts_infer_request_input_shm(req, 0)->region = pts_strdup("gpu");
  req->input_shm[0].byte_size = 3;
  assert_int_equal(pts_shm_resolve(r, req, false, &err), PTS_OK);
  assert_int_equal(req->inputs[0].mem, PTS_MEM_HOST);
  assert_memory_equal(req->inputs[0].data, dev.mem, 3);
  pts_infer_request_free(req);

  /* errors name the tensor; what was resolved is released with the request */
  req = request(2, 0);
  req->inputs[0].name = pts_strdup("A");
  req->inputs[1].name = pts_strdup("B");
  pts_infer_request_input_shm(req, 0)->region = pts_strdup("in");
  req->input_shm[0].byte_size = 4;
  req->input_shm[1] = (struct pts_shm_place){pts_strdup("missing"), 0, 4};
  assert_int_equal(pts_shm_resolve(r, req, true, &err), PTS_NOT_FOUND);
  assert_non_null(strstr(err.msg, "input 'B': Unable to find shared memory region: 'missing'"));
  pts_infer_request_free(req);

  assert_int_equal(pts_shm_unregister(r, PTS_SHM_SYSTEM, "in", &err), PTS_OK);
  assert_int_equal(pts_shm_unregister(r, PTS_SHM_CUDA, "gpu", &err), PTS_OK);
  pts_shm_registry_free(r);
  object_drop(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(register_status_unregister),
      cmocka_unit_test(bad_registrations),
      cmocka_unit_test(disabled_registry),
      cmocka_unit_test(views_and_in_use),
      cmocka_unit_test(shrunk_object_is_refused),
      cmocka_unit_test(view_outlives_registry),
      cmocka_unit_test(cuda_regions),
      cmocka_unit_test(deferred_writes_wait_once),
      cmocka_unit_test(resolve_places),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
