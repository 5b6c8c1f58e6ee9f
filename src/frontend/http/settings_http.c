/* frontend/http/settings_http.c — see settings_http.h. JSON in with
 * jansson, out with jsonw; the settings themselves live in trace/trace.h
 * and core/log.h, shared with the gRPC frontend. */
#include "frontend/http/settings_http.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "config/json_kind.h"
#include "core/alloc.h"
#include "core/log.h"
#include "frontend/http/jsonw.h"
#include "trace/trace.h"

/* A trace request carries at most this many keys (there are 7). */
#define MAX_UPDATES 16

/* The body as a JSON object; an empty body is an empty object. */
static enum pts_status parse_object(const char *what, const char *body, size_t len, json_t **out,
                                    struct pts_error *err) {
  if (len == 0) {
    *out = json_object();
    return *out ? PTS_OK : pts_error_set(err, PTS_NOMEM, "out of memory");
  }
  json_error_t je;
  json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "failed to parse the %s request JSON at line %d column %d: %s", what,
                         je.line, je.column, je.text);
  if (!json_is_object(root)) {
    enum pts_status st =
        pts_error_set(err, PTS_INVALID_ARG, "the %s request JSON must be an object, got %s", what,
                      pts_json_kind_name(root));
    json_decref(root);
    return st;
  }
  *out = root;
  return PTS_OK;
}

/* ------------------------------------------------------------ trace */

/* Scalar values kept as text for the update (integers are accepted and
 * written back as their digits). */
struct text_values {
  char num[MAX_UPDATES][24];
  const char *ptrs[MAX_UPDATES][8];
};

static enum pts_status scalar_text(const char *key, json_t *v, char *num, const char **out,
                                   struct pts_error *err) {
  if (json_is_string(v)) {
    *out = json_string_value(v);
    return PTS_OK;
  }
  if (json_is_integer(v)) {
    snprintf(num, 24, "%lld", (long long)json_integer_value(v));
    *out = num;
    return PTS_OK;
  }
  return pts_error_set(err, PTS_INVALID_ARG, "trace setting '%s' must be a string, got %s", key,
                       pts_json_kind_name(v));
}

static enum pts_status to_update(const char *key, json_t *v, size_t i, struct text_values *tv,
                                 struct pts_trace_update *u, struct pts_error *err) {
  u->key = key;
  u->values = tv->ptrs[i];
  if (json_is_null(v)) {
    u->clear = true;
    return PTS_OK;
  }
  if (!json_is_array(v)) {
    u->n_values = 1;
    return scalar_text(key, v, tv->num[i], &tv->ptrs[i][0], err);
  }
  if (json_array_size(v) > 8)
    return pts_error_set(err, PTS_INVALID_ARG, "trace setting '%s' has %zu values; at most 8", key,
                         json_array_size(v));
  size_t k;
  json_t *e;
  json_array_foreach(v, k, e) {
    if (!json_is_string(e))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "trace setting '%s' must be an array of strings; element %zu is %s", key,
                           k, pts_json_kind_name(e));
    tv->ptrs[i][k] = json_string_value(e);
  }
  u->n_values = json_array_size(v);
  return PTS_OK;
}

static enum pts_status apply_trace(const char *model, json_t *root, struct pts_error *err) {
  struct pts_trace_update u[MAX_UPDATES];
  struct text_values tv;
  memset(u, 0, sizeof u);
  size_t n = 0;
  const char *key;
  json_t *v;
  if (json_object_size(root) > MAX_UPDATES)
    return pts_error_set(err, PTS_INVALID_ARG, "the trace setting request has %zu keys; at most %d",
                         json_object_size(root), MAX_UPDATES);
  json_object_foreach(root, key, v) {
    enum pts_status st = to_update(key, v, n, &tv, &u[n], err);
    if (st != PTS_OK) return st;
    n++;
  }
  if (n == 0 && model) {
    /* Triton: a model named with no settings removes its specification. */
    static const char *const keys[] = {"trace_level", "trace_rate", "trace_count", "log_frequency"};
    for (size_t i = 0; i < 4; i++)
      u[n++] = (struct pts_trace_update){.key = keys[i], .clear = true};
  }
  return n ? pts_trace_update(model, u, n, err) : PTS_OK;
}

static char *render_trace(const char *model, size_t *len) {
  struct pts_trace_settings *ts = pts_malloc(sizeof *ts);
  if (!ts) return NULL;
  pts_trace_get(model, ts);
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_raw(&w, "{", 1);
  for (size_t i = 0; i < ts->n; i++) {
    const struct pts_trace_kv *kv = &ts->kv[i];
    if (i) pts_jsonw_raw(&w, ",", 1);
    pts_jsonw_key(&w, kv->key);
    if (kv->array) pts_jsonw_raw(&w, "[", 1);
    for (size_t k = 0; k < kv->n_values; k++) {
      if (k) pts_jsonw_raw(&w, ",", 1);
      pts_jsonw_str(&w, kv->values[k], strlen(kv->values[k]));
    }
    if (kv->array) pts_jsonw_raw(&w, "]", 1);
  }
  pts_jsonw_raw(&w, "}", 1);
  pts_free(ts);
  return pts_jsonw_take(&w, len);
}

enum pts_status pts_http_trace_setting(struct pts_server *s, const char *model, bool post,
                                       const char *body, size_t len, char **json, size_t *json_len,
                                       struct pts_error *err) {
  *json = NULL;
  if (model) {
    struct pts_model *m = NULL;
    struct pts_error ignored;
    if (pts_server_model_get(s, model, -1, false, &m, &ignored) != PTS_OK)
      return pts_error_set(err, PTS_INVALID_ARG, "Request for unknown model : %s", model);
    pts_model_release(m);
  }
  if (post) {
    json_t *root = NULL;
    enum pts_status st = parse_object("trace setting", body, len, &root, err);
    if (st == PTS_OK) st = apply_trace(model, root, err);
    json_decref(root);
    if (st != PTS_OK) return st;
  }
  *json = render_trace(model, json_len);
  if (!*json) return pts_error_set(err, PTS_NOMEM, "out of memory rendering the trace settings");
  return PTS_OK;
}

/* ------------------------------------------------------------ logging */

static enum pts_status log_bool(const char *key, json_t *v, bool *out, struct pts_error *err) {
  if (!json_is_boolean(v))
    return pts_error_set(err, PTS_INVALID_ARG, "expect boolean for '%s', got %s", key,
                         pts_json_kind_name(v));
  *out = json_is_true(v);
  return PTS_OK;
}

static enum pts_status log_apply(const char *key, json_t *v, struct pts_log_settings *ls,
                                 struct pts_error *err) {
  if (json_is_null(v)) return PTS_OK; /* §1.13: null values are ignored */
  if (strcmp(key, "log_file") == 0)
    return pts_error_set(err, PTS_UNSUPPORTED,
                         "log file location can not be updated through network protocol");
  if (strcmp(key, "log_info") == 0) return log_bool(key, v, &ls->info, err);
  if (strcmp(key, "log_warning") == 0) return log_bool(key, v, &ls->warning, err);
  if (strcmp(key, "log_error") == 0) return log_bool(key, v, &ls->error, err);
  if (strcmp(key, "log_verbose_level") == 0) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "expect unsigned integer for 'log_verbose_level' (0 to %d), got %s",
                           INT_MAX, pts_json_kind_name(v));
    ls->verbose_level = (int)json_integer_value(v);
    return PTS_OK;
  }
  if (strcmp(key, "log_format") == 0) {
    const char *f = json_string_value(v);
    if (f && strcmp(f, "default") == 0) {
      ls->format = PTS_LOG_FORMAT_DEFAULT;
    } else if (f && strcmp(f, "ISO8601") == 0) {
      ls->format = PTS_LOG_FORMAT_ISO8601;
    } else if (f) {
      return pts_error_set(err, PTS_INVALID_ARG,
                           "log setting 'log_format' must be 'default' or 'ISO8601', got '%.40s'",
                           f);
    } else {
      return pts_error_set(err, PTS_INVALID_ARG,
                           "log setting 'log_format' must be 'default' or 'ISO8601', got %s",
                           pts_json_kind_name(v));
    }
    return PTS_OK;
  }
  return pts_error_set(err, PTS_INVALID_ARG,
                       "unknown log setting '%.60s': expected log_file, log_info, log_warning, "
                       "log_error, log_verbose_level or log_format",
                       key);
}

static char *render_log(size_t *len) {
  struct pts_log_settings ls = pts_log_get();
  char file[4096];
  pts_log_get_file(file, sizeof file);
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_raw(&w, "{", 1);
  pts_jsonw_key(&w, "log_file");
  pts_jsonw_str(&w, file, strlen(file));
  pts_jsonw_raw(&w, ",", 1);
  pts_jsonw_key(&w, "log_info");
  pts_jsonw_bool(&w, ls.info);
  pts_jsonw_raw(&w, ",", 1);
  pts_jsonw_key(&w, "log_warning");
  pts_jsonw_bool(&w, ls.warning);
  pts_jsonw_raw(&w, ",", 1);
  pts_jsonw_key(&w, "log_error");
  pts_jsonw_bool(&w, ls.error);
  pts_jsonw_raw(&w, ",", 1);
  pts_jsonw_key(&w, "log_verbose_level");
  pts_jsonw_int(&w, ls.verbose_level);
  pts_jsonw_raw(&w, ",", 1);
  pts_jsonw_key(&w, "log_format");
  pts_jsonw_cstr(&w, ls.format == PTS_LOG_FORMAT_ISO8601 ? "\"ISO8601\"" : "\"default\"");
  pts_jsonw_raw(&w, "}", 1);
  return pts_jsonw_take(&w, len);
}

enum pts_status pts_http_logging(bool post, const char *body, size_t len, char **json,
                                 size_t *json_len, struct pts_error *err) {
  *json = NULL;
  if (post) {
    json_t *root = NULL;
    enum pts_status st = parse_object("logging", body, len, &root, err);
    if (st != PTS_OK) return st;
    /* Checked as a whole against a copy, so a bad key changes nothing. */
    struct pts_log_settings ls = pts_log_get();
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
      st = log_apply(key, v, &ls, err);
      if (st != PTS_OK) break;
    }
    json_decref(root);
    if (st != PTS_OK) return st;
    pts_log_set(&ls);
  }
  *json = render_log(json_len);
  if (!*json) return pts_error_set(err, PTS_NOMEM, "out of memory rendering the log settings");
  return PTS_OK;
}
