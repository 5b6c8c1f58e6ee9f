/* server/shm_resolve.c — see shm_resolve.h. */
#include "server/shm_resolve.h"

#include <stdio.h>

#include "core/alloc.h"

static enum pts_status no_registry(const char *what, struct pts_error *err) {
  return pts_error_set(err, PTS_UNSUPPORTED, "%s: shared memory is not available", what);
}

/* A device input the CPU must read: one copy into host memory. */
static enum pts_status stage_to_host(struct pts_tensor *t, struct pts_buf *view, int device,
                                     struct pts_error *err) {
  struct pts_buf *host = pts_buf_new(view->size ? view->size : 1);
  if (!host)
    return pts_error_set(err, PTS_NOMEM, "input '%s': out of memory copying %zu bytes from CUDA "
                         "shared memory", t->name, view->size);
  enum pts_status st = pts_shm_read_device(view, device, host->data, view->size, err);
  if (st != PTS_OK) {
    pts_buf_release(host);
    pts_error_prefix(err, "input '%s'", t->name);
    return st;
  }
  t->buf = host;
  t->data = host->data;
  t->byte_size = view->size;
  t->mem = PTS_MEM_HOST;
  t->device = 0;
  return PTS_OK;
}

static enum pts_status resolve_input(struct pts_shm_registry *r, struct pts_tensor *t,
                                     const struct pts_shm_place *p, bool device_inputs,
                                     struct pts_error *err) {
  char what[PTS_ERROR_MSG_MAX / 4];
  snprintf(what, sizeof what, "input '%s'", t->name ? t->name : "");
  if (!r) return no_registry(what, err);
  struct pts_buf *view;
  enum pts_mem mem;
  int device;
  enum pts_status st =
      pts_shm_acquire(r, p->region, p->offset, p->byte_size, what, &view, &mem, &device, err);
  if (st != PTS_OK) return st;
  /* The decoder left the data empty; never keep two sources. */
  pts_buf_release(t->buf);
  t->buf = NULL;
  if (mem == PTS_MEM_DEVICE && (!device_inputs || t->dtype == PTS_DTYPE_BYTES)) {
    st = stage_to_host(t, view, device, err);
    pts_buf_release(view);
    return st;
  }
  t->buf = view;
  t->data = view->data;
  t->byte_size = view->size;
  t->mem = mem;
  t->device = device;
  return PTS_OK;
}

static enum pts_status resolve_output(struct pts_shm_registry *r, struct pts_requested_output *o,
                                      struct pts_error *err) {
  char what[PTS_ERROR_MSG_MAX / 4];
  snprintf(what, sizeof what, "output '%s'", o->name ? o->name : "");
  if (!r) return no_registry(what, err);
  return pts_shm_acquire(r, o->shm.region, o->shm.offset, o->shm.byte_size, what,
                         &o->shm_target, &o->shm_mem, &o->shm_device, err);
}

enum pts_status pts_shm_resolve(struct pts_shm_registry *r, struct pts_infer_request *req,
                                bool device_inputs, struct pts_error *err) {
  for (size_t i = 0; req->input_shm && i < req->n_inputs; i++) {
    if (!req->input_shm[i].region) continue;
    enum pts_status st =
        resolve_input(r, &req->inputs[i], &req->input_shm[i], device_inputs, err);
    if (st != PTS_OK) return st;
  }
  for (size_t i = 0; i < req->n_outputs; i++) {
    struct pts_requested_output *o = &req->outputs[i];
    if (!o->shm.region || o->shm_target) continue;
    enum pts_status st = resolve_output(r, o, err);
    if (st != PTS_OK) return st;
  }
  return PTS_OK;
}
