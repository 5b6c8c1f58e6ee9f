/* metrics/nvml.c — see nvml.h. NVML's C API is stable across driver
 * releases (the _v2 entry points date from CUDA 5); the few types it needs
 * are declared here so that no NVML header is needed to build. */
#include "metrics/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"

typedef int nvml_return; /* nvmlReturn_t: 0 = NVML_SUCCESS */
typedef void *nvml_device;
struct nvml_utilization {
  unsigned int gpu;    /* percent of the sample period a kernel ran */
  unsigned int memory; /* percent of it memory was read or written */
};
struct nvml_memory {
  unsigned long long total, free, used;
};

struct pts_nvml {
  void *lib;
  unsigned count;
  nvml_device devices[PTS_NVML_MAX_GPUS];
  char uuids[PTS_NVML_MAX_GPUS][96];
  /* Energy counters at open, in mJ: tritonserver reports energy since the
   * server started, NVML since the driver loaded. */
  unsigned long long energy0[PTS_NVML_MAX_GPUS];
  nvml_return (*shutdown)(void);
  nvml_return (*utilization)(nvml_device, struct nvml_utilization *);
  nvml_return (*memory)(nvml_device, struct nvml_memory *);
  nvml_return (*power)(nvml_device, unsigned int *);       /* milliwatts */
  nvml_return (*power_limit)(nvml_device, unsigned int *); /* milliwatts */
  nvml_return (*energy)(nvml_device, unsigned long long *); /* millijoules */
};

/* dlsym into a function pointer without the object-to-function cast
 * warning ISO C raises. */
static bool sym(void *lib, const char *name, void *fn) {
  void *p = dlsym(lib, name);
  if (!p) return false;
  memcpy(fn, &p, sizeof p);
  return true;
}

struct pts_nvml *pts_nvml_open(char *why, size_t why_size) {
  const char *path = getenv("PTSERVE_NVML_LIBRARY");
  if (!path || !*path) path = "libnvidia-ml.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    snprintf(why, why_size, "NVML is not available (%s)", e ? e : path);
    return NULL;
  }
  struct pts_nvml *n = pts_calloc(1, sizeof *n);
  nvml_return (*init)(void) = NULL;
  nvml_return (*count)(unsigned int *) = NULL;
  nvml_return (*handle)(unsigned int, nvml_device *) = NULL;
  nvml_return (*uuid)(nvml_device, char *, unsigned int) = NULL;
  nvml_return (*name)(nvml_device, char *, unsigned int) = NULL;
  const char *(*error_string)(nvml_return) = NULL;
  if (!n) {
    snprintf(why, why_size, "out of memory loading NVML");
    dlclose(lib);
    return NULL;
  }
  n->lib = lib;
  if (!sym(lib, "nvmlInit_v2", &init) || !sym(lib, "nvmlShutdown", &n->shutdown) ||
      !sym(lib, "nvmlDeviceGetCount_v2", &count) ||
      !sym(lib, "nvmlDeviceGetHandleByIndex_v2", &handle) ||
      !sym(lib, "nvmlDeviceGetUUID", &uuid) || !sym(lib, "nvmlDeviceGetName", &name) ||
      !sym(lib, "nvmlErrorString", &error_string)) {
    snprintf(why, why_size, "%s lacks the NVML functions ptserve needs (nvmlInit_v2 ...)", path);
    n->shutdown = NULL;
    pts_nvml_close(n);
    return NULL;
  }
  /* Optional: a board without a power sensor still has the other gauges. */
  sym(lib, "nvmlDeviceGetUtilizationRates", &n->utilization);
  sym(lib, "nvmlDeviceGetMemoryInfo", &n->memory);
  sym(lib, "nvmlDeviceGetPowerUsage", &n->power);
  sym(lib, "nvmlDeviceGetEnforcedPowerLimit", &n->power_limit);
  sym(lib, "nvmlDeviceGetTotalEnergyConsumption", &n->energy);
  nvml_return rc = init();
  if (rc != 0) {
    snprintf(why, why_size, "NVML failed to initialise (%s)", error_string(rc));
    n->shutdown = NULL;
    pts_nvml_close(n);
    return NULL;
  }
  unsigned int total = 0;
  rc = count(&total);
  for (unsigned int i = 0; rc == 0 && i < total && n->count < PTS_NVML_MAX_GPUS; i++) {
    nvml_device d;
    char label[96] = "", model[96] = "";
    if (handle(i, &d) != 0 || uuid(d, label, sizeof label) != 0) continue;
    if (name(d, model, sizeof model) != 0) snprintf(model, sizeof model, "unknown");
    n->devices[n->count] = d;
    if (n->energy && n->energy(d, &n->energy0[n->count]) != 0) n->energy0[n->count] = 0;
    snprintf(n->uuids[n->count], sizeof n->uuids[0], "%s", label);
    n->count++;
    PTS_LOG_INFO("Collecting metrics for GPU %u: %s", i, model);
  }
  if (rc != 0 || n->count == 0) {
    snprintf(why, why_size, "%s",
             rc != 0 ? error_string(rc) : "NVML found no GPU on this host");
    pts_nvml_close(n);
    return NULL;
  }
  return n;
}

size_t pts_nvml_sample(struct pts_nvml *n, struct pts_gpu_sample *out, size_t max) {
  size_t k = 0;
  for (unsigned i = 0; n && i < n->count && k < max; i++, k++) {
    struct pts_gpu_sample *s = &out[k];
    memset(s, 0, sizeof *s);
    memcpy(s->uuid, n->uuids[i], sizeof s->uuid);
    nvml_device d = n->devices[i];
    struct nvml_utilization u;
    struct nvml_memory m;
    unsigned int mw;
    unsigned long long mj;
    if (n->utilization && n->utilization(d, &u) == 0) {
      s->has_utilization = true;
      s->utilization = u.gpu / 100.0;
    }
    if (n->memory && n->memory(d, &m) == 0) {
      s->has_memory = true;
      s->memory_total_bytes = m.total;
      s->memory_used_bytes = m.used;
    }
    if (n->power && n->power(d, &mw) == 0) {
      s->has_power = true;
      s->power_watts = mw / 1000.0;
    }
    if (n->power_limit && n->power_limit(d, &mw) == 0) {
      s->has_power_limit = true;
      s->power_limit_watts = mw / 1000.0;
    }
    if (n->energy && n->energy(d, &mj) == 0) {
      s->has_energy = true;
      s->energy_joules = mj > n->energy0[i] ? (double)(mj - n->energy0[i]) / 1000.0 : 0.0;
    }
  }
  return k;
}

void pts_nvml_close(struct pts_nvml *n) {
  if (!n) return;
  if (n->shutdown) n->shutdown();
  if (n->lib) dlclose(n->lib);
  pts_free(n);
}
