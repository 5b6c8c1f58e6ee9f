/* config/model_config.c — reading config.pbtxt, the /config JSON and the
 * backend parameters; see model_config.h. Autofill and validation live in
 * model_config_complete.c. */
#include "config/model_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "config/pbjson.h"
#include "config/pbtxt.h"
#include "core/alloc.h"

/* Far above any real config (warmup data lives in separate files), low
 * enough that a stray huge file can not exhaust memory. */
#define CONFIG_MAX_BYTES (16u << 20)

enum pts_status pts_model_config_parse(const char *text, size_t len, const char *source,
                                       Inference__ModelConfig **out, struct pts_error *err) {
  ProtobufCMessage *msg = NULL;
  enum pts_status s =
      pts_pbtxt_parse(&inference__model_config__descriptor, text, len, source, &msg, err);
  *out = (Inference__ModelConfig *)msg;
  return s;
}

/* Reads a whole file. An absent file is not an error: *text stays NULL. */
static enum pts_status read_config_file(const char *path, const char *shown, char **text,
                                        size_t *len, struct pts_error *err) {
  *text = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (errno == ENOENT) return PTS_OK;
    return pts_error_set(err, PTS_INVALID_ARG, "%s: can not open: %s", shown, strerror(errno));
  }
  struct stat st;
  enum pts_status s = PTS_OK;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    s = pts_error_set(err, PTS_INVALID_ARG, "%s: not a regular file", shown);
  } else if ((unsigned long long)st.st_size > CONFIG_MAX_BYTES) {
    s = pts_error_set(err, PTS_INVALID_ARG, "%s: file is %lld bytes, more than the %u allowed",
                      shown, (long long)st.st_size, CONFIG_MAX_BYTES);
  } else if (!(*text = pts_malloc((size_t)st.st_size + 1))) {
    s = pts_error_set(err, PTS_NOMEM, "%s: out of memory reading the file", shown);
  } else {
    *len = fread(*text, 1, (size_t)st.st_size, f);
    (*text)[*len] = '\0';
    if (ferror(f)) s = pts_error_set(err, PTS_INVALID_ARG, "%s: read error", shown);
  }
  fclose(f);
  if (s) {
    pts_free(*text);
    *text = NULL;
  }
  return s;
}

/* The directory's own name, for when the caller gives no model name. */
static char *last_component(const char *dir) {
  size_t end = strlen(dir);
  while (end > 1 && dir[end - 1] == '/') end--;
  size_t start = end;
  while (start > 0 && dir[start - 1] != '/') start--;
  return pts_strndup(dir + start, end - start);
}

static const char *custom_name; /* --model-config-name; set before any load */
static bool autofill = true;    /* --disable-auto-complete-config; set before any load */

void pts_model_config_set_autofill(bool on) { autofill = on; }

bool pts_model_config_autofill(void) { return autofill; }

void pts_model_config_set_custom_name(const char *name) {
  custom_name = name && name[0] ? name : NULL;
}

/* The file a model's config is read from, relative to model_dir:
 * "configs/<name>.pbtxt" where it exists, else "config.pbtxt". Caller
 * frees with pts_free; NULL when out of memory. */
static char *config_file(const char *model_dir) {
  if (custom_name) {
    size_t n = strlen(model_dir) + strlen(custom_name) + 32;
    char *rel = pts_malloc(n), *full = pts_malloc(n);
    if (!rel || !full) {
      pts_free(rel);
      pts_free(full);
      return NULL;
    }
    snprintf(rel, n, "configs/%s.pbtxt", custom_name);
    snprintf(full, n, "%s/%s", model_dir, rel);
    struct stat sb;
    bool there = stat(full, &sb) == 0 && S_ISREG(sb.st_mode);
    pts_free(full);
    if (there) return rel;
    pts_free(rel);
  }
  return pts_strdup("config.pbtxt");
}

enum pts_status pts_model_config_load(const char *model_dir, const char *model_name,
                                      Inference__ModelConfig **out, struct pts_error *err) {
  *out = NULL;
  char *own_name = model_name ? NULL : last_component(model_dir);
  const char *name = model_name ? model_name : own_name;
  char path[PATH_MAX], shown[PATH_MAX];
  if (!name)
    return pts_error_set(err, PTS_NOMEM, "out of memory loading the config of '%s'", model_dir);
  /* Messages name the file relative to the repository: users know it by
   * that name, and a 4xx response should not reveal server paths. */
  char *file = config_file(model_dir);
  if (!file) {
    pts_free(own_name);
    return pts_error_set(err, PTS_NOMEM, "out of memory loading the config of '%s'", name);
  }
  snprintf(shown, sizeof shown, "%s/%s", name, file);
  bool too_long = (size_t)snprintf(path, sizeof path, "%s/%s", model_dir, file) >= sizeof path;
  pts_free(file);
  if (too_long) {
    pts_free(own_name);
    return pts_error_set(err, PTS_INVALID_ARG, "model '%s': directory path is too long", name);
  }
  char *text;
  size_t len;
  enum pts_status s = read_config_file(path, shown, &text, &len, err);
  if (!s && !text && !autofill)
    s = pts_error_set(err, PTS_NOT_FOUND,
                      "failed to open text file for read %s: No such file or directory (with "
                      "--disable-auto-complete-config every model needs its config file)",
                      shown);
  Inference__ModelConfig *cfg = NULL;
  if (!s) s = pts_model_config_parse(text, len, shown, &cfg, err);
  pts_free(text);
  if (!s) s = pts_model_config_complete(cfg, model_dir, name, err);
  pts_free(own_name);
  if (s) {
    pts_model_config_free(cfg);
    return s;
  }
  *out = cfg;
  return PTS_OK;
}

enum pts_status pts_model_config_from_json(const char *json, size_t len, const char *model_dir,
                                           const char *model_name, Inference__ModelConfig **out,
                                           struct pts_error *err) {
  *out = NULL;
  if (len > CONFIG_MAX_BYTES)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "load config of model '%s' is %zu bytes, more than the %u allowed",
                         model_name, len, CONFIG_MAX_BYTES);
  json_error_t je;
  json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES, &je);
  if (!root)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "load config of model '%s' is not valid JSON: %s at line %d column %d",
                         model_name, je.text, je.line, je.column);
  ProtobufCMessage *msg = NULL;
  enum pts_status s = pts_pbjson_parse(&inference__model_config__descriptor, root, &msg, err);
  json_decref(root);
  if (s != PTS_OK) {
    pts_error_prefix(err, "load config of model '%s'", model_name);
    return s;
  }
  Inference__ModelConfig *cfg = (Inference__ModelConfig *)msg;
  s = pts_model_config_complete(cfg, model_dir, model_name, err);
  if (s != PTS_OK) {
    pts_model_config_free(cfg);
    return s;
  }
  *out = cfg;
  return PTS_OK;
}

void pts_model_config_free(Inference__ModelConfig *cfg) {
  if (cfg) protobuf_c_message_free_unpacked(&cfg->base, NULL);
}

char *pts_model_config_to_json(const Inference__ModelConfig *cfg) {
  json_t *root = pts_pbjson_render(&cfg->base);
  if (!root) return NULL;
  char *dumped = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!dumped) return NULL;
  /* Hand back pts-allocated memory, whatever allocator jansson was given. */
  char *copy = pts_strdup(dumped);
  json_malloc_t jmalloc;
  json_free_t jfree;
  json_get_alloc_funcs(&jmalloc, &jfree);
  jfree(dumped);
  return copy;
}

const char *pts_model_config_param(const Inference__ModelConfig *cfg, const char *key) {
  for (size_t i = 0; i < cfg->n_parameters; i++) {
    const Inference__ModelConfig__ParametersEntry *e = cfg->parameters[i];
    if (e->key && strcmp(e->key, key) == 0)
      return e->value && e->value->string_value ? e->value->string_value : "";
  }
  return NULL;
}

enum pts_status pts_model_config_param_bool(const Inference__ModelConfig *cfg, const char *key,
                                            bool dflt, bool *out, struct pts_error *err) {
  const char *v = pts_model_config_param(cfg, key);
  *out = dflt;
  if (!v) return PTS_OK;
  if (!strcasecmp(v, "true") || !strcasecmp(v, "on") || !strcmp(v, "1")) {
    *out = true;
  } else if (!strcasecmp(v, "false") || !strcasecmp(v, "off") || !strcmp(v, "0")) {
    *out = false;
  } else {
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': parameter '%s': failed to convert '%s' to boolean "
                         "(expected true/false, on/off or 1/0)",
                         cfg->name, key, v);
  }
  return PTS_OK;
}

enum pts_status pts_model_config_param_int(const Inference__ModelConfig *cfg, const char *key,
                                           long dflt, long *out, struct pts_error *err) {
  const char *v = pts_model_config_param(cfg, key);
  *out = dflt;
  if (!v) return PTS_OK;
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  while (*end == ' ' || *end == '\t') end++;
  if (end == v || *end != '\0' || errno == ERANGE || !v[0])
    return pts_error_set(err, PTS_INVALID_ARG,
                         "model '%s': parameter '%s': failed to convert '%s' to an integer",
                         cfg->name, key, v);
  *out = n;
  return PTS_OK;
}
