/* core/metrics_config.c — see metrics_config.h. */
#include "core/metrics_config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* tritonserver's defaults, as an initializer: C takes no object (a const
 * struct) as a static initializer (GCC allows it, clang does not). */
#define DEFAULTS                                                                                \
  {                                                                                            \
    .counter_latencies = true, .n_quantiles = 5,                                               \
    .quantiles = {{0.5, 0.05}, {0.9, 0.01}, {0.95, 0.001}, {0.99, 0.001}, {0.999, 0.001}},     \
  }

static struct pts_metrics_config settings = DEFAULTS;

const struct pts_metrics_config *pts_metrics_config_get(void) { return &settings; }

void pts_metrics_config_reset(void) { settings = (struct pts_metrics_config)DEFAULTS; }

static bool parse_double(const char *s, size_t len, double *out) {
  char buf[64];
  if (len == 0 || len >= sizeof buf) return false;
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *end;
  errno = 0;
  *out = strtod(buf, &end);
  return *end == '\0' && errno == 0 && isfinite(*out);
}

/* "<q>:<e>,<q>:<e>,..." with 0 < q < 1 and 0 < e < 1: prometheus-cpp
 * divides by q and by 1 - q, and an error of 0 would keep every value. */
static enum pts_status parse_quantiles(const char *v, struct pts_metrics_config *c,
                                       struct pts_error *err) {
  size_t n = 0;
  for (const char *p = v;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *colon = memchr(p, ':', len);
    double q, e;
    if (!colon || !parse_double(p, (size_t)(colon - p), &q) ||
        !parse_double(colon + 1, len - (size_t)(colon - p) - 1, &e))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--metrics-config summary_quantiles: '%.*s' is not "
                           "<quantile>:<error> (e.g. 0.5:0.05,0.9:0.01)",
                           (int)len, p);
    if (!(q > 0 && q < 1) || !(e > 0 && e < 1))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--metrics-config summary_quantiles: '%.*s' needs a quantile and "
                           "an error each between 0 and 1, both excluded",
                           (int)len, p);
    if (n == PTS_QUANTILES_MAX)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "--metrics-config summary_quantiles: more than %d quantiles",
                           PTS_QUANTILES_MAX);
    c->quantiles[n++] = (struct pts_quantile_target){q, e};
    if (!comma) break;
    p = comma + 1;
  }
  c->n_quantiles = n;
  return PTS_OK;
}

static enum pts_status parse_bool(const char *name, const char *v, bool *out,
                                  struct pts_error *err) {
  if (strcmp(v, "true") == 0) {
    *out = true;
    return PTS_OK;
  }
  if (strcmp(v, "false") == 0) {
    *out = false;
    return PTS_OK;
  }
  return pts_error_set(err, PTS_INVALID_ARG,
                       "--metrics-config %s must be true or false, got '%s'", name, v);
}

enum pts_status pts_metrics_config_add(const char *spec, struct pts_error *err) {
  const char *eq = strchr(spec, '=');
  /* tritonserver's parser: a ',' before the '=' would name a group of
   * settings, and it has none. */
  if (!eq || eq == spec || !eq[1] || memchr(spec, ',', (size_t)(eq - spec)))
    return pts_error_set(err, PTS_INVALID_ARG,
                         "--metrics-config option format is <setting>=<value>. Got %s", spec);
  char name[64];
  size_t len = (size_t)(eq - spec);
  if (len >= sizeof name)
    return pts_error_set(err, PTS_INVALID_ARG, "--metrics-config: unknown setting '%.*s'",
                         (int)len, spec);
  memcpy(name, spec, len);
  name[len] = '\0';
  const char *v = eq + 1;
  struct pts_metrics_config next = settings;
  enum pts_status st;
  if (strcmp(name, "counter_latencies") == 0)
    st = parse_bool(name, v, &next.counter_latencies, err);
  else if (strcmp(name, "summary_latencies") == 0)
    st = parse_bool(name, v, &next.summary_latencies, err);
  else if (strcmp(name, "histogram_latencies") == 0)
    st = parse_bool(name, v, &next.histogram_latencies, err);
  else if (strcmp(name, "summary_quantiles") == 0)
    st = parse_quantiles(v, &next, err);
  else if (strcmp(name, "summary_max_age") == 0 || strcmp(name, "summary_age_buckets") == 0)
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "--metrics-config: unknown setting '%s': tritonserver r25.07 has none "
                       "such; its summaries (and ptserve's) cover the last 60 s in 5 age "
                       "buckets, prometheus-cpp's defaults",
                       name);
  else
    st = pts_error_set(err, PTS_INVALID_ARG,
                       "--metrics-config: unknown setting '%s' (known: counter_latencies, "
                       "summary_latencies, summary_quantiles, histogram_latencies)",
                       name);
  if (st == PTS_OK) settings = next;
  return st;
}
