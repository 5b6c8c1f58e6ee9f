/* backends/pytorch/callspec.c — see callspec.h. */
#include "backends/pytorch/callspec.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* Deeper trees than this are refused: the walk recurses, and no model's
 * signature nests that far. */
#define MAX_DEPTH 32

struct side {
  size_t n, cap;
  char **names;
};

struct pts_callspec {
  struct side sides[2];
};

static const char *side_word(enum pts_callspec_side side) {
  return side == PTS_CALLSPEC_INPUTS ? "input" : "output";
}

static bool add_name(struct side *s, const char *name) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 8;
    char **grown = pts_realloc(s->names, cap * sizeof *grown);
    if (!grown) return false;
    s->names = grown;
    s->cap = cap;
  }
  if (!(s->names[s->n] = pts_strdup(name))) return false;
  s->n++;
  return true;
}

/* prefix + "[" + part + "]", or NULL when out of memory. */
static char *child_name(const char *prefix, const char *part) {
  size_t n = strlen(prefix) + strlen(part) + 3;
  char *s = pts_malloc(n);
  if (s) snprintf(s, n, "%s[%s]", prefix, part);
  return s;
}

/* A dict key becomes part of a name: it must not look like name syntax. */
static bool key_is_nameable(const char *k) {
  if (!*k) return false;
  for (const char *p = k; *p; p++)
    if (*p == '[' || *p == ']' || *p == '"' || *p == ' ' || *p == '\t' || *p == '\n' ||
        *p == '\r' || (unsigned char)*p < 0x20)
      return false;
  return true;
}

/* The keys of a dict node: its context is a JSON array of keys, either
 * inline or as a JSON-encoded string ("[\"a\"]"), or, for defaultdict, an
 * object whose "dict_context" holds them. Returns a new reference or NULL. */
static json_t *dict_keys(json_t *context) {
  json_t *ctx = NULL;
  if (json_is_string(context))
    ctx = json_loads(json_string_value(context), JSON_DECODE_ANY, NULL);
  else if (context)
    ctx = json_incref(context);
  if (json_is_object(ctx)) {
    json_t *inner = json_incref(json_object_get(ctx, "dict_context"));
    json_decref(ctx);
    ctx = inner;
  }
  if (json_is_string(ctx)) { /* a dict_context that is itself encoded */
    json_t *inner = json_loads(json_string_value(ctx), JSON_DECODE_ANY, NULL);
    json_decref(ctx);
    ctx = inner;
  }
  if (!json_is_array(ctx)) {
    json_decref(ctx);
    return NULL;
  }
  return ctx;
}

static bool is_sequence(const char *type) {
  return strcmp(type, "builtins.tuple") == 0 || strcmp(type, "builtins.list") == 0 ||
         strcmp(type, "collections.namedtuple") == 0;
}

static bool is_dict(const char *type) {
  return strcmp(type, "builtins.dict") == 0 || strcmp(type, "collections.OrderedDict") == 0 ||
         strcmp(type, "collections.defaultdict") == 0;
}

static enum pts_status nomem(struct pts_error *err) {
  return pts_error_set(err, PTS_NOMEM, "out of memory reading the call specification");
}

/* Appends the names of every leaf under `node` (whose own name is
 * `prefix`) to s, in pytree flattening order: children in order, dict
 * entries in the order of their keys. */
static enum pts_status walk(json_t *node, const char *prefix, struct side *s, int depth,
                            const char *which, struct pts_error *err) {
  if (depth > MAX_DEPTH)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification nests deeper than %d levels at %s", which,
                         MAX_DEPTH, prefix);
  if (!json_is_object(node))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification has a node at %s that is not a JSON object",
                         which, prefix);
  json_t *type = json_object_get(node, "type");
  json_t *children = json_object_get(node, "children_spec");
  if (children && !json_is_array(children))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification has a 'children_spec' at %s that is not an "
                         "array",
                         which, prefix);
  size_t n_children = json_array_size(children);
  if (!type || json_is_null(type)) {
    if (n_children)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "the %s call specification has a leaf at %s with children", which,
                           prefix);
    return add_name(s, prefix) ? PTS_OK : nomem(err);
  }
  if (!json_is_string(type))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification has a 'type' at %s that is not a string", which,
                         prefix);
  const char *t = json_string_value(type);
  enum pts_status st = PTS_OK;
  if (is_sequence(t)) {
    for (size_t i = 0; i < n_children && st == PTS_OK; i++) {
      char index[24];
      snprintf(index, sizeof index, "%zu", i);
      char *name = child_name(prefix, index);
      st = name ? walk(json_array_get(children, i), name, s, depth + 1, which, err) : nomem(err);
      pts_free(name);
    }
    return st;
  }
  if (!is_dict(t))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the package's %s has a '%s' at %s; ptserve serves tuples, lists and "
                         "dicts with tensors at the leaves",
                         which, t, prefix);
  json_t *keys = dict_keys(json_object_get(node, "context"));
  if (!keys || json_array_size(keys) != n_children) {
    json_decref(keys);
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification has a dict at %s whose keys do not match its "
                         "%zu values",
                         which, prefix, n_children);
  }
  for (size_t i = 0; i < n_children && st == PTS_OK; i++) {
    json_t *key = json_array_get(keys, i);
    if (!json_is_string(key) || !key_is_nameable(json_string_value(key))) {
      char *text = json_dumps(key, JSON_ENCODE_ANY);
      st = pts_error_set(err, PTS_INVALID_ARG,
                         "the package's %s has a dict at %s with key %s; keys must be non-empty "
                         "strings without '[', ']', '\"' or white space to be named",
                         which, prefix, text ? text : "?");
      free(text); /* jansson allocates with malloc */
      break;
    }
    char *name = child_name(prefix, json_string_value(key));
    st = name ? walk(json_array_get(children, i), name, s, depth + 1, which, err) : nomem(err);
    pts_free(name);
  }
  json_decref(keys);
  return st;
}

/* The tree of a treespec_dumps string: [version, tree], version 1. */
static enum pts_status load_tree(const char *text, const char *which, json_t **root,
                                 json_t **tree, struct pts_error *err) {
  json_error_t jerr;
  *root = text ? json_loads(text, 0, &jerr) : NULL;
  if (!*root)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification is not JSON (%s at line %d, column %d)", which,
                         text ? jerr.text : "missing", text ? jerr.line : 0,
                         text ? jerr.column : 0);
  json_t *version = json_array_get(*root, 0);
  if (!json_is_array(*root) || json_array_size(*root) != 2 || !json_is_integer(version))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification is not a [version, tree] pair", which);
  if (json_integer_value(version) != 1)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the %s call specification has version %lld; ptserve reads version 1",
                         which, (long long)json_integer_value(version));
  *tree = json_array_get(*root, 1);
  return PTS_OK;
}

static const char *node_type(json_t *node) {
  json_t *t = json_object_get(node, "type");
  return json_is_string(t) ? json_string_value(t) : "a tensor";
}

/* The input tree is the pair (args, kwargs): args named ARGS[i]...,
 * kwargs KWARGS[name].... */
static enum pts_status walk_inputs(json_t *tree, struct side *s, struct pts_error *err) {
  json_t *children = json_object_get(tree, "children_spec");
  json_t *args = json_array_get(children, 0), *kwargs = json_array_get(children, 1);
  if (!json_is_object(tree) || strcmp(node_type(tree), "builtins.tuple") != 0 ||
      json_array_size(children) != 2 || !is_sequence(node_type(args)) ||
      !is_dict(node_type(kwargs)))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "the input call specification is not the (args, kwargs) pair "
                         "torch.export writes");
  enum pts_status st = walk(args, "ARGS", s, 1, "input", err);
  return st ? st : walk(kwargs, "KWARGS", s, 1, "input", err);
}

enum pts_status pts_callspec_parse(const char *in_spec, const char *out_spec,
                                   struct pts_callspec **out, struct pts_error *err) {
  *out = NULL;
  struct pts_callspec *cs = pts_calloc(1, sizeof *cs);
  if (!cs) return nomem(err);
  json_t *in_root = NULL, *out_root = NULL, *tree;
  enum pts_status st = load_tree(in_spec, "input", &in_root, &tree, err);
  if (st == PTS_OK) st = walk_inputs(tree, &cs->sides[PTS_CALLSPEC_INPUTS], err);
  if (st == PTS_OK) st = load_tree(out_spec, "output", &out_root, &tree, err);
  if (st == PTS_OK) st = walk(tree, "RESULT", &cs->sides[PTS_CALLSPEC_OUTPUTS], 0, "output", err);
  json_decref(in_root);
  json_decref(out_root);
  if (st != PTS_OK) {
    pts_callspec_free(cs);
    return st;
  }
  *out = cs;
  return PTS_OK;
}

void pts_callspec_free(struct pts_callspec *cs) {
  if (!cs) return;
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < cs->sides[k].n; i++) pts_free(cs->sides[k].names[i]);
    pts_free(cs->sides[k].names);
  }
  pts_free(cs);
}

size_t pts_callspec_count(const struct pts_callspec *cs, enum pts_callspec_side side) {
  return cs->sides[side].n;
}

const char *pts_callspec_name(const struct pts_callspec *cs, enum pts_callspec_side side,
                              size_t i) {
  return i < cs->sides[side].n ? cs->sides[side].names[i] : NULL;
}

/* Appends names (those starting with `prefix`, when given) to out. */
static void list_names(const struct side *s, const char *prefix, char *out, size_t out_size) {
  size_t used = 0, plen = prefix ? strlen(prefix) : 0;
  out[0] = '\0';
  for (size_t i = 0; i < s->n; i++) {
    if (prefix && strncmp(s->names[i], prefix, plen) != 0) continue;
    const char *sep = used ? ", " : "";
    size_t need = strlen(sep) + strlen(s->names[i]);
    if (used + need + 4 >= out_size) { /* room for ", ..." and the NUL */
      if (used + 4 < out_size) snprintf(out + used, out_size - used, "%s...", sep);
      return;
    }
    used += (size_t)snprintf(out + used, out_size - used, "%s%s", sep, s->names[i]);
  }
}

void pts_callspec_list(const struct pts_callspec *cs, enum pts_callspec_side side, char *out,
                       size_t out_size) {
  if (out_size == 0) return;
  list_names(&cs->sides[side], NULL, out, out_size);
}

/* The <n> of a "<name>__<n>" name, or -1 (as TorchScript's NAMED_INDEX). */
static long ordinal(const char *name) {
  const char *sep = NULL;
  for (const char *p = strstr(name, "__"); p; p = strstr(p + 1, "__")) sep = p;
  if (!sep || sep[2] == '\0' || strlen(sep + 2) > 9) return -1;
  for (const char *p = sep + 2; *p; p++)
    if (*p < '0' || *p > '9') return -1;
  return strtol(sep + 2, NULL, 10);
}

enum pts_status pts_callspec_resolve(const struct pts_callspec *cs, enum pts_callspec_side side,
                                     const char *name, size_t *index, struct pts_error *err) {
  const struct side *s = &cs->sides[side];
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(s->names[i], name) == 0) {
      *index = i;
      return PTS_OK;
    }
  char names[320];
  long n = ordinal(name);
  if (n >= 0) {
    if ((size_t)n < s->n) {
      *index = (size_t)n;
      return PTS_OK;
    }
    return pts_error_set(err, PTS_INVALID_ARG,
                         "%s '%s' names position %ld, but the package has %zu %ss", side_word(side),
                         name, n, s->n, side_word(side));
  }
  size_t len = strlen(name);
  char *inner = pts_malloc(len + 2);
  if (!inner) return nomem(err);
  snprintf(inner, len + 2, "%s[", name);
  list_names(s, inner, names, sizeof names);
  pts_free(inner);
  if (names[0])
    return pts_error_set(
        err, PTS_INVALID_ARG,
        "%s '%s' is a container in the package, not a tensor; name its tensors: %s",
        side_word(side), name, names);
  if (s->n == 0)
    return pts_error_set(err, PTS_INVALID_ARG, "%s '%s' matches nothing: the package has no %ss",
                         side_word(side), name, side_word(side));
  list_names(s, NULL, names, sizeof names);
  return pts_error_set(err, PTS_INVALID_ARG,
                       "%s '%s' matches no %s of the package; its %ss are %s, or by position "
                       "<name>__0 to <name>__%zu",
                       side_word(side), name, side_word(side), side_word(side), names, s->n - 1);
}
