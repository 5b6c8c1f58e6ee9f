/* ptperf/lib/shm.c — see shm.h. */
#include "ptperf/lib/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/base64.h"

#define TIMEOUT_MS 10000

static enum pts_status post_json(const struct ptperf_addr *a, const char *path, const char *body,
                                 struct pts_error *err) {
  int status = 0;
  char *reply = NULL;
  enum pts_status st =
      ptperf_http_post(a, path, body, body ? strlen(body) : 0, TIMEOUT_MS, &status, &reply, err);
  if (st == PTS_OK && status != 200)
    st = pts_error_set(err, PTS_UNAVAILABLE, "POST %s: HTTP %d: %.300s", path, status,
                       reply ? reply : "");
  pts_free(reply);
  return st;
}

/* ---- what differs between the kinds ---- */

/* System: a POSIX shared-memory object per region. */
static enum pts_status system_make(struct ptperf_shm *s, struct ptperf_shm_region *r,
                                   const void *init, struct pts_error *err) {
  (void)s;
  snprintf(r->key, sizeof r->key, "/ptperf_%d_%s", (int)getpid(),
           r->name + strlen("ptperf_"));
  int fd = shm_open(r->key, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return pts_error_set(err, PTS_UNAVAILABLE, "shm_open %s: %s", r->key, strerror(errno));
  if (ftruncate(fd, (off_t)r->size) != 0) {
    close(fd);
    shm_unlink(r->key);
    return pts_error_set(err, PTS_UNAVAILABLE, "sizing %s to %zu bytes failed", r->key, r->size);
  }
  r->map = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (r->map == MAP_FAILED) {
    r->map = NULL;
    shm_unlink(r->key);
    return pts_error_set(err, PTS_UNAVAILABLE, "mapping %s failed", r->key);
  }
  if (init) memcpy(r->map, init, r->size);
  return PTS_OK;
}

static enum pts_status system_describe(struct ptperf_shm *s, const struct ptperf_shm_region *r,
                                       char *body, size_t cap, struct pts_error *err) {
  (void)s;
  (void)err;
  snprintf(body, cap, "{\"key\":\"%s\",\"offset\":0,\"byte_size\":%zu}", r->key, r->size);
  return PTS_OK;
}

static void system_unmake(struct ptperf_shm *s, struct ptperf_shm_region *r) {
  (void)s;
  munmap(r->map, r->size);
  shm_unlink(r->key);
}

/* CUDA: a device allocation per region, exported by its IPC handle. */
static enum pts_status cuda_start(struct ptperf_shm *s, struct pts_error *err) {
  enum pts_status st = ptperf_cuda_open(s->device, &s->cuda, err);
  if (st != PTS_OK) pts_error_prefix(err, "--shared-memory cuda");
  return st;
}

static void cuda_stop(struct ptperf_shm *s) { ptperf_cuda_close(s->cuda); }

static enum pts_status cuda_make(struct ptperf_shm *s, struct ptperf_shm_region *r,
                                 const void *init, struct pts_error *err) {
  enum pts_status st = ptperf_cuda_alloc(s->cuda, r->size, &r->dev, err);
  if (st == PTS_OK && init) st = ptperf_cuda_upload(s->cuda, r->dev, init, r->size, err);
  if (st != PTS_OK) {
    ptperf_cuda_free(s->cuda, r->dev);
    r->dev = NULL;
    pts_error_prefix(err, "CUDA shared memory region '%s' on GPU %d", r->name, s->device);
  }
  return st;
}

static enum pts_status cuda_describe(struct ptperf_shm *s, const struct ptperf_shm_region *r,
                                     char *body, size_t cap, struct pts_error *err) {
  unsigned char handle[PTPERF_CUDA_IPC_HANDLE_SIZE];
  enum pts_status st = ptperf_cuda_ipc_handle(s->cuda, r->dev, handle, err);
  if (st != PTS_OK) return st;
  char *b64 = pts_base64_encode(handle, sizeof handle, NULL);
  if (!b64) return pts_error_set(err, PTS_NOMEM, "no memory for an IPC handle");
  /* Triton's body (tritonclient.http's register_cuda_shared_memory). */
  snprintf(body, cap, "{\"raw_handle\":{\"b64\":\"%s\"},\"device_id\":%d,\"byte_size\":%zu}", b64,
           s->device, r->size);
  pts_free(b64);
  return PTS_OK;
}

static void cuda_unmake(struct ptperf_shm *s, struct ptperf_shm_region *r) {
  ptperf_cuda_free(s->cuda, r->dev);
}

static const struct kind_ops {
  const char *flag;      /* --shared-memory's word */
  const char *extension; /* the URL's segment: /v2/<extension>/region/... */
  /* Before the first region and after the last (NULL: nothing to do). */
  enum pts_status (*start)(struct ptperf_shm *s, struct pts_error *err);
  void (*stop)(struct ptperf_shm *s);
  /* Storage of r->size bytes, filled from `init` (r->size bytes; NULL:
   * left unset). On error nothing is left to free. */
  enum pts_status (*make)(struct ptperf_shm *s, struct ptperf_shm_region *r, const void *init,
                          struct pts_error *err);
  /* The JSON body of r's registration, into `body`. */
  enum pts_status (*describe)(struct ptperf_shm *s, const struct ptperf_shm_region *r,
                              char *body, size_t cap, struct pts_error *err);
  void (*unmake)(struct ptperf_shm *s, struct ptperf_shm_region *r);
} kinds[] = {
    [PTPERF_SHM_SYSTEM] = {"system", "systemsharedmemory", NULL, NULL, system_make,
                           system_describe, system_unmake},
    [PTPERF_SHM_CUDA] = {"cuda", "cudasharedmemory", cuda_start, cuda_stop, cuda_make,
                         cuda_describe, cuda_unmake},
};

/* ---- the same for both ---- */

static enum pts_status register_region(const struct ptperf_addr *a, struct ptperf_shm *s,
                                       struct ptperf_shm_region *r, struct pts_error *err) {
  const struct kind_ops *k = &kinds[s->kind];
  char path[128], body[512];
  enum pts_status st = k->describe(s, r, body, sizeof body, err);
  if (st != PTS_OK) return st;
  snprintf(path, sizeof path, "/v2/%s/region/%s/register", k->extension, r->name);
  st = post_json(a, path, body, err);
  r->registered = st == PTS_OK;
  return st;
}

enum pts_status ptperf_shm_setup(const struct ptperf_addr *a, const struct ptperf_model *m,
                                 const struct ptperf_shm_options *o, struct ptperf_shm *out,
                                 struct pts_error *err) {
  memset(out, 0, sizeof *out);
  size_t in = 0;
  for (size_t i = 0; i < m->n_inputs; i++) {
    if (m->inputs[i].dtype == PTS_DTYPE_BYTES)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--shared-memory %s: input '%s' is BYTES, which ptperf only sends "
                           "in the request",
                           kinds[o->kind].flag, m->inputs[i].name);
    in += ptperf_input_wire_size(&m->inputs[i]);
  }
  out->kind = o->kind;
  out->device = o->device;
  out->input_bytes = in;
  out->n_requests = o->n_requests;
  out->output_bytes = o->output_bytes;
  out->in = (struct ptperf_shm_region){.name = "ptperf_in", .size = in * o->n_requests};
  out->out = (struct ptperf_shm_region){
      .name = "ptperf_out", .size = o->output_bytes * (m->n_outputs ? m->n_outputs : 1)};
  /* The inputs of every request slot, made on the host first: a CUDA
   * region is filled by one copy from here. */
  unsigned char *data = pts_malloc(out->in.size + 1);
  if (!data) {
    memset(out, 0, sizeof *out);
    return pts_error_set(err, PTS_NOMEM, "no memory for %zu requests' inputs", o->n_requests);
  }
  for (size_t i = 0; i < o->n_requests; i++)
    ptperf_inputs_fill(m, o->seed0 + i, o->zero_data, data + i * in);
  const struct kind_ops *k = &kinds[o->kind];
  enum pts_status st = k->start ? k->start(out, err) : PTS_OK;
  if (st == PTS_OK && (st = k->make(out, &out->in, data, err)) == PTS_OK) out->in.made = true;
  if (st == PTS_OK && (st = k->make(out, &out->out, NULL, err)) == PTS_OK) out->out.made = true;
  pts_free(data);
  if (st == PTS_OK) st = register_region(a, out, &out->in, err);
  if (st == PTS_OK) st = register_region(a, out, &out->out, err);
  if (st != PTS_OK) ptperf_shm_teardown(a, out);
  return st;
}

/* {"inputs":[{name, shape, datatype, parameters:{shared_memory_*}}...],
 *  "outputs":[{name, parameters:{binary_data:false, shared_memory_*}}...]} */
static char *request_json(const struct ptperf_model *m, const struct ptperf_shm *s, size_t r) {
  json_t *root = json_object(), *inputs = json_array(), *outputs = json_array();
  json_object_set_new(root, "inputs", inputs);
  size_t at = r * s->input_bytes;
  for (size_t i = 0; i < m->n_inputs; i++) {
    const struct ptperf_input *in = &m->inputs[i];
    json_t *shape = json_array();
    for (int d = 0; d < in->ndim; d++) json_array_append_new(shape, json_integer(in->dims[d]));
    size_t n = ptperf_input_wire_size(in);
    json_array_append_new(
        inputs, json_pack("{s:s, s:o, s:s, s:{s:s, s:I, s:I}}", "name", in->name, "shape", shape,
                          "datatype", pts_dtype_name(in->dtype), "parameters",
                          "shared_memory_region", s->in.name, "shared_memory_byte_size",
                          (json_int_t)n, "shared_memory_offset", (json_int_t)at));
    at += n;
  }
  for (size_t o = 0; o < m->n_outputs; o++)
    json_array_append_new(
        outputs, json_pack("{s:s, s:{s:b, s:s, s:I, s:I}}", "name", m->output_names[o],
                           "parameters", "binary_data", 0, "shared_memory_region", s->out.name,
                           "shared_memory_byte_size", (json_int_t)s->output_bytes,
                           "shared_memory_offset", (json_int_t)(o * s->output_bytes)));
  json_object_set_new(root, "outputs", outputs);
  char *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  return text;
}

enum pts_status ptperf_shm_request_build(const struct ptperf_model *m, const struct ptperf_shm *s,
                                         size_t i, const char *host, char **out, size_t *out_len,
                                         struct pts_error *err) {
  *out = NULL;
  char *json = request_json(m, s, i % s->n_requests);
  char *path = ptperf_model_path(m, "infer", true);
  if (!json || !path) {
    free(json);
    pts_free(path);
    return pts_error_set(err, PTS_NOMEM, "no memory for a request to model '%s'", m->name);
  }
  size_t json_len = strlen(json);
  char head[2048];
  int hn = snprintf(head, sizeof head,
                    "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    path, host, json_len);
  pts_free(path);
  if (hn < 0 || (size_t)hn >= sizeof head) {
    free(json);
    return pts_error_set(err, PTS_INVALID_ARG, "model '%s': request line too long", m->name);
  }
  char *buf = pts_malloc((size_t)hn + json_len);
  if (!buf) {
    free(json);
    return pts_error_set(err, PTS_NOMEM, "no memory for a request");
  }
  memcpy(buf, head, (size_t)hn);
  memcpy(buf + hn, json, json_len);
  free(json); /* jansson allocated it */
  *out = buf;
  *out_len = (size_t)hn + json_len;
  return PTS_OK;
}

/* Whether the server still lists region r (its status answers 200). */
static bool still_listed(const struct ptperf_addr *a, const struct ptperf_shm *s,
                         const struct ptperf_shm_region *r) {
  char path[128];
  snprintf(path, sizeof path, "/v2/%s/region/%s/status", kinds[s->kind].extension, r->name);
  int status = 0;
  char *body = NULL;
  struct pts_error err;
  enum pts_status st = ptperf_http_get(a, path, TIMEOUT_MS, &status, &body, &err);
  pts_free(body);
  return st == PTS_OK && status == 200;
}

/* Unregisters r if it is registered, and waits until the server no longer
 * lists it, for a few seconds at most. Requests the load abandoned may
 * still be in the server, using the region: a server may refuse to
 * unregister it then (hence the retries), or accept and keep the region,
 * name and all, until those requests are done, as ptserve does (hence
 * the wait).
 * Either way the name is free for the next run once this returns: a
 * ptperf started right after (the GPU bench's sweep after its warm pass)
 * found it taken on an H100 at 2b4d46e. */
static void unregister_region(const struct ptperf_addr *a, const struct ptperf_shm *s,
                              struct ptperf_shm_region *r) {
  if (!r->registered) return;
  char path[128];
  snprintf(path, sizeof path, "/v2/%s/region/%s/unregister", kinds[s->kind].extension, r->name);
  struct pts_error err;
  bool unregistered = false;
  for (int tries = 0; tries < 300; tries++) {
    if (!unregistered) unregistered = post_json(a, path, NULL, &err) == PTS_OK;
    if (unregistered && !still_listed(a, s, r)) break;
    struct timespec ts = {0, 10 * 1000000};
    nanosleep(&ts, NULL);
  }
  r->registered = false;
}

void ptperf_shm_teardown(const struct ptperf_addr *a, struct ptperf_shm *s) {
  if (!s || s->kind == PTPERF_SHM_NONE) return;
  struct ptperf_shm_region *regions[] = {&s->in, &s->out};
  for (int i = 0; i < 2; i++) {
    /* Unregistered before freed: a CUDA server must close its IPC mapping
     * of the allocation first. */
    unregister_region(a, s, regions[i]);
    if (regions[i]->made) kinds[s->kind].unmake(s, regions[i]);
  }
  if (kinds[s->kind].stop) kinds[s->kind].stop(s);
  memset(s, 0, sizeof *s);
}
