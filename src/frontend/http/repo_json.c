/* frontend/http/repo_json.c — see repo_json.h. */
#include "frontend/http/repo_json.h"

#include <jansson.h>
#include <string.h>

#include "config/json_kind.h"
#include "core/alloc.h"
#include "core/base64.h"

/* The body's "parameters" object, or NULL when the body is empty or has
 * none; `what` is "load" or "unload". */
static enum pts_status parameters_of(const char *body, size_t len, const char *what,
                                     const char *model, json_t **root, const json_t **params,
                                     struct pts_error *err) {
  *root = NULL;
  *params = NULL;
  if (len == 0) return PTS_OK;
  json_error_t je;
  *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!*root)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse the %s request of model '%s' at line %d column %d: %s",
                         what, model, je.line, je.column, je.text);
  if (!json_is_object(*root))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s request of model '%s' must be a JSON object, got %s", what,
                         model, pts_json_kind_name(*root));
  const char *key;
  json_t *val;
  json_object_foreach(*root, key, val) {
    if (strcmp(key, "parameters") != 0)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "unexpected key '%.60s' in the %s request of model '%s': only "
                           "'parameters' is allowed",
                           key, what, model);
    if (!json_is_object(val))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "'parameters' of the %s request of model '%s' must be an object, got "
                           "%s",
                           what, model, pts_json_kind_name(val));
    *params = val;
  }
  return PTS_OK;
}

enum pts_status pts_repo_parse_load(const char *body, size_t len, const char *model,
                                    struct pts_load_params *out, struct pts_error *err) {
  memset(out, 0, sizeof *out);
  json_t *root;
  const json_t *params;
  enum pts_status st = parameters_of(body, len, "load", model, &root, &params, err);
  const char *key;
  json_t *val;
  if (st == PTS_OK && params) {
    json_object_foreach((json_t *)params, key, val) {
      bool file = strncmp(key, "file:", 5) == 0;
      if (!file && strcmp(key, "config") != 0) {
        st = pts_error_set(err, PTS_INVALID_ARG,
                           "unknown parameter '%.60s' in the load request of model '%s': "
                           "expected 'config' or 'file:<version>/<name>'",
                           key, model);
        break;
      }
      if (!json_is_string(val)) {
        st = pts_error_set(err, PTS_INVALID_ARG,
                           "parameter '%.60s' of the load request of model '%s' must be a "
                           "string, got %s",
                           key, model, pts_json_kind_name(val));
        break;
      }
      if (!file) {
        out->config_len = json_string_length(val);
        out->config = pts_strndup(json_string_value(val), out->config_len);
        if (!out->config) st = pts_error_set(err, PTS_NOMEM, "out of memory reading a load");
        if (st != PTS_OK) break;
        continue;
      }
      char what[128];
      snprintf(what, sizeof what, "parameter '%.60s'", key);
      uint8_t *data;
      size_t size;
      st = pts_base64_decode(json_string_value(val), json_string_length(val), what, &data, &size,
                             err);
      if (st == PTS_OK) st = pts_load_params_add_file(out, key + 5, data, size, err);
      if (st != PTS_OK) break;
    }
  }
  json_decref(root);
  return st;
}

enum pts_status pts_repo_parse_unload(const char *body, size_t len, const char *model,
                                      bool *unload_dependents, struct pts_error *err) {
  *unload_dependents = false;
  json_t *root;
  const json_t *params;
  enum pts_status st = parameters_of(body, len, "unload", model, &root, &params, err);
  const char *key;
  json_t *val;
  if (st == PTS_OK && params) {
    json_object_foreach((json_t *)params, key, val) {
      if (strcmp(key, "unload_dependents") != 0) {
        st = pts_error_set(err, PTS_INVALID_ARG,
                           "unknown parameter '%.60s' in the unload request of model '%s': "
                           "expected 'unload_dependents'",
                           key, model);
        break;
      }
      if (!json_is_boolean(val)) {
        st = pts_error_set(err, PTS_INVALID_ARG,
                           "parameter 'unload_dependents' of the unload request of model '%s' "
                           "must be a boolean, got %s",
                           model, pts_json_kind_name(val));
        break;
      }
      *unload_dependents = json_is_true(val);
    }
  }
  json_decref(root);
  return st;
}
