/* ptperf/lib/shm.c — see shm.h. */
#include "ptperf/lib/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"

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

static enum pts_status register_region(const struct ptperf_addr *a, const char *name,
                                       const char *key, size_t offset, size_t size,
                                       struct pts_error *err) {
  char path[128], body[256];
  snprintf(path, sizeof path, "/v2/systemsharedmemory/region/%s/register", name);
  snprintf(body, sizeof body, "{\"key\":\"%s\",\"offset\":%zu,\"byte_size\":%zu}", key, offset,
           size);
  return post_json(a, path, body, err);
}

enum pts_status ptperf_shm_setup(const struct ptperf_addr *a, const struct ptperf_model *m,
                                 size_t n_requests, uint64_t seed0, bool zero_data,
                                 size_t output_bytes, struct ptperf_shm *out,
                                 struct pts_error *err) {
  memset(out, 0, sizeof *out);
  size_t in = 0;
  for (size_t i = 0; i < m->n_inputs; i++) {
    if (m->inputs[i].dtype == PTS_DTYPE_BYTES)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--shared-memory system: input '%s' is BYTES, which ptperf only sends "
                           "in the request",
                           m->inputs[i].name);
    in += ptperf_input_wire_size(&m->inputs[i]);
  }
  out->input_bytes = in;
  out->n_requests = n_requests;
  out->output_bytes = output_bytes;
  out->size = in * n_requests + output_bytes * (m->n_outputs ? m->n_outputs : 1);
  snprintf(out->key, sizeof out->key, "/ptperf_%d", (int)getpid());
  int fd = shm_open(out->key, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return pts_error_set(err, PTS_UNAVAILABLE, "shm_open %s: %s", out->key, strerror(errno));
  if (ftruncate(fd, (off_t)out->size) != 0) {
    close(fd);
    shm_unlink(out->key);
    return pts_error_set(err, PTS_UNAVAILABLE, "sizing %s to %zu bytes failed", out->key,
                         out->size);
  }
  out->map = mmap(NULL, out->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (out->map == MAP_FAILED) {
    out->map = NULL;
    shm_unlink(out->key);
    return pts_error_set(err, PTS_UNAVAILABLE, "mapping %s failed", out->key);
  }
  for (size_t i = 0; i < n_requests; i++)
    ptperf_inputs_fill(m, seed0 + i, zero_data, (unsigned char *)out->map + i * in);
  out->registered = true;
  enum pts_status st = register_region(a, "ptperf_in", out->key, 0, in * n_requests, err);
  if (st == PTS_OK)
    st = register_region(a, "ptperf_out", out->key, in * n_requests, out->size - in * n_requests,
                         err);
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
                          "shared_memory_region", "ptperf_in", "shared_memory_byte_size",
                          (json_int_t)n, "shared_memory_offset", (json_int_t)at));
    at += n;
  }
  for (size_t o = 0; o < m->n_outputs; o++)
    json_array_append_new(
        outputs, json_pack("{s:s, s:{s:b, s:s, s:I, s:I}}", "name", m->output_names[o],
                           "parameters", "binary_data", 0, "shared_memory_region", "ptperf_out",
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

void ptperf_shm_teardown(const struct ptperf_addr *a, struct ptperf_shm *s) {
  if (!s || !s->map) return;
  if (s->registered) {
    /* Requests the load abandoned may still be in the server, and a region
     * in use can not be unregistered: retry for a few seconds. */
    static const char *const paths[] = {"/v2/systemsharedmemory/region/ptperf_in/unregister",
                                        "/v2/systemsharedmemory/region/ptperf_out/unregister"};
    for (int k = 0; k < 2; k++) {
      struct pts_error err;
      for (int tries = 0; tries < 300; tries++) {
        if (post_json(a, paths[k], NULL, &err) == PTS_OK) break;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
      }
    }
    s->registered = false;
  }
  munmap(s->map, s->size);
  shm_unlink(s->key);
  s->map = NULL;
}
