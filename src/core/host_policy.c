/* core/host_policy.c — see host_policy.h. */
#include "core/host_policy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_POLICIES 64
#define MPOL_BIND_MODE 2 /* <numaif.h>'s MPOL_BIND; the header is libnuma's */

struct policy {
  char name[64];
  bool has_cpus;
  cpu_set_t cpus;
  int numa_node; /* -1: none */
};

static struct policy policies[MAX_POLICIES];
static size_t n_policies;

static struct policy *find(const char *name) {
  for (size_t i = 0; name && i < n_policies; i++)
    if (strcmp(policies[i].name, name) == 0) return &policies[i];
  return NULL;
}

void pts_host_policy_reset(void) { n_policies = 0; }

/* Parses a non-negative int filling s[0..n) exactly. */
static bool parse_int(const char *s, size_t n, long *out) {
  char buf[16];
  if (n == 0 || n >= sizeof buf) return false;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  long v = strtol(buf, &end, 10);
  if (*end || errno || v < 0) return false;
  *out = v;
  return true;
}

/* Triton's format: ranges only, comma-separated ("0-3,8-11"). */
static enum pts_status parse_cores(const char *v, cpu_set_t *out, struct pts_error *err) {
  CPU_ZERO(out);
  long online = sysconf(_SC_NPROCESSORS_CONF);
  for (const char *p = v;;) {
    const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
    const char *dash = memchr(p, '-', (size_t)(end - p));
    long lo, hi;
    if (!dash)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "host policy setting 'cpu-cores' format is "
                           "'<lower_cpu_core_id>-<upper_cpu_core_id>'. Got %.*s",
                           (int)(end - p), p);
    if (!parse_int(p, (size_t)(dash - p), &lo) ||
        !parse_int(dash + 1, (size_t)(end - dash - 1), &hi))
      return pts_error_set(err, PTS_INVALID_ARG,
                           "Parsing 'cpu-cores' value: Can't parse '%.*s' to integers",
                           (int)(end - p), p);
    if (lo > hi || hi >= online || hi >= CPU_SETSIZE)
      return pts_error_set(err, PTS_INVALID_ARG,
                           "host policy setting 'cpu-cores': '%.*s' is not a range of this "
                           "machine's CPUs (0-%ld)",
                           (int)(end - p), p, online - 1);
    for (long c = lo; c <= hi; c++) CPU_SET((int)c, out);
    if (!comma) return PTS_OK;
    p = comma + 1;
  }
}

enum pts_status pts_host_policy_add(const char *spec, struct pts_error *err) {
  const char *comma = strchr(spec, ',');
  const char *eq = comma ? strchr(comma + 1, '=') : NULL;
  if (!comma || comma == spec || !eq || !eq[1])
    return pts_error_set(err, PTS_INVALID_ARG,
                         "--host-policy expects <policy_name>,<setting>=<value>, got '%s'", spec);
  size_t name_len = (size_t)(comma - spec), key_len = (size_t)(eq - comma - 1);
  const char *key = comma + 1, *value = eq + 1;
  bool cores = key_len == 9 && strncmp(key, "cpu-cores", 9) == 0;
  bool node = key_len == 9 && strncmp(key, "numa-node", 9) == 0;
  if (!cores && !node)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Unsupported host policy setting '%.*s' is specified, supported settings "
                         "are 'numa-node', 'cpu-cores'",
                         (int)key_len, key);
  if (name_len >= sizeof policies[0].name)
    return pts_error_set(err, PTS_INVALID_ARG, "--host-policy name '%.*s' is too long",
                         (int)name_len, spec);
  char name[sizeof policies[0].name];
  memcpy(name, spec, name_len);
  name[name_len] = 0;
  struct policy *p = find(name);
  if (!p) {
    if (n_policies == MAX_POLICIES)
      return pts_error_set(err, PTS_INVALID_ARG, "more than %d --host-policy names",
                           MAX_POLICIES);
    p = &policies[n_policies++];
    memset(p, 0, sizeof *p);
    memcpy(p->name, name, name_len + 1);
    p->numa_node = -1;
  }
  if (cores) {
    enum pts_status st = parse_cores(value, &p->cpus, err);
    p->has_cpus = st == PTS_OK;
    return st;
  }
  long n;
  if (!parse_int(value, strlen(value), &n) || n > 63)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "Parsing 'numa-node' value: Can't parse '%s' to integer", value);
  char path[64];
  struct stat sb;
  snprintf(path, sizeof path, "/sys/devices/system/node/node%ld", n);
  if (stat(path, &sb) != 0)
    return pts_error_set(err, PTS_INVALID_ARG,
                         "host policy '%s': NUMA node %ld does not exist on this machine (%s)",
                         name, n, path);
  p->numa_node = (int)n;
  return PTS_OK;
}

bool pts_host_policy_binds(const char *name) {
  const struct policy *p = find(name);
  return p && (p->has_cpus || p->numa_node >= 0);
}

bool pts_host_policy_cpus(const char *name, cpu_set_t *out) {
  const struct policy *p = find(name);
  if (!p || !p->has_cpus) return false;
  *out = p->cpus;
  return true;
}

enum pts_status pts_host_policy_bind_memory(const char *name, struct pts_error *err) {
  const struct policy *p = find(name);
  if (!p || p->numa_node < 0) return PTS_OK;
  unsigned long mask = 1UL << p->numa_node;
  if (syscall(SYS_set_mempolicy, MPOL_BIND_MODE, &mask, (unsigned long)p->numa_node + 2) != 0)
    return pts_error_set(err, PTS_INTERNAL, "Unable to set NUMA memory policy: %s",
                         strerror(errno));
  return PTS_OK;
}
