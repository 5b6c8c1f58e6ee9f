/* scheduler/rate_limit.c — see rate_limit.h. The instances are few (tens),
 * so every question is a scan of the registered list under one mutex. */
#include "scheduler/rate_limit.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"

#define GLOBAL_KEY (-2) /* Triton's GLOBAL_RESOURCE_KEY */
#define ALL_DEVICES (-1) /* PER_DEVICE_RESOURCE_KEY: a flag without <device> */

struct need {
  char *name; /* owned */
  int key;    /* GLOBAL_KEY, or the instance's device */
  uint64_t count;
};

struct pts_rate_limit_instance {
  struct need *needs; /* owned */
  size_t n_needs;
  uint64_t priority;   /* max(priority, 1) */
  uint64_t executions; /* finished executions */
  uint64_t staged_at;  /* order of arrival among the waiting; 0: not waiting */
  bool allocated;
  struct pts_rate_limit_instance *next;
};

struct explicit_count {
  char *name; /* owned, lower case */
  int device; /* ALL_DEVICES or a device */
  uint64_t count;
};

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool on;
  struct explicit_count *given; /* owned; --rate-limit-resource */
  size_t n_given;
  struct pts_rate_limit_instance *instances;
  uint64_t arrivals;
} rl = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, NULL, 0, NULL, 0};

bool pts_rate_limit_on(void) { return rl.on; }

enum pts_status pts_rate_limit_set_mode(const char *value, struct pts_error *err) {
  if (strcasecmp(value, "execution_count") == 0)
    rl.on = true;
  else if (strcasecmp(value, "off") == 0)
    rl.on = false;
  else
    return pts_error_set(err, PTS_INVALID_ARG,
                         "invalid argument for --rate-limit: '%s' (execution_count or off)",
                         value);
  return PTS_OK;
}

static bool parse_count(const char *s, size_t len, long *out) {
  char buf[24];
  if (len == 0 || len >= sizeof buf) return false;
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *end;
  errno = 0;
  *out = strtol(buf, &end, 10);
  return *end == '\0' && errno == 0 && *out >= 0 && *out <= INT_MAX;
}

enum pts_status pts_rate_limit_add_resource(const char *spec, struct pts_error *err) {
  const char *c1 = strchr(spec, ':');
  const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  long count = 0, device = ALL_DEVICES;
  bool ok = c1 && c1 != spec && (!c2 || !strchr(c2 + 1, ':'));
  if (ok) ok = parse_count(c1 + 1, c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1), &count);
  if (ok && c2) ok = parse_count(c2 + 1, strlen(c2 + 1), &device);
  if (!ok)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "--rate-limit-resource option format is "
                         "'<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got "
                         "%s (count and device are non-negative integers)",
                         spec);
  struct explicit_count *grown = pts_realloc(rl.given, (rl.n_given + 1) * sizeof *grown);
  char *name = pts_strndup(spec, (size_t)(c1 - spec));
  if (grown) rl.given = grown;
  if (!grown || !name) {
    pts_free(name);
    return pts_error_set(err, PTS_NOMEM, "out of memory keeping --rate-limit-resource");
  }
  /* tritonserver lower-cases the whole value */
  for (char *p = name; *p; p++) *p = (char)tolower((unsigned char)*p);
  rl.given[rl.n_given++] = (struct explicit_count){name, (int)device, (uint64_t)count};
  return PTS_OK;
}

static void free_instance(struct pts_rate_limit_instance *in) {
  for (size_t i = 0; i < in->n_needs; i++) pts_free(in->needs[i].name);
  pts_free(in->needs);
  pts_free(in);
}

void pts_rate_limit_reset(void) {
  pthread_mutex_lock(&rl.mu);
  for (size_t i = 0; i < rl.n_given; i++) pts_free(rl.given[i].name);
  pts_free(rl.given);
  rl.given = NULL;
  rl.n_given = 0;
  rl.on = false;
  pthread_mutex_unlock(&rl.mu);
}

/* The most any registered instance needs of `name` at `key`. */
static uint64_t most_needed(int key, const char *name) {
  uint64_t most = 0;
  for (const struct pts_rate_limit_instance *in = rl.instances; in; in = in->next)
    for (size_t i = 0; i < in->n_needs; i++)
      if (in->needs[i].key == key && strcmp(in->needs[i].name, name) == 0 &&
          in->needs[i].count > most)
        most = in->needs[i].count;
  return most;
}

/* --rate-limit-resource's count of `name` at `key` (Triton's
 * ParseAndValidateExplicitResources): a global resource takes the largest
 * count given for the name on any device; a device's, the largest of its
 * own and the every-device one; none given: 0. */
static uint64_t given_count(int key, const char *name) {
  uint64_t count = 0;
  for (size_t i = 0; i < rl.n_given; i++) {
    const struct explicit_count *g = &rl.given[i];
    if (strcmp(g->name, name) != 0) continue;
    if ((key == GLOBAL_KEY || g->device == key || g->device == ALL_DEVICES) && g->count > count)
      count = g->count;
  }
  return count;
}

/* How many of `name` there are at `key`. */
static uint64_t available(int key, const char *name) {
  return rl.n_given ? given_count(key, name) : most_needed(key, name);
}

/* The rules every registered instance must meet, in tritonserver's words. */
static enum pts_status validate(struct pts_error *err) {
  for (const struct pts_rate_limit_instance *in = rl.instances; in; in = in->next) {
    for (size_t i = 0; i < in->n_needs; i++) {
      const struct need *n = &in->needs[i];
      for (const struct pts_rate_limit_instance *o = rl.instances; o; o = o->next)
        for (size_t j = 0; j < o->n_needs; j++)
          if ((n->key == GLOBAL_KEY) != (o->needs[j].key == GLOBAL_KEY) &&
              strcmp(n->name, o->needs[j].name) == 0)
            return pts_error_set(err, PTS_INVALID_ARG,
                                 "Resource \"%s\" is present as both global and "
                                 "device-specific resource in the model configuration.",
                                 n->name);
      uint64_t need = most_needed(n->key, n->name);
      if (rl.n_given && given_count(n->key, n->name) < need)
        return pts_error_set(err, PTS_INVALID_ARG,
                             "Resource count for \"%s\" is limited to %llu which will prevent "
                             "scheduling of one or more model instances, the minimum required "
                             "count is %llu",
                             n->name, (unsigned long long)given_count(n->key, n->name),
                             (unsigned long long)need);
    }
  }
  return PTS_OK;
}

enum pts_status pts_rate_limit_register(const Inference__ModelRateLimiter *cfg, int device,
                                        struct pts_rate_limit_instance **out,
                                        struct pts_error *err) {
  *out = NULL;
  if (!rl.on) return PTS_OK;
  struct pts_rate_limit_instance *in = pts_calloc(1, sizeof *in);
  size_t n = cfg ? cfg->n_resources : 0;
  if (in && n) in->needs = pts_calloc(n, sizeof *in->needs);
  if (!in || (n && !in->needs)) {
    if (in) pts_free(in);
    return pts_error_set(err, PTS_NOMEM, "out of memory registering with the rate limiter");
  }
  for (size_t i = 0; i < n; i++) {
    const Inference__ModelRateLimiter__Resource *r = cfg->resources[i];
    in->needs[i].name = pts_strdup(r->name ? r->name : "");
    in->needs[i].key = r->global ? GLOBAL_KEY : device < 0 ? 0 : device;
    in->needs[i].count = r->count;
    in->n_needs = i + 1;
    if (!in->needs[i].name) {
      free_instance(in);
      return pts_error_set(err, PTS_NOMEM, "out of memory registering with the rate limiter");
    }
  }
  in->priority = cfg && cfg->priority > 1 ? cfg->priority : 1;
  pthread_mutex_lock(&rl.mu);
  in->next = rl.instances;
  rl.instances = in;
  enum pts_status st = validate(err);
  if (st != PTS_OK) rl.instances = in->next;
  pthread_mutex_unlock(&rl.mu);
  if (st != PTS_OK) {
    free_instance(in);
    return st;
  }
  *out = in;
  return PTS_OK;
}

/* Whether `in`'s resources are free now (lock held). */
static bool fits(const struct pts_rate_limit_instance *in) {
  for (size_t i = 0; i < in->n_needs; i++) {
    const struct need *n = &in->needs[i];
    uint64_t held = 0;
    for (const struct pts_rate_limit_instance *o = rl.instances; o; o = o->next)
      for (size_t j = 0; o->allocated && j < o->n_needs; j++)
        if (o->needs[j].key == n->key && strcmp(o->needs[j].name, n->name) == 0)
          held += o->needs[j].count;
    if (held + n->count > available(n->key, n->name)) return false;
  }
  return true;
}

/* Allots the waiting instances in order while the first fits (lock held). */
static void allot(void) {
  bool any = false;
  for (;;) {
    struct pts_rate_limit_instance *best = NULL;
    for (struct pts_rate_limit_instance *o = rl.instances; o; o = o->next) {
      if (!o->staged_at) continue;
      uint64_t score = o->executions * o->priority;
      uint64_t best_score = best ? best->executions * best->priority : 0;
      if (!best || score < best_score || (score == best_score && o->staged_at < best->staged_at))
        best = o;
    }
    if (!best || !fits(best)) break;
    best->staged_at = 0;
    best->allocated = true;
    any = true;
  }
  if (any) pthread_cond_broadcast(&rl.cv);
}

void pts_rate_limit_acquire(struct pts_rate_limit_instance *in) {
  if (!in) return;
  pthread_mutex_lock(&rl.mu);
  if (!in->allocated && !in->staged_at) in->staged_at = ++rl.arrivals;
  allot();
  while (!in->allocated) pthread_cond_wait(&rl.cv, &rl.mu);
  pthread_mutex_unlock(&rl.mu);
}

void pts_rate_limit_release(struct pts_rate_limit_instance *in, bool more) {
  if (!in) return;
  pthread_mutex_lock(&rl.mu);
  in->allocated = false;
  in->executions++;
  /* Triton's OnRelease stages the instance again, before it allots, when
   * its model has requests waiting: it competes with its new count. */
  if (more) in->staged_at = ++rl.arrivals;
  allot();
  pthread_mutex_unlock(&rl.mu);
}

void pts_rate_limit_withdraw(struct pts_rate_limit_instance *in) {
  if (!in) return;
  pthread_mutex_lock(&rl.mu);
  if (in->staged_at || in->allocated) {
    in->staged_at = 0;
    in->allocated = false;
    allot();
  }
  pthread_mutex_unlock(&rl.mu);
}

void pts_rate_limit_unregister(struct pts_rate_limit_instance *in) {
  if (!in) return;
  pthread_mutex_lock(&rl.mu);
  for (struct pts_rate_limit_instance **p = &rl.instances; *p; p = &(*p)->next) {
    if (*p == in) {
      *p = in->next;
      break;
    }
  }
  allot(); /* the counts it set may have held others back */
  pthread_mutex_unlock(&rl.mu);
  free_instance(in);
}
