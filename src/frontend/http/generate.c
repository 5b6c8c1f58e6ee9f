/* frontend/http/generate.c — see generate.h. The rules follow tritonserver
 * r25.07's HTTPAPIServer::GenerateRequestClass, so that a client written
 * against Triton's generate endpoint gets the same tensors and the same
 * reply; messages lead with Triton's words where it has some. */
#include "frontend/http/generate.h"

#include <inttypes.h>
#include <string.h>

#include "config/json_arena.h"
#include "config/model_config.h"
#include "core/alloc.h"
#include "core/fmt.h"
#include "frontend/http/jsonw.h"
#include "frontend/http/v2_json.h"
#include "frontend/http/v2_values.h"
#include "tensor/dtype.h"

/* ------------------------------------------------------------------ */
/* request                                                             */

/* Where decoding is: the model's inputs (borrowed), the request being
 * filled, and the keys that are not inputs, gathered for
 * pts_v2_decode_params (owned). */
struct gen {
  const Inference__ModelConfig *cfg;
  struct pts_infer_request *req;
  size_t cap; /* room in req->inputs: one slot per configured input */
  json_t *params;
  struct pts_error *err;
};

/* Triton's rule, since the request carries no shape: from the innermost
 * dim out, each fixed dim must divide the elements left and takes its
 * share; then the innermost variable dim gets what is left and any other
 * variable dim (the batch among them) 1. Whatever is left over means the
 * elements do not fit. A zero dim takes nothing (Triton would divide by
 * it). */
static enum pts_status fill_shape(const struct gen *g, const Inference__ModelInput *in,
                                  int64_t count, struct pts_shape *shape) {
  if (!pts_shape_set(shape, in->dims, in->n_dims) ||
      (g->cfg->max_batch_size > 0 && !pts_shape_prepend(shape, -1)))
    return pts_error_set(g->err, PTS_INVALID_ARG,
                         "input '%s' has %zu dimensions in '%s' model configuration, more than "
                         "ptserve supports",
                         in->name, in->n_dims, g->cfg->name);
  int64_t left = count;
  bool fits = true;
  for (int i = shape->ndim - 1; i >= 0 && fits; i--) {
    int64_t d = shape->dims[i];
    if (d == -1) continue;
    if (d == 0)
      fits = left == 0;
    else if (left % d != 0)
      fits = false;
    else
      left /= d;
  }
  for (int i = shape->ndim - 1; i >= 0 && fits; i--) {
    if (shape->dims[i] != -1) continue;
    shape->dims[i] = left;
    left = 1;
  }
  if (!fits || left != 1) {
    char dims[256];
    struct pts_shape cfg_shape;
    pts_shape_set(&cfg_shape, in->dims, in->n_dims); /* fits: the batched shape did */
    pts_shape_format(&cfg_shape, dims, sizeof dims);
    return pts_error_set(g->err, PTS_INVALID_ARG,
                         "The schema can not convert input '%s' to tensor with proper shape: "
                         "%" PRId64 " elements do not fill its dims %s (model '%s'%s)",
                         in->name, count, dims, g->cfg->name,
                         g->cfg->max_batch_size > 0 ? ", with a batch dimension first" : "");
  }
  return PTS_OK;
}

/* One input from its JSON value: a value, or a flat array of values. */
static enum pts_status add_input(struct gen *g, const Inference__ModelInput *in,
                                 const json_t *value) {
  struct pts_infer_request *req = g->req;
  for (size_t i = 0; i < req->n_inputs; i++)
    if (strcmp(req->inputs[i].name, in->name) == 0)
      return pts_error_set(g->err, PTS_INVALID_ARG,
                           "input '%s' is given twice in the generate request (at the top level "
                           "and in 'parameters')",
                           in->name);
  if (json_is_object(value) || json_is_null(value))
    return pts_error_set(g->err, PTS_INVALID_ARG,
                         "input '%s' of a generate request must be a value or a flat array of "
                         "values, got %s",
                         in->name, pts_v2_json_kind(value));
  if (json_is_array(value)) {
    size_t i;
    json_t *el;
    json_array_foreach(value, i, el) {
      if (json_is_array(el) || json_is_object(el))
        return pts_error_set(g->err, PTS_INVALID_ARG,
                             "input '%s' of a generate request must be a flat array of values, "
                             "but element %zu is %s",
                             in->name, i, pts_v2_json_kind(el));
    }
  }
  struct pts_tensor *t = &req->inputs[req->n_inputs];
  if (!(t->name = pts_infer_request_strdup(req, in->name)))
    return pts_error_set(g->err, PTS_NOMEM, "out of memory decoding input '%s'", in->name);
  req->n_inputs++; /* from here the request frees what the tensor holds */
  t->dtype = (enum pts_dtype)in->data_type;
  /* A lone value is an array of one, as Triton counts it. */
  json_t *one = NULL;
  if (!json_is_array(value)) {
    one = json_array();
    if (!one || json_array_append(one, (json_t *)value) != 0) {
      json_decref(one);
      return pts_error_set(g->err, PTS_NOMEM, "out of memory decoding input '%s'", in->name);
    }
  }
  const json_t *arr = one ? one : value;
  int64_t count = (int64_t)json_array_size(arr);
  enum pts_status st = fill_shape(g, in, count, &t->shape);
  if (st == PTS_OK) st = pts_v2_decode_values(arr, count, "its JSON value", t, g->err);
  json_decref(one);
  return st;
}

/* A key that names no input is a request parameter: Triton takes a
 * string, a number or a boolean. */
static enum pts_status add_param(struct gen *g, const char *key, json_t *value) {
  if (!json_is_string(value) && !json_is_number(value) && !json_is_boolean(value))
    return pts_error_set(g->err, PTS_INVALID_ARG,
                         "parameter '%s' has invalid type. It should be either 'int', 'bool', or "
                         "'string' (or a real number); got %s",
                         key, pts_v2_json_kind(value));
  if (json_object_set(g->params, key, value) != 0)
    return pts_error_set(g->err, PTS_NOMEM, "out of memory decoding parameter '%s'", key);
  return PTS_OK;
}

static enum pts_status map_key(struct gen *g, const char *key, json_t *value) {
  const Inference__ModelInput *in = pts_model_config_input(g->cfg, key);
  return in ? add_input(g, in, value) : add_param(g, key, value);
}

static enum pts_status map_top(struct gen *g, json_t *root) {
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    enum pts_status st = PTS_OK;
    if (strcmp(key, "parameters") == 0) {
      if (pts_model_config_input(g->cfg, key))
        return pts_error_set(g->err, PTS_INVALID_ARG,
                             "Keyword 'parameters' for nested schema also given as input tensor "
                             "name (model '%s')",
                             g->cfg->name);
      if (!json_is_object(v))
        return pts_error_set(g->err, PTS_INVALID_ARG,
                             "Expected JSON object for keyword: 'parameters', got %s",
                             pts_v2_json_kind(v));
      const char *k2;
      json_t *v2;
      json_object_foreach(v, k2, v2) {
        if ((st = map_key(g, k2, v2)) != PTS_OK) return st;
      }
      continue;
    }
    if (strcmp(key, "id") == 0) {
      /* The request's id, echoed in the reply; an input of that name
       * (if the model has one) gets it too, as in Triton. */
      if (!json_is_string(v) || memchr(json_string_value(v), 0, json_string_length(v)))
        return pts_error_set(g->err, PTS_INVALID_ARG,
                             "request 'id' must be a string without NUL characters, got %s",
                             pts_v2_json_kind(v));
      if (!(g->req->id = pts_infer_request_strdup(g->req, json_string_value(v))))
        return pts_error_set(g->err, PTS_NOMEM, "out of memory decoding the request id");
      const Inference__ModelInput *in = pts_model_config_input(g->cfg, key);
      if (in && (st = add_input(g, in, v)) != PTS_OK) return st;
      continue;
    }
    if ((st = map_key(g, key, v)) != PTS_OK) return st;
  }
  return PTS_OK;
}

enum pts_status pts_generate_decode(const char *body, size_t len, const Inference__ModelConfig *cfg,
                                    struct pts_infer_request *req, struct pts_error *err) {
  struct gen g = {.cfg = cfg, .req = req, .cap = cfg->n_input, .err = err};
  json_t *root = NULL;
  enum pts_status st = PTS_OK;
  pts_json_arena_begin();
  if (len == 0) {
    root = json_object();
    if (!root) st = pts_error_set(err, PTS_NOMEM, "out of memory decoding the request");
  } else {
    st = pts_v2_parse_json(body, len, &root, err);
  }
  if (st == PTS_OK && !json_is_object(root))
    st = pts_error_set(err, PTS_INVALID_ARG, "the generate request must be a JSON object, got %s",
                       pts_v2_json_kind(root));
  if (st == PTS_OK && !(g.params = json_object()))
    st = pts_error_set(err, PTS_NOMEM, "out of memory decoding the request");
  if (st == PTS_OK && g.cap > 0 &&
      !(req->inputs = pts_infer_request_calloc(req, g.cap, sizeof *req->inputs)))
    st = pts_error_set(err, PTS_NOMEM, "out of memory decoding the request");
  if (st == PTS_OK) st = map_top(&g, root);
  if (st == PTS_OK) st = pts_v2_decode_params(g.params, req, err);
  /* The generate reply is JSON whatever the parameters say. */
  req->binary_data_output = false;
  json_decref(g.params);
  json_decref(root);
  pts_json_arena_end();
  return st;
}

/* ------------------------------------------------------------------ */
/* reply                                                               */

static void put_str(struct pts_jsonw *w, const char *s) { pts_jsonw_str(w, s, strlen(s)); }

enum pts_status pts_generate_encode(const struct pts_infer_request *req,
                                    const struct pts_infer_response *resp, bool stream, char **out,
                                    size_t *len, struct pts_error *err) {
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  const char *model = resp->model_name ? resp->model_name : req->model_name;
  const char *id = resp->id ? resp->id : req->id;
  bool has_id = id && id[0];
  if (stream) pts_jsonw_cstr(&w, "data: ");
  pts_jsonw_cstr(&w, "{");
  if (has_id) {
    pts_jsonw_cstr(&w, "\"id\":");
    put_str(&w, id);
    pts_jsonw_cstr(&w, ",");
  }
  pts_jsonw_cstr(&w, "\"model_name\":");
  put_str(&w, model ? model : "");
  char ver[PTS_FMT_INT_MAX];
  size_t ver_len = pts_fmt_i64(ver, resp->model_version);
  pts_jsonw_cstr(&w, ",\"model_version\":");
  pts_jsonw_str(&w, ver, ver_len);
  for (size_t i = 0; i < resp->n_outputs; i++) {
    const struct pts_tensor *t = &resp->outputs[i];
    const char *name = t->name ? t->name : "";
    /* The reply's own keys win over an output of the same name, as in
     * Triton (whose map keeps the first). */
    if ((has_id && strcmp(name, "id") == 0) || strcmp(name, "model_name") == 0 ||
        strcmp(name, "model_version") == 0)
      continue;
    pts_jsonw_cstr(&w, ",");
    put_str(&w, name);
    pts_jsonw_cstr(&w, ":");
    enum pts_status st = pts_v2_write_values(&w, t, true, err);
    if (st != PTS_OK) {
      pts_jsonw_free(&w);
      return st;
    }
  }
  pts_jsonw_cstr(&w, stream ? "}\n\n" : "}");
  *out = pts_jsonw_take(&w, len);
  if (!*out) return pts_error_set(err, PTS_NOMEM, "out of memory encoding the generate reply");
  return PTS_OK;
}

char *pts_generate_error_event(const char *msg, size_t *len) {
  size_t n = 0;
  char *json = pts_v2_error_json(msg, &n);
  if (!json) return NULL;
  struct pts_jsonw w;
  pts_jsonw_init(&w);
  pts_jsonw_cstr(&w, "data: ");
  pts_jsonw_raw(&w, json, n);
  pts_jsonw_cstr(&w, "\n\n");
  pts_free(json);
  return pts_jsonw_take(&w, len);
}
