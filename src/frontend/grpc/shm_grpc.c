/* frontend/grpc/shm_grpc.c — see shm_grpc.h. */
#include "frontend/grpc/shm_grpc.h"

#include "core/alloc.h"
#include "grpc_service.pb-c.h"
#include "shm/shm.h"

static void unpacked_free(void *m) {
  if (m) protobuf_c_message_free_unpacked(m, pts_grpc_pb_allocator());
}

#define UNPACK(type, desc, in, var, err)                                                 \
  type *var = (type *)pts_grpc_unpack(&desc, (in)->data, (in)->size, err);              \
  if (!var) return (err)->code

/* ---- status ---- */

typedef Inference__SystemSharedMemoryStatusResponse__RegionStatus SysStatus;
typedef Inference__SystemSharedMemoryStatusResponse__RegionsEntry SysEntry;
typedef Inference__CudaSharedMemoryStatusResponse__RegionStatus CudaStatus;
typedef Inference__CudaSharedMemoryStatusResponse__RegionsEntry CudaEntry;

static enum pts_status pack_system(const struct pts_shm_status *s, size_t n,
                                   struct pts_grpc_reply *out, struct pts_error *err) {
  SysStatus *st = pts_calloc(n ? n : 1, sizeof *st);
  SysEntry *e = pts_calloc(n ? n : 1, sizeof *e);
  SysEntry **ep = pts_calloc(n ? n : 1, sizeof *ep);
  enum pts_status rc = PTS_OK;
  if (!st || !e || !ep) {
    rc = pts_error_set(err, PTS_NOMEM, "out of memory reporting shared memory status");
  } else {
    for (size_t i = 0; i < n; i++) {
      inference__system_shared_memory_status_response__region_status__init(&st[i]);
      st[i].name = s[i].name;
      st[i].key = s[i].key;
      st[i].offset = s[i].offset;
      st[i].byte_size = s[i].byte_size;
      inference__system_shared_memory_status_response__regions_entry__init(&e[i]);
      e[i].key = s[i].name;
      e[i].value = &st[i];
      ep[i] = &e[i];
    }
    Inference__SystemSharedMemoryStatusResponse r;
    inference__system_shared_memory_status_response__init(&r);
    r.n_regions = n;
    r.regions = ep;
    rc = pts_grpc_pack(&r.base, out, err);
  }
  pts_free(st);
  pts_free(e);
  pts_free(ep);
  return rc;
}

static enum pts_status pack_cuda(const struct pts_shm_status *s, size_t n,
                                 struct pts_grpc_reply *out, struct pts_error *err) {
  CudaStatus *st = pts_calloc(n ? n : 1, sizeof *st);
  CudaEntry *e = pts_calloc(n ? n : 1, sizeof *e);
  CudaEntry **ep = pts_calloc(n ? n : 1, sizeof *ep);
  enum pts_status rc = PTS_OK;
  if (!st || !e || !ep) {
    rc = pts_error_set(err, PTS_NOMEM, "out of memory reporting shared memory status");
  } else {
    for (size_t i = 0; i < n; i++) {
      inference__cuda_shared_memory_status_response__region_status__init(&st[i]);
      st[i].name = s[i].name;
      st[i].device_id = (uint64_t)s[i].device;
      st[i].byte_size = s[i].byte_size;
      inference__cuda_shared_memory_status_response__regions_entry__init(&e[i]);
      e[i].key = s[i].name;
      e[i].value = &st[i];
      ep[i] = &e[i];
    }
    Inference__CudaSharedMemoryStatusResponse r;
    inference__cuda_shared_memory_status_response__init(&r);
    r.n_regions = n;
    r.regions = ep;
    rc = pts_grpc_pack(&r.base, out, err);
  }
  pts_free(st);
  pts_free(e);
  pts_free(ep);
  return rc;
}

static enum pts_status status(struct pts_server *s, enum pts_shm_kind kind, const char *name,
                              struct pts_grpc_reply *out, struct pts_error *err) {
  struct pts_shm_status *st = NULL;
  size_t n = 0;
  enum pts_status rc = pts_shm_status_get(pts_server_shm(s), kind, name, &st, &n, err);
  if (rc == PTS_OK)
    rc = kind == PTS_SHM_CUDA ? pack_cuda(st, n, out, err) : pack_system(st, n, out, err);
  pts_shm_status_free(st, n);
  return rc;
}

enum pts_status pts_grpc_system_shm_status(struct pts_server *s, const struct pts_buf *in,
                                           struct pts_grpc_reply *out, struct pts_error *err) {
  UNPACK(Inference__SystemSharedMemoryStatusRequest,
         inference__system_shared_memory_status_request__descriptor, in, rq, err);
  enum pts_status rc = status(s, PTS_SHM_SYSTEM, rq->name, out, err);
  unpacked_free(rq);
  return rc;
}

enum pts_status pts_grpc_cuda_shm_status(struct pts_server *s, const struct pts_buf *in,
                                         struct pts_grpc_reply *out, struct pts_error *err) {
  UNPACK(Inference__CudaSharedMemoryStatusRequest,
         inference__cuda_shared_memory_status_request__descriptor, in, rq, err);
  enum pts_status rc = status(s, PTS_SHM_CUDA, rq->name, out, err);
  unpacked_free(rq);
  return rc;
}

/* ---- register / unregister ---- */

enum pts_status pts_grpc_system_shm_register(struct pts_server *s, const struct pts_buf *in,
                                             struct pts_grpc_reply *out, struct pts_error *err) {
  UNPACK(Inference__SystemSharedMemoryRegisterRequest,
         inference__system_shared_memory_register_request__descriptor, in, rq, err);
  enum pts_status rc = pts_shm_register_system(pts_server_shm(s), rq->name, rq->key, rq->offset,
                                               rq->byte_size, err);
  unpacked_free(rq);
  if (rc != PTS_OK) return rc;
  Inference__SystemSharedMemoryRegisterResponse r;
  inference__system_shared_memory_register_response__init(&r);
  return pts_grpc_pack(&r.base, out, err);
}

enum pts_status pts_grpc_cuda_shm_register(struct pts_server *s, const struct pts_buf *in,
                                           struct pts_grpc_reply *out, struct pts_error *err) {
  UNPACK(Inference__CudaSharedMemoryRegisterRequest,
         inference__cuda_shared_memory_register_request__descriptor, in, rq, err);
  enum pts_status rc =
      pts_shm_register_cuda(pts_server_shm(s), rq->name, rq->raw_handle.data, rq->raw_handle.len,
                            rq->device_id, rq->byte_size, err);
  unpacked_free(rq);
  if (rc != PTS_OK) return rc;
  Inference__CudaSharedMemoryRegisterResponse r;
  inference__cuda_shared_memory_register_response__init(&r);
  return pts_grpc_pack(&r.base, out, err);
}

enum pts_status pts_grpc_system_shm_unregister(struct pts_server *s, const struct pts_buf *in,
                                               struct pts_grpc_reply *out, struct pts_error *err) {
  UNPACK(Inference__SystemSharedMemoryUnregisterRequest,
         inference__system_shared_memory_unregister_request__descriptor, in, rq, err);
  enum pts_status rc = pts_shm_unregister(pts_server_shm(s), PTS_SHM_SYSTEM, rq->name, err);
  unpacked_free(rq);
  if (rc != PTS_OK) return rc;
  Inference__SystemSharedMemoryUnregisterResponse r;
  inference__system_shared_memory_unregister_response__init(&r);
  return pts_grpc_pack(&r.base, out, err);
}

enum pts_status pts_grpc_cuda_shm_unregister(struct pts_server *s, const struct pts_buf *in,
                                             struct pts_grpc_reply *out, struct pts_error *err) {
  UNPACK(Inference__CudaSharedMemoryUnregisterRequest,
         inference__cuda_shared_memory_unregister_request__descriptor, in, rq, err);
  enum pts_status rc = pts_shm_unregister(pts_server_shm(s), PTS_SHM_CUDA, rq->name, err);
  unpacked_free(rq);
  if (rc != PTS_OK) return rc;
  Inference__CudaSharedMemoryUnregisterResponse r;
  inference__cuda_shared_memory_unregister_response__init(&r);
  return pts_grpc_pack(&r.base, out, err);
}
