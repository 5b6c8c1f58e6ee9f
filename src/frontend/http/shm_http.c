/* frontend/http/shm_http.c — see shm_http.h. JSON in with jansson, out
 * with jsonw, as the other HTTP bodies. */
#include "frontend/http/shm_http.h"

#include <jansson.h>
#include <string.h>

#include "config/json_kind.h"
#include "core/alloc.h"
#include "core/base64.h"
#include "frontend/http/jsonw.h"

static enum pts_status field_uint(const json_t *root, const char *region, const char *key,
                                  bool required, uint64_t *out, struct pts_error *err) {
  const json_t *v = json_object_get(root, key);
  if (!v) {
    if (!required) return PTS_OK;
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': the request has no "
                         "'%s'",
                         region, key);
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': '%s' must be a "
                         "non-negative integer, got %s",
                         region, key, pts_json_kind_name(v));
  *out = (uint64_t)json_integer_value(v);
  return PTS_OK;
}

static enum pts_status register_system(struct pts_shm_registry *r, const char *region,
                                       const json_t *root, struct pts_error *err) {
  const json_t *key = json_object_get(root, "key");
  if (!key)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': the request has no 'key' "
                         "(the name of the POSIX shared memory object)",
                         region);
  const char *k = json_string_value(key);
  if (!k || strlen(k) != json_string_length(key))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register shared memory region '%s': 'key' must be a string "
                         "without NUL bytes, got %s",
                         region, pts_json_kind_name(key));
  uint64_t offset = 0, size = 0;
  enum pts_status st = field_uint(root, region, "offset", false, &offset, err);
  if (st == PTS_OK) st = field_uint(root, region, "byte_size", true, &size, err);
  if (st != PTS_OK) return st;
  return pts_shm_register_system(r, region, k, offset, size, err);
}

static enum pts_status register_cuda(struct pts_shm_registry *r, const char *region,
                                     const json_t *root, struct pts_error *err) {
  const json_t *raw = json_object_get(root, "raw_handle");
  const json_t *b64 = json_is_object(raw) ? json_object_get(raw, "b64") : NULL;
  if (!json_is_string(b64))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to register CUDA shared memory region '%s': 'raw_handle' must "
                         "be an object {\"b64\": \"<base64 of the cudaIpcMemHandle_t>\"}",
                         region);
  uint8_t *handle = NULL;
  size_t handle_len = 0;
  enum pts_status st = pts_base64_decode(json_string_value(b64), json_string_length(b64),
                                         "'raw_handle.b64'", &handle, &handle_len, err);
  if (st != PTS_OK) {
    pts_error_prefix(err, "failed to register CUDA shared memory region '%s'", region);
    return st;
  }
  const json_t *dev = json_object_get(root, "device_id");
  uint64_t size = 0;
  if (!json_is_integer(dev) || json_integer_value(dev) < 0)
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "failed to register CUDA shared memory region '%s': 'device_id' must be a "
                       "non-negative integer, got %s",
                       region, dev ? pts_json_kind_name(dev) : "nothing");
  if (st == PTS_OK) st = field_uint(root, region, "byte_size", true, &size, err);
  if (st == PTS_OK)
    st = pts_shm_register_cuda(r, region, handle, handle_len, json_integer_value(dev), size, err);
  pts_free(handle);
  return st;
}

enum pts_status pts_http_shm_register(struct pts_shm_registry *r, bool cuda, const char *region,
                                      const char *body, size_t len, struct pts_error *err) {
  json_error_t je;
  json_t *root = len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, &je) : NULL;
  if (len && !root)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse the shared memory register request JSON at line %d "
                         "column %d: %s",
                         je.line, je.column, je.text);
  if (!json_is_object(root)) {
    enum pts_status st = pts_error_set(
        err, PTS_INVALID_ARG,
        "failed to register shared memory region '%s': the request body must be a JSON object "
        "(got %s)",
        region, root ? pts_json_kind_name(root) : "an empty body");
    json_decref(root);
    return st;
  }
  enum pts_status st =
      cuda ? register_cuda(r, region, root, err) : register_system(r, region, root, err);
  json_decref(root);
  return st;
}

enum pts_status pts_http_shm_status(struct pts_shm_registry *r, bool cuda, const char *region,
                                    char **json, size_t *json_len, struct pts_error *err) {
  struct pts_shm_status *s;
  size_t n;
  enum pts_status st =
      pts_shm_status_get(r, cuda ? PTS_SHM_CUDA : PTS_SHM_SYSTEM, region, &s, &n, err);
  if (st != PTS_OK) return st;
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_raw(&w, "[", 1);
  for (size_t i = 0; i < n; i++) {
    pts_jsonw_cstr(&w, i ? ",{" : "{");
    pts_jsonw_key(&w, "name");
    pts_jsonw_str(&w, s[i].name, strlen(s[i].name));
    if (cuda) {
      pts_jsonw_cstr(&w, ",\"device_id\":");
      pts_jsonw_int(&w, s[i].device);
    } else {
      pts_jsonw_cstr(&w, ",\"key\":");
      pts_jsonw_str(&w, s[i].key, strlen(s[i].key));
      pts_jsonw_cstr(&w, ",\"offset\":");
      pts_jsonw_uint(&w, s[i].offset);
    }
    pts_jsonw_cstr(&w, ",\"byte_size\":");
    pts_jsonw_uint(&w, s[i].byte_size);
    pts_jsonw_raw(&w, "}", 1);
  }
  pts_jsonw_raw(&w, "]", 1);
  pts_shm_status_free(s, n);
  *json = pts_jsonw_take(&w, json_len);
  if (!*json) return pts_error_set(err, PTS_NOMEM, "out of memory reporting shared memory status");
  return PTS_OK;
}
